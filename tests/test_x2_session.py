"""The two-GPU session script (``benchmarks/x2_session.py``, issues 30 and 31) on the CPU: its plan
(priority order, issue 30's budgets within 25 minutes, parts of one device call each, the zoo pairs,
the sweep it names, the runs whose code is missing), one rehearsed run that lists every planned run,
the budget skip and the kill at a run's budget. The whole rehearsal (every run's
CPU stand-in, about 2 minutes) runs with ``SYNCVERIFY_X2_REHEARSE_FULL=1``; its last run is in
docs/RESULTS.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import x2_session as session

ROOT = Path(__file__).resolve().parents[1]
ORDER = ["gpu-tests", "zoo", "stress", "compare", "bench", "user", "litmus"]


def _rehearse(tmp_path: Path, *args: str, timeout: float = 240) -> tuple[int, str, dict]:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "x2_session.py"), "--rehearse",
                           "--out", str(tmp_path), *args], capture_output=True, text=True, timeout=timeout)
    document = json.loads((tmp_path / "session.json").read_text()) if (tmp_path / "session.json").exists() else {}
    return done.returncode, done.stdout + done.stderr, document


def test_the_plan_runs_in_priority_order_within_25_minutes():
    runs = session.plan()
    groups = [r.group for r in runs]
    assert sorted(set(groups), key=ORDER.index) == ORDER
    assert groups == sorted(groups, key=ORDER.index)  # every group's runs before the next group's
    assert len({r.name for r in runs}) == len(runs)
    assert sum(r.seconds for r in runs if r.issue == 30) <= session.SESSION_SECONDS == 25 * 60
    assert [r.issue for r in runs] == sorted(r.issue for r in runs)  # issue 31's after issue 30's
    cut = session.parts(runs)
    assert [r for part in cut for r in part] == runs
    assert all(sum(r.seconds for r in part if not r.missing) <= session.PART_SECONDS <= 8 * 60 for part in cut)
    for r in runs:  # real ranks on the GPU (no --virtual-ranks), the interpreter or gloo on the CPU
        assert "--virtual-ranks" not in r.gpu and "--interpret" not in r.gpu, r.name
        if r.gpu[1:3] == ("-m", "syncverify") and r.gpu[3] in ("stress", "bench"):
            assert "--interpret" in r.rehearse, r.name


def test_each_zoo_bug_runs_before_its_fix_and_the_model_agrees_which_is_which():
    from syncverify.protocols.registry import zoo_protocols

    expected = {p.name: p.zoo.expected for p in zoo_protocols()}
    names = [r.name.removeprefix("zoo-") for r in session.plan() if r.group == "zoo"]
    for bug, fix in session.ZOO_PAIRS:
        assert expected[bug] != "safe" and expected[fix] == "safe", (bug, fix)
        first_bug = min(names.index(b) for b, f in session.ZOO_PAIRS if f == fix)
        assert bug in names and first_bug < names.index(fix), (bug, fix)


def test_the_target_sweep_it_names_parses_for_two_ranks():
    from syncverify.kernels.bench.report import parse_sweep

    sweep = parse_sweep((ROOT / "benchmarks/sweeps/target-2gpu.toml").read_text(), world_size=2)
    assert sweep.world_size == 2


def test_a_rehearsed_run_lists_every_planned_run(tmp_path):
    code, out, document = _rehearse(tmp_path, "--only", "zoo-done-flag")
    assert code == 0, out
    table = out[out.index("run "):]
    for i, r in enumerate(session.plan(), 1):
        assert f"{i:02d}-{r.name}" in table
    results = {x["name"]: x["result"] for x in document["runs"]}
    assert results.pop("zoo-done-flag") == "ok"
    assert set(results.values()) == {"not selected"}
    assert '"clean": true' in (tmp_path / "05-zoo-done-flag.log").read_text()


def test_a_run_past_the_session_budget_is_skipped_and_said_so(tmp_path):
    code, out, document = _rehearse(tmp_path, "--budget", "30", "--only", "gpu-tests,compare")
    assert code == 1
    results = {x["name"]: x["result"] for x in document["runs"]}
    assert results["gpu-tests"].startswith("skipped: 30 s left, needs 240")
    assert results["compare"].startswith("skipped:")
    assert not list(tmp_path.glob("*.log"))  # nothing started


def test_a_run_is_killed_at_its_budget(tmp_path):
    code, wall = session.execute([sys.executable, "-c", "import time; time.sleep(60)"], log=tmp_path / "x.log",
                                 seconds=0.5, env=dict(os.environ))
    assert code is None and wall < 10
    assert session._result(code, 0.5, "", rehearse=True) == "killed at 0 s budget"


def test_results_tell_a_crash_from_a_finding():
    assert session._result(1, 9, "FAILED", rehearse=True) == session.REHEARSED_FOUND
    assert session._result(1, 9, "Traceback (most recent call last):", rehearse=True) == "exit 1 (traceback)"
    assert session._result(1, 9, "FAILED", rehearse=False) == "exit 1"
    assert session._result(2, 9, "error: x", rehearse=True) == "exit 2"


def test_an_unknown_run_is_refused_in_one_line(tmp_path):
    code, out, _ = _rehearse(tmp_path, "--only", "zoo-nope")
    assert code == 2 and out.strip().count("\n") == 0 and "unknown run(s) zoo-nope" in out


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("SYNCVERIFY_X2_REHEARSE_FULL"),
                    reason="the whole rehearsal (~15 min on a loaded 2-core machine): SYNCVERIFY_X2_REHEARSE_FULL=1")
def test_the_whole_rehearsal_runs_every_command(tmp_path):
    code, out, document = _rehearse(tmp_path, timeout=1800)
    assert code == 0, out
    assert [x["name"] for x in document["runs"]] == [r.name for r in session.plan()]


def test_every_run_is_built_and_a_run_not_built_would_cost_its_part_nothing():
    assert [r.name for r in session.plan() if r.missing] == []  # issue 31's litmus across GPUs is built
    runs = [session.Run(f"r{i}", "stress", 300.0, ("true",), ("true",), missing="x" if i == 1 else "")
            for i in range(3)]
    assert [[r.name for r in part] for part in session.parts(runs)] == [["r0", "r1"], ["r2"]]


def test_the_litmus_run_puts_the_issues_shapes_first_and_every_known_two_gpu_test_once():
    from benchmarks import litmus_x2
    from syncverify.litmus.gpu.shapes import CROSS_SHAPES

    programs = litmus_x2.suite_programs()
    names = [p.name for _, p in programs]
    assert len(set(names)) == len(names)
    assert names[:len(CROSS_SHAPES)] == [f"{s}+relacq-sys+diff-gpu" for s in CROSS_SHAPES]
    assert all(len({t.gpu for t in p.threads}) == 2 for _, p in programs)
    known = [p for g, p in programs if g == "known"]
    assert len(known) == 5 and all("-2gpus" in p.name for p in known)  # the older files, not the shapes again


def test_a_part_is_one_device_call_and_a_bad_part_is_refused(tmp_path):
    cut = session.parts(session.plan())
    code, out, document = _rehearse(tmp_path, "--part", str(len(cut)), "--only", "litmus-x2", "--budget", "1")
    selected = {x["name"]: x["result"] for x in document["runs"] if x["result"] != "not selected"}
    assert code == 1 and list(selected) == ["litmus-x2"] and selected["litmus-x2"].startswith("skipped:")
    code, out, _ = _rehearse(tmp_path, "--part", str(len(cut) + 1))
    assert code == 2 and f"the plan has parts 1..{len(cut)}" in out


def test_the_docs_list_every_run_with_its_exact_command_and_part():
    text = (ROOT / "docs" / "two-gpu-session.md").read_text()
    for n, part in enumerate(session.parts(session.plan()), 1):
        assert f"python3 benchmarks/x2_session.py --part {n} --out $OUT" in text
        section = text[text.index(f"### Part {n} "):]
        for r in part:
            command = " ".join(r.gpu).replace(session.PY, "python3").replace(session.OUT, f"$OUT/NN-{r.name}")
            assert f"| `{r.name}` | {r.issue} | {r.seconds:.0f} |" in section and f"`{command}`" in section, r.name


def test_the_table_says_a_stress_runs_result_in_a_few_words():
    import doctest

    assert doctest.testmod(session).failed == 0
    log = 'x\n{\n "result": {"iterations": 3, "bad_iterations": 2, "stopped": null}\n}\n'
    assert session._last_line(log) == "3 it, 2 bad" and session._last_line("a\nlast line\n") == "last line"
