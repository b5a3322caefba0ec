"""Programs with several launches (phases ordered by the host) and a lock reset between them:
the explorer's phase-aware pruning (what a launch can see, a reset hiding earlier writes, the
atomicity count of a counter's increments) against brute force, which prunes nothing.

The scenarios of ``syncverify check`` are built from exactly these pieces (two epochs of
``atom.add`` counters and a host reset between them), so a pruning rule that dropped a real
execution of them would show here first, on programs small enough for brute force.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import observable_executions
from tests.limits import LimitBudget

from syncverify.explore.combinations import summarize, supported_combinations
from syncverify.explore.driver import brute_force, explore, value_candidates, value_domain
from syncverify.program import Atomic, Branch, Label, Load, Program, Store, Thread

#: host order per reset policy (as syncverify.scenarios.build._resets builds it)
HOST_ORDERS = {
    "none": (("e0", "e1"),),
    "host-between-barriers": (("e0", "reset"), ("reset", "e1")),
    "host-racing": (("e0", "reset"), ("e0", "e1")),
}

atomic_flavours = st.tuples(st.sampled_from(["relaxed", "release", "acq_rel"]), st.sampled_from(["gpu", "sys"]))


def spin_until(reg: str, target: int, poll: str) -> tuple:
    """A consumer's wait: poll ``x`` until it reaches ``target`` (a load, or a CAS(0, 0) that
    writes back the 0 it reads, as the add-counter protocols' waits do)."""
    read = (Load(reg, "x", "acquire", "sys") if poll == "load"
            else Atomic("cas", reg, "x", (0, 0), "acquire", "sys"))
    return (Label("L"), read, Branch("L", "lt", reg, target))


@st.composite
def counter_launches(draw) -> Program:
    """Two launches that count on ``x``, each maybe with a consumer that spins until a target;
    a reset of ``x`` between them per the drawn policy."""
    policy = draw(st.sampled_from(sorted(HOST_ORDERS)))
    spinning = draw(st.sampled_from(["e0", "e1", None]))  # one spin at most: brute force is slow
    threads = []
    # (a spinning launch may have no increment of its own: it waits on what earlier ones left)
    counts = {phase: draw(st.integers(0 if phase == spinning else 1, 2 if spinning in (None, phase) else 1))
              for phase in ("e0", "e1")}
    for phase, count in counts.items():
        for i in range(count):
            gpu = draw(st.integers(0, 1))
            if draw(st.booleans()) or i == 0:
                sem, scope = draw(atomic_flavours)
                code = (Atomic("add", f"r{len(threads)}", "x", (1,), sem, scope),)
            else:
                code = (Load(f"r{len(threads)}", "x", "acquire", "sys"),)
            threads.append(Thread(f"P{len(threads)}", gpu, len(threads), code, phase=phase))
        if phase == spinning:  # a target above the count can hang; one below it cannot
            code = spin_until(f"r{len(threads)}", draw(st.integers(1, 3)), draw(st.sampled_from(["load", "cas"])))
            threads.append(Thread(f"P{len(threads)}", draw(st.integers(0, 1)), len(threads), code, phase=phase))
    if policy != "none":
        strong = draw(st.booleans())
        store = Store("x", 0, "relaxed", "sys") if strong else Store("x", 0)
        threads.append(Thread(f"P{len(threads)}", 0, len(threads), (store,), phase="reset"))
    return Program(f"counter/{policy}", tuple(threads), host_order=HOST_ORDERS[policy])


def outcomes(executions) -> frozenset:
    return frozenset((frozenset(x.final_registers.items()), frozenset(x.final_memory.items()))
                     for x in executions)


def hung(result) -> frozenset:
    """Each hang as (which threads are stuck, final memory): the hang executions themselves."""
    return frozenset((frozenset(x.stuck), frozenset(x.final_memory.items())) for x in result.hangs)


# Brute force lists every partial coherence order of a racing weak reset: more examples outrun it.
budget = LimitBudget(16, "brute force")


@budget.guard
@settings(max_examples=100, deadline=None, derandomize=True)
@given(counter_launches())
def test_phase_pruning_keeps_every_execution_brute_force_finds(program):
    fast = explore(program, timeout=30)
    assert fast.limit_hit is None
    slow = brute_force(program, timeout=10)
    budget.discard_if_hit(slow.limit_hit)
    assert outcomes(fast.executions) == outcomes(slow.executions)
    # Counts differ where a weak reset races (brute force counts every partial coherence order);
    # what each execution shows must not.
    assert observable_executions(fast.executions) == observable_executions(slow.executions)
    assert hung(fast) == hung(slow)


def test_a_reset_after_the_launch_does_not_stop_the_increments_from_counting():
    # Two system-scoped increments in launch 0 and a weak reset after it: the reset's 0 is not
    # a write launch 0 can read, so the two increments read 0 and 1 (in either order), never 0
    # and 0. The combination search must know it (the atomicity count used to give up on any
    # weak write of the value, and every such combination then failed one by one, later).
    program = Program("two-adds-then-reset", (
        Thread("P0", 0, 0, (Atomic("add", "r0", "x", (1,), "relaxed", "sys"),), phase="e0"),
        Thread("P1", 1, 1, (Atomic("add", "r1", "x", (1,), "relaxed", "sys"),), phase="e0"),
        Thread("P2", 0, 2, (Store("x", 0),), phase="reset"),
    ), host_order=(("e0", "reset"),))
    _domain, paths = value_domain(program)
    summaries = [[summarize(p) for p in per_thread] for per_thread in paths]
    reads = {tuple(paths[t][i].registers for t, i in enumerate(picks))[:2]
             for picks in supported_combinations(program, summaries, atomicity=True)}
    assert reads == {((("r0", 0),), (("r1", 1),)), ((("r0", 1),), (("r1", 0),))}
    assert {(x.final_registers[("P0", "r0")], x.final_registers[("P1", "r1")])
            for x in brute_force(program).executions} == {(0, 1), (1, 0)}


def test_value_candidates_are_the_literal_plus_some_increments():
    # Two +1 increments, a +3 and a reset to 0: the counter can only hold 0 plus a subset sum of
    # {1, 1, 3}. A poll by atomic_add(0) in a loop adds no value. A second literal (a store of
    # 5), an add inside a loop, or of a register, leaves the location to the witness search.
    add = lambda b: Atomic("add", "r", "x", (b,), "relaxed", "sys")  # noqa: E731
    program = Program("candidates", (
        Thread("P0", 0, 0, (add(1), add(3))),
        Thread("P1", 0, 1, (add(1), Store("x", 0, "relaxed", "sys"))),
        Thread("P2", 0, 2, (Label("L"), add(0), Branch("L", "lt", "r", 2))),
    ))
    assert value_candidates(program)["x"] == {0, 1, 2, 3, 4, 5}
    five = Program("five", program.threads + (Thread("P3", 0, 3, (Store("x", 5),)),))
    assert "x" not in value_candidates(five)
    looping = Program("loop", (Thread("P0", 0, 0, (Label("L"), add(1), Branch("L", "lt", "r", 2), Store("y", 0))),))
    assert value_candidates(looping) == {"y": {0}}


@pytest.mark.parametrize("earlier_launch, all_read_zero", [(False, True), (True, False)])
def test_the_atomicity_count_skips_a_weak_write_only_while_it_can_be_read_out_of_order(earlier_launch, all_read_zero):
    # Three system-scoped increments and a weak store of 0. In one launch the store is not
    # morally strong with the atomics, so each of them may read it and put its own write
    # coherence-before it: all three can read 0 from two writes of 0, and counting the writes
    # of 0 would lose that execution. In an earlier launch the store causally precedes them:
    # they cannot read the initial 0 behind it, nor share it, so at most one reads 0.
    add = lambda reg: Atomic("add", reg, "x", (1,), "relaxed", "sys")  # noqa: E731
    phase = "e1" if earlier_launch else ""
    program = Program("weak-zero", (
        Thread("P0", 0, 0, (Store("x", 0),), phase="e0" if earlier_launch else ""),
        Thread("P1", 0, 1, (add("a"),), phase=phase),
        Thread("P2", 1, 2, (add("b"),), phase=phase),
        Thread("P3", 1, 3, (add("c"),), phase=phase),
    ), host_order=(("e0", "e1"),) if earlier_launch else ())

    def reads(result) -> set:
        return {tuple(x.final_registers[(f"P{t}", r)] for t, r in ((1, "a"), (2, "b"), (3, "c")))
                for x in result.executions}

    fast = reads(explore(program))
    assert ((0, 0, 0) in fast) is all_read_zero
    assert fast == reads(brute_force(program))


def test_narrow_increments_get_no_value_candidates():
    # Found by the explorer-vs-brute-force property: with value candidates for this x, the CAS
    # read a 2 that only the red.add could write after reading the CAS's own 1 (cta scope in two
    # CTAs: not morally strong, so SC-per-Location does not forbid the cycle). 2 is never written.
    program = Program("narrow", (
        Thread("P0", 0, 0, (Atomic("add", None, "x", (1,), "relaxed", "cta"),)),
        Thread("P1", 0, 1, (Atomic("cas", "r0", "x", (2, 1), "relaxed", "cta"),)),
    ))
    assert "x" not in value_candidates(program)
    for result in (explore(program), brute_force(program)):
        assert {x.final_registers[("P1", "r0")] for x in result.executions} == {0, 1}
