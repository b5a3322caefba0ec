"""The explorer: every execution the PTX model allows for a finite program.

How it works (herd's recipe, with the pruning that keeps it fast):

1. **Thread paths.** Each thread is run on its own, every read returning each value its location
   can hold (the *value domain*, grown to a fixpoint from the initial values and every value some
   write can produce; for a counter, one literal and system-scoped literal increments, that
   literal plus every subset of the increments, :func:`~syncverify.explore.value_domain.value_candidates`). A path is the thread's
   events, its final registers, and whether it ends.
2. **Spin loops are cut, not unrolled** (the "spin-assume" transformation of GenMC/Dartagnan):
   when a thread returns to a program point with the same registers and has made no write that
   changes memory since it was last there, the iteration in between read values that let it
   neither exit nor change anything. That iteration is dropped. The path is kept as a *stuck*
   path, with the reads of the dropped iteration as its blocking reads: in an execution where each
   blocking read's value is its location's coherence-last value, the thread spins forever: a hang.
   If the values are not the last ones, the thread would eventually read a newer value, so the
   stuck path is not an execution of its own. An atomic whose write leaves the value unchanged
   (``atom.add r, x, 0``) counts as no change.
   States are compared on their *live* registers only (:func:`~syncverify.explore.liveness.live_registers`): a poll register
   that the next iteration overwrites before reading does not make two loop heads differ. So an
   iteration that reads, fails its exit test and makes no write at all is cut the same way, even
   when it read a value the previous iteration did not. The executions this drops are those in
   which a poll loop failed some iterations and exited later; each is the same as an execution in
   which those iterations never ran, with fewer events: only reads and fences go, which removes
   happens-before edges and adds none, so every race, unwritten or stale read of the dropped
   execution is also in the kept one, and the kept one is consistent (every axiom is acyclicity
   or emptiness of relations that only shrink when reads and fences go).
   **Value classes** (:mod:`syncverify.explore.value_classes`): paths that differ only in values that
   nothing but the read itself depends on (a poll register dead once the loop exits, an
   exchange's unused old value) are one path whose read carries the set of values; reads-from
   then picks the value. Exact, and off for brute force.
3. **Combinations.** One path per thread, found by a search that prunes as it assigns threads
   (:mod:`syncverify.explore.combinations`): every value read must be writable by a thread its launch can see,
   and morally strong atomics that read one value need as many distinct writes of it (so an
   ``atom.add`` counter's read values follow from the order of the increments instead of being
   guessed). Symmetric ranks take their paths in non-decreasing order. A CTA barrier instance some
   participant never reaches blocks the threads waiting at it; their paths are cut there and the
   blocked execution is a hang. A launch that hangs never ends, so the launches the host orders
   after it never start: their threads have no events in that execution
   (:func:`~syncverify.explore.launch_order.not_started`), and the search gives them a path that
   says so (:data:`~syncverify.explore.launch_order.NEVER_STARTED`).
4. **Choices.** For each location independently, the explorer enumerates which write each read
   reads from (same value, not from its own thread's future, not hidden behind a write that
   causally precedes the read) and how its morally strong writes are ordered (Coherence2), and
   keeps only choices that pass the per-location axioms (SC-per-Location, Atomicity) with the
   coherence they force at least. Only ``(po | bar | host)+`` and moral strength within the
   location are needed for that, so the costlier relations are computed only for combinations
   that pass every location. The choices are produced lazily (a bound stops the listing). For
   each product over locations and each Fence-SC order, causality is computed (it does not depend
   on coherence), and coherence is the chosen orientation closed with the causal order of the
   writes: the least one Coherence and Coherence2 allow, since every other axiom only gets harder
   to pass with more coherence. Writes neither orders stay unordered (the ISA's partial
   coherence). One execution is built per distinct final value (a coherence-maximal write) and
   per last value a stuck spin needs, and checked against the remaining axioms. The locations
   are chosen one at a time with a lower bound on causality grown from the choices made so far
   (:class:`~syncverify.explore.location_choices.PartialCausality`): a partial choice that already breaks
   Causality or Coherence is dropped with everything it would extend. Barrier groupings that
   order the other events alike are kept once (:func:`~syncverify.explore.barriers.settle_barriers`), and
   a candidate alike to an execution already reported (same reads-from, Fence-SC order and final
   memory: :func:`~syncverify.explore.location_choices.alike_key`) is not built again.

The map (GenMC keeps the driver, the execution graph and each model's consistency checks apart):

========================  ==================================================================
step                      module of :mod:`syncverify.explore`
========================  ==================================================================
1-2 thread paths          ``thread_paths`` (the search), ``instructions``, ``liveness``,
                          ``value_domain``, ``value_classes``
3 combinations            ``combinations``, ``symmetry``, ``barriers``, ``launch_order``
4 choices                 ``skeleton`` (the execution graph), ``location_choices`` (the PTX
                          model's per-location choices and the consistency filter)
bounds and the clock      ``bounds``
========================  ==================================================================

Nothing is silently bounded: a limit that is hit is reported as :attr:`ExplorationResult.limit_hit`,
and the answer built on it is UNKNOWN. :func:`brute_force` runs steps 1-3 the same way but
enumerates every reads-from and coherence choice with no pruning; the tests check both agree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace

from syncverify.explore.barriers import barrier_users, cta_kept_lengths, iter_outcomes
from syncverify.explore.bounds import (
    DEFAULT_MAX_DOMAIN,
    DEFAULT_MAX_EXECUTIONS,
    DEFAULT_MAX_STEPS,
    DEFAULT_PROGRESS_INTERVAL,
    Clock,
    LimitHit,
)
from syncverify.explore.combinations import is_supported, readable_ceilings, summarize, supported_combinations
from syncverify.explore.launch_order import not_started, runs_as_picked, with_never_started
from syncverify.explore.liveness import live_registers
from syncverify.explore.location_choices import (
    LocationChoice,
    alike_key,
    coherence_of,
    consistent_products,
    fence_sc_orders,
    is_execution,
    location_choices,
    memory_orders,
)
from syncverify.explore.rf_symmetry import RfSymmetry
from syncverify.explore.skeleton import Skeleton, StaticCause, build_skeleton, host_pairs, static_relations
from syncverify.explore.symmetry import affordable, combinations
from syncverify.explore.thread_paths import Path, thread_paths
from syncverify.explore.value_classes import merge_value_classes, shared_by_units, with_cut_reads_fixed
from syncverify.explore.value_domain import value_candidates, value_ceiling, value_domain
from syncverify.model import ptx
from syncverify.model.events import Execution
from syncverify.program import Program

__all__ = [
    "DEFAULT_MAX_DOMAIN", "DEFAULT_MAX_EXECUTIONS", "DEFAULT_MAX_STEPS", "DEFAULT_PROGRESS_INTERVAL",
    "Clock", "ExplorationResult", "LimitHit", "Progress",
    "brute_force", "candidate_executions", "explore", "live_registers", "thread_paths", "value_candidates",
    "value_ceiling", "value_domain",
]


@dataclass(frozen=True)
class Progress:
    """How far an exploration is: what a progress callback receives.

    ``violations`` counts, per kind, the executions that showed it (filled in by
    :func:`syncverify.verdicts.check.check`; the explorer alone knows no violations).
    """

    executions: int  # consistent executions so far (terminating or hanging)
    candidates: int  # candidate executions checked against the axioms so far
    seconds: float  # since the exploration started
    violations: Mapping[str, int] = field(default_factory=dict)


@dataclass
class ExplorationResult:
    """What the explorer found. ``limit_hit`` is None when the exploration was exhaustive."""

    program: Program
    executions: list[Execution]  # consistent executions in which every thread terminates
    hangs: list[Execution]  # consistent executions in which some thread never terminates
    candidates: int = 0  # candidate executions checked against the axioms
    complete_count: int = 0  # consistent terminating executions (kept or not)
    hang_count: int = 0  # consistent executions that hang
    limit_hit: str | None = None
    limit_detail: str = ""
    seconds: float = 0.0
    stopped_early: bool = False  # on_execution asked to stop (e.g. at the first violation)

    @property
    def can_hang(self) -> bool:
        return self.hang_count > 0

    @property
    def outcomes(self) -> set[tuple[frozenset, frozenset]]:
        """Distinct final states (registers, memory) of the terminating executions."""
        return {(frozenset(x.final_registers.items()), frozenset(x.final_memory.items())) for x in self.executions}


#: The pruning steps of :func:`explore` that ``without`` can turn off one by one (``prune=False``
#: turns off all of them and more): the exactness tests compare the verdicts with and without each.
#: ``every-kind`` is the check's (:mod:`syncverify.verdicts.kinds`): the explorer ignores it.
PRUNINGS: tuple[str, ...] = ("value-classes", "ceilings", "combination-search", "barrier-orders",
                             "partial-causality", "alike", "every-kind", "rf-symmetry")


def candidate_executions(
    program: Program,
    *,
    prune: bool = True,
    max_steps: int = DEFAULT_MAX_STEPS,
    max_domain: int = DEFAULT_MAX_DOMAIN,
    clock: Clock | None = None,
    without: frozenset[str] = frozenset(),
) -> Iterator[tuple[Skeleton, Execution]]:
    """Yield candidate executions (not yet checked against the global axioms: :func:`is_execution`).

    ``clock``: the exploration's :class:`~syncverify.explore.bounds.Clock` (default: no time
    bound), asked by every phase; past its deadline the ``timeout`` :class:`LimitHit` is raised.
    ``without``: prunings of :data:`PRUNINGS` not to make (with ``prune``).
    """
    unknown = set(without) - set(PRUNINGS)
    if unknown:
        raise ValueError(f"unknown prunings {sorted(unknown)}; known: {', '.join(PRUNINGS)}")
    clock = clock if clock is not None else Clock()
    _domain, all_paths = value_domain(program, max_steps=max_steps, max_domain=max_domain, clock=clock,
                                      prune=prune, classes="value-classes" not in without)
    participants = barrier_users(program)
    locations = program.locations()
    seen_cut: set = set()
    if prune:
        summaries = [[summarize(p) for p in paths] for paths in all_paths]
        # Paths that read a value their launch can never see go (see readable_ceilings).
        tops = readable_ceilings(program, summaries, lambda ph, init: value_ceiling(program, ph, init))
        if tops and "ceilings" not in without:
            all_paths = [[q for q in (below_ceilings(p, tops, th.phase) for p in paths) if q is not None]
                         for th, paths in zip(program.threads, all_paths)]
        # Paths that differ only in values nothing depends on become one (exact: value_classes);
        # reads of a location several symmetric units share keep their values (shared_by_units).
        shared = shared_by_units(program)
        if "value-classes" not in without:
            all_paths = [merge_value_classes(paths, program.observed_registers, shared) for paths in all_paths]
        # A launch after a launch that may hang may never start: its threads get a path that
        # says so (launch_order); the search weighs it as nothing read, written or counted.
        real_counts = [len(paths) for paths in all_paths]
        if "combination-search" not in without:
            all_paths = with_never_started(program, all_paths)
        summaries = [[summarize(p) for p in paths] for paths in all_paths]
        kept = cta_kept_lengths(program, all_paths, participants)
        searched = affordable(program, real_counts)  # a unit's options grow by one per launch at most
        combos: Iterator[tuple[Path, ...]] = (
            tuple(all_paths[t][p] for t, p in enumerate(picks))
            for picks in supported_combinations(searched, summaries, atomicity=True, clock=clock, kept_lengths=kept))
    if not prune or "combination-search" in without:
        summary = {id(p): summarize(p) for paths in all_paths for p in paths}
        combos = (combo for combo in combinations(program, all_paths)
                  if is_supported(tuple(summary[id(p)] for p in combo), program.init))
    # Each way its barriers resolve (with pruning, one per order they put between other events).
    for combo, outcome in iter_outcomes(program, combos, participants, by_order=prune and "barrier-orders" not in without):
        clock.tick("while combining thread paths")
        lengths, stuck, instances = list(outcome.lengths), outcome.stuck, outcome.instances
        stopped = not_started(program, combo, stuck) | unissued_copies(program, combo, lengths)
        if not runs_as_picked(combo, stopped):
            continue  # a launch the search picked as never started starts in this resolution
        if stopped:
            lengths = [0 if t in stopped else n for t, n in enumerate(lengths)]
            stuck = {t: why for t, why in stuck.items() if t not in stopped}
            instances = [i for i in instances if i[0][0] not in stopped]
        if stuck or stopped:
            combo = tuple(p if t in stopped else with_cut_reads_fixed(p, n)
                          for t, (p, n) in enumerate(zip(combo, lengths)))
            # Paths cut short (at a barrier, or before they start) repeat: build each once.
            key = tuple(None if t in stopped else (tuple(p.events[:n]), p.registers, p.stuck)
                        for t, (p, n) in enumerate(zip(combo, lengths)))
            if key in seen_cut:
                continue
            seen_cut.add(key)
        yield from _skeleton_candidates(program, combo, lengths, stuck, instances, stopped, locations, prune, clock,
                                        without)


def unissued_copies(program: Program, combo: tuple[Path, ...], lengths: list[int]) -> frozenset[int]:
    """The agent threads of bulk copies their issuing thread does not issue on its path (a copy
    in a branch not taken, or after where the path stops): they never run."""
    agents = program.agent_copies
    if not agents:
        return frozenset()
    issued = {e.copies[0] for t, (path, n) in enumerate(zip(combo, lengths)) if t not in agents
              for e in path.events[:n] if e.kind == "A" and e.sem == "issue"}
    return frozenset(t for t, copy in agents.items() if copy not in issued)


def below_ceilings(path: Path, tops: dict[tuple[str, str], int], phase: str) -> Path | None:
    """``path`` without the values its reads can never see (above ``tops``, see
    :func:`~syncverify.explore.combinations.readable_ceilings`): None if a read has none left. A read of a value
    class keeps the values at or below the ceiling."""
    events = list(path.events)
    for i, e in enumerate(events):
        if e.kind != "R" or e.ghost or (phase, e.loc) not in tops:
            continue
        top = tops[(phase, e.loc)]
        if e.values is None:
            if e.value > top:  # type: ignore[operator]
                return None
        elif max(e.values) > top:
            kept = frozenset(v for v in e.values if v <= top)
            if not kept:
                return None
            events[i] = replace(e, values=kept)
    return path if events == list(path.events) else replace(path, events=tuple(events))


def _skeleton_candidates(program: Program, combo: tuple[Path, ...], lengths: list[int], stuck: dict[int, tuple],
                         instances: list, stopped: frozenset[int], locations: tuple[str, ...], prune: bool,
                         clock: Clock, without: frozenset[str] = frozenset()) -> Iterator[tuple[Skeleton, Execution]]:
    """The candidate executions of one combination of paths, cut as its barriers resolve."""
    skeleton = build_skeleton(program, combo, lengths, stuck, instances, stopped)
    skeleton.static_cause = StaticCause(skeleton, program)
    # One reads-from choice per renaming of units that took the same paths (rf_symmetry says why).
    symmetric = RfSymmetry(skeleton, program) if prune and "rf-symmetry" not in without else None
    first = symmetric.first if symmetric is not None else None
    per_location = [Replayable(location_choices(skeleton, loc, prune, program, clock) if i != first else
                               symmetric.least(location_choices(  # type: ignore[union-attr]
                                   skeleton, loc, prune, program, clock, keep_rf=symmetric.rf_is_least)))  # type: ignore[union-attr]
                    for i, loc in enumerate(locations)]
    if not all(choices.nonempty() for choices in per_location):
        return  # some location has no consistent choice: the costlier relations are never needed
    skeleton.host_order = host_pairs(program, skeleton.events)  # only now: most combinations
    static_relations(skeleton)  # fail a location above
    # Partial choices that already break Causality or Coherence are dropped as they are made.
    keep = symmetric.admits if symmetric is not None and symmetric.swaps else None
    products = (consistent_products(skeleton, program, per_location, clock, keep)
                if prune and "partial-causality" not in without else lazy_product(per_location))
    if symmetric is not None and symmetric.swaps:
        products = (parts for parts in products if symmetric.admits(parts))
    for parts in products:
        rf: dict[int, int] = {}
        for part in parts:
            rf.update(part.rf)
        for order in fence_sc_orders(skeleton, rf, parts, prune, clock):  # lazily, per reads-from choice
            yield from _with_coherence(skeleton, program, rf, parts, order, prune, clock, "alike" not in without)


def _with_coherence(skeleton: Skeleton, program: Program, rf: dict[int, int], parts: tuple[LocationChoice, ...],
                    fence_order: tuple[int, ...], prune: bool, clock: Clock,
                    alike: bool = True) -> Iterator[tuple[Skeleton, Execution]]:
    """The candidate executions of one reads-from and Fence-SC choice: coherence as the locations'
    orders and causality make it (:func:`~syncverify.explore.location_choices.coherence_of`), and each memory
    order that makes a different final value or stuck spin observable.

    Causality does not depend on coherence, so the relations computed for one reads-from and
    Fence-SC choice are kept on the skeleton (``relations_by_choice``) for the other orientations
    of its writes, all but those :mod:`syncverify.model.ptx` declares coherence-dependent; with
    pruning, a memory order whose execution would be alike (:func:`~syncverify.explore.location_choices.alike_key`)
    to one already reported consistent is not built."""
    choice = (frozenset(rf.items()), fence_order)
    known = skeleton.relations_by_choice if prune else {}
    probe = skeleton.execution(rf, {}, fence_order, memo=known.get(choice))
    co = coherence_of(probe, parts, prune)
    memo = {k: v for k, v in probe._memo.items() if k not in COHERENCE_DEPENDENT}
    if prune:
        known[choice] = memo
    if co is None:
        return  # causality orders two writes against the chosen orientation: Coherence fails
    reported = skeleton.reported if alike else None
    events = probe.events
    for memory in memory_orders(probe, co, program, skeleton, clock):
        if reported and (choice[0], fence_order, frozenset(
                (loc, events[order[-1]].value) for loc, order in memory.items() if order)) in reported:
            continue  # alike to an execution already reported
        yield skeleton, skeleton.execution(rf, memory, fence_order, co_rel=co, memo=memo)


# Relations of syncverify.model.ptx whose value depends on coherence: never reused across coherence choices.
COHERENCE_DEPENDENT = frozenset(ptx.lets(ptx.Depends.COHERENCE))


class Replayable:
    """An iterator whose items are kept as they come, so that it can be walked again (each
    location's choices are walked once per choice of the locations before it) without listing
    them all before the first execution is checked (a bound must be able to stop the listing)."""

    def __init__(self, items: Iterator) -> None:
        self.items = items
        self.kept: list = []
        self.done = False

    def nonempty(self) -> bool:
        """Whether there is at least one item (fetches at most one)."""
        return bool(self.kept) or self._fetch()

    def _fetch(self) -> bool:
        if self.done:
            return False
        try:
            self.kept.append(next(self.items))
        except StopIteration:
            self.done = True
            return False
        return True

    def __iter__(self) -> Iterator:
        i = 0
        while i < len(self.kept) or self._fetch():
            yield self.kept[i]
            i += 1


def lazy_product(factors: list[Replayable]) -> Iterator[tuple]:
    """``itertools.product`` over :class:`Replayable` factors, without listing any factor first."""
    if not factors:
        yield ()
        return
    for head in factors[0]:
        for rest in lazy_product(factors[1:]):
            yield (head,) + rest


def explore(
    program: Program,
    *,
    max_executions: int = DEFAULT_MAX_EXECUTIONS,
    timeout: float | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    max_domain: int = DEFAULT_MAX_DOMAIN,
    prune: bool = True,
    on_execution: Callable[[Execution], bool | None] | None = None,
    keep: bool = True,
    progress: Callable[[Progress], None] | None = None,
    progress_interval: float = DEFAULT_PROGRESS_INTERVAL,
    without: frozenset[str] = frozenset(),
) -> ExplorationResult:
    """Every consistent execution of ``program`` under the PTX model.

    Parameters
    ----------
    max_executions, timeout, max_steps, max_domain
        Bounds. Hitting one stops the exploration and sets ``limit_hit``; never silent.
    prune
        ``False`` enumerates every reads-from and coherence choice (see :func:`brute_force`).
    on_execution
        Called with each consistent execution (terminating or hanging) as it is found. When it
        returns True (exactly) the exploration stops there (``stopped_early``; not exhaustive, but no bound
        was hit: what was found is real).
    keep
        Keep the executions in the result (turn off for large explorations counted by callback).
    progress, progress_interval
        Called with a :class:`Progress` at most every ``progress_interval`` seconds while the
        search enumerates executions.
    without
        Prunings of :data:`PRUNINGS` not to make: each is exact, and the tests
        (``tests/test_reductions_exact.py``) compare the verdicts with and without it.

    Examples
    --------
    >>> from syncverify.program import Program, Thread, Store, Load
    >>> p = Program("W+R", (Thread("P0", 0, 0, (Store("x", 1),)), Thread("P1", 0, 1, (Load("r0", "x"),))))
    >>> sorted(x.final_registers[("P1", "r0")] for x in explore(p).executions)
    [0, 1]
    """
    result = ExplorationResult(program, [], [])

    def report() -> None:
        progress(Progress(result.complete_count + result.hang_count, result.candidates,  # type: ignore[misc]
                          clock.elapsed()))

    clock = Clock(timeout, report if progress is not None else None, progress_interval)
    try:
        for skeleton, x in candidate_executions(program, prune=prune, max_steps=max_steps,
                                                max_domain=max_domain, clock=clock, without=without):
            result.candidates += 1
            clock.tick(f"after {result.candidates} candidate executions")
            alike = prune and "alike" not in without
            if alike:
                # One execution per key: the others differ only in coherence (alike_key says why).
                key = alike_key(skeleton, x, program)
                if key in skeleton.reported:
                    continue
            if not is_execution(skeleton, x, program):
                continue
            if alike:
                skeleton.reported.add(key)
            stop = on_execution is not None and on_execution(x) is True  # only an explicit True stops
            if x.is_complete:
                result.complete_count += 1
                if keep:
                    result.executions.append(x)
            else:
                result.hang_count += 1
                if keep:
                    result.hangs.append(x)
            if stop:
                result.stopped_early = True
                break
            if result.complete_count + result.hang_count >= max_executions:
                raise LimitHit("max-executions", f"{max_executions} consistent execution{'' if max_executions == 1 else 's'}")
    except LimitHit as hit:
        result.limit_hit, result.limit_detail = hit.limit, hit.detail
    result.seconds = clock.elapsed()
    return result


def brute_force(program: Program, **options) -> ExplorationResult:
    """:func:`explore` with no pruning: every reads-from choice, every strict partial order of each
    location's writes as coherence, every memory order of it, checked against every axiom."""
    return explore(program, prune=False, **options)
