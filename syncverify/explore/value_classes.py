"""Value classes: paths of one thread that differ only in values nothing depends on are one path.

A thread's paths (:mod:`syncverify.explore.thread_paths`) branch on every value a read may return. Often the
value matters to nothing but the read itself: an ``atom.exch`` whose old value is never used, or
a poll ``ld.acquire`` whose register is dead once its loop exits (every value ``>= epoch + 1``
exits the same way). Such paths have the same events (up to those reads' values), the same
writes, the same final registers (up to registers that hold those values): the thread did the
same thing. Left apart, each is a different combination of paths for the explorer, a skeleton of
its own, although only which write each read reads from tells the executions apart; W ranks'
flags read that way multiply the combinations by a power of W.

:func:`merge_value_classes` groups such paths into one path whose reads carry the *set* of values
they may return (``LocalEvent.values``, ``value`` None) and whose registers that held them are
*bound* to those reads (``Path.bound``). The merge is exact, which is checked on the paths
themselves rather than argued from the code:

* the members of a group are equal except in the values of some plain reads (the *varying* reads)
  and in registers;
* the group is the whole product of the varying reads' value sets (its size is the product of
  their sizes, and the members are distinct): every choice of one value per read is a member;
* every register that differs between members equals one varying read's value in every member.

So a merged path with one value chosen per varying read *is* a member path, event for event and
register for register, and every member is one such choice. The explorer lets each read of a
merged path read from any write whose value is in its set (:mod:`syncverify.explore.location_choices`); once
reads-from is chosen, the execution is built with each such read's value and each bound register
set to the value of the write it reads from (:meth:`syncverify.explore.skeleton.Skeleton.execution`): the
execution the member path with those values gives. The candidate executions are therefore the
same as without merging, only reached through fewer combinations of paths; the brute force
reference (``prune=False``) never merges, and the tests compare the two.

Only the explorer's pruning steps see merged paths: each treats a value set as "one of these
values" (:mod:`syncverify.explore.combinations`), which only weakens a pruning, never makes it drop a choice.

Where listing every member first would already cost too much (an owner polling W flags has
2^W x 3^W paths), :func:`syncverify.explore.thread_paths.thread_paths` branches on the classes directly, for
the reads :func:`value_classes_at` proves alike (a dead register, or one only
the next branch tests); those paths are what this merge would make of the members.

One difference is deliberate: a thread blocked at a barrier keeps its whole path's final
registers, even those of reads after the barrier that never happen. A register bound to such a
read has no write to take a value from; an observed register is therefore never bound past a
``bar.sync``/``bar.red``, and an unobserved one (a scenario observes none) takes the smallest
value of its set (:func:`with_cut_reads_fixed`): such hangs are reported once instead of once per
value of a register no verdict reads.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from syncverify.explore.instructions import BRANCHES
from syncverify.explore.liveness import loop_positions
from syncverify.explore.path_types import LocalEvent, Path
from syncverify.model.int32 import wrap_int32
from syncverify.program import Atomic, Branch, Label, Load, Program, Store, Thread


def _blank(e: LocalEvent, kept: frozenset[str]) -> LocalEvent:
    """The event with its value forgotten if it is a plain read (a read whose value may vary)."""
    return replace(e, value=None) if _plain_read(e, kept) else e


def _plain_read(e: LocalEvent, kept: frozenset[str] = frozenset()) -> bool:
    return e.kind == "R" and not e.ghost and e.values is None and e.loc not in kept


def shared_by_units(program: Program) -> frozenset[str]:
    """Locations that two units of one symmetry group access: reads of them keep their values.

    Symmetric units take their paths in non-decreasing order (:mod:`syncverify.explore.symmetry`), so
    that of the executions that rename the units into each other one is explored. The order is
    on paths, and so on the values their reads return; units that read one location written by
    several of them (a flag every rank exchanges into) are told apart by exactly those values.
    Merged, their paths would be alike and every renaming would come back as a reads-from choice
    of its own (one per order of the exchanges). A location only one unit of a group accesses
    has no such orders between units, and its reads merge as elsewhere."""
    out: set[str] = set()
    for group in program.symmetry:
        users: dict[str, int] = {}
        for u, unit in enumerate(group):
            for t in unit:
                for ins in program.threads[t].instructions:
                    loc = getattr(ins, "loc", None)
                    if loc is not None and users.setdefault(loc, u) != u:
                        out.add(loc)
    return frozenset(out)


def merge_value_classes(paths: list[Path], observed: frozenset[str] | None = None,
                        kept: frozenset[str] = frozenset()) -> list[Path]:
    """The paths of one thread with every mergeable group replaced by one merged path (see the
    module docstring); the order is kept (a group takes the place of its first member), so that
    symmetric threads' lists still correspond index by index. ``observed``: the registers whose
    final values matter (``Program.observed_registers``; None: all); ``kept``: locations whose
    reads keep their values (:func:`shared_by_units`)."""
    groups: dict[tuple, list[int]] = {}
    for i, p in enumerate(paths):
        key = (tuple(_blank(e, kept) for e in p.events), p.stuck, tuple(reg for reg, _v in p.registers), p.bound)
        groups.setdefault(key, []).append(i)
    merged_at: dict[int, Path | None] = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        merged = _merge([paths[i] for i in members], observed, kept)
        if merged is None:
            continue
        merged_at[members[0]] = merged
        for i in members[1:]:
            merged_at[i] = None
    return [merged_at.get(i, p) for i, p in enumerate(paths) if merged_at.get(i, p) is not None]


def _merge(group: list[Path], observed: frozenset[str] | None, kept: frozenset[str] = frozenset()) -> Path | None:
    """One path standing for exactly ``group``, or None when the group is not a product of value
    sets with every differing register bound to one of those reads.

    A thread blocked at a CTA barrier keeps only the events before it, but its final registers
    stay those of its whole path (:mod:`syncverify.explore.barriers`), so a register bound to a read that
    a barrier may cut off would have no write to take its value from: an observed register is
    bound only to a read before the path's first ``bar.sync``/``bar.red``; a register nobody observes
    (a scenario observes none) takes the smallest value then (:func:`with_cut_reads_fixed`)."""
    first = group[0]
    varying = [i for i, e in enumerate(first.events) if _plain_read(e, kept)
               and len({p.events[i].value for p in group}) > 1]
    if not varying:
        return None
    values = {i: frozenset(p.events[i].value for p in group) for i in varying}
    if len({tuple(p.events[i].value for i in varying) for p in group}) != len(group):
        return None  # two members with the same values: they differ elsewhere (not expected)
    if math.prod(len(v) for v in values.values()) != len(group):
        return None  # not every combination of the values is a path: the reads are not independent
    # Only a bar.sync or bar.red can block (a bar.arrive waits for nothing): no cut before it.
    first_barrier = next((i for i, e in enumerate(first.events) if e.kind == "B" and e.sem != "arrive"),
                         len(first.events))
    registers: list[tuple[str, int | None]] = []
    bound = list(first.bound)
    for n, (reg, value) in enumerate(first.registers):
        if all(p.registers[n][1] == value for p in group):
            registers.append((reg, value))
            continue
        source = next((i for i in varying if all(p.registers[n][1] == p.events[i].value for p in group)), None)
        if source is None:
            return None  # a register computed from a value read, not a copy of it
        if source > first_barrier and (observed is None or reg in observed):
            return None  # observed, and its read may be cut off by a barrier
        registers.append((reg, None))
        bound.append((reg, source))
    events = tuple(replace(e, value=None, values=values[i]) if i in values else e
                   for i, e in enumerate(first.events))
    return Path(events, tuple(registers), first.stuck, tuple(sorted(bound)))


def with_cut_reads_fixed(path: Path, length: int) -> Path:
    """``path`` as the explorer keeps it when a barrier cuts it to its first ``length`` events: a
    register bound to a read that is cut off (an unobserved one, see :func:`_merge`) takes the
    smallest value of that read's set, since no write is read there to give it one."""
    cut = [(reg, i) for reg, i in path.bound if i >= length]
    if not cut:
        return path
    registers = dict(path.registers)
    for reg, i in cut:
        registers[reg] = min(path.events[i].values or (0,))
    return replace(path, registers=tuple(registers.items()), bound=tuple(b for b in path.bound if b[1] < length))


def value_classes_at(thread: Thread, live: list[frozenset[str]], observed: frozenset[str] | None,
                     unclassed: frozenset[str] = frozenset()) -> dict[int, tuple[Callable, bool]]:
    """The reads of ``thread`` whose values matter only through one branch (or not at all): pc ->
    (a function from the domain's sorted values to its classes, whether the register is
    observed). Branching on classes instead of values gives the paths
    :func:`syncverify.explore.value_classes.merge_value_classes` would merge, without listing each
    member first (W flags read that way make W-fold products of paths).

    A read qualifies when its register is dead after it, or is only compared with a literal by
    the conditional branch right after it and dead on both sides of that branch: every value of
    a class then leads to the same next state, but for a dead register. A dead register is never
    read again; the only place its value shows is the comparison of whole register files that
    cuts a spin whose iteration wrote a value back (``before == full`` in :func:`thread_paths`),
    which needs a write event in a loop that does not reset the spin search: an atomic or a
    ghost store inside a loop. Threads with such loops get no classes. An ``atom.exch`` qualifies
    too (its write does not depend on what it reads) outside loops, where whether its write
    changed memory (which resets that search) cannot matter either. A register the program
    observes is not classed after a ``bar.sync``/``bar.red`` (see ``value_classes._merge``).
    """
    code = thread.instructions
    labels = {ins.name: i for i, ins in enumerate(code) if isinstance(ins, Label)}
    in_loop = loop_positions(code)
    if any(isinstance(code[i], Atomic) or (isinstance(code[i], Store) and code[i].ghost) for i in in_loop):
        return {}
    out: dict[int, tuple[Callable, bool]] = {}
    for pc, ins in enumerate(code):
        if getattr(ins, "loc", None) in unclassed:
            continue
        if isinstance(ins, Load) and not ins.ghost:
            dst = ins.dst
        elif isinstance(ins, Atomic) and ins.op == "exch" and pc not in in_loop:
            dst = ins.dst
        else:
            continue
        shown = observed is None or (dst is not None and dst in observed)
        if dst is None or dst not in live[pc + 1]:
            out[pc] = ((lambda values: [values]), shown)
            continue
        nxt = code[pc + 1] if pc + 1 < len(code) else None
        if (isinstance(nxt, Branch) and nxt.cond is not None and nxt.lhs == dst and isinstance(nxt.rhs, int)
                and dst not in live[labels[nxt.target]] and dst not in live[pc + 2]):
            test, literal = BRANCHES[nxt.cond], wrap_int32(nxt.rhs)
            out[pc] = ((lambda values, test=test, literal=literal:
                        [c for c in ([v for v in values if test(v, literal)], [v for v in values if not test(v, literal)]) if c]),
                       shown)
    return out
