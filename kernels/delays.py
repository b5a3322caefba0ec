"""Delays inside the kernels: a reproducible hash, CTA-wide sleeps and per-warp deadlines.

The hash (:func:`delay_hash`) is mirrored on the host by ``syncverify.stress.delays``, so a
failure's delays can be replayed and printed. Every delay is inline PTX and adds no memory
instruction and no barrier (the PTX audit checks); in the interpreter (``INTERPRET=True``) inline
PTX cannot run, so every delay is skipped and returns 0 (or its input): the interpreter is
sequentially consistent and a delay could not change what it shows.
"""

from __future__ import annotations

from syncverify.kernels._deps import tl
from syncverify.kernels._jit import jit

# Delay sites (syncverify.stress.delays.SITES names them; the numbers enter the delay hash).
SITE_BEFORE_STORE = tl.constexpr(1)  # per warp, before the tile store (after its layout shuffle)
SITE_STORE_SIGNAL = tl.constexpr(2)  # whole CTA, between the tile store and the signal
SITE_BEFORE_WAIT = tl.constexpr(3)  # whole CTA, before the wait
SITE_WAIT_READ = tl.constexpr(4)  # per warp, between the wait and the tile reads

# A guided schedule (``syncverify.stress.guided``) is a table the kernels read instead of drawing:
# int32 ``TABLE_SHAPE`` = ``[sites, ranks, 4]``, one ``(ns_lo, ns_hi, warp_mask, pct)`` entry per (site,
# rank); the launch passes ``delay_pct < 0`` to select it (one compiled kernel serves both).
TABLE_SHAPE = (8, 64, 4)  # the host's view (syncverify.stress.delays.delay_table)
TABLE_RANKS = tl.constexpr(TABLE_SHAPE[1])


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
def delay_ns(seed, SITE: tl.constexpr, rank, tile, iteration, pct, max_ns, sites, table):
    """Nanoseconds to sleep at a site: ``pct`` % of (rank, tile, iteration) get ``[0, max_ns)``;
    0 when bit ``SITE`` of ``sites`` is clear (``syncverify.stress.delays.DelayConfig.site_mask``; -1: all).

    ``pct < 0``: a guided schedule; the (site, rank) entry of ``table`` gives the percentage of
    keys that sleep and the range ``[ns_lo, ns_hi]`` they sleep, drawn by the same hash."""
    h = delay_hash(seed, SITE, rank, tile, iteration)
    entry = table + (SITE * TABLE_RANKS + rank) * 4
    guided = pct < 0
    lo = tl.load(entry)
    span = tl.where(guided, tl.load(entry + 1) - lo + 1, max_ns)
    chance = tl.where(guided, tl.load(entry + 3), pct)
    on = ((h % 100) < chance) & (((sites >> SITE) & 1) != 0)
    return tl.where(on, tl.where(guided, lo, 0) + (h >> 8) % tl.maximum(span, 1), 0).to(tl.int32)


@jit
def delay_warp_mask(seed, SITE: tl.constexpr, rank, tile, iteration, NUM_WARPS: tl.constexpr, pct, table):
    """Which warps sleep at a per-warp site (bit w = warp w); another hash of the same key, or
    the guided entry's mask (``pct < 0`` and a non-zero mask in ``table``)."""
    h = delay_hash(seed, SITE + 16, rank, tile, iteration)
    fixed = tl.load(table + (SITE * TABLE_RANKS + rank) * 4 + 2)
    h = tl.where((pct < 0) & (fixed != 0), fixed, h)
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
        # the bits (16 or 32) and their widened register (32-bit "r" or 64-bit "l")
        HALF: tl.constexpr = v.dtype.primitive_bitwidth == 16
        NARROW = tl.int16 if HALF else tl.int32  # a dtype: a constexpr by nature
        WIDE = tl.int32 if HALF else tl.int64
        REG: tl.constexpr = "r" if HALF else "l"
        MOV: tl.constexpr = "mov.b32" if HALF else "mov.b64"
        bits = tl.inline_asm_elementwise(
            "/* syncverify-delay " + MARK + " */ { .reg .u64 g; .reg .pred p; "
            "SVW${:uid}: mov.u64 g, %globaltimer; setp.lt.u64 p, g, $2; @p bra SVW${:uid}; "
            + MOV + " $0, $1; }",
            "=" + REG + "," + REG + ",l", [v.to(NARROW, bitcast=True).to(WIDE), deadline], dtype=WIDE,
            is_pure=False, pack=1)
        return bits.to(NARROW).to(v.dtype, bitcast=True)


# ----- the delay row: what the kernels pass, and the delays at each site -------------------------
# A kernel packs its delay arguments into one tuple, ``delay = (seed, pct, max_ns, sites, iteration,
# table)`` (Triton flattens a tuple at compile time: the PTX is that of the separate arguments).

@jit
def row_ns(delay, SITE: tl.constexpr, rank, tile):
    """:func:`delay_ns` of the delay row ``delay`` at ``SITE`` for (rank, tile)."""
    seed, pct, max_ns, sites, iteration, table = delay
    return delay_ns(seed, SITE, rank, tile, iteration, pct, max_ns, sites, table)


@jit
def row_warps(delay, SITE: tl.constexpr, rank, tile, NUM_WARPS: tl.constexpr):
    """:func:`delay_warp_mask` of the delay row ``delay`` at ``SITE`` for (rank, tile)."""
    seed, pct, max_ns, sites, iteration, table = delay
    return delay_warp_mask(seed, SITE, rank, tile, iteration, NUM_WARPS, pct, table)


@jit
def cta_late(delay, SITE: tl.constexpr, rank, tile, DELAYS: tl.constexpr, INTERPRET: tl.constexpr):
    """The whole CTA late at ``SITE`` (store-signal, before-wait) when ``DELAYS``: int32 0 (or the
    constant 0) to add to the next access's offset, so the access comes after the sleep."""
    late = 0
    if DELAYS:
        late = sleep(row_ns(delay, SITE, rank, tile), INTERPRET)
    return late


@jit
def wait_read_late(delay, rank, tile, NUM_WARPS: tl.constexpr, DELAYS: tl.constexpr, INTERPRET: tl.constexpr):
    """Some warps late between the wait and the tile reads (site wait-read) when ``DELAYS``: 0 to add
    to the base pointer of the reads (:func:`warp_sleep_here`)."""
    late = 0
    if DELAYS:
        late = warp_sleep_here(row_ns(delay, SITE_WAIT_READ, rank, tile),
                               row_warps(delay, SITE_WAIT_READ, rank, tile, NUM_WARPS), "wait-read", INTERPRET)
    return late


@jit
def before_store_hold(v, delay, rank, tile, NUM_WARPS: tl.constexpr, DELAYS: tl.constexpr,
                      INTERPRET: tl.constexpr):
    """Some warps late before their tile stores (site before-store; a missing CTA barrier shows)
    when ``DELAYS``: ``v`` held by :func:`wait_tile` until each thread's deadline."""
    if DELAYS:
        ns = row_ns(delay, SITE_BEFORE_STORE, rank, tile)
        warps = row_warps(delay, SITE_BEFORE_STORE, rank, tile, NUM_WARPS)
        v = wait_tile(v, warp_deadline(ns, warps, INTERPRET), "before-store", INTERPRET)
    return v


# ----- timestamps: where a launch's time goes (benchmarks/profile_tail.py) ------------------------
# A build with ``KernelConfig.stamps = S > 0`` gives every program a row of ``2 + 4 * S`` int64 in
# the ``stamps`` buffer (``stamp_row``): slot 0 its start, slot 1 its end, then per iteration ``k < S``
# of its role's loop four slots: the tile (or unit) it visited and three times whose meaning is the
# role's (``syncverify.kernels.bench.profile.EVENTS``). ``S = 0`` (every shipped build) compiles none of
# it. Times are ``%globaltimer`` (ns, one clock for every SM); the interpreter has no clock and
# writes 1, so a test can see which slots a run wrote.


def stamp_row(stamps: int) -> int:
    """int64 slots per program of a build with ``stamps`` recorded iterations."""
    return 2 + 4 * stamps


@jit
def now_ns(INTERPRET: tl.constexpr):
    """``%globaltimer`` (ns) as int64, or 1 in the interpreter. Ordering: none; the asm has side
    effects, so the compiler keeps it between the memory operations around it."""
    if INTERPRET:
        return tl.full((), 1, tl.int64)
    else:
        return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False,
                                         pack=1)


@jit
def stamp(stamps, k, e, STAMPS: tl.constexpr, INTERPRET: tl.constexpr):
    """This program's time into slot ``e`` of iteration ``k`` (``k < 0``: its own slot ``e``, 0 start,
    1 end) when ``STAMPS`` (and ``k < STAMPS``); one thread stores it."""
    if STAMPS > 0:
        if k < STAMPS:
            row = stamps + tl.program_id(0).to(tl.int64) * (2 + 4 * STAMPS)
            tl.store(row + tl.where(k < 0, e, 2 + 4 * k + e), now_ns(INTERPRET))


@jit
def stamp_tile(stamps, k, t, STAMPS: tl.constexpr):
    """The tile (or unit) ``t`` of iteration ``k`` into its slot 0 when ``STAMPS`` (and ``k < STAMPS``)."""
    if STAMPS > 0:
        if k < STAMPS:
            row = stamps + tl.program_id(0).to(tl.int64) * (2 + 4 * STAMPS)
            tl.store(row + 2 + 4 * k, tl.cast(t, tl.int64))  # tl.cast: the interpreter's loop index is an int
