"""Guided stress, positive controls and the failure report in the two newer scenarios
(all-gather-gemm, gemm-reduce-scatter), on the CPU: the schedules the model's counterexamples
give (all-gather-gemm's late stores are its *senders'*), the campaigns they drive through the
Triton interpreter, and the rank a bad tile points at. The GPU side is ``tests/gpu`` and
``benchmarks/new_scenarios_stress.py``."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from syncverify.stress.campaign import CampaignOptions, suspect_producers
from syncverify.stress.classify import BadTile
from syncverify.stress.controls import positive_control
from syncverify.stress.delays import GuidedDelay
from syncverify.stress.guided import guided_plan

NEW = ("all-gather-gemm", "gemm-reduce-scatter")

app = typer.Typer()


@app.callback()
def _root() -> None:
    """A stand-in for the syncverify app."""


def cli(*args):
    from syncverify.cli.stress import stress_command

    if not app.registered_commands:
        app.command("stress")(stress_command)
    return CliRunner().invoke(app, ["stress", *args])


# ----- schedules: the late store of all-gather-gemm is a sender's ----------------------------------

def test_a_missing_cta_barrier_delays_the_senders_other_warps():
    """fenced-release-acquire in all-gather-gemm: the GEMM reads thread 1's slice of rank 0's
    shard after seeing the flag rank 0's sender released from warp 0 (the schedule was
    'no delay at all: the kernels have no delay site before a sender's stores' before)."""
    plan = guided_plan("fenced-release-acquire", kernel="all-gather-gemm", world_size=2, num_warps=8)
    unwritten = next(s for s in plan.schedules if s.kind == "unwritten-read")
    assert unwritten.realizable and unwritten.cause == "no-cta-barrier"
    assert unwritten.entries == (GuidedDelay("before-store", 0, 2000, 4000, 0b11111110, 100),)
    assert unwritten.order[0].startswith("rank 0 sender thread 0") and unwritten.order[0].endswith("signals")
    assert "rank 0 sender thread 1 must store after its CTA's one-thread signal" in unwritten.reasons[0]


def test_a_shard_whose_signal_the_gemm_never_read_makes_its_sender_late_whole():
    """wt-cv-flag in all-gather-gemm: the GEMM polls its own flag only, so rank 1's shard is read
    on rank 0's signal: rank 1's whole sender CTA and its signal are late."""
    plan = guided_plan("wt-cv-flag", kernel="all-gather-gemm", world_size=2, num_warps=4)
    for schedule in plan.schedules:
        assert schedule.realizable
        assert {(e.site, e.rank, e.warps) for e in schedule.entries} == {("before-store", 1, 0b1111),
                                                                         ("store-signal", 1, 0)}


@pytest.mark.parametrize("kernel", NEW)
def test_every_data_violation_of_a_barrierless_protocol_gets_a_forcing_schedule(kernel):
    plan = guided_plan("add-counter", kernel=kernel, world_size=2, num_warps=8, search_seconds=0)
    assert plan.safe is False and plan.schedules
    assert all(s.realizable and s.entries for s in plan.schedules)


# ----- guided runs and positive controls through the interpreter ---------------------------------

@pytest.mark.parametrize("kernel", NEW)
def test_a_guided_hang_is_reproduced_at_iteration_0_in_the_interpreter(kernel, tmp_path):
    result = cli("--protocol", "add-counter-skip-self", "--kernel", kernel, "--interpret", "--guided",
                 "--seconds", "0.5", "--schedule", str(tmp_path / "s.json"), "--json")
    assert result.exit_code == 1, result.output
    hang = next(row for row in json.loads(result.stdout)["rows"] if row["kind"] == "hang")
    assert hang["guided_reproduced"] and hang["guided_first_failure_iteration"] == 0
    assert json.loads((tmp_path / "s.json").read_text())["kernel"] == kernel


def test_a_guided_sender_schedule_runs_in_the_interpreter_and_says_what_it_cannot_show(tmp_path):
    """The senders' delay table reaches the kernel (the run completes, iterations counted); the
    interpreter runs programs one at a time, so the late sender cannot be overtaken there."""
    result = cli("--protocol", "fenced-release-acquire", "--kernel", "all-gather-gemm", "--interpret", "--guided",
                 "--seconds", "0.3", "--schedule", str(tmp_path / "s.json"))
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "s.json").read_text())
    # the late senders are the witnesses' writers: rank 0's, and since the GEMM's tl.dot barrier is
    # modelled (it changed which counterexample the explorer meets first) rank 1's too
    assert {e["rank"] for s in saved["schedules"] for e in s["entries"]} <= {0, 1}
    assert saved["schedules"] and all(s["entries"] for s in saved["schedules"])
    assert "delay rank 0 at before-store: 2000-4000 ns, warps 0b1110" in result.stdout  # 4 warps interpreted
    assert "sequential" in result.stdout


@pytest.mark.parametrize("kernel", NEW)
def test_the_positive_control_of_a_safe_protocol_exists_and_its_failure_path_runs(kernel):
    control = positive_control("epoch-flag", kernel=kernel, world_size=2)
    assert control.change == "without its CTA barrier (signal step 1)"
    assert control.cause == "no-cta-barrier" and "unwritten-read" in control.violations
    # sequential in the interpreter: the control cannot fail, the path a GPU takes when its
    # delays stop working
    result = cli("--protocol", "epoch-flag", "--kernel", kernel, "--interpret", "--iterations", "1", "--control")
    assert result.exit_code == 1, result.output
    assert "DELAYS INEFFECTIVE" in result.stdout and "epoch-flag-no-barrier-signal-1" in result.stdout


@pytest.mark.parametrize("kernel", NEW)
def test_guided_stress_of_a_safe_protocol_aims_at_its_controls_counterexample(kernel, tmp_path):
    result = cli("--protocol", "barrier-fenced-release-acquire", "--kernel", kernel, "--interpret", "--guided",
                 "--seconds", "0.3", "--no-random", "--schedule", str(tmp_path / "s.json"))
    assert "its schedules aim at the counterexamples of its barrier-fenced-release-acquire-no-barrier" \
        in result.stdout, result.output
    assert "positive control barrier-fenced-release-acquire-no-barrier-signal-1 under the same schedules: " \
        "DELAYS INEFFECTIVE" in result.stdout
    assert result.exit_code == 1
    saved = json.loads((tmp_path / "s.json").read_text())
    assert saved["schedules"] and all(s["entries"] for s in saved["schedules"])


# ----- whose producer a bad tile points at -----------------------------------------------------

def _options(kernel: str, world_size: int = 3) -> CampaignOptions:
    return CampaignOptions(kernel=kernel, world_size=world_size, m=96, n=32, block_m=16, block_n=16)


@pytest.mark.parametrize("tile, shard", [(0, 0), (3, 0), (4, 1), (9, 2), (11, 2)])
def test_an_all_gather_tile_points_at_the_sender_of_its_rows(tile, shard):
    # M = 96 over 3 ranks: 32 rows, two row tiles per shard; two column tiles per row tile
    bad = BadTile(iteration=0, rank=0, tile=tile, kind="unwritten", consumer=0)
    assert suspect_producers(bad, _options("all-gather-gemm")) == [shard]


def test_an_all_gather_hang_points_at_every_sender():
    bad = BadTile(iteration=0, rank=1, tile=9, kind="hang", consumer=1)
    assert suspect_producers(bad, _options("all-gather-gemm")) == [0, 1, 2]


def test_a_reduce_scatter_tile_points_at_its_missing_ranks():
    bad = BadTile(iteration=0, rank=0, tile=2, kind="missing-ranks", missing_ranks=(2,), consumer=0)
    assert suspect_producers(bad, _options("gemm-reduce-scatter")) == [2]


def test_the_first_failure_names_the_rank_whose_shard_was_never_sent():
    """xchg-flag, W = 3, the last rank's senders late (interpreter order): ranks 0 and 1 compute
    with shard 2 unwritten. The report names rank 2's sender, not the GEMM's own rank (0), and
    the delays it prints are rank 2's."""
    from syncverify.stress.campaign import run_campaign
    from syncverify.stress.report import first_failure_lines

    table = ({"site": "before-store", "rank": 2, "ns_lo": 1, "ns_hi": 2, "warps": 1, "pct": 100},)
    result = run_campaign(kernel="all-gather-gemm", protocol="xchg-flag", world_size=3, order="last-rank-late",
                          iterations=1, interpret=True, delays="guided", delay_table=table)
    first = result.first_failure
    assert (first["rank"], first["kind"]) == (0, "unwritten")
    assert first["element"][0] // 32 == 2  # the bad rows are shard 2's
    assert first["suspect_ranks"] == [2]
    assert set(first["producer_delays"]) == {"2"}
    assert "  the tile points at the producer(s) of rank(s) [2]" in first_failure_lines(result)


def test_a_saved_plan_reads_back_equal(tmp_path):
    from syncverify.stress.guided import GuidedPlan

    plan = guided_plan("wt-cv-flag", kernel="all-gather-gemm", world_size=2, num_warps=4)
    path = tmp_path / "plan.json"
    plan.save(str(path))
    again = GuidedPlan.from_dict(json.loads(path.read_text()))
    assert again == plan and again.schedules[0].entries[0] == GuidedDelay("before-store", 1, 3000, 6000, 0b1111, 100)


def test_a_stale_read_shows_as_unwritten_when_the_workspaces_are_zeroed():
    """``--poison all`` zeroes the workspaces each iteration: the previous iteration's tile reads
    as the zero fill, so a guided stale-read run that found only unwritten tiles reproduced it."""
    from syncverify.stress.guided import reproduced

    assert reproduced("stale-read", {"unwritten": 32512, "stale": 0})
    assert not reproduced("stale-read", {"hang": 3})
