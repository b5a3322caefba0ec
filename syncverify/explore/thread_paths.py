"""Thread paths: each thread run on its own, every read returning each value of its location's domain.

Step 1 and 2 of the explorer (:mod:`syncverify.explore.driver`): a path is the thread's events, its final
registers, and why it never ends (if so). Spin loops are cut, not unrolled: a thread that returns
to a program point with the same live registers (:func:`~syncverify.explore.liveness.live_registers`)
and made no write that changed memory since it was there ends as a *stuck* path whose blocking
reads are those of the dropped iteration (the explorer's docstring says why that loses no
violation). This module is the search; what each instruction computes is
:mod:`syncverify.explore.instructions`, a barrier arrival :func:`syncverify.explore.barriers.arrive`,
which reads may branch on value classes :func:`syncverify.explore.value_classes.value_classes_at`.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from syncverify.errors import UnsupportedConstruct
from syncverify.explore.barriers import arrive
from syncverify.explore.bounds import DEFAULT_MAX_STEPS, Clock, LimitHit
from syncverify.explore.instructions import BRANCHES, REG_OPS, atomic_result, instruction_text, operand_taint, operand_value
from syncverify.explore.liveness import live_registers
from syncverify.explore.path_types import LocalEvent, Path, PathState
from syncverify.explore.value_classes import value_classes_at
from syncverify.model.int32 import wrap_int32
from syncverify.program import Atomic, Barrier, Branch, Fence, Label, Load, Program, RegOp, Store, Thread
from syncverify.delivery import DeliveryOrder  # NVSHMEM ordering points
from syncverify.program import BulkCommit, BulkCopy, BulkWait, MbarArrive, MbarWait, ProxyFence  # the async proxy

__all__ = ["LocalEvent", "Path", "PathState", "initial_registers", "live_registers", "thread_paths"]


def _max_steps_detail(thread: Thread, max_steps: int) -> str:
    """Which bound ``max-steps`` is, in the protocol's terms, and the option that raises it.

    A thread whose code alone is longer than the bound (a protocol with thousands of steps) is told
    its size and its protocol steps; a shorter one must be looping without repeating a state.
    """
    who = f"{thread.role} (thread {thread.name})" if thread.role else f"thread {thread.name}"
    size = len(thread.instructions)
    if size > max_steps:
        named = "".join(f"{n} {kind} step{'' if n == 1 else 's'}, " for kind, n in thread.steps)
        return (f"{who} has {named}{size} instructions in all, more than the bound of {max_steps} "
                f"instructions per thread and path; raise it with --max-steps N, N above {size}")
    return (f"{who} ran more than {max_steps} instructions on one path without terminating or "
            f"repeating a state (a loop that writes every iteration?); raise the bound with --max-steps N")


def thread_paths(
    thread: Thread,
    domain: dict[str, frozenset[int]],
    registers: dict[str, int],
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    clock: Clock | None = None,
    observed: frozenset[str] | None = None,
    cta_threads: int = 1,
    classes: bool = False,
    unclassed: frozenset[str] = frozenset(),
) -> list[Path]:
    """Every path of ``thread`` when each read may return any value of its location's domain.

    ``observed``: the registers whose final values matter (None: all); see :func:`live_registers`.
    ``clock``: the exploration's clock, checked every 64 steps over all paths (many short paths
    take as long as a long one).
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

    value, taint_of = operand_value, operand_taint
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
            if clock is not None and work % 64 == 0:
                clock.check(f"while running thread {thread.name}")
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
            text, line = instruction_text(ins), getattr(ins, "line", None)
            if isinstance(ins, (Label, BulkCommit)):  # a commit only groups copies: syncverify.program.lower_async
                pc += 1
            elif isinstance(ins, MbarWait) and ins.never and not ins.choices:
                # Its phase never completes (syncverify.model.mbarrier): the thread waits here forever.
                paths.append(_ended(events, regs, ("mbarrier", ins.mbarrier, ins.never), bound))
                break
            elif isinstance(ins, (BulkCopy, BulkWait, ProxyFence, MbarArrive, MbarWait, DeliveryOrder)):
                if isinstance(ins, MbarWait) and ins.never:  # it may also never complete
                    paths.append(_ended(events, regs, ("mbarrier", ins.mbarrier, ins.never), bound))
                if isinstance(ins, MbarWait) and len(ins.choices) > 1:
                    # Each set of copies the completed phase may have seen is a path of its own.
                    for choice in reversed(ins.choices[1:]):
                        other = replace(ins, copies=choice)
                        stack.append(PathState(pc + 1, {**regs, **({ins.dst: 1} if ins.dst else {})},
                                               {**taint, **({ins.dst: frozenset()} if ins.dst else {})}, ctrl,
                                               events + (_async_event(other, ctrl, text, line),), seen, steps,
                                               _unbind(bound, ins.dst)))
                events = events + (_async_event(ins, ctrl, text, line),)
                if isinstance(ins, MbarWait) and ins.dst is not None:
                    regs = {**regs, ins.dst: 1}  # the try that returns True (syncverify.program.MbarWait)
                    bound = _unbind(bound, ins.dst)
                    taint = {**taint, ins.dst: frozenset()}
                pc += 1
            elif isinstance(ins, RegOp):
                a, b = value(ins.lhs, regs), value(ins.rhs, regs)
                result = wrap_int32(REG_OPS[ins.op](a, b))
                regs = {**regs, ins.dst: result}
                bound = _unbind(bound, ins.dst)
                taint = {**taint, ins.dst: taint_of(ins.lhs, taint) | (taint_of(ins.rhs, taint) if ins.op != "mov" else frozenset())}
                pc += 1
            elif isinstance(ins, Branch):
                if ins.cond is None:
                    taken = True
                else:
                    a, b = value(ins.lhs, regs), value(ins.rhs, regs)
                    taken = BRANCHES[ins.cond](a, b)
                    ctrl = ctrl | taint_of(ins.lhs, taint) | taint_of(ins.rhs, taint)
                pc = labels[ins.target] if taken else pc + 1
            elif isinstance(ins, Fence):
                events = events + (LocalEvent("F", sem=ins.kind, scope=ins.scope, deps=ctrl, label=text, line=line),)
                pc += 1
            elif isinstance(ins, Barrier):
                # A barrier arrival is a side effect: the loop is not a pure spin.
                here = PathState(pc, regs, taint, ctrl, events, {}, steps, _unbind(bound, ins.dst))
                states = arrive(ins, here, text, line, thread, cta_threads)
                stack.extend(reversed(states[1:]))
                first = states[0]
                pc, regs, taint, ctrl, events, seen, steps, bound = (
                    first.pc, first.regs, first.taint, first.ctrl, first.events, first.seen, first.steps, first.bound)
            elif isinstance(ins, Store):
                v = value(ins.value, regs)
                events = events + (LocalEvent("W", ins.loc, v, ins.sem, ins.scope,
                                              deps=ctrl | taint_of(ins.value, taint), label=text, line=line,
                                              ghost=ins.ghost, **_proxy_fields(ins)),)
                if not ins.ghost:
                    seen = {}
                pc += 1
            elif isinstance(ins, Load) and ins.ghost:
                # Tile data: no value choice (syncverify.program, GHOST); the register holds no value.
                events = events + (LocalEvent("R", ins.loc, None, ins.sem, ins.scope, deps=ctrl, label=text,
                                              line=line, ghost=True, **_proxy_fields(ins)),)
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


def _proxy_fields(ins: Load | Store) -> dict:
    """A load's or store's proxy, state space, bulk copy and footprint, as its event carries them."""
    return {"proxy": ins.proxy, "space": ins.space, "copies": () if ins.copy is None else (ins.copy,),
            "footprint": ins.footprint, "byte": ins.byte}


_ASYNC_SEMS = {BulkCopy: "issue", ProxyFence: "proxy", MbarArrive: "mbar_arrive", MbarWait: "mbar_wait",
               DeliveryOrder: "order"}


def _async_event(ins: BulkCopy | BulkWait | ProxyFence | MbarArrive | MbarWait | DeliveryOrder, ctrl: frozenset[int],
                 text: str, line: int | None) -> LocalEvent:
    """The event of an instruction of the async proxy (syncverify.model.ptx, choice 11): a proxy
    fence, a copy's issue point, a bulk-group wait, an mbarrier arrival or wait."""
    if isinstance(ins, ProxyFence):
        return LocalEvent("F", sem="proxy", space=ins.space, deps=ctrl, label=text, line=line)
    if isinstance(ins, BulkWait):
        return LocalEvent("A", sem="wait_group_read" if ins.read else "wait_group", copies=ins.copies,
                          deps=ctrl, label=text, line=line)
    copies = (ins.copy,) if isinstance(ins, BulkCopy) else getattr(ins, "copies", ())
    where = getattr(ins, "mbarrier", None)
    return LocalEvent("A", where, sem=_ASYNC_SEMS[type(ins)], copies=copies, deps=ctrl, label=text, line=line)


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


def _read(ins: Load | Atomic, v: int, state: PathState, text: str, line: int | None) -> PathState:
    """The state after ``ins`` (a load or an atomic) at ``state`` reads ``v``."""
    idx = len(state.events)
    if isinstance(ins, Load):
        ev = LocalEvent("R", ins.loc, v, ins.sem, ins.scope, deps=state.ctrl, label=text, line=line,
                        **_proxy_fields(ins))
        return replace(state, pc=state.pc + 1, regs={**state.regs, ins.dst: v},
                       taint={**state.taint, ins.dst: frozenset({idx})}, events=state.events + (ev,))
    read_sem = "acquire" if ins.sem in ("acquire", "acq_rel") else "relaxed"
    write_sem = "release" if ins.sem in ("release", "acq_rel") else "relaxed"
    operands = tuple(operand_value(o, state.regs) for o in ins.operands)
    written = atomic_result(ins.op, v, operands, ins.unsigned)
    if written is not None:
        written = wrap_int32(written)  # the GPU's int32 arithmetic wraps (syncverify.model.int32)
    copies = () if ins.copy is None else (ins.copy,)  # an NVSHMEM signal update (syncverify.delivery)
    events = state.events + (LocalEvent("R", ins.loc, v, read_sem, ins.scope, deps=state.ctrl, label=text,
                                        line=line, copies=copies),)
    seen = state.seen
    if written is not None:
        op_taint = frozenset().union(*(operand_taint(o, state.taint) for o in ins.operands))
        events += (LocalEvent("W", ins.loc, written, write_sem, ins.scope, rmw_with_previous=True,
                              deps=state.ctrl | op_taint, label=text, line=line, copies=copies),)
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
