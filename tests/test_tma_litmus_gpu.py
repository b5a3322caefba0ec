"""The hardware TMA litmus script (``benchmarks/tma_litmus_gpu.py``) on the CPU: each variant
compiles to the sm_90 PTX its table claims (and a PTX missing the instruction that makes a variant
what it is fails the check), the model's answers it holds the hardware against, and its
interpreter path end to end."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "tma_litmus_gpu.py"

pytest.importorskip("triton")
pytest.importorskip("torch")


def _script(path: Path = SCRIPT):
    """A GPU script of benchmarks/ loaded as a module (it is not a package)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def script():
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("compiling to PTX needs TRITON_INTERPRET unset")
    return _script()


@pytest.fixture(scope="module")
def ptx(script):
    return {variant: script.compile_ptx(variant, tile=16) for variant in script.VARIANTS}


def test_every_variant_compiles_to_the_instructions_its_table_names(script, ptx):
    for variant, text in ptx.items():
        assert script.ptx_findings(variant, text) == [], variant


def test_a_ptx_without_the_full_wait_is_not_the_wait_group_variant(script, ptx):
    text = ptx["store-wait-group"]
    mutated = "\n".join(line for line in text.splitlines() if "cp.async.bulk.wait_group 0;" not in line)
    assert mutated != text
    assert script.ptx_findings("store-wait-group", mutated)
    # ... and the wait_group.read variant must not have it
    assert script.ptx_findings("store-wait-group-read", text)


def test_a_ptx_without_the_proxy_fence_is_not_the_fenced_load(script, ptx):
    text = ptx["load-fence"]
    assert script.ptx_findings("load-no-fence", text)  # the fence is there: not the unfenced variant
    mutated = text.replace("fence.proxy.async.global;", "")
    assert script.ptx_findings("load-fence", mutated)


def test_the_model_answers_the_script_holds_the_hardware_against():
    module = _script()
    answers = {variant: module.model_allows_stale(variant) for variant in module.VARIANTS}
    assert answers == {"store-wait-group": False, "store-wait-group-read": True, "store-signal-first": True,
                       "load-fence": False, "load-no-fence": True}


def test_the_interpreter_path_runs_every_variant_and_prints_the_table_last(tmp_path):
    env = dict(os.environ, TRITON_INTERPRET="1", OUT=str(tmp_path), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, str(SCRIPT), "--seconds", "0", "--launches", "1", "--pairs", "2",
                           "--tile", "16"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == "no outcome the model forbids"
    rows = [line for line in lines if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 10 and all("| 0 | 0 | 0 |" in row for row in rows)  # fresh only
    assert (tmp_path / "tma_litmus_gpu.json").exists()
