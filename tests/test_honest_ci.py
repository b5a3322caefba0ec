"""Issue 23, item 9: what a team adopting syncverify in CI needs: every verdict prints its bounds
and assumptions, a versioned ``--json`` schema, a baseline of accepted findings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import syncverify
from syncverify.cli import main
from syncverify.json_schema import SCHEMA_VERSION, SCHEMAS, problems

DOC = Path(__file__).resolve().parents[1] / "docs" / "json-schema.md"
SB = str(Path(syncverify.__file__).parent / "litmus" / "examples" / "sb.litmus")


def test_safe_prints_its_bounds_and_assumptions(capsys):
    assert main(["check", "barrier-fenced-release-acquire", "--world-size", "3", "--epochs", "2",
                 "--threads-per-cta", "1"]) == 0
    text = capsys.readouterr().out
    assumes = next(line for line in text.splitlines() if "assumes:" in line)
    for phrase in ("PTX memory model", "3 ranks", "2 calls", "1 threads per CTA", "holds for these bounds only"):
        assert phrase in assumes, assumes


@pytest.mark.parametrize("command, argv", [
    ("check", ["check", "xchg-flag", "--json"]),
    ("check", ["check", "barrier-fenced-release-acquire", "--json"]),
    ("litmus", ["litmus", SB, "--json"]),
    ("compare", ["compare", "xchg-flag", "--scenario", "all-reduce", "--no-gpu", "--json", "--jobs", "1"]),
])
def test_json_outputs_follow_the_versioned_schema(capsys, command, argv):
    main(argv)
    doc = json.loads(capsys.readouterr().out)
    assert problems(doc, command) == []
    first = doc[0] if isinstance(doc, list) else doc
    assert first["schema_version"] == SCHEMA_VERSION and first["command"] == command


def test_the_schema_document_names_every_key():
    text = DOC.read_text()
    assert f"schema version {SCHEMA_VERSION}" in text
    missing = [f"{command}.{key}" for command, keys in SCHEMAS.items() for key in keys if f"`{key}`" not in text]
    assert missing == []


def test_check_json_assumptions(capsys):
    main(["check", "xchg-flag", "--json", "--world-size", "3"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["assumptions"]["world_size"] == 3 and doc["assumptions"]["calls"] == 1
    assert doc["assumptions"]["exhaustive"] is True


def test_a_baseline_accepts_findings_but_still_lists_them(tmp_path, capsys):
    base = tmp_path / "baseline.json"
    assert main(["check", "xchg-flag", "--write-baseline", str(base)]) == 1
    capsys.readouterr()
    assert main(["check", "xchg-flag", "--baseline", str(base)]) == 0
    text = capsys.readouterr().out
    assert "UNSAFE" in text and "accepted" in text and "counterexample for race" in text
    assert main(["check", "xchg-flag", "--baseline", str(base), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert sorted(doc["accepted"]) == ["race", "unwritten-read"]
    assert all(v["accepted"] for v in doc["violations"])


def test_a_baseline_does_not_accept_another_protocol_or_scenario(tmp_path, capsys):
    base = tmp_path / "baseline.json"
    main(["check", "xchg-flag", "--write-baseline", str(base)])
    assert main(["check", "xchg-flag", "--scenario", "all-scatter", "--world-size", "3", "--baseline", str(base)]) == 1
    assert main(["check", "fenced-release-acquire", "--baseline", str(base)]) == 1


def test_a_bad_baseline_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert main(["check", "xchg-flag", "--baseline", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a baseline file" in err[0]


def test_list_json_is_versioned(capsys):
    for argv in (["list", "--json"], ["list", "--zoo", "--json"]):
        assert main(argv) == 0
        assert problems(json.loads(capsys.readouterr().out), "list") == []
