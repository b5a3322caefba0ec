"""all-gather-gemm and gemm-reduce-scatter in the model (``syncverify.scenarios.build.ROLES``): known
verdicts, the reductions (one GEMM CTA, one symmetry group) agree with the whole program, and the
roles run their steps in the documented order. Their kernels: tests/test_new_scenario_kernels.py."""

from __future__ import annotations

import pytest

from syncverify.verdicts.check import check
from syncverify.protocols import load_protocol
from syncverify.scenarios.build import ROLES, Dot, ScenarioOptions, Stage, TileAccess, build

NEW = ("all-gather-gemm", "gemm-reduce-scatter")


def verdict(protocol: str, scenario: str, world_size: int = 2, **kw) -> str:
    result = check(build(load_protocol(protocol), ScenarioOptions(scenario=scenario, world_size=world_size, **kw)),
                   timeout=120)
    assert result.safe is not None
    return "safe" if result.safe else ", ".join(sorted(result.violations))


@pytest.mark.parametrize("scenario", NEW)
@pytest.mark.parametrize("protocol, safe", [("barrier-fenced-release-acquire", True), ("epoch-flag", True),
                                            ("fenced-release-acquire", False), ("wt-cv-flag", False)])
def test_known_verdicts_and_the_reductions_agree_with_the_whole_program(scenario, protocol, safe):
    reduced = verdict(protocol, scenario)
    assert (reduced == "safe") is safe
    assert verdict(protocol, scenario, symmetry=False) == reduced


def test_a_missing_cta_barrier_races_in_both_new_scenarios():
    for scenario in NEW:
        assert "race" in verdict("fenced-release-acquire", scenario)


def test_the_gemm_waits_for_every_shard_before_reading_and_the_owner_reduces_every_block():
    sender, gemm = ROLES["all-gather-gemm"]
    assert [type(s).__name__ for s in gemm.steps][:2] == ["Stage", "TileAccess"] and gemm.steps[1].block == "each"
    producer, consumer = ROLES["gemm-reduce-scatter"]
    store = next(s for s in producer.steps if isinstance(s, TileAccess))  # after its GEMM and before_store
    assert store.copies == "owner" and consumer.runs_on == "owner"
    scenario = build(load_protocol("epoch-flag"), ScenarioOptions(scenario="gemm-reduce-scatter", world_size=3,
                                                                   symmetry=False))
    owner_reads = {i.loc for t in scenario.program.threads if t.role.role == "consumer" for i in t.instructions
                   if getattr(i, "ghost", False) and i.loc.startswith("inbox")}
    assert owner_reads == {f"inbox.r0.b{b}.t0.s{s}" for b in range(3) for s in range(2)}


@pytest.mark.parametrize("scenario", NEW)
def test_world_sizes_2_to_8_build(scenario):
    for world_size in (2, 8):
        program = build(load_protocol("epoch-flag"), ScenarioOptions(scenario=scenario, world_size=world_size)).program
        assert {t.gpu for t in program.threads} == set(range(world_size))
    assert isinstance(next(s for s in ROLES[scenario][0].steps if not isinstance(s, Dot)), Stage)  # after a GEMM


def test_a_wait_that_consumes_every_ranks_signal_is_checked_with_every_gemm():
    """PyTorch's signal pad in all-gather-gemm: each GEMM's wait CASes every sender's pad 1 -> 0,
    so the first GEMM to pass takes the signal from the others, which wait forever (the kernel
    in the interpreter times out the same way, tests/test_new_scenario_kernels.py). Building only
    rank 0's GEMM (the renaming reduction) hid it; the reduction now keeps every GEMM when a
    wait writes other ranks' copies, and agrees with the whole program."""
    assert verdict("pytorch-signal-pad", "all-gather-gemm") == "hang"
    assert verdict("pytorch-signal-pad", "all-gather-gemm", symmetry=False) == "hang"
