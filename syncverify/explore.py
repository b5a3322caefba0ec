"""The explorer: every execution the PTX model allows for a finite program.

How it works (herd's recipe, with the pruning that keeps it fast):

1. **Thread paths.** Each thread is run on its own, every read returning each value its location
   can hold (the *value domain*, grown to a fixpoint from the initial values and every value some
   write can produce; for a counter, one literal and system-scoped literal increments, that
   literal plus every subset of the increments, :func:`value_candidates`). A path is the thread's
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
   States are compared on their *live* registers only (:func:`live_registers`): a poll register
   that the next iteration overwrites before reading does not make two loop heads differ. So an
   iteration that reads, fails its exit test and makes no write at all is cut the same way, even
   when it read a value the previous iteration did not. The executions this drops are those in
   which a poll loop failed some iterations and exited later; each is the same as an execution in
   which those iterations never ran, with fewer events: only reads and fences go, which removes
   happens-before edges and adds none, so every race, unwritten or stale read of the dropped
   execution is also in the kept one, and the kept one is consistent (every axiom is acyclicity
   or emptiness of relations that only shrink when reads and fences go).
3. **Combinations.** One path per thread, found by a search that prunes as it assigns threads
   (:mod:`syncverify.combos`): every value read must be writable by a thread its launch can see,
   and morally strong atomics that read one value need as many distinct writes of it (so an
   ``atom.add`` counter's read values follow from the order of the increments instead of being
   guessed). Symmetric ranks take their paths in non-decreasing order. A CTA barrier instance some
   participant never reaches blocks the threads waiting at it; their paths are cut there and the
   blocked execution is a hang. A launch that hangs never ends, so the launches the host orders
   after it never start: their threads have no events in that execution (:func:`_not_started`).
4. **Choices.** For each location independently, the explorer enumerates which write each read
   reads from (same value, not from its own thread's future, not hidden behind a write that
   causally precedes the read) and the coherence order (causally ordered writes in that order),
   and keeps only choices that pass the per-location axioms (SC-per-Location, Atomicity). Only
   ``(po | bar | host)+`` and moral strength within the location are needed for that, so the
   costlier relations are computed only for combinations that pass every location. The product
   over locations, and over Fence-SC orders, is checked against the remaining axioms.

Nothing is silently bounded: a limit that is hit is reported as :attr:`ExplorationResult.limit_hit`,
and the answer built on it is UNKNOWN. :func:`brute_force` runs steps 1-3 the same way but
enumerates every reads-from and coherence choice with no pruning; the tests check both agree.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from syncverify import ptx
from syncverify.combos import (
    PathSummary,
    SearchTimeout,
    is_supported,
    readable_ceilings,
    summarize,
    supported_combinations,
)
from syncverify.errors import UnsupportedConstruct
from syncverify.events import INIT_THREAD, Event, Execution
from syncverify.program import (
    Atomic,
    Barrier,
    Branch,
    Fence,
    Label,
    Load,
    Operand,
    Program,
    RegOp,
    Store,
    Thread,
)
from syncverify.relations import is_acyclic, plus

DEFAULT_MAX_EXECUTIONS = 1_000_000
DEFAULT_MAX_STEPS = 500  # instructions one thread may execute on one path
DEFAULT_MAX_DOMAIN = 32  # distinct values one location may take


class LimitHit(Exception):
    """Raised inside the explorer when a bound is reached; the result becomes UNKNOWN."""

    def __init__(self, limit: str, detail: str) -> None:
        self.limit = limit
        self.detail = detail
        super().__init__(f"{limit}: {detail}")


# ----- step 1: thread paths -------------------------------------------------------------------

@dataclass(frozen=True)
class LocalEvent:
    """An event of one thread's path, before the execution numbers it."""

    kind: str
    loc: str | None = None
    value: int | None = None
    sem: str = "weak"
    scope: str | None = None
    barrier_id: int | None = None
    rmw_with_previous: bool = False  # the write half of an atomic
    deps: frozenset[int] = frozenset()  # local indices of reads it depends on (data | ctrl)
    label: str = ""
    line: int | None = None
    ghost: bool = False


@dataclass(frozen=True)
class Path:
    """One way a thread can run: its events, final registers, and why it never ends (if so)."""

    events: tuple[LocalEvent, ...]
    registers: tuple[tuple[str, int], ...]
    stuck: tuple | None = None  # ("spin", ((loc, value), ...)) or ("barrier", local index)


def _atomic_result(op: str, old: int, operands: tuple[int, ...]) -> int | None:
    """The value an atomic writes, or None when it writes nothing (a failed ``cas``)."""
    b = operands[0]
    if op == "add":
        return old + b
    if op == "sub":
        return old - b
    if op == "exch":
        return b
    if op == "cas":
        return operands[1] if old == operands[0] else None
    if op == "min":
        return min(old, b)
    if op == "max":
        return max(old, b)
    if op == "and":
        return old & b
    if op == "or":
        return old | b
    raise UnsupportedConstruct(f"atomic op {op!r}")


def _text(ins: object) -> str:
    label = getattr(ins, "label", "")
    if label:
        return label
    if isinstance(ins, Load):
        return f"ld.{ins.sem}{'.' + ins.scope if ins.scope else ''} {ins.dst}, {ins.loc}"
    if isinstance(ins, Store):
        return f"st.{ins.sem}{'.' + ins.scope if ins.scope else ''} {ins.loc}, {ins.value}"
    if isinstance(ins, Atomic):
        head = "atom" if ins.dst is not None else "red"
        args = ", ".join(str(o) for o in ((ins.dst,) if ins.dst else ()) + (ins.loc,) + ins.operands)
        return f"{head}.{ins.sem}.{ins.scope}.{ins.op} {args}"
    if isinstance(ins, Fence):
        return f"fence.{ins.kind}.{ins.scope}"
    if isinstance(ins, Barrier):
        return f"bar.{ins.kind} {ins.barrier_id}" + (f", {ins.count}" if ins.count else "")
    return type(ins).__name__


def _reads_writes(ins: object) -> tuple[set[str], set[str]]:
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
            r, w = _reads_writes(ins)
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
            reads, writes = _reads_writes(ins)
            new = (out - writes) | reads
            if new != live[pc]:
                live[pc] = new
                changed = True
    return [frozenset(x) for x in live]


def thread_paths(
    thread: Thread,
    domain: dict[str, frozenset[int]],
    registers: dict[str, int],
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    deadline: float | None = None,
    observed: frozenset[str] | None = None,
) -> list[Path]:
    """Every path of ``thread`` when each read may return any value of its location's domain.

    ``observed``: the registers whose final values matter (None: all); see :func:`live_registers`.
    """
    code = thread.instructions
    labels = {ins.name: i for i, ins in enumerate(code) if isinstance(ins, Label)}
    live = live_registers(thread, observed)
    paths: list[Path] = []

    def value(op: Operand, regs: dict[str, int]) -> int:
        return op if isinstance(op, int) else regs.get(op, 0)

    def taint_of(op: Operand, taint: dict[str, frozenset[int]]) -> frozenset[int]:
        return frozenset() if isinstance(op, int) else taint.get(op, frozenset())

    # An explicit stack of states: (pc, regs, taint, ctrl, events, seen, steps). ``seen`` maps
    # (pc, live registers) to where the path last was there, and whether the registers were equal.
    stack = [(0, dict(registers), {}, frozenset(), (), {}, 0)]
    while stack:
        pc, regs, taint, ctrl, events, seen, steps = stack.pop()
        while True:
            if pc >= len(code):
                paths.append(Path(events, tuple(sorted(regs.items()))))
                break
            if steps > max_steps:
                raise LimitHit("max-steps", f"thread {thread.name} ran {max_steps} instructions on one path "
                               "without terminating or repeating a state (a loop that writes every iteration?)")
            if deadline is not None and steps % 64 == 0 and time.monotonic() > deadline:
                raise LimitHit("timeout", f"while running thread {thread.name}")
            full = tuple(sorted(regs.items()))
            key = (pc, tuple(r for r in full if r[0] in live[pc]))
            if key in seen:
                start, before = seen[key]
                # Same registers: an iteration that changed no value (same-value writes allowed).
                # Same live registers only: an iteration with no write event at all.
                if before == full or not any(e.kind == "W" for e in events[start:]):
                    blocking = tuple((e.loc, e.value) for e in events[start:] if e.kind == "R")
                    paths.append(Path(events[:start], full, ("spin", blocking)))
                    break
            seen = {**seen, key: (len(events), full)}
            ins = code[pc]
            steps += 1
            text, line = _text(ins), getattr(ins, "line", None)
            if isinstance(ins, Label):
                pc += 1
            elif isinstance(ins, RegOp):
                a, b = value(ins.lhs, regs), value(ins.rhs, regs)
                result = a if ins.op == "mov" else a + b if ins.op == "add" else a - b
                regs = {**regs, ins.dst: result}
                taint = {**taint, ins.dst: taint_of(ins.lhs, taint) | (taint_of(ins.rhs, taint) if ins.op != "mov" else frozenset())}
                pc += 1
            elif isinstance(ins, Branch):
                if ins.cond is None:
                    taken = True
                else:
                    a, b = value(ins.lhs, regs), value(ins.rhs, regs)
                    taken = {"eq": a == b, "ne": a != b, "ge": a >= b, "lt": a < b}[ins.cond]
                    ctrl = ctrl | taint_of(ins.lhs, taint) | taint_of(ins.rhs, taint)
                pc = labels[ins.target] if taken else pc + 1
            elif isinstance(ins, Fence):
                events = events + (LocalEvent("F", sem=ins.kind, scope=ins.scope, deps=ctrl, label=text, line=line),)
                pc += 1
            elif isinstance(ins, Barrier):
                events = events + (LocalEvent("B", sem=ins.kind, barrier_id=ins.barrier_id, deps=ctrl, label=text, line=line),)
                seen = {}  # a barrier arrival is a side effect: the loop is not a pure spin
                pc += 1
            elif isinstance(ins, Store):
                v = value(ins.value, regs)
                events = events + (LocalEvent("W", ins.loc, v, ins.sem, ins.scope,
                                              deps=ctrl | taint_of(ins.value, taint), label=text, line=line,
                                              ghost=ins.ghost),)
                if not ins.ghost:
                    seen = {}
                pc += 1
            elif isinstance(ins, Load) and ins.ghost:
                # Tile data: no value choice (syncverify.program, GHOST); the register holds no value.
                events = events + (LocalEvent("R", ins.loc, None, ins.sem, ins.scope, deps=ctrl, label=text,
                                              line=line, ghost=True),)
                regs = {**regs, ins.dst: 0}
                pc += 1
            elif isinstance(ins, (Load, Atomic)):
                # Branch on the value read: push all but the first choice, continue with the first.
                choices = sorted(domain[ins.loc])
                states = []
                for v in choices:
                    st = _read(ins, v, pc, regs, taint, ctrl, events, seen, steps, text, line, value, taint_of)
                    states.append(st)
                stack.extend(reversed(states[1:]))
                pc, regs, taint, ctrl, events, seen, steps = states[0]
            else:  # pragma: no cover - program.py admits no other instruction
                raise UnsupportedConstruct(f"the explorer cannot run {type(ins).__name__}")
    return paths


def _read(ins, v, pc, regs, taint, ctrl, events, seen, steps, text, line, value, taint_of):
    """The state after ``ins`` (a load or an atomic) reads ``v``."""
    idx = len(events)
    if isinstance(ins, Load):
        ev = LocalEvent("R", ins.loc, v, ins.sem, ins.scope, deps=ctrl, label=text, line=line)
        return (pc + 1, {**regs, ins.dst: v}, {**taint, ins.dst: frozenset({idx})}, ctrl,
                events + (ev,), seen, steps)
    read_sem = "acquire" if ins.sem in ("acquire", "acq_rel") else "relaxed"
    write_sem = "release" if ins.sem in ("release", "acq_rel") else "relaxed"
    operands = tuple(value(o, regs) for o in ins.operands)
    written = _atomic_result(ins.op, v, operands)
    new_events = events + (LocalEvent("R", ins.loc, v, read_sem, ins.scope, deps=ctrl, label=text, line=line),)
    if written is not None:
        op_taint = frozenset().union(*(taint_of(o, taint) for o in ins.operands))
        new_events += (LocalEvent("W", ins.loc, written, write_sem, ins.scope, rmw_with_previous=True,
                                  deps=ctrl | op_taint, label=text, line=line),)
        if written != v:
            seen = {}
    new_regs, new_taint = regs, taint
    if ins.dst is not None:
        new_regs = {**regs, ins.dst: v}
        new_taint = {**taint, ins.dst: frozenset({idx})}
    return (pc + 1, new_regs, new_taint, ctrl, new_events, seen, steps)


def value_domain(
    program: Program,
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    max_domain: int = DEFAULT_MAX_DOMAIN,
    deadline: float | None = None,
    prune: bool = True,
) -> tuple[dict[str, frozenset[int]], list[list[Path]]]:
    """The values each location can hold, and each thread's paths when reads return them.

    A fixpoint from the initial values: run every thread with reads returning any value of the
    domain, then add the values written in *supported* combinations of paths only, those in which
    every read's value is written by some other event (the initial write, another thread, or an
    earlier write of the same thread). Without that filter an ``atom.add`` would feed on its own
    results and the domain would never stop growing. With ``prune``, each value not yet in the
    domain is looked for with a search for one supported combination that writes it
    (:mod:`syncverify.combos`); without, every combination is tried (the brute-force reference).
    """
    domain = {loc: frozenset({program.init.get(loc, 0)}) for loc in program.locations()}
    while True:
        all_paths = [
            thread_paths(t, domain, _initial_registers(program, t), max_steps=max_steps, deadline=deadline,
                         observed=program.observed_registers)
            for t in program.threads
        ]
        grown = {loc: set({program.init.get(loc, 0)}) for loc in domain}
        summaries = [[summarize(p) for p in paths] for paths in all_paths]

        def add(combo: tuple[PathSummary, ...]) -> None:
            for s in combo:
                for (loc, v), _n in s.writes:
                    grown[loc].add(v)

        if prune:
            top = value_ceiling(program)
            wanted = sorted({key for paths in summaries for s in paths for key, _n in s.writes
                             if key[1] not in domain[key[0]] and (top.get(key[0]) is None or key[1] <= top[key[0]])})
            candidates = value_candidates(program)
            for key in wanted:
                if key[1] in grown[key[0]]:
                    continue
                if key[1] in candidates.get(key[0], ()):
                    grown[key[0]].add(key[1])  # a possible value: no witness needed (value_candidates)
                    continue
                witness = next(_search(program, summaries, atomicity=False, must_write=key, deadline=deadline),
                               None)
                if witness is not None:
                    add(tuple(summaries[t][p] for t, p in enumerate(witness)))
        else:
            for combo in combinations(program, summaries):
                if deadline is not None and time.monotonic() > deadline:
                    raise LimitHit("timeout", "while computing value domains")
                if is_supported(combo, program.init):
                    add(combo)
        for loc, vals in grown.items():
            if len(vals) > max_domain:
                raise LimitHit("value-domain", f"location {loc} can hold more than {max_domain} values")
        frozen = {loc: frozenset(v) for loc, v in grown.items()}
        if all(frozen[loc] <= domain[loc] for loc in domain):
            return domain, all_paths
        domain = {loc: domain[loc] | frozen[loc] for loc in domain}


def _literal_writes(program: Program, phases: frozenset[str] | None = None,
                    with_init: bool = True) -> dict[str, tuple[frozenset[int], tuple[int, ...]] | None]:
    """Per location, the literal values written to it and the literal increments added to it.

    The literals are the initial value (``with_init``), stores, exchanges and ``cas`` values;
    the increments are ``atom.add`` of a positive literal outside any loop (an add of 0 writes
    back what it read). None for a location with any other write: a register operand, ``sub``,
    an add inside a loop. ``phases``: only the writes of threads of those phases.
    """
    literals: dict[str, set[int] | None] = {loc: ({program.init.get(loc, 0)} if with_init else {0})
                                             for loc in program.locations()}
    increments: dict[str, list[int]] = {loc: [] for loc in literals}
    for thread in program.threads:
        if phases is not None and thread.phase not in phases:
            continue
        code = thread.instructions
        labels = {ins.name: i for i, ins in enumerate(code) if isinstance(ins, Label)}
        in_loop = set()
        for i, ins in enumerate(code):
            if isinstance(ins, Branch) and labels[ins.target] <= i:
                in_loop.update(range(labels[ins.target], i + 1))
        for i, ins in enumerate(code):
            loc = getattr(ins, "loc", None)
            if loc is None or getattr(ins, "ghost", False) or literals.get(loc) is None:
                continue
            if isinstance(ins, Store):
                literal = ins.value if isinstance(ins.value, int) else None
            elif isinstance(ins, Atomic) and ins.op in ("exch", "cas"):
                literal = ins.operands[-1] if isinstance(ins.operands[-1], int) else None
            elif isinstance(ins, Atomic) and ins.op == "add":
                b = ins.operands[0]
                if b == 0:
                    continue  # writes back the value it read
                if isinstance(b, int) and b > 0 and i not in in_loop:
                    increments[loc].append(b)
                    continue
                literal = None
            elif isinstance(ins, Load):
                continue
            else:
                literal = None
            if literal is None:
                literals[loc] = None
            else:
                literals[loc].add(literal)  # type: ignore[union-attr]
    return {loc: (None if lits is None else (frozenset(lits), tuple(increments[loc])))
            for loc, lits in literals.items()}


def value_ceiling(program: Program, phases: frozenset[str] | None = None,
                  with_init: bool = True) -> dict[str, int | None]:
    """An upper bound on the values each location can ever hold (None: no bound found).

    When every write to a location is a literal (a store, an exchange, a ``cas`` value) or an
    ``atom.add`` of a positive literal outside any loop (an add of 0, a poll, anywhere), no value
    exceeds the largest literal (or initial value) plus all the increments together: the bound a
    counter's value search would otherwise have to prove by trying every combination. Anything
    else (a register operand, ``sub``, an add inside a loop) leaves the location unbounded.
    ``phases``: count only the writes of threads of those phases (and the initial values only
    ``with_init``); see :func:`_literal_writes`.
    """
    return {loc: (None if w is None else max(w[0]) + sum(w[1]))
            for loc, w in _literal_writes(program, phases, with_init).items()}


def value_candidates(program: Program) -> dict[str, frozenset[int]]:
    """Per location with only literal writes of one value (see :func:`_literal_writes`) and
    system-scoped increments, every value it could hold: that literal plus some of the increments.

    It spares the search for a witness of each value, which for two epochs of W counters means
    chains of up to 2W increments. Taking a superset of the reachable values as the domain is
    sound only because every increment is morally strong with every other: SC-per-Location then
    orders each increment after the write it reads, so a value is read only once a chain of
    increments from a literal has produced it. Increments narrower than the system could feed
    each other out of thin air (the model has no axiom against it; the domain's growth from the
    initial values is what keeps such values out), so their locations are left to the search.
    """
    narrow = {ins.loc for thread in program.threads for ins in thread.instructions
              if isinstance(ins, Atomic) and ins.op == "add" and ins.scope != "sys"}
    out: dict[str, frozenset[int]] = {}
    for loc, w in _literal_writes(program).items():
        # One literal (a counter and its resets to 0): with several, their sums with the
        # increments overshoot what is reachable enough to slow the paths down; search instead.
        if w is None or loc in narrow or len(w[0]) > 1:
            continue
        sums = {0}
        for b in w[1]:
            sums |= {s + b for s in sums}
        out[loc] = frozenset(lit + s for lit in w[0] for s in sums)
    return out


def _search(program: Program, summaries: list[list[PathSummary]], **options) -> Iterator[tuple[int, ...]]:
    """:func:`syncverify.combos.supported_combinations`, its timeout as a :class:`LimitHit`."""
    try:
        yield from supported_combinations(program, summaries, **options)
    except SearchTimeout as stop:
        raise LimitHit("timeout", f"while combining thread paths, {stop}") from None


def _initial_registers(program: Program, thread: Thread) -> dict[str, int]:
    return {reg: v for (t, reg), v in program.registers.items() if t == thread.name}


# ----- step 3: combinations and CTA barriers --------------------------------------------------

def combinations(program: Program, per_thread: list[list]) -> Iterator[tuple]:
    """One item per thread: the product of ``per_thread``, reduced by the program's symmetry.

    ``program.symmetry`` lists groups of interchangeable *units* (tuples of threads that are the
    same code up to renaming their rank, with path lists that correspond index by index). For
    such a group, executions that differ only by which unit took which path are renamings of each
    other, so only one order is kept: units take their path tuples in non-decreasing order
    (a multiset instead of a sequence). With the group's units ``k`` and path tuples ``n``, this
    explores ``C(n + k - 1, k)`` instead of ``n ** k`` combinations.
    """
    if not program.symmetry:
        yield from itertools.product(*per_thread)
        return
    grouped = {t for group in program.symmetry for unit in group for t in unit}
    free = [t for t in range(len(per_thread)) if t not in grouped]
    group_choices = []
    for group in program.symmetry:
        unit_tuples = list(itertools.product(*(range(len(per_thread[t])) for t in group[0])))
        for unit in group[1:]:
            if [len(per_thread[t]) for t in unit] != [len(per_thread[t]) for t in group[0]]:
                raise UnsupportedConstruct("symmetric units with different numbers of paths")
        group_choices.append((group, unit_tuples,
                              list(itertools.combinations_with_replacement(range(len(unit_tuples)), len(group)))))
    for free_choice in itertools.product(*(per_thread[t] for t in free)):
        slots: list = [None] * len(per_thread)
        for t, item in zip(free, free_choice):
            slots[t] = item
        for picks in itertools.product(*(choices for _g, _u, choices in group_choices)):
            for (group, unit_tuples, _c), multiset in zip(group_choices, picks):
                for unit, idx in zip(group, multiset):
                    for t, path_index in zip(unit, unit_tuples[idx]):
                        slots[t] = per_thread[t][path_index]
            yield tuple(slots)


def _barrier_participants(program: Program) -> dict[tuple[int, int, int], list[int]]:
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


def _settle_barriers(
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


def _cta_kept_lengths(program: Program, all_paths: list[list[Path]],
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
            lengths, _stuck, _instances = _settle_barriers(program, tuple(combo), mine)  # type: ignore[arg-type]
            cache[key] = {t: lengths[t] for t in picks}
        return cache[key]

    return kept


# ----- step 4: building executions -------------------------------------------------------------

@dataclass
class Skeleton:
    """The events of one combination of paths, before reads-from and coherence are chosen."""

    events: tuple[Event, ...]
    po: frozenset
    rmw: frozenset
    dep: frozenset
    barrier_sync: frozenset
    registers: dict[tuple[str, str], int]
    stuck: dict[int, tuple]
    thread_names: tuple[str, ...]
    roles: tuple[str, ...]
    host_order: frozenset = frozenset()
    static_memo: dict = field(default_factory=dict)
    # (po | bar | host)+: part of causality whatever rf, co and Fence-SC turn out to be.
    static_cause: "StaticCause | frozenset" = frozenset()

    def execution(self, rf: dict[int, int], co: dict[str, tuple[int, ...]], fence_sc: tuple[int, ...]) -> Execution:
        return Execution(
            events=self.events, thread_names=self.thread_names, po=self.po, rf=rf, co=co,
            rmw=self.rmw, dep=self.dep, fence_sc=fence_sc, barrier_sync=self.barrier_sync,
            final_registers=self.registers, stuck=self.stuck, roles=self.roles,
            host_order=self.host_order, _memo=dict(self.static_memo),
        )


def _not_started(program: Program, combo: tuple[Path, ...], stuck: dict[int, tuple]) -> frozenset[int]:
    """The threads of launches the host orders after a launch that hangs: they never start.

    A launch with a thread that waits forever never finishes, so the host never gets past the
    barrier (or the stream never reaches the launch) that orders the next one after it; what
    those threads would have done is not part of the execution (nor of its violations)."""
    hung = {program.threads[t].phase for t in stuck}
    hung |= {program.threads[t].phase for t, p in enumerate(combo) if p.stuck is not None}
    after = program.phases_after()
    later = set().union(*(after.get(phase, frozenset()) for phase in hung))
    return frozenset(t for t, thread in enumerate(program.threads) if thread.phase in later)


def build_skeleton(program: Program, combo: tuple[Path, ...], lengths: list[int],
                   stuck: dict[int, tuple], instances: list,
                   not_started: frozenset[int] = frozenset()) -> Skeleton:
    """Number the events of a combination and compute the relations that do not depend on rf/co.

    ``not_started``: threads that never run (see :func:`_not_started`): no events, their
    registers keep their initial values, and they are not stuck."""
    events: list[Event] = []
    for loc in program.locations():
        events.append(Event(len(events), INIT_THREAD, 0, "W", loc, program.init.get(loc, 0), "relaxed", "sys",
                            label="init"))
    po, rmw, dep, sync = set(), set(), set(), set()
    local_to_global: dict[tuple[int, int], int] = {}
    registers: dict[tuple[str, str], int] = {}
    for t, (thread, path) in enumerate(zip(program.threads, combo)):
        ids = []
        for i, le in enumerate(path.events[:lengths[t]]):
            eid = len(events)
            events.append(Event(eid, t, i, le.kind, le.loc, le.value, le.sem, le.scope, thread.gpu, thread.cta,
                                le.barrier_id, le.label, le.line, le.ghost, thread.phase))
            local_to_global[(t, i)] = eid
            for j in le.deps:
                if j < i:
                    dep.add((ids[j], eid))
            if le.rmw_with_previous:
                rmw.add((ids[i - 1], eid))
            ids.append(eid)
        po.update((ids[a], ids[b]) for a in range(len(ids)) for b in range(a + 1, len(ids)))
        if t in not_started:
            registers.update({(thread.name, reg): v for reg, v in _initial_registers(program, thread).items()})
        else:
            registers.update({(thread.name, reg): v for reg, v in path.registers})
    for instance in instances:
        members = [(local_to_global[(t, i)]) for t, i in instance]
        for a in members:
            for b in members:
                if a != b and events[b].sem == "sync":
                    sync.add((a, b))
    host = frozenset()  # filled in by candidate_executions once the combination passes its locations
    # Stuck threads keep their (cut) events; a spin-stuck path is already cut at the spin.
    full_stuck = dict(stuck)
    for t, path in enumerate(combo):
        if path.stuck is not None and t not in full_stuck and t not in not_started:
            full_stuck[t] = path.stuck
    return Skeleton(tuple(events), frozenset(po), frozenset(rmw), frozenset(dep), frozenset(sync),
                    registers, full_stuck, tuple(t.name for t in program.threads),
                    tuple(t.role for t in program.threads), host)


def _host_pairs(program: Program, events: list[Event]) -> frozenset:
    """Event pairs ordered by ``program.host_order`` (closed transitively over phases)."""
    if not program.host_order:
        return frozenset()
    after = program.phases_after()
    by_phase: dict[str, list[int]] = {}
    for e in events:
        if not e.is_init:
            by_phase.setdefault(e.phase, []).append(e.eid)
    return frozenset((x, y) for a, bs in after.items() for b in bs
                     for x in by_phase.get(a, ()) for y in by_phase.get(b, ()))


def _static_relations(skeleton: Skeleton) -> None:
    """Compute once per combination the relations that rf/co/Fence-SC cannot change."""
    probe = skeleton.execution({}, {}, ())
    for name in ("po", "loc", "po_loc", "morally_strong", "release_pattern", "acquire_pattern"):
        getattr(ptx, name)(probe)
        skeleton.static_memo[name] = probe._memo[name]


class StaticCause:
    """``(po | bar | host)+`` of a skeleton, as a membership test: the part of causality that no
    choice of rf, co or Fence-SC order can remove, used to prune those choices.

    Program order and CTA barriers stay inside one phase; the host order relates whole phases
    (and is acyclic), so a pair is in the closure if it is ordered within its phase or its phases
    are host-ordered. Storing the host part per phase keeps it small.
    """

    def __init__(self, skeleton: "Skeleton", program: Program) -> None:
        self.local = plus(skeleton.po | skeleton.barrier_sync)
        self.phase = [None if e.is_init else e.phase for e in skeleton.events]
        after = program.phases_after()
        self.phases = frozenset((a, b) for a, bs in after.items() for b in bs)

    def __contains__(self, pair: tuple[int, int]) -> bool:
        if pair in self.local:
            return True
        pa, pb = self.phase[pair[0]], self.phase[pair[1]]
        return pa is not None and pb is not None and (pa, pb) in self.phases


def _location_choices(skeleton: Skeleton, loc: str, prune: bool,
                      program: Program) -> list[tuple[dict[int, int], tuple[int, ...]]]:
    """Every (reads-from of this location's reads, coherence order of its writes) worth keeping."""
    events = skeleton.events
    writes = [e for e in events if e.is_write and e.loc == loc and not e.ghost]
    reads = [e for e in events if e.is_read and e.loc == loc and not e.ghost]
    init = tuple(w.eid for w in writes if w.is_init)
    others = [w.eid for w in writes if not w.is_init]
    cause = skeleton.static_cause
    # The writes that causally precede each write and each read (init writes precede everything).
    before = {e.eid: frozenset(w for w in others if (w, e.eid) in cause) if prune else frozenset()
              for e in writes + reads}
    rmw_write_of = {r: w for r, w in skeleton.rmw}
    spins = [(phase, v) for phase, where, v in _spin_needs(skeleton, program) if where == loc] if prune else []
    after = program.phases_after() if spins else {}
    candidates = []
    for r in reads:
        cands = [w.eid for w in writes if w.value == r.value]
        if prune:
            # Causality axiom: no reading a write the read causally precedes (rf ; cause), nor
            # one hidden behind a write that causally precedes the read (fr ; cause).
            cands = [w for w in cands if (r.eid, w) not in cause and rmw_write_of.get(r.eid) != w
                     and not any(w2 != w and (w in init or (w, w2) in cause) for w2 in before[r.eid])]
        if not cands:
            return []
        candidates.append(cands)
    ms = frozenset(ptx.morally_strong_at([w for w in writes] + reads, skeleton.po))
    choices = []
    for picks in itertools.product(*candidates):
        rf = {r.eid: w for r, w in zip(reads, picks)}
        if not prune:
            choices.extend((rf, init + order) for order in itertools.permutations(others))
            continue
        for order in _coherence_orders(skeleton, others, rf, ms, before):
            co_order = init + order
            if any(_last_seen(events, co_order, after.get(phase, frozenset())) != v for phase, v in spins):
                continue  # a stuck spin is an execution only if it read the last value (_spin_is_real)
            if _location_consistent(skeleton, rf, co_order, reads, ms, before):
                choices.append((rf, co_order))
    return choices


def _coherence_orders(skeleton: Skeleton, writes: list[int], rf: dict[int, int], ms: frozenset,
                      before: dict[int, frozenset]) -> Iterator[tuple[int, ...]]:
    """Coherence orders of ``writes`` that respect program order and the atomicity of RMWs.

    Built one write at a time, so that an atomic's write is placed only after the write its read
    reads from, with no morally strong write in between (the Atomicity axiom): for chains of
    atomics this yields the one order the chain allows instead of every permutation.
    ``before``: the writes that causally precede each write (Coherence keeps them co-before).
    """
    source_of = {w: rf.get(r) for r, w in skeleton.rmw}
    read_of = {w: r for r, w in skeleton.rmw}
    pending = set(writes)

    def placeable(w: int, placed: list[int]) -> bool:
        if before[w] & pending:
            return False  # Coherence: causally ordered writes are in coherence order
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
            after_src = placed[placed.index(src) + 1:] if src in placed else placed
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


def _location_consistent(skeleton: Skeleton, rf: dict[int, int], co_order: tuple[int, ...],
                         reads: list[Event], ms: frozenset, before: dict[int, frozenset]) -> bool:
    """SC-per-Location and Atomicity on one location (both only relate events of that location)."""
    position = {w: i for i, w in enumerate(co_order)}
    edges = set()
    for i, a in enumerate(co_order):
        for b in co_order[i + 1:]:
            if (a, b) in ms:
                edges.add((a, b))
    for r, w in rf.items():
        if (w, r) in ms:
            edges.add((w, r))
        for later in co_order[position[w] + 1:]:
            if (r, later) in ms:
                edges.add((r, later))  # fr
    ids = set(co_order) | {r.eid for r in reads}
    edges |= {(a, b) for a, b in skeleton.po if a in ids and b in ids}
    if not is_acyclic(edges):
        return False
    for r, w in rf.items():
        # Causality axiom (fr ; cause): a write that causally precedes the read is not
        # coherence-after the write the read reads from.
        if any(position[other] > position[w] for other in before[r]):
            return False
    for r, w in skeleton.rmw:
        if r not in rf:
            continue
        src = rf[r]
        if src not in position or w not in position or position[src] >= position[w]:
            continue  # an atomic written before its source is SC-per-Location's business (above)
        between = co_order[position[src] + 1:position[w]]
        if any((r, m) in ms and (m, w) in ms for m in between):
            return False
    return True


def _fence_sc_orders(skeleton: Skeleton, prune: bool) -> list[tuple[int, ...]]:
    """Total orders of the ``fence.sc`` events, one per distinct morally-strong restriction."""
    fences = [e.eid for e in skeleton.events if ptx.sc_fence(e)]
    if not fences:
        return [()]
    ms = skeleton.static_memo["morally_strong"]
    seen, orders = set(), []
    for order in itertools.permutations(fences):
        if prune and any((order[j], order[i]) in skeleton.po
                         for i in range(len(order)) for j in range(i + 1, len(order))):
            continue  # contradicts program order, hence causality: FenceSC fails
        # The execution's Fence-SC order is the morally strong part; orders that agree on it are one.
        restricted = frozenset((order[i], order[j]) for i in range(len(order))
                               for j in range(i + 1, len(order)) if (order[i], order[j]) in ms)
        if restricted in seen:
            continue
        seen.add(restricted)
        orders.append(order)
    return orders


# ----- the explorer ---------------------------------------------------------------------------

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

    @property
    def can_hang(self) -> bool:
        return self.hang_count > 0

    @property
    def outcomes(self) -> set[tuple[frozenset, frozenset]]:
        """Distinct final states (registers, memory) of the terminating executions."""
        return {(frozenset(x.final_registers.items()), frozenset(x.final_memory.items())) for x in self.executions}


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


def _spin_is_real(skeleton: Skeleton, x: Execution, program: Program) -> bool:
    """A stuck spin is an execution only if every blocking read would see the last value.

    The last value as the spinning thread's launch sees it: writes of launches the host orders
    after it are left out, since those launches cannot start while it spins.
    """
    after = program.phases_after()
    return all(_last_seen(x.events, x.co[loc], after.get(phase, frozenset())) == v
               for phase, loc, v in _spin_needs(skeleton, program))


def candidate_executions(
    program: Program,
    *,
    prune: bool = True,
    max_steps: int = DEFAULT_MAX_STEPS,
    max_domain: int = DEFAULT_MAX_DOMAIN,
    deadline: float | None = None,
) -> Iterator[tuple[Skeleton, Execution]]:
    """Yield candidate executions (not yet checked against the global axioms)."""
    _domain, all_paths = value_domain(program, max_steps=max_steps, max_domain=max_domain, deadline=deadline,
                                      prune=prune)
    participants = _barrier_participants(program)
    locations = program.locations()
    seen_cut: set = set()
    if prune:
        summaries = [[summarize(p) for p in paths] for paths in all_paths]
        # Paths that read a value their launch can never see go (see readable_ceilings).
        tops = readable_ceilings(program, summaries, lambda ph, init: value_ceiling(program, ph, init))
        if tops:
            all_paths = [[p for p in paths
                          if not any(e.kind == "R" and not e.ghost and e.value > tops.get((th.phase, e.loc), e.value)
                                     for e in p.events)]
                         for th, paths in zip(program.threads, all_paths)]
            summaries = [[summarize(p) for p in paths] for paths in all_paths]
        kept = _cta_kept_lengths(program, all_paths, participants)
        combos: Iterator[tuple[Path, ...]] = (
            tuple(all_paths[t][p] for t, p in enumerate(picks))
            for picks in _search(program, summaries, atomicity=True, deadline=deadline, kept_lengths=kept))
    else:
        summary = {id(p): summarize(p) for paths in all_paths for p in paths}
        combos = (combo for combo in combinations(program, all_paths)
                  if is_supported(tuple(summary[id(p)] for p in combo), program.init))
    for combo in combos:
        if deadline is not None and time.monotonic() > deadline:
            raise LimitHit("timeout", "while combining thread paths")
        lengths, stuck, instances = _settle_barriers(program, combo, participants)
        not_started = _not_started(program, combo, stuck)
        if not_started:
            lengths = [0 if t in not_started else n for t, n in enumerate(lengths)]
            stuck = {t: why for t, why in stuck.items() if t not in not_started}
            instances = [i for i in instances if i[0][0] not in not_started]
        if stuck or not_started:
            # Paths cut short (at a barrier, or before they start) repeat: build each once.
            key = tuple(None if t in not_started else (tuple(p.events[:n]), p.registers, p.stuck)
                        for t, (p, n) in enumerate(zip(combo, lengths)))
            if key in seen_cut:
                continue
            seen_cut.add(key)
        skeleton = build_skeleton(program, combo, lengths, stuck, instances, not_started)
        skeleton.static_cause = StaticCause(skeleton, program)
        per_location = []
        for loc in locations:
            choices = _location_choices(skeleton, loc, prune, program)
            if not choices:
                break
            per_location.append(choices)
        else:
            skeleton.host_order = _host_pairs(program, skeleton.events)  # only now: most combinations
            _static_relations(skeleton)  # fail a location above
            fence_orders = _fence_sc_orders(skeleton, prune)
            for parts in itertools.product(*per_location):
                rf: dict[int, int] = {}
                co: dict[str, tuple[int, ...]] = {}
                for loc, (loc_rf, loc_co) in zip(locations, parts):
                    rf.update(loc_rf)
                    co[loc] = loc_co
                for order in fence_orders:
                    yield skeleton, skeleton.execution(rf, co, order)


def explore(
    program: Program,
    *,
    max_executions: int = DEFAULT_MAX_EXECUTIONS,
    timeout: float | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    max_domain: int = DEFAULT_MAX_DOMAIN,
    prune: bool = True,
    on_execution: Callable[[Execution], None] | None = None,
    keep: bool = True,
) -> ExplorationResult:
    """Every consistent execution of ``program`` under the PTX model.

    Parameters
    ----------
    max_executions, timeout, max_steps, max_domain
        Bounds. Hitting one stops the exploration and sets ``limit_hit``; never silent.
    prune
        ``False`` enumerates every reads-from and coherence choice (see :func:`brute_force`).
    on_execution
        Called with each consistent execution (terminating or hanging) as it is found.
    keep
        Keep the executions in the result (turn off for large explorations counted by callback).

    Examples
    --------
    >>> from syncverify.program import Program, Thread, Store, Load
    >>> p = Program("W+R", (Thread("P0", 0, 0, (Store("x", 1),)), Thread("P1", 0, 1, (Load("r0", "x"),))))
    >>> sorted(x.final_registers[("P1", "r0")] for x in explore(p).executions)
    [0, 1]
    """
    start = time.monotonic()
    deadline = start + timeout if timeout is not None else None
    result = ExplorationResult(program, [], [])
    try:
        for skeleton, x in candidate_executions(program, prune=prune, max_steps=max_steps,
                                                max_domain=max_domain, deadline=deadline):
            result.candidates += 1
            if deadline is not None and result.candidates % 256 == 0 and time.monotonic() > deadline:
                raise LimitHit("timeout", f"after {result.candidates} candidate executions")
            if skeleton.stuck and not _spin_is_real(skeleton, x, program):
                continue
            if not ptx.is_consistent(x):
                continue
            if on_execution is not None:
                on_execution(x)
            if x.is_complete:
                result.complete_count += 1
                if keep:
                    result.executions.append(x)
            else:
                result.hang_count += 1
                if keep:
                    result.hangs.append(x)
            if result.complete_count + result.hang_count >= max_executions:
                raise LimitHit("max-executions", f"{max_executions} consistent executions")
    except LimitHit as hit:
        result.limit_hit, result.limit_detail = hit.limit, hit.detail
    result.seconds = time.monotonic() - start
    return result


def brute_force(program: Program, **options) -> ExplorationResult:
    """:func:`explore` with no pruning: every candidate execution, checked against every axiom."""
    return explore(program, prune=False, **options)
