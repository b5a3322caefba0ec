"""Reads-from symmetry: within one combination of paths, one reads-from choice per renaming.

The symmetry of :mod:`syncverify.explore.symmetry` keeps one *combination of paths* per renaming
of interchangeable ranks. Where two such units take the same path, the renaming maps the
combination to itself, and what is left to choose (which write each read reads from, the
orientation of each location's writes) still comes in renamings of each other. Seven ranks that
each ``atom.exch`` 1 into rank 0's flag (``xchg-flag`` at W = 8) make 7! chains of exchanges in
coherence, times which of them the consumer's poll reads: one reads-from choice each, so one
execution each, while up to renaming only the poll's place in the chain tells them apart.

Why it is exact. Let ``T`` be the transpositions of two units of one group (listed by the builder
in :attr:`~syncverify.program.Program.unit_renamings`, with the locations the renaming swaps) that
map this skeleton to itself (:func:`unit_swaps` checks it: the two units' events correspond one
to one, with the same kinds, values, semantics, scopes and launch phases, their locations renamed;
their threads are stuck alike; no other thread runs on their GPUs nor makes a non-ghost access to
a renamed location, so every other thread keeps its path; the initial values, ``rmw``, ``dep`` and
the barrier synchronisation are renamed to themselves). Each such renaming maps every execution
of the skeleton to an execution of the skeleton with the same violation kinds (the argument of
:mod:`syncverify.explore.symmetry`), and so does every product of them: the group ``H`` they
generate. The locations are taken in the program's order; a location that every renaming still
in ``T`` leaves in place keeps only the choices that no renaming in ``T`` makes smaller (in a fixed
order of choices, :func:`_key`), and ``T`` then keeps the renamings that leave the chosen choice
as it is; a location that some renaming moves is not filtered. Every execution ``x`` has a
renaming that is kept: at the first filtered location take ``h`` in ``H`` that makes ``x``'s choice
the least of its orbit under ``H`` (that least choice no transposition makes smaller); ``h(x)`` has
it, and the renamings that leave it as it is generate a group that leaves the choices made so far
as they are, so the same step at the next filtered location keeps them, and so on. Unfiltered
locations, the Fence-SC order and the memory order carry no condition, whatever ``h`` does to them.

``tests/test_reductions_exact.py`` compares the verdicts with and without it (``rf-symmetry`` in
:data:`syncverify.explore.driver.PRUNINGS`) over generated protocols at W = 3 and 4, where a group
has two or three units, and on known answers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from syncverify.explore.location_choices import LocationChoice
from syncverify.explore.skeleton import Skeleton
from syncverify.model.events import INIT_THREAD, Event
from syncverify.program import Program

# What two corresponding events of two units must have alike (their location is renamed instead).
_SAME = ("kind", "value", "values", "sem", "scope", "ghost", "barrier_id", "count", "red_op", "predicate",
         "proxy", "space", "copies", "footprint", "byte", "phase")


@dataclass(frozen=True)
class Swap:
    """One renaming of two units that maps the skeleton to itself: ``events`` maps event ids
    (those it leaves out stay), ``locations`` location names (both ways; the others stay)."""

    events: dict[int, int]
    locations: dict[str, str]

    def moves(self, loc: str) -> bool:
        return self.locations.get(loc, loc) != loc


def unit_swaps(skeleton: Skeleton, program: Program) -> list[Swap]:
    """The renamings of :attr:`Program.unit_renamings` under which ``skeleton`` is itself (the
    conditions are in the module docstring); empty where the program declares none."""
    if not program.unit_renamings:
        return []
    grouped = {unit for group in program.symmetry for unit in group}
    by_thread: dict[int, list[Event]] = {}
    for e in skeleton.events:
        by_thread.setdefault(e.thread, []).append(e)
    # Each thread's non-ghost locations, and each location's initial write (once per skeleton).
    plain = {t: {e.loc for e in events if not e.ghost and e.loc is not None} for t, events in by_thread.items()}
    inits = {e.loc: e.eid for e in by_thread.get(INIT_THREAD, [])}
    swaps = []
    for unit_a, unit_b, pairs in program.unit_renamings:
        if unit_a not in grouped or unit_b not in grouped:
            continue  # the group was dropped (a residency bound): nothing is declared
        names = dict(pairs) | {b: a for a, b in pairs}
        swap = _swap(skeleton, program, (by_thread, plain, inits), unit_a, unit_b, names)
        if swap is not None:
            swaps.append(swap)
    return swaps


def _swap(skeleton: Skeleton, program: Program, index: tuple, unit_a: tuple[int, ...],
          unit_b: tuple[int, ...], names: dict[str, str]) -> Swap | None:
    """The renaming of ``unit_a`` and ``unit_b`` as an event map, or None where it does not map
    ``skeleton`` to itself. ``index``: the skeleton's events by thread, each thread's non-ghost
    locations, each location's initial write."""
    by_thread, plain, inits = index
    def rename(loc: str | None) -> str | None:
        return loc if loc is None else names.get(loc, loc)

    events: dict[int, int] = {}
    gpus = set()
    for ta, tb in zip(unit_a, unit_b):
        ea, eb = by_thread.get(ta, []), by_thread.get(tb, [])
        if len(ea) != len(eb) or (ta in skeleton.stuck) != (tb in skeleton.stuck):
            return None
        if ta in skeleton.stuck and _stuck_renamed(skeleton.stuck[ta], rename) != skeleton.stuck[tb]:
            return None
        pairs = _corresponding(ea, eb, rename)
        if pairs is None:
            return None
        for a, b in pairs:
            events[a.eid], events[b.eid] = b.eid, a.eid
        gpus |= {program.threads[ta].gpu, program.threads[tb].gpu}
    in_units = set(unit_a) | set(unit_b)
    for t, thread in enumerate(program.threads):
        if t in in_units:
            continue
        if thread.gpu in gpus:
            return None  # a thread of a renamed rank outside its unit (a host reset): not renamed with it
        if any(loc in names for loc in plain.get(t, ())):
            return None  # its path may read the two ranks' locations differently
    for loc, other in names.items():
        if program.init.get(loc, 0) != program.init.get(other, 0):
            return None
        if loc in inits and other in inits:
            events[inits[loc]] = inits[other]
    for relation in (skeleton.rmw, skeleton.dep, skeleton.barrier_sync):
        moved = [(a, b) for a, b in relation if a in events or b in events]
        if any((events.get(a, a), events.get(b, b)) not in relation for a, b in moved):
            return None
    return Swap(events, names)


def _corresponding(ea: list[Event], eb: list[Event], rename) -> list[tuple[Event, Event]] | None:
    """The events of two units' threads paired as the renaming pairs them, or None where it does
    not: one to one in program order, except within a run of ghost accesses (tile data) between
    the same two other events, where each pairs with the access of the renamed location (a
    sender writes every rank's copy in rank order, so the renamed order differs). Such a run is
    accepted only where no location occurs twice in it: its accesses carry no reads-from or
    coherence, so their causal edges to other events are the program order and barriers around
    the run, alike for each of them, and accesses of different locations never make a violation
    together: the order within the run tells nothing apart."""
    if len(ea) != len(eb):
        return None
    pairs: list[tuple[Event, Event]] = []
    i = 0
    while i < len(ea):
        j = i
        while j < len(ea) and ea[j].ghost and eb[j].ghost:
            j += 1
        run_a, run_b = (ea[i:j], eb[i:j]) if j > i else ([ea[i]], [eb[i]])
        by_loc = {rename(e.loc): e for e in run_a}
        if len(by_loc) < len(run_a):
            return None
        for b in run_b:
            a = by_loc.pop(b.loc, None)
            if a is None or any(getattr(a, f) != getattr(b, f) for f in _SAME):
                return None
            pairs.append((a, b))
        i = max(j, i + 1)
    return pairs


def _stuck_renamed(reason: tuple, rename) -> tuple:
    """A stuck thread's reason with its blocking reads' locations renamed (a spin's)."""
    if reason and reason[0] == "spin":
        return ("spin", tuple((rename(loc), v) for loc, v in reason[1]))
    return reason


def _key(rf: dict[int, int], ordered: frozenset, events: dict[int, int] | None = None) -> tuple:
    """A location choice as a comparable value (reads-from first), its events renamed by ``events``."""
    return (_rf_key(rf, events), tuple(sorted(_renamed(ordered, events or {}))))


def _rf_smaller(reads: list[int], picked: Sequence[int], events: dict[int, int]) -> bool:
    """Whether renaming by ``events`` makes the reads-from smaller, decided on the reads picked so
    far (False where undecided). The renamed choice has the same reads (the location's accesses
    are renamed among themselves); read ``r`` reads there the renaming of what ``events[r]`` reads
    here, and the reads are compared in id order."""
    at = {r: i for i, r in enumerate(reads[:len(picked)])}
    for i in range(len(picked)):
        j = at.get(events.get(reads[i], reads[i]))
        if j is None:
            return False  # not picked yet: undecided from here on
        theirs = events.get(picked[j], picked[j])
        if theirs != picked[i]:
            return theirs < picked[i]
    return False


def _rf_key(rf: dict[int, int], events: dict[int, int] | None = None) -> tuple:
    return tuple(sorted(_renamed(rf.items(), events or {})))


def _renamed(pairs, events: dict[int, int]):
    return ((events.get(a, a), events.get(b, b)) for a, b in pairs)


class RfSymmetry:
    """The filter of the module docstring over one skeleton's products of location choices."""

    def __init__(self, skeleton: Skeleton, program: Program) -> None:
        self.swaps = unit_swaps(skeleton, program)
        self.locations = program.locations()
        self.index = {loc: i for i, loc in enumerate(self.locations)}
        # The first location some swap moves or renames an access of: every swap leaves each
        # location before it and its choices as they are. Where every swap leaves it in place,
        # its choices are filtered as they are listed (least, rf_is_least); None otherwise.
        # Products are compared location by location, those every swap leaves in place first (any
        # fixed order of the locations will do): the first of them is then filtered with every
        # swap as its choices are listed (least, rf_is_least).
        changes = [self._changes(skeleton, s) for s in self.swaps]
        fixed = {i for i, loc in enumerate(self.locations) if not any(s.moves(loc) for s in self.swaps)}
        changes = [sorted(changed, key=lambda pair: (pair[0] not in fixed, pair[0])) for changed in changes]
        self.first = min((i for changed in changes for i, _j in changed if i in fixed), default=None)
        self._keys: dict[tuple[int, int], tuple] = {}
        # Per swap, in that order, the locations whose choice it can change: (the location's
        # index, the index of the one it is renamed to). At the others it keeps it.
        self.changed = changes

    def _changes(self, skeleton: Skeleton, swap: Swap) -> list[tuple[int, int]]:
        """Where ``swap`` can change a choice: (a location's index, the index of the one it is
        renamed to), in the program's order; a location whose only access that carries a choice is
        its initial write (tile data) has one choice, which every swap keeps."""
        chosen = {loc for loc, (writes, reads) in skeleton.accesses.items() if reads or len(writes) > 1}
        out = []
        for i, loc in enumerate(self.locations):
            other = swap.locations.get(loc, loc)
            if other != loc and (loc in chosen or other in chosen) or any(
                    e.eid in swap.events for side in skeleton.accesses.get(loc, ()) for e in side):
                out.append((i, self.index[other]))
        return out

    def rf_is_least(self, reads: list[int], picked: Sequence[int]) -> bool:
        """Whether no swap makes the first location's reads-from smaller, where ``picked`` are the
        writes the first of ``reads`` (in id order) read from: False once a swap makes every
        choice that completes it smaller (a choice is compared by its reads-from first)."""
        return not any(_rf_smaller(reads, picked, s.events) for s in self.swaps)

    def least(self, choices: Iterator[LocationChoice]) -> Iterator[LocationChoice]:
        """The first location's choices that no swap makes smaller."""
        for choice in choices:
            key = self._key(choice, -1)
            if not any(self._key(choice, k) < key for k in range(len(self.swaps))):
                yield choice

    def admits(self, parts: Sequence[LocationChoice | None]) -> bool:
        """Whether no swap makes the product ``parts`` (one choice per location, in the program's
        order) smaller, compared location by location: those every swap leaves in place first.
        A partial product (None where a location is not chosen yet) is dropped only where a swap
        makes every product that completes it smaller."""
        for k, changed in enumerate(self.changed):
            for i, j in changed:
                if parts[i] is None or parts[j] is None:
                    break  # undecided from here on
                image, key = self._key(parts[j], k), self._key(parts[i], -1)
                if image != key:
                    if image < key:
                        return False
                    break
        return True

    def _key(self, choice: LocationChoice, swap: int) -> tuple:
        """``choice``'s key (:func:`_key`), renamed by swap number ``swap`` (-1: as it is)."""
        memo = (id(choice), swap)
        if memo not in self._keys:
            self._keys[memo] = _key(choice.rf, choice.ordered, self.swaps[swap].events if swap >= 0 else None)
        return self._keys[memo]
