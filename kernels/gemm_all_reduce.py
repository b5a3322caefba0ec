"""GEMM + one-shot all-reduce, producer/consumer (the shape of seed 000, iris example 17).

Each rank holds a K-slice of A and B. In one persistent launch per rank:

* **producers** (``GEMM_SMS`` programs per rank) compute, tile by tile, the partial product of the
  rank's K-slice into ``partial`` (``local_C``) on the rank's heap, then run the protocol's
  ``signal`` steps;
* **consumers** (``COMM_SMS`` programs per rank) take the tiles the rank owns (``striding``:
  ``t % W``; ``block``: contiguous ranges), run the protocol's ``wait`` steps, read every rank's
  partial of the tile, sum them and write the sum into every rank's ``out`` (C).

``production="owner-only"`` reproduces seed 000's distribution bug: a rank computes partials
only for the tiles it owns, so the other ranks' partials of a tile are never written.

The protocol enters only as the ``SIGNAL``/``WAIT`` plans (``syncverify.kernels.plan``), the tile store's
cache modifier and the tile reads' volatility. A consumer whose wait times out writes
``(1, last value seen, step, polls)`` into ``status`` and skips the tile (its C stays poisoned):
a hang is reported, never hung.
"""

from __future__ import annotations

from syncverify.kernels._deps import tl
from syncverify.kernels._jit import jit
from syncverify.kernels.build import BuiltKernel, delay_table_tensor, launch_values, once_per_build, ownership_tensor
from syncverify.kernels.delays import (
    SITE_WAIT_READ,
    delay_ns,
    delay_warp_mask,
    warp_sleep_here,
)
from syncverify.kernels.steps import program_role, rank_base, role_rank, run_steps, wrap_plan
from syncverify.kernels.tile import (
    delayed_wait,
    gemm_tile,
    operand_descriptors,
    store_and_signal,
    tile_of,
    use_scratch_allocator,
)


@jit(do_not_specialize=["rank", "max_polls", "delay_seed", "delay_pct", "delay_max_ns", "delay_sites"])
def gemm_all_reduce_kernel(
    # inputs: rank r's K-slice of A (M x K) and B (K x N)
    A, B,
    # symmetric heap: partial tiles (local_C), outputs (C), locks [L, T]: base + address table
    partial, partial_table, out, out_table, locks, locks_table,
    # who owns which tile: syncverify.protocols.rules.ownership_table, computed on the host (one rule)
    ownership,
    # this launch's status rows [WORLD, 2 * T, 4]: (timed out, last value, step, polls); consumers row t,
    # producers whose before_store wait timed out row T + t
    status,
    # sizes (K is one rank's slice)
    M, N, K,
    # strides; *_rank strides step between virtual ranks' inputs and heap regions
    stride_ar, stride_am, stride_ak, stride_br, stride_bk, stride_bn,
    partial_rank_stride, out_rank_stride, locks_rank_stride,
    # run-time parameters
    rank, vals, max_polls, delay_seed, delay_pct, delay_max_ns, delay_sites, delay_table,
    # meta-parameters
    WORLD: tl.constexpr, VIRTUAL: tl.constexpr, TABLE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GEMM_SMS: tl.constexpr, COMM_SMS: tl.constexpr,
    LOADS: tl.constexpr, GROUP_M: tl.constexpr,
    PRODUCTION: tl.constexpr,
    SIGNAL: tl.constexpr, WAIT: tl.constexpr,
    TILE_STORE_CACHE: tl.constexpr, TILE_LOAD_VOLATILE: tl.constexpr,
    DELAYS: tl.constexpr, NUM_WARPS: tl.constexpr, ORDER: tl.constexpr,
    INTERPRET: tl.constexpr,
    # the producer's steps before its store, the consumer's after its loads; slots (epoch mod SLOTS)
    BEFORE_STORE: tl.constexpr = (), AFTER_LOAD: tl.constexpr = (), HAS_BEFORE: tl.constexpr = False,
    HAS_AFTER: tl.constexpr = False, SLOTS: tl.constexpr = 1, NLOCKS: tl.constexpr = 1,
):
    # ----- role and rank ---------------------------------------------------------------------
    pid = tl.program_id(0)
    # the delays' iteration is the launch's epoch, read from the device-side operand ring (slot 0),
    # so a captured CUDA graph replays launches whose iteration advances (syncverify.stress.runner)
    iteration = tl.load(vals)
    RANKS: tl.constexpr = WORLD if VIRTUAL else 1
    is_producer, index = program_role(pid, ORDER, GEMM_SMS, COMM_SMS, RANKS)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    n_tiles = num_pid_m * num_pid_n
    rm = tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)

    if is_producer:
        # ----- producer: partial GEMM tiles of this rank's K-slice -------------------------------
        me, first = role_rank(index, rank, GEMM_SMS, VIRTUAL)
        a_ops, b_ops = operand_descriptors(A + me * stride_ar, B + me * stride_br, M, N, K,
                                           stride_am, stride_bk, BLOCK_M, BLOCK_N, BLOCK_K, LOADS)
        slot = tl.load(vals) % SLOTS  # vals[0] is the epoch: this launch's slot of tiles and locks
        my_partial = rank_base(partial, partial_table, partial_rank_stride, me, TABLE) + slot * M * N
        my_status = status + me * (2 * n_tiles) * 4
        budget = max_polls + 0 * me
        for i in range(first, n_tiles, GEMM_SMS):  # persistent: this program's share, grouped order
            t = tile_of(i, num_pid_m, num_pid_n, GROUP_M)
            owner = tl.load(ownership + t)
            if PRODUCTION == "owner-only":
                produce = owner == me
            else:
                produce = owner >= 0
            if produce:
                acc, offs_m, offs_n = gemm_tile(a_ops, b_ops, t, num_pid_n, K, stride_am, stride_ak,
                                                stride_bk, stride_bn, BLOCK_M, BLOCK_N, BLOCK_K, LOADS,
                                                INTERPRET)
                lock_tile = t + slot * NLOCKS * n_tiles  # the tile's locks in this slot
                free = 1
                if HAS_BEFORE:  # wait until the buffer's readers are done (row T + t on a timeout)
                    free, last, step, budget = run_steps(locks, locks_table, locks_rank_stride, n_tiles, lock_tile,
                                                         me, owner, vals, budget, BEFORE_STORE, WORLD, TABLE,
                                                         INTERPRET)
                    if free == 0:
                        row = my_status + (n_tiles + t) * 4
                        tl.store(row, 1)
                        tl.store(row + 1, last)
                        tl.store(row + 2, step)
                        tl.store(row + 3, max_polls - budget)
                if free != 0:
                    store_and_signal(my_partial, acc, offs_m, offs_n, N, lock_tile, me, owner, locks, locks_table,
                                     locks_rank_stride, n_tiles, vals, delay_seed, delay_pct, delay_max_ns,
                                     delay_sites, iteration, delay_table, SIGNAL, WORLD, TABLE, TILE_STORE_CACHE, DELAYS,
                                     NUM_WARPS, INTERPRET)
    else:
        # ----- consumer: wait, sum every rank's partial, write every rank's C --------------------
        me, first = role_rank(index, rank, COMM_SMS, VIRTUAL)
        my_status = status + me * (2 * n_tiles) * 4
        budget = max_polls + 0 * me
        slot = tl.load(vals) % SLOTS
        for j in range(first, tl.load(ownership + n_tiles + me), COMM_SMS):
            t = tl.load(ownership + n_tiles + WORLD + me * tl.cdiv(n_tiles, WORLD) + j)
            lock_tile = t + slot * NLOCKS * n_tiles
            ok, last, step, budget = delayed_wait(locks, locks_table, locks_rank_stride, n_tiles, lock_tile, t, me, vals,
                                                 budget, delay_seed, delay_pct, delay_max_ns, delay_sites, iteration,
                                                 delay_table, WAIT, WORLD, TABLE, DELAYS, INTERPRET)
            if ok != 0:
                offs_m = (t // num_pid_n) * BLOCK_M + rm
                offs_n = (t % num_pid_n) * BLOCK_N + rn
                c_offs = offs_m[:, None] * N + offs_n[None, :]
                late = 0
                if DELAYS:
                    ns = delay_ns(delay_seed, SITE_WAIT_READ, me, t, iteration, delay_pct, delay_max_ns,
                                  delay_sites, delay_table)
                    warps = delay_warp_mask(delay_seed, SITE_WAIT_READ, me, t, iteration, NUM_WARPS, delay_pct,
                                            delay_table)
                    late = warp_sleep_here(ns, warps, "wait-read", INTERPRET)
                total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                for s in tl.static_range(WORLD):
                    src = rank_base(partial, partial_table, partial_rank_stride, s, TABLE) + slot * M * N + late
                    total += tl.load(src + c_offs, volatile=TILE_LOAD_VOLATILE).to(tl.float32)
                if HAS_AFTER:  # the back-signal ("done") and the owner's reset, after the loads
                    ok, last, step, budget = run_steps(locks, locks_table, locks_rank_stride, n_tiles, lock_tile,
                                                       me, me, vals, budget, AFTER_LOAD, WORLD, TABLE, INTERPRET)
                    step = tl.where(ok != 0, step, step + len(WAIT))
                for d in tl.static_range(WORLD):
                    dst = rank_base(out, out_table, out_rank_stride, d, TABLE)
                    tl.store(dst + c_offs, total.to(out.dtype.element_ty))
            if ok == 0:
                row = my_status + t * 4
                tl.store(row, 1)
                tl.store(row + 1, last)
                tl.store(row + 2, step)
                tl.store(row + 3, max_polls - budget)


@once_per_build
def meta_parameters(built: BuiltKernel) -> dict:
    """The ``tl.constexpr`` arguments of :func:`gemm_all_reduce_kernel` for a built kernel."""
    c, plan = built.config, built.plan
    return dict(
        WORLD=c.world_size, VIRTUAL=c.virtual, TABLE=c.table,
        BLOCK_M=c.block_m, BLOCK_N=c.block_n, BLOCK_K=c.block_k,
        GEMM_SMS=c.gemm_sms, COMM_SMS=c.comm_sms,
        LOADS=c.loads, GROUP_M=c.group_m,
        PRODUCTION=c.production,
        SIGNAL=wrap_plan(plan.signal), WAIT=wrap_plan(plan.wait),
        TILE_STORE_CACHE=plan.tile_store_cache, TILE_LOAD_VOLATILE=plan.tile_load_volatile,
        DELAYS=c.delays, NUM_WARPS=c.num_warps, ORDER=c.order,
        INTERPRET=c.interpret,
        BEFORE_STORE=wrap_plan(plan.before_store), AFTER_LOAD=wrap_plan(plan.after_load),
        HAS_BEFORE=bool(plan.before_store), HAS_AFTER=bool(plan.after_load),
        SLOTS=plan.slots, NLOCKS=len(plan.locks),
    )


def all_reduce_arguments(built: BuiltKernel, heap, A, B, status, *, rank: int = 0, epoch: int = 0,
                         max_polls: int = 1 << 20, delay_seed: int = 0, delay_pct: int = 0, delay_max_ns: int = 1,
                         delay_sites: int = -1, delay_table=None, vals=None) -> tuple[tuple, dict]:
    """The positional arguments and meta-parameters of one launch of :func:`gemm_all_reduce_kernel`
    (:func:`launch_all_reduce`'s; the kernel front end's cross-check launches the same)."""
    c = built.config
    partial, out, locks = heap["partial"], heap["out"], heap["locks"]
    virtual_inputs = A.shape[0] > 1
    args = (
        A, B,
        partial.local, partial.table, out.local, out.table, locks.local, locks.table,
        ownership_tensor(c, A.device),
        status,
        c.m, c.n, c.k_per_rank,
        A.stride(0) if virtual_inputs else 0, A.stride(1), A.stride(2),
        B.stride(0) if virtual_inputs else 0, B.stride(1), B.stride(2),
        partial.rank_stride, out.rank_stride, locks.rank_stride,
        rank, launch_values(built, epoch, vals, A.device), max_polls, delay_seed, delay_pct,
        max(delay_max_ns, 1), delay_sites, delay_table_tensor(delay_table, A.device),
    )
    return args, meta_parameters(built)


def launch_all_reduce(built: BuiltKernel, heap, A, B, status, *, rank: int = 0, epoch: int = 0,
                      max_polls: int = 1 << 20, delay_seed: int = 0,
                      delay_pct: int = 0, delay_max_ns: int = 1, delay_sites: int = -1,
                      delay_table=None, vals=None, compile_only: bool = False):
    """Launch one iteration: ``heap`` holds ``partial``, ``out`` and ``locks``.

    ``A``/``B`` are ``[world, M, K/W]``/``[world, K/W, N]`` (virtual ranks) or this rank's
    ``[1, ...]``; ``status`` is ``[world, 2 * tiles, 4]`` int32, zeroed by the caller.
    Returns what the launcher returns (the compiled kernel, on the GPU).
    """
    c = built.config
    args, meta = all_reduce_arguments(built, heap, A, B, status, rank=rank, epoch=epoch, max_polls=max_polls,
                                      delay_seed=delay_seed, delay_pct=delay_pct, delay_max_ns=delay_max_ns,
                                      delay_sites=delay_sites, delay_table=delay_table, vals=vals)
    if not c.interpret:
        use_scratch_allocator()
    return gemm_all_reduce_kernel.launcher((c.grid,), interpret=c.interpret, compile_only=compile_only)(
        *args, num_warps=c.num_warps, num_stages=c.num_stages, **meta)
