"""NVSHMEM steps in the protocol language (docs/protocols.md, docs/nvshmem.md): the two sides agree.

The protocol pair ``tests/protocols/nvshmem-signal-{no-fence,fence}.toml`` (a tile store, then
``nvshmemx_signal_op`` with or without ``nvshmem_fence``) and the litmus pair
``tests/litmus/known/nvshmem-store-then-signal-{no-fence,fence}.litmus`` state the same rule; the
model must give the same answer through both: the store is not published without the fence
(UNSAFE / Sometimes), and is with it (SAFE / Never). Each side goes through its own front door
(the scenario builder, the litmus parser) and both meet in syncverify.delivery's lowering."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncverify.delivery import Put
from syncverify.errors import ProtocolError
from syncverify.kernels.plan import UnsupportedStep, build_plan
from syncverify.litmus.parser import parse_litmus_file
from syncverify.litmus.runner import run_litmus
from syncverify.protocols.loader import parse_protocol
from syncverify.protocols.registry import load_protocol
from syncverify.scenarios.build import ScenarioOptions, build
from syncverify.verdicts.check import check

ROOT = Path(__file__).resolve().parent.parent
PAIRS = [("no-fence", "Sometimes", False), ("fence", "Never", True)]


def _protocol(which: str):
    return load_protocol(str(ROOT / "tests" / "protocols" / f"nvshmem-signal-{which}.toml"))


@pytest.mark.parametrize("which, observation, safe", PAIRS, ids=[p[0] for p in PAIRS])
def test_the_protocol_and_the_litmus_test_of_one_rule_agree(which, observation, safe):
    litmus = run_litmus(parse_litmus_file(ROOT / "tests" / "litmus" / "known" /
                                          f"nvshmem-store-then-signal-{which}.litmus"))
    assert litmus.observation == observation
    protocol = _protocol(which)
    for scenario in ("all-reduce", "all-scatter"):
        scenario_ = build(protocol, ScenarioOptions(scenario=scenario, world_size=2).validated(protocol))
        verdict = check(scenario_, timeout=120)
        assert verdict.safe is safe, (scenario, verdict)
        if not safe:
            assert set(verdict.violations) & {"unwritten-read", "stale-read", "race"}


def test_a_signal_step_is_one_nvshmem_call_per_copy_on_thread_zero_and_its_agents_are_built():
    protocol = _protocol("fence")
    scenario = build(protocol, ScenarioOptions(scenario="all-reduce", world_size=2).validated(protocol))
    agents = [t for t in scenario.program.threads if ".signal" in t.name]
    assert agents and all(t.instructions[-1].sem == "release" and t.instructions[-1].scope == "sys" for t in agents)
    assert not any(isinstance(ins, Put) for t in scenario.program.threads for ins in t.instructions)


def test_the_kernels_refuse_nvshmem_steps_naming_them():
    with pytest.raises(UnsupportedStep, match="nvshmem_fence"):
        build_plan(_protocol("fence"), world_size=2)


@pytest.mark.parametrize("step, what", [
    ('op = "nvshmem_fence"\nvalue = 1', "does not apply to nvshmem_fence"),
    ('op = "nvshmem_signal_set"', "missing field 'value'"),
    ('op = "nvshmem_signal_add"\nvalue = 1\nsem = "relaxed"', "does not apply to nvshmem_signal_add"),
])
def test_bad_nvshmem_steps_are_one_line_naming_the_field(step, what):
    text = (f'name = "x"\nsummary = "s"\norigin = "o"\n[[signal]]\n{step}\n'
            '[[wait]]\nop = "await"\nread = "load"\nuntil = ">= 1"\n')
    with pytest.raises(ProtocolError) as info:
        parse_protocol(text, path="p.toml")
    assert "\n" not in str(info.value) and what in str(info.value), str(info.value)
