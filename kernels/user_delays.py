"""Device helpers that ``syncverify.frontend.rewrite`` inserts into a user's ``@triton.jit`` kernel.

Every helper takes the rewritten kernel's control block ``ctl`` (int32, :data:`CTL_FIELDS`), which
the host fills once and the stress graph updates on the device (the iteration), so one compiled
kernel serves every iteration, every seed and both delay modes. Delays reuse the fused kernels'
hash and sleeps (``syncverify.kernels.delays``): a delay adds no memory access to the user's data
and no barrier; in the interpreter (``INTERPRET``) it is skipped (the interpreter runs one program
at a time, sequentially consistent: a delay could not change what it shows).

A delay is drawn per (site, rank, program, iteration): random mode (``ctl[MODE] == 0``) sleeps
``[0, max_ns)`` in ``pct`` % of keys, in a hashed subset of warps; guided mode (``ctl[MODE] == 1``)
reads the ``(ns_lo, ns_hi, warps, pct, program)`` row of ``table[site, rank]``
(``syncverify.frontend.schedule.GuidedTable``). The host mirror of the draw is
``syncverify.frontend.schedule.random_delay``.

Progress (``mirror``, int32, :data:`SLOT_FIELDS` per program): the state, the last site passed and
the last value a bounded wait polled, written by one thread with ``.wt`` stores. The host maps it
from shared memory (``syncverify.frontend.stress``), so it reads it while a kernel runs, and after
the worker process that ran it was killed.
"""

from __future__ import annotations

from syncverify.kernels._deps import tl
from syncverify.kernels._jit import jit
from syncverify.kernels.delays import delay_hash, wait_tile, warp_deadline, warp_sleep_here

#: The control block the host passes as ``sv_ctl`` (int32 indexes).
CTL_FIELDS = ("iteration", "seed", "mode", "pct", "max_ns", "cap", "hangs", "hang_site", "hang_value",
              "hang_program")
CTL_INDEX = {name: i for i, name in enumerate(CTL_FIELDS)}  # the host's view
# the same indexes as the kernels read them (a jit function reads only constexpr globals)
ITERATION, SEED, MODE, PCT, MAX_NS, CAP, HANGS, HANG_SITE, HANG_VALUE, HANG_PROGRAM = (
    tl.constexpr(i) for i in range(len(CTL_FIELDS)))
CTL_SIZE = 16
#: The control block's last word: the host leaves it 0, so :func:`sv_keep`'s store never happens
#: (a test keeps it past :data:`CTL_FIELDS`).
KEEP = tl.constexpr(CTL_SIZE - 1)
#: One program's progress row in the mirror.
SLOT_FIELDS = ("state", "site", "value", "polls", "iteration")
SLOT_SIZE = tl.constexpr(len(SLOT_FIELDS))
#: Program states in the mirror (host ints; the rewritten kernels pass them as constexpr).
STATES = ("not started", "running", "finished", "capped")
NOT_STARTED, RUNNING, FINISHED = 0, 1, 2
CAPPED = tl.constexpr(3)
#: Columns of a guided table row.
TABLE_FIELDS = ("ns_lo", "ns_hi", "warps", "pct", "program")
TABLE_WIDTH = tl.constexpr(len(TABLE_FIELDS))


@jit
def sv_program():
    """This program's linear index in its grid."""
    return tl.program_id(0) + tl.num_programs(0) * (tl.program_id(1) + tl.num_programs(1) * tl.program_id(2))


@jit
def sv_draw(ctl, table, SITE: tl.constexpr, rank, NUM_WARPS: tl.constexpr, WORLD: tl.constexpr):
    """``(ns, warp_mask)`` of this program at ``SITE`` in this iteration (module docstring)."""
    program = sv_program()
    iteration = tl.load(ctl + ITERATION)
    seed = tl.load(ctl + SEED)
    h = delay_hash(seed, SITE, rank, program, iteration)
    every = (1 << NUM_WARPS) - 1
    random_ns = tl.where((h % 100) < tl.load(ctl + PCT), (h >> 8) % tl.maximum(tl.load(ctl + MAX_NS), 1), 0)
    random_warps = delay_hash(seed, SITE + 4096, rank, program, iteration) & every
    row = table + (SITE * WORLD + rank) * TABLE_WIDTH
    lo = tl.load(row)
    span = tl.load(row + 1) - lo + 1
    who = tl.load(row + 4)
    hit = ((h % 100) < tl.load(row + 3)) & ((who < 0) | (who == program))
    guided_ns = tl.where(hit, lo + (h >> 8) % tl.maximum(span, 1), 0)
    fixed = tl.load(row + 2)
    guided_warps = tl.where(fixed != 0, fixed, random_warps) & every
    guided = tl.load(ctl + MODE) == 1
    ns = tl.where(guided, guided_ns, random_ns).to(tl.int32)
    warps = tl.where(guided, guided_warps, random_warps).to(tl.int32)
    return ns, warps


@jit
def sv_spin(deadline):
    """Spin on ``%globaltimer`` until this thread's ``deadline`` (0: at once). A spin, not
    ``nanosleep``: the ISA lets ``nanosleep.u32 t`` sleep anywhere in ``[0, 2t]``, and a guided
    schedule needs its order."""
    return tl.inline_asm_elementwise(
        "/* syncverify-delay user-site */ { .reg .u64 g; .reg .pred p; "
        "SVD${:uid}: mov.u64 g, %globaltimer; setp.lt.u64 p, g, $1; @p bra SVD${:uid}; mov.u32 $0, 0; }",
        "=r,l", [deadline], dtype=tl.int32, is_pure=False, pack=1)


@jit
def sv_delay(ctl, table, SITE: tl.constexpr, rank, NUM_WARPS: tl.constexpr, WORLD: tl.constexpr,
             INTERPRET: tl.constexpr):
    """Hold the drawn warps of this program at ``SITE`` for the drawn time (:func:`sv_spin`)."""
    if not INTERPRET:
        ns, warps = sv_draw(ctl, table, SITE, rank, NUM_WARPS, WORLD)
        sv_spin(warp_deadline(ns, warps, INTERPRET))


@jit
def sv_hold(v, ctl, table, SITE: tl.constexpr, rank, NUM_WARPS: tl.constexpr, WORLD: tl.constexpr,
            INTERPRET: tl.constexpr):
    """``v`` (a value about to be stored), held in the drawn warps until their deadline: the
    warps store late *after* any layout conversion the store needs (its ``bar.sync`` would
    otherwise re-synchronize them: ``syncverify.kernels.delays.wait_tile``). A value that is not
    16 or 32 bits wide is passed through after a plain per-warp sleep."""
    if INTERPRET:
        return v
    else:
        ns, warps = sv_draw(ctl, table, SITE, rank, NUM_WARPS, WORLD)
        BITS: tl.constexpr = v.dtype.primitive_bitwidth
        if BITS == 16 or BITS == 32:
            return wait_tile(v, warp_deadline(ns, warps, INTERPRET), "user-store", INTERPRET)
        else:
            warp_sleep_here(ns, warps, "user-store", INTERPRET)
            return v


@jit
def sv_progress(ctl, mirror, slot, SITE: tl.constexpr, STATE: tl.constexpr):
    """Mirror: this program reached ``SITE`` in ``STATE`` in this iteration (``.wt`` stores)."""
    row = mirror + (slot + sv_program()) * SLOT_SIZE
    tl.store(row, STATE, cache_modifier=".wt")
    tl.store(row + 1, SITE, cache_modifier=".wt")
    tl.store(row + 4, tl.load(ctl + ITERATION), cache_modifier=".wt")


@jit
def sv_polled(ctl, mirror, slot, SITE: tl.constexpr, value, polls):
    """Mirror: the value a bounded wait at ``SITE`` read last, after ``polls`` polls."""
    row = mirror + (slot + sv_program()) * SLOT_SIZE
    tl.store(row + 1, SITE, cache_modifier=".wt")
    tl.store(row + 2, value.to(tl.int32), cache_modifier=".wt")
    tl.store(row + 3, polls, cache_modifier=".wt")
    tl.store(row + 4, tl.load(ctl + ITERATION), cache_modifier=".wt")


@jit
def sv_capped(ctl, mirror, slot, SITE: tl.constexpr, value, polls, MIRROR: tl.constexpr):
    """A wait at ``SITE`` reached the poll cap: count it in ``ctl`` (the iteration is a hang) and
    mark this program capped in the mirror."""
    tl.atomic_add(ctl + HANGS, 1, sem="relaxed", scope="gpu")
    tl.store(ctl + HANG_SITE, SITE)
    tl.store(ctl + HANG_VALUE, value.to(tl.int32))
    tl.store(ctl + HANG_PROGRAM, sv_program())
    if MIRROR:
        sv_polled(ctl, mirror, slot, SITE, value, polls)
        row = mirror + (slot + sv_program()) * SLOT_SIZE
        tl.store(row, CAPPED, cache_modifier=".wt")


@jit
def sv_touching(ctl, table, SITE: tl.constexpr, rank, NUM_WARPS: tl.constexpr, WORLD: tl.constexpr):
    """Whether this program touches, at ``SITE``, the data it reads after a wait, once before the
    wait: only in guided mode, where the guided table has a row for it (``syncverify.frontend.schedule``'s
    ``touch`` entries)."""
    ns, _warps = sv_draw(ctl, table, SITE, rank, NUM_WARPS, WORLD)
    return (tl.load(ctl + MODE) == 1) & (ns >= 1)


@jit
def sv_keep(v, ctl, INTERPRET: tl.constexpr):
    """Keep a touch, a load whose value the program does not use, from being removed by the
    compiler: a store of ``v`` into the control block masked by a word the host leaves 0
    (:data:`KEEP`), so it never stores. Element-wise in ``v``'s own layout: no layout conversion,
    no ``bar.sync``, and no access to the user's memory but the touch itself."""
    if not INTERPRET:
        never = tl.load(ctl + KEEP) != 0
        tl.store(ctl + KEEP + tl.zeros_like(v).to(tl.int32), v.to(tl.int32), mask=never)
