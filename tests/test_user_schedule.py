"""The planner side of ``syncverify stress FILE.py`` (issue 25): guided durations, planned actions.

The durations of a guided schedule for a user's kernel are the ones measured on the H200
(``syncverify.frontend.schedule.USER_NS_SCALE``, docs/RESULTS.md runs 2 and 3); the committed plans
the GPU script replays (``benchmarks/user_stress_plans.json``) must carry the same durations.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from syncverify.frontend import rewrite as rw
from syncverify.frontend import schedule as sch
from syncverify.frontend.check import check_kernel, load_harness
from syncverify.frontend.harness import run_harness
from syncverify.frontend.schedule import guided_schedules
from syncverify.frontend.user_stress import StressOptions, run_stress
from syncverify.kernels.compile import compile_like_launch
from syncverify.stress import guided as fused
from tests.compiled import run_compiled

ROOT = Path(__file__).resolve().parents[1]
SCATTER = "examples/all_scatter/harness.py"
ONE_SHOT = "examples/one_shot_all_reduce/harness.py"
PLANS = ROOT / "benchmarks" / "user_stress_plans.json"
#: each guided action and the duration the planner gives it
DURATIONS = {"hold": {sch.WARPS_LATE_NS}, "start": {sch.CTA_LATE_NS, sch.CTA_LATE_TOGETHER_NS},
             "host": {sch.HOST_LATE_NS}, "before": {sch.POLLER_LATE_NS}, "touch": {sch.TOUCH_NS},
             "congest": {sch.CONGEST_NS}, "aim": {sch.AIM_NS}, "place": {sch.PLACE_NS}}


def test_user_kernel_holds_are_the_durations_measured_on_the_h200():
    # run 3 (docs/RESULTS.md): 20x the fused kernels' 2-4 us made every realizable schedule fail
    assert sch.USER_NS_SCALE == 20
    assert sch.WARPS_LATE_NS == (40_000, 80_000) == tuple(20 * ns for ns in fused.WARPS_LATE_NS)
    assert sch.CTA_LATE_NS == tuple(20 * ns for ns in fused.CTA_LATE_NS)
    assert (sch.HOST_LATE_NS, sch.POLLER_LATE_NS) == ((1_000_000,) * 2, (2_000_000, 2_400_000))
    assert fused.WARPS_LATE_NS == (2000, 4000)  # the fused kernels keep theirs (measured on their own)


def test_the_planned_touch_is_made_once_before_the_wait():
    # a touch repeated before each poll put a bar.sync in a divergent poll loop: measured unsound, removed
    assert sch.TOUCH_NS == sch.TOUCH_ONCE_NS == (1, 1)


def test_a_planned_hold_carries_the_measured_duration():
    model = check_kernel(str(ROOT / f"{SCATTER}::seed_fix"), world_size=2)
    schedule = next(s for s in guided_schedules(model, num_warps=4) if s.kind == "unwritten-read")
    (entry,) = schedule.entries
    assert (entry.where, entry.ns_lo, entry.ns_hi) == ("hold", 40_000, 80_000)
    assert "40000-80000 ns" in entry.describe()


@pytest.mark.parametrize("target", sorted(json.loads(PLANS.read_text())))
def test_the_committed_plans_carry_the_planners_durations(target):
    plan = json.loads(PLANS.read_text())[target]
    for schedule in plan["schedules"]:
        for entry in schedule["entries"]:
            assert (entry["ns_lo"], entry["ns_hi"]) in DURATIONS[entry["where"]], (target, entry)


# ----- a store, a CTA barrier, a weak flag: the touch -------------------------------------------------

def test_a_weak_poll_after_a_barriered_store_gets_a_touch_and_a_late_producer():
    model = check_kernel(str(ROOT / f"{SCATTER}::original"), world_size=2)
    schedule = next(s for s in guided_schedules(model, num_warps=4) if s.kind == "unwritten-read")
    assert schedule.realizable and "touches c_global" in schedule.note
    start, touch, congest = schedule.entries
    assert (congest.where, congest.rank, congest.ns_lo) == ("congest", 0, sch.CONGEST_NS[0])
    assert (start.where, start.program, start.ns_lo) == ("start", 0, sch.CTA_LATE_NS[0])
    # the touch is at the consumer's wait (the .cv poll), in the consumer's program
    assert (touch.where, touch.line, touch.program, touch.file) == ("touch", 84, 1, "gemm_all_scatter_wg_specialization.py")
    assert "L1" in touch.reason and "no acquire" in touch.reason


@pytest.mark.parametrize("name", ["original", "barrier_without_fence"])
def test_a_reader_that_acquires_after_its_poll_gets_no_touch_but_its_data_placed_in_host_memory(name):
    model = check_kernel(str(ROOT / f"{ONE_SHOT}::{name}"), world_size=2)
    schedule = next(s for s in guided_schedules(model, num_warps=4) if s.kind == "unwritten-read")
    assert "acquires after its poll (at iris.py:" in schedule.note and "invalidates its SM's L1" in schedule.note
    # no touch (an acquire invalidates L1): the producer starts late, and the buffer the read reads
    # (local_C; its signal is in locks) is placed in host-mapped memory, the flags staying on the GPU
    assert schedule.realizable and [e.where for e in schedule.entries] == ["start", "place"]
    late, place = schedule.entries
    # every producer program equally late: their stores cross the host link together
    assert (late.kernel, late.ns_lo, late.ns_hi) == ("persistent_gemm", *sch.CTA_LATE_TOGETHER_NS)
    assert sch.CTA_LATE_TOGETHER_NS == (2_000_000, 2_000_000)  # the reader's kernel already polls (RESULTS.md)
    assert (place.buffer, place.program, place.ns_lo, place.ns_hi) == ("local_C", -1, *sch.PLACE_NS)
    # its reason is printed with the schedule: why no delay can do it, and what was measured
    text = "\n".join(schedule.describe())
    assert "place local_C in host-mapped memory" in text and "only the memory system can" in text
    assert "flags included, on the GPU" in text and "2,123 and 3,536 of 9,600 tiles stale" in text
    assert "aimed: local_C in host-mapped memory, the signal on the GPU" in schedule.note


def test_a_barrier_that_warp_0_reaches_only_after_its_signal_leaves_the_hold_realizable():
    # seed_fix at the model's sizes: one producer program, two tiles; warps 1.. (thread 1) store tile
    # 0, then meet the next tile's tl.dot barrier, which warp 0 (thread 0) reaches only after its
    # fence and signal: the barrier orders nothing before the signal, so warps 1.. can still hold
    # their store (on the H200 this schedule failed at iteration 7; docs/RESULTS.md run 4)
    model = check_kernel(str(ROOT / f"{ONE_SHOT}::seed_fix"), world_size=2)
    schedule = next(s for s in guided_schedules(model, num_warps=4) if s.kind == "unwritten-read")
    assert schedule.realizable and [e.where for e in schedule.entries] == ["hold"]
    (hold,) = schedule.entries
    assert (hold.kernel, hold.warps, hold.ns_lo) == ("persistent_gemm", 0b1110, sch.WARPS_LATE_NS[0])
    assert "CTA barrier" not in schedule.note


def _kernel_of(target: str, name: str):
    fn, _name = load_harness(str(ROOT / target))
    return next(op.kernel for op in run_harness(fn, 2, 1).ops if op.kind == "launch" and op.kernel.fn.__name__ == name)


def test_the_rewrite_touches_the_reads_a_wait_lets_through_when_their_address_is_known_before_it():
    rewritten = rw.rewrite_kernel(_kernel_of(f"{SCATTER}::original", "persistent_gemm_all_scatter_wg_specialization"))
    (touch,) = [s for s in rewritten.sites if s.where == "touch"]
    assert touch.line == 84 and "while tl.load(locks" in touch.text
    # iris.put's local load, made before the wait behind the guided switch, its value kept
    assert f"if sv_touching(sv_ctl, sv_table, {touch.id}, sv_rank" in rewritten.source
    assert "sv_keep(tl.load(c_global + global_offset), sv_ctl, SV_INTERPRET)" in rewritten.source
    assert rw.same_kernel(rw.strip_inserted(rewritten.tree), rewritten.original_tree)
    # the one-shot consumer computes its read's offset after the wait: nothing to touch
    consumer = rw.rewrite_kernel(_kernel_of(f"{ONE_SHOT}::original", "persistent_all_reduce"))
    assert not [s for s in consumer.sites if s.where == "touch"]


def test_a_touch_compiles_to_one_more_plain_load_of_the_data_before_the_poll():
    """sm_90 PTX without a GPU (in its own process, as tests/test_user_stress.py's PTX test): with
    delays on, the rewrite of a poll-then-read kernel loads the data once before the volatile poll
    (the touch, behind its guided test) and once after it (the bounded wait: once more in the loop,
    before each poll); with them off, once."""
    run_compiled("import test_user_schedule as t; t.touch_ptx_loads()", timeout=300)


def touch_ptx_loads() -> None:
    """The body of the test above."""
    import torch  # the PTX test's CPU tensors stand in for device ones

    sys.path.insert(0, str(ROOT / "tests" / "user_kernels"))
    from kernels import polled_reader

    rewritten = rw.rewrite_kernel(polled_reader)
    assert sorted(s.where for s in rewritten.sites if "while" in s.text) == ["after", "before", "touch", "wait"]
    out, data, flag = torch.zeros(512), torch.zeros(512), torch.zeros(1, dtype=torch.int32)  # 4 floats a thread: v4
    scratch = torch.zeros(64, dtype=torch.int32)
    extra = dict(sv_ctl=scratch, sv_table=scratch, sv_mirror=scratch, sv_rank=0, sv_slot=0, SV_WARPS=4, SV_WORLD=1,
                 SV_INTERPRET=False, SV_BOUND=False, SV_MIRROR=False)

    def data_loads(delays: bool, bound: bool = False) -> tuple[int, int]:
        ptx = compile_like_launch(rewritten.kernel, out, data, flag, N=512, **(extra | {"SV_BOUND": bound}),
                                  SV_DELAYS=-1 if delays else 0).asm["ptx"]
        code = [line.strip() for line in ptx.splitlines()]
        poll = next(i for i, line in enumerate(code) if line.startswith("ld.volatile.global"))
        plain = [i for i, line in enumerate(code) if re.match(r"ld\.global\.(v\d\.)?b32", line)]
        # the control block's and the table's scalar loads are b32 too: count the data's vector loads
        return sum(1 for i in plain if i < poll and ".v4" in code[i]), sum(1 for i in plain if i > poll and ".v4" in code[i])

    assert data_loads(False) == (0, 1)
    assert data_loads(True) == (1, 1)
    # the bounded wait a stress run uses touches once too (a touch before each poll was removed: unsound)
    assert data_loads(False, bound=True) == (0, 1)
    assert data_loads(True, bound=True) == (1, 1)


def test_the_latent_examples_gpu_script_runs_its_harness_rows_in_the_interpreter(tmp_path, capsys):
    """benchmarks/user_stress_latent_gpu.py's CPU path: Part B's rows, one interpreted iteration each
    (Part A is inline PTX: GPU only; its kernels compile for sm_90, checked when the script was written)."""
    sys.path.insert(0, str(ROOT))
    from benchmarks import user_stress_latent_gpu as script

    assert script.main(["--interpret", "--parts", "b", "--out", str(tmp_path)]) == 0
    raw = json.loads((tmp_path / "user_stress_latent_gpu.json").read_text())
    assert len(raw["b"]) == 7 and not [row for row in raw["b"] if "error" in row]
    touch = raw["b"][0]
    assert touch["run"] == "guided (touch)" and "touches c_global" in touch["schedule"][0]
    assert capsys.readouterr().out.rstrip().endswith("| 1 | - | - | - |" + f" {raw['b'][-1]['seconds']} |")
