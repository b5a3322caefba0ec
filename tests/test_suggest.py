"""``syncverify.verdicts.suggest``: the weakest fix of every unsafe built-in (world size 2, all-reduce unless
noted), each fix re-checked safe, its diff, the search's bounds, and ``check --suggest``."""

from __future__ import annotations

import json

import pytest

from syncverify.verdicts.check import check_protocol
from syncverify.cli import main
from syncverify.protocols import builtin_names, load_protocol, parse_protocol
from syncverify.verdicts.suggest import protocol_toml, suggest

SAFE = {"barrier-fenced-release-acquire", "epoch-flag"}
UNSAFE = sorted(set(builtin_names()) - SAFE)


@pytest.mark.parametrize("name", UNSAFE)
def test_every_unsafe_builtin_gets_a_fix_that_checks_safe_or_an_explicit_no_fix(name):
    fixes = suggest(name, timeout=60)
    assert fixes.stopped is None
    if fixes:
        for fix in fixes:
            assert check_protocol(fix.protocol, timeout=30).safe is True, fix.description
            assert fix.diff.startswith(f"--- a/{name}.toml")
        assert len({len(f.changes) for f in fixes}) == 1  # only the smallest fixes
    else:
        assert fixes.message.startswith("no fix within 2 strengthenings")


def test_the_missing_cta_barrier_is_the_smallest_fix_of_fenced_release_acquire():
    fixes = suggest("fenced-release-acquire")
    assert fixes[0].description.startswith("add a CTA barrier")
    assert len(fixes[0].changes) == 1
    assert '+op = "barrier"' in fixes[0].diff


def test_a_fix_in_all_scatter_is_safe_in_all_scatter():
    fixes = suggest("add-counter", scenario="all-scatter")
    for fix in fixes:
        assert check_protocol(fix.protocol, scenario="all-scatter", timeout=30).safe is True
    assert fixes or "no fix" in fixes.message


def test_a_diff_names_the_field_a_sem_change_sets():
    # xchg-flag's fixes make the weak local flag store release: the diff shows the new sem.
    fixes = suggest("xchg-flag")
    sem_fixes = [f for f in fixes if any(c.kind == "sem" for c in f.changes)]
    assert sem_fixes
    for fix in sem_fixes:
        assert '+sem = "release"' in fix.diff
        assert '-cache = ".wt"' in fix.diff  # a release store takes no cache modifier


def test_a_tiny_bound_stops_the_search_and_says_how_many_were_tried():
    fixes = suggest("add-counter-skip-self", max_checks=3)
    assert fixes.stopped == "max-checks" and fixes.tried == 3
    assert "stopped" in fixes.message and "3 candidates tried" in fixes.message


def test_a_safe_protocol_has_nothing_to_fix():
    fixes = suggest("epoch-flag")
    assert not fixes and fixes.safe_already and "nothing to fix" in fixes.message


@pytest.mark.parametrize("name", builtin_names())
def test_the_toml_writer_round_trips_every_builtin(name):
    protocol = load_protocol(name)
    assert parse_protocol(protocol_toml(protocol)) == protocol


def test_check_suggest_keeps_the_verdicts_exit_code_and_prints_fixes(capsys):
    assert main(["check", "fenced-release-acquire", "--suggest"]) == 1
    text = capsys.readouterr().out
    assert "fix 1: add a CTA barrier" in text and "+++ b/fenced-release-acquire.toml" in text
    assert main(["check", "epoch-flag", "--suggest"]) == 0
    assert "nothing to fix" in capsys.readouterr().out


def test_check_suggest_json_has_suggestions(capsys):
    assert main(["check", "fenced-release-acquire", "--suggest", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["suggestions"][0]["description"].startswith("add a CTA barrier")
    assert {"changes", "description", "diff"} <= set(data["suggestions"][0])
    assert len(data["suggestions"]) <= 5
