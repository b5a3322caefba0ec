"""Long checks say where they are, and stop: ``first=True``, timeouts in every phase, progress.

The slow check used below is ``add-counter`` in all-reduce, two epochs with a racing host reset:
unsafe, 432 consistent executions, one to two seconds on a 2-core machine.
"""

from __future__ import annotations

import json

import pytest

from syncverify.verdicts.check import check
from syncverify.cli import main
from syncverify.protocols.registry import load_protocol
from syncverify.scenarios.build import ScenarioOptions, build

SLOW_UNSAFE = ["check", "add-counter", "--epochs", "2", "--reset", "host-racing"]


@pytest.fixture(scope="module")
def slow_unsafe():
    return build(load_protocol("add-counter"),
                 ScenarioOptions(scenario="all-reduce", world_size=2, epochs=2, reset="host-racing"))


def test_first_stops_at_the_first_violation_with_fewer_executions(slow_unsafe):
    full = check(slow_unsafe)
    first = check(slow_unsafe, first=True)
    assert full.safe is False and len(full.violations) > 1
    assert first.safe is False and first.stopped_at_first
    assert len(first.violations) == 1
    assert first.executions < full.executions
    assert first.limit_hit is None


def test_a_tiny_timeout_answers_unknown_with_limit_timeout(slow_unsafe):
    result = check(slow_unsafe, timeout=0.001)
    assert result.safe is None and result.limit_hit == "timeout"


def test_the_progress_callback_sees_increasing_counts(slow_unsafe):
    seen = []
    # every-kind off: with it the check stops after 8 executions, too soon for two reports.
    result = check(slow_unsafe, progress=seen.append, progress_interval=0.02, without=frozenset({"every-kind"}))
    assert len(seen) >= 2
    executions = [p.executions for p in seen]
    assert executions == sorted(executions) and executions[-1] > executions[0]
    assert [p.seconds for p in seen] == sorted(p.seconds for p in seen)
    assert all(p.executions <= result.executions and p.candidates >= p.executions for p in seen)
    assert seen[-1].violations and set(seen[-1].violations) <= set(result.violations)


def test_cli_first_exits_1_with_one_counterexample(capsys):
    assert main(SLOW_UNSAFE + ["--first", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["safe"] is False and len(data["violations"]) == 1
    assert data["violations"][0]["trace"]  # its counterexample


def test_cli_prints_plain_progress_lines_when_stderr_is_not_a_terminal(capsys):
    # A check that runs past a few reports with every-kind on (add-counter now stops after 8 executions).
    assert main(["check", "xchg-flag", "--epochs", "2", "--world-size", "4", "--progress-every", "0.02"]) == 1
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.startswith("checking: ")]
    assert lines, captured.err
    assert "executions" in lines[-1] and "violations: " in lines[-1] and "elapsed" in lines[-1]
    assert "\x1b[" not in captured.err  # plain lines: no terminal control sequences
    assert "checking: " not in captured.out


def test_cli_json_stdout_has_no_progress(capsys):
    assert main(SLOW_UNSAFE + ["--progress-every", "0.05", "--json"]) == 1
    captured = capsys.readouterr()
    json.loads(captured.out)  # stdout is exactly one JSON object


def test_cli_help_states_the_default_timeout_and_sizes(capsys):
    assert main(["check", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--timeout" in text and "default: 600" in text
    assert "--first" in text and "minute on a 2-core machine" in text
