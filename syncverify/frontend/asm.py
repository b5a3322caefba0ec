"""``tl.inline_asm_elementwise`` read with the litmus instruction parser: one grammar for both.

A fence (``fence.sc/acq_rel.SCOPE``, ``membar.*``) or a CTA barrier (``bar.sync a{, b}``,
``barrier.sync``) becomes the model's event; ``mov`` into an output (``$0``) and register
declarations define the asm's value and are skipped. Anything else is refused by name with its
``file:line`` unless the user declared what it means (``declare_asm={"s_waitcnt vmcnt(0)":
"no-op"}``, or a PTX text the parser reads), and every declaration used is listed in the verdict.
Inline asm that accesses memory (``ld``/``st``/``atom``/``red`` on an operand) is not modeled yet
and refused the same way.
"""

from __future__ import annotations

import re

from syncverify.errors import UnsupportedConstruct
from syncverify.program import Barrier, Fence
from syncverify.frontend.items import Item
from syncverify.errors import LitmusSyntaxError
from syncverify.litmus.parser import _instruction, _Source

_SKIP = re.compile(r"^(mov|cvt)\.\S+\s+\$\d+\s*,|^\.reg\b|^$")
_TID = re.compile(r"^mov\.u32\s+(\w+)\s*,\s*%tid\.x$")
_THREAD0 = re.compile(r"^setp\.eq\.u32\s+(\w+)\s*,\s*(\w+)\s*,\s*0$")
_PRED = re.compile(r"^@(\w+)\s+(.*)$")
_MEMORY = re.compile(r"^(ld|st|atom|red)\.")


def _statements(asm: str) -> list[str]:
    text = asm.replace("{", ";").replace("}", ";").replace("\n", ";")
    return [s.strip() for s in text.split(";")]


def read_inline_asm(asm: str, site, site_key, declared: dict[str, str] | None = None) -> list:
    """The model operations (``Item``s) one inline asm string stands for; see the module docstring."""

    declared = {k.strip().rstrip(";").strip(): v for k, v in (declared or {}).items()}
    whole = asm.strip().rstrip(";").strip()
    if whole in declared:
        meaning = declared[whole]
        items = [Item("assume", site, site_key, op=f"inline asm {whole!r} ({site}) declared as {meaning!r}")]
        if meaning.strip().lower() in ("no-op", "noop", "nop", ""):
            return items
        return items + read_inline_asm(meaning, site, site_key, None)
    items = []
    tid: set[str] = set()  # registers holding %tid.x
    thread0: set[str] = set()  # predicates true on thread 0 only
    for statement in _statements(asm):
        if _SKIP.match(statement):
            continue
        if m := _TID.match(statement):
            tid.add(m[1])
            continue
        if (m := _THREAD0.match(statement)) and m[2] in tid:
            thread0.add(m[1])
            continue
        one = False
        if m := _PRED.match(statement):
            if m[1] not in thread0:
                raise UnsupportedConstruct(f"{site}: inline asm predicate @{m[1]} in {statement!r} is not "
                                           "'thread 0 of the CTA'; not modeled")
            one, statement = True, m[2]
        if _MEMORY.match(statement):
            items.append(_memory(statement, site, site_key, one))
            continue
        if statement in declared:
            items.append(Item("assume", site, site_key,
                              op=f"inline asm {statement!r} ({site}) declared as {declared[statement]!r}"))
            if declared[statement].strip().lower() not in ("no-op", "noop", "nop", ""):
                items += read_inline_asm(declared[statement], site, site_key, None)
            continue
        items.append(_one(statement, site, site_key))
    return items


def _memory(statement: str, site, site_key, one: bool):
    """A memory instruction on the asm's operands, read by the litmus parser: ``$N`` operands
    become names it accepts (``[$1]`` the location ``a1``, ``$2`` the register ``r2``), the
    state space must be ``.global`` and the width 32 bits."""

    head, _, rest = statement.partition(" ")
    quals = head.split(".")
    if any(q in ("shared", "local", "param", "const") for q in quals):
        raise UnsupportedConstruct(f"{site}: inline asm {statement!r}: only .global memory is modeled")
    if any(q in ("b64", "u64", "s64", "f64", "b16", "u16", "s16", "b8", "u8", "s8", "f32", "f16") for q in quals):
        raise UnsupportedConstruct(f"{site}: inline asm {statement!r}: only 32-bit integer accesses are modeled")
    head = ".".join(q for q in quals if q not in ("global", "b32", "u32", "s32"))
    rest = re.sub(r"\[\s*\$(\d+)\s*\]", r"a\1", rest)
    rest = re.sub(r"\$(\d+)", r"r\1", rest)
    text = f"{head} {rest}".strip()
    try:
        ins = _instruction(_Source(str(site), [text]), text, "P0", 1)
    except (LitmusSyntaxError, UnsupportedConstruct) as error:
        raise UnsupportedConstruct(f"{site}: inline asm {statement!r} cannot be read: {error}") from None
    return Item("asm-memory", site, site_key, op=ins, scalar_one=one)


def _one(statement: str, site, site_key):

    refuse = (f"{site}: inline asm {statement!r} in {site.kernel} is not a fence or CTA barrier the model reads; "
              "declare its meaning (check_kernel(..., declare_asm={TEXT: 'no-op' or PTX}) / --declare-asm 'TEXT=MEANING')")
    text = statement
    try:
        ins = _instruction(_Source(str(site), [text]), text, "P0", 1)
    except (LitmusSyntaxError, UnsupportedConstruct):
        raise UnsupportedConstruct(refuse) from None
    if isinstance(ins, Fence):
        return Item("fence", site, site_key, scope=ins.scope, fence_kind=ins.kind)
    if isinstance(ins, Barrier) and ins.kind == "sync" and isinstance(ins.barrier_id, int) and (
            ins.count is None or isinstance(ins.count, int)):
        return Item("bar", site, site_key, barrier_id=ins.barrier_id, count=ins.count)
    raise UnsupportedConstruct(refuse)
