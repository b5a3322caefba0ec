"""Known verdicts of the built-in protocols in both scenarios (world size 2, 1 tile, 1 epoch, 2
threads per CTA), each with the reason the model gives; two-epoch verdicts for the reset policies;
and the check/list/litmus command lines."""

from __future__ import annotations

import json

import pytest

from syncverify.protocols.registry import load_protocol
from syncverify.verdicts.check import check
from syncverify.cli import main
from syncverify.scenarios.build import ScenarioOptions, build

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


# protocol -> (violation kinds in all-scatter, why). The scenario (syncverify.scenarios.build): each
# rank's GEMM CTA stores its tile and signals (stage "pub"); that rank's comm CTA waits, reads the
# tile, pushes it into every peer's C and signals again (stage "push"); a receiver CTA waits on the
# push lock and reads the pushed copies. Both stages run the same protocol, so a protocol whose
# signal goes to its own copy (`to = "self"`) never tells the receiving rank about a peer's push.
ALL_SCATTER = {
    # GEMM CTA: bar.sync orders both threads' tile stores before thread 0's release fence + add on
    # every rank's counter; comm CTA: the acquire CAS poll runs on thread 0 and its broadcast
    # bar.sync orders thread 1's tile load after it. The push stage is the same handshake, and the
    # receiver counts world_size adds, its peer's included.
    "barrier-fenced-release-acquire": (set(), "barrier + fences order every thread, in both stages"),
    # As above with an acquire ld poll (one thread + bar.sync) and a target that grows per epoch.
    "epoch-flag": (set(), "barrier + release add + acquire wait, in both stages"),
    # Witness: rank 0's comm CTA thread 1 reads C slice 1 unwritten: GEMM thread 1's tile store has
    # no barrier to order it before thread 0's release (its own fence orders only its own later
    # writes, and it makes none); the same in the push stage (receiver vs a peer's thread-1 push).
    "fenced-release-acquire": ({"race", "unwritten-read"}, "no CTA barrier before the release"),
    "add-counter": ({"race", "unwritten-read"}, "no CTA barrier before the release"),
    # Witness: rank 0's comm CTA reads its own GEMM tile unwritten: the local path is a weak .wt
    # flag store polled by .cv (relaxed) loads, not morally strong, so no synchronization; the
    # acquire CAS on "ready" synchronizes only with the *other* rank's GEMM CTA (to = "others").
    # The push stage is ordered (barrier, then release xchg to the receiver, acquire CAS poll).
    "xchg-flag": ({"race", "unwritten-read"}, "weak .wt local flag / .cv poll does not synchronize"),
    # Same local path; witness race is on the local flag itself (weak store vs .cv poll).
    "add-counter-cas-reset": ({"race", "unwritten-read"}, "weak .wt local flag / .cv poll does not synchronize"),
    # Counts only the world_size - 1 other ranks but waits for world_size: each comm CTA's thread 0
    # spins forever (thread 1 waits at the broadcast bar.sync), so no tile is pushed and the
    # receiver hangs too; nobody reads tile data, so the only race is on the weak local flag.
    "add-counter-skip-self": ({"hang", "race"}, "waits for world_size signals, gets world_size - 1"),
    # Seed 001 original (bug 3): a weak .wt flag store and .cv polls never synchronize: the comm
    # CTA can read its GEMM CTA's tile unwritten; the flag itself races.
    "wt-cv-flag": ({"race", "unwritten-read"}, "weak .wt flag / .cv poll does not synchronize"),
    # Seed 001 fix: the acquire CAS runs on one thread with its result unused (no bar.sync), so
    # comm thread 1's tile load is unordered (witness: it reads C slice 1 unwritten); no CTA
    # barrier before the xchg either; and in the push stage the receiver polls its own copy,
    # which only its own comm CTA writes (to = "self"): a peer's push is never ordered before
    # the receiver's reads (witness race: rank 1's push vs rank 0's receiver).
    "release-xchg-cas-acquire": ({"race", "unwritten-read"}, "acquire on one thread only, no barrier, to=self"),
    # The barrier fixes the GEMM side only: the one-thread acquire and the push to self remain.
    "barrier-release-xchg-cas-acquire": ({"race", "unwritten-read"}, "acquire on one thread only, to=self"),
}


@pytest.mark.parametrize("name", sorted(ALL_SCATTER))
def test_builtin_protocol_verdict_in_all_scatter(name):
    kinds, _why = ALL_SCATTER[name]
    result = check(build(load_protocol(name), ScenarioOptions(scenario="all-scatter", world_size=2)))
    assert result.limit_hit is None
    assert result.executions > 0
    assert set(result.violations) == kinds
    assert result.safe is (not kinds)
    for violation in result.violations.values():
        assert violation.explanation
        assert violation.trace(result.scenario), "a counterexample lists its events"


def test_every_builtin_has_a_verdict_in_both_scenarios():
    from syncverify.protocols import builtin_names

    assert set(ALL_REDUCE) == set(ALL_SCATTER) == set(builtin_names())


def test_a_hang_is_explained_by_the_spinning_thread_not_the_one_it_blocks():
    """In add-counter-skip-self's hang the comm CTA's thread 0 spins (its count never reaches
    world_size) and thread 1 waits for it at the broadcast bar.sync: the sentence names the spin."""
    result = check(build(load_protocol("add-counter-skip-self"), ScenarioOptions(scenario="all-scatter")))
    explanation = result.violations["hang"].explanation
    assert "thread 0 waits forever: its poll keeps reading the final value (ready@pub" in explanation


def test_a_flag_to_self_cannot_tell_a_peer_about_a_push():
    """A barrier + release xchg to its own copy + acquire CAS poll (whose broadcast bar.sync orders
    every thread) is safe for the one-GPU publish stage; used as the *push* protocol, the receiver
    polls its own copy, which only its own comm CTA writes, so a peer's push is unordered: every
    violation is on the pushed copies (``out.rX.bY``), none on the published tile (``local``)."""
    from syncverify.protocols import protocol_from_dict

    protocol = protocol_from_dict({
        "name": "barrier-xchg-self", "summary": "s", "origin": "test",
        "signal": [{"op": "barrier"},
                   {"op": "atomic_xchg", "value": 1, "sem": "release", "scope": "sys", "to": "self"}],
        "wait": [{"op": "await", "read": "atomic_cas", "compare": 1, "value": 1, "sem": "acquire",
                  "scope": "sys", "until": "== 1"}],
    })
    as_publish = check(build(protocol, ScenarioOptions(scenario="all-scatter", world_size=2)))
    assert as_publish.safe is True
    as_push = check(build(load_protocol("epoch-flag"), ScenarioOptions(scenario="all-scatter", world_size=2),
                          push=protocol))
    assert set(as_push.violations) == {"race", "unwritten-read"}
    for violation in as_push.violations.values():
        locations = {row["location"] for row in violation.trace(as_push.scenario) if row["offending"]}
        assert locations and all(loc.startswith("out.") for loc in locations), locations


# Two epochs: whether the locks carry over (the reset policy) decides stale reads.
# barrier-fenced-release-acquire relies on the host zeroing its counters (its target is
# world_size in every epoch); epoch-flag never resets (target world_size * (epoch + 1)).
# all-reduce at world size 2; all-scatter (seed 001's kernel) at world size 1, where the one-GPU
# publish stage that seed 001's lock reset is about is all there is (world size 2 with two epochs
# takes over a minute).
TWO_EPOCHS = [
    # Seed 001 bug 2: the clear runs on another stream, unordered with the next launch: epoch 1's
    # consumer can see epoch 0's count (>= world_size already) and read epoch 0's tile; the clear
    # can also land after epoch 1's adds (a hang), and the memset is a weak store racing them.
    ("all-reduce", 2, "barrier-fenced-release-acquire", "host-racing", {"hang", "race", "stale-read"}),
    ("all-scatter", 1, "barrier-fenced-release-acquire", "host-racing", {"hang", "race", "stale-read"}),
    # Seed 001 fix: barrier, clear, barrier: each epoch starts from zeroed locks, as in one epoch.
    ("all-reduce", 2, "barrier-fenced-release-acquire", "host-between-barriers", set()),
    ("all-scatter", 1, "barrier-fenced-release-acquire", "host-between-barriers", set()),
    # Without any reset the counter already holds world_size when epoch 1 starts.
    ("all-reduce", 2, "barrier-fenced-release-acquire", "none", {"race", "stale-read"}),
    # The target grows with the epoch: nothing to reset, and epoch 1 waits for its own adds.
    ("all-reduce", 2, "epoch-flag", "none", set()),
    ("all-scatter", 1, "epoch-flag", "none", set()),
    # Zeroing epoch-flag's counter breaks it: after a reset epoch 1 counts to world_size only,
    # never world_size * 2.
    ("all-reduce", 2, "epoch-flag", "host-between-barriers", {"hang"}),
    # Skip-self hangs in epoch 0 in every execution, so epoch 1 never starts: what its consumer
    # would have read is no violation (it was reported as a stale read while later launches
    # still ran after a hung one).
    ("all-reduce", 2, "add-counter-skip-self", "none", {"hang", "race"}),
]


@pytest.mark.parametrize("scenario, world_size, name, reset, kinds", TWO_EPOCHS)
def test_two_epoch_verdict_depends_on_the_reset_policy(scenario, world_size, name, reset, kinds):
    options = ScenarioOptions(scenario=scenario, world_size=world_size, epochs=2, reset=reset)
    result = check(build(load_protocol(name), options))
    assert result.limit_hit is None
    assert result.executions > 0
    assert set(result.violations) == kinds


def test_a_read_after_a_host_ordered_write_has_an_execution():
    """Launch e0 stores x = 1, launch e1 (after it in host order) reads x: exactly one execution
    (the read sees 1). A regression test: an explorer rewrite once found none here, which made
    every two-epoch check vacuously safe."""
    from syncverify.explore.driver import brute_force, explore
    from syncverify.program import Load, Program, Store, Thread

    program = Program("host-ordered-mp", (
        Thread("P0", 0, 0, (Store("x", 1, "relaxed", "sys"),), "", "e0"),
        Thread("P1", 0, 1, (Load("r", "x", "relaxed", "sys"),), "", "e1"),
    ), host_order=(("e0", "e1"),))
    assert brute_force(program).complete_count == 1
    assert explore(program).complete_count == 1


def test_a_spin_is_not_hung_by_a_write_of_a_later_launch():
    """Launch e0: P0 spins until x == 1, P1 stores x = 1. Launch e1 (host-ordered after e0) stores
    x = 0. P0 eventually reads 1 and e0 ends before e1 starts: no hang. Found with the two-epoch
    scenarios; explore and brute_force both report one (P0 "keeps reading the final value 0")."""
    from syncverify.explore.driver import explore
    from syncverify.program import Branch, Label, Load, Program, Store, Thread

    program = Program("spin-then-later-launch", (
        Thread("P0", 0, 0, (Label("L"), Load("r", "x", "relaxed", "sys"), Branch("L", "ne", "r", 1)), "", "e0"),
        Thread("P1", 0, 1, (Store("x", 1, "relaxed", "sys"),), "", "e0"),
        Thread("P2", 0, 2, (Store("x", 0, "relaxed", "sys"),), "", "e1"),
    ), host_order=(("e0", "e1"),))
    assert not explore(program).can_hang


def test_a_launch_after_a_hung_one_never_starts():
    """Launch e0: P0 spins until x == 1 and nobody writes 1. Launch e1 (host-ordered after e0):
    P1 stores y = 1. e0 never ends, so e1 never starts: one execution, hung, without P1's store."""
    from syncverify.explore.driver import brute_force, explore
    from syncverify.program import Branch, Label, Load, Program, Store, Thread

    program = Program("hung-then-later-launch", (
        Thread("P0", 0, 0, (Label("L"), Load("r", "x", "relaxed", "sys"), Branch("L", "ne", "r", 1)), "", "e0"),
        Thread("P1", 0, 1, (Store("y", 1, "relaxed", "sys"),), "", "e1"),
    ), host_order=(("e0", "e1"),))
    for result in (explore(program), brute_force(program)):
        assert result.complete_count == 0 and len(result.hangs) == 1
        hang = result.hangs[0]
        assert set(hang.stuck) == {0}
        assert not [e for e in hang.events if not e.is_init and e.thread == 1]
        assert hang.final_memory["y"] == 0


def test_a_consumer_reset_protocol_does_not_hang_across_epochs():
    """barrier; release xchg(1); the consumer polls with an acquire CAS(1 -> 0) until == 1 (its own
    reset). One rank, one thread per CTA: safe in one epoch, and in two (e1 starts after e0 ends,
    from the 0 e0's consumer wrote). The model reports epoch 0's consumer hung on the 0 that
    epoch 1's consumer writes."""
    from syncverify.protocols import protocol_from_dict

    protocol = protocol_from_dict({
        "name": "xchg-cas-reset", "summary": "s", "origin": "test", "reset": "consumer",
        "signal": [{"op": "barrier"},
                   {"op": "atomic_xchg", "value": 1, "sem": "release", "scope": "sys", "to": "all"}],
        "wait": [{"op": "await", "read": "atomic_cas", "compare": 1, "value": 0, "sem": "acquire",
                  "scope": "sys", "until": "== 1"}],
    })
    for epochs in (1, 2):
        options = ScenarioOptions(world_size=1, threads_per_cta=1, epochs=epochs)
        assert check(build(protocol, options)).safe is True, f"{epochs} epochs"


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


def test_an_all_scatter_check_says_its_stages_and_push_protocol(capsys):
    assert main(["check", "xchg-flag", "--scenario", "all-scatter", "--world-size", "3", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["push"] == "epoch-flag"
    assert [s["stage"] for s in data["stages"]] == ["pub", "push"]
    # every counterexample is in the pub stage (producer and comm CTA of one rank)
    assert all(row["location"].startswith(("local", "ready@pub", "local@pub"))
               for v in data["violations"] for row in v["trace"] if row["offending"])


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
    (["check", "epoch-flag", "--world-size", "0"], "--world-size=0 must be in 1..64"),
    (["check", "epoch-flag", "--world-size", "65"], "--world-size=65 must be in 1..64"),
    (["check", "epoch-flag", "--tiles", "0"], "tiles=0"),
    (["check", "epoch-flag", "--scenario", "nope"], "scenario='nope'"),
    (["check", "epoch-flag", "--reset", "sometimes"], "reset='sometimes'"),
    (["check", "epoch-flag", "--graph", "x.svg"], ".dot or .png"),
    (["check", "epoch-flag", "--scenario", "all-scatter", "--push", "xchg-flg"], "did you mean 'xchg-flag'"),
    (["check", "epoch-flag", "--scenario", "all-scatter", "--push", "/nonexistent/push.toml"], "push.toml"),
    (["litmus", "/nonexistent/file.litmus"], "file.litmus"),
    (["check", "epoch-flag", "--ctas", "0"], "--ctas=0 must be at least 1"),
    (["check", "epoch-flag", "--scenario", "all-gather-gemm", "--ctas", "1", "--columns", "0"], "--columns=0 must be at least 1"),
    (["check", "epoch-flag", "--scenario", "all-gather-gemm", "--ctas", "1", "--group-m", "0"], "--group-m=0 must be at least 1"),
    (["check", "epoch-flag", "--ctas", "1", "--columns", "2"], "--columns=2: column tiles as units of work are all-gather-gemm's"),
    (["check", "epoch-flag", "--group-m", "2"], "--group-m=2: column tiles as units of work are all-gather-gemm's"),
    (["check", "epoch-flag", "--scenario", "all-gather-gemm", "--columns", "2"], "give --ctas"),
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
    assert len(data["protocols"]) == 10 and data["scenarios"] == ["all-reduce", "all-scatter", "all-gather-gemm", "gemm-reduce-scatter"]


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
