"""``syncverify stress FILE.py --real-ranks`` on the CPU: one process per rank, gloo, Triton's
interpreter, every rank's heap in one shared file (``syncverify.frontend.real_ranks``).

The differential: a harness whose rank-1 consumer is launched before the rank-0 producer it waits
for. Virtual ranks in the interpreter run the consumer to its poll cap first (a hang); real ranks
run the two processes at the same time, so the consumer sees the producer's put and signal through
the shared heap (clean).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from syncverify.cli import main
from syncverify.frontend.check import load_harness
from syncverify.frontend.real_ranks import check_real_ranks, own_expectations, run_real_ranks
from syncverify.frontend.user_stress import StressInputError, StressOptions, plan_harness, run_stress

HARNESS = Path(__file__).resolve().parent / "user_kernels" / "harness.py"
CROSS = f"{HARNESS}::consumer_launched_first"


def test_real_ranks_meet_where_virtual_ranks_in_the_interpreter_cannot(capsys):
    virtual = run_stress(StressOptions(CROSS, interpret=True, iterations=1, delays="none"))
    assert virtual.first_failure.kind == "hang" and "rank_kernels.py" in virtual.first_failure.hang["site"]
    code = main(["stress", CROSS, "--real-ranks", "--interpret", "--iterations", "2", "--delays", "none", "--json",
                 "--watchdog", "120"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    result = report["result"]
    assert result["iterations"] == 2 and result["bad_iterations"] == 0 and result["stopped"] is None
    assert result["notes"][0].startswith("real ranks: 2 process(es), gloo")


def test_each_rank_validates_its_own_copy():
    fn, _name = load_harness(CROSS)
    plan = plan_harness(StressOptions(CROSS, interpret=True))
    options = StressOptions(CROSS, interpret=True)
    assert (own_expectations(plan, options, 0), own_expectations(plan, options, 1)) == ((0, ()), (1, (0,)))
    clean = f"{HARNESS}::clean"  # expect_equal(out, ...) of a symmetric buffer: one copy per rank
    plan = plan_harness(StressOptions(clean, interpret=True))
    assert [own_expectations(plan, StressOptions(clean, interpret=True), r) for r in (0, 1)] == [(1, (0,)), (1, (0,))]
    # the tiles each rank's expectations name follow them (rank 1 expects nothing of rank 0's tiles)
    tiled = f"{HARNESS}::tiled"
    plan = plan_harness(StressOptions(tiled, interpret=True))
    assert [own_expectations(plan, StressOptions(tiled, interpret=True), r) for r in (0, 1)] == [(2, (4, 4)), (0, ())]


def test_bad_input_for_real_ranks_is_one_line():
    with pytest.raises(StressInputError, match="give --iterations"):
        check_real_ranks(StressOptions(CROSS, interpret=True, seconds=1.0), gpus=None)
    with pytest.raises(StressInputError, match=r"needs 2 GPUs \(one per rank\) and 1 is visible"):
        check_real_ranks(StressOptions(CROSS, iterations=1), gpus=1)
    check_real_ranks(StressOptions(CROSS, iterations=1), gpus=8)  # two ranks on GPUs: symmetric memory
    check_real_ranks(StressOptions(CROSS, iterations=1, world_size=1), gpus=1)  # one rank, one GPU: runs


def test_the_command_refuses_real_ranks_without_iterations_and_for_a_protocol(capsys):
    assert main(["stress", CROSS, "--real-ranks", "--interpret"]) == 2
    assert main(["stress", "--protocol", "epoch-flag", "--real-ranks", "--virtual-ranks", "--interpret"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert "--real-ranks runs the same number of iterations on every rank" in lines[0]
    assert lines[-1] == ("syncverify: error: --real-ranks and --virtual-ranks exclude each other: choose one")


@pytest.mark.skipif(not os.environ.get("SYNCVERIFY_REAL_RANKS_FULL"), reason="SYNCVERIFY_REAL_RANKS_FULL=1: "
                    "two more real-rank runs (a minute on a 2-core machine); last run in docs/stress.md")
def test_real_ranks_find_a_half_written_output_on_every_rank():
    result = run_real_ranks(StressOptions(f"{HARNESS}::half_written", interpret=True, iterations=2, delays="none"),
                            watchdog=120)
    assert result.bad_iterations == 2 and result.stopped is None
    assert {f.expectation for f in result.failures} == {"out@0", "out@1"}


def test_a_rank_workers_errors_reach_the_parent_as_one_line_of_input_or_a_traceback():
    import queue

    from syncverify.errors import SyncVerifyError
    from syncverify.kernels.processes import reporting_errors

    q = queue.Queue()
    with reporting_errors(1, q):
        raise SyncVerifyError("more ranks than GPUs")
    with reporting_errors(0, q):
        raise ValueError("a bug")
    with reporting_errors(0, q):
        q.put((0, "done", None))
    assert q.get_nowait() == (1, "error", "input: more ranks than GPUs")
    rank, kind, text = q.get_nowait()
    assert (rank, kind) == (0, "error") and text.startswith("Traceback") and "ValueError: a bug" in text
    assert q.get_nowait() == (0, "done", None) and q.empty()
