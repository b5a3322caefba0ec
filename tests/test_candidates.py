"""Candidate protocols timed for issue 28 (``benchmarks/protocols/``, ``benchmarks/profile_tail.py``):
each is proven safe by the model for two calls in the kernels ``benchmarks/protocols/scenarios.json``
lists (and, where it names fewer than four, unsafe in the others: the list is not merely short),
and, like a built-in, its kernels run the model's steps (drift test) and compile to what the model
assumes (PTX audit)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from syncverify.protocols import load_protocol
from syncverify.scenarios.build import KERNEL_SCENARIOS, ScenarioOptions, build
from syncverify.verdicts.check import check

HERE = Path(__file__).parent.parent / "benchmarks" / "protocols"
SCENARIOS: dict = json.loads((HERE / "scenarios.json").read_text())
PAIRS = [(name, scenario) for name in sorted(SCENARIOS) for scenario in KERNEL_SCENARIOS]


def _load(name: str):
    return load_protocol(HERE / f"{name}.toml")


def test_every_candidate_file_is_listed():
    assert {p.stem for p in HERE.glob("*.toml")} == set(SCENARIOS)


@pytest.mark.parametrize("name, scenario", PAIRS)
def test_each_candidate_is_safe_for_two_calls_exactly_where_it_is_listed(name, scenario):
    result = check(build(_load(name), ScenarioOptions(scenario=scenario, world_size=2, epochs=2)), timeout=120)
    assert result.safe is (scenario in SCENARIOS[name]), sorted(result.violations)


@pytest.mark.parametrize("name, scenario", [p for p in PAIRS if p[1] in SCENARIOS[p[0]]])
def test_each_candidates_kernel_runs_the_models_steps(name, scenario):
    pytest.importorskip("triton")
    from syncverify.kernels import drift

    protocol = _load(name)
    ops, timed_out = drift.trace_kernel(protocol, scenario, 2, epochs=2)
    opts = ScenarioOptions(scenario=scenario, world_size=2, symmetry=False, reset=protocol.reset, epochs=2)
    assert drift.compare(drift.model_ops(build(protocol, opts)), ops, timed_out=timed_out) == []


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_each_candidate_compiles_to_what_the_model_assumes(name):
    pytest.importorskip("triton")
    from syncverify.kernels.audit import audit, audit_kernel
    from syncverify.kernels.build import build as build_kernel
    from syncverify.kernels.config import KernelConfig

    protocol = _load(name)
    assert audit(protocol, "signal") == [] and audit(protocol, "wait") == []
    for kernel in SCENARIOS[name]:
        assert audit_kernel(build_kernel(protocol, KernelConfig(kernel=kernel, m=256, n=256, k=256))) == []


def test_the_guard_bar_before_a_poll_is_accepted_only_after_another_poll_step(monkeypatch):
    """The audit lets a ``bar.sync`` stand before a broadcast poll when the step before it also
    polled (Triton's write-after-read guard of the shared broadcast slot, which epoch-flag-local's
    second wait has): before the first poll of a wait it is still an operation the model lacks."""
    pytest.importorskip("triton")
    from syncverify.kernels import audit as audit_module

    original = audit_module.protocol_ops
    guard = next(op for op in original(_load("epoch-flag-local"), "wait") if op.kind == "bar")
    monkeypatch.setattr(audit_module, "protocol_ops", lambda protocol, side, **kw: [guard]
                        + original(protocol, side, **kw))
    problems = audit_module.audit(load_protocol("epoch-flag"), "wait")
    assert problems and problems[0].startswith("wait step 1 (await)")
