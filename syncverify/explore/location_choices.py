"""The PTX model's per-location choices: which write each read may read from, where each write
may go in coherence, and which Fence-SC orders are worth trying.

These restate, per location, what the axioms in :mod:`syncverify.model.ptx` allow, so that the
explorer enumerates only choices that can pass them (GenMC keeps this pruning with each model's
consistency checks, not in the driver). Only ``(po | bar | host)+`` (the skeleton's
:class:`~syncverify.explore.skeleton.StaticCause`) and moral strength within the location are needed, so
the costlier relations are computed only for combinations that pass every location. Every
execution built from these choices is still checked against all the axioms
(:func:`syncverify.model.ptx.is_consistent`); with ``prune=False`` every choice is enumerated instead
(the brute-force reference the tests compare against).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from collections.abc import Iterator

from syncverify.explore.bounds import Clock
from syncverify.explore.skeleton import Skeleton
from syncverify.model import ptx
from syncverify.model.events import Event, Execution
from syncverify.model.relations import is_acyclic, plus, successors
from syncverify.program import Program


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


def is_execution(skeleton: Skeleton, x: Execution, program: Program) -> bool:
    """The consistency filter: whether candidate ``x`` of ``skeleton`` is an execution of
    ``program``, i.e. every stuck spin sees its last value (:func:`spin_is_real`) and the PTX model
    allows it (:func:`syncverify.model.ptx.is_consistent`). The explorer and sampling both ask this."""
    return (not skeleton.stuck or spin_is_real(skeleton, x, program)) and ptx.is_consistent(x)


def alike_key(skeleton: Skeleton, x: Execution, program: Program) -> tuple:
    """What every verdict and outcome sees of a candidate execution of ``skeleton``, besides the
    skeleton itself: two consistent candidates with the same key are reported once.

    Candidates of one skeleton with the same reads-from and Fence-SC order have the same events
    (a read of a merged path takes its value from the write it reads), the same final registers
    and the same causality (no relation that causality is built from depends on coherence). They
    differ only in coherence (another orientation of the morally strong write pairs) and memory
    order. Litmus outcomes and filters read the final registers and the final memory; liveness
    reads the blocked threads (the skeleton's) and whether a stuck spin sees its last value (a
    consistent candidate's spins all do); the protocol verdicts (:mod:`syncverify.verdicts.check`) read
    the events, causality and moral strength, never coherence. So once one candidate with a key
    is consistent, another with the same key is an execution nobody can tell from it.
    """
    return (frozenset(x.rf.items()), x.fence_sc, frozenset(x.final_memory.items()))


@dataclass(frozen=True)
class LocationChoice:
    """One location's choice: what its reads read from, and how its writes are ordered
    (``ordered``: pairs of write eids, initial write first; the morally strong pairs when pruning).
    Coherence is the transitive closure of ``ordered`` and the causal order of the writes, fixed
    once the whole execution's causality is known (:func:`coherence_of`); pairs that neither
    relates stay unordered (choice 1 of :mod:`syncverify.model.ptx`).
    """

    loc: str
    rf: dict[int, int]
    ordered: frozenset
    least: frozenset  # ordered closed with (po | bar | host)+ on the writes: coherence at least


def location_choices(skeleton: Skeleton, loc: str, prune: bool, program: Program,
                     clock: Clock | None = None, keep_rf=None) -> Iterator[LocationChoice]:
    """Every (reads-from of this location's reads, orientation of its morally strong write pairs)
    worth keeping, lazily.

    The axioms other than Coherence and Coherence2 only get harder to pass as coherence grows, so
    the explorer uses the least coherence those two allow: an orientation of the morally strong
    pairs (Coherence2) closed with causality (Coherence). Here, before causality is known, each
    choice is checked with the part of causality every execution has (``(po | bar | host)+``):
    what fails with less coherence fails with more. With ``prune=False`` (brute force) every
    reads-from choice is paired with every strict partial order of the writes instead.

    ``clock``: ticked for each reads-from choice and coherence order tried (a location with many
    reads and writes can take long; past its deadline it raises). ``keep_rf``: where given,
    reads-from choices it answers False for (called with the reads' ids and the writes picked for
    the first of them, also while picking) are skipped before their coherence orders are listed
    (the rf-symmetry pruning, :mod:`syncverify.explore.rf_symmetry`)."""
    events = skeleton.events
    writes, reads = skeleton.accesses.get(loc, ([], []))
    init = tuple(w.eid for w in writes if w.is_init)
    others = [w.eid for w in writes if not w.is_init]
    init_first = frozenset((i, w) for i in init for w in others)
    cause = skeleton.static_cause
    # The writes that causally precede each write and each read (init writes precede everything).
    before = {e.eid: frozenset(w for w in others if (w, e.eid) in cause) if prune else frozenset()
              for e in writes + reads}
    rmw_write_of = {r: w for r, w in skeleton.rmw}
    spins = [(phase, v) for phase, where, v in _spin_needs(skeleton, program) if where == loc] if prune else []
    after = program.phases_after() if spins else {}
    candidates = []
    for r in reads:
        # A read of a merged path may read any write of one of its values (value_classes).
        cands = [w.eid for w in writes if (w.value in r.values if r.values is not None else w.value == r.value)]
        if prune:
            # Causality axiom: no reading a write the read causally precedes (rf ; cause), nor
            # one hidden behind a write that causally precedes the read (fr ; cause).
            cands = [w for w in cands if (r.eid, w) not in cause and rmw_write_of.get(r.eid) != w
                     and not any(w2 != w and (w in init or (w, w2) in cause) for w2 in before[r.eid])]
        if not cands:
            return
        candidates.append(cands)
    ms = morally_strong_at(writes + reads, skeleton.po)
    static_order = frozenset((a, w) for w in others for a in before[w]) | init_first
    read_ids = [r.eid for r in reads]
    prefix_kept = (lambda picked: keep_rf(read_ids, picked)) if keep_rf is not None else None
    for picks in (_distinct_sources(reads, candidates, rmw_write_of, writes, ms, prefix_kept) if prune
                  else itertools.product(*candidates)):
        if clock is not None:
            clock.tick(f"while choosing what the reads of {loc} read from")
        if keep_rf is not None and not keep_rf(read_ids, picks):
            continue
        rf = {r.eid: w for r, w in zip(reads, picks)}
        if not prune:
            for order in strict_partial_orders(others, clock, must_order=ms):
                yield LocationChoice(loc, rf, order | init_first, order | init_first)
            continue
        seen: set[frozenset] = set()
        for order in _coherence_orders(skeleton, others, rf, ms, before, one_per_orientation=not spins):
            if clock is not None:
                clock.tick(f"while ordering the writes of {loc}")
            oriented = frozenset((a, b) for i, a in enumerate(order) for b in order[i + 1:] if (a, b) in ms)
            if oriented in seen:
                continue  # another linear extension of an orientation already tried
            if any(_last_seen(events, init + order, after.get(phase, frozenset())) != v for phase, v in spins):
                continue  # a stuck spin is an execution only if it read the last value (spin_is_real)
            seen.add(oriented)
            least = _closure_along(order, oriented | static_order)
            if _location_consistent(skeleton, rf, least, reads, ms, before):
                yield LocationChoice(loc, rf, oriented | init_first, least)


def morally_strong_at(events: list[Event], ordered: frozenset) -> frozenset:
    """``morally-strong`` among the accesses of one location (both directions), with ``ordered``
    as program order: :func:`syncverify.model.ptx.morally_strong_pair` of each pair (``ms2`` holds
    for any two)."""
    return frozenset(pair for i, a in enumerate(events) for b in events[i + 1:] if ptx.morally_strong_pair(a, b, ordered)
                     for pair in ((a.eid, b.eid), (b.eid, a.eid)))


def _distinct_sources(reads: list[Event], candidates: list[list[int]], rmw_write_of: dict[int, int],
                      writes: list[Event], ms: frozenset, keep=None) -> Iterator[tuple[int, ...]]:
    """The product of the reads' candidate writes, where two atomics never read one write when
    every write and atomic of the location is morally strong with every other.

    Atomicity: if atomics A1 and A2 both read W, coherence orders their writes (Coherence2), say
    W1 before W2; W is before W1 (SC-per-Location: W rf A1's read, po W1), so W1 lies between
    A2's read of W and A2's write W2, morally strong with both: the axiom fails. The other order
    fails alike. (A location with a weaker access keeps the plain product.) ``keep``: where
    given, a partial pick it answers False for is not extended."""
    atomic = [r.eid in rmw_write_of for r in reads]
    events = [w.eid for w in writes] + [r.eid for r, a in zip(reads, atomic) if a] + [
        rmw_write_of[r.eid] for r, a in zip(reads, atomic) if a]
    exclusive = any(atomic) and all((a, b) in ms for i, a in enumerate(events) for b in events[i + 1:] if a != b)
    if not exclusive and keep is None:
        yield from itertools.product(*candidates)
        return
    yield from _picks(candidates, atomic if exclusive else [False] * len(reads), keep)


def _picks(candidates: list[list[int]], distinct: list[bool], keep) -> Iterator[tuple[int, ...]]:
    """The product of ``candidates``, where the reads marked ``distinct`` never pick one write
    twice, without the partial picks ``keep`` (when given) answers False for."""
    picked: list[int] = []
    taken: set[int] = set()

    def pick(i: int) -> Iterator[tuple[int, ...]]:
        if i == len(candidates):
            yield tuple(picked)
            return
        for w in candidates[i]:
            if distinct[i]:
                if w in taken:
                    continue
                taken.add(w)
            picked.append(w)
            if keep is None or keep(picked):
                yield from pick(i + 1)
            picked.pop()
            if distinct[i]:
                taken.discard(w)

    yield from pick(0)


def _closure_along(order: tuple[int, ...], pairs: frozenset) -> frozenset:
    """``(pairs)+`` over the non-initial writes plus the initial-write pairs, for ``pairs`` that
    ``order`` (a linear order of those writes) extends: each write's predecessors are
    gathered in one pass along the order instead of a general transitive closure."""
    below: dict[int, set[int]] = {}
    for i, b in enumerate(order):
        below[b] = set()
        for a in order[:i]:
            if (a, b) in pairs:
                below[b].add(a)
                below[b] |= below[a]
    inits = {a for a, _b in pairs if a not in below}
    return frozenset((a, b) for b, preds in below.items() for a in preds) | frozenset(
        (a, b) for a, b in pairs if a in inits)


def strict_partial_orders(items: list[int], clock: Clock | None = None,
                          must_order: frozenset = frozenset()) -> Iterator[frozenset]:
    """Every strict partial order of ``items`` (transitive, irreflexive sets of pairs) that orders
    each pair of ``must_order`` one way or the other: brute force (``must_order``: the morally
    strong pairs, which Coherence2 rejects unordered; leaving them out early only saves time).

    Each pair is left unordered (unless it must be ordered) or ordered one way or the other, and
    the transitive ones are kept."""
    pairs = list(itertools.combinations(items, 2))
    ways_of = [(1, 2) if pair in must_order else (0, 1, 2) for pair in pairs]
    for tried, ways in enumerate(itertools.product(*ways_of)):
        if clock is not None and tried % 256 == 0:
            clock.tick("while listing the coherence orders of a location")
        chosen = frozenset((a, b) if way == 1 else (b, a) for (a, b), way in zip(pairs, ways) if way)
        if plus(chosen) == chosen:
            yield chosen


def coherence_of(x: Execution, choices: tuple[LocationChoice, ...], prune: bool) -> frozenset | None:
    """The coherence order of an execution whose reads-from and Fence-SC order are chosen.

    Pruned: each location's oriented pairs closed with the causal order of its writes (the least
    coherence that passes Coherence and Coherence2); None when that has a cycle. Brute force: the
    chosen orders as they are (the axioms then judge them).
    """
    least = frozenset().union(*(c.least for c in choices))
    if not prune:
        return least
    causal = ptx.causal_writes(x)
    if causal <= least:
        return least  # already closed, and acyclic (each location's order extends it)
    co = plus(least | causal)
    if any(a == b for a, b in co):
        return None
    return co


def memory_orders(x: Execution, co: frozenset, program: Program, skeleton: Skeleton,
                  clock: Clock | None = None) -> Iterator[dict[str, tuple[int, ...]]]:
    """Linear extensions of coherence, one per location, that differ in what they make observable.

    The final value of a location is its memory order's last write (choice 1: a coherence-maximal
    write), and a stuck spin needs the last value its launch sees (:func:`spin_is_real`); two
    memory orders that agree on those are one execution. A location without a stuck spin needs
    one order per distinct final value; one with a stuck spin lists its linear extensions.
    """
    events = x.events
    needs = _spin_needs(skeleton, program)
    after = program.phases_after() if needs else {}
    locations = program.locations()
    writes_of: dict[str, list[int]] = {loc: [] for loc in locations}
    for e in events:
        if e.is_write and not e.ghost:
            writes_of[e.loc].append(e.eid)  # type: ignore[index]
    per_location: list[list[tuple[int, ...]]] = []
    for loc in locations:
        writes = writes_of[loc]
        if len(writes) == 1:
            per_location.append([tuple(writes)])
            continue
        phases = sorted({phase for phase, where, _v in needs if where == loc})
        if phases:
            keyed: dict[tuple, tuple[int, ...]] = {}
            for order in linear_extensions(writes, co, clock):
                key = (events[order[-1]].value,
                       tuple(_last_seen(events, order, after.get(p, frozenset())) for p in phases))
                keyed.setdefault(key, order)
            per_location.append(list(keyed.values()))
            continue
        maximal = [w for w in writes if not any((w, o) in co for o in writes)]
        by_value: dict[int | None, int] = {}
        for w in maximal:
            by_value.setdefault(events[w].value, w)
        per_location.append([_extension_ending_in(writes, co, last) for last in by_value.values()])
    for orders in itertools.product(*per_location):
        yield dict(zip(locations, orders))


def _extension_ending_in(writes: list[int], co: frozenset, last: int) -> tuple[int, ...]:
    """A linear extension of ``co`` over ``writes`` whose last element is ``last`` (co-maximal)."""
    rest = [w for w in writes if w != last]
    order: list[int] = []
    while rest:
        first = next(w for w in rest if not any((o, w) in co for o in rest if o != w))
        order.append(first)
        rest.remove(first)
    return tuple(order) + (last,)


def linear_extensions(writes: list[int], co: frozenset,
                      clock: Clock | None = None) -> Iterator[tuple[int, ...]]:
    """Every linear extension of ``co`` over ``writes``, built one minimal write at a time."""
    pending = list(writes)
    placed: list[int] = []

    def extend() -> Iterator[tuple[int, ...]]:
        if clock is not None:
            clock.tick("while listing memory orders")
        if not pending:
            yield tuple(placed)
            return
        for w in list(pending):
            if any((o, w) in co for o in pending if o != w):
                continue
            pending.remove(w)
            placed.append(w)
            yield from extend()
            placed.pop()
            pending.append(w)

    yield from extend()


def _coherence_orders(skeleton: Skeleton, writes: list[int], rf: dict[int, int], ms: frozenset,
                      before: dict[int, frozenset], *, one_per_orientation: bool = False) -> Iterator[tuple[int, ...]]:
    """Linear orders of ``writes`` that respect causality and the atomicity of RMWs.

    Built one write at a time, so that an atomic's write is placed only after the write its read
    reads from, with no morally strong write in between (the Atomicity axiom): for chains of
    atomics this yields the one order the chain allows instead of every permutation.
    ``before``: the writes that causally precede each write (Coherence keeps them co-before).

    Only the order of *dependent* pairs (morally strong, or causally ordered) matters to the
    model; the rest stay unordered in coherence. With ``one_per_orientation``, orders that differ
    only by swapping adjacent independent writes are one (Mazurkiewicz traces): a write is never
    placed right after an independent write with a larger id, which keeps the lexicographically
    least order of each orientation. Every rule below depends on dependent pairs only, so it
    passes or fails all orders of an orientation alike, and the least one stands for them.
    """
    source_of = {w: rf.get(r) for r, w in skeleton.rmw}
    read_of = {w: r for r, w in skeleton.rmw}
    pending = set(writes)

    def dependent(a: int, b: int) -> bool:
        return (a, b) in ms or a in before[b] or b in before[a]

    def placeable(w: int, placed: list[int]) -> bool:
        if before[w] & pending:
            return False  # Coherence: causally ordered writes are in coherence order
        if one_per_orientation and placed and w < placed[-1] and not dependent(placed[-1], w):
            return False  # the same orientation as placing w first: already tried
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
            after_src = [m for m in placed[placed.index(src) + 1:] if dependent(src, m)] if src in placed else placed
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


def _location_consistent(skeleton: Skeleton, rf: dict[int, int], co: frozenset,
                         reads: list[Event], ms: frozenset, before: dict[int, frozenset]) -> bool:
    """SC-per-Location, Atomicity and Causality (``fr ; (po | bar | host)+``) on one location,
    with coherence ``co`` (a relation over its writes; more coherence only adds violations)."""
    later = successors(co)
    edges = {(a, b) for a, b in co if (a, b) in ms}
    for r, w in rf.items():
        if (w, r) in ms:
            edges.add((w, r))
        for overwriter in later.get(w, ()):
            if (r, overwriter) in ms:
                edges.add((r, overwriter))  # fr
    ids = {w for pair in co for w in pair} | set(rf.values()) | {r.eid for r in reads}
    edges |= {(a, b) for a, b in skeleton.po if a in ids and b in ids}
    if not is_acyclic(edges):
        return False
    for r, w in rf.items():
        # Causality axiom (fr ; cause): a write that causally precedes the read is not
        # coherence-after the write the read reads from.
        if any((w, other) in co for other in before[r]):
            return False
    for r, w in skeleton.rmw:
        if r not in rf:
            continue
        src = rf[r]
        # Atomicity: no morally strong write coherence-between an atomic's source and its write.
        if any((r, m) in ms and (m, w) in ms and (m, w) in co for m in later.get(src, ())):
            return False
    return True


def fence_sc_orders(skeleton: Skeleton, rf: dict[int, int], parts: tuple[LocationChoice, ...], prune: bool,
                    clock: Clock | None = None) -> Iterator[tuple[int, ...]]:
    """Total orders of the ``fence.sc`` events for one reads-from choice (``rf``, made of the
    locations' ``parts``), one per orientation of their morally strong pairs that can pass the
    axioms, lazily.

    The model reads the Fence-SC order only through ``sync_fence``, its morally strong pairs
    (:func:`syncverify.model.ptx.fence_sc_order`), and any acyclic orientation of those pairs
    extends to a total order. So the choices are the acyclic orientations of the graph whose
    edges are the morally strong fence pairs (two ``.cta`` fences of different CTAs share no
    edge: they are never ordered against each other), one total order each (a topological order
    of the orientation). With ``prune``:

    * the causality ``cause0`` of this reads-from with *no* Fence-SC order is computed first. Every
      orientation only adds to base causality, hence to causality, to the least coherence
      (:func:`coherence_of` closes it with the causal order of the writes), to ``fr``: every axiom
      but FenceSC is the emptiness or acyclicity of relations that only grow. If one of them (or
      coherence) already fails without the Fence-SC order, every orientation fails too, and none
      is listed;
    * an orientation that closes a cycle with ``cause0`` is dropped: on such a cycle each
      ``cause0`` edge joins two fences, so it is base causality (observation starts at a write),
      and an oriented pair ``(a, b)`` on it has ``(b, a)`` in the base causality of the execution:
      ``sync_fence ; cause`` is reflexive (FenceSC fails). Pairs ``cause0`` orders are therefore
      oriented its way; the others are chosen one at a time, each checked against the closure of
      those made so far.

    Without ``prune`` (brute force), every permutation is listed (:func:`fence_sc_permutations`).
    ``clock``: ticked for each orientation tried (past its deadline it raises)."""
    if not prune:
        yield from fence_sc_permutations(skeleton, clock)
        return
    fences = [e.eid for e in skeleton.events if ptx.sc_fence(e)]
    ms = skeleton.static_memo["morally_strong"]
    if not any((a, b) in ms for i, a in enumerate(fences) for b in fences[i + 1:]):
        yield tuple(fences)  # nothing to orient: every order has the same (empty) sync_fence
        return
    unordered = skeleton.execution(rf, {}, ())
    co = coherence_of(unordered, parts, prune)
    if co is None:
        return
    dependent = ptx.lets(ptx.Depends.COHERENCE)
    unordered = skeleton.execution(rf, {}, (), co_rel=co,
                                   memo={k: v for k, v in unordered._memo.items() if k not in dependent})
    if not all(axiom.holds(unordered) for axiom in ptx.AXIOMS if axiom.name != "FenceSC"):
        return
    cause0 = ptx.causality(unordered)
    n = len(fences)
    # reach[i]: bit mask of the fences cause0 (and then the choices made) orders after fence i (closed).
    reach = [sum(1 << j for j, b in enumerate(fences) if j != i and (a, b) in cause0) for i, a in enumerate(fences)]
    free = [(i, j) for i in range(n) for j in range(i + 1, n)
            if (fences[i], fences[j]) in ms and not (reach[i] >> j & 1 or reach[j] >> i & 1)]

    def orient(k: int, reach: list[int]) -> Iterator[list[int]]:
        if clock is not None:
            clock.tick("while ordering fence.sc events")
        if k == len(free):
            yield reach
            return
        i, j = free[k]
        if reach[i] >> j & 1 or reach[j] >> i & 1:
            yield from orient(k + 1, reach)  # already ordered through the choices made
            return
        for a, b in ((i, j), (j, i)):
            gained = (1 << b) | reach[b]
            yield from orient(k + 1, [m | gained if x == a or m >> a & 1 else m for x, m in enumerate(reach)])

    for closed in orient(0, reach):
        # A topological order of the closed relation: a fence orders strictly more than any after it.
        yield tuple(fences[i] for i in sorted(range(n), key=lambda i: -bin(closed[i]).count("1")))


def fence_sc_permutations(skeleton: Skeleton, clock: Clock | None = None) -> Iterator[tuple[int, ...]]:
    """Every permutation of the ``fence.sc`` events, one per distinct morally strong restriction:
    the brute-force reference of :func:`fence_sc_orders`.

    ``clock``: ticked every 1024 permutations tried (past its deadline it raises)."""
    fences = [e.eid for e in skeleton.events if ptx.sc_fence(e)]
    ms = skeleton.static_memo["morally_strong"]
    seen: set[frozenset] = set()
    for tried, order in enumerate(itertools.permutations(fences)):
        if clock is not None and tried % 1024 == 0:
            clock.tick("while ordering fence.sc events")
        # The execution's Fence-SC order is the morally strong part; orders that agree on it are one.
        restricted = frozenset((order[i], order[j]) for i in range(len(order))
                               for j in range(i + 1, len(order)) if (order[i], order[j]) in ms)
        if restricted not in seen:
            seen.add(restricted)
            yield order


class PartialCausality:
    """A lower bound on base causality while reads-from is chosen one location at a time, to drop
    a partial choice as soon as it breaks an axiom whatever the other locations choose.

    Base causality is ``(po | sync | sync_fence | sync_barrier | host)+`` (:func:`syncverify.model.ptx.base_causality`).
    Synchronizes-with is ``morally-strong & (release-pattern ; observation ; acquire-pattern)``,
    where moral strength and both patterns are fixed by the skeleton, and observation
    (``(morally-strong & rf) | observation ; rmw ; observation``) relates events of one location
    only, fixed by that location's reads-from. So once some locations are chosen, the closure of
    ``po | bar | host`` and their ``sync`` edges is contained in the base causality of every
    execution that extends the choice (Fence-SC order, unknown yet, is left out, which only makes
    the bound smaller), and ``bound | observation ; bound`` is contained in its causality. Coherence
    contains each location's least order (:func:`coherence_of` closes it, never removes a pair), so
    ``fr`` contains ``rf^-1 ; least``. Hence, on the chosen locations:

    * a read that causally precedes the write it reads from breaks Causality (``rf ; cause``);
    * a write coherence-after a read's source that causally precedes the read breaks Causality
      (``fr ; cause``);
    * two writes of one location that causality orders against the location's order make
      coherence cyclic (Coherence), and :func:`coherence_of` would answer None.

    Each holds for the extensions since every relation involved only grows; the explorer then
    checks each complete candidate against every axiom as before. The closure starts from the
    skeleton's :class:`~syncverify.explore.skeleton.StaticCause` (one bit mask per event and launch phase)
    and grows by the usual insertion of an edge into a transitively closed relation.
    """

    def __init__(self, skeleton: Skeleton, program: Program) -> None:
        # (po | bar | host)+ with the initial writes first, one mask per event and launch phase.
        self.masks = skeleton.static_cause.masks  # type: ignore[union-attr]
        memo = skeleton.static_memo
        self.ms = memo["morally_strong"]
        self.released_by: dict[int, list[int]] = {}  # strong write -> the release patterns ending at it
        for x, w in memo["release_pattern"]:
            self.released_by.setdefault(w, []).append(x)
        self.acquired_by: dict[int, list[int]] = {}  # strong read -> the acquire patterns starting at it
        for r, y in memo["acquire_pattern"]:
            self.acquired_by.setdefault(r, []).append(y)
        self.rmw_write_of = dict(skeleton.rmw)

    def observation(self, choice: LocationChoice) -> dict[int, set[int]]:
        """``observation`` of one location's choice, as write -> the reads that observe it."""
        obs: dict[int, set[int]] = {}
        for r, w in choice.rf.items():
            if (w, r) in self.ms:
                obs.setdefault(w, set()).add(r)
        changed = True
        while changed:  # observation ; rmw ; observation, to a fixpoint
            changed = False
            for w in list(obs):
                for r in list(obs[w]):
                    extra = obs.get(self.rmw_write_of.get(r), set()) - obs[w]  # type: ignore[arg-type]
                    if extra:
                        obs[w] |= extra
                        changed = True
        return obs

    def sync_edges(self, observed: dict[int, set[int]]) -> list[tuple[int, int]]:
        """``morally-strong & (release-pattern ; observation ; acquire-pattern)`` of one location."""
        return [(x, y) for w, readers in observed.items() for x in self.released_by.get(w, ())
                for r in readers for y in self.acquired_by.get(r, ()) if (x, y) in self.ms]

    def with_edges(self, masks: list[int], edges: list[tuple[int, int]]) -> list[int]:
        """The closure ``masks`` with ``edges`` added (a new list; ``masks`` is kept for backtracking)."""
        out = masks
        for a, b in edges:
            if out[a] >> b & 1:
                continue
            if out is masks:
                out = list(masks)
            gained = (1 << b) | out[b]
            bit = 1 << a
            for x, m in enumerate(out):
                if x == a or m & bit:
                    out[x] = m | gained
        return out

    @staticmethod
    def breaks(masks: list[int], choice: LocationChoice, observed: dict[int, set[int]]) -> bool:
        """Whether the chosen ``choice`` already breaks Causality or Coherence under ``masks``."""
        def cause(a: int, b: int) -> bool:  # (a, b) in bound | observation ; bound
            return bool(masks[a] >> b & 1) or any(masks[r] >> b & 1 for r in observed.get(a, ()))

        later = successors(choice.least)
        for r, w in choice.rf.items():
            if masks[r] >> w & 1:
                return True  # rf ; cause
            if any(cause(w2, r) for w2 in later.get(w, ())):
                return True  # fr ; cause
        return any(cause(b, a) for a, b in choice.least)  # causality against coherence


def consistent_products(skeleton: Skeleton, program: Program, per_location: list,
                        clock: Clock | None = None, keep=None) -> Iterator[tuple[LocationChoice, ...]]:
    """The product of the locations' choices (``per_location``, each walked as often as needed),
    without the partial products that :class:`PartialCausality` shows to break an axiom.

    Locations are chosen in the order of their first access (the smallest event id), so that
    locations one thread uses one after the other (a flag it waits on and the flag it raises) are
    chosen next to each other and a cycle between them is found before the others multiply it.
    ``clock``: ticked for each choice tried (past its deadline it raises). ``keep``: where given, a
    partial product (None where a location is not chosen yet) it answers False for is not
    extended (the rf-symmetry pruning, :mod:`syncverify.explore.rf_symmetry`)."""
    if not per_location:
        yield ()
        return
    partial = PartialCausality(skeleton, program)
    first_access: dict[str, int] = {}
    for e in skeleton.events:
        if not e.is_init and e.is_memory and not e.ghost:
            first_access.setdefault(e.loc, e.eid)  # type: ignore[arg-type]
    locations = program.locations()
    order = sorted(range(len(per_location)), key=lambda i: first_access.get(locations[i], -1))
    chosen: list[tuple[LocationChoice, dict[int, set[int]]]] = []
    picked: list[LocationChoice | None] = [None] * len(per_location)

    def descend(depth: int, masks: list[int]) -> Iterator[tuple[LocationChoice, ...]]:
        if depth == len(order):
            yield tuple(picked)  # type: ignore[arg-type]
            return
        i = order[depth]
        for choice in per_location[i]:
            if clock is not None:
                clock.tick("while combining the locations' reads-from choices")
            observed = partial.observation(choice)
            grown = partial.with_edges(masks, partial.sync_edges(observed))
            chosen.append((choice, observed))
            if not any(partial.breaks(grown, c, o) for c, o in chosen):
                picked[i] = choice
                if keep is None or keep(picked):
                    yield from descend(depth + 1, grown)
            chosen.pop()
        picked[i] = None

    yield from descend(0, partial.masks)
