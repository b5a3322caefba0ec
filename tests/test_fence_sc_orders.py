"""Fence-SC orders (issue 24, item 2): only the morally strong pairs of ``fence.sc`` events are
ordered, per reads-from choice, lazily; the orders every permutation would give are the same.

Known answers: a tail handshake of twelve ``fence.sc.cta`` over two calls (undecided at 115 s
when every permutation of the fences was listed) decides with the verdict its ``fence.acq_rel``
twin gets; two ``.cta`` fences of different CTAs are never ordered against each other. The
property: on generated programs full of ``fence.sc`` at every scope, the explorer's executions
(reads-from, final state, ``sync_fence``, data races) are brute force's, whose Fence-SC orders
are every permutation of the fences.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hypothesis import given, note, settings
from hypothesis import strategies as st

from syncverify.explore.driver import brute_force, explore
from syncverify.model import ptx
from syncverify.program import SCOPES, Fence, Load, Program, Store, Thread
from syncverify.protocols.loader import parse_protocol
from syncverify.scenarios.build import ScenarioOptions, build
from syncverify.verdicts.check import check
from tests.limits import LimitBudget
from tests.strategies import listing, programs

FIXTURE = Path(__file__).parent / "protocols" / "tail-handshake-fence-sc-cta.toml"
budget = LimitBudget(3, "fence.sc property")


def tail_handshake(sem: str):
    """The fixture's protocol with its fences' ``sem`` as given (``sc`` as written)."""
    text = FIXTURE.read_text(encoding="utf-8").replace('sem = "sc"', f'sem = "{sem}"')
    return parse_protocol(text, path=str(FIXTURE))


def test_twelve_fence_sc_cta_over_two_calls_decide_as_their_acq_rel_twin():
    options = ScenarioOptions(scenario="all-reduce", world_size=2, epochs=2, launches="per-rank-stream")
    fenced = build(tail_handshake("sc"), options)
    assert sum(isinstance(i, Fence) and i.kind == "sc" for th in fenced.program.threads for i in th.instructions) == 12
    sc = check(fenced, timeout=60)
    acq_rel = check(build(tail_handshake("acq_rel"), options), timeout=60)
    assert sc.limit_hit is None and acq_rel.limit_hit is None
    assert sc.safe is False and sorted(sc.violations) == sorted(acq_rel.violations)
    # One execution per orientation of the six same-CTA fence pairs that nothing orders: 2^6.
    assert (sc.executions, acq_rel.executions) == (64, 1)


def two_threads(first: Thread, second: Thread) -> Program:
    return Program("sb", (first, second))


def store_buffering(scope: str, cta_of_second: int) -> Program:
    """SB with a ``fence.sc.SCOPE`` in each thread, the second thread in CTA ``cta_of_second``."""
    def side(name: str, cta: int, mine: str, other: str) -> Thread:
        return Thread(name, 0, cta, (Store(mine, 1, "relaxed", "gpu"), Fence("sc", scope),
                                     Load("r0", other, "relaxed", "gpu")))
    return two_threads(side("P0", 0, "x", "y"), side("P1", cta_of_second, "y", "x"))


def both_read_zero(result) -> bool:
    return any(x.final_registers[("P0", "r0")] == 0 and x.final_registers[("P1", "r0")] == 0
               for x in result.executions)


def test_cta_fences_of_two_ctas_are_never_ordered_so_store_buffering_stays_weak():
    apart = explore(store_buffering("cta", 1))
    assert both_read_zero(apart)
    assert all(ptx.fence_sc_order(x) == frozenset() for x in apart.executions)


def test_morally_strong_fences_are_ordered_both_ways_and_forbid_store_buffering():
    for scope, cta in (("cta", 0), ("gpu", 1)):
        together = explore(store_buffering(scope, cta))
        assert not both_read_zero(together)
        orders = {ptx.fence_sc_order(x) for x in together.executions}
        assert len(orders) == 2 and all(len(o) == 1 for o in orders)


@st.composite
def programs_full_of_sc_fences(draw) -> Program:
    """A small program whose fences are all ``fence.sc``, with one more ``fence.sc`` of a drawn
    scope inserted into each thread: several morally strong and not morally strong pairs."""
    program = draw(programs(max_instructions=3, max_accesses=4))
    threads = []
    for th in program.threads:
        code = [Fence("sc", i.scope) if isinstance(i, Fence) else i for i in th.instructions]
        at = draw(st.integers(0, len(code)))
        code.insert(at, Fence("sc", draw(st.sampled_from(SCOPES))))
        threads.append(replace(th, instructions=tuple(code)))
    return replace(program, threads=tuple(threads))


def verdict_view(result) -> frozenset:
    """What a verdict can read of each execution: reads-from, final state, the Fence-SC order's
    morally strong pairs, and its data races."""
    return frozenset((frozenset(x.rf.items()), frozenset(x.final_registers.items()),
                      frozenset(x.final_memory.items()), ptx.fence_sc_order(x), frozenset(ptx.data_races(x)))
                     for x in result.executions)


@budget.guard
@settings(max_examples=40, deadline=None)
@given(programs_full_of_sc_fences())
def test_lazy_fence_sc_orders_give_what_every_permutation_gives(program):
    note(listing(program))
    fast = explore(program, timeout=6.0)
    slow = brute_force(program, timeout=6.0)
    budget.discard_if_hit(fast.limit_hit or slow.limit_hit)
    assert verdict_view(fast) == verdict_view(slow)
    assert {frozenset(x.rf.items()) for x in fast.hangs} == {frozenset(x.rf.items()) for x in slow.hangs}
