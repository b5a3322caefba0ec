"""A launch after a hang never starts: which threads of a combination run at all.

Step 3 of the explorer (:mod:`syncverify.explore.driver`). Sources:

* CUDA's stream semantics, "operations within a stream are executed in the order they were
  issued" (CUDA C Programming Guide, Streams), read as :mod:`syncverify.streams` reads them: a
  launch (or stream operation) starts once the one before it on its stream has completed (the
  per-rank streams of ``--launches per-rank-stream``). The host's synchronization between calls
  (``--launches host-barrier``) returns only once every launch before it has completed, and the
  host issues the next launches after it. Both are ``Program.host_order``, closed transitively
  (:meth:`~syncverify.program.Program.phases_after`).
* A grid completes when every thread of it has exited; a thread that spins forever, or waits at a
  CTA barrier phase that never completes (:mod:`syncverify.explore.barriers`), never exits.

So in an execution where some launch hangs, every launch the host orders after it never starts:
its threads have no events, their registers keep their initial values, and nothing they would
have done is a violation. :func:`not_started` says which threads those are for one combination
of paths and one way its barriers resolve; it is the one definition, used by the driver for
every combination, however found.

**The never-started path.** The combination search (:mod:`syncverify.explore.combinations`) weighs
what each path reads, writes and counts, and used to weigh the paths of threads that the driver
would then cut out as not started: their reads needed writes and their atomics counted against
the others', so on per-rank streams with several calls, where every execution hangs in call 0,
it could reject every combination ("no execution at all"). A thread of a launch ordered after a
launch that can hang therefore gets one more path, :data:`NEVER_STARTED`, with no events, which
the search weighs as what it is (nothing read, written or counted), and the search keeps a
launch's threads and the hangs before it in agreement (:class:`LaunchStarts`):

1. the threads of one launch all run or none does (a launch starts as a whole);
2. a launch that runs has no launch before it whose thread's path spins forever (that launch
   hangs in every execution of the combination: the later one never starts);
3. a launch that never starts has a launch before it that may hang: one of its threads spins
   forever, or waits at a barrier in some resolution (checked once the threads before it are
   assigned, and per resolution by the driver: :func:`runs_as_picked`).

Why this is exact. Every execution of the program comes from a combination of real paths and a
resolution of its barriers, the threads of :func:`not_started` cut to nothing. Let the same
combination have :data:`NEVER_STARTED` for exactly those threads. A CTA lies in one launch, so
the other CTAs' barriers resolve as before and the same launches hang (some launch that hangs is
itself started: the host order is acyclic), so :func:`not_started` names the same threads and
the execution is the same. It keeps 1 (whole launches are cut), 2 (a thread that runs has no
launch before it that hangs) and 3 (each cut launch has one before it that hangs in this
resolution). Its events are exactly the paths the search weighs, so the search's checks, each
sound for the events of an execution, keep it. Conversely, what 2 and 3 drop is no other
execution: behind a thread that spins forever a running thread is cut to nothing anyway (the
execution is the never-started combination's), and a never-started thread with no hang before
it is no execution's (its launch starts, and runs every thread); the driver drops the latter per
resolution too. Behind a barrier that blocks in one resolution only, the real paths stay in the
search, and the driver builds what they cut to once (its cut combinations are kept once).
``tests/test_reductions_exact.py`` compares the verdicts with and without the search
(``combination-search``: every product of real paths, cut by :func:`not_started`), which never
sees the never-started path.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from syncverify.explore.path_types import Path
from syncverify.program import Phase, Program

#: The path of a thread whose launch never starts: no events, and it never ends (it never runs).
NEVER_STARTED = Path((), (), None, started=False)


def not_started(program: Program, combo: tuple[Path, ...], stuck: dict[int, tuple]) -> frozenset[int]:
    """The threads of launches the host orders after a launch that hangs: they never start.

    A launch with a thread that waits forever never finishes, so the host never gets past the
    barrier (or the stream never reaches the launch) that orders the next one after it; what
    those threads would have done is not part of the execution (nor of its violations).
    ``stuck``: the threads a barrier blocks in this resolution of the combination's barriers."""
    hung = {program.threads[t].phase for t in stuck}
    hung |= {program.threads[t].phase for t, p in enumerate(combo) if p.stuck is not None}
    after = program.phases_after()
    later = set().union(*(after.get(phase, frozenset()) for phase in hung))
    return frozenset(t for t, thread in enumerate(program.threads) if thread.phase in later)


def runs_as_picked(combo: tuple[Path, ...], stopped: frozenset[int]) -> bool:
    """Whether every thread that took :data:`NEVER_STARTED` is one that never starts (``stopped``,
    from :func:`not_started`): otherwise its launch starts, and the combination is no execution."""
    return all(t in stopped for t, p in enumerate(combo) if not p.started)


def may_hang(path: Path) -> bool:
    """Whether a thread that takes ``path`` may never exit: it spins forever, or arrives at a CTA
    barrier, whose phase may never complete."""
    return path.stuck is not None or any(e.kind == "B" for e in path.events)


def with_never_started(program: Program, all_paths: list[list[Path]]) -> list[list[Path]]:
    """Each thread's paths, with :data:`NEVER_STARTED` last for the threads of launches the host
    orders after a launch some path of which may hang (:func:`may_hang`); the others' unchanged.

    Symmetric units keep path lists that correspond index by index: a renaming maps a launch and
    the launches before it onto launches with the same paths."""
    after = program.phases_after()
    hanging = {program.threads[t].phase for t, paths in enumerate(all_paths) if any(map(may_hang, paths))}
    later = set().union(*(after.get(phase, frozenset()) for phase in hanging))
    return [paths + [NEVER_STARTED] if thread.phase in later else paths
            for thread, paths in zip(program.threads, all_paths)]


class LaunchStarts:
    """Which launches the paths assigned so far start, for rules 1 and 2 of the module docstring:
    a pick (a thread's launch, whether its path starts, whether it spins forever) agrees with the
    assigned ones, or not; :meth:`add` and :meth:`remove` keep the counts as the search goes."""

    def __init__(self, program: Program) -> None:
        self.after = program.phases_after()
        self.before: dict[Phase | str, set[Phase | str]] = {}
        for a, bs in self.after.items():
            for b in bs:
                self.before.setdefault(b, set()).add(a)
        self.running: Counter = Counter()  # launch -> assigned threads that run
        self.unstarted: Counter = Counter()  # launch -> assigned threads that never start
        self.spinning: Counter = Counter()  # launch -> assigned threads that spin forever

    def agrees(self, phase: Phase | str, started: bool, spins: bool) -> bool:
        """Whether a thread of launch ``phase`` that starts (or not), and spins forever (or not),
        agrees with the threads assigned so far."""
        if not started:
            return not self.running[phase]  # rule 1
        if self.unstarted[phase] or any(self.spinning[a] for a in self.before.get(phase, ())):
            return False  # rules 1 and 2
        return not spins or not any(self.running[b] for b in self.after.get(phase, ()))  # rule 2

    def add(self, phase: Phase | str, started: bool, spins: bool, count: int = 1) -> None:
        """Count an assigned thread (``count=-1``: take it back)."""
        (self.running if started else self.unstarted)[phase] += count
        if spins:
            self.spinning[phase] += count

    def remove(self, phase: Phase | str, started: bool, spins: bool) -> None:
        """Take back what :meth:`add` counted."""
        self.add(phase, started, spins, -1)


def unit_runs_as_one(program: Program, picks: Iterable[tuple[int, bool, bool]]) -> bool:
    """Whether the paths one unit of a symmetry group takes agree with each other by rules 1 and 2
    (``picks``: (thread, starts, spins forever) per thread of the unit); a unit's options are
    filtered with it, so that an option the search would stop at at once is never listed."""
    starts = LaunchStarts(program)
    for t, started, spins in picks:
        phase = program.threads[t].phase
        if not starts.agrees(phase, started, spins):
            return False
        starts.add(phase, started, spins)
    return True
