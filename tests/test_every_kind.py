"""The check stops once every violation kind the program can show has a witness (:mod:`syncverify.verdicts.kinds`).

The verdict is the set of kinds; once each kind the program can show has one, and an execution
without a hang has been found (later stages and calls count only then), more executions cannot
change it. ``tests/test_reductions_exact.py``'s ``test_each_explorer_pruning_keeps_the_verdict[every-kind]``
compares the verdicts with and without the stop over generated protocols; here, known answers.
"""

from __future__ import annotations

from syncverify.program import Barrier, Branch, Label, Load, Program, Store, Thread
from syncverify.protocols import load_protocol
from syncverify.scenarios.build import ScenarioOptions, build
from syncverify.verdicts.check import check
from syncverify.verdicts.kinds import KINDS, cannot_hang, possible_kinds

ZOO = "protocols/zoo"


def _program(*codes, ctas=None) -> Program:
    return Program("p", tuple(Thread(f"P{i}", 0, (ctas or range(len(codes)))[i], tuple(code))
                              for i, code in enumerate(codes)))


def test_only_straight_line_code_with_matching_whole_cta_barriers_cannot_hang():
    store, load = Store("x", 1), Load("r", "x")
    sync = Barrier("sync")
    assert cannot_hang(_program([store, sync, load], [sync, store], ctas=[0, 0]))
    assert possible_kinds(_program([store], [load])) == KINDS - {"hang"}
    loop = [Label("L"), Load("r", "x", "relaxed", "sys"), Branch("L", "eq", "r", 0)]
    assert not cannot_hang(_program(loop, [Store("x", 1, "relaxed", "sys")]))  # a poll can spin forever
    assert possible_kinds(_program(loop)) == KINDS
    assert not cannot_hang(_program([sync, sync], [sync], ctas=[0, 0]))  # a second instance one thread never reaches
    assert not cannot_hang(_program([Barrier("sync", 1)], [Barrier("sync", 2)], ctas=[0, 0]))
    assert not cannot_hang(_program([Barrier("arrive")], [sync], ctas=[0, 0]))  # arrive and sync: counts differ
    assert not cannot_hang(_program([Barrier("sync", 0, 64)], [sync], ctas=[0, 0]))
    assert cannot_hang(_program([sync], [Barrier("sync", 1)]))  # other CTAs: their own barriers


def test_a_check_that_shows_every_kind_stops_with_the_same_verdict():
    """``add-counter-skip-self`` in all-reduce, W = 2, three calls on per-rank streams shows all
    four kinds (issue 24's performance table); stopped at the fourth, with fewer executions."""
    scenario = build(load_protocol("add-counter-skip-self"),
                     ScenarioOptions(world_size=2, epochs=3, launches="per-rank-stream", reset="none"))
    stopped = check(scenario, timeout=120)
    whole = check(scenario, timeout=120, without=frozenset({"every-kind"}))
    assert stopped.limit_hit is None and whole.limit_hit is None
    assert set(stopped.violations) == set(whole.violations) == KINDS
    assert stopped.every_kind and not whole.every_kind and not stopped.stopped_at_first
    assert stopped.executions < whole.executions
    assert stopped.to_json()["every_kind"] is True


def test_a_safe_check_never_stops_early():
    scenario = build(load_protocol("barrier-fenced-release-acquire"), ScenarioOptions(world_size=2, epochs=2))
    result = check(scenario, timeout=120)
    assert result.safe is True and not result.every_kind
