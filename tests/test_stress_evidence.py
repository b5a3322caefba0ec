"""Hardware evidence on the CPU (what CI can check of it): the delay schedule built from a model
counterexample, the ``stale`` class that ``--poison previous`` makes visible, the positive
control's failure path, and the honest replay count. The GPU side is ``tests/gpu``."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from syncverify.stress.campaign import run_campaign
from syncverify.cli.stress import INTERPRETER_NOTE, stress_command
from syncverify.stress.controls import control_verdict, positive_control, sibling_candidates
from syncverify.stress.delays import GuidedDelay
from syncverify.stress.guided import guided_plan, schedule_from_trace
from syncverify.protocols import load_protocol

app = typer.Typer()
app.command("stress")(stress_command)


@app.callback()
def _root() -> None:
    """A stand-in for the syncverify app."""


def cli(*args):
    return CliRunner().invoke(app, ["stress", *args])


# ----- schedules from counterexamples -----------------------------------------------------------

def test_a_missing_cta_barrier_delays_the_other_warps_of_the_writer_not_the_signal():
    # the model's witness: rank 0's consumer reads thread 1's slice of rank 0's partial unwritten
    # after seeing the counter that rank 0's thread 0 (warp 0) released
    plan = guided_plan("fenced-release-acquire", kernel="all-reduce", world_size=2, num_warps=8)
    assert plan.safe is False
    unwritten = next(s for s in plan.schedules if s.kind == "unwritten-read")
    assert unwritten.cause == "no-cta-barrier" and unwritten.realizable
    assert unwritten.entries == (GuidedDelay("before-store", 0, 2000, 4000, 0b11111110, 100),)
    assert "warp 0 (the signal) does not" in unwritten.reasons[0]
    assert any("rank 0 consumer" in why for why in unwritten.ahead)  # the reader is not delayed


def test_a_writer_whose_signal_the_consumer_never_read_is_delayed_whole():
    # release-xchg-cas-acquire in all-reduce signals only its own rank: rank 1's partial is read
    # on rank 0's flag alone, so rank 1's whole producer CTA is late, its signal included
    plan = guided_plan("release-xchg-cas-acquire", kernel="all-reduce", world_size=2, num_warps=4)
    schedule = plan.schedules[0]
    assert {(e.site, e.rank, e.warps) for e in schedule.entries} == {("before-store", 1, 0b1111),
                                                                     ("store-signal", 1, 0)}
    assert schedule.order[-1] == "rank 1 producer thread 0 stores partial.r1.t0.s0 (too late)"


def test_a_barrier_between_store_and_signal_makes_the_witness_unforceable_by_delays():
    def origin(role: str, thread: int) -> dict:
        return {"rank": 0, "role": role, "thread": thread, "tile": 0, "epoch": 0, "after_epoch": None}

    trace = [
        {"rank": 0, "cta": "producer of tile 0", "thread": 1, "role": "rank 0 producer tile 0 epoch 0 thread 1",
         "step": "tile store: rank 0's local", "event": "W local.r0.t0.s1", "location": "local.r0.t0.s1",
         "reads_from": None, "offending": False, "origin": origin("producer", 1), "reads_from_origin": None,
         "barrier": None, "kind": "W", "tile_data": True, "section": None},
        {"rank": 0, "cta": "producer of tile 0", "thread": 1, "role": "rank 0 producer tile 0 epoch 0 thread 1",
         "step": "signal step 1 (barrier)", "event": "B.sync 0", "location": None, "reads_from": None,
         "offending": False, "origin": origin("producer", 1), "reads_from_origin": None, "barrier": ["sync", 0],
         "kind": "B", "tile_data": False, "section": "signal"},
        {"rank": 0, "cta": "comm of tile 0", "thread": 0, "role": "rank 0 comm tile 0 epoch 0 thread 0",
         "step": "wait step 1 (await): poll ready.r0.t0 until == 1", "event": "R ready.r0.t0=1",
         "location": "ready.r0.t0", "reads_from": "rank 0 producer tile 0 epoch 0 thread 0", "offending": False,
         "origin": origin("comm", 0), "reads_from_origin": origin("producer", 0), "barrier": None, "kind": "R",
         "tile_data": False, "section": "wait"},
        {"rank": 0, "cta": "comm of tile 0", "thread": 1, "role": "rank 0 comm tile 0 epoch 0 thread 1",
         "step": "tile load: rank 0's local", "event": "R local.r0.t0.s1", "location": "local.r0.t0.s1",
         "reads_from": "the initial state", "offending": True, "origin": origin("comm", 1),
         "reads_from_origin": None, "barrier": None, "kind": "R", "tile_data": True, "section": None},
    ]
    schedule = schedule_from_trace("unwritten-read", "not-morally-strong", "...", trace, num_warps=8)
    assert not schedule.realizable and schedule.entries == ()
    assert "CTA barrier" in schedule.note
    without_barrier = schedule_from_trace("unwritten-read", "no-cta-barrier", "...", [trace[0]] + trace[2:],
                                          num_warps=8)
    assert without_barrier.realizable
    assert without_barrier.entries == (GuidedDelay("before-store", 0, 2000, 4000, 0b11111110, 100),)


def test_warp_specialized_barriers_aim_the_delay_at_the_warps_the_signal_does_not_wait_for():
    # one warpgroup's named barrier (warps 0-3) while both warpgroups store: delaying warps 1-3
    # would hold warp 0's signal back at the barrier too, so only warps 4-7 are late
    one_group = guided_plan("fa3-epilogue-one-warpgroup-barrier", kernel="all-reduce", world_size=2,
                            search_seconds=0)
    assert {(s.realizable, e.site, e.warps) for s in one_group.schedules for e in s.entries} == \
        {(True, "before-store", 0b11110000)}
    # the signal warp only arrives (bar.arrive does not wait): the store warps' barrier does not
    # hold the signal back, so delaying them forces the late store
    arrives = guided_plan("fa3-epilogue-signal-warp-arrives", kernel="all-reduce", world_size=2, search_seconds=0)
    assert all(s.realizable for s in arrives.schedules)
    assert {(e.site, e.warps) for s in arrives.schedules for e in s.entries} == {("before-store", 0b11111110)}
    # PyTorch's signal pad without its CTA barrier: the one-thread CAS loop broadcasts its result
    # through a CTA barrier *after* the signal write, which does not hold the signal back
    control = positive_control(load_protocol("pytorch-signal-pad"), kernel="all-reduce", world_size=2)
    pad = guided_plan(control.protocol, kernel="all-reduce", world_size=2, search_seconds=0)
    assert pad.schedules and all(s.realizable for s in pad.schedules)
    assert {(e.site, e.warps) for s in pad.schedules for e in s.entries} == {("before-store", 0b11111110)}


def test_a_hang_needs_no_delay_and_the_schedule_is_saved_and_printed(tmp_path):
    plan = guided_plan("add-counter-skip-self", kernel="all-reduce", world_size=2, search_seconds=0)
    hang = next(s for s in plan.schedules if s.kind == "hang")
    assert hang.realizable and hang.entries == () and "does not depend on the order" in hang.note
    path = tmp_path / "plan.json"
    plan.save(str(path))
    assert json.loads(path.read_text())["schedules"][0]["kind"] == "hang"
    assert "no timing is needed" in plan.describe()


def test_the_guided_run_reports_each_kind_next_to_random_delays_in_the_interpreter(tmp_path):
    result = cli("--protocol", "add-counter-skip-self", "--interpret", "--guided", "--seconds", "0.5",
                 "--schedule", str(tmp_path / "s.json"), "--json")
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    hang = next(row for row in data["rows"] if row["kind"] == "hang")
    assert hang["guided_reproduced"] and hang["random_reproduced"]
    assert hang["guided_first_failure_iteration"] == 0
    assert json.loads((tmp_path / "s.json").read_text())["protocol"] == "add-counter-skip-self"


# ----- stale tiles ----------------------------------------------------------------------------

@pytest.mark.parametrize("poison, kind, ranks", [("all", "missing-ranks", "missing_ranks"),
                                                  ("previous", "stale", "stale_ranks")])
def test_a_partial_left_from_the_previous_iteration_is_stale_only_when_it_is_kept(poison, kind, ranks):
    # wt-cv-flag's flags are never reset here, so in iteration 1 the consumers pass on iteration
    # 0's flags and (last-rank-late) sum before rank 1's producers ran: rank 1's partial is the
    # previous iteration's (--poison previous) or zero (--poison all)
    result = run_campaign(protocol="wt-cv-flag", kernel="all-reduce", interpret=True, iterations=2, reset="none",
                          order="last-rank-late", poison=poison)
    second = [t for t in result.failures if t["iteration"] == 1]
    assert second and {t["kind"] for t in second} == {kind}
    assert {tuple(t[ranks]) for t in second} == {(1,)}
    assert result.counts["stale"] == (len(second) if poison == "previous" else 0)


def test_a_sum_of_only_last_iterations_partials_is_stale_from_every_rank():
    result = run_campaign(protocol="wt-cv-flag", kernel="all-reduce", interpret=True, iterations=2, reset="none",
                          order="consumers-first", poison="previous")
    second = [t for t in result.failures if t["iteration"] == 1]
    assert {(t["kind"], tuple(t["stale_ranks"])) for t in second} == {("stale", (0, 1))}
    assert second[0]["first_bad"]["got"] != second[0]["first_bad"]["expected"]


# ----- positive controls ----------------------------------------------------------------------

def test_siblings_take_one_ordering_step_away_barriers_first():
    from syncverify.protocols import load_protocol

    changes = [change for change, _p in sibling_candidates(load_protocol("barrier-fenced-release-acquire"))]
    assert changes[0] == "without its CTA barrier (signal step 1)"
    assert "without its fence (signal step 2)" in changes
    assert any("acquire weakened to relaxed" in c for c in changes)


def test_the_positive_control_of_a_safe_protocol_is_a_sibling_the_model_calls_unsafe():
    control = positive_control("epoch-flag", kernel="all-scatter", world_size=2)
    assert control.change == "without its CTA barrier (signal step 1)"
    assert control.cause == "no-cta-barrier" and "unwritten-read" in control.violations
    assert [s.op for s in control.protocol.signal] == ["atomic_add"]


def test_a_control_that_does_not_fail_says_the_delays_were_ineffective_and_exits_1():
    # the interpreter is sequential: the sibling without its barrier cannot fail there, which is
    # exactly the failure path a GPU run takes when its delays stop working
    result = cli("--protocol", "barrier-fenced-release-acquire", "--interpret", "--iterations", "1", "--control")
    assert result.exit_code == 1, result.output
    assert "DELAYS INEFFECTIVE" in result.stdout
    assert "barrier-fenced-release-acquire-no-barrier-signal-1" in result.stdout
    effective, sentence = control_verdict(None, None)
    assert not effective and "no positive control" in sentence


# ----- the interpreter says what it can show, and replays count -------------------------------

def test_the_interpreter_says_it_is_sequential_and_shows_the_models_verdict():
    result = cli("--protocol", "fenced-release-acquire", "--interpret", "--iterations", "1")
    assert result.exit_code == 0
    assert INTERPRETER_NOTE in result.stdout
    assert "model verdict          unsafe (unwritten-read, race; 1 call)" in result.stdout
    assert "trust the model here" in result.stdout


def test_consumer_first_hangs_of_a_safe_protocol_are_an_artifact_of_the_order():
    result = cli("--protocol", "barrier-fenced-release-acquire", "--interpret", "--iterations", "1",
                 "--order", "consumers-first")
    assert result.exit_code == 0, result.output
    assert "artifact of --order consumers-first" in result.stdout
    genuine = cli("--protocol", "add-counter-skip-self", "--interpret", "--iterations", "1",
                  "--order", "consumers-first")
    assert genuine.exit_code == 1  # the model finds this hang: it is the protocol's


def test_a_replay_counts_how_often_the_exact_iteration_fails_again():
    result = cli("--protocol", "add-counter-skip-self", "--interpret", "--replay", "0", "--replay-times", "2",
                 "--replay-kind", "hang")
    assert result.exit_code == 1, result.output
    assert result.stdout.startswith("reproduced 2/2 (iteration 0, hang")
    clean = cli("--protocol", "add-counter-skip-self", "--interpret", "--replay", "1", "--replay-times", "2")
    assert clean.exit_code == 0 and clean.stdout.startswith("reproduced 0/2")  # skip-self: every other launch
