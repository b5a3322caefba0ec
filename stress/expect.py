"""A harness's expectations checked on the device, every iteration (``syncverify stress FILE.py``).

One launch per expectation (``sv.expect_equal(X, reference)`` or ``sv.expect_written(X)``, one rank's
copy): each program compares a piece of the tensor, adds its bad elements to the expectation's row
of the summary ring (and, where the harness names tiles, ``tile=``, to its tile's row of the tile
ring) and, after reading them, poisons them for the next call, so that an element the next call
fails to write reads as *unwritten* there.

**Tagged poison.** Each expected output gets its own poison (:func:`poison_bits`): a NaN whose
payload is the output's tag (float32, float16, bfloat16), or the integer type's minimum plus the
tag (int32, int64); other types get an untagged NaN or minimum. An element that holds *its own*
output's poison was not written this call; one that holds *another* output's poison was written
this call, by a copy of memory that still held the previous call's state (a consumer that pushed
or read a tile before its producer wrote it this call): it is *stale*. Per element, compared as
float32 (exact for the small integers a harness uses and for every 16-bit type):

==============  ==========================================================================
``ok``          equal to the reference (``expect_written``: anything but a poison)
``unwritten``   its own poison (no write this call) or 0 where the reference is not 0 (a sum of
                partials no producer had written: seed 000's ``C=0.0``)
``stale``       another output's poison: copied this call from memory the previous call left
``corrupt``     anything else (a wrong or torn value, a computed NaN): *wrong value* for a tile
==============  ==========================================================================

A bad tile's class (:func:`tile_class`): ``wrong-value`` if any element is wrong, else ``stale`` if
any is stale, else ``never-written`` if every element is unwritten, else ``partial`` (some
elements written this call, the others not).

The row (:data:`FIELDS`, int32) holds the counts, the first bad element (flat index, with the
value seen and expected as float32 bits) and the device clock (``%globaltimer``, two halves)
when the check ran: time to first failure is measured on the device. A program that finds no bad
element does no atomic: a clean iteration costs one read of the output (and of the reference)
and one write of the poison.
"""

from __future__ import annotations

from syncverify.kernels._deps import tl
from syncverify.kernels._jit import jit
from syncverify.stress.validate import device_clock

FIELDS = ("n_bad", "n_unwritten", "n_corrupt", "first_bad", "got_bits", "expected_bits", "time_lo", "time_hi",
          "n_stale")
NFIELDS = len(FIELDS)
#: Words of a ring row: FIELDS padded to 16 bytes. Triton specializes a pointer argument on its
#: 16-byte alignment, so rows that were not would compile a second variant of the kernel, in
#: whichever iteration first met one (docs/stress.md, Timing).
ROW_WORDS = -(-NFIELDS // 4) * 4
TILE_FIELDS = ("n_bad", "n_unwritten", "n_stale", "n_wrong")
NTILE_FIELDS = len(TILE_FIELDS)
TILE_CLASSES = ("never-written", "partial", "stale", "wrong-value")
NO_BAD = tl.constexpr(2147483647)  # ``first_bad`` before any bad element (a constexpr: the kernel reads it)
#: Elements one program compares (a piece of a tile, or of the flattened tensor when none is named).
PIECE = 2048
#: Tags are 1 .. MAX_TAG (0 is the untagged poison: a computed NaN is not taken for one).
MAX_TAG = 4095


@jit
def expect_kernel(out, ref, tile_rows, row, own_tag, n_cols,
                  # the tensor as rows x n_cols, in tiles of TM x TN, each compared in CH x BN pieces
                  TM: tl.constexpr, TN: tl.constexpr, CH: tl.constexpr, BN: tl.constexpr,
                  POISON: tl.constexpr, HAS_REF: tl.constexpr, IS_FLOAT: tl.constexpr, BITS: tl.constexpr,
                  TAG_BITS: tl.constexpr, BASE: tl.constexpr, TILED: tl.constexpr, NTILE: tl.constexpr,
                  INTERPRET: tl.constexpr):
    # ----- which elements: tile pid0, its rows pid1 * CH.., its columns pid2 * BN.. -------------
    tile = tl.program_id(0)
    tiles_per_row = n_cols // TN
    ri = tl.program_id(1) * CH + tl.arange(0, CH)
    ci = tl.program_id(2) * BN + tl.arange(0, BN)
    inside = (ri < TM)[:, None] & (ci < TN)[None, :]
    offs = ((tile // tiles_per_row) * TM + ri)[:, None] * n_cols + ((tile % tiles_per_row) * TN + ci)[None, :]

    # ----- classify ---------------------------------------------------------------------------
    raw = tl.load(out + offs, mask=inside)
    got = raw.to(tl.float32)
    if IS_FLOAT:
        if BITS == 32:
            bits = raw.to(tl.int32, bitcast=True)
        elif BITS == 16:
            bits = raw.to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
        else:
            bits = raw.to(tl.int64, bitcast=True)
        if TAG_BITS > 0:
            tag = bits & ((1 << TAG_BITS) - 1)
            poison = ((bits - tag) == BASE) & (tag != 0)
        else:
            tag = bits * 0
            poison = got != got
    else:
        tag = raw - BASE
        if TAG_BITS > 0:
            poison = (tag > 0) & (tag < (1 << TAG_BITS))
        else:
            poison = tag == 0
    own = poison & (tag == own_tag)
    if HAS_REF:
        expected = tl.load(ref + offs, mask=inside).to(tl.float32)
        ok = got == expected
        unwritten = (~ok) & (own | ((got == 0.0) & (expected != 0.0)))
    else:
        expected = got * 0.0
        ok = ~poison
        unwritten = own
    bad = (~ok) & inside
    unwritten = unwritten & inside
    stale = bad & poison & ~own & ~unwritten
    n_bad = tl.sum(tl.sum(bad.to(tl.int32), axis=1), axis=0)
    if n_bad > 0:  # the rare case: counts, the first bad element, the tile's row
        n_unwritten = tl.sum(tl.sum(unwritten.to(tl.int32), axis=1), axis=0)
        n_stale = tl.sum(tl.sum(stale.to(tl.int32), axis=1), axis=0)
        tl.atomic_add(row + 0, n_bad, sem="relaxed")
        tl.atomic_add(row + 1, n_unwritten, sem="relaxed")
        tl.atomic_add(row + 2, n_bad - n_unwritten - n_stale, sem="relaxed")
        tl.atomic_add(row + 8, n_stale, sem="relaxed")
        if TILED:
            at = tile_rows + tile * NTILE
            tl.atomic_add(at + 0, n_bad, sem="relaxed")
            tl.atomic_add(at + 1, n_unwritten, sem="relaxed")
            tl.atomic_add(at + 2, n_stale, sem="relaxed")
            tl.atomic_add(at + 3, n_bad - n_unwritten - n_stale, sem="relaxed")
        first = tl.min(tl.min(tl.where(bad, offs, NO_BAD), axis=1), axis=0)
        before = tl.atomic_min(row + 3, first, sem="relaxed")
        if first < before:  # this piece holds the first bad element so far
            at_first = offs == first
            tl.store(row + 4, tl.sum(tl.sum(tl.where(at_first, got.to(tl.int32, bitcast=True), 0), axis=1), axis=0))
            tl.store(row + 5, tl.sum(tl.sum(tl.where(at_first, expected.to(tl.int32, bitcast=True), 0), axis=1),
                                     axis=0))
    if (tl.program_id(0) == 0) & (tl.program_id(1) == 0) & (tl.program_id(2) == 0):
        now = device_clock(INTERPRET)
        tl.store(row + 6, (now & 0xFFFFFFFF).to(tl.int32))
        tl.store(row + 7, (now >> 32).to(tl.int32))

    # ----- poison what was read, for the next call: this output's own poison -------------------
    if POISON:
        if IS_FLOAT:
            if BITS == 32:
                value = tl.full((CH, BN), BASE, tl.int32) + own_tag
                tl.store(out + offs, value.to(tl.float32, bitcast=True).to(out.dtype.element_ty), mask=inside)
            elif BITS == 16:
                value = (tl.full((CH, BN), BASE, tl.int32) + own_tag).to(tl.int16)
                tl.store(out + offs, value.to(out.dtype.element_ty, bitcast=True), mask=inside)
            else:
                tl.store(out + offs, tl.full((CH, BN), float("nan"), out.dtype.element_ty), mask=inside)
        else:
            tl.store(out + offs, (tl.full((CH, BN), BASE, out.dtype.element_ty) + own_tag).to(out.dtype.element_ty),
                     mask=inside)


@jit
def epilogue_kernel(ctl, hangs_row, HANGS: tl.constexpr, FIELDS: tl.constexpr, ITERATION: tl.constexpr):
    """End of an iteration: copy the control block's hang fields into the ring, clear them, count
    the iteration (the rewritten kernels read it for their delays)."""
    for i in tl.static_range(FIELDS):
        tl.store(hangs_row + i, tl.load(ctl + HANGS + i))
        tl.store(ctl + HANGS + i, 0)
    tl.store(ctl + ITERATION, tl.load(ctl + ITERATION) + 1)


def tag_bits(dtype) -> int:
    """Payload bits a poison of ``dtype`` carries for its tag (0: untagged)."""
    # torch: only a stress run validates (the model runs without it)
    import torch

    return {torch.float32: 12, torch.float16: 9, torch.bfloat16: 6, torch.int32: 12, torch.int64: 12}.get(dtype, 0)


def poison_base(dtype) -> tuple[bool, int]:
    """``(is_float, base)``: a float poison is ``base | tag`` in the type's bits (a quiet NaN), an
    integer poison ``base + tag`` with ``base`` the type's minimum."""
    # torch: only a stress run validates (the model runs without it)
    import torch

    if dtype.is_floating_point:
        return True, {torch.float32: 0x7FC00000, torch.float16: 0x7E00, torch.bfloat16: 0x7FC0}.get(dtype, 0)
    return False, int(torch.iinfo(dtype).min)


def tag_of(index: int, dtype) -> int:
    """The tag of the ``index``-th distinct expected output (0-based) in ``dtype``'s payload (wraps
    when there are more outputs than tags: two outputs then share a poison)."""
    bits = tag_bits(dtype)
    if bits == 0:
        return 0
    return index % min((1 << bits) - 1, MAX_TAG) + 1


def fill_poison(tensor, tag: int) -> None:
    """Fill ``tensor`` with its output's poison (the snapshot the heap is restored from)."""
    # torch: only a stress run validates (the model runs without it)
    import torch

    is_float, base = poison_base(tensor.dtype)
    if not is_float:
        tensor.fill_(base + tag)
    elif tag_bits(tensor.dtype):
        as_int = {2: torch.int16, 4: torch.int32}[tensor.element_size()]
        value = base + tag
        if value >= 1 << (8 * tensor.element_size() - 1):  # the bits as the signed integer view reads them
            value -= 1 << (8 * tensor.element_size())
        tensor.view(as_int).fill_(value)
    else:
        tensor.fill_(float("nan"))


def tile_class(n_bad: int, n_unwritten: int, n_stale: int, n_wrong: int, size: int) -> str:
    """A bad tile's class from its counts (module docstring)."""
    if n_wrong:
        return "wrong-value"
    if n_stale:
        return "stale"
    return "never-written" if n_unwritten == size else "partial"


def geometry(shape: tuple, tile: tuple) -> dict:
    """The tensor as ``rows x n_cols`` in tiles of ``TM x TN`` and the pieces one program compares."""
    if tile:
        tm, tn = (1, tile[0]) if len(tile) == 1 else tile
        n_cols = shape[-1]
        tiles = 1
        for n, t in zip(shape, tile):
            tiles *= n // t
    else:  # no tiles named: the flattened tensor as one tile
        n = 1
        for size in shape:
            n *= size
        tm, tn, n_cols, tiles = 1, max(n, 1), max(n, 1), 1
    bn = min(_pow2(tn), PIECE)
    ch = min(_pow2(tm), max(1, PIECE // bn))
    return {"TM": tm, "TN": tn, "CH": ch, "BN": bn, "n_cols": n_cols, "tiles": tiles,
            "grid": (tiles, -(-tm // ch), -(-tn // bn))}


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def expect(out, ref, row, tile_rows, *, tile: tuple, tag: int, poison: bool, interpret: bool) -> None:
    """Launch :func:`expect_kernel` for one expectation (``ref`` None: ``expect_written``;
    ``tile_rows``: the expectation's rows of the tile ring, when it names tiles)."""
    is_float, base = poison_base(out.dtype)
    g = geometry(tuple(out.shape), tile)
    expect_kernel.launcher(g["grid"], interpret=interpret)(
        out, ref if ref is not None else out, tile_rows if tile_rows is not None else row, row, tag, g["n_cols"],
        TM=g["TM"], TN=g["TN"], CH=g["CH"], BN=g["BN"], POISON=poison, HAS_REF=ref is not None, IS_FLOAT=is_float,
        BITS=8 * out.element_size(), TAG_BITS=tag_bits(out.dtype), BASE=base, TILED=tile_rows is not None,
        NTILE=NTILE_FIELDS, INTERPRET=interpret)
