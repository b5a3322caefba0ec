"""Per-SM placement (issue 27): a CTA of kernel B fits only on an SM with room for B's footprint,
and is sure of a slot only on an SM that is empty or holds B's CTAs alone
(``syncverify.explore.placement``). The counting rule against enumeration; the footprint rule
against the H200's measured capacity; the GPU script's rule (``spin_grid.deadlocks_per_sm``)
against the model's own search (``find_deadlock`` with ``Residency(sms=S)``); GPU runs 1-2's two
disagreeing rows and their agreeing neighbours, small."""

from __future__ import annotations

import itertools

import pytest

from syncverify.errors import ScenarioError
from syncverify.explore.placement import (MACHINES, Costs, Footprint, blocked, can_block, fits, layouts, occupancy,
                                          sure_room)
from syncverify.explore.residency import Residency, find_deadlock
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


def test_a_one_warp_kernel_fits_beside_fifteen_consumers_but_is_not_sure_of_the_slot():
    """What GPU runs 1-2 showed: room by every limit, and the other kernel never ran there."""
    costs = Costs.from_footprints(H200, {"consumers": Footprint(4, 10, 4), "sleep": Footprint(1, 16)})
    fifteen = ("consumers",) * 15
    assert fits(costs, fifteen, "sleep") and fits(costs, fifteen, "consumers")
    assert not sure_room(costs, fifteen, "sleep") and sure_room(costs, fifteen, "consumers")
    assert sure_room(costs, (), "sleep") and not fits(costs, ("consumers",) * 16, "consumers")
    full_but_one = [("consumers",) * 16] * 131 + [fifteen]
    assert blocked(costs, full_but_one, "sleep") and not blocked(costs, full_but_one, "consumers")
    assert not blocked(costs, [("consumers",) * 16] * 131, "sleep")  # the 132nd SM is empty


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


def test_gpu_runs_disagreeing_rows_deadlock_per_sm_and_their_neighbours_agree():
    """Run 2's rows at C - 1 consumers (one slot free, on an SM the consumers partly hold), at
    2 SMs x 2: with a sleep before the producers (rows 5 and 8, the GPU deadlocked) the per-SM
    model finds the hang the pool missed; without it (row 7) and with the producers issued
    first (row 9) it stays SAFE, as the GPU completed."""
    R = Residency(4, sms=2)
    for producers in ("spin", "other"):  # row 5: the same kernel's producers; row 8: another function's
        p = _two_streams(3, before="sleep", producers=producers)
        assert find_deadlock(p, Residency(4)) is None  # the old pool: SAFE, which the GPU contradicted
        found = find_deadlock(p, R)
        assert found is not None and [c.name for c in found.not_resident] == ["GPU 0 CTA 3 (sleep)"]
        assert "no SM is sure to take a waiting CTA" in found.words() and "placed: GPU 0 SM 0:" in found.words()
    assert find_deadlock(_two_streams(3, before=None), R) is None  # row 7: no sleep
    first = _two_streams(3, before=None)
    first = Program(first.name, first.threads[3:] + first.threads[:3], observed_registers=frozenset(),
                    kernels=first.kernels)
    assert find_deadlock(first, R) is None  # row 9: the producers issued first
    full = _two_streams(4, before=None)
    assert find_deadlock(full, R) is not None and find_deadlock(full, Residency(4)) is not None  # rows 6 and 4


def test_a_whole_sm_free_is_safe_only_where_the_consumers_leave_it_empty():
    """Rows 10-11 (an SM's worth of slots free, with the sleep): the GPU completed. The consumers
    may sit one per SM (any placement: the model finds that hang) or fill one SM and leave the
    other empty (the placement ``spin_grid.deadlocks_per_sm`` is given when the GPU shows it)."""
    found = find_deadlock(_two_streams(2, before="sleep"), Residency(4, sms=2))
    assert found is not None and all(len(sm) == 1 for _gpu, sms in found.layout for sm in sms)
    with example_module("residency", "spin_grid") as spin_grid:
        costs = Costs.from_occupancy(2, {}, 2)
        assert spin_grid.deadlocks_per_sm(2, ["sleep", "consumers"], costs, seen=[2]) is False
        assert spin_grid.deadlocks_per_sm(2, ["sleep", "consumers"], costs, seen=[1, 1]) is True


def test_the_gpu_scripts_per_sm_rule_is_the_models_answer():
    """``spin_grid.deadlocks_per_sm`` (what the GPU script predicts at 132 SMs x 16) against the
    model's search, every consumer count at 1 and 2 SMs of 2, with and without another kernel first."""
    with example_module("residency", "spin_grid") as spin_grid:
        rule = spin_grid.deadlocks_per_sm
    for sms in (1, 2):
        costs = Costs.from_occupancy(sms, {}, 2)
        for n in range(1, 2 * sms + 1):
            for before, producers in ((None, "spin"), ("sleep", "spin"), (None, "other")):
                waiting = ([before] if before else []) + ["consumers" if producers == "spin" else "other"]
                model = find_deadlock(_two_streams(n, before=before, producers=producers), Residency(2 * sms, sms=sms))
                assert rule(n, waiting, costs) == (model is not None), (sms, n, before, producers)
