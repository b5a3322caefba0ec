"""The combination search weighs atomics of every launch together (issue 24, per-rank streams).

:meth:`syncverify.explore.combinations.CombinationSearch.sources_shared_across_launches_fit` and
:meth:`~syncverify.explore.combinations.CombinationSearch.rises_past` (the ``shared-sources``
pruning of :data:`syncverify.explore.driver.PRUNINGS`) stop partial combinations that have no
execution: atomics of different launches reading one write, two atomics reading one value of a
*rising* counter (every write an ``atom.add`` of a positive constant at system scope), and a
spin stuck below a value such a counter surely passes. A pruning only: the explorer must find
the same executions with it and without it. This file holds that differential property over
generated per-rank-stream counter programs (each rank's calls ordered by its stream only, the
shape of ``--launches per-rank-stream``), and the known answer that made it: ``epoch-flag`` in
all-scatter, W = 2, three calls, whose combination search found no complete combination before.
The verdict-level property is ``tests/test_reductions_exact.py``'s
``test_each_explorer_pruning_keeps_the_verdict[shared-sources]``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from tests.limits import LimitBudget
from tests.strategies import observable_executions as observable

from syncverify.explore.bounds import Clock, LimitHit
from syncverify.explore.driver import candidate_executions, explore
from syncverify.program import Atomic, Branch, Label, Load, Phase, Program, Store, Thread
from syncverify.protocols import load_protocol
from syncverify.scenarios.build import ScenarioOptions, build

FULL = os.environ.get("SYNCVERIFY_EXACT_FULL") == "1"  # the exhaustive runs' switch (tests/test_reductions_exact.py)
EXAMPLES = 60 if FULL else 8
TIMEOUT_S = 20.0  # wall clock: a loaded machine (load average 20 measured) gives a check a tenth of it
budget = LimitBudget(3 if not FULL else 12, "explorer")


@st.composite
def per_rank_counter_programs(draw) -> Program:
    """Two ranks, two or three calls each, ordered by each rank's stream only. Each call of a
    rank: a producer that stores its data and adds a constant to its own counter or to both
    ranks' counters; maybe a consumer that polls its own counter up to a target (the calls so
    far, a low one, or one never reached: a hang) and maybe reads the other rank's data; maybe a write
    that is not a rising add (a store of 0 or a CAS reset after the poll), which makes the counter
    not rising."""
    calls = draw(st.sampled_from((2, 3)))
    step = draw(st.sampled_from((1, 2)))
    add_sem = draw(st.sampled_from(("relaxed", "release")))
    poll_sem = draw(st.sampled_from(("relaxed", "acquire")))
    to_all = calls == 2 and draw(st.booleans())  # three calls adding to both counters: too many orders
    consumers = draw(st.booleans())
    target = draw(st.sampled_from(("calls", "low", "never")))
    reset = draw(st.sampled_from((None, None, "store", "cas")))
    data = calls == 2 and draw(st.booleans())  # a data read multiplies the executions
    per_call = step * (2 if to_all else 1)
    threads: list[Thread] = []

    def add(code: list, rank: int, phase: Phase, role: str) -> None:
        threads.append(Thread(f"P{len(threads)}", rank, len(threads), tuple(code), role, phase))

    for e in range(calls):
        for r in (0, 1):
            phase = Phase("launch", e, rank=r)
            code: list = [Store(f"d{r}", e + 1)]
            code += [Atomic("add", "rs", f"x{q}", (step,), sem=add_sem, scope="sys")
                     for q in ((0, 1) if to_all else (r,))]
            add(code, r, phase, "producer")
            if consumers:
                goal = {"calls": per_call * (e + 1), "low": step, "never": per_call * calls + 1}[target]
                code = [Label(f"L{e}{r}"), Load("rw", f"x{r}", sem=poll_sem, scope="sys"),
                        Branch(f"L{e}{r}", "lt", "rw", goal)] + ([Load("rd", f"d{1 - r}")] if data else [])
                if reset == "store" and e == 0:
                    code.append(Store(f"x{r}", 0, sem="relaxed", scope="sys"))
                elif reset == "cas" and e == 0:
                    code.append(Atomic("cas", "rc", f"x{r}", (goal, 0), sem="relaxed", scope="sys"))
                add(code, r, phase, "consumer")
    host_order = tuple((Phase("launch", e, rank=r), Phase("launch", e + 1, rank=r))
                       for e in range(calls - 1) for r in (0, 1))
    return Program("per-rank counters", tuple(threads), host_order=host_order, observed_registers=frozenset())


def explored(program: Program, without: frozenset[str] = frozenset()):
    result = explore(program, timeout=TIMEOUT_S, without=without)
    budget.discard_if_hit(result.limit_hit)
    return result


@budget.guard
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(per_rank_counter_programs())
def test_the_explorer_finds_the_same_executions_with_and_without_weighing_launches_together(program):
    note("\n".join(f"{th.name} {th.phase}: {th.instructions}" for th in program.threads))
    pruned = explored(program)
    whole = explored(program, frozenset({"shared-sources"}))
    assert (pruned.complete_count, pruned.hang_count) == (whole.complete_count, whole.hang_count)
    assert observable(pruned.executions) == observable(whole.executions)
    assert observable(pruned.hangs) == observable(whole.hangs)


class _CheckBound(Clock):
    """A clock that stops an exploration after ``limit`` checks (the combination search checks
    once per 64 partial combinations): a bound that counts work, not seconds, so the known answer
    does not depend on the machine's load."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.checks, self.limit = 0, limit

    def check(self, where: str) -> None:
        self.checks += 1
        if self.checks > self.limit:
            raise LimitHit("checks", where)


def _checks_to_first_candidate(program: Program, without: frozenset[str], limit: int) -> int | None:
    """How many clock checks the explorer makes before its first candidate execution (None: none
    within ``limit``)."""
    clock = _CheckBound(limit)
    try:
        next(candidate_executions(program, clock=clock, without=without))
    except (LimitHit, StopIteration):
        return None
    return clock.checks


def test_epoch_flag_with_per_rank_streams_reaches_a_combination_only_with_launches_weighed_together():
    """Known answer: ``epoch-flag`` in all-scatter, W = 2, three calls on per-rank streams (36
    threads; every producer path reads one of 7 values of each counter). Weighed launch by launch,
    both ranks' call-0 adds can read 0 and a call-0 consumer can stay stuck at 1 while rank 1's
    add has written 2; the search found no complete combination in 814,336 partial ones (60 s).
    Weighed together its first candidate execution comes after 356 clock checks."""
    scenario = build(load_protocol("epoch-flag"), ScenarioOptions(scenario="all-scatter", world_size=2, epochs=3,
                                                                  launches="per-rank-stream", reset="none"))
    assert not scenario.parts  # no split: the whole three-call program
    checks = _checks_to_first_candidate(scenario.program, frozenset(), 1_000)
    assert checks is not None and checks < 500, checks
    # Without it: none in 600 checks (over 30,000 partial combinations; with it: 356 checks).
    assert _checks_to_first_candidate(scenario.program, frozenset({"shared-sources"}), 600) is None
