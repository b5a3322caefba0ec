"""AllGather + GEMM (``syncverify.scenarios.build.ROLES["all-gather-gemm"]``).

Each rank owns a row-shard of A (``M / W`` rows, all of K) and B (``K x N``); every rank computes
the whole ``C = A @ B`` (``M x N``). One persistent launch per rank runs the two roles of the
model (``syncverify.kernels.roles``), steps in the model's order (``tests/test_drift.py``):

* **senders** (``GEMM_SMS`` per rank), per tile ``t`` of the rank's shard (rows ``t * BLOCK_M ..``):
  ``before_store``, the rows stored into *every* rank's ``gathered`` (``M / W x W * K`` per rank,
  column block ``b`` holding rank ``b``'s shard), ``signal`` (``to = "owner"``: the sender itself);
* **GEMM** programs (``COMM_SMS`` per rank), per tile ``t``: ``wait`` (every shard's signal, before
  the K-loop), tile ``t`` of every block of their own ``gathered`` multiplied by B, ``after_load``,
  the C rows of tile ``t`` of every shard (rows ``b * M / W + t * BLOCK_M ..``) into their ``out``.

The GEMM multiplies tile ``t`` of the ``W`` blocks as one ``ROWS x BLOCK_K`` operand whose rows
interleave the shards, which in ``gathered`` are plain consecutive rows of ``K``
(``syncverify.kernels.tile.gathered_gemm``: one pipelined ``cp.async`` load per K chunk, B through
its tensor descriptor, wgmma). Without ``after_load`` steps each (tile, column tile) pair is one
unit of work, spread over every GEMM program in grouped order (``UNITS``,
``syncverify.kernels.roles.consumer``): a program waits for a tile before its first unit of it.
The kernel of before spread whole tiles only (``M / W / BLOCK_M`` of them per rank, 4 at 1024^3,
for 60 programs: most idled) and summed ``W`` masked copies of the operand in fp32 before each
dot; it ran 2.7-42 % of cuBLAS (docs/RESULTS.md). With ``after_load`` steps (a back-signal that
says the tile's readers are done) one program still takes a whole tile, every column tile, and
the C of every column tile but the last waits in ``parked`` (this program's private rows) until
they have run (``tests/test_drift.py`` runs several column tiles and K chunks).
``gemm_only`` (``syncverify bench``'s GEMM part) makes every program a GEMM program reading
``gathered`` as the caller filled it. Every wait is bounded: a GEMM program that gives up writes
status row ``t`` (its C rows stay poisoned), a sender whose ``before_store`` gives up row ``T + t``
(the tile unsent: the GEMM's wait then times out). Buffers: ``syncverify.kernels.registry.buffers``.
"""

from __future__ import annotations

from syncverify.kernels._deps import tl
from syncverify.kernels._jit import jit
from syncverify.kernels.launch import launcher, meta_parameters_for
from syncverify.kernels.registry import stacked_rows
from syncverify.kernels.roles import consumer, sender
from syncverify.kernels.steps import program_role, rank_base, role_rank
from syncverify.kernels.tile import gathered_gemm, gathered_rows
from syncverify.protocols import rules


@jit
def multiply_gathered(src, t, unit, slot, late, WORLD: tl.constexpr, TABLE: tl.constexpr):
    """Tile ``t`` of every shard times B (``gathered_gemm``). ``UNITS`` > 1 (no ``after_load``
    steps): column tile ``unit`` only, returned for :func:`write_c`. Else every column tile, C of
    every one but the last parked, the last returned. No CTA barrier guards ``parked``: a row is
    written and read back through the same pointer tensor (each thread its own writes), with a
    whole K-loop (its dot operands fenced by Triton's ``bar.sync``) between every write and its
    read."""
    gathered, B_ops, parked, out, MR, N, K, stride_bk, stride_bn = src[0]
    ROWS: tl.constexpr = src[1]  # a tuple's constexprs stay constexprs only when named so
    BLOCK_M: tl.constexpr = src[2]
    BLOCK_N: tl.constexpr = src[3]
    BLOCK_K: tl.constexpr = src[4]
    HAS_AFTER: tl.constexpr = src[5]
    VOLATILE: tl.constexpr = src[6]
    INTERPRET: tl.constexpr = src[7]
    LOADS: tl.constexpr = src[8]
    c_rows, valid = gathered_rows(t, MR, WORLD, ROWS, BLOCK_M)
    last = unit
    if HAS_AFTER:
        last = N // BLOCK_N - 1
        for pn in range(0, last):
            acc, offs_n = gathered_gemm(gathered, B_ops, t, pn, slot * MR, K, stride_bk, stride_bn, late, WORLD,
                                        ROWS, BLOCK_M, BLOCK_N, BLOCK_K, VOLATILE, LOADS, INTERPRET)
            tl.store(parked + offs_n[None, :], acc.to(out.dtype.element_ty))
    acc, offs_n = gathered_gemm(gathered, B_ops, t, last, slot * MR, K, stride_bk, stride_bn, late, WORLD,
                                ROWS, BLOCK_M, BLOCK_N, BLOCK_K, VOLATILE, LOADS, INTERPRET)
    return acc, offs_n, c_rows, valid


@jit
def write_c(dst, got, WORLD: tl.constexpr, TABLE: tl.constexpr):
    """After ``after_load``: the C rows :func:`multiply_gathered` returned, then (with
    ``after_load`` steps) the parked ones, into ``out``."""
    out, parked, N = dst[0], dst[1], dst[2]
    acc, offs_n, c_rows, valid = got
    tl.store(out + c_rows[:, None] * N + offs_n[None, :], acc.to(out.dtype.element_ty), mask=valid[:, None])
    if dst[4]:  # HAS_AFTER
        for pn in range(0, N // dst[3] - 1):  # dst[3]: BLOCK_N
            offs_n = pn * dst[3] + tl.arange(0, dst[3])
            tl.store(out + c_rows[:, None] * N + offs_n[None, :], tl.load(parked + offs_n[None, :]),
                     mask=valid[:, None])


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
    INTERPRET: tl.constexpr, LOADS: tl.constexpr, GROUP_M: tl.constexpr, UNITS: tl.constexpr, SEND_K: tl.constexpr,
    BEFORE_STORE: tl.constexpr = (), AFTER_LOAD: tl.constexpr = (), HAS_BEFORE: tl.constexpr = False,
    HAS_AFTER: tl.constexpr = False, SLOTS: tl.constexpr = 1, NLOCKS: tl.constexpr = 1,
    GEMM_ONLY: tl.constexpr = False,
    # timestamps (benchmarks/profile_tail.py): int64 [grid, 2 + 4 * STAMPS] (syncverify.kernels.delays.stamp)
    stamps=None, STAMPS: tl.constexpr = 0,
    # a split launch mode: which roles this launch holds, its PDL prologue (kernels/steps.py PARTS, PDL_MODES)
    PART: tl.constexpr = 0, PDL: tl.constexpr = 0,
):
    # ----- role and rank: senders, then GEMM programs; the delays' iteration is the epoch (vals[0])
    delay = (delay_seed, delay_pct, delay_max_ns, delay_sites, tl.load(vals), delay_table)
    if GEMM_ONLY:  # bench's GEMM part: every program multiplies, gathered was filled beforehand
        is_sender = tl.program_id(0) < 0
        index = tl.program_id(0)
    else:
        is_sender, index = program_role(tl.program_id(0), ORDER, GEMM_SMS, COMM_SMS, WORLD if VIRTUAL else 1,
                                        PART, PDL, INTERPRET)
    MR = M // WORLD  # rows of one shard; its BLOCK_M-row tiles are the lock tiles
    lock = (locks, locks_table, locks_rank_stride)
    if is_sender:
        # ----- sender: this rank's shard into every rank's gathered, then signal -------------------
        me, first = role_rank(index, rank, GEMM_SMS, VIRTUAL)
        sender(A + me * stride_ar, (gathered, gathered_table, gathered_rank_stride), status, lock, vals, max_polls,
               delay, me, first, MR, K, stride_am, stride_ak, SIGNAL, BEFORE_STORE, HAS_BEFORE, SLOTS, NLOCKS, WORLD,
               TABLE, BLOCK_M, SEND_K, GEMM_SMS, TILE_STORE_CACHE, DELAYS, NUM_WARPS, INTERPRET, stamps=stamps,
               STAMPS=STAMPS)
    else:
        # ----- GEMM: every tile; wait for every shard's tile t, multiply the gathered blocks, store C
        me, first = role_rank(index, rank, COMM_SMS, VIRTUAL)
        my_out = rank_base(out, out_table, out_rank_stride, me, TABLE)
        my_parked = parked + me * parked_rank_stride + first * ROWS * N + tl.arange(0, ROWS)[:, None] * N
        B_rank = B + me * stride_br
        if LOADS == "descriptor":  # once per program: B is an input, nothing writes it during the launch
            B_ops = tl.make_tensor_descriptor(B_rank, shape=[K, N], strides=[stride_bk, 1],
                                              block_shape=[BLOCK_K, BLOCK_N])
        else:
            B_ops = B_rank
        consumer(((rank_base(gathered, gathered_table, gathered_rank_stride, me, TABLE), B_ops,
                   my_parked, my_out, MR, N, K, stride_bk, stride_bn), ROWS, BLOCK_M, BLOCK_N, BLOCK_K, HAS_AFTER,
                  TILE_LOAD_VOLATILE, INTERPRET, LOADS), (my_out, my_parked, N, BLOCK_N, HAS_AFTER), None, status,
                 lock, vals, max_polls, delay, me, first, MR // BLOCK_M, WAIT, AFTER_LOAD, HAS_AFTER, SLOTS, NLOCKS,
                 WORLD, TABLE, COMM_SMS, DELAYS, NUM_WARPS, INTERPRET, READ=multiply_gathered, WRITE=write_c,
                 OWNED=False, UNITS=UNITS, GROUP_M=GROUP_M, stamps=stamps, STAMPS=STAMPS)


def _own_meta(built) -> dict:
    """all-gather-gemm's own meta-parameters: the stacked rows, and (``gemm_only``, bench's GEMM
    part) the grid's ``gemm_sms`` programs per rank all multiplying."""
    c = built.config
    units = rules.gemm_units(c.n // c.block_n, bool(built.plan.after_load))  # the model's rule too
    return dict(ROWS=stacked_rows(c.world_size, c.block_m), COMM_SMS=c.gemm_sms if c.gemm_only else c.comm_sms,
                UNITS=units, SEND_K=send_chunk(c))


#: Bytes of A a sender moves per load (its copy loop is latency-bound: one load in flight per
#: iteration, so the chunk, not the number of iterations, sets its bandwidth).
SEND_BYTES = 32 * 1024


def send_chunk(config) -> int:
    """Columns of A a sender copies per iteration: the widest multiple of ``block_k`` (x8, x4,
    x2, x1) that divides ``k`` and keeps a ``block_m``-row chunk within :data:`SEND_BYTES`.

    >>> from syncverify.kernels.config import KernelConfig
    >>> send_chunk(KernelConfig(kernel="all-gather-gemm", k=8192, block_m=64, block_k=64))
    256
    >>> send_chunk(KernelConfig(kernel="all-gather-gemm", k=4352, block_m=128, block_k=64))
    128
    >>> send_chunk(KernelConfig(kernel="all-gather-gemm", k=1088, block_m=64, block_k=64))
    64
    """
    element = 4 if config.dtype == "fp32" else 2
    for times in (8, 4, 2, 1):
        chunk = times * config.block_k
        if (config.k // config.block_k) % times == 0 and config.block_m * chunk * element <= SEND_BYTES:
            return chunk
    return config.block_k


meta_parameters = meta_parameters_for(all_gather_gemm_kernel, _own_meta)
launch_all_gather_gemm = launcher(all_gather_gemm_kernel, meta_parameters, """Launch one iteration: ``heap`` holds
    ``syncverify.kernels.registry.buffers`` (``gathered``, ``out``, ``locks``, ``parked``).""")
