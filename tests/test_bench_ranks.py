"""``syncverify bench`` on real ranks, without a GPU: the report's cuBLAS + NCCL columns, speedup
and gates on synthetic timings; the launch, gathering and watchdog path on CPU processes joined by
gloo with a scripted timer (``tests/bench_ranks_fake.py``); the command's exit codes."""

from __future__ import annotations

import csv
import io
import json
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncverify.kernels.bench.report import (
    NO_SYNC,
    PROCESSES,
    SPEEDUP_TARGET,
    BenchInputError,
    Case,
    Ceilings,
    Measurement,
    check_rows,
    check_speedup,
    check_world,
    combine_ranks,
    make_baseline,
    parse_sweep,
    report_rows,
    speedup_lines,
    to_csv,
    to_markdown,
)
from syncverify.cli import main

CEILINGS = Ceilings(machine="nvidia-h200-x2", peak_tflops=800.0, bandwidth_tbs=4.0)
TARGET = Case(kernel="all-reduce", m=8192, n=4608, k=36864, split=(120, 12))


def real_run(case: Case = TARGET, *, nccl: float = 2.13e-3, fused: dict | None = None) -> list[Measurement]:
    """Combined measurements of one case on real ranks (times in seconds)."""
    fused = fused if fused is not None else {NO_SYNC: 1.80e-3, "epoch-flag": 1.85e-3, "barrier-fenced-release-acquire": 2.0e-3}
    out = [Measurement(case, "cublas", 1.75e-3, per_rank=(1.74e-3, 1.75e-3)),
           Measurement(case, "cublas+nccl", nccl, validated="ok", per_rank=(nccl, nccl)),
           Measurement(case, "gemm-part", 1.78e-3, validated="ok")]
    out += [Measurement(case, "fused", t, protocol=name, validated="ok" if name != NO_SYNC else "not validated")
            for name, t in fused.items()]
    return out


def rows_by(rows):
    return {(r["what"], r["protocol"]): r for r in rows}


# ----- the report on synthetic timings ----------------------------------------------------------

def test_real_rank_rows_gain_the_cublas_nccl_time_and_each_fused_kernels_speedup():
    rows = rows_by(report_rows(real_run(), CEILINGS, world_size=2, ranks=PROCESSES))
    epoch = rows[("fused", "epoch-flag")]
    assert epoch["cublas_nccl_us"] == 2130.0 and epoch["speedup_vs_cublas_nccl"] == round(2.13 / 1.85, 3)
    assert rows[("fused", NO_SYNC)]["speedup_vs_cublas_nccl"] == round(2.13 / 1.80, 3)  # shown, marked unsafe
    assert rows[("cublas+nccl", "")]["speedup_vs_cublas_nccl"] is None  # only fused rows are compared
    assert rows[("gemm-part", "")]["cublas_nccl_us"] is None
    # two GPUs share the problem: efficiency is against twice the one-GPU peak
    flops = 2 * 8192 * 4608 * 36864
    assert epoch["efficiency_pct"] == round(100 * flops / 1.85e-3 / 1e12 / 1600, 1)
    assert epoch["ranks"] == PROCESSES and rows[("cublas", "")]["per_rank_us"] == "1740.00 1750.00"
    assert epoch["key"].endswith("| fused | epoch-flag | 2 processes")


def test_virtual_rows_keep_their_keys_and_have_no_nccl_figures():
    rows = rows_by(report_rows(real_run(fused={"epoch-flag": 1e-3})[:1] + real_run(fused={"epoch-flag": 1e-3})[2:],
                               CEILINGS, world_size=2))
    assert rows[("fused", "epoch-flag")]["speedup_vs_cublas_nccl"] is None
    assert rows[("fused", "epoch-flag")]["key"] == f"{TARGET.key} | fused | epoch-flag"  # shipped baselines still match
    with pytest.raises(ValueError, match="ranks='sideways'"):
        report_rows([], CEILINGS, world_size=2, ranks="sideways")


def test_a_baseline_of_virtual_ranks_does_not_gate_real_rank_rows():
    virtual = report_rows(real_run(), CEILINGS, world_size=2)
    real = report_rows(real_run(), CEILINGS, world_size=2, ranks=PROCESSES)
    gate = check_rows(real, make_baseline(virtual, machine="nvidia-h200-x2"), tolerance=0.8)
    assert gate.checked == () and len(gate.missing) == 4  # gemm-part and three fused rows, all new
    assert check_rows(real, make_baseline(real, machine="nvidia-h200-x2"), tolerance=1.0).passed


@pytest.mark.parametrize("fused, met", [(1.93e-3, True), (1.94e-3, False)])
def test_the_speedup_target_is_met_exactly_from_1_1x(fused, met):
    rows = report_rows(real_run(fused={NO_SYNC: 1.5e-3, "epoch-flag": fused}), CEILINGS, world_size=2, ranks=PROCESSES)
    lines = speedup_lines(rows)
    assert len(lines) == 1 and lines[0].startswith("all-reduce 8192x4608x36864 epoch-flag: ")  # none is not judged
    speedup = round(2.13e-3 / fused, 3)
    assert lines[0].endswith("target 1.1x met") == met == (speedup >= SPEEDUP_TARGET)
    if not met:
        assert f"missed by {100 * (1.1 - speedup) / 1.1:.1f} %" in lines[0]


def test_the_speedup_gate_names_exactly_the_synchronized_kernels_under_the_minimum():
    rows = report_rows(real_run(), CEILINGS, world_size=2, ranks=PROCESSES)
    under = check_speedup(rows, minimum=1.1)
    assert [key.split(" | ")[2] for key, _ in under] == ["barrier-fenced-release-acquire"]  # 1.065x; epoch-flag 1.151x
    assert under[0][1] == round(2.13 / 2.0, 3)
    assert check_speedup(rows, minimum=1.0) == ()
    with pytest.raises(BenchInputError, match="--min-speedup=0"):
        check_speedup(rows, minimum=0)


def test_the_markdown_and_csv_show_the_nccl_columns_only_for_real_ranks():
    real = report_rows(real_run(), CEILINGS, world_size=2, ranks=PROCESSES)
    markdown = to_markdown(real, CEILINGS, stopped="watchdog: no report from any rank for 5 s; killed")
    assert "cuBLAS+NCCL µs | speedup vs cuBLAS+NCCL |" in markdown and "| 2130.0 | 1.151x |" in markdown
    assert "## Against cuBLAS + NCCL (target: 1.1x)" in markdown and "Real ranks: 2 processes" in markdown
    assert "**Stopped early, verdict unknown**: watchdog" in markdown
    header = next(line for line in markdown.splitlines() if line.startswith("| shape"))
    rule = markdown.splitlines()[markdown.splitlines().index(header) + 1]
    assert header.count("|") == rule.count("|")  # a well-formed table
    virtual = to_markdown(report_rows(real_run()[:1] + real_run()[2:], CEILINGS, world_size=2), CEILINGS)
    assert "cuBLAS+NCCL" not in virtual and "Stopped" not in virtual
    table = {(r["what"], r["protocol"]): r for r in csv.DictReader(io.StringIO(to_csv(real)))}
    assert table[("fused", "epoch-flag")]["speedup_vs_cublas_nccl"] == "1.151"
    assert table[("fused", "epoch-flag")]["ranks"] == PROCESSES


@settings(max_examples=60, deadline=None)
@given(times=st.lists(st.lists(st.floats(1e-6, 1.0), min_size=3, max_size=3), min_size=1, max_size=8),
       failing=st.integers(-1, 7))
def test_the_combined_time_is_the_slowest_ranks_and_a_failure_names_its_rank(times, failing):
    case = Case()
    per_rank = [[Measurement(case, what, t, spread=(0.9 * t, 1.1 * t),
                             validated="bad" if rank == failing and what == "fused" else "ok")
                 for what, t in zip(("cublas", "cublas+nccl", "fused"), mine)]
                for rank, mine in enumerate(times)]
    combined = combine_ranks(per_rank)
    for slot, m in enumerate(combined):
        column = [mine[slot] for mine in times]
        assert m.seconds == max(column) and m.per_rank == tuple(column)
        assert m.spread == (min(0.9 * t for t in column), max(1.1 * t for t in column))
    if failing not in range(len(times)):
        assert combined[2].validated == "ok"
    elif len(times) == 1:
        assert combined[2].validated == "bad"
    else:
        assert combined[2].validated == f"rank {failing}: bad"


def test_ranks_that_timed_different_things_are_an_error_not_a_mixed_row():
    a, b = Measurement(Case(), "cublas", 1.0), Measurement(Case(), "cublas+nccl", 1.0)
    with pytest.raises(ValueError, match="different things"):
        combine_ranks([[a], [b]])
    with pytest.raises(ValueError, match="same things"):
        combine_ranks([[a], [a, a]])


def test_the_shipped_two_gpu_sweep_is_the_issues_target_and_builds_for_real_ranks():
    from syncverify.kernels.bench.ranks import check_cases

    sweep = parse_sweep(Path("benchmarks/sweeps/target-2gpu.toml").read_text(), path="target-2gpu.toml")
    assert sweep.world_size == 2 and sweep.protocols == (NO_SYNC, "barrier-fenced-release-acquire", "epoch-flag")
    assert {(c.kernel, c.shape) for c in sweep.cases} == {
        (k, s) for k in ("all-reduce", "all-scatter") for s in ("8192x4608x36864", "8192x4608x8192")}
    check_cases(sweep, sms=132, gpus=2)  # every configuration fits one H200 per rank


def test_more_ranks_than_gpus_is_refused_with_the_flag_that_fixes_it():
    check_world(2, 2)
    with pytest.raises(BenchInputError, match=r"--world-size=4 runs one process per GPU and 2 GPUs are visible; "
                                              r"add --virtual-ranks"):
        check_world(4, 2)


# ----- the timing pieces real ranks add, on the CPU ---------------------------------------------

def test_the_timer_syncs_before_every_replay():
    import torch

    from syncverify.kernels.bench.timing import Timer

    calls = []
    timer = Timer(torch.device("cpu"), launches=2, repeats=3, sync=lambda: calls.append("sync"))
    replays = [timer.capture(lambda: None, lambda i, n=n: calls.append(n)) for n in ("a", "b")]
    assert len(timer.interleaved(replays)) == 2
    assert calls == ["sync", "a", "a", "sync", "b", "b"] * 3  # each replay of 2 launches after its barrier


@pytest.mark.parametrize("protocol, barriers", [("barrier-fenced-release-acquire", True), ("epoch-flag", False)])
def test_a_protocol_that_resets_between_launches_zeroes_between_two_barriers_on_real_ranks(protocol, barriers):
    """A host reset on real ranks: barrier, zero, barrier (no peer signals into locks being zeroed);
    a protocol without one queues no barrier at all. The first zeroing of a replay is followed by
    a barrier either way."""
    import torch

    from syncverify.kernels.bench.report import resolve
    from syncverify.kernels.bench.timing import FusedRun, Timer
    from syncverify.kernels.build import build
    from syncverify.protocols import load_protocol

    case = resolve(Case(m=32, n=64, k=64, block=(16, 16, 16)), sms=2, world_size=2)
    built = build(load_protocol(protocol), case.kernel_config(world_size=2, interpret=True))
    events = []
    run = FusedRun(built, torch.device("cpu"), device_barrier=lambda: events.append(
        ("barrier", int(run.heap["locks"].local.abs().sum()))))
    run.launch = lambda inputs, epoch, compile_only=False: (events.append(("launch", epoch)),
                                                            run.heap["locks"].local.fill_(7))
    run.capture(Timer(torch.device("cpu"), launches=2, repeats=1), [(None, None)])()
    locks = 7 * run.heap["locks"].local.numel()
    between = [("barrier", locks), ("barrier", 0)] if barriers else []
    assert events == [("barrier", 0), ("launch", 0), *between, ("launch", 1)]


@pytest.mark.parametrize("kernel, protocol, which", [("all-reduce", None, "gemm-part"),
                                                     ("all-scatter", "epoch-flag", "fused")])
def test_the_launches_only_real_ranks_make_compile_for_sm90(kernel, protocol, which):
    """The GEMM part and the descriptor-load fused kernel with address tables and no virtual ranks
    (one program per SM of the whole GPU) are launched by real ranks only: they build here."""
    import types

    import torch

    from syncverify.kernels import gemm_all_reduce, gemm_all_scatter
    from syncverify.kernels.bench.timing import FusedRun, input_sets, rank_slice
    from syncverify.kernels.bench.ranks import real_configs
    from syncverify.kernels.build import build
    from syncverify.kernels.compile import compile_like_launch
    from syncverify.kernels.heap import VirtualHeap
    from syncverify.protocols import load_protocol
    from tests.test_kernels_compile import _launch_args

    case, part, fused = real_configs(Case(kernel=kernel, m=256, n=512, k=256), world_size=2, sms=132)
    config = part if which == "gemm-part" else fused
    assert (config.virtual, config.table, config.grid) == (False, True, 132)
    built = build(load_protocol(protocol) if protocol else None, config, sms=132, gpus=2)
    run = FusedRun(built, torch.device("cpu"), heap=VirtualHeap(2, "cpu", table=True), rank=1)
    A, B = rank_slice(input_sets(case, 2, torch.device("cpu"), generator=torch.Generator().manual_seed(0),
                                 count=1)[0], 1)
    module = gemm_all_reduce if kernel == "all-reduce" else gemm_all_scatter
    fn = module.gemm_all_reduce_kernel if kernel == "all-reduce" else module.gemm_all_scatter_kernel
    compiled = compile_like_launch(fn, *_launch_args(built, run.heap, types.SimpleNamespace(A=A, B=B), run.status),
                                   num_warps=config.num_warps, num_stages=config.num_stages,
                                   **module.meta_parameters(built))
    assert compiled.asm["cubin"]


class FakeDist:
    """The collectives :class:`CollectiveBaseline` calls, as one rank of two would see them when
    the peer's contribution is ``peer`` (or missing, when ``peer`` is None)."""

    def __init__(self, peer):
        self.peer = peer

    def all_reduce(self, tensor):
        if self.peer is not None:
            tensor += self.peer

    def all_gather_single(self, out, tensor):
        out[: tensor.shape[0]] = tensor
        if self.peer is not None:
            out[tensor.shape[0]:] = self.peer


@pytest.mark.parametrize("kernel", ["all-reduce", "all-scatter"])
def test_the_nccl_baseline_is_validated_against_every_ranks_product(kernel):
    import torch

    from syncverify.kernels.bench.timing import input_sets, rank_slice
    from syncverify.kernels.bench.ranks import CollectiveBaseline

    case = Case(kernel=kernel, m=32, n=64, k=64, dtype="bf16")
    everyone = input_sets(case, 2, torch.device("cpu"), generator=torch.Generator().manual_seed(3), count=1)[0]
    mine, peer = rank_slice(everyone, 0), rank_slice(everyone, 1)
    peer_c = torch.matmul(peer[0][0], peer[1][0])  # what rank 1 contributes
    right = CollectiveBaseline(case, world_size=2, dist=FakeDist(peer_c), device="cpu")
    assert right.validate(mine, everyone) == "ok"
    assert right.result().shape == (32, 64)
    missing = CollectiveBaseline(case, world_size=2, dist=FakeDist(torch.zeros_like(peer_c)), device="cpu")
    assert missing.validate(mine, everyone).startswith("relative error")


# ----- the launch on CPU processes (gloo), scripted timings --------------------------------------

def _sweep():
    return parse_sweep('kernels = ["all-reduce", "all-scatter"]\n[[case]]\nshape = [32, 64, 64]\n'
                       'block = [16, 16, 16]', world_size=2)


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_two_cpu_ranks_time_both_baselines_and_rank_0_reports_the_slowest(tmp_path):
    import torch

    from syncverify.kernels.bench.ranks import run_sweep_ranks
    from tests.bench_ranks_fake import ScriptedTimer, scripted_seconds

    seen = []
    outcome = run_sweep_ranks(_sweep(), backend="gloo", timer=ScriptedTimer(torch.device("cpu")),
                              watchdog_seconds=120, partial=tmp_path / "p.jsonl",
                              progress=lambda done, total, label: seen.append((done, total)))
    assert outcome.stopped is None and outcome.cases_reported == 2 and outcome.ceilings.machine == "cpu-interpreter"
    got = [(m.case.kernel, m.what, m.seconds, m.per_rank, m.validated) for m in outcome.measurements]
    cublas, nccl = (tuple(scripted_seconds(slot, r)[0] for r in range(2)) for slot in range(2))
    assert got == [(kernel, what, times[1], times, validated)
                   for kernel in ("all-reduce", "all-scatter")
                   for what, times, validated in (("cublas", cublas, ""), ("cublas+nccl", nccl, "ok"))]
    assert outcome.measurements[1].spread == (0.9 * nccl[0], 1.1 * nccl[1])
    assert seen[0] == (0, 7) and seen[-1] == (7, 7)  # 1 + 3 steps per case, then done
    records = _lines(tmp_path / "p.jsonl")
    assert [r["type"] for r in records] == ["start", "ceilings", "case", "case", "end"]
    assert records[-1]["stopped"] is None and records[-1]["exitcodes"] == [0, 0]


WATCHDOG = 20  # longer than two ranks take to import torch and join on a loaded 2-core machine


def test_the_watchdog_stops_a_hung_rank_and_the_reported_case_stays_on_disk(tmp_path):
    import torch

    from syncverify.kernels.bench.ranks import run_sweep_ranks
    from tests.bench_ranks_fake import ScriptedTimer

    started = time.monotonic()
    outcome = run_sweep_ranks(_sweep(), backend="gloo", timer=ScriptedTimer(torch.device("cpu"), hang=(1, 1)),
                              watchdog_seconds=WATCHDOG, partial=tmp_path / "p.jsonl")
    assert outcome.stopped == f"watchdog: no report from any rank for {WATCHDOG} s; killed"
    assert outcome.cases_reported == 1 and {m.case.kernel for m in outcome.measurements} == {"all-reduce"}
    assert time.monotonic() - started < 120
    records = _lines(tmp_path / "p.jsonl")
    assert [r["type"] for r in records] == ["start", "ceilings", "case", "end"]
    assert records[2]["index"] == 0 and records[-1]["stopped"] == outcome.stopped
    assert records[-1]["exitcodes"] == [-9, -9]  # both killed: rank 0 waited for rank 1 in a barrier


# ----- the command -----------------------------------------------------------------------------

def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


@pytest.fixture
def two_gpus(monkeypatch):
    """The command on a (pretended) machine with two H200s, with the launch replaced by ``fake``."""
    import syncverify.cli.bench as cli_bench
    import syncverify.kernels.bench.ranks as bench_ranks

    monkeypatch.setattr(cli_bench, "_gpus", lambda: (2, "NVIDIA H200", 132))
    state = {}

    def fake(sweep, **options):
        state["options"] = options
        case = replace(sweep.cases[0], split=(120, 12))
        measured = real_run(case)
        bench_ranks.PartialRecord(options["partial"]).write({"type": "start"})  # as the real one does first
        return bench_ranks.RanksOutcome(None if state.get("no ceilings") else CEILINGS,
                                        measured if not state.get("stop") else [], cases_total=1,
                                        cases_reported=0 if state.get("stop") else 1,
                                        stopped=state.get("stop"), partial=options["partial"])

    monkeypatch.setattr(cli_bench, "run_sweep_ranks", fake)  # the command's name for it
    return state


def test_more_ranks_than_gpus_is_exit_2_in_one_line(monkeypatch, capsys):
    import syncverify.cli.bench as cli_bench

    monkeypatch.setattr(cli_bench, "_gpus", lambda: (1, "NVIDIA H200", 132))
    assert main(["bench", "--world-size", "2"]) == 2
    assert "--world-size=2 runs one process per GPU and 1 GPU is visible; add --virtual-ranks" in _one_error_line(capsys)


def test_the_command_reports_real_ranks_and_gates_the_speedup(two_gpus, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["bench", "--world-size", "2", "--k", "36864", "--json", "--out", str(out), "--watchdog", "60"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["ranks"] == PROCESSES and not document["virtual_ranks"] and document["unavailable"] == []
    assert two_gpus["options"]["watchdog_seconds"] == 60 and two_gpus["options"]["partial"] == out / "bench-partial.jsonl"
    epoch = rows_by(document["rows"])[("fused", "epoch-flag")]
    assert epoch["speedup_vs_cublas_nccl"] == 1.151 and epoch["key"].endswith("2 processes")
    assert "bench-partial.jsonl" in {p.name for p in out.iterdir()}
    # the issue's target as a gate: barrier-fenced is 1.065x cuBLAS + NCCL here
    assert main(["bench", "--world-size", "2", "--k", "36864", "--min-speedup", "1.1"]) == 1
    printed = capsys.readouterr().out
    assert "TOO SLOW" in printed and "barrier-fenced-release-acquire" in printed.split("TOO SLOW")[1]
    assert main(["bench", "--world-size", "2", "--k", "36864", "--min-speedup", "1.05"]) == 0


def test_a_stopped_real_rank_run_is_unknown_and_names_its_partial_results(two_gpus, tmp_path, capsys):
    two_gpus["stop"] = "watchdog: no report from any rank for 60 s; killed"
    assert main(["bench", "--world-size", "2", "--out", str(tmp_path / "o")]) == 3
    captured = capsys.readouterr()
    assert "bench stopped, verdict unknown: watchdog" in captured.err and "bench-partial.jsonl" in captured.err
    assert "(0 of 1 cases reported)" in captured.err and "**Stopped early, verdict unknown**" in captured.out
    two_gpus["no ceilings"] = True  # stopped before any rank measured anything
    assert main(["bench", "--world-size", "2", "--json"]) == 3
    document = json.loads(capsys.readouterr().out)
    assert document["rows"] == [] and document["stopped"].startswith("watchdog")
    assert document["partial"].endswith(".jsonl") and Path(document["partial"]).exists()  # a temporary file
    Path(document["partial"]).unlink()


@pytest.mark.parametrize("argv, says", [
    (["--virtual-ranks", "--min-speedup", "1.1"], "--min-speedup compares with cuBLAS + NCCL, which runs on real ranks only"),
    (["--min-speedup", "-1"], "--min-speedup=-1.0 must be positive"),
    (["--watchdog", "0"], "--watchdog=0.0 must be positive"),
])
def test_bad_real_rank_options_are_one_line(argv, says, capsys):
    assert main(["bench", "--world-size", "2", *argv]) == 2
    assert says in _one_error_line(capsys)
