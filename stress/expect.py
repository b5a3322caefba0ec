"""A harness's expectations checked on the device, every iteration (``syncverify stress FILE.py``).

One launch per expectation (``sv.expect_equal(X, reference)`` or ``sv.expect_written(X)``, one rank's
copy): each program compares a block of elements, adds its bad elements to the expectation's row
of the summary ring and, after reading them, poisons them for the next call (``POISON``: NaN for
floats, the type's minimum for integers), so that an element the next call fails to write reads
as *unwritten* there. Per element, compared as float32 (exact for the small integers a harness
uses and for every 16-bit type):

==============  ==========================================================================
``ok``          equal to the reference (``expect_written``: anything but the poison)
``unwritten``   the poison (no write this call) or 0 where the reference is not 0 (a sum of
                partials no producer had written: seed 000's ``C=0.0``)
``corrupt``     anything else (a stale or partial value, a torn write)
==============  ==========================================================================

The row (:data:`FIELDS`, int32) holds the counts, the first bad element (flat index, with the
value seen and expected as float32 bits) and the device clock (``%globaltimer``, two halves)
when the check ran: time to first failure is measured on the device.
"""

from __future__ import annotations

from syncverify.kernels._deps import tl
from syncverify.kernels._jit import jit
from syncverify.stress.validate import device_clock

FIELDS = ("n_bad", "n_unwritten", "n_corrupt", "first_bad", "got_bits", "expected_bits", "time_lo", "time_hi")
NFIELDS = len(FIELDS)
NO_BAD = tl.constexpr(2147483647)  # ``first_bad`` before any bad element (a constexpr: the kernel reads it)
BLOCK = 1024


@jit
def expect_kernel(out, ref, n, row, POISON: tl.constexpr, HAS_REF: tl.constexpr, IS_FLOAT: tl.constexpr,
                  SENTINEL: tl.constexpr, BLOCK: tl.constexpr, INTERPRET: tl.constexpr):
    # ----- which elements ---------------------------------------------------------------------
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    inside = offs < n

    # ----- compare ----------------------------------------------------------------------------
    raw = tl.load(out + offs, mask=inside)
    got = raw.to(tl.float32)
    if IS_FLOAT:
        poisoned = got != got
    else:
        poisoned = raw == SENTINEL
    if HAS_REF:
        expected = tl.load(ref + offs, mask=inside).to(tl.float32)
        ok = got == expected
        unwritten = (~ok) & (poisoned | ((got == 0.0) & (expected != 0.0)))
    else:
        expected = got * 0.0
        ok = ~poisoned
        unwritten = poisoned
    bad = (~ok) & inside
    unwritten = unwritten & inside
    n_bad = tl.sum(bad.to(tl.int32))
    if n_bad > 0:
        n_unwritten = tl.sum(unwritten.to(tl.int32))
        tl.atomic_add(row + 0, n_bad, sem="relaxed")
        tl.atomic_add(row + 1, n_unwritten, sem="relaxed")
        tl.atomic_add(row + 2, n_bad - n_unwritten, sem="relaxed")
        first = tl.min(tl.where(bad, offs, NO_BAD))
        before = tl.atomic_min(row + 3, first, sem="relaxed")
        if first < before:  # this block holds the first bad element so far
            tl.store(row + 4, tl.sum(tl.where(offs == first, got.to(tl.int32, bitcast=True), 0)))
            tl.store(row + 5, tl.sum(tl.where(offs == first, expected.to(tl.int32, bitcast=True), 0)))
    if pid == 0:
        now = device_clock(INTERPRET)
        tl.store(row + 6, (now & 0xFFFFFFFF).to(tl.int32))
        tl.store(row + 7, (now >> 32).to(tl.int32))

    # ----- poison what was read, for the next call ---------------------------------------------
    if POISON:
        if IS_FLOAT:
            tl.store(out + offs, tl.full((BLOCK,), float("nan"), tl.float32).to(out.dtype.element_ty), mask=inside)
        else:
            tl.store(out + offs, tl.full((BLOCK,), SENTINEL, out.dtype.element_ty), mask=inside)


@jit
def epilogue_kernel(ctl, hangs_row, HANGS: tl.constexpr, FIELDS: tl.constexpr, ITERATION: tl.constexpr):
    """End of an iteration: copy the control block's hang fields into the ring, clear them, count
    the iteration (the rewritten kernels read it for their delays)."""
    for i in tl.static_range(FIELDS):
        tl.store(hangs_row + i, tl.load(ctl + HANGS + i))
        tl.store(ctl + HANGS + i, 0)
    tl.store(ctl + ITERATION, tl.load(ctl + ITERATION) + 1)


def poison_value(dtype) -> tuple[bool, int]:
    """``(is_float, sentinel)`` of a torch dtype: floats are poisoned with NaN, integers with their minimum."""
    # torch: only a stress run validates (the model runs without it)
    import torch

    if dtype.is_floating_point:
        return True, 0
    return False, int(torch.iinfo(dtype).min)


def expect(out, ref, row, *, poison: bool, interpret: bool) -> None:
    """Launch :func:`expect_kernel` for one expectation (``ref`` None: ``expect_written``)."""
    is_float, sentinel = poison_value(out.dtype)
    n = out.numel()
    grid = (max(1, -(-n // BLOCK)),)
    expect_kernel.launcher(grid, interpret=interpret)(
        out, ref if ref is not None else out, n, row, POISON=poison, HAS_REF=ref is not None, IS_FLOAT=is_float,
        SENTINEL=sentinel, BLOCK=BLOCK, INTERPRET=interpret)
