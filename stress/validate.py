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
A tile with no bad element and no hang costs one comparison and one reduction (the profiler
measured the full classification of every tile at 267 us of an iteration's 291 us on an H200);
only a bad tile is classified in full (:func:`classify_bad`).
Each tile's summary row (int32, :data:`FIELDS`) keeps the counts, the missing-rank mask (for a
stale tile: the ranks whose partial was stale), the first bad element with its value and the
expected value (float32 bits), the hang's last seen value, and the device clock
(``%globaltimer`` ns, two halves) when the validation ran: time to first failure is measured on
the device, not when the host queued the iteration.
"""

from __future__ import annotations

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
    # all-reduce's tile owners (syncverify.rules.ownership_table: the owner of tile t at t)
    ownership,
    # sizes
    M, NC, n_per_rank, status_tiles, first_copy,
    # meta-parameters (STALE_SUMS: the workspaces keep the previous iteration's partials)
    WORLD: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, KIND: tl.constexpr,
    NFIELDS: tl.constexpr, INTERPRET: tl.constexpr, STALE_SUMS: tl.constexpr = False,
):
    # ----- which tile of which copy -----------------------------------------------------------
    pid = tl.program_id(0)
    tiles_n = NC // BLOCK_N
    n_tiles = (M // BLOCK_M) * tiles_n
    copy = pid // n_tiles
    t = pid % n_tiles
    tm = t // tiles_n
    tn = t % tiles_n
    rows = tm * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tn * BLOCK_N + tl.arange(0, BLOCK_N)
    idx = rows[:, None] * NC + cols[None, :]
    got = tl.load(out + copy * out_rank_stride + idx).to(tl.float32)

    # ----- expected values -------------------------------------------------------------------
    U = (1 << (tl.load(row_exp + rows)[:, None] + tl.load(col_exp + cols)[None, :])).to(tl.float32)
    FULL: tl.constexpr = (1 << WORLD) - 1
    if KIND == "all-reduce" or KIND == "gemm-reduce-scatter":
        scale = FULL * 1.0
    elif KIND == "all-gather-gemm":  # the rows of rank s's shard of A carry 2**s
        scale = (1 << (rows // (M // WORLD))).to(tl.float32)[:, None]
    else:
        scale = (1 << (cols // n_per_rank)).to(tl.float32)[None, :]
    expected = U * scale
    if KIND == "gemm-reduce-scatter":  # a rank's C holds its own slice only: other tiles are not checked
        got = tl.where(tl.load(ownership + t) == first_copy + copy, got, expected)
    ok = got == expected
    n_bad = tl.sum((~ok).to(tl.int32))

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

    row = summary + ((first_copy + copy) * n_tiles + t) * NFIELDS
    if (n_bad == 0) & (hang == 0):
        # the common case, kept to one reduction: the host reads only rows whose class is not ok
        tl.store(row + 0, n_bad * 0 + OK)
    else:
        classify_bad(got, expected, U, ok, idx, rows, cols, prev_row_exp, prev_col_exp, scale, n_bad, hang,
                     srow, consumer, consumer_tile, row, WORLD, KIND, STALE_SUMS)
    now = device_clock(INTERPRET)
    tl.store(row + 16, (now & 0xFFFFFFFF).to(tl.int32))
    tl.store(row + 17, (now >> 32).to(tl.int32))


@jit
def classify_bad(got, expected, U, ok, idx, rows, cols, prev_row_exp, prev_col_exp, scale, n_bad, hang,
                 srow, consumer, consumer_tile, row, WORLD: tl.constexpr, KIND: tl.constexpr,
                 STALE_SUMS: tl.constexpr):
    """The summary row of a tile with a bad element or a hung consumer (module docstring)."""
    FULL: tl.constexpr = (1 << WORLD) - 1
    unwritten = (~ok) & ((got != got) | (got == 0.0))
    # with no previous iteration the caller passes this one's exponents: then U_prev * scale is
    # the expected value, which ``~ok`` excludes, so nothing is stale (and one compiled kernel
    # serves the first iteration and the rest)
    U_prev = (1 << (tl.load(prev_row_exp + rows)[:, None]
                     + tl.load(prev_col_exp + cols)[None, :])).to(tl.float32)
    stale = (~ok) & (~unwritten) & (got == U_prev * scale)
    stale_mask = n_bad * 0
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
    bad = ~ok
    corrupt = bad & (~unwritten) & (~stale) & (~missing)
    n_unwritten = tl.sum(unwritten.to(tl.int32))
    n_stale = tl.sum(stale.to(tl.int32))
    n_missing = tl.sum(missing.to(tl.int32))
    n_corrupt = tl.sum(corrupt.to(tl.int32))
    mask = n_bad * 0
    for r in tl.static_range(WORLD):
        absent = missing & (((qi >> r) & 1) == 0)
        mask = mask | (tl.max(absent.to(tl.int32)) << r)
    mask = tl.where(n_stale > n_missing, stale_mask, mask)
    first = tl.min(tl.where(bad, idx, 2147483647))
    got_bits = tl.sum(tl.where(idx == first, got.to(tl.int32, bitcast=True), 0))
    expected_bits = tl.sum(tl.where(idx == first, expected.to(tl.int32, bitcast=True), 0))

    # ----- tile class: hang, or the most common bad class -------------------------------------
    cls = n_bad * 0 + CORRUPT
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


def classify(config: KernelConfig, out: "torch.Tensor", inputs, previous, status: "torch.Tensor",
             summary: "torch.Tensor", *, first_copy: int = 0, stale_sums: bool = False) -> None:
    """Classify every tile of the C copies in ``out`` (``[copies, M, N]``) into ``summary``
    (``[world, tiles, NFIELDS]`` int32; copy ``i`` of ``out`` is rank ``first_copy + i``).
    ``stale_sums``: the workspaces were not zeroed, so a sum with some ranks' partials from the
    previous iteration is ``stale`` (with ``poison="all"`` such a value can only be a coincidence:
    ``2 * U`` is both rank 1 alone and rank 0 plus rank 1's previous partial when ``U_prev = U / 2``)."""
    c = config
    copies = out.shape[0]
    prev = previous if previous is not None else inputs
    classify_kernel.launcher((copies * output_tiles(c),), interpret=c.interpret)(
        out, out[0].numel(), inputs.row_exp, inputs.col_exp, prev.row_exp, prev.col_exp,
        status, summary, ownership_tensor(c, out.device),
        c.m, c.n, c.n_per_rank, c.tiles, first_copy,
        WORLD=c.world_size, BLOCK_M=c.block_m, BLOCK_N=c.block_n, KIND=c.kernel,
        NFIELDS=NFIELDS, INTERPRET=c.interpret, STALE_SUMS=stale_sums,
        num_warps=4,
    )
