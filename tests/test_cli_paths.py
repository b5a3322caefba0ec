"""Options that write files (``check --graph FILE``, ``litmus --graph DIR``, ``stress --output FILE``):
a path that cannot be written is bad input (one line, exit 2) found before the run; the verdict is
printed before anything is drawn, and a drawing failure keeps the verdict's exit code."""

from __future__ import annotations

import doctest
import json
import os
from pathlib import Path

import pytest

import syncverify
import syncverify.cli.check as cli_check
import syncverify.cli.litmus as cli_litmus
import syncverify.cli.stress as cli_stress
from syncverify.cli import main
from syncverify.cli import output_files as paths
from syncverify.cli.output_files import OutputPathError, check_writable

SB = str(Path(syncverify.__file__).parent / "litmus" / "examples" / "sb.litmus")
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


# --- the bad paths, built under tmp_path: name -> (path, phrase of the one line) -----------------

def bad_files(tmp: Path) -> dict[str, tuple[Path, str]]:
    (tmp / "a-dir.png").mkdir()
    (tmp / "a-file").write_text("x")
    cases = {
        "missing parent": (tmp / "nope" / "x.png", f"directory {tmp / 'nope'} does not exist"),
        "a directory": (tmp / "a-dir.png", "is a directory"),
        "parent is a file": (tmp / "a-file" / "x.png", f"{tmp / 'a-file'} is not a directory"),
        "unwritable location": (Path("/proc/syncverify-x.png"), "cannot create a file in /proc"),
    }
    if not IS_ROOT:  # root may write a read-only file, so there is nothing to refuse
        (tmp / "ro.png").write_text("x")
        (tmp / "ro.png").chmod(0o444)
        cases["read-only file"] = (tmp / "ro.png", "file is not writable")
    return cases


def bad_dirs(tmp: Path) -> dict[str, tuple[Path, str]]:
    (tmp / "a-file").write_text("x")
    return {
        "missing parent": (tmp / "nope" / "graphs", f"directory {tmp / 'nope'} does not exist"),
        "a file": (tmp / "a-file", "is a file; give a directory"),
        "parent is a file": (tmp / "a-file" / "graphs", f"{tmp / 'a-file'} is not a directory"),
        "unwritable location": (Path("/proc/syncverify-graphs"), "cannot create a directory in /proc"),
    }


FILE_CASES = ["missing parent", "a directory", "parent is a file", "unwritable location",
              pytest.param("read-only file", marks=pytest.mark.skipif(IS_ROOT, reason="root writes read-only files"))]
DIR_CASES = ["missing parent", "a file", "parent is a file", "unwritable location"]


def _never_called(*args, **kwargs):
    pytest.fail("the run started although an output path could not be written")


def assert_one_line_exit_2(code, captured, option, path, phrase):
    assert code == 2, captured
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert f"{option} {path}" in lines[0] and phrase in lines[0], lines[0]
    assert "Traceback" not in captured.out + captured.err
    assert captured.out == ""


# --- refused before the run ---------------------------------------------------------------------

@pytest.mark.parametrize("case", FILE_CASES)
def test_check_graph_that_cannot_be_written_is_exit_2_before_the_check(case, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli_check, "check", _never_called)
    monkeypatch.setattr(cli_check, "sample", _never_called)
    path, phrase = bad_files(tmp_path)[case]
    code = main(["check", "xchg-flag", "--graph", str(path)])
    assert_one_line_exit_2(code, capsys.readouterr(), "--graph", path, phrase)


@pytest.mark.parametrize("case", DIR_CASES)
def test_litmus_graph_dir_that_cannot_be_written_is_exit_2_before_any_test(case, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli_litmus, "run_litmus", _never_called)
    path, phrase = bad_dirs(tmp_path)[case]
    code = main(["litmus", SB, "--graph", str(path)])
    assert_one_line_exit_2(code, capsys.readouterr(), "--graph", path, phrase)


@pytest.mark.parametrize("case", FILE_CASES)
def test_stress_output_that_cannot_be_written_is_exit_2_before_the_campaign(case, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli_stress, "run_campaign", _never_called)
    path, phrase = bad_files(tmp_path)[case]
    code = main(["stress", "--protocol", "xchg-flag", "--interpret", "--iterations", "1", "--output", str(path)])
    assert_one_line_exit_2(code, capsys.readouterr(), "--output", path, phrase)


def test_nothing_is_created_by_refusing_a_path(tmp_path):
    with pytest.raises(OutputPathError):
        check_writable(tmp_path / "nope" / "x.png", "--graph")
    with pytest.raises(OutputPathError):
        check_writable(tmp_path / "nope" / "graphs", "--graph", kind="dir")
    assert list(tmp_path.iterdir()) == []


def test_a_writable_path_is_returned_and_the_probe_leaves_nothing_behind(tmp_path):
    assert check_writable(str(tmp_path / "x.png"), "--graph") == tmp_path / "x.png"
    assert check_writable(tmp_path / "graphs", "--graph", kind="dir") == tmp_path / "graphs"
    assert check_writable(tmp_path, "--graph", kind="dir") == tmp_path
    assert list(tmp_path.iterdir()) == []


def test_the_helper_example_runs():
    assert doctest.testmod(paths).failed == 0


# --- good paths: existing files are overwritten (graphs) or appended to (stress) -----------------

def test_check_graph_overwrites_an_existing_file_and_prints_the_verdict(tmp_path, capsys):
    png = tmp_path / "x.png"
    png.write_text("an old file")
    assert main(["check", "xchg-flag", "--graph", str(png)]) == 1
    out = capsys.readouterr().out
    assert "xchg-flag in all-reduce: UNSAFE" in out
    assert f"graph of the first counterexample: {png}" in out
    assert png.read_bytes().startswith(b"\x89PNG")


def test_litmus_graph_creates_a_missing_directory_whose_parent_exists(tmp_path, capsys):
    target = tmp_path / "graphs"
    assert main(["litmus", SB, "--graph", str(target)]) == 0
    assert "Test SB" in capsys.readouterr().out
    assert sorted(p.name for p in target.iterdir()) == ["SB.dot", "SB.png"]


def test_stress_output_appends_to_an_existing_file(tmp_path, capsys):
    log = tmp_path / "log.jsonl"
    log.write_text('{"type": "earlier"}\n')
    assert main(["stress", "--protocol", "barrier-fenced-release-acquire", "--interpret", "--iterations", "1",
                 "--output", str(log)]) == 0
    assert "verdict                clean" in capsys.readouterr().out
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert records[0] == {"type": "earlier"} and len(records) > 1


# --- the verdict comes before the drawing, and survives a failing one ----------------------------

def _failing_draw(capsys, seen, error):
    def draw(*args, **kwargs):
        seen.append(capsys.readouterr())  # what was printed before drawing started
        raise error
    return draw


@pytest.mark.parametrize("error, text", [(OSError(28, "No space left on device"), "No space left on device"),
                                         (RuntimeError("matplotlib broke"), "matplotlib broke")])
def test_check_text_verdict_is_printed_before_drawing_and_keeps_its_exit_code(error, text, tmp_path, monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(cli_check, "write_graph", _failing_draw(capsys, seen, error))
    png = tmp_path / "x.png"
    assert main(["check", "xchg-flag", "--graph", str(png)]) == 1  # the verdict's code: violations
    after = capsys.readouterr()
    assert len(seen) == 1 and "xchg-flag in all-reduce: UNSAFE" in seen[0].out
    assert "counterexample for" in seen[0].out
    lines = [line for line in after.err.splitlines() if line.strip()]
    assert len(lines) == 1 and f"--graph {png}" in lines[0] and "warning" in lines[0], lines
    assert text in lines[0]
    assert "Traceback" not in seen[0].err + after.err
    assert "graph of the first counterexample" not in after.out  # not claimed when not drawn


def test_check_json_verdict_is_printed_before_drawing_and_keeps_its_exit_code(tmp_path, monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(cli_check, "write_graph", _failing_draw(capsys, seen, OSError(28, "No space left on device")))
    png = tmp_path / "x.png"
    assert main(["check", "xchg-flag", "--json", "--graph", str(png)]) == 1
    after = capsys.readouterr()
    assert json.loads(seen[0].out)["safe"] is False
    assert after.out == ""
    assert len(after.err.strip().splitlines()) == 1 and "No space left on device" in after.err


@pytest.mark.parametrize("as_json", [False, True])
def test_litmus_verdicts_are_printed_before_drawing_and_keep_exit_0(as_json, tmp_path, monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(cli_litmus, "write_graph", _failing_draw(capsys, seen, OSError(28, "No space left on device")))
    assert main(["litmus", SB, "--graph", str(tmp_path), *(["--json"] if as_json else [])]) == 0
    after = capsys.readouterr()
    if as_json:
        assert json.loads(seen[0].out)[0]["name"] == "SB"
    else:
        assert "Test SB" in seen[0].out
    lines = [line for line in after.err.splitlines() if line.strip()]
    assert len(lines) == 1 and f"--graph {tmp_path / 'SB'}" in lines[0], lines
    assert "Traceback" not in after.err
