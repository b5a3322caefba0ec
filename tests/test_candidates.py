"""Candidate protocols timed for issue 28 (``benchmarks/protocols/``, ``benchmarks/profile_tail.py``):
each is proven safe by the model in every kernel scenario, and, like a built-in, its kernels run
the model's steps (drift test) and compile to what the model assumes (PTX audit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncverify.protocols import load_protocol
from syncverify.scenarios.build import KERNEL_SCENARIOS, ScenarioOptions, build
from syncverify.verdicts.check import check

CANDIDATES = sorted(str(p) for p in (Path(__file__).parent.parent / "benchmarks" / "protocols").glob("*.toml"))


def test_there_are_candidates():
    assert CANDIDATES


@pytest.mark.parametrize("scenario", KERNEL_SCENARIOS)
@pytest.mark.parametrize("path", CANDIDATES, ids=lambda p: Path(p).stem)
def test_each_candidate_is_safe_for_two_calls_in_every_kernel_scenario(path, scenario):
    result = check(build(load_protocol(path), ScenarioOptions(scenario=scenario, world_size=2, epochs=2)),
                   timeout=120)
    assert result.safe is True, sorted(result.violations)


@pytest.mark.parametrize("scenario", KERNEL_SCENARIOS)
@pytest.mark.parametrize("path", CANDIDATES, ids=lambda p: Path(p).stem)
def test_each_candidates_kernel_runs_the_models_steps(path, scenario):
    pytest.importorskip("triton")
    from syncverify.kernels import drift

    protocol = load_protocol(path)
    ops, timed_out = drift.trace_kernel(protocol, scenario, 2, epochs=2)
    opts = ScenarioOptions(scenario=scenario, world_size=2, symmetry=False, reset=protocol.reset, epochs=2)
    assert drift.compare(drift.model_ops(build(protocol, opts)), ops, timed_out=timed_out) == []


@pytest.mark.parametrize("path", CANDIDATES, ids=lambda p: Path(p).stem)
def test_each_candidate_compiles_to_what_the_model_assumes(path):
    pytest.importorskip("triton")
    from syncverify.kernels.audit import audit, audit_kernel
    from syncverify.kernels.build import build as build_kernel
    from syncverify.kernels.config import KernelConfig

    protocol = load_protocol(path)
    assert audit(protocol, "signal") == [] and audit(protocol, "wait") == []
    for kernel in ("all-reduce", "gemm-reduce-scatter"):
        assert audit_kernel(build_kernel(protocol, KernelConfig(kernel=kernel, m=256, n=256, k=256))) == []
