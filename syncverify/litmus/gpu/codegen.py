"""A parsed litmus program to the source of ONE Triton kernel.

Placement (the test's ``Pn@cta c,gpu 0``): each test CTA ``c`` runs on CTAs (Triton programs) of
its own; inside one, each warp plays one test thread of ``c`` for up to 32 instances (one per
lane), so the test's threads of one CTA are warps of one CTA, as on the hardware. A program's CTA,
the role of each warp and the instance of each lane come from tables the host fills at random
(:mod:`syncverify.litmus.gpu.layout`); the kernel reads them before the test starts.

Every instruction is emitted twice over, in two *forms* chosen when the source is generated:

* ``"ptx"``: inline PTX through ``tl.inline_asm_elementwise``, guarded by a per-lane predicate
  (``@%p``): ``ld``/``st`` with the test's ``.sem.scope``, ``atom``/``red``, ``fence.*``,
  ``barrier.sync|arrive|red``. Nothing else in the test body makes Triton emit a ``bar.sync``
  (no reductions, no scalar atomics), so the only ordering is the test's own.
* ``"interpret"``: ``tl.load`` / ``tl.store`` / ``tl.atomic_*`` / ``tl.debug_barrier`` with masks,
  for ``TRITON_INTERPRET=1`` on the CPU (which cannot run inline asm). The interpreter runs one
  program at a time and one statement at a time, so it only ever shows sequentially consistent
  outcomes: the report says it cannot show weak ones.

Control flow: a thread with branches runs as a bounded loop over a per-lane program counter
(``pc``): each pass runs, in order, every instruction whose index equals ``pc``, so straight-line
code runs in one pass and a backward branch takes the next pass. After ``max_iterations`` passes a
thread that has not finished is a *timeout*; nothing spins unbounded.

CTA barriers: a test's barrier ``b`` with count ``n`` threads becomes hardware barrier ``b'``
(ids renumbered from 1: Triton uses barrier 0 itself) with count ``32 n`` (every lane of the
thread's warp arrives). Without a count the participants are the CTA's threads that use ``b``
(as :mod:`syncverify.explore.barriers` reads the ISA). Each thread's code is cut at its barriers and the
pieces are emitted round by round (every thread's piece k, then every thread's k-th barrier), so
the interpreter, running statements in order, still meets barrier semantics.

Threads on several GPUs: :func:`generate` with ``cross_gpu`` keeps every test CTA (a ``(gpu, cta)``
pair) in the one kernel and :mod:`syncverify.litmus.gpu.ranks` launches it once per GPU, each
launch placing that GPU's CTAs only; without ``cross_gpu`` such a test is refused.

Refused (one line naming ``file:line``, exit 2): threads on two GPUs (without ``cross_gpu``), barrier ids or counts held
in registers, barriers in a thread with branches, Dartagnan's ``atom.mul``/``atom.div``, more than
15 distinct barrier ids, more than 32 threads in one CTA, and any test whose model has an
execution that waits forever at a barrier (a GPU barrier cannot be bounded).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from syncverify.delivery import DeliveryOrder
from syncverify.errors import SyncVerifyError
from syncverify.program import ASYNC_INSTRUCTIONS, Atomic, Barrier, Branch, Fence, Label, Load, Operand, Program, RegOp, Store, Thread
from syncverify.litmus.gpu.outcomes import observed_items

FORMS = ("ptx", "interpret")
BRANCH_OPS = {"eq": "==", "ne": "!=", "ge": ">=", "lt": "<", "gt": ">", "le": "<="}
RED_IDENTITY = {"popc": 0, "and": 1, "or": 0}  # a lane that is no instance adds nothing


class NotOnGpu(SyncVerifyError):
    """A test, or one of its instructions, that the GPU runner cannot run (exit 2)."""


@dataclass(frozen=True)
class KernelPlan:
    """What the host needs to know about a generated kernel."""

    name: str
    form: str
    source: str
    ctas: tuple[tuple[int, ...], ...]  # per test CTA, the indices of its threads (program order)
    num_warps: int  # warps per Triton program (a power of two >= the largest CTA)
    locations: tuple[str, ...]
    outputs: tuple[tuple[int, str], ...]  # (thread index, register) written to ``out`` per instance
    single_lane: bool  # bar.red reduces over every lane of a warp: one instance per program
    loops: tuple[bool, ...] = field(default=())  # per thread: runs as a bounded pc loop
    cta_gpus: tuple[int, ...] = field(default=())  # per test CTA, the GPU the test places it on


def _where(program: Program, ins) -> str:
    line = getattr(ins, "line", None)
    return f"{program.name}:{line}" if line is not None else program.name


def _ident(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)


class _Emitter:
    """Source lines with indentation."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def __call__(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)


def gpus_needed(program: Program) -> str | None:
    """Why ``program`` cannot run on one GPU (its threads are on several), or None."""
    gpus = sorted({t.gpu for t in program.threads})
    if len(gpus) > 1:
        return f"needs {len(gpus)} GPUs (threads on gpu {', '.join(map(str, gpus))}); --gpu runs single-GPU tests only"
    return None


def _check_program(program: Program, *, cross_gpu: bool = False) -> None:
    why = None if cross_gpu else gpus_needed(program)
    if why is not None:
        raise NotOnGpu(f"{program.name}: {why}")
    if any(t.phase for t in program.threads):  # a stream's operations (stream.*), in host phases: no SM runs them
        first = next(ins for t in program.threads for ins in t.instructions if t.phase)
        raise NotOnGpu(f"{_where(program, first)}: stream memory operations (stream.*) are not compiled for --gpu "
                       f"(docs/nvshmem.md, \"Stream memory operations\")")
    for thread in program.threads:
        has_branch = any(isinstance(i, Branch) for i in thread.instructions)
        for ins in thread.instructions:
            if isinstance(ins, DeliveryOrder) or getattr(ins, "completion", "") == "delivery":
                raise NotOnGpu(f"{_where(program, ins)}: NVSHMEM calls (nvshmem.*) are not compiled for --gpu "
                               f"(docs/nvshmem.md)")
            if isinstance(ins, ASYNC_INSTRUCTIONS) or getattr(ins, "proxy", "generic") != "generic":
                raise NotOnGpu(f"{_where(program, ins)}: the async proxy (cp.async.bulk, mbarrier, "
                               f"fence.proxy.async) is not compiled for --gpu (docs/async.md)")
            if isinstance(ins, Barrier):
                if has_branch:
                    raise NotOnGpu(f"{_where(program, ins)}: a barrier in thread {thread.name}, which branches: "
                                   "--gpu cannot run barriers inside its bounded branch loop")
                if not isinstance(ins.barrier_id, int) or (ins.count is not None and not isinstance(ins.count, int)):
                    raise NotOnGpu(f"{_where(program, ins)}: a barrier id or count in a register "
                                   f"({thread.name}): --gpu needs constants")
            if isinstance(ins, Atomic) and ins.op in ("mul", "div"):
                raise NotOnGpu(f"{_where(program, ins)}: atom.{ins.op} is Dartagnan's, not a PTX instruction")


def _barrier_plan(program: Program, ctas: list[list[int]]) -> dict[tuple[int, int], tuple[int, int]]:
    """(cta, test barrier id) -> (hardware barrier id, hardware thread count)."""
    ids: dict[tuple[int, int], tuple[int, int]] = {}
    for c, members in enumerate(ctas):
        users: dict[int, set[int]] = {}
        counts: dict[int, int | None] = {}
        for t in members:
            for ins in program.threads[t].instructions:
                if isinstance(ins, Barrier):
                    users.setdefault(ins.barrier_id, set()).add(t)
                    counts.setdefault(ins.barrier_id, ins.count)
        if len(users) > 15:
            raise NotOnGpu(f"{program.name}: CTA {c} uses {len(users)} barrier ids; the GPU has 15 besides "
                           "Triton's barrier 0")
        for hw, test_id in enumerate(sorted(users), start=1):
            count = counts[test_id] if counts[test_id] is not None else len(users[test_id])
            ids[(c, test_id)] = (hw, 32 * count)
    return ids


def _segments(code: tuple) -> tuple[list[list], list[Barrier]]:
    """A thread's instructions cut at its barriers: the pieces and the barriers between them."""
    pieces: list[list] = [[]]
    barriers: list[Barrier] = []
    for ins in code:
        if isinstance(ins, Barrier):
            barriers.append(ins)
            pieces.append([])
        else:
            pieces[-1].append(ins)
    return pieces, barriers


class _Kernel:
    """Builds the kernel source for one program and form."""

    def __init__(self, program: Program, form: str, outputs: tuple[tuple[int, str], ...]) -> None:
        self.program = program
        self.form = form
        self.ptx = form == "ptx"
        self.emit = _Emitter()
        self.locs = {loc: j for j, loc in enumerate(program.locations())}
        self.outputs = outputs
        self.fresh = 0

    # ----- operands -------------------------------------------------------------------------
    def reg(self, t: int, name: str) -> str:
        return f"R{t}_{_ident(name)}"

    def val(self, t: int, op: Operand) -> str:
        if isinstance(op, int):
            return f"tl.full([BLOCK], {op}, tl.int32)"
        return self.reg(t, op)

    def tmp(self) -> str:
        self.fresh += 1
        return f"v{self.fresh}"

    def asm(self, text: str, constraints: str, args: list[str]) -> str:
        out = self.tmp()
        self.emit(f"{out} = tl.inline_asm_elementwise({text!r}, {constraints!r}, [{', '.join(args)}], "
                  "dtype=tl.int32, is_pure=False, pack=1)")
        return out

    @staticmethod
    def guarded(body: str, pred_operand: str = "$2") -> str:
        return f"{{ .reg .pred %p; setp.ne.s32 %p, {pred_operand}, 0; {body} }}"

    # ----- instructions -----------------------------------------------------------------------
    def instruction(self, t: int, ins, act: str) -> None:
        """Emit one instruction of thread ``t``, active on the lanes where ``act`` is nonzero."""
        emit = self.emit
        if isinstance(ins, Load):
            ptr = f"P_{self.locs[ins.loc]}"
            if self.ptx:
                q = ".weak" if ins.sem == "weak" else f".{ins.sem}.{ins.scope}"
                v = self.asm(self.guarded(f"mov.u32 $0, 0; @%p ld{q}.global.b32 $0, [$1];"), "=r,l,r", [ptr, act])
            else:
                v = self.tmp()
                emit(f"{v} = tl.load({ptr}, mask={act} != 0, other=0)")
            emit(f"{self.reg(t, ins.dst)} = tl.where({act} != 0, {v}, {self.reg(t, ins.dst)})")
        elif isinstance(ins, Store):
            ptr, value = f"P_{self.locs[ins.loc]}", self.val(t, ins.value)
            if self.ptx:
                q = ".weak" if ins.sem == "weak" else f".{ins.sem}.{ins.scope}"
                self.asm(self.guarded(f"@%p st{q}.global.b32 [$1], $3; mov.u32 $0, 0;"), "=r,l,r,r", [ptr, act, value])
            else:
                emit(f"tl.store({ptr}, {value}, mask={act} != 0)")
        elif isinstance(ins, Atomic):
            self.atomic(t, ins, act)
        elif isinstance(ins, Fence):
            if self.ptx:
                self.asm(self.guarded(f"@%p fence.{ins.kind}.{ins.scope}; mov.u32 $0, 0;", "$1"), "=r,r", [act])
            else:
                emit(f"pass  # fence.{ins.kind}.{ins.scope}: the interpreter runs statements in order")
        elif isinstance(ins, RegOp):
            dst, lhs, rhs = self.reg(t, ins.dst), self.val(t, ins.lhs), self.val(t, ins.rhs)
            if ins.op == "mov":
                expr = lhs
            elif ins.op == "div":  # truncating, as div.s32 (Python's // floors); x/0 left as 0
                safe = f"tl.where({rhs} == 0, 1, {rhs})"
                expr = (f"tl.where({rhs} == 0, 0, tl.where(({lhs} < 0) != ({rhs} < 0), "
                        f"-(tl.abs({lhs}) // tl.abs({safe})), tl.abs({lhs}) // tl.abs({safe})))")
            else:
                expr = f"({lhs} {dict(add='+', sub='-', mul='*')[ins.op]} {rhs})"
            emit(f"{dst} = tl.where({act} != 0, {expr}, {dst})")
        else:  # Branch / Label are handled by the pc loop; Barrier by rounds
            raise AssertionError(f"unexpected {ins!r}")

    def atomic(self, t: int, ins: Atomic, act: str) -> None:
        emit = self.emit
        ptr = f"P_{self.locs[ins.loc]}"
        operands = [self.val(t, o) for o in ins.operands]
        op = ins.op
        if op == "sub":  # PTX has no atom.sub: add the negation (same 32-bit result)
            op, operands = "add", [f"(0 - {operands[0]})"]
        if self.ptx:
            kind = {"add": "add.u32", "exch": "exch.b32", "cas": "cas.b32", "and": "and.b32", "or": "or.b32",
                    "xor": "xor.b32", "inc": "inc.u32", "dec": "dec.u32",
                    "min": "min.u32" if ins.unsigned else "min.s32", "max": "max.u32" if ins.unsigned else "max.s32"}[op]
            quals = f".{ins.sem}.{ins.scope}"
            if ins.dst is None and ins.sem in ("relaxed", "release"):
                self.asm(self.guarded(f"@%p red{quals}.global.{kind} [$1], $3; mov.u32 $0, 0;"),
                         "=r,l,r,r", [ptr, act, operands[0]])
                return
            if op == "cas":
                v = self.asm(self.guarded(f"mov.u32 $0, 0; @%p atom{quals}.global.{kind} $0, [$1], $3, $4;"),
                             "=r,l,r,r,r", [ptr, act] + operands)
            else:
                v = self.asm(self.guarded(f"mov.u32 $0, 0; @%p atom{quals}.global.{kind} $0, [$1], $3;"),
                             "=r,l,r,r", [ptr, act, operands[0]])
        else:
            v = self.tmp()
            mask, sem = f"{act} != 0", f"sem={ins.sem!r}, scope={ins.scope!r}"
            if op == "cas":  # tl.atomic_cas takes no mask: idle lanes act on their own scratch word
                emit(f"{v} = tl.atomic_cas(tl.where({mask}, {ptr}, DUMMY), {operands[0]}, {operands[1]}, {sem})")
            elif op in ("inc", "dec"):  # no tl.atomic_inc: the interpreter runs a statement at once
                old = f"tl.load({ptr}, mask={mask}, other=0)"
                emit(f"{v} = {old}")
                u, b = f"{v}.to(tl.uint32, bitcast=True)", f"{operands[0]}.to(tl.uint32, bitcast=True)"
                new = (f"tl.where({u} >= {b}, 0, {v} + 1)" if op == "inc"
                       else f"tl.where(({v} == 0) | ({u} > {b}), {operands[0]}, {v} - 1)")
                emit(f"tl.store({ptr}, {new}, mask={mask})")
            elif op in ("min", "max") and ins.unsigned:
                emit(f"{v} = tl.atomic_{op}({ptr}.to(tl.pointer_type(tl.uint32)), "
                     f"{operands[0]}.to(tl.uint32, bitcast=True), mask={mask}, {sem}).to(tl.int32, bitcast=True)")
            else:
                fn = {"exch": "xchg"}.get(op, op)
                emit(f"{v} = tl.atomic_{fn}({ptr}, {operands[0]}, mask={mask}, {sem})")
        if ins.dst is not None:
            emit(f"{self.reg(t, ins.dst)} = tl.where({act} != 0, {v}, {self.reg(t, ins.dst)})")

    def barrier(self, t: int, ins: Barrier, hw: tuple[int, int], warp: str, red_group: list[tuple[int, Barrier]]) -> None:
        hw_id, count = hw
        if ins.kind == "red":
            self.bar_red(t, ins, hw, warp, red_group)
            return
        if self.ptx:
            self.asm(self.guarded(f"@%p barrier.{ins.kind} {hw_id}, {count}; mov.u32 $0, 0;", "$1"), "=r,r", [warp])
        else:
            self.emit(f"tl.debug_barrier()  # bar.{ins.kind} {ins.barrier_id}: rounds order the pieces")

    def bar_red(self, t: int, ins: Barrier, hw: tuple[int, int], warp: str, group: list[tuple[int, Barrier]]) -> None:
        hw_id, count = hw
        dst = self.reg(t, ins.dst)
        pred = self.val(t, ins.predicate)
        idle = RED_IDENTITY[ins.op] ^ int(ins.negate)  # what a lane that is no instance contributes
        if self.ptx:
            p = self.tmp()
            self.emit(f"{p} = tl.where(W_USED, ({pred} != 0).to(tl.int32), {idle})")
            neg = "!" if ins.negate else ""
            if ins.op == "popc":
                body = f"mov.u32 $0, 0; @%p barrier.red.popc.u32 $0, {hw_id}, {count}, {neg}%q;"
            else:
                body = (f".reg .pred %r; setp.ne.s32 %r, 0, 0; @%p barrier.red.{ins.op}.pred %r, {hw_id}, {count}, "
                        f"{neg}%q; selp.u32 $0, 1, 0, %r;")
            v = self.asm(f"{{ .reg .pred %p; .reg .pred %q; setp.ne.s32 %p, $1, 0; setp.ne.s32 %q, $2, 0; {body} }}",
                         "=r,r,r", [warp, p])
        else:
            # One instance per program (single_lane): each participant's value is on its used lane.
            terms = []
            for u, other in group:
                bit = f"(({self.val(u, other.predicate)} != 0) ^ {int(other.negate)})"
                terms.append(f"tl.sum(tl.where(A{u} != 0, {bit}.to(tl.int32), 0))")
            total = " + ".join(terms) or "0"
            v = self.tmp()
            expr = {"popc": total, "and": f"({total} == {len(group)}).to(tl.int32)",
                    "or": f"({total} > 0).to(tl.int32)"}[ins.op]
            self.emit(f"{v} = tl.full([BLOCK], 0, tl.int32) + {expr}")
        self.emit(f"{dst} = tl.where(W{t} != 0, {v}, {dst})")


def _registers(program: Program) -> list[tuple[int, str]]:
    regs: dict[tuple[int, str], None] = {}
    names = {th.name: i for i, th in enumerate(program.threads)}
    for (thread, reg) in program.registers:
        if thread in names:
            regs.setdefault((names[thread], reg), None)
    for t, thread in enumerate(program.threads):
        for ins in thread.instructions:
            for attr in ("dst", "value", "lhs", "rhs", "predicate"):
                v = getattr(ins, attr, None)
                if isinstance(v, str) and not isinstance(ins, Label):
                    regs.setdefault((t, v), None)
            for v in getattr(ins, "operands", ()):
                if isinstance(v, str):
                    regs.setdefault((t, v), None)
    return list(regs)


def _loop_thread(k: _Kernel, t: int, thread: Thread, act: str) -> None:
    """A thread with branches: a bounded pass loop over a per-lane program counter."""
    code = [i for i in thread.instructions if not isinstance(i, Label)]
    labels, index = {}, 0
    for ins in thread.instructions:
        if isinstance(ins, Label):
            labels[ins.name] = index
        else:
            index += 1
    backward = any(isinstance(ins, Branch) and labels[ins.target] <= n for n, ins in enumerate(code))
    emit = k.emit
    emit(f"passes{t} = 0")
    emit(f"while passes{t} < {'MAX_ITERS' if backward else 1}:")
    k.emit.depth += 1
    emit(f"passes{t} += 1")
    for n, ins in enumerate(code):
        e = f"E{t}_{n}"
        emit(f"{e} = {act} * (PC{t} == {n}).to(tl.int32)")
        if isinstance(ins, Branch):
            cond = "True" if ins.cond is None else f"({k.val(t, ins.lhs)} {BRANCH_OPS[ins.cond]} {k.val(t, ins.rhs)})"
            emit(f"PC{t} = tl.where({e} != 0, tl.where({cond}, {labels[ins.target]}, {n + 1}), PC{t})")
        else:
            k.instruction(t, ins, e)
            emit(f"PC{t} = tl.where({e} != 0, {n + 1}, PC{t})")
    k.emit.depth -= 1
    emit(f"D{t} = tl.where(PC{t} == {len(code)}, 1, 2)")


def generate(program: Program, form: str, *, cross_gpu: bool = False) -> KernelPlan:
    """The kernel source for ``program`` in ``form`` (``"ptx"`` or ``"interpret"``); see the module doc.

    ``cross_gpu``: the test's threads may lie on several GPUs. The one kernel holds every test
    CTA (a CTA is a ``(gpu, cta)`` pair); each GPU's process launches it with tables that place
    only that GPU's CTAs (:mod:`syncverify.litmus.gpu.ranks`), and the aligned start meets at
    sys scope."""
    if form not in FORMS:
        raise SyncVerifyError(f"kernel form {form!r} is not one of {', '.join(FORMS)}")
    _check_program(program, cross_gpu=cross_gpu)
    cta_ids = sorted({(t.gpu, t.cta) for t in program.threads})
    ctas = [[i for i, th in enumerate(program.threads) if (th.gpu, th.cta) == c] for c in cta_ids]
    biggest = max(len(m) for m in ctas)
    if biggest > 32:
        raise NotOnGpu(f"{program.name}: a CTA of {biggest} threads; --gpu places one thread per warp, 32 at most")
    num_warps = 1
    while num_warps < biggest:
        num_warps *= 2
    hw = _barrier_plan(program, ctas)
    single_lane = any(isinstance(i, Barrier) and i.kind == "red" for th in program.threads for i in th.instructions)
    names = {th.name: i for i, th in enumerate(program.threads)}
    outputs = tuple((names[name], reg) for kind, name, reg in observed_items(program) if kind == "reg" and name in names)
    k = _Kernel(program, form, outputs)
    emit = k.emit
    loops = tuple(any(isinstance(i, Branch) for i in th.instructions) for th in program.threads)

    emit("import triton.language as tl")
    emit("from syncverify.kernels._jit import jit")
    emit("from syncverify.litmus.gpu.kernel_lib import global_barrier, stress_line")
    emit("")
    emit("")
    emit("@jit(do_not_specialize=['NTEST', 'STRESS_ITERS', 'STRESS_PATTERN', 'PRE_STRESS_ITERS', 'ALIGNED', "
         "'BARRIER_SPINS', 'MAX_ITERS', 'NALIGN'])")
    emit("def litmus_kernel(")
    emit("    # pointers: test memory, its address table, placement tables, results, stress scratch")
    emit("    mem_ptr, addr_ptr, cta_ptr, role_ptr, inst_ptr, out_ptr, status_ptr,")
    emit("    scratch_ptr, line_ptr, sync_ptr, delay_ptr,")
    emit("    # stress parameters: runtime values, so a parameter search compiles each test once")
    emit("    NTEST, STRESS_ITERS, STRESS_PATTERN, PRE_STRESS_ITERS, ALIGNED, BARRIER_SPINS, MAX_ITERS,")
    emit("    # test programs the aligned start waits for: NTEST on one GPU, every GPU's across GPUs")
    emit("    NALIGN,")
    emit("    # meta-parameters")
    emit("    BLOCK: tl.constexpr, NLOC: tl.constexpr, NOUT: tl.constexpr, NTHREADS: tl.constexpr,")
    emit("    LINE_WORDS: tl.constexpr,")
    emit("):")
    emit.depth = 1
    emit(f'"""Litmus test {program.name} ({form} form), generated by syncverify.litmus.gpu.codegen."""')
    emit("pid = tl.program_id(0)")
    if k.ptx:  # the thread that executes each element's asm: roles and predicates follow it
        emit("tid = tl.inline_asm_elementwise('mov.u32 $0, %tid.x;', '=r,r', [tl.arange(0, BLOCK)], "
             "dtype=tl.int32, is_pure=True, pack=1)")
    else:
        emit("tid = tl.arange(0, BLOCK)")
    emit("line = scratch_ptr + tl.load(line_ptr + pid) * LINE_WORDS")
    emit("# ----- memory-stress programs: hammer a scratch line for the whole launch")
    emit("if pid >= NTEST:")
    emit("    stress_line(line, tid, STRESS_ITERS, STRESS_PATTERN, LINE_WORDS)")
    emit("else:")
    emit.depth = 2
    emit("# ----- placement: this program's test CTA, each lane's role and instance")
    emit("c = tl.load(cta_ptr + pid)")
    emit("role = tl.load(role_ptr + pid * BLOCK + tid)")
    emit("inst = tl.load(inst_ptr + pid * BLOCK + tid)")
    emit("W_USED = inst >= 0")
    emit("safe = tl.maximum(inst, 0)")
    emit("DUMMY = line + tid % LINE_WORDS")
    for loc, j in k.locs.items():
        emit(f"P_{j} = mem_ptr + tl.load(addr_ptr + safe * NLOC + {j})  # {loc}")
    emit("# ----- registers (initial values), program counters, done flags")
    for t, reg in _registers(program):
        init = program.registers.get((program.threads[t].name, reg), 0)
        emit(f"{k.reg(t, reg)} = tl.full([BLOCK], {init}, tl.int32)")
    for t, th in enumerate(program.threads):
        emit(f"W{t} = (role == {t}).to(tl.int32)")
        emit(f"A{t} = ((role == {t}) & W_USED).to(tl.int32)")
        emit(f"D{t} = tl.full([BLOCK], 1, tl.int32)")
        if loops[t]:
            emit(f"PC{t} = tl.zeros([BLOCK], tl.int32)")
    emit("# ----- pre-stress, then the aligned start")
    emit("stress_line(line, tid, PRE_STRESS_ITERS, STRESS_PATTERN, LINE_WORDS)")
    emit("if ALIGNED != 0:")
    # Across GPUs the start counter lies on one GPU and programs of every GPU poll it: sys scope.
    emit(f"    global_barrier(sync_ptr, NALIGN, BARRIER_SPINS, {'sys' if cross_gpu else 'gpu'!r})")
    emit("delay = tl.load(delay_ptr + pid * BLOCK + tid)  # one value per warp: no divergence")
    if k.ptx:
        k.asm("{ .reg .pred %p; setp.ne.s32 %p, $1, 0; @%p nanosleep.u32 $1; mov.u32 $0, 0; }", "=r,r", ["delay"])
    else:
        emit("pass  # start jitter: the interpreter runs programs one after another anyway")
    emit("# ----- the test: one block per test CTA")
    for c, members in enumerate(ctas):
        emit(f"if c == {c}:")
        emit.depth += 1
        emit("pass")
        split = {t: _segments(program.threads[t].instructions) for t in members if not loops[t]}
        for t in members:
            if loops[t]:
                emit(f"# {program.threads[t].name}: branches, a bounded pc loop")
                _loop_thread(k, t, program.threads[t], f"A{t}")
        rounds = max((len(p) for p, _ in split.values()), default=0)
        for r in range(rounds):
            for t, (pieces, _) in split.items():
                if r < len(pieces) and pieces[r]:
                    emit(f"# {program.threads[t].name}, piece {r}")
                    for ins in pieces[r]:
                        k.instruction(t, ins, f"A{t}")
            for t, (_, bars) in split.items():
                if r < len(bars):
                    ins = bars[r]
                    group = [(u, split[u][1][r]) for u in split if r < len(split[u][1])
                             and split[u][1][r].kind == "red" and split[u][1][r].barrier_id == ins.barrier_id]
                    emit(f"# {program.threads[t].name}: bar.{ins.kind} {ins.barrier_id}")
                    k.barrier(t, ins, hw[(c, ins.barrier_id)], f"W{t}", group)
        emit.depth -= 1
    emit("# ----- observe: registers and done flags to memory")
    for n, (t, reg) in enumerate(outputs):
        emit(f"tl.store(out_ptr + safe * NOUT + {n}, {k.reg(t, reg)}, mask=A{t} != 0)")
    for t in range(len(program.threads)):
        emit(f"tl.store(status_ptr + safe * NTHREADS + {t}, D{t}, mask=A{t} != 0)")
    source = "\n".join(k.emit.lines) + "\n"
    return KernelPlan(name=program.name, form=form, source=source, ctas=tuple(tuple(m) for m in ctas),
                      num_warps=num_warps, locations=tuple(k.locs), outputs=outputs, single_lane=single_lane,
                      loops=loops, cta_gpus=tuple(gpu for gpu, _ in cta_ids))
