"""Named CTA barriers: which arrivals complete which phase, and which threads wait forever.

Step 3 of the explorer (:mod:`syncverify.explore.driver`). Sources, PTX ISA 8.x, ``bar``/``barrier``:

* "Each CTA instance has sixteen barriers numbered 0..15"; arrivals at different barriers never
  match.
* "Operand b specifies the number of threads participating in the barrier. If no thread count is
  specified, all threads in the CTA participate in the barrier."
* "barrier{.cta}.arrive does not cause any waiting by the executing threads; it simply marks a
  thread's arrival at the barrier." ``bar.sync`` and ``bar.red`` wait for the other participants.
* "Once the barrier count is reached, ... the barrier is reinitialized so that it can be
  immediately reused": arrivals are grouped into successive *phases* of ``count`` arrivals.
* ``bar.red``: "The c predicate (or its complement) from all threads ... are combined using the
  specified reduction operator ... the final value is written to the destination register in all
  threads waiting at the barrier" (``popc``: how many are true; ``and``/``or``: all/any).

Modeling choices:

1. *Participants without a count* are the threads of the CTA that use the barrier (a barrier
   instruction with that constant id anywhere in their code, or an arrival with that id on their
   path), as Dartagnan reads ``bar.cta.sync a``. When those are fewer than the CTA's threads the
   ISA would wait for the others forever; the litmus parser warns about it once per file.
2. *Which arrivals form a phase* depends on the order in which threads arrive. For one
   combination of thread paths, :func:`barrier_outcomes` tries every order (per CTA, with
   memoisation) and returns each distinct grouping: the phases (who synchronizes with whom) and
   the threads left waiting (a hang). A phase takes the count of its first arrival.
3. A thread's arrivals follow its program order; after a ``sync`` or ``red`` it arrives again
   only once that phase has completed. The order of phases against memory accesses is not
   checked (a grouping in which a later phase's arrival causally precedes an earlier phase's
   arrival is kept): this can only add executions, never hide one.
4. A ``bar.red`` result is guessed on the thread's path (:func:`arrive`) and a grouping
   is kept only if every ``red`` of a phase received the reduction of that phase's ``red``
   predicates.

A thread blocked at a barrier never exits, so its launch never ends, and the launches the host
orders after it never start (:mod:`syncverify.explore.launch_order`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from syncverify.errors import UnsupportedConstruct
from syncverify.explore.instructions import operand_taint, operand_value
from syncverify.explore.path_types import LocalEvent, Path, PathState
from syncverify.model.relations import reach_masks
from syncverify.program import Barrier, Program, Thread

CtaKey = tuple[int, int]  # (gpu, cta)


@dataclass(frozen=True)
class Outcome:
    """One way the barriers of a combination resolve.

    ``lengths``: each thread's kept events; ``stuck``: the barrier-blocked threads with
    ``("barrier", local index, barrier id, count, arrived)``; ``instances``: the completed
    phases, each a tuple of (thread, local index) arrivals.
    """

    lengths: tuple[int, ...]
    stuck: dict[int, tuple]
    instances: tuple[tuple[tuple[int, int], ...], ...]


def barrier_users(program: Program) -> dict[tuple[int, int, int], frozenset[int]]:
    """(gpu, cta, barrier id) -> the threads whose code has a barrier with that constant id."""
    out: dict[tuple[int, int, int], set[int]] = {}
    for t, thread in enumerate(program.threads):
        for ins in thread.instructions:
            if isinstance(ins, Barrier) and isinstance(ins.barrier_id, int):
                out.setdefault((thread.gpu, thread.cta, ins.barrier_id), set()).add(t)
    return {key: frozenset(ts) for key, ts in out.items()}


def _reduce(op: str, predicates: list[int]) -> int:
    """``bar.red``'s reduction: ``popc`` counts the true predicates, ``and``/``or`` are all/any."""
    if op == "popc":
        return sum(predicates)
    if op == "and":
        return int(all(predicates))
    return int(any(predicates))


def _signature(arrival: LocalEvent) -> tuple:
    """What of an arrival decides how the barriers resolve."""
    return (arrival.barrier_id, arrival.count, arrival.sem, arrival.red_op, arrival.predicate, arrival.value)


@functools.lru_cache(maxsize=4096)
def _resolutions(signatures: tuple[tuple[tuple, ...], ...], users: tuple[tuple[int, int], ...],
                 ) -> tuple[tuple[tuple[tuple[int, tuple[int, int, int]], ...], frozenset], ...]:
    """:func:`_cta_outcomes` over arrival signatures only (thread slots and arrival numbers), so
    the many combinations of paths that arrive alike share one search."""
    threads = list(range(len(signatures)))
    arrivals = {k: [(n, LocalEvent("B", value=sig[5], sem=sig[2], barrier_id=sig[0], count=sig[1],
                                   red_op=sig[3], predicate=sig[4])) for n, sig in enumerate(sigs)]
                for k, sigs in enumerate(signatures)}
    return tuple((tuple(sorted(blocked.items())), done)
                 for blocked, done in _cta_outcomes(threads, arrivals, dict(users)))


def _cta_outcomes(threads: list[int], arrivals: dict[int, list[tuple[int, LocalEvent]]],
                  users: dict[int, int]) -> list[tuple[dict[int, tuple[int, int, int]], frozenset]]:
    """Every distinct resolution of one CTA's barriers: the blocked threads, each with (arrivals
    made, the count its phase waits for, arrivals that phase got), and the completed phases.

    An explicit search over the states (arrivals made per thread, who waits, the open phase of
    each barrier as (thread slot, arrival number) pairs), each visited once."""
    def event(member: tuple[int, int]) -> tuple[int, LocalEvent]:
        return arrivals[threads[member[0]]][member[1]]

    def need_of(ev: LocalEvent) -> int:
        return ev.count if ev.count is not None else users[ev.barrier_id]

    results: dict[tuple, tuple[dict[int, tuple[int, int, int]], frozenset]] = {}
    seen: set = set()
    stack = [(tuple(0 for _ in threads), tuple(False for _ in threads), (), frozenset())]
    while stack:
        state = stack.pop()
        if state in seen:
            continue
        seen.add(state)
        pos, waiting, open_phases, done = state
        moved = False
        for k, t in enumerate(threads):
            if waiting[k] or pos[k] >= len(arrivals[t]):
                continue
            moved = True
            ev = arrivals[t][pos[k]][1]
            phases = dict(open_phases)
            # An open phase: the count of its first arrival, and its arrivals in a canonical order
            # (the order they came in does not matter, and keeping it would multiply the states).
            need, before = phases.get(ev.barrier_id, (need_of(ev), ()))
            members = tuple(sorted(before + ((k, pos[k]),)))
            new_pos = pos[:k] + (pos[k] + 1,) + pos[k + 1:]
            new_wait = waiting[:k] + (ev.sem != "arrive",) + waiting[k + 1:]
            new_done = done
            if len(members) >= need:
                reds = [event(m)[1] for m in members if event(m)[1].sem == "red"]
                if reds and any(e.value != _reduce(reds[0].red_op, [e.predicate for e in reds]) for e in reds):  # type: ignore[misc]
                    continue  # a guessed bar.red result this grouping does not give
                phases.pop(ev.barrier_id, None)
                released = {m[0] for m in members}
                new_wait = tuple(w and j not in released for j, w in enumerate(new_wait))
                new_done = done | {tuple(sorted((threads[m[0]], event(m)[0]) for m in members))}
            else:
                phases[ev.barrier_id] = (need, members)
            stack.append((new_pos, new_wait, tuple(sorted(phases.items())), new_done))
        if not moved:
            open_of = {m[0]: phase for _b, phase in open_phases for m in phase[1]}
            blocked = {threads[k]: (pos[k], open_of[k][0], len(open_of[k][1]))
                       for k in range(len(threads)) if waiting[k]}
            results[(tuple(sorted(blocked.items())), done)] = (blocked, done)
    return list(results.values())


def settle_barriers(program: Program, combo: tuple[Path | None, ...],
                    users: dict[tuple[int, int, int], frozenset[int]], *, by_order: bool = False) -> list[Outcome]:
    """Every way the CTA barriers of one combination of paths resolve (choice 2 above).

    ``combo[t]`` is None for a thread not in play. Threads blocked at a barrier phase that never
    completes are cut there (the arrival and everything after it are dropped). ``by_order``: keep
    one outcome per order the barriers put between the other events (:func:`_same_order`)."""
    lengths = [len(p.events) if p is not None else 0 for p in combo]
    by_cta: dict[CtaKey, list[int]] = {}
    for t, (thread, path) in enumerate(zip(program.threads, combo)):
        if path is not None:
            by_cta.setdefault((thread.gpu, thread.cta), []).append(t)
    outcomes = [Outcome(tuple(lengths), {}, ())]
    for (gpu, cta), threads in by_cta.items():
        arrivals = {t: [(i, e) for i, e in enumerate(combo[t].events) if e.kind == "B"]  # type: ignore[union-attr]
                    for t in threads}
        if not any(arrivals.values()):
            continue
        ids = sorted({e.barrier_id for arr in arrivals.values() for _i, e in arr})
        users_here = tuple((b, len(users.get((gpu, cta, b), frozenset())  # type: ignore[operator]
                                   | {t for t in threads if any(e.barrier_id == b for _i, e in arrivals[t])}))
                           for b in ids)
        signatures = tuple(tuple(_signature(e) for _i, e in arrivals[t]) for t in threads)
        # This CTA's resolutions alone first, told apart by what they do to this CTA's threads
        # (lengths, stuck threads, and synchronization or order among its events): no barrier
        # edge and no program order leaves a CTA, so two resolutions alike there are alike in
        # every combination with the other CTAs' (the keys of _distinct and _same_order
        # restricted to one CTA), and only distinct ones enter the product.
        mine_combo = tuple(p if t in threads else None for t, p in enumerate(combo))
        mine = []
        for blocked, done in _resolutions(signatures, users_here):
            # Back from thread slots and arrival numbers to threads and local event indices.
            phases = tuple(sorted(tuple(sorted((threads[k], arrivals[threads[k]][n][0]) for k, n in phase))
                                  for phase in done))
            cut = [lengths[t] if t in threads else 0 for t in range(len(lengths))]
            stuck = {}
            for k, (made, need, arrived) in blocked:
                t = threads[k]
                i, ev = arrivals[t][made - 1]
                cut[t] = i  # blocked here: the arrival and nothing after it happens
                stuck[t] = ("barrier", i, ev.barrier_id, need, arrived)
            mine.append(Outcome(tuple(cut), stuck, phases))
        mine = _distinct(mine, mine_combo)
        if by_order and len(mine) > 1:
            mine = _same_order(mine, mine_combo)
        outcomes = [Outcome(tuple(o.lengths[t] if t in threads else base.lengths[t] for t in range(len(lengths))),
                            {**base.stuck, **o.stuck}, base.instances + o.instances)
                    for base in outcomes for o in mine]
    return outcomes


def _same_order(outcomes: list[Outcome], combo: tuple[Path | None, ...]) -> list[Outcome]:
    """One outcome per order between the events other than barrier arrivals.

    Groupings that differ in which arrivals share a phase can still order every memory access
    and fence alike: ``(po | bar)+`` restricted to the events that are not arrivals is the same
    (a count of 2 among four threads pairs them several ways; often only the pairing of arrivals
    with nothing after them differs). No axiom and no verdict can tell such outcomes apart:

    * the model sees a barrier only through ``sync_barrier`` in base causality (:mod:`syncverify.model.ptx`).
      Arrivals enter and leave base causality only through program order, other arrivals and the
      host order (synchronizes-with and Fence-SC order relate reads, writes and fences), so a
      causality path between two other events that passes through arrivals is a ``(po | bar)+``
      path between them, or a program-order or host-order pair of them (the host order relates
      whole launches, and an initial write precedes every event). Base causality and causality
      restricted to the other events are therefore the same for both groupings;
    * every axiom relates memory events and fences only (No-Thin-Air's ``dep`` edges leave reads,
      so no cycle passes through an arrival), and the verdicts (:mod:`syncverify.verdicts.check`: races,
      what a tile read can see, hangs) look at memory events, their causality and the blocked
      threads, which are part of the key with each thread's kept length;
    * the explorer's per-location choices use ``(po | bar | host)+`` between memory events only.

    So both give the same candidate executions up to the arrivals' own edges, and one is kept.
    The brute-force reference keeps every grouping (``by_order`` off), and the tests compare.
    """
    seen: dict[tuple, Outcome] = {}
    for o in outcomes:
        nodes = [(t, i) for t, p in enumerate(combo) if p is not None for i in range(o.lengths[t])]
        index = {node: k for k, node in enumerate(nodes)}
        successor_lists: list[list[int]] = [[] for _ in nodes]
        for k, (t, i) in enumerate(nodes):
            if i + 1 < o.lengths[t]:
                successor_lists[k].append(index[(t, i + 1)])
        for phase in o.instances:
            for a in phase:
                for b in phase:
                    if a != b and combo[b[0]].events[b[1]].sem != "arrive":  # type: ignore[union-attr]
                        successor_lists[index[a]].append(index[b])
        others = 0
        for k, (t, i) in enumerate(nodes):
            if combo[t].events[i].kind != "B":  # type: ignore[union-attr]
                others |= 1 << k
        masks = reach_masks(successor_lists)
        order = tuple(masks[k] & others for k in range(len(nodes)) if others >> k & 1)
        seen.setdefault((o.lengths, tuple(sorted(o.stuck.items())), order), o)
    return list(seen.values())


def _distinct(outcomes: list[Outcome], combo: tuple[Path | None, ...]) -> list[Outcome]:
    """One outcome per execution skeleton: groupings that differ only in which ``bar.arrive`` s
    share a phase no ``bar.sync``/``bar.red`` waits in give the same synchronization, so the same
    candidate executions."""
    seen: dict[tuple, Outcome] = {}
    for o in outcomes:
        waits = frozenset((a, b) for phase in o.instances for a in phase for b in phase
                          if a != b and combo[b[0]].events[b[1]].sem != "arrive")  # type: ignore[union-attr]
        seen.setdefault((o.lengths, tuple(sorted(o.stuck.items())), waits), o)
    return list(seen.values())


def cta_kept_lengths(program: Program, all_paths: list[list[Path]],
                     users: dict[tuple[int, int, int], frozenset[int]]) -> Callable[[dict[int, int]], dict[int, int]]:
    """For the combination search: how much of each path of one CTA survives its barriers in
    every resolution (the least over them: the search counts only atomics that surely happen)."""
    cache: dict[tuple, dict[int, int]] = {}

    def kept(picks: dict[int, int]) -> dict[int, int]:
        key = tuple(sorted(picks.items()))
        if key not in cache:
            combo: list[Path | None] = [None] * len(program.threads)
            for t, p in picks.items():
                combo[t] = all_paths[t][p]
            outcomes = settle_barriers(program, tuple(combo), users)
            cache[key] = {t: min((o.lengths[t] for o in outcomes), default=0) for t in picks}
        return cache[key]

    return kept


def iter_outcomes(program: Program, combos: Iterator[tuple[Path, ...]],
                  users: dict[tuple[int, int, int], frozenset[int]], *,
                  by_order: bool = False) -> Iterator[tuple[tuple[Path, ...], Outcome]]:
    """Each combination with each way its barriers resolve (``by_order``: see :func:`settle_barriers`)."""
    for combo in combos:
        for outcome in settle_barriers(program, combo, users, by_order=by_order):
            yield combo, outcome


def arrive(ins: Barrier, state: PathState, text: str, line: int | None, thread: Thread,
            cta_threads: int) -> list[PathState]:
    """The states after a barrier arrival: one, or for ``bar.red`` one per result it may receive.

    The id and count are read from their registers here (PTX ISA, ``bar``: "Source operand a
    specifies a logical barrier resource as an immediate constant or register with value 0
    through 15"); a value outside that range, or a count that is not positive, is refused."""
    regs = state.regs
    barrier_id = operand_value(ins.barrier_id, regs)
    count = None if ins.count is None else operand_value(ins.count, regs)
    who = f"thread {thread.name}" + (f" (line {line})" if line else "")
    if barrier_id not in range(16):
        raise UnsupportedConstruct(f"{who}: barrier id {ins.barrier_id} is {barrier_id} on some execution; "
                                   f"PTX has barriers 0 to 15")
    if count is not None and count <= 0:
        raise UnsupportedConstruct(f"{who}: barrier thread count {ins.count} is {count} on some execution; "
                                   f"it must be positive")
    deps = state.ctrl | operand_taint(ins.barrier_id, state.taint) | (
        frozenset() if ins.count is None else operand_taint(ins.count, state.taint))
    pred = None
    if ins.kind == "red":
        pred = int(operand_value(ins.predicate, regs) != 0) ^ int(ins.negate)  # type: ignore[arg-type]
        deps |= operand_taint(ins.predicate, state.taint)  # type: ignore[arg-type]
    results = [None] if ins.kind != "red" else list(range(cta_threads + 1)) if ins.op == "popc" else [0, 1]
    out = []
    for result in results:
        ev = LocalEvent("B", value=result, sem=ins.kind, barrier_id=barrier_id, count=count, red_op=ins.op,
                        predicate=pred, deps=deps, label=text, line=line)
        new = replace(state, pc=state.pc + 1, events=state.events + (ev,))
        if ins.dst is not None:
            # The result depends on every participant's predicate, not on a read of this thread.
            new = replace(new, regs={**regs, ins.dst: result}, taint={**state.taint, ins.dst: deps})
        out.append(new)
    return out
