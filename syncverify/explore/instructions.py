"""What an instruction does to values: operands, register operations, branches, atomics.

The value semantics the thread-path search (:mod:`syncverify.explore.thread_paths`) runs each
instruction with, in the GPU's 32-bit arithmetic (:mod:`syncverify.model.int32`), and the text an
instruction is shown with in a trace.
"""

from __future__ import annotations

from syncverify.errors import UnsupportedConstruct
from syncverify.model.int32 import wrap_int32
from syncverify.delivery import DeliveryOrder
from syncverify.program import Atomic, Barrier, BulkCommit, BulkCopy, BulkWait, Fence, Load, MbarArrive, MbarWait, Operand, ProxyFence, Store


def operand_value(op: Operand, regs: dict[str, int]) -> int:
    """An operand's value: the literal (as a 32-bit register holds it), or the register's (0 if
    never written)."""
    return wrap_int32(op) if isinstance(op, int) else regs.get(op, 0)


def operand_taint(op: Operand, taint: dict[str, frozenset[int]]) -> frozenset[int]:
    """The reads an operand's value depends on."""
    return frozenset() if isinstance(op, int) else taint.get(op, frozenset())


_U32 = 0xFFFFFFFF


def _unsigned(v: int) -> int:
    """``v`` read as a ``.u32`` (two's complement)."""
    return v & _U32


def division(a: int, b: int) -> int:
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
        return division(old, b)
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


REG_OPS = {"mov": lambda a, b: a, "add": lambda a, b: a + b, "sub": lambda a, b: a - b,
            "mul": lambda a, b: a * b, "div": division}
BRANCHES = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "ge": lambda a, b: a >= b,
             "lt": lambda a, b: a < b, "gt": lambda a, b: a > b, "le": lambda a, b: a <= b}


def instruction_text(ins: object) -> str:
    """How an instruction is shown in a trace: its label, or its PTX-like text."""
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
    return _async_text(ins) or type(ins).__name__


def _async_text(ins: object) -> str:
    """The PTX text of an instruction of the async proxy; "" for any other."""
    if isinstance(ins, DeliveryOrder) or (isinstance(ins, BulkCopy) and ins.completion == "delivery"):
        return ins.label  # an NVSHMEM call's issue point: its text (syncverify.delivery)
    if isinstance(ins, BulkCopy):
        via = f"mbarrier::complete_tx::bytes [{ins.dst}], [{ins.src}], [{ins.mbarrier}]" if ins.mbarrier else \
            f"bulk_group [{ins.dst}], [{ins.src}]"
        return f"cp.async.bulk.{ins.dst_space}.{ins.src_space}.{via} (copy {ins.copy})"
    if isinstance(ins, BulkCommit):
        return "cp.async.bulk.commit_group"
    if isinstance(ins, BulkWait):
        return f"cp.async.bulk.wait_group{'.read' if ins.read else ''} {ins.pending}"
    if isinstance(ins, ProxyFence):
        return "fence.proxy.async" + (f".{ins.space}" if ins.space else "")
    if isinstance(ins, MbarArrive):
        return f"mbarrier.arrive{'.expect_tx' if ins.expect_tx else ''} [{ins.mbarrier}]"
    if isinstance(ins, MbarWait):
        return f"mbarrier.try_wait {ins.dst or '_'}, [{ins.mbarrier}]"
    return ""
