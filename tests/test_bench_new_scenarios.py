"""``syncverify bench`` for the two newer kernels (all-gather-gemm, gemm-reduce-scatter) without a
GPU: sweep files and splits, the report's figures on synthetic timings (all-gather-gemm's whole
problem is one GEMM per rank), every output of an interpreted run with its validation, the GEMM
part of each kernel, and the cuBLAS + NCCL baselines (a fake collective, then two CPU ranks
joined by gloo)."""

from __future__ import annotations

import json

import pytest

from syncverify.kernels.bench.report import NO_SYNC, BenchInputError, Case, Ceilings, Measurement, default_split, parse_sweep, \
    problem_flops, report_rows
from syncverify.cli import main

NEW = ("all-gather-gemm", "gemm-reduce-scatter")
TINY = ["--interpret", "--m", "32", "--n", "64", "--k", "64", "--block-m", "16", "--block-n", "16",
        "--block-k", "16", "--gemm-sms", "2", "--comm-sms", "1"]


# ----- sweeps, splits and figures (pure) --------------------------------------------------------

def test_a_sweep_names_the_new_kernels_and_their_two_role_splits():
    sweep = parse_sweep('kernels = ["all-gather-gemm", "gemm-reduce-scatter"]\n[[case]]\nshape = [256, 256, 256]\n'
                        'split = [4, 8]', path="s.toml")
    assert [(c.kernel, c.split) for c in sweep.cases] == [("all-gather-gemm", (4, 8)), ("gemm-reduce-scatter", (4, 8))]
    with pytest.raises(BenchInputError, match=r"split=\[4, 8, 8\] must be \[senders, GEMM programs\] for all-gather-gemm"):
        parse_sweep("[[case]]\nshape = [64, 64, 64]\nkernel = 'all-gather-gemm'\nsplit = [4, 8, 8]", path="s.toml")
    with pytest.raises(BenchInputError, match="kernel='all-gather'"):
        parse_sweep("[[case]]\nshape = [64, 64, 64]\nkernel = 'all-gather'", path="s.toml")


@pytest.mark.parametrize("kernel", NEW)
@pytest.mark.parametrize("world", [1, 2, 4, 8])
def test_the_default_split_keeps_every_sm_busy(kernel, world):
    split = default_split(kernel, sms=132, world_size=world)
    assert len(split) == 2 and sum(split) == 132 // world and min(split) >= 1
    multiplies = split[1] if kernel == "all-gather-gemm" else split[0]  # the GEMM role has the most
    assert multiplies > 5 * min(split)


def test_all_gather_gemm_counts_every_ranks_gemm_in_its_tflops():
    case = Case(kernel="all-gather-gemm", m=4096, n=4096, k=4096, split=(6, 60))
    rows = report_rows([Measurement(case, "cublas", 1e-3), Measurement(case, "fused", 2e-3, protocol="epoch-flag",
                                                                         validated="ok")],
                       Ceilings(machine="nvidia-h200", peak_tflops=800.0, bandwidth_tbs=4.0), world_size=4)
    assert problem_flops(case, 4) == 4 * 2 * 4096 ** 3
    assert rows[0]["tflops"] == round(4 * 2 * 4096 ** 3 / 1e-3 / 1e12, 1)
    assert rows[1]["of_cublas_pct"] == 50.0
    reduce_scatter = Case(kernel="gemm-reduce-scatter", m=4096, n=4096, k=4096)
    assert problem_flops(reduce_scatter, 4) == reduce_scatter.flops  # K is split: one GEMM in all


# ----- the interpreted command --------------------------------------------------------------------

@pytest.mark.parametrize("kernel", NEW)
def test_the_interpreted_bench_of_a_new_kernel_writes_every_output_and_validates(kernel, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["bench", *TINY, "--kernel", kernel, "--protocol", "epoch-flag,done-flag", "--out", str(out),
                 "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    rows = {(r["what"], r["protocol"]): r for r in document["rows"]}
    assert set(rows) == {("cublas", ""), ("gemm-part", ""), ("fused", NO_SYNC), ("fused", "epoch-flag"),
                         ("fused", "done-flag")}
    assert {r["kernel"] for r in rows.values()} == {kernel}
    assert all(r["validated"] == "ok" for (what, p), r in rows.items() if what != "cublas" and p != NO_SYNC)
    assert {p.name for p in out.iterdir()} == {"bench.csv", "bench.md", "bench.json", "baseline.json", "roofline.png"}
    assert f"## {kernel}" in (out / "bench.md").read_text()
    assert (out / "bench.csv").read_text().count(f"\n{kernel},") == 5


# ----- the GEMM part and validation in the interpreter -------------------------------------------

def _run(kernel, protocol, *, gemm_only=False, m=64, n=64, k=64):
    import torch

    from syncverify.kernels.bench.timing import FusedRun, input_sets
    from syncverify.kernels.build import build
    from syncverify.protocols import load_protocol

    case = Case(kernel=kernel, m=m, n=n, k=k, block=(16, 16, 16), split=(2, 1))
    inputs = input_sets(case, 2, torch.device("cpu"), generator=torch.Generator().manual_seed(3), count=1)[0]
    built = build(load_protocol(protocol) if protocol else None,
                  case.kernel_config(world_size=2, interpret=True, gemm_only=gemm_only))
    return FusedRun(built, torch.device("cpu")), inputs


@pytest.mark.parametrize("kernel", NEW)
@pytest.mark.parametrize("protocol, gemm_only", [("epoch-flag", False), ("done-flag", False), (None, True)])
def test_the_new_fused_kernels_and_their_gemm_parts_compute_the_product(kernel, protocol, gemm_only):
    run, inputs = _run(kernel, protocol, gemm_only=gemm_only)
    assert run.validate(inputs) == "ok"


def test_the_all_gather_gemm_part_multiplies_what_gathered_holds():
    """Its GEMM programs read ``gathered`` as filled before the launch: a shard left out of it
    (the senders' share, which the GEMM part does not run) is a wrong product."""
    from syncverify.kernels.bench import timing as bench

    run, inputs = _run("all-gather-gemm", None, gemm_only=True)
    assert run.config.grid == 2 * run.config.gemm_sms  # no senders in the grid
    original = bench.FusedRun.fill_gathered

    def one_shard_only(self, everyone):
        original(self, everyone)
        self.heap["gathered"].local[:, :, everyone[0].shape[2]:] = 0

    run.fill_gathered = one_shard_only.__get__(run)
    assert run.validate(inputs).startswith("relative error")


@pytest.mark.parametrize("kernel", NEW)
def test_a_wrong_product_of_a_new_kernel_is_caught(kernel, monkeypatch):
    import torch

    from syncverify.kernels.bench import timing as bench

    run, inputs = _run(kernel, "epoch-flag")
    monkeypatch.setattr(bench, "reference", lambda case, A, B: torch.ones(2, 64, 64) if
                        case.kernel == "all-gather-gemm" else torch.ones(64, 64))
    assert run.validate(inputs).startswith("relative error")


def test_the_reduce_scatter_is_checked_only_on_the_tiles_each_rank_owns():
    """Each rank's C holds its own tiles; the others stay NaN and are not compared. A tile of
    rank 0's that its consumer never wrote is caught."""
    run, inputs = _run("gemm-reduce-scatter", "epoch-flag")
    assert run.validate(inputs) == "ok"
    assert run.heap["out"].local.isnan().any()  # the tiles each rank does not own
    launch = run.launch

    def drop_one_tile(inputs, epoch, compile_only=False):
        launch(inputs, epoch, compile_only=compile_only)
        run.heap["out"].local[0, :16, :16] = float("nan")  # tile 0: rank 0's (striding)

    run.launch = drop_one_tile
    assert run.validate(inputs) != "ok"


# ----- the cuBLAS + NCCL baselines ----------------------------------------------------------------

class FakeDist:
    """The collectives of one rank of two, the peer contributing ``peer`` (its shard of A, or its
    partial product)."""

    def __init__(self, peer, rank: int = 0):
        self.peer, self.rank = peer, rank

    def all_gather_single(self, out, tensor):
        rows = tensor.shape[0]
        out[self.rank * rows:(self.rank + 1) * rows] = tensor
        out[(1 - self.rank) * rows:(2 - self.rank) * rows] = self.peer

    def reduce_scatter_single(self, out, tensor):
        rows = out.shape[0]
        out.copy_((tensor + self.peer)[self.rank * rows:(self.rank + 1) * rows])


@pytest.mark.parametrize("rank", [0, 1])
@pytest.mark.parametrize("kernel", NEW)
def test_the_nccl_baseline_of_a_new_kernel_is_validated_against_every_ranks_operands(kernel, rank):
    import torch

    from syncverify.kernels.bench.timing import input_sets, rank_slice
    from syncverify.kernels.bench.ranks import CollectiveBaseline

    case = Case(kernel=kernel, m=32, n=64, k=64, dtype="bf16")
    everyone = input_sets(case, 2, torch.device("cpu"), generator=torch.Generator().manual_seed(3), count=1)[0]
    mine, peer = rank_slice(everyone, rank), rank_slice(everyone, 1 - rank)
    contribution = peer[0][0] if kernel == "all-gather-gemm" else torch.matmul(peer[0][0], peer[1][0])
    right = CollectiveBaseline(case, world_size=2, dist=FakeDist(contribution, rank), device="cpu", rank=rank)
    assert right.validate(mine, everyone) == "ok"
    assert right.result().shape == ((32, 64) if kernel == "all-gather-gemm" else (16, 64))
    wrong = CollectiveBaseline(case, world_size=2, dist=FakeDist(torch.zeros_like(contribution), rank),
                               device="cpu", rank=rank)
    assert wrong.validate(mine, everyone).startswith("relative error")


def test_real_ranks_refuse_a_reduce_scatter_whose_rows_do_not_divide():
    from syncverify.kernels.bench.ranks import check_cases

    sweep = parse_sweep("[[case]]\nshape = [32, 64, 48]\nkernel = 'gemm-reduce-scatter'\nblock = [16, 16, 16]",
                        world_size=3)
    with pytest.raises(BenchInputError, match="M=32 does not divide into 3 row blocks"):
        check_cases(sweep, sms=132, gpus=3)


def test_two_cpu_ranks_time_and_validate_the_new_kernels_baselines(tmp_path):
    import torch

    from syncverify.kernels.bench.ranks import run_sweep_ranks
    from tests.bench_ranks_fake import ScriptedTimer

    sweep = parse_sweep('kernels = ["all-gather-gemm", "gemm-reduce-scatter"]\n[[case]]\nshape = [32, 64, 64]\n'
                        'block = [16, 16, 16]', world_size=2)
    outcome = run_sweep_ranks(sweep, backend="gloo", timer=ScriptedTimer(torch.device("cpu")),
                              watchdog_seconds=120, partial=tmp_path / "p.jsonl")
    assert outcome.stopped is None and outcome.cases_reported == 2
    assert [(m.case.kernel, m.what, m.validated) for m in outcome.measurements] == [
        (kernel, what, validated) for kernel in NEW
        for what, validated in (("cublas", ""), ("cublas+nccl", "ok"))]


def test_the_shipped_sweep_of_the_new_kernels_builds_on_an_h200():
    from pathlib import Path

    from syncverify.kernels.bench.report import resolve
    from syncverify.kernels.build import build

    sweep = parse_sweep(Path("benchmarks/sweeps/new-scenarios-h200.toml").read_text(), path="new-scenarios-h200.toml")
    assert {c.kernel for c in sweep.cases} == set(NEW) and "done-flag" in sweep.protocols
    for case in sweep.cases:
        config = resolve(case, sms=132, world_size=2).kernel_config(world_size=2)
        build(None, config, sms=132)
        if case.kernel == "all-gather-gemm":
            assert 2 * config.block_m <= 128  # the stacked operand stays at 128 rows
