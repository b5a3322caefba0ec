"""Probe kernels for the PTX audit: one protocol's signal or wait code, compiled for sm_90 on the CPU.

``signal_probe`` is a producer's tail (the tile store, then the protocol's ``signal`` plan) and
``wait_probe`` a consumer's head (the ``wait`` plan, then the tile read), built from the same
``syncverify.kernels.steps`` runners as the real kernels. :func:`protocol_ops` compiles one of them and
returns its synchronization operations (``syncverify.kernels.ptx_reader.SyncOp``); :func:`audit`
compares them with ``syncverify.protocols.lowering``, the model's account of the same steps: the lock
operations with ``lower_step``, the tile accesses with ``lower_tile_store``/``lower_tile_load``.
:func:`audit_kernel` does the same for the tile accesses of a fused kernel, and
:func:`dot_barrier_problems` checks a compiled kernel's GEMM against ``lowering.lower_dot`` (every
MMA follows a ``bar.sync 0`` of the whole CTA after its operand loads).

Lock and tile accesses are told apart by the kernel argument their address is computed from
(``SyncOp.buffer``): ``locks``/``push_locks`` are lock accesses, the buffers a scenario's roles
load and store (``syncverify.scenarios.build.ROLES``, the probes' ``tile``/``out``) tile accesses.
"""

from __future__ import annotations

import functools
import re
import inspect

from syncverify.kernels._deps import tl, triton
from syncverify.kernels._jit import jit
from syncverify.kernels.plan import build_plan
from syncverify.kernels.ptx_reader import parse_ptx, sync_ops
from syncverify.kernels.steps import run_signal, run_wait, wrap_plan
from syncverify.kernels.registry import kernel_function
from syncverify.protocols import lowering
from syncverify.protocols.rules import KERNEL_WARPS, SECTIONS, section_steps
from syncverify.scenarios.build import ROLES, Stage, TileAccess

AUDIT_WORLD = 2  # ranks the probes are specialized for: to=all writes two copies, to=others one
BLOCK = 1024  # tile elements: 8 per thread at 4 warps

PROBE_PARAMS = {
    "signal": ["tile", "locks", "locks_table", "vals", "rank", "owner"],
    "wait": ["tile", "out", "locks", "locks_table", "status", "vals", "rank", "max_polls"],
}
# the probes' tile accesses: the protocol's tile store (signal), its tile load and the consumer's
# store of what it read (wait); both sides' tile pointers are 16-byte aligned, as a torch
# allocation is at launch, so the accesses are vectorized as on the GPU
PROBE_TILES = {"signal": (("st", "tile"),), "wait": (("ld", "tile"), ("st", "out"))}
LOCK_BUFFERS = ("locks", "push_locks")


@jit
def signal_probe(tile, locks, locks_table, vals, rank, owner,
                 TILE_STORE_CACHE: tl.constexpr, SIGNAL: tl.constexpr, WORLD: tl.constexpr,
                 BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(tile + offs, offs, cache_modifier=TILE_STORE_CACHE)
    run_signal(locks, locks_table, 1, 1, 0, rank, owner, vals, SIGNAL, WORLD, False, False)


@jit
def wait_probe(tile, out, locks, locks_table, status, vals, rank, max_polls,
               TILE_LOAD_VOLATILE: tl.constexpr, WAIT: tl.constexpr, WORLD: tl.constexpr,
               BLOCK: tl.constexpr):
    ok, last, step, budget = run_wait(locks, locks_table, 1, 1, 0, rank, vals, max_polls, WAIT,
                                      WORLD, False, False)
    offs = tl.arange(0, BLOCK)
    if ok != 0:
        tl.store(out + offs, tl.load(tile + offs, volatile=TILE_LOAD_VOLATILE))
    else:
        tl.store(status, last)


def probe_warps(protocol) -> int:
    """Warps a probe of ``protocol`` compiles with: 4 (quick to compile; nothing the audit reads
    depends on it), or the kernels' 8 when a barrier step selects warps, which are warps of an
    8-warp CTA (``syncverify.protocols.rules.KERNEL_WARPS``)."""
    steps = [s for section in SECTIONS for s in section_steps(protocol, section)]
    return KERNEL_WARPS if any(s.op == "barrier" and s.selects_warps for s in steps) else 4


@functools.lru_cache(maxsize=64)
def probe_ptx(protocol, side: str, *, world_size: int = AUDIT_WORLD, num_warps: int | None = None) -> str:
    """PTX for sm_90 of ``protocol``'s ``side`` (``"signal"`` or ``"wait"``) probe, with
    ``num_warps`` warps (default :func:`probe_warps`)."""
    # triton: only the GPU path needs it (the model runs without torch and triton)
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    num_warps = num_warps or probe_warps(protocol)

    plan = build_plan(protocol, world_size=world_size)
    vals = "*i32"
    if side == "signal":
        signature = {"tile": "*i32", "locks": "*i32", "locks_table": "*i64", "vals": vals,
                     "rank": "i32", "owner": "i32", "TILE_STORE_CACHE": "constexpr",
                     "SIGNAL": "constexpr", "WORLD": "constexpr", "BLOCK": "constexpr"}
        constexprs = {(6,): plan.tile_store_cache, (7,): wrap_plan(plan.signal), (8,): world_size,
                      (9,): BLOCK}
        fn = signal_probe
    else:
        signature = {"tile": "*i32", "out": "*i32", "locks": "*i32", "locks_table": "*i64",
                     "status": "*i32", "vals": vals, "rank": "i32", "max_polls": "i32",
                     "TILE_LOAD_VOLATILE": "constexpr", "WAIT": "constexpr", "WORLD": "constexpr",
                     "BLOCK": "constexpr"}
        constexprs = {(8,): plan.tile_load_volatile, (9,): wrap_plan(plan.wait), (10,): world_size,
                      (11,): BLOCK}
        fn = wait_probe
    aligned = {(PROBE_PARAMS[side].index(name),): [["tt.divisibility", 16]]
               for _, name in PROBE_TILES[side]}
    source = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=aligned)
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": num_warps})
    return compiled.asm["ptx"]


def protocol_ops(protocol, side: str, *, world_size: int = AUDIT_WORLD) -> list:
    """The synchronization operations of a probe: lock accesses, tile accesses, fences, barriers."""
    return sync_ops(parse_ptx(probe_ptx(protocol, side, world_size=world_size)),
                    params=PROBE_PARAMS[side])


# ----- comparing with the model's lowering -----------------------------------------------------

def _copies(step, side: str, world_size: int) -> int:
    """Static copies of a step's code: ``to = all|others`` and ``from = each`` unroll per rank."""
    if step.to in ("all", "others") and step.op in ("store", "atomic_xchg", "atomic_add", "atomic_cas"):
        return world_size
    if step.from_ == "each" and step.op in ("await", "atomic_cas"):
        return world_size
    return 1


def _same(expected, actual) -> bool:
    """Whether a compiled operation is the lowered operation the model assumes."""
    if expected.kind != actual.kind or expected.threads != actual.threads:
        return False
    if expected.kind == "bar":
        return getattr(expected, "bar_operands", expected.op) == actual.op  # the barrier id and count
    if expected.kind == "fence":
        return (expected.sem, expected.scope) == (actual.sem, actual.scope)
    if expected.kind == "atom":
        return (expected.op, expected.sem, expected.scope) == (actual.op, actual.sem, actual.scope)
    scope = expected.scope if expected.sem not in ("weak",) else None
    return (expected.sem, scope) == (actual.sem, actual.scope)


def audit(protocol, side: str, *, world_size: int = AUDIT_WORLD, lower=None) -> list[str]:
    """Disagreements between ``protocol``'s compiled ``side`` and the model's lowering of it.

    Walks the protocol's steps in order; each step's lowered operations (``lower(step)``,
    default ``syncverify.protocols.lowering.lower_step``) must appear in order in the compiled lock
    accesses, fences and barriers, once per static copy. A poll's operations may repeat (the
    loop's first iteration is peeled), and a ``bar.sync`` that Triton puts before a one-thread
    poll whose result it broadcasts through shared memory (the loop's write-after-read guard)
    is accepted there. Anything left over, or missing, is a disagreement.

    Then the tile accesses (:func:`tile_problems`): each is the model's ``lower_tile_store`` or
    ``lower_tile_load``, and the tile store comes before the first signal operation, the tile
    load after the last wait operation. Returns ``[]`` when the PTX is what the model assumes.
    """
    ops = protocol_ops(protocol, side, world_size=world_size)
    return _lock_problems(protocol, side, ops, world_size, lower) + tile_problems(protocol, side, ops)


def _lock_problems(protocol, side: str, ops, world_size: int, lower) -> list[str]:
    if lower is None:
        lower = lowering.lower_step
    actual = [op for op in ops if op.buffer in (None, "locks")]
    problems: list[str] = []
    pos = 0

    def take(group) -> bool:
        nonlocal pos
        if pos + len(group) <= len(actual) and all(_same(e, a) for e, a in zip(group, actual[pos:])):
            pos += len(group)
            return True
        return False

    def repeat(lowered) -> bool:
        """One more iteration of a poll, possibly behind its write-after-read ``bar.sync``."""
        return take(lowered) or bool(actual[pos:pos + 1] and actual[pos].kind == "bar"
                                     and _war_guard(actual, pos, lowered) and take((actual[pos],) + lowered))

    after_poll = False  # the previous step polled: its broadcast slot is reused by this step's poll
    for number, step in enumerate(getattr(protocol, side), start=1):
        lowered = tuple(lower(step))
        copies = _copies(step, side, world_size)
        polls = any(e.poll for e in lowered)
        for copy in range(copies):
            # a later copy's peeled first poll may sit behind the guard bar.sync too, and so may the
            # first poll of a step right after another poll step (the same shared-memory slot)
            if not (take(lowered) or (polls and (copy > 0 or after_poll) and repeat(lowered))):
                got = ", ".join(str(a) for a in actual[pos:pos + len(lowered)]) or "nothing"
                want = ", ".join(f"{e.kind} {e.op} {e.sem} {e.scope} on {e.threads}" for e in lowered)
                problems.append(f"{side} step {number} ({step.op}): the model assumes [{want}], "
                                f"the PTX has [{got}]")
                return problems
            if polls and copy < copies - 1:
                repeat(lowered)  # the loop body of this copy, once: the next copy's poll follows
            elif polls:
                while repeat(lowered):
                    pass
        after_poll = polls
    if pos < len(actual):
        extra = ", ".join(str(a) for a in actual[pos:])
        problems.append(f"{side}: the PTX has operations the model does not: {extra}")
    return problems


def _war_guard(actual, pos: int, lowered) -> bool:
    """A ``bar.sync`` right before a repeat of a broadcast poll (a one-thread read, then ``bar``)."""
    return (len(lowered) >= 2 and lowered[0].threads == "one" and lowered[-1].kind == "bar"
            and pos + 1 < len(actual) and actual[pos + 1].threads == "one")


# ----- tile accesses ---------------------------------------------------------------------------

_NOUN = {"st": "store", "ld": "load"}


def _lowered_tile(kind: str, protocol):
    """The model's tile store or load for ``protocol`` (looked up at call time: tests patch it)."""
    return lowering.lower_tile_store(protocol) if kind == "st" else lowering.lower_tile_load(protocol)


def _want(e) -> str:
    return f"{e.kind} {e.sem} {e.scope} on {e.threads}"


def _access_problems(where: str, kind: str, buffer: str, lowered, found, *,
                     caches: tuple[str, ...] | None = None) -> list[str]:
    """How the compiled accesses ``found`` (all of ``kind`` on ``buffer``) differ from ``lowered``;
    ``caches``, for stores, the cache modifiers they may carry (``""``: none)."""
    noun = f"tile {_NOUN[kind]} of {buffer!r}"
    if not found:
        return [f"{where}: the model assumes a {noun} ([{_want(lowered)}]), the PTX has none"]
    problems = []
    wrong = sorted({str(op) for op in found if not _same(lowered, op)})
    if wrong:
        problems.append(f"{where}: the model assumes the {noun} is [{_want(lowered)}], "
                        f"the PTX has [{', '.join(wrong)}]")
    if caches is not None:
        bad = sorted({op.cache or "no cache modifier" for op in found if op.cache not in caches})
        if bad:
            allowed = " or ".join(c or "no cache modifier" for c in caches)
            problems.append(f"{where}: the {noun} carries {', '.join(bad)}; the protocol's "
                            f"tile_store.cache says {allowed}")
    return problems


def tile_problems(protocol, side: str, ops) -> list[str]:
    """Disagreements between a probe's tile accesses (``ops``, from :func:`protocol_ops`) and the
    model's ``lower_tile_store``/``lower_tile_load`` of ``protocol``.

    Each access of a probe's tile buffer must be the lowered one (kind, sem, scope, threads); the
    protocol's tile store carries its ``tile_store.cache``; nothing else touches the tile buffers;
    and in program text order the tile store precedes the first signal operation (lock access,
    fence or barrier) and the tile load follows the last wait operation.
    """
    problems: list[str] = []
    declared = PROBE_TILES[side]
    for kind, buffer in declared:
        found = [op for op in ops if op.buffer == buffer and op.kind == kind]
        caches = (protocol.tile_store.cache,) if (side, kind) == ("signal", "st") else None
        problems += _access_problems(side, kind, buffer, _lowered_tile(kind, protocol), found,
                                     caches=caches)
    buffers = {buffer for _, buffer in declared}
    extra = sorted({str(op) for op in ops if op.buffer in buffers and (op.kind, op.buffer) not in declared})
    if extra:
        problems.append(f"{side}: the PTX has tile accesses the model does not: {', '.join(extra)}")
    lock = [i for i, op in enumerate(ops) if op.buffer in (None, "locks")]
    kind, buffer = declared[0]  # the protocol's own tile access: signal's store, wait's load
    tile = [i for i, op in enumerate(ops) if op.buffer == buffer and op.kind == kind]
    if lock and tile:
        if side == "signal" and max(tile) > min(lock):
            problems.append(f"signal: a tile store of {buffer!r} (PTX line {ops[max(tile)].line}) comes after "
                            f"the first signal operation ({ops[min(lock)]}, line {ops[min(lock)].line})")
        if side == "wait" and min(tile) < max(lock):
            problems.append(f"wait: a tile load of {buffer!r} (PTX line {ops[min(tile)].line}) comes before "
                            f"the last wait operation ({ops[max(lock)]}, line {ops[max(lock)].line})")
    return problems


# ----- the fused kernels -----------------------------------------------------------------------

def _kernel_module(kernel: str):
    # torch/triton: syncverify.kernels.gemm_all_reduce imports them; only the GPU path needs it
    from syncverify.kernels import gemm_all_reduce, gemm_all_scatter

    if kernel == "all-reduce":
        return gemm_all_reduce, gemm_all_reduce.gemm_all_reduce_kernel
    if kernel == "all-scatter":
        return gemm_all_scatter, gemm_all_scatter.gemm_all_scatter_kernel

    return kernel_function(kernel)


def kernel_ptx(built) -> str:
    """PTX for sm_90 of the fused kernel ``built`` is configured for (``compile_ptx``)."""
    # torch/triton: syncverify.kernels.compile imports them; only the GPU path needs it
    from syncverify.kernels.compile import compile_ptx

    module, fn = _kernel_module(built.config.kernel)
    return compile_ptx(fn, built, module.meta_parameters(built))


def kernel_ops(built, *, ptx: str | None = None) -> list:
    """The synchronization operations of the fused kernel ``built`` is configured for, each
    access named by the kernel parameter its address comes from."""
    _, fn = _kernel_module(built.config.kernel)
    ptx = kernel_ptx(built) if ptx is None else ptx
    return sync_ops(parse_ptx(ptx), params=list(inspect.signature(fn.fn).parameters))


def tile_accesses(kernel: str) -> dict[tuple[str, str], bool]:
    """The tile accesses of a scenario's roles (``syncverify.scenarios.build.ROLES``):
    ``{(kind, buffer): published}``, ``published`` for a store a later signal of its role
    publishes (where the protocol's cache policy is the one the protocol was checked with)."""
    accesses: dict[tuple[str, str], bool] = {}
    for role in ROLES[kernel]:
        for n, step in enumerate(role.steps):
            if not isinstance(step, TileAccess):
                continue  # a stage's lock steps (audit) or a GEMM's barrier (dot_barrier_problems)
            if step.kind in ("load", "copy"):
                accesses.setdefault(("ld", step.buffer), False)
            if step.kind in ("store", "copy"):
                later = any(isinstance(s, Stage) and s.kind == "signal" for s in role.steps[n + 1:])
                key = ("st", step.into or step.buffer)
                accesses[key] = accesses.get(key, False) or later
    return accesses


def audit_kernel(built, *, ptx: str | None = None) -> list[str]:
    """Disagreements between a fused kernel's tile accesses and the model's lowering of them.

    Every store and load of a buffer the scenario's roles access (:func:`tile_accesses`) must be
    ``lower_tile_store``/``lower_tile_load`` of ``built.protocol`` (weak on every thread; a load
    ``volatile`` only when the protocol's ``tile_load.volatile`` says so); a published store
    carries the protocol's ``tile_store.cache``, any other tile store that or none; and every
    other global access outside the lock buffers (inputs, address tables, status, run-time values)
    is weak: the kernel adds no synchronization the model does not see. Lock operations are
    :func:`audit`'s business and are not looked at here.
    """
    protocol = built.protocol
    kernel = built.config.kernel
    ops = kernel_ops(built, ptx=ptx)
    accesses = tile_accesses(kernel)
    problems: list[str] = []
    for (kind, buffer), published in accesses.items():
        found = [op for op in ops if op.buffer == buffer and op.kind == kind]
        cache = protocol.tile_store.cache
        caches = None if kind == "ld" else (cache,) if published else tuple(dict.fromkeys(("", cache)))
        problems += _access_problems(kernel, kind, buffer, _lowered_tile(kind, protocol), found, caches=caches)
    others = sorted({str(op) for op in ops
                     if op.kind in ("st", "ld", "atom") and op.buffer not in LOCK_BUFFERS
                     and (op.kind, op.buffer) not in accesses and (op.kind == "atom" or op.sem != "weak")})
    if others:
        problems.append(f"{kernel}: synchronization outside the lock buffers that the model does not "
                        f"have: {', '.join(others)}")
    return problems


# ----- tl.dot's CTA barrier ----------------------------------------------------------------------

_MMA = re.compile(r"\b(?:wgmma\.mma_async|mma\.sync)\.")
_CTA_BAR = re.compile(r"^\s*(?:bar\.sync|barrier\.sync(?:\.aligned)?)\s+0\s*;")  # unpredicated, whole CTA
_GLOBAL_READ = re.compile(r"\b(?:ld\.global|cp\.async\.c[ag])\b")
_LOOP_HEAD = re.compile(r"^\$L__BB\w+:.*Loop Header|^\s*//.*=>\s*This (?:Inner )?Loop Header")


def dot_barrier_problems(ptx: str) -> list[str]:
    """Where compiled code contradicts :func:`syncverify.protocols.lowering.lower_dot` (``tl.dot``
    is a ``bar.sync 0`` of the whole CTA after its operands are loaded, before the MMA reads them).

    Scanning back from each MMA instruction (``mma.sync``, ``wgmma.mma_async``) in program text,
    an unpredicated ``bar.sync 0`` must come before any global read (``ld.global``, ``cp.async``:
    an operand load the barrier must follow) and before the header of the loop the MMA is in
    (each K iteration has its own barrier). An MMA with no such barrier is a problem, named by its
    PTX line. ``[]`` when the PTX is what the model assumes (also when it has no MMA at all).

    >>> ptx = '''$L__BB0_5:                // =>This Inner Loop Header: Depth=1
    ... ld.global.b32 {%r1}, [%rd1];
    ... bar.sync 0;
    ... st.shared.b32 [%r2], %r1;
    ... bar.sync 0;
    ... mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%r3}, {%r4}, {%r5}, {%r3};
    ... '''
    >>> dot_barrier_problems(ptx)
    []
    >>> dot_barrier_problems(ptx.replace("bar.sync 0;", "add.s32 %r9, %r9, 1;"))
    ['PTX line 6: an MMA (mma.sync) with no bar.sync 0 of the whole CTA after its operand loads (line 2: ld.global)']
    """
    assert lowering.lower_dot() == (lowering.LoweredOp("bar", lowering.ALL),), "the audit reads bar.sync 0"
    lines = ptx.splitlines()
    problems = []
    for number, raw in enumerate(lines, start=1):
        code = raw.split("//")[0]
        mma = _MMA.search(code)
        if mma is None:
            continue
        for back in range(number - 1, 0, -1):
            text = lines[back - 1]
            if _CTA_BAR.search(text.split("//")[0]):
                break
            stop = _GLOBAL_READ.search(text.split("//")[0]) or _LOOP_HEAD.search(text)
            if stop is not None:
                what = stop.group(0) if stop.re is _GLOBAL_READ else "the loop's header"
                problems.append(f"PTX line {number}: an MMA ({mma.group(0).rstrip('.')}) with no bar.sync 0 of the "
                                f"whole CTA after its operand loads (line {back}: {what})")
                break
        else:
            problems.append(f"PTX line {number}: an MMA with no bar.sync 0 of the whole CTA before it")
    return problems
