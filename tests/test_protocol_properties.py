"""Properties of the checker's verdicts over generated protocols (all-reduce, world size 2, 1 tile,
1 epoch, 2 threads per CTA).

Protocols are drawn as the plain data a TOML file holds (the layout ``syncverify.protocols.loader`` reads) and built
with :func:`syncverify.protocols.protocol_from_dict`, two ways: freely (a signal list of 1-3 steps: barrier,
fence, store, atomic_xchg, atomic_add, at least one of them writing the lock; a wait list of one
``await``, read by load, volatile_load, atomic_cas or atomic_add, and possibly a fence, barrier or
one-off atomic_cas), or as a built-in with a few sems and scopes drawn again and maybe one step
dropped (random steps are almost never safe; changed built-ins often are, or nearly). Each
property compares the *violation kinds* of two protocols.

An example whose check hits the explorer's bounds (``TIMEOUT_S``, ``MAX_EXECUTIONS``) is
discarded with ``assume``; a property fails if more than ``MAX_LIMIT_HITS`` of its examples were,
since its strategy would then be too big to test anything. A check that finds no execution at all
is never discarded: every program has one, so that is a model bug.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import assume, event, given, note, settings
from hypothesis import strategies as st

from tests.limits import LimitBudget

from syncverify.protocols import Protocol, load_protocol, protocol_from_dict
from syncverify.protocols.loader import (
    ATOMIC_SEMS,
    FENCE_SEMS,
    LOAD_CACHES,
    READ_SEMS,
    SCOPES,
    STORE_CACHES,
    TARGETS,
)
from syncverify.verdicts.causes import CAUSE_KINDS
from syncverify.verdicts.check import check
from syncverify.scenarios.build import ScenarioOptions, build

OPTIONS = ScenarioOptions(scenario="all-reduce", world_size=2, tiles=1, epochs=1)
TIMEOUT_S = 3.0
MAX_EXECUTIONS = 20_000
MAX_LIMIT_HITS = 3

budget = LimitBudget(MAX_LIMIT_HITS, "checker")
few_limit_hits = budget.guard


# ----- generated protocols ---------------------------------------------------------------------

SCOPE_ORDER = {scope: n for n, scope in enumerate(SCOPES)}  # cta < gpu < sys
# Stronger-than, per kind of sem; a pair absent from a lattice is incomparable.
FENCE_LATTICE = {"release": 0, "acquire": 0, "acq_rel": 1, "sc": 2}  # release/acquire lower to acq_rel
STORE_LATTICE = {"weak": 0, "relaxed": 1, "release": 2}
ATOMIC_LATTICE = {"relaxed": 0, "acquire": 1, "release": 1, "acq_rel": 2}
READ_LATTICE = {"relaxed": 0, "acquire": 1, "acq_rel": 2}

UNTILS = ("== 1", ">= 1", "> 0", "!= 0", ">= world_size", "== world_size", ">= world_size - 1")
# A polling CAS is read-only (compare == value: any until) or resets the lock exactly when the
# poll exits (seed 000's first attempt); a CAS that writes on a failing poll would make the loop
# change the lock on every iteration, which no bound can explore.
READ_ONLY_CAS = ((0, 0), (1, 1))
RESETTING_CAS = ((1, 0, "== 1"), ("world_size", 0, ">= world_size"),
                 ("world_size - 1", 0, ">= world_size - 1"))

scopes = st.sampled_from(SCOPES)


@st.composite
def fences(draw) -> dict:
    return {"op": "fence", "sem": draw(st.sampled_from(FENCE_SEMS)), "scope": draw(scopes)}


@st.composite
def writes(draw) -> dict:
    """A signal step that writes the lock: store, atomic_xchg or atomic_add."""
    op = draw(st.sampled_from(("store", "atomic_xchg", "atomic_add")))
    step = {"op": op, "value": 1, "to": draw(st.sampled_from(TARGETS))}
    if op == "store":
        sem = draw(st.sampled_from(tuple(STORE_LATTICE)))
        step["sem"] = sem
        if sem == "weak":
            step["cache"] = draw(st.sampled_from(STORE_CACHES))
        else:
            step["scope"] = draw(scopes)
    else:
        step["sem"] = draw(st.sampled_from(ATOMIC_SEMS))
        step["scope"] = draw(scopes)
    return step


@st.composite
def signal_lists(draw) -> list[dict]:
    """1-3 steps, at least one a write (a wait step must name a lock some signal step writes)."""
    others = draw(st.lists(st.one_of(st.just({"op": "barrier"}), fences()), max_size=2))
    at = draw(st.integers(0, len(others)))
    return others[:at] + [draw(writes())] + others[at:]


@st.composite
def awaits(draw) -> dict:
    read = draw(st.sampled_from(("load", "volatile_load", "atomic_cas", "atomic_add")))
    step = {"op": "await", "read": read, "until": draw(st.sampled_from(UNTILS))}
    if read in ("load", "volatile_load"):
        step["cache"] = draw(st.sampled_from(LOAD_CACHES))
        return step
    step["sem"] = draw(st.sampled_from(READ_SEMS))
    step["scope"] = draw(scopes)
    if read == "atomic_cas":
        if draw(st.booleans()):
            step["compare"], step["value"] = draw(st.sampled_from(READ_ONLY_CAS))
        else:
            step["compare"], step["value"], step["until"] = draw(st.sampled_from(RESETTING_CAS))
    else:
        step["value"] = 0  # a poll that adds would change the lock on every iteration
    return step


@st.composite
def one_off_cas(draw) -> dict:
    compare = draw(st.sampled_from((0, 1)))
    return {"op": "atomic_cas", "compare": compare, "value": compare,
            "sem": draw(st.sampled_from(READ_SEMS)), "scope": draw(scopes)}


@st.composite
def wait_lists(draw) -> list[dict]:
    """One await, then at most one fence, barrier or one-off (read-only) atomic_cas."""
    steps = [draw(awaits())]
    extra = draw(st.one_of(st.none(), st.just({"op": "barrier"}), fences(), one_off_cas()))
    if extra is not None:
        steps.append(extra)
    return steps


@st.composite
def random_protocols(draw) -> dict:
    """A protocol as the plain dict a TOML file parses to, its steps drawn freely."""
    return {
        "name": "generated",
        "summary": "a generated protocol",
        "origin": "tests/test_protocol_properties.py",
        "tile_store": {"cache": draw(st.sampled_from(STORE_CACHES))},
        "tile_load": {"volatile": draw(st.booleans())},
        "signal": draw(signal_lists()),
        "wait": draw(wait_lists()),
    }


def resampled(draw, step: dict) -> dict:
    """``step`` with its sem and scope drawn again (weaker or stronger) where it has them."""
    step = dict(step)
    if step["op"] == "fence":
        step["sem"] = draw(st.sampled_from(FENCE_SEMS))
    elif step["op"] in ("atomic_xchg", "atomic_add"):
        step["sem"] = draw(st.sampled_from(ATOMIC_SEMS))
    elif step["op"] == "atomic_cas" or (step["op"] == "await" and "sem" in step):
        step["sem"] = draw(st.sampled_from(READ_SEMS))
    if "scope" in step:
        step["scope"] = draw(scopes)
    return step


@st.composite
def mutated_builtins(draw) -> dict:
    """A built-in protocol with 0-2 of its steps' sems and scopes drawn again, and maybe one step
    (not the only write, nor the only await) dropped: mostly near-safe protocols, which random
    steps rarely are."""
    from syncverify.protocols import builtin_protocols

    data = draw(st.sampled_from(builtin_protocols())).to_dict()
    data = {**data, "name": "mutated", "reset": "host"}
    for _ in range(draw(st.integers(0, 2))):
        section = draw(st.sampled_from(("signal", "wait")))
        steps = list(data[section])
        i = draw(st.integers(0, len(steps) - 1))
        steps[i] = resampled(draw, steps[i])
        data = {**data, section: steps}
    if draw(st.booleans()):
        section = draw(st.sampled_from(("signal", "wait")))
        steps = list(data[section])
        i = draw(st.integers(0, len(steps) - 1))
        rest = steps[:i] + steps[i + 1:]
        keeps = any(s["op"] not in ("barrier", "fence") for s in rest) if section == "signal" else \
            any(s["op"] == "await" for s in rest)
        locks = {s.get("lock", "ready") for s in (rest if section == "signal" else data["signal"])
                 if s["op"] not in ("barrier", "fence")}
        waits = rest if section == "wait" else data["wait"]
        if keeps and all(s.get("lock", "ready") in locks for s in waits if "lock" in s or s["op"] in ("await", "atomic_cas")):
            data = {**data, section: rest}
    return data


def protocol_data() -> st.SearchStrategy[dict]:
    """Protocols as plain dicts: drawn freely, or built-ins slightly changed."""
    return st.one_of(random_protocols(), mutated_builtins(), mutated_builtins())


def with_barrier_inserted(data: dict, at: int) -> dict:
    signal = list(data["signal"])
    return {**data, "signal": signal[:at] + [{"op": "barrier"}] + signal[at:]}


def strengthenings(step: dict) -> list[dict]:
    """Every copy of ``step`` with one sem made stronger or its scope made wider.

    Only changes that keep the instruction and its threads and make its ordering stronger in the
    PTX model count; see :func:`test_strengthening_a_sem_or_widening_a_scope_never_adds_a_violation_kind`
    for the one left out.
    """
    out = []
    op = step["op"]
    if "scope" in step:
        out += [{**step, "scope": s} for s in SCOPES if SCOPE_ORDER[s] > SCOPE_ORDER[step["scope"]]]
    if "sem" not in step:
        return out  # barrier; load/volatile_load awaits (changing the read kind is not a strengthening)
    lattice = {"fence": FENCE_LATTICE, "store": STORE_LATTICE, "atomic_xchg": ATOMIC_LATTICE,
               "atomic_add": ATOMIC_LATTICE, "atomic_cas": READ_LATTICE, "await": READ_LATTICE}[op]
    if op == "await" and step["read"] == "atomic_add" and step["sem"] != "acq_rel":
        return out  # see the property's docstring
    for sem, rank in lattice.items():
        if rank <= lattice[step["sem"]]:
            continue
        stronger = {**step, "sem": sem}
        if op == "store" and step["sem"] == "weak":  # a strong store takes a scope and no cache
            stronger.pop("cache", None)
            out += [{**stronger, "scope": s} for s in SCOPES]
        else:
            out.append(stronger)
    return out


@st.composite
def protocol_and_strengthened(draw) -> tuple[dict, dict]:
    data = draw(protocol_data())
    options = [(section, i, stronger) for section in ("signal", "wait")
               for i, step in enumerate(data[section]) for stronger in strengthenings(step)]
    if not data["tile_load"]["volatile"]:  # weak tile loads -> ld.relaxed.sys
        options.append(("tile_load", 0, {"volatile": True}))
    assume(options)  # nothing to strengthen (every sem and scope already the strongest)
    section, i, stronger = draw(st.sampled_from(options))
    if section == "tile_load":
        return data, {**data, "tile_load": stronger}
    steps = list(data[section])
    steps[i] = stronger
    return data, {**data, section: steps}


# ----- checking --------------------------------------------------------------------------------

#: protocol (its plain dict as sorted JSON, name included) -> the kinds found, for the checks that hit
#: no limit: those are a pure function of the protocol, and the draws repeat protocols (the weaker
#: side of one example is often the stronger side of another): 400 checks were of 292 distinct
#: protocols in the two order properties (2026-12-02). A check that hit a limit is run again.
_KINDS: dict[str, frozenset[str]] = {}


def kinds(protocol: dict | Protocol) -> frozenset[str]:
    """The violation kinds the checker finds for ``protocol`` (or its plain dict); discards the
    example on a limit."""
    if isinstance(protocol, dict):
        protocol = protocol_from_dict(protocol)
    key = json.dumps(protocol.to_dict(), sort_keys=True)
    found = _KINDS.get(key)
    if found is None:
        result = check(build(protocol, OPTIONS), max_executions=MAX_EXECUTIONS, timeout=TIMEOUT_S)
        assert result.limit_hit != "no-executions", f"no execution at all: {protocol.to_dict()}"
        budget.discard_if_hit(result.limit_hit)
        found = _KINDS[key] = frozenset(result.violations)
    event(f"kinds: {sorted(found)}")
    return found


# ----- properties ------------------------------------------------------------------------------

@few_limit_hits
@settings(max_examples=80, deadline=None)
@given(protocol_data(), st.data())
def test_inserting_a_cta_barrier_into_the_signal_steps_never_adds_a_violation_kind(data, draw):
    """A barrier only adds order (bar.sync edges between the producer CTA's threads), and every
    producer thread reaches it (signal steps never block), so it cannot add a hang either."""
    at = draw.draw(st.integers(0, len(data["signal"])), label="barrier position")
    barriered = with_barrier_inserted(data, at)
    note(f"weaker: {data}\nwith the barrier: {barriered}")
    before, after = kinds(data), kinds(barriered)
    assert after <= before, f"the barrier added {sorted(after - before)}"


@few_limit_hits
@settings(max_examples=120, deadline=None)
@given(protocol_and_strengthened())
def test_strengthening_a_sem_or_widening_a_scope_never_adds_a_violation_kind(pair):
    """Stronger sems (relaxed < acquire, release < acq_rel; for fences release, acquire < acq_rel
    < sc; for stores weak < relaxed < release), wider scopes (cta < gpu < sys) and volatile tile
    loads only make more pairs morally strong and add synchronization, on the same instructions.

    Left out: making an ``await`` with ``read = "atomic_add"`` (of 0) ``acq_rel`` when it was
    ``relaxed`` or ``acquire``. Triton 3.6 compiles those two to a *load* on one thread
    (``ld.relaxed``/``ld.acquire``) but ``acq_rel`` to an ``atom.add.acq_rel`` (checked by
    ``tests/test_ptx_audit.py``): a different instruction, one that also writes the lock. Hypothesis
    found what that write can do: producers ``st.relaxed.cta`` 1 into the consumer's lock, and the
    consumer polls with ``atomic_add(0)`` at ``cta`` scope until ``== 1``. As ``ld.relaxed.cta``
    the poll eventually reads 1: no hang. As ``atom.add.acq_rel.cta`` it is not morally strong
    with the other CTAs' stores (scope ``cta``), so PTX's atomicity does not hold against them: its
    write-back of the 0 it read can be ordered after both 1s in coherence, the lock ends at 0 and
    the poll hangs. That is PTX's behaviour for the instruction Triton emits, not a model error.
    """
    weaker, stronger = pair
    note(f"weaker: {weaker}\nstronger: {stronger}")
    before, after = kinds(weaker), kinds(stronger)
    assert after <= before, f"strengthening added {sorted(after - before)}"


def toml_text(data: dict) -> str:
    """``data`` (a protocol's plain dict) as TOML text: top-level fields, inline tables, then one
    ``[[signal]]``/``[[wait]]`` table per step. Covers the value types a protocol uses."""

    def value(v) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int):
            return str(v)
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + " }"
        raise TypeError(f"no TOML for {v!r}")

    lines = [f"{k} = {value(v)}" for k, v in data.items() if k not in ("signal", "wait")]
    for section in ("signal", "wait"):
        for step in data[section]:
            lines += ["", f"[[{section}]]"] + [f"{k} = {value(v)}" for k, v in step.items()]
    return "\n".join(lines) + "\n"


@st.composite
def renamed(draw, data: dict) -> dict:
    """``data`` with another name and its locks renamed one-to-one (every step names its lock)."""
    locks = list(dict.fromkeys(s.get("lock", "ready") for section in ("signal", "wait")
                               for s in data[section] if s["op"] not in ("barrier", "fence")))
    fresh = draw(st.lists(st.sampled_from(("flag", "tile_ready", "locks", "z9", "ready", "local")),
                          min_size=len(locks), max_size=len(locks), unique=True))
    names = dict(zip(locks, fresh))
    steps = {section: [{**s, "lock": names[s.get("lock", "ready")]} if s["op"] not in ("barrier", "fence")
                       else s for s in data[section]] for section in ("signal", "wait")}
    return {**data, "name": draw(st.sampled_from(("copy", "renamed-protocol", "x_1"))), **steps}


@few_limit_hits
@settings(max_examples=20, deadline=None)
@given(protocol_data().flatmap(lambda d: st.tuples(st.just(d), renamed(d))))
def test_a_protocol_written_to_toml_and_loaded_back_renamed_has_the_same_verdict(pair):
    """The verdict depends on the steps only: not on the protocol's or the lock's name, nor on
    going through a TOML file and the registry's loader (``load_protocol(path)``)."""
    data, copy = pair
    text = toml_text(copy)
    note(f"original: {data}\nTOML:\n{text}")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{copy['name']}.toml"
        path.write_text(text, encoding="utf-8")
        loaded = load_protocol(path)
    assert loaded == protocol_from_dict(copy), "the TOML text says what the dict says"
    assert kinds(loaded) == kinds(data)


# The whole program of a random pair can be slow (it is what the split avoids): its own budget of
# discarded examples, and a longer bound for the whole program than for the split.
split_budget = LimitBudget(8, "checker")


@split_budget.guard
@settings(max_examples=30, deadline=None)
@given(protocol_data(), protocol_data())
def test_all_scatter_checked_stage_by_stage_finds_what_the_whole_program_finds(pub, push):
    """``scenarios.stage_parts`` claims the split into a pub and a push program is exact with one
    epoch: the joined verdict of the parts equals the whole program's, for any pair of protocols."""
    options = ScenarioOptions(scenario="all-scatter", world_size=2)
    scenario = build(protocol_from_dict(pub), options, push=protocol_from_dict({**push, "name": "push"}))
    assert scenario.parts, "one epoch with symmetry is split"
    split = check(scenario, max_executions=MAX_EXECUTIONS, timeout=2 * TIMEOUT_S)
    split_budget.discard_if_hit(split.limit_hit)
    scenario.parts = []
    whole = check(scenario, max_executions=MAX_EXECUTIONS, timeout=6 * TIMEOUT_S)
    split_budget.discard_if_hit(whole.limit_hit)
    note(f"pub: {pub}\npush: {push}")
    event(f"kinds: {sorted(whole.violations)}")
    assert set(split.violations) == set(whole.violations)


# ----- causes match their own traces (issue 23, item 3) -----------------------------------------

def assert_cause_matches_its_trace(result, violation) -> None:
    """A cause states facts of its witness: the events it names exist, the steps it blames appear
    in its trace, and what it says was read (from where, which value) is what the execution read."""
    c = violation.cause(result.scenario)
    scenario = violation.part or result.scenario
    x = violation.execution
    trace_steps = [row["step"] for row in violation.trace(result.scenario)]
    assert c.kind in CAUSE_KINDS and c.kind != "unexplained", c.text
    for a, b in c.evidence:
        assert 0 <= a < len(x.events) and 0 <= b < len(x.events), (c.kind, c.evidence)
    for ref in c.steps:  # the steps it blames (its named poll) are steps this trace ran
        assert any(row == ref.name or row.startswith(ref.name + " ") for row in trace_steps), (ref.name, c.text)
    if c.kind == "stale-signal":
        poll, source = x.events[c.details["poll"]], x.events[c.details["reads_from"]]
        assert x.rf[poll.eid] == source.eid and poll.value == source.value == c.details["read"]
        assert scenario.threads[source.thread].epoch == c.details["signal_call"] < c.details["call"]
    if c.kind == "wait-without-signal" and "producer_rank" in c.details:
        # "no poll reads a signal of rank R's producer in call K": none of the consumer CTA's polls does
        (_src, p), = c.evidence
        consumer = x.events[p].cta
        producer = (c.details["producer_rank"], c.details["producer_role"], c.details["producer_call"])
        for e in x.events:
            if e.is_read and e.cta == consumer and "wait step" in e.label and e.eid in x.rf:
                src = x.events[x.rf[e.eid]]
                origin = scenario.threads[src.thread] if not src.is_init else None
                assert origin is None or "signal step" not in src.label or (
                    origin.rank, origin.role, origin.epoch or 0) != producer, c.text
    if c.kind == "early-reuse":
        # "call K2's store can overwrite what call K1 still reads": a store of the later call
        load, store = (x.events[i] for i in c.evidence[0])
        assert load.is_read and store.is_write and load.loc == store.loc == c.details["location"]
        assert (scenario.threads[load.thread].epoch, scenario.threads[store.thread].epoch) == (
            c.details["load_call"], c.details["store_call"])
        assert c.details["load_call"] < c.details["store_call"], c.text
    if c.kind == "unreachable-target":
        loc = c.details["location"]
        writers = {scenario.threads[e.thread].rank for e in x.events
                   if e.is_write and not e.is_init and e.loc == loc and "signal step" in e.label}
        assert not writers & set(c.details["missing_ranks"]), c.text
        seen = {value for reason in x.stuck.values() if reason[0] == "spin" for at, value in reason[1] if at == loc}
        assert c.details["last_value"] in seen, c.text  # the value the hanging poll keeps reading


#: Two calls of a generated protocol take longer to explore: more time, and a few more discards.
TWO_CALLS_TIMEOUT_S = 6.0
cause_budget = LimitBudget(6, "checker")


@cause_budget.guard
@settings(max_examples=30, deadline=None)
@given(protocol_data(), st.sampled_from((1, 2)), st.sampled_from((None, "none")))
def test_every_cause_is_consistent_with_its_own_trace(data, epochs, reset):
    """Over generated protocols, one or two calls, locks reset by the protocol's own policy or
    never: every violation's cause names steps its trace ran and reads its execution made."""
    from dataclasses import replace

    protocol = protocol_from_dict(data)
    result = check(build(protocol, replace(OPTIONS, epochs=epochs, reset=reset)),
                   max_executions=MAX_EXECUTIONS, timeout=TIMEOUT_S if epochs == 1 else TWO_CALLS_TIMEOUT_S)
    cause_budget.discard_if_hit(result.limit_hit)
    for violation in result.violations.values():
        event(f"cause: {violation.cause(result.scenario).kind}")
        assert_cause_matches_its_trace(result, violation)


#: Scenarios whose ranks the builder reduces (a symmetry group, ranks left out as renamings of
#: rank 0, a stage split), with the launch orders, calls and world sizes where each reduction is
#: made or not (three ranks with one call only: two calls of three ranks often hit the bound).
SYMMETRY_CASES = [(scenario, launches, epochs, world_size)
                  for scenario in ("all-scatter", "all-gather-gemm", "gemm-reduce-scatter")
                  for launches, epochs, world_size in (("host-barrier", 1, 2), ("host-barrier", 1, 3),
                                                       ("host-barrier", 2, 2), ("per-rank-stream", 2, 2))]
symmetry_cause_budget = LimitBudget(5, "checker")


@symmetry_cause_budget.guard
@settings(max_examples=10, deadline=None)
@given(protocol_data(), st.sampled_from(SYMMETRY_CASES))
def test_every_cause_is_consistent_with_its_own_trace_in_the_reduced_scenarios(data, case):
    """The same property where the builder reduces ranks (issue 24): the witness is an execution
    of the reduced program, and its cause names only what that execution did."""
    from dataclasses import replace

    scenario, launches, epochs, world_size = case
    reset = "none" if launches == "per-rank-stream" else None
    options = replace(OPTIONS, scenario=scenario, world_size=world_size, epochs=epochs, launches=launches,
                      reset=reset)
    result = check(build(protocol_from_dict(data), options), max_executions=MAX_EXECUTIONS,
                   timeout=TIMEOUT_S if epochs == 1 else TWO_CALLS_TIMEOUT_S)
    symmetry_cause_budget.discard_if_hit(result.limit_hit)
    for violation in result.violations.values():
        event(f"cause: {violation.cause(result.scenario).kind}")
        assert_cause_matches_its_trace(result, violation)
