"""Read the synchronization out of Triton's PTX: which memory operations, fences and barriers run,
with which semantics and scope, on how many threads, and on which kernel argument's memory.

A deliberately small reader for what Triton 3.6 emits for sm_90, not a PTX parser:

* instructions are split at ``;`` (inline asm puts several on one line) and braces are dropped;
* a register's *origin* is the pointer parameter its address was computed from (``ld.param`` of
  ``NAME_param_I``, then through any instruction that reads it): that tells a lock access from a
  tile access. A pointer *loaded* from an address table (a parameter ``NAME_table``: each rank's
  address of the symmetric buffer ``NAME``, ``syncverify.kernels.steps.rank_base``) points into
  ``NAME``, so an access through it is an access of ``NAME``, and the table read itself one of
  ``NAME_table``; a value loaded from any other buffer (a tile index, an operand) is data and
  carries no origin;
* a guard predicate computed from ``%tid.x`` alone is evaluated for every thread of the CTA
  (``.reqntid``): when it holds for exactly one thread the instruction is *one-thread* (how
  Triton predicates a scalar atomic or store: ``(%tid.x & 127) == 0``, or the same through
  ``bfe``/``or``). Any other guard (a tile's duplicate lanes, a loop condition) leaves the
  instruction on every thread.

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

from syncverify.protocols.model import warp_text
from syncverify.protocols.rules import WARP_SIZE

_PARAM = re.compile(r"\[\s*(\w+)_param_(\d+)\s*\]")
_REG = re.compile(r"%[\w.]+|\b[a-z]\b")
_NTID = re.compile(r"\.reqntid\s+(\d+)")
_PRED = re.compile(r"^@(!?)(%?\w+)\s+")
SCOPES = ("cta", "gpu", "sys")
SEMS = ("relaxed", "acquire", "release", "acq_rel", "sc")
CACHE = ("wt", "cg", "cs", "ca", "cv", "wb", "lu")
TABLE_SUFFIX = "_table"


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
    """A synchronization-relevant operation as the model sees it (``syncverify.protocols.lowering``).

    ``kind``: ``st``, ``ld``, ``atom``, ``fence`` or ``bar``; ``sem``: ``weak``, ``volatile``,
    ``relaxed``, ``acquire``, ``release``, ``acq_rel`` or (fences) ``sc``/``acq_rel``; ``threads``:
    ``one`` or ``all``; ``buffer``: the kernel argument the address comes from (``None`` for fences
    and barriers); ``cache``: an ``st``/``ld`` cache modifier (``.wt``, ``.cv``, ...); ``width``:
    the elements of a vector access (``st.global.v4.b32``: 4), which order nothing and so take no
    part in comparisons.
    """

    kind: str
    threads: str
    sem: str = "weak"
    scope: str | None = None
    op: str = ""
    buffer: str | None = None
    cache: str = ""
    returns: bool = True  # an atom whose result is written (``red`` has none)
    width: int = field(default=1, compare=False)
    line: int = field(default=0, compare=False)

    def __str__(self) -> str:
        if self.kind == "bar":
            return f"bar {self.threads}" if self.op in ("", "0") else f"bar {self.op}"
        if self.kind == "fence":
            return f"fence.{self.sem}.{self.scope} {self.threads}"
        head = self.kind + (f".{self.op}" if self.op else "") + f".{self.sem}"
        if self.scope:
            head += f".{self.scope}"
        if self.width > 1:
            head += f".v{self.width}"
        return f"{head} {self.threads} {self.buffer}"


def parse_ptx(ptx: str) -> tuple[list[Instr], int, list[str], set[str]]:
    """``(instructions of the first .entry in order, threads per CTA, parameter symbols,
    the symbols of pointer parameters)``."""
    ntid = int(_NTID.search(ptx).group(1)) if _NTID.search(ptx) else 128
    body = ptx
    params: list[str] = []
    pointers: set[str] = set()
    entry = re.search(r"\.entry\s+(\w+)\s*\((.*?)\)", ptx, re.DOTALL)
    if entry:
        for decl in entry.group(2).split(","):
            m = re.search(r"(\w+_param_\d+)", decl)
            if m:
                params.append(m.group(1))
                if ".ptr" in decl or ".u64" in decl:
                    pointers.add(m.group(1))
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
    return instrs, ntid, params, pointers


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


def _value(operand: str, lanes: dict, ntid: int):
    """Per-thread values of an operand (a list over %tid.x), or None if not a function of it."""
    operand = operand.strip()
    if operand == "%tid.x":
        return list(range(ntid))
    if re.fullmatch(r"-?\d+", operand):
        return [int(operand)] * ntid
    if re.fullmatch(r"0x[0-9a-fA-F]+", operand):
        return [int(operand, 16)] * ntid
    return lanes.get(operand)


_INT_OPS = {
    "and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
    "shr": lambda a, b: a >> b, "shl": lambda a, b: (a << b) & 0xFFFFFFFF,
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
}
_CMP = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}


def _evaluate(ins: Instr, lanes: dict, ntid: int) -> list | None:
    """Per-thread result of ``ins`` if all its inputs are functions of %tid.x (else None)."""
    parts, ops = ins.parts, ins.operands
    if len(ops) < 2 or ins.pred is not None:
        return None
    args = [_value(o, lanes, ntid) for o in ops[1:]]
    if any(a is None for a in args):
        return None
    head = parts[0]
    if head == "mov" and len(args) == 1:
        return args[0]
    if head in ("and", "or", "xor") and len(parts) > 1 and parts[1] == "pred" and len(args) == 2:
        return [_INT_OPS[head](bool(x), bool(y)) for x, y in zip(*args)]
    if head == "not" and len(args) == 1:
        return [not x for x in args[0]]
    if head in _INT_OPS and len(args) == 2:
        return [_INT_OPS[head](x, y) for x, y in zip(*args)]
    if head == "bfe" and len(args) == 3:
        return [(x >> pos) & ((1 << length) - 1) for x, pos, length in zip(*args)]
    if head == "setp" and len(parts) > 1 and parts[1] in _CMP and len(args) == 2:
        return [_CMP[parts[1]](x, y) for x, y in zip(*args)]
    return None


def sync_ops(parsed, *, params: list[str] | None = None, visit=None) -> list[SyncOp]:
    """The synchronization operations of parsed PTX, in program (text) order.

    ``params`` names the kernel's parameters in order (PTX only numbers them); a global access
    records in ``buffer`` the pointer parameter(s) its address comes from. Fences
    (``fence.sc``/``fence.acq_rel``) and ``bar.sync`` are always kept; shared memory,
    ``fence.proxy`` and wgmma fences order nothing between CTAs and are left out.

    ``threads`` is ``one`` when the guard predicate, evaluated for every ``%tid.x`` of the CTA
    (it is computed from ``%tid.x`` alone), holds for exactly one thread; ``all`` otherwise (no
    guard, a guard that does not depend on the thread, or one that keeps several threads, such as
    the duplicate lanes of a small tile).

    ``visit(ins, origin)``, when given, is called for every instruction after the registers'
    origins are updated (``origin``: register -> the buffers its value comes from), for readers of
    what ``SyncOp`` leaves out (``syncverify.kernels.audit_tma``: tensor maps and TMA copies).
    """
    instrs, ntid, param_syms, pointers = parsed
    origin: dict[str, set[str]] = {}
    lanes: dict[str, list] = {}  # registers whose value is a known function of %tid.x
    names = {}
    for sym in param_syms:
        index = int(sym.rsplit("_", 1)[1])
        names[sym] = params[index] if params is not None and index < len(params) else sym
    out: list[SyncOp] = []
    single = _single_definitions(instrs, ntid)
    for ins in instrs:
        ops = ins.operands
        dest = _regs(ops[0]) if ops else []
        srcs = [r for o in ops[1:] for r in _regs(o)]
        parts = ins.parts
        value = _evaluate(ins, lanes, ntid) if dest else None  # its sources are read before dest is written
        for d in dest:  # a register written here loses what it held
            lanes.pop(d, None)
        # ----- which thread(s) and which buffer ----------------------------------------------
        if parts[0] == "ld" and "param" in parts and len(ops) >= 2:
            m = _PARAM.search(ops[1])
            if m and dest:
                sym = f"{m.group(1)}_param_{m.group(2)}"
                if sym in pointers:
                    origin[dest[0]] = {names.get(sym, sym)}
                else:
                    origin.pop(dest[0], None)
            continue
        if value is not None:
            lanes[dest[0]] = value
        if dest and parts[0] not in ("st", "red", "bar", "fence", "cp"):  # cp.async writes no register
            inherited = set().union(*(origin.get(s, set()) for s in srcs)) if srcs else set()
            if parts[0] == "ld" and "global" in parts:
                # a pointer read from NAME_table points into NAME; a value read from any other
                # buffer is data (a tile index from the ownership table, an operand), not an address
                inherited = {b.removesuffix(TABLE_SUFFIX) for b in inherited if b.endswith(TABLE_SUFFIX)}
            if inherited:
                origin[dest[0]] = inherited
            else:
                origin.pop(dest[0], None)
        # ----- synchronization -------------------------------------------------------------
        threads = "all"
        warps = None
        guard = lanes.get(ins.pred) if ins.pred is not None else None
        if guard is None and ins.pred is not None:
            guard = single.get(ins.pred)
        if guard is not None:
            holds = [bool(v) != ins.negated for v in guard]
            if sum(holds) == 1:
                threads = "one"
            warps = _guarded_warps(holds)
        op = _sync_op(ins, parts, ops, origin, threads, warps)
        if op is not None:
            out.append(op)
        if visit is not None:
            visit(ins, origin)
    return out


def _single_definitions(instrs, ntid: int) -> dict[str, list]:
    """Registers written by exactly one instruction whose value is a function of ``%tid.x``.

    LLVM may place a block after the blocks that use what it computes (a guard hoisted out of a
    loop and laid out below it), so the text-order pass of :func:`sync_ops` can meet a guard
    before its ``setp``. A register with one definition holds that value wherever it is read, so
    its per-thread value, found here to a fixed point, stands in for the text-order one."""
    defined: dict[str, list] = {}
    for ins in instrs:
        for d in (_regs(ins.operands[0]) if ins.operands else []):
            defined.setdefault(d, []).append(ins)
    candidates = {d: found[0] for d, found in defined.items() if len(found) == 1 and found[0].pred is None}
    known: dict[str, list] = {}
    changed = True
    while changed:
        changed = False
        for reg, ins in candidates.items():
            if reg not in known:
                value = _evaluate(ins, known, ntid)
                if value is not None:
                    known[reg] = value
                    changed = True
    return known


def _sem_scope(parts: list[str]) -> tuple[str | None, str | None]:
    sem = next((p for p in parts if p in SEMS), None)
    scope = next((p for p in parts if p in SCOPES), None)
    return sem, scope


def _guarded_warps(holds: list[bool]) -> tuple[int, ...] | None:
    """The warps a guard keeps, when it keeps whole warps but not all of them (a warp-selected
    barrier, ``syncverify.protocols.lowering.barrier_ptx``); None otherwise."""
    warps = [holds[w * WARP_SIZE:(w + 1) * WARP_SIZE] for w in range(len(holds) // WARP_SIZE)]
    if not all(all(lanes) or not any(lanes) for lanes in warps) or all(all(lanes) for lanes in warps):
        return None
    return tuple(w for w, lanes in enumerate(warps) if all(lanes))


def _sync_op(ins: Instr, parts: list[str], ops, origin, threads, warps=None) -> SyncOp | None:
    kind = parts[0]
    if kind == "bar" and parts[1:2] in (["sync"], ["arrive"]):
        # as syncverify.protocols.lowering.LoweredOp.bar_operands writes it: "1,256", "arrive 1,256 warps 1-7"
        text = ("arrive " if parts[1] == "arrive" else "") + ",".join(o.strip() for o in ops)
        if warps is not None:
            text += f" warps {warp_text(warps)}"
        return SyncOp("bar", "all", op=text, line=ins.line)
    if kind == "fence" and len(parts) >= 3 and parts[1] in ("sc", "acq_rel"):
        return SyncOp("fence", "all", parts[1], parts[2], line=ins.line)
    if kind == "cp" and parts[1:2] == ["async"] and "global" in parts and "bulk" not in parts:
        # cp.async (Triton's pipelined pointer loads): a weak generic-proxy read of the global
        # source (its second address) into shared memory; the bulk/tensor forms (TMA) are the
        # async proxy and are left out with the inputs they read
        addresses = [o for o in ops if "[" in o]
        buffers = set().union(*(origin.get(r, set()) for r in _regs(addresses[1]))) if len(addresses) > 1 else set()
        return SyncOp("ld", threads, "weak", None, buffer=",".join(sorted(buffers)) or None, line=ins.line)
    if kind not in ("st", "ld", "atom", "red") or "global" not in parts:
        return None
    address = next((o for o in ops if "[" in o), "")
    buffers = set().union(*(origin.get(r, set()) for r in _regs(address))) if address else set()
    buffer = ",".join(sorted(buffers)) if buffers else None
    sem, scope = _sem_scope(parts)
    cache = next((f".{p}" for p in parts if p in CACHE), "")
    width = next((int(p[1:]) for p in parts if re.fullmatch(r"v\d+", p)), 1)
    if kind in ("atom", "red"):
        atom_op = next((p for p in parts if p in ("add", "exch", "cas", "min", "max", "and", "or", "xor", "inc", "dec")), "")
        return SyncOp("atom", threads, sem or "relaxed", scope or "gpu", atom_op, buffer,
                      returns=kind == "atom", line=ins.line)
    if "volatile" in parts:
        return SyncOp(kind, threads, "volatile", "sys", buffer=buffer, cache=cache, width=width,
                      line=ins.line)
    return SyncOp(kind, threads, sem or "weak", scope if sem else None, buffer=buffer, cache=cache,
                  width=width, line=ins.line)


# ----- named barriers reused across tiles ------------------------------------------------------

_LABEL = re.compile(r"^\s*([$\w.]+):\s*(.*)$")
_BRANCH = re.compile(r"^(@!?%?\w+\s+)?bra(?:\.uni)?\s+([$\w.]+)$")
_ARRIVE = re.compile(r"^(?:@!?%?\w+\s+)?bar\.arrive\s+(\d+)")
_FULL_BARRIER = re.compile(r"^(?:bar\.sync|barrier\.sync(?:\.aligned)?)\s+0$")


def arrive_laps(ptx: str) -> list[str]:
    """Where a warp that only arrives at a named barrier could arrive there again before the
    phase it arrived in completes: a path of the compiled kernel from a ``bar.arrive`` to a
    ``bar.arrive`` of the same barrier that passes no ``bar.sync 0`` of the whole CTA.

    A warp-selected barrier step (``syncverify.protocols.lowering.barrier_ptx``) runs once per tile, and
    its arriving warps do not wait. What keeps them from arriving for the next tile while the
    waiting warp is still in this tile's phase is a full ``bar.sync 0`` (Triton's, in every
    tile's GEMM) on every path between two arrivals: the waiting warp reaches it only after its
    own phase completed. This walks the control flow of the PTX text (labels, ``bra``, falling
    through; the inline asm's own loops included) and returns one line per arrival that can lap.
    """
    pieces: list[str] = []
    labels: dict[str, int] = {}
    for raw in ptx.splitlines():
        for piece in raw.split("//")[0].replace("{", ";").replace("}", ";").split(";"):
            piece = piece.strip()
            while (match := _LABEL.match(piece)) and not piece.startswith("."):
                labels[match[1]] = len(pieces)
                piece = match[2].strip()
            if piece and not piece.startswith("."):
                pieces.append(piece)

    def successors(i: int) -> list[int]:
        branch = _BRANCH.match(pieces[i])
        if branch is not None:
            target = [labels[branch[2]]] if branch[2] in labels else []
            return target + ([i + 1] if branch[1] else [])
        if pieces[i].split()[0].split(".")[0] in ("ret", "exit"):
            return []
        return [i + 1]

    problems = []
    for start, piece in enumerate(pieces):
        arrive = _ARRIVE.match(piece)
        if arrive is None:
            continue
        seen, stack = set(), [start + 1]
        while stack:
            i = stack.pop()
            if i in seen or i >= len(pieces) or _FULL_BARRIER.match(pieces[i]):
                continue
            seen.add(i)
            again = _ARRIVE.match(pieces[i])
            if again is not None and again[1] == arrive[1]:
                problems.append(f"bar.arrive {arrive[1]} ({piece!r}) can be reached again without a bar.sync 0 "
                                f"of the whole CTA in between")
                break
            stack.extend(successors(i))
    return problems
