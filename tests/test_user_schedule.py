"""The planner side of ``syncverify stress FILE.py`` (issue 25): guided durations, planned actions.

The durations of a guided schedule for a user's kernel are the ones measured on the H200
(``syncverify.frontend.schedule.USER_NS_SCALE``, docs/RESULTS.md runs 2 and 3); the committed plans
the GPU script replays (``benchmarks/user_stress_plans.json``) must carry the same durations.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from syncverify.frontend import schedule as sch
from syncverify.frontend.check import check_kernel
from syncverify.frontend.schedule import guided_schedules
from syncverify.stress import guided as fused

ROOT = Path(__file__).resolve().parents[1]
SCATTER = "examples/all_scatter/harness.py"
PLANS = ROOT / "benchmarks" / "user_stress_plans.json"
#: each guided action and the duration the planner gives it
DURATIONS = {"hold": sch.WARPS_LATE_NS, "start": sch.CTA_LATE_NS, "host": sch.HOST_LATE_NS,
             "before": sch.POLLER_LATE_NS}


def test_user_kernel_holds_are_the_durations_measured_on_the_h200():
    # run 3 (docs/RESULTS.md): 20x the fused kernels' 2-4 us made every realizable schedule fail
    assert sch.USER_NS_SCALE == 20
    assert sch.WARPS_LATE_NS == (40_000, 80_000) == tuple(20 * ns for ns in fused.WARPS_LATE_NS)
    assert sch.CTA_LATE_NS == tuple(20 * ns for ns in fused.CTA_LATE_NS)
    assert (sch.HOST_LATE_NS, sch.POLLER_LATE_NS) == ((1_000_000,) * 2, (2_000_000, 2_400_000))
    assert fused.WARPS_LATE_NS == (2000, 4000)  # the fused kernels keep theirs (measured on their own)


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
            assert (entry["ns_lo"], entry["ns_hi"]) == DURATIONS[entry["where"]], (target, entry)
