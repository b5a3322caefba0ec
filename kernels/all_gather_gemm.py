"""AllGather + GEMM (``syncverify.scenarios.build.ROLES["all-gather-gemm"]``).

Each rank owns a row-shard of A (``M / W`` rows, all of K) and B (``K x N``); every rank computes
the whole ``C = A @ B`` (``M x N``). One persistent launch per rank runs the two roles of the
model, steps in the model's order (``tests/test_drift.py`` compares them):

* **senders** (``GEMM_SMS`` programs per rank) take the rank's shard tile by tile (tile ``t``:
  rows ``t * BLOCK_M ..`` of the shard), run the protocol's ``before_store`` steps, store the
  rows into *every* rank's ``gathered`` (the sender's own column block: ``gathered`` is
  ``M / W x W * K`` per rank, block ``b`` holding rank ``b``'s shard) and run the ``signal``
  steps (``to = "owner"`` is the sender itself: ``syncverify.scenarios.build.signal_owner``);
* **GEMM** programs (``COMM_SMS`` per rank) run, for tile ``t``, the ``wait`` steps (for every
  remote shard's signal, before the K-loop), read tile ``t`` of every block of their own
  ``gathered`` in the K-loop, run ``after_load`` and store the C rows of tile ``t`` of every
  shard (rows ``b * M / W + t * BLOCK_M ..``) into their own ``out``.

The GEMM stacks tile ``t`` of the ``W`` blocks into one ``ROWS x BLOCK_K`` operand (``ROWS``:
``W * BLOCK_M`` rounded up to a power of two): one masked load per block, each of which touches
that block's rows only, so the trace sees one load per block as the model does. With several
column tiles (``N > BLOCK_N``) the K-loop runs once per column tile; every tile still runs the
model's order, whatever N: when the protocol has ``after_load`` steps, the C of every column
tile but the last is kept in ``parked`` (this program's private rows, which no other program
reads) until ``after_load`` has run, and only then are the C rows stored into ``out``
(``tests/test_drift.py`` runs several column tiles and K chunks). Without ``after_load`` steps
each column tile's C goes straight to ``out``: there is nothing to order it after.

``gemm_only`` (``syncverify bench``'s GEMM part) makes every program of the grid a GEMM program
that reads ``gathered`` as the caller filled it (``syncverify.kernels.bench.timing.FusedRun``).

Every wait is bounded: a GEMM program that gives up writes ``(1, last value, step, polls)`` into
status row ``t`` and skips the tile (its C rows stay poisoned); a sender whose ``before_store``
wait gives up writes row ``T + t`` and leaves the tile unsent (the GEMM's wait then times out).
"""

from __future__ import annotations

from syncverify.kernels._deps import tl
from syncverify.kernels._jit import jit
from syncverify.kernels.build import BuiltKernel, delay_table_tensor, launch_values, once_per_build
from syncverify.kernels.delays import (
    SITE_BEFORE_STORE,
    SITE_WAIT_READ,
    delay_ns,
    delay_warp_mask,
    wait_tile,
    warp_deadline,
    warp_sleep_here,
)
from syncverify.kernels.gemm_all_scatter import timed_out
from syncverify.kernels.steps import program_role, rank_base, role_rank, run_steps, wrap_plan
from syncverify.kernels.tile import delayed_signal, delayed_wait


def buffers(built: BuiltKernel) -> dict[str, tuple[tuple[int, ...], str]]:
    """The symmetric buffers of one launch: name -> (shape per rank, ``data`` or ``lock``).
    ``gathered`` holds ``slots`` slots of ``M / W`` rows (the published buffer rotates with them);
    ``parked`` is private to each rank's GEMM programs (:func:`parked_shape`)."""
    c = built.config
    return {"gathered": ((c.m_per_rank * built.plan.slots, c.world_size * c.k), "data"),
            "out": ((c.m, c.n), "data"), "locks": ((built.lock_count, c.tiles), "lock"),
            "parked": (parked_shape(built), "data")}


def parked_shape(built: BuiltKernel) -> tuple[int, int]:
    """Rows x columns per rank of ``parked``: each GEMM program's ``ROWS x N`` C rows, held
    until ``after_load`` has run; one element when nothing is held (no ``after_load`` steps, or
    one column tile)."""
    c = built.config
    if not built.plan.after_load or c.n <= c.block_n:
        return (1, 1)
    return (c.comm_sms * stacked_rows(c.world_size, c.block_m), c.n)


def stacked_rows(world_size: int, block_m: int) -> int:
    """Rows of the GEMM's stacked operand: ``world_size * block_m`` up to a power of two."""
    rows = world_size * block_m
    return 1 << (rows - 1).bit_length()


@jit
def send_tile(A_shard, gathered, gathered_table, gathered_rank_stride, t, me, slot_rows, MR, K, stride_am, stride_ak,
              delay_seed, delay_pct, delay_max_ns, delay_sites, iteration, delay_table,
              WORLD: tl.constexpr, TABLE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
              TILE_STORE_CACHE: tl.constexpr, DELAYS: tl.constexpr, NUM_WARPS: tl.constexpr,
              INTERPRET: tl.constexpr):
    """Store tile ``t`` of this rank's shard into every rank's ``gathered`` (block ``me``), K chunk
    by K chunk, every rank's copy in rank order. Delays: some warps late before their stores."""
    rows = t * BLOCK_M + tl.arange(0, BLOCK_M)
    rk = tl.arange(0, BLOCK_K)
    WIDE = K * WORLD
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(A_shard + rows[:, None] * stride_am + (k * BLOCK_K + rk)[None, :] * stride_ak)
        if DELAYS:
            ns = delay_ns(delay_seed, SITE_BEFORE_STORE, me, t, iteration, delay_pct, delay_max_ns, delay_sites,
                          delay_table)
            warps = delay_warp_mask(delay_seed, SITE_BEFORE_STORE, me, t, iteration, NUM_WARPS, delay_pct,
                                    delay_table)
            a = wait_tile(a, warp_deadline(ns, warps, INTERPRET), "before-store", INTERPRET)
        offs = (slot_rows + rows)[:, None] * WIDE + me * K + (k * BLOCK_K + rk)[None, :]
        for d in tl.static_range(WORLD):
            dst = rank_base(gathered, gathered_table, gathered_rank_stride, d, TABLE)
            tl.store(dst + offs, a, cache_modifier=TILE_STORE_CACHE)  # A and gathered share the data dtype


@jit
def gathered_gemm(src, B_rank, t, pn, slot_rows, K, stride_bk, stride_bn, late,
                  WORLD: tl.constexpr, ROWS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, TILE_LOAD_VOLATILE: tl.constexpr, INTERPRET: tl.constexpr):
    """The C rows of tile ``t`` of every shard, column tile ``pn``: a ``ROWS x BLOCK_N`` fp32
    accumulator whose row ``b * BLOCK_M + i`` is row ``i`` of tile ``t`` of rank ``b``'s shard.
    Each K chunk loads tile ``t`` of each block of ``src`` (this rank's ``gathered``) once, masked
    to its rows; a masked-off lane points into the same block, so every load stays in one block."""
    r = tl.arange(0, ROWS)
    i = r % BLOCK_M
    rk = tl.arange(0, BLOCK_K)
    offs_n = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    WIDE = K * WORLD
    acc = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.zeros((ROWS, BLOCK_K), dtype=tl.float32)
        for b in tl.static_range(WORLD):
            offs = (slot_rows + t * BLOCK_M + i)[:, None] * WIDE + b * K + (k * BLOCK_K + rk)[None, :]
            mine = (r // BLOCK_M == b)[:, None] & (rk < BLOCK_K)[None, :]
            a += tl.load(src + late + offs, mask=mine, other=0.0, volatile=TILE_LOAD_VOLATILE).to(tl.float32)
        bk = tl.load(B_rank + (k * BLOCK_K + rk)[:, None] * stride_bk + offs_n[None, :] * stride_bn)
        if INTERPRET:  # the interpreter's dot mishandles bf16: multiply in fp32
            acc = tl.dot(a, bk.to(tl.float32), acc)
        else:
            acc = tl.dot(a.to(bk.dtype), bk, acc)
    return acc, offs_n


@jit(do_not_specialize=["rank", "max_polls", "delay_seed", "delay_pct", "delay_max_ns", "delay_sites"])
def all_gather_gemm_kernel(
    # inputs: rank r's shard of A (M / W x K) and its B (K x N)
    A, B,
    # symmetric heap: gathered [slots * M / W, W * K] (block b: rank b's shard), out [M, N], locks [L, T];
    # parked [COMM_SMS * ROWS, N]: the GEMM programs' C rows held until after_load (parked_shape)
    gathered, gathered_table, out, out_table, locks, locks_table, parked,
    # this launch's status rows [WORLD, 2 * T, 4]: GEMM programs row t, senders' before_store row T + t
    status,
    # sizes (M is the whole of A; each shard has M / W rows)
    M, N, K,
    # strides; *_rank strides step between virtual ranks' inputs and heap regions
    stride_ar, stride_am, stride_ak, stride_br, stride_bk, stride_bn,
    gathered_rank_stride, out_rank_stride, locks_rank_stride, parked_rank_stride,
    # run-time parameters
    rank, vals, max_polls, delay_seed, delay_pct, delay_max_ns, delay_sites, delay_table,
    # meta-parameters
    WORLD: tl.constexpr, VIRTUAL: tl.constexpr, TABLE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, ROWS: tl.constexpr,
    GEMM_SMS: tl.constexpr, COMM_SMS: tl.constexpr,
    SIGNAL: tl.constexpr, WAIT: tl.constexpr,
    TILE_STORE_CACHE: tl.constexpr, TILE_LOAD_VOLATILE: tl.constexpr,
    DELAYS: tl.constexpr, NUM_WARPS: tl.constexpr, ORDER: tl.constexpr,
    INTERPRET: tl.constexpr,
    BEFORE_STORE: tl.constexpr = (), AFTER_LOAD: tl.constexpr = (), HAS_BEFORE: tl.constexpr = False,
    HAS_AFTER: tl.constexpr = False, SLOTS: tl.constexpr = 1, NLOCKS: tl.constexpr = 1,
    GEMM_ONLY: tl.constexpr = False,
):
    # ----- role and rank: senders, then GEMM programs ------------------------------------------
    pid = tl.program_id(0)
    # the delays' iteration is the launch's epoch, read from the device-side operand ring (slot 0),
    # so a captured CUDA graph replays launches whose iteration advances (syncverify.stress.runner)
    iteration = tl.load(vals)
    RANKS: tl.constexpr = WORLD if VIRTUAL else 1
    if GEMM_ONLY:  # bench's GEMM part: every program multiplies, gathered was filled beforehand
        is_sender = pid < 0
        index = pid
    else:
        is_sender, index = program_role(pid, ORDER, GEMM_SMS, COMM_SMS, RANKS)
    MR = M // WORLD  # rows of one shard
    n_tiles = MR // BLOCK_M  # tiles of one shard (the lock tiles)
    num_pid_n = N // BLOCK_N
    slot = tl.load(vals) % SLOTS  # vals[0] is the epoch: this launch's slot of gathered and locks
    slot_rows = slot * MR

    if is_sender:
        # ----- sender: this rank's shard into every rank's gathered, then signal ----------------
        me, first = role_rank(index, rank, GEMM_SMS, VIRTUAL)
        my_status = status + me * (2 * n_tiles) * 4
        budget = max_polls + 0 * me
        for t in range(first, n_tiles, GEMM_SMS):
            lock_tile = t + slot * NLOCKS * n_tiles
            free = 1
            if HAS_BEFORE:  # e.g. wait until every GEMM is done with the previous call's shard
                free, last, step, budget = run_steps(locks, locks_table, locks_rank_stride, n_tiles, lock_tile,
                                                     me, me, vals, budget, BEFORE_STORE, WORLD, TABLE, INTERPRET)
                if free == 0:
                    timed_out(my_status + (n_tiles + t) * 4, last, step, max_polls - budget)
            if free != 0:
                send_tile(A + me * stride_ar, gathered, gathered_table, gathered_rank_stride, t, me, slot_rows, MR,
                          K, stride_am, stride_ak, delay_seed, delay_pct, delay_max_ns, delay_sites, iteration, delay_table,
                          WORLD, TABLE, BLOCK_M, BLOCK_K, TILE_STORE_CACHE, DELAYS, NUM_WARPS, INTERPRET)
                delayed_signal(locks, locks_table, locks_rank_stride, n_tiles, lock_tile, t, me, me, vals, delay_seed,
                               delay_pct, delay_max_ns, delay_sites, iteration, delay_table, SIGNAL, WORLD, TABLE, DELAYS,
                               INTERPRET)
    else:
        # ----- GEMM: wait for every shard's tile t, K-loop over the gathered blocks, store C ----
        me, first = role_rank(index, rank, COMM_SMS, VIRTUAL)
        my_status = status + me * (2 * n_tiles) * 4
        my_gathered = rank_base(gathered, gathered_table, gathered_rank_stride, me, TABLE)
        my_out = rank_base(out, out_table, out_rank_stride, me, TABLE)
        B_rank = B + me * stride_br
        budget = max_polls + 0 * me
        r = tl.arange(0, ROWS)
        valid = r < WORLD * BLOCK_M
        for t in range(first, n_tiles, COMM_SMS):
            lock_tile = t + slot * NLOCKS * n_tiles
            ok, last, step, budget = delayed_wait(locks, locks_table, locks_rank_stride, n_tiles, lock_tile, t, me, vals,
                                                 budget, delay_seed, delay_pct, delay_max_ns, delay_sites, iteration,
                                                 delay_table, WAIT, WORLD, TABLE, DELAYS, INTERPRET)
            if ok != 0:
                late = 0
                if DELAYS:
                    ns = delay_ns(delay_seed, SITE_WAIT_READ, me, t, iteration, delay_pct, delay_max_ns,
                                  delay_sites, delay_table)
                    warps = delay_warp_mask(delay_seed, SITE_WAIT_READ, me, t, iteration, NUM_WARPS, delay_pct,
                                            delay_table)
                    late = warp_sleep_here(ns, warps, "wait-read", INTERPRET)
                # C row of stacked row r: row r % BLOCK_M of tile t of shard r // BLOCK_M (padding
                # rows point at shard 0's and are masked off)
                c_rows = tl.where(valid, (r // BLOCK_M) * MR + t * BLOCK_M + r % BLOCK_M, t * BLOCK_M)
                if HAS_AFTER:
                    # The model's order: every load of gathered, after_load, then the C stores; the C
                    # of every column tile but the last is kept in this program's rows of parked. No CTA
                    # barrier is needed around them: a row is written and read back through the
                    # same pointer tensor (the same layout: each thread reads its own writes), and
                    # a whole K-loop, whose shared-memory dot operands Triton fences with bar.sync,
                    # lies between every write and its read and every read and the next tile's write.
                    my_parked = parked + me * parked_rank_stride + first * ROWS * N + r[:, None] * N
                    for pn in range(0, num_pid_n - 1):
                        acc, offs_n = gathered_gemm(my_gathered, B_rank, t, pn, slot_rows, K, stride_bk, stride_bn,
                                                    late, WORLD, ROWS, BLOCK_M, BLOCK_N, BLOCK_K, TILE_LOAD_VOLATILE,
                                                    INTERPRET)
                        tl.store(my_parked + offs_n[None, :], acc.to(out.dtype.element_ty))
                    acc, offs_n = gathered_gemm(my_gathered, B_rank, t, num_pid_n - 1, slot_rows, K, stride_bk,
                                                stride_bn, late, WORLD, ROWS, BLOCK_M, BLOCK_N, BLOCK_K,
                                                TILE_LOAD_VOLATILE, INTERPRET)
                    # the back-signal ("done") and the owner's reset, once every block was read
                    ok, last, step, budget = run_steps(locks, locks_table, locks_rank_stride, n_tiles, lock_tile,
                                                       me, me, vals, budget, AFTER_LOAD, WORLD, TABLE, INTERPRET)
                    step = tl.where(ok != 0, step, step + len(WAIT))
                    tl.store(my_out + c_rows[:, None] * N + offs_n[None, :], acc.to(out.dtype.element_ty),
                             mask=valid[:, None] & (offs_n < N)[None, :])
                    for pn in range(0, num_pid_n - 1):
                        offs_n = pn * BLOCK_N + tl.arange(0, BLOCK_N)
                        tl.store(my_out + c_rows[:, None] * N + offs_n[None, :], tl.load(my_parked + offs_n[None, :]),
                                 mask=valid[:, None] & (offs_n < N)[None, :])
                else:
                    for pn in range(0, num_pid_n):
                        acc, offs_n = gathered_gemm(my_gathered, B_rank, t, pn, slot_rows, K, stride_bk, stride_bn,
                                                    late, WORLD, ROWS, BLOCK_M, BLOCK_N, BLOCK_K, TILE_LOAD_VOLATILE,
                                                    INTERPRET)
                        tl.store(my_out + c_rows[:, None] * N + offs_n[None, :], acc.to(out.dtype.element_ty),
                                 mask=valid[:, None] & (offs_n < N)[None, :])
            if ok == 0:
                timed_out(my_status + t * 4, last, step, max_polls - budget)


@once_per_build
def meta_parameters(built: BuiltKernel) -> dict:
    """The ``tl.constexpr`` arguments of :func:`all_gather_gemm_kernel` for a built kernel."""
    c, plan = built.config, built.plan
    return dict(
        WORLD=c.world_size, VIRTUAL=c.virtual, TABLE=c.table,
        BLOCK_M=c.block_m, BLOCK_N=c.block_n, BLOCK_K=c.block_k, ROWS=stacked_rows(c.world_size, c.block_m),
        # the GEMM part (``gemm_only``): the grid's ``gemm_sms`` programs per rank all multiply
        GEMM_SMS=c.gemm_sms, COMM_SMS=c.gemm_sms if c.gemm_only else c.comm_sms,
        SIGNAL=wrap_plan(plan.signal), WAIT=wrap_plan(plan.wait),
        TILE_STORE_CACHE=plan.tile_store_cache, TILE_LOAD_VOLATILE=plan.tile_load_volatile,
        DELAYS=c.delays, NUM_WARPS=c.num_warps, ORDER=c.order, INTERPRET=c.interpret,
        BEFORE_STORE=wrap_plan(plan.before_store), AFTER_LOAD=wrap_plan(plan.after_load),
        HAS_BEFORE=bool(plan.before_store), HAS_AFTER=bool(plan.after_load),
        SLOTS=plan.slots, NLOCKS=len(plan.locks), GEMM_ONLY=c.gemm_only,
    )


def launch_all_gather_gemm(built: BuiltKernel, heap, A, B, status, *, rank: int = 0, epoch: int = 0,
                           max_polls: int = 1 << 20, delay_seed: int = 0,
                           delay_pct: int = 0, delay_max_ns: int = 1, delay_sites: int = -1,
                           delay_table=None, vals=None, compile_only: bool = False):
    """Launch one iteration: ``heap`` holds :func:`buffers` (``gathered``, ``out``, ``locks``, ``parked``).

    ``A``/``B`` are ``[world, M/W, K]``/``[world, K, N]`` (virtual ranks) or this rank's
    ``[1, ...]``; ``status`` is ``[world, 2 * tiles, 4]`` int32, zeroed by the caller.
    """
    c = built.config
    gathered, out, locks, parked = heap["gathered"], heap["out"], heap["locks"], heap["parked"]
    virtual_inputs = A.shape[0] > 1
    return all_gather_gemm_kernel.launcher((c.grid,), interpret=c.interpret, compile_only=compile_only)(
        A, B,
        gathered.local, gathered.table, out.local, out.table, locks.local, locks.table, parked.local,
        status,
        c.m, c.n, c.k,
        A.stride(0) if virtual_inputs else 0, A.stride(1), A.stride(2),
        B.stride(0) if virtual_inputs else 0, B.stride(1), B.stride(2),
        gathered.rank_stride, out.rank_stride, locks.rank_stride, parked.rank_stride,
        rank, launch_values(built, epoch, vals, A.device), max_polls, delay_seed, delay_pct,
        max(delay_max_ns, 1), delay_sites, delay_table_tensor(delay_table, A.device),
        num_warps=c.num_warps, num_stages=c.num_stages,
        **meta_parameters(built),
    )
