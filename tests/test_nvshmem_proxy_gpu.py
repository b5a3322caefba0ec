"""The NVSHMEM put-with-signal stand-in (``benchmarks/nvshmem_proxy_gpu.py``) on the CPU: each
variant compiles to the sm_90 PTX its table claims (a PTX whose signal is not a system-scope
release add / exchange fails the check), the model's answers it holds the GPU against (the
nvshmem #84 zoo pair), and its interpreter path end to end."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")
pytest.importorskip("torch")

from tests.test_tma_litmus_gpu import ROOT, _script as load  # noqa: E402  (loads a benchmarks/ script)

SCRIPT = ROOT / "benchmarks" / "nvshmem_proxy_gpu.py"


def _script():
    return load(SCRIPT)


@pytest.fixture(scope="module")
def script():
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("compiling to PTX needs TRITON_INTERPRET unset")
    return _script()


def test_every_variant_compiles_to_its_signal_and_polls_and_not_the_other_ones(script):
    ptx = {variant: script.compile_ptx(variant, chunk=32) for variant in script.VARIANTS}
    for variant, text in ptx.items():
        assert script.ptx_findings(variant, text) == [], variant
    assert script.ptx_findings("per-chunk-set", ptx["cumulative-add"])  # its signal is an add, not an exchange
    weakened = re.sub(r"\.sys\.release\.add", ".gpu.release.add", ptx["cumulative-add"])
    assert weakened != ptx["cumulative-add"] and script.ptx_findings("cumulative-add", weakened)


def test_the_model_answers_the_script_holds_the_gpu_against():
    module = _script()
    assert {variant: module.model_allows_stale(variant) for variant in module.VARIANTS} == {
        "cumulative-add": True, "per-chunk-set": False}


def test_the_interpreter_path_runs_every_variant_and_prints_the_table_last(tmp_path):
    env = dict(os.environ, TRITON_INTERPRET="1", OUT=str(tmp_path), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, str(SCRIPT), "--seconds", "0", "--launches", "1", "--pairs", "2",
                           "--chunk", "8"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == "no outcome the model forbids"
    rows = [line for line in lines if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 4 and all("| 2 | 2 | 0 | 0 |" in row for row in rows)  # fresh only
    assert (tmp_path / "nvshmem_proxy_gpu.json").exists()
