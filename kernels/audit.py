"""Probe kernels for the PTX audit: one protocol's signal or wait code, compiled for sm_90 on the CPU.

``signal_probe`` is a producer's tail (the tile store, then the protocol's ``signal`` plan) and
``wait_probe`` a consumer's head (the ``wait`` plan, then the tile read), built from the same
``syncverify.kernels.steps`` runners as the real kernels. :func:`protocol_ops` compiles one of them and
returns its synchronization operations (``syncverify.kernels.ptx_reader.SyncOp``); ``tests/test_ptx_audit.py``
compares them with ``syncverify.lowering``, the model's account of the same steps.
"""

from __future__ import annotations

import functools

from syncverify.kernels._deps import tl, triton
from syncverify.kernels._jit import jit
from syncverify.kernels.plan import build_plan
from syncverify.kernels.ptx_reader import parse_ptx, sync_ops
from syncverify.kernels.steps import run_signal, run_wait, wrap_plan

AUDIT_WORLD = 2  # ranks the probes are specialized for: to=all writes two copies, to=others one
BLOCK = 1024  # tile elements: 8 per thread at 4 warps


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


@functools.lru_cache(maxsize=64)
def probe_ptx(protocol, side: str, *, world_size: int = AUDIT_WORLD, num_warps: int = 4) -> str:
    """PTX for sm_90 of ``protocol``'s ``side`` (``"signal"`` or ``"wait"``) probe."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

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
    source = ASTSource(fn=fn, signature=signature, constexprs=constexprs)
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": num_warps})
    return compiled.asm["ptx"]


def protocol_ops(protocol, side: str, *, world_size: int = AUDIT_WORLD) -> list:
    """The synchronization operations of a probe: lock accesses, tile accesses, fences, barriers."""
    params = (["tile", "locks", "locks_table", "vals", "rank", "owner"] if side == "signal"
              else ["tile", "out", "locks", "locks_table", "status", "vals", "rank", "max_polls"])
    return sync_ops(parse_ptx(probe_ptx(protocol, side, world_size=world_size)), params=params)


# ----- comparing with the model's lowering -----------------------------------------------------

def _copies(step, side: str, world_size: int) -> int:
    """Static copies of a step's code: ``to = all|others`` and ``from = each`` unroll per rank."""
    if side == "signal" and step.op in ("store", "atomic_xchg", "atomic_add") and step.to in ("all", "others"):
        return world_size
    if side == "wait" and step.op in ("await", "atomic_cas") and step.from_ == "each":
        return world_size
    return 1


def _same(expected, actual) -> bool:
    """Whether a compiled operation is the lowered operation the model assumes."""
    if expected.kind != actual.kind or expected.threads != actual.threads:
        return False
    if expected.kind == "bar":
        return True
    if expected.kind == "fence":
        return (expected.sem, expected.scope) == (actual.sem, actual.scope)
    if expected.kind == "atom":
        return (expected.op, expected.sem, expected.scope) == (actual.op, actual.sem, actual.scope)
    scope = expected.scope if expected.sem not in ("weak",) else None
    return (expected.sem, scope) == (actual.sem, actual.scope)


def audit(protocol, side: str, *, world_size: int = AUDIT_WORLD, lower=None) -> list[str]:
    """Disagreements between ``protocol``'s compiled ``side`` and the model's lowering of it.

    Walks the protocol's steps in order; each step's lowered operations (``lower(step)``,
    default ``syncverify.lowering.lower_step``) must appear in order in the compiled lock
    accesses, fences and barriers, once per static copy. A poll's operations may repeat (the
    loop's first iteration is peeled), and a ``bar.sync`` that Triton puts before a one-thread
    poll whose result it broadcasts through shared memory (the loop's write-after-read guard)
    is accepted there. Anything left over, or missing, is a disagreement. Returns ``[]`` when
    the PTX is what the model assumes.
    """
    if lower is None:
        from syncverify.lowering import lower_step as lower
    actual = [op for op in protocol_ops(protocol, side, world_size=world_size)
              if op.buffer in (None, "locks")]
    problems: list[str] = []
    pos = 0

    def take(group) -> bool:
        nonlocal pos
        if pos + len(group) <= len(actual) and all(_same(e, a) for e, a in zip(group, actual[pos:])):
            pos += len(group)
            return True
        return False

    for number, step in enumerate(getattr(protocol, side), start=1):
        lowered = tuple(lower(step))
        for _ in range(_copies(step, side, world_size)):
            if not take(lowered):
                got = ", ".join(str(a) for a in actual[pos:pos + len(lowered)]) or "nothing"
                want = ", ".join(f"{e.kind} {e.op} {e.sem} {e.scope} on {e.threads}" for e in lowered)
                problems.append(f"{side} step {number} ({step.op}): the model assumes [{want}], "
                                f"the PTX has [{got}]")
                return problems
            if any(e.poll for e in lowered):
                while take(lowered) or (actual[pos:pos + 1] and actual[pos].kind == "bar"
                                        and _war_guard(actual, pos, lowered) and take((actual[pos],) + lowered)):
                    pass
    if pos < len(actual):
        extra = ", ".join(str(a) for a in actual[pos:])
        problems.append(f"{side}: the PTX has operations the model does not: {extra}")
    return problems


def _war_guard(actual, pos: int, lowered) -> bool:
    """A ``bar.sync`` right before a repeat of a broadcast poll (a one-thread read, then ``bar``)."""
    return (len(lowered) >= 2 and lowered[0].threads == "one" and lowered[-1].kind == "bar"
            and pos + 1 < len(actual) and actual[pos + 1].threads == "one")
