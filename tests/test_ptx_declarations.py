"""What ``syncverify.model.ptx`` declares about itself holds: event tags are checked when an event
is made, each relation depends on no more than it declares (the explorer keeps relations across
choices on the strength of those declarations), and an axiom's kind computes its evidence.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import pytest

from syncverify.explore.driver import candidate_executions
from syncverify.explore.skeleton import STATIC_RELATIONS
from syncverify.litmus.parser import parse_litmus_file
from syncverify.model import ptx
from syncverify.model.events import Event

KNOWN = Path(__file__).parent / "litmus" / "known"
# Tests with fences, barriers, atomics, several locations and launch phases between them.
LITMUS = ("mp-relacq-gpu-diff-cta", "mp-fence-acqrel-gpu", "mp-spin-relacq-gpu", "mp-release-sequence-rmw", "sb-fence-sc-gpu", "iriw-fence-sc-gpu",
          "bar-sync-same-cta", "bar-arrive-sync", "coherence-weak-two-readers", "atom-add-cta-2ctas",
          "cowr-read-init-after-own-write", "coww-weak-racing-final-value")


def test_a_mistyped_tag_is_refused_where_the_event_is_made():
    Event(0, 0, 0, "W", "x", 1, "release", "gpu")
    with pytest.raises(ValueError, match="semantics 'releas'"):
        Event(0, 0, 0, "W", "x", 1, "releas", "gpu")
    with pytest.raises(ValueError, match="kind 'w'"):
        Event(0, 0, 0, "w", "x", 1, "release", "gpu")
    with pytest.raises(ValueError):
        Event(0, 0, 0, "R", "x", 1, "release", "gpu")  # a read has no release semantics


def test_the_explorer_keeps_what_the_model_declares():
    assert set(STATIC_RELATIONS) == set(ptx.lets(ptx.Depends.SHAPE)) >= {"po", "morally_strong", "release_pattern"}
    assert set(ptx.lets(ptx.Depends.COHERENCE)) == {"co", "fr"}
    assert set(ptx.RELATIONS) == {name for depends in ptx.Depends for name in ptx.lets(depends)}


def _fresh(x):
    return replace(x, _memo={})


@pytest.mark.parametrize("name", LITMUS)
def test_each_relation_depends_on_no_more_than_it_declares(name):
    """Candidates of one skeleton share its SHAPE and SKELETON relations; candidates with the same
    reads-from and Fence-SC order share every relation but the COHERENCE ones."""
    program = parse_litmus_file(KNOWN / f"{name}.litmus")
    by_skeleton = defaultdict(list)
    for skeleton, x in candidate_executions(program, prune=False):
        by_skeleton[id(skeleton)].append(_fresh(x))
    kept = set(ptx.lets(ptx.Depends.SHAPE)) | set(ptx.lets(ptx.Depends.SKELETON))
    per_choice = kept | set(ptx.lets(ptx.Depends.READS_FROM))
    compared = 0
    for candidates in by_skeleton.values():
        first = candidates[0]
        by_choice = {}
        for x in candidates:
            for let in kept:
                assert ptx.RELATIONS[let](x) == ptx.RELATIONS[let](first), let
            same = by_choice.setdefault((frozenset(x.rf.items()), x.fence_sc), x)
            for let in per_choice:
                assert ptx.RELATIONS[let](x) == ptx.RELATIONS[let](same), let
            compared += 1
    assert compared > 1


def test_an_axiom_kind_computes_its_evidence():
    cycle = frozenset({(1, 2), (2, 1)})
    assert not ptx.AxiomKind.ACYCLIC.holds(cycle) and sorted(ptx.AxiomKind.ACYCLIC.evidence(cycle)) == [(1, 2), (2, 1)]
    assert ptx.AxiomKind.IRREFLEXIVE.evidence(frozenset({(1, 1), (1, 2)})) == [(1, 1)]
    assert ptx.AxiomKind.EMPTY.evidence(frozenset({(2, 3)})) == [(2, 3)] and ptx.AxiomKind.EMPTY.holds(frozenset())
    assert {axiom.kind for axiom in ptx.AXIOMS} == set(ptx.AxiomKind)
