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


# ----- the model verdict beside a run covers the calls the run makes (issue 23, item 2) ----------

GENERATION_FLAG = """\
name = "generation-flag-never-reset"
summary = "release xchg(1) on the producer's own lock, acquire polls until >= 1; locks never reset"
origin = "a test: the constant target that passes one call and fails the next"
reset = "none"

[[signal]]
op = "barrier"

[[signal]]
op = "atomic_xchg"
value = 1
sem = "release"
scope = "sys"
to = "self"

[[wait]]
op = "await"
read = "load"
sem = "acquire"
scope = "sys"
from = "each"
until = ">= 1"
"""


def fake_failing_campaign(monkeypatch, *, kind: str = "stale"):
    """``run_campaign`` replaced by a GPU run that failed from iteration 1 on (no GPU here)."""
    from syncverify.stress import campaign

    def run_campaign(*, progress=None, **options):
        counts = {name: 0 for name in campaign.CLASS_NAMES}
        counts[kind] = 7
        return campaign.CampaignResult(
            protocol=str(options["protocol"]), kernel=options["kernel"], world_size=options["world_size"],
            mode="virtual-ranks", device="a fake H200", iterations=8, bad_iterations=7, counts=counts,
            first_failure={"iteration": 1, "rank": 0, "tile": 0, "kind": kind, "replay": "--iterations 2"},
            options=dict(options, iterations=8, seed=0))

    monkeypatch.setattr(campaign, "run_campaign", run_campaign)
    monkeypatch.setattr("syncverify.cli.stress.run_campaign", run_campaign)  # bound there at import
    monkeypatch.setattr("syncverify.stress.guided.run_campaign", run_campaign)
    monkeypatch.setattr("syncverify.kernels._deps.require_cuda", lambda what: None)  # the fake run is the GPU


def test_the_model_verdict_beside_a_run_covers_two_calls(monkeypatch, tmp_path):
    # One call of this protocol is safe; every stress iteration after the first is a second call
    # that reads the 1 the first call left: the verdict beside the run must be the two-call one.
    path = tmp_path / "generation-flag.toml"
    path.write_text(GENERATION_FLAG)
    fake_failing_campaign(monkeypatch)
    result = run("--protocol", str(path), "--kernel", "gemm-reduce-scatter", "--no-control")
    assert result.exit_code == 1, result.output
    assert "model verdict          unsafe (stale-read, race; 2 calls)" in result.stdout
    assert "MODEL UNSOUND" not in result.stdout


def test_a_failing_run_where_the_model_says_safe_is_called_model_unsound(monkeypatch):
    fake_failing_campaign(monkeypatch)
    result = run("--protocol", "epoch-flag", "--no-control")
    assert result.exit_code == 1, result.output
    assert "model verdict          safe (2 calls)" in result.stdout
    assert "MODEL UNSOUND: the run failed (stale 7) where the model says safe (2 calls)" in result.stdout
    data = json.loads(run("--protocol", "epoch-flag", "--no-control", "--json").stdout)
    assert data["model"]["unsound"] is True and data["model"]["calls"] == 2


def test_a_two_call_check_that_hits_its_bound_says_unknown_never_safe(monkeypatch):
    from syncverify.verdicts import check

    real = check.check_protocol

    def bounded(protocol, *, epochs=1, **options):  # the second call's check runs out of executions
        return real(protocol, epochs=epochs, **options, **({"max_executions": 1} if epochs > 1 else {}))

    monkeypatch.setattr(check, "check_protocol", bounded)
    fake_failing_campaign(monkeypatch)
    result = run("--protocol", "epoch-flag", "--no-control")
    assert "model verdict          unknown (2 calls, bound hit)" in result.stdout, result.stdout
    assert "safe (" not in result.stdout and "MODEL UNSOUND" not in result.stdout


def test_guided_schedules_aim_at_a_bug_only_the_second_call_shows(tmp_path):
    from syncverify.stress.guided import guided_plan

    path = tmp_path / "generation-flag.toml"
    path.write_text(GENERATION_FLAG)
    plan = guided_plan(str(path), kernel="all-reduce", world_size=2, search_seconds=0)
    assert plan.safe is False and plan.calls == 2
    assert "(model: unsafe (2 calls))" in plan.describe()
    assert "stale-read" in [s.kind for s in plan.schedules]


def test_guided_runs_failing_where_the_model_says_safe_are_called_model_unsound(monkeypatch, tmp_path):
    fake_failing_campaign(monkeypatch)
    result = run("--protocol", "epoch-flag", "--guided", "--seconds", "1", "--schedule", str(tmp_path / "s.json"))
    assert result.exit_code == 1, result.output
    assert "(model: safe (2 calls))" in result.stdout
    assert "MODEL UNSOUND: the run failed (stale 7) where the model says safe (2 calls)" in result.stdout
