"""NVSHMEM's device calls as program instructions, and their delivery agents.

A thread (a litmus thread, a protocol's thread, a lifted kernel program) may call NVSHMEM:
:class:`Put` (``nvshmem_put``, ``nvshmem_put_nbi``, ``nvshmem_putmem_signal{_nbi}`` and
``nvshmemx_signal_op``, which is a put of no data with a signal), :class:`Quiet` and
:class:`DeliveryFence`; ``nvshmem_signal_wait_until`` is a plain spin (:func:`signal_wait`).
:func:`lower_delivery` turns the calls into issue points and waits of the issuing thread and
one *delivery agent* thread per chunk and per signal update, built from the machinery of bulk
copies (:func:`syncverify.program.lower_async`): an issue point is a :class:`BulkCopy` of
completion ``"delivery"``, a completion is a :class:`BulkWait` over the deliveries it waits
for. What orders what is :mod:`syncverify.model.delivery` (modeling choice 13), each rule with
the specification's sentence; docs/nvshmem.md says which APIs are covered.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

from syncverify.errors import UnsupportedConstruct
from syncverify.program import (
    AGENT_REGISTER,
    GLOBAL,
    Atomic,
    Branch,
    BulkCopy,
    BulkWait,
    Instruction,
    Label,
    Load,
    Operand,
    Store,
    Thread,
    _at_line,
    loop_positions,
)

__all__ = ["SIGNAL_OPS", "COMPARISONS", "Put", "Quiet", "DeliveryFence", "DeliveryOrder", "DELIVERY_INSTRUCTIONS",
           "signal_wait", "lower_delivery"]

#: NVSHMEM's signal operators and the atomic each performs: ``NVSHMEM_SIGNAL_SET`` "An update to
#: signal data object is an atomic set operation", ``NVSHMEM_SIGNAL_ADD`` an atomic add.
SIGNAL_OPS: dict[str, str] = {"set": "exch", "add": "add"}
#: ``nvshmem_signal_wait_until``'s comparisons (``NVSHMEM_CMP_EQ``, ...) and the branch that
#: keeps the spin going while the comparison does not hold.
COMPARISONS: dict[str, str] = {"eq": "ne", "ne": "eq", "ge": "lt", "gt": "le", "le": "gt", "lt": "ge"}


@dataclass(frozen=True)
class Put:
    """A put to PE ``pe`` of ``chunks``, each ``(destination, source)``: a source is a location
    or a constant; then, with ``signal``, the signal update ``signal_op`` (``set`` or ``add``)
    of ``signal_value``. ``blocking``: the call returns once the sources are read (``nvshmem_put``,
    ``nvshmem_putmem_signal``); otherwise it returns at once (the ``_nbi`` forms). No chunks and
    a signal: ``nvshmemx_signal_op``."""

    pe: int
    chunks: tuple[tuple[str, Operand], ...]
    blocking: bool = False
    signal: str | None = None
    signal_op: str = "set"
    signal_value: int = 1
    line: int | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)
    ghost: bool = False  # the chunks are tile data (syncverify.program, GHOST): the kernel front end's puts

    def __post_init__(self) -> None:
        if self.signal_op not in SIGNAL_OPS:
            raise UnsupportedConstruct(f"signal operator {self.signal_op!r} is not one of "
                                       f"{', '.join(SIGNAL_OPS)} (NVSHMEM_SIGNAL_SET, NVSHMEM_SIGNAL_ADD)")
        if not self.chunks and self.signal is None:
            raise UnsupportedConstruct("a put moves at least one chunk or updates a signal")
        for _, src in self.chunks:
            if isinstance(src, str) and src.startswith("%"):
                raise UnsupportedConstruct(f"a put's source is a location or a constant, not the register {src}")

    @property
    def text(self) -> str:
        """What a trace calls it."""
        if self.label:
            return self.label
        if not self.chunks:
            return f"nvshmemx_signal_op({self.signal}, {self.signal_op} {self.signal_value}, pe {self.pe})"
        name = "nvshmem_putmem_signal" if self.signal else "nvshmem_put"
        moved = ", ".join(f"{dst} <- {src}" for dst, src in self.chunks)
        sig = f", {self.signal} {self.signal_op} {self.signal_value}" if self.signal else ""
        return f"{name}{'' if self.blocking else '_nbi'}({moved}{sig}, pe {self.pe})"


@dataclass(frozen=True)
class Quiet:
    """``nvshmem_quiet``: waits until every delivery the thread issued before it is complete."""

    line: int | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)


@dataclass(frozen=True)
class DeliveryFence:
    """``nvshmem_fence``: the thread's deliveries to a PE before it are delivered before its
    deliveries to that PE after it."""

    line: int | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)


DELIVERY_INSTRUCTIONS = (Put, Quiet, DeliveryFence)


@dataclass(frozen=True)
class DeliveryOrder:
    """What :class:`Quiet` and :class:`DeliveryFence` lower to besides their waits: an ordering
    point; what precedes it precedes the accesses of ``copies``, the deliveries its thread
    issues after it (filled in by :func:`lower_delivery`)."""

    copies: tuple[int, ...] = ()
    line: int | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)


def signal_wait(register: str, signal: str, comparison: str, value: Operand, loop: str, *,
                line: int | None = None, label: str = "") -> tuple[Instruction, ...]:
    """``register = nvshmem_signal_wait_until(signal, CMP, value)``: a spin of acquire loads at
    system scope (choice 13 f) under the label ``loop`` until ``register CMP value``."""
    if comparison not in COMPARISONS:
        raise UnsupportedConstruct(f"comparison {comparison!r} is not one of {', '.join(COMPARISONS)} "
                                   f"(NVSHMEM_CMP_EQ, NVSHMEM_CMP_GE, ...)")
    text = label or f"nvshmem_signal_wait_until({signal}, {comparison}, {value})"
    return (Label(loop, line=line),
            Load(register, signal, sem="acquire", scope="sys", line=line, label=text),
            Branch(loop, COMPARISONS[comparison], register, value, line=line, label=text))


def lower_delivery(threads: tuple[Thread, ...]) -> tuple[Thread, ...]:
    """The threads with their NVSHMEM calls lowered (see the module's docstring) and one delivery
    agent thread appended per chunk and per signal update; ``threads`` unchanged when none calls
    NVSHMEM. Run after :func:`syncverify.program.lower_async`: deliveries are numbered after its
    copies. A put inside a loop is refused, naming its line (each agent runs at most once)."""
    if not any(isinstance(ins, DELIVERY_INSTRUCTIONS) for t in threads for ins in t.instructions):
        return threads
    used = [ins.copy for t in threads for ins in t.instructions if getattr(ins, "copy", None) is not None]
    numbered = itertools.count(max(used, default=-1) + 1)
    issuers, agents = [], []
    for thread in threads:
        code: list[Instruction] = []
        issued: list[tuple[int, int]] = []  # (delivery, PE), in program order
        fenced: dict[int, tuple[int, ...]] = {}  # PE -> the deliveries to it before the latest fence
        at: dict[int, int] = {}  # delivery -> the position of its issue point in ``code``
        loops = loop_positions(thread.instructions)
        for position, ins in enumerate(thread.instructions):
            if isinstance(ins, Put):
                if position in loops:
                    raise _at_line(f"{ins.text} inside a loop is not modelled: each put must run at most once "
                                   f"({thread.name})", ins.line)
                before = fenced.get(ins.pe, ())
                chunks = []
                for dst, src in ins.chunks:
                    copy = next(numbered)
                    chunks.append(copy)
                    at[copy] = len(code)
                    code.append(BulkCopy(dst, src if isinstance(src, str) else "", GLOBAL, GLOBAL, "delivery",
                                         copy=copy, line=ins.line, label=ins.text))
                    agents.append(_chunk_agent(thread, copy, dst, src, before, ins))
                issued.extend((c, ins.pe) for c in chunks)
                if ins.signal is not None:
                    copy = next(numbered)
                    at[copy] = len(code)
                    code.append(BulkCopy(ins.signal, "", GLOBAL, GLOBAL, "delivery", copy=copy, line=ins.line,
                                         label=ins.text))
                    agents.append(_signal_agent(thread, copy, before + tuple(chunks), ins))
                    issued.append((copy, ins.pe))
                if ins.blocking and chunks:
                    code.append(BulkWait(0, read=True, copies=tuple(chunks), line=ins.line,
                                         label=f"{ins.text} returns"))
            elif isinstance(ins, Quiet):
                code.append(BulkWait(0, copies=tuple(c for c, _ in issued), line=ins.line,
                                     label=ins.label or "nvshmem_quiet"))
                code.append(DeliveryOrder(line=ins.line, label=ins.label or "nvshmem_quiet"))
            elif isinstance(ins, DeliveryFence):
                fenced = {pe: tuple(c for c, p in issued if p == pe) for _, pe in issued}
                code.append(DeliveryOrder(line=ins.line, label=ins.label or "nvshmem_fence"))
            else:
                code.append(ins)
        code = [replace(ins, copies=tuple(c for c, where in at.items() if where > k))
                if isinstance(ins, DeliveryOrder) else ins for k, ins in enumerate(code)]
        issuers.append(replace(thread, instructions=tuple(code)))
    return tuple(issuers) + tuple(agents)


def _waits(before: tuple[int, ...], put: Put) -> tuple[Instruction, ...]:
    """An agent's wait for the deliveries it is ordered after (none: nothing)."""
    return (BulkWait(0, copies=before, line=put.line, label=f"{put.text}: after earlier deliveries"),) if before else ()


def _chunk_agent(thread: Thread, copy: int, dst: str, src: Operand, before: tuple[int, ...], put: Put) -> Thread:
    """The agent that delivers one chunk: a read of its source (unless a constant), a weak write."""
    if isinstance(src, str):
        move: tuple[Instruction, ...] = (Load(AGENT_REGISTER, src, copy=copy, line=put.line, label=put.text),
                                         Store(dst, AGENT_REGISTER, copy=copy, line=put.line, label=put.text))
    else:
        move = (Store(dst, src, copy=copy, line=put.line, label=put.text, ghost=put.ghost),)
    return Thread(f"{thread.name}.put{copy}", thread.gpu, thread.cta, _waits(before, put) + move,
                  role=thread.role, phase=thread.phase)


def _signal_agent(thread: Thread, copy: int, before: tuple[int, ...], put: Put) -> Thread:
    """The agent that updates a put's signal once its chunks (and what it is fenced after) are delivered."""
    update = Atomic(SIGNAL_OPS[put.signal_op], None, put.signal, (put.signal_value,), sem="release", scope="sys",
                    copy=copy, line=put.line, label=put.text)
    return Thread(f"{thread.name}.signal{copy}", thread.gpu, thread.cta, _waits(before, put) + (update,),
                  role=thread.role, phase=thread.phase)

