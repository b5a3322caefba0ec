"""The producer's tile: both kernels compute, store and signal a C tile the same way.

The GEMM part, fast on sm_90 (the measured good configuration on this stack: 128x256x64 tiles,
3 stages, 8 warps, a persistent grid and tensor-descriptor loads; docs/RESULTS.md, issue 14):

* :func:`operand_descriptors` makes, once per program, the tensor descriptors of one rank's A and
  B (``tl.make_tensor_descriptor``: TMA loads into shared memory, ``wgmma`` from there). Triton
  3.6's interpreter runs the same descriptors, so the CPU path is this code too.
  ``LOADS="pointer"`` keeps the plain pointer-load loop, for comparison (``--loads pointer``).
* :func:`tile_of` is the order a persistent program visits its tiles in: groups of ``GROUP_M``
  tile rows, column by column (A's rows and B's columns stay in L2 while they are reused). It
  changes only the *order*: tile ``t`` is always the row-major tile ``t`` of C, so locks, owners,
  consumers and validation keep one numbering.
* :func:`gemm_tile` computes one tile of ``A @ B`` (fp32 accumulator).
* :func:`store_and_signal` stores it with plain generic-proxy ``st.global`` stores (some warps
  late when delays are on; never a TMA store, which would need the async proxy in the model) and
  runs the protocol's ``signal`` plan for it (``syncverify.kernels.steps.run_signal``).
"""

from __future__ import annotations

from syncverify.kernels._deps import tl
from syncverify.kernels._jit import jit
from syncverify.kernels.delays import SITE_BEFORE_WAIT, SITE_STORE_SIGNAL, before_store_hold, cta_late
from syncverify.kernels.steps import run_signal, run_wait

LOADS = ("descriptor", "pointer")


def scratch_allocator(size: int, alignment: int, stream):
    """Global scratch for in-kernel tensor descriptors (Triton asks for it at launch time)."""
    # torch/triton: syncverify.kernels._deps imports them; only the GPU path needs it
    from syncverify.kernels._deps import torch

    return torch.empty(size, dtype=torch.int8, device="cuda")


def use_scratch_allocator() -> None:
    """Give Triton :func:`scratch_allocator` for this context (``tl.make_tensor_descriptor``
    writes each program's descriptors there). Cheap; called before every compiled launch, since
    Triton keeps the allocator in a context variable (each thread, process, graph capture)."""
    # torch/triton: syncverify.kernels._deps imports them; only the GPU path needs it
    from syncverify.kernels._deps import triton

    triton.set_allocator(scratch_allocator)


@jit
def operand_descriptors(a_rank, b_rank, M, N, K, stride_am, stride_bk,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                        LOADS: tl.constexpr):
    """One rank's A (``M x K``) and B (``K x N``) as tensor descriptors of ``BLOCK_M x BLOCK_K``
    and ``BLOCK_K x BLOCK_N`` boxes (rows contiguous: the host checks), or, with
    ``LOADS="pointer"``, the two base pointers unchanged."""
    if LOADS == "descriptor":
        a = tl.make_tensor_descriptor(a_rank, shape=[M, K], strides=[stride_am, 1],
                                      block_shape=[BLOCK_M, BLOCK_K])
        b = tl.make_tensor_descriptor(b_rank, shape=[K, N], strides=[stride_bk, 1],
                                      block_shape=[BLOCK_K, BLOCK_N])
        return a, b
    else:
        return a_rank, b_rank


@jit
def tile_of(i, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """The row-major index of the ``i``-th tile in grouped order: ``GROUP_M`` tile rows at a
    time, down each column of the group, then the next column (``GROUP_M=1``: row-major)."""
    if GROUP_M == 1:
        t = i
    else:
        per_group = GROUP_M * num_pid_n
        first_m = (i // per_group) * GROUP_M
        rows = tl.minimum(num_pid_m - first_m, GROUP_M)
        pm = first_m + (i % per_group) % rows
        pn = (i % per_group) // rows
        t = pm * num_pid_n + pn
    return t


@jit
def gemm_tile(a_rank, b_rank, t, num_pid_n, K, stride_am, stride_ak, stride_bk, stride_bn,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
              LOADS: tl.constexpr, INTERPRET: tl.constexpr):
    """Tile ``t`` of ``A @ B`` (fp32 accumulator) with its row and column offsets. ``a_rank`` and
    ``b_rank`` are what :func:`operand_descriptors` returned (descriptors or base pointers)."""
    pm = t // num_pid_n
    pn = t % num_pid_n
    offs_m = pm * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if LOADS == "descriptor":
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            a = a_rank.load([pm * BLOCK_M, k * BLOCK_K])
            b = b_rank.load([k * BLOCK_K, pn * BLOCK_N])
            if INTERPRET:  # the interpreter's dot mishandles bf16: multiply in fp32
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc)
    else:
        rk = tl.arange(0, BLOCK_K)
        a_ptrs = a_rank + offs_m[:, None] * stride_am + rk[None, :] * stride_ak
        b_ptrs = b_rank + rk[:, None] * stride_bk + offs_n[None, :] * stride_bn
        for _ in range(0, tl.cdiv(K, BLOCK_K)):
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
            if INTERPRET:
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
    return acc, offs_m, offs_n


@jit
def tile_offsets(t, num_pid_n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """The row and column offsets in C of the row-major tile ``t``."""
    offs_m = (t // num_pid_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = (t % num_pid_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    return offs_m, offs_n


@jit
def store_and_signal(dst, acc, offs_m, offs_n, N, t, me, owner, lock, n_tiles, vals, delay,
                     SIGNAL: tl.constexpr, WORLD: tl.constexpr, TABLE: tl.constexpr,
                     TILE_STORE_CACHE: tl.constexpr, DELAYS: tl.constexpr, NUM_WARPS: tl.constexpr,
                     INTERPRET: tl.constexpr):
    """Store the tile into ``dst`` and run the protocol's signal steps for it. Delays: some warps
    late before their stores (a missing CTA barrier shows), the whole CTA late before the signal."""
    c_offs = offs_m[:, None] * N + offs_n[None, :]
    c = before_store_hold(acc.to(dst.dtype.element_ty), delay, me, t, NUM_WARPS, DELAYS, INTERPRET)
    tl.store(dst + c_offs, c, cache_modifier=TILE_STORE_CACHE)
    delayed_signal(lock, n_tiles, t, t, me, owner, vals, delay, SIGNAL, WORLD, TABLE, DELAYS, INTERPRET)


@jit
def delayed_signal(lock, n_tiles, lock_tile, t, me, owner, vals, delay, SIGNAL: tl.constexpr,
                   WORLD: tl.constexpr, TABLE: tl.constexpr, DELAYS: tl.constexpr, INTERPRET: tl.constexpr):
    """The protocol's signal steps for ``lock_tile`` of the lock array ``lock`` (``(locks, table,
    rank_stride)``); delays: the whole CTA late before them (site store-signal, drawn for tile ``t``;
    the sleep's zero is added to the lock offset so it comes first)."""
    tile = lock_tile + cta_late(delay, SITE_STORE_SIGNAL, me, t, DELAYS, INTERPRET)
    run_signal(lock[0], lock[1], lock[2], n_tiles, tile, me, owner, vals, SIGNAL, WORLD, TABLE, INTERPRET)


@jit
def delayed_wait(lock, n_tiles, lock_tile, t, me, vals, budget, delay, WAIT: tl.constexpr,
                 WORLD: tl.constexpr, TABLE: tl.constexpr, DELAYS: tl.constexpr, INTERPRET: tl.constexpr):
    """The protocol's wait for ``lock_tile`` (``run_wait``'s results); delays: the whole CTA late
    before it (site before-wait, drawn for tile ``t``)."""
    tile = lock_tile + cta_late(delay, SITE_BEFORE_WAIT, me, t, DELAYS, INTERPRET)
    return run_wait(lock[0], lock[1], lock[2], n_tiles, tile, me, vals, budget, WAIT, WORLD, TABLE, INTERPRET)


@jit
def gathered_gemm(src, B_ops, t, pn, slot_rows, K, stride_bk, stride_bn, late,
                  WORLD: tl.constexpr, ROWS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, TILE_LOAD_VOLATILE: tl.constexpr, LOADS: tl.constexpr,
                  INTERPRET: tl.constexpr):
    """all-gather-gemm's tile: the C rows of tile ``t`` of every shard, column tile ``pn``: a
    ``ROWS x BLOCK_N`` fp32 accumulator whose row ``r`` is row ``r // WORLD`` of tile ``t`` of
    rank ``r % WORLD``'s shard (:func:`gathered_rows` says where it goes in C).

    Interleaving the shards makes the stacked operand plain rows of ``src``: a row of ``gathered``
    (``W * K`` wide, block ``b`` rank ``b``'s row) is ``W`` rows of ``K``, so row ``r`` of the stack
    sits at ``((slot_rows + t * BLOCK_M) * W + r) * K``. One unmasked pointer load per K chunk
    (rows past ``W * BLOCK_M``, when ``W`` is no power of two, masked and pointing at row 0),
    which Triton's pipeliner turns into ``cp.async`` (a weak generic-proxy read, as the model's
    tile load; never TMA, which would read through the async proxy). ``B_ops`` is B's tensor
    descriptor (``LOADS="descriptor"``: B is an input nothing writes during the launch) or its base
    pointer. One load spans every shard's block; the drift test's kernel side splits it back into
    the model's one load per block (``syncverify.kernels.drift.KernelSide.split_blocks``)."""
    r = tl.arange(0, ROWS)
    valid = r < WORLD * BLOCK_M
    rows = tl.where(valid, (slot_rows + t * BLOCK_M) * WORLD + r, (slot_rows + t * BLOCK_M) * WORLD)
    rk = tl.arange(0, BLOCK_K)
    offs_n = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    a_ptrs = src + late + rows[:, None] * K + rk[None, :]
    acc = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if ROWS == WORLD * BLOCK_M:
            a = tl.load(a_ptrs, volatile=TILE_LOAD_VOLATILE)
        else:
            a = tl.load(a_ptrs, mask=valid[:, None], other=0.0, volatile=TILE_LOAD_VOLATILE)
        if LOADS == "descriptor":
            bk = B_ops.load([k * BLOCK_K, pn * BLOCK_N])
        else:
            bk = tl.load(B_ops + (k * BLOCK_K + rk)[:, None] * stride_bk + offs_n[None, :] * stride_bn)
        if INTERPRET:  # the interpreter's dot mishandles bf16: multiply in fp32
            acc = tl.dot(a.to(tl.float32), bk.to(tl.float32), acc)
        else:
            acc = tl.dot(a, bk, acc)
        a_ptrs += BLOCK_K
    return acc, offs_n


@jit
def gathered_rows(t, MR, WORLD: tl.constexpr, ROWS: tl.constexpr, BLOCK_M: tl.constexpr):
    """``(C row, valid)`` of each row of :func:`gathered_gemm`'s accumulator: row ``r`` is row
    ``r // WORLD`` of tile ``t`` of shard ``r % WORLD`` (padding rows point at the tile's first
    row and are not valid)."""
    r = tl.arange(0, ROWS)
    valid = r < WORLD * BLOCK_M
    c_rows = tl.where(valid, (r % WORLD) * MR + t * BLOCK_M + r // WORLD, t * BLOCK_M)
    return c_rows, valid
