"""Per-SM placement and module loading (issue 27): a CTA of kernel B becomes resident only on an
SM with room for B's footprint, whatever total slots are free (``syncverify.explore.placement``),
and under lazy loading a kernel's first launch waits for the work issued before it. The counting
rule against enumeration; the footprint rule against the H200's measured capacity; the GPU
script's rule (``spin_grid.deadlocks_per_sm``) against the model's own search (``find_deadlock``
with ``Residency(sms=S)``); GPU runs 1-3's rows, small: the two that disagreed in runs 1-2 (a
first launch behind spinning consumers), their neighbours, and run 3's per-SM rows."""

from __future__ import annotations

import itertools

import pytest

from syncverify.errors import ScenarioError
from syncverify.explore.placement import (MACHINES, Costs, Footprint, blocked, can_block, fits, layouts, occupancy,
                                          sure_room)
from syncverify.explore.residency import Residency, find_deadlock, parse_occupancy
from syncverify.program import Branch, Label, Load, Program, Store, Thread
from tests.sequential_harness import example_module

H200 = MACHINES["nvidia-h200"]


def test_the_examples_footprint_gives_the_measured_h200_capacity():
    """GPU run 1: 4 warps, 10 registers, 4 B shared: 16 CTAs per SM by the thread limit, 2,112."""
    fp = Footprint(warps=4, registers=10, shared=4)
    assert occupancy(fp, H200) == 16 and H200.sms * occupancy(fp, H200) == 2112
    assert occupancy(Footprint(warps=4, registers=64), H200) == 8  # registers bound it
    assert occupancy(Footprint(warps=1, registers=16, shared=100 * 1024), H200) == 2  # shared memory
    assert occupancy(Footprint(warps=1, registers=16), H200) == 32  # CTA slots


def test_the_free_slot_beside_fifteen_consumers_takes_one_warp_not_eight():
    """GPU run 3: a one-warp kernel (and a 4-warp one) took the one free slot on an SM that 15
    consumers held; 8 warps (256 threads) fit on no SM holding 15 (128 threads left)."""
    costs = Costs.from_footprints(H200, {"consumers": Footprint(4, 14, 4), "marker": Footprint(1, 12),
                                         "wide": Footprint(8, 14, 4)})
    fifteen = ("consumers",) * 15
    assert sure_room(costs, fifteen, "marker") and sure_room(costs, fifteen, "consumers")
    assert not fits(costs, fifteen, "wide") and fits(costs, ("consumers",) * 14, "wide")
    assert not fits(costs, ("consumers",) * 16, "consumers")
    assert not blocked(costs, [("consumers",) * 16] * 131 + [fifteen], "marker")
    assert blocked(costs, [fifteen] * 132, "wide") and not blocked(costs, [fifteen] * 131, "wide")  # one SM empty
    assert can_block(costs, ["consumers"] * 1980, "wide") and not can_block(costs, ["consumers"] * 1979, "wide")


@pytest.mark.parametrize(("sms", "per_sm"), [(1, 2), (2, 2), (2, 3), (3, 2)])
def test_counting_says_can_block_exactly_when_some_layout_blocks(sms, per_sm):
    """``can_block`` (counting) against every placement ``layouts`` enumerates."""
    costs = Costs.from_occupancy(sms, {"b": per_sm - 1}, per_sm)
    for n_a, n_b in itertools.product(range(sms * per_sm + 1), range(sms * per_sm)):
        resident = ["a"] * n_a + ["b"] * n_b
        placements = list(layouts(costs, resident))
        if not placements:
            continue
        for waiting in ("a", "b"):
            enumerated = any(blocked(costs, layout, waiting) for layout in placements)
            assert can_block(costs, resident, waiting) == enumerated, (resident, waiting)


def test_bad_placement_input_is_one_line():
    with pytest.raises(ScenarioError, match="does not spread evenly"):
        Residency(3, sms=2)
    with pytest.raises(ScenarioError, match="needs --sms"):
        Residency(2, occupancy=(("k", 1),))
    with pytest.raises(ScenarioError, match="occupancy 0 of k"):
        Residency(2, sms=1, occupancy=(("k", 0),))
    with pytest.raises(ScenarioError, match="no footprint for kernel 'x'"):
        Costs.from_footprints(H200, {"a": Footprint(1, 8)}).cost("x")
    with pytest.raises(ScenarioError, match="which no launch runs"):
        find_deadlock(_two_streams(1, before=None), Residency(2, sms=1, occupancy=(("spinn", 1),)))
    with pytest.raises(ScenarioError, match="give KERNEL=N"):
        parse_occupancy(["gemm"])


# ----- the GPU rows, small: one kernel's consumers, then on another stream a kernel and the producers

def _poll(flag: str) -> tuple:
    return (Label("L"), Load("r", flag, sem="acquire", scope="gpu"), Branch("L", "eq", "r", 0))


def _two_streams(n: int, *, before: str | None, producers: str = "spin") -> Program:
    """``n`` consumers (kernel ``spin``, launch ``comm``); on the other stream, a CTA of kernel
    ``before`` (a sleep or marker; None: nothing) and then ``n`` producers of kernel ``producers``."""
    threads, kernels, order = [], [("comm", "spin"), ("prod", producers)], []
    for i in range(n):
        threads.append(Thread(f"C{i}", 0, len(threads), _poll(f"f{i}"), phase="comm"))
    if before is not None:
        threads.append(Thread("S", 0, len(threads), (Store("slept", 1),), phase="sleep"))
        kernels.append(("sleep", before))
        order.append(("sleep", "prod"))
    for i in range(n):
        threads.append(Thread(f"P{i}", 0, len(threads), (Store(f"f{i}", 1, sem="release", scope="gpu"),), phase="prod"))
    return Program("two streams", tuple(threads), observed_registers=frozenset(), host_order=tuple(order),
                   kernels=tuple(kernels))


def test_gpu_runs_disagreeing_rows_are_a_first_launch_behind_spinning_consumers():
    """Runs 1-2's rows at C - 1 consumers (one slot free), at 2 SMs x 2: the sleep (row 5) or the
    producers' function (run 2's row 8) launched for the first time behind the consumers. Its
    CTA fits in the free slot, but under lazy loading its module load waits for the spinning
    consumers: a hang (the GPU deadlocked). Launched once beforehand: SAFE (run 4's row 5 again
    completed; run 2's row 8 with the function launched before deadlocked in run 4 and completed
    in run 3: open, docs/residency.md). No sleep (row 7), producers issued first (row 9): SAFE."""
    lazy = Residency(4, sms=2, lazy_loading=True)
    for producers in ("spin", "other"):
        p = _two_streams(3, before="sleep", producers=producers)
        assert find_deadlock(p, Residency(4)) is None and find_deadlock(p, Residency(4, sms=2)) is None
        found = find_deadlock(p, lazy)
        assert found is not None and found.loading == ("sleep",)
        assert "its first launch loads its module" in found.words()
        assert find_deadlock(p, Residency(4, sms=2, lazy_loading=True, loaded=("sleep", "other"))) is None
    assert find_deadlock(_two_streams(3, before=None, producers="other"), lazy) is not None  # run 2's row 8
    assert find_deadlock(_two_streams(3, before=None), lazy) is None  # row 7: the producers' kernel is loaded
    first = _two_streams(3, before=None)
    first = Program(first.name, first.threads[3:] + first.threads[:3], observed_registers=frozenset(),
                    kernels=first.kernels[::-1])
    assert find_deadlock(first, lazy) is None  # row 9: the producers issued (and loaded) first
    full = _two_streams(4, before=None)
    assert find_deadlock(full, Residency(4, sms=2)) is not None and find_deadlock(full, Residency(4)) is not None


def test_a_footprint_no_sm_has_room_for_deadlocks_where_the_pool_is_safe():
    """Run 4's per-SM rows, small: producers whose CTA takes a whole SM ("wide", occupancy 1)
    behind consumers of 2 per SM. Two consumers may sit one per SM (any placement: a hang the
    pool of 4 slots misses); seen filling one SM (``spin_grid.deadlocks_per_sm`` given the
    placement), the other SM is empty and takes them."""
    R = Residency(4, sms=2, occupancy=(("wide", 1),))
    p = _two_streams(2, before=None, producers="wide")
    assert find_deadlock(p, Residency(4)) is None
    found = find_deadlock(p, R)
    assert found is not None and all(len(sm) == 1 for _gpu, sms in found.layout for sm in sms)
    assert find_deadlock(_two_streams(1, before=None, producers="wide"), R) is None  # an SM stays empty
    with example_module("residency", "spin_grid") as spin_grid:
        costs = Costs.from_occupancy(2, {"wide": 1}, 2)
        assert spin_grid.deadlocks_per_sm(2, ["wide"], costs, seen=[2]) is False
        assert spin_grid.deadlocks_per_sm(2, ["wide"], costs, seen=[1, 1]) is True


def test_the_gpu_scripts_per_sm_rule_is_the_models_answer():
    """``spin_grid.deadlocks_per_sm`` (what the GPU script predicts at 132 SMs x 16) against the
    model's search, every consumer count at 1 and 2 SMs of 2, with a sleep, a kernel of another
    footprint or the consumers' own kernel waiting."""
    with example_module("residency", "spin_grid") as spin_grid:
        rule = spin_grid.deadlocks_per_sm
    for sms in (1, 2):
        costs = Costs.from_occupancy(sms, {"wide": 1}, 2)
        for n in range(1, 2 * sms + 1):
            for before, producers in ((None, "spin"), ("sleep", "spin"), (None, "wide"), ("sleep", "wide")):
                waiting = ([before] if before else []) + ["consumers" if producers == "spin" else producers]
                named = (("wide", 1),) if producers == "wide" else ()  # a kernel no launch runs is refused
                model = find_deadlock(_two_streams(n, before=before, producers=producers),
                                      Residency(2 * sms, sms=sms, occupancy=named))
                assert rule(n, waiting, costs) == (model is not None), (sms, n, before, producers)


def test_run_4s_footprint_rows_at_gpu_scale():
    """GPU run 4 (H200, the compiled footprints): 8-warp producers beside 15 consumers on every SM
    fit nowhere (the GPU deadlocked; the pool of 2,112 says safe); beside 14 they fit (completed)."""
    with example_module("residency", "spin_grid") as spin_grid:
        rule = spin_grid.deadlocks_per_sm
    costs = Costs.from_footprints(H200, {"consumers": Footprint(4, 14, 4), "other8": Footprint(8, 14, 4),
                                         "sleep": Footprint(1, 16)})
    assert rule(1980, ["sleep", "other8"], costs, seen=[15] * 132) is True
    assert rule(1848, ["sleep", "other8"], costs, seen=[14] * 132) is False
    assert rule(2111, ["sleep", "consumers"], costs, seen=[16] * 131 + [15]) is False  # fits: row 5 is a first launch
