"""Properties of the model checker against independent references, on random small programs.

The references: ``tests/reference/sc.py`` (an operational SC interpreter; the PTX model allows at
least what SC allows) and ``syncverify.explore.driver.brute_force`` (every candidate execution, no
pruning). An example on which the explorer hits one of its limits is discarded with ``assume``
rather than ``pytest.skip`` (a skip raised inside ``@given`` would skip the whole property); a
property decorated with :func:`few_limit_hits` fails afterwards if more than ``MAX_LIMIT_HITS`` of
its examples hit a limit, since its strategy is then too big to test anything.

Sizes: the explorer's cost grows steeply with the number of memory accesses (median ~0.05 s at 7
accesses, ~1 s at 9 on one core), so the strategies cap them at 7 (5 for ``brute_force``).
"""

from __future__ import annotations


import pytest
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st

from tests.limits import LimitBudget

from syncverify.explore.driver import brute_force, explore
from syncverify.program import (
    Atomic,
    Barrier,
    Branch,
    Fence,
    Label,
    Load,
    Program,
    RegOp,
    Store,
    Thread,
)
from tests.reference.sc import StateSpaceExceeded, sc_outcomes
from tests.strategies import (
    all_strong_sys_with_sc_fences,
    listing,
    program_and_strengthened,
    programs,
    programs_with_a_spin,
    programs_with_barriers,
    programs_with_racing_weak_writes,
)
from tests.strategies import observable_executions as observable

MAX_EXECUTIONS = 20_000
TIMEOUT_S = 6.0  # generous: a loaded machine must not make examples hit it (tests/limits.py)
MAX_LIMIT_HITS = 3
MAX_ACCESSES = 7

budget = LimitBudget(MAX_LIMIT_HITS, "explorer")
few_limit_hits = budget.guard


def outcomes(result) -> frozenset:
    """The outcome set of an explorer result: final registers and final memory of each execution."""
    return frozenset(
        (frozenset(e.final_registers.items()), frozenset(e.final_memory.items())) for e in result.executions
    )


def explored(program: Program, *, brute: bool = False):
    """Run the explorer (or ``brute_force``) on ``program``; discard the example on a limit."""
    note(listing(program))
    run = brute_force if brute else explore
    result = run(program, max_executions=MAX_EXECUTIONS, timeout=TIMEOUT_S)
    budget.discard_if_hit(result.limit_hit)
    return result


def show(outcome_set) -> list:
    """Outcomes sorted and readable, for assertion messages."""
    return sorted((sorted(regs), sorted(mem)) for regs, mem in outcome_set)


def agree_including_hangs(program: Program, hangs=lambda result: observable(result.hangs)) -> None:
    """The explorer and brute force find the same outcomes, executions and hanging executions
    (``hangs``: what of a result's hangs is compared)."""
    fast = explored(program)
    slow = explored(program, brute=True)
    assert outcomes(fast) == outcomes(slow), (
        f"explorer only: {show(outcomes(fast) - outcomes(slow))}; "
        f"brute force only: {show(outcomes(slow) - outcomes(fast))}"
    )
    # Execution counts differ legitimately under partial coherence (one memory order per final
    # value, against every partial order): compare what can be observed.
    assert observable(fast.executions) == observable(slow.executions)
    assert hangs(fast) == hangs(slow)


# ----- properties ------------------------------------------------------------------------------

@few_limit_hits
@settings(max_examples=150, deadline=None)
@given(programs(max_accesses=MAX_ACCESSES))
def test_every_sequentially_consistent_outcome_is_allowed(program):
    result = explored(program)
    missing = sc_outcomes(program).outcomes - outcomes(result)
    assert not missing, f"SC outcomes the explorer forbids: {show(missing)}"


@few_limit_hits
@settings(max_examples=100, deadline=None)
@given(program_and_strengthened(max_accesses=MAX_ACCESSES))
def test_strengthening_an_access_or_adding_a_fence_never_adds_an_outcome(pair):
    weaker, stronger = pair
    before = outcomes(explored(weaker))
    after = outcomes(explored(stronger))
    assert after <= before, f"outcomes only the stronger program has: {show(after - before)}"


@few_limit_hits
@settings(max_examples=80, deadline=None)
@given(programs(max_instructions=3, max_accesses=5))
def test_explorer_and_brute_force_agree(program):
    fast = explored(program)
    slow = explored(program, brute=True)
    assert outcomes(fast) == outcomes(slow), (
        f"explorer only: {show(outcomes(fast) - outcomes(slow))}; "
        f"brute force only: {show(outcomes(slow) - outcomes(fast))}"
    )
    assert observable(fast.executions) == observable(slow.executions), (
        f"{len(observable(fast.executions))} observably different executions from the explorer, "
        f"{len(observable(slow.executions))} from brute force"
    )


@few_limit_hits
@settings(max_examples=60, deadline=None)
@given(programs_with_barriers(max_instructions=3, max_accesses=5))
def test_explorer_and_brute_force_agree_on_programs_with_named_barriers_including_hangs(program):
    agree_including_hangs(program)


@few_limit_hits
@settings(max_examples=60, deadline=None)
@given(programs_with_racing_weak_writes(max_instructions=2, max_accesses=1))
def test_explorer_and_brute_force_agree_when_weak_writes_race(program):
    agree_including_hangs(program)


@few_limit_hits
@settings(max_examples=60, deadline=None)
@given(programs_with_racing_weak_writes(max_instructions=3, max_accesses=MAX_ACCESSES - 2))
def test_every_sequentially_consistent_outcome_with_racing_weak_writes_is_allowed(program):
    result = explored(program)
    missing = sc_outcomes(program).outcomes - outcomes(result)
    assert not missing, f"SC outcomes the explorer forbids: {show(missing)}"


@few_limit_hits
@settings(max_examples=50, deadline=None)
@given(programs_with_a_spin(max_instructions=3, max_accesses=4))
def test_explorer_and_brute_force_agree_on_spinning_programs_including_hangs(program):
    agree_including_hangs(program)


@few_limit_hits
@settings(max_examples=80, deadline=None)
@given(programs(max_instructions=3, max_accesses=MAX_ACCESSES, with_fences=False).map(all_strong_sys_with_sc_fences))
def test_outcomes_with_sc_fences_between_every_pair_of_accesses_are_sc_when_all_strong_sys(program):
    explorer = outcomes(explored(program))
    sc = sc_outcomes(program).outcomes
    assert explorer == sc, f"explorer only: {show(explorer - sc)}; SC only: {show(sc - explorer)}"


@few_limit_hits
@settings(max_examples=100, deadline=None)
@given(programs_with_a_spin(max_instructions=3, max_accesses=MAX_ACCESSES - 2))
def test_every_sequentially_consistent_outcome_of_a_spinning_program_is_allowed(program):
    result = explored(program)
    missing = sc_outcomes(program).outcomes - outcomes(result)
    assert not missing, f"SC outcomes the explorer forbids: {show(missing)}"


@few_limit_hits
@settings(max_examples=100, deadline=None)
@given(programs_with_a_spin(max_instructions=3, max_accesses=MAX_ACCESSES - 2))
def test_a_program_that_can_hang_under_sequential_consistency_can_hang_for_the_explorer(program):
    sc = sc_outcomes(program)
    assume(sc.can_hang)
    assert explored(program).can_hang


# ----- the SC reference itself, on programs with known answers --------------------------------

def two_threads(p0, p1, **kwargs) -> Program:
    return Program("t", (Thread("P0", 0, 0, tuple(p0)), Thread("P1", 0, 0, tuple(p1))), **kwargs)


def regs_of(result, *keys):
    return {tuple(dict(regs).get(k) for k in keys) for regs, _ in result.outcomes}


def test_sc_forbids_message_passing_reading_the_flag_but_not_the_data():
    p = two_threads([Store("x", 1), Store("y", 1)], [Load("r1", "y"), Load("r2", "x")])
    got = regs_of(sc_outcomes(p), ("P1", "r1"), ("P1", "r2"))
    assert got == {(0, 0), (0, 1), (1, 1)}


def test_sc_forbids_store_buffering_both_reading_zero():
    p = two_threads([Store("x", 1), Load("r0", "y")], [Store("y", 1), Load("r1", "x")])
    got = regs_of(sc_outcomes(p), ("P0", "r0"), ("P1", "r1"))
    assert got == {(0, 1), (1, 0), (1, 1)}


def test_sc_two_racing_atomic_adds_always_sum():
    add = Atomic("add", None, "x", (1,))
    result = sc_outcomes(two_threads([add], [add]))
    assert {dict(mem)["x"] for _, mem in result.outcomes} == {2}
    assert not result.can_hang


def test_sc_atomic_results_are_the_old_values_and_cas_writes_only_on_success():
    p = two_threads([Atomic("exch", "r0", "x", (1,))], [Atomic("cas", "r1", "x", (0, 2))])
    got = {(dict(regs)[("P0", "r0")], dict(regs)[("P1", "r1")], dict(mem)["x"]) for regs, mem in sc_outcomes(p).outcomes}
    # exch first: cas sees 1, fails, x stays 1; cas first: succeeds (x=2), exch returns 2, x=1.
    assert got == {(0, 1, 1), (2, 0, 1)}


def test_sc_spin_on_a_value_nobody_writes_is_stuck_with_no_outcome():
    spin = [Label("L"), Load("r0", "y"), Branch("L", "eq", "r0", 0)]
    result = sc_outcomes(two_threads(spin, [Store("x", 1)]))
    assert result.can_hang
    assert result.outcomes == frozenset()


def test_sc_spin_released_by_the_other_thread_terminates_and_is_not_a_hang():
    spin = [Label("L"), Load("r0", "y"), Branch("L", "eq", "r0", 0), Load("r1", "x")]
    result = sc_outcomes(two_threads(spin, [Store("x", 1), Store("y", 1)]))
    assert not result.can_hang
    assert regs_of(result, ("P0", "r0"), ("P0", "r1")) == {(1, 1)}


def test_sc_spin_that_some_runs_leave_unreleased_can_hang():
    # P1 releases the spin only if its cas wins against P0's exchange.
    spin = [Atomic("exch", "r9", "x", (1,)), Label("L"), Load("r0", "y"), Branch("L", "eq", "r0", 0)]
    release = [Atomic("cas", "r1", "x", (0, 2)), Branch("E", "ne", "r1", 0), Store("y", 1), Label("E")]
    result = sc_outcomes(two_threads(spin, release))
    assert result.can_hang
    assert regs_of(result, ("P1", "r1")) == {(0,)}


def test_sc_bar_sync_orders_the_threads_of_a_cta():
    p = two_threads([Store("x", 1), Barrier("sync")], [Barrier("sync"), Load("r0", "x")])
    result = sc_outcomes(p)
    assert regs_of(result, ("P1", "r0")) == {(1,)}
    assert not result.can_hang


def test_sc_bar_sync_does_not_involve_another_cta():
    p = Program("t", (Thread("P0", 0, 0, (Store("x", 1), Barrier("sync"))),
                      Thread("P1", 0, 1, (Barrier("sync"), Load("r0", "x")))))
    assert regs_of(sc_outcomes(p), ("P1", "r0")) == {(0,), (1,)}


def test_sc_bar_arrive_does_not_wait_but_counts_for_the_sync():
    producer = [Store("x", 1), Barrier("arrive", 1, count=2), Store("x", 2)]
    consumer = [Barrier("sync", 1, count=2), Load("r0", "x")]
    assert regs_of(sc_outcomes(two_threads(producer, consumer)), ("P1", "r0")) == {(1,), (2,)}


def test_sc_a_barrier_one_participant_never_reaches_again_is_stuck():
    p = two_threads([Barrier("sync"), Barrier("sync")], [Barrier("sync")])
    result = sc_outcomes(p)
    assert result.can_hang
    assert result.outcomes == frozenset()


def test_sc_barrier_in_a_loop_is_a_finite_state_space():
    # Both threads pass the barrier three times; P0 counts its rounds.
    loop = [RegOp("mov", "i", 0), Label("L"), Barrier("sync"), RegOp("add", "i", "i", 1), Branch("L", "lt", "i", 3)]
    ones = [Barrier("sync")] * 3 + [Load("r0", "x")]
    result = sc_outcomes(two_threads(loop, ones))
    assert regs_of(result, ("P0", "i")) == {(3,)}
    assert not result.can_hang


def test_sc_fences_are_no_ops():
    plain = two_threads([Store("x", 1), Load("r0", "y")], [Store("y", 1), Load("r1", "x")])
    fenced = two_threads([Store("x", 1), Fence("sc", "sys"), Load("r0", "y")],
                         [Store("y", 1), Fence("sc", "sys"), Load("r1", "x")])
    assert sc_outcomes(plain).outcomes == sc_outcomes(fenced).outcomes


def test_sc_an_unbounded_counter_is_refused_not_searched_forever():
    count = [Label("L"), Atomic("add", None, "x", (1,)), Branch("L")]
    with pytest.raises(StateSpaceExceeded):
        sc_outcomes(two_threads(count, [Load("r0", "x")]), max_states=1000)


@settings(max_examples=200, deadline=None)
@given(programs())
def test_sc_reference_runs_every_loop_free_program_to_completion(program):
    result = sc_outcomes(program)
    assert result.outcomes and not result.can_hang
    # Every drawn register is written in every run of a loop-free program.
    written = {(t.name, i.dst) for t in program.threads for i in t.instructions if getattr(i, "dst", None)}
    assert all({k for k, _ in regs} == written for regs, _ in result.outcomes)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_strategies_draw_valid_small_and_truly_stronger_programs(data):
    weaker, stronger = data.draw(program_and_strengthened(max_accesses=5))
    assert weaker != stronger
    accesses = sum(isinstance(i, (Load, Store, Atomic)) for t in weaker.threads for i in t.instructions)
    assert accesses <= 5
    fenced = all_strong_sys_with_sc_fences(weaker)
    for thread in fenced.threads:
        kinds = [type(i) for i in thread.instructions]
        assert all(not (a is not Fence and b is not Fence) for a, b in zip(kinds, kinds[1:]))
        assert all(getattr(i, "sem", "x") != "weak" and getattr(i, "scope", "sys") == "sys"
                   for i in thread.instructions)


def unobserved(program: Program) -> Program:
    """``program`` with no register observed (as a scenario's): dead poll and exchange registers
    let the explorer branch on value classes (syncverify.explore.value_classes) instead of values."""
    return Program(program.name, program.threads, program.init, program.registers,
                   host_order=program.host_order, observed_registers=frozenset())


def hangs_without_registers(result) -> frozenset:
    """Hangs as (reads-from, final memory, stuck threads): a thread cut at a barrier keeps final
    registers of reads that never happen, which a scenario (observing none) does not look at."""
    return frozenset((frozenset(x.rf.items()), frozenset(x.final_memory.items()), frozenset(x.stuck))
                     for x in result.hangs)


@few_limit_hits
@settings(max_examples=60, deadline=None)
@given(programs_with_a_spin(max_instructions=3, max_accesses=4).map(unobserved))
def test_explorer_and_brute_force_agree_when_no_register_is_observed(program):
    agree_including_hangs(program, hangs_without_registers)


@few_limit_hits
@settings(max_examples=40, deadline=None)
@given(programs_with_barriers(max_instructions=3, max_accesses=4).map(unobserved))
def test_explorer_and_brute_force_agree_on_barrier_programs_when_no_register_is_observed(program):
    agree_including_hangs(program, hangs_without_registers)
