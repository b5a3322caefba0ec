"""``syncverify bench`` without a GPU: sweep files, the report's figures and the gate on synthetic
timings (``syncverify.kernels.bench.report``), the command's exit codes, and the interpreter path of the fast
kernels (tensor-descriptor loads, the grouped tile order, the no-synchronization build)."""

from __future__ import annotations

import csv
import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncverify.kernels.bench.report import (
    NO_SYNC,
    UNSAFE_NOTE,
    BenchInputError,
    Case,
    Ceilings,
    Measurement,
    check_machine,
    check_rows,
    default_split,
    draw_roofline,
    load_baseline,
    make_baseline,
    parse_sweep,
    report_rows,
    to_csv,
    to_markdown,
)
from syncverify.cli import main

CEILINGS = Ceilings(machine="nvidia-h200", peak_tflops=800.0, bandwidth_tbs=4.0)
CASE = Case(kernel="all-reduce", m=8192, n=4608, k=8192, split=(60, 6))


def synthetic(case: Case = CASE, *, none: float = 1.0e-3, protocols=None, cublas: float = 0.9e-3,
              part: float = 0.95e-3) -> list[Measurement]:
    protocols = protocols or {"epoch-flag": 1.02e-3}
    out = [Measurement(case, "cublas", cublas), Measurement(case, "gemm-part", part, validated="ok"),
           Measurement(case, "fused", none, protocol=NO_SYNC, validated="not validated")]
    out += [Measurement(case, "fused", t, protocol=name, validated="ok") for name, t in protocols.items()]
    return out


# ----- sweep files -----------------------------------------------------------------------------

def test_a_sweep_case_is_the_product_of_its_lists_with_the_defaults_underneath():
    sweep = parse_sweep("""
        protocols = ["epoch-flag"]
        [defaults]
        block = [128, 128, 64]
        warps = 4
        [[case]]
        shape = [[1024, 1024, 1024], [2048, 1024, 1024]]
        stages = [3, 4]
        [[case]]
        shape = [4096, 4096, 4096]
        kernel = "all-scatter"
        split = [[50, 4, 4], [40, 8, 8]]
        dtype = "fp16"
    """, path="s.toml", kernels=("all-reduce",))
    assert sweep.protocols == (NO_SYNC, "epoch-flag")  # none first, always
    assert [(c.kernel, c.m, c.stages, c.block, c.warps) for c in sweep.cases[:4]] == [
        ("all-reduce", 1024, 3, (128, 128, 64), 4), ("all-reduce", 1024, 4, (128, 128, 64), 4),
        ("all-reduce", 2048, 3, (128, 128, 64), 4), ("all-reduce", 2048, 4, (128, 128, 64), 4)]
    assert [(c.kernel, c.split, c.dtype) for c in sweep.cases[4:]] == [
        ("all-scatter", (50, 4, 4), "fp16"), ("all-scatter", (40, 8, 8), "fp16")]


@pytest.mark.parametrize("text, says", [
    ("colour = 1\n[[case]]\nshape = [1, 1, 1]", "unknown key 'colour'"),
    ("[[case]]\nshape = [1, 1, 1]\nstage = 3", "[[case]] 1: unknown key 'stage' (did you mean 'stages'?)"),
    ("[defaults]\nblok = [1, 1, 1]\n[[case]]\nshape = [1, 1, 1]", "[defaults]: unknown key 'blok'"),
    ("[[case]]\nshape = [1, 1]", "shape=[1, 1] must be [M, N, K]"),
    ("[[case]]\nshape = [64, 64, 64]\nkernel = 'all-scatter'\nsplit = [4, 2]", "must be [producers, comm, receivers]"),
    ("[[case]]\nshape = [64, 64, 64]\nloads = 'tma'", "loads='tma' is not one of descriptor, pointer"),
    ("name = 'x'", "no [[case]] tables"),
    ("[[case]\nshape = 1", "not valid TOML"),
])
def test_a_bad_sweep_is_refused_with_a_line_naming_the_key(text, says):
    with pytest.raises(BenchInputError) as error:
        parse_sweep(text, path="bad.toml")
    assert says in str(error.value) and str(error.value).startswith("bad.toml")
    assert "\n" not in str(error.value)


def test_the_shipped_sweep_covers_the_seeds_shapes_on_two_ranks():
    from pathlib import Path

    sweep = parse_sweep(Path("benchmarks/sweeps/seeds-2gpu.toml").read_text(), path="seeds-2gpu.toml")
    shapes = {(c.m, c.n, c.k) for c in sweep.cases}
    assert {(3840, 3840, 4352), (4096, 4608, 36864), (8192, 4608, 18432), (8192, 4608, 36864),
            (16384, 4608, 36864), (8192, 9216, 36864), (16384, 16384, 16384), (8192, 4608, 8192)} <= shapes
    assert sweep.world_size == 2 and {c.kernel for c in sweep.cases} == {"all-reduce", "all-scatter"}


def test_the_default_split_keeps_every_sm_busy_and_fits_the_gpu():
    for kernel in ("all-reduce", "all-scatter"):
        for world in (1, 2, 4, 8):
            split = default_split(kernel, sms=132, world_size=world)
            assert sum(split) * world <= 132 and sum(split) == 132 // world


# ----- report rows on synthetic timings --------------------------------------------------------

def test_the_report_derives_tflops_intensity_efficiency_overhead_and_share_of_cublas():
    rows = {(r["what"], r["protocol"]): r for r in report_rows(synthetic(), CEILINGS, world_size=2)}
    flops = 2 * 8192 * 4608 * 8192
    fused = rows[("fused", "epoch-flag")]
    assert fused["tflops"] == round(flops / 1.02e-3 / 1e12, 1)
    assert fused["overhead_pct"] == 2.0 and fused["of_cublas_pct"] == round(100 * 0.9 / 1.02, 1)
    assert fused["efficiency_pct"] == round(100 * flops / 1.02e-3 / 1e12 / 800, 1)
    assert fused["intensity"] == round(flops / ((8192 * 8192 + 8192 * 4608 + 8192 * 4608) * 2), 1)
    assert rows[("gemm-part", "")]["of_cublas_pct"] == round(100 * 0.9 / 0.95, 1)
    none = rows[("fused", NO_SYNC)]
    assert none["unsafe"] and none["note"] == UNSAFE_NOTE and none["overhead_pct"] is None
    assert not fused["unsafe"] and rows[("cublas", "")]["overhead_pct"] is None


@settings(max_examples=50, deadline=None)
@given(none=st.floats(1e-5, 1e-1), ratio=st.floats(0.5, 2.0))
def test_a_protocol_slower_than_none_has_a_positive_overhead_and_fewer_tflops(none, ratio):
    rows = {(r["what"], r["protocol"]): r
            for r in report_rows(synthetic(none=none, protocols={"p": none * ratio}), CEILINGS, world_size=2)}
    p, n = rows[("fused", "p")], rows[("fused", NO_SYNC)]
    assert (p["overhead_pct"] > 0) == (ratio > 1.00005) or abs(ratio - 1) < 1e-4
    assert (p["tflops"] <= n["tflops"]) == (ratio >= 1) or abs(p["tflops"] - n["tflops"]) <= 0.1


def test_every_output_marks_the_none_rows_unsafe():
    rows = report_rows(synthetic(), CEILINGS, world_size=2)
    table = list(csv.DictReader(io.StringIO(to_csv(rows))))
    assert [r["unsafe"] for r in table if r["protocol"] == NO_SYNC] == ["True"]
    assert all(r["note"] == UNSAFE_NOTE for r in table if r["protocol"] == NO_SYNC)
    markdown = to_markdown(rows, CEILINGS, unavailable=["cuBLAS + NCCL: not here"])
    assert "none (UNSAFE)" in markdown and UNSAFE_NOTE in markdown
    assert "Not measured here: cuBLAS + NCCL: not here" in markdown
    assert "800 TFLOP/s" in markdown


def test_the_roofline_is_a_png(tmp_path):
    path = tmp_path / "roofline.png"
    draw_roofline(report_rows(synthetic(), CEILINGS, world_size=2), CEILINGS, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ----- the gate ----------------------------------------------------------------------------------

def test_the_gate_fails_exactly_the_rows_under_tolerance_times_their_record():
    rows = report_rows(synthetic(protocols={"epoch-flag": 1.02e-3, "slow": 2.0e-3}), CEILINGS, world_size=2)
    baseline = make_baseline(report_rows(synthetic(protocols={"epoch-flag": 1.02e-3, "slow": 1.0e-3}),
                                         CEILINGS, world_size=2), machine="nvidia-h200")
    gate = check_rows(rows, baseline, tolerance=0.8)
    assert [key.rsplit(" | ", 1)[1] for key, _, _ in gate.regressions] == ["slow"]
    assert len(gate.checked) == 4 and not gate.missing  # gemm-part, none, epoch-flag, slow; cuBLAS not gated
    assert check_rows(rows, baseline, tolerance=0.49).passed  # 2x slower is above 0.49 of the record


def test_a_row_exactly_at_tolerance_passes_and_a_row_without_a_record_is_reported_not_failed():
    rows = [{"key": "a", "what": "fused", "tflops": 80.0}, {"key": "new", "what": "gemm-part", "tflops": 1.0}]
    gate = check_rows(rows, {"tflops": {"a": 100.0}}, tolerance=0.8)
    assert gate.passed and gate.checked == ("a",) and gate.missing == ("new",)


def test_a_baseline_from_another_machine_or_not_a_baseline_is_bad_input(tmp_path):
    with pytest.raises(BenchInputError, match="recorded on 'nvidia-h200-x2', this machine is 'nvidia-h200'"):
        check_machine({"machine": "nvidia-h200-x2"}, "nvidia-h200", path="b.json")
    path = tmp_path / "b.json"
    path.write_text('{"rows": []}')
    with pytest.raises(BenchInputError, match="not a syncverify bench baseline"):
        load_baseline(path)
    path.write_text("{")
    with pytest.raises(BenchInputError, match="not JSON"):
        load_baseline(path)
    with pytest.raises(BenchInputError, match="--tolerance=1.5"):
        check_rows([], {"tflops": {}}, tolerance=1.5)


def test_the_shipped_h200_baseline_is_for_nvidia_h200_and_gates_the_seeds_sweep():
    from pathlib import Path

    baseline = load_baseline("benchmarks/baselines/nvidia-h200.json")
    assert baseline["machine"] == "nvidia-h200"
    sweep = parse_sweep(Path("benchmarks/sweeps/seeds-2gpu.toml").read_text(), path="seeds-2gpu.toml")
    keys = {key.split(" | ")[0] for key in baseline["tflops"]}
    seeds = {c.key.rsplit(" ", 4)[0] for c in sweep.cases}
    shipped = {k.rsplit(" ", 4)[0] for k in keys}
    assert seeds <= shipped  # every case of the seeds' sweep is gated
    # and every other row is one of the speed sweep's (benchmarks/speed_sweep.py): a kernel and shape
    # of the shipped tile table, or a split of the seeds' 8192x4608x8192 (the overhead rows)
    table = json.loads(Path("kernels/bench/tiles/nvidia-h200.json").read_text())
    tuned = {(e["kernel"], e["shape"]) for e in table["entries"]}
    extra = {tuple(k.split(" ")[:2]) for k in shipped - seeds}
    assert extra - tuned <= {(kernel, "8192x4608x8192") for kernel, _shape in tuned}


# ----- the command -------------------------------------------------------------------------------

TINY = ["--interpret", "--m", "32", "--n", "64", "--k", "64", "--block-m", "16", "--block-n", "16",
        "--block-k", "16", "--gemm-sms", "2", "--comm-sms", "1", "--recv-sms", "1"]


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


def test_shapes_that_do_not_divide_the_tiles_are_refused_in_one_line(capsys):
    assert main(["bench", *TINY[:-6], "--m", "40"]) == 2
    assert "--m=40 is not a multiple of --block-m=16" in _one_error_line(capsys)


def test_a_sweep_with_an_unknown_key_is_refused_in_one_line(tmp_path, capsys):
    sweep = tmp_path / "s.toml"
    sweep.write_text("[[case]]\nshape = [32, 64, 64]\nwraps = 4\n")
    assert main(["bench", "--interpret", "--sweep", str(sweep)]) == 2
    assert "unknown key 'wraps' (did you mean 'warps'?)" in _one_error_line(capsys)


def test_a_baseline_for_another_machine_kind_is_refused_before_anything_runs(tmp_path, capsys):
    baseline = tmp_path / "b.json"
    baseline.write_text(json.dumps({"format": "syncverify-bench-baseline/1", "machine": "nvidia-h200",
                                    "tflops": {}}))
    assert main(["bench", *TINY, "--check", str(baseline)]) == 2
    line = _one_error_line(capsys)
    assert "recorded on 'nvidia-h200', this machine is 'cpu-interpreter'" in line


def test_stress_refuses_the_unsynchronized_build_in_one_line(capsys):
    assert main(["stress", "--protocol", NO_SYNC, "--interpret", "--iterations", "1"]) == 2
    assert "cost baseline of 'syncverify bench'" in _one_error_line(capsys)


def test_real_ranks_without_a_gpu_are_refused_with_the_flag_that_fixes_it(capsys):
    """Real ranks (no --virtual-ranks) need a GPU each (tests/test_bench_ranks.py: more ranks than GPUs)."""
    assert main(["bench", "--world-size", "2"]) == 2
    assert "needs a CUDA GPU and none is visible; use --interpret" in _one_error_line(capsys)


@pytest.mark.parametrize("kernel", ["all-reduce", "all-scatter"])
def test_the_interpreted_bench_writes_every_output_validates_and_gates(kernel, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["bench", *TINY, "--kernel", kernel, "--out", str(out), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    rows = {(r["what"], r["protocol"]): r for r in document["rows"]}
    assert set(rows) == {("cublas", ""), ("gemm-part", ""), ("fused", NO_SYNC),
                         ("fused", "barrier-fenced-release-acquire"), ("fused", "epoch-flag")}
    assert rows[("fused", NO_SYNC)]["unsafe"] and rows[("fused", NO_SYNC)]["validated"].startswith("not validated")
    assert all(r["validated"] == "ok" for (what, p), r in rows.items() if what != "cublas" and p != NO_SYNC)
    assert {p.name for p in out.iterdir()} == {"bench.csv", "bench.md", "bench.json", "baseline.json", "roofline.png"}
    assert document["machine"] == "cpu-interpreter" and "not measured" in document["unavailable"][0]
    # the gate against its own baseline passes; against a baseline 10x faster it fails with exit 1
    baseline = out / "baseline.json"
    assert main(["bench", *TINY, "--kernel", kernel, "--check", str(baseline), "--tolerance", "0.01"]) == 0
    recorded = json.loads(baseline.read_text())
    recorded["tflops"] = {key: value * 1e6 + 1 for key, value in recorded["tflops"].items()}
    baseline.write_text(json.dumps(recorded))
    assert main(["bench", *TINY, "--kernel", kernel, "--check", str(baseline)]) == 1
    assert "REGRESSION" in capsys.readouterr().out


# ----- the fast kernels in the interpreter -------------------------------------------------------

def test_the_host_visit_order_is_the_kernels_tile_of():
    import torch

    from syncverify.kernels.build import visit_order
    from tests.bench_probe import order_probe

    for tiles_m, tiles_n, group in [(5, 3, 2), (4, 4, 8), (3, 7, 1), (9, 2, 4)]:
        out = torch.full((tiles_m * tiles_n,), -1, dtype=torch.int32)
        order_probe.launcher((1,), interpret=True)(out, tiles_m, tiles_n, N=tiles_m * tiles_n, GROUP_M=group)
        assert out.tolist() == visit_order(tiles_m, tiles_n, group)
        assert sorted(out.tolist()) == list(range(tiles_m * tiles_n))


def test_each_ranks_owned_tiles_are_listed_in_the_producers_order_and_still_the_models_set():
    from syncverify.protocols import rules
    from syncverify.kernels.build import ownership_tensor, visit_order
    from syncverify.kernels.config import KernelConfig

    c = KernelConfig(m=64, n=48, k=64, block_m=16, block_n=16, world_size=2, group_m=2)
    table = ownership_tensor(c, "cpu").tolist()
    model = rules.ownership_table(12, 2, "striding")
    assert table[:14] == model[:14]  # owners and counts: the model's rule
    order = visit_order(4, 3, 2)
    for r in range(2):
        row = [t for t in table[14 + 6 * r: 14 + 6 * (r + 1)] if t >= 0]
        assert sorted(row) == sorted(t for t in model[14 + 6 * r: 14 + 6 * (r + 1)] if t >= 0)
        assert row == sorted(row, key=order.index)


@pytest.mark.parametrize("loads", ["descriptor", "pointer"])
@pytest.mark.parametrize("kernel", ["all-reduce", "all-scatter"])
@pytest.mark.parametrize("group_m", [1, 2])
def test_the_fused_kernels_compute_the_product_with_either_load_path_and_tile_order(kernel, loads, group_m):
    import torch

    from syncverify.kernels.bench.timing import FusedRun, input_sets
    from syncverify.protocols import load_protocol

    case = Case(kernel=kernel, m=64, n=64, k=64, block=(16, 16, 16), split=(2, 1, 1), group_m=group_m, loads=loads)
    inputs = input_sets(case, 2, torch.device("cpu"), generator=torch.Generator().manual_seed(3), count=1)[0]
    from syncverify.kernels.build import build

    for protocol, gemm_only in ((load_protocol("epoch-flag"), False), (None, True)):
        built = build(protocol, case.kernel_config(world_size=2, interpret=True, gemm_only=gemm_only))
        assert FusedRun(built, torch.device("cpu")).validate(inputs) == "ok"


def test_a_wrong_product_is_caught_by_the_validation(monkeypatch):
    import torch

    from syncverify.kernels.bench import timing as bench
    from syncverify.kernels.build import build

    case = Case(kernel="all-reduce", m=32, n=32, k=32, block=(16, 16, 16), split=(2, 1))
    inputs = bench.input_sets(case, 2, torch.device("cpu"), generator=torch.Generator().manual_seed(0), count=1)[0]
    monkeypatch.setattr(bench, "reference", lambda case, A, B: torch.zeros(32, 32) + 1.0)
    from syncverify.protocols import load_protocol

    run = bench.FusedRun(build(load_protocol("epoch-flag"), case.kernel_config(world_size=2, interpret=True)),
                         torch.device("cpu"))
    assert run.validate(inputs).startswith("relative error")


def test_the_no_sync_build_has_no_signal_or_wait_and_is_not_synchronized():
    from syncverify.kernels.build import NO_SYNC as KERNEL_NO_SYNC
    from syncverify.kernels.build import build

    built = build(None, CASE.kernel_config(world_size=2))
    assert KERNEL_NO_SYNC == NO_SYNC and not built.synchronized
    assert built.plan.signal == built.plan.wait == () and built.plan.runtime_values(epoch=5) == (5,)
    scatter = build(NO_SYNC, Case(kernel="all-scatter", split=(58, 4, 4)).kernel_config(world_size=2))
    assert scatter.plan.push_signal == scatter.plan.push_wait == ()


@pytest.mark.parametrize("change, says", [
    (dict(block_n=512), "--block-n=512 exceeds the 256 elements a tensor-descriptor box may span"),
    (dict(group_m=0), "--group-m=0 must be at least 1"),
    (dict(loads="tma"), "--loads"),
])
def test_descriptor_limits_and_new_options_are_checked_on_the_host(change, says):
    from syncverify.kernels.config import KernelConfig, check_config
    from syncverify.kernels.errors import StressConfigError

    config = KernelConfig(**{**dict(m=128, n=1024, k=128, block_m=128, block_n=128, block_k=64), **change})
    with pytest.raises(StressConfigError, match=says):
        check_config(config)
    check_config(KernelConfig(**{**dict(m=128, n=1024, k=128, block_m=128, block_n=512, block_k=64),
                                 "loads": "pointer"}))  # pointer loads have no box limit
