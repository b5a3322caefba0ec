"""Which registers are live at each program point, and which instructions lie inside a loop.

The thread-path search (:mod:`syncverify.explore.thread_paths`) compares the states of a spin loop
on their live registers only; value classes (:mod:`syncverify.explore.value_classes`) need a read's
register to be dead after it; the value domain's shortcuts (:mod:`syncverify.explore.value_domain`)
treat an increment inside a loop as unbounded.
"""

from __future__ import annotations

from syncverify.program import Atomic, Barrier, Branch, Label, Load, MbarWait, Operand, RegOp, Store, Thread
from syncverify.program import loop_positions  # the one definition, re-exported: explore reads it from here

__all__ = ["live_registers", "loop_positions", "reads_writes"]


def reads_writes(ins: object) -> tuple[set[str], set[str]]:
    """The registers an instruction reads and the ones it writes."""
    def regs(*ops: Operand) -> set[str]:
        return {o for o in ops if isinstance(o, str)}

    if isinstance(ins, RegOp):
        return regs(ins.lhs, ins.rhs) if ins.op != "mov" else regs(ins.lhs), {ins.dst}
    if isinstance(ins, Branch):
        return (regs(ins.lhs, ins.rhs) if ins.cond is not None else set()), set()
    if isinstance(ins, Store):
        return regs(ins.value), set()
    if isinstance(ins, Atomic):
        return regs(*ins.operands), ({ins.dst} if ins.dst is not None else set())
    if isinstance(ins, Load):
        return set(), {ins.dst}
    if isinstance(ins, MbarWait):
        return set(), ({ins.dst} if ins.dst is not None else set())
    if isinstance(ins, Barrier):
        return regs(ins.barrier_id, *(o for o in (ins.count, ins.predicate) if o is not None)), (
            {ins.dst} if ins.dst is not None else set())
    return set(), set()


def live_registers(thread: Thread, observed: frozenset[str] | None) -> list[frozenset[str]]:
    """For each program point, the registers whose value may still be read (or observed at the end).

    The usual backward dataflow over the thread's control flow; ``observed`` (None: every
    register) are live at the end, since a litmus condition reads them.
    """
    code = thread.instructions
    labels = {ins.name: i for i, ins in enumerate(code) if isinstance(ins, Label)}
    every = set(observed) if observed is not None else set()
    if observed is None:
        for ins in code:
            r, w = reads_writes(ins)
            every |= r | w
    live: list[set[str]] = [set() for _ in range(len(code) + 1)]
    live[len(code)] = every
    changed = True
    while changed:
        changed = False
        for pc in range(len(code) - 1, -1, -1):
            ins = code[pc]
            if isinstance(ins, Branch):
                out = set(live[labels[ins.target]])
                if ins.cond is not None:
                    out |= live[pc + 1]
            else:
                out = set(live[pc + 1])
            reads, writes = reads_writes(ins)
            new = (out - writes) | reads
            if new != live[pc]:
                live[pc] = new
                changed = True
    return [frozenset(x) for x in live]
