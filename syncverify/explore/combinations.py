"""Which combinations of thread paths can be executions: a search that prunes as it goes.

The explorer picks one path per thread (:mod:`syncverify.explore.driver`, step 3). Most of the product
of the threads' path lists cannot be an execution, for two reasons checked here on *summaries* of
the paths (the values they read and write), before any reads-from or coherence is enumerated:

* **support**: every value a thread reads is the initial value, or is written by another thread
  (or by an earlier write of its own);
* **atomicity** (optional): ``k`` atomics that read the same value ``v`` of a location and write it
  back need ``k`` distinct writes of ``v`` to read from. Two morally strong read-modify-writes
  cannot read from the same write: whichever writes second in coherence order would have the
  other's write between its read and its write (PTX ISA, "Atomicity"). And an atomic cannot read
  a coherence-later write when every write in play is morally strong with it (SC-per-Location).
  So the count is checked only for system-scoped atomics and values whose every possible writer
  is a strong, system-scoped operation (or the initial write), or a weak one of a launch the host
  orders before the atomic's: then the writes it could read are pairwise morally strong with it,
  or coherence-before it. For an ``atom.add`` counter this leaves exactly the orders of the increments
  instead of every way of guessing the values they read.

* **a stuck spin reads the last value** (with ``atomicity``): a thread that spins forever on
  ``(x, v)`` is an execution only if ``v`` is the coherence-last value of ``x`` its launch sees.
  Under the conditions of the count above, no counted atomic of the same launch reads that last
  write (its own write would come after it), so those atomics that read ``v`` need one write of
  ``v`` *more* than their count: the last one. A counter that the producers increment past ``v``
  cannot leave a consumer stuck at ``v``.

* **overwritten by an earlier launch** (with ``atomicity``, on a location every path writes
  with strong system-scoped operations only, checked on complete combinations): there coherence
  orders every two writes and the counted atomics read distinct writes. If as many atomics of
  the launches the host orders before a read's launch read value ``v`` as there are writes of
  ``v`` (the initial write included), every write of ``v`` has an atomic's write coherence-after
  it, and that write happens before the read: reading ``v`` breaks Causality (``fr ; cause``)
  when every write of ``v`` is in those earlier launches. Likewise a stuck spin on ``v`` needs a
  write of ``v`` no atomic of a launch not after the spin's reads (the coherence-last one it
  sees): as many such atomics reading ``v`` as writes of ``v`` leave none. Only reads and spins
  no barrier can cut off are weighed (a cut read never happens).

* **a stuck spin sees its value last, once more** (with ``atomicity``, any location): the
  initial write is coherence-first, so a spin stuck on ``(x, v)`` needs a write of ``v`` its
  launch can see as soon as a write of another value to ``x`` surely happens in its launch or
  one before it (kept whatever the barriers do, in launches that cannot hang):
  :meth:`CombinationSearch.spin_cannot_see_its_value_last`, checked as slots are assigned. A
  consumer that polls every rank's flag is then no longer stuck at a flag its producer always
  raises (all-scatter with ``from = "each"``: the W + 1 paths of each consumer multiplied).

The search assigns threads one at a time (symmetric units in non-decreasing order, as
:func:`syncverify.explore.symmetry.combinations` does) and stops a branch as soon as what is still missing
cannot be written by the threads not yet assigned: each missing value on its own, and the
missing values of one location together against the most writes of it the unassigned threads
can make (a path writes a location only so often, whichever values the search still lacks).
"""

from __future__ import annotations

import functools
import itertools
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from syncverify.explore.bounds import Clock
from syncverify.explore.launch_order import LaunchStarts, unit_runs_as_one
from syncverify.program import Program

Key = tuple[str, int]  # (location, value)


@dataclass(frozen=True)
class PathSummary:
    """What one path reads and writes, as far as combinations are concerned.

    A need is a (location, value) key, or for a read of a merged path (:mod:`syncverify.explore.value_classes`)
    a (location, frozenset of values) key: one write of any of those values supplies it. Merged
    reads are never counted as atomics (the count is a pruning: counting fewer reads prunes less).
    """

    needs: frozenset[Key]  # values read that no earlier write of the same path supplies
    writes: tuple[tuple[Key, int], ...]  # (location, value) -> how many writes of it
    sys_rmw_reads: tuple[tuple[int, Key], ...]  # (event index, key) of system-scoped atomics that write
    weak_writes: frozenset[Key]  # writes that are weak or narrower than system scope
    events_kinds: str = ""  # one letter per event (R, W, F, B): where the barrier arrivals are
    spin_last: frozenset[Key] = frozenset()  # a stuck spin's blocking reads: each must read the last value
    need_at: tuple[tuple[int, Key], ...] = ()  # (event index, key) of each concrete need's reads
    write_at: tuple[tuple[int, Key], ...] = ()  # (event index, key) of each write
    ends: bool = True  # the path terminates (it is not stuck at a spin or a barrier, and it starts)
    started: bool = True  # False: the never-started path (syncverify.explore.launch_order)

    @property
    def spins(self) -> bool:
        """The thread runs and spins forever."""
        return self.started and not self.ends

    @property
    def supplies(self) -> frozenset[Key]:
        return frozenset(k for k, _n in self.writes)


def summarize(path) -> PathSummary:
    """The summary of an :class:`syncverify.explore.path_types.Path`."""
    needs, writes, weak = set(), Counter(), set()
    rmw: list[tuple[int, Key]] = []
    need_at: list[tuple[int, Key]] = []
    write_at: list[tuple[int, Key]] = []
    events = path.events
    for i, e in enumerate(events):
        if e.ghost:
            continue
        if e.kind == "R" and e.values is not None:
            if not any((e.loc, v) in writes for v in e.values):
                needs.add((e.loc, e.values))
            continue
        key = (e.loc, e.value)
        if e.kind == "R":
            if key not in writes:
                needs.add(key)
                need_at.append((i, key))
            if i + 1 < len(events) and events[i + 1].rmw_with_previous and e.scope == "sys":
                rmw.append((i, key))
        elif e.kind == "W":
            writes[key] += 1
            write_at.append((i, key))
            if e.sem == "weak" or e.scope != "sys":
                weak.add(key)
    spin = path.stuck[1] if path.stuck is not None and path.stuck[0] == "spin" else ()
    return PathSummary(frozenset(needs), tuple(sorted(writes.items())), tuple(rmw),
                       frozenset(weak), "".join(e.kind for e in events), frozenset(spin), tuple(need_at),
                       tuple(write_at), path.stuck is None and path.started, path.started)


def _first_barrier(summary: PathSummary) -> int:
    """Where the path first arrives at a CTA barrier (its length if it never does)."""
    at = summary.events_kinds.find("B")
    return len(summary.events_kinds) if at < 0 else at


def need_values(key: tuple) -> tuple[int, ...] | frozenset[int]:
    """The values that supply a need (see :class:`PathSummary`)."""
    return key[1] if isinstance(key[1], frozenset) else (key[1],)


def is_supported(combo: tuple[PathSummary, ...], init: dict[str, int]) -> bool:
    """Every read's value is the initial one or written by another thread (or earlier by itself)."""
    supplies = [c.supplies for c in combo]
    for t, c in enumerate(combo):
        for need in c.needs:
            loc = need[0]
            if any(init.get(loc, 0) == v or any((loc, v) in s for u, s in enumerate(supplies) if u != t)
                   for v in need_values(need)):
                continue
            return False
    return True


class _Slots:
    """The order the search assigns threads in, and what the unassigned ones can still write.

    Capacities are kept per (location, value, phase) so that a need can count only the writes
    its phase can see.
    """

    def __init__(self, program: Program, summaries: list[list[PathSummary]], prefer_writers: bool = False) -> None:
        grouped = {t for group in program.symmetry for unit in group for t in unit}
        def writes(t: int, p: int) -> int:
            return len(summaries[t][p].writes)

        # Options in the order they are tried: when looking for one witness, paths that write
        # more first (the search then finds a combination that supports itself sooner).
        self.order = [sorted(range(len(paths)), key=lambda p, t=t: -writes(t, p)) if prefer_writers
                      else list(range(len(paths))) for t, paths in enumerate(summaries)]
        self.groups = []
        # A unit's options where its launches start alike (launch_order), if some thread may never start.
        unstartable = any(not s.started for paths in summaries for s in paths)
        for group in program.symmetry:
            options = [u for u in itertools.product(*(range(len(summaries[t])) for t in group[0]))
                       if not unstartable or unit_runs_as_one(
                           program, ((t, summaries[t][p].started, summaries[t][p].spins) for t, p in zip(group[0], u)))]
            if prefer_writers:
                options.sort(key=lambda u: -sum(writes(t, p) for t, p in zip(group[0], u)))
            self.groups.append((group, options))
        # A slot is ("free", thread) or ("unit", group index, unit index).
        self.slots: list[tuple] = []
        for g, (group, _options) in enumerate(self.groups):
            self.slots.extend(("unit", g, j) for j in range(len(group)))
        self.slots += [("free", t) for t in range(len(summaries)) if t not in grouped]
        phase = [th.phase for th in program.threads]

        def phased(t: int, p: int) -> Counter:
            return Counter({(loc, v, phase[t]): n for (loc, v), n in summaries[t][p].writes})

        self.free_cap = [_most([phased(t, p) for p in range(len(summaries[t]))]) for t in range(len(summaries))]
        # unit_cap[g][j][u]: the most a unit can write when it takes option u or a later one.
        self.unit_cap = []
        for group, options in self.groups:
            per_unit = []
            for unit in group:
                suffix: list[dict] = [{} for _ in range(len(options) + 1)]
                for u in range(len(options) - 1, -1, -1):
                    here: Counter = Counter()
                    for t, p in zip(unit, options[u]):
                        here.update(phased(t, p))
                    suffix[u] = _most([suffix[u + 1], here])
                per_unit.append(suffix)
            self.unit_cap.append(per_unit)
        # The same per location, all values together: one path writes a location only so often,
        # however many of its values the search still needs (write_budget).
        def per_location(cap: dict) -> dict:
            out: dict = {}
            for (loc, _v, _a), n in cap.items():
                out[loc] = out.get(loc, 0) + n
            return out

        def most_per_location(t: int, ps) -> dict:
            return _most([per_location(phased(t, p)) for p in ps])

        self.free_loc_cap = [most_per_location(t, range(len(summaries[t]))) for t in range(len(summaries))]
        self.unit_loc_cap = []
        for group, options in self.groups:
            per_unit = []
            for unit in group:
                suffix = [{} for _ in range(len(options) + 1)]
                for u in range(len(options) - 1, -1, -1):
                    here: dict = {}
                    for t, p in zip(unit, options[u]):
                        for loc, n in per_location(phased(t, p)).items():
                            here[loc] = here.get(loc, 0) + n
                    suffix[u] = _most([suffix[u + 1], here])
                per_unit.append(suffix)
            self.unit_loc_cap.append(per_unit)
        # tail[i]: what the slots from i on can write together, every unit from its first option
        # (loc_tail: per location); group_end[i]: for a unit's slot, the first slot after its group.
        self.loc_tail = self._suffix_sums(self.free_loc_cap, self.unit_loc_cap)
        self.tail = self._suffix_sums(self.free_cap, self.unit_cap)
        self.group_end = [len(self.slots)] * len(self.slots)
        for i in range(len(self.slots) - 1, -1, -1):
            slot = self.slots[i]
            if slot[0] == "unit":
                nxt = self.slots[i + 1] if i + 1 < len(self.slots) else None
                same = nxt is not None and nxt[0] == "unit" and nxt[1] == slot[1]
                self.group_end[i] = self.group_end[i + 1] if same else i + 1

    def _suffix_sums(self, free: list[dict], units: list) -> list[dict]:
        """For each slot position, the sum over the slots from it on of what each can write."""
        sums: list[dict] = [{} for _ in range(len(self.slots) + 1)]
        for i in range(len(self.slots) - 1, -1, -1):
            slot = self.slots[i]
            cap = free[slot[1]] if slot[0] == "free" else units[slot[1]][slot[2]][0]
            merged = dict(sums[i + 1])
            for k, c in cap.items():
                merged[k] = merged.get(k, 0) + c
            sums[i] = merged
        return sums

    def write_budget(self, loc: str, position: int, lo: int) -> int:
        """The most writes of ``loc`` (any value) the slots from ``position`` on can still add."""
        if position >= len(self.slots):
            return 0
        slot = self.slots[position]
        if slot[0] == "free" or lo == 0:
            return self.loc_tail[position].get(loc, 0)
        g, end = slot[1], self.group_end[position]
        return (sum(self.unit_loc_cap[g][j][lo].get(loc, 0) for j in range(slot[2], slot[2] + end - position))
                + self.loc_tail[end].get(loc, 0))

    def capacity(self, keys: list[tuple], position: int, lo: int, enough: int) -> bool:
        """Can the slots from ``position`` on add ``enough`` writes of ``keys`` (location, value,
        phase)? (``lo``: the option the current group's remaining units cannot go below.)"""
        if position >= len(self.slots):
            return enough <= 0
        slot = self.slots[position]
        if slot[0] == "free" or lo == 0:
            tail = self.tail[position]
            return sum(tail.get(k, 0) for k in keys) >= enough
        g, end = slot[1], self.group_end[position]
        total = sum(self.unit_cap[g][j][lo].get(k, 0) for j in range(slot[2], slot[2] + end - position) for k in keys)
        tail = self.tail[end]
        return total + sum(tail.get(k, 0) for k in keys) >= enough


def _most(counters: list) -> dict:
    out: dict = {}
    for counter in counters:
        for k, c in counter.items():
            if c > out.get(k, 0):
                out[k] = c
    return out


class _Visibility:
    """Which phases' writes a read can take its value from.

    Not those of a phase that comes after the read's in host order. And a host reset thread writes its locations on every path; when it sits, in host order, between
    a write's phase and a read's phase, the write is hidden: reading it would put the reset's
    write coherence-after the write read from and causally before the read, which the Causality
    axiom forbids (``fr ; cause``). ``INIT`` stands for the initial writes, before every phase.
    """

    INIT = "<init>"

    def __init__(self, program: Program, summaries: list[list[PathSummary]], hiding: bool) -> None:
        after = program.phases_after()
        phases = {th.phase for th in program.threads}
        always: dict[str, set[str]] = {}  # phase -> locations some thread of it writes on every path
        for t, paths in enumerate(summaries):
            # A reset that never starts is no exception: the launches after it never start either.
            paths = [s for s in paths if s.started]
            if paths:
                locs = set.intersection(*({loc for (loc, _v), _n in s.writes} for s in paths))
                always.setdefault(program.threads[t].phase, set()).update(locs)
        self.hidden: dict[tuple[str, str], set[str]] = {}  # (reader phase, location) -> hidden phases
        for b, locs in (always.items() if hiding else ()):
            for loc in locs:
                for c in after.get(b, ()):
                    hidden = self.hidden.setdefault((c, loc), set())
                    hidden.add(self.INIT)
                    hidden.update(a for a in phases if b in after.get(a, ()))

        self.later = {(a, b) for a, bs in after.items() for b in bs}

    def sees(self, reader_phase: str, loc: str, writer_phase: str) -> bool:
        if (reader_phase, writer_phase) in self.later:
            return False  # the read causally precedes the write: reading it breaks Causality
        return writer_phase not in self.hidden.get((reader_phase, loc), ())


def readable_ceilings(program: Program, summaries: list[list[PathSummary]],
                      ceiling: Callable[[frozenset[str] | None, bool], dict[str, int | None]]) -> dict[tuple[str, str], int]:
    """(reader phase, location) -> the largest value a read of that phase can return there.

    A read sees only the writes of the phases :class:`_Visibility` lets it see; when every
    phase among those whose threads read the location sees no more than the reader does, values
    there only ever come from those writes, and ``ceiling(phases, with_init)`` (the explorer's
    :func:`~syncverify.explore.value_domain.value_ceiling`) bounds them. A host reset thus caps epoch 1's
    counter at what epoch 1 adds, where the domain (built without hiding) lets it continue from
    epoch 0's values.
    """
    seen = _Visibility(program, summaries, True)
    phases = {th.phase for th in program.threads}
    readers: dict[str, set[str]] = {}  # location -> phases with a thread that reads it
    for t, paths in enumerate(summaries):
        for s in paths:
            for loc, _v in s.needs:  # a value or a set of values: only the location matters here
                readers.setdefault(loc, set()).add(program.threads[t].phase)
    out: dict[tuple[str, str], int] = {}
    for loc, reading in readers.items():
        visible = {c: frozenset(a for a in phases | {_Visibility.INIT} if seen.sees(c, loc, a)) for c in reading}
        for c in reading:
            if all(visible[a] <= visible[c] for a in reading if a in visible[c]):
                top = ceiling(visible[c] - {_Visibility.INIT}, _Visibility.INIT in visible[c]).get(loc)
                if top is not None:
                    out[(c, loc)] = top
    return out


def supported_combinations(
    program: Program,
    summaries: list[list[PathSummary]],
    *,
    atomicity: bool,
    hiding: bool | None = None,
    must_write: Key | None = None,
    clock: Clock | None = None,
    kept_lengths: Callable[[dict[int, int]], dict[int, int]] | None = None,
) -> Iterator[tuple[int, ...]]:
    """Path indices, one per thread, of every combination that passes the checks above.

    A read may only take its value from a write its phase can see (:class:`_Visibility`);
    ``hiding`` (default: as ``atomicity``) also hides writes behind a host reset. The value
    domain turns both off: it grows from the initial values only, and a read that will in the
    end read a later value reads an early one (often a hidden one) while the domain grows.
    ``must_write``: only combinations in which some path writes that (location, value) (the
    value domain asks for one witness per value). Symmetric units take non-decreasing options,
    so each combination is one representative of its renamings. ``clock``: checked every 64
    partial combinations; past its deadline it raises the ``timeout``
    :class:`~syncverify.explore.bounds.LimitHit`.

    The atomicity count only counts an atomic once every thread of its CTA has a path: a CTA
    barrier that some thread never reaches cuts the others' paths there, and what is cut must not
    count. ``kept_lengths`` maps one CTA's {thread: path index} to {thread: events kept}; without
    it, atomics after a thread's first barrier arrival are never counted.
    """
    search = CombinationSearch(program, summaries, atomicity=atomicity,
                               hiding=atomicity if hiding is None else hiding, must_write=must_write,
                               clock=clock, kept_lengths=kept_lengths)
    yield from search.run()


class CombinationSearch:
    """The search of :func:`supported_combinations`: slots (threads, or units of a symmetry group)
    are assigned one at a time; what the assigned paths write, still need and count is kept here
    and undone on the way back, and a branch stops as soon as :meth:`feasible` fails.
    """

    def __init__(self, program: Program, summaries: list[list[PathSummary]], *, atomicity: bool, hiding: bool,
                 must_write: Key | None, clock: Clock | None,
                 kept_lengths: Callable[[dict[int, int]], dict[int, int]] | None) -> None:
        self.summaries = summaries
        self.atomicity = atomicity
        self.must_write = must_write
        self.clock = clock
        self.kept_lengths = kept_lengths
        self.slots = _Slots(program, summaries, prefer_writers=must_write is not None)
        self.seen = _Visibility(program, summaries, hiding)
        self.init = program.init
        self.phase = [th.phase for th in program.threads]
        self.after = program.phases_after()
        phase = self.phase
        self.writer_phases: dict[Key, set[str]] = {}
        for t, paths in enumerate(summaries):
            for s in paths:
                for key, _n in s.writes:
                    self.writer_phases.setdefault(key, set()).add(phase[t])
        # Keys with a writer that is not strong and system-scoped: the atomicity count does not apply.
        # A weak write the atomic could be coherence-before is what breaks the count; one of a launch
        # the host orders before the atomic's cannot be (Coherence keeps causal order).
        self.weak_phases: dict[Key, set[str]] = {}
        for t, paths in enumerate(summaries):
            for s in paths:
                for key in s.weak_writes:
                    self.weak_phases.setdefault(key, set()).add(phase[t])
        self.cta_of = [(th.gpu, th.cta) for th in program.threads]
        self.cta_threads: dict[tuple[int, int], list[int]] = {}
        for t, c in enumerate(self.cta_of):
            self.cta_threads.setdefault(c, []).append(t)
        # Locations every path writes with strong system-scoped operations only: there coherence
        # orders every two writes, and the counted atomics of different launches can be weighed
        # against each other (last_write_possible).
        self.strong_only = {loc for paths in summaries for s in paths for (loc, _v), _n in s.writes}
        self.strong_only -= {key[0] for key in self.weak_phases}
        self.before = {b: {a for a, bs in self.after.items() if b in bs} for b in set(phase)}
        # Answers that depend on their arguments only, asked again and again: cached per search.
        self.counted_key = functools.cache(self._counted_key)
        self.visible = functools.cache(self._visible)
        self.initially = functools.cache(self._initially)
        self.assigned = functools.cache(self._assigned)
        # The search's state: what the assigned slots chose, write, need and count.
        self.chosen: list[int] = [-1] * len(summaries)
        self.totals: Counter = Counter()  # writes of each (location, value, phase) by the assigned paths
        self.own: list[dict] = [{} for _ in summaries]
        self.rmw: Counter = Counter()  # (location, value, reader phase) -> counted atomics
        self.spins: Counter = Counter()  # (location, value, phase) -> assigned stuck spins that need it last
        self.pending: list[tuple[int, Key]] = []  # needs not yet written by another assigned thread
        self.counted: dict[tuple[int, int], list[tuple]] = {}  # per complete CTA, the atomics it counts
        self.nodes = 0  # partial combinations tried
        self.kept_of: dict[tuple[int, int], dict[int, int]] = {}  # per complete CTA, surely_kept
        self.spinning: list[int] = []  # assigned threads whose path is a stuck spin
        self.threads_of: dict[str, list[int]] = {}
        for t, ph in enumerate(phase):
            self.threads_of.setdefault(ph, []).append(t)
        self.threads_before = {b: [t for a in sorted(self.before[b]) for t in self.threads_of.get(a, ())]
                               for b in set(phase)}
        # Which launches the assigned paths start, where some thread may never start (only the
        # explorer's final search has never-started paths; the value domain's have none).
        unstartable = any(not s.started for paths in summaries for s in paths)
        self.launches = LaunchStarts(program) if unstartable else None

    def run(self) -> Iterator[tuple[int, ...]]:
        """Every supported combination, as path indices."""
        if self.feasible(0, 0):
            yield from self.search(0, 0)

    def _counted_key(self, key: Key, reader: str) -> bool:
        """Whether the atomicity count applies to atomics of phase ``reader`` that read ``key``.
        Only weak writes the reader can see matter: one it cannot read is no shared source."""
        return all(reader in self.after.get(a, ()) for a in self.weak_phases.get(key, ())
                   if self.seen.sees(reader, key[0], a))

    def _visible(self, reader: str, key: tuple) -> tuple[tuple, ...]:
        """The (location, value, phase) keys of the writes of ``key`` (a need, or a counted
        (location, value)) that ``reader`` can see."""
        loc = key[0]
        return tuple((loc, v, a) for v in need_values(key) for a in self.writer_phases.get((loc, v), ())
                     if self.seen.sees(reader, loc, a))

    def _initially(self, reader: str, key: tuple) -> bool:
        """Whether the initial value supplies ``key`` to a read of phase ``reader``."""
        return self.init.get(key[0], 0) in need_values(key) and self.seen.sees(reader, key[0], _Visibility.INIT)

    def _assigned(self, t: int, p: int) -> tuple[dict, tuple, tuple]:
        """What assigning path ``p`` to thread ``t`` adds: its writes as (location, value, phase)
        counts, its needs the initial value does not meet, its counted stuck-spin keys."""
        s = self.summaries[t][p]
        phase = self.phase[t]
        writes = {(loc, v, phase): n for (loc, v), n in s.writes}
        needs = tuple((t, key) for key in s.needs if not self.initially(phase, key))
        spin_keys = tuple((key[0], key[1], phase) for key in s.spin_last
                          if self.counted_key(key, phase)) if self.atomicity else ()
        return writes, needs, spin_keys

    def surely_kept(self, c: tuple[int, int]) -> dict[int, int]:
        """How many events of each of the CTA's assigned paths happen whatever its barriers do."""
        picks = {t: self.chosen[t] for t in self.cta_threads[c]}
        if self.kept_lengths is not None:
            return self.kept_lengths(picks)
        return {t: _first_barrier(self.summaries[t][p]) for t, p in picks.items()}

    def count_cta(self, c: tuple[int, int]) -> list[tuple]:
        """The (location, value, phase) keys of the atomics a complete CTA counts."""
        keep = self.kept_of[c]
        phase, chosen = self.phase, self.chosen
        return [(key[0], key[1], phase[t]) for t in self.cta_threads[c]
                for i, key in self.summaries[t][chosen[t]].sys_rmw_reads
                if i < keep[t] and self.counted_key(key, phase[t])]

    def met(self, t: int, key: Key) -> bool:
        """Whether another assigned thread writes what thread ``t`` needs (``key``)."""
        totals, own = self.totals, self.own[t]
        return any(totals[k] - own.get(k, 0) > 0 for k in self.visible(self.phase[t], key))

    def feasible(self, position: int, lo: int) -> bool:
        """Whether the slots from ``position`` on can still write what is missing.

        What the unassigned slots must still write, per (location, value): each check below
        weighs one need against what the slots can write; together, the writes of different
        values of one location must also fit in what the slots can write there at all."""
        slots, totals, visible, phase = self.slots, self.totals, self.visible, self.phase
        missing: dict[Key, int] = {}
        for t, key in self.pending:
            if not slots.capacity(visible(phase[t], key), position, lo, 1):
                return False
            if not isinstance(key[1], frozenset):
                missing.setdefault(key, 1)
        for (loc, v, reader), count in self.rmw.items():
            if count:
                keys = visible(reader, (loc, v))
                have = sum(totals[k] for k in keys) + self.initially(reader, (loc, v))
                if self.spins[(loc, v, reader)]:
                    count += 1  # the last write of v, which no counted atomic of the launch reads
                if count > have:
                    if not slots.capacity(keys, position, lo, count - have):
                        return False
                    missing[(loc, v)] = max(missing.get((loc, v), 0), count - have)
        if len(missing) > 1:
            per_loc: dict[str, int] = {}
            for (loc, _v), n in missing.items():
                per_loc[loc] = per_loc.get(loc, 0) + n
            for loc, n in per_loc.items():
                if n > 1 and slots.write_budget(loc, position, lo) < n:
                    return False
        must_write = self.must_write
        if must_write is not None:
            keys = [(must_write[0], must_write[1], a) for a in self.writer_phases.get(must_write, ())]
            if not any(totals[k] for k in keys):
                return slots.capacity(keys, position, lo, 1)
        return True

    def descend(self, picks: list[tuple[int, int]], position: int, u: int) -> Iterator[tuple[int, ...]]:
        """Assign ``picks`` ((thread, path) pairs of the slot at ``position``, option ``u`` of a
        unit), search on from the next slot if that stays feasible, and undo the assignment."""
        self.nodes += 1
        if self.clock is not None and self.nodes % 64 == 0:
            self.clock.check(f"while combining thread paths, after {self.nodes} partial combinations of thread paths")
        chosen, totals, own, spins, pending = self.chosen, self.totals, self.own, self.spins, self.pending
        if self.launches is not None and not self.start_alike(picks):
            return  # a launch half started, or started behind a launch that hangs (launch_order)
        saved = list(pending)
        completed = []
        for t, p in picks:
            chosen[t] = p
            writes, needs, spin_keys = self.assigned(t, p)
            own[t] = writes
            for k, n in writes.items():
                totals[k] += n
            pending.extend(needs)
            for k in spin_keys:
                spins[k] += 1
        if self.atomicity:
            for c in {self.cta_of[t] for t, _p in picks}:
                if all(chosen[t] >= 0 for t in self.cta_threads[c]):
                    self.kept_of[c] = self.surely_kept(c)
                    self.counted[c] = self.count_cta(c)
                    for k in self.counted[c]:
                        self.rmw[k] += 1
                    completed.append(c)
        spinners = 0
        for t, p in picks:
            if self.summaries[t][p].spin_last:
                self.spinning.append(t)
                spinners += 1
        pending[:] = [(t, key) for t, key in pending if not self.met(t, key)]
        nxt = position + 1
        slots = self.slots.slots
        lo = u if nxt < len(slots) and slots[nxt][0] == "unit" and slots[nxt][2] > 0 else 0
        if self.feasible(nxt, lo) and not (self.spinning and self.spin_cannot_see_its_value_last(nxt, lo)) \
                and not (self.launches is not None and self.launches.unstarted
                         and self.unstarted_without_a_hang_before(final=False)):
            yield from self.search(nxt, lo)
        for c in completed:
            del self.kept_of[c]
            for k in self.counted.pop(c):
                self.rmw[k] -= 1
        del self.spinning[len(self.spinning) - spinners:]
        for t, p in picks:
            writes, _needs, spin_keys = self.assigned(t, p)
            for k, n in writes.items():
                totals[k] -= n
            own[t] = {}
            chosen[t] = -1
            for k in spin_keys:
                spins[k] -= 1
            if self.launches is not None:
                s = self.summaries[t][p]
                self.launches.remove(self.phase[t], s.started, s.spins)
        pending[:] = saved

    def start_alike(self, picks: list[tuple[int, int]]) -> bool:
        """Count ``picks`` in :attr:`launches` if they agree with the assigned paths on which
        launches start (rules 1 and 2 of :mod:`syncverify.explore.launch_order`); else count nothing."""
        launches, phase, summaries = self.launches, self.phase, self.summaries
        assert launches is not None
        for k, (t, p) in enumerate(picks):
            s = summaries[t][p]
            if not launches.agrees(phase[t], s.started, s.spins):
                for u, q in picks[:k]:
                    launches.remove(phase[u], summaries[u][q].started, summaries[u][q].spins)
                return False
            launches.add(phase[t], s.started, s.spins)
        return True

    def unstarted_without_a_hang_before(self, *, final: bool) -> bool:
        """Whether a launch whose assigned threads never start surely has no launch before it
        that hangs (rule 3 of :mod:`syncverify.explore.launch_order`). ``final``: every slot is assigned."""
        assert self.launches is not None
        return any(n and not any(self.may_never_exit(u, final) for u in self.threads_before[b])
                   for b, n in self.launches.unstarted.items())

    def may_never_exit(self, t: int, final: bool) -> bool:
        """Whether thread ``t`` may never exit, as far as the assignment tells: it is not assigned
        yet, its path spins forever or never starts (behind a hang of its own), or a barrier
        blocks it in some resolution of its CTA's barriers (not known before the CTA is complete)."""
        if self.chosen[t] < 0:
            return True
        s = self.summaries[t][self.chosen[t]]
        if not s.ends:
            return True
        c = self.cta_of[t]
        keep = self.kept_of.get(c)
        if keep is None:
            if not final:
                return True
            keep = self.surely_kept(c)
        return keep[t] < len(s.events_kinds)

    def last_write_possible(self) -> bool:
        """Whether every assigned read of a strong-only location can read a write that is not
        hidden, and every stuck spin there can see its value last (see the module docstring)."""
        strong_only, rmw, phase = self.strong_only, self.rmw, self.phase
        writes_of: Counter = Counter()
        writer_launches: dict[Key, set[str]] = {}  # the launches whose assigned paths write (loc, v)
        for (loc, v, a), n in self.totals.items():
            if loc in strong_only and n > 0:
                writes_of[(loc, v)] += n
                writer_launches.setdefault((loc, v), set()).add(a)
        for loc in strong_only:
            writes_of[(loc, self.init.get(loc, 0))] += 1  # the initial write
        keep: dict[int, int] = {}
        for c in self.cta_threads:
            keep.update(self.surely_kept(c))
        for t, p in enumerate(self.chosen):
            s = self.summaries[t][p]
            b = phase[t]
            for i, (loc, v) in s.need_at:
                if loc not in strong_only or i >= keep[t]:
                    continue  # a read a barrier may cut off need not happen
                hiding = self.before[b]
                if writer_launches.get((loc, v), set()) <= hiding:
                    # Every write of v is in a launch the host orders before this read's.
                    if sum(rmw[(loc, v, a)] for a in hiding) >= writes_of[(loc, v)]:
                        return False
            for loc, v in s.spin_last if keep[t] == len(s.events_kinds) else ():
                if loc in strong_only:
                    later = self.after.get(b, frozenset())
                    if sum(n for (l2, v2, a), n in rmw.items() if l2 == loc and v2 == v and a not in later) \
                            >= writes_of[(loc, v)]:
                        return False
        return True

    def spin_cannot_see_its_value_last(self, position: int, lo: int) -> bool:
        """Whether an assigned stuck spin can never see its blocking value last, whatever the
        slots from ``position`` on take (see the module docstring).

        A spin stuck on ``(x, v)`` is a hang only if ``v`` is the coherence-last value of ``x``
        its launch sees. The initial write is coherence-first, so ``v`` needs a write of ``v``
        by a path its launch can see, as soon as some write of another value to ``x`` surely
        happens: one in the spin's own launch or in a launch the host orders before it, kept
        whatever the barriers do (its CTA complete). Only spins whose launch surely starts are
        weighed: every thread of the launches before it assigned, terminating and kept whole
        (a launch after a hang never starts, and its stuck spin is then no hang). Each fact used
        stays true as more slots are assigned, so a branch it stops has no combination that
        passes; the slots not yet assigned may still write ``v`` (:meth:`_Slots.capacity`)."""
        phase, chosen, summaries, keep = self.phase, self.chosen, self.summaries, self.kept_of
        for t in self.spinning:
            c = self.cta_of[t]
            s = summaries[t][chosen[t]]
            if c not in keep or keep[c][t] != len(s.events_kinds):
                continue  # the spin may be cut off by a barrier (or is not known yet not to be)
            home = phase[t]
            before = self.threads_before[home]
            if not all(self.cta_of[u] in keep and summaries[u][chosen[u]].ends
                       and keep[self.cta_of[u]][u] == len(summaries[u][chosen[u]].events_kinds) for u in before):
                continue  # a launch before this one may hang, or is not assigned yet
            later = self.after.get(home, frozenset())
            for loc, v in s.spin_last:
                if any((loc, v) in summaries[u][q].supplies for u, q in enumerate(chosen)
                       if q >= 0 and phase[u] not in later):
                    continue
                if self.slots.capacity([(loc, v, a) for a in self.writer_phases.get((loc, v), ()) if a not in later],
                                       position, lo, 1):
                    continue
                if any(key[0] == loc and key[1] != v and i < keep[self.cta_of[u]][u]
                       for u in self.threads_of[home] + before if self.cta_of[u] in keep
                       for i, key in summaries[u][chosen[u]].write_at):
                    return True
        return False

    def search(self, position: int, lo: int) -> Iterator[tuple[int, ...]]:
        """The combinations that extend the current assignment from the slot at ``position`` on
        (``lo``: the first option the current group's next unit may take)."""
        slots = self.slots
        if position == len(slots.slots):
            if self.atomicity and self.strong_only and not self.last_write_possible():
                return
            if self.launches is not None and self.unstarted_without_a_hang_before(final=True):
                return
            yield tuple(self.chosen)
            return
        slot = slots.slots[position]
        if slot[0] == "free":
            for p in slots.order[slot[1]]:
                yield from self.descend([(slot[1], p)], position, 0)
            return
        g, j = slot[1], slot[2]
        group, options = slots.groups[g]
        for u in range(lo if j > 0 else 0, len(options)):
            yield from self.descend(list(zip(group[j], options[u])), position, u)
