"""The PTX model's per-location choices: which write each read may read from, where each write
may go in coherence, and which Fence-SC orders are worth trying.

These restate, per location, what the axioms in :mod:`syncverify.ptx` allow, so that the
explorer enumerates only choices that can pass them (GenMC keeps this pruning with each model's
consistency checks, not in the driver). Only ``(po | bar | host)+`` (the skeleton's
:class:`~syncverify.skeleton.StaticCause`) and moral strength within the location are needed, so
the costlier relations are computed only for combinations that pass every location. Every
execution built from these choices is still checked against all the axioms
(:func:`syncverify.ptx.is_consistent`); with ``prune=False`` every choice is enumerated instead
(the brute-force reference the tests compare against).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

from syncverify import ptx
from syncverify.events import Event, Execution
from syncverify.program import Program
from syncverify.relations import is_acyclic
from syncverify.skeleton import Skeleton


def _spin_needs(skeleton: Skeleton, program: Program) -> list[tuple[str, str, int]]:
    """(phase of the spinning thread, location, value) of every blocking read of a stuck spin."""
    return [(program.threads[t].phase, loc, v) for t, reason in skeleton.stuck.items()
            if reason[0] == "spin" for loc, v in reason[1]]


def _last_seen(events: tuple[Event, ...], co_order: tuple[int, ...], later: frozenset[str]) -> int | None:
    """The value of the coherence-last write that is not in a phase of ``later``."""
    for w in reversed(co_order):
        if events[w].is_init or events[w].phase not in later:
            return events[w].value
    return None


def spin_is_real(skeleton: Skeleton, x: Execution, program: Program) -> bool:
    """A stuck spin is an execution only if every blocking read would see the last value.

    The last value as the spinning thread's launch sees it: writes of launches the host orders
    after it are left out, since those launches cannot start while it spins.
    """
    after = program.phases_after()
    return all(_last_seen(x.events, x.co[loc], after.get(phase, frozenset())) == v
               for phase, loc, v in _spin_needs(skeleton, program))


def location_choices(skeleton: Skeleton, loc: str, prune: bool, program: Program,
                     tick: Callable[[str], None] | None = None) -> list[tuple[dict[int, int], tuple[int, ...]]]:
    """Every (reads-from of this location's reads, coherence order of its writes) worth keeping.

    ``tick``: called for each reads-from choice and coherence order tried (the explorer's clock:
    a location with many reads and writes can take long; it raises to stop)."""
    events = skeleton.events
    writes = [e for e in events if e.is_write and e.loc == loc and not e.ghost]
    reads = [e for e in events if e.is_read and e.loc == loc and not e.ghost]
    init = tuple(w.eid for w in writes if w.is_init)
    others = [w.eid for w in writes if not w.is_init]
    cause = skeleton.static_cause
    # The writes that causally precede each write and each read (init writes precede everything).
    before = {e.eid: frozenset(w for w in others if (w, e.eid) in cause) if prune else frozenset()
              for e in writes + reads}
    rmw_write_of = {r: w for r, w in skeleton.rmw}
    spins = [(phase, v) for phase, where, v in _spin_needs(skeleton, program) if where == loc] if prune else []
    after = program.phases_after() if spins else {}
    candidates = []
    for r in reads:
        cands = [w.eid for w in writes if w.value == r.value]
        if prune:
            # Causality axiom: no reading a write the read causally precedes (rf ; cause), nor
            # one hidden behind a write that causally precedes the read (fr ; cause).
            cands = [w for w in cands if (r.eid, w) not in cause and rmw_write_of.get(r.eid) != w
                     and not any(w2 != w and (w in init or (w, w2) in cause) for w2 in before[r.eid])]
        if not cands:
            return []
        candidates.append(cands)
    ms = frozenset(ptx.morally_strong_at([w for w in writes] + reads, skeleton.po))
    choices = []
    for picks in itertools.product(*candidates):
        if tick is not None:
            tick(f"while choosing what the reads of {loc} read from")
        rf = {r.eid: w for r, w in zip(reads, picks)}
        if not prune:
            choices.extend((rf, init + order) for order in itertools.permutations(others))
            continue
        for order in _coherence_orders(skeleton, others, rf, ms, before):
            co_order = init + order
            if tick is not None:
                tick(f"while ordering the writes of {loc}")
            if any(_last_seen(events, co_order, after.get(phase, frozenset())) != v for phase, v in spins):
                continue  # a stuck spin is an execution only if it read the last value (spin_is_real)
            if _location_consistent(skeleton, rf, co_order, reads, ms, before):
                choices.append((rf, co_order))
    return choices


def _coherence_orders(skeleton: Skeleton, writes: list[int], rf: dict[int, int], ms: frozenset,
                      before: dict[int, frozenset]) -> Iterator[tuple[int, ...]]:
    """Coherence orders of ``writes`` that respect program order and the atomicity of RMWs.

    Built one write at a time, so that an atomic's write is placed only after the write its read
    reads from, with no morally strong write in between (the Atomicity axiom): for chains of
    atomics this yields the one order the chain allows instead of every permutation.
    ``before``: the writes that causally precede each write (Coherence keeps them co-before).
    """
    source_of = {w: rf.get(r) for r, w in skeleton.rmw}
    read_of = {w: r for r, w in skeleton.rmw}
    pending = set(writes)

    def placeable(w: int, placed: list[int]) -> bool:
        if before[w] & pending:
            return False  # Coherence: causally ordered writes are in coherence order
        r = read_of.get(w)
        src = source_of.get(w)
        if r is None or src is None:
            return True
        # Only morally strong atomics are tied to the write they read: co(w, src) would close
        # the SC-per-Location cycle src -rf-> r -po-> w -co-> src. A weaker atomic may land anywhere.
        if (src, r) in ms and (w, src) in ms:
            if src not in placed and not skeleton.events[src].is_init:
                return False
        if src in placed or skeleton.events[src].is_init:
            after_src = placed[placed.index(src) + 1:] if src in placed else placed
            if any((r, m) in ms and (m, w) in ms for m in after_src):
                return False  # Atomicity: a morally strong write between the read and the write
        return True

    def extend(placed: list[int]) -> Iterator[tuple[int, ...]]:
        if not pending:
            yield tuple(placed)
            return
        for w in sorted(pending):
            if placeable(w, placed):
                pending.discard(w)
                placed.append(w)
                yield from extend(placed)
                placed.pop()
                pending.add(w)

    yield from extend([])


def _location_consistent(skeleton: Skeleton, rf: dict[int, int], co_order: tuple[int, ...],
                         reads: list[Event], ms: frozenset, before: dict[int, frozenset]) -> bool:
    """SC-per-Location and Atomicity on one location (both only relate events of that location)."""
    position = {w: i for i, w in enumerate(co_order)}
    edges = set()
    for i, a in enumerate(co_order):
        for b in co_order[i + 1:]:
            if (a, b) in ms:
                edges.add((a, b))
    for r, w in rf.items():
        if (w, r) in ms:
            edges.add((w, r))
        for later in co_order[position[w] + 1:]:
            if (r, later) in ms:
                edges.add((r, later))  # fr
    ids = set(co_order) | {r.eid for r in reads}
    edges |= {(a, b) for a, b in skeleton.po if a in ids and b in ids}
    if not is_acyclic(edges):
        return False
    for r, w in rf.items():
        # Causality axiom (fr ; cause): a write that causally precedes the read is not
        # coherence-after the write the read reads from.
        if any(position[other] > position[w] for other in before[r]):
            return False
    for r, w in skeleton.rmw:
        if r not in rf:
            continue
        src = rf[r]
        if src not in position or w not in position or position[src] >= position[w]:
            continue  # an atomic written before its source is SC-per-Location's business (above)
        between = co_order[position[src] + 1:position[w]]
        if any((r, m) in ms and (m, w) in ms for m in between):
            return False
    return True


def fence_sc_orders(skeleton: Skeleton, prune: bool,
                    tick: Callable[[str], None] | None = None) -> list[tuple[int, ...]]:
    """Total orders of the ``fence.sc`` events, one per distinct morally-strong restriction.

    ``tick``: called every 1024 orders tried (the explorer's clock; it raises to stop)."""
    fences = [e.eid for e in skeleton.events if ptx.sc_fence(e)]
    if not fences:
        return [()]
    ms = skeleton.static_memo["morally_strong"]
    seen, orders = set(), []
    for tried, order in enumerate(itertools.permutations(fences)):
        if tick is not None and tried % 1024 == 0:
            tick("while ordering fence.sc events")
        if prune and any((order[j], order[i]) in skeleton.po
                         for i in range(len(order)) for j in range(i + 1, len(order))):
            continue  # contradicts program order, hence causality: FenceSC fails
        # The execution's Fence-SC order is the morally strong part; orders that agree on it are one.
        restricted = frozenset((order[i], order[j]) for i in range(len(order))
                               for j in range(i + 1, len(order)) if (order[i], order[j]) in ms)
        if restricted in seen:
            continue
        seen.add(restricted)
        orders.append(order)
    return orders
