"""Coherence is the ISA's partial order (``syncverify.model.ptx`` modeling choice 1), checked on candidate
executions directly: Coherence2 rejects morally strong writes left unordered, and nothing
rejects weak racing writes left unordered.
"""

from __future__ import annotations

from dataclasses import replace

from syncverify.model import ptx
from syncverify.explore.driver import brute_force, candidate_executions, explore
from syncverify.litmus.parser import parse_litmus

TWO_WRITERS = """PTX two-writers
"two writers, one reader that reads both"
{{ x=0; P2:r0=0; P2:r1=0; }}
 P0@cta 0,gpu 0 | P1@cta 0,gpu 0 | P2@cta 0,gpu 0       ;
 st.{sem} x, 1  | st.{sem} x, 2  | ld.acquire.sys r0, x ;
                |                | ld.acquire.sys r1, x ;
exists (P2:r0 == 1 /\\ P2:r1 == 2)
"""


def _writes(x, loc="x"):
    return [e.eid for e in x.events if e.is_write and e.loc == loc and not e.is_init]


def _unordered_candidates(sem: str):
    """Every brute-force candidate with the two writes' coherence pair taken out (brute force
    itself never leaves a morally strong pair unordered)."""
    program = parse_litmus(TWO_WRITERS.format(sem=sem))
    for _skeleton, x in candidate_executions(program, prune=False):
        a, b = _writes(x)
        yield replace(x, co_rel=ptx.co(x) - {(a, b), (b, a)}, _memo={})


def test_coherence2_rejects_morally_strong_writes_left_unordered():
    found = list(_unordered_candidates("relaxed.sys"))
    assert found
    for x in found:
        assert "Coherence2" in {axiom.name for axiom, _evidence in ptx.violated_axioms(x)}


def test_weak_racing_writes_may_stay_unordered_in_a_consistent_execution():
    assert any(ptx.is_consistent(x) for x in _unordered_candidates("weak"))


def test_coherence_is_transitive_and_the_final_value_is_coherence_maximal():
    program = parse_litmus(TWO_WRITERS.format(sem="weak"))
    for x in explore(program).executions:
        co = ptx.co(x)
        assert all((a, c) in co for a, b in co for b2, c in co if b == b2)
        last = x.co["x"][-1]
        assert not any((last, other) in co for other in _writes(x))


def test_the_explorer_and_brute_force_agree_on_both_readings_of_racing_writes():
    for sem in ("weak", "relaxed.sys"):
        program = parse_litmus(TWO_WRITERS.format(sem=sem))
        assert explore(program).outcomes == brute_force(program).outcomes
