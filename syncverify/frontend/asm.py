"""``tl.inline_asm_elementwise`` read with the litmus instruction parser: one grammar for both.

A fence (``fence.sc/acq_rel.SCOPE``, ``membar.*``) or a CTA barrier (``bar.sync a{, b}``,
``barrier.sync``) becomes the model's event; ``mov`` into an output (``$0``) and register
declarations define the asm's value and are skipped. Anything else is refused by name with its
``file:line`` unless the user declared what it means (``declare_asm={"s_waitcnt vmcnt(0)":
"no-op"}``, or a PTX text the parser reads), and every declaration used is listed in the verdict.
Inline asm that accesses memory (``ld``/``st``/``atom``/``red`` on an operand) is read by the
same parser (:func:`_memory`).

Predicates on the thread id. Register arithmetic on ``%tid.x`` and constants (``mov``, ``shr``,
``shl``, ``and``, ``or``, ``xor``, ``add``, ``sub``, ``setp.CMP``; 32-bit) is evaluated for every
thread of the CTA (``num_warps`` x 32). A predicated instruction ``@p INS`` (or ``@!p``) is then:

* executed by the model thread when ``p`` holds on every CTA thread it stands for (model thread
  ``t`` of ``T`` stands for an equal, consecutive share of the CTA's threads), left out when it
  holds on none of them: a warp selection (``1 << (%tid.x / 32)`` tested against a mask, how the
  kernels' barrier steps pick the warps that arrive and the warps that wait);
* run by thread 0 alone when ``p`` holds on thread 0 of the CTA only (``%tid.x == 0``: Triton's
  predication of scalar stores and atomics);
* refused otherwise (a predicate that splits the threads one model thread stands for: more
  model threads per CTA may resolve it, and the message says so).

Grid dependency control (Triton's ``tl.extra.cuda.gdc_wait()`` / ``gdc_launch_dependents()``,
or the same PTX written by hand): ``griddepcontrol.wait`` and ``griddepcontrol.launch_dependents``
become ``gdc`` items where they stand; the kernel front end gives them their ISA meaning for a
programmatic dependent launch (``frontend.check.programmatic_launches``), a no-op otherwise (PTX
ISA: both are safe to run without PDL). ``//`` comments (Triton's ``// dummy $0``) are dropped.

A barrier's thread count (``bar.sync 1, 256``, ``bar.arrive 1, 256``) counts CTA threads; the
model counts model threads, so it is scaled by ``T / (num_warps x 32)`` and refused when that is
not a whole number.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass

import numpy as np

from syncverify.errors import UnsupportedConstruct
from syncverify.program import Barrier, Fence
from syncverify.frontend.items import Item
from syncverify.errors import LitmusSyntaxError
from syncverify.litmus.parser import _instruction, _Source

_SKIP = re.compile(r"^(mov|cvt)\.\S+\s+\$\d+\s*,|^\.reg\b|^$")
_PRED = re.compile(r"^@(!?)(\w+)\s+(.*)$")
_MEMORY = re.compile(r"^(ld|st|atom|red)\.")
_ARITH = re.compile(r"^(mov|shr|shl|and|or|xor|add|sub)\.(?:u32|s32|b32)\s+(\w+)\s*,\s*([%\w.-]+)"
                    r"(?:\s*,\s*([%\w.-]+))?$")
_SETP = re.compile(r"^setp\.(eq|ne|lt|le|gt|ge)\.(?:u32|s32|b32)\s+(\w+)\s*,\s*([%\w.-]+)\s*,\s*([%\w.-]+)$")
_OPS = {"shr": operator.rshift, "shl": operator.lshift, "and": operator.and_, "or": operator.or_,
        "xor": operator.xor, "add": operator.add, "sub": operator.sub}
_COMPARE = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
            "ge": operator.ge}
WARP_SIZE = 32
#: The bytes an integer PTX type names; an 8- or 16-bit ``ld``/``st`` goes through a pointer of
#: that width and is a mixed-size access when the element is wider (frontend.runner._where).
WIDTHS = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "b32": 4, "u32": 4, "s32": 4}


@dataclass(frozen=True)
class ModelThread:
    """Which CTA threads a model thread stands for: ``thread`` of ``threads`` per CTA, in a CTA of
    ``num_warps`` warps (an equal, consecutive share of its threads)."""

    thread: int = 0
    threads: int = 1
    num_warps: int = 4

    @property
    def cta_threads(self) -> int:
        return self.num_warps * WARP_SIZE

    def share(self) -> slice:
        n = self.cta_threads
        return slice(self.thread * n // self.threads, (self.thread + 1) * n // self.threads)


#: ``griddepcontrol.X`` -> the ``gdc`` item's op (PTX ISA, *griddepcontrol*).
GRID_DEPENDENCY = {"griddepcontrol.wait": "wait", "griddepcontrol.launch_dependents": "launch_dependents"}


def _statements(asm: str) -> list[str]:
    text = re.sub(r"//[^\n]*", "", asm).replace("{", ";").replace("}", ";").replace("\n", ";")
    return [s.strip() for s in text.split(";")]


class _Registers:
    """Registers computed from ``%tid.x`` and constants, each an array over the CTA's threads."""

    def __init__(self, cta_threads: int) -> None:
        self.tid = np.arange(cta_threads, dtype=np.int64)
        self.values: dict[str, np.ndarray] = {}

    def operand(self, text: str) -> np.ndarray | None:
        if text == "%tid.x":
            return self.tid
        if re.fullmatch(r"-?\d+", text):
            return np.full_like(self.tid, int(text))
        return self.values.get(text)

    def step(self, statement: str) -> bool:
        """Evaluate ``statement`` if it is arithmetic on known registers; whether it was."""
        if m := _ARITH.match(statement):
            op, dst, a, b = m.groups()
            x = self.operand(a)
            y = None if b is None else self.operand(b)
            if x is None or (op == "mov") != (b is None) or (b is not None and y is None):
                return False
            self.values[dst] = (x if op == "mov" else _OPS[op](x, y)) & 0xFFFFFFFF
            return True
        if m := _SETP.match(statement):
            cmp, dst, a, b = m.groups()
            x, y = self.operand(a), self.operand(b)
            if x is None or y is None:
                return False
            self.values[dst] = _COMPARE[cmp](x, y).astype(np.int64)
            return True
        return False


def read_inline_asm(asm: str, site, site_key, declared: dict[str, str] | None = None,
                    who: ModelThread = ModelThread()) -> list:
    """The model operations (``Item``s) one inline asm string stands for, for the model thread
    ``who``; see the module docstring."""

    declared = {k.strip().rstrip(";").strip(): v for k, v in (declared or {}).items()}
    whole = asm.strip().rstrip(";").strip()
    if whole in declared:
        meaning = declared[whole]
        items = [Item("assume", site, site_key, op=f"inline asm {whole!r} ({site}) declared as {meaning!r}")]
        if meaning.strip().lower() in ("no-op", "noop", "nop", ""):
            return items
        return items + read_inline_asm(meaning, site, site_key, None, who)
    items = []
    registers = _Registers(who.cta_threads)
    for statement in _statements(asm):
        if _SKIP.match(statement) or registers.step(statement):
            continue
        one = False
        if m := _PRED.match(statement):
            negate, name, statement = m.groups()
            holds = registers.values.get(name)
            if holds is None:
                raise UnsupportedConstruct(f"{site}: inline asm predicate @{negate}{name} is not computed from %tid.x "
                                           "and constants; not modeled")
            holds = (holds == 0) if negate else (holds != 0)
            mine = holds[who.share()]
            if holds[0] and not holds[1:].any():
                one = True  # thread 0 of the CTA alone (Triton's predication of scalar stores and atomics)
            elif not mine.any():
                continue  # none of this model thread's threads runs it
            elif not mine.all():
                raise UnsupportedConstruct(
                    f"{site}: inline asm predicate @{negate}{name} holds on some of the {mine.size} CTA threads model "
                    f"thread {who.thread} of {who.threads} stands for; check with more threads per CTA "
                    f"(threads_per_cta={who.num_warps} gives one per warp)")
        if _MEMORY.match(statement):
            items.append(_memory(statement, site, site_key, one))
            continue
        if statement in GRID_DEPENDENCY:
            items.append(Item("gdc", site, site_key, op=GRID_DEPENDENCY[statement]))
            continue
        if statement in declared:
            items.append(Item("assume", site, site_key,
                              op=f"inline asm {statement!r} ({site}) declared as {declared[statement]!r}"))
            if declared[statement].strip().lower() not in ("no-op", "noop", "nop", ""):
                items += read_inline_asm(declared[statement], site, site_key, None, who)
            continue
        items.append(_one(statement, site, site_key, who))
    return items


def _memory(statement: str, site, site_key, one: bool):
    """A memory instruction on the asm's operands, read by the litmus parser: ``$N`` operands
    become names it accepts (``[$1]`` the location ``a1``, ``$2`` the register ``r2``), the
    state space must be ``.global``, the width at most 32 bits (an atomic's 32) and that of the
    pointer the asm is given (checked where it runs)."""

    head, _, rest = statement.partition(" ")
    quals = head.split(".")
    if any(q in ("shared", "local", "param", "const") for q in quals):
        raise UnsupportedConstruct(f"{site}: inline asm {statement!r}: only .global memory is modeled")
    if any(q in ("b64", "u64", "s64", "f64", "f32", "f16") for q in quals):
        raise UnsupportedConstruct(f"{site}: inline asm {statement!r}: only integer accesses of at most 32 bits are "
                                   "modeled")
    widths = [WIDTHS[q] for q in quals if q in WIDTHS]
    if quals[0] in ("atom", "red") and widths and widths[0] != 4:
        raise UnsupportedConstruct(f"{site}: inline asm {statement!r}: only 32-bit atomics are modeled")
    head = ".".join(q for q in quals if q != "global" and q not in WIDTHS)
    rest = re.sub(r"\[\s*\$(\d+)\s*\]", r"a\1", rest)
    rest = re.sub(r"\$(\d+)", r"r\1", rest)
    text = f"{head} {rest}".strip()
    try:
        ins = _instruction(_Source(str(site), [text]), text, "P0", 1)
    except (LitmusSyntaxError, UnsupportedConstruct) as error:
        raise UnsupportedConstruct(f"{site}: inline asm {statement!r} cannot be read: {error}") from None
    return Item("asm-memory", site, site_key, op=ins, scalar_one=one, width=widths[0] if widths else None)


def _one(statement: str, site, site_key, who: ModelThread):

    refuse = (f"{site}: inline asm {statement!r} in {site.kernel} is not a fence or CTA barrier the model reads; "
              "declare its meaning (check_kernel(..., declare_asm={TEXT: 'no-op' or PTX}) / --declare-asm 'TEXT=MEANING')")
    text = statement
    try:
        ins = _instruction(_Source(str(site), [text]), text, "P0", 1)
    except (LitmusSyntaxError, UnsupportedConstruct):
        raise UnsupportedConstruct(refuse) from None
    if isinstance(ins, Fence):
        return Item("fence", site, site_key, scope=ins.scope, fence_kind=ins.kind)
    if isinstance(ins, Barrier) and ins.kind in ("sync", "arrive") and isinstance(ins.barrier_id, int) and (
            ins.count is None or isinstance(ins.count, int)):
        return Item("bar", site, site_key, op=ins.kind, barrier_id=ins.barrier_id,
                    count=None if ins.count is None else _model_count(ins.count, site, statement, who))
    raise UnsupportedConstruct(refuse)


def _model_count(count: int, site, statement: str, who: ModelThread) -> int:
    """A barrier's count of CTA threads as model threads (each stands for an equal share)."""
    scaled, left = divmod(count * who.threads, who.cta_threads)
    if left or scaled < 1 or count % WARP_SIZE:
        raise UnsupportedConstruct(f"{site}: inline asm {statement!r}: a count of {count} threads is not a whole "
                                   f"number of the {who.threads} model threads of a {who.num_warps}-warp CTA; "
                                   "check with threads_per_cta equal to the warps it counts")
    return scaled
