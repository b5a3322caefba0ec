"""The two newer kernels on a real GPU (skipped without one): guided schedules that aim at
all-gather-gemm's senders, the positive controls of the safe protocols, and all-gather-gemm's C
tiles kept in ``parked`` until a back-signal. The same runs, at the stress defaults, are
``benchmarks/new_scenarios_guided.py``'s (docs/RESULTS.md, 2026-12-01 third session); this file
was written after that call and has not itself run on a GPU yet."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="needs torch (in the checkout: python -m pip install -e '.[gpu]')")
pytest.importorskip("triton", reason="needs triton (in the checkout: python -m pip install -e '.[gpu]')")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(),
                       reason="needs a CUDA GPU (none visible); the CPU path is tests/test_new_scenario_evidence.py"),
]

from syncverify.stress.campaign import run_campaign  # noqa: E402

NEW = ("all-gather-gemm", "gemm-reduce-scatter")


@pytest.mark.parametrize("kernel", NEW)
def test_a_guided_missing_barrier_fails_at_once(kernel):
    from syncverify.stress.guided import run_guided

    report = run_guided("fenced-release-acquire", kernel=kernel, world_size=2, seconds=2.0, compare_random=False,
                        virtual_ranks=True, seed=2026)
    assert all(row["guided_reproduced"] for row in report["rows"]), report["rows"]


@pytest.mark.parametrize("kernel", NEW)
@pytest.mark.parametrize("protocol", ["barrier-fenced-release-acquire", "epoch-flag"])
def test_a_safe_protocol_is_clean_and_its_control_fails_under_the_same_schedules(kernel, protocol):
    from syncverify.stress.controls import positive_control
    from syncverify.stress.guided import guided_plan, run_guided

    control = positive_control(protocol, kernel=kernel, world_size=2)
    plan = guided_plan(control.protocol, kernel=kernel, world_size=2)
    common = dict(kernel=kernel, world_size=2, seconds=1.0, compare_random=False, virtual_ranks=True, plan=plan)
    assert not any(row["guided_reproduced"] for row in run_guided(protocol, **common)["rows"])
    assert any(row["guided_reproduced"] for row in run_guided(control.protocol, **common)["rows"])


def test_the_c_tiles_held_until_the_back_signal_are_right():
    """done-flag in all-gather-gemm: eight column tiles per row tile, the first seven parked."""
    result = run_campaign(protocol="done-flag", kernel="all-gather-gemm", world_size=2, virtual_ranks=True,
                          n=1024, block_n=128, seconds=1.0, delays="random", seed=1)
    assert result.clean and result.iterations > 0, result.first_failure
