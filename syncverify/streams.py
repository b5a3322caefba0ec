"""Stream memory operations: ``cuStreamWriteValue32``, ``cuStreamWaitValue32`` and copy-engine
copies, performed by the GPU's front end and copy engines in the order of their stream, by no SM
thread (issue 26, part 3; docs/nvshmem.md, "Stream memory operations").

One meaning for every side that has them: the litmus language (a thread of ``stream.*``
instructions is a stream), the protocol language (``stream_write_value`` / ``stream_wait_value``
steps, performed by the role's stream after / before its kernel) and the kernel front end's
harness (``sv.write_value``, ``sv.wait_value``, ``sv.copy_``). Each side builds
:class:`StreamOp` instructions; :func:`stream_code` is what one operation does and
:func:`stream_threads` how a stream orders them:

* **each operation is a thread of its own in a host phase of its own**, the stream's operations
  chained in ``host_order`` (choice 7: everything of one phase happens before everything of the
  next; the stream does not start an operation before the previous one completed). *Reading*:
  CUDA's stream semantics, "operations within a stream are executed in the order they were
  issued" (CUDA C Programming Guide, Streams), for memory operations as for kernels;
* ``write_value``: a release store at system scope of one 32-bit word. *Reading*:
  ``CU_STREAM_WRITE_VALUE_DEFAULT`` "the write is preceded by a system-scope memory fence"
  (driver API, ``cuStreamWriteValue32``); ``CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER`` is not
  offered;
* ``wait_value``: a spin of acquire loads at system scope until ``>=`` (``geq``,
  ``CU_STREAM_WAIT_VALUE_GEQ``, "Wait until (int32_t)(*addr - value) >= 0", read here as the
  signed comparison of the two values) or ``==`` (``eq``) holds; a wait that can never be
  satisfied is a hang, as every spin; ``CU_STREAM_WAIT_VALUE_AND``/``NOR`` are not offered;
* ``copy``: reads of the source words, then writes of what they read to the destination words
  (weak: a copy engine's writes order nothing by themselves).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from syncverify.errors import UnsupportedConstruct
from syncverify.program import Branch, Instruction, Label, Load, Store, Thread, _at_line

__all__ = ["STREAM_KINDS", "WAIT_COMPARISONS", "StreamOp", "stream_code", "stream_threads", "lower_streams"]

#: The operations and what CUDA calls them.
STREAM_KINDS: dict[str, str] = {"write_value": "cuStreamWriteValue32", "wait_value": "cuStreamWaitValue32",
                                "copy": "copy engine copy"}
#: ``wait_value``'s comparisons (``CU_STREAM_WAIT_VALUE_GEQ``, ``_EQ``) and the branch that keeps
#: the spin going while the comparison does not hold.
WAIT_COMPARISONS: dict[str, str] = {"geq": "lt", "eq": "ne"}


@dataclass(frozen=True)
class StreamOp:
    """One stream memory operation. ``write_value``: ``value`` to the word ``loc``;
    ``wait_value``: until ``loc`` ``cmp`` ``value``; ``copy``: ``src`` to ``dst`` word for word.
    ``ghost``: the words are tile data (``syncverify.program``, GHOST), written with ``value`` as
    a marker of who wrote them (the kernel front end's copies of tiles)."""

    kind: str
    loc: str = ""
    value: int = 0
    cmp: str = "geq"
    dst: tuple[str, ...] = ()
    src: tuple[str, ...] = ()
    ghost: bool = False
    line: int | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.kind not in STREAM_KINDS:
            raise _at_line(f"stream operation {self.kind!r} is not one of {', '.join(STREAM_KINDS)}", self.line)
        if self.kind == "wait_value" and self.cmp not in WAIT_COMPARISONS:
            raise _at_line(f"wait_value comparison {self.cmp!r} is not one of {', '.join(WAIT_COMPARISONS)} "
                           f"(CU_STREAM_WAIT_VALUE_GEQ, _EQ)", self.line)
        if self.kind == "copy" and not self.ghost and len(self.dst) != len(self.src):
            raise _at_line(f"a copy of {len(self.src)} source word(s) to {len(self.dst)} destination word(s)", self.line)

    @property
    def text(self) -> str:
        """What a trace calls it."""
        if self.label:
            return self.label
        if self.kind == "copy":
            return f"{STREAM_KINDS['copy']} {', '.join(self.dst)} <- {', '.join(self.src)}"
        if self.kind == "wait_value":
            return f"{STREAM_KINDS['wait_value']} {self.loc} {self.cmp} {self.value}"
        return f"{STREAM_KINDS['write_value']} {self.loc} = {self.value}"


def stream_code(op: StreamOp) -> tuple[Instruction, ...]:
    """The instructions one stream operation performs (the module docstring states each)."""
    text, line = op.text, op.line
    if op.kind == "write_value" and op.ghost:  # a word of tile data: which write it holds, as a tile store's
        return (Store(op.loc, op.value, line=line, label=text, ghost=True),)
    if op.kind == "write_value":
        return (Store(op.loc, op.value, "release", "sys", line=line, label=text),)
    if op.kind == "wait_value":
        return (Label("W"), Load("w", op.loc, "acquire", "sys", line=line, label=text),
                Branch("W", WAIT_COMPARISONS[op.cmp], "w", op.value, line=line, label=text))
    if op.ghost:
        return (tuple(Load("c", s, line=line, label=text, ghost=True) for s in op.src)
                + tuple(Store(d, op.value, line=line, label=text, ghost=True) for d in op.dst))
    reads = tuple(Load(f"c{k}", s, line=line, label=text) for k, s in enumerate(op.src))
    return reads + tuple(Store(d, f"c{k}", line=line, label=text) for k, d in enumerate(op.dst))


def stream_threads(name: str, gpu: int, cta: int, ops: tuple[StreamOp, ...], role: object = "", *,
                   after: object = None, before: object = None,
                   phase: Callable[[int], object] | None = None) -> tuple[list[Thread], list[tuple]]:
    """A stream's operations as threads, one per operation, each in its own phase (``phase(k)``,
    by default ``NAME.sK``), and the ``host_order`` pairs of the stream: each operation after the
    one before it, the first after ``after`` and the last before ``before`` (phases, when given)."""
    threads, pairs = [], []
    phases = [phase(k) if phase is not None else f"{name}.s{k}" for k in range(len(ops))]
    for k, op in enumerate(ops):
        threads.append(Thread(f"{name}.s{k}", gpu, cta, stream_code(op), role or f"stream {name}: {op.text}",
                              phases[k]))
    pairs += list(zip(phases, phases[1:]))
    if ops and after is not None:
        pairs.append((after, phases[0]))
    if ops and before is not None:
        pairs.append((phases[-1], before))
    return threads, pairs


def lower_streams(threads: tuple[Thread, ...], host_order: tuple = ()) -> tuple[tuple[Thread, ...], tuple]:
    """A litmus program's streams: each thread that holds a :class:`StreamOp` is a stream (all its
    instructions must be stream operations) and becomes :func:`stream_threads`' threads, its
    program order the stream's order. Other threads are unchanged. Raises
    :class:`UnsupportedConstruct` (with the instruction's ``line``) for a stream that also holds
    another instruction: a stream has no registers, branches or SM accesses."""
    out: list[Thread] = []
    pairs = list(host_order)
    for thread in threads:
        if not any(isinstance(ins, StreamOp) for ins in thread.instructions):
            out.append(thread)
            continue
        other = next((ins for ins in thread.instructions if not isinstance(ins, StreamOp)), None)
        if other is not None:
            raise _at_line(f"{thread.name} is a stream (it holds stream operations), so it can hold only stream "
                           f"operations, not {type(other).__name__}: write the SM's work in another thread",
                           getattr(other, "line", None))
        made, order = stream_threads(thread.name, thread.gpu, thread.cta, thread.instructions,
                                     thread.role or f"stream {thread.name}")
        out += [replace(t, role=f"{thread.name} (stream): {op.text}")
                for t, op in zip(made, thread.instructions)]
        pairs += order
    return tuple(out), tuple(pairs)
