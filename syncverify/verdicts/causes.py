"""Why a violation happens: the first missing link of the happens-before chain the protocol intends.

:func:`syncverify.verdicts.check.classify` names the symptom (a read that can see the poisoned initial
value, two accesses unordered and not morally strong, a poll that never exits). This module names
the cause, computed from the model's own relations (:mod:`syncverify.model.ptx`) on the witness
execution. For a tile write ``W`` and the read ``R`` that should have seen it, the chain every
protocol here intends is::

    W (tile store) -> [bar.sync] -> [release fence] -> S (signal write) -(rf)-> P (poll read)
      -> [acquire read or fence] -> [bar.sync] -> R (tile load)

and its links, in order, as the model states them:

1. ``store-before-signal``: ``(W, S) in cause-base`` (program order on one thread, or a CTA barrier);
2. ``release``: a release pattern ``X -> S`` with ``W`` before ``X`` (a release write or fence);
3. ``observation``: ``(S, P) in observation`` (every rf hop, through read-modify-writes, morally strong);
4. ``acquire``: an acquire pattern ``P -> Y`` (an acquire read or a fence after ``P``);
5. ``sync``: ``(X, Y) in sync`` (the two patterns morally strong: scopes that include each other);
6. ``load-after-acquire``: ``(Y, R) in cause-base`` (program order, or a CTA barrier after ``Y``).

Every pair of a signal write ``S`` of ``W``'s CTA and a poll read ``P`` of ``R``'s CTA that ``P``
reads from (``(rf | rmw)+``) is a candidate chain; the cause is the first broken link of the chain
that gets furthest (the one the protocol's author meant). Races on a lock, resets that race a
signal, and hangs (a poll target no write reaches) have causes of their own. A store of a later
call that races with a load of an earlier one (a staging slot reused too early) needs the other
chain, from the load back to the store (a "done" signal the producer waits for): ``early-reuse``.

Choices: a chain's links are judged on the witness execution only (another execution may break
another link first); who an event's thread is, which protocol step made it and which lock it
touches are read from the scenario (:class:`~syncverify.program.ThreadOrigin`,
:attr:`~syncverify.scenarios.build.Scenario.steps`, :attr:`~syncverify.scenarios.build.Scenario.locations`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from syncverify.model import ptx
from syncverify.model.events import Event, Execution
from syncverify.model.relations import plus
from syncverify.program import Phase, Store, ThreadOrigin
from syncverify.scenarios.build import StepOrigin, stages

__all__ = ["Cause", "StepRef", "cause", "CAUSE_KINDS"]

#: The kinds of cause, most specific first in the module's docstring order.
CAUSE_KINDS = (
    "no-cta-barrier",         # only the signalling thread's tile store is ordered before the signal
    "no-release",             # the signal is strong but no release write or fence precedes it
    "not-morally-strong",     # the write or read that should synchronize is weak
    "scope",                  # a release/acquire whose scope does not include the other thread
    "no-acquire",             # the poll is strong but no acquire read or fence follows it
    "consumer-not-ordered",   # the acquire ran on one thread and no bar.sync follows it
    "reset-race",             # a host reset of a lock races with the kernel
    "stale-signal",           # an earlier call's signal, never reset, satisfies this call's wait
    "early-reuse",            # a later call's store is not ordered after an earlier call's load
    "unreachable-target",     # a poll waits for a value no write brings
    "barrier-hang",           # a CTA barrier another thread never reaches
    "wait-without-signal",    # the wait exits without reading the producer's signal
    "never-written",          # no write of the location exists in the scenario
    "residency",              # spinning CTAs hold every slot; the CTA that would release them never runs
    "mixed-size",             # the write and the read that should synchronize access different bytes
    "stream-order",           # a stream operation runs after (or before) the kernel that waits for it (or writes it)
    "unexplained",            # every link holds on the witness: a bug of this module
)

#: The sections whose steps a cause names: the ``before_store`` and ``after_load`` steps are not
#: links of the chain (their events are named by their label).
_NAMED_SECTIONS = ("signal", "wait")
_SEM = {"weak": "weak", "relaxed": "relaxed", "release": "release", "acquire": "acquire",
        "acq_rel": "acq_rel", "sc": "sc"}


@dataclass(frozen=True)
class StepRef:
    """A protocol step a cause names: ``name`` as in the trace (``"signal step 2"``), its ``op``,
    the protocol's name and, when the protocol came from a file, ``where`` (``path:line``)."""

    name: str
    op: str
    protocol: str
    where: str | None = None

    def __str__(self) -> str:
        at = f" ({self.where})" if self.where else ""
        return f"{self.protocol} {self.name} ({self.op}){at}"

    def to_json(self) -> dict:
        return {"step": self.name, "op": self.op, "protocol": self.protocol, "where": self.where}


@dataclass(frozen=True)
class Cause:
    """The cause of one violation: ``kind`` (one of :data:`CAUSE_KINDS`), one paragraph of
    ``text``, the protocol ``steps`` it blames, the chain ``link`` that is missing, and the
    ``evidence`` event pairs (ids of the witness execution)."""

    kind: str
    text: str
    steps: tuple[StepRef, ...] = ()
    link: str = ""
    evidence: tuple[tuple[int, int], ...] = ()
    details: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"kind": self.kind, "text": self.text, "link": self.link,
                "steps": [s.to_json() for s in self.steps],
                "evidence": [list(p) for p in self.evidence], "details": self.details}


# ----- naming events ----------------------------------------------------------------------------

class _Names:
    """Who an event is and which protocol step made it, in the violation's scenario."""

    def __init__(self, x: Execution, scenario) -> None:
        self.x, self.scenario = x, scenario
        self.stage_protocol = stages(scenario.options.scenario)

    def origin(self, e: Event) -> ThreadOrigin:
        return self.scenario.threads[e.thread]

    def who(self, e: Event) -> str:
        if e.is_init:
            return "the initial state"
        return _who(self.origin(e))

    def rank(self, e: Event) -> int:
        return self.origin(e).rank

    def protocol_of(self, stage: str):
        which = self.stage_protocol.get(stage or "", "protocol")
        return self.scenario.push_protocol if which == "push" else self.scenario.protocol

    def step_origin(self, e: Event) -> StepOrigin | None:
        """The signal or wait step behind ``e`` (None: a tile access, a host reset, another section)."""
        origin = self.scenario.step_of(e.label)
        return origin if origin is not None and origin.section in _NAMED_SECTIONS else None

    def step(self, e: Event) -> StepRef | None:
        origin = self.step_origin(e)
        if origin is None:
            return None
        return StepRef(origin.name, origin.op, origin.protocol, origin.where)

    def protocol_step(self, e: Event):
        """The :class:`~syncverify.protocols.model.Step` behind ``e`` (or None)."""
        origin = self.step_origin(e)
        return None if origin is None else origin.step

    def what(self, e: Event) -> str:
        """``signal step 2 (atomic_add, W.rel.sys ready.r0.t0=1)`` or the tile access."""
        ref = self.step(e)
        name = f"{ref.name} ({ref.op})" if ref else (e.label or "event")
        return f"{name}, {e.describe()}"


def _refs(names: _Names, *events: Event) -> tuple[StepRef, ...]:
    seen: dict[str, StepRef] = {}
    for e in events:
        ref = names.step(e)
        if ref is not None:
            seen.setdefault(str(ref), ref)
    return tuple(seen.values())


def _who(origin: ThreadOrigin, *, cta: bool = False) -> str:
    """``rank 1's producer (thread 0, epoch 0)`` (``cta``: ``rank 1's producer``), or a host
    reset's trace name."""
    if origin.is_host_reset:
        return origin.trace_name
    return f"rank {origin.rank}'s {origin.role}" + ("" if cta else f" (thread {origin.thread}, epoch {origin.epoch})")


def _epoch(e: Event) -> int | None:
    """The launch epoch ``e`` runs in (None: a host reset, or a program without launches)."""
    return e.phase.launch_epoch if isinstance(e.phase, Phase) else None


def _is_reset(names: _Names, e: Event) -> bool:
    return not e.is_init and names.origin(e).is_host_reset


def _is_section(names: _Names, e: Event, section: str) -> bool:
    """Whether ``e`` comes from a step of ``section`` (of any stage)."""
    origin = names.scenario.step_of(e.label)
    return origin is not None and origin.section == section


# ----- the chain --------------------------------------------------------------------------------

LINKS = ("store-before-signal", "release", "observation", "acquire", "sync", "load-after-acquire")


def _comm(x: Execution) -> frozenset:
    """``(rf | rmw)+``: a write reaches a read through reads-from and read-modify-writes."""
    return plus(ptx.rf(x) | ptx.rmw(x))


def _strength(e: Event) -> str:
    if e.is_read and e.sem == "relaxed" and e.scope == "sys":
        return "relaxed at sys scope, as a volatile load is"
    return _SEM.get(e.sem, e.sem) + (f" at {e.scope} scope" if e.scope else "")


def _scope_includes(a: Event, b: Event) -> bool:
    return ptx._scope_key(a.scope, a.gpu, a.cta, a.is_init, b.gpu, b.cta, b.is_init)


def _needed_scope(a: Event, b: Event) -> str:
    return "cta" if (a.gpu, a.cta) == (b.gpu, b.cta) else "gpu" if a.gpu == b.gpu else "sys"


def _not_strong(names: _Names, w: Event, r: Event, link: str) -> Cause:
    """Why ``w -> r`` (a write the read reads from, or two patterns) is not morally strong."""
    for weak in (w, r):
        if not weak.is_init and not ptx.strong_operation(weak):
            other = r if weak is w else w
            access = "store" if weak.is_write else "load"
            fix = ("a release write (or a relaxed one after a release fence)" if weak.is_write
                   else "an acquire read (or a relaxed one followed by an acquire fence)")
            also = ""
            if other.is_read and not ptx.acquire_read(other) and ptx.strong_read(other):
                also = (f"; and {getattr(names.step(other), 'name', 'the poll')}, {_strength(other)}, is no "
                        f"acquire either: an acquire read or fence must follow it")
            text = (f"{names.what(weak)} by {names.who(weak)} is a weak {access} (sem weak): a weak access is "
                    f"morally strong with no access of another thread, so {names.what(other)} by "
                    f"{names.who(other)} ({_strength(other)}) cannot observe or synchronize with it; make the "
                    f"step {fix}{also}")
            return Cause("not-morally-strong", text, _refs(names, weak, other), link, ((w.eid, r.eid),),
                         {"weak_step": getattr(names.step(weak), "name", None), "sem": weak.sem})
    for narrow, other in ((w, r), (r, w)):
        if not _scope_includes(narrow, other):
            needed = _needed_scope(narrow, other)
            text = (f"{names.what(narrow)} by {names.who(narrow)} is {_strength(narrow)}, and scope "
                    f"{narrow.scope} does not include {names.who(other)} ({names.what(other)}), which runs "
                    f"on {'GPU ' + str(other.gpu) if other.gpu != narrow.gpu else 'another CTA'} while it runs "
                    f"on GPU {narrow.gpu} (ranks are different GPUs): the two are not morally strong, so no "
                    f"synchronization happens; scope {needed} is needed")
            return Cause("scope", text, _refs(names, narrow, other), link, ((w.eid, r.eid),),
                         {"step": getattr(names.step(narrow), "name", None), "scope": narrow.scope,
                          "needed": needed})
    if not ptx.overlap_completely(w, r):  # mixed sizes (choice 12): bytes of two different accesses
        sizes = [f"{e.footprint[2]} byte{'s' if e.footprint[2] != 1 else ''} at offset {e.footprint[1]}"
                 if e.footprint is not None else "the whole word" for e in (w, r)]
        text = (f"{names.what(w)} ({sizes[0]}) and {names.what(r)} ({sizes[1]}) access the same word with "
                f"different sizes or offsets: accesses that overlap partially are not morally strong (PTX ISA: "
                f"\"If both are memory operations, then they overlap completely\"), so no synchronization "
                f"happens; give the write and the read the same bytes")
        return Cause("mixed-size", text, _refs(names, w, r), link, ((w.eid, r.eid),))
    return Cause("unexplained", f"{names.what(w)} and {names.what(r)} are strong with scopes that include each "
                 "other, yet not morally strong in the model", _refs(names, w, r), link, ((w.eid, r.eid),))


def _observation_break(names: _Names, s: Event, p: Event) -> Cause:
    """The first rf hop from ``S`` to ``P`` (through read-modify-writes) that is not morally strong."""
    x = names.x
    ms = ptx.morally_strong(x)
    rmw_read = {w: r for r, w in x.rmw}
    hops = []
    r = p.eid
    while r in x.rf:
        w = x.rf[r]
        hops.append((w, r))
        if w == s.eid or w not in rmw_read:
            break
        r = rmw_read[w]
    for w, r in reversed(hops):
        if (w, r) not in ms:
            return _not_strong(names, x.events[w], x.events[r], "observation")
    return _not_strong(names, s, p, "observation")


def _barrier_gap(names: _Names, w: Event, s: Event) -> tuple[str, tuple[Event, ...]]:
    """Why no CTA barrier orders the tile store ``w`` before the signal ``s`` (the end of a
    sentence), and the barrier step at fault if there is one: none between them, the signalling
    thread only arrives at it (``bar.arrive`` waits for nothing), or the storing thread's warps
    skip it (a warp-selected barrier)."""
    x = names.x
    barriers = [e for e in x.events if e.is_barrier and e.thread == s.thread and (e.eid, s.eid) in x.po
                and not getattr(names.scenario.step_of(e.label), "broadcast", False)]
    none = ("no CTA barrier (bar.sync) between the tile store and that signal orders the other threads' "
            "stores before it; add a barrier step before the signal")
    if not barriers:
        return none, ()
    bar = barriers[-1]
    step = getattr(names.step(bar), "name", bar.label)
    if bar.sem == "arrive":
        return (f"at {step} (barrier {bar.barrier_id}) the signalling thread only arrives: bar.arrive waits for "
                f"nothing, so the other threads' tile stores are not ordered before the signal; the warp that "
                f"signals (warp 0) must wait with bar.sync: take it out of the step's 'arrive'"), (bar,)
    if not any(e.is_barrier and e.thread == w.thread and e.barrier_id == bar.barrier_id for e in x.events):
        return (f"that thread's warps do not take part in {step} (barrier {bar.barrier_id}, which the signalling "
                f"thread waits at), so nothing orders its store before the signal; add its warps to the step's "
                f"'warps' (and its count)"), (bar,)
    return none, ()


def _chain(names: _Names, w: Event, r: Event, s: Event, p: Event) -> tuple[int, Cause | None]:
    """How far the chain ``W -> S -> P -> R`` gets: (index of the first broken link, its cause)."""
    x = names.x
    ev = x.events
    bc = ptx.base_causality(x)
    # 1. the tile store before the signal write
    if (w.eid, s.eid) not in bc:
        gap, barrier = _barrier_gap(names, w, s)
        text = (f"only the signalling thread is ordered: {names.who(w)} stores its slice of the tile "
                f"({w.loc}), but {names.what(s)} runs on thread {names.scenario.threads[s.thread].thread} only, "
                f"and {gap}")
        return 0, Cause("no-cta-barrier", text, _refs(names, s, *barrier), "store-before-signal", ((w.eid, s.eid),),
                        {"signal_thread": names.scenario.threads[s.thread].thread,
                         "store_thread": names.scenario.threads[w.thread].thread})
    # 2. a release pattern ending at the signal write, after the tile store
    rp = ptx.release_pattern(x)
    heads = [a for a, b in rp if b == s.eid and (a == s.eid or (w.eid, a) in bc)]
    if not heads:
        if not ptx.strong_write(s):
            return 1, _not_strong(names, s, p, "release")
        text = (f"no release pattern before the signal: {names.what(s)} by {names.who(s)} is "
                f"{_strength(s)}, and no release fence on that thread between the tile store and it; "
                f"make the signal a release write or put a release fence before it")
        return 1, Cause("no-release", text, _refs(names, s), "release", ((w.eid, s.eid),), {"sem": s.sem})
    # 3. the poll observes the signal
    obs = ptx.observation(x)
    if (s.eid, p.eid) not in obs:
        return 2, _observation_break(names, s, p)
    # 4. an acquire pattern starting at the poll
    ap = ptx.acquire_pattern(x)
    tails = [b for a, b in ap if a == p.eid]
    if not tails:
        if not ptx.strong_read(p):
            return 3, _not_strong(names, s, p, "acquire")
        text = (f"no acquire pattern after the poll: {names.what(p)} by {names.who(p)} is {_strength(p)}, "
                f"and no acquire read of the lock or fence follows it on that thread, so the tile loads "
                f"are not ordered after what it read; make the poll acquire or add an acquire fence after it")
        return 3, Cause("no-acquire", text, _refs(names, p), "acquire", ((s.eid, p.eid),), {"sem": p.sem})
    # 5. the release and acquire patterns synchronize
    sw = ptx.synchronizes_with(x)
    synced = [(a, b) for a in heads for b in tails if (a, b) in sw]
    if not synced:
        return 4, _not_strong(names, ev[heads[0]], ev[tails[0]], "sync")
    # 6. the tile load after the acquire
    if not any((b, r.eid) in bc or b == r.eid for _a, b in synced):
        y = ev[synced[0][1]]
        text = (f"the consumer's other threads are not ordered after the acquire: the acquire "
                f"({names.what(y)}) runs on thread {names.scenario.threads[y.thread].thread} of "
                f"{_who(names.origin(y), cta=True)} only, and no CTA barrier (bar.sync) after it orders "
                f"{names.who(r)}'s tile load ({r.loc}) after it; add a barrier step after the acquire")
        return 5, Cause("consumer-not-ordered", text, _refs(names, y, p), "load-after-acquire",
                        ((y.eid, r.eid),), {"acquire_thread": names.scenario.threads[y.thread].thread,
                                           "load_thread": names.scenario.threads[r.thread].thread})
    return len(LINKS), None


def _signals(names: _Names, cta: int) -> list[Event]:
    return [e for e in names.x.events if e.is_write and not e.ghost and not e.is_init and e.cta == cta
            and _is_section(names, e, "signal")]


def _polls(names: _Names, cta: int) -> list[Event]:
    return [e for e in names.x.events if e.is_read and not e.ghost and e.cta == cta and _is_section(names, e, "wait")]


def _data_cause(names: _Names, w: Event, r: Event) -> Cause:
    """The first missing link between the tile write ``w`` and the tile read ``r``."""
    if _call_of(names, w) > _call_of(names, r):
        return _early_reuse(names, w, r)
    x = names.x
    comm = _comm(x)
    best: tuple[int, Cause | None] = (-1, None)
    polls = _polls(names, r.cta)
    for s in _signals(names, w.cta):
        for p in polls:
            if (s.eid, p.eid) not in comm:
                continue
            got = _chain(names, w, r, s, p)
            if got[0] > best[0]:
                best = got
    if best[1] is not None:
        return best[1]
    if best[0] >= 0:
        return Cause("unexplained", f"every link from {names.what(w)} to {names.what(r)} holds on the witness",
                     (), "", ((w.eid, r.eid),))
    return _no_chain(names, w, r, polls)


def _no_chain(names: _Names, w: Event, r: Event, polls: list[Event]) -> Cause:
    """The consumer's wait exits without reading any signal of the producer's CTA."""
    x = names.x
    sources = [(x.events[x.rf[p.eid]], p) for p in polls if p.eid in x.rf]
    resets = [e for e in x.events if _is_reset(names, e) and any(e.loc == p.loc for p in polls)]
    exits = [(src, p) for src, p in sources if p.eid == max(q.eid for q in polls if q.thread == p.thread)]
    src, p = (exits or sources or [(None, None)])[-1]
    if resets and p is not None:
        reset = resets[0]
        text = (f"a host reset races with the kernel: {reset.describe()} ({names.who(reset)}) is not ordered "
                f"with epoch {names.scenario.threads[p.thread].epoch}'s signals and wait (reset policy "
                f"{names.scenario.options.reset}), so {names.what(p)} can exit on a value left by an earlier "
                f"epoch ({src.describe() if src else '?'} from {names.who(src) if src else '?'}) before "
                f"{names.who(w)} has signalled; its tile ({w.loc}) is then read before it is written")
        return Cause("reset-race", text, _refs(names, p), "observation",
                     ((reset.eid, p.eid),), {"reset_policy": names.scenario.options.reset})
    stale = _stale_signal(names, w, polls)
    if stale is not None:
        return stale
    if p is None:
        text = (f"{names.who(r)} reads {r.loc} with no wait step of its own before it, so nothing orders "
                f"{names.who(w)}'s store before the load")
        return Cause("wait-without-signal", text, (), "observation", ((w.eid, r.eid),))
    polled = sorted({q.loc for q in polls})
    wait_refs = _refs(names, *polls)
    producer = names.scenario.threads[w.thread]
    signal_steps = [f"signal step {n} (to = {st.to or 'self'})"
                    for n, st in enumerate(getattr(names.protocol_of(names.scenario.locations[p.loc].stage),
                                                   "signal", ()), 1)
                    if st.op in ("store", "atomic_xchg", "atomic_add")]
    text = (f"the wait can exit without {_who(names.origin(w), cta=True)}'s signal: the consumer's wait "
            f"({', '.join(r.name for r in wait_refs)}) polls only {', '.join(polled)}, and "
            f"{names.what(p)} by {names.who(p)} is satisfied by {src.describe() if src else '?'} from "
            f"{names.who(src) if src else '?'}; no poll reads a signal of rank {producer.rank}'s "
            f"{producer.role} in call {producer.epoch or 0} ({', '.join(signal_steps)}), so nothing orders its tile store "
            f"({w.loc}) before the load: the wait must read every producer's signal (its `from`, or the "
            f"signal's `to` and the target)")
    return Cause("wait-without-signal", text, wait_refs + _refs(names, *(e for e in [src] if e is not None)),
                 "observation", ((src.eid if src else w.eid, p.eid),),
                 {"polled": polled, "producer_rank": producer.rank, "producer_role": producer.role,
                  "producer_call": producer.epoch or 0})


def _early_reuse(names: _Names, w: Event, r: Event) -> Cause:
    """``w`` is a store of a later call than the load ``r``: no signal of ``w``'s call could have
    told ``r``'s wait anything, so the missing order is the other way, from the load to the store."""
    store_call, load_call = _call_of(names, w), _call_of(names, r)
    ordered = (" (only each rank's stream orders the calls)"
               if names.scenario.options.launches == "per-rank-stream" else "")
    text = (f"call {store_call}'s store can overwrite what call {load_call} still reads: {names.who(w)} "
            f"stores {w.loc} in call {store_call}, and nothing orders that store after the load of {r.loc} "
            f"by {names.who(r)} in call {load_call}{ordered}: no wait of the storing rank in call {store_call} "
            f"reads a signal the reader writes after its loads; make the producer wait for the reader "
            f"before it stores (an after_load signal and a before_store wait on it, as done-flag does), or "
            f"stop reusing the buffer that soon (more slots, or a host barrier between calls)")
    return Cause("early-reuse", text, (), "", ((r.eid, w.eid),),
                 {"store_call": store_call, "load_call": load_call, "location": w.loc})


def _call_of(names: _Names, e: Event) -> int:
    return names.scenario.threads[e.thread].epoch or 0


def _stale_signal(names: _Names, w: Event, polls: list[Event]) -> Cause | None:
    """A poll of this call that exits on a signal an earlier call left in the lock (not reset, and
    the target the same or already met), or None. The poll of the lock ``w``'s producer signals
    is preferred: that is the signal the load needed."""
    x = names.x
    call = _call_of(names, w)
    stale = [(p, x.events[x.rf[p.eid]]) for p in polls if p.eid in x.rf and _call_of(names, p) == call]
    stale = [(p, src) for p, src in stale if not src.is_init and "signal step" in src.label
             and _call_of(names, src) < call]
    if not stale:
        return None
    p, src = next(((p, src) for p, src in stale if names.rank(src) == names.rank(w)), stale[0])
    before = _call_of(names, src)
    ref, step = _await_step(names, p.loc)
    env = dict(world_size=names.scenario.options.world_size)
    if step is not None and step.until:
        then, now = step.until.target(**env, epoch=before), step.until.target(**env, epoch=call)
        target = (f"the wait has the same target in every call ({step.until.op} {now})" if then == now else
                  f"call {call}'s target ({step.until.op} {now}) is already met by it")
        until = f" until {step.until.source}"
    else:
        target, until = "a target that does not tell the calls apart", ""
    ours = [e for e in x.events if e.is_write and not e.is_init and e.loc == p.loc and "signal step" in e.label
            and _call_of(names, e) == call]
    producer = names.who(w).split(" (")[0]
    text = (f"call {before}'s value satisfies call {call}'s wait: {ref.name if ref else 'the poll'} of "
            f"{names.who(p)} polls {p.loc}{until} and reads {p.value}, written by {names.who(src)} in call "
            f"{before} ({names.what(src)}); the lock keeps that value into call {call} (reset policy "
            f"{names.scenario.options.reset}) and {target}, so the wait exits before {producer} signals in "
            f"call {call}, and its tile store ({w.loc}) is read before it is written: reset the lock "
            f"between calls (reset = \"host\" or \"owner\") or make the target grow with the call (count with "
            f"atomic_add and wait until >= world_size * (epoch + 1), as epoch-flag does)")
    needed = tuple((e.eid, p.eid) for e in ours[:1]) or ((src.eid, p.eid),)
    return Cause("stale-signal", text, ((ref,) if ref else ()) + _refs(names, src), "observation", needed,
                 {"poll": p.eid, "location": p.loc, "read": p.value, "reads_from": src.eid,
                  "signal_call": before, "call": call, "reset_policy": names.scenario.options.reset})


# ----- races on locks, resets, hangs -----------------------------------------------------------------

def _race_cause(names: _Names, a: Event, b: Event) -> Cause:
    for reset, other in ((a, b), (b, a)):
        if _is_reset(names, reset):
            text = (f"a host reset races with a signal: {reset.describe()} ({names.who(reset)}, reset policy "
                    f"{names.scenario.options.reset}) runs on another stream, unordered with "
                    f"{names.what(other)} by {names.who(other)}; the reset is a weak store and nothing orders "
                    f"it before the next launch, so it can erase a signal (the wait then hangs) or come too "
                    f"late (the wait exits on the old count); reset between host barriers or never "
                    f"(a target that grows with the epoch)")
            return Cause("reset-race", text, _refs(names, other), "reset", ((a.eid, b.eid),),
                         {"reset_policy": names.scenario.options.reset})
    if a.ghost or b.ghost:
        w, r = (a, b) if a.is_write else (b, a)
        if r.is_read:
            return _data_cause(names, w, r)
    return _not_strong(names, a if a.is_write else b, b if a.is_write else a, "observation")


def _stream_order(names: _Names, t: int, loc, who: str, needed: str, until: str, seen, ref) -> Cause | None:
    """A hang whose way out is a stream operation (syncverify.streams) the host orders after the
    spinning thread: a stream write after the kernel the poll is in (the kernel waits for its own
    completion), or a kernel after the stream wait that polls (the stream waits for what follows
    it). None when the hang is not of that kind."""
    program = names.scenario.program
    after = program.phases_after()
    spinner = program.threads[t]
    for th in program.threads:
        if th is spinner or not any(isinstance(ins, Store) and ins.loc == loc for ins in th.instructions):
            continue
        stream_write = isinstance(th.phase, Phase) and th.phase.kind == "stream"
        if th.phase in after.get(spinner.phase, ()) and (stream_write or getattr(spinner.phase, "kind", "") == "stream"):
            write = next(ins for ins in th.instructions if isinstance(ins, Store) and ins.loc == loc)
            order = ("on its rank's stream after the whole kernel that polls, which cannot complete while it polls"
                     if stream_write else "by a kernel its stream launches only after this wait completes")
            text = (f"{ref.name if ref else 'the poll'} of {who} needs {loc} {needed} (until {until}) and the last "
                    f"value it reads is {seen}: the write that brings it, {write.label or write.loc}, runs {order} "
                    f"(a stream runs its work in the order it was issued): the two wait for each other; put the "
                    f"consumer in a kernel of its own on another stream (--launches two-stream), or signal from "
                    f"the kernel")
            return Cause("stream-order", text, (ref,) if ref else (), "stream", (),
                         {"needed": needed, "last_value": seen, "location": loc})
    return None


def _rearrival_cause(names: _Names) -> Cause | None:
    """A thread blocked at a named barrier because the other threads of its CTA arrived there more
    often than it syncs: warps that only ``bar.arrive``, once per tile of the CTA's loop, complete
    an earlier phase without it (FA3's epilogue in a persistent loop;
    ``tests/litmus/known/bar-arrive-twice-before-sync-can-hang.litmus``). None: no such thread."""
    x = names.x
    for t, reason in sorted(x.stuck.items()):
        if reason[0] != "barrier":
            continue
        _kind, _i, barrier_id, need, arrived = reason
        program = names.scenario.program.threads
        cta = (program[t].gpu, program[t].cta)
        made = 1 + sum(1 for e in x.events if e.thread == t and e.is_barrier and e.barrier_id == barrier_id)
        others = {u: sum(1 for e in x.events if e.thread == u and e.is_barrier and e.barrier_id == barrier_id)
                  for u in range(len(program)) if u != t and (program[u].gpu, program[u].cta) == cta}
        ahead = sorted(u for u, n in others.items() if n > made)  # arrived more often than it syncs
        if not ahead:
            continue
        origin = names.scenario.threads[t]
        loop = f" (once per tile of its loop: {origin.tile_words})" if origin.tiles else ""
        bars = [e for e in x.events if e.thread in ahead and e.is_barrier and e.barrier_id == barrier_id]
        text = (f"{_who(origin)} waits forever at barrier {barrier_id} (its bar.sync number {made} there): the "
                f"phase it joins needs {need} arrivals and gets {arrived}. Other threads of its CTA "
                f"({', '.join(f'thread {names.scenario.threads[u].thread}' for u in ahead)}) arrive at barrier "
                f"{barrier_id} more often, without waiting (bar.arrive){loop}, and their arrivals for a later "
                f"round completed an earlier phase without this thread; nothing after the barrier in this thread "
                f"runs (a signal it would make, a tile it would store), and its launch never ends. Make every "
                f"participant wait "
                f"(bar.sync) once per round, or separate the rounds (a bar.sync of the whole CTA before the next "
                f"tile, or a barrier id per tile in flight)")
        return Cause("barrier-hang", text, _refs(names, *bars[:1]), "", (),
                     {"thread": t, "barrier": barrier_id, "needed": need, "arrived": arrived, "ahead": ahead})
    return None


def _hang_cause(names: _Names, violation) -> Cause:
    x = names.x
    rearrival = _rearrival_cause(names)
    if rearrival is not None:
        return rearrival
    spins = [(t, reason) for t, reason in x.stuck.items() if reason[0] == "spin"]
    if not spins:
        t, reason = next(iter(x.stuck.items()))
        text = (f"{x.thread_names[t]} waits at a CTA barrier that another thread of its CTA never reaches "
                f"(that thread spins, or skips the barrier)")
        return Cause("barrier-hang", text, (), "", ())
    t, reason = spins[0]
    info = names.scenario.threads[t]
    seen_by_loc = dict(reason[1])
    polls = [e for e in x.events if e.thread == t and e.is_read and not e.ghost and e.loc in seen_by_loc]
    last = polls[-1] if polls else None
    loc = last.loc if last is not None else next(iter(seen_by_loc), None)
    seen = seen_by_loc.get(loc)
    ref, step = _await_step(names, loc)
    env = dict(world_size=names.scenario.options.world_size, epoch=info.epoch or 0)
    needed = f"{step.until.op} {step.until.target(**env)}" if step is not None and step.until else "?"
    writes = [e for e in x.events if e.is_write and e.loc == loc and not e.is_init]
    signals = [e for e in writes if _is_section(names, e, "signal")]
    resets = [e for e in writes if _is_reset(names, e)]
    who = _who(info)
    until = step.until.source if step is not None and step.until else "?"
    # A racing weak reset and a signal may be unordered in coherence (a partial order); what makes
    # the spin read the reset's value forever is that the reset is last in the memory order.
    co = ptx.co(x) | ptx.memory_order_pairs(x.co)
    this_epoch = [e for e in signals if _epoch(e) == info.epoch]
    late = [r for r in resets if any((sig.eid, r.eid) in co for sig in this_epoch)]
    if late:
        reset = late[0]
        text = (f"a host reset races with a signal: {names.who(reset)} zeroes {loc} after signals of epoch "
                f"{info.epoch} reached it (reset policy {names.scenario.options.reset}: on another stream, "
                f"unordered with the launch), erasing them; {ref.name if ref else 'the poll'} of {who} needs "
                f"{loc} {needed} (until {until}) and the last value it reads is {seen}")
        return Cause("reset-race", text, ((ref,) if ref else ()) + _refs(names, *signals), "reset",
                     tuple((sig.eid, reset.eid) for sig in this_epoch if (sig.eid, reset.eid) in co),
                     {"needed": needed, "last_value": seen, "location": loc,
                      "reset_policy": names.scenario.options.reset})
    stream = _stream_order(names, t, loc, who, needed, until, seen, ref)
    if stream is not None:
        return stream
    writers = sorted({(names.rank(e), getattr(names.step(e), "name", e.label)) for e in signals})
    by = "; ".join(f"rank {q} ({name})" for q, name in writers) or "no signal at all"
    ranks = {th.rank for th in names.scenario.threads if th.role in ("producer", "comm")}
    each = step is not None and getattr(step, "from_", None) == "each"
    where = names.scenario.locations.get(loc) if loc is not None else None
    if each and where is not None:  # by design only the copy's own rank writes it: its signals alone must reach the target
        ranks = {where.copy}
    missing = sorted(ranks - {q for q, _ in writers})
    why = (f"; rank{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} never "
           f"write{'s' if len(missing) == 1 else ''} to it (look at the signal step's `to`)" if missing else "")
    if each and not missing:
        why = (f"; with from = \"each\" the wait polls every rank's copy and each copy is written by its own "
               f"rank only, by design: the target ({needed}) must be what that one rank's signals bring, and they "
               f"bring {seen} (look at the wait's `until`, or the signal's value)")
    ms = ptx.morally_strong(x)
    adds = {w for _r, w in x.rmw}  # only read-modify-writes can lose an increment to each other
    counters = [e for e in signals if e.eid in adds and getattr(names.protocol_step(e), "op", "") == "atomic_add"]
    lost = [(u, v) for i, u in enumerate(counters) for v in counters[i + 1:]
            if u.thread != v.thread and (u.eid, v.eid) not in ms]
    if signals and not missing and not counters and not each:
        values = sorted({e.value for e in signals})
        why = (f"; those writes set it to {', '.join(map(str, values))}: a store or exchange overwrites, it "
               f"does not add up, so no value reaches {needed}: count with atomic_add, or wait for the value "
               f"one write brings (look at the wait's `until`)")
    target = step.until.target(**env) if step is not None and step.until else None
    overshoot = step is not None and step.until and step.until.op == "==" and isinstance(seen, int) and seen > target
    if overshoot and not missing:
        why = (f"; together they bring it to {seen}, past the target: == {target} holds only between two of "
               f"them, and the poll need not read it then (wait with >= instead, or for the total)")
        lost = []
    if lost and not missing and isinstance(seen, int) and target is not None and seen >= target:
        lost = []  # every increment arrived: none was lost
    if lost and not missing:
        u, v = lost[0]
        narrow, other = (u, v) if not _scope_includes(u, v) else (v, u)
        why = (f"; every producer writes it, but {names.what(narrow)} is {_strength(narrow)}, a scope that "
               f"does not include {names.who(other)} on GPU {other.gpu}: the two read-modify-writes are not "
               f"morally strong, so they are not atomic with each other and an increment is lost "
               f"(scope sys is needed)")
    poller = f"{ref.name} ({ref.op}), polling {loc}" if ref else f"the poll of {loc}"
    text = (f"the poll's target is unreachable: {poller}, by {who} needs {loc} {needed} (until {until}), but "
            f"the last value it reads is {seen}: the writes that reach {loc} come from {by}{why}")
    return Cause("unreachable-target", text, ((ref,) if ref else ()) + _refs(names, *signals), "target",
                 tuple((e.eid, last.eid) for e in signals) if last else (),
                 {"needed": needed, "last_value": seen, "location": loc, "missing_ranks": missing,
                  "lost_update": bool(lost and not missing)})


def _await_step(names: _Names, loc: str | None):
    """The wait step that polls ``loc`` (a lock copy ``lock[@stage].rQ.tT``): (StepRef, Step).

    A lock of a slotted protocol (``ready#1``) matches no step's lock name, so no step is named."""
    if loc is None:
        return None, None
    lock = names.scenario.locations[loc]
    stage = lock.stage
    protocol = names.protocol_of(stage)
    for n, step in enumerate(getattr(protocol, "wait", ()), 1):
        if step.op in ("await", "stream_wait_value") and (step.lock or "ready") == lock.slotted_name:
            path = getattr(protocol, "path", "<string>")
            where = f"{path}:{step.line}" if step.line is not None and path and not path.startswith("<") else None
            name = f"{stage + ' stage: ' if stage else ''}wait step {n}"
            return StepRef(name, step.op, protocol.name, where), step
    return None, None


# ----- entry point ------------------------------------------------------------------------------

def cause(violation, scenario) -> Cause:
    """The cause of ``violation`` (a :class:`syncverify.verdicts.check.Violation`) in ``scenario``.

    >>> from syncverify.verdicts.check import check_protocol
    >>> result = check_protocol("fenced-release-acquire", world_size=2)
    >>> cause(result.violations["race"], result.scenario).kind
    'no-cta-barrier'
    """
    names = _Names(violation.execution, getattr(violation, "part", None) or scenario)
    x = violation.execution
    if violation.kind == "hang":
        return _hang_cause(names, violation)
    a, b = (x.events[i] for i in violation.evidence[0])
    if violation.kind == "race":
        return _race_cause(names, a, b)
    r = b
    epoch = _epoch(r) or 0
    intended = [e for e in x.events if e.is_write and e.ghost and e.loc == r.loc and e.value == epoch + 1]
    if not intended:
        text = (f"no thread of the scenario writes {r.loc} in epoch {epoch}: {names.who(r)} reads a tile "
                f"nobody produces (production {names.scenario.options.production})")
        return Cause("never-written", text, (), "", ((a.eid, b.eid),))
    return _data_cause(names, intended[0], r)
