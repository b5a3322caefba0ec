"""The pytest plugin as a user meets it: a temporary project whose tests use the fixture, the
marker and the options, run by an inner pytest (pytester, in-process); and ``assert_safe``.

The inner runs need no GPU: they pass ``--syncverify-interpret`` (Triton's CPU interpreter at tiny
sizes), or show the skip a machine without a GPU gets. The inner pytest loads the plugin from the
``pytest11`` entry point when syncverify is installed, else from ``-p syncverify.pytest_plugin``.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

import syncverify

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
AUTOLOADED = not os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD") and any(
    ep.value == "syncverify.pytest_plugin" for ep in entry_points(group="pytest11"))
PLUGIN = [] if AUTOLOADED else ["-p", "syncverify.pytest_plugin"]


@pytest.fixture(scope="module", autouse=True)
def imported_once():
    """Import torch, triton and the kernels in this process before any inner run: an in-process
    run forgets the modules it imported, and importing torch a second time in one process crashes
    it. One interpreted iteration imports everything a campaign needs."""
    try:
        from syncverify.stress.campaign import run_campaign

        run_campaign(protocol="epoch-flag", interpret=True, iterations=1)
    except ImportError:  # no torch: the inner runs skip, nothing to import
        pass


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess(*PLUGIN, "-p", "no:cacheprovider", "-rs", *args)


NO_GPU = """
import pytest

@pytest.fixture(autouse=True)
def no_gpu(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
"""


# ----- stress through the interpreter ----------------------------------------------------------

def test_a_safe_protocol_passes_through_the_interpreter(pytester):
    pytester.makepyfile("""
        def test_lock(syncverify_stress):
            result = syncverify_stress(protocol="barrier-fenced-release-acquire", kernel="all-reduce",
                                       world_size=2, iterations=2)
            result.assert_clean()
            assert result.clean and result.first_failure is None and result.replay_command is None
            assert result.counts == {"unwritten": 0, "stale": 0, "missing-ranks": 0, "corrupt": 0, "hang": 0}
            assert result.iterations == 2 and result.mode == "interpreter"
    """)
    run(pytester, "--syncverify-interpret").assert_outcomes(passed=1)


def test_a_protocol_file_beside_the_test_is_found(pytester):
    toml = (ROOT / "protocols" / "barrier-fenced-release-acquire.toml").read_text()
    pytester.mkdir("locks")
    (pytester.path / "locks" / "my_lock.toml").write_text(toml)
    (pytester.path / "locks" / "test_mine.py").write_text(
        "def test_lock(syncverify_stress):\n"
        "    syncverify_stress(protocol='my_lock.toml', iterations=1).assert_clean()\n")
    run(pytester, "--syncverify-interpret").assert_outcomes(passed=1)


def test_an_unsafe_protocol_fails_naming_the_tile_its_class_and_the_replay_command(pytester):
    # add-counter-skip-self: producers never add to their own rank's counter, which stays at
    # world_size - 1: every consumer's bounded wait times out in the interpreter (a hang).
    pytester.makepyfile("""
        import pytest

        @pytest.mark.syncverify(protocol="add-counter-skip-self", iterations=1)
        def test_lock(syncverify_stress):
            syncverify_stress().assert_clean()
    """)
    result = run(pytester, "--syncverify-interpret")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*AssertionError: stress: add-counter-skip-self in all-reduce, world size 2, interpreter: "
        "1 of 1 iterations bad; bad tiles: hang 8",
        "*first bad tile: iteration 0, rank 0's C, tile 0: hang",
        "*its wait timed out after 8 polls; the lock read 1 (wait step 2)",
        "*element (0, 0): expected 12, seen nan",
        "*replay: syncverify stress --protocol add-counter-skip-self --kernel all-reduce --world-size 2 "
        "--interpret --seed 0 --iterations 1 --delays random",
    ])


def test_campaign_options_in_the_marker_reach_the_run_and_the_replay_command(pytester):
    # A racing host reset (interpreter schedule consumers-first, partials kept): epoch 0 hangs,
    # epoch 1's consumers pass on epoch 0's counts and read epoch 0's partials (stale).
    pytester.makepyfile("""
        import pytest

        @pytest.mark.syncverify(protocol="add-counter", reset="host-racing", order="consumers-first",
                                poison="outputs", iterations=3, delays="none")
        def test_lock(syncverify_stress):
            result = syncverify_stress()
            assert result.counts["stale"] > 0 and result.counts["hang"] > 0
            result.assert_clean()
    """)
    result = run(pytester, "--syncverify-interpret")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*replay: syncverify stress --protocol add-counter --kernel all-reduce --world-size 2 --interpret "
        "--seed 0 --iterations 1 --delays none --reset host-racing --order consumers-first --poison outputs",
    ])


def test_the_replay_command_replays_the_first_failure_on_the_command_line(capsys):
    import json

    from syncverify.cli import main
    from syncverify.stress.campaign import run_campaign
    from syncverify.testing import StressResult, replay_command

    # (not --order consumers-first: its hangs are reported as an artifact of that order, exit 0)
    given = dict(protocol="xchg-flag", world_size=3, order="last-rank-late", iterations=2,
                 interpret=True, seed=4, delays="random")
    campaign = run_campaign(**given)
    result = StressResult(campaign, replay_command(campaign, given))
    f = result.first_failure
    words = shlex.split(result.replay_command)
    assert words[:2] == ["syncverify", "stress"] and "--interpret" in words
    capsys.readouterr()
    assert main([*words[1:], "--json"]) == 1
    again = json.loads(capsys.readouterr().out)["first_failure"]
    assert {k: again[k] for k in ("iteration", "rank", "tile", "kind", "seed")} == \
        {k: f[k] for k in ("iteration", "rank", "tile", "kind", "seed")}


# ----- skips and usage errors ------------------------------------------------------------------

def test_without_a_gpu_or_the_interpreter_flag_the_test_is_skipped_with_the_reason(pytester):
    pytester.makeconftest(NO_GPU)
    pytester.makepyfile("""
        def test_lock(syncverify_stress):
            syncverify_stress(protocol="epoch-flag")
    """)
    result = run(pytester)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*syncverify_stress needs a CUDA GPU and none is visible; "
                                 "pass --syncverify-interpret*"])


def test_without_torch_the_test_is_skipped_with_the_reason(pytester):
    pytester.makeconftest("""
        import sys
        import pytest

        @pytest.fixture(autouse=True)
        def no_torch(monkeypatch):
            monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    """)
    pytester.makepyfile("""
        def test_lock(syncverify_stress):
            syncverify_stress(protocol="epoch-flag")
    """)
    result = run(pytester, "--syncverify-interpret")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*syncverify_stress needs torch and triton*syncverify[[]gpu[]]*pip install -e*"])


def test_loading_the_plugin_imports_neither_torch_nor_triton():
    code = ("import sys, syncverify.pytest_plugin; "
            "assert not {'torch', 'triton'} & set(sys.modules), sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=120)


def test_bad_arguments_fail_in_one_line_naming_them_even_without_a_gpu(pytester):
    pytester.makeconftest(NO_GPU)
    pytester.makepyfile("""
        import pytest

        @pytest.mark.parametrize("options", [
            dict(protocol="epoch-flg"),
            dict(protocol="epoch-flag", kernel="all-gather"),
            dict(protocol="epoch-flag", world_size=99),
            dict(protocol="epoch-flag", seconds=0),
            dict(protocol="epoch-flag", iterations=2, seconds=1),
            dict(protocol="epoch-flag", colour="red"),
            dict(),
        ])
        def test_lock(syncverify_stress, options):
            syncverify_stress(**options)
    """)
    result = run(pytester)
    result.assert_outcomes(failed=7)
    result.stdout.fnmatch_lines([
        "syncverify_stress: unknown protocol 'epoch-flg' (did you mean 'epoch-flag'?)*",
        "syncverify_stress: kernel='all-gather' is not one of 'all-reduce', 'all-scatter'*",
        "syncverify_stress: --world-size=99 must be in 1..*world_size=99)",
        "syncverify_stress: seconds=0 must be a positive number of seconds",
        "syncverify_stress: give iterations= or seconds=, not both*",
        "syncverify_stress: unknown argument(s) colour*",
        "syncverify_stress: protocol= is required*",
    ])
    assert "Traceback" not in result.stdout.str() and "During handling" not in result.stdout.str()


@pytest.mark.parametrize("option, value", [("--syncverify-seconds", "0"), ("--syncverify-seconds", "soon"),
                                           ("--syncverify-seed", "-1")])
def test_a_bad_command_line_option_is_a_usage_error(pytester, option, value):
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = run(pytester, f"{option}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{option}={value} must be *"])


# ----- defaults: call, marker, command line ----------------------------------------------------

def test_the_marker_gives_defaults_the_call_overrides_and_the_command_line_fills_the_rest(pytester):
    pytester.makepyfile("""
        import pytest

        pytestmark = pytest.mark.syncverify(protocol="epoch-flag", seed=1, iterations=2)

        @pytest.mark.syncverify(protocol="barrier-fenced-release-acquire", delays="none")
        def test_nearest_marker_wins(syncverify_stress):
            result = syncverify_stress()
            o = result.options
            assert (result.protocol, o["seed"], o["iterations"], o["delays"]) == \\
                ("barrier-fenced-release-acquire", 1, 2, "none")

        @pytest.mark.syncverify(delays="none")
        def test_the_call_wins(syncverify_stress):
            result = syncverify_stress(seed=7, iterations=1, delays="random")
            o = result.options
            assert (result.protocol, o["seed"], o["iterations"], o["delays"]) == ("epoch-flag", 7, 1, "random")
            assert result.clean

        @pytest.mark.syncverify(seed=None)
        def test_seconds_replace_the_marker_iterations_and_the_seed_comes_from_the_command_line(syncverify_stress):
            o = syncverify_stress(seconds=0.2).options
            assert (o["iterations"], o["seconds"], o["seed"]) == (None, 0.2, 3)

        def test_defaults(syncverify_stress):
            o = syncverify_stress(protocol="epoch-flag", iterations=None, seed=None).options
            assert (o["kernel"], o["world_size"], o["delays"], o["seed"], o["interpret"]) == \\
                ("all-reduce", 2, "random", 3, True)
            assert (o["iterations"], o["seconds"]) == (None, 0.2)  # --syncverify-seconds
    """)
    run(pytester, "--syncverify-interpret", "--syncverify-seed=3",
        "--syncverify-seconds=0.2").assert_outcomes(passed=4)


def test_interpret_in_the_marker_runs_the_interpreter_without_the_flag(pytester):
    pytester.makeconftest(NO_GPU)
    pytester.makepyfile("""
        import pytest

        @pytest.mark.syncverify(interpret=True)
        def test_lock(syncverify_stress):
            assert syncverify_stress(protocol="epoch-flag", iterations=1).mode == "interpreter"
    """)
    run(pytester).assert_outcomes(passed=1)


# ----- the model check as an assertion ---------------------------------------------------------

def test_assert_safe_passes_for_a_safe_protocol_and_returns_the_result():
    result = syncverify.assert_safe("epoch-flag", scenario="all-reduce", world_size=2)
    assert result.safe is True


def test_assert_safe_fails_with_the_counterexample_in_words():
    with pytest.raises(AssertionError) as raised:
        syncverify.assert_safe("xchg-flag")
    message = str(raised.value)
    assert message.startswith("xchg-flag in all-reduce is UNSAFE (world size 2")
    check = syncverify.check_protocol("xchg-flag")
    for v in check.violations.values():
        assert f"{v.kind}: {v.explanation}" in message
        assert f"counterexample for {v.kind}" in message
    offending = [row for v in check.violations.values() for row in v.trace(check.scenario) if row["offending"]]
    assert offending and all(f">> rank {row['rank']} {row['cta']} t{row['thread']}: {row['event']}" in message
                             for row in offending)


def test_assert_safe_fails_when_a_bound_is_hit_and_says_which():
    with pytest.raises(AssertionError, match=r"UNKNOWN.*\n.*unknown: limit 'max-executions' hit"):
        syncverify.assert_safe("barrier-fenced-release-acquire", world_size=3, max_executions=1)


def test_assert_safe_inside_a_users_test_shows_the_violation_kinds(pytester):
    pytester.makepyfile("""
        import syncverify

        def test_model():
            syncverify.assert_safe("xchg-flag")
    """)
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*xchg-flag in all-reduce is UNSAFE*", "*unwritten-read: *", "*race: *"])


# ----- an interpreted run is no evidence: the model decides (issue 23, item 1) -------------------

def test_a_protocol_the_model_proves_unsafe_fails_assert_clean_under_the_interpreter(pytester):
    # fenced-release-acquire has no CTA barrier before its signal: the interpreter (one program at
    # a time) runs it clean, the model finds a race and an unwritten read.
    pytester.makepyfile("""
        def test_lock(syncverify_stress):
            result = syncverify_stress(protocol="fenced-release-acquire", iterations=1)
            assert result.clean and result.model.safe is False
            assert result.model_verdict == "unsafe (unwritten-read, race; 1 call)"
            assert any("no evidence" in note for note in result.notes)
            result.assert_clean()
    """)
    result = run(pytester, "--syncverify-interpret")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*AssertionError: stress: fenced-release-acquire in all-reduce, world size 2, interpreter: "
        "0 of 1 iterations bad; bad tiles: none",
        "*model: unsafe (unwritten-read, race; 1 call)",
        "*race: only the signalling thread is ordered*",
        "*note: the Triton interpreter runs the programs one at a time*no evidence*",
    ])


def test_an_interpreted_pass_carries_the_model_verdict_over_two_calls(pytester):
    pytester.makepyfile("""
        def test_lock(syncverify_stress):
            result = syncverify_stress(protocol="epoch-flag", iterations=1).assert_clean()
            assert result.model_verdict == "safe (2 calls)" and "model='safe (2 calls)'" in repr(result)
            assert result.notes and "no evidence" in result.notes[0]
    """)
    run(pytester, "--syncverify-interpret").assert_outcomes(passed=1)


def test_assert_clean_of_an_interpreted_run_fails_when_the_model_hit_its_bound(monkeypatch):
    # unknown is not safe: nothing was proven, and the interpreter cannot prove it either
    from syncverify.stress.campaign import CampaignResult
    from syncverify.testing import StressResult
    from syncverify.verdicts.check import check_calls

    model = check_calls("epoch-flag", max_executions=1)
    result = StressResult(CampaignResult("epoch-flag", "all-reduce", 2, "interpreter", "cpu", iterations=1),
                          model=model)
    with pytest.raises(AssertionError, match=r"model: unknown \(1 call, bound hit\)"):
        result.assert_clean()
