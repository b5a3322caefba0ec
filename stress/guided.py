"""Model-guided stress: a delay schedule from each counterexample the model finds, and its run.

The model (``syncverify.verdicts.check``) holds, for each violation of a protocol in a scenario, an
execution that breaks it: a tile read that sees the poisoned initial value (or a write it is not
ordered after) while the consumer's wait already saw a signal. Random delays hope to hit such an
execution; this module aims at it. From the witness's trace it reads

* the **late** event: the tile store the reader should have seen (``W``), its rank, its CTA
  (producer) and its thread (thread 0 is the one that runs the one-thread signal: warp 0 on the
  GPU; thread 1 stands for every other warp);
* the threads that must **run ahead**: the reader (the consumer's warp that loads the tile) and
  every producer whose signal the consumer's polls read from;

and turns them into :class:`~syncverify.stress.delays.GuidedDelay` entries:

* the writer's CTA is the one whose signal the consumer saw (a missing CTA barrier, an acquire
  on one thread only): only the writer's *other* warps wait before their stores
  (``before-store``, warps 1..N-1), so the one-thread signal goes first;
* the writer's CTA is not one the consumer heard from (an overwritten flag, a wait that never
  reads that rank's signal): the writer's whole CTA is late (``before-store`` on every warp and
  ``store-signal``), the signallers the consumer did hear from are not delayed;
* nobody else is delayed: consumers poll as early as they can and read right after their wait.

A delay can only reorder *threads*: when the late store and the observed signal are on the same
thread (a weak flag store overtaking the same thread's weak data store, the model's
``not-morally-strong`` witnesses), no schedule can force it, and the schedule says so
(``realizable=False``). Among all the counterexamples of a kind (the exploration is exhaustive),
:func:`guided_plan` therefore prefers one whose late event is on another thread than the signal
the reader saw; the model's own witness (fewest events) is used when none is.

:func:`run_guided` runs each schedule and, under the same time budget, random delays, and
reports per violation kind: reproduced or not, iterations and seconds to the first failure.
Pure host code except :func:`run_guided` (which runs campaigns).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any
import time

from syncverify.program import HOST_RESET
from syncverify.stress.delays import GuidedDelay
from syncverify.explore.driver import explore
from syncverify.protocols import load_protocol
from syncverify.scenarios.build import ROLES, ScenarioOptions, Stage, build
from syncverify.stress.campaign import campaign_options, run_campaign
from syncverify.verdicts.check import check_calls, check_protocol, classify, execution_trace

#: Delay ranges (ns) of a guided schedule. Per-warp store delays of 2 us exposed a missing CTA
#: barrier in 19,800 of 19,800 tiles on an H200 (../shared/PLATFORM.md); a whole late CTA needs
#: to outlast the consumer's poll of the flags it did see.
WARPS_LATE_NS = (2000, 4000)
CTA_LATE_NS = (3000, 6000)

#: What a model violation kind looks like on the hardware (``syncverify.stress.validate`` classes).
SYMPTOMS: dict[str, tuple[str, ...]] = {
    "unwritten-read": ("unwritten", "missing-ranks", "stale", "corrupt"),
    # ``unwritten`` too: with ``--poison all`` (the default) the workspaces are zeroed every
    # iteration, so a read of the previous iteration's tile reads the zero fill (RESULTS.md:
    # iris-465-hardcoded-lock-value's stale reads came back as 32,512 unwritten tiles)
    "stale-read": ("stale", "unwritten", "missing-ranks", "corrupt"),
    "race": ("unwritten", "missing-ranks", "stale", "corrupt"),
    "hang": ("hang",),
}

#: Violation kinds whose hardware symptom is a wrong tile value (a hang is not one).
DATA_KINDS = frozenset({"unwritten-read", "stale-read", "race"})


def _signalling_roles() -> frozenset[str]:
    """Roles that run a protocol's ``signal`` steps in some scenario (``syncverify.scenarios.build.ROLES``):
    producer, all-scatter's comm, all-gather-gemm's sender."""
    return frozenset(role.name for roles in ROLES.values() for role in roles
                     if any(isinstance(step, Stage) and step.kind == "signal" for step in role.steps))


def _delayed_writers() -> frozenset[str]:
    """Roles whose tile stores the kernels can delay: the first role of each scenario (producer,
    all-gather-gemm's sender), whose programs come first in the grid
    (``syncverify.kernels.steps.program_role``) and hold the ``before-store`` and
    ``store-signal`` delay sites."""
    return frozenset(roles[0].name for roles in ROLES.values())


@dataclass(frozen=True)
class Actor:
    """One thread of the witness: rank, CTA role (``producer``, ``consumer``, ``comm``,
    ``receiver``, ``sender``, ``gemm``), thread index within the CTA, and the epoch (launch) it
    runs in."""

    rank: int
    cta: str
    thread: int
    epoch: int = 0

    def __str__(self) -> str:
        return f"rank {self.rank} {self.cta} thread {self.thread}" + (f" (epoch {self.epoch})" if self.epoch else "")

    def same_cta(self, other: "Actor") -> bool:
        return (self.rank, self.cta, self.epoch) == (other.rank, other.cta, other.epoch)


@dataclass(frozen=True)
class Schedule:
    """The delays that aim at one counterexample, and why."""

    kind: str  # the model's violation kind
    cause: str  # syncverify.verdicts.causes kind of the witness
    explanation: str  # the model's sentence for the witness
    entries: tuple[GuidedDelay, ...]
    reasons: tuple[str, ...]  # one per entry: why that delay
    ahead: tuple[str, ...]  # the threads left undelayed on purpose, with why
    order: tuple[str, ...]  # the witness's key events in the order the schedule aims at
    realizable: bool
    note: str = ""

    def to_dict(self) -> dict:
        out = asdict(self)
        out["entries"] = [e.to_dict() for e in self.entries]
        return out

    def describe(self) -> list[str]:
        """The schedule for humans: what is delayed and why, who runs ahead, in which order."""
        lines = [f"{self.kind} ({self.cause}): {self.explanation}"]
        lines += [f"  order aimed at: {step}" for step in self.order]
        for entry, reason in zip(self.entries, self.reasons):
            warps = f", warps {entry.warps:#b}" if entry.warps else ""
            lines.append(f"  delay rank {entry.rank} at {entry.site}: {entry.ns_lo}-{entry.ns_hi} ns"
                         f"{warps}, {entry.pct} % of tiles: {reason}")
        lines += [f"  no delay: {why}" for why in self.ahead]
        if not self.entries:
            lines.append("  no delay at all")
        if self.note:
            lines.append(f"  note: {self.note}")
        return lines


@dataclass
class GuidedPlan:
    """Every schedule of one (protocol, kernel, world size), from the model's verdict."""

    protocol: str
    kernel: str
    world_size: int
    safe: bool | None
    schedules: list[Schedule] = field(default_factory=list)
    calls: int = 1  # consecutive kernel calls the verdict covers (a campaign's iterations are calls)

    def to_dict(self) -> dict:
        return {"protocol": self.protocol, "kernel": self.kernel, "world_size": self.world_size,
                "safe": self.safe, "calls": self.calls, "schedules": [s.to_dict() for s in self.schedules]}

    def describe(self) -> str:
        calls = f"{self.calls} call{'' if self.calls == 1 else 's'}"
        verdict = {True: f"safe ({calls})", False: f"unsafe ({calls})",
                   None: f"unknown ({calls}, bound hit)"}[self.safe]
        head = f"guided schedules for {self.protocol} in {self.kernel}, W={self.world_size} (model: {verdict})"
        lines = [head]
        for schedule in self.schedules:
            lines += schedule.describe()
        if not self.schedules:
            lines.append("  the model finds no counterexample: nothing to aim at")
        return "\n".join(lines)

    def save(self, path: str) -> None:
        """Write the plan as JSON (``--guided`` saves it beside ``--output``)."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=1, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict) -> "GuidedPlan":
        """The plan :meth:`to_dict` wrote (a plan saved on one machine, run on another)."""
        schedules = [Schedule(**{**s, "entries": tuple(GuidedDelay(**e) for e in s["entries"]),
                                 **{k: tuple(s[k]) for k in ("reasons", "ahead", "order")}})
                     for s in data["schedules"]]
        return cls(data["protocol"], data["kernel"], data["world_size"], data["safe"], schedules,
                   data.get("calls", 1))


# ----- reading a witness trace ---------------------------------------------------------------------

def _actor(entry: dict) -> Actor:
    """The thread of a trace row, from its ``origin`` (:func:`syncverify.verdicts.check.execution_trace`)."""
    origin = entry["origin"]
    return Actor(origin["rank"], origin["role"], origin["thread"], origin["epoch"] or 0)


def _actor_of_origin(origin: dict | None) -> Actor | None:
    """The kernel thread a row's ``reads_from_origin`` names (None: the initial state or a host reset)."""
    if origin is None or origin["role"] == HOST_RESET:
        return None
    return Actor(origin["rank"], origin["role"], origin["thread"], origin["epoch"])


def _is_tile_store(entry: dict) -> bool:
    return entry["kind"] == "W" and entry["tile_data"]


def _is_tile_load(entry: dict) -> bool:
    return entry["kind"] == "R" and entry["tile_data"]


def _barrier(entry: dict) -> tuple[str, int] | None:
    """``("sync" | "arrive" | "red", id)`` of a barrier event of a trace, else None."""
    barrier = entry.get("barrier")
    return (barrier[0], barrier[1]) if barrier else None


def _held_at(trace: list[dict], writer: Actor, signallers: set[Actor]) -> set[int] | None:
    """The ids of the barriers at which a signalling thread of the writer's CTA waits before its
    signal write (``bar.sync``/``bar.red``; ``bar.arrive`` does not wait, PTX ISA "bar, barrier",
    so a warp-specialized signal warp that only arrives is not held back; nor is a barrier after
    the signal, such as the broadcast of a one-thread CAS loop's result). None when the trace
    shows no such thread."""
    held: set[int] | None = None
    for signaller in signallers:
        events = [e for e in trace if _actor(e) == signaller] if signaller.same_cta(writer) else []
        if events:
            held = held or set()
        waits: set[int] = set()
        for e in events:
            if e["kind"] == "W" and e["section"] == "signal":
                break
            if _is_tile_store(e):  # only a barrier after the tile store holds the signal back (a GEMM's
                waits = set()      # tl.dot barrier before it does not: the delay site is after it)
            barrier = _barrier(e)
            if barrier is not None and barrier[0] != "arrive":
                waits.add(barrier[1])
        held = held | waits if held is not None else held
    return held


def barrier_after_store(trace: list[dict], writer: Actor, signallers: set[Actor] = frozenset()) -> bool:
    """Whether the writer's thread reaches, after its tile store, a CTA barrier that its CTA's
    signal waits for: then the signal cannot be issued before the store, however the warps are
    delayed. Without the signaller's events in the trace, any barrier of a signal step counts."""
    held = _held_at(trace, writer, signallers)
    stored = False
    for e in trace:
        if _actor(e) != writer:
            continue
        stored = stored or _is_tile_store(e)
        barrier = _barrier(e)
        if stored and barrier is not None and e["section"] == "signal" and (held is None or barrier[1] in held):
            return True
    return False


def _warps_holding_the_signal(trace: list[dict], writer: Actor, signallers: set[Actor], num_warps: int) -> int:
    """The warps of the writer's CTA that a same-CTA signalling thread waits for at a barrier
    before it signals (``bar.sync`` over a warp subset, e.g. one warpgroup): delaying them would
    delay the signal too. A model thread stands for an equal share of the CTA's warps."""
    cta = [e for e in trace if _actor(e).same_cta(writer)]
    threads = 1 + max((e["thread"] for e in cta), default=0)
    held = _held_at(trace, writer, signallers) or set()
    if num_warps % threads or not held:
        return 0
    share = num_warps // threads
    mask = 0
    for e in cta:
        barrier = _barrier(e)
        if barrier is not None and barrier[1] in held and _actor(e) != writer:
            mask |= ((1 << share) - 1) << (e["thread"] * share)
    return mask


def late_and_ahead(trace: list[dict]) -> tuple[Actor | None, Actor | None, set[Actor], str]:
    """``(writer, reader, signallers, location)`` of a witness: the tile store that should have
    been seen (None when nothing writes the location), the tile load, and the signalling threads
    whose writes the reader's CTA polled."""
    reads = [e for e in trace if e["offending"] and _is_tile_load(e)]
    if not reads:
        return None, None, set(), ""
    read = reads[0]
    reader = _actor(read)
    stores = [e for e in trace if _is_tile_store(e) and e["location"] == read["location"]]
    # the late store is the one of the reader's own launch (a stale read saw an earlier one)
    this_launch = [e for e in stores if _actor(e).epoch == reader.epoch]
    offending = [e for e in stores if e["offending"]]
    writer = _actor((this_launch or offending or stores)[0]) if stores else None
    signallers: set[Actor] = set()
    polled = [e for e in trace if _actor(e).same_cta(reader) and e["kind"] == "R" and e["section"] == "wait"]
    for e in polled:
        signallers |= _release_chain(trace, _actor_of_origin(e["reads_from_origin"]), e["location"])
    return writer, reader, signallers, read["location"]


def _release_chain(trace: list[dict], source: Actor | None, location: str) -> set[Actor]:
    """The signalling thread a poll read from and, through the read-modify-writes before it on
    the same lock (each read of an ``atomic_add`` reads the previous one's write), every thread
    whose signal that value carries."""
    chain: set[Actor] = set()
    signalling = _signalling_roles()
    while source is not None and source.cta in signalling and source not in chain:
        chain.add(source)
        rmw = [e for e in trace if _actor(e) == source and e["location"] == location
               and e["kind"] == "R" and e["section"] == "signal"]
        source = _actor_of_origin(rmw[0]["reads_from_origin"]) if rmw else None
    return chain


def schedule_from_trace(kind: str, cause: str, explanation: str, trace: list[dict], *,
                        num_warps: int) -> Schedule:
    """The delays that make the execution ``trace`` likely on the hardware (module docstring)."""
    every = (1 << num_warps) - 1
    if kind == "hang":
        return Schedule(kind, cause, explanation, (), (), ("every thread: a wait whose target no write reaches hangs "
                                                           "in every schedule",), (), True,
                        "no timing is needed: the hang does not depend on the order")
    writer, reader, signallers, location = late_and_ahead(trace)
    if reader is None:
        return Schedule(kind, cause, explanation, (), (), (), (), False,
                        "the witness is between lock accesses, not a tile load: no tile store to mistime")
    if writer is None:
        return Schedule(kind, cause, explanation, (), (), (), (), False,
                        "the witness has no tile store to delay (the location is never written)")
    order = [f"{', '.join(sorted(map(str, signallers))) or 'nobody'} signals",
             f"{reader} passes its wait and loads {location}",
             f"{writer} stores {location} (too late)"]
    ahead = [f"{reader} (the reader: consumers poll and read at once)"]
    ahead += [f"{s} (its signal is the one the reader waited for)" for s in sorted(signallers, key=str)
              if not s.same_cta(writer)]
    if writer.cta not in _delayed_writers():
        return Schedule(kind, cause, explanation, (), (), tuple(ahead), tuple(order), False,
                        f"the late store is {writer}'s, and the kernels have no delay site before a {writer.cta}'s "
                        "stores")
    same_cta = any(s.same_cta(writer) for s in signallers)
    if same_cta and barrier_after_store(trace, writer, signallers):
        return Schedule(kind, cause, explanation, (), (), tuple(ahead), tuple(order), False,
                        f"{writer} reaches its CTA barrier after the store and before the signal the reader saw: "
                        "a delay before the store delays the signal too; only the memory system can make the "
                        "store visible after the signal (latent unless the hardware does)")
    if same_cta and any(s == writer for s in signallers):
        return Schedule(kind, cause, explanation, (), (), tuple(ahead), tuple(order), False,
                        f"the late store and the signal the reader saw are both {writer}'s: a delay reorders "
                        "threads, not one thread's own stores (only the memory system can: latent unless the "
                        "hardware reorders them)")
    if same_cta:
        warps = every & ~1 & ~_warps_holding_the_signal(trace, writer, signallers, num_warps) \
            if writer.thread else 1
        warps = warps or every & ~1
        entries = (GuidedDelay("before-store", writer.rank, *WARPS_LATE_NS, warps, 100),)
        reasons = (f"{writer} must store after its CTA's one-thread signal: its warps wait, warp 0 (the signal) "
                   "does not",)
    else:
        entries = (GuidedDelay("before-store", writer.rank, *CTA_LATE_NS, every, 100),
                   GuidedDelay("store-signal", writer.rank, *CTA_LATE_NS, 0, 100))
        reasons = (f"{writer}'s CTA must store after the reader passed its wait: every warp waits",
                   f"{writer}'s own signal must not come before the reader's wait passes"
                   + (" (the reader passed on an earlier launch's signal)" if any(s.epoch != writer.epoch
                                                                                 for s in signallers) else ""))
    return Schedule(kind, cause, explanation, entries, reasons, tuple(ahead), tuple(order), True)


# ----- from the model's verdict to schedules -----------------------------------------------------

def search_realizable(protocol: Any, *, kernel: str, world_size: int, kinds: set[str], num_warps: int,
                      epochs: tuple[int, ...] = (1, 2), timeout: float = 30.0,
                      **scenario_options: Any) -> dict[str, Schedule]:
    """Among every counterexample of ``kinds`` (one launch, then two: a lock left set by the
    previous launch is a counterexample of two), the first whose schedule a delay can force, per
    kind. Stops when each kind has one or the time is spent."""
    found: dict[str, Schedule] = {}
    deadline = time.monotonic() + timeout
    for n in epochs:
        scenario = build(protocol, ScenarioOptions(scenario=kernel, world_size=world_size, epochs=n,
                                                   **scenario_options))
        for part in scenario.parts or [scenario]:
            def judge(x, part=part) -> bool:
                for kind, sentence, evidence in classify(x):
                    # a wrong-data kind stands in for another: the same late store shows as any of them
                    takes = [k for k in kinds - set(found) if k == kind or {k, kind} <= DATA_KINDS]
                    if not takes:
                        continue
                    schedule = schedule_from_trace(kind, "", sentence, execution_trace(x, part, evidence),
                                                   num_warps=num_warps)
                    if schedule.realizable:
                        for k in takes:
                            found[k] = schedule
                return set(found) >= kinds

            left = deadline - time.monotonic()
            if left <= 0 or set(found) >= kinds:
                return found
            explore(part.program, timeout=left, on_execution=judge, keep=False)
    return found


def guided_plan(protocol: Any, *, kernel: str, world_size: int, num_warps: int = 8,
                timeout: float = 120.0, search_seconds: float = 10.0, **scenario_options: Any) -> GuidedPlan:
    """Check ``protocol`` in ``kernel``'s scenario at ``world_size`` and build one schedule per
    violation kind (the same scenario options as ``syncverify check``). Without ``epochs`` the
    model checks the calls a campaign makes (:func:`~syncverify.verdicts.check.check_calls`: one,
    then two when one is safe), since every iteration is a new call on the same locks. When the
    model's witness cannot be forced by delays, the other counterexamples of that kind (one launch,
    then two) are searched for ``search_seconds`` for one that can.

    >>> plan = guided_plan("fenced-release-acquire", kernel="all-reduce", world_size=2)
    >>> [(s.kind, s.entries[0].site, s.entries[0].warps) for s in plan.schedules]
    [('unwritten-read', 'before-store', 254), ('race', 'before-store', 254)]
    """
    if not hasattr(protocol, "signal"):
        protocol = load_protocol(protocol)
    checker = check_protocol if "epochs" in scenario_options else check_calls
    model = checker(protocol, scenario=kernel, world_size=world_size, timeout=timeout, **scenario_options)
    plan = GuidedPlan(protocol.name, kernel, world_size, model.safe, calls=model.scenario.options.epochs)
    own: dict[str, Schedule] = {}
    for kind, violation in model.violations.items():
        cause = violation.cause(violation.part or model.scenario).kind
        own[kind] = schedule_from_trace(kind, cause, violation.explanation, violation.trace(model.scenario),
                                        num_warps=num_warps)
    wanted = {kind for kind, schedule in own.items() if not schedule.realizable}
    options = {k: v for k, v in scenario_options.items() if k != "epochs"}
    others = search_realizable(protocol, kernel=kernel, world_size=world_size, kinds=wanted, num_warps=num_warps,
                               timeout=search_seconds, **options) if wanted and search_seconds > 0 else {}
    for kind, schedule in own.items():
        other = others.get(kind)
        if other is not None:
            named = "the same kind" if other.kind == kind else f"kind {other.kind} (the same late tile store)"
            schedule = Schedule(kind, schedule.cause, other.explanation, other.entries, other.reasons, other.ahead,
                                other.order, True, "the model's first witness cannot be forced by delays "
                                f"({schedule.note}); this is another counterexample, of {named}")
        elif wanted and kind in wanted and search_seconds > 0:
            schedule = Schedule(**{**schedule.__dict__, "note": schedule.note + "; no other counterexample of "
                                   f"this kind (one or two launches, {search_seconds:g} s of search) can be "
                                   "forced by delays either"})
        plan.schedules.append(schedule)
    return plan


# ----- running the schedules ---------------------------------------------------------------------

def reproduced(kind: str, counts: dict) -> bool:
    """Whether a campaign's bad-tile counts show violation ``kind``'s symptom."""
    return any(counts.get(name, 0) for name in SYMPTOMS.get(kind, ()))


def run_guided(protocol: Any, *, kernel: str = "all-reduce", world_size: int = 2, seconds: float = 10.0,
               compare_random: bool = True, plan: GuidedPlan | None = None, progress=None,
               **options: Any) -> dict:
    """Run each guided schedule of ``protocol`` until its first failure or ``seconds``, and random
    delays under the same budget; one row per violation kind.

    ``options`` are the other campaign options (``virtual_ranks``, ``interpret``, sizes, ...).
    Returns ``{"plan": GuidedPlan, "rows": [...], "guided": [CampaignResult], "random": CampaignResult}``.
    """
    num_warps = campaign_options(kernel=kernel, world_size=world_size, **{
        k: v for k, v in options.items() if k in ("interpret", "num_warps", "virtual_ranks")}).num_warps
    if plan is None:
        plan = guided_plan(protocol, kernel=kernel, world_size=world_size, num_warps=num_warps)
    common = dict(options, protocol=protocol, kernel=kernel, world_size=world_size, seconds=seconds,
                  stop_on_failure=True)
    common.pop("iterations", None)
    runs: dict[tuple, Any] = {}
    rows = []
    for schedule in plan.schedules:
        key = tuple(schedule.entries)
        if key not in runs:
            if schedule.entries:
                runs[key] = run_campaign(progress=progress, **dict(common, delays="guided",
                                                                   delay_table=tuple(e.to_dict() for e in key)))
            else:
                runs[key] = run_campaign(progress=progress, **dict(common, delays="none"))
        rows.append((schedule, runs[key]))
    random_result = None
    if compare_random and plan.schedules:
        random_result = run_campaign(progress=progress, **dict(common, delays="random"))
    table = []
    for schedule, result in rows:
        row = {"kind": schedule.kind, "cause": schedule.cause, "realizable": schedule.realizable,
               **_outcome("guided", schedule.kind, result)}
        if random_result is not None:
            row.update(_outcome("random", schedule.kind, random_result))
        table.append(row)
    return {"plan": plan, "rows": table, "guided": [r for _s, r in rows], "random": random_result}


def _outcome(prefix: str, kind: str, result) -> dict:
    """One run's columns for violation ``kind``: the first failure counts only if it shows the
    kind's symptom (a run stops at its first bad block, whatever the class)."""
    f = result.first_failure
    shown = reproduced(kind, result.counts)
    first = f if f is not None and f["kind"] in SYMPTOMS.get(kind, ()) else None
    return {
        f"{prefix}_reproduced": shown,
        f"{prefix}_iterations": result.iterations,
        f"{prefix}_first_failure_iteration": None if first is None else first["iteration"],
        f"{prefix}_ttf_s": None if first is None else result.time_to_first_failure,
        f"{prefix}_counts": dict(result.counts),
        f"{prefix}_seconds": round(result.seconds, 3),
        f"{prefix}_stopped": result.stopped,
    }


def render_rows(rows: list[dict]) -> str:
    """The per-kind table of :func:`run_guided` as text."""
    head = (f"{'violation':15} {'cause':22} {'guided':>8} {'it':>7} {'ttf s':>9}   {'random':>8} {'it':>7} "
            f"{'ttf s':>9}")
    lines = [head]

    def cell(row, prefix):
        if f"{prefix}_reproduced" not in row:
            return f"{'-':>8} {'-':>7} {'-':>9}"
        ttf = row[f"{prefix}_ttf_s"]
        first = row[f"{prefix}_first_failure_iteration"]
        return (f"{'yes' if row[f'{prefix}_reproduced'] else 'no':>8} "
                f"{first if first is not None else row[f'{prefix}_iterations']:>7} "
                f"{'-' if ttf is None else f'{ttf:.4f}':>9}")

    for row in rows:
        lines.append(f"{row['kind']:15} {row['cause']:22} {cell(row, 'guided')}   {cell(row, 'random')}")
    lines.append("(it: the first failing iteration, or the iterations run when nothing failed)")
    return "\n".join(lines)
