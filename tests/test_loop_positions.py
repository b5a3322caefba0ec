"""Loop positions are the instructions on a control-flow cycle (``syncverify.program.loop_positions``).

They used to be the spans between a backward branch's target and the branch. Code the kernel
front end lifts jumps backward to merge paths with equal futures (``syncverify.frontend.lift``),
a jump that closes no cycle: its span made increments after the merge count as unbounded (no
value ceiling: the value domain searched for witnesses of values no execution writes, 150 s of
all-scatter's ``done-flag``) and kept value classes off for the whole thread. Cycles answer what
every use asks: can this instruction run twice in one run of the thread.

Tests: known answers; spans and cycles agree on every program the protocol check builds
(structured code); and the differential property: a program explored with the former definition
(structured code, where it is right) against the same program with one thread's code laid out
with backward merge jumps (:func:`rotated`, the lifted code's shape) explored with cycles: the
same outcomes and hangs, although the reductions loop positions gate now apply to more of it.
(A loop of increments is not drawn: with reads answered from the value domain such a loop runs
past the explorer's step bound, which is why protocols poll with loads or read-only atomics.)
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from tests.limits import LimitBudget
from tests.strategies import listing, programs, programs_with_a_spin

from syncverify.explore.driver import explore
from syncverify.explore.value_domain import value_ceiling
from syncverify.program import Atomic, Branch, Label, Load, Program, Store, Thread, loop_positions
from syncverify.errors import SyncVerifyError
from syncverify.protocols import load_protocol
from syncverify.protocols.registry import builtin_names, zoo_names
from syncverify.scenarios.build import SCENARIOS, ScenarioOptions, build

budget = LimitBudget(3, "explorer")


def spans(code: tuple) -> set[int]:
    """The former definition: between a backward branch's target and the branch."""
    labels = {ins.name: i for i, ins in enumerate(code) if isinstance(ins, Label)}
    return {p for j, ins in enumerate(code) if isinstance(ins, Branch) and labels[ins.target] <= j
            for p in range(labels[ins.target], j + 1)}


def rotated(code: tuple, cut: int) -> tuple:
    """``code`` = B + C laid out as ``goto Lb; La: C; goto END; Lb: B; goto La; END:``: the same
    control flow, with a backward jump (``goto La``) that closes no cycle."""
    b, c = code[:cut], code[cut:]
    return ((Branch("rot.B"), Label("rot.C")) + c + (Branch("rot.END"), Label("rot.B")) + b
            + (Branch("rot.C"), Label("rot.END")))


# ----- known answers -------------------------------------------------------------------------------

def test_a_merge_jump_backward_is_no_loop_but_a_spin_is():
    straight = (Store("x", 1), Atomic("add", "r0", "x", (1,), "relaxed", "sys"), Load("r1", "y"))
    assert loop_positions(rotated(straight, 1)) == set()
    assert spans(rotated(straight, 1))  # what the span took for a loop
    spin = (Label("L"), Load("r2", "y", sem="acquire", scope="sys"), Branch("L", "eq", "r2", 0))
    code = rotated(straight + spin, 2)
    inside = {i for i, ins in enumerate(code) if ins in spin}
    assert loop_positions(code) == inside
    assert loop_positions(spin) == spans(spin) == {0, 1, 2}


def test_a_loop_closed_through_a_merge_jump_is_still_a_loop():
    # L: ld r, y; goto M; ... M: beq r, 0, L  (the cycle passes a forward and a backward jump)
    code = (Label("L"), Load("r0", "y", sem="acquire", scope="sys"), Branch("M"), Store("x", 1),
            Label("M"), Branch("L", "eq", "r0", 0), Store("x", 2))
    assert loop_positions(code) == {0, 1, 2, 4, 5}


def test_cycles_and_spans_agree_on_the_structured_code_of_every_protocol_in_every_scenario():
    for scenario in SCENARIOS:
        for name in builtin_names() + zoo_names():
            try:
                built = build(load_protocol(name), ScenarioOptions(scenario=scenario, world_size=2, symmetry=False))
            except SyncVerifyError as error:  # a protocol a scenario refuses: nothing to compare
                note(f"{scenario}/{name}: {error}")
                continue
            for thread in built.program.threads:
                assert loop_positions(thread.instructions) == spans(thread.instructions), (scenario, name, thread.name)


# ----- the differential property --------------------------------------------------------------------

def _outcomes(result, *, hangs: bool = False) -> frozenset:
    return frozenset((frozenset(x.final_registers.items()), frozenset(x.final_memory.items()))
                     for x in (result.hangs if hangs else result.executions))


@st.composite
def programs_and_a_rotated_thread(draw) -> tuple[Program, Program]:
    """A small program (a spin in some), and the same with one thread's code rotated."""
    program = draw(st.one_of(programs(max_instructions=3, max_accesses=5),
                             programs_with_a_spin(max_instructions=3, max_accesses=5)))
    t = draw(st.integers(0, len(program.threads) - 1))
    code = program.threads[t].instructions
    cut = draw(st.integers(0, len(code)))
    threads = list(program.threads)
    threads[t] = replace(threads[t], instructions=rotated(code, cut))
    return program, replace(program, threads=tuple(threads))


#: Where the explorer reads loop positions (each module imported the function by name).
USERS = ("syncverify.program", "syncverify.explore.liveness", "syncverify.explore.value_domain",
         "syncverify.explore.value_classes")


def explored_with_spans(program: Program):
    """The reference: ``program`` (structured code) explored with the former definition."""
    with pytest.MonkeyPatch.context() as patch:
        for module in USERS:
            patch.setattr(f"{module}.loop_positions", spans)
        return explore(program, max_executions=20_000, timeout=6.0)


@budget.guard
@settings(max_examples=60, deadline=None)
@given(programs_and_a_rotated_thread())
def test_laying_a_thread_out_with_backward_merge_jumps_keeps_outcomes_and_hangs(pair):
    program, laid_out = pair
    note(listing(laid_out))
    results = [explored_with_spans(program), explore(laid_out, max_executions=20_000, timeout=6.0)]
    for result in results:
        budget.discard_if_hit(result.limit_hit)
    before, after = results
    # Outcomes (final registers and memory) of the executions and of the hangs: event numbers
    # are not compared, as the layout changes the order in which locations are first named.
    assert _outcomes(after) == _outcomes(before)
    assert _outcomes(after, hangs=True) == _outcomes(before, hangs=True)
    assert after.can_hang == before.can_hang


def test_a_counter_incremented_after_a_merge_jump_gets_its_value_ceiling():
    """What the change buys: the increment after the merge is bounded, so its location has a
    ceiling (and the value domain needs no witness search above it)."""
    code = rotated((Load("r0", "y", sem="acquire", scope="sys"), Atomic("add", "r1", "x", (1,), "release", "sys")), 1)
    program = Program("merge", (Thread("P0", 0, 0, code), Thread("P1", 0, 1, (Atomic("add", "r0", "x", (1,), "relaxed", "sys"),))))
    assert value_ceiling(program)["x"] == 2
