"""Validation on the device, every iteration: one Triton launch classifies every tile of every C copy.

Per element (``syncverify.stress.inputs`` says why each test is exact):

==================  ============================================================================
``ok``              the exact expected value
``unwritten``       the output sentinel (NaN: no consumer wrote it), or 0: the consumer summed or
                    pushed workspace that no producer had written (seed 000's ``C=0.0``)
``stale``           the previous iteration's expected value; in the all-reduce kernel, when the
                    workspaces keep the previous iteration's partials (``--poison previous`` or
                    ``outputs``), also a sum in which some ranks' partials were the previous
                    iteration's (``(2**W - 1 - b) * U + b * U_prev``: the tile records ``b``)
``missing-ranks``   (all-reduce, gemm-reduce-scatter) ``q * U`` with ``0 < q < 2**W - 1``: the sum added exactly the
                    ranks in bitmask ``q``; the tile records the union of the missing ranks
``corrupt``         anything else (a mix of iterations, a wrong tile, a torn value)
==================  ============================================================================

A tile's class is ``hang`` when its consumer's wait timed out (status row), else ``ok`` when no
element is bad, else the most common bad class (ties: corrupt, stale, missing-ranks, unwritten).
gemm-reduce-scatter's rank holds only its slice of C (the tiles it owns): its other tiles are
``ok`` by definition; its sums are decoded as all-reduce's. all-gather-gemm's consumer of a C
tile is the copy's own GEMM program (status row: the tile's row tile within its shard).
A tile with no bad element and no hang costs one comparison per element and one reduction per
slice of ``FAST_M`` rows (the profiler measured the full classification of every tile at 267 us
of an iteration's 291 us on an H200; then, with that fast path but the whole 128 x 128 tile in
one piece, 26 us: ptxas spilled 11,864 bytes per thread); only a bad tile is classified in
full (:func:`classify_bad`), ``SLOW_M`` rows at a time.

With virtual ranks the same launch also prepares the next iteration (:class:`NextIteration`):
each program poisons the tile it has just read (and all-scatter's pushed copy of it) and zeroes
its share of the workspace and of the locks that are reset between launches. In stream order
that is exactly the separate poison and reset the runner would queue before the next kernel,
with three or four fewer launches per iteration.
Each tile's summary row (int32, :data:`FIELDS`) keeps the counts, the missing-rank mask (for a
stale tile: the ranks whose partial was stale), the first bad element with its value and the
expected value (float32 bits), the hang's last seen value, and the device clock
(``%globaltimer`` ns, two halves) when the validation ran: time to first failure is measured on
the device, not when the host queued the iteration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from syncverify.kernels._deps import tl
from syncverify.kernels._jit import jit
from syncverify.kernels.config import KernelConfig
from syncverify.kernels.build import ownership_tensor

CLASSES: tuple[str, ...] = ("ok", "unwritten", "stale", "missing-ranks", "corrupt", "hang")
OK, UNWRITTEN, STALE, MISSING, CORRUPT, HANG = (tl.constexpr(i) for i in range(6))
FIELDS: tuple[str, ...] = (
    "class", "n_unwritten", "n_stale", "n_missing", "n_corrupt", "missing_mask", "first_bad",
    "got_bits", "expected_bits", "hang", "hang_value", "hang_step", "hang_polls",
    "consumer_rank", "consumer_tile", "n_bad", "time_lo", "time_hi",
)
NFIELDS = len(FIELDS)


@jit
def classify_kernel(
    # the C copies to check ([copies, M, NC]), this and the previous iteration's exponents
    out, out_rank_stride, row_exp, col_exp, prev_row_exp, prev_col_exp,
    # this launch's status rows [WORLD, 2 * status_tiles, 4] and the summary [copies, tiles, NFIELDS]
    status, summary,
    # all-reduce's tile owners (syncverify.protocols.rules.ownership_table: the owner of tile t at t)
    ownership,
    # the next iteration's poison and reset (NextIteration): all-scatter's pushed C copies, the
    # workspace, up to two lock arrays, with their element counts
    other_out, work, work_numel, locks_a, locks_a_numel, locks_b, locks_b_numel,
    # sizes
    M, NC, n_per_rank, status_tiles, first_copy,
    # meta-parameters (STALE_SUMS: the workspaces keep the previous iteration's partials; the tile
    # is read FAST_M rows at a time when it is all right, SLOW_M rows at a time when it is not)
    WORLD: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, KIND: tl.constexpr,
    NFIELDS: tl.constexpr, INTERPRET: tl.constexpr, STALE_SUMS: tl.constexpr = False,
    FAST_M: tl.constexpr = 32, SLOW_M: tl.constexpr = 8,
    POISON_OUT: tl.constexpr = False, POISON_OTHER: tl.constexpr = False, ZERO_WORK: tl.constexpr = False,
    ZERO_LOCKS: tl.constexpr = 0,
):
    # ----- which tile of which copy -----------------------------------------------------------
    pid = tl.program_id(0)
    tiles_n = NC // BLOCK_N
    n_tiles = (M // BLOCK_M) * tiles_n
    copy = pid // n_tiles
    t = pid % n_tiles
    tm = t // tiles_n
    tn = t % tiles_n
    cols = tn * BLOCK_N + tl.arange(0, BLOCK_N)
    copy_out = out + copy * out_rank_stride

    # ----- the consumer's status ------------------------------------------------------------
    if KIND == "all-reduce" or KIND == "gemm-reduce-scatter":
        consumer = tl.load(ownership + t)
        consumer_tile = t
    elif KIND == "all-gather-gemm":  # this copy's GEMM program, tile t of the shard
        consumer = first_copy + copy
        consumer_tile = tm % ((M // WORLD) // BLOCK_M)
    else:
        block_tiles = n_per_rank // BLOCK_N
        consumer = tn // block_tiles
        consumer_tile = tm * block_tiles + tn % block_tiles
    srow = status + (consumer * (2 * status_tiles) + consumer_tile) * 4
    if KIND == "all-scatter":
        # the block's comm program gave up (nothing pushed), or this copy's receiver did (it
        # copied nothing into ``received``): report the first that hung
        recv_row = status + ((first_copy + copy) * (2 * status_tiles) + status_tiles + consumer_tile) * 4
        srow = tl.where(tl.load(srow) != 0, srow, recv_row)
    hang = tl.load(srow)

    # ----- the common case: one comparison per element, one reduction per slice ----------------
    # (the whole 128 x 128 tile at once spilled thousands of bytes per thread: 26 us per
    # iteration on an H200, docs/RESULTS.md; a slice keeps every value in registers)
    n_bad = hang * 0
    for s in tl.static_range(BLOCK_M // FAST_M):
        rows = tm * BLOCK_M + s * FAST_M + tl.arange(0, FAST_M)
        got, U, scale = tile_values(copy_out, row_exp, col_exp, ownership, rows, cols, t, copy, first_copy, M, NC,
                                    n_per_rank, WORLD, KIND)
        n_bad += tl.sum((got != U * scale).to(tl.int32))

    row = summary + ((first_copy + copy) * n_tiles + t) * NFIELDS
    if (n_bad == 0) & (hang == 0):
        # the host reads only rows whose class is not ok
        tl.store(row + 0, n_bad * 0 + OK)
    else:
        classify_bad(copy_out, row_exp, col_exp, prev_row_exp, prev_col_exp, ownership, tm, cols, t, copy, first_copy,
                     M, NC, n_per_rank, n_bad, hang, srow, consumer, consumer_tile, row, WORLD, BLOCK_M, SLOW_M, KIND,
                     STALE_SUMS)
    now = device_clock(INTERPRET)
    tl.store(row + 16, (now & 0xFFFFFFFF).to(tl.int32))
    tl.store(row + 17, (now >> 32).to(tl.int32))

    # ----- the next iteration: poison what this program read, clear its share -----------------
    # Every warp has read the whole tile before the barrier (the reductions above consumed it),
    # so no store below lands before a read of this program; other programs read other tiles.
    tl.debug_barrier()
    if POISON_OUT:
        poison_tile(copy_out, tm, cols, NC, BLOCK_M, BLOCK_N, FAST_M)
    if POISON_OTHER:
        poison_tile(other_out + copy * out_rank_stride, tm, cols, NC, BLOCK_M, BLOCK_N, FAST_M)
    programs = tl.num_programs(0)
    if ZERO_WORK:
        zero_share(work, work_numel, pid, programs)
    if ZERO_LOCKS >= 1:
        zero_share(locks_a, locks_a_numel, pid, programs)
    if ZERO_LOCKS >= 2:
        zero_share(locks_b, locks_b_numel, pid, programs)


@jit
def poison_tile(copy_out, tm, cols, NC, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, FAST_M: tl.constexpr):
    """NaN (the ``unwritten`` sentinel) into rows ``tm * BLOCK_M ...`` x ``cols`` of one C copy."""
    for s in tl.static_range(BLOCK_M // FAST_M):
        rows = tm * BLOCK_M + s * FAST_M + tl.arange(0, FAST_M)
        nan = tl.full((FAST_M, BLOCK_N), float("nan"), tl.float32)
        tl.store(copy_out + rows[:, None] * NC + cols[None, :], nan.to(copy_out.dtype.element_ty))


@jit
def zero_share(base, numel, pid, programs, BLOCK: tl.constexpr = 2048):
    """Zero program ``pid``'s contiguous share of ``numel`` elements at ``base``."""
    share = tl.cdiv(numel, programs)
    start = pid * share
    end = tl.minimum(start + share, numel)
    zeros = tl.zeros((BLOCK,), dtype=base.dtype.element_ty)
    for offset in range(start, end, BLOCK):
        index = offset + tl.arange(0, BLOCK)
        tl.store(base + index, zeros, mask=index < end)


@jit
def tile_values(copy_out, row_exp, col_exp, ownership, rows, cols, t, copy, first_copy, M, NC, n_per_rank,
                WORLD: tl.constexpr, KIND: tl.constexpr):
    """``(got, U, scale)`` of the elements ``rows x cols`` of one C copy: what is there, as
    float32, and the expected value ``U * scale`` (``syncverify.stress.inputs``). gemm-reduce-scatter's
    tiles that this copy does not own read as expected (a rank holds only its own slice)."""
    got = tl.load(copy_out + rows[:, None] * NC + cols[None, :]).to(tl.float32)
    U = (1 << (tl.load(row_exp + rows)[:, None] + tl.load(col_exp + cols)[None, :])).to(tl.float32)
    FULL: tl.constexpr = (1 << WORLD) - 1
    if KIND == "all-reduce" or KIND == "gemm-reduce-scatter":
        scale = tl.full((1, 1), FULL * 1.0, tl.float32)
    elif KIND == "all-gather-gemm":  # the rows of rank s's shard of A carry 2**s
        scale = (1 << (rows // (M // WORLD))).to(tl.float32)[:, None]
    else:
        scale = (1 << (cols // n_per_rank)).to(tl.float32)[None, :]
    if KIND == "gemm-reduce-scatter":
        got = tl.where(tl.load(ownership + t) == first_copy + copy, got, U * scale)
    return got, U, scale


@jit
def classify_bad(copy_out, row_exp, col_exp, prev_row_exp, prev_col_exp, ownership, tm, cols, t, copy, first_copy,
                 M, NC, n_per_rank, n_bad, hang, srow, consumer, consumer_tile, row, WORLD: tl.constexpr,
                 BLOCK_M: tl.constexpr, SLOW_M: tl.constexpr, KIND: tl.constexpr, STALE_SUMS: tl.constexpr):
    """The summary row of a tile with a bad element or a hung consumer (module docstring), read
    ``SLOW_M`` rows at a time: every count and mask is a sum or an OR over the slices, and the
    first bad element is in the first slice that has one (slices go down the rows)."""
    zero = n_bad * 0
    n_unwritten, n_stale, n_missing, n_corrupt = zero, zero, zero, zero
    stale_mask, mask = zero, zero
    first, got_bits, expected_bits = zero + 2147483647, zero, zero
    for s in range(BLOCK_M // SLOW_M):
        rows = tm * BLOCK_M + s * SLOW_M + tl.arange(0, SLOW_M)
        got, U, scale = tile_values(copy_out, row_exp, col_exp, ownership, rows, cols, t, copy, first_copy, M, NC,
                                    n_per_rank, WORLD, KIND)
        p_unwritten, p_stale, p_missing, p_corrupt, p_stale_mask, p_mask, p_first, p_got, p_expected = classify_slice(
            got, U, scale, rows, cols, prev_row_exp, prev_col_exp, NC, WORLD, KIND, STALE_SUMS)
        n_unwritten += p_unwritten
        n_stale += p_stale
        n_missing += p_missing
        n_corrupt += p_corrupt
        stale_mask = stale_mask | p_stale_mask
        mask = mask | p_mask
        take = (first == 2147483647) & (p_first != 2147483647)
        first = tl.where(take, p_first, first)
        got_bits = tl.where(take, p_got, got_bits)
        expected_bits = tl.where(take, p_expected, expected_bits)
    mask = tl.where(n_stale > n_missing, stale_mask, mask)

    # ----- tile class: hang, or the most common bad class -------------------------------------
    cls = zero + CORRUPT
    best = n_corrupt
    cls = tl.where(n_stale > best, STALE, cls)
    best = tl.maximum(best, n_stale)
    cls = tl.where(n_missing > best, MISSING, cls)
    best = tl.maximum(best, n_missing)
    cls = tl.where(n_unwritten > best, UNWRITTEN, cls)
    cls = tl.where(n_bad == 0, OK, cls)
    cls = tl.where(hang != 0, HANG, cls)

    tl.store(row + 0, cls)
    tl.store(row + 1, n_unwritten)
    tl.store(row + 2, n_stale)
    tl.store(row + 3, n_missing)
    tl.store(row + 4, n_corrupt)
    tl.store(row + 5, mask)
    tl.store(row + 6, tl.where(n_bad > 0, first, -1))
    tl.store(row + 7, got_bits)
    tl.store(row + 8, expected_bits)
    tl.store(row + 9, hang)
    tl.store(row + 10, tl.load(srow + 1))
    tl.store(row + 11, tl.load(srow + 2))
    tl.store(row + 12, tl.load(srow + 3))
    tl.store(row + 13, consumer)
    tl.store(row + 14, consumer_tile)
    tl.store(row + 15, n_bad)


@jit
def classify_slice(got, U, scale, rows, cols, prev_row_exp, prev_col_exp, NC, WORLD: tl.constexpr,
                   KIND: tl.constexpr, STALE_SUMS: tl.constexpr):
    """Per class, the bad elements of one slice of a tile: counts, the stale and missing rank
    masks, and the slice's first bad element (flat index, or ``2**31 - 1``) with its value and
    the expected value as float32 bits."""
    FULL: tl.constexpr = (1 << WORLD) - 1
    expected = U * scale
    ok = got == expected
    unwritten = (~ok) & ((got != got) | (got == 0.0))
    # with no previous iteration the caller passes this one's exponents: then U_prev * scale is
    # the expected value, which ``~ok`` excludes, so nothing is stale (and one compiled kernel
    # serves the first iteration and the rest)
    U_prev = (1 << (tl.load(prev_row_exp + rows)[:, None]
                     + tl.load(prev_col_exp + cols)[None, :])).to(tl.float32)
    stale = (~ok) & (~unwritten) & (got == U_prev * scale)
    bad = ~ok
    stale_mask = tl.sum(bad.to(tl.int32)) * 0  # only the all-reduce sums name the stale ranks
    if KIND == "all-reduce" or KIND == "gemm-reduce-scatter":
        stale_mask = tl.where(tl.max(stale.to(tl.int32)) > 0, FULL, stale_mask)
        if STALE_SUMS:
            # (FULL - b) * U + b * U_prev: ranks b's partials left from the previous iteration.
            # U_prev != U (consecutive iterations differ in parity), so b decodes in one step;
            # iteration 0 passes its own exponents as the previous ones: nothing decodes there
            differ = U_prev != U
            bq = tl.where(differ & (got == got), (got - FULL * U) / tl.where(differ, U_prev - U, 1.0), 0.5)
            bi = bq.to(tl.int32)
            mix = (~ok) & (~unwritten) & (~stale) & differ & (bi.to(tl.float32) == bq) & (bi > 0) & (bi < FULL)
            stale = stale | mix
            for r in tl.static_range(WORLD):
                stale_mask = stale_mask | (tl.max((mix & (((bi >> r) & 1) != 0)).to(tl.int32)) << r)
    q = tl.where(got == got, got / U, 0.0)  # NaN (the sentinel) never decodes as a rank mask
    qi = q.to(tl.int32)
    if KIND == "all-reduce" or KIND == "gemm-reduce-scatter":
        missing = (~ok) & (~unwritten) & (~stale) & (qi.to(tl.float32) == q) & (qi > 0) & (qi < FULL)
    else:
        missing = ok & (~ok)
    corrupt = bad & (~unwritten) & (~stale) & (~missing)
    mask = stale_mask * 0
    for r in tl.static_range(WORLD):
        absent = missing & (((qi >> r) & 1) == 0)
        mask = mask | (tl.max(absent.to(tl.int32)) << r)
    idx = rows[:, None] * NC + cols[None, :]
    first = tl.min(tl.where(bad, idx, 2147483647))
    got_bits = tl.sum(tl.where(idx == first, got.to(tl.int32, bitcast=True), 0))
    expected_bits = tl.sum(tl.where(idx == first, expected.to(tl.int32, bitcast=True), 0))
    return (tl.sum(unwritten.to(tl.int32)), tl.sum(stale.to(tl.int32)), tl.sum(missing.to(tl.int32)),
            tl.sum(corrupt.to(tl.int32)), stale_mask, mask, first, got_bits, expected_bits)


@jit
def device_clock(INTERPRET: tl.constexpr):
    """``%globaltimer`` (ns) on the GPU; 0 in the interpreter (the host clock stands in there)."""
    if INTERPRET:
        return tl.zeros((), dtype=tl.int64)
    else:
        return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64,
                                         is_pure=False, pack=1)


def output_tiles(config: KernelConfig) -> int:
    """Tiles of one C copy (``M x N`` in ``block_m x block_n`` tiles)."""
    return (config.m // config.block_m) * (config.n // config.block_n)


@dataclass(frozen=True)
class NextIteration:
    """What one validation launch prepares for the next iteration (virtual ranks only: every
    rank's kernel has finished when it runs, so no peer can still read what it clears).

    ``poison_out``: NaN into the validated C tiles once read; ``other_out``: the other C copies
    to poison tile by tile (all-scatter's pushed ``out``); ``work``: the workspace to zero
    (``--poison all``); ``locks``: the lock arrays reset between launches (at most two)."""

    poison_out: bool = False
    other_out: Any = None
    work: Any = None
    locks: tuple = ()


def classify_arguments(config: KernelConfig, out: "torch.Tensor", inputs, previous, status: "torch.Tensor",
                       summary: "torch.Tensor", *, first_copy: int = 0, stale_sums: bool = False,
                       next_iteration: NextIteration = NextIteration()) -> tuple[tuple, dict]:
    """The classify kernel's ``(arguments, meta-parameters)`` for :func:`classify` (and for
    compiling it as a launch would, ``syncverify.kernels.compile.compile_like_launch``)."""
    c = config
    prev = previous if previous is not None else inputs
    n = next_iteration
    if len(n.locks) > 2:
        raise ValueError(f"NextIteration clears at most 2 lock arrays, got {len(n.locks)}")
    locks = list(n.locks) + [out] * (2 - len(n.locks))  # unused slots: any pointer, never written
    args = (out, out[0].numel(), inputs.row_exp, inputs.col_exp, prev.row_exp, prev.col_exp,
            status, summary, ownership_tensor(c, out.device),
            n.other_out if n.other_out is not None else out,
            n.work if n.work is not None else out, n.work.numel() if n.work is not None else 0,
            locks[0], locks[0].numel() if n.locks else 0, locks[1], locks[1].numel() if len(n.locks) > 1 else 0,
            c.m, c.n, c.n_per_rank, c.tiles, first_copy)
    meta = dict(WORLD=c.world_size, BLOCK_M=c.block_m, BLOCK_N=c.block_n, KIND=c.kernel, NFIELDS=NFIELDS,
                INTERPRET=c.interpret, STALE_SUMS=stale_sums, **slice_rows(c), POISON_OUT=n.poison_out,
                POISON_OTHER=n.other_out is not None, ZERO_WORK=n.work is not None, ZERO_LOCKS=len(n.locks))
    return args, meta


def classify(config: KernelConfig, out: "torch.Tensor", inputs, previous, status: "torch.Tensor",
             summary: "torch.Tensor", *, first_copy: int = 0, stale_sums: bool = False,
             next_iteration: NextIteration = NextIteration(), compile_only: bool = False) -> None:
    """Classify every tile of the C copies in ``out`` (``[copies, M, N]``) into ``summary``
    (``[world, tiles, NFIELDS]`` int32; copy ``i`` of ``out`` is rank ``first_copy + i``).
    ``stale_sums``: the workspaces were not zeroed, so a sum with some ranks' partials from the
    previous iteration is ``stale`` (with ``poison="all"`` such a value can only be a coincidence:
    ``2 * U`` is both rank 1 alone and rank 0 plus rank 1's previous partial when ``U_prev = U / 2``).
    ``next_iteration``: what the same launch clears for the next iteration, after reading.
    ``compile_only``: compile for these arguments without running (before a CUDA graph capture)."""
    args, meta = classify_arguments(config, out, inputs, previous, status, summary, first_copy=first_copy,
                                    stale_sums=stale_sums, next_iteration=next_iteration)
    launcher = classify_kernel.launcher((out.shape[0] * output_tiles(config),), interpret=config.interpret,
                                        compile_only=compile_only)
    launcher(*args, **meta, num_warps=4)


def slice_rows(config: KernelConfig) -> dict[str, int]:
    """The classify kernel's slices: ``FAST_M`` rows per comparison pass, ``SLOW_M`` rows per
    pass of the full classification (ptxas: no spill at 128 x 128 tiles, 4 warps)."""
    return {"FAST_M": min(config.block_m, 32), "SLOW_M": min(config.block_m, 8)}
