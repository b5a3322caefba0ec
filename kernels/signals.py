"""Synchronization primitives as tiny Triton helpers, and the two protocol runners built on them.

One helper per primitive, its semantics as ``tl.constexpr`` parameters (``SEM``, ``SCOPE``,
``CACHE``), its docstring stating the ordering argument it provides (or that it provides none).
:func:`run_signal` and :func:`run_wait` walk a protocol's step tuples (``syncverify.kernels.plan``) and call
these helpers, so every kernel runs exactly the steps of the protocol object the model checks.

Where each primitive runs inside a CTA (Triton 3.6, sm_90; the PTX audit checks it):

* a scalar ``tl.atomic_*`` or scalar ``tl.store`` is executed by **one** thread (predicated on
  ``%tid.x == 0``); when an atomic's result is used (a poll), Triton broadcasts it through shared
  memory behind a ``bar.sync``;
* a scalar ``tl.load(volatile=True)`` and every inline-PTX helper here (fences, delays) run on
  **every** thread; a non-weak store (inline PTX) is predicated to thread 0 like ``tl.store``;
* ``tl.debug_barrier()`` is ``bar.sync 0``.

The interpreter path (``INTERPRET=True``, ``TRITON_INTERPRET=1``): inline PTX cannot run there,
so fences and delays are skipped. Nothing is lost: the interpreter runs one program at a time,
to completion, in program-id order, and every load reads the latest store, i.e. it is
sequentially consistent and every fence is already implied. What the interpreter *can* show is
what a sequential schedule shows: lost or missing signals (a bounded wait times out) and reads
of locks that were never reset. Weak-memory reorderings need the GPU.

Every spin-wait is bounded by a poll budget and reports the last value it saw; nothing here can
hang a kernel.
"""

from __future__ import annotations

from syncverify.kernels._deps import tl
from syncverify.kernels._jit import jit
from syncverify.kernels.plan import FIELDS

# Step-tuple field indices (syncverify.kernels.plan.FIELDS), as globals the kernels can index with.
OP = tl.constexpr(FIELDS.index("op"))
READ = tl.constexpr(FIELDS.index("read"))
SEM = tl.constexpr(FIELDS.index("sem"))
SCOPE = tl.constexpr(FIELDS.index("scope"))
CACHE = tl.constexpr(FIELDS.index("cache"))
TO = tl.constexpr(FIELDS.index("to"))
SOURCE = tl.constexpr(FIELDS.index("source"))
LOCK = tl.constexpr(FIELDS.index("lock"))
VALUE = tl.constexpr(FIELDS.index("value"))
COMPARE = tl.constexpr(FIELDS.index("compare"))
UNTIL = tl.constexpr(FIELDS.index("until"))
TARGET = tl.constexpr(FIELDS.index("target"))

# Delay sites (syncverify.stress.delays.SITES names them; the numbers enter the delay hash).
SITE_BEFORE_STORE = tl.constexpr(1)  # per warp, before the tile store (after its layout shuffle)
SITE_STORE_SIGNAL = tl.constexpr(2)  # whole CTA, between the tile store and the signal
SITE_BEFORE_WAIT = tl.constexpr(3)  # whole CTA, before the wait
SITE_WAIT_READ = tl.constexpr(4)  # per warp, between the wait and the tile reads


def wrap_plan(plan: tuple) -> tuple:
    """A plan (tuple of step tuples) with every field a ``tl.constexpr``: the form a compiled
    Triton kernel accepts for a ``tl.constexpr`` tuple argument (the interpreter takes either).
    An operand field such as ``("c", 1)`` becomes one constexpr holding the pair."""
    return tuple(tuple(tl.constexpr(field) for field in step) for step in plan)


# ----- addressing ------------------------------------------------------------------------------

@jit
def rank_base(base, table, rank_stride, rank, TABLE: tl.constexpr):
    """Address of ``rank``'s copy of a symmetric buffer.

    ``TABLE=False`` (virtual ranks, interpreter): one tensor holds every rank's region,
    ``rank_stride`` elements apart. ``TABLE=True`` (one process per GPU): ``table`` holds each
    rank's device address (``torch.distributed._symmetric_memory`` ``buffer_ptrs``).
    """
    if TABLE:
        return tl.load(table + rank).to(tl.pointer_type(base.dtype.element_ty))
    else:
        return base + rank * rank_stride


@jit
def operand(X: tl.constexpr, vals):
    """A plan operand: ``("c", n)`` is the constant ``n``; ``("r", i)`` is ``vals[i]``, an int32
    the host wrote for this launch (``KernelPlan.runtime_values``). A tensor, not scalar kernel
    arguments: Triton would compile a new kernel whenever an integer argument equals 1."""
    if X[0] == "c":
        return X[1]
    else:
        return tl.load(vals + X[1])


@jit
def program_role(pid, ORDER: tl.constexpr, GEMM_SMS: tl.constexpr, COMM_SMS: tl.constexpr,
                 RANKS: tl.constexpr):
    """``(is_producer, index among its role's programs)`` for program ``pid``.

    ``ORDER`` lays out the grid's program ids (all ranks' programs, rank-major within a role):
    ``producers-first`` (the GPU default; in the interpreter, which runs programs one after
    another by id, every producer finishes before any consumer starts), ``consumers-first``
    (every consumer runs, and times out or passes on stale locks, before any producer), and
    ``last-rank-late`` (the last rank's producers run after every consumer: a consumer sees
    every rank's signal but the last one's, e.g. one ``atomic_xchg`` overwriting another).
    """
    n_producers = GEMM_SMS * RANKS
    n_consumers = COMM_SMS * RANKS
    if ORDER == "consumers-first":
        is_producer = pid >= n_consumers
        index = tl.where(is_producer, pid - n_consumers, pid)
    elif ORDER == "last-rank-late":
        n_early = GEMM_SMS * (RANKS - 1)
        is_consumer = (pid >= n_early) & (pid < n_early + n_consumers)
        is_producer = is_consumer == 0
        index = tl.where(is_consumer, pid - n_early, tl.where(pid < n_early, pid, pid - n_consumers))
    else:
        is_producer = pid < n_producers
        index = tl.where(is_producer, pid, pid - n_producers)
    return is_producer, index


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
    """One poll of an ``await``, as int32: ``load``, ``volatile_load``, ``atomic_cas`` or ``atomic_add``.

    Ordering: that of the primitive it calls (see each one).
    """
    if READ == "atomic_cas":
        v = atomic_cas_flag(ptr, cmp, value, SEM, SCOPE)
    elif READ == "atomic_add":
        v = atomic_add_flag(ptr, value, SEM, SCOPE)
    elif READ == "volatile_load":
        v = volatile_load(ptr, CACHE)
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


@jit
def bounded_poll(ptr, S: tl.constexpr, vals, target, budget):
    """Poll ``ptr`` as step ``S`` says until ``S``'s ``until`` holds or ``budget`` polls were made.

    Returns ``(last value read, polls made)``; at least one poll is made. Ordering: that of the
    read (``S[READ]``); the loop adds none. Bounded: the caller reports a timeout, never hangs.
    """
    cmp = operand(S[COMPARE], vals)
    value = operand(S[VALUE], vals)
    v = read_flag(ptr, cmp, value, S[READ], S[SEM], S[SCOPE], S[CACHE])
    polls = 1
    while (until_holds(v, S[UNTIL], target) == 0) & (polls < budget):
        v = read_flag(ptr, cmp, value, S[READ], S[SEM], S[SCOPE], S[CACHE])
        polls += 1
    return v, polls


# ----- delays ----------------------------------------------------------------------------------

@jit
def mix32(h):
    """32-bit integer finalizer (in int64 arithmetic; mirrored by ``syncverify.stress.delays.mix32``)."""
    h = ((h ^ (h >> 16)) * 73244475) & 0xFFFFFFFF
    h = ((h ^ (h >> 16)) * 73244475) & 0xFFFFFFFF
    return h ^ (h >> 16)


@jit
def delay_hash(seed, SITE: tl.constexpr, rank, tile, iteration):
    """Reproducible hash of (seed, site, rank, tile, iteration); ``syncverify.stress.delays.delay_hash`` is
    the same function on the host, so a failure's delays can be replayed and printed."""
    h = tl.cast(seed, tl.int64) & 0xFFFFFFFF  # tl.cast: in the interpreter a loop index is an int
    h = mix32(h ^ SITE)
    h = mix32(h ^ (tl.cast(rank, tl.int64) & 0xFFFFFFFF))
    h = mix32(h ^ (tl.cast(tile, tl.int64) & 0xFFFFFFFF))
    h = mix32(h ^ (tl.cast(iteration, tl.int64) & 0xFFFFFFFF))
    return h


@jit
def delay_ns(seed, SITE: tl.constexpr, rank, tile, iteration, pct, max_ns, sites):
    """Nanoseconds to sleep at a site: ``pct`` % of (rank, tile, iteration) get ``[0, max_ns)``;
    0 when bit ``SITE`` of ``sites`` is clear (``syncverify.stress.delays.DelayConfig.site_mask``; -1: all)."""
    h = delay_hash(seed, SITE, rank, tile, iteration)
    on = ((h % 100) < pct) & (((sites >> SITE) & 1) != 0)
    return tl.where(on, (h >> 8) % max_ns, 0).to(tl.int32)


@jit
def delay_warp_mask(seed, SITE: tl.constexpr, rank, tile, iteration, NUM_WARPS: tl.constexpr):
    """Which warps sleep at a per-warp site (bit w = warp w); another hash of the same key."""
    h = delay_hash(seed, SITE + 16, rank, tile, iteration)
    return (h & ((1 << NUM_WARPS) - 1)).to(tl.int32)


@jit
def sleep(ns, INTERPRET: tl.constexpr):
    """``nanosleep.u32 ns`` on every thread; returns int32 0 to add to a later address.

    Ordering: none. Adding the returned 0 to the pointer of the next access makes that access
    depend on the sleep, so neither the compiler nor ``ptxas`` can hoist it above the sleep; the
    delay adds no memory instruction and no barrier (the audit checks).
    """
    if INTERPRET:
        return 0
    else:
        return tl.inline_asm_elementwise("/* syncverify-delay cta */ nanosleep.u32 $1; mov.u32 $0, 0;", "=r,r", [ns],
                                         dtype=tl.int32, is_pure=False, pack=1)


@jit
def warp_sleep_here(ns, warp_mask, MARK: tl.constexpr, INTERPRET: tl.constexpr):
    """Per-warp delay as a scalar: every thread runs the asm once and sleeps ``ns`` if its warp's
    bit is set in ``warp_mask``; returns int32 0 to add to the base pointer of the next accesses.

    Ordering: none. To Triton the result is one uniform scalar, so using it changes no layout
    and adds no shuffle or ``bar.sync``; each thread's accesses wait for its own sleep.
    """
    if INTERPRET:
        return 0
    else:
        return tl.inline_asm_elementwise(
            "/* syncverify-delay " + MARK + " */ { .reg .u32 t; .reg .pred p; mov.u32 t, %tid.x; "
            "shr.u32 t, t, 5; shr.u32 t, $1, t; and.b32 t, t, 1; setp.ne.u32 p, t, 0; "
            "@p nanosleep.u32 $2; mov.u32 $0, 0; }",
            "=r,r,r", [warp_mask, ns], dtype=tl.int32, is_pure=False, pack=1)


@jit
def warp_deadline(ns, warp_mask, INTERPRET: tl.constexpr):
    """Per thread: ``%globaltimer + ns`` if bit ``%tid.x / 32`` of ``warp_mask`` is set, else 0.

    A scalar to Triton, a different value in each warp; :func:`wait_tile` waits for it.
    """
    if INTERPRET:
        return tl.zeros((), dtype=tl.int64)
    else:
        return tl.inline_asm_elementwise(
            "{ .reg .u32 t; .reg .pred p; .reg .u64 g; mov.u32 t, %tid.x; shr.u32 t, t, 5; "
            "shr.u32 t, $1, t; and.b32 t, t, 1; setp.ne.u32 p, t, 0; mov.u64 g, %globaltimer; "
            "cvt.u64.u32 $0, $2; add.u64 $0, $0, g; @!p mov.u64 $0, 0; }",
            "=l,r,r", [warp_mask, ns], dtype=tl.int64, is_pure=False, pack=1)


@jit
def wait_tile(v, deadline, MARK: tl.constexpr, INTERPRET: tl.constexpr):
    """Hold a 16- or 32-bit tile *value* until ``%globaltimer >= deadline`` (this thread's, from
    :func:`warp_deadline`); returns ``v``, through its bits widened to twice their width.

    Ordering: none. The value feeds the ``tl.store`` right after, so each thread's stores wait
    for its own deadline. Two placement facts, both checked in the PTX:

    * Triton converts a ``tl.dot`` accumulator to the store's layout through shared memory behind
      ``bar.sync``, placed where the data is narrowest: widening the bits for the asm puts that
      conversion *before* the wait, so nothing re-synchronizes the warps between their wait and
      their global stores;
    * the asm runs once per element a thread holds; the first waits out the deadline, the rest
      find it passed (a ``nanosleep`` per element would add up to the count times its granularity).

    The spin's label is made unique per asm instance with LLVM's ``${:uid}``.
    """
    if INTERPRET:
        return v
    else:
        if v.dtype.primitive_bitwidth == 16:
            bits = v.to(tl.int16, bitcast=True).to(tl.int32)
            bits = tl.inline_asm_elementwise(
                "/* syncverify-delay " + MARK + " */ { .reg .u64 g; .reg .pred p; "
                "SVW${:uid}: mov.u64 g, %globaltimer; setp.lt.u64 p, g, $2; @p bra SVW${:uid}; "
                "mov.b32 $0, $1; }",
                "=r,r,l", [bits, deadline], dtype=tl.int32, is_pure=False, pack=1)
            return bits.to(tl.int16).to(v.dtype, bitcast=True)
        else:
            bits = v.to(tl.int32, bitcast=True).to(tl.int64)
            bits = tl.inline_asm_elementwise(
                "/* syncverify-delay " + MARK + " */ { .reg .u64 g; .reg .pred p; "
                "SVW${:uid}: mov.u64 g, %globaltimer; setp.lt.u64 p, g, $2; @p bra SVW${:uid}; "
                "mov.b64 $0, $1; }",
                "=l,l,l", [bits, deadline], dtype=tl.int64, is_pure=False, pack=1)
            return bits.to(tl.int32).to(v.dtype, bitcast=True)


# ----- protocol runners ------------------------------------------------------------------------

@jit
def write_flag(ptr, value, S: tl.constexpr, INTERPRET: tl.constexpr):
    """One signal write (``store``, ``atomic_xchg`` or ``atomic_add``) of step ``S`` to ``ptr``."""
    if S[OP] == "store":
        store_flag(ptr, value, S[SEM], S[SCOPE], S[CACHE], INTERPRET)
    elif S[OP] == "atomic_xchg":
        atomic_xchg_flag(ptr, value, S[SEM], S[SCOPE])
    else:
        atomic_add_flag(ptr, value, S[SEM], S[SCOPE])


@jit
def signal_step(locks, locks_table, locks_rank_stride, n_tiles, tile, rank, owner, vals,
                S: tl.constexpr, WORLD: tl.constexpr, TABLE: tl.constexpr, INTERPRET: tl.constexpr):
    """Step ``S`` of a producer's signal for ``tile``: a barrier, a fence, or one write per
    target rank (``to``: all/others in rank order, self, owner) into lock ``S[LOCK]``."""
    if S[OP] == "barrier":
        tl.debug_barrier()
    elif S[OP] == "fence":
        fence(S[SEM], S[SCOPE], INTERPRET)
    else:
        value = operand(S[VALUE], vals)
        offset = S[LOCK] * n_tiles + tile
        if S[TO] == "self":
            write_flag(rank_base(locks, locks_table, locks_rank_stride, rank, TABLE) + offset,
                       value, S, INTERPRET)
        elif S[TO] == "owner":
            write_flag(rank_base(locks, locks_table, locks_rank_stride, owner, TABLE) + offset,
                       value, S, INTERPRET)
        else:
            for d in tl.static_range(WORLD):
                if S[TO] == "all":
                    write_flag(rank_base(locks, locks_table, locks_rank_stride, d, TABLE) + offset,
                               value, S, INTERPRET)
                else:  # others
                    if d != rank:
                        write_flag(rank_base(locks, locks_table, locks_rank_stride, d, TABLE)
                                   + offset, value, S, INTERPRET)


@jit
def run_signal(locks, locks_table, locks_rank_stride, n_tiles, tile, rank, owner, vals,
               PLAN: tl.constexpr, WORLD: tl.constexpr, TABLE: tl.constexpr,
               INTERPRET: tl.constexpr):
    """A producer's whole ``signal`` plan for ``tile``, steps in order (after its tile store)."""
    for i in tl.static_range(len(PLAN)):
        signal_step(locks, locks_table, locks_rank_stride, n_tiles, tile, rank, owner, vals,
                    PLAN[i], WORLD, TABLE, INTERPRET)


@jit
def _record(ok, last, step, v, held, I: tl.constexpr):
    """Fold one poll loop's outcome into (ok, last, step): the first failing loop is kept."""
    first = (ok != 0) & (held == 0)
    last = tl.where(first, v, last)
    step = tl.where(first, I, step)
    ok = tl.where(held, ok, 0)
    return ok, last, step


@jit
def wait_step(locks, locks_table, locks_rank_stride, n_tiles, tile, rank, vals, budget,
              ok, last, step, S: tl.constexpr, I: tl.constexpr, WORLD: tl.constexpr,
              TABLE: tl.constexpr, INTERPRET: tl.constexpr):
    """Step ``S`` (number ``I``) of a consumer's wait for ``tile``: a barrier, a fence, one CAS
    per source rank, or one bounded poll loop per source rank (``from``: self, or each rank)."""
    offset = S[LOCK] * n_tiles + tile
    if S[OP] == "barrier":
        tl.debug_barrier()
    elif S[OP] == "fence":
        fence(S[SEM], S[SCOPE], INTERPRET)
    elif S[OP] == "atomic_cas":  # one CAS, result unused (seed 001's acquire after the poll)
        cmp = operand(S[COMPARE], vals)
        value = operand(S[VALUE], vals)
        if S[SOURCE] == "each":
            for s in tl.static_range(WORLD):
                atomic_cas_flag(rank_base(locks, locks_table, locks_rank_stride, s, TABLE) + offset,
                                cmp, value, S[SEM], S[SCOPE])
        else:
            atomic_cas_flag(rank_base(locks, locks_table, locks_rank_stride, rank, TABLE) + offset,
                            cmp, value, S[SEM], S[SCOPE])
    else:  # await
        target = operand(S[TARGET], vals)
        if S[SOURCE] == "each":
            for s in tl.static_range(WORLD):
                v, polls = bounded_poll(rank_base(locks, locks_table, locks_rank_stride, s, TABLE)
                                        + offset, S, vals, target, budget)
                budget = budget - polls
                ok, last, step = _record(ok, last, step, v, until_holds(v, S[UNTIL], target), I)
        else:
            v, polls = bounded_poll(rank_base(locks, locks_table, locks_rank_stride, rank, TABLE)
                                    + offset, S, vals, target, budget)
            budget = budget - polls
            ok, last, step = _record(ok, last, step, v, until_holds(v, S[UNTIL], target), I)
    return ok, last, step, budget


@jit
def run_wait(locks, locks_table, locks_rank_stride, n_tiles, tile, rank, vals, budget,
             PLAN: tl.constexpr, WORLD: tl.constexpr, TABLE: tl.constexpr,
             INTERPRET: tl.constexpr):
    """A consumer's whole ``wait`` plan for ``tile``, steps in order (before its tile reads).

    Every ``await`` polls at most ``budget`` times in total across the steps (at least once
    each), so a consumer that times out on one tile spends little on the next.

    Returns ``(ok, last, step, budget)``: ``ok`` is 1 if every ``await`` saw its condition,
    else 0 with ``last`` the value the first failing poll loop read last and ``step`` its index
    in the plan (-1 when ok); ``budget`` is what is left.
    """
    ok = (budget * 0 + 1).to(tl.int32)
    last = ok * 0
    step = ok * 0 - 1
    for i in tl.static_range(len(PLAN)):
        ok, last, step, budget = wait_step(locks, locks_table, locks_rank_stride, n_tiles, tile,
                                           rank, vals, budget, ok, last, step, PLAN[i], i,
                                           WORLD, TABLE, INTERPRET)
    return ok, last, step, budget


# ----- the producer's tile: both kernels compute, store and signal a C tile the same way ----------

@jit
def gemm_tile(a_rank, b_rank, t, num_pid_n, K, stride_am, stride_ak, stride_bk, stride_bn,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, INTERPRET: tl.constexpr):
    """Tile ``t`` of ``A @ B`` (fp32 accumulator) with its row and column offsets."""
    offs_m = (t // num_pid_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = (t % num_pid_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_rank + offs_m[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_rank + rk[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        if INTERPRET:  # the interpreter's dot mishandles bf16: multiply in fp32
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    return acc, offs_m, offs_n


@jit
def store_and_signal(dst, acc, offs_m, offs_n, N, t, me, owner, locks, locks_table, locks_rank_stride,
                     n_tiles, vals, delay_seed, delay_pct, delay_max_ns, delay_sites, iteration,
                     SIGNAL: tl.constexpr, WORLD: tl.constexpr, TABLE: tl.constexpr,
                     TILE_STORE_CACHE: tl.constexpr, DELAYS: tl.constexpr, NUM_WARPS: tl.constexpr,
                     INTERPRET: tl.constexpr):
    """Store the tile into ``dst`` and run the protocol's signal steps for it. Delays: some warps
    late before their stores (a missing CTA barrier shows), the whole CTA late before the signal."""
    c_offs = offs_m[:, None] * N + offs_n[None, :]
    c = acc.to(dst.dtype.element_ty)
    if DELAYS:
        ns = delay_ns(delay_seed, SITE_BEFORE_STORE, me, t, iteration, delay_pct, delay_max_ns, delay_sites)
        warps = delay_warp_mask(delay_seed, SITE_BEFORE_STORE, me, t, iteration, NUM_WARPS)
        c = wait_tile(c, warp_deadline(ns, warps, INTERPRET), "before-store", INTERPRET)
    tl.store(dst + c_offs, c, cache_modifier=TILE_STORE_CACHE)
    tile = t
    if DELAYS:
        tile = t + sleep(delay_ns(delay_seed, SITE_STORE_SIGNAL, me, t, iteration,
                                  delay_pct, delay_max_ns, delay_sites), INTERPRET)
    run_signal(locks, locks_table, locks_rank_stride, n_tiles, tile, me, owner, vals,
               SIGNAL, WORLD, TABLE, INTERPRET)
