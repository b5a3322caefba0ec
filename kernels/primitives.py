"""Synchronization primitives as tiny Triton helpers: fences, flag writes, atomics, polls.

One helper per primitive, its semantics as ``tl.constexpr`` parameters (``SEM``, ``SCOPE``,
``CACHE``), its docstring stating the ordering argument it provides (or that it provides none).
The protocol runners (``syncverify.kernels.steps``) call these helpers for each step of a plan.

Where each primitive runs inside a CTA (Triton 3.6, sm_90; the PTX audit checks it):

* a scalar ``tl.atomic_*`` or scalar ``tl.store`` is executed by **one** thread (predicated on
  ``%tid.x == 0``); when an atomic's result is used (a poll), Triton broadcasts it through shared
  memory behind a ``bar.sync``;
* a scalar ``tl.load(volatile=True)`` and every inline-PTX helper (fences here, delays in
  ``syncverify.kernels.delays``) run on **every** thread; a non-weak store (inline PTX) is
  predicated to thread 0 like ``tl.store``;
* ``tl.debug_barrier()`` is ``bar.sync 0``; :func:`named_barrier` is ``bar.sync ID{, COUNT}``
  (inline PTX) on every thread, or for a step that selects warps ``bar.arrive``/``bar.sync`` chosen
  per warp by a warp-uniform predicate.

The interpreter path (``INTERPRET=True``, ``TRITON_INTERPRET=1``): inline PTX cannot run there,
so fences (and delays) are skipped. Nothing is lost: the interpreter runs one program at a time,
to completion, in program-id order, and every load reads the latest store, i.e. it is
sequentially consistent and every fence is already implied. What the interpreter *can* show is
what a sequential schedule shows: lost or missing signals (a bounded wait times out) and reads
of locks that were never reset. Weak-memory reorderings need the GPU.
"""

from __future__ import annotations

from syncverify.kernels._deps import tl
from syncverify.kernels._jit import jit

# ----- fences and flag writes ------------------------------------------------------------------

@jit
def fence(SEM: tl.constexpr, SCOPE: tl.constexpr, INTERPRET: tl.constexpr):
    """``fence.acq_rel.SCOPE`` (``SEM`` release/acquire/acq_rel) or ``fence.sc.SCOPE``, every thread.

    Ordering: a release pattern *fence; later write* orders this thread's earlier accesses before
    the write, an acquire pattern *read; fence* orders the read before this thread's later
    accesses (PTX ISA, memory consistency model, "release and acquire patterns"); ``sc`` also
    joins the total order of sc fences. PTX has no stand-alone one-sided general fence, so
    release and acquire fences both lower to ``fence.acq_rel``. A fence orders only the accesses
    of the thread that runs it: it does not order other warps' tile stores (that needs
    ``tl.debug_barrier()`` first).
    """
    if not INTERPRET:
        if SEM == "sc":
            tl.inline_asm_elementwise("fence.sc." + SCOPE + "; mov.u32 $0, 0;", "=r", [],
                                      dtype=tl.int32, is_pure=False, pack=1)
        else:
            tl.inline_asm_elementwise("fence.acq_rel." + SCOPE + "; mov.u32 $0, 0;", "=r", [],
                                      dtype=tl.int32, is_pure=False, pack=1)


@jit
def launch_dependents(INTERPRET: tl.constexpr):
    """``griddepcontrol.launch_dependents`` (PTX ISA): the dependent grid may be scheduled once every
    program of this one ran it or exited; scheduling only, no memory order. As
    ``tl.extra.cuda.gdc_launch_dependents`` writes it (the kernel front end reads it); nothing in
    the interpreter, which runs each launch to its end before the next."""
    if not INTERPRET:
        tl.inline_asm_elementwise("griddepcontrol.launch_dependents; // dummy $0", "=r", [], dtype=tl.int32,
                                  is_pure=False, pack=1)


@jit
def wait_for_primary(INTERPRET: tl.constexpr):
    """``griddepcontrol.wait`` (PTX ISA): until the primary grid has completed and its writes are
    visible to this one. As ``tl.extra.cuda.gdc_wait`` writes it; nothing in the interpreter."""
    if not INTERPRET:
        tl.inline_asm_elementwise("griddepcontrol.wait; // dummy $0", "=r", [], dtype=tl.int32, is_pure=False,
                                  pack=1)


@jit
def store_flag(ptr, value, SEM: tl.constexpr, SCOPE: tl.constexpr, CACHE: tl.constexpr,
               INTERPRET: tl.constexpr):
    """Store ``value`` to a flag: weak ``tl.store`` (with ``CACHE``) or ``st.SEM.SCOPE`` (PTX).

    Ordering: a weak store (``SEM="weak"``), ``.wt`` or not, orders nothing: ``.wt`` only picks a
    cache policy, and another thread may observe it before this thread's earlier stores. A
    ``st.release`` orders this thread's earlier accesses before it (morally strong with an
    acquire read of the same scope), ``st.relaxed`` is strong but orders nothing. Both run on
    thread 0 only, like Triton's scalar store.
    """
    if SEM == "weak" or INTERPRET:
        tl.store(ptr, value, cache_modifier=CACHE)
    else:
        tl.inline_asm_elementwise(
            "{ .reg .pred p; .reg .u32 t; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; "
            "@p st." + SEM + "." + SCOPE + ".global.b32 [$1], $2; mov.u32 $0, 0; }",
            "=r,l,r", [ptr, value], dtype=tl.int32, is_pure=False, pack=1)


# ----- barriers --------------------------------------------------------------------------------

@jit
def named_barrier(PTX: tl.constexpr, INTERPRET: tl.constexpr):
    """A protocol ``barrier`` on every thread: ``tl.debug_barrier()`` (``bar.sync 0``) when
    ``PTX`` is empty, else the inline PTX ``syncverify.protocols.lowering.barrier_ptx`` wrote for the step:
    ``bar.sync ID{, COUNT};``, or, for a step that selects warps, each warp tests its bit
    (``1 << (%tid.x / 32)``) in the masks of the warps that arrive and that wait, and runs
    ``bar.arrive ID, COUNT`` or ``bar.sync ID, COUNT`` (or neither). The predicate is the same
    for every thread of a warp, as the aligned ``bar`` requires.

    Ordering: the arrivals of one phase of the barrier synchronize with its ``bar.sync`` s (PTX
    ISA: "A bar{.cta}.sync or bar{.cta}.red or bar{.cta}.arrive operation synchronizes with a
    bar{.cta}.sync or bar{.cta}.red operation executed on the same barrier"), so a warp's earlier
    accesses (its tile stores) happen before the later ones of every warp that waits there. A
    ``bar.arrive`` waits for nothing: nothing after it is ordered after the other warps. Warps
    outside the step's warps are not ordered at all.

    Reuse across tiles: a warp that only arrives goes on at once, and must not reach the same
    barrier for the next tile while the waiting warp is still in this tile's phase. Each tile's
    GEMM passes a ``bar.sync 0`` of the whole CTA (Triton's) that the waiting warp reaches only
    after its phase; a compiled launch where some path misses it is refused
    (``syncverify.kernels._jit.refuse_arrive_laps``).
    The interpreter runs one program at a time, so there is nothing to wait for there (the trace
    recorder logs the barrier from this helper's parameters).
    """
    if not INTERPRET:
        if PTX == "":
            tl.debug_barrier()
        else:
            tl.inline_asm_elementwise(PTX + " mov.u32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)


# ----- atomics ---------------------------------------------------------------------------------

@jit
def atomic_xchg_flag(ptr, value, SEM: tl.constexpr, SCOPE: tl.constexpr):
    """``atom.xchg.SEM.SCOPE`` on one thread; returns the old value.

    Ordering: with ``SEM`` release/acq_rel, this thread's earlier accesses happen before any
    acquire that reads this value (or a later value in its release sequence). An exchange
    *overwrites*: two producers that both write 1 cannot be counted (seed 000's bug).
    """
    return tl.atomic_xchg(ptr, value, sem=SEM, scope=SCOPE)


@jit
def atomic_add_flag(ptr, value, SEM: tl.constexpr, SCOPE: tl.constexpr):
    """``atom.add.SEM.SCOPE`` on one thread (``red`` when the result is unused); returns the old value.

    Ordering: as :func:`atomic_xchg_flag`; adds from several producers form one release sequence
    per producer and the counter counts them all. ``tl.atomic_add(p, 0, sem="acquire")`` with a
    constant 0 lowers to an acquire *load* (``ld.acquire``), not an ``atom``.
    """
    return tl.atomic_add(ptr, value, sem=SEM, scope=SCOPE)


@jit
def atomic_cas_flag(ptr, cmp, value, SEM: tl.constexpr, SCOPE: tl.constexpr):
    """``atom.cas.SEM.SCOPE`` on one thread: writes ``value`` if the flag equals ``cmp``; returns the old value.

    Ordering: an acquire CAS that reads a release write (or its release sequence) makes the
    releasing thread's earlier accesses happen before this thread's later ones. Only this
    thread's: other warps of the CTA are ordered after it only through a ``bar.sync``, which
    Triton inserts only when the result is used. ``cmp == value`` is the read-only idiom.
    """
    return tl.atomic_cas(ptr, cmp, value, sem=SEM, scope=SCOPE)


# ----- polls -----------------------------------------------------------------------------------

@jit
def load_flag(ptr, SEM: tl.constexpr, SCOPE: tl.constexpr):
    """``ld.SEM.SCOPE`` (``ld.acquire.sys``, ``ld.relaxed.gpu``) on one thread, then ``bar.sync``.

    Written as ``tl.atomic_add(ptr, 0, sem=SEM, scope=SCOPE)`` with a literal 0: Triton 3.6 has no
    load with a memory order, and lowers exactly this add to the load (the PTX audit checks it).
    Ordering: an acquire load that reads a release write (or its release sequence) at a scope
    that includes both threads orders this thread's later accesses after the writer's earlier ones.
    """
    return tl.atomic_add(ptr, 0, sem=SEM, scope=SCOPE)


@jit
def volatile_load(ptr, CACHE: tl.constexpr):
    """``ld.volatile.global`` on every thread (Triton 3.6 drops ``CACHE``, e.g. ``.cv``).

    Ordering: none. PTX treats a volatile load as relaxed at system scope: it observes a flag
    but orders no later read after it; an acquire (CAS, fence) must follow it.
    """
    return tl.load(ptr, volatile=True, cache_modifier=CACHE)


@jit
def plain_load(ptr, CACHE: tl.constexpr):
    """A weak ``ld.global`` (with ``CACHE``). Ordering: none, and the compiler may hoist it out
    of a spin loop: a poll built on it may never see the flag change (the bounded wait reports it)."""
    return tl.load(ptr, cache_modifier=CACHE)


@jit
def read_flag(ptr, cmp, value, READ: tl.constexpr, SEM: tl.constexpr, SCOPE: tl.constexpr,
              CACHE: tl.constexpr):
    """One poll of an ``await``, as int32: ``load`` (weak, or with ``SEM`` ``ld.SEM.SCOPE``),
    ``volatile_load``, ``atomic_cas`` or ``atomic_add``.

    Ordering: that of the primitive it calls (see each one).
    """
    if READ == "atomic_cas":
        v = atomic_cas_flag(ptr, cmp, value, SEM, SCOPE)
    elif READ == "atomic_add":
        v = atomic_add_flag(ptr, value, SEM, SCOPE)
    elif READ == "volatile_load":
        v = volatile_load(ptr, CACHE)
    elif SEM != "":  # a load with sem and scope: ld.acquire.SCOPE / ld.relaxed.SCOPE
        v = load_flag(ptr, SEM, SCOPE)
    else:
        v = plain_load(ptr, CACHE)
    return v.to(tl.int32)


@jit
def until_holds(v, UNTIL: tl.constexpr, target):
    """Whether a poll that read ``v`` leaves the loop: ``v UNTIL target``. No memory access."""
    if UNTIL == "==":
        r = v == target
    elif UNTIL == "!=":
        r = v != target
    elif UNTIL == ">=":
        r = v >= target
    elif UNTIL == ">":
        r = v > target
    elif UNTIL == "<=":
        r = v <= target
    else:
        r = v < target
    return r
