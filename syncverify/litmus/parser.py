"""Read PTX litmus tests (the herd7 / Dartagnan format) into a :class:`~syncverify.program.Program`.

The format, by example::

    // lines starting with // are skipped anywhere outside the thread columns
    PTX MP-sys
    "message passing between GPUs through a release/acquire pair at system scope"
    {
    x=0; y=0;
    P1:r1=0; P1:r2=0;
    }
     P0@cta 0,gpu 0          | P1@cta 0,gpu 1          ;
     st.weak x, 1            | LC00:                   ;
     st.release.sys y, 1     | ld.acquire.sys r1, y    ;
                             | beq r1, 0, LC00         ;
                             | ld.weak r2, x           ;
    ~exists (P1:r1 == 1 /\\ P1:r2 != 1)

* a ``PTX NAME`` header, then optional quoted comments (one may span lines) and herd's
  ``Key=value`` metadata lines, which are ignored;
* an init block ``{ ... }`` of ``loc=int;`` and ``Pn:reg=int;`` entries (a leading C type word such
  as ``int`` or ``uint32_t`` is ignored);
* thread columns split on ``|``, every row ending in ``;``; the first row places the threads
  (``Pn@cta A,gpu B``), named ``P0``, ``P1``, ... in order;
* an optional final condition: ``exists``, ``~exists`` or ``forall`` over comparisons (``==``,
  ``!=``; herd's ``=`` reads as ``==``) of ``Pn:reg``, locations and integers, joined by ``/\\``,
  ``\\/``, ``~``, parentheses and ``true``.

Every malformed input raises :class:`~syncverify.errors.LitmusSyntaxError`, whose ``str()`` reads
``FILE:LINE: what is wrong``; nothing else escapes :func:`parse_litmus`.

Reading choices (each one refuses rather than guesses):

* ``ld.volatile`` / ``st.volatile`` are relaxed at system scope and ``membar.{cta,gl,sys}`` is
  ``fence.sc.{cta,gpu,sys}`` (the choices of :mod:`syncverify.program`, with their sources).
* A bare ``fence.SCOPE`` is refused: write ``fence.sc.SCOPE`` or ``fence.acq_rel.SCOPE``.
* ``.global`` and type suffixes (``.u32``, ``.s32``, ``.b64``, ...) are accepted and ignored; other
  state spaces (``.shared``, ...) and scopes (``.cluster``) are refused.
* A location referred to only by the final condition is added to the init block with value 0, as
  herd does.
* ``bge`` / ``blt`` / ``bgt`` / ``ble`` branches are read as well as ``beq`` / ``bne``.
* Dartagnan's forms (``LitmusPTX.g4`` and its visitor, PTX v6.0/v7.5 without proxies) are read
  with Dartagnan's meaning: ``bar.cta.sync A, B{, C}`` is barrier ``B`` with ``C`` threads (``A``,
  which Dartagnan's tests always set to 1, is ignored), ``bar.cta.arrive A`` has no count,
  ``ld r1, 5`` / ``ld r1, r2`` set a register, ``atom``/``red`` take ``sub``, ``mul``, ``div``,
  ``red`` takes ``.acquire``/``.acq_rel``, a ``locations [...]`` clause is ignored and a
  ``filter`` keeps only the executions that satisfy it. The ISA forms keep the ISA's meaning:
  ``bar.sync A, B`` / ``barrier.sync A, B`` are barrier ``A`` with ``B`` threads. Where the ISA
  is stricter than what is accepted, the program carries one warning per rule
  (:attr:`~syncverify.program.Program.warnings`), naming the ISA sentence; nothing is refused for it.
* Barrier counts are numbers of litmus threads (each thread of a test is one thread).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator, NoReturn

from syncverify.delivery import COMPARISONS, SIGNAL_OPS, DeliveryFence, Put, Quiet, lower_delivery, signal_wait
from syncverify.streams import WAIT_COMPARISONS, StreamOp, lower_streams
from syncverify.errors import LitmusSyntaxError, SyncVerifyError, UnsupportedConstruct
from syncverify.inputs import read_input_file
from syncverify.program import (
    ATOMIC_OPS,
    GLOBAL,
    ISA_ATOMIC_OPS,
    RED_OPS,
    SCOPES,
    SHARED_CLUSTER,
    SHARED_CTA,
    And,
    Atomic,
    Barrier,
    Branch,
    BulkCommit,
    BulkCopy,
    BulkWait,
    Compare,
    Condition,
    Fence,
    Instruction,
    Label,
    Load,
    LocRef,
    MbarArrive,
    MbarInit,
    MbarTx,
    MbarWait,
    Not,
    Operand,
    Or,
    Program,
    Prop,
    ProxyFence,
    RegOp,
    RegRef,
    Store,
    Term,
    Thread,
    TrueProp,
    lower_async,
    mixed_size_locations,
    split_mixed_sizes,
)

__all__ = ["parse_litmus", "parse_litmus_file"]

# ----- lexical pieces ---------------------------------------------------------------------------

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_REG = r"%?[A-Za-z_][A-Za-z0-9_]*"
_INT = r"[-+]?(?:0[xX][0-9a-fA-F]+|[0-9]+)"

_NAME_RE = re.compile(rf"{_NAME}\Z")
_REG_RE = re.compile(rf"{_REG}\Z")
_INT_RE = re.compile(rf"{_INT}\Z")
_LOC_RE = re.compile(rf"\[\s*({_NAME})\s*\]\Z|({_NAME})\Z")
_OFFSET_RE = re.compile(rf"\[\s*({_NAME})\s*\+\s*([0-9]+)\s*\]\Z")  # [x+2]: byte 2 of x
_TYPE_RE = re.compile(r"[usbf](?:8|16|32|64)\Z")
_LABEL_RE = re.compile(rf"({_NAME})\s*:(.*)\Z", re.S)
_PLACEMENT_RE = re.compile(r"P([0-9]+)\s*(?:@(.*))?\Z", re.S)
_CONDITION_START = re.compile(r"~|(?:exists|forall|locations|filter|not|final)(?![A-Za-z0-9_])")
_METADATA_RE = re.compile(rf"{_NAME}\s*=")

# herd's C-style type words that may prefix an init entry: `int x=0;`, `uint32_t x = 0;`
_C_TYPE_RE = re.compile(r"(?:(?:unsigned|signed|const|volatile)\s+)*(?:[A-Za-z_][A-Za-z0-9_]*\s+)?")

_SCOPE_HINT = "(.cta, .gpu or .sys)"
_MAX_NESTING = 100  # parentheses and ~ in a condition: deeper input is refused, not recursed into

# Real PTX instructions outside the model: named as unsupported rather than unknown.
_UNSUPPORTED = frozenset(
    """
    tld suld sust suatom sured cold
    wgmma mma wmma ldmatrix stmatrix ldu tex tld4 txq suld sust sured suq prefetch
    prefetchu nanosleep bra call ret exit trap brkpt vote shfl match activemask redux elect
    griddepcontrol setmaxnreg multimem tensormap cvta isspacep discard applypriority createpolicy
    mad rem xor not shl shr setp selp cvt abs neg getctarank clusterlaunchcontrol
    tcgen05 cp.async st.async red.async alloca stackrestore stacksave pmevent
    """.split()
)

_HINTS = {
    "ld": "ld takes .weak, .relaxed.SCOPE, .acquire.SCOPE or .volatile",
    "st": "st takes .weak, .relaxed.SCOPE, .release.SCOPE or .volatile",
    "atom": "atom takes {.SEM}{.SCOPE}.OP{.TYPE} with OP one of " + ", ".join(ATOMIC_OPS),
    "red": "red takes {.relaxed|.release}{.SCOPE}.OP{.TYPE} with OP one of "
    + ", ".join(op for op in ATOMIC_OPS if op not in ("exch", "cas")),
    "bar.red": "write bar{.cta}.red.popc.u32 D, ID{, COUNT}, {!}P or bar{.cta}.red.{and,or}.pred D, ID{, COUNT}, {!}P",
    "fence": "write fence.sc.SCOPE or fence.acq_rel.SCOPE",
    "membar": "write membar.cta, membar.gl or membar.sys",
    "fence.proxy": "of the proxy fences only fence.proxy.async{.global,.shared::cta,.shared::cluster} is modelled",
    "cp": "write cp.async.bulk{.tensor.Nd}.global.shared::cta{.tile}.bulk_group, "
          "cp.async.bulk{.tensor.Nd}.shared::cta.global{.tile}.mbarrier::complete_tx::bytes, "
          "cp.async.bulk.commit_group or cp.async.bulk.wait_group{.read} N",
    "mbarrier": "write mbarrier.init.shared::cta.b64 [BAR], COUNT, mbarrier.arrive{.release.cta}.shared::cta.b64 "
                "_, [BAR], mbarrier.arrive.expect_tx{.release.cta}.shared::cta.b64 _, [BAR], TX, "
                "mbarrier.expect_tx|complete_tx{.relaxed.cta}.shared::cta.b64 [BAR], TX, "
                "mbarrier.try_wait{.acquire.cta}.shared::cta.b64 P, [BAR], STATE or "
                "mbarrier.try_wait.parity{.acquire.cta}.shared::cta.b64 P, [BAR], 0|1",
    "nvshmem": "write nvshmem.put{_nbi} PE, [DST], SRC{, [DST], SRC ...}, "
               "nvshmem.put_signal{_nbi}.{set,add} PE, [SIG], VALUE, [DST], SRC{, ...}, "
               "nvshmem.signal_op.{set,add} PE, [SIG], VALUE, nvshmem.quiet, nvshmem.fence or "
               "nvshmem.signal_wait_until.{eq,ne,ge,gt,le,lt} REG, [SIG], VALUE (SRC: [LOC] or an integer)",
    "stream": "write stream.write_value [LOC], VALUE, stream.wait_value.{geq,eq} [LOC], VALUE or "
              "stream.copy [DST], [SRC]{, [DST], [SRC] ...} (a thread of these only is a stream)",
    "bar": "write bar{.cta}.sync ID{, COUNT}, bar{.cta}.arrive ID, COUNT or bar{.cta}.red.OP D, ID{, COUNT}, {!}P",
    "barrier": "write barrier{.cta}.sync ID{, COUNT}, barrier{.cta}.arrive ID, COUNT or barrier{.cta}.red.OP ...",
}

_KNOWN = (
    "ld", "st", "atom", "red", "fence", "membar", "bar", "barrier", "cp.async.bulk", "mbarrier", "nvshmem", "stream",
    "add", "sub", "mul", "div", "mov", "beq", "bne", "bge", "blt", "bgt", "ble", "goto",
)  # fmt: skip


# ----- source text with line numbers ------------------------------------------------------------


@dataclass
class _Source:
    """The lines of one litmus file and the path its errors name."""

    path: str
    lines: list[str]
    warnings: dict[str, str] = field(default_factory=dict)  # ISA rule -> its one warning
    # A location's state space, where an instruction names one: location -> (space, line).
    spaces: dict[str, tuple[str, int]] = field(default_factory=dict)

    def space(self, loc: str, space: str, line: int) -> None:
        """Record that the instruction at ``line`` puts ``loc`` in ``space``; a second, other space is refused."""
        known = self.spaces.setdefault(loc, (space, line))
        if known[0] != space:
            self.fail(f"location {loc} is .{space} here but .{known[0]} on line {known[1]}", line)

    def fail(self, message: str, line: int | None) -> NoReturn:
        raise LitmusSyntaxError(message, path=self.path, line=line)

    def note(self, key: str, message: str, line: int | None) -> None:
        """A warning about the test itself (likely a mistake), not about the ISA: one per ``key``."""
        self.warnings.setdefault(key, f"{self.path}:{line}: warning: {message}")

    def warn(self, rule: str, message: str, line: int | None) -> None:
        """Accept a construct the PTX ISA forbids or reads otherwise: one warning per ``rule``."""
        self.warnings.setdefault(rule, f"{self.path}:{line}: warning: {message} (PTX ISA: {rule})")


def _is_skipped(text: str) -> bool:
    """Blank lines and ``//`` comment lines carry nothing outside the thread columns."""
    stripped = text.strip()
    return not stripped or stripped.startswith("//")


def _significant(src: _Source, start: int) -> Iterator[int]:
    """Indices (0-based) of the lines from ``start`` on that are neither blank nor comments."""
    for index in range(start, len(src.lines)):
        if not _is_skipped(src.lines[index]):
            yield index


def _next_significant(src: _Source, start: int) -> int | None:
    return next(_significant(src, start), None)


# ----- header, comments, init block -------------------------------------------------------------


_OTHER_ARCHS = frozenset(
    "X86 X86_64 AArch64 ARM ARM8 PPC RISCV MIPS C LISA BPF VULKAN Vulkan OpenCL OPENCL SPIRV".split()
)


def _header(src: _Source) -> tuple[str, str, int]:
    """``PTX NAME {"comment"}``: the test's name, a comment on the same line, the next line index."""
    index = _next_significant(src, 0)
    if index is None:
        src.fail("empty litmus file: expected a 'PTX NAME' header line", 1)
    line = src.lines[index]
    words = line.split()
    if words[0] != "PTX":
        if words[0] in _OTHER_ARCHS:
            src.fail(f"architecture {words[0]!r} is not supported; this checker reads PTX litmus tests", index + 1)
        src.fail(f"expected a 'PTX NAME' header line, found {_show(line)}", index + 1)
    if len(words) < 2 or words[1].startswith('"'):
        src.fail("the header names no test; write 'PTX NAME'", index + 1)
    after_name = line.index(words[1], line.index("PTX") + 3) + len(words[1])
    rest = line[after_name:].strip()
    if not rest:
        return words[1], "", index + 1
    if not rest.startswith('"'):
        src.fail(f"a test name is one word; found {_show(line.strip()[3:])}", index + 1)
    comment, after = _quoted(src, index, line.index('"', after_name))
    return words[1], comment, after


def _quoted(src: _Source, index: int, column: int) -> tuple[str, int]:
    """The quoted string opening at ``lines[index][column]``; returns it and the next line index."""
    text = src.lines[index][column + 1 :]
    parts: list[str] = []
    end_line = index
    while '"' not in text:
        parts.append(text)
        end_line += 1
        if end_line >= len(src.lines):
            src.fail("quoted comment is never closed with '\"'", index + 1)
        text = src.lines[end_line]
    close = text.index('"')
    parts.append(text[:close])
    if text[close + 1 :].strip():
        src.fail(f"unexpected text after a quoted comment: {_show(text[close + 1 :])}", end_line + 1)
    return "\n".join(part.strip() for part in parts).strip(), end_line + 1


def _comments(src: _Source, start: int, first: str) -> tuple[str, int]:
    """Quoted comments and herd's ``Key=value`` metadata lines (ignored) before the init block."""
    comments = [first] if first else []
    index = _next_significant(src, start)
    while index is not None:
        stripped = src.lines[index].strip()
        if stripped.startswith('"'):
            text, after = _quoted(src, index, src.lines[index].index('"'))
            comments.append(text)
        elif _METADATA_RE.match(stripped) and ";" not in stripped:
            after = index + 1  # Cycle=..., Relax=..., Generator=...
        else:
            break
        index = _next_significant(src, after)
    if index is None:
        src.fail("missing init block: expected '{' after the header", len(src.lines))
    return "\n".join(comments), index


def _init_block(src: _Source, index: int) -> tuple[list[tuple[str, int]], int]:
    """The ``{ ... }`` block as ``(entry text, line)`` pairs; returns them and the next line index."""
    first = src.lines[index].strip()
    if not first.startswith("{"):
        src.fail(f"expected the init block '{{', found {_show(first)}", index + 1)
    entries: list[tuple[str, int]] = []
    text, line = first[1:], index
    while True:
        body, closed, tail = text.partition("}")
        if "{" in body:
            src.fail("unexpected '{' inside the init block", line + 1)
        entries.extend((part, line + 1) for part in body.split(";"))
        if closed:
            if tail.strip():
                src.fail(f"unexpected text after the init block: {_show(tail)}", line + 1)
            return entries, line + 1
        line += 1
        while line < len(src.lines) and src.lines[line].strip().startswith("//"):
            line += 1
        if line >= len(src.lines):
            src.fail("init block is never closed with '}'", index + 1)
        text = src.lines[line]


def _init_entries(
    src: _Source, entries: list[tuple[str, int]]
) -> tuple[dict[str, int], dict[tuple[str, str], tuple[int, int]]]:
    """``loc=int`` and ``Pn:reg=int`` entries: initial memory, and registers with their lines."""
    memory: dict[str, int] = {}
    registers: dict[tuple[str, str], tuple[int, int]] = {}
    for raw, line in entries:
        entry = raw.strip()
        if not entry:
            continue
        if " aliases " in f" {entry} ":
            src.fail(f"proxy alias {_show(entry)} is not supported: proxies are out of scope", line)
        target, eq, value = (part.strip() for part in entry.partition("="))
        if eq and (value.startswith("&") or (_NAME_RE.match(value) and not _INT_RE.match(value))):
            src.fail(f"pointer initial value {_show(entry)} is not supported: no instruction of the PTX litmus "
                     f"language dereferences a register", line)
        if not eq:
            src.fail(f"init entry {_show(entry)} is not 'loc=int' or 'Pn:reg=int'", line)
        if not _INT_RE.match(value):
            src.fail(f"initial value of {_show(target)} must be an integer, got {_show(value)}", line)
        register = re.fullmatch(rf"P?([0-9]+)\s*:\s*({_REG})", target)
        if register:
            key = (f"P{int(register.group(1))}", register.group(2))
            if key in registers:
                src.fail(f"register {key[0]}:{key[1]} is initialised twice", line)
            registers[key] = (_int(value), line)
            continue
        loc = _C_TYPE_RE.sub("", target, count=1) if " " in target else target
        if not _NAME_RE.match(loc):
            src.fail(f"init entry {_show(entry)} is not 'loc=int' or 'Pn:reg=int'", line)
        if loc in memory:
            src.fail(f"location {loc!r} is initialised twice", line)
        memory[loc] = _int(value)
    return memory, registers


# ----- thread columns ---------------------------------------------------------------------------


def _cells(src: _Source, index: int) -> list[str]:
    """The ``|``-separated cells of one row, which must end in ``;``."""
    text = src.lines[index].rstrip()
    if not text.endswith(";"):
        src.fail(
            f"expected a thread row ending in ';' or a final condition (exists, ~exists, forall), "
            f"found {_show(text)}",
            index + 1,
        )
    return [cell.strip() for cell in text[:-1].split("|")]


def _placements(src: _Source, index: int) -> list[tuple[str, int, int]]:
    """The first row: ``Pn@cta A,gpu B`` for every column, threads named P0, P1, ... in order."""
    threads: list[tuple[str, int, int]] = []
    for column, cell in enumerate(_cells(src, index)):
        match = _PLACEMENT_RE.match(cell)
        if not match:
            src.fail(f"expected a thread header like 'P{column}@cta 0,gpu 0', found {_show(cell)}", index + 1)
        name = f"P{int(match.group(1))}"
        if int(match.group(1)) != column:
            src.fail(f"thread columns must be named P0, P1, ... in order; column {column} is {name}", index + 1)
        if match.group(2) is None:
            src.fail(f"thread {name} has no placement; write '{name}@cta 0,gpu 0'", index + 1)
        cta, gpu = _placement(src, name, match.group(2), index + 1)
        threads.append((name, cta, gpu))
    return threads


def _placement(src: _Source, name: str, text: str, line: int) -> tuple[int, int]:
    """``cta A,gpu B`` (either order, spaces allowed) -> ``(A, B)``."""
    found: dict[str, int] = {}
    for item in text.split(","):
        match = re.fullmatch(r"\s*(cta|gpu)\s+([0-9]+)\s*", item)
        if not match or match.group(1) in found:
            src.fail(f"placement of {name} must read 'cta A,gpu B', found {_show(text)}", line)
        found[match.group(1)] = int(match.group(2))
    if set(found) != {"cta", "gpu"}:
        src.fail(f"placement of {name} must name both cta and gpu, e.g. '{name}@cta 0,gpu 0'", line)
    return found["cta"], found["gpu"]


def _table(src: _Source, index: int) -> tuple[list[tuple[str, int, int]], list[list[Instruction]], int | None]:
    """Thread placements and instructions; returns the index of the condition line (or None)."""
    first = _next_significant(src, index)
    if first is None or _CONDITION_START.match(src.lines[first].strip()):
        src.fail(
            "no thread columns: expected a row like 'P0@cta 0,gpu 0 | P1@cta 0,gpu 1 ;'",
            (first + 1) if first is not None else len(src.lines),
        )
    threads = _placements(src, first)
    code: list[list[Instruction]] = [[] for _ in threads]
    for row in _significant(src, first + 1):
        stripped = src.lines[row].strip()
        if _CONDITION_START.match(stripped):
            return threads, code, row
        cells = _cells(src, row)
        if len(cells) != len(threads):
            names = ", ".join(name for name, _, _ in threads)
            src.fail(
                f"row has {len(cells)} column(s) but the header declares {len(threads)} thread(s) ({names})",
                row + 1,
            )
        for column, cell in enumerate(cells):
            if cell:
                code[column].extend(_cell(src, cell, threads[column][0], row + 1))
    return threads, code, None


def _check_labels(src: _Source, thread: str, code: list[Instruction]) -> None:
    """Labels are unique within a thread and every branch targets one of them."""
    labels: dict[str, int | None] = {}
    for ins in code:
        if isinstance(ins, Label):
            if ins.name in labels:
                src.fail(f"label {ins.name!r} is defined twice in {thread}", ins.line)
            labels[ins.name] = ins.line
    for ins in code:
        if isinstance(ins, Branch) and ins.target not in labels:
            known = ", ".join(labels) if labels else "none"
            src.fail(f"branch to unknown label {ins.target!r} ({thread}): labels in {thread}: {known}", ins.line)


# ----- one instruction --------------------------------------------------------------------------


@dataclass
class _Ins:
    """One instruction's text, where it stands, and helpers to fail with its line."""

    src: _Source
    mnemonic: str
    operands: list[str]
    thread: str
    line: int

    def fail(self, message: str, hint: str = "") -> NoReturn:
        self.src.fail(f"{message} ({self.thread})" + (f": {hint}" if hint else ""), self.line)

    def unknown(self, hint: str = "") -> NoReturn:
        self.fail(f"unknown instruction {self.mnemonic!r}", hint)

    def arity(self, *counts: int) -> None:
        if len(self.operands) not in counts:
            want = " or ".join(map(str, counts))
            self.fail(f"{self.mnemonic} takes {want} operand(s), got {len(self.operands)}")

    def register(self, position: int) -> str:
        text = self.operands[position]
        if not _REG_RE.match(text):
            self.fail(f"operand {position + 1} of {self.mnemonic} must be a register, got {_show(text)}")
        return text

    def value(self, position: int) -> Operand:
        text = self.operands[position]
        if _INT_RE.match(text):
            return _int(text)
        if _REG_RE.match(text):
            return text
        self.fail(f"operand {position + 1} of {self.mnemonic} must be a register or an integer, got {_show(text)}")

    def location(self, position: int) -> str:
        match = _LOC_RE.match(self.operands[position])
        if not match:
            self.fail(f"operand {position + 1} of {self.mnemonic} must be a location, got {_show(self.operands[position])}")
        return match.group(1) or match.group(2)

    def address(self, position: int) -> tuple[str, int]:
        """A location operand with an optional byte offset: ``[x]``, ``x`` or ``[x+2]``."""
        match = _OFFSET_RE.match(self.operands[position])
        if match:
            return match.group(1), int(match.group(2))
        return self.location(position), 0

    def integer(self, position: int, what: str) -> int:
        text = self.operands[position]
        if not _INT_RE.match(text):
            self.fail(f"{what} of {self.mnemonic} must be an integer constant, got {_show(text)}")
        return _int(text)

    def label(self, position: int) -> str:
        text = self.operands[position]
        if not _NAME_RE.match(text):
            self.fail(f"branch target of {self.mnemonic} must be a label, got {_show(text)}")
        return text


def _cell(src: _Source, cell: str, thread: str, line: int) -> list[Instruction]:
    """One cell: ``L:``, an instruction, or labels followed by an instruction (``L: instruction``)."""
    labels: list[Instruction] = []
    while match := _LABEL_RE.match(cell):
        labels.append(Label(match.group(1), line=line))
        cell = match.group(2).strip()
    if not cell:
        return labels
    read = _instruction(src, cell, thread, line)
    return labels + (list(read) if isinstance(read, tuple) else [read])  # a tuple: a spin (nvshmem)


def _instruction(src: _Source, cell: str, thread: str, line: int) -> Instruction | tuple[Instruction, ...]:
    """One instruction, read by the reader of its base mnemonic (a tuple: the instructions of
    one call, ``nvshmem.signal_wait_until``)."""
    mnemonic, rest = (cell.split(None, 1) + [""])[:2]
    operands = [op.strip() for op in rest.split(",")] if rest.strip() else []
    ins = _Ins(src, mnemonic, operands, thread, line)
    if any(not op for op in operands):
        ins.fail(f"empty operand in {_show(cell)}")
    base, *quals = mnemonic.split(".")
    if base not in _READERS:
        if base in _UNSUPPORTED or mnemonic in _UNSUPPORTED:
            hint = "write goto L" if base == "bra" else f"the model covers {', '.join(_KNOWN)}"
            ins.fail(f"unsupported instruction {mnemonic!r}", hint)
        close = difflib.get_close_matches(base, _KNOWN, n=1, cutoff=0.5)
        ins.unknown(f"did you mean {close[0]!r}?" if close else f"the model covers {', '.join(_KNOWN)}")
    if any(not q for q in quals):
        ins.unknown(_HINTS.get(base, ""))
    try:
        return _READERS[base](ins, quals)
    except UnsupportedConstruct as error:
        ins.fail(str(error))


def _sorted_quals(ins: _Ins, quals: list[str], kinds: dict[str, tuple[str, ...]]) -> tuple[dict[str, str], list[str]]:
    """Sort qualifiers into ``kinds`` (e.g. semantics -> the allowed ones; at most one each);
    a state space is found where ``kinds`` has ``"space"`` (else ``.global`` is ignored and other
    spaces refused), type suffixes are ignored, ``.cluster`` is refused.
    Returns what was found per kind and the qualifiers left for the caller to judge."""
    found: dict[str, str] = {}
    left: list[str] = []
    for q in quals:
        kind = next((k for k, allowed in kinds.items() if q in allowed), None)
        if kind is not None:
            if kind in found:
                ins.fail(f"{ins.mnemonic!r} has two {kind} (.{found[kind]} and .{q})")
            found[kind] = q
        elif q in _SPACE_QUALS and "space" in kinds:
            if "space" in found:
                ins.fail(f"{ins.mnemonic!r} has two state spaces (.{found['space']} and .{q})")
            found["space"] = _SPACE_QUALS[q]
        elif q == "global" or _TYPE_RE.match(q):
            continue
        elif q == "cluster":
            ins.fail(f"scope .cluster is not supported in {ins.mnemonic!r}", "use .cta, .gpu or .sys")
        elif q in ("shared", "local", "const", "param", "mmio") or q.startswith("shared::"):
            ins.fail(f"unsupported instruction {ins.mnemonic!r}", "only .global and .shared memory are modelled")
        else:
            left.append(q)
    return found, left


#: State-space qualifiers of ``ld``/``st`` and bulk copies, and the space each names.
_SPACE_QUALS = {"global": GLOBAL, "shared": SHARED_CTA, "shared::cta": SHARED_CTA, "shared::cluster": SHARED_CLUSTER}


def _memory_quals(ins: _Ins, quals: list[str], sems: tuple[str, ...]) -> tuple[str | None, str | None]:
    """The semantics and scope of an ``ld``/``st``; type suffixes are ignored, a state space is
    recorded for its location (:meth:`_Source.space`)."""
    base = ins.mnemonic.split(".")[0]
    found, left = _sorted_quals(ins, quals, {"semantics": sems, "scopes": SCOPES, "space": ()})
    if "space" in found:
        ins.src.space(ins.address(1 if base == "ld" else 0)[0], found["space"], ins.line)
    if left:
        ins.unknown(_HINTS[base])
    sem, scope = found.get("semantics"), found.get("scopes")
    if sem == "volatile":
        if scope is not None:
            ins.fail(f"{base}.volatile takes no scope (got .{scope})")
        return "relaxed", "sys"
    if sem in (None, "weak"):
        if scope is not None:
            ins.fail(
                f"{base}{'.weak' if sem else ''} takes no scope (got .{scope})",
                f"write {base}.relaxed.{scope} for a strong access",
            )
        return "weak", None
    if scope is None:
        ins.fail(f"{base}.{sem} needs a scope {_SCOPE_HINT}")
    return sem, scope


def _read_ld(ins: _Ins, quals: list[str]) -> Instruction:
    for q in quals:
        if q in ("release", "acq_rel", "sc"):
            ins.fail(f"ld cannot be .{q}", _HINTS["ld"])
    if not quals and len(ins.operands) == 2 and _LOCAL_VALUE_RE.match(ins.operands[1]):
        # Dartagnan's ``ld r1, 5`` / ``ld r1, r2``: a register set from a value, no memory access.
        return RegOp("mov", ins.register(0), ins.value(1), line=ins.line)
    sem, scope = _memory_quals(ins, quals, ("weak", "relaxed", "acquire", "volatile"))
    ins.arity(2)
    loc, offset = ins.address(1)
    return Load(ins.register(0), loc, sem=sem, scope=scope, line=ins.line, footprint=(loc, offset, _size(quals)))


# Dartagnan's registers are r0, r1, ...; a constant or such a register after a bare ``ld`` is a value.
_LOCAL_VALUE_RE = re.compile(rf"{_INT}\Z|r[0-9]+\Z")


def _read_st(ins: _Ins, quals: list[str]) -> Instruction:
    for q in quals:
        if q in ("acquire", "acq_rel", "sc"):
            ins.fail(f"st cannot be .{q}", _HINTS["st"])
    sem, scope = _memory_quals(ins, quals, ("weak", "relaxed", "release", "volatile"))
    ins.arity(2)
    loc, offset = ins.address(0)
    return Store(loc, ins.value(1), sem=sem, scope=scope, line=ins.line, footprint=(loc, offset, _size(quals)))


def _size(quals: list[str]) -> int:
    """An access's size in bytes from its type suffix (``.u8`` 1, ``.b16`` 2, ...); 4 without one."""
    bits = next((int(q[1:]) for q in quals if _TYPE_RE.match(q)), 32)
    return bits // 8


def _atomic_quals(ins: _Ins, quals: list[str]) -> tuple[str, str, str, bool]:
    """``{.SEM}{.SCOPE}.OP{.TYPE}`` in any order -> ``(op, sem, scope, unsigned)`` with PTX's defaults."""
    base = ins.mnemonic.split(".")[0]
    found, left = _sorted_quals(ins, quals, {"semantics": ("relaxed", "acquire", "release", "acq_rel"),
                                             "scopes": SCOPES, "operations": ATOMIC_OPS})
    for q in left:
        if q in ("cas2", "add_noftz"):
            ins.fail(f"unsupported instruction {ins.mnemonic!r}", _HINTS[base])
        elif q in ("weak", "volatile", "sc"):
            ins.fail(f"{base} cannot be .{q}", _HINTS[base])
        else:
            ins.unknown(_HINTS[base])
    op, sem, scope = found.get("operations"), found.get("semantics"), found.get("scopes")
    if op is None:
        ins.fail(f"{ins.mnemonic!r} names no operation", _HINTS[base])
    if op not in ISA_ATOMIC_OPS:
        ins.src.warn(f'{base} operations are {", ".join("." + o for o in ISA_ATOMIC_OPS if base == "atom" or o not in ("exch", "cas"))}',
                     f"{base}.{op} is Dartagnan's; read as its value semantics", ins.line)
    unsigned = op in ("min", "max") and any(re.fullmatch(r"[ub](?:8|16|32|64)", q) for q in quals)
    return op, sem or "relaxed", scope or "gpu", unsigned


def _read_atom(ins: _Ins, quals: list[str]) -> Instruction:
    op, sem, scope, unsigned = _atomic_quals(ins, quals)
    ins.arity(4 if op == "cas" else 3)
    operands = tuple(ins.value(i) for i in range(2, len(ins.operands)))
    return Atomic(op, ins.register(0), ins.location(1), operands, sem=sem, scope=scope, line=ins.line,
                  unsigned=unsigned)


def _read_red(ins: _Ins, quals: list[str]) -> Instruction:
    op, sem, scope, unsigned = _atomic_quals(ins, quals)
    if op in ("exch", "cas"):
        ins.fail(f"red.{op} does not exist", f"use atom.{op}")
    if sem in ("acquire", "acq_rel"):
        # Dartagnan's visitor takes red.acquire and red.acq_rel (its read half acquires).
        ins.src.warn('"red{.sem}: .sem = { .relaxed, .release }"',
                     f"red.{sem} is accepted as the reference accepts it (an acquiring read half)", ins.line)
    ins.arity(2)
    return Atomic(op, None, ins.location(0), (ins.value(1),), sem=sem, scope=scope, line=ins.line,
                  unsigned=unsigned)


def _read_fence(ins: _Ins, quals: list[str]) -> Instruction:
    if quals[:2] == ["proxy", "async"]:
        return _read_proxy_fence(ins, quals[2:])
    if quals and quals[0] in ("proxy", "mbarrier_init", "op_restrict", "sync_restrict"):
        ins.fail(f"unsupported instruction {ins.mnemonic!r}", _HINTS["fence.proxy"])
    if quals and quals[0] in ("acquire", "release"):
        ins.fail(f"unsupported instruction {ins.mnemonic!r}", _HINTS["fence"])
    if len(quals) == 1 and quals[0] in SCOPES:
        ins.fail(f"{ins.mnemonic!r} names no semantics", _HINTS["fence"])
    if len(quals) == 1 and quals[0] in ("sc", "acq_rel"):
        ins.fail(f"fence.{quals[0]} needs a scope {_SCOPE_HINT}")
    if len(quals) != 2 or quals[0] not in ("sc", "acq_rel"):
        ins.unknown(_HINTS["fence"])
    if quals[1] == "cluster":
        ins.fail(f"scope .cluster is not supported in {ins.mnemonic!r}", "use .cta, .gpu or .sys")
    if quals[1] not in SCOPES:
        ins.unknown(_HINTS["fence"])
    ins.arity(0)
    return Fence(quals[0], quals[1], line=ins.line)


def _read_membar(ins: _Ins, quals: list[str]) -> Instruction:
    scopes = {"cta": "cta", "gl": "gpu", "sys": "sys"}
    if quals[:2] == ["proxy", "async"]:
        return _read_proxy_fence(ins, quals[2:])
    if quals[:1] == ["proxy"]:
        ins.fail(f"unsupported instruction {ins.mnemonic!r}", _HINTS["fence.proxy"])
    if len(quals) != 1 or quals[0] not in scopes:
        ins.unknown(_HINTS["membar"])
    ins.arity(0)
    return Fence("sc", scopes[quals[0]], line=ins.line)


def _read_barrier(ins: _Ins, quals: list[str]) -> Instruction:
    """Every barrier form of the ISA and of Dartagnan (see the module's reading choices)."""
    base = ins.mnemonic.split(".")[0]
    rest = [q for q in quals if q != "aligned"]
    dartagnan = base == "bar" and rest[:1] == ["cta"]  # Dartagnan's grammar spells bar.cta.MODE
    if rest[:1] == ["cta"]:
        rest = rest[1:]
    if rest[:1] == ["cluster"]:
        ins.fail(f"unsupported instruction {ins.mnemonic!r}", "cluster barriers are not modelled")
    if rest[:1] == ["red"]:
        return _read_bar_red(ins, rest[1:])
    if rest not in (["sync"], ["arrive"]):
        ins.unknown(_HINTS[base])
    ins.arity(1, 2, 3)
    ops = [ins.value(i) for i in range(len(ins.operands))]
    if len(ops) == 3 or (len(ops) == 2 and dartagnan):
        # Dartagnan: bar.cta.MODE A, ID{, COUNT}; its tests always set A to 1.
        ins.src.warn('"bar{.cta}.sync a{, b}": a is the barrier, b the thread count',
                     f"{ins.mnemonic} with {len(ops)} operands is read as Dartagnan reads it: barrier "
                     f"{ops[1]}{'' if len(ops) == 2 else f' with {ops[2]} threads'} (the first operand is ignored); "
                     f"write bar.{rest[0]} ID, COUNT for the ISA's form", ins.line)
        barrier_id, count = ops[1], (ops[2] if len(ops) == 3 else None)
    else:
        barrier_id, count = ops[0], (ops[1] if len(ops) == 2 else None)
    if rest[0] == "arrive" and count is None:
        ins.src.warn('"a non-zero thread count is required for barrier{.cta}.arrive"',
                     f"{ins.mnemonic} without a thread count is read as Dartagnan reads it: every thread "
                     f"that uses the barrier takes part", ins.line)
    _check_count(ins, count)
    return Barrier(rest[0], barrier_id, count, line=ins.line)


def _check_count(ins: _Ins, count: Operand | None) -> None:
    if isinstance(count, int) and count > 0 and count % 32:
        ins.src.warn('"When specifying a thread count, the value must be a multiple of the warp size"',
                     f"thread count {count} is read as {count} litmus threads", ins.line)


def _read_bar_red(ins: _Ins, quals: list[str]) -> Instruction:
    """``bar{.cta}.red.popc.u32 d, a{, b}, {!}c`` and ``bar{.cta}.red.{and,or}.pred p, a{, b}, {!}c``."""
    ops = [q for q in quals if q not in ("u32", "pred")]
    if len(ops) != 1 or ops[0] not in RED_OPS:
        ins.unknown(_HINTS["bar.red"])
    ins.arity(3, 4)
    negate = ins.operands[-1].startswith("!")
    if negate:
        ins.operands[-1] = ins.operands[-1][1:].strip()
    count = ins.value(2) if len(ins.operands) == 4 else None
    _check_count(ins, count)
    return Barrier("red", ins.value(1), count, line=ins.line, op=ops[0], dst=ins.register(0),
                   predicate=ins.value(len(ins.operands) - 1), negate=negate)


def _read_regop(ins: _Ins, quals: list[str]) -> Instruction:
    base = ins.mnemonic.split(".")[0]
    if not all(_TYPE_RE.match(q) for q in quals):
        ins.unknown(f"write {base}{'' if base == 'mov' else ' rD, a, b'} with an optional type such as .u32")
    if base == "mov":
        ins.arity(2)
        return RegOp("mov", ins.register(0), ins.value(1), line=ins.line)
    ins.arity(3)
    return RegOp(base, ins.register(0), ins.value(1), ins.value(2), line=ins.line)


def _read_branch(ins: _Ins, quals: list[str]) -> Instruction:
    base = ins.mnemonic.split(".")[0]
    if quals:
        ins.unknown(f"{base} takes no qualifiers")
    if base == "goto":
        ins.arity(1)
        return Branch(ins.label(0), None, line=ins.line)
    ins.arity(3)
    return Branch(ins.label(2), base[1:], ins.value(0), ins.value(1), line=ins.line)


# ----- the async proxy: bulk copies, their completion, proxy fences (syncverify.model.ptx, choice 11) -----


def _read_proxy_fence(ins: _Ins, quals: list[str]) -> Instruction:
    """``fence.proxy.async{.global,.shared::cta,.shared::cluster}`` (``.shared`` is ``.shared::cta``)."""
    ins.arity(0)
    if not quals:
        return ProxyFence("", line=ins.line)
    if len(quals) != 1 or quals[0] not in _SPACE_QUALS:
        ins.unknown(_HINTS["fence.proxy"])
    return ProxyFence(_SPACE_QUALS[quals[0]], line=ins.line)


def _bracketed(ins: _Ins) -> list[str]:
    """The operands with a tensor operand ``[map, {c0, c1}]`` (split on its commas) joined again."""
    out: list[str] = []
    for op in ins.operands:
        if out and out[-1].count("[") > out[-1].count("]"):
            out[-1] += ", " + op
        else:
            out.append(op)
    return out


_TENSOR_RE = re.compile(rf"\[\s*({_NAME})\s*,\s*\{{[^}}]*\}}\s*\]\Z")


def _copy_location(ins: _Ins, text: str, tensor: bool) -> str:
    """A copy's location operand: ``[x]``, or (a tensor copy's global side) ``[x, {coordinates}]``,
    whose tensor map is read as naming the location ``x``."""
    match = _TENSOR_RE.match(text) if tensor else None
    if match:
        return match.group(1)
    plain = _LOC_RE.match(text)
    if not plain:
        ins.fail(f"operand of {ins.mnemonic} must be a location{' or [map, {coordinates}]' if tensor else ''}, "
                 f"got {_show(text)}")
    return plain.group(1) or plain.group(2)


def _read_cp(ins: _Ins, quals: list[str]) -> Instruction:
    """``cp.async.bulk`` copies (one location each, tensor or not), ``commit_group``, ``wait_group{.read}``."""
    if quals[:2] != ["async", "bulk"]:
        ins.fail(f"unsupported instruction {ins.mnemonic!r}", _HINTS["cp"])
    rest = quals[2:]
    if rest == ["commit_group"]:
        ins.arity(0)
        return BulkCommit(line=ins.line)
    if rest in (["wait_group"], ["wait_group", "read"]):
        ins.arity(1)
        return BulkWait(ins.integer(0, "N"), read=len(rest) == 2, line=ins.line)
    tensor = rest[:1] == ["tensor"]
    if tensor:
        if len(rest) < 2 or not re.fullmatch(r"[1-5]d", rest[1]):
            ins.unknown(_HINTS["cp"])
        rest = [q for q in rest[2:] if q != "tile"]
    if len(rest) != 3 or rest[0] not in _SPACE_QUALS or rest[1] not in _SPACE_QUALS:
        ins.unknown(_HINTS["cp"])
    dst_space, src_space, completion = _SPACE_QUALS[rest[0]], _SPACE_QUALS[rest[1]], rest[2]
    ops = _bracketed(ins)
    if completion == "bulk_group" and (dst_space, src_space) == (GLOBAL, SHARED_CTA):
        if len(ops) != (2 if tensor else 3):
            ins.fail(f"{ins.mnemonic} takes {'[map, {coordinates}], [src]' if tensor else '[dst], [src], size'}")
        dst, src, mbarrier = _copy_location(ins, ops[0], tensor), _copy_location(ins, ops[1], False), None
        size = 4 if tensor else _copy_size(ins, ops[2])
    elif completion == "mbarrier::complete_tx::bytes" and dst_space in (SHARED_CTA, SHARED_CLUSTER) \
            and src_space in (GLOBAL, SHARED_CTA) and dst_space != src_space:
        if len(ops) != (3 if tensor else 4):
            ins.fail(f"{ins.mnemonic} takes [dst], {'[map, {coordinates}]' if tensor else '[src], size'}, [mbar]")
        dst, src = _copy_location(ins, ops[0], False), _copy_location(ins, ops[1], tensor and src_space == GLOBAL)
        mbarrier = _copy_location(ins, ops[-1], False)
        size = 4 if tensor else _copy_size(ins, ops[2])
    else:
        ins.fail(f"unsupported instruction {ins.mnemonic!r}", _HINTS["cp"])
    ins.src.space(dst, dst_space, ins.line)
    ins.src.space(src, src_space, ins.line)
    return BulkCopy(dst, src, dst_space, src_space, "bulk_group" if mbarrier is None else "mbarrier", mbarrier,
                    line=ins.line, size=size)


def _copy_size(ins: _Ins, text: str) -> int:
    """A bulk copy's size operand: its bytes, the completeCount of its complete-tx (choice 14). A
    tensor copy has none: it moves the one location its map names, read as 4 bytes."""
    if not _INT_RE.match(text) or _int(text) <= 0:
        ins.fail(f"the size of {ins.mnemonic} must be a positive integer constant, got {_show(text)}")
    return _int(text)


def _read_mbarrier(ins: _Ins, quals: list[str]) -> Instruction:
    """``mbarrier.arrive{.expect_tx}`` and ``mbarrier.try_wait{.parity}`` with their default
    ``.release``/``.acquire`` at ``.cta`` scope, ``mbarrier.init``, and ``mbarrier.expect_tx`` /
    ``complete_tx`` (``.relaxed.cta``, their only semantics); other forms are refused (choices 11
    and 14 of syncverify.model.ptx say why)."""
    rest = [q for q in quals if q not in ("shared", "shared::cta", "b64", "release", "acquire", "cta")]
    if rest[:1] in (["expect_tx"], ["complete_tx"]) and rest[1:] in ([], ["relaxed"]):
        if "release" in quals or "acquire" in quals:
            ins.unknown(_HINTS["mbarrier"])
        ins.arity(2)
        return MbarTx(ins.location(0), ins.integer(1, "txCount"), complete=rest[0] == "complete_tx", line=ins.line)
    if any(q in ("relaxed", "cluster") for q in rest):
        ins.fail(f"unsupported instruction {ins.mnemonic!r}",
                 ".relaxed and .cluster mbarrier operations are not modelled; " + _HINTS["mbarrier"])
    if rest == ["init"]:
        if "release" in quals or "acquire" in quals or "cta" in quals:
            ins.unknown(_HINTS["mbarrier"])
        ins.arity(2)
        return MbarInit(ins.location(0), ins.integer(1, "count"), line=ins.line)
    if rest in (["arrive"], ["arrive", "expect_tx"]):
        if "acquire" in quals:
            ins.unknown(_HINTS["mbarrier"])
        expect_tx = len(rest) == 2
        ins.arity(3) if expect_tx else ins.arity(2, 3)
        if ins.operands[0] != "_":
            ins.register(0)
        if not expect_tx and len(ins.operands) == 3 and ins.integer(2, "count") != 1:
            ins.fail(f"mbarrier.arrive with a count other than 1 is not modelled", _HINTS["mbarrier"])
        return MbarArrive(ins.location(1), expect_tx=expect_tx, tx=ins.integer(2, "txCount") if expect_tx else 0,
                          line=ins.line)
    if rest in (["try_wait"], ["try_wait", "parity"]):
        if "release" in quals:
            ins.unknown(_HINTS["mbarrier"])
        ins.arity(2, 3)
        parity = None
        if len(rest) == 2:
            ins.arity(3)
            parity = ins.integer(2, "phaseParity")
            if parity not in (0, 1):
                ins.fail(f"phaseParity of {ins.mnemonic} must be 0 or 1, got {parity}")
        return MbarWait(ins.register(0), ins.location(1), parity=parity, line=ins.line)
    if rest[:1] in (["test_wait"], ["inval"], ["pending_count"]):
        ins.fail(f"unsupported instruction {ins.mnemonic!r}",
                 "test_wait, inval and pending_count are not modelled; " + _HINTS["mbarrier"])
    ins.unknown(_HINTS["mbarrier"])


def _read_nvshmem(ins: _Ins, quals: list[str]) -> Instruction | tuple[Instruction, ...]:
    """NVSHMEM's device calls (syncverify.delivery; syncverify.model.ptx, choice 13):
    ``nvshmem.put{_nbi}``, ``nvshmem.put_signal{_nbi}.OP``, ``nvshmem.signal_op.OP``,
    ``nvshmem.quiet``, ``nvshmem.fence`` and ``nvshmem.signal_wait_until.CMP`` (a spin)."""
    hint = _HINTS["nvshmem"]
    name, rest = (quals[0] if quals else ""), quals[1:]
    if name in ("quiet", "fence") and not rest:
        ins.arity(0)
        return Quiet(line=ins.line) if name == "quiet" else DeliveryFence(line=ins.line)
    if name == "signal_wait_until" and len(rest) == 1 and rest[0] in COMPARISONS:
        ins.arity(3)
        return signal_wait(ins.register(0), ins.location(1), rest[0], ins.value(2), f"__nvshmem_wait{ins.line}",
                           line=ins.line)
    if name in ("put", "put_nbi") and not rest:
        signal, op, value, first = None, "set", 1, 1
    elif name in ("put_signal", "put_signal_nbi", "signal_op") and len(rest) == 1 and rest[0] in SIGNAL_OPS:
        if len(ins.operands) < 3:
            ins.fail(f"{ins.mnemonic} takes PE, [SIG], VALUE first", hint)
        signal, op, value, first = ins.location(1), rest[0], ins.integer(2, "the signal value"), 3
    else:
        ins.unknown(hint)
    pe = ins.integer(0, "the PE") if ins.operands else ins.fail(f"{ins.mnemonic} takes the PE first", hint)
    pairs = ins.operands[first:]
    if name == "signal_op" and pairs:
        ins.fail(f"{ins.mnemonic} takes PE, [SIG], VALUE only", hint)
    if name != "signal_op" and (not pairs or len(pairs) % 2):
        ins.fail(f"{ins.mnemonic} takes pairs [DST], SRC after {'the PE' if first == 1 else 'the signal'}", hint)
    chunks = []
    for k in range(first, len(ins.operands), 2):
        source = ins.operands[k + 1]
        chunks.append((ins.location(k), _int(source) if _INT_RE.match(source) else ins.location(k + 1)))
    return Put(pe, tuple(chunks), blocking=not name.endswith("_nbi") and name != "signal_op", signal=signal,
               signal_op=op, signal_value=value, line=ins.line)


def _read_stream(ins: _Ins, quals: list[str]) -> StreamOp:
    """Stream memory operations (syncverify.streams): ``stream.write_value [LOC], VALUE``
    (``cuStreamWriteValue32``), ``stream.wait_value.{geq,eq} [LOC], VALUE``
    (``cuStreamWaitValue32``), ``stream.copy [DST], [SRC] ...`` (a copy engine's copy, word for
    word). A thread of these only is a stream: :func:`syncverify.streams.lower_streams`."""
    hint = _HINTS["stream"]
    name, rest = (quals[0] if quals else ""), quals[1:]
    if name == "write_value" and not rest:
        ins.arity(2)
        return StreamOp("write_value", ins.location(0), ins.integer(1, "the value"), line=ins.line)
    if name == "wait_value" and len(rest) == 1 and rest[0] in WAIT_COMPARISONS:
        ins.arity(2)
        return StreamOp("wait_value", ins.location(0), ins.integer(1, "the value"), rest[0], line=ins.line)
    if name == "copy" and not rest:
        if not ins.operands or len(ins.operands) % 2:
            ins.fail(f"{ins.mnemonic} takes pairs [DST], [SRC]", hint)
        pairs = range(0, len(ins.operands), 2)
        return StreamOp("copy", dst=tuple(ins.location(k) for k in pairs),
                        src=tuple(ins.location(k + 1) for k in pairs), line=ins.line)
    ins.unknown(hint)


def _split_bytes(src: _Source, code: list[list[Instruction]], memory: dict[str, int],
                 condition_locations: set[str]) -> list[list[Instruction]]:
    """Mixed-size accesses (:func:`syncverify.program.split_mixed_sizes`; syncverify.model.ptx,
    choice 12), each refusal one line naming the test's line; a final condition may not name a
    byte-addressed location (load it into a register)."""
    split = mixed_size_locations(code)
    for loc in sorted(split & condition_locations):
        src.fail(f"the final condition names {loc}, which is accessed with mixed sizes: load it into a "
                 f"register and name the register", None)
    try:
        return split_mixed_sizes(code, memory)
    except UnsupportedConstruct as error:
        src.fail(str(error), getattr(error, "line", None))


def _place_in_spaces(src: _Source, code: list[list[Instruction]]) -> list[list[Instruction]]:
    """Every load and store of a location in the state space an instruction names for it
    (:meth:`_Source.space`; ``.global`` where none does)."""
    def placed(ins: Instruction) -> Instruction:
        if isinstance(ins, (Load, Store)):
            where = ins.footprint[0] if ins.footprint is not None else ins.loc  # a byte's whole location
            return replace(ins, space=src.spaces.get(where, (GLOBAL, 0))[0])
        return ins
    return [[placed(ins) for ins in instructions] for instructions in code]


_READERS: dict[str, Callable[[_Ins, list[str]], Instruction | tuple[Instruction, ...]]] = {
    "cp": _read_cp,
    "nvshmem": _read_nvshmem,
    "stream": _read_stream,
    "mbarrier": _read_mbarrier,
    "ld": _read_ld,
    "st": _read_st,
    "atom": _read_atom,
    "red": _read_red,
    "fence": _read_fence,
    "membar": _read_membar,
    "bar": _read_barrier,
    "barrier": _read_barrier,
    "add": _read_regop,
    "sub": _read_regop,
    "mul": _read_regop,
    "div": _read_regop,
    "mov": _read_regop,
    "beq": _read_branch,
    "bne": _read_branch,
    "bge": _read_branch,
    "blt": _read_branch,
    "bgt": _read_branch,
    "ble": _read_branch,
    "goto": _read_branch,
}


# ----- final condition --------------------------------------------------------------------------

_TOKEN_RE = re.compile(
    rf"""
    (?P<space>\s+)
    | (?P<and>/\\)
    | (?P<or>\\/)
    | (?P<op>==|!=|<=|>=|=|<|>)
    | (?P<not>~)
    | (?P<lpar>\()
    | (?P<rpar>\))
    | (?P<semi>;)
    | (?P<reg>P?[0-9]+\s*:\s*{_REG})
    | (?P<int>{_INT})
    | (?P<loc>\[\s*{_NAME}\s*\])
    | (?P<name>{_NAME})
    """,
    re.X,
)


# Skipped in the trailer: Dartagnan's block comments and herd's ``locations [...]`` clause (it
# only says what to print).
_SKIPPED_RE = re.compile(r"\(\*.*?\*\)|locations\s*\[[^\]]*\]\s*;?")


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    line: int


def _tokens(src: _Source, start: int) -> list[_Token]:
    """The condition's tokens, from line index ``start`` to the end (comment lines skipped)."""
    tokens: list[_Token] = []
    for index in _significant(src, start):
        text = _SKIPPED_RE.sub(lambda m: " " * len(m.group()), src.lines[index])
        position = 0
        while position < len(text):
            match = _TOKEN_RE.match(text, position)
            if not match:
                src.fail(f"unexpected {text[position]!r} in the final condition", index + 1)
            if match.lastgroup != "space":
                tokens.append(_Token(match.lastgroup or "", match.group(), index + 1))
            position = match.end()
    return tokens


class _ConditionParser:
    """Recursive descent over ``~`` (tightest), ``/\\``, ``\\/`` (loosest), as in herd."""

    def __init__(self, src: _Source, tokens: list[_Token], threads: set[str]) -> None:
        self.src = src
        self.tokens = tokens
        self.threads = threads
        self.position = 0
        self.depth = 0
        self.locations: list[str] = []

    def peek(self) -> _Token | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self) -> _Token:
        token = self.peek()
        if token is None:
            last = self.tokens[-1].line if self.tokens else len(self.src.lines)
            self.src.fail("the final condition ends too early", last)
        self.position += 1
        return token

    def fail(self, message: str, token: _Token | None) -> NoReturn:
        line = token.line if token else (self.tokens[-1].line if self.tokens else None)
        self.src.fail(message, line)

    def condition(self) -> Condition | None:
        """The trailer: ``{filter PROP} {exists|~exists|forall PROP}``; returns the condition
        (``self.filter`` holds the filter)."""
        self.filter: Prop | None = None
        if self.peek() is not None and self.peek().text == "filter":
            self.take()
            self.filter = self.disjunction()
            if self.peek() is not None and self.peek().kind == "semi":
                self.take()
            if self.peek() is None:
                return None
        first = self.take()
        if first.text == "final":
            self.fail("herd's 'final ... with' condition is not supported; write exists, ~exists or forall", first)
        if first.kind == "not" or first.text == "not":
            word = self.take()
            if word.text != "exists":
                self.fail(f"expected 'exists' after '~', found {word.text!r}", word)
            quantifier = "~exists"
        elif first.text in ("exists", "forall"):
            quantifier = first.text
        else:
            self.fail(f"a final condition starts with exists, ~exists or forall, not {first.text!r}", first)
        prop = self.disjunction()
        if self.peek() is not None and self.peek().kind == "semi":
            self.take()
        extra = self.peek()
        if extra is not None:
            if extra.kind == "rpar":
                self.fail("unbalanced parentheses: ')' closes nothing", extra)
            self.fail(f"unexpected {extra.text!r} after the final condition", extra)
        return Condition(quantifier, prop)

    def disjunction(self) -> Prop:
        parts = [self.conjunction()]
        while self.peek() is not None and self.peek().kind == "or":
            self.take()
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else Or(tuple(parts))

    def conjunction(self) -> Prop:
        parts = [self.unary()]
        while self.peek() is not None and self.peek().kind == "and":
            self.take()
            parts.append(self.unary())
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def unary(self) -> Prop:
        token = self.take()
        self.depth += 1
        if self.depth > _MAX_NESTING:
            self.fail(f"the final condition nests deeper than {_MAX_NESTING} levels", token)
        try:
            if token.kind == "not" or token.text == "not":
                return Not(self.unary())
            if token.kind == "lpar":
                prop = self.disjunction()
                close = self.peek()
                if close is None or close.kind != "rpar":
                    self.fail(f"unbalanced parentheses: '(' on line {token.line} is never closed", close)
                self.take()
                return prop
            if token.kind == "name" and token.text == "true":
                return TrueProp()
            if token.kind == "name" and token.text == "false":
                return Not(TrueProp())
            lhs = self.term(token)
            op = self.take()
            if op.kind != "op":
                self.fail(f"expected a comparison (==, !=, <, <=, >, >=) after {token.text!r}, found {op.text!r}", op)
            rhs = self.term(self.take())
            return Compare(lhs, "==" if op.text == "=" else op.text, rhs)
        finally:
            self.depth -= 1

    def term(self, token: _Token) -> Term:
        if token.kind == "int":
            return _int(token.text)
        if token.kind == "reg":
            thread, _, reg = token.text.partition(":")
            thread = f"P{int(thread.strip().lstrip('P'))}"
            if thread not in self.threads:
                known = ", ".join(sorted(self.threads, key=lambda t: int(t[1:])))
                self.fail(f"the final condition names thread {thread}, but the test has {known}", token)
            return RegRef(thread, reg.strip())
        if token.kind in ("name", "loc") and token.text not in ("exists", "forall", "true", "false", "filter", "not"):
            loc = token.text.strip("[] \t")
            self.locations.append(loc)
            return LocRef(loc)
        self.fail(f"expected a register (Pn:reg), a location or an integer, found {token.text!r}", token)


# ----- small helpers ----------------------------------------------------------------------------


def _int(text: str) -> int:
    """A decimal or ``0x`` hexadecimal literal, optionally signed."""
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("+-")
    return sign * int(digits, 16 if digits[:2].lower() == "0x" else 10)


def _show(text: str, limit: int = 40) -> str:
    """``text`` quoted for a message, shortened so that one error stays one line."""
    text = text.strip()
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


# ----- public API -------------------------------------------------------------------------------


def parse_litmus(text: str, *, path: str = "<string>") -> Program:
    """Parse a PTX litmus test.

    Parameters
    ----------
    text : str
        The litmus file's contents.
    path : str, optional
        The name errors point at (``FILE:LINE: what is wrong``).

    Returns
    -------
    Program
        Threads ``P0``, ``P1``, ... with their placement and instructions (each carrying its
        1-based ``line``), the initial memory and registers, and the final condition (or None).

    Raises
    ------
    LitmusSyntaxError
        For any malformed input; no other exception escapes.

    Examples
    --------
    >>> program = parse_litmus('''PTX tiny
    ... { x=0; }
    ...  P0@cta 0,gpu 0 ;
    ...  st.relaxed.gpu x, 1 ;
    ... exists (x == 1)''')
    >>> store = program.threads[0].instructions[0]
    >>> store.loc, store.value, store.sem, store.scope, store.line
    ('x', 1, 'relaxed', 'gpu', 4)
    """
    if not isinstance(text, str):
        raise TypeError(f"parse_litmus expects the file's text as str, got {type(text).__name__}")
    src = _Source(path, [line.rstrip("\r") for line in text.split("\n")])
    name, first_comment, after_header = _header(src)
    comment, init_start = _comments(src, after_header, first_comment)
    entries, after_init = _init_block(src, init_start)
    memory, registers = _init_entries(src, entries)
    init_locations = list(memory)  # before the condition's own locations are added at 0
    placements, code, condition_line = _table(src, after_init)
    names = {name for name, _, _ in placements}
    for (thread, reg), (_, line) in registers.items():
        if thread not in names:
            src.fail(f"init block sets {thread}:{reg}, but the test has no thread {thread}", line)
    for (thread, _, _), instructions in zip(placements, code):
        _check_labels(src, thread, instructions)
    condition = filter_prop = None
    if condition_line is not None and re.match(r"final\b", src.lines[condition_line].strip()):
        src.fail("herd's 'final ... with' condition is not supported; write exists, ~exists or forall",
                 condition_line + 1)
    tokens = _tokens(src, condition_line) if condition_line is not None else []
    if tokens:
        parser = _ConditionParser(src, tokens, names)
        condition = parser.condition()
        filter_prop = parser.filter
        touched = {getattr(ins, "loc", None) for instructions in code for ins in instructions}
        for loc in parser.locations:
            if loc not in memory and loc not in touched:
                memory[loc] = 0  # herd: a location only the condition names starts at 0
    else:
        src.note("no-condition", "the test has no final condition (exists, ~exists or forall): read as "
                 "'exists (true)', which every execution satisfies", len(src.lines))
    _warn_single_use(src, code, init_locations, parser.locations if tokens else ())
    code = _place_in_spaces(src, _split_bytes(src, code, memory, set(parser.locations) if tokens else set()))
    threads = tuple(
        Thread(thread, gpu, cta, tuple(instructions))
        for (thread, cta, gpu), instructions in zip(placements, code)
    )
    _warn_partial_barriers(src, threads)
    try:
        threads, host_order = lower_streams(lower_delivery(lower_async(threads)))
    except UnsupportedConstruct as error:
        src.fail(str(error), getattr(error, "line", None))
    return Program(
        name=name,
        threads=threads,
        host_order=host_order,
        init=memory,
        registers={key: value for key, (value, _) in registers.items()},
        condition=condition,
        comment=comment,
        filter=filter_prop,
        warnings=tuple(src.warnings.values()),
    )


def _name_is_location(ins: Instruction, name: str) -> bool:
    """Whether ``name`` (a ``loc``, ``dst``, ``src`` or ``mbarrier`` field of ``ins``) names memory or
    an mbarrier, not a register (``dst`` of a load or an atomic is a register)."""
    return not (name == getattr(ins, "dst", None) and not isinstance(ins, BulkCopy))


def _warn_single_use(src: _Source, code: list, init_locations: list[str], condition_locations) -> None:
    """A location named once in the whole test (init block, instructions, condition) is most likely
    a typo: read as a fresh location at 0, it can flip the answer. One warning per such location."""
    uses: dict[str, list[int | None]] = {}
    for loc in init_locations:
        uses.setdefault(loc, []).append(None)
    for instructions in code:
        for ins in instructions:
            for loc in (getattr(ins, name, None) for name in ("loc", "dst", "src", "mbarrier")):
                for one in (loc if isinstance(loc, tuple) else (loc,)):  # a stream copy's words: a tuple
                    if isinstance(one, str) and one and _name_is_location(ins, one):
                        uses.setdefault(one, []).append(getattr(ins, "line", None))
    for loc in condition_locations:
        uses.setdefault(loc, []).append(None)
    for loc, lines in sorted(uses.items()):
        if len(lines) == 1:
            src.note(f"once:{loc}", f"location {loc!r} is used only once in the test (a typo? a location "
                     f"nothing else names reads 0 and changes the answer)", lines[0])


def _warn_partial_barriers(src: _Source, threads: tuple[Thread, ...]) -> None:
    """A barrier without a count that some threads of its CTA never use: the ISA would make it
    wait for them; read, as Dartagnan does, as a barrier of the threads that use it."""
    ctas: dict[tuple[int, int], list[Thread]] = {}
    for thread in threads:
        ctas.setdefault((thread.gpu, thread.cta), []).append(thread)
    for members in ctas.values():
        for thread in members:
            for ins in thread.instructions:
                if not isinstance(ins, Barrier) or ins.count is not None or not isinstance(ins.barrier_id, int):
                    continue  # a register id is only known on a path: syncverify.explore.barriers counts its users there
                users = [u for u in members if any(isinstance(j, Barrier) and j.barrier_id == ins.barrier_id
                                                   for j in u.instructions)]
                if len(users) < len(members):
                    src.warn(_ALL_THREADS_RULE,
                             f"{_text_of(ins)} has no thread count and {len(users)} of the {len(members)} threads "
                             f"of its CTA name barrier {ins.barrier_id}; read as a barrier of the threads that use it "
                             f"threads, as Dartagnan reads it", ins.line)


_ALL_THREADS_RULE = '"If no thread count is specified, all threads in the CTA participate in the barrier"'


def _text_of(ins: Barrier) -> str:
    return f"bar.{ins.kind} {ins.barrier_id}"


def parse_litmus_file(path: str | Path) -> Program:
    """Read and parse a litmus file; an unreadable file raises :class:`SyncVerifyError`."""
    name = str(path)
    data = read_input_file(path, "litmus file", SyncVerifyError)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise LitmusSyntaxError("the file is not UTF-8 text", path=name, line=line) from None
    return parse_litmus(text, path=name)
