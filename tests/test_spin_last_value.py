"""A stuck spin must see its value last (issue 23 item 5): the combination search drops a stuck
spin on ``(x, v)`` as soon as a write of another value to ``x`` surely happens in its launch (or
one the host orders before it) and nothing its launch sees can write ``v`` again.

Known answer: all-scatter at W = 8 with ``from = "each"`` (every consumer polls every rank's
flag), which found no execution in 60 s: each consumer's paths stuck at one of the eight flags
multiplied the combinations, every one dropped only once its skeleton was built. Property: with
and without the rule, the same executions, outcomes and hangs on small flag programs with
launches, barriers that may cut a write off, resets and spins on every value; and the same as
brute force.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncverify.explore.combinations import CombinationSearch
from syncverify.explore.driver import brute_force, explore
from syncverify.program import Atomic, Barrier, Branch, Label, Load, Program, Store, Thread
from syncverify.protocols import load_protocol
from syncverify.scenarios.build import ScenarioOptions, build
from syncverify.verdicts.check import check
from tests.limits import LimitBudget
from tests.strategies import observable_executions

HOST_ORDERS = ((), (("e0", "e1"),), (("e0", "reset"), ("reset", "e1")))
budget = LimitBudget(8, "brute force")


def test_all_scatter_at_eight_ranks_polling_each_rank_decides():
    protocol = load_protocol("iris-462-gpu-scope-release")  # from = "each", gpu-scope release
    result = check(build(protocol, ScenarioOptions(scenario="all-scatter", world_size=8)), timeout=60)
    assert result.limit_hit is None
    assert result.safe is False and "race" in result.violations
    assert result.executions == 9


def poll_while_equal(value: int) -> Thread:
    return Thread("S", 0, 0, (Label("L"), Load("r", "x", "acquire", "sys"), Branch("L", "eq", "r", value)), phase="e0")


def raise_to(name: str, cta: int, value: int) -> Thread:
    return Thread(name, 0, cta, (Store("x", value, "relaxed", "sys"),), phase="e0")


def test_a_spin_on_the_initial_value_cannot_hang_once_its_launch_overwrites_it():
    program = Program("one-flag", (poll_while_equal(0), raise_to("A", 1, 2)))
    assert not explore(program).hangs  # x ends at 2: the spin's 0 is never last
    assert explore(program).executions


def test_a_spin_hangs_when_a_thread_assigned_after_it_may_write_its_value_last():
    # S polls while x == 1; A writes 2 and B writes 1: B's 1 may be last, so S may hang, although
    # when the search has assigned S and A the write of 1 is still to come (B's slot).
    program = Program("two-flags", (poll_while_equal(1), raise_to("A", 1, 2), raise_to("B", 2, 1)))
    assert len(explore(program).hangs) == 1
    assert len(brute_force(program).hangs) >= 1


def writer(draw, name: str, cta: int, phase: str) -> Thread:
    """A write of 0, 1 or 2 to ``x`` (weak, relaxed or an exchange), maybe after a barrier."""
    value = draw(st.integers(0, 2))
    kind = draw(st.sampled_from(("weak", "relaxed", "exch")))
    write = (Store("x", value) if kind == "weak" else Store("x", value, "relaxed", "sys") if kind == "relaxed"
             else Atomic("exch", "old", "x", (value,), "relaxed", draw(st.sampled_from(("gpu", "sys")))))
    code = ((Barrier("sync", 0),) if draw(st.booleans()) else ()) + (write,)
    return Thread(name, draw(st.integers(0, 1)), cta, code, phase=phase)


def spinner(draw, name: str, cta: int, phase: str) -> Thread:
    """A poll of ``x`` until it is (or is not) a drawn value, maybe arriving at a barrier first."""
    target = draw(st.integers(0, 2))
    test = draw(st.sampled_from(("ne", "eq")))
    code = (Label("L"), Load("r", "x", "acquire", "sys"), Branch("L", test, "r", target))
    if draw(st.booleans()):
        code = (Barrier("sync", 0),) + code
    return Thread(name, 0, cta, code, phase=phase)


@st.composite
def flag_launches(draw) -> Program:
    """One or two launches of writers and one spinner on ``x``, threads sharing CTAs now and
    then (a barrier there may never complete), and maybe a host reset between the launches."""
    host_order = draw(st.sampled_from(HOST_ORDERS))
    phases = sorted({p for pair in host_order for p in pair} - {"reset"}) or ["e0"]
    threads = []
    spin_phase = draw(st.sampled_from(phases))
    for k, phase in enumerate(phases):  # each launch its own CTAs
        count = draw(st.integers(1 if phase != spin_phase else 0, 2))
        # The spinner anywhere among its launch's writers: the search may assign it before them.
        spin_at = draw(st.integers(0, count)) if phase == spin_phase else -1
        for i in range(count + (phase == spin_phase)):
            make = spinner if i == spin_at else writer
            threads.append(make(draw, f"P{len(threads)}", 3 * k + draw(st.integers(0, 2)), phase))
    if any("reset" in pair for pair in host_order):
        threads.append(Thread(f"P{len(threads)}", 0, 9, (Store("x", 0),), phase="reset"))
    return Program("flags", tuple(threads), host_order=host_order)


def seen(result) -> tuple:
    return (observable_executions(result.executions),
            frozenset((frozenset(x.stuck), frozenset(x.final_memory.items())) for x in result.hangs))


@budget.guard
@settings(max_examples=40, deadline=None)
@given(flag_launches())
def test_dropping_spins_that_cannot_see_their_value_last_keeps_every_execution(program):
    with_rule = explore(program, timeout=20)
    assert with_rule.limit_hit is None
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(CombinationSearch, "spin_cannot_see_its_value_last", lambda self, position, lo: False)
        without = explore(program, timeout=20)
    assert seen(with_rule) == seen(without)
    if sum(isinstance(i, (Store, Atomic)) for th in program.threads for i in th.instructions) <= 3:
        # Brute force lists every partial coherence order of the writes: only small ones.
        slow = brute_force(program, timeout=10)
        budget.discard_if_hit(slow.limit_hit)
        assert seen(with_rule) == seen(slow)
