"""The all-gather-gemm and gemm-reduce-scatter kernels through Triton's CPU interpreter (CI's path).

A safe protocol leaves every tile of C right (checked against a torch reference of the whole
launch); unsafe protocols and interpreter schedules give the classified failures a sequential
schedule makes certain (``tests/test_stress_interpreter.py`` says what the interpreter can
show); sizes that do not divide are refused in one line with exit code 2.
"""

from __future__ import annotations

import math

import pytest

pytest.importorskip("triton", reason="the kernels run in Triton's interpreter (pip install triton numpy)")

from typer.testing import CliRunner  # noqa: E402

from syncverify.stress.campaign import run_campaign  # noqa: E402

NEW = ("all-gather-gemm", "gemm-reduce-scatter")


def campaign(**options):
    return run_campaign(interpret=True, **options)


def bad(result) -> dict:
    return {kind: n for kind, n in result.counts.items() if n}


@pytest.mark.parametrize("kernel", NEW)
@pytest.mark.parametrize("protocol, world_size", [("barrier-fenced-release-acquire", 2), ("epoch-flag", 3)])
def test_a_safe_protocol_leaves_every_tile_right(kernel, protocol, world_size):
    result = campaign(kernel=kernel, protocol=protocol, world_size=world_size, iterations=2)
    assert result.clean, result.first_failure
    assert result.iterations == 2


@pytest.mark.parametrize("protocol", ["epoch-flag", "done-flag"])
@pytest.mark.parametrize("kernel", NEW)
def test_one_launch_equals_the_torch_reference(kernel, protocol):
    """Independent of the validation kernel: run one launch by hand and compare C with torch
    (two column tiles; done-flag's back-signal makes all-gather-gemm keep the first column
    tile's C in ``parked`` until after it)."""
    import torch

    from syncverify.kernels.build import build
    from syncverify.kernels.config import KernelConfig
    from syncverify.kernels.heap import VirtualHeap
    from syncverify.kernels.registry import allocate, launch_function
    from syncverify.protocols import load_protocol
    from syncverify.protocols.rules import ownership_table

    W = 2
    c = KernelConfig(kernel=kernel, world_size=W, m=64, n=32, k=32, block_m=16, block_n=16, block_k=16,
                     gemm_sms=2, comm_sms=1, dtype="fp32", num_warps=1, interpret=True)
    built = build(load_protocol(protocol), c)
    heap = VirtualHeap(W, "cpu")
    allocate(built, heap, torch.float32, torch.int32)
    heap["out"].local.fill_(math.nan)
    g = torch.Generator().manual_seed(5)
    A = torch.randint(-2, 3, (W, c.m_per_rank, c.k_per_rank), generator=g).float()
    B = torch.randint(-2, 3, (W, c.k_per_rank, c.n), generator=g).float()
    status = torch.zeros(W, 2 * c.tiles, 4, dtype=torch.int32)
    launch_function(kernel)(built, heap, A, B, status)
    assert not status[..., 0].any()
    out = heap["out"].local
    if kernel == "all-gather-gemm":  # every rank: the gathered A times its own B
        for r in range(W):
            assert torch.equal(out[r], torch.cat(list(A)) @ B[r])
    else:  # each rank holds the sum of the partials for the tiles it owns, nothing elsewhere
        C = sum(A[r] @ B[r] for r in range(W))
        owner = ownership_table(c.tiles, W, c.distribution)[:c.tiles]
        tiles_n = c.n // c.block_n
        for t, r in enumerate(owner):
            rows = slice((t // tiles_n) * 16, (t // tiles_n + 1) * 16)
            cols = slice((t % tiles_n) * 16, (t % tiles_n + 1) * 16)
            assert torch.equal(out[r][rows, cols], C[rows, cols])
            assert out[1 - r][rows, cols].isnan().all()


@pytest.mark.parametrize("kernel, tiles", [("all-gather-gemm", 16), ("gemm-reduce-scatter", 8)])
def test_a_producer_that_skips_its_own_rank_is_a_hang_with_the_count_it_saw(kernel, tiles):
    # add-counter-skip-self never adds to the signalling rank's own counter: it stops at W - 1.
    result = campaign(kernel=kernel, protocol="add-counter-skip-self", iterations=1)
    assert bad(result) == {"hang": tiles}
    assert {t["hang"]["seen"] for t in result.failures} == {1}


def test_a_gemm_that_waits_for_its_own_flag_only_reads_a_shard_never_sent():
    """xchg-flag (the model: UNSAFE in all-gather-gemm) polls only its own rank's flag, which its
    own sender sets: with the last rank's senders late, ranks 0 and 1 compute with shard 2's rows
    never written (zero workspace: ``unwritten``), and rank 2's GEMM times out."""
    result = campaign(kernel="all-gather-gemm", protocol="xchg-flag", world_size=3, order="last-rank-late",
                      iterations=1)
    assert bad(result) == {"unwritten": 8, "hang": 12}
    shards = {(t["rank"], t["first_bad"]["row"] // 32) for t in result.failures if t["kind"] == "unwritten"}
    assert shards == {(0, 2), (1, 2)}


def test_an_overwritten_signal_is_a_missing_rank_in_the_reduce_scatter():
    """xchg-flag's remote signal is an exchange to 1: the owner cannot count arrivals, so with the
    last rank's producers late it passes after one peer and sums without the late rank."""
    result = campaign(kernel="gemm-reduce-scatter", protocol="xchg-flag", world_size=3, order="last-rank-late",
                      iterations=1)
    assert result.counts["missing-ranks"] == 3
    assert {tuple(t["missing_ranks"]) for t in result.failures if t["kind"] == "missing-ranks"} == {(2,)}


@pytest.mark.parametrize("kernel, kinds", [("all-gather-gemm", {"corrupt", "hang"}),
                                           ("gemm-reduce-scatter", {"stale", "hang"})])
def test_a_lock_left_set_from_the_last_call_lets_the_consumer_read_early(kernel, kinds):
    """No reset and consumers scheduled first: call 0's consumers time out, call 1's pass on call
    0's flags and read call 0's data: the reduce-scatter's sum is call 0's C (``stale``); the
    all-gather's GEMM multiplies call 0's A by call 1's B (``corrupt``)."""
    result = campaign(kernel=kernel, protocol="xchg-flag", reset="none", order="consumers-first", iterations=2,
                      poison="outputs")
    assert set(bad(result)) == kinds
    assert {t["kind"] for t in result.failures if t["iteration"] == 1} == kinds - {"hang"}


@pytest.mark.parametrize("kernel", NEW)
def test_consumers_scheduled_before_every_producer_hang_with_a_safe_protocol(kernel):
    result = campaign(kernel=kernel, protocol="epoch-flag", order="consumers-first", iterations=1)
    assert set(bad(result)) == {"hang"} and not result.clean


@pytest.mark.parametrize("args, message", [
    (["--kernel", "all-gather-gemm", "--world-size", "3", "--m", "32"],
     "--m=32 does not divide into --world-size=3 row shards of A"),
    (["--kernel", "all-gather-gemm", "--world-size", "2", "--m", "48"],
     "each rank's shard of A (48 / 2 = 24 rows) is not a multiple of --block-m=16"),
    (["--kernel", "gemm-reduce-scatter", "--world-size", "3", "--k", "32"],
     "--k=32 does not divide into --world-size=3 slices"),
    (["--kernel", "gemm-reduce-scatter", "--production", "owner-only"],
     "--production applies to --kernel all-reduce only"),
])
def test_sizes_that_do_not_divide_exit_2_with_one_line(args, message):
    import typer

    from syncverify.cli.stress import stress_command

    app = typer.Typer()
    app.command("stress")(stress_command)
    app.callback()(lambda: None)
    result = CliRunner().invoke(app, ["stress", "--protocol", "epoch-flag", "--interpret", *args])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], lines


def test_a_consumed_signal_pad_leaves_the_other_ranks_gemm_waiting():
    """pytorch-signal-pad in all-gather-gemm: rank 0's GEMM runs first and CASes both senders'
    pads back to 0; rank 1's GEMM then finds no signal and times out (the model: ``hang``)."""
    result = campaign(kernel="all-gather-gemm", protocol="pytorch-signal-pad", iterations=1)
    assert bad(result) == {"hang": 8}
    assert {t["rank"] for t in result.failures} == {1}
    assert {t["hang"]["seen"] for t in result.failures} == {0}
