"""Known verdicts of the built-in protocols in the all-reduce scenario (world size 2, 2 threads
per CTA), each with the reason the model gives; and the check/list/litmus command lines."""

from __future__ import annotations

import json

import pytest

from protocols.registry import load_protocol
from syncverify.check import check
from syncverify.cli import main
from syncverify.scenarios import ScenarioOptions, build

# protocol -> (violation kinds in all-reduce, why)
ALL_REDUCE = {
    # CTA barrier, release fence, release add, acquire CAS poll, acquire fence: every thread's tile
    # store is ordered before thread 0's release by the barrier, and the consumer's other thread
    # after the poll by the broadcast barrier.
    "barrier-fenced-release-acquire": (set(), "barrier + fences order every thread"),
    # Same as above, and the target grows with the epoch, so no reset is needed.
    "epoch-flag": (set(), "barrier + release add + acquire wait, epoch-relative target"),
    # Seed 000's final fix: no CTA barrier, so thread 1's tile store is not ordered before thread
    # 0's release: the consumer can read thread 1's slice unwritten (measured on the H200 with
    # delayed warps, ../shared/PLATFORM.md).
    "fenced-release-acquire": ({"race", "unwritten-read"}, "no CTA barrier before the release"),
    # No barrier, no fence: the same missing CTA barrier.
    "add-counter": ({"race", "unwritten-read"}, "no CTA barrier before the release"),
    # Seed 000 original: the first xchg(1) already satisfies `== 1`; other ranks' partials unordered.
    "xchg-flag": ({"race", "unwritten-read"}, "a flag overwritten by each rank counts only one"),
    # Seed 000 second attempt: never increments its own counter but waits for world_size.
    "add-counter-skip-self": ({"hang", "race"}, "waits for world_size signals, gets world_size - 1"),
    # Seed 000 first attempt: the local flag is a weak .wt store polled by .cv loads (not morally
    # strong: no synchronization), so the local partial is unordered.
    "add-counter-cas-reset": ({"race", "unwritten-read"}, "weak .wt flag / .cv poll does not synchronize"),
    # Seed 001 original: weak .wt flag store and .cv polls never synchronize.
    "wt-cv-flag": ({"race", "unwritten-read"}, "weak .wt flag / .cv poll does not synchronize"),
    # Seed 001 fix: the acquire CAS runs on one thread and its result is unused, so no bar.sync
    # orders the other threads' tile loads after it; and without a CTA barrier before the xchg.
    "release-xchg-cas-acquire": ({"race", "unwritten-read"}, "acquire on one thread only, no barrier"),
    "barrier-release-xchg-cas-acquire": ({"race", "unwritten-read"}, "acquire on one thread only"),
}


@pytest.mark.parametrize("name", sorted(ALL_REDUCE))
def test_builtin_protocol_verdict_in_all_reduce(name):
    kinds, _why = ALL_REDUCE[name]
    result = check(build(load_protocol(name), ScenarioOptions(world_size=2)))
    assert result.limit_hit is None
    assert set(result.violations) == kinds
    assert result.safe is (not kinds)
    for violation in result.violations.values():
        assert violation.explanation
        assert violation.trace(result.scenario), "a counterexample lists its events"


def test_one_thread_per_cta_hides_the_missing_barrier_bug():
    """With a single thread per CTA there is no other warp to order: the seed's final fix looks safe,
    which is why the model places each step on the threads that really execute it."""
    result = check(build(load_protocol("fenced-release-acquire"), ScenarioOptions(world_size=2, threads_per_cta=1)))
    assert result.safe is True


def test_owner_only_production_reads_partials_nobody_wrote():
    result = check(build(load_protocol("barrier-fenced-release-acquire"),
                         ScenarioOptions(world_size=2, production="owner-only")))
    assert "hang" in result.violations  # the count never reaches world_size


def test_safe_protocol_stays_safe_across_world_sizes():
    for w in (1, 3):
        result = check(build(load_protocol("barrier-fenced-release-acquire"), ScenarioOptions(world_size=w)))
        assert result.safe is True, w


def test_symmetry_reduction_explores_fewer_executions_with_the_same_verdict():
    protocol = load_protocol("barrier-fenced-release-acquire")
    reduced = check(build(protocol, ScenarioOptions(world_size=2)))
    full = check(build(protocol, ScenarioOptions(world_size=2, symmetry=False)))
    assert reduced.safe is full.safe is True
    assert reduced.executions < full.executions


def test_check_cli_exit_codes_and_json(capsys, tmp_path):
    assert main(["check", "barrier-fenced-release-acquire", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["safe"] is True and data["violations"] == [] and data["world_size"] == 2
    png = tmp_path / "x.png"
    assert main(["check", "fenced-release-acquire", "--json", "--graph", str(png)]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["safe"] is False
    assert {v["kind"] for v in data["violations"]} == {"race", "unwritten-read"}
    assert any(row["offending"] for v in data["violations"] for row in v["trace"])
    assert png.stat().st_size > 10_000


@pytest.mark.parametrize("argv, phrase", [
    (["check", "no-such-protocol"], "unknown protocol 'no-such-protocol'"),
    (["check", "epoch-flag", "--world-size", "0"], "world size 0 is out of range"),
    (["check", "epoch-flag", "--world-size", "65"], "world size 65 is out of range"),
    (["check", "epoch-flag", "--tiles", "0"], "tiles=0"),
    (["check", "epoch-flag", "--scenario", "nope"], "scenario='nope'"),
    (["check", "epoch-flag", "--reset", "sometimes"], "reset='sometimes'"),
    (["check", "epoch-flag", "--graph", "x.svg"], ".dot or .png"),
    (["litmus", "/nonexistent/file.litmus"], "file.litmus"),
])
def test_bad_input_is_one_line_and_exit_2(argv, phrase, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and phrase in err and "Traceback" not in err


def test_unknown_when_a_bound_is_hit(capsys):
    assert main(["check", "barrier-fenced-release-acquire", "--world-size", "3", "--max-executions", "1", "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["safe"] is None


def test_list_json_names_every_builtin(capsys):
    assert main(["list", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["protocols"]) == 10 and data["scenarios"] == ["all-reduce", "all-scatter"]


def test_litmus_json_on_shipped_examples(capsys, tmp_path):
    from pathlib import Path

    import syncverify

    files = sorted(str(p) for p in (Path(syncverify.__file__).parent / "litmus" / "examples").glob("*.litmus"))
    code = main(["litmus", "--json", "--graph", str(tmp_path), *files])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert len(data) == len(files)
    for item in data:
        assert set(item) >= {"name", "quantifier", "observation", "positive", "negative", "can_hang", "seconds"}
        assert item["observation"] in ("Never", "Sometimes", "Always")
    assert any(item["can_hang"] for item in data)
    assert list(tmp_path.glob("*.png")) and list(tmp_path.glob("*.dot"))
