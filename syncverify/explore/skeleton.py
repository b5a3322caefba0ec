"""The execution graph of one combination of thread paths, before reads-from and coherence are chosen.

A :class:`Skeleton` numbers the events of one path per thread and holds the relations that no
choice of rf, co or Fence-SC order changes (program order, dependencies, RMW pairs, CTA barrier
synchronization, the host's launch order); :meth:`Skeleton.execution` completes it into an
:class:`~syncverify.model.events.Execution` for one such choice.
"""

from __future__ import annotations

import functools
import itertools
from collections import OrderedDict
from dataclasses import dataclass, field, replace

from syncverify.explore.thread_paths import Path, initial_registers
from syncverify.model import ptx
from syncverify.model.events import INIT_THREAD, Event, Execution
from syncverify.model.relations import reach_masks
from syncverify.program import Program


@dataclass
class Skeleton:
    """The events of one combination of paths, before reads-from and coherence are chosen."""

    events: tuple[Event, ...]
    po: frozenset
    rmw: frozenset
    dep: frozenset
    barrier_sync: frozenset
    registers: dict[tuple[str, str], int]
    stuck: dict[int, tuple]
    thread_names: tuple[str, ...]
    roles: tuple[str, ...]
    host_order: frozenset = frozenset()
    static_memo: dict = field(default_factory=dict)
    # (po | bar | host)+: part of causality whatever rf, co and Fence-SC turn out to be.
    static_cause: "StaticCause | frozenset" = frozenset()
    # Registers ((thread, register), read eid) whose final value is what a read of a merged path
    # returns (syncverify.explore.value_classes): set from the write it reads from.
    bound: tuple[tuple[tuple[str, str], int], ...] = ()
    # What the driver keeps per skeleton: the relations of each (reads-from, Fence-SC order) choice
    # that coherence does not change, and the alike keys of the executions already reported
    # (syncverify.explore.location_choices.alike_key).
    relations_by_choice: dict[tuple, dict] = field(default_factory=dict, repr=False, compare=False)
    reported: set[tuple] = field(default_factory=set, repr=False, compare=False)
    # Each read of a merged path with each value it is given (concrete_events), made once.
    _concrete: dict[tuple[int, int], Event] = field(default_factory=dict, repr=False, compare=False)

    @functools.cached_property
    def merged_reads(self) -> list[Event]:
        """The reads of merged paths (they carry a set of values)."""
        return [e for e in self.events if e.values is not None]

    @functools.cached_property
    def accesses(self) -> dict[str, tuple[list[Event], list[Event]]]:
        """Each location's (writes, reads), initial write first, ghost accesses left out (they
        carry no choice)."""
        index: dict[str, tuple[list[Event], list[Event]]] = {}
        for e in self.events:
            if e.is_memory and not e.ghost:
                pair = index.setdefault(e.loc, ([], []))  # type: ignore[arg-type]
                pair[0 if e.is_write else 1].append(e)
        return index

    def execution(self, rf: dict[int, int], co: dict[str, tuple[int, ...]], fence_sc: tuple[int, ...],
                  co_rel: frozenset | None = None, memo: dict | None = None) -> Execution:
        """The candidate execution of these events for one choice; ``memo``: relations already
        computed for the same rf and Fence-SC order (none of which may depend on coherence)."""
        return Execution(
            events=self.concrete_events(rf), thread_names=self.thread_names, po=self.po, rf=rf, co=co,
            rmw=self.rmw, dep=self.dep, fence_sc=fence_sc, barrier_sync=self.barrier_sync,
            final_registers=self.concrete_registers(rf), stuck=self.stuck, roles=self.roles,
            host_order=self.host_order, co_rel=co_rel, _memo=dict(self.static_memo if memo is None else memo),
        )

    def concrete_events(self, rf: dict[int, int]) -> tuple[Event, ...]:
        """The events with each read of a merged path given the value of the write it reads from
        (the event the member path with that value has); reads not in ``rf`` stay as they are."""
        merged = self.merged_reads
        if not merged:
            return self.events
        events = list(self.events)
        for e in merged:
            if e.eid in rf:
                value = events[rf[e.eid]].value
                concrete = self._concrete.get((e.eid, value))  # type: ignore[arg-type]
                if concrete is None:
                    concrete = self._concrete[(e.eid, value)] = replace(e, value=value, values=None)  # type: ignore[index]
                events[e.eid] = concrete
        return tuple(events)

    def concrete_registers(self, rf: dict[int, int]) -> dict[tuple[str, str], int]:
        """The final registers, each bound register set to the value its read reads."""
        if not self.bound:
            return self.registers
        registers = dict(self.registers)
        for key, eid in self.bound:
            if eid in rf:
                registers[key] = self.events[rf[eid]].value  # type: ignore[assignment]
        return registers


def build_skeleton(program: Program, combo: tuple[Path, ...], lengths: list[int],
                   stuck: dict[int, tuple], instances: list,
                   not_started: frozenset[int] = frozenset()) -> Skeleton:
    """Number the events of a combination and compute the relations that do not depend on rf/co.

    ``not_started``: threads that never run (see :func:`syncverify.explore.launch_order.not_started`): no events, their
    registers keep their initial values, and they are not stuck."""
    events: list[Event] = []
    for loc in program.locations():
        events.append(Event(len(events), INIT_THREAD, 0, "W", loc, program.init.get(loc, 0), "relaxed", "sys",
                            label="init"))
    po, rmw, dep, sync = set(), set(), set(), set()
    bound: list[tuple[tuple[str, str], int]] = []
    local_to_global: dict[tuple[int, int], int] = {}
    registers: dict[tuple[str, str], int] = {}
    for t, (thread, path) in enumerate(zip(program.threads, combo)):
        ids = []
        for i, le in enumerate(path.events[:lengths[t]]):
            eid = len(events)
            events.append(Event(eid, t, i, le.kind, le.loc, le.value, le.sem, le.scope, thread.gpu, thread.cta,
                                le.barrier_id, le.label, le.line, le.ghost, thread.phase,
                                count=le.count, red_op=le.red_op, predicate=le.predicate, values=le.values,
                                proxy=le.proxy, space=le.space, copies=le.copies, footprint=le.footprint,
                                byte=le.byte))
            local_to_global[(t, i)] = eid
            for j in le.deps:
                if j < i:
                    dep.add((ids[j], eid))
            if le.rmw_with_previous:
                rmw.add((ids[i - 1], eid))
            ids.append(eid)
        po.update((ids[a], ids[b]) for a in range(len(ids)) for b in range(a + 1, len(ids)))
        if t in not_started:
            registers.update({(thread.name, reg): v for reg, v in initial_registers(program, thread).items()})
        else:
            registers.update({(thread.name, reg): v for reg, v in path.registers})
            bound.extend(((thread.name, reg), ids[i]) for reg, i in path.bound if i < len(ids))
    for instance in instances:
        members = [(local_to_global[(t, i)]) for t, i in instance]
        sync |= ptx.barrier_phase_sync([events[m] for m in members])
    host = frozenset()  # filled in by candidate_executions once the combination passes its locations
    # Stuck threads keep their (cut) events; a spin-stuck path is already cut at the spin.
    full_stuck = dict(stuck)
    for t, path in enumerate(combo):
        if path.stuck is not None and t not in full_stuck and t not in not_started:
            full_stuck[t] = path.stuck
    return Skeleton(tuple(events), frozenset(po), frozenset(rmw), frozenset(dep), frozenset(sync),
                    registers, full_stuck, tuple(t.name for t in program.threads),
                    tuple(t.role for t in program.threads), host, bound=tuple(bound))


def host_pairs(program: Program, events: list[Event]) -> frozenset:
    """Event pairs ordered by ``program.host_order`` (closed transitively over phases); the same
    for every combination whose events lie in the same launches (the latest few are kept)."""
    if not program.host_order:
        return frozenset()
    key = (program.host_order, tuple(e.phase for e in events))
    pairs = _HOST_PAIRS.get(key)
    if pairs is None:
        after = program.phases_after()
        by_phase: dict[str, list[int]] = {}
        for e in events:
            if not e.is_init:
                by_phase.setdefault(e.phase, []).append(e.eid)
        pairs = _HOST_PAIRS[key] = frozenset(itertools.chain.from_iterable(
            itertools.product(by_phase.get(a, ()), by_phase.get(b, ())) for a, bs in after.items() for b in bs))
        if len(_HOST_PAIRS) > _SHAPES_KEPT:
            _HOST_PAIRS.popitem(last=False)
    else:
        _HOST_PAIRS.move_to_end(key)
    return pairs


_HOST_PAIRS: OrderedDict[tuple, frozenset] = OrderedDict()  # the latest host_pairs answers


# The relations a skeleton's shape decides (syncverify.model.ptx declares them).
STATIC_RELATIONS = ptx.lets(ptx.Depends.SHAPE)
_SHAPES: OrderedDict[tuple, dict] = OrderedDict()  # shape -> its static relations (the latest few)
_SHAPES_KEPT = 16


def shape(skeleton: Skeleton) -> tuple:
    """What the static relations of a skeleton are computed from: each event but its value (the
    relations above read threads, kinds, locations, semantics, scopes, placement, ghostness and
    launch phases; program order follows the numbering, the host order the phases), and the
    host order itself."""
    return (tuple((e.thread, e.kind, e.loc, e.sem, e.scope, e.gpu, e.cta, e.ghost, e.phase, e.proxy, e.space, e.copies,
                   e.footprint, e.byte)
                  for e in skeleton.events),
            skeleton.host_order)


def static_relations(skeleton: Skeleton) -> None:
    """Compute once per combination the relations that rf/co/Fence-SC cannot change.

    Combinations that differ only in the values their events read and write (most of them) have
    the same relations: they are computed once per :func:`shape` (kept for the latest few)."""
    key = shape(skeleton)
    known = _SHAPES.get(key)
    if known is None:
        probe = skeleton.execution({}, {}, ())
        for name in STATIC_RELATIONS:
            ptx.RELATIONS[name](probe)
        known = {name: probe._memo[name] for name in STATIC_RELATIONS}
        _SHAPES[key] = known
        if len(_SHAPES) > _SHAPES_KEPT:
            _SHAPES.popitem(last=False)
    else:
        _SHAPES.move_to_end(key)
    skeleton.static_memo.update(known)


class StaticCause:
    """``(po | bar | host)+`` of a skeleton, as a membership test: the part of causality that no
    choice of rf, co or Fence-SC order can remove, used to prune those choices.

    Kept as one bit mask per event (:func:`~syncverify.model.relations.reach_masks`), over each event's
    next event in program order (a chain per thread; the initial writes before every thread's
    first event), its barrier partners, and one virtual node per launch phase through which the
    host order passes (every event of a phase leads to its phase's node, which leads to every
    event of the phases the host orders after it), so that the host order, which relates whole
    phases, adds a node per phase instead of a pair per two events.
    """

    def __init__(self, skeleton: "Skeleton", program: Program) -> None:
        events = skeleton.events
        n = len(events)
        phases = sorted({e.phase for e in events if not e.is_init})
        node_of_phase = {phase: n + k for k, phase in enumerate(phases)}
        successor_lists: list[list[int]] = [[] for _ in range(n + len(phases))]
        last: dict[int, int] = {}  # thread -> its latest event so far (events are numbered in program order)
        first: list[int] = []
        by_phase: dict[str, list[int]] = {}
        for e in events:
            if e.is_init:
                continue
            if e.thread in last:
                successor_lists[last[e.thread]].append(e.eid)
            else:
                first.append(e.eid)
            last[e.thread] = e.eid
            successor_lists[e.eid].append(node_of_phase[e.phase])
            by_phase.setdefault(e.phase, []).append(e.eid)
        for e in events:
            if e.is_init:
                successor_lists[e.eid].extend(first)  # initial writes precede everything
        for a, b in skeleton.barrier_sync:
            successor_lists[a].append(b)
        after = program.phases_after()
        for phase in phases:
            for later in after.get(phase, ()):
                successor_lists[node_of_phase[phase]].extend(by_phase.get(later, ()))
        self.masks = reach_masks(successor_lists)

    def __contains__(self, pair: tuple[int, int]) -> bool:
        return bool(self.masks[pair[0]] >> pair[1] & 1)
