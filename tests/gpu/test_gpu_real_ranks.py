"""The user's harnesses on real ranks on two GPUs (``syncverify stress FILE.py --real-ranks``):
each rank's heap one block of symmetric memory, every peer's mapped into each process
(``syncverify.kernels.processes.join_ranks``). Skipped with fewer than two GPUs; the same path on
the CPU (gloo, a shared file) is ``tests/test_real_ranks.py``. Made by the two-GPU session's
``gpu-tests`` run (``benchmarks/x2_session.py``, docs/two-gpu-session.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="needs torch (in the checkout: python -m pip install -e '.[gpu]')")
pytest.importorskip("triton", reason="needs triton (in the checkout: python -m pip install -e '.[gpu]')")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs (nvidia-h200-x2)"),
]

from syncverify.frontend.real_ranks import run_real_ranks  # noqa: E402
from syncverify.frontend.user_stress import StressOptions  # noqa: E402

HARNESS = Path(__file__).resolve().parents[1] / "user_kernels" / "harness.py"


def test_a_consumer_on_one_gpu_sees_the_put_and_signal_of_the_other():
    result = run_real_ranks(StressOptions(f"{HARNESS}::consumer_launched_first", iterations=20, delays="none"),
                            watchdog=120)
    assert result.iterations == 20 and result.bad_iterations == 0 and result.stopped is None, result.hang_report
    assert "nccl, one GPU per rank" in result.notes[0]


def test_a_half_written_output_is_found_on_both_gpus():
    result = run_real_ranks(StressOptions(f"{HARNESS}::half_written", iterations=4, delays="none"), watchdog=120)
    assert result.bad_iterations == 4 and result.stopped is None
    assert {f.expectation for f in result.failures} == {"out@0", "out@1"}
