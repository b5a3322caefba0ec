"""Read the synchronization out of Triton's PTX: which memory operations, fences and barriers run,
with which semantics and scope, on how many threads, and on which kernel argument's memory.

A deliberately small reader for what Triton 3.6 emits for sm_90, not a PTX parser:

* instructions are split at ``;`` (inline asm puts several on one line) and braces are dropped;
* a register's *origin* is the kernel parameter its address was computed from (``ld.param`` of
  ``NAME_param_I``, then through any instruction that reads it): that tells a lock access from a
  tile access;
* a predicate is *one-thread* when it is ``%tid.x == 0`` or ``(%tid.x & mask) == 0`` with
  ``mask + 1 >= `` the CTA's thread count (``.reqntid``), possibly ``and``-ed with other
  predicates; that is how Triton predicates a scalar atomic or store to one thread. Any other
  predicate (a tile's duplicate lanes, a loop condition) leaves the instruction on every thread.

Examples
--------
>>> ptx = '''
... .visible .entry k(.param .u64 .ptr .global .align 1 k_param_0)
... .reqntid 128
... {
...     ld.param.b64 %rd1, [k_param_0];
...     mov.u32 %r1, %tid.x;
...     and.b32 %r2, %r1, 127;
...     setp.eq.b32 %p1, %r2, 0;
...     bar.sync 0;
...     fence.acq_rel.sys; mov.u32 %r3, 0;
...     @%p1 atom.global.sys.release.add.u32 %r4, [ %rd1 + 0 ], %r5;
... }'''
>>> [str(op) for op in sync_ops(parse_ptx(ptx), params=["locks"])]
['bar all', 'fence.acq_rel.sys all', 'atom.add.release.sys one locks']
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_PARAM = re.compile(r"\[\s*(\w+)_param_(\d+)\s*\]")
_REG = re.compile(r"%[\w.]+|\b[a-z]\b")
_NTID = re.compile(r"\.reqntid\s+(\d+)")
_PRED = re.compile(r"^@(!?)(%?\w+)\s+")
SCOPES = ("cta", "gpu", "sys")
SEMS = ("relaxed", "acquire", "release", "acq_rel", "sc")


@dataclass(frozen=True)
class Instr:
    """One PTX instruction: opcode (dotted), operands as text, and its guard predicate."""

    opcode: str
    operands: tuple[str, ...]
    pred: str | None = None
    negated: bool = False
    line: int = 0

    @property
    def parts(self) -> list[str]:
        return self.opcode.split(".")


@dataclass(frozen=True)
class SyncOp:
    """A synchronization-relevant operation as the model sees it (``syncverify.lowering``).

    ``kind``: ``st``, ``ld``, ``atom``, ``fence`` or ``bar``; ``sem``: ``weak``, ``volatile``,
    ``relaxed``, ``acquire``, ``release``, ``acq_rel`` or (fences) ``sc``/``acq_rel``; ``threads``:
    ``one`` or ``all``; ``buffer``: the kernel argument the address comes from (``None`` for fences
    and barriers).
    """

    kind: str
    threads: str
    sem: str = "weak"
    scope: str | None = None
    op: str = ""
    buffer: str | None = None
    cache: str = ""
    returns: bool = True  # an atom whose result is written (``red`` has none)
    line: int = field(default=0, compare=False)

    def __str__(self) -> str:
        if self.kind == "bar":
            return f"bar {self.threads}"
        if self.kind == "fence":
            return f"fence.{self.sem}.{self.scope} {self.threads}"
        head = self.kind + (f".{self.op}" if self.op else "") + f".{self.sem}"
        if self.scope:
            head += f".{self.scope}"
        return f"{head} {self.threads} {self.buffer}"


def parse_ptx(ptx: str) -> tuple[list[Instr], int, list[str]]:
    """``(instructions of the first .entry in order, threads per CTA, parameter names)``."""
    ntid = int(_NTID.search(ptx).group(1)) if _NTID.search(ptx) else 128
    body = ptx
    params: list[str] = []
    entry = re.search(r"\.entry\s+(\w+)\s*\((.*?)\)", ptx, re.DOTALL)
    if entry:
        params = re.findall(r"(\w+)_param_(\d+)", entry.group(2))
        params = [f"{name}_param_{i}" for name, i in params]
        body = ptx[entry.end():]
    instrs: list[Instr] = []
    for number, raw in enumerate(body.splitlines(), start=1):
        text = raw.split("//")[0]
        for piece in text.split(";"):
            piece = piece.replace("{", " ").replace("}", " ").strip()
            if not piece or piece.startswith(".") or piece.endswith(":"):
                continue
            pred, negated = None, False
            match = _PRED.match(piece)
            if match:
                negated, pred = match.group(1) == "!", match.group(2)
                piece = piece[match.end():]
            opcode, _, rest = piece.partition(" ")
            operands = tuple(o.strip() for o in _split_operands(rest))
            instrs.append(Instr(opcode, operands, pred, negated, number))
    return instrs, ntid, params


def _split_operands(text: str) -> list[str]:
    out, depth, current = [], 0, ""
    for ch in text:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(current)
            current = ""
        else:
            current += ch
    if current.strip():
        out.append(current)
    return out


def _regs(operand: str) -> list[str]:
    return [r for r in _REG.findall(operand) if r not in ("%tid.x",)]


def sync_ops(parsed, *, params: list[str] | None = None) -> list[SyncOp]:
    """The synchronization operations of parsed PTX, in program (text) order.

    ``params`` names the kernel's parameters in order (PTX only numbers them); global memory
    accesses are kept only when their address comes from one of them (``buffer``), so pass the
    names of the buffers to audit. Fences (``fence.sc``/``fence.acq_rel``) and ``bar.sync`` are
    always kept; shared memory, ``fence.proxy`` and wgmma fences are not synchronization between
    CTAs and are left out.
    """
    instrs, ntid, param_syms = parsed
    origin: dict[str, set[str]] = {}
    masked: set[str] = set()  # registers holding %tid.x & (>= ntid - 1), i.e. %tid.x
    one_preds: set[str] = set()
    names = {}
    if params is not None:
        for sym in param_syms:
            index = int(sym.rsplit("_", 1)[1])
            if index < len(params):
                names[sym] = params[index]
    out: list[SyncOp] = []
    for ins in instrs:
        ops = ins.operands
        dest = _regs(ops[0]) if ops else []
        srcs = [r for o in ops[1:] for r in _regs(o)]
        parts = ins.parts
        # ----- provenance ------------------------------------------------------------------
        if parts[0] == "ld" and "param" in parts and len(ops) >= 2:
            m = _PARAM.search(ops[1])
            if m and dest:
                sym = f"{m.group(1)}_param_{m.group(2)}"
                origin[dest[0]] = {names.get(sym, sym)}
            continue
        for d in dest:  # a register written here loses what it held
            masked.discard(d)
            one_preds.discard(d)
        if parts[0] == "mov" and len(ops) == 2 and ops[1].strip() == "%tid.x" and dest:
            masked.add(dest[0])
            continue
        if parts[0] == "and" and parts[1] != "pred" and len(ops) == 3 and dest:
            a, b = ops[1].strip(), ops[2].strip()
            if a in masked and b.isdigit() and int(b) + 1 >= ntid:
                masked.add(dest[0])
        if parts[0] == "setp" and parts[1] == "eq" and len(ops) == 3 and dest:
            a, b = ops[1].strip(), ops[2].strip()
            if (a in masked and b == "0") or (b in masked and a == "0"):
                one_preds.add(dest[0])
        if parts[0] == "and" and parts[1] == "pred" and dest:
            if any(s in one_preds for s in srcs):
                one_preds.add(dest[0])
        if dest and parts[0] not in ("st", "red", "bar", "fence"):
            inherited = set().union(*(origin.get(s, set()) for s in srcs)) if srcs else set()
            if inherited:
                origin[dest[0]] = inherited
            else:
                origin.pop(dest[0], None)
        # ----- synchronization -------------------------------------------------------------
        threads = "one" if (ins.pred in one_preds and not ins.negated) else "all"
        op = _sync_op(ins, parts, ops, origin, threads)
        if op is not None:
            out.append(op)
    return out


def _sem_scope(parts: list[str]) -> tuple[str | None, str | None]:
    sem = next((p for p in parts if p in SEMS), None)
    scope = next((p for p in parts if p in SCOPES), None)
    return sem, scope


def _sync_op(ins: Instr, parts: list[str], ops, origin, threads) -> SyncOp | None:
    kind = parts[0]
    if kind == "bar" and parts[1:2] == ["sync"]:
        return SyncOp("bar", "all", line=ins.line)
    if kind == "fence" and len(parts) >= 3 and parts[1] in ("sc", "acq_rel"):
        return SyncOp("fence", "all", parts[1], parts[2], line=ins.line)
    if kind not in ("st", "ld", "atom", "red") or "global" not in parts:
        return None
    address = next((o for o in ops if "[" in o), "")
    buffers = set().union(*(origin.get(r, set()) for r in _regs(address))) if address else set()
    buffer = ",".join(sorted(buffers)) if buffers else None
    sem, scope = _sem_scope(parts)
    cache = next((f".{p}" for p in parts if p in ("wt", "cg", "cs", "ca", "cv", "wb", "lu")), "")
    if kind in ("atom", "red"):
        atom_op = next((p for p in parts if p in ("add", "exch", "cas", "min", "max", "and", "or", "xor", "inc", "dec")), "")
        return SyncOp("atom", threads, sem or "relaxed", scope or "gpu", atom_op, buffer,
                      returns=kind == "atom", line=ins.line)
    if "volatile" in parts:
        return SyncOp(kind, threads, "volatile", "sys", buffer=buffer, cache=cache, line=ins.line)
    return SyncOp(kind, threads, sem or "weak", scope if sem else None, buffer=buffer, cache=cache,
                  line=ins.line)
