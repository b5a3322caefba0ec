"""Thread paths: each thread run on its own, every read returning each value of its location's domain.

Step 1 and 2 of the explorer (:mod:`syncverify.explore.driver`): a path is the thread's events, its final
registers, and why it never ends (if so). Spin loops are cut, not unrolled: a thread that returns
to a program point with the same live registers (:func:`live_registers`) and made no write that
changed memory since it was there ends as a *stuck* path whose blocking reads are those of the
dropped iteration (the explorer's docstring says why that loses no violation).
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from syncverify.explore.bounds import DEFAULT_MAX_STEPS, LimitHit
from syncverify.errors import UnsupportedConstruct
from syncverify.model.int32 import wrap_int32
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


@dataclass(frozen=True)
class LocalEvent:
    """An event of one thread's path, before the execution numbers it."""

    kind: str
    loc: str | None = None
    value: int | None = None
    sem: str = "weak"
    scope: str | None = None
    barrier_id: int | None = None
    count: int | None = None  # barrier arrivals: the phase's thread count (None: every user)
    red_op: str = ""  # bar.red: popc | and | or
    predicate: int | None = None  # bar.red: this thread's predicate, 0 or 1
    rmw_with_previous: bool = False  # the write half of an atomic
    deps: frozenset[int] = frozenset()  # local indices of reads it depends on (data | ctrl)
    label: str = ""
    line: int | None = None
    ghost: bool = False
    # A read of a merged path (syncverify.explore.value_classes): the values it may return (``value`` is
    # None); the write it reads from decides which.
    values: frozenset[int] | None = None


@dataclass(frozen=True)
class Path:
    """One way a thread can run: its events, final registers, and why it never ends (if so)."""

    events: tuple[LocalEvent, ...]
    registers: tuple[tuple[str, int], ...]
    stuck: tuple | None = None  # ("spin", ((loc, value), ...)); barriers: syncverify.explore.barriers
    # Registers (name, local event index) whose final value is what that read of a merged path
    # returns (syncverify.explore.value_classes); their entry in ``registers`` is None.
    bound: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class PathState:
    """Where one path of a thread stands: what the explicit stack of :func:`thread_paths` holds.

    ``taint`` maps a register to the local indices of the reads its value depends on; ``ctrl`` are
    the reads the branches taken so far depend on. ``seen`` maps (pc, live registers) to where the
    path last was there (its event count) and its full registers then.
    """

    pc: int
    regs: dict[str, int]
    taint: dict[str, frozenset[int]]
    ctrl: frozenset[int]
    events: tuple[LocalEvent, ...]
    seen: dict
    steps: int
    # Registers holding what a read of a value class returned (syncverify.explore.value_classes), with
    # that read's local index: their value is the class's smallest until reads-from decides.
    bound: tuple[tuple[str, int], ...] = ()


def _operand_value(op: Operand, regs: dict[str, int]) -> int:
    """An operand's value: the literal (as a 32-bit register holds it), or the register's (0 if
    never written)."""
    return wrap_int32(op) if isinstance(op, int) else regs.get(op, 0)


def _operand_taint(op: Operand, taint: dict[str, frozenset[int]]) -> frozenset[int]:
    """The reads an operand's value depends on."""
    return frozenset() if isinstance(op, int) else taint.get(op, frozenset())


_U32 = 0xFFFFFFFF


def _unsigned(v: int) -> int:
    """``v`` read as a ``.u32`` (two's complement)."""
    return v & _U32


def _division(a: int, b: int) -> int:
    """``div.s32``: truncates toward zero; a division by zero is refused (PTX leaves it unspecified)."""
    if b == 0:
        raise UnsupportedConstruct("division by zero on some execution (PTX leaves its result unspecified)")
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def atomic_result(op: str, old: int, operands: tuple[int, ...], unsigned: bool = False) -> int | None:
    """The value an atomic writes, or None when it writes nothing (a failed ``cas``).

    PTX ISA, ``atom``: ``inc``: "(old >= b) ? 0 : old+1" and ``dec``: "((old == 0) || (old > b)) ?
    b : old-1", both on ``.u32``; ``min``/``max`` compare as signed unless ``unsigned`` (``.u32``);
    ``exch`` writes ``b``; ``cas`` writes its second operand when ``old`` equals the first.
    ``sub``, ``mul``, ``div`` are Dartagnan's (``div`` truncates).

    >>> atomic_result("inc", 3, (3,)), atomic_result("dec", 0, (5,)), atomic_result("dec", 7, (5,))
    (0, 5, 5)
    >>> atomic_result("max", -1, (1,)), atomic_result("max", -1, (1,), unsigned=True)
    (1, -1)
    """
    b = operands[0]
    if op == "add":
        return old + b
    if op == "sub":
        return old - b
    if op == "mul":
        return old * b
    if op == "div":
        return _division(old, b)
    if op == "exch":
        return b
    if op == "cas":
        return operands[1] if old == operands[0] else None
    if op in ("min", "max"):
        key = _unsigned if unsigned else (lambda v: v)
        pick = min if op == "min" else max
        return pick(old, b, key=key)
    if op == "and":
        return old & b
    if op == "or":
        return old | b
    if op == "xor":
        return old ^ b
    if op == "inc":
        return 0 if _unsigned(old) >= _unsigned(b) else old + 1
    if op == "dec":
        return b if old == 0 or _unsigned(old) > _unsigned(b) else old - 1
    raise UnsupportedConstruct(f"atomic op {op!r}")


_REG_OPS = {"mov": lambda a, b: a, "add": lambda a, b: a + b, "sub": lambda a, b: a - b,
            "mul": lambda a, b: a * b, "div": _division}
_BRANCHES = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "ge": lambda a, b: a >= b,
             "lt": lambda a, b: a < b, "gt": lambda a, b: a > b, "le": lambda a, b: a <= b}


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
        count = f", {ins.count}" if ins.count is not None else ""
        if ins.kind == "red":
            pred = ("!" if ins.negate else "") + str(ins.predicate)
            return f"bar.red.{ins.op} {ins.dst}, {ins.barrier_id}{count}, {pred}"
        return f"bar.{ins.kind} {ins.barrier_id}{count}"
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


def _max_steps_detail(thread: Thread, max_steps: int) -> str:
    """Which bound ``max-steps`` is, in the protocol's terms, and the option that raises it.

    A thread whose code alone is longer than the bound (a protocol with thousands of steps) is told
    its size and its protocol steps; a shorter one must be looping without repeating a state.
    """
    who = f"{thread.role} (thread {thread.name})" if thread.role else f"thread {thread.name}"
    size = len(thread.instructions)
    if size > max_steps:
        steps: dict[str, int] = {}
        for ins in thread.instructions:
            found = _STEP_RE.match(getattr(ins, "label", "") or "")
            if found:
                steps[found[1]] = max(steps.get(found[1], 0), int(found[2]))
        named = "".join(f"{n} {kind} step{'' if n == 1 else 's'}, " for kind, n in steps.items())
        return (f"{who} has {named}{size} instructions in all, more than the bound of {max_steps} "
                f"instructions per thread and path; raise it with --max-steps N, N above {size}")
    return (f"{who} ran more than {max_steps} instructions on one path without terminating or "
            f"repeating a state (a loop that writes every iteration?); raise the bound with --max-steps N")


_STEP_RE = re.compile(r"(signal|wait) step (\d+)\b")


def thread_paths(
    thread: Thread,
    domain: dict[str, frozenset[int]],
    registers: dict[str, int],
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    deadline: float | None = None,
    observed: frozenset[str] | None = None,
    cta_threads: int = 1,
    classes: bool = False,
    unclassed: frozenset[str] = frozenset(),
) -> list[Path]:
    """Every path of ``thread`` when each read may return any value of its location's domain.

    ``observed``: the registers whose final values matter (None: all); see :func:`live_registers`.
    ``cta_threads``: how many threads its CTA has, the most a ``bar.red.popc`` can count (a
    ``bar.red`` result is guessed here, like a read's value, and checked when the barrier's
    phases are formed: :mod:`syncverify.explore.barriers`). ``classes``: branch on value classes where
    :func:`value_classes_at` finds them (the explorer's pruning; brute force branches on values),
    but not for reads of the ``unclassed`` locations (:func:`syncverify.explore.value_classes.shared_by_units`).
    """
    code = thread.instructions
    labels = {ins.name: i for i, ins in enumerate(code) if isinstance(ins, Label)}
    live = live_registers(thread, observed)
    paths: list[Path] = []
    class_reads = value_classes_at(thread, live, observed, unclassed) if classes else {}

    value, taint_of = _operand_value, _operand_taint
    # An explicit stack of path states; the loop below works on the popped one's fields as locals.
    stack = [PathState(0, dict(registers), {}, frozenset(), (), {}, 0)]
    bound: tuple[tuple[str, int], ...] = ()
    work = -1  # loop iterations so far (the clock is read every 64: the first one included)
    while stack:
        state = stack.pop()
        pc, regs, taint, ctrl, events, seen, steps, bound = (state.pc, state.regs, state.taint, state.ctrl,
                                                             state.events, state.seen, state.steps, state.bound)
        while True:
            if pc >= len(code):
                paths.append(_ended(events, regs, None, bound))
                break
            if steps > max_steps:
                raise LimitHit("max-steps", _max_steps_detail(thread, max_steps))
            work += 1
            if deadline is not None and work % 64 == 0 and time.monotonic() > deadline:
                # Counted over all paths, not per path: many short paths take as long as a long one.
                raise LimitHit("timeout", f"while running thread {thread.name}")
            full = tuple(sorted(regs.items()))
            key = (pc, tuple(r for r in full if r[0] in live[pc]))
            if key in seen:
                start, before = seen[key]
                # Same registers: an iteration that changed no value (same-value writes allowed).
                # Same live registers only: an iteration with no write event at all.
                if before == full or not any(e.kind == "W" for e in events[start:]):
                    paths.extend(_stuck(events, start, regs, bound))
                    break
            seen = {**seen, key: (len(events), full)}
            ins = code[pc]
            steps += 1
            text, line = _text(ins), getattr(ins, "line", None)
            if isinstance(ins, Label):
                pc += 1
            elif isinstance(ins, RegOp):
                a, b = value(ins.lhs, regs), value(ins.rhs, regs)
                result = wrap_int32(_REG_OPS[ins.op](a, b))
                regs = {**regs, ins.dst: result}
                bound = _unbind(bound, ins.dst)
                taint = {**taint, ins.dst: taint_of(ins.lhs, taint) | (taint_of(ins.rhs, taint) if ins.op != "mov" else frozenset())}
                pc += 1
            elif isinstance(ins, Branch):
                if ins.cond is None:
                    taken = True
                else:
                    a, b = value(ins.lhs, regs), value(ins.rhs, regs)
                    taken = _BRANCHES[ins.cond](a, b)
                    ctrl = ctrl | taint_of(ins.lhs, taint) | taint_of(ins.rhs, taint)
                pc = labels[ins.target] if taken else pc + 1
            elif isinstance(ins, Fence):
                events = events + (LocalEvent("F", sem=ins.kind, scope=ins.scope, deps=ctrl, label=text, line=line),)
                pc += 1
            elif isinstance(ins, Barrier):
                # A barrier arrival is a side effect: the loop is not a pure spin.
                here = PathState(pc, regs, taint, ctrl, events, {}, steps, _unbind(bound, ins.dst))
                states = _arrive(ins, here, text, line, thread, cta_threads)
                stack.extend(reversed(states[1:]))
                first = states[0]
                pc, regs, taint, ctrl, events, seen, steps, bound = (
                    first.pc, first.regs, first.taint, first.ctrl, first.events, first.seen, first.steps, first.bound)
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
                bound = _unbind(bound, ins.dst)
                pc += 1
            elif isinstance(ins, (Load, Atomic)):
                # Branch on the value read (or on its class): push all but the first choice,
                # continue with the first.
                here = PathState(pc, regs, taint, ctrl, events, seen, steps, _unbind(bound, ins.dst))
                split = class_reads.get(pc)
                if split is not None and not (split[1] and any(e.kind == "B" and e.sem != "arrive" for e in events)):
                    states = [_read_class(ins, vals, here, text, line)
                              for vals in split[0](sorted(domain[ins.loc]))]
                else:
                    states = [_read(ins, v, here, text, line) for v in sorted(domain[ins.loc])]
                stack.extend(reversed(states[1:]))
                first = states[0]
                pc, regs, taint, ctrl, events, seen, steps, bound = (
                    first.pc, first.regs, first.taint, first.ctrl, first.events, first.seen, first.steps, first.bound)
            else:  # pragma: no cover - program.py admits no other instruction
                raise UnsupportedConstruct(f"the explorer cannot run {type(ins).__name__}")
    return paths


def _unbind(bound: tuple[tuple[str, int], ...], reg: str | None) -> tuple[tuple[str, int], ...]:
    """``bound`` without ``reg`` (it is written again: it no longer holds that read's value)."""
    return tuple(b for b in bound if b[0] != reg) if reg is not None and bound else bound


def _ended(events: tuple[LocalEvent, ...], regs: dict[str, int], stuck: tuple | None,
           bound: tuple[tuple[str, int], ...]) -> Path:
    """The path with these events and registers, bound registers left to reads-from."""
    held = {reg for reg, _i in bound}
    registers = tuple(sorted((reg, None if reg in held else v) for reg, v in regs.items()))
    return Path(events, registers, stuck, tuple(sorted(bound)))  # type: ignore[arg-type]


def _stuck(events: tuple[LocalEvent, ...], start: int, regs: dict[str, int],
           bound: tuple[tuple[str, int], ...]) -> list[Path]:
    """The stuck paths of a spin whose dropped iteration is ``events[start:]``: one per value
    of each of its reads (a read of a value class in it stands for each of its values: the spin
    needs its location's last value to be that one)."""
    dropped = [(i, e) for i, e in enumerate(events) if i >= start and e.kind == "R"]
    choices = [sorted(e.values) if e.values is not None else [e.value] for _i, e in dropped]
    out = []
    for values in itertools.product(*choices):
        value_of = {i: v for (i, _e), v in zip(dropped, values)}
        kept = tuple(b for b in bound if b[1] < start)
        fixed = {**regs, **{reg: value_of[i] for reg, i in bound if i >= start}}
        blocking = tuple((e.loc, v) for (_i, e), v in zip(dropped, values))
        out.append(_ended(events[:start], fixed, ("spin", blocking), kept))
    return out


def loop_positions(code: tuple) -> set[int]:
    """The instructions inside some loop: between a backward branch's target and the branch
    (every instruction a control-flow cycle passes lies within one such span)."""
    labels = {ins.name: i for i, ins in enumerate(code) if isinstance(ins, Label)}
    inside: set[int] = set()
    for j, ins in enumerate(code):
        if isinstance(ins, Branch) and labels[ins.target] <= j:
            inside.update(range(labels[ins.target], j + 1))
    return inside


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
            test, literal = _BRANCHES[nxt.cond], wrap_int32(nxt.rhs)
            out[pc] = ((lambda values, test=test, literal=literal:
                        [c for c in ([v for v in values if test(v, literal)], [v for v in values if not test(v, literal)]) if c]),
                       shown)
    return out


def _read_class(ins: Load | Atomic, values: list[int], state: PathState, text: str, line: int | None) -> PathState:
    """The state after ``ins`` reads one of ``values`` (a class: see :func:`value_classes_at`);
    a class of one value is an ordinary read."""
    if len(values) == 1:
        return _read(ins, values[0], state, text, line)
    after = _read(ins, values[0], state, text, line)
    idx = len(state.events)
    events = list(after.events)
    events[idx] = replace(events[idx], value=None, values=frozenset(values))
    if isinstance(ins, Atomic) and any(v != events[idx + 1].value for v in values):
        after = replace(after, seen={})  # outside any loop: what it resets is never looked up again
    bound = after.bound + ((ins.dst, idx),) if ins.dst is not None else after.bound
    return replace(after, events=tuple(events), bound=bound)


def _arrive(ins: Barrier, state: PathState, text: str, line: int | None, thread: Thread,
            cta_threads: int) -> list[PathState]:
    """The states after a barrier arrival: one, or for ``bar.red`` one per result it may receive.

    The id and count are read from their registers here (PTX ISA, ``bar``: "Source operand a
    specifies a logical barrier resource as an immediate constant or register with value 0
    through 15"); a value outside that range, or a count that is not positive, is refused."""
    regs = state.regs
    barrier_id = _operand_value(ins.barrier_id, regs)
    count = None if ins.count is None else _operand_value(ins.count, regs)
    who = f"thread {thread.name}" + (f" (line {line})" if line else "")
    if barrier_id not in range(16):
        raise UnsupportedConstruct(f"{who}: barrier id {ins.barrier_id} is {barrier_id} on some execution; "
                                   f"PTX has barriers 0 to 15")
    if count is not None and count <= 0:
        raise UnsupportedConstruct(f"{who}: barrier thread count {ins.count} is {count} on some execution; "
                                   f"it must be positive")
    deps = state.ctrl | _operand_taint(ins.barrier_id, state.taint) | (
        frozenset() if ins.count is None else _operand_taint(ins.count, state.taint))
    pred = None
    if ins.kind == "red":
        pred = int(_operand_value(ins.predicate, regs) != 0) ^ int(ins.negate)  # type: ignore[arg-type]
        deps |= _operand_taint(ins.predicate, state.taint)  # type: ignore[arg-type]
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


def _read(ins: Load | Atomic, v: int, state: PathState, text: str, line: int | None) -> PathState:
    """The state after ``ins`` (a load or an atomic) at ``state`` reads ``v``."""
    idx = len(state.events)
    if isinstance(ins, Load):
        ev = LocalEvent("R", ins.loc, v, ins.sem, ins.scope, deps=state.ctrl, label=text, line=line)
        return replace(state, pc=state.pc + 1, regs={**state.regs, ins.dst: v},
                       taint={**state.taint, ins.dst: frozenset({idx})}, events=state.events + (ev,))
    read_sem = "acquire" if ins.sem in ("acquire", "acq_rel") else "relaxed"
    write_sem = "release" if ins.sem in ("release", "acq_rel") else "relaxed"
    operands = tuple(_operand_value(o, state.regs) for o in ins.operands)
    written = atomic_result(ins.op, v, operands, ins.unsigned)
    if written is not None:
        written = wrap_int32(written)  # the GPU's int32 arithmetic wraps (syncverify.model.int32)
    events = state.events + (LocalEvent("R", ins.loc, v, read_sem, ins.scope, deps=state.ctrl, label=text,
                                        line=line),)
    seen = state.seen
    if written is not None:
        op_taint = frozenset().union(*(_operand_taint(o, state.taint) for o in ins.operands))
        events += (LocalEvent("W", ins.loc, written, write_sem, ins.scope, rmw_with_previous=True,
                              deps=state.ctrl | op_taint, label=text, line=line),)
        if written != v:
            seen = {}  # a write that changes memory: the loop is not a pure spin
    regs, taint = state.regs, state.taint
    if ins.dst is not None:
        regs = {**regs, ins.dst: v}
        taint = {**taint, ins.dst: frozenset({idx})}
    return replace(state, pc=state.pc + 1, regs=regs, taint=taint, events=events, seen=seen)


def initial_registers(program: Program, thread: Thread) -> dict[str, int]:
    """The registers ``thread`` starts with (the program's initial register values)."""
    return {reg: wrap_int32(v) for (t, reg), v in program.registers.items() if t == thread.name}
