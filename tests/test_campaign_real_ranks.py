"""The fused kernels on real ranks on the CPU (issue 30): one process per rank, ``gloo``, Triton's
interpreter, every rank's heap in one shared file (``syncverify.kernels.processes.run_ranks``, the
path the user's harnesses take with ``--real-ranks``), driven by ``syncverify compare --real-ranks
--interpret`` and ``syncverify.stress.campaign``.

The seeded bug: iris #465's hard-coded lock value (a flag that says 1 on every call), next to its
fix (the call number). With the last rank launched late (``--order last-rank-late``: the
interpreter runs no delays), rank 0's consumer of the second call sees the late rank's flag still
set from the first call and reads its partial before the late rank has written it: bad tiles that
only a second process can cause; the fix waits for the late rank and runs clean.
"""

from __future__ import annotations

import json
import os

import pytest

from syncverify.cli import main
from syncverify.errors import SyncVerifyError
from syncverify.kernels.config import KernelConfig, check_config
from syncverify.kernels.errors import StressConfigError
from syncverify.kernels import processes
from syncverify.kernels.processes import refuse_more_ranks_than_gpus, run_ranks
from syncverify.stress.campaign import (
    INTERPRET_HEAP_BYTES,
    campaign_options,
    kernel_config,
    late_seconds,
    run_processes_batch,
)
from tests.rank_faults import dies_after_first_iteration

BUG, FIX = "iris-465-hardcoded-lock-value", "iris-465-call-number"


def test_compare_on_real_ranks_in_the_interpreter_catches_the_bug_and_passes_its_fix(capsys, tmp_path):
    code = main(["compare", BUG, FIX, "--scenario", "all-reduce", "--real-ranks", "--interpret", "--jobs", "1",
                 "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report  # nothing MODEL UNSOUND
    rows = {row["protocol"]: row for row in report["rows"]}
    bug, fix = rows[BUG], rows[FIX]
    assert bug["model"]["verdict"] == "unsafe" and fix["model"]["verdict"] == "safe"
    assert bug["hardware"]["device"] == fix["hardware"]["device"] == "cpu (interpreter, one process per rank)"
    # the bug: the second call (iteration 1) reads the late rank's partial before it is written
    assert bug["hardware"]["iterations"] == 2 and bug["hardware"]["bad_iterations"] == 1
    assert bug["hardware"]["counts"]["missing-ranks"] > 0 and bug["hardware"]["first_failure"]["iteration"] == 1
    assert bug["hardware"]["first_failure"]["suspect_ranks"] == [1] and bug["agreement"] == "agree"
    # the fix waited for the late rank (another process) through the shared heap
    assert fix["hardware"]["iterations"] == 2 and fix["hardware"]["clean"] and fix["agreement"] == "agree"
    assert "one process per rank (gloo)" in report["note"]


def test_a_rank_that_dies_leaves_a_stopped_result_and_the_partial_record_on_disk(tmp_path, monkeypatch):
    monkeypatch.setattr(processes, "HEAP_FOLDER", str(tmp_path))
    output = tmp_path / "run.jsonl"
    o = campaign_options(protocol=FIX, kernel="all-reduce", world_size=2, interpret=True, real_ranks=True,
                         iterations=3, output=str(output), watchdog_seconds=120)
    from syncverify.protocols import load_protocol

    (result,) = run_processes_batch([(o, load_protocol(FIX))], worker=dies_after_first_iteration)
    assert result.stopped.startswith("rank 1 exited with code 3 before reporting") and not result.clean
    assert result.iterations >= 1  # what rank 0 had reported before its peer died
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert records[0]["type"] == "start" and records[1]["type"] == "progress"
    assert records[1]["iterations"] == 1 and records[1]["bad_iterations"] == 0
    # rank 0's collective failed when its peer died: its result line keeps what it had, stopped, not clean
    assert records[-1]["type"] == "result" and records[-1]["iterations"] == 1 and not records[-1]["clean"]
    assert records[-1]["stopped"].startswith("RuntimeError")
    assert not list(tmp_path.glob("syncverify-heap-*"))  # the shared heap file is gone with the ranks


def test_the_watchdog_kills_ranks_that_stop_reporting():
    outcome = run_ranks(_silent, (), world_size=2, watchdog_seconds=1.0, heap_bytes=4096)
    assert outcome["stopped"] == "watchdog: no report from any rank for 1 s; killed"
    assert outcome["exitcodes"] == [-9, -9]


def _silent(rank, world_size, port, queue, heap_path):
    """A rank that never reports (a stuck collective): the watchdog's case. It checks the heap file first."""
    import time

    assert os.path.getsize(heap_path) == world_size * 4096
    time.sleep(60)


def test_real_ranks_in_the_interpreter_address_peers_through_tables_and_a_late_last_rank():
    o = campaign_options(protocol=FIX, world_size=2, interpret=True, real_ranks=True, order="last-rank-late")
    config = kernel_config(o)
    assert (config.virtual, config.table, config.order) == (False, True, "producers-first")
    assert o.max_polls == 1 << 16  # a peer is another interpreted process: the long cap
    assert [late_seconds(o, r) for r in (0, 1)] == [0.0, 1.0]
    assert kernel_config(campaign_options(protocol=FIX, world_size=2, interpret=True)).virtual  # the default
    assert INTERPRET_HEAP_BYTES >= 1 << 20


@pytest.mark.parametrize("options, message", [
    (dict(real_ranks=True, virtual_ranks=True), "--real-ranks and --virtual-ranks exclude each other"),
    (dict(real_ranks=True, interpret=True, order="consumers-first"), "every protocol hangs"),
])
def test_bad_real_rank_options_are_one_line(options, message):
    with pytest.raises(StressConfigError, match=message):
        campaign_options(protocol=FIX, world_size=2, **options)


def test_more_ranks_than_gpus_on_the_cuda_backend_is_bad_input():
    with pytest.raises(StressConfigError, match="needs 2 GPUs and 1 are visible"):
        check_config(KernelConfig(world_size=2, virtual=False, table=True), gpus=1)
    with pytest.raises(SyncVerifyError, match=r"--world-size=3 on real ranks needs 3 GPUs \(one per rank\) and 2 "
                                              r"are visible; use virtual ranks"):
        refuse_more_ranks_than_gpus(3, 2, error=SyncVerifyError, fix="use virtual ranks")
    refuse_more_ranks_than_gpus(3, None, error=SyncVerifyError, fix="")  # the interpreter: not asked


def test_the_command_line_refuses_real_ranks_it_cannot_run(capsys):
    assert main(["compare", FIX, "--scenario", "all-reduce", "--interpret", "--no-gpu", "--jobs", "1"]) == 2
    assert main(["compare", FIX, "--scenario", "all-reduce", "--world-size", "9", "--real-ranks", "--interpret",
                 "--jobs", "1"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("syncverify: error: ") for line in lines)


def test_compare_in_the_interpreter_late_launches_only_real_ranks():
    from syncverify.compare import INTERPRET_ITERATIONS, _campaign_options

    real = _campaign_options(FIX, "all-reduce", 2, 3.0, real_ranks=True, interpret=True)
    virtual = _campaign_options(FIX, "all-reduce", 2, 3.0, interpret=True)
    assert (real["order"], real["iterations"], real["real_ranks"]) == ("last-rank-late", INTERPRET_ITERATIONS, True)
    # with virtual ranks last-rank-late is a grid order in which every waiting consumer times out
    assert (virtual["order"], virtual["real_ranks"]) == ("producers-first", False)


def test_a_stopped_launch_tells_the_campaign_it_stopped_from_those_it_never_began(monkeypatch):
    from syncverify.protocols import load_protocol
    from syncverify.stress import campaign

    payload = {"protocol": FIX, "kernel": "all-reduce", "world_size": 2, "mode": "processes", "device": "H200",
               "iterations": 2, "bad_iterations": 0}
    stopped = "watchdog: no report from any rank for 90 s; killed"
    fake = {"messages": [(0, "result", (0, payload)), (0, "progress", (1, 1, 2, 4.0, 0))], "exitcodes": [-9, -9],
            "stopped": stopped}
    monkeypatch.setattr(campaign, "run_ranks", lambda *a, **k: fake)
    o = campaign_options(protocol=FIX, world_size=2, watchdog_seconds=90)
    done, hung, never = run_processes_batch([(o, load_protocol(FIX))] * 3)
    assert done.iterations == 2 and (hung.stopped, hung.iterations) == (stopped, 1)  # hung keeps its one iteration
    assert never.stopped == campaign.NOT_STARTED + stopped and never.iterations == 0


def test_compare_shows_no_hardware_for_a_pair_its_launch_never_reached(monkeypatch):
    import syncverify.compare as comparison
    from syncverify.stress import campaign
    from syncverify.stress.campaign import CampaignResult

    def launcher(campaigns, *, on_result=None):
        results = []
        for o, protocol in campaigns:
            result = CampaignResult(protocol.name, o.kernel, o.world_size, "processes", "fake", options=o.to_dict())
            result.stopped = campaign.NOT_STARTED + "watchdog" if protocol.name == FIX else "watchdog"
            results.append(result)
        return results

    monkeypatch.setattr(comparison, "cuda_available", lambda: True)
    monkeypatch.setattr(comparison, "run_campaigns_on_ranks",
                        lambda c, **k: campaign.run_campaigns_on_ranks(c, runner=launcher, **k))
    rows = {r.protocol: r for r in comparison.compare([BUG, FIX], ["all-reduce"], [2], jobs=1, real_ranks=True)}
    assert rows[FIX].hardware is None and rows[FIX].agreement is None  # not "MODEL UNSOUND": no data
    assert rows[BUG].hardware.stopped == "watchdog" and rows[BUG].agreement == "agree"


def test_in_the_interpreter_each_campaign_is_a_launch_of_its_own():
    from syncverify.stress import campaign

    launches = []
    options = dict(protocol=FIX, kernel="all-reduce", world_size=2, interpret=True, iterations=2)
    campaign.run_campaigns_on_ranks([options, options], runner=lambda c, **k: launches.append(len(c)) or
                                    [campaign.CampaignResult(FIX, "all-reduce", 2, "processes", "x")] * len(c))
    assert launches == [1, 1]
