"""What each protocol step executes, and on which threads of the CTA: the one table both the model
and the PTX audit read.

Seen in triton 3.6's PTX for sm_90 (``../shared/PLATFORM.md``; ``tests/test_ptx_audit.py`` checks
it against the compiler):

* a tile ``tl.store``/``tl.load`` is executed by *every* thread (each owns a slice of the tile);
* a scalar atomic (``tl.atomic_add/xchg/cas`` on one address) is executed by *one* thread
  (predicated); Triton adds a ``bar.sync`` after it only when its result is used (a poll);
* a scalar ``tl.store`` of a flag is executed by one thread;
* inline-PTX fences and ``tl.load(volatile=True)`` polls run on every thread;
* ``tl.debug_barrier()`` is ``bar.sync 0`` on every thread; a ``barrier`` step with an ``id`` or a
  ``count`` is inline PTX ``bar.sync id{, count}`` on every thread; a ``barrier`` step that selects
  warps (``warps``, ``arrive``) is inline PTX that each warp predicates on its number
  (``%tid.x / 32``): ``bar.arrive id, count`` on the warps of ``arrive``, ``bar.sync id, count`` on
  the other warps of ``warps``, nothing on the rest (:func:`barrier_ptx`). A warp-uniform predicate
  keeps the aligned ``bar`` legal (PTX ISA: an aligned barrier in conditional code needs every
  thread of the warp to take the same branch).

Which *model* threads execute an operation (:func:`executes`): thread 0 for one-thread operations;
for a warp-selected barrier, the model threads whose warps (``syncverify.protocols.rules.model_warps``) it
selects.

Fences: Triton has no ``tl.atomic_fence`` (PLATFORM.md); our kernels emit inline PTX
``fence.acq_rel.SCOPE`` for ``sem`` release, acquire or acq_rel (PTX has no release-only or
acquire-only ``fence`` at these scopes) and ``fence.sc.SCOPE`` for ``sc``.

A poll loop whose value comes from one thread is broadcast through shared memory and a
``bar.sync`` each iteration. The model keeps only the final iteration's ``bar.sync`` (the one after
the value that exits): the barriers of failed iterations order nothing the last one does not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from syncverify.validation import one_of
from syncverify.errors import ScenarioError, UnsupportedConstruct
from syncverify.protocols.model import warp_text
from syncverify.protocols.rules import ALL_WARPS, WARP_SIZE, model_warps

ALL = "all"  # every thread of the CTA
ONE = "one"  # thread 0 only


@dataclass(frozen=True)
class LoweredOp:
    """One PTX-level operation a step lowers to, and who executes it.

    ``kind`` is ``st``, ``ld``, ``atom``, ``fence``, ``bar``, ``stream`` (a stream memory operation,
    syncverify.streams, ``op`` ``write_value`` or ``wait_value``) or ``nvshmem`` (an NVSHMEM call:
    ``op`` is ``signal_set``, ``signal_add``, ``fence`` or ``quiet``; syncverify.delivery); ``sem``/``scope`` as in PTX
    (``weak`` stores/loads have no scope; a volatile load is ``volatile``).
    """

    kind: str
    threads: str  # ALL or ONE
    sem: str = "weak"
    scope: str | None = None
    op: str = ""  # atom op: add, exch, cas; bar: "arrive" for bar.arrive ("" is bar.sync)
    poll: bool = False  # part of a poll loop (repeated until the step's condition holds)
    barrier_id: int = 0  # bar: the named barrier (Triton's own bar.sync is barrier 0)
    count: int | None = None  # bar: threads taking part (None: the whole CTA)
    warps: tuple[int, ...] | None = None  # bar: the warps of the CTA that execute it (None: every warp)

    @property
    def bar_operands(self) -> str:
        """A barrier as the PTX audit reads it: ``"1"``, ``"1,256"``, and for one that selects
        warps the instruction and the warps, ``"arrive 1,256 warps 1-7"``, ``"1,256 warps 0"``."""
        operands = str(self.barrier_id) if self.count is None else f"{self.barrier_id},{self.count}"
        head = "arrive " if self.op == "arrive" else ""
        return head + operands + ("" if self.warps is None else f" warps {warp_text(self.warps)}")


def lower_barrier(step) -> tuple[LoweredOp, ...]:
    """A ``barrier`` step: ``bar.sync id{, count}`` on every warp, or for a step that selects
    warps, ``bar.arrive id, count`` on its ``arrive`` warps, then ``bar.sync id, count`` on its
    other warps (``count``: the threads of all of them)."""
    barrier_id = step.barrier_id or 0
    if not step.selects_warps:
        return (LoweredOp("bar", ALL, barrier_id=barrier_id, count=step.count),)
    taking_part = step.warps if step.warps is not None else ALL_WARPS
    arrive = step.arrive or ()
    count = WARP_SIZE * len(taking_part)
    sync = tuple(w for w in taking_part if w not in arrive)
    arrivals = (LoweredOp("bar", ALL, op="arrive", barrier_id=barrier_id, count=count, warps=arrive),) if arrive else ()
    return arrivals + (LoweredOp("bar", ALL, barrier_id=barrier_id, count=count, warps=sync),)


def barrier_ptx(ops: tuple[LoweredOp, ...]) -> str:
    """The inline PTX of a ``barrier`` step's lowered operations (:func:`lower_barrier`), ``""``
    for barrier 0 of the whole CTA (which the kernels emit as ``tl.debug_barrier()``, itself
    ``bar.sync 0``). Warp selections become a predicate on the warp's bit in a mask.

    >>> from syncverify.protocols.model import Step
    >>> barrier_ptx(lower_barrier(Step("barrier"))), barrier_ptx(lower_barrier(Step("barrier", barrier_id=1, count=256)))
    ('', 'bar.sync 1, 256;')
    >>> print(barrier_ptx(lower_barrier(Step("barrier", barrier_id=1, arrive=(1, 2, 3, 4, 5, 6, 7)))))
    { .reg .pred p; .reg .u32 w, m; mov.u32 w, %tid.x; shr.u32 w, w, 5; mov.u32 m, 1; shl.b32 m, m, w; \
and.b32 w, m, 254; setp.ne.u32 p, w, 0; @p bar.arrive 1, 256; and.b32 w, m, 1; setp.ne.u32 p, w, 0; @p bar.sync 1, 256; }
    """
    if len(ops) == 1 and ops[0].warps is None:
        low = ops[0]
        if low.barrier_id == 0 and low.count is None:
            return ""
        return f"bar.sync {low.barrier_id}" + ("" if low.count is None else f", {low.count}") + ";"
    text = ["{ .reg .pred p; .reg .u32 w, m; mov.u32 w, %tid.x; shr.u32 w, w, 5; mov.u32 m, 1; shl.b32 m, m, w;"]
    for low in ops:
        mask = sum(1 << w for w in (low.warps if low.warps is not None else ALL_WARPS))
        kind = "arrive" if low.op == "arrive" else "sync"
        text.append(f"and.b32 w, m, {mask}; setp.ne.u32 p, w, 0; @p bar.{kind} {low.barrier_id}, {low.count};")
    return " ".join(text + ["}"])


_PREDICATED_BAR = re.compile(r"and\.b32 w, m, (\d+); setp\.ne\.u32 p, w, 0; @p bar\.(arrive|sync) (\d+), (\d+);")
_PLAIN_BAR = re.compile(r"bar\.sync (\d+)(?:, (\d+))?;")


def barrier_split(sync: tuple[int, ...] | None, arrive: tuple[int, ...] = ()) -> str:
    """What each warp does at a barrier, as the drift test compares it: ``""`` when every warp
    of the CTA syncs, else ``"sync 0 arrive 1-7"``, ``"sync 0-3"``.

    >>> barrier_split(None), barrier_split((0,), (1, 2, 3, 4, 5, 6, 7)), barrier_split((0, 1, 2, 3))
    ('', 'sync 0 arrive 1-7', 'sync 0-3')
    """
    if not arrive and (sync is None or set(sync) == set(ALL_WARPS)):
        return ""
    return " ".join(f"{kind} {warp_text(warps)}" for kind, warps in (("sync", sync), ("arrive", arrive)) if warps)


def read_barrier_ptx(ptx: str) -> tuple[str, str]:
    """``(operands, barrier_split)`` of a :func:`barrier_ptx` text, the operands as PTX writes
    them (``"0"``, ``"1,256"``): what the interpreter's trace of a kernel records for a barrier.

    >>> from syncverify.protocols.model import Step
    >>> read_barrier_ptx(barrier_ptx(lower_barrier(Step("barrier", barrier_id=2, arrive=(1, 2, 3, 4, 5, 6, 7)))))
    ('2,256', 'sync 0 arrive 1-7')
    >>> read_barrier_ptx(""), read_barrier_ptx("bar.sync 3, 256;")
    (('0', ''), ('3,256', ''))
    """
    found: dict[str, tuple[int, ...]] = {"sync": (), "arrive": ()}
    operands = ""
    for mask, kind, number, count in _PREDICATED_BAR.findall(ptx):
        found[kind] = tuple(w for w in ALL_WARPS if int(mask) >> w & 1)
        operands = f"{number},{count}"
    if operands:
        return operands, barrier_split(found["sync"], found["arrive"])
    plain = _PLAIN_BAR.search(ptx)
    if plain is None:
        return "0", ""
    return plain[1] + ("" if plain[2] is None else f",{plain[2]}"), ""


def executes(op: LoweredOp, thread: int, threads_per_cta: int) -> bool:
    """Whether model thread ``thread`` (of ``threads_per_cta``) executes ``op``: thread 0 alone
    a one-thread operation; every thread the others, but a barrier that selects warps only
    the threads whose warps it selects. A model thread whose warps split is refused (the
    scenario chooses its threads per CTA so that none does)."""
    if op.threads == ONE:
        return thread == 0
    if op.warps is None:
        return True
    mine = set(model_warps(thread, threads_per_cta))
    if mine <= set(op.warps):
        return True
    if mine & set(op.warps):
        raise ScenarioError(f"model thread {thread} of {threads_per_cta} stands for warps {warp_text(mine)}, of "
                            f"which only {warp_text(mine & set(op.warps))} execute a barrier; use more "
                            f"threads per CTA")
    return False


def fence_kind(sem: str) -> str:
    """The PTX fence a protocol ``fence`` step lowers to."""
    one_of("fence sem", sem, ("release", "acquire", "acq_rel", "sc"), error=UnsupportedConstruct)
    return "sc" if sem == "sc" else "acq_rel"


def lower_step(step) -> tuple[LoweredOp, ...]:
    """The operations one protocol step (``syncverify.protocols.model.Step``) lowers to, in order."""
    op = step.op
    if op == "barrier":
        # Barrier 0 with no count is tl.debug_barrier(); any other is inline PTX (lower_barrier).
        return lower_barrier(step)
    if op == "fence":
        return (LoweredOp("fence", ALL, fence_kind(step.sem), step.scope),)
    if op == "store":
        sem = step.sem or "weak"
        return (LoweredOp("st", ONE, sem, step.scope if sem != "weak" else None),)
    if op in ("atomic_xchg", "atomic_add"):
        return (LoweredOp("atom", ONE, step.sem, step.scope, "exch" if op == "atomic_xchg" else "add"),)
    if op == "atomic_cas":
        if step.until is not None:  # repeated until the value it read holds: used, so bar.sync after it
            return (LoweredOp("atom", ONE, step.sem, step.scope, "cas", poll=True), LoweredOp("bar", ALL))
        return (LoweredOp("atom", ONE, step.sem, step.scope, "cas"),)  # one-off, result unused: no bar.sync
    if op.startswith("nvshmem_"):  # one call by thread 0, as a _block call after a CTA barrier
        return (LoweredOp("nvshmem", ONE, step.sem or "weak", step.scope, op.removeprefix("nvshmem_")),)
    if op.startswith("stream_"):  # host-side work on the role's stream (syncverify.streams): once per launch
        return (LoweredOp("stream", ONE, step.sem, step.scope, op.removeprefix("stream_"),
                          poll=op == "stream_wait_value"),)
    if op == "await":
        if step.read == "load" and step.sem in ("relaxed", "acquire"):
            # ld.acquire.SCOPE / ld.relaxed.SCOPE: the kernels emit it as tl.atomic_add(p, 0, sem, scope)
            # with a literal 0, which Triton 3.6 lowers to that load on one thread, then bar.sync
            return (LoweredOp("ld", ONE, step.sem, step.scope, poll=True), LoweredOp("bar", ALL))
        if step.read == "load":
            return (LoweredOp("ld", ALL, "weak", None, poll=True),)
        if step.read == "volatile_load":
            return (LoweredOp("ld", ALL, "volatile", "sys", poll=True),)
        if (step.read == "atomic_add" and step.value is not None and step.value.literal == 0
                and step.sem in ("relaxed", "acquire")):
            # Triton 3.6 lowers atomic_add(ptr, 0, sem=acquire|relaxed) to ld.acquire|ld.relaxed on
            # one thread, then bar.sync; with sem=acq_rel (Triton's default) it keeps the
            # atom.add.acq_rel (PLATFORM.md; checked by tests/test_ptx_audit.py).
            return (LoweredOp("ld", ONE, step.sem, step.scope, poll=True), LoweredOp("bar", ALL))
        if step.read in ("atomic_cas", "atomic_add"):
            op_name = "cas" if step.read == "atomic_cas" else "add"
            return (LoweredOp("atom", ONE, step.sem, step.scope, op_name, poll=True), LoweredOp("bar", ALL))
        raise UnsupportedConstruct(f"await read={step.read!r} cannot be lowered")
    raise UnsupportedConstruct(f"protocol step op={op!r} has no lowering (the model cannot interpret it)")


#: How a ``tl.dot``'s barrier is labelled in the model's programs (both sides: the scenario's GEMM
#: step, the front end's hook on the interpreter's ``create_dot``); the drift test and the causes
#: tell it from a protocol's own barrier by it.
DOT_LABEL = "tl.dot: bar.sync 0 (operands staged in shared memory)"
#: What the drift test's normal form calls a ``tl.dot``'s barrier (``syncverify.kernels.drift``).
DOT_MARK = "tl.dot"


def lower_dot() -> tuple[LoweredOp, ...]:
    """What one ``tl.dot`` executes that orders memory: ``bar.sync 0`` on every thread of the CTA.

    Triton 3.6 for sm_90 stages a dot's operands through shared memory: each operand tensor,
    loaded from global memory into registers (``tl.load``) or by TMA (a tensor descriptor's
    ``load``), is written to shared memory, and the MMA (``mma.sync`` for fp32/tf32 16 x 16
    tiles, ``wgmma.mma_async`` at 64 x 64 and up) reads it there. Between the writes and the
    MMA's reads every thread executes ``bar.sync 0``, after the operand loads; the loop of a
    K-loop has one per iteration (plus a write-after-read guard before the next iteration's
    shared stores), and the accumulator's conversion to the store's layout after the loop adds
    ``bar.sync 0`` pairs before the tile store. Read in the PTX of our four kernels
    (2026-12-02): reduce-scatter's producer with FA3's named barrier, fp32 16 x 16 x 16 blocks,
    8 warps, pointer loads, one stage (the cross-check's build): ``ld.global`` A, ``bar.sync 0``,
    ``stmatrix``, ``ld.global`` B, ``stmatrix``, ``bar.sync 0``, ``ld.shared``/``ldmatrix``,
    ``mma.sync...tf32``; bf16 128 x 128 x 64, 8 warps, pointer loads: ``ld.global``,
    ``st.shared``, ``fence.proxy.async``, ``bar.sync 0``, ``wgmma``; descriptor loads, 3 stages
    (the GPU default): ``bar.sync 0``, ``mbarrier.try_wait``, ``wgmma`` in every K iteration.
    ``syncverify.kernels.audit.dot_barrier_problems`` checks every MMA of a compiled kernel for
    it (``tests/test_dot_barrier.py``).

    The model keeps one ``bar.sync 0`` per ``tl.dot``, where the dot is: consecutive barriers of
    the whole CTA with no model event between them order nothing one does not, and the other
    barriers of a dot (the guard, the layout conversion) sit between accesses of inputs and
    registers, which the model has no events for. A dot whose MMA does not use shared memory
    (Triton's FMA fallback for types without tensor cores) would have no barrier: our kernels
    have none such, and a user's kernel is told the assumption in its verdict
    (``syncverify.frontend``)."""
    return (LoweredOp("bar", ALL),)


def lower_tile_store(protocol) -> LoweredOp:
    """A tile store (``tl.store`` of a 2-D block, with the protocol's ``tile_store.cache``): a weak
    ``st.global`` on every thread, each thread its own slice. A cache modifier (``.wt``, ``.cg``,
    ``.cs``) picks a cache policy and orders nothing."""
    return LoweredOp("st", ALL, "weak", None)


def lower_tile_load(protocol) -> LoweredOp:
    """A tile load: a weak ``ld.global`` on every thread, or with ``tile_load.volatile`` an
    ``ld.volatile.global``, which PTX treats as relaxed at system scope."""
    if protocol.tile_load.volatile:
        return LoweredOp("ld", ALL, "volatile", "sys")
    return LoweredOp("ld", ALL, "weak", None)
