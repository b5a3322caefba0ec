"""Verdicts for every world size (issue 24, item 4): the cutoff claim against explicit checks.

For every built-in and zoo protocol the argument of ``docs/cutoff.md`` covers (all-reduce, one
tile, each rank writing only its own copies, nothing depending on the world size), the verdicts
at W = 1 .. k + 3 must bear the claim out: if W = 1 .. k are all safe, so is every W up to k + 3;
if some W up to k + 3 is unsafe, so is some W <= k. The whole matrix (about ten minutes on the
2-core machine) runs with ``SYNCVERIFY_CUTOFF_FULL=1``; the default suite runs a slice (one safe
and one unsafe protocol, W up to k + 1). Its last full run is recorded in ``docs/cutoff.md``.
"""

from __future__ import annotations

import json
import os

import pytest
from syncverify.cli import main
from syncverify.protocols import load_protocol
from syncverify.protocols.registry import builtin_names, zoo_names
from syncverify.scenarios.build import ScenarioOptions, build
from syncverify.verdicts.check import check
from syncverify.verdicts.cutoff import CUTOFF, coverage

FULL = os.environ.get("SYNCVERIFY_CUTOFF_FULL") == "1"
SLICE = ("iris-462-sys-scope-release", "iris-462-gpu-scope-release")


def options_for(name: str) -> ScenarioOptions:
    """All-reduce with the zoo file's calls and launch order (built-ins: one call)."""
    zoo = load_protocol(name).zoo
    if zoo is None:
        return ScenarioOptions(scenario="all-reduce")
    return ScenarioOptions(scenario="all-reduce", epochs=zoo.epochs, launches=zoo.launches)


def covered() -> list[str]:
    names = [n for n in builtin_names() + zoo_names() if coverage(load_protocol(n), options_for(n)).cutoff]
    return names if FULL else [n for n in names if n in SLICE]


def test_the_fragment_takes_own_copy_flags_and_leaves_out_counters_and_cross_rank_writes():
    assert coverage(load_protocol("iris-462-sys-scope-release"), ScenarioOptions()).cutoff == CUTOFF
    assert "to = 'all'" in coverage(load_protocol("add-counter"), ScenarioOptions()).why_not
    assert "as it reads them" in coverage(load_protocol("pytorch-signal-pad"), ScenarioOptions()).why_not
    assert "all-reduce scenario only" in coverage(load_protocol("iris-462-sys-scope-release"),
                                                  ScenarioOptions(scenario="all-scatter")).why_not
    assert "one tile" in coverage(load_protocol("iris-462-sys-scope-release"), ScenarioOptions(tiles=2)).why_not


@pytest.mark.parametrize("name", covered())
def test_the_cutoff_claim_agrees_with_explicit_checks_up_to_k_plus_3(name):
    protocol, options = load_protocol(name), options_for(name)
    top = CUTOFF + 3 if FULL else CUTOFF + 1
    safe = {}
    for world in range(1, top + 1):
        result = check(build(protocol, ScenarioOptions(**{**options.__dict__, "world_size": world})), timeout=300)
        assert result.limit_hit is None, (name, world, result.limit_hit)
        safe[world] = result.safe
    below = [safe[w] for w in range(1, CUTOFF + 1)]
    if all(below):
        assert all(safe.values()), (name, safe)  # the claim "safe for every world size" holds
    if not all(safe.values()):
        assert not all(below), (name, safe)  # a violation above the cutoff has one below it


def test_check_prints_the_claim_only_where_the_argument_covers_it(capsys):
    assert main(["check", "iris-462-sys-scope-release", "--world-size", "4"]) == 0
    assert f"world sizes: safe for every world size (cutoff {CUTOFF}" in capsys.readouterr().out
    assert main(["check", "barrier-fenced-release-acquire", "--json"]) == 0
    claim = json.loads(capsys.readouterr().out)["world_sizes"]
    assert claim.startswith("checked for W = 2 only (signal step 3 writes other ranks' copies")
    assert main(["check", "iris-462-gpu-scope-release"]) == 1
    assert "world sizes: checked for W = 2\n" in capsys.readouterr().out
