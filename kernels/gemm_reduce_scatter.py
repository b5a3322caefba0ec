"""GEMM + reduce-scatter, producer/consumer (``syncverify.scenarios.build.ROLES["gemm-reduce-scatter"]``).

Each rank holds a K-slice of A and B; one persistent launch per rank runs the model's two roles
(``syncverify.kernels.roles``), steps in the model's order (``tests/test_drift.py``):

* **producers** (``GEMM_SMS`` per rank): each tile's partial product, ``before_store``, a store
  into the *tile owner's* ``inbox`` (``M x W*N`` per rank, column block ``b`` holding rank ``b``'s
  partial), ``signal`` (``to = "owner"``: the tile's owner, ``syncverify.scenarios.build.signal_owner``);
* **consumers** (``COMM_SMS`` per rank), for the tiles the rank owns (``syncverify.protocols.rules``'s
  ``ownership_table``): ``wait``, every block of their own ``inbox`` summed, ``after_load``, the
  sum into their own ``out`` only (each rank ends with its slice of C).

Every wait is bounded: a consumer that gives up writes status row ``t`` (its C stays poisoned), a
producer whose ``before_store`` gives up row ``T + t``.
"""

from __future__ import annotations

from syncverify.kernels._deps import tl
from syncverify.kernels._jit import jit
from syncverify.kernels.launch import launcher, meta_parameters_for
from syncverify.kernels.roles import consumer, producer, sum_tiles
from syncverify.kernels.steps import program_role, rank_base, role_rank


@jit
def write_own(dst, got, WORLD: tl.constexpr, TABLE: tl.constexpr):
    """The sum into this rank's own ``out`` only (``dst``: its copy and ``N``)."""
    total, offs_m, offs_n = got
    tl.store(dst[0] + offs_m[:, None] * dst[1] + offs_n[None, :], total.to(dst[0].dtype.element_ty))


@jit(do_not_specialize=["rank", "max_polls", "delay_seed", "delay_pct", "delay_max_ns", "delay_sites"])
def gemm_reduce_scatter_kernel(
    # inputs: rank r's K-slice of A (M x K) and B (K x N)
    A, B,
    # symmetric heap (registry.buffers): inbox [slots * M, W * N] (block b: rank b's partial), out, locks
    inbox, inbox_table, out, out_table, locks, locks_table,
    # who owns which tile: syncverify.protocols.rules.ownership_table, computed on the host (one rule)
    ownership,
    # this launch's status rows [WORLD, 2 * T, 4]: consumers row t, producers' before_store row T + t
    status,
    # sizes (K is one rank's slice)
    M, N, K,
    # strides; *_rank strides step between virtual ranks' inputs and heap regions
    stride_ar, stride_am, stride_ak, stride_br, stride_bk, stride_bn,
    inbox_rank_stride, out_rank_stride, locks_rank_stride,
    # run-time parameters
    rank, vals, max_polls, delay_seed, delay_pct, delay_max_ns, delay_sites, delay_table,
    # meta-parameters
    WORLD: tl.constexpr, VIRTUAL: tl.constexpr, TABLE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GEMM_SMS: tl.constexpr, COMM_SMS: tl.constexpr, LOADS: tl.constexpr, GROUP_M: tl.constexpr,
    SIGNAL: tl.constexpr, WAIT: tl.constexpr,
    TILE_STORE_CACHE: tl.constexpr, TILE_LOAD_VOLATILE: tl.constexpr,
    DELAYS: tl.constexpr, NUM_WARPS: tl.constexpr, ORDER: tl.constexpr,
    INTERPRET: tl.constexpr,
    BEFORE_STORE: tl.constexpr = (), AFTER_LOAD: tl.constexpr = (), HAS_BEFORE: tl.constexpr = False,
    HAS_AFTER: tl.constexpr = False, SLOTS: tl.constexpr = 1, NLOCKS: tl.constexpr = 1,
    # timestamps (benchmarks/profile_tail.py): int64 [grid, 2 + 4 * STAMPS] (syncverify.kernels.delays.stamp)
    stamps=None, STAMPS: tl.constexpr = 0,
    # a split launch mode: which roles this launch holds, its PDL prologue (kernels/steps.py PARTS, PDL_MODES)
    PART: tl.constexpr = 0, PDL: tl.constexpr = 0,
):
    # ----- role and rank; the delays' iteration is the launch's epoch (vals[0]) ------------------
    delay = (delay_seed, delay_pct, delay_max_ns, delay_sites, tl.load(vals), delay_table)
    is_producer, index = program_role(tl.program_id(0), ORDER, GEMM_SMS, COMM_SMS, WORLD if VIRTUAL else 1,
                                      PART, PDL, INTERPRET)
    lock = (locks, locks_table, locks_rank_stride)
    if is_producer:
        # ----- producer: partial tiles of this rank's K-slice, into each tile's owner's inbox ------
        me, first = role_rank(index, rank, GEMM_SMS, VIRTUAL)
        producer((A, B, stride_ar, stride_am, stride_ak, stride_br, stride_bk, stride_bn), M, N, K,
                 (inbox, inbox_table, inbox_rank_stride), ownership, status, lock, vals, max_polls, delay, me, first,
                 SIGNAL, BEFORE_STORE, HAS_BEFORE, SLOTS, NLOCKS, WORLD, TABLE, BLOCK_M, BLOCK_N, BLOCK_K,
                 GEMM_SMS, LOADS, GROUP_M, TILE_STORE_CACHE, DELAYS, NUM_WARPS, INTERPRET,
                 OWNER="table", PRODUCTION="", INBOX=True, REPORT=True,
                 stamps=stamps, STAMPS=STAMPS)
    else:
        # ----- consumer: its owned tiles; wait, sum every block of its inbox, write its own C ------
        me, first = role_rank(index, rank, COMM_SMS, VIRTUAL)
        consumer((rank_base(inbox, inbox_table, inbox_rank_stride, me, TABLE), M, N, BLOCK_M, BLOCK_N,
                  TILE_LOAD_VOLATILE, True), (rank_base(out, out_table, out_rank_stride, me, TABLE), N), ownership,
                 status, lock, vals, max_polls, delay, me, first, tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N), WAIT,
                 AFTER_LOAD, HAS_AFTER, SLOTS, NLOCKS, WORLD, TABLE, COMM_SMS, DELAYS, NUM_WARPS, INTERPRET,
                 READ=sum_tiles, WRITE=write_own, OWNED=True, stamps=stamps, STAMPS=STAMPS)


meta_parameters = meta_parameters_for(gemm_reduce_scatter_kernel)
launch_reduce_scatter = launcher(gemm_reduce_scatter_kernel, meta_parameters, """Launch one iteration: ``heap``
    holds ``syncverify.kernels.registry.buffers`` (``inbox``, ``out``, ``locks``).""")
