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
            assert fix.diff.startswith("--- ") and fix.diff.splitlines()[0].endswith(f"{name}.toml")
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
    assert "fix 1: add a CTA barrier" in text and "+++ protocols/fenced-release-acquire.toml" in text
    assert main(["check", "epoch-flag", "--suggest"]) == 0
    assert "nothing to fix" in capsys.readouterr().out


def test_check_suggest_json_has_suggestions(capsys):
    assert main(["check", "fenced-release-acquire", "--suggest", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["suggestions"][0]["description"].startswith("add a CTA barrier")
    assert {"changes", "description", "diff"} <= set(data["suggestions"][0])
    assert len(data["suggestions"]) <= 5


# ----- diffs of the file as written, one fix per lowering (issue 23, item 4) ---------------------

RELAXED_POLL = """\
# A counter whose consumers poll with a relaxed load: no acquire. The comments, the keys' order
# and the defaults left out (lock, to's default, reset, tile_store) must survive every fix.
name = "relaxed-poll"
summary = "release atomic_add(1) to every rank after a CTA barrier; consumers poll relaxed"
origin = "tests/test_suggest.py"

[[signal]]
op = "barrier"

[[signal]]  # the count
op = "atomic_add"
to = "all"
value = 1
sem = "release"
scope = "sys"

[[wait]]
op = "await"
read = "load"
sem = "relaxed"   # the bug: no acquire
scope = "sys"
until = ">= world_size"

[[wait]]
op = "barrier"
"""


def _applied(directory, name: str, diff: str, tool: list[str]) -> str:
    """``diff`` applied by ``tool`` (reading the diff on stdin) to a fresh copy of the file."""
    import shutil
    import subprocess

    work = directory / tool[0]
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    shutil.copy(directory / name, work / name)
    done = subprocess.run(tool, input=diff, text=True, cwd=work, capture_output=True)
    assert done.returncode == 0, (tool, done.stdout, done.stderr, diff)
    return (work / name).read_text()


@pytest.mark.parametrize("source, epochs", [("relaxed-poll", 1), ("iris-465-hardcoded-lock-value", 2)])
def test_every_suggested_diff_applies_to_the_file_as_written(source, epochs, tmp_path, monkeypatch, capsys):
    import shutil

    from syncverify.protocols.registry import load_protocol as load

    if source == "relaxed-poll":
        (tmp_path / "lock.toml").write_text(RELAXED_POLL)
    else:  # a real protocol file: comments, defaults left out, a [zoo] table after the steps
        shutil.copy(load_protocol(source).path, tmp_path / "lock.toml")
    original = (tmp_path / "lock.toml").read_text()
    monkeypatch.chdir(tmp_path)
    assert main(["check", "lock.toml", "--epochs", str(epochs), "--suggest", "--json"]) == 1
    fixes = json.loads(capsys.readouterr().out)["suggestions"]
    assert len(fixes) >= 2
    for fix in fixes:
        assert fix["diff"].startswith("--- lock.toml\n+++ lock.toml\n"), fix["diff"]
        for tool in (["patch", "-p0"], ["git", "apply", "-p0", "-"]):
            if shutil.which(tool[0]) is None:
                continue
            fixed = _applied(tmp_path, "lock.toml", fix["diff"], tool)
            kept = [line for line in original.splitlines() if line.startswith("#")]
            assert all(line in fixed.splitlines() for line in kept)  # the comments stay
            protocol = load(str(tmp_path / tool[0] / "lock.toml"))
            assert check_protocol(protocol, epochs=epochs).safe is True, fix["description"]


def test_two_fixes_that_lower_to_the_same_ptx_are_one(tmp_path, capsys):
    # sem = "acquire" on the load, or an acquire atomic_add(0): both are ld.acquire.sys on one
    # thread, then bar.sync (protocols/lowering.py)
    path = tmp_path / "lock.toml"
    path.write_text(RELAXED_POLL)
    fixes = suggest(str(path))
    assert [f.description for f in fixes] == ["make wait step 1's sem acquire",
                                              "add an acquire fence (sys) after wait step 1"]
    assert fixes[0].same_ptx == ("poll with an acquire atomic_add(0) at sys scope instead of a load in wait step 1",)
    assert main(["check", str(path), "--suggest"]) == 1
    assert "  (the same PTX as: poll with an acquire atomic_add(0)" in capsys.readouterr().out
