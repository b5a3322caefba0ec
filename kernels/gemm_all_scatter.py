"""GEMM + all-scatter with workgroup specialization (the shape of seed 001, iris example 10).

Each rank holds A (``M x K``) and its column block of B (``K x N/W``). One persistent launch per
rank runs the three roles of ``syncverify.scenarios.build.ROLES["all-scatter"]``, in that order of steps
(``tests/test_drift.py`` checks the order against the model's program):

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
from syncverify.kernels.build import BuiltKernel, delay_table_tensor, launch_values, once_per_build
from syncverify.kernels.delays import (
    SITE_WAIT_READ,
    delay_ns,
    delay_warp_mask,
    warp_sleep_here,
)
from syncverify.kernels.steps import program_role, rank_base, role_rank, run_signal, run_steps, run_wait, wrap_plan
from syncverify.kernels.tile import (
    delayed_wait,
    gemm_tile,
    operand_descriptors,
    store_and_signal,
    tile_of,
    use_scratch_allocator,
)


@jit
def timed_out(row, last, step, polls):
    """Record a bounded wait that gave up: ``(1, last value, step, polls)`` in a status row."""
    tl.store(row, 1)
    tl.store(row + 1, last)
    tl.store(row + 2, step)
    tl.store(row + 3, polls)


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
):
    # ----- role and rank: producers, then comm programs, then receivers ------------------------
    pid = tl.program_id(0)
    # the delays' iteration is the launch's epoch, read from the device-side operand ring (slot 0),
    # so a captured CUDA graph replays launches whose iteration advances (syncverify.stress.runner)
    iteration = tl.load(vals)
    RANKS: tl.constexpr = WORLD if VIRTUAL else 1
    is_producer, index = program_role(pid, ORDER, GEMM_SMS, COMM_SMS + RECV_SMS, RANKS)
    is_comm = index < COMM_SMS * RANKS
    num_pid_m = (M + BLOCK_M - 1) // BLOCK_M
    num_pid_n = (N + BLOCK_N - 1) // BLOCK_N
    n_tiles = num_pid_m * num_pid_n
    rm = tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)

    if is_producer:
        # ----- producer (GEMM programs): tiles of this rank's column block ----------------------
        me, first = role_rank(index, rank, GEMM_SMS, VIRTUAL)
        a_ops, b_ops = operand_descriptors(A + me * stride_ar, B + me * stride_br, M, N, K,
                                           stride_am, stride_bk, BLOCK_M, BLOCK_N, BLOCK_K, LOADS)
        my_local = rank_base(local, local_table, local_rank_stride, me, TABLE)
        budget = max_polls + 0 * me
        for i in range(first, n_tiles, GEMM_SMS):  # persistent: this program's share, grouped order
            t = tile_of(i, num_pid_m, num_pid_n, GROUP_M)
            acc, offs_m, offs_n = gemm_tile(a_ops, b_ops, t, num_pid_n, K, stride_am, stride_ak,
                                            stride_bk, stride_bn, BLOCK_M, BLOCK_N, BLOCK_K, LOADS,
                                            INTERPRET)
            free = 1
            if HAS_BEFORE:  # a timeout leaves the tile unsignalled: the comm CTA's wait reports it
                free, _last, _step, budget = run_steps(locks, locks_table, locks_rank_stride, n_tiles, t, me, me,
                                                       vals, budget, BEFORE_STORE, WORLD, TABLE, INTERPRET)
            if free != 0:
                store_and_signal(my_local, acc, offs_m, offs_n, N, t, me, me, locks, locks_table,
                                 locks_rank_stride, n_tiles, vals, delay_seed, delay_pct, delay_max_ns,
                                 delay_sites, iteration, delay_table, SIGNAL, WORLD, TABLE, TILE_STORE_CACHE, DELAYS,
                                 NUM_WARPS, INTERPRET)
    elif is_comm:
        # ----- comm: wait (pub), read the tile, push it to every rank, signal (push) ------------
        me, first = role_rank(index, rank, COMM_SMS, VIRTUAL)
        my_status = status + me * (2 * n_tiles) * 4
        my_local = rank_base(local, local_table, local_rank_stride, me, TABLE)
        budget = max_polls + 0 * me
        for j in range(first, n_tiles, COMM_SMS):  # the producers' order: tiles arrive in it
            t = tile_of(j, num_pid_m, num_pid_n, GROUP_M)
            ok, last, step, budget = delayed_wait(locks, locks_table, locks_rank_stride, n_tiles, t, t, me, vals,
                                                 budget, delay_seed, delay_pct, delay_max_ns, delay_sites, iteration,
                                                 delay_table, WAIT, WORLD, TABLE, DELAYS, INTERPRET)
            if ok != 0:
                offs_m = (t // num_pid_n) * BLOCK_M + rm
                offs_n = (t % num_pid_n) * BLOCK_N + rn
                c_offs = offs_m[:, None] * N + offs_n[None, :]
                src = my_local
                if DELAYS:
                    ns = delay_ns(delay_seed, SITE_WAIT_READ, me, t, iteration, delay_pct, delay_max_ns,
                                  delay_sites, delay_table)
                    warps = delay_warp_mask(delay_seed, SITE_WAIT_READ, me, t, iteration, NUM_WARPS, delay_pct,
                                            delay_table)
                    src = my_local + warp_sleep_here(ns, warps, "wait-read", INTERPRET)
                c = tl.load(src + c_offs, volatile=TILE_LOAD_VOLATILE)
                if HAS_AFTER:  # the back-signal ("done") and the owner's reset, after the load
                    ok, last, step, budget = run_steps(locks, locks_table, locks_rank_stride, n_tiles, t, me, me,
                                                       vals, budget, AFTER_LOAD, WORLD, TABLE, INTERPRET)
                    if ok == 0:
                        timed_out(my_status + t * 4, last, step + len(WAIT), max_polls - budget)
                g_offs = offs_m[:, None] * (N * WORLD) + me * N + offs_n[None, :]
                for d in tl.static_range(WORLD):
                    dst = rank_base(out, out_table, out_rank_stride, d, TABLE)
                    tl.store(dst + g_offs, c, cache_modifier=TILE_STORE_CACHE)
                run_signal(push_locks, push_locks_table, push_locks_rank_stride, n_tiles, t, me, me, vals,
                           PUSH_SIGNAL, WORLD, TABLE, INTERPRET)
            else:
                timed_out(my_status + t * 4, last, step, max_polls - budget)
    else:
        # ----- receiver: wait (push), read every rank's block of the tile -----------------------
        index = index - COMM_SMS * RANKS
        me, first = role_rank(index, rank, RECV_SMS, VIRTUAL)
        my_status = status + me * (2 * n_tiles) * 4
        my_out = rank_base(out, out_table, out_rank_stride, me, TABLE)
        my_received = rank_base(received, received_table, received_rank_stride, me, TABLE)
        budget = max_polls + 0 * me
        for j in range(first, n_tiles, RECV_SMS):
            t = tile_of(j, num_pid_m, num_pid_n, GROUP_M)
            ok, last, step, budget = run_wait(push_locks, push_locks_table, push_locks_rank_stride, n_tiles,
                                              t, me, vals, budget, PUSH_WAIT, WORLD, TABLE, INTERPRET)
            if ok != 0:
                offs_m = (t // num_pid_n) * BLOCK_M + rm
                offs_n = (t % num_pid_n) * BLOCK_N + rn
                for b in tl.static_range(WORLD):
                    g_offs = offs_m[:, None] * (N * WORLD) + b * N + offs_n[None, :]
                    c = tl.load(my_out + g_offs, volatile=TILE_LOAD_VOLATILE)
                    tl.store(my_received + g_offs, c, cache_modifier=TILE_STORE_CACHE)
            else:
                timed_out(my_status + (n_tiles + t) * 4, last, step, max_polls - budget)


@once_per_build
def meta_parameters(built: BuiltKernel) -> dict:
    """The ``tl.constexpr`` arguments of :func:`gemm_all_scatter_kernel` for a built kernel."""
    c, plan = built.config, built.plan
    return dict(
        WORLD=c.world_size, VIRTUAL=c.virtual, TABLE=c.table,
        BLOCK_M=c.block_m, BLOCK_N=c.block_n, BLOCK_K=c.block_k,
        GEMM_SMS=c.gemm_sms, COMM_SMS=c.comm_sms, RECV_SMS=c.recv_sms,
        LOADS=c.loads, GROUP_M=c.group_m,
        SIGNAL=wrap_plan(plan.signal), WAIT=wrap_plan(plan.wait),
        PUSH_SIGNAL=wrap_plan(plan.push_signal), PUSH_WAIT=wrap_plan(plan.push_wait),
        TILE_STORE_CACHE=plan.tile_store_cache, TILE_LOAD_VOLATILE=plan.tile_load_volatile,
        DELAYS=c.delays, NUM_WARPS=c.num_warps, ORDER=c.order,
        INTERPRET=c.interpret,
        BEFORE_STORE=wrap_plan(plan.before_store), AFTER_LOAD=wrap_plan(plan.after_load),
        HAS_BEFORE=bool(plan.before_store), HAS_AFTER=bool(plan.after_load),
    )


def launch_all_scatter(built: BuiltKernel, heap, A, B, status, *, rank: int = 0, epoch: int = 0,
                       max_polls: int = 1 << 20, delay_seed: int = 0,
                       delay_pct: int = 0, delay_max_ns: int = 1, delay_sites: int = -1,
                       delay_table=None, vals=None, compile_only: bool = False):
    """Launch one iteration: ``heap`` holds ``local``, ``out``, ``received``, ``locks`` and ``push_locks``.

    ``A``/``B`` are ``[world, M, K]``/``[world, K, N/W]`` (virtual ranks) or this rank's
    ``[1, ...]``; ``status`` is ``[world, 2 * tiles, 4]`` int32, zeroed by the caller.
    """
    c = built.config
    local, out, received = heap["local"], heap["out"], heap["received"]
    locks, push_locks = heap["locks"], heap["push_locks"]
    virtual_inputs = A.shape[0] > 1
    if not c.interpret:
        use_scratch_allocator()
    return gemm_all_scatter_kernel.launcher((c.grid,), interpret=c.interpret, compile_only=compile_only)(
        A, B,
        local.local, local.table, out.local, out.table, received.local, received.table,
        locks.local, locks.table, push_locks.local, push_locks.table,
        status,
        c.m, c.n_per_rank, c.k,
        A.stride(0) if virtual_inputs else 0, A.stride(1), A.stride(2),
        B.stride(0) if virtual_inputs else 0, B.stride(1), B.stride(2),
        local.rank_stride, out.rank_stride, received.rank_stride, locks.rank_stride, push_locks.rank_stride,
        rank, launch_values(built, epoch, vals, A.device), max_polls, delay_seed, delay_pct,
        max(delay_max_ns, 1), delay_sites, delay_table_tensor(delay_table, A.device),
        num_warps=c.num_warps, num_stages=c.num_stages,
        **meta_parameters(built),
    )
