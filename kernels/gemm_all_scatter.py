"""GEMM + all-scatter with workgroup specialization (the shape of seed 001, iris example 10).

Each rank holds A (``M x K``) and its column block of B (``K x N/W``). In one persistent launch
per rank:

* the first ``GEMM_SMS`` programs (**producers**) compute the tiles of the rank's column block
  of C into ``local`` (on the rank's heap) and publish each through the protocol's ``signal``
  steps (normally into the rank's own lock: seed 001 synchronizes within one GPU);
* the other ``COMM_SMS`` programs (**consumers**) run the protocol's ``wait`` steps for each
  tile, read it from ``local`` and push it into every rank's copy of the global C (``out``, at
  the rank's column offset), self included;
* then a closing cross-rank handshake, which is not the protocol under test and is written to
  be safe: CTA barrier, ``fence.acq_rel.sys``, release ``atomic_add`` on every rank's ``done``
  counter, acquire poll of the rank's own counter until ``W * COMM_SMS * (epoch + 1)`` (never
  reset). Its timeout is reported in the status row after the tiles'. The interpreter runs
  programs one after another, so no program can wait for a later one: ``HANDSHAKE=False`` there.

``owner`` targets (``to = "owner"``) mean the rank itself here: the consumer of a rank's tile
runs on that rank.
"""

from __future__ import annotations

from syncverify.kernels._deps import tl
from syncverify.kernels._jit import jit
from syncverify.kernels.build import BuiltKernel, launch_values
from syncverify.kernels.delays import (
    SITE_BEFORE_WAIT,
    SITE_WAIT_READ,
    delay_ns,
    delay_warp_mask,
    sleep,
    warp_sleep_here,
)
from syncverify.kernels.plan import make_step
from syncverify.kernels.primitives import fence
from syncverify.kernels.steps import (
    bounded_poll,
    program_role,
    rank_base,
    run_wait,
    wrap_plan,
    wrap_step,
)
from syncverify.kernels.tile import gemm_tile, store_and_signal

# The handshake's own poll, as a wait step: acquire atomic_add(0) at sys scope until >= target
# (the target is the run-time argument handshake_target, not a field).
_HANDSHAKE_POLL = wrap_step(make_step(op="await", read="atomic_add", sem="acquire", scope="sys",
                                      source="self", until=">="))


@jit(do_not_specialize=["rank", "max_polls", "delay_seed", "delay_pct", "delay_max_ns", "delay_sites",
                         "iteration", "handshake_target"])
def gemm_all_scatter_kernel(
    # inputs: A (M x K, the same on every rank) and this rank's column block of B (K x N/W)
    A, B,
    # symmetric heap: local C tiles, global C, locks [L, T], handshake counters: base + table
    local, local_table, out, out_table, locks, locks_table, done, done_table,
    # this launch's status rows [WORLD, T + 1, 4]: (timed out, last value, wait step, polls)
    status,
    # sizes (N is one rank's column block; the global C is N * WORLD wide)
    M, N, K,
    # strides; *_rank strides step between virtual ranks' inputs and heap regions
    stride_ar, stride_am, stride_ak, stride_br, stride_bk, stride_bn,
    local_rank_stride, out_rank_stride, locks_rank_stride, done_rank_stride,
    # run-time parameters
    rank, vals, max_polls, delay_seed, delay_pct, delay_max_ns, delay_sites, iteration,
    handshake_target,
    # meta-parameters
    WORLD: tl.constexpr, VIRTUAL: tl.constexpr, TABLE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GEMM_SMS: tl.constexpr, COMM_SMS: tl.constexpr,
    SIGNAL: tl.constexpr, WAIT: tl.constexpr, HANDSHAKE_POLL: tl.constexpr,
    TILE_STORE_CACHE: tl.constexpr, TILE_LOAD_VOLATILE: tl.constexpr,
    DELAYS: tl.constexpr, NUM_WARPS: tl.constexpr, ORDER: tl.constexpr,
    HANDSHAKE: tl.constexpr, INTERPRET: tl.constexpr,
):
    # ----- role and rank ---------------------------------------------------------------------
    pid = tl.program_id(0)
    RANKS: tl.constexpr = WORLD if VIRTUAL else 1
    is_producer, index = program_role(pid, ORDER, GEMM_SMS, COMM_SMS, RANKS)
    num_pid_n = (N + BLOCK_N - 1) // BLOCK_N
    n_tiles = ((M + BLOCK_M - 1) // BLOCK_M) * num_pid_n
    rm = tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)

    if is_producer:
        # ----- producer (GEMM programs): tiles of this rank's column block ----------------------
        if VIRTUAL:
            me = index // GEMM_SMS
            first = index % GEMM_SMS
        else:
            me = rank
            first = index
        a_rank = A + me * stride_ar
        b_rank = B + me * stride_br
        my_local = rank_base(local, local_table, local_rank_stride, me, TABLE)
        for t in range(first, n_tiles, GEMM_SMS):
            acc, offs_m, offs_n = gemm_tile(a_rank, b_rank, t, num_pid_n, K, stride_am, stride_ak,
                                            stride_bk, stride_bn, BLOCK_M, BLOCK_N, BLOCK_K, INTERPRET)
            store_and_signal(my_local, acc, offs_m, offs_n, N, t, me, me, locks, locks_table,
                             locks_rank_stride, n_tiles, vals, delay_seed, delay_pct, delay_max_ns,
                             delay_sites, iteration, SIGNAL, WORLD, TABLE, TILE_STORE_CACHE, DELAYS,
                             NUM_WARPS, INTERPRET)
    else:
        # ----- consumer (communication programs): wait, push each tile to every rank ----------
        if VIRTUAL:
            me = index // COMM_SMS
            first = index % COMM_SMS
        else:
            me = rank
            first = index
        my_status = status + me * (n_tiles + 1) * 4
        my_local = rank_base(local, local_table, local_rank_stride, me, TABLE)
        budget = max_polls + 0 * me
        for t in range(first, n_tiles, COMM_SMS):
            tile = t
            if DELAYS:
                tile = t + sleep(delay_ns(delay_seed, SITE_BEFORE_WAIT, me, t, iteration,
                                          delay_pct, delay_max_ns, delay_sites), INTERPRET)
            ok, last, step, budget = run_wait(locks, locks_table, locks_rank_stride, n_tiles, tile,
                                              me, vals, budget, WAIT, WORLD, TABLE, INTERPRET)
            if ok != 0:
                offs_m = (t // num_pid_n) * BLOCK_M + rm
                offs_n = (t % num_pid_n) * BLOCK_N + rn
                c_offs = offs_m[:, None] * N + offs_n[None, :]
                src = my_local
                if DELAYS:
                    ns = delay_ns(delay_seed, SITE_WAIT_READ, me, t, iteration, delay_pct, delay_max_ns,
                                  delay_sites)
                    warps = delay_warp_mask(delay_seed, SITE_WAIT_READ, me, t, iteration, NUM_WARPS)
                    src = my_local + warp_sleep_here(ns, warps, "wait-read", INTERPRET)
                c = tl.load(src + c_offs, volatile=TILE_LOAD_VOLATILE)
                g_offs = offs_m[:, None] * (N * WORLD) + me * N + offs_n[None, :]
                for d in tl.static_range(WORLD):
                    dst = rank_base(out, out_table, out_rank_stride, d, TABLE)
                    tl.store(dst + g_offs, c)
            else:
                row = my_status + t * 4
                tl.store(row, 1)
                tl.store(row + 1, last)
                tl.store(row + 2, step)
                tl.store(row + 3, max_polls - budget)
        # ----- closing handshake: every consumer program of every rank has pushed its tiles ---
        if HANDSHAKE:
            tl.debug_barrier()
            fence("release", "sys", INTERPRET)
            for d in tl.static_range(WORLD):
                tl.atomic_add(rank_base(done, done_table, done_rank_stride, d, TABLE), 1,
                              sem="release", scope="sys")
            seen, polls = bounded_poll(rank_base(done, done_table, done_rank_stride, me, TABLE),
                                       HANDSHAKE_POLL, vals, handshake_target, max_polls)
            if seen < handshake_target:
                row = my_status + n_tiles * 4
                tl.store(row, 1)
                tl.store(row + 1, seen)
                tl.store(row + 2, -1)
                tl.store(row + 3, polls)


def meta_parameters(built: BuiltKernel) -> dict:
    """The ``tl.constexpr`` arguments of :func:`gemm_all_scatter_kernel` for a built kernel."""
    c, plan = built.config, built.plan
    return dict(
        WORLD=c.world_size, VIRTUAL=c.virtual, TABLE=c.table,
        BLOCK_M=c.block_m, BLOCK_N=c.block_n, BLOCK_K=c.block_k,
        GEMM_SMS=c.gemm_sms, COMM_SMS=c.comm_sms,
        SIGNAL=wrap_plan(plan.signal), WAIT=wrap_plan(plan.wait), HANDSHAKE_POLL=_HANDSHAKE_POLL,
        TILE_STORE_CACHE=plan.tile_store_cache, TILE_LOAD_VOLATILE=plan.tile_load_volatile,
        DELAYS=c.delays, NUM_WARPS=c.num_warps, ORDER=c.order,
        HANDSHAKE=c.handshake and not c.interpret, INTERPRET=c.interpret,
    )


def handshake_target(built: BuiltKernel, epoch: int) -> int:
    """What every rank's ``done`` counter reads once all ranks finished launch ``epoch``."""
    c = built.config
    return c.world_size * c.comm_sms * (epoch + 1)


def launch_all_scatter(built: BuiltKernel, heap, A, B, status, *, rank: int = 0, epoch: int = 0,
                       iteration: int = 0, max_polls: int = 1 << 20, delay_seed: int = 0,
                       delay_pct: int = 0, delay_max_ns: int = 1, delay_sites: int = -1,
                      vals=None, compile_only: bool = False):
    """Launch one iteration: ``heap`` holds ``local``, ``out``, ``locks`` and ``done``.

    ``A``/``B`` are ``[world, M, K]``/``[world, K, N/W]`` (virtual ranks) or this rank's
    ``[1, ...]``; ``status`` is ``[world, tiles + 1, 4]`` int32, zeroed by the caller.
    ``epoch`` counts launches since the ``done`` counters were zeroed (the handshake target).
    """
    c = built.config
    local, out, locks, done = heap["local"], heap["out"], heap["locks"], heap["done"]
    virtual_inputs = A.shape[0] > 1
    return gemm_all_scatter_kernel.launcher((c.grid,), interpret=c.interpret, compile_only=compile_only)(
        A, B,
        local.local, local.table, out.local, out.table, locks.local, locks.table,
        done.local, done.table,
        status,
        c.m, c.n_per_rank, c.k,
        A.stride(0) if virtual_inputs else 0, A.stride(1), A.stride(2),
        B.stride(0) if virtual_inputs else 0, B.stride(1), B.stride(2),
        local.rank_stride, out.rank_stride, locks.rank_stride, done.rank_stride,
        rank, launch_values(built, epoch, vals, A.device), max_polls, delay_seed, delay_pct,
        max(delay_max_ns, 1), delay_sites, iteration,
        handshake_target(built, epoch),
        num_warps=c.num_warps, num_stages=c.num_stages,
        **meta_parameters(built),
    )

