"""The stress pieces one at a time: exact inputs, the delay hash on host and device, the
classifier's decoding, and the multi-process launcher's port and watchdog."""

from __future__ import annotations

import time

import pytest
import torch
import triton.language as tl

from syncverify.kernels._jit import jit
from syncverify.kernels.config import KernelConfig
from syncverify.kernels.delays import delay_hash as device_hash
from syncverify.kernels.delays import delay_ns as device_delay_ns
from syncverify.stress.classify import bad_tiles
from syncverify.stress.delays import SITES, DelayConfig, GuidedDelay, delay_hash, delay_table, delays_at, parse_sites
from syncverify.stress.inputs import expected_output, make_inputs
from syncverify.kernels.processes import MULTICAST_OFF, free_port, run_workers, scripted_worker
from syncverify.stress.campaign import run_processes
from syncverify.stress.validate import CLASSES, FIELDS, NFIELDS


@pytest.mark.parametrize("kernel", ["all-reduce", "all-scatter", "all-gather-gemm", "gemm-reduce-scatter"])
@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
def test_inputs_multiply_exactly_to_the_expected_output(kernel, dtype):
    c = KernelConfig(kernel=kernel, world_size=4, m=64, n=128, k=256, dtype=dtype)
    g = torch.Generator().manual_seed(3)
    s = make_inputs(c, parity=1, generator=g, device="cpu")
    if kernel in ("all-reduce", "gemm-reduce-scatter"):
        got = sum(s.A[r].double() @ s.B[r].double() for r in range(4))
    elif kernel == "all-gather-gemm":  # every rank's C: the gathered A times its B
        got = torch.cat([s.A[r].double() for r in range(4)]) @ s.B[0].double()
    else:
        got = torch.cat([s.A[r].double() @ s.B[r].double() for r in range(4)], dim=1)
    assert torch.equal(got, expected_output(c, s).double())
    assert (s.A != 0).float().mean() > 0.9  # dense, not mostly zeros


def test_consecutive_input_sets_differ_in_every_element():
    c = KernelConfig(world_size=2, m=32, n=32, k=64)
    g = torch.Generator().manual_seed(0)
    even, odd = (make_inputs(c, parity=p, generator=g, device="cpu") for p in (0, 1))
    assert not (expected_output(c, even) == expected_output(c, odd)).any()


def test_each_ranks_partial_is_its_power_of_two():
    c = KernelConfig(world_size=3, m=32, n=32, k=96)
    s = make_inputs(c, parity=0, generator=torch.Generator().manual_seed(1), device="cpu")
    U = expected_output(c, s) / 7
    for r in range(3):
        assert torch.equal(s.A[r].double() @ s.B[r].double(), (U * 2**r).double())


@jit
def _hashes(out, seed, SITE: tl.constexpr):
    t = tl.program_id(0)
    tl.store(out + t, device_hash(seed, SITE, t % 3, t, t // 3 + 5).to(tl.int64))


def test_the_host_delay_hash_is_the_kernels():
    out = torch.zeros(12, dtype=torch.int64)
    _hashes.launcher((12,), interpret=True)(out, 1234, SITE=SITES["wait-read"])
    assert out.tolist() == [delay_hash(1234, SITES["wait-read"], t % 3, t, t // 3 + 5) for t in range(12)]


def test_delays_are_seeded_and_reproducible():
    d = DelayConfig("random", seed=7, pct=50, max_ns=1000)
    first = delays_at(d, rank=1, tile=2, iteration=3, num_warps=8)
    assert first == delays_at(d, rank=1, tile=2, iteration=3, num_warps=8)
    assert set(first) == {"before-store", "store-signal", "before-wait", "wait-read"}
    assert all(0 <= v["ns"] < 1000 for v in first.values())
    drawn = [d.ns("before-store", 0, t, 0) for t in range(400)]
    assert 0.35 < sum(1 for x in drawn if x) / 400 < 0.65
    assert DelayConfig("none").ns("before-store", 0, 0, 0) == 0


@jit
def _delays(out, seed, pct, max_ns, sites, table, SITE: tl.constexpr):
    t = tl.program_id(0)
    tl.store(out + t, device_delay_ns(seed, SITE, t % 3, t, t // 3 + 5, pct, max_ns, sites, table))


@pytest.mark.parametrize("sites", ["all", "before-store,wait-read", "store-signal"])
def test_the_kernels_draw_the_hosts_delays_at_the_chosen_sites_only(sites):
    d = DelayConfig("random", seed=99, pct=60, max_ns=5000, sites=parse_sites(sites))
    for site in ("before-store", "wait-read"):
        out = torch.zeros(40, dtype=torch.int32)
        _delays.launcher((40,), interpret=True)(out, d.seed, d.pct, d.max_ns, d.site_mask, delay_table(d, "cpu"), SITE=SITES[site])
        expected = [d.ns(site, t % 3, t, t // 3 + 5) for t in range(40)]
        assert out.tolist() == expected
        assert any(expected) == (site in d.sites)


def test_delay_sites_parse_and_mask():
    assert parse_sites("all") == tuple(SITES) and parse_sites("") == tuple(SITES)
    assert parse_sites("wait-read, before-store") == ("before-store", "wait-read")  # SITES order
    assert DelayConfig(sites=("before-store", "before-reset")).site_mask == (1 << 1) | (1 << 5)
    with pytest.raises(ValueError, match="unknown delay site.*before-sotre"):
        parse_sites("before-store,before-sotre")
    only_reset = DelayConfig("random", seed=1, pct=100, max_ns=100, sites=("before-reset",))
    assert only_reset.ns("before-store", 0, 0, 0) == 0
    assert any(only_reset.ns("before-reset", 0, 0, i) for i in range(5))
    assert all(v["ns"] == 0 for v in delays_at(only_reset, rank=0, tile=0, iteration=1, num_warps=8).values())


def _row(**fields):
    row = [0] * NFIELDS
    for name, value in fields.items():
        row[FIELDS.index(name)] = value
    return row


def test_summary_rows_become_bad_tiles_with_their_reason():
    import struct

    bits = lambda x: struct.unpack("<i", struct.pack("<f", x))[0]  # noqa: E731
    ok = _row()
    missing = _row(**{"class": CLASSES.index("missing-ranks"), "n_missing": 5, "n_bad": 5,
                      "missing_mask": 0b100, "first_bad": 2 * 64 + 3, "got_bits": bits(3.0),
                      "expected_bits": bits(7.0)})
    hang = _row(**{"class": CLASSES.index("hang"), "hang": 1, "hang_value": 1, "hang_step": 1,
                   "hang_polls": 8, "first_bad": -1, "consumer_rank": 1, "consumer_tile": 3})
    tiles = bad_tiles([[ok, missing], [hang, ok]], iteration=4, n_cols=64, num_world=3)
    assert [(t.rank, t.tile, t.kind) for t in tiles] == [(0, 1, "missing-ranks"), (1, 0, "hang")]
    assert tiles[0].missing_ranks == (2,)
    assert tiles[0].first_bad == {"row": 2, "col": 3, "expected": 7.0, "got": 3.0}
    assert tiles[1].hang == {"seen": 1, "step": 1, "polls": 8} and tiles[1].consumer == 1
    assert "rank(s) [2] missing" in tiles[0].describe()


def test_free_port_is_bindable():
    import socket

    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_the_watchdog_kills_a_stuck_worker_and_says_so():
    started = time.monotonic()
    outcome = run_workers(scripted_worker, (("nap:0", "nap:60"),), world_size=2, watchdog_seconds=3.0)
    assert outcome["stopped"].startswith("watchdog: no report from any rank for 3 s")
    assert time.monotonic() - started < 30
    assert outcome["exitcodes"][0] == 0 and outcome["exitcodes"][1] == -9  # killed


def test_workers_that_finish_are_collected_with_multicast_off(monkeypatch):
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")  # a caller's setting must not reach the workers
    outcome = run_workers(scripted_worker, (("nap:0", "nap:0"),), world_size=2, watchdog_seconds=30.0)
    assert outcome["stopped"] is None and outcome["exitcodes"] == [0, 0]
    assert {(r, k) for r, k, _ in outcome["messages"]} == {(0, "progress"), (1, "progress"), (0, "done"), (1, "done")}
    ports = {p[0] for r, k, p in outcome["messages"] if k == "progress"}
    assert len(ports) == 1  # every rank joins the same (free) port
    assert all(p[1] == MULTICAST_OFF for r, k, p in outcome["messages"] if k == "progress")


def test_a_failing_worker_stops_the_run_and_the_others_are_killed():
    started = time.monotonic()
    outcome = run_workers(scripted_worker, (("nap:60", "raise"),), world_size=2, watchdog_seconds=60.0)
    assert outcome["stopped"] == "rank 1 failed: RuntimeError: scripted failure"
    assert time.monotonic() - started < 30 and outcome["exitcodes"][0] == -9


def test_a_worker_that_dies_without_reporting_is_named():
    outcome = run_workers(scripted_worker, (("nap:60", "exit:3"),), world_size=2, watchdog_seconds=60.0)
    assert outcome["stopped"] == "rank 1 exited with code 3 before reporting"


def test_a_stopped_multi_process_run_is_reported_not_clean(monkeypatch):
    import syncverify.stress.campaign
    from syncverify.protocols import load_protocol
    from syncverify.stress.campaign import campaign_options

    payload = {"protocol": "epoch-flag", "kernel": "all-reduce", "world_size": 2, "mode": "processes",
               "device": "H200", "iterations": 128, "bad_iterations": 0, "clean": True}
    fake = {"messages": [(0, "result", (0, payload))], "exitcodes": [0, -9],
            "stopped": "watchdog: no report from any rank for 5 s; killed"}
    monkeypatch.setattr(syncverify.stress.campaign, "run_ranks", lambda *a, **k: fake)
    o = campaign_options(protocol="epoch-flag", world_size=2, watchdog_seconds=5)
    result = run_processes(o, load_protocol("epoch-flag"))
    assert result.iterations == 128 and result.stopped == fake["stopped"] and not result.clean
    fake["messages"] = []  # no result at all: an empty, stopped result
    result = run_processes(o, load_protocol("epoch-flag"))
    assert result.iterations == 0 and result.stopped and not result.clean


def test_a_batch_launch_keeps_what_reported_and_marks_the_rest_stopped(monkeypatch):
    import syncverify.stress.campaign
    from syncverify.protocols import load_protocol
    from syncverify.stress.campaign import campaign_options
    from syncverify.stress.campaign import run_processes_batch

    payload = {"protocol": "epoch-flag", "kernel": "all-reduce", "world_size": 2, "mode": "processes",
               "device": "H200", "iterations": 64, "bad_iterations": 0, "clean": True}
    fake = {"messages": [(0, "result", (0, payload))], "exitcodes": [-9, -9],
            "stopped": "watchdog: no report from any rank for 5 s; killed"}
    monkeypatch.setattr(syncverify.stress.campaign, "run_ranks", lambda *a, **k: fake)
    o = campaign_options(protocol="epoch-flag", world_size=2, watchdog_seconds=5)
    first, second = run_processes_batch([(o, load_protocol("epoch-flag")), (o, load_protocol("xchg-flag"))])
    assert first.iterations == 64 and first.stopped == fake["stopped"]
    assert second.protocol == "xchg-flag" and second.iterations == 0 and second.stopped and not second.clean
    with pytest.raises(ValueError, match="one world size"):
        run_processes_batch([(o, load_protocol("epoch-flag")),
                             (campaign_options(protocol="epoch-flag", world_size=4), load_protocol("epoch-flag"))])


def test_real_ranks_wait_longer_than_virtual_ones():
    """One process per GPU: a peer's launch can lag by milliseconds (RESULTS.md, nvidia-h200-x2)."""
    from syncverify.stress.campaign import campaign_options

    assert campaign_options(protocol="epoch-flag", world_size=2, virtual_ranks=True).max_polls == 1 << 16
    assert campaign_options(protocol="epoch-flag", world_size=2).max_polls == 1 << 22
    assert campaign_options(protocol="epoch-flag", world_size=2, max_polls=99).max_polls == 99


@jit
def _guided(out, masks, seed, sites, table, SITE: tl.constexpr):
    from syncverify.kernels.delays import delay_warp_mask as device_warp_mask

    t = tl.program_id(0)
    tl.store(out + t, device_delay_ns(seed, SITE, t % 3, t, t // 3 + 5, -1, 1, sites, table))
    tl.store(masks + t, device_warp_mask(seed, SITE, t % 3, t, t // 3 + 5, 8, -1, table))


def test_the_kernels_read_a_guided_table_as_the_host_does():
    # rank 1 sleeps 3000-3100 ns on warps 1..7 at before-store, every key; rank 2 half the keys
    d = DelayConfig("guided", seed=5, table=(GuidedDelay("before-store", 1, 3000, 3100, 0b11111110, 100),
                                             GuidedDelay("before-store", 2, 500, 500, 0, 50)))
    out = torch.zeros(60, dtype=torch.int32)
    masks = torch.zeros(60, dtype=torch.int32)
    _guided.launcher((60,), interpret=True)(out, masks, d.seed, d.site_mask, delay_table(d, "cpu"),
                                           SITE=SITES["before-store"])
    expected = [d.ns("before-store", t % 3, t, t // 3 + 5) for t in range(60)]
    assert out.tolist() == expected
    assert all(3000 <= expected[t] <= 3100 for t in range(1, 60, 3))  # rank 1: every key
    assert {expected[t] for t in range(0, 60, 3)} == {0}  # rank 0: not in the table
    assert {expected[t] for t in range(2, 60, 3)} == {0, 500}  # rank 2: half the keys, exactly 500
    assert [masks[t].item() for t in range(1, 60, 3)] == [0b11111110] * 20
    assert [masks[t].item() for t in range(1, 60, 3)] == [d.warp_mask("before-store", 1, t, t // 3 + 5, 8)
                                                           for t in range(1, 60, 3)]
