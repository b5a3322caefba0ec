"""GEMM + one-shot all-reduce, producer/consumer (the shape of seed 000, iris example 17).

Each rank holds a K-slice of A and B; one persistent launch per rank runs the roles of
``syncverify.kernels.roles``:

* **producers** (``GEMM_SMS`` per rank): each tile's partial product of the rank's K-slice into
  its own ``partial`` (``local_C``), then the protocol's ``signal`` steps;
* **consumers** (``COMM_SMS`` per rank), for the tiles the rank owns (``striding``: ``t % W``;
  ``block``: contiguous ranges): ``wait``, every rank's partial of the tile summed, the sum into
  every rank's ``out`` (C).

``production="owner-only"`` reproduces seed 000's distribution bug: a rank computes partials only
for the tiles it owns, so the other ranks' partials of a tile are never written. The protocol
enters only as its plans (``syncverify.kernels.plan``), the tile store's cache modifier and the
tile reads' volatility; a wait that times out is written to ``status`` and its tile skipped.
"""

from __future__ import annotations

from syncverify.kernels._deps import tl
from syncverify.kernels._jit import jit
from syncverify.kernels.build import BuiltKernel
from syncverify.kernels.launch import launch_arguments, launcher, meta_parameters_for
from syncverify.kernels.roles import consumer, copy_of, producer, sum_tiles
from syncverify.kernels.steps import program_role, role_rank


@jit
def write_every_rank(dst, got, WORLD: tl.constexpr, TABLE: tl.constexpr):
    """The sum into every rank's ``out`` (``dst``: the buffer and ``N``)."""
    out, N = dst
    total, offs_m, offs_n = got
    c_offs = offs_m[:, None] * N + offs_n[None, :]
    for d in tl.static_range(WORLD):
        to = copy_of(out, d, TABLE)
        tl.store(to + c_offs, total.to(to.dtype.element_ty))


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
    # timestamps (benchmarks/profile_tail.py): int64 [grid, 2 + 4 * STAMPS] (syncverify.kernels.delays.stamp)
    stamps=None, STAMPS: tl.constexpr = 0,
    # a split launch mode: which roles this launch holds, its PDL prologue (kernels/steps.py PARTS, PDL_MODES)
    PART: tl.constexpr = 0, PDL: tl.constexpr = 0,
):
    # ----- role and rank; the delays' iteration is the epoch (vals[0]): a CUDA graph replays it too
    delay = (delay_seed, delay_pct, delay_max_ns, delay_sites, tl.load(vals), delay_table)
    is_producer, index = program_role(tl.program_id(0), ORDER, GEMM_SMS, COMM_SMS, WORLD if VIRTUAL else 1,
                                      PART, PDL, INTERPRET)
    lock = (locks, locks_table, locks_rank_stride)
    if is_producer:
        # ----- producer: partial GEMM tiles of this rank's K-slice into its own partial -----------
        me, first = role_rank(index, rank, GEMM_SMS, VIRTUAL)
        producer((A, B, stride_ar, stride_am, stride_ak, stride_br, stride_bk, stride_bn), M, N, K,
                 (partial, partial_table, partial_rank_stride), ownership, status, lock, vals, max_polls, delay,
                 me, first, SIGNAL, BEFORE_STORE, HAS_BEFORE, SLOTS, NLOCKS, WORLD, TABLE, BLOCK_M, BLOCK_N,
                 BLOCK_K, GEMM_SMS, LOADS, GROUP_M, TILE_STORE_CACHE, DELAYS, NUM_WARPS, INTERPRET,
                 OWNER="table", PRODUCTION=PRODUCTION, INBOX=False, REPORT=True,
                 stamps=stamps, STAMPS=STAMPS)
    else:
        # ----- consumer: its owned tiles; wait, sum every rank's partial, write every rank's C -----
        me, first = role_rank(index, rank, COMM_SMS, VIRTUAL)
        consumer(((partial, partial_table, partial_rank_stride), M, N, BLOCK_M, BLOCK_N, TILE_LOAD_VOLATILE, False),
                 ((out, out_table, out_rank_stride), N), ownership, status, lock, vals, max_polls, delay, me, first,
                 tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N), WAIT, AFTER_LOAD, HAS_AFTER, SLOTS, NLOCKS, WORLD,
                 TABLE, COMM_SMS, DELAYS, NUM_WARPS, INTERPRET, READ=sum_tiles, WRITE=write_every_rank, OWNED=True,
                 stamps=stamps, STAMPS=STAMPS)


meta_parameters = meta_parameters_for(gemm_all_reduce_kernel)
launch_all_reduce = launcher(gemm_all_reduce_kernel, meta_parameters,
                             """Launch one iteration: ``heap`` holds ``partial``, ``out`` and ``locks``.""")


def all_reduce_arguments(built: BuiltKernel, heap, A, B, status, **run) -> tuple[list, dict]:
    """The arguments and meta-parameters :data:`launch_all_reduce` passes (:func:`~syncverify.kernels.launch.launch_arguments`)."""
    return launch_arguments(gemm_all_reduce_kernel, meta_parameters, built, heap, A, B, status, **run)
