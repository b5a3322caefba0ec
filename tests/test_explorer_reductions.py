"""Known answers for the explorer's reductions (docs/BENCHMARKS.md, third session): each test pins
what one reduction removes on a program small enough to see why, and that brute force (which
uses none of them) finds the same outcomes. The Hypothesis properties in
``tests/test_model_properties.py`` and ``tests/test_launch_phases.py`` compare the two on
generated programs; these say what each reduction is for.
"""

from __future__ import annotations

from syncverify.explore.barriers import barrier_users, settle_barriers
from syncverify.explore.combinations import summarize, supported_combinations
from syncverify.explore.value_domain import value_domain
from syncverify.explore.driver import brute_force, explore
from syncverify.explore.thread_paths import Path, LocalEvent, initial_registers, thread_paths
from syncverify.program import Atomic, Barrier, Branch, Label, Load, Program, RegOp, Store, Thread
from syncverify.protocols import load_protocol
from syncverify.scenarios.build import ScenarioOptions, build
from syncverify.explore.value_classes import merge_value_classes


def outcomes(result) -> set:
    return {(frozenset(x.final_registers.items()), frozenset(x.final_memory.items())) for x in result.executions}


# ----- value classes (syncverify.explore.value_classes, value_classes_at) ---------------

def test_paths_that_differ_only_in_a_value_read_merge_into_one_path_with_its_register_bound():
    thread = Thread("P0", 0, 0, (Load("r0", "x", "relaxed", "sys"),))
    paths = thread_paths(thread, {"x": frozenset({0, 1, 2})}, {})
    assert len(paths) == 3
    (merged,) = merge_value_classes(paths)
    assert merged.events[0].values == {0, 1, 2} and merged.events[0].value is None
    assert merged.bound == (("r0", 0),) and merged.registers == (("r0", None),)


def test_a_register_computed_from_the_value_read_keeps_the_paths_apart():
    # r1 = r0 + 1 is not a copy of a value read: no read's value gives it, so no merge.
    thread = Thread("P0", 0, 0, (Load("r0", "x", "relaxed", "sys"), RegOp("add", "r1", "r0", 1)))
    paths = thread_paths(thread, {"x": frozenset({0, 1})}, {})
    assert merge_value_classes(paths) == paths


def test_a_group_that_is_not_every_combination_of_its_values_is_not_merged():
    def path(a: int, b: int) -> Path:
        return Path((LocalEvent("R", "x", a, "relaxed", "sys"), LocalEvent("R", "x", b, "relaxed", "sys")), ())

    paths = [path(0, 0), path(0, 1), path(1, 0)]  # (1, 1) is missing: the reads are not independent
    assert merge_value_classes(paths) == paths


def test_a_poll_branches_on_exit_and_spin_classes_when_its_register_is_dead():
    # until >= 1 over {0, 1, 2}: the exit class {1, 2} is one path; 0 spins (a stuck path).
    thread = Thread("P0", 0, 0, (Label("L"), Load("r", "x", "acquire", "sys"), Branch("L", "lt", "r", 1)))
    domain, registers = {"x": frozenset({0, 1, 2})}, {}
    by_value = thread_paths(thread, domain, registers, observed=frozenset())
    by_class = thread_paths(thread, domain, registers, observed=frozenset(), classes=True)
    assert len(by_value) == 3 and len(by_class) == 2
    exits = [p for p in by_class if p.stuck is None]
    assert exits[0].events[0].values == {1, 2}
    assert [p.stuck for p in by_class if p.stuck] == [("spin", (("x", 0),))]


def test_the_done_flag_owner_has_one_path_per_flag_it_can_hang_on_instead_of_a_power_of_the_ranks():
    # W = 4: the owner polls four ready flags (exit on 1 or 2, spin on 0) and exchanges four done
    # flags whose old values it never uses: 1311 paths by value, 5 by class (all exit, or stuck
    # at flag k).
    scenario = build(load_protocol("done-flag"), ScenarioOptions(scenario="all-reduce", world_size=4, epochs=2,
                                                                 launches="per-rank-stream"))
    program = scenario.program
    domain, paths = value_domain(program)
    owner = next(t for t, th in enumerate(program.threads) if str(th.role) == "rank 0 consumer tile 0 epoch 0 thread 0")
    thread = program.threads[owner]
    assert len(paths[owner]) == 5
    assert len(thread_paths(thread, domain, initial_registers(program, thread), observed=frozenset())) == 1311


def test_done_flag_at_four_ranks_is_one_candidate_execution():
    scenario = build(load_protocol("done-flag"), ScenarioOptions(scenario="all-reduce", world_size=4, epochs=2,
                                                                 launches="per-rank-stream"))
    result = explore(scenario.program, keep=False, timeout=60)
    assert result.limit_hit is None
    assert (result.complete_count, result.hang_count, result.candidates) == (1, 0, 1)


# ----- reads-from chosen location by location (syncverify.explore.location_choices.PartialCausality) ----------

def test_a_reads_from_choice_that_closes_a_causality_cycle_is_dropped_before_it_is_built():
    # Load buffering with release/acquire: reading both 1s closes po ; sw ; po ; sw. The two
    # locations' choices give four products; the partial causality drops that one as soon as
    # its second location is chosen, so three candidates are built (brute force builds four).
    program = Program("lb-rel-acq", (
        Thread("P0", 0, 0, (Load("r0", "y", "acquire", "sys"), Store("x", 1, "release", "sys"))),
        Thread("P1", 0, 1, (Load("r1", "x", "acquire", "sys"), Store("y", 1, "release", "sys"))),
    ))
    fast, slow = explore(program), brute_force(program)
    assert {(x.final_registers[("P0", "r0")], x.final_registers[("P1", "r1")]) for x in fast.executions} == {
        (0, 0), (0, 1), (1, 0)}
    assert (fast.candidates, slow.candidates) == (3, 4)
    assert outcomes(fast) == outcomes(slow)


# ----- executions nobody can tell apart (syncverify.explore.location_choices.alike_key) -----------------------

def test_coherence_orders_that_end_in_the_same_final_value_are_one_execution():
    # Three morally strong writes, 1, 1 and 2: six coherence orders, two final values. Nothing
    # reads x, so the orders with the same last value are alike: two executions (brute force
    # reports every order).
    program = Program("three-writes", tuple(
        Thread(f"P{t}", 0, t, (Store("x", v, "relaxed", "sys"),)) for t, v in enumerate((1, 1, 2))))
    fast, slow = explore(program), brute_force(program)
    assert fast.complete_count == 2 and slow.complete_count == 6
    assert outcomes(fast) == outcomes(slow)


# ----- barrier groupings that order the other events alike (syncverify.explore.barriers._same_order) ----

def test_pairings_of_a_count_of_two_with_nothing_after_the_barrier_are_one_outcome():
    # Four threads end with bar.sync 0, 2: three ways to pair them, and no event after any
    # arrival, so every pairing orders the accesses alike: one outcome is kept.
    threads = tuple(Thread(f"P{t}", 0, 0, ((Store("x", t + 1, "relaxed", "cta") if t % 2 == 0 else
                                            Load("r", "x", "relaxed", "cta")), Barrier("sync", 0, 2)))
                    for t in range(4))
    program = Program("pairs", threads)
    _domain, paths = value_domain(program)
    combo = tuple(per_thread[0] for per_thread in paths)
    users = barrier_users(program)
    assert len(settle_barriers(program, combo, users)) == 3
    assert len(settle_barriers(program, combo, users, by_order=True)) == 1
    fast, slow = explore(program), brute_force(program)
    assert (fast.complete_count, slow.complete_count) == (18, 54)
    assert outcomes(fast) == outcomes(slow)


# ----- the combination search (syncverify.explore.combinations) ---------------------------------------------

def test_a_later_launch_cannot_spin_on_a_value_an_earlier_launch_overwrote():
    # Launch e0 increments x twice (0 -> 1 -> 2); launch e1 spins until x >= 3. It hangs, seeing
    # 2: a spin on 0 or 1 would need that value last, but each write of it was read (and
    # overwritten) by an increment of e0, which the host orders first. Only the spin on 2 is a
    # combination of paths.
    add = lambda reg: Atomic("add", reg, "x", (1,), "relaxed", "sys")  # noqa: E731
    program = Program("spin-after-two-adds", (
        Thread("P0", 0, 0, (add("a"),), phase="e0"),
        Thread("P1", 1, 1, (add("b"),), phase="e0"),
        Thread("P2", 0, 2, (Label("L"), Load("s", "x", "acquire", "sys"), Branch("L", "lt", "s", 3)), phase="e1"),
    ), host_order=(("e0", "e1"),))
    _domain, paths = value_domain(program)
    summaries = [[summarize(p) for p in per_thread] for per_thread in paths]
    spins = {paths[2][c[2]].stuck for c in supported_combinations(program, summaries, atomicity=True)}
    assert spins == {("spin", (("x", 2),))}
    fast, slow = explore(program), brute_force(program)
    assert {tuple(sorted(x.stuck.items())) for x in fast.hangs} == {tuple(sorted(x.stuck.items())) for x in slow.hangs}
    assert fast.hang_count == 2 and fast.complete_count == 0


def test_the_all_scatter_push_stage_at_three_ranks_is_eighteen_combinations():
    # Two launches of three increments on the receiver's counter: combinations where the second
    # launch reads a value the first launch's increments overwrote (144 before) are gone, and
    # each of the 18 left is an execution.
    scenario = build(load_protocol("barrier-fenced-release-acquire"), ScenarioOptions(scenario="all-scatter",
                                                                                    world_size=3, epochs=2))
    push = scenario.parts[1].program
    result = explore(push, keep=False, timeout=60)
    assert (result.complete_count, result.candidates) == (18, 18)


def test_atomics_of_an_all_strong_location_are_listed_one_source_each(monkeypatch):
    # Three system-scoped exchanges: each reads the initial 0 or another's value. Reads-from is
    # listed without two of them reading one write (Atomicity forbids it here): 11 of the 27
    # choices are tried, and the 3! chains are the executions, as brute force finds.
    from syncverify.explore import location_choices as ptx_choices

    program = Program("three-exchanges", tuple(
        Thread(f"P{t}", t, t, (Atomic("exch", "r", "x", (t + 1,), "relaxed", "sys"),)) for t in range(3)))
    listed: list[int] = []
    original = ptx_choices._distinct_sources

    def counting(*args):
        for picks in original(*args):
            listed.append(1)
            yield picks

    monkeypatch.setattr(ptx_choices, "_distinct_sources", counting)
    fast = explore(program)
    assert len(listed) == 11
    assert fast.complete_count == 6
    assert outcomes(fast) == outcomes(brute_force(program))
