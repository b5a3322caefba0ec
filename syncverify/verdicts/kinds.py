"""Which violation kinds a program can show at all: where the check may stop looking.

A verdict is the set of violation kinds its executions show (:func:`syncverify.verdicts.check.classify`:
``hang``, ``race``, ``stale-read``, ``unwritten-read``). Once every kind the program can show has
a witness and an execution without a hang has been found, no further execution can change the
verdict: :func:`syncverify.verdicts.check.check` stops there (the ``every-kind`` switch of
:data:`syncverify.explore.driver.PRUNINGS`), and says so. The executions it counts are then those
explored until that point, and each kind's witness is the smallest found until then, not
necessarily the smallest of all.

The one kind a look at the code can rule out is ``hang`` (:func:`cannot_hang`). Measured where it
matters (issue 24): ``trtllm-14537-*`` in all-scatter with three calls on per-rank streams, W = 2,
have no wait at all; the search found race, stale-read and unwritten-read within seconds and then
ran out its 60 s in the combination search.
"""

from __future__ import annotations

from syncverify.program import Atomic, Barrier, Fence, Label, Load, Program, RegOp, Store

__all__ = ["KINDS", "cannot_hang", "possible_kinds"]

#: Every violation kind the check reports.
KINDS: frozenset[str] = frozenset({"hang", "race", "stale-read", "unwritten-read"})

#: Instructions that never wait on another thread, except :class:`Barrier` (weighed on its own).
_STRAIGHT = (Load, Store, Atomic, Fence, Label, RegOp, Barrier)


def cannot_hang(program: Program) -> bool:
    """Whether no execution of ``program`` can hang, read off its code.

    Sufficient, not necessary: every thread is straight-line code (no branch, so no poll loop
    and no path that skips a barrier; no mbarrier wait, bulk-copy wait or stream operation, whose
    lowering waits), no programmatic dependent launch, and the threads of each CTA execute the
    same sequence of barriers, each a ``bar.sync`` of the whole CTA on a constant barrier (no
    thread count, no ``bar.arrive`` or ``bar.red``). Then a thread only ever waits at a barrier, and by induction
    on the CTA's common sequence every thread reaches each barrier instance: each completes.
    A launch thus always ends, so the launches after it start (no launch is stopped by a hang)."""
    if program.pdl:
        return False
    sequences: dict[tuple[int, int], set[tuple]] = {}
    for thread in program.threads:
        if not all(isinstance(ins, _STRAIGHT) for ins in thread.instructions):
            return False
        barriers = tuple((ins.kind, ins.barrier_id, ins.count, ins.op) for ins in thread.instructions
                         if isinstance(ins, Barrier))
        if any(kind != "sync" or not isinstance(bid, int) or count is not None or op for kind, bid, count, op in barriers):
            return False
        sequences.setdefault((thread.gpu, thread.cta), set()).add(barriers)
    return all(len(seen) == 1 for seen in sequences.values())


def possible_kinds(program: Program) -> frozenset[str]:
    """The violation kinds an execution of ``program`` may show: :data:`KINDS`, without ``hang``
    where :func:`cannot_hang` rules it out."""
    return KINDS - {"hang"} if cannot_hang(program) else KINDS
