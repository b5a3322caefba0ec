"""Timestamps in the fused kernels (``KernelConfig.stamps``) and their timeline
(``syncverify.kernels.bench.profile``): what ``benchmarks/profile_tail.py`` reads on the GPU."""

from __future__ import annotations

from dataclasses import replace

import pytest

from syncverify.kernels.bench.profile import iterations_needed, records, roles, timeline
from syncverify.kernels.config import KernelConfig, check_config
from syncverify.kernels.delays import stamp_row
from syncverify.kernels.errors import StressConfigError


def _rows(config, programs: dict) -> list[list[int]]:
    """Stamp rows from ``{pid: (start, end, [(tile, t1, t2, t3), ...])}``."""
    rows = [[0] * stamp_row(config.stamps) for _ in range(config.grid)]
    for pid, (start, end, its) in programs.items():
        rows[pid][0], rows[pid][1] = start, end
        for k, it in enumerate(its):
            rows[pid][2 + 4 * k: 6 + 4 * k] = list(it)
    return rows


def test_the_timeline_of_known_stamps():
    # all-reduce, W = 2, one producer and one consumer per rank, 4 tiles: rank 0 owns 0 and 2
    c = KernelConfig(m=32, n=32, k=64, block_m=16, block_n=16, block_k=16, gemm_sms=1, comm_sms=1)
    c = replace(c, stamps=iterations_needed(c))
    assert c.stamps == 4 and [r[:3] for r in roles(c)] == [("producer", 0, 2), ("consumer", 2, 2)]
    rows = _rows(c, {
        0: (10000, 14000, [(t, 10000 + 1000 * t, 10800 + 1000 * t, 10900 + 1000 * t) for t in range(4)]),
        1: (10000, 14100, [(t, 10050 + 1000 * t, 10850 + 1000 * t, 10950 + 1000 * t) for t in range(4)]),
        2: (10000, 13500, [(0, 10100, 11000, 11500), (2, 11500, 13000, 13500)]),
        # tile 3 is ready at 13950 but its consumer starts waiting at 14200: 250 ns behind
        3: (10000, 15100, [(1, 10100, 12000, 12500), (3, 14200, 14300, 15000)]),
    })
    programs, its = records(c, rows)
    assert len(programs) == 4 and len(its) == 12
    t = timeline(c, rows)
    assert t["span"] == 5.1 and t["tail"] == 1.0
    assert t["roles"]["producer"] == dict(first_start=0.0, last_start=0.0, median_end=4.05, last_end=4.1, wait=3.2,
                                          work=0.4, iterations=8)
    assert t["consumer"] == dict(backlog=0.0, wake=0.05, work=0.5, behind=1, critical=dict(
        tile=3, pid=3, ready=3.95, wait_start=4.2, flag=4.3, done=5.0, backlog=0.25, wake=0.1, work=0.7,
        after_source_end=1))


def test_stamps_of_another_program_layout_are_refused_not_misread():
    with pytest.raises(StressConfigError, match="consumers-first"):
        roles(KernelConfig(order="consumers-first"))


def test_stamps_must_not_be_negative():
    with pytest.raises(StressConfigError, match="stamps=-1"):
        check_config(KernelConfig(stamps=-1))


@pytest.mark.parametrize("kernel, split", [("all-reduce", (2, 1)), ("gemm-reduce-scatter", (2, 1)),
                                           ("all-scatter", (2, 1, 1)), ("all-gather-gemm", (2, 1))])
def test_a_stamped_launch_records_every_program_and_every_tile(kernel, split):
    """In the interpreter (no clock: every written slot reads 1) a stamped launch still computes
    the product, and every program wrote its start and end and one iteration per tile (unit) its
    role visits: producers and senders every tile of every rank, consumers each owned tile once."""
    torch = pytest.importorskip("torch")
    from syncverify.kernels.bench.report import Case
    from syncverify.kernels.bench.timing import FusedRun, input_sets
    from syncverify.kernels.build import build
    from syncverify.protocols import load_protocol

    # all-gather-gemm: K deep enough for two copy chunks per sender tile (its copy loop is a loop
    # inside the tile loop: a stamp indexed by the wrong loop lands in another iteration's slots)
    case = Case(kernel=kernel, m=64, n=64, k=256 if kernel == "all-gather-gemm" else 64, block=(16, 16, 16),
                split=split)
    config = case.kernel_config(world_size=2, interpret=True)
    config = replace(config, stamps=iterations_needed(config))
    run = FusedRun(build(load_protocol("epoch-flag"), config), torch.device("cpu"))
    run.stamp_rows = torch.zeros((1, config.grid, stamp_row(config.stamps)), dtype=torch.int64)
    inputs = input_sets(case, 2, torch.device("cpu"), generator=torch.Generator().manual_seed(3), count=1)[0]
    assert run.validate(inputs) == "ok"
    rows = run.stamp_rows[0].tolist()
    programs, its = records(config, rows)
    assert all(p["start"] == 1 and p["end"] == 1 for p in programs)
    tiles = config.tiles
    per_role = {role: sorted(it["tile"] for it in its if it["role"] == role) for role, *_ in roles(config)}
    if kernel == "all-gather-gemm":  # a GEMM program's unit is (tile, column tile): each tile N / BLOCK_N times
        assert per_role == {"sender": sorted(list(range(tiles)) * 2),
                            "gemm": sorted(list(range(tiles)) * (2 * config.n // config.block_n))}
    elif kernel == "all-scatter":  # comm programs relay their own rank's tiles, receivers read every rank's
        assert per_role == {role: sorted(list(range(tiles)) * 2) for role in ("producer", "comm", "receiver")}
    else:
        assert per_role == {"producer": sorted(list(range(tiles)) * 2), "consumer": list(range(tiles))}
    assert {it["t1"] for it in its} == {1}  # every written time slot: the interpreter's 1
    for row in rows:  # an iteration's three times are written together, or none of them
        assert all(len(set(row[3 + 4 * k: 6 + 4 * k])) == 1 for k in range(config.stamps)), row


def test_a_launch_without_stamps_passes_no_stamps_buffer():
    """The shipped launches: ``stamps`` left at the kernel's default (None), ``STAMPS`` 0, so the
    compiled kernel is the one without timestamps (the PTX audit's)."""
    torch = pytest.importorskip("torch")
    from syncverify.kernels.build import build
    from syncverify.kernels.heap import VirtualHeap
    from syncverify.kernels.launch import launch_arguments
    from syncverify.kernels.registry import allocate, kernel_function
    from syncverify.protocols import load_protocol

    for stamps in (0, 2):
        c = KernelConfig(kernel="gemm-reduce-scatter", m=64, n=64, k=64, block_m=16, block_n=16, block_k=16,
                         gemm_sms=2, comm_sms=1, stamps=stamps)
        built = build(load_protocol("epoch-flag"), c)
        heap = VirtualHeap(2, "cpu")
        allocate(built, heap, torch.bfloat16, torch.int32)
        module, fn = kernel_function(c.kernel)
        A, B = torch.zeros(2, 64, 32, dtype=torch.bfloat16), torch.zeros(2, 32, 64, dtype=torch.bfloat16)
        buffer = torch.zeros(c.grid, stamp_row(stamps), dtype=torch.int64) if stamps else None
        args, kwargs = launch_arguments(fn, module.meta_parameters, built, heap, A, B, None, stamps=buffer)
        assert kwargs["STAMPS"] == stamps and ("stamps" in kwargs) == bool(stamps)
        assert buffer is None or not any(a is buffer for a in args)  # a keyword, never positional
