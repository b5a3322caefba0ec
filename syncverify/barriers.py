"""CTA barriers: which threads take part, and which threads a barrier that never completes blocks.

Step 3 of the explorer (:mod:`syncverify.explore`). A CTA barrier instance some participant
never reaches blocks the threads waiting at it: their paths are cut there and the execution is a
hang. A launch that hangs never ends, so the launches the host orders after it never start
(:func:`not_started`).
"""

from __future__ import annotations

from collections.abc import Callable

from syncverify.errors import UnsupportedConstruct
from syncverify.paths import Path
from syncverify.program import Barrier, Program


def barrier_participants(program: Program) -> dict[tuple[int, int, int], list[int]]:
    """(gpu, cta, barrier id) -> the threads that take part in that barrier.

    Without a thread count, every thread of the CTA takes part (PTX ISA, ``bar.sync``: "all
    threads in the CTA"), so a thread that never reaches the barrier blocks the others. With a
    count, it must equal the number of threads that use the barrier.
    """
    out: dict[tuple[int, int, int], list[int]] = {}
    counts: dict[tuple[int, int, int], set[int]] = {}
    for t, thread in enumerate(program.threads):
        for ins in thread.instructions:
            if isinstance(ins, Barrier):
                key = (thread.gpu, thread.cta, ins.barrier_id)
                if t not in out.setdefault(key, []):
                    out[key].append(t)
                if ins.count is not None:
                    counts.setdefault(key, set()).add(ins.count)
    for key in list(out):
        if key not in counts:
            out[key] = [t for t, th in enumerate(program.threads) if (th.gpu, th.cta) == key[:2]]
    for key, declared in counts.items():
        for count in declared:
            if count != len(out[key]):
                raise UnsupportedConstruct(
                    f"barrier {key[2]} of CTA {key[1]} on GPU {key[0]} declares {count} threads but "
                    f"{len(out[key])} threads use it; partial participation is not modeled")
    return out


def settle_barriers(
    program: Program,
    combo: tuple[Path, ...],
    participants: dict[tuple[int, int, int], list[int]],
) -> tuple[list[int], dict[int, tuple], list[list[int]]]:
    """Cut threads blocked at a barrier instance that never completes.

    Returns each thread's kept length, the barrier-stuck threads, and the complete instances
    (each a list of (thread, local index)).
    """
    lengths = [len(p.events) if p is not None else 0 for p in combo]  # None: not in play
    stuck: dict[int, tuple] = {}
    while True:
        changed = False
        instances: list[list[tuple[int, int]]] = []
        for (gpu, cta, bid), threads in participants.items():
            arrivals = {
                t: [i for i, e in enumerate(combo[t].events[:lengths[t]]) if e.kind == "B" and e.barrier_id == bid]
                for t in threads
            }
            generation = 0
            while True:
                present = {t: arr[generation] for t, arr in arrivals.items() if generation < len(arr)}
                if not present:
                    break
                if len(present) == len(threads):
                    instances.append(sorted(present.items()))
                else:
                    for t, i in present.items():
                        if combo[t].events[i].sem == "sync" and lengths[t] > i:
                            lengths[t] = i  # blocked here: nothing after it happens
                            stuck[t] = ("barrier", i)
                            changed = True
                    break
                generation += 1
        if not changed:
            return lengths, stuck, instances  # type: ignore[return-value]


def cta_kept_lengths(program: Program, all_paths: list[list[Path]],
                      participants: dict[tuple[int, int, int], list[int]]) -> Callable[[dict[int, int]], dict[int, int]]:
    """For the combination search: how much of each path of one CTA survives its CTA barriers."""
    cache: dict[tuple, dict[int, int]] = {}

    def kept(picks: dict[int, int]) -> dict[int, int]:
        key = tuple(sorted(picks.items()))
        if key not in cache:
            first = program.threads[key[0][0]]
            mine = {k: ts for k, ts in participants.items() if k[:2] == (first.gpu, first.cta)}
            combo: list[Path | None] = [None] * len(program.threads)
            for t, p in picks.items():
                combo[t] = all_paths[t][p]
            lengths, _stuck, _instances = settle_barriers(program, tuple(combo), mine)  # type: ignore[arg-type]
            cache[key] = {t: lengths[t] for t in picks}
        return cache[key]

    return kept


def not_started(program: Program, combo: tuple[Path, ...], stuck: dict[int, tuple]) -> frozenset[int]:
    """The threads of launches the host orders after a launch that hangs: they never start.

    A launch with a thread that waits forever never finishes, so the host never gets past the
    barrier (or the stream never reaches the launch) that orders the next one after it; what
    those threads would have done is not part of the execution (nor of its violations)."""
    hung = {program.threads[t].phase for t in stuck}
    hung |= {program.threads[t].phase for t, p in enumerate(combo) if p.stuck is not None}
    after = program.phases_after()
    later = set().union(*(after.get(phase, frozenset()) for phase in hung))
    return frozenset(t for t, thread in enumerate(program.threads) if thread.phase in later)
