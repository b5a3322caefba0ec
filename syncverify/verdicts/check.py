"""Verdicts on a protocol in a scenario: races, unwritten reads, stale reads and hangs.

For every consistent execution of the scenario's program (see :mod:`syncverify.explore.driver`):

* ``hang``: some thread never terminates (a poll that reads its lock's last value and still
  cannot exit, or a CTA barrier another thread never reaches);
* for each tile-data read (a ghost read, :mod:`syncverify.program`) of epoch ``k``, the writes it
  *could see*: those not after it in happens-before (causality) and not hidden by a later write
  that happens before it. If the poisoned initial value is among them: ``unwritten-read`` (the
  ``C=0.0`` symptom); a write of an earlier epoch: ``stale-read``;
* ``race``: conflicting accesses, not morally strong, unordered by causality (PTX's data race;
  :func:`syncverify.model.ptx.data_races`), on tile data or on the locks themselves.

Each kind keeps one witness execution (the first one found with the fewest events).
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

import networkx as nx

from syncverify.model import ptx
from syncverify.model.events import Execution
from syncverify.explore.driver import (
    DEFAULT_MAX_EXECUTIONS,
    DEFAULT_MAX_STEPS,
    DEFAULT_PROGRESS_INTERVAL,
    LimitHit,
    Progress,
    candidate_executions,
    explore,
)
from syncverify.explore.bounds import Clock, LimitHit
from syncverify.explore.residency import Deadlock, Residency, find_deadlock
from syncverify.explore.location_choices import is_execution
from syncverify.errors import ScenarioError
from syncverify.program import Phase
from syncverify.protocols import load_protocol
from syncverify.scenarios.build import DEFAULT_PUSH, Scenario, ScenarioOptions, build, push_option
from syncverify.validation import did_you_mean
from syncverify.verdicts.causes import Cause, cause
from syncverify.verdicts.kinds import possible_kinds


@dataclass
class Violation:
    """One kind of violation with its witness execution and the offending pair of events."""

    kind: str
    explanation: str
    execution: Execution
    evidence: list[tuple[int, int]]
    #: The stage or call program the witness is an execution of, when the scenario was checked by parts.
    part: Scenario | None = None
    _cause: object = field(default=None, repr=False, compare=False)

    def trace(self, scenario: Scenario) -> list[dict]:
        """The witness's events in a causality-respecting order, as plain dicts."""
        return execution_trace(self.execution, self.part or scenario, self.evidence)

    def cause(self, scenario: Scenario):
        """Why it happens: the first missing link of the protocol's intended chain
        (:func:`syncverify.verdicts.causes.cause`), computed once. A failure there is reported as an
        ``unexplained`` cause rather than raised: it must not hide the verdict."""
        if self._cause is None:
            try:
                self._cause = cause(self, scenario)
            except Exception as error:  # noqa: BLE001 -- the verdict stands without its cause
                self._cause = Cause("unexplained", f"no cause could be computed ({type(error).__name__}: {error})")
        return self._cause


@dataclass
class CheckResult:
    """The verdict: ``safe`` is True, False, or None (unknown: a bound hit or sampling)."""

    scenario: Scenario
    violations: dict[str, Violation] = field(default_factory=dict)
    executions: int = 0
    candidates: int = 0
    seconds: float = 0.0
    limit_hit: str | None = None
    limit_detail: str = ""
    sampled: int | None = None  # number of samples, in --sample mode
    seed: int | None = None  # the seed of --sample mode
    complete: int = 0  # executions in which no thread hangs
    stages: list[tuple[str, int, float]] = field(default_factory=list)  # (stage, executions, seconds) when split
    stopped_at_first: bool = False  # ``first=True`` stopped the search at its first violation
    every_kind: bool = False  # stopped once every kind the program can show was found (verdicts.kinds)
    stage_kinds: dict[str, int] = field(default_factory=dict)  # kinds found by earlier stages (progress)
    deadlock: Deadlock | None = None  # with --resident: the residency deadlock found (None: none)

    @property
    def safe(self) -> bool | None:
        if self.violations:
            return False
        if self.limit_hit or self.sampled is not None:
            return None
        return True

    def to_json(self) -> dict:
        opts = self.scenario.options
        return {
            "protocol": self.scenario.protocol.name,
            "scenario": opts.scenario,
            "world_size": opts.world_size,
            "tiles": opts.tiles,
            "epochs": opts.epochs,
            "threads_per_cta": opts.threads_per_cta,
            "production": opts.production,
            "distribution": opts.distribution,
            "reset": opts.reset,
            "safe": self.safe,
            "violations": [
                {"kind": v.kind, "explanation": v.explanation, "cause": v.cause(self.scenario).to_json(),
                 "trace": v.trace(self.scenario)}
                for v in self.violations.values()
            ],
            "executions": self.executions,
            "seconds": round(self.seconds, 3),
            "limit": self.limit_hit,
            "sampled": self.sampled,
            "seed": self.seed,
            "notes": self.scenario.notes,
            "push": getattr(self.scenario.push_protocol, "name", None),
            "resident": opts.resident,
            "resident_order": opts.resident_order if opts.resident is not None else None,
            "stages": [{"stage": name, "executions": n, "seconds": round(seconds, 3)}
                       for name, n, seconds in self.stages],
            "every_kind": self.every_kind,
        }


def _epoch_of(x: Execution, eid: int) -> int | None:
    """The launch epoch of event ``eid`` (None: a host reset, or a program without launches)."""
    phase = x.events[eid].phase
    return phase.launch_epoch if isinstance(phase, Phase) else None


def _role(x: Execution, eid: int) -> str:
    e = x.events[eid]
    return "the initial state" if e.is_init else str(x.roles[e.thread] if x.roles else x.thread_names[e.thread])


def classify(x: Execution) -> list[tuple[str, str, list[tuple[int, int]]]]:
    """Every violation kind ``x`` shows, each with one sentence and its evidence pairs."""
    found: list[tuple[str, str, list[tuple[int, int]]]] = []
    # Spinning threads first: a thread blocked at a CTA barrier is usually waiting for one of them,
    # and the first hang found is the one a counterexample explains.
    for t, reason in sorted(x.stuck.items(), key=lambda item: item[1][0] != "spin"):
        role = x.roles[t] if x.roles else x.thread_names[t]
        if reason[0] == "spin":
            seen = ", ".join(f"{loc}={v}" for loc, v in reason[1])
            found.append(("hang", f"{role} waits forever: its poll keeps reading the final value ({seen}) "
                          "and that value never satisfies the wait", []))
        elif reason[0] == "mbarrier":
            found.append(("hang", f"{role} waits forever in mbarrier.try_wait: {reason[2]}", []))
        else:
            found.append(("hang", f"{role} waits forever at a CTA barrier that another thread of its CTA never reaches", []))
    cause = ptx.causality(x)
    events = x.events
    writes_by_loc: dict[str, list[int]] = {}
    for e in events:
        if e.is_write and (e.ghost or e.is_init):
            writes_by_loc.setdefault(e.loc, []).append(e.eid)  # type: ignore[arg-type]
    for r in events:
        if not (r.is_read and r.ghost):
            continue
        epoch = _epoch_of(x, r.eid)
        candidates = writes_by_loc.get(r.loc, [])  # type: ignore[arg-type]
        visible = []
        for w in candidates:
            if (r.eid, w) in cause:
                continue  # the write happens after the read
            hidden = any(w2 != w and (events[w].is_init or (w, w2) in cause) and (w2, r.eid) in cause
                         for w2 in candidates if not events[w2].is_init)
            if not hidden:
                visible.append(w)
        for w in visible:
            we = events[w]
            if we.is_init:
                found.append(("unwritten-read",
                              f"{_role(x, r.eid)} reads {r.loc} in epoch {epoch}, but no write of it happens before "
                              "the read: it can read the poisoned initial value (the C=0.0 symptom)", [(w, r.eid)]))
            elif epoch is not None and we.value is not None and we.value - 1 < epoch:
                found.append(("stale-read",
                              f"{_role(x, r.eid)} reads {r.loc} in epoch {epoch}, but the epoch-{epoch} write is not "
                              f"ordered before the read: it can read the value {_role(x, w)} wrote in epoch {we.value - 1}",
                              [(w, r.eid)]))
    for a, b in ptx.data_races(x):
        ea, eb = events[a], events[b]
        found.append(("race", f"{_role(x, a)} ({ea.describe()}) and {_role(x, b)} ({eb.describe()}) conflict on "
                      f"{ea.loc}, are not morally strong, and neither happens before the other", [(a, b)]))
    return found


def check(scenario: Scenario, *, max_executions: int = DEFAULT_MAX_EXECUTIONS,
          timeout: float | None = None, progress: Callable[[Progress], None] | None = None,
          progress_interval: float = DEFAULT_PROGRESS_INTERVAL, first: bool = False,
          max_steps: int = DEFAULT_MAX_STEPS, without: frozenset[str] = frozenset()) -> CheckResult:
    """Explore every execution of ``scenario`` and collect one witness per violation kind.

    A scenario split into stage or call programs (``scenario.parts``; :func:`syncverify.scenarios.build.call_parts`
    for calls) is checked part by part, in order, and the verdicts are joined (:func:`syncverify.scenarios.build.stage_parts` says why that is
    exact); a later stage's violations count only if every earlier stage has an execution in
    which no thread hangs (else the later stage never runs).

    Parameters
    ----------
    max_executions, timeout, max_steps
        Bounds (``max_steps``: instructions one thread may run on one path): hitting one answers unknown (``safe is None``) with ``limit_hit`` set.
    progress, progress_interval
        Called with a :class:`~syncverify.explore.driver.Progress` (executions, candidates, violations
        found so far by kind, seconds) at most every ``progress_interval`` seconds.
    first
        Stop at the first execution that shows a violation; the result then holds that one
        counterexample (its first kind), and ``stopped_at_first`` is set.
    without
        The explorer's prunings not to make (:data:`syncverify.explore.driver.PRUNINGS`; the
        exactness tests).
    """
    if scenario.parts:
        return _check_parts(scenario, max_executions=max_executions, timeout=timeout, progress=progress,
                            progress_interval=progress_interval, first=first, max_steps=max_steps,
                            without=without)
    result = CheckResult(scenario)
    seen_kinds: Counter[str] = Counter()  # executions that showed each kind, for progress
    # Once every kind the program can show has a witness and some execution ends without a hang
    # (later stages and calls count only then), no execution can change the verdict (verdicts.kinds).
    possible = None if "every-kind" in without else possible_kinds(scenario.program)
    ended = [False]

    def judge(x: Execution) -> bool:
        found = classify(x)
        seen_kinds.update({kind for kind, _sentence, _evidence in found})
        for kind, sentence, evidence in found[:1] if first else found:
            current = result.violations.get(kind)
            if current is None or len(x.events) < len(current.execution.events):
                result.violations[kind] = Violation(kind, sentence, x, evidence)
        ended[0] = ended[0] or x.is_complete
        if first:
            return bool(found)
        result.every_kind = possible is not None and ended[0] and possible <= result.violations.keys()
        return result.every_kind

    def report(p: Progress) -> None:
        progress(replace(p, violations=dict(seen_kinds)))  # type: ignore[misc]

    explored = explore(scenario.program, max_executions=max_executions, timeout=timeout, max_steps=max_steps,
                       on_execution=judge, keep=False, progress=report if progress is not None else None,
                       progress_interval=progress_interval, without=without)
    result.stopped_at_first = explored.stopped_early and first
    result.executions = explored.complete_count + explored.hang_count
    result.complete = explored.complete_count
    result.candidates = explored.candidates
    result.seconds = explored.seconds
    result.limit_hit, result.limit_detail = explored.limit_hit, explored.limit_detail
    if result.limit_hit is None and result.executions == 0:
        # A program with no consistent execution satisfies every property vacuously: never "safe".
        result.limit_hit = "no-executions"
        result.limit_detail = ("the model found no consistent execution of this scenario, so nothing "
                               "was verified (a scenario or model bug: please report it)")
    if scenario.options.resident is not None and result.limit_hit is None and not (first and result.violations):
        left = None if timeout is None else max(timeout - result.seconds, 0.001)
        with_residency(result, scenario, timeout=left, max_executions=max_executions, max_steps=max_steps)
    return result


def with_residency(result: CheckResult, scenario: Scenario, *, timeout: float | None, max_executions: int,
                   max_steps: int) -> None:
    """Add to ``result`` the hang residency can cause (:mod:`syncverify.explore.residency`): CTAs
    that never become resident while every slot is held by a CTA that waits forever.

    A hang the fair model already finds stands as it is (it hangs with any capacity); otherwise a
    residency deadlock is the ``hang`` violation, its explanation naming the resident CTAs, what
    each waits on and which non-resident CTA would release it."""
    opts = scenario.options
    residency = Residency(opts.resident, opts.resident_order, opts.resident_sms,  # type: ignore[arg-type]
                          opts.resident_occupancy)
    start = time.monotonic()
    try:
        found = find_deadlock(scenario.program, residency, clock=Clock(timeout),
                              explore_options=dict(max_executions=max_executions, max_steps=max_steps))
    except LimitHit as hit:
        result.limit_hit, result.limit_detail = hit.limit, f"residency: {hit.detail}"
        return
    finally:
        result.seconds += time.monotonic() - start
    result.deadlock = found
    if found is not None and "hang" not in result.violations:
        why = Cause("residency", f"{found.words()}. Fix: keep the CTAs that wait from holding every slot "
                    "(grid at most the resident capacity, or producers resident first by a stream or host "
                    "order, not by blockIdx), or launch cooperatively", link="residency")
        result.violations["hang"] = Violation("hang", found.words(), found.execution, [], _cause=why)


def check_protocol(protocol, *, scenario: str = "all-reduce", world_size: int = 2, timeout: float | None = 600.0,
                   max_executions: int = DEFAULT_MAX_EXECUTIONS, first: bool = False, **options) -> CheckResult:
    """Check ``protocol`` (a built-in name, a ``.toml`` path or a ``Protocol``) in a scenario
    (``first``: stop at the first violation, as :func:`check`'s).

    ``options`` are the other :class:`~syncverify.scenarios.build.ScenarioOptions` fields (``epochs``,
    ``tiles``, ``reset``, ``push``, ...). ``result.safe`` is True, False, or None (unknown: a
    bound was hit).

    >>> check_protocol("epoch-flag", scenario="all-scatter", world_size=3).safe
    True
    """
    fields = set(ScenarioOptions.__dataclass_fields__) - {"scenario", "world_size"}
    for name in options:  # one line with the closest name, not a TypeError from ScenarioOptions
        if name not in fields:
            raise ScenarioError(f"unknown keyword {name}={options[name]!r}{did_you_mean(name, sorted(fields))}; "
                                f"known: scenario, world_size, timeout, max_executions, first, {', '.join(sorted(fields))}")
    if options.get("push", DEFAULT_PUSH) != DEFAULT_PUSH:  # another push protocol: refused where it
        push_option(scenario, options["push"])  # changes nothing, and loaded, as on the command line
    if not hasattr(protocol, "signal"):
        protocol = load_protocol(protocol)
    built = build(protocol, ScenarioOptions(scenario=scenario, world_size=world_size, **options))
    return check(built, max_executions=max_executions, timeout=timeout, first=first)


#: Calls a stress campaign makes on the same locks and buffers that the model checks: each
#: iteration is a new call, and state (locks, workspaces) persists from one to the next unless a
#: reset restores it, so one call is not what the hardware runs. Two calls show every bug of
#: state carried from one call into the next (a stale flag, a reset racing the next launch).
CAMPAIGN_CALLS = 2


def check_calls(protocol, *, calls: int = CAMPAIGN_CALLS, scenario: str = "all-reduce", world_size: int = 2,
                timeout: float | None = 600.0, **options) -> CheckResult:
    """:func:`check_protocol` of ``calls`` consecutive calls (``epochs``): the verdict beside a
    stress campaign, which calls the kernel again and again on the same locks.

    One call is checked first (cheap; a violation there is a violation of every campaign); when it
    is safe, ``calls`` calls are checked in what is left of ``timeout``. The result is the one
    that decides: unsafe at one call, or the ``calls``-call check (safe, unsafe, or unknown when it
    hit its bound; never safe because one call was). :func:`calls_words` says it in words.

    >>> result = check_calls("iris-465-hardcoded-lock-value")
    >>> result.safe, result.scenario.options.epochs, sorted(result.violations)
    (False, 2, ['race', 'stale-read'])
    """
    start = time.monotonic()
    one = check_protocol(protocol, scenario=scenario, world_size=world_size, timeout=timeout, epochs=1,
                         **options)
    if calls <= 1 or one.safe is not True:
        return one
    left = None if timeout is None else max(timeout - (time.monotonic() - start), 0.001)
    return check_protocol(protocol, scenario=scenario, world_size=world_size, timeout=left, epochs=calls,
                          **options)


def calls_words(result: CheckResult) -> str:
    """A verdict with the calls it covers: ``safe (2 calls)``, ``unsafe (stale-read; 2 calls)``,
    ``unknown (2 calls, bound hit)``.

    >>> calls_words(check_calls("epoch-flag"))
    'safe (2 calls)'
    """
    calls = result.scenario.options.epochs
    counted = f"{calls} call{'' if calls == 1 else 's'}"
    if result.safe is None:
        return f"unknown ({counted}, bound hit)"
    if result.safe:
        return f"safe ({counted})"
    return f"unsafe ({', '.join(result.violations)}; {counted})"


def _check_parts(scenario: Scenario, *, max_executions: int, timeout: float | None,
                 progress: Callable[[Progress], None] | None, progress_interval: float, first: bool,
                 max_steps: int = DEFAULT_MAX_STEPS, without: frozenset[str] = frozenset()) -> CheckResult:
    """:func:`check` of a scenario split into stage programs, joined; see :func:`check`."""
    result = CheckResult(scenario)
    start = time.monotonic()
    reachable = True
    complete: list[int] = []  # each part's executions without a hang
    for index, part in enumerate(scenario.parts):
        if not reachable:  # its violations would not count: an earlier part has no execution without a hang
            result.stages.append((f"{part.stage} (not run: every execution of an earlier part hangs)", 0, 0.0))
            complete.append(0)
            continue
        left = None if timeout is None else max(timeout - (time.monotonic() - start), 0.001)
        if left is not None and part.call is not None:
            # Call programs share what is left fairly: a later call's violations are as much the
            # answer as the first call's, and one call using it all would leave them unsearched.
            left /= len(scenario.parts) - index
        before = (result.executions, result.candidates, dict(result.stage_kinds))

        def report(p: Progress, before=before) -> None:  # counts so far across the stages
            kinds = Counter(before[2]) + Counter(p.violations)
            progress(replace(p, executions=p.executions + before[0], candidates=p.candidates + before[1],
                             seconds=time.monotonic() - start, violations=dict(kinds)))

        sub = check(part, max_executions=max_executions, timeout=left, first=first, max_steps=max_steps,
                    progress=report if progress is not None else None, progress_interval=progress_interval,
                    without=without)
        result.executions += sub.executions
        result.candidates += sub.candidates
        result.every_kind = result.every_kind or sub.every_kind
        result.stages.append((part.stage, sub.executions, sub.seconds))
        if reachable:
            for kind, violation in sub.violations.items():
                violation.part = violation.part or part  # a call program inside a stage program: the call's
                result.violations.setdefault(kind, violation)
                result.stage_kinds[kind] = result.stage_kinds.get(kind, 0) + 1
        if sub.limit_hit and not result.limit_hit:
            result.limit_hit, result.limit_detail = sub.limit_hit, sub.limit_detail
        reachable = reachable and sub.complete > 0
        complete.append(sub.complete)
        if "hang" in sub.violations and scenario.options.epochs > 1 and part.call is None:
            # a hanging launch stops the later launches of every stage: the split cannot see that
            # (a call split can: a call's hang only keeps the later calls from running, and they
            # count only if an earlier call program has an execution without one): the whole
            # program, call by call where that split is exact (build.call_parts)
            whole = replace(scenario, parts=scenario.whole_parts, whole_parts=[])
            left = None if timeout is None else max(timeout - (time.monotonic() - start), 0.001)
            result = check(whole, max_executions=max_executions, timeout=left, first=first, max_steps=max_steps,
                           progress=progress, progress_interval=progress_interval, without=without)
            result.stages.append(("whole program: a stage can hang across epochs", result.executions,
                                  result.seconds))
            return result
        if first and result.violations:
            result.stopped_at_first = True
            break
    # An execution of the whole without a hang is one of each part (the splits' arguments): a
    # nested split (all-scatter's stages, each split by call) is "reachable" for the parts after
    # it only then. (Left at 0, a stage split into calls hid every push violation.)
    result.complete = math.prod(complete) if reachable else 0
    result.seconds = time.monotonic() - start
    return result


def sample(scenario: Scenario, *, samples: int, seed: int, timeout: float | None = None,
           max_steps: int = DEFAULT_MAX_STEPS) -> CheckResult:
    """Check ``samples`` randomly chosen candidate executions (seeded, replayable).

    Violations found are real (their executions are consistent); finding none is not a proof.
    """
    rng = random.Random(seed)
    result = CheckResult(scenario, sampled=0, seed=seed)
    clock = Clock(timeout if timeout else None)
    pool: list = []
    try:
        for item in candidate_executions(scenario.program, clock=clock, max_steps=max_steps):
            result.candidates += 1
            # reservoir sampling over the candidate stream
            if len(pool) < samples:
                pool.append(item)
            else:
                j = rng.randrange(result.candidates)
                if j < samples:
                    pool[j] = item
            clock.check("while sampling")
    except LimitHit as hit:
        result.limit_hit, result.limit_detail = hit.limit, hit.detail
    for skeleton, x in pool:
        result.sampled += 1  # type: ignore[operator]
        if not is_execution(skeleton, x, scenario.program):
            continue
        result.executions += 1
        for kind, sentence, evidence in classify(x):
            result.violations.setdefault(kind, Violation(kind, sentence, x, evidence))
    result.seconds = clock.elapsed()
    return result


def execution_trace(x: Execution, scenario: Scenario, evidence: list[tuple[int, int]]) -> list[dict]:
    """The events of ``x`` (init writes left out) in an order consistent with causality.

    Each row names its thread twice: as text (``rank``, ``cta``, ``thread``, ``role``) and as the
    fields of its :class:`~syncverify.program.ThreadOrigin` (``origin``); ``reads_from_origin`` is
    the origin of the write a read reads from (None: the initial state); ``kind`` is the event's
    (``R``, ``W``, ``F``, ``B``), ``tile_data`` whether it is a tile access, ``section`` the
    protocol section of its step (None: a tile access or a host reset), ``barrier`` a barrier
    event's ``[kind, id]``: a reader (guided stress) need not parse the text.
    """
    order_graph = nx.DiGraph()
    ids = [e.eid for e in x.events if not e.is_init]
    order_graph.add_nodes_from(ids)
    base = ptx.base_causality(x) | ptx.rf(x)
    order_graph.add_edges_from((a, b) for a, b in base if a in order_graph and b in order_graph and a != b)
    try:
        ordered = list(nx.lexicographical_topological_sort(order_graph))
    except nx.NetworkXUnfeasible:
        ordered = sorted(ids, key=lambda i: (x.events[i].thread, x.events[i].index))
    hot = {e for pair in evidence for e in pair}
    rows = []
    for eid in ordered:
        e = x.events[eid]
        info = scenario.threads[e.thread]
        row = {
            "rank": info.rank, "cta": info.cta, "thread": info.thread, "role": info.trace_name,
            "step": e.label, "event": e.describe() if not e.ghost else f"{'R' if e.is_read else 'W'} {e.loc}",
            "location": e.loc, "value": e.value, "reads_from": None, "offending": eid in hot,
            "epoch": _epoch_of(x, eid) if not e.is_init else None,
            "origin": asdict(info), "reads_from_origin": None, "kind": e.kind, "tile_data": e.ghost,
            "section": getattr(scenario.step_of(e.label), "section", None),
            "barrier": [e.sem, e.barrier_id] if e.is_barrier else None,
        }
        if row["epoch"] is None:
            row["epoch"] = info.epoch
        source = None
        if e.is_read and not e.ghost and eid in x.rf:
            source = x.rf[eid]
        if e.is_read and e.ghost:
            src = [a for a, b in evidence if b == eid]
            if src:
                source = src[0]
                row["value"] = x.events[src[0]].value
        if source is not None:
            row["reads_from"] = _role(x, source)
            if not x.events[source].is_init:
                row["reads_from_origin"] = asdict(scenario.threads[x.events[source].thread])
        rows.append(row)
    return rows + _spin_rows(x, scenario)


def _spin_rows(x: Execution, scenario: Scenario) -> list[dict]:
    """One row per lock a hanging thread spins on: its poll, and the value it keeps reading.

    The explorer cuts a spin's failed iterations (their reads change no register that lives on),
    so the execution holds no read event for them; the trace still shows the poll that hangs,
    with the step that made it, so a cause that names that poll names a row of its trace."""
    rows = []
    for t, reason in sorted(x.stuck.items()):
        if reason[0] != "spin":
            continue
        info = scenario.threads[t]
        labels: dict[str, str] = {}  # each lock's first labelled access: the poll (a later one is a one-off)
        for ins in scenario.program.threads[t].instructions:
            if getattr(ins, "loc", None) is not None and getattr(ins, "label", ""):
                labels.setdefault(ins.loc, ins.label)
        for loc, seen in reason[1]:
            rows.append({"rank": info.rank, "cta": info.cta, "thread": info.thread, "role": info.role,
                         "step": labels.get(loc, f"poll {loc}"), "event": f"R {loc}={seen} (spins forever)",
                         "location": loc, "value": seen, "reads_from": None, "offending": True,
                         "epoch": info.epoch, "origin": asdict(info), "reads_from_origin": None, "kind": "R",
                         "tile_data": False, "section": None, "barrier": None})
    return rows
