"""The roles of the four fused kernels, each written once as a ``@jit`` building block.

A fused kernel is its grid split into the roles of ``syncverify.scenarios.build.ROLES`` and, for each
role, which tiles it visits and which copies it reads and writes; that is all a kernel module
says. The roles run the protocol's steps around those accesses, the same way in every kernel:

* :func:`producer`: GEMM tile, ``before_store``, tile store, ``signal`` (all-reduce,
  all-scatter, gemm-reduce-scatter);
* :func:`consumer`: ``wait``, the scenario's reads (``READ``), ``after_load``, the scenario's
  writes (``WRITE``) (all-reduce, gemm-reduce-scatter, all-gather-gemm's GEMM programs);
* :func:`comm` and :func:`receiver`: all-scatter's relay (``wait``, copy to every rank, the push
  protocol's ``signal``) and its readers (the push protocol's ``wait``);
* :func:`sender`: all-gather-gemm's copies of a shard into every rank, then ``signal``;
* their parts: :func:`before_store` (with its timeout row), :func:`sum_tiles` (the summing
  ``READ`` of all-reduce and gemm-reduce-scatter), :func:`timed_out`, :func:`copy_of`.

A scenario's choices are the keyword arguments at the end of a role's call (``OWNER``,
``PRODUCTION``, ``INBOX``, ``REPORT``; ``READ``, ``WRITE``, ``OWNED``), all ``tl.constexpr``: a
choice compiles to straight-line code, never a run-time branch.

Arguments travel in small tuples, which Triton flattens at compile time (the PTX is that of
separate arguments; ``benchmarks/ptx_snapshot.py`` compares): a symmetric buffer is
``(base, table, rank_stride)`` (:func:`copy_of`), a lock array ``(locks, table, rank_stride)``,
the delays one row ``(seed, pct, max_ns, sites, iteration, table)``
(``syncverify.kernels.delays``), a GEMM's inputs ``(A, B, stride_ar, stride_am, stride_ak,
stride_br, stride_bk, stride_bn)``, and a scenario's ``READ``/``WRITE`` get the tuple their
kernel built for them. Every wait is bounded: a role that gives up writes ``(1, last value,
step, polls)`` into its status row (:func:`timed_out`) and skips the tile.
"""

from __future__ import annotations

from syncverify.kernels._deps import tl
from syncverify.kernels._jit import jit
from syncverify.kernels.delays import before_store_hold, stamp, stamp_tile, wait_read_late
from syncverify.kernels.steps import rank_base, run_signal, run_steps, run_wait
from syncverify.kernels.tile import (
    delayed_signal,
    delayed_wait,
    gemm_tile,
    operand_descriptors,
    store_and_signal,
    tile_of,
    tile_offsets,
)


@jit
def copy_of(buf, rank, TABLE: tl.constexpr):
    """Rank ``rank``'s copy of the symmetric buffer ``buf = (base, table, rank_stride)``."""
    return rank_base(buf[0], buf[1], buf[2], rank, TABLE)


@jit
def timed_out(row, last, step, polls):
    """Record a bounded wait that gave up: ``(1, last value, step, polls)`` in a status row."""
    tl.store(row, 1)
    tl.store(row + 1, last)
    tl.store(row + 2, step)
    tl.store(row + 3, polls)


@jit
def before_store(lock, n_tiles, lock_tile, me, owner, vals, budget, max_polls, row, BEFORE_STORE: tl.constexpr,
                 HAS_BEFORE: tl.constexpr, REPORT: tl.constexpr, WORLD: tl.constexpr, TABLE: tl.constexpr,
                 INTERPRET: tl.constexpr):
    """The protocol's ``before_store`` steps (e.g. wait until the buffer's readers are done):
    ``(free, budget)``; a timeout is written to status ``row`` when ``REPORT`` (else the tile is
    left unsignalled, and its reader's own wait reports it)."""
    free = 1
    if HAS_BEFORE:
        free, last, step, budget = run_steps(lock[0], lock[1], lock[2], n_tiles, lock_tile, me, owner, vals, budget,
                                             BEFORE_STORE, WORLD, TABLE, INTERPRET)
        if REPORT:
            if free == 0:
                timed_out(row, last, step, max_polls - budget)
    return free, budget


@jit
def producer(inputs, M, N, K, dst, ownership, status, lock, vals, max_polls, delay, me, first,
             SIGNAL: tl.constexpr, BEFORE_STORE: tl.constexpr, HAS_BEFORE: tl.constexpr,
             SLOTS: tl.constexpr, NLOCKS: tl.constexpr, WORLD: tl.constexpr, TABLE: tl.constexpr,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GEMM_SMS: tl.constexpr,
             LOADS: tl.constexpr, GROUP_M: tl.constexpr, TILE_STORE_CACHE: tl.constexpr,
             DELAYS: tl.constexpr, NUM_WARPS: tl.constexpr, INTERPRET: tl.constexpr,
             OWNER: tl.constexpr, PRODUCTION: tl.constexpr, INBOX: tl.constexpr, REPORT: tl.constexpr,
             stamps=None, STAMPS: tl.constexpr = 0):
    """A GEMM program of rank ``me``: its share of the tiles of ``A @ B`` (``M x N``), in grouped
    order; per tile the ``before_store`` steps, the store into ``dst`` and the ``signal`` steps.

    ``OWNER``: who each tile is signalled to, ``"self"`` or ``"table"`` (``ownership[t]``, the
    model's rule); ``PRODUCTION``: ``"owner-only"`` computes only owned tiles (seed 000's bug),
    ``"every-rank"`` tiles with an owner, ``""`` every tile; ``INBOX``: ``dst`` is the owner's
    inbox (``M x W*N``, column block ``me``), else this rank's own ``M x N`` copy. The slot of
    tiles and locks is this launch's epoch (``vals[0]``) mod ``SLOTS``. ``STAMPS``: timestamps per
    tile (start, GEMM done, signalled) into ``stamps`` (``syncverify.kernels.delays.stamp``).
    """
    stamp(stamps, -1, 0, STAMPS, INTERPRET)
    A, B, stride_ar, stride_am, stride_ak, stride_br, stride_bk, stride_bn = inputs
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    n_tiles = num_pid_m * num_pid_n
    a_ops, b_ops = operand_descriptors(A + me * stride_ar, B + me * stride_br, M, N, K,
                                       stride_am, stride_bk, BLOCK_M, BLOCK_N, BLOCK_K, LOADS)
    slot = tl.load(vals) % SLOTS  # vals[0] is the epoch: this launch's slot of tiles and locks
    if not INBOX:
        mine = copy_of(dst, me, TABLE) + slot * M * N
    my_status = status + me * (2 * n_tiles) * 4
    budget = max_polls + 0 * me
    for i in range(first, n_tiles, GEMM_SMS):  # persistent: this program's share, grouped order
        t = tile_of(i, num_pid_m, num_pid_n, GROUP_M)
        if OWNER == "self":
            owner = me
        else:
            owner = tl.load(ownership + t)
        if PRODUCTION == "owner-only":
            produce = owner == me
        elif PRODUCTION == "every-rank":
            produce = owner >= 0
        else:
            produce: tl.constexpr = True  # a constexpr: no branch at all
        if produce:
            n = (i - first) // GEMM_SMS  # this program's iteration, for its timestamps (not k: a loop's name)
            stamp_tile(stamps, n, t, STAMPS)
            stamp(stamps, n, 1, STAMPS, INTERPRET)
            acc, offs_m, offs_n = gemm_tile(a_ops, b_ops, t, num_pid_n, K, stride_am, stride_ak,
                                            stride_bk, stride_bn, BLOCK_M, BLOCK_N, BLOCK_K, LOADS, INTERPRET)
            stamp(stamps, n, 2, STAMPS, INTERPRET)
            lock_tile = t + slot * NLOCKS * n_tiles  # the tile's locks in this slot
            free, budget = before_store(lock, n_tiles, lock_tile, me, owner, vals, budget, max_polls,
                                        my_status + (n_tiles + t) * 4, BEFORE_STORE, HAS_BEFORE, REPORT, WORLD,
                                        TABLE, INTERPRET)
            if free != 0:
                if INBOX:  # the owner's inbox, this rank's column block, this launch's slot
                    to = copy_of(dst, owner, TABLE) + slot * M * (N * WORLD) + me * N
                    store_and_signal(to, acc, offs_m, offs_n, N * WORLD, lock_tile, me, owner, lock, n_tiles, vals,
                                     delay, SIGNAL, WORLD, TABLE, TILE_STORE_CACHE, DELAYS, NUM_WARPS, INTERPRET)
                else:
                    store_and_signal(mine, acc, offs_m, offs_n, N, lock_tile, me, owner, lock, n_tiles, vals,
                                     delay, SIGNAL, WORLD, TABLE, TILE_STORE_CACHE, DELAYS, NUM_WARPS, INTERPRET)
            stamp(stamps, n, 3, STAMPS, INTERPRET)
    stamp(stamps, -1, 1, STAMPS, INTERPRET)


@jit
def consumer(src, dst, ownership, status, lock, vals, max_polls, delay, me, first, n_tiles,
             WAIT: tl.constexpr, AFTER_LOAD: tl.constexpr, HAS_AFTER: tl.constexpr,
             SLOTS: tl.constexpr, NLOCKS: tl.constexpr, WORLD: tl.constexpr, TABLE: tl.constexpr,
             COMM_SMS: tl.constexpr, DELAYS: tl.constexpr, NUM_WARPS: tl.constexpr, INTERPRET: tl.constexpr,
             READ: tl.constexpr, WRITE: tl.constexpr, OWNED: tl.constexpr, UNITS: tl.constexpr = 1,
             GROUP_M: tl.constexpr = 1, stamps=None, STAMPS: tl.constexpr = 0):
    """A consumer program of rank ``me``: per tile the ``wait`` steps, ``READ(src, t, unit, slot,
    late, WORLD, TABLE)`` (the scenario's tile reads, after the wait-read delay ``late``), the
    ``after_load`` steps (the back-signal, the owner's reset), then ``WRITE(dst, what READ
    returned, WORLD, TABLE)``.

    ``OWNED``: the tiles rank ``me`` owns (``ownership``'s lists, in the producers' order), else
    every tile, ``COMM_SMS`` apart. A timeout is written to status row ``t`` (the tile skipped).

    ``UNITS`` > 1 (all-gather-gemm without ``after_load``): each tile is ``UNITS`` independent
    pieces of work (its column tiles of C), spread over the programs in grouped order
    (``tile_of`` with ``GROUP_M``) so that every program has work whatever the number of tiles.
    A program runs the ``wait`` before the first unit of a tile it visits and again whenever it
    comes back to a tile after another (each read follows a wait of its own program, as the
    model's one consumer CTA per tile); several programs reading one tile are copies of that
    CTA that write disjoint C, which is why ``after_load`` (a back-signal that counts readers)
    keeps ``UNITS`` = 1. ``STAMPS``: timestamps per unit (wait start, flag seen, written).
    """
    stamp(stamps, -1, 0, STAMPS, INTERPRET)
    my_status = status + me * (2 * n_tiles) * 4
    budget = max_polls + 0 * me
    slot = tl.load(vals) % SLOTS  # vals[0] is the epoch: this launch's slot of tiles and locks
    if OWNED:
        end = tl.load(ownership + n_tiles + me)
    else:
        end = n_tiles
    ok = (budget * 0 + 1).to(tl.int32)  # UNITS > 1: the outcome of this program's last wait
    last = ok * 0
    step = ok * 0 - 1
    prev = ok * 0 - 1  # the tile of this program's previous unit
    for j in range(first, end * UNITS, COMM_SMS):
        unit = 0
        if OWNED:
            t = tl.load(ownership + n_tiles + WORLD + me * tl.cdiv(n_tiles, WORLD) + j)
        elif UNITS == 1:
            t = j
        else:
            u = tile_of(j, n_tiles, UNITS, GROUP_M)
            t = u // UNITS
            unit = u % UNITS
        lock_tile = t + slot * NLOCKS * n_tiles
        n = (j - first) // COMM_SMS  # this program's iteration, for its timestamps (not k: a loop's name)
        stamp_tile(stamps, n, t, STAMPS)
        stamp(stamps, n, 1, STAMPS, INTERPRET)
        if UNITS == 1:
            ok, last, step, budget = delayed_wait(lock, n_tiles, lock_tile, t, me, vals, budget, delay, WAIT, WORLD,
                                                  TABLE, DELAYS, INTERPRET)
        else:
            if t != prev:
                ok, last, step, budget = delayed_wait(lock, n_tiles, lock_tile, t, me, vals, budget, delay, WAIT,
                                                      WORLD, TABLE, DELAYS, INTERPRET)
            prev = t
        stamp(stamps, n, 2, STAMPS, INTERPRET)
        if ok != 0:
            got = READ(src, t, unit, slot, wait_read_late(delay, me, t, NUM_WARPS, DELAYS, INTERPRET), WORLD, TABLE)
            if HAS_AFTER:  # the back-signal ("done") and the owner's reset, after the loads
                ok, last, step, budget = run_steps(lock[0], lock[1], lock[2], n_tiles, lock_tile, me, me, vals,
                                                   budget, AFTER_LOAD, WORLD, TABLE, INTERPRET)
                step = tl.where(ok != 0, step, step + len(WAIT))
            WRITE(dst, got, WORLD, TABLE)
        stamp(stamps, n, 3, STAMPS, INTERPRET)
        if ok == 0:
            timed_out(my_status + t * 4, last, step, max_polls - budget)
    stamp(stamps, -1, 1, STAMPS, INTERPRET)


@jit
def sum_tiles(src, t, unit, slot, late, WORLD: tl.constexpr, TABLE: tl.constexpr):
    """A :func:`consumer`'s ``READ`` that sums: tile ``t`` of every rank's contribution, in fp32,
    this launch's slot; returns ``(total, offs_m, offs_n)``. ``src = (buf, M, N, BLOCK_M, BLOCK_N,
    TILE_LOAD_VOLATILE, INBOX)``: every rank's copy of ``buf`` (``M x N``, all-reduce's partials),
    or with ``INBOX`` every column block of this rank's ``buf`` (``M x W*N``, its inbox)."""
    buf, M, N = src[0], src[1], src[2]
    BLOCK_M: tl.constexpr = src[3]  # a tuple's constexprs stay constexprs only when named so
    BLOCK_N: tl.constexpr = src[4]
    offs_m, offs_n = tile_offsets(t, tl.cdiv(N, BLOCK_N), BLOCK_M, BLOCK_N)
    total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if src[6]:  # INBOX: a row holds one column block per producing rank
        WIDE = N * WORLD
        for b in tl.static_range(WORLD):
            total += tl.load(buf + slot * M * WIDE + b * N + late + offs_m[:, None] * WIDE + offs_n[None, :],
                             volatile=src[5]).to(tl.float32)
    else:
        c_offs = offs_m[:, None] * N + offs_n[None, :]
        for s in tl.static_range(WORLD):
            total += tl.load(copy_of(buf, s, TABLE) + slot * M * N + late + c_offs, volatile=src[5]).to(tl.float32)
    return total, offs_m, offs_n


@jit
def comm(local, out, push, status, lock, vals, max_polls, delay, me, first, M, N,
         WAIT: tl.constexpr, AFTER_LOAD: tl.constexpr, HAS_AFTER: tl.constexpr, PUSH_SIGNAL: tl.constexpr,
         WORLD: tl.constexpr, TABLE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
         COMM_SMS: tl.constexpr, GROUP_M: tl.constexpr, TILE_STORE_CACHE: tl.constexpr,
         TILE_LOAD_VOLATILE: tl.constexpr, DELAYS: tl.constexpr, NUM_WARPS: tl.constexpr,
         INTERPRET: tl.constexpr, stamps=None, STAMPS: tl.constexpr = 0):
    """all-scatter's relay on rank ``me``: per tile of its ``M x N`` column block (the producers'
    order: tiles arrive in it) the ``wait`` steps, the read of ``local``, ``after_load``, the store
    into every rank's ``out`` (``M x W*N``, column block ``me``), then the push protocol's
    ``signal`` on the lock array ``push``. A timeout is written to status row ``t``. ``STAMPS``:
    timestamps per tile (wait start, flag seen, pushed and signalled)."""
    stamp(stamps, -1, 0, STAMPS, INTERPRET)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    n_tiles = num_pid_m * num_pid_n
    my_status = status + me * (2 * n_tiles) * 4
    my_local = copy_of(local, me, TABLE)
    budget = max_polls + 0 * me
    for j in range(first, n_tiles, COMM_SMS):
        t = tile_of(j, num_pid_m, num_pid_n, GROUP_M)
        n = (j - first) // COMM_SMS  # this program's iteration, for its timestamps (not k: a loop's name)
        stamp_tile(stamps, n, t, STAMPS)
        stamp(stamps, n, 1, STAMPS, INTERPRET)
        ok, last, step, budget = delayed_wait(lock, n_tiles, t, t, me, vals, budget, delay, WAIT, WORLD, TABLE,
                                              DELAYS, INTERPRET)
        stamp(stamps, n, 2, STAMPS, INTERPRET)
        if ok != 0:
            offs_m, offs_n = tile_offsets(t, num_pid_n, BLOCK_M, BLOCK_N)
            c_offs = offs_m[:, None] * N + offs_n[None, :]
            src = my_local + wait_read_late(delay, me, t, NUM_WARPS, DELAYS, INTERPRET)
            c = tl.load(src + c_offs, volatile=TILE_LOAD_VOLATILE)
            if HAS_AFTER:  # the back-signal ("done") and the owner's reset, after the load
                ok, last, step, budget = run_steps(lock[0], lock[1], lock[2], n_tiles, t, me, me, vals, budget,
                                                   AFTER_LOAD, WORLD, TABLE, INTERPRET)
                if ok == 0:
                    timed_out(my_status + t * 4, last, step + len(WAIT), max_polls - budget)
            g_offs = offs_m[:, None] * (N * WORLD) + me * N + offs_n[None, :]
            for d in tl.static_range(WORLD):
                tl.store(copy_of(out, d, TABLE) + g_offs, c, cache_modifier=TILE_STORE_CACHE)
            run_signal(push[0], push[1], push[2], n_tiles, t, me, me, vals, PUSH_SIGNAL, WORLD, TABLE, INTERPRET)
        else:
            timed_out(my_status + t * 4, last, step, max_polls - budget)
        stamp(stamps, n, 3, STAMPS, INTERPRET)
    stamp(stamps, -1, 1, STAMPS, INTERPRET)


@jit
def receiver(out, received, status, push, vals, max_polls, me, first, M, N,
             PUSH_WAIT: tl.constexpr, WORLD: tl.constexpr, TABLE: tl.constexpr, BLOCK_M: tl.constexpr,
             BLOCK_N: tl.constexpr, RECV_SMS: tl.constexpr, GROUP_M: tl.constexpr,
             TILE_STORE_CACHE: tl.constexpr, TILE_LOAD_VOLATILE: tl.constexpr, INTERPRET: tl.constexpr,
             stamps=None, STAMPS: tl.constexpr = 0):
    """all-scatter's reader on rank ``me``: per tile the push protocol's ``wait``, then every rank's
    block of the tile read from its own ``out`` into ``received`` (what a consumer of the gathered
    C sees; the host validates it). A timeout is written to status row ``T + t``. ``STAMPS``:
    timestamps per tile (wait start, flag seen, copied)."""
    stamp(stamps, -1, 0, STAMPS, INTERPRET)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    n_tiles = num_pid_m * num_pid_n
    my_status = status + me * (2 * n_tiles) * 4
    my_out = copy_of(out, me, TABLE)
    my_received = copy_of(received, me, TABLE)
    budget = max_polls + 0 * me
    rm = tl.arange(0, BLOCK_M)  # here, not in the loop: the compiler then folds each row offset into a mad
    rn = tl.arange(0, BLOCK_N)
    for j in range(first, n_tiles, RECV_SMS):
        t = tile_of(j, num_pid_m, num_pid_n, GROUP_M)
        n = (j - first) // RECV_SMS  # this program's iteration, for its timestamps (not k: a loop's name)
        stamp_tile(stamps, n, t, STAMPS)
        stamp(stamps, n, 1, STAMPS, INTERPRET)
        ok, last, step, budget = run_wait(push[0], push[1], push[2], n_tiles, t, me, vals, budget, PUSH_WAIT,
                                          WORLD, TABLE, INTERPRET)
        stamp(stamps, n, 2, STAMPS, INTERPRET)
        if ok != 0:
            offs_m = (t // num_pid_n) * BLOCK_M + rm
            offs_n = (t % num_pid_n) * BLOCK_N + rn
            for b in tl.static_range(WORLD):
                g_offs = offs_m[:, None] * (N * WORLD) + b * N + offs_n[None, :]
                c = tl.load(my_out + g_offs, volatile=TILE_LOAD_VOLATILE)
                tl.store(my_received + g_offs, c, cache_modifier=TILE_STORE_CACHE)
        else:
            timed_out(my_status + (n_tiles + t) * 4, last, step, max_polls - budget)
        stamp(stamps, n, 3, STAMPS, INTERPRET)
    stamp(stamps, -1, 1, STAMPS, INTERPRET)


@jit
def sender(shard, gathered, status, lock, vals, max_polls, delay, me, first, MR, K, stride_am, stride_ak,
           SIGNAL: tl.constexpr, BEFORE_STORE: tl.constexpr, HAS_BEFORE: tl.constexpr, SLOTS: tl.constexpr,
           NLOCKS: tl.constexpr, WORLD: tl.constexpr, TABLE: tl.constexpr, BLOCK_M: tl.constexpr,
           BLOCK_K: tl.constexpr, GEMM_SMS: tl.constexpr, TILE_STORE_CACHE: tl.constexpr,
           DELAYS: tl.constexpr, NUM_WARPS: tl.constexpr, INTERPRET: tl.constexpr,
           stamps=None, STAMPS: tl.constexpr = 0):
    """all-gather-gemm's sender on rank ``me``: per ``BLOCK_M``-row tile ``t`` of its ``MR x K``
    shard, the ``before_store`` steps (a timeout: status row ``T + t``, the tile unsent), the rows
    stored K chunk by K chunk into every rank's ``gathered`` (``W*K`` wide, column block ``me``, in
    rank order; some warps late before their stores), then the ``signal`` steps. ``STAMPS``:
    timestamps per tile (start, copies issued, signalled)."""
    stamp(stamps, -1, 0, STAMPS, INTERPRET)
    n_tiles = MR // BLOCK_M
    slot = tl.load(vals) % SLOTS  # vals[0] is the epoch: this launch's slot of gathered and locks
    my_status = status + me * (2 * n_tiles) * 4
    budget = max_polls + 0 * me
    rk = tl.arange(0, BLOCK_K)
    for t in range(first, n_tiles, GEMM_SMS):
        n = (t - first) // GEMM_SMS  # this program's iteration, for its timestamps (not k: a loop's name)
        stamp_tile(stamps, n, t, STAMPS)
        stamp(stamps, n, 1, STAMPS, INTERPRET)
        lock_tile = t + slot * NLOCKS * n_tiles
        free, budget = before_store(lock, n_tiles, lock_tile, me, me, vals, budget, max_polls,
                                    my_status + (n_tiles + t) * 4, BEFORE_STORE, HAS_BEFORE, True, WORLD, TABLE,
                                    INTERPRET)
        if free != 0:
            rows = t * BLOCK_M + tl.arange(0, BLOCK_M)
            for k in range(0, tl.cdiv(K, BLOCK_K)):
                a = tl.load(shard + rows[:, None] * stride_am + (k * BLOCK_K + rk)[None, :] * stride_ak)
                a = before_store_hold(a, delay, me, t, NUM_WARPS, DELAYS, INTERPRET)
                offs = (slot * MR + rows)[:, None] * (K * WORLD) + me * K + (k * BLOCK_K + rk)[None, :]
                for d in tl.static_range(WORLD):  # A and gathered share the data dtype
                    tl.store(copy_of(gathered, d, TABLE) + offs, a, cache_modifier=TILE_STORE_CACHE)
            stamp(stamps, n, 2, STAMPS, INTERPRET)
            delayed_signal(lock, n_tiles, lock_tile, t, me, me, vals, delay, SIGNAL, WORLD, TABLE, DELAYS,
                           INTERPRET)
        stamp(stamps, n, 3, STAMPS, INTERPRET)
    stamp(stamps, -1, 1, STAMPS, INTERPRET)
