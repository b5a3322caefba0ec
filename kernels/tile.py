"""The producer's tile: both kernels compute, store and signal a C tile the same way.

:func:`gemm_tile` computes one tile of ``A @ B``; :func:`store_and_signal` stores it (some warps
late when delays are on) and runs the protocol's ``signal`` plan for it
(``syncverify.kernels.steps.run_signal``).
"""

from __future__ import annotations

from syncverify.kernels._deps import tl
from syncverify.kernels._jit import jit
from syncverify.kernels.delays import (
    SITE_BEFORE_STORE,
    SITE_STORE_SIGNAL,
    delay_ns,
    delay_warp_mask,
    sleep,
    wait_tile,
    warp_deadline,
)
from syncverify.kernels.steps import run_signal


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
                     n_tiles, vals, delay_seed, delay_pct, delay_max_ns, delay_sites, iteration, delay_table,
                     SIGNAL: tl.constexpr, WORLD: tl.constexpr, TABLE: tl.constexpr,
                     TILE_STORE_CACHE: tl.constexpr, DELAYS: tl.constexpr, NUM_WARPS: tl.constexpr,
                     INTERPRET: tl.constexpr):
    """Store the tile into ``dst`` and run the protocol's signal steps for it. Delays: some warps
    late before their stores (a missing CTA barrier shows), the whole CTA late before the signal."""
    c_offs = offs_m[:, None] * N + offs_n[None, :]
    c = acc.to(dst.dtype.element_ty)
    if DELAYS:
        ns = delay_ns(delay_seed, SITE_BEFORE_STORE, me, t, iteration, delay_pct, delay_max_ns, delay_sites,
                      delay_table)
        warps = delay_warp_mask(delay_seed, SITE_BEFORE_STORE, me, t, iteration, NUM_WARPS, delay_pct, delay_table)
        c = wait_tile(c, warp_deadline(ns, warps, INTERPRET), "before-store", INTERPRET)
    tl.store(dst + c_offs, c, cache_modifier=TILE_STORE_CACHE)
    tile = t
    if DELAYS:
        tile = t + sleep(delay_ns(delay_seed, SITE_STORE_SIGNAL, me, t, iteration,
                                  delay_pct, delay_max_ns, delay_sites, delay_table), INTERPRET)
    run_signal(locks, locks_table, locks_rank_stride, n_tiles, tile, me, owner, vals,
               SIGNAL, WORLD, TABLE, INTERPRET)
