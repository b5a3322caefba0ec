"""``stress_command`` as the CLI mounts it: exit 0 clean, 1 bad tiles, 2 bad input in one line."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from syncverify.cli.stress import stress_command

app = typer.Typer()
app.command("stress")(stress_command)


@app.callback()
def _root() -> None:
    """A stand-in for the syncverify app."""


def run(*args):
    return CliRunner().invoke(app, ["stress", *args])


def test_a_clean_run_exits_0_and_says_clean():
    result = run("--protocol", "barrier-fenced-release-acquire", "--interpret", "--iterations", "1")
    assert result.exit_code == 0, result.output
    assert "verdict                clean" in result.stdout


def test_bad_tiles_exit_1_with_the_first_failure_and_how_to_replay_it():
    result = run("--protocol", "add-counter-skip-self", "--interpret", "--iterations", "1")
    assert result.exit_code == 1
    assert "hang tiles           8" in result.stdout
    assert "the lock read 1 (wait step 2)" in result.stdout
    assert "replay: --seed 0 --iterations 1" in result.stdout


def test_json_is_one_object():
    result = run("--protocol", "xchg-flag", "--interpret", "--iterations", "1", "--world-size",
                 "3", "--order", "last-rank-late", "--json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["counts"]["missing-ranks"] > 0 and data["clean"] is False
    assert data["first_failure"]["iteration"] == 0


@pytest.mark.parametrize("args, message", [
    (["--protocol", "xchg-flg", "--interpret"], "unknown protocol 'xchg-flg' (did you mean 'xchg-flag'?)"),
    (["--protocol", "xchg-flag", "--interpret", "--k", "48", "--world-size", "2"], "not a multiple of --block-k=16"),
    (["--protocol", "xchg-flag", "--interpret", "--lock-dtype", "int8"], "needs 32-bit locks"),
    (["--protocol", "xchg-flag", "--interpret", "--iterations", "1", "--seconds", "1"], "not both"),
    (["--protocol", "xchg-flag", "--interpret", "--reset", "sometimes"], "--reset='sometimes' is not one of"),
    (["--protocol", "xchg-flag", "--order", "consumers-first"], "add --interpret"),
    (["--protocol", "xchg-flag", "--interpret", "--delay-sites", "before-stor"], "unknown delay site(s) before-stor"),
])
def test_bad_input_exits_2_with_one_line(args, message):
    result = run(*args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], lines
