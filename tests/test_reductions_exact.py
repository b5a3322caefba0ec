"""Every reduction is exact: the verdict (its violation kinds) is the same with it and without it.

The builder's reductions (:data:`syncverify.scenarios.build.REDUCTIONS`: tiles, slicing of unread
lock copies, ranks left out as renamings of rank 0, the split into stage programs, the rank
symmetry group, the split into call programs) and the explorer's prunings (:data:`syncverify.explore.driver.PRUNINGS`: value
classes, readable ceilings, the pruning combination search with its write budgets, barrier
groupings kept once per order, the partial causality, alike executions) are each turned off on
their own and compared with everything on, over generated protocols (the generator of
``tests/test_protocol_properties.py``, with a ``done`` flag and two slots drawn in), in every
scenario, both launch modes, 1-3 calls, W = 2 and 3.

The default run checks a representative slice (W = 2, 1-2 calls, every scenario and launch mode,
a few examples per reduction); ``SYNCVERIFY_EXACT_FULL=1`` runs the exhaustive version (every
configuration, more examples; slow, its last run recorded in ``docs/reductions.md``). An example
whose check hits a bound either way proves nothing and is discarded (counted, see
:mod:`tests.limits`). Differences found are fixed, each with a known-answer test below.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, Phase, event, given, note, reject, seed, settings
from hypothesis import strategies as st

from tests.limits import LimitBudget
from tests.test_protocol_properties import mutated_builtins, protocol_data

from syncverify.explore.driver import PRUNINGS
from syncverify.explore.symmetry import affordable
from syncverify.protocols import load_protocol, protocol_from_dict
from syncverify.protocols.registry import zoo_protocols
from syncverify.protocols.rules import LAUNCH_ORDERS
from syncverify.scenarios import build as build_module
from syncverify.scenarios.build import REDUCTIONS, SCENARIOS, ScenarioOptions, build
from syncverify.verdicts.check import check

FULL = os.environ.get("SYNCVERIFY_EXACT_FULL") == "1"
ZOO = "protocols/zoo"

# (scenario, launches, calls, world size): every one in the full run, the small ones by default.
# ``SYNCVERIFY_EXACT_LAUNCHES=per-rank-stream`` (comma-separated): only those launch orders, for a run
# aimed at what one change touches (the never-started launches: per-rank streams, several calls).
LAUNCHES = tuple(os.environ["SYNCVERIFY_EXACT_LAUNCHES"].split(",")) if os.environ.get("SYNCVERIFY_EXACT_LAUNCHES") \
    else LAUNCH_ORDERS
if set(LAUNCHES) - set(LAUNCH_ORDERS):
    raise ValueError(f"SYNCVERIFY_EXACT_LAUNCHES={','.join(LAUNCHES)}: each must be one of {', '.join(LAUNCH_ORDERS)}")
CONFIGS = [(scenario, launches, calls, world) for scenario in SCENARIOS for launches in LAUNCHES
           for calls in (1, 2, 3) for world in (2, 3)
           if not (launches == "per-rank-stream" and calls == 1)]  # one call: no launch order at all
SLICE = [c for c in CONFIGS if c[2] <= 2 and c[3] == 2]
EXAMPLES = int(os.environ.get("SYNCVERIFY_EXACT_EXAMPLES", 40)) if FULL else 3
# The full run's bound per check (benchmarks/exact_full.py --check-s sets it for a faster machine).
TIMEOUT_S = float(os.environ.get("SYNCVERIFY_EXACT_CHECK_S", 20.0)) if FULL else 4.0
MAX_EXECUTIONS = 20_000

# Invalid examples (a bound hit) do not count towards max_examples, so Hypothesis draws more: the
# full run, whose largest configurations (W = 3, several calls, whole programs) often hit the
# bound, allows many discards and reports them in its statistics ("checker limit hit").
budget = LimitBudget(10 * EXAMPLES, "checker")  # as many discards per example in the slice as in the full run

# A shard of the full run (``benchmarks/exact_full.py`` runs many in parallel): its own seed (no
# example database, no shrinking: a difference is reported as drawn, at once), a JSON line per
# example in ``SYNCVERIFY_EXACT_LOG``, and no new comparison after ``SYNCVERIFY_EXACT_STOP_AT``
# (a Unix time: the runner's wall-clock bound; later examples are rejected, not counted as discards).
SEED = os.environ.get("SYNCVERIFY_EXACT_SEED")
LOG = os.environ.get("SYNCVERIFY_EXACT_LOG")
STOP_AT = float(os.environ.get("SYNCVERIFY_EXACT_STOP_AT", "inf"))


def log(**row) -> None:
    """One JSON line about the current example into the shard's log (when there is one)."""
    if LOG:
        with open(LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")


# ----- generated protocols -----------------------------------------------------------------------

def _zoo_data() -> list[dict]:
    out = []
    for protocol in zoo_protocols():
        data = protocol.to_dict()
        data.pop("zoo", None)
        out.append(data)
    return out


@st.composite
def with_done_and_slots(draw, data: dict) -> dict:
    """``data`` maybe with a ``done`` flag (the consumer writes it after its loads, the producer
    waits on it before its store: a role that writes what another role reads) and two slots
    (staging that rotates with the call)."""
    data = dict(data)
    if not data.get("after_load") and draw(st.sampled_from((True, True, False))):
        data["after_load"] = [{"op": "atomic_xchg", "lock": "done", "value": "epoch + 1", "sem": "release",
                               "scope": "sys", "to": draw(st.sampled_from(("self", "self", "all", "others")))}]
        data["before_store"] = [{"op": "await", "lock": "done", "read": "load", "sem": "acquire", "scope": "sys",
                                 "from": draw(st.sampled_from(("self", "each"))), "until": ">= epoch"}]
    if draw(st.booleans()):
        data["slots"] = 2
    return data


def exact_protocols(near_safe: bool = False) -> st.SearchStrategy[dict]:
    """The protocols of ``tests/test_protocol_properties.py`` and the zoo's, each maybe with a done
    flag and two slots. ``near_safe``: only built-ins slightly changed and the zoo's, whose
    verdicts a reduction can change (a random protocol usually shows every kind either way)."""
    zoo = st.sampled_from(_zoo_data())
    base = st.one_of(mutated_builtins(), zoo) if near_safe else st.one_of(protocol_data(), zoo)
    return base.flatmap(with_done_and_slots)


@st.composite
def cas_reset_protocols(draw) -> dict:
    """A counter that producers increment and the consumer's CAS poll resets (``reset =
    "consumer"``, as ``add-counter-cas-reset``), with its compare, exit, new value, increment,
    targets, scopes and sems drawn, the local ``.wt`` flag path kept or left out (it races on its
    own and would hide what the counter's state does): the protocols the ``cas-reset`` split is
    made for, and those just outside it."""
    target = draw(st.sampled_from(("world_size - 1", "world_size", "world_size - 2", "1", "world_size + 3")))
    until = draw(st.sampled_from((f">= {target}", f"== {target}", ">= 1", "> 0", ">= world_size - 1",
                                  ">= world_size")))
    add = {"op": "atomic_add", "lock": "ready", "value": draw(st.sampled_from((1, 1, 2))),
           "sem": draw(st.sampled_from(("release", "release", "relaxed"))),
           "scope": draw(st.sampled_from(("sys", "sys", "gpu"))), "to": draw(st.sampled_from(("others", "all")))}
    poll = {"op": "await", "lock": "ready", "read": "atomic_cas", "compare": target,
            "value": 0 if target == "1" else draw(st.sampled_from((0, 0, 1))),
            "sem": draw(st.sampled_from(("acquire", "acquire", "relaxed"))),
            "scope": draw(st.sampled_from(("sys", "sys", "gpu"))), "until": until}
    data = {"name": "cas-reset", "summary": "s", "origin": "generated", "reset": "consumer",
            "tile_store": {"cache": ".wt"}, "tile_load": {"volatile": False},
            "signal": [{"op": "barrier"}, add], "wait": [poll]}
    if draw(st.booleans()):  # add-counter-cas-reset's local path
        data["signal"].insert(1, {"op": "store", "lock": "local", "value": 1, "cache": ".wt", "to": "self"})
        data["wait"].insert(0, {"op": "await", "lock": "local", "read": "volatile_load", "cache": ".cv",
                                "until": "== 1"})
    return draw(with_done_and_slots(data))


#: The scenarios where each builder reduction is made (elsewhere it changes nothing to compare).
APPLIES = {"ranks": ("all-scatter", "all-gather-gemm"), "read-only-polls": ("all-scatter", "all-gather-gemm"),
           "stages": ("all-scatter",), "resetting-polls": ("all-scatter", "all-gather-gemm")}


def configs_for(reduction: str = "", max_calls: int = 3) -> list[tuple]:
    """The configurations a test of ``reduction`` draws from: all of them in the full run, the slice by default."""
    where = APPLIES.get(reduction, SCENARIOS)
    return [c for c in (CONFIGS if FULL else SLICE) if c[0] in where and c[2] <= max_calls
            and (reduction not in ("calls", "cas-reset") or (c[1] == "host-barrier" and c[2] > 1))  # the call split
            and (reduction != "resetting-polls" or c[1] == "host-barrier" or c[2] == 1)]  # one call, or call programs


def options(config: tuple, tiles: int = 1, ctas: int | None = None, columns: int = 1) -> ScenarioOptions:
    scenario, launches, calls, world = config
    # Without a host barrier the host cannot reset locks between calls: nothing is reset.
    reset = "none" if launches == "per-rank-stream" and calls > 1 else None
    return ScenarioOptions(scenario=scenario, world_size=world, epochs=calls, launches=launches, reset=reset,
                           tiles=tiles, ctas=ctas, columns=columns)


def kinds(data: dict, opts: ScenarioOptions, *, reductions=frozenset(), prunings=frozenset(),
          push: dict | None = None, timeout: float = TIMEOUT_S) -> frozenset[str]:
    """The violation kinds of ``data`` in ``opts`` without ``reductions`` and ``prunings``;
    discards the example on a bound (or when the protocol does not fit the scenario)."""
    protocol = protocol_from_dict(data)
    push_protocol = protocol_from_dict({**push, "name": "push"}) if push is not None else None
    start = time.process_time()
    scenario = build(protocol, opts, push=push_protocol, without=frozenset(reductions))
    result = check(scenario, max_executions=MAX_EXECUTIONS, timeout=timeout, without=frozenset(prunings))
    assert result.limit_hit != "no-executions", f"no execution at all: {data}, {opts}, push {push}, without {sorted(reductions)} {sorted(prunings)}"
    if result.limit_hit is not None:
        log(outcome="discard", limit=result.limit_hit, cpu=round(time.process_time() - start, 2))
    budget.discard_if_hit(result.limit_hit)
    return frozenset(result.violations)


def assert_same(data: dict, config: tuple, *, tiles: int = 1, ctas: int | None = None, push: dict | None = None,
                columns: int = 1, **off) -> None:
    if time.time() > STOP_AT:
        event("stopped at the run's wall-clock bound")
        reject()
    note(f"protocol: {data}\nconfig: {config}, tiles {tiles}, ctas {ctas}, columns {columns}, push {push}\noff: {off}")
    opts = options(config, tiles, ctas, columns)
    timeout = TIMEOUT_S * tiles  # each tile a copy of the program: the whole one takes that much longer
    start = time.process_time()
    with_it = kinds(data, opts, push=push, timeout=timeout)
    without_it = kinds(data, opts, push=push, timeout=timeout, **off)
    event(f"kinds: {sorted(with_it)}")
    same = with_it == without_it
    log(outcome="same" if same else "difference", config=list(config), tiles=tiles,
        cpu=round(time.process_time() - start, 2),
        with_it=sorted(with_it), without_it=sorted(without_it), **({} if same else {"protocol": data, "push": push}))
    assert same, f"with the reduction {sorted(with_it)}, without it {sorted(without_it)}"


SHARD = {"database": None, "phases": (Phase.explicit, Phase.reuse, Phase.generate)} if SEED else {}
SETTINGS = settings(max_examples=EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow], **SHARD)
slow_if_full = pytest.mark.slow if FULL else (lambda f: f)
seeded = seed(int(SEED)) if SEED else (lambda f: f)


# ----- the builder's reductions ----------------------------------------------------------------

@slow_if_full
@pytest.mark.parametrize("reduction", [r for r in REDUCTIONS if r != "tiles"])
@budget.guard
@seeded
@SETTINGS
@given(data=exact_protocols(near_safe=True), push=st.one_of(st.none(), exact_protocols()), draw=st.data())
def test_each_builder_reduction_keeps_the_verdict(reduction, data, push, draw):
    """Slicing, ranks left out, the stage split, the symmetry group, the call split, the call
    split across a consumer's CAS reset and the resetting polls left out on other ranks, each
    turned off alone (the last two over counters with a consumer's CAS reset, which no other
    protocol has; all-scatter's receivers then poll such a counter too, as the push protocol)."""
    if reduction in ("cas-reset", "resetting-polls"):
        data = draw.draw(cas_reset_protocols(), label="counter with a CAS reset")
    if reduction == "resetting-polls":
        push = draw.draw(cas_reset_protocols(), label="push: counter with a CAS reset")
    config = draw.draw(st.sampled_from(configs_for(reduction)), label="config")
    assert_same(data, config, push=push if config[0] == "all-scatter" else None, reductions={reduction})


def two_tile_property(test):
    """A property over generated protocols in two-tile configurations, as the others are run
    (slow in the full run, its discards budgeted, seeded per shard)."""
    drawn = given(data=exact_protocols(), config=st.sampled_from(configs_for(max_calls=2 if FULL else 1)))
    return slow_if_full(budget.guard(seeded(SETTINGS(drawn(test)))))


@two_tile_property
def test_checking_tile_0_of_two_tiles_keeps_the_verdict(data, config):
    """Tiles use disjoint locks and data: tile 0 alone has the verdict of both."""
    assert_same(data, config, tiles=2, reductions={"tiles"})


@two_tile_property
def test_tiles_in_one_ctas_loop_keep_the_verdict_of_the_program_built_whole(data, config):
    """Two tiles in one CTA's loop (``ctas=1``, as the kernels run more tiles than programs) are not
    renamings of tile 0 (they share the CTA's barriers): the tiles reduction is not made there,
    and the reductions that are still made (slicing, ranks left out, symmetry) keep the verdict
    of the program built whole."""
    assert_same(data, config, tiles=2, ctas=1, reductions=set(REDUCTIONS))


@slow_if_full
@budget.guard
@seeded
@SETTINGS
@given(data=exact_protocols(), config=st.sampled_from([c for c in configs_for(max_calls=2 if FULL else 1)
                                                       if c[0] == "all-gather-gemm"]),
       layout=st.sampled_from(((1, 2, 2), (2, 2, 1), (2, 3, 2))))
def test_column_tiles_shared_by_gemm_ctas_keep_the_verdict_of_the_program_built_whole(data, config, layout):
    """all-gather-gemm's column tiles as units of work (``columns``; ``layout``: tiles, column
    tiles, CTAs per role), several GEMM CTAs visiting one tile: the tiles reduction and the stage
    and call splits are not made there (:func:`syncverify.scenarios.build.looped`), and the
    reductions that are still made (slicing, ranks left out, symmetry, ...) keep the verdict of
    the program built whole."""
    tiles, columns, ctas = layout
    assert_same(data, config, tiles=tiles, ctas=ctas, columns=columns, reductions=set(REDUCTIONS))


def test_tile_0_alone_would_hide_the_hang_of_fa3s_named_barrier_reused_across_a_ctas_tile_loop(monkeypatch):
    """Known answer (issue 22's FA3 two-tile disagreement): FA3's epilogue handoff is SAFE with
    one CTA per tile, and, in a loop body with no CTA-wide barrier (the producer's GEMM taken
    out: ``lower_dot`` patched to nothing), hangs when one CTA handles both tiles in its loop:
    warps 1-7 only ``bar.arrive``, so their arrivals for tile 1 can complete tile 0's phase
    without warp 0, whose ``bar.sync`` then waits in a phase that too few arrivals reach; the
    cause says so. With the GEMM's ``bar.sync 0`` (``tl.dot``, as compiled) between the rounds,
    the looped handoff is SAFE (``tests/test_dot_barrier.py``)."""
    protocol = load_protocol("fa3-epilogue-named-barrier")
    apart = ScenarioOptions(scenario="gemm-reduce-scatter", tiles=2)
    assert check(build(protocol, apart), timeout=120).safe is True
    assert check(build(protocol, replace(apart, ctas=1)), timeout=300).safe is True  # the GEMM's barrier
    monkeypatch.setattr("syncverify.protocols.lowering.lower_dot", lambda: ())
    scenario = build(protocol, replace(apart, ctas=1))
    assert any("loop over the 2 tiles" in note for note in scenario.notes)
    result = check(scenario, timeout=300, first=True)
    assert result.safe is False and "hang" in result.violations
    cause = result.violations["hang"].cause(scenario)
    assert cause.kind == "barrier-hang" and "waits forever at barrier 1" in cause.text, cause.text
    assert "more often, without waiting (bar.arrive) (once per tile of its loop: tiles 0, 1)" in cause.text


# ----- the explorer's prunings -------------------------------------------------------------------

@slow_if_full
@pytest.mark.parametrize("pruning", PRUNINGS)
@budget.guard
@seeded
@SETTINGS
@given(data=exact_protocols(), config=st.sampled_from(configs_for()))
def test_each_explorer_pruning_keeps_the_verdict(pruning, data, config):
    """Value classes, ceilings, the combination search, barrier orders, partial causality and
    alike executions, each turned off alone."""
    assert_same(data, config, prunings={pruning})


# ----- differences found, as known answers -------------------------------------------------------

def _verdicts(protocol, **options) -> tuple[frozenset[str], frozenset[str]]:
    opts = ScenarioOptions(**options)
    reduced = check(build(protocol, opts), timeout=60)
    whole = check(build(protocol, ScenarioOptions(**options, symmetry=False)), timeout=60)
    assert reduced.limit_hit is None and whole.limit_hit is None
    return frozenset(reduced.violations), frozenset(whole.violations)


def test_two_slot_staging_with_per_rank_streams_is_safe_in_all_gather_gemm_with_every_rank_built():
    # Issue 24: rank 1's GEMM wait in call 1 (it acquires rank 0's call-1 signal, which follows
    # rank 0's call 0) orders rank 1's call-2 store into slot 0 after rank 0's call-0 load of it.
    # With rank 1's GEMM left out the store raced: UNSAFE by default, SAFE with --no-symmetry.
    protocol = load_protocol(f"{ZOO}/two-slot-early-reuse.toml")
    reduced, whole = _verdicts(protocol, scenario="all-gather-gemm", world_size=2, epochs=3,
                               launches="per-rank-stream")
    assert reduced == whole == frozenset()


def test_a_gemm_done_flag_in_its_own_copy_is_not_left_out_with_the_gemm():
    # The GEMM CTA writes `done` into its own rank's copy after its loads and that rank's sender
    # waits on it before its next store: leaving rank 1's GEMM out left rank 1's sender waiting
    # forever (a false hang), even with a host barrier between the calls.
    data = load_protocol(f"{ZOO}/done-flag.toml").to_dict()
    data["after_load"] = [{**step, "to": "self"} if step.get("lock") == "done" else step
                          for step in data["after_load"]]
    reduced, whole = _verdicts(protocol_from_dict(data), scenario="all-gather-gemm", world_size=2, epochs=2)
    assert reduced == whole == frozenset()


def test_the_cause_of_a_slot_reused_too_early_names_the_two_calls_and_does_not_contradict_itself():
    # It used to say the poll "is satisfied by" rank 1's signal, then "no poll reads a signal of rank 1".
    protocol = load_protocol(f"{ZOO}/two-slot-early-reuse.toml")
    result = check(build(protocol, ScenarioOptions(scenario="all-reduce", world_size=2, epochs=3,
                                                   launches="per-rank-stream")), timeout=60)
    cause = result.violations["race"].cause(result.scenario)
    assert cause.kind == "early-reuse", cause.text
    assert (cause.details["load_call"], cause.details["store_call"]) == (0, 2)
    assert "no poll reads" not in cause.text
    assert "call 2's store can overwrite what call 0 still reads" in cause.text


def test_a_symmetry_group_whose_units_have_too_many_path_tuples_is_dropped_and_the_bound_holds():
    # With every rank's GEMM built (per-rank streams, two calls, W = 3), each rank's unit is eight
    # threads: the searches listed every tuple of their paths before the first combination, with
    # no look at the clock (a 5 s check ran for minutes). Such a group is now dropped (exact: every
    # assignment is explored instead of one per renaming) and the bound answers.
    data = {"name": "mutated", "summary": "s", "origin": "o", "reset": "host", "tile_store": {"cache": ".wt"},
            "tile_load": {"volatile": False},
            "signal": [{"op": "fence", "sem": "release", "scope": "sys"},
                       {"op": "atomic_add", "lock": "ready", "to": "all", "value": 1, "sem": "release", "scope": "sys"}],
            "wait": [{"op": "await", "read": "atomic_cas", "lock": "ready", "from": "self", "compare": 0, "value": 0,
                      "sem": "acq_rel", "scope": "cta", "until": ">= world_size"},
                     {"op": "fence", "sem": "release", "scope": "gpu"}]}
    scenario = build(protocol_from_dict(data), ScenarioOptions(scenario="all-gather-gemm", world_size=3, epochs=2,
                                                               launches="per-rank-stream", reset="none"))
    (group,) = scenario.program.symmetry
    assert [len(unit) for unit in group] == [8, 8]
    counts = [3] * len(scenario.program.threads)
    assert affordable(scenario.program, counts).symmetry == ()
    assert affordable(scenario.program, [1] * len(counts)).symmetry == scenario.program.symmetry
    start = time.monotonic()
    result = check(scenario, timeout=2)
    assert result.limit_hit == "timeout" or result.limit_hit is None
    assert time.monotonic() - start < 60  # minutes before, under any load


# ----- the call split (calls checked one by one from the state the calls before leave) -----------

def _split(name_or_data, without=frozenset(), **options):
    protocol = load_protocol(name_or_data) if isinstance(name_or_data, str) else protocol_from_dict(name_or_data)
    opts = ScenarioOptions(**options)
    return build(protocol, opts, without=without), build(protocol, opts, without=frozenset({"calls"}))


def test_two_calls_at_w8_are_checked_call_by_call_from_the_state_the_first_leaves():
    # Issue 24: epoch-flag in all-reduce, W = 8, two calls, was unknown at 120 s: units holding
    # both calls of a rank left 8! orders of the second call's increments. Each call program
    # has one call per unit; the second starts with the counter at 8 (no reset: the target grows).
    split, _whole = _split("epoch-flag", scenario="all-reduce", world_size=8, epochs=2)
    assert [part.stage for part in split.parts] == ["call 0", "call 1"]
    counter = next(loc for loc in split.parts[1].program.init if loc.startswith("ready"))
    assert split.parts[1].program.init[counter] == 8
    result = check(split, timeout=60)
    assert result.limit_hit is None and result.safe


def test_the_call_split_gives_the_whole_programs_verdicts_where_both_decide():
    for name, options in [("add-counter", dict(scenario="all-reduce", world_size=2, epochs=3)),
                          ("epoch-flag", dict(scenario="gemm-reduce-scatter", world_size=3, epochs=2)),
                          ("iris-465-call-number", dict(scenario="all-reduce", world_size=2, epochs=3)),
                          ("two-slot-early-reuse", dict(scenario="all-reduce", world_size=2, epochs=3))]:
        split, whole = _split(name, **options)
        assert split.parts and split.parts[0].call == 0, name
        assert not whole.parts
        reduced, full = check(split, timeout=60), check(whole, timeout=60)
        assert reduced.limit_hit is None and full.limit_hit is None, name
        assert set(reduced.violations) == set(full.violations), name


def test_a_call_that_always_hangs_keeps_the_later_calls_from_counting():
    # The wait needs one increment more than the producers make: call 0 hangs in every
    # execution, so call 1 never runs, and its stale reads (it would read call 0's tiles) must not
    # be reported. The whole program says the same.
    data = load_protocol("add-counter").to_dict()
    data["wait"] = [{**data["wait"][0], "until": "> world_size"}]
    split, whole = _split(data, scenario="all-reduce", world_size=2, epochs=2)
    assert split.parts
    reduced, full = check(split, timeout=60), check(whole, timeout=60)
    assert set(reduced.violations) == set(full.violations) == {"hang"}


def test_no_call_split_where_a_call_can_leave_two_states():
    # A consumer's CAS reset that can leave the loop before the last increment leaves 0 or the
    # count (whether it succeeded depends on the execution); adds at gpu scope across ranks are
    # not morally strong (an increment can be lost); per-rank streams order no call after every
    # rank's previous one.
    assert not _split(_counter(compare="world_size - 1", until=">= 1"), scenario="all-reduce", world_size=3,
                      epochs=2)[0].parts
    assert not _split("add-counter-cas-reset", scenario="all-reduce", world_size=2, epochs=2,
                      without=frozenset({"cas-reset"}))[0].parts
    data = load_protocol("epoch-flag").to_dict()
    data["signal"] = [{**step, "scope": "gpu"} if step["op"] == "atomic_add" else step for step in data["signal"]]
    assert not _split(data, scenario="all-reduce", world_size=2, epochs=2)[0].parts
    assert not _split("epoch-flag", scenario="all-reduce", world_size=2, epochs=2, launches="per-rank-stream",
                      reset="none")[0].parts


def test_a_cas_reset_beside_an_exchange_leaves_no_one_state_and_is_not_split():
    # Found while building the split (tests/test_check.py's consumer-reset known answer): the
    # producer's exchange writes 1, the consumer's CAS(1 -> 0) resets it. The state was taken
    # from the exchanges alone (1): call 1 then read call 0's tiles (stale-read, race), whereas
    # the whole program is SAFE. A CAS that can change the value now keeps the program whole.
    data = {"name": "xchg-cas-reset", "summary": "s", "origin": "test", "reset": "consumer",
            "signal": [{"op": "barrier"}, {"op": "atomic_xchg", "value": 1, "sem": "release", "scope": "sys", "to": "all"}],
            "wait": [{"op": "await", "read": "atomic_cas", "compare": 1, "value": 0, "sem": "acquire",
                      "scope": "sys", "until": "== 1"}]}
    split, _whole = _split(data, scenario="all-reduce", world_size=1, threads_per_cta=1, epochs=2)
    assert not split.parts
    assert check(split, timeout=60).safe is True


# ----- the call split across a consumer's CAS reset (``cas-reset``) ----------------------------

def _counter(compare: str, until: str, to: str = "others", value: int = 0) -> dict:
    """A counter every other rank increments (release, sys) and the consumer polls with
    ``CAS(compare -> value)`` until ``until`` (acquire, sys), reset by that CAS only."""
    return {"name": "counter-cas", "summary": "s", "origin": "test", "reset": "consumer",
            "tile_store": {"cache": ".wt"}, "tile_load": {"volatile": False},
            "signal": [{"op": "barrier"},
                       {"op": "atomic_add", "lock": "ready", "value": 1, "sem": "release", "scope": "sys", "to": to}],
            "wait": [{"op": "await", "lock": "ready", "read": "atomic_cas", "compare": compare, "value": value,
                      "sem": "acquire", "scope": "sys", "until": until}]}


def _state(scenario, call: int = 1) -> dict[str, int]:
    return {loc: v for loc, v in scenario.parts[call].program.init.items() if loc.startswith("ready")}


def test_a_consumer_cas_reset_of_the_full_count_is_checked_call_by_call_at_w8():
    # Issue 24: the 20 CAS-reset rows of the performance table were checked whole (W! orders of
    # each later call's increments). The poll leaves only on reading world_size - 1, every
    # increment made, and that CAS wrote 0: call 1 starts from 0.
    split, _whole = _split("add-counter-cas-reset", scenario="all-reduce", world_size=8, epochs=2)
    assert [part.stage for part in split.parts] == ["call 0", "call 1"]
    assert set(_state(split).values()) == {0}
    result = check(split, timeout=60)
    assert result.limit_hit is None
    assert set(result.violations) == {"race", "stale-read", "unwritten-read"}  # the local .wt flag path


def test_a_cas_reset_split_gives_the_whole_programs_verdicts_where_both_decide():
    safe = _counter(compare="world_size", until=">= world_size", to="all")
    for data, options, expected in [
            (safe, dict(scenario="all-reduce", world_size=3, epochs=2), set()),
            (safe, dict(scenario="gemm-reduce-scatter", world_size=2, epochs=3), set()),
            (_counter(compare="world_size", until="== world_size", to="all"),
             dict(scenario="all-reduce", world_size=2, epochs=3), set()),
            ("add-counter-cas-reset", dict(scenario="all-reduce", world_size=3, epochs=2), None),
            # the poll needs one increment more than the producers make: call 0 always hangs
            ("add-counter-skip-self", dict(scenario="all-reduce", world_size=2, epochs=3), {"hang", "race"})]:
        split, whole = _split(data, **options)
        assert split.parts and split.parts[0].call == 0, data
        reduced, full = check(split, timeout=60), check(whole, timeout=60)
        assert reduced.limit_hit is None and full.limit_hit is None, data
        assert set(reduced.violations) == set(full.violations), data
        assert expected is None or set(reduced.violations) == expected, data


def test_a_cas_that_never_matches_leaves_the_count_and_the_next_call_sees_it(monkeypatch):
    # The seeded case where the naive reading (a CAS poll resets to its new value) is wrong: the
    # compare (world_size + 3) is never reached, so call 0 leaves world_size in the counter, and
    # call 1's poll (>= world_size) leaves at once, before call 1's producers: its tile loads
    # read call 0's tiles. The split keeps that count (SAFE would be wrong).
    data = _counter(compare="world_size + 3", until=">= world_size", to="all")
    options = dict(scenario="all-reduce", world_size=2, epochs=2)
    split, whole = _split(data, **options)
    assert set(_state(split).values()) == {2}
    reduced, full = check(split, timeout=60), check(whole, timeout=60)
    assert reduced.limit_hit is None and full.limit_hit is None
    assert "stale-read" in full.violations
    assert set(reduced.violations) == set(full.violations)
    monkeypatch.setattr(build_module, "_cas_reset_effect",
                        lambda adds, polls, before: (polls[0].ins.operands[1], polls))
    naive = build(protocol_from_dict(data), ScenarioOptions(**options))
    assert set(_state(naive).values()) == {0}
    assert check(naive, timeout=60).safe  # what the naive state would have answered


def test_a_call_whose_poll_can_never_leave_ends_the_state_and_later_calls_are_still_split():
    # add-counter-skip-self at W = 4: call 0 leaves 3 in the counter and its poll (>= 4) can
    # never leave, so calls 1 and 2 never run. Folding call 1 into call 2's state (from 3, 3
    # more increments pass the compare 4 on their way) is not one state, but it is never used:
    # the split is made (W = 4, three calls: unknown at 60 s whole) and the verdict is call 0's.
    split, _whole = _split("add-counter-skip-self", scenario="all-reduce", world_size=4, epochs=3)
    assert [part.call for part in split.parts] == [0, 1, 2]
    assert set(_state(split, 2).values()) == {3}
    assert not _split("add-counter-skip-self", scenario="all-reduce", world_size=4, epochs=3,
                      without=frozenset({"cas-reset"}))[0].parts
    result = check(split, timeout=60)
    assert result.limit_hit is None and set(result.violations) == {"hang", "race"}


# ----- read-only polls: the ranks reduction across a CAS(0 -> 0) poll (``read-only-polls``) ------

def _gemm_ranks(scenario) -> set[int]:
    parts = scenario.parts or [scenario]
    return {th.gpu for part in parts for th in part.program.threads if th.role.role == "gemm"}


def _gemms_left_out_and_built(name: str, world: int, calls: int, switch: str) -> tuple[set[str], set[str]]:
    """The violation kinds of ``name`` in all-gather-gemm with the other ranks' GEMMs left out
    (asserted) and with ``switch`` off and every GEMM built (asserted); both must decide."""
    opts = ScenarioOptions(scenario="all-gather-gemm", world_size=world, epochs=calls)
    protocol = load_protocol(name)
    reduced = build(protocol, opts)
    whole = build(protocol, opts, without=frozenset({switch}))
    assert _gemm_ranks(reduced) == {0} and _gemm_ranks(whole) == set(range(world)), name
    a, b = check(reduced, timeout=60), check(whole, timeout=60)
    assert a.limit_hit is None and b.limit_hit is None, (name, world, calls)
    return set(a.violations), set(b.violations)


def test_a_gemm_whose_poll_only_rewrites_zero_is_left_out_on_other_ranks_with_the_same_verdict():
    # Issue 24: all-gather-gemm at W >= 4 built every rank's GEMM, because its CAS(0 -> 0) poll
    # writes the counter the senders' adds read; one call at W = 4 found no execution in 60 s.
    # The poll writes only after reading 0, which only the initial write or a host reset holds
    # (the adds are positive): its writes order nothing kept.
    for name, world, calls in [("fenced-release-acquire", 2, 2), ("barrier-fenced-release-acquire", 2, 2),
                               ("add-counter", 2, 1)]:
        reduced, whole = _gemms_left_out_and_built(name, world, calls, "read-only-polls")
        assert reduced == whole, name
    result = check(build(load_protocol("fenced-release-acquire"),
                         ScenarioOptions(scenario="all-gather-gemm", world_size=4, epochs=3)), timeout=60)
    assert result.limit_hit is None and set(result.violations) == {"race", "stale-read", "unwritten-read"}


def test_a_poll_that_resets_or_a_lock_something_else_writes_keeps_every_gemm():
    # A CAS that writes 0 over a count (the consumer's reset) carries order; so does a poll of a
    # lock that an exchange can set back to the compared value.
    for name in ("add-counter-cas-reset", "xchg-flag", "release-xchg-cas-acquire"):
        scenario = build(load_protocol(name), ScenarioOptions(scenario="all-gather-gemm", world_size=2, epochs=2),
                         without=frozenset({"resetting-polls"}))  # below: the reset that writes last in its call
        assert _gemm_ranks(scenario) == {0, 1}, name
    data = load_protocol("add-counter").to_dict()
    data["wait"] = [{"op": "fence", "sem": "acq_rel", "scope": "sys"}] + data["wait"]  # not its first step
    scenario = build(protocol_from_dict(data), ScenarioOptions(scenario="all-gather-gemm", world_size=2, epochs=1))
    assert _gemm_ranks(scenario) == {0, 1}


def test_an_all_scatter_stage_that_can_hang_sends_the_check_to_the_whole_program_call_by_call():
    # A stage that can hang across calls keeps the next launch of both stages from starting, so
    # the check falls back to the whole program; that program is now checked call by call where
    # the call split is exact (add-counter-skip-self at W = 8, two calls, was unknown at 60 s).
    split, whole = _split("add-counter-skip-self", scenario="all-scatter", world_size=2, epochs=2)
    assert [part.stage for part in split.parts] == ["pub", "push"]
    assert [part.call for part in split.whole_parts] == [0, 1] and not whole.whole_parts
    # each call program split by stage (build.staged_calls): a stage that always hangs in call 0
    # keeps call 1 from running, and each stage program of a call is one call's
    assert [[leaf.stage for leaf in call.parts] for call in split.whole_parts] == [["pub call 0", "push call 0"],
                                                                                 ["pub call 1", "push call 1"]]
    reduced, full = check(split, timeout=60), check(whole, timeout=60)
    assert reduced.limit_hit is None and full.limit_hit is None
    assert [stage for stage, _n, _s in reduced.stages][-3:-1] == [
        "call 0", "call 1 (not run: every execution of an earlier part hangs)"]  # call 0 always hangs
    assert set(reduced.violations) == set(full.violations) == {"hang", "race"}


# ----- resetting polls: the ranks reduction across a CAS reset that writes last (``resetting-polls``) -

def test_a_gemm_whose_poll_resets_the_full_count_is_left_out_on_other_ranks_with_the_same_verdict():
    # Issue 24: all-gather-gemm's GEMM CAS writes 0 over the full count, which the next call's
    # adds count from, so every rank's GEMM was built (W = 4, three calls: no execution per call
    # program in 60 s). Within a call program the CAS writes only after every add of the call
    # (cas-reset's case 2): nothing of the call reads it, and the state carries the 0 on.
    for name, world, calls, expected in [
            ("add-counter-cas-reset", 2, 2, {"race", "stale-read", "unwritten-read"}),
            ("add-counter-cas-reset", 3, 1, {"race", "unwritten-read"}),
            ("add-counter-cas-reset", 3, 2, {"race", "stale-read", "unwritten-read"}),
            ("add-counter-skip-self", 2, 2, {"hang", "race"}),  # the poll never leaves: its CAS never writes
            ("add-counter-skip-self", 3, 1, {"hang", "race"})]:
        reduced, whole = _gemms_left_out_and_built(name, world, calls, "resetting-polls")
        assert reduced == whole == expected, (name, world, calls)


def test_the_resetting_gemm_rows_of_the_performance_table_are_decided():
    # Both were unknown at 60 s (every GEMM built); now call by call with rank 0's GEMM only.
    for name, world, calls, expected in [("add-counter-cas-reset", 8, 2, {"race", "stale-read", "unwritten-read"}),
                                         ("add-counter-cas-reset", 4, 3, {"race", "stale-read", "unwritten-read"}),
                                         ("add-counter-skip-self", 4, 3, {"hang", "race"})]:
        scenario = build(load_protocol(name), ScenarioOptions(scenario="all-gather-gemm", world_size=world,
                                                              epochs=calls))
        assert [part.call for part in scenario.parts] == list(range(calls)) and _gemm_ranks(scenario) == {0}
        result = check(scenario, timeout=60)
        assert result.limit_hit is None and set(result.violations) == expected, (name, world, calls)


def test_a_reset_that_can_write_before_the_last_add_keeps_every_gemm():
    # A CAS that resets at 1 (an add can come after it and read its 0), a reset at gpu scope
    # (not morally strong with the other GPUs' adds), and several calls without a call split
    # (per-rank streams): every GEMM is built. The full count at system scope: rank 0's only.
    for data, calls, launches in [
            (_counter(compare="1", until=">= 1"), 1, "host-barrier"),
            ({**_counter(compare="world_size - 1", until=">= world_size - 1"),
              "wait": [{**_counter(compare="world_size - 1", until=">= world_size - 1")["wait"][0], "scope": "gpu"}]},
             2, "host-barrier"),
            (_counter(compare="world_size - 1", until=">= world_size - 1"), 2, "per-rank-stream")]:
        opts = ScenarioOptions(scenario="all-gather-gemm", world_size=3, epochs=calls, launches=launches,
                               reset="none" if launches == "per-rank-stream" else None)
        assert _gemm_ranks(build(protocol_from_dict(data), opts)) == {0, 1, 2}, data
    scenario = build(load_protocol("add-counter-cas-reset"), ScenarioOptions(scenario="all-gather-gemm",
                                                                              world_size=2, epochs=2))
    assert _gemm_ranks(scenario) == {0}


def test_a_push_stage_split_by_call_still_counts_its_violations():
    # Found by this session (issue 24): all-scatter's stage programs, each split by call, were
    # joined with no execution "without a hang" counted for the pub stage (its nested split left
    # it at 0), so every push violation was dropped: SAFE with the split, UNSAFE whole.
    opts = ScenarioOptions(scenario="all-scatter", world_size=2, epochs=2, push="xchg-flag")
    protocol = load_protocol("barrier-fenced-release-acquire")
    split = build(protocol, opts)
    assert [[call.stage for call in stage.parts] for stage in split.parts] == [["pub call 0", "pub call 1"],
                                                                              ["push call 0", "push call 1"]]
    reduced, whole = check(split, timeout=60), check(build(protocol, opts, without=frozenset({"stages"})), timeout=60)
    assert reduced.limit_hit is None and whole.limit_hit is None
    assert set(reduced.violations) == set(whole.violations) == {"race", "stale-read", "unwritten-read"}
    assert "race" in check(build(protocol, replace(opts, epochs=1)), timeout=60).violations  # as with one call


def test_the_all_scatter_rows_whose_pub_stage_always_hangs_are_decided_call_by_call_and_stage_by_stage():
    # add-counter-skip-self in all-scatter, W = 8 with two calls and W = 4 with three: unknown at
    # 60 s (the whole call 0, every role of every rank). Call 0's pub stage hangs in every
    # execution, so call 0's push stage and the later calls never count and are not run.
    for world, calls in [(8, 2), (4, 3)]:
        scenario = build(load_protocol("add-counter-skip-self"),
                         ScenarioOptions(scenario="all-scatter", world_size=world, epochs=calls))
        result = check(scenario, timeout=60)
        assert result.limit_hit is None and set(result.violations) == {"hang", "race"}, (world, calls)
        assert [stage for stage, _n, _s in result.stages][-calls - 1:-1] == ["call 0"] + [
            f"call {k} (not run: every execution of an earlier part hangs)" for k in range(1, calls)]

# ----- reads-from symmetry (one reads-from choice per renaming of units with the same paths) ------

#: Where a symmetry group has two or more units to rename: W = 3 (two) by default, W = 4 too in the full run.
RF_SYMMETRY_CONFIGS = [c for c in CONFIGS if c[3] == 3 and c[2] <= 2 and c[1] == "host-barrier"] + (
    [(scenario, "host-barrier", calls, 4) for scenario in SCENARIOS for calls in (1, 2)] if FULL else [])
XCHG_FAMILY = ("xchg-flag", "release-xchg-cas-acquire", "barrier-release-xchg-cas-acquire")


@slow_if_full
@budget.guard
@seeded
@SETTINGS
@given(data=st.one_of(exact_protocols(near_safe=True), st.sampled_from(XCHG_FAMILY).map(
           lambda name: load_protocol(name).to_dict()).flatmap(with_done_and_slots)),
       config=st.sampled_from(RF_SYMMETRY_CONFIGS))
def test_rf_symmetry_keeps_the_verdict_where_ranks_are_interchangeable(data, config):
    """``rf-symmetry`` turned off, at world sizes whose symmetry group has units to rename (the
    generic pruning property above draws W = 2 by default, where there is one unit: nothing to
    rename), over near-safe protocols and the exchange family it was built for."""
    assert_same(data, config, prunings={"rf-symmetry"})


def _explored(name: str, without=frozenset(), **options):
    scenario = build(load_protocol(name), ScenarioOptions(**options))
    return scenario, check(scenario, timeout=60, without=frozenset(without))


@pytest.mark.parametrize("name, scenario, world", [("xchg-flag", "all-reduce", 4),
                                                   ("xchg-flag", "gemm-reduce-scatter", 4),
                                                   ("release-xchg-cas-acquire", "all-gather-gemm", 3),
                                                   ("barrier-release-xchg-cas-acquire", "all-gather-gemm", 3)])
def test_rf_symmetry_keeps_the_kinds_and_reports_fewer_executions(name, scenario, world):
    """Known answers: the same violation kinds with and without it, with fewer executions (the
    three other ranks' exchanges into rank 0's flag are one chain up to renaming: 6 of 12 at W = 4)."""
    _s, reduced = _explored(name, scenario=scenario, world_size=world, epochs=2)
    _s, whole = _explored(name, {"rf-symmetry"}, scenario=scenario, world_size=world, epochs=2)
    assert reduced.limit_hit is None and whole.limit_hit is None
    assert set(reduced.violations) == set(whole.violations)
    assert reduced.executions < whole.executions


def test_seven_exchanges_into_one_flag_at_w8_with_two_calls_are_decided():
    """Issue 24's ``xchg-flag`` row: at W = 8 each of 7! chains of the other ranks' exchanges was
    an execution of its own (call 0 had 1,642+ at the bound); up to renaming, 7 per combination."""
    scenario, result = _explored("xchg-flag", scenario="all-reduce", world_size=8, epochs=2)
    assert result.limit_hit is None
    assert set(result.violations) == {"race", "unwritten-read"} | (set(result.violations) & {"stale-read"})
    assert result.executions <= 40


def test_no_swap_where_a_renaming_would_reorder_another_ranks_non_ghost_accesses():
    """Seeded hole: in all-gather-gemm, rank 0's sender exchanges into ranks 1, 2, 3's flags in that
    order; renaming ranks 1 and 2 reorders those release exchanges (a different program), so no
    combination of that program gets a swap (the check keeps every reads-from choice)."""
    from syncverify.explore import driver, rf_symmetry

    scenario = build(load_protocol("xchg-flag"), ScenarioOptions(scenario="all-gather-gemm", world_size=3))
    swaps = []
    original = rf_symmetry.RfSymmetry.__init__

    def spy(self, skeleton, program):
        original(self, skeleton, program)
        swaps.append(len(self.swaps))

    try:
        rf_symmetry.RfSymmetry.__init__ = spy
        result = driver.explore(scenario.program, timeout=60)
    finally:
        rf_symmetry.RfSymmetry.__init__ = original
    assert result.limit_hit is None and swaps and set(swaps) == {0}


def test_the_builder_lists_only_renamings_that_stay_in_the_program():
    program = build(load_protocol("xchg-flag"), ScenarioOptions(scenario="all-reduce", world_size=4)).program
    (group,) = program.symmetry
    assert len(program.unit_renamings) == 3  # three units, each two once
    unit_a, unit_b, pairs = program.unit_renamings[0]
    assert (unit_a, unit_b) == group[:2]
    assert ("partial.r1.t0.s0", "partial.r2.t0.s0") in pairs
    assert all("r0" not in a and "r0" not in b for a, b in pairs)  # rank 0 is checked, not renamed
    assert not build(load_protocol("xchg-flag"), ScenarioOptions(scenario="all-reduce", world_size=4),
                     without=frozenset({"symmetry"})).program.unit_renamings


def test_a_program_whose_every_execution_hangs_still_has_executions_on_per_rank_streams():
    # Found by test_each_builder_reduction_keeps_the_verdict on the merged tree (2026-12-02, fourth
    # session): the `shared-sources` pruning (branch streams24) pruned every combination of this
    # program, "no execution at all", where every execution hangs (no rank counts itself, so no
    # CAS reaches world_size). The pruning was withdrawn; this keeps its counterexample.
    data = {"name": "mutated", "summary": "as add-counter-cas-reset, waiting for >= world_size without a self-increment",
            "origin": "the property's counterexample", "believed": "-", "notes": "-", "reset": "host",
            "tile_store": {"cache": ".wt"}, "tile_load": {"volatile": False},
            "signal": [{"op": "barrier"},
                       {"op": "store", "lock": "local", "to": "self", "value": 1, "cache": ".wt", "sem": "weak"},
                       {"op": "atomic_add", "lock": "ready", "to": "others", "value": 1, "sem": "release", "scope": "sys"}],
            "wait": [{"op": "await", "read": "volatile_load", "lock": "local", "from": "self", "cache": ".cv", "until": "== 1"},
                     {"op": "await", "read": "atomic_cas", "lock": "ready", "from": "self", "compare": "world_size",
                      "value": 0, "sem": "acquire", "scope": "sys", "until": ">= world_size"}]}
    opts = ScenarioOptions(scenario="all-scatter", world_size=2, epochs=2, launches="per-rank-stream", reset="none")
    result = check(build(protocol_from_dict(data), opts), timeout=5)
    assert result.limit_hit != "no-executions"
    assert result.limit_hit is not None or "hang" in result.violations


# ----- launches after a hang on per-rank streams never start (explore.launch_order) ----------------

def _after_a_hang(pub: str, scenario: str, push: str | None = None, **options):
    opts = ScenarioOptions(scenario=scenario, world_size=2, epochs=2, launches="per-rank-stream", reset="none",
                           **options)
    return build(load_protocol(pub), opts, push=None if push is None else load_protocol(push))


def test_launches_after_a_hang_on_per_rank_streams_never_start_and_the_hang_is_reported():
    # The property's counterexample on the merged tree (2026-12-02, fourth session), present on main
    # before it (9a88b14), a strict xfail until the search learnt "never started": every execution
    # hangs in call 0 (no rank counts itself in the push stage), so the later launches never start;
    # the search weighed their paths anyway and rejected every combination ("no-executions"). Now
    # their threads take the never-started path, and the check decides at once (0.3 s here).
    scenario = _after_a_hang("add-counter-skip-self", "all-scatter", push="add-counter-cas-reset")
    result = check(scenario, timeout=20)
    assert result.limit_hit is None and result.safe is False
    assert set(result.violations) == {"hang", "race"}
    # Call 0 hangs in every execution, so call 1 adds nothing: the verdict of call 0 alone.
    one_call = check(build(load_protocol("add-counter-skip-self"),
                           ScenarioOptions(scenario="all-scatter", world_size=2, epochs=1,
                                           push="add-counter-cas-reset")), timeout=20)
    assert one_call.limit_hit is None and set(one_call.violations) == set(result.violations)
    hang = result.violations["hang"].execution
    assert {e.phase.epoch for e in hang.events if not e.is_init} == {0}  # no event of call 1


@pytest.mark.parametrize("pub, scenario", [
    ("add-counter-skip-self", "all-reduce"), ("epoch-flag", "all-reduce"), ("add-counter-skip-self", "gemm-reduce-scatter"),
    # 6.5 s without the search on the 2-core machine: in the full run only.
    pytest.param("add-counter-skip-self", "all-gather-gemm",
                 marks=pytest.mark.skipif(not FULL, reason="6.5 s: runs with SYNCVERIFY_EXACT_FULL=1"))])
def test_the_combination_search_and_every_path_product_agree_on_launches_after_a_hang(pub, scenario):
    """Differential: the never-started path is the search's alone; without the search every
    product of real paths is tried and :func:`~syncverify.explore.launch_order.not_started` cuts
    the launches after a hang. On per-rank streams, W = 2, two calls: skip-self hangs (with other
    violations; in all-gather-gemm in every execution, where the search found none before:
    unknown), epoch-flag never does (no never-started path is ever taken)."""
    scenario = _after_a_hang(pub, scenario)
    searched = check(scenario, timeout=60)
    product = check(scenario, timeout=60, without=frozenset({"combination-search"}))
    assert searched.limit_hit is None and product.limit_hit is None
    assert set(searched.violations) == set(product.violations)
    assert ("hang" in searched.violations) == pub.startswith("add-counter-skip-self")
