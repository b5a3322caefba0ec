"""Every bound is honoured in every phase, and a batch of litmus files reports each file.

The six-thread test below has 12 morally strong stores to one location: 12!/2^6 coherence orders.
They are enumerated lazily, so a timeout or an execution bound stops the search near the bound
(exit 3, Unknown) instead of after listing them all.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from syncverify import exitcodes
from syncverify.cli import main
from syncverify.explore.driver import explore
from syncverify.litmus.parser import parse_litmus

KNOWN = Path(__file__).parent / "litmus" / "known"


def six_threads(sem: str = "relaxed.gpu") -> str:
    """Six threads, two stores each to ``x`` (the test from issue 10, item 5)."""
    head = " | ".join(f"P{i}@cta 0,gpu 0" for i in range(6))
    first = " | ".join(f"st.{sem} x, {2 * i + 1}" for i in range(6))
    second = " | ".join(f"st.{sem} x, {2 * i + 2}" for i in range(6))
    return f'PTX six\n"six threads, two stores each"\n{{ x=0; }}\n{head} ;\n{first} ;\n{second} ;\nexists (x == 1)\n'


def test_a_timeout_stops_the_coherence_enumeration_near_the_bound():
    start = time.monotonic()
    result = explore(parse_litmus(six_threads()), timeout=1.0)
    took = time.monotonic() - start
    assert result.limit_hit == "timeout"
    assert took < 3.0, f"a 1 s timeout took {took:.1f} s"


def test_an_execution_bound_stops_before_every_order_is_listed():
    start = time.monotonic()
    result = explore(parse_litmus(six_threads()), max_executions=5)
    assert result.limit_hit == "max-executions" and result.complete_count == 5
    assert time.monotonic() - start < 3.0


def test_racing_weak_stores_need_one_order_per_orientation():
    # Weak stores of different threads are independent: one coherence per final value, not 12!/2^6.
    result = explore(parse_litmus(six_threads("weak")), timeout=30.0)
    assert result.limit_hit is None
    assert sorted(x.final_memory["x"] for x in result.executions) == [2, 4, 6, 8, 10, 12]


def test_the_cli_answers_unknown_with_exit_3_near_its_timeout(tmp_path, capsys):
    path = tmp_path / "six.litmus"
    path.write_text(six_threads())
    start = time.monotonic()
    code = main(["litmus", str(path), "--timeout", "1"])
    assert code == exitcodes.UNKNOWN
    assert time.monotonic() - start < 4.0
    assert "limit 'timeout' hit" in capsys.readouterr().out


def test_a_batch_reports_every_file_and_exits_with_the_worst_code(tmp_path, capsys):
    bad = tmp_path / "bad.litmus"
    bad.write_text('PTX bad\n"x"\n{ x=0; }\n P0@cta 0,gpu 0 ;\n frobnicate x ;\nexists (x == 1)\n')
    slow = tmp_path / "six.litmus"
    slow.write_text(six_threads())
    good = KNOWN / "mp-weak.litmus"
    code = main(["litmus", "--json", str(bad), str(good), str(slow), "--timeout", "1"])
    reports = json.loads(capsys.readouterr().out)
    assert [r["file"] for r in reports] == [str(bad), str(good), str(slow)]
    assert reports[0]["exit_code"] == exitcodes.INPUT_ERROR and "frobnicate" in reports[0]["error"]
    assert reports[1]["observation"] == "Sometimes"
    assert reports[2]["limit"] == "timeout"
    assert code == exitcodes.INPUT_ERROR  # bad input is worse than Unknown


def test_a_batch_without_bad_files_exits_3_when_one_is_unknown(tmp_path, capsys):
    slow = tmp_path / "six.litmus"
    slow.write_text(six_threads())
    code = main(["litmus", str(KNOWN / "mp-weak.litmus"), str(slow), "--timeout", "1"])
    text = capsys.readouterr()
    assert code == exitcodes.UNKNOWN
    assert "Test MP+weak Ok" in text.out and "Test six Unknown" in text.out


def test_a_bad_file_in_a_batch_does_not_stop_the_next(tmp_path, capsys):
    missing = tmp_path / "missing.litmus"
    code = main(["litmus", str(missing), str(KNOWN / "mp-weak.litmus")])
    text = capsys.readouterr()
    assert code == exitcodes.INPUT_ERROR
    assert "cannot read litmus file" in text.err and "Test MP+weak Ok" in text.out
