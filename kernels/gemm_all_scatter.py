"""GEMM + all-scatter with workgroup specialization (the shape of seed 001, iris example 10).

Each rank holds A (``M x K``) and its column block of B (``K x N/W``). One persistent launch per
rank runs the three roles of ``syncverify.scenarios.build.ROLES["all-scatter"]``, in that order of steps
(``tests/test_drift.py`` checks the order against the model's program; the roles are
``syncverify.kernels.roles``):

* **producers** (``GEMM_SMS`` programs per rank) compute the tiles of the rank's column block of
  C into ``local`` and run the protocol's ``signal`` steps (stage ``pub``, lock array ``locks``);
* **comm** programs (``COMM_SMS`` per rank) run the protocol's ``wait`` steps for each tile, read
  it from ``local``, push it into every rank's ``out`` (at the rank's column offset, self
  included), then run the *push protocol*'s ``signal`` steps (stage ``push``, lock array
  ``push_locks``; by default ``epoch-flag``, the same file the model checks);
* **receivers** (``RECV_SMS`` per rank) run the push protocol's ``wait`` steps for each tile and
  read every rank's block of it from their own ``out`` into ``received``: what a consumer of the
  gathered C on that rank sees, which the host validates.

A ``to = "owner"`` signal goes to the signalling rank itself (its own comm CTA consumes its
column block; ``syncverify.scenarios.build.signal_owner``). Every wait is bounded: a comm program
whose wait times out writes ``(1, last value, step, polls)`` into its status row ``t``, a
receiver into row ``T + t``, and skips the tile (what it would have written stays poisoned).
"""

from __future__ import annotations

from syncverify.kernels._deps import tl
from syncverify.kernels._jit import jit
from syncverify.kernels.launch import launcher, meta_parameters_for
from syncverify.kernels.roles import comm, producer, receiver
from syncverify.kernels.steps import program_role, role_rank


@jit(do_not_specialize=["rank", "max_polls", "delay_seed", "delay_pct", "delay_max_ns", "delay_sites"])
def gemm_all_scatter_kernel(
    # inputs: A (M x K, the same on every rank) and this rank's column block of B (K x N/W)
    A, B,
    # symmetric heap: local C tiles, global C, received C, pub locks [L, T], push locks [L', T]
    local, local_table, out, out_table, received, received_table, locks, locks_table,
    push_locks, push_locks_table,
    # this launch's status rows [WORLD, 2 * T, 4]: comm rows 0..T-1, receiver rows T..2T-1
    status,
    # sizes (N is one rank's column block; the global C is N * WORLD wide)
    M, N, K,
    # strides; *_rank strides step between virtual ranks' inputs and heap regions
    stride_ar, stride_am, stride_ak, stride_br, stride_bk, stride_bn,
    local_rank_stride, out_rank_stride, received_rank_stride, locks_rank_stride, push_locks_rank_stride,
    # run-time parameters
    rank, vals, max_polls, delay_seed, delay_pct, delay_max_ns, delay_sites, delay_table,
    # meta-parameters
    WORLD: tl.constexpr, VIRTUAL: tl.constexpr, TABLE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GEMM_SMS: tl.constexpr, COMM_SMS: tl.constexpr, RECV_SMS: tl.constexpr,
    LOADS: tl.constexpr, GROUP_M: tl.constexpr,
    SIGNAL: tl.constexpr, WAIT: tl.constexpr, PUSH_SIGNAL: tl.constexpr, PUSH_WAIT: tl.constexpr,
    TILE_STORE_CACHE: tl.constexpr, TILE_LOAD_VOLATILE: tl.constexpr,
    DELAYS: tl.constexpr, NUM_WARPS: tl.constexpr, ORDER: tl.constexpr,
    INTERPRET: tl.constexpr,
    # the pub stage's producer steps before its store and comm steps after its load
    BEFORE_STORE: tl.constexpr = (), AFTER_LOAD: tl.constexpr = (), HAS_BEFORE: tl.constexpr = False,
    HAS_AFTER: tl.constexpr = False,
    # timestamps (benchmarks/profile_tail.py): int64 [grid, 2 + 4 * STAMPS] (syncverify.kernels.delays.stamp)
    stamps=None, STAMPS: tl.constexpr = 0,
    # a split launch mode: which roles this launch holds, its PDL prologue (kernels/steps.py PARTS, PDL_MODES)
    PART: tl.constexpr = 0, PDL: tl.constexpr = 0,
):
    # ----- role and rank: producers, then comm programs, then receivers; the delays' iteration is
    # the launch's epoch (vals[0]), so a captured CUDA graph replays launches whose iteration advances
    delay = (delay_seed, delay_pct, delay_max_ns, delay_sites, tl.load(vals), delay_table)
    RANKS: tl.constexpr = WORLD if VIRTUAL else 1
    is_producer, index = program_role(tl.program_id(0), ORDER, GEMM_SMS, COMM_SMS + RECV_SMS, RANKS, PART, PDL, INTERPRET)
    lock = (locks, locks_table, locks_rank_stride)
    push = (push_locks, push_locks_table, push_locks_rank_stride)
    if is_producer:
        # ----- producer: tiles of this rank's column block into its own local, signalled to itself;
        # a before_store timeout leaves the tile unsignalled (the comm program's wait reports it)
        me, first = role_rank(index, rank, GEMM_SMS, VIRTUAL)
        producer((A, B, stride_ar, stride_am, stride_ak, stride_br, stride_bk, stride_bn), M, N, K,
                 (local, local_table, local_rank_stride), None, status, lock, vals, max_polls, delay, me, first,
                 SIGNAL, BEFORE_STORE, HAS_BEFORE, 1, 1, WORLD, TABLE, BLOCK_M, BLOCK_N, BLOCK_K, GEMM_SMS, LOADS,
                 GROUP_M, TILE_STORE_CACHE, DELAYS, NUM_WARPS, INTERPRET,
                 OWNER="self", PRODUCTION="", INBOX=False, REPORT=False, stamps=stamps, STAMPS=STAMPS)
    elif index < COMM_SMS * RANKS:
        # ----- comm: wait (pub), read the tile, push it into every rank's out, signal (push) ------
        me, first = role_rank(index, rank, COMM_SMS, VIRTUAL)
        comm((local, local_table, local_rank_stride), (out, out_table, out_rank_stride), push, status, lock, vals,
             max_polls, delay, me, first, M, N, WAIT, AFTER_LOAD, HAS_AFTER, PUSH_SIGNAL, WORLD, TABLE, BLOCK_M,
             BLOCK_N, COMM_SMS, GROUP_M, TILE_STORE_CACHE, TILE_LOAD_VOLATILE, DELAYS, NUM_WARPS, INTERPRET,
             stamps=stamps, STAMPS=STAMPS)
    else:
        # ----- receiver: wait (push), read every rank's block of the tile from its own out --------
        me, first = role_rank(index - COMM_SMS * RANKS, rank, RECV_SMS, VIRTUAL)
        receiver((out, out_table, out_rank_stride), (received, received_table, received_rank_stride), status, push,
                 vals, max_polls, me, first, M, N, PUSH_WAIT, WORLD, TABLE, BLOCK_M, BLOCK_N, RECV_SMS, GROUP_M,
                 TILE_STORE_CACHE, TILE_LOAD_VOLATILE, INTERPRET, stamps=stamps, STAMPS=STAMPS)


meta_parameters = meta_parameters_for(gemm_all_scatter_kernel)
launch_all_scatter = launcher(gemm_all_scatter_kernel, meta_parameters, """Launch one iteration: ``heap`` holds
    ``local``, ``out``, ``received``, ``locks`` and ``push_locks``.""")
