"""``syncverify bench`` on real ranks, on GPUs (skipped without them): one process per GPU, the
fused kernels and cuBLAS + NCCL timed in one run, every synchronized result validated. Run on
``nvidia-h200-x2`` with ``python -m pytest -q tests/gpu/test_gpu_bench_ranks.py``; the CPU side
of the same path is tests/test_bench_ranks.py."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch", reason="needs torch (in the checkout: python -m pip install -e '.[gpu]')")
pytest.importorskip("triton", reason="needs triton (in the checkout: python -m pip install -e '.[gpu]')")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(),
                       reason="needs a CUDA GPU (none visible); the CPU path is tests/test_bench_ranks.py"),
]

from syncverify.cli import main  # noqa: E402

SMALL = ["--m", "1024", "--n", "1024", "--k", "2048", "--launches", "2", "--repeats", "2", "--watchdog", "300"]


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs (nvidia-h200-x2)")
@pytest.mark.parametrize("kernel, graphs", [("all-reduce", "--graphs"), ("all-scatter", "--graphs"),
                                            ("all-reduce", "--no-graphs")])
def test_real_ranks_time_the_fused_kernels_beside_cublas_and_nccl_and_validate_them(kernel, graphs, capsys):
    assert main(["bench", "--world-size", "2", "--kernel", kernel, graphs, "--json", *SMALL]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["ranks"] == "processes" and document["stopped"] is None
    rows = {(r["what"], r["protocol"]): r for r in document["rows"]}
    assert {what for what, _ in rows} == {"cublas", "cublas+nccl", "gemm-part", "fused"}
    assert rows[("cublas+nccl", "")]["validated"] == "ok" and rows[("gemm-part", "")]["validated"] == "ok"
    fused = [r for (what, p), r in rows.items() if what == "fused" and p != "none"]
    assert fused and all(r["validated"] == "ok" and r["speedup_vs_cublas_nccl"] > 0 for r in fused)
    assert all(len(r["per_rank_us"].split()) == 2 for r in document["rows"])


@pytest.mark.skipif(torch.cuda.device_count() > 1, reason="needs exactly one GPU")
def test_real_ranks_on_one_gpu_are_refused_in_one_line(capsys):
    assert main(["bench", "--world-size", "2", *SMALL]) == 2
    assert "--world-size=2 runs one process per GPU and 1 GPU is visible" in capsys.readouterr().err
