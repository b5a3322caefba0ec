"""The validation kernel itself, in the interpreter, on C copies written by hand: each class is
decoded from a known tile (counts summed and the first bad element found across the slices the
kernel reads a tile in), and the same launch prepares the next iteration (poison and lock reset)
only after it has read what was there."""

from __future__ import annotations

import math

import pytest
import torch

from syncverify.kernels.build import ownership_tensor
from syncverify.kernels.config import KernelConfig
from syncverify.stress.classify import bad_tiles
from syncverify.stress.inputs import expected_output, make_inputs
from syncverify.stress.validate import NFIELDS, NextIteration, classify, output_tiles, slice_rows

# 2 x 4 tiles of 32 x 16 per copy: a tile is read as 4 slices of 8 rows when it is bad
SMALL = dict(world_size=2, m=64, n=64, k=64, block_m=32, block_n=16, block_k=16, interpret=True)


def _tile(copy: torch.Tensor, c: KernelConfig, t: int) -> torch.Tensor:
    tiles_n = c.n // c.block_n
    r, q = divmod(t, tiles_n)
    return copy[r * c.block_m:(r + 1) * c.block_m, q * c.block_n:(q + 1) * c.block_n]


def _summary(c, out, inputs, previous, status, **options):
    summary = torch.zeros(c.world_size, output_tiles(c), NFIELDS, dtype=torch.int32)
    classify(c, out, inputs, previous, status, summary, **options)
    return bad_tiles(summary, iteration=3, n_cols=c.n, num_world=c.world_size)


def test_each_class_is_decoded_from_a_tile_written_by_hand():
    c = KernelConfig(kernel="all-reduce", **SMALL)
    assert slice_rows(c) == {"FAST_M": 32, "SLOW_M": 8}
    g = torch.Generator().manual_seed(11)
    now, before = (make_inputs(c, parity=p, generator=g, device="cpu") for p in (0, 1))
    expected, previous = expected_output(c, now), expected_output(c, before)
    U = expected / 3  # C = (2**W - 1) * U
    out = torch.stack([expected, expected]).to(torch.bfloat16)
    _tile(out[0], c, 1)[5, 3] = math.nan  # one unwritten element
    _tile(out[0], c, 2)[16:24] = _tile(previous, c, 2)[16:24].to(torch.bfloat16)  # slice 2 of 4: stale
    _tile(out[0], c, 3)[:] = _tile(U, c, 3).to(torch.bfloat16)  # rank 0's partial alone: rank 1 missing
    _tile(out[0], c, 3)[0, 0] = math.nan  # and one unwritten element: missing-ranks is the most common
    _tile(out[1], c, 4)[30, 15] = _tile(expected, c, 4)[30, 15] * 5  # no class: corrupt, in the last slice
    status = torch.zeros(c.world_size, 2 * c.tiles, 4, dtype=torch.int32)
    hung_tile = 6
    consumer = int(ownership_tensor(c, "cpu")[hung_tile])
    status[consumer, hung_tile] = torch.tensor([1, 1, 0, 8])  # timed out, lock read 1 at step 0, 8 polls

    tiles = {(t.rank, t.tile): t for t in _summary(c, out, now, before, status)}
    kinds = {key: t.kind for key, t in tiles.items()}
    assert kinds == {(0, 1): "unwritten", (0, 2): "stale", (0, 3): "missing-ranks", (1, 4): "corrupt",
                     (0, hung_tile): "hang", (1, hung_tile): "hang"}
    assert tiles[0, 1].counts == {"unwritten": 1, "stale": 0, "missing-ranks": 0, "corrupt": 0, "elements": 1}
    assert tiles[0, 1].first_bad["row"] == 5 and math.isnan(tiles[0, 1].first_bad["got"])
    stale = tiles[0, 2]
    assert stale.counts["stale"] == 8 * c.block_n  # every element of one slice, counted once
    assert (stale.first_bad["row"], stale.first_bad["col"]) == (16, 2 * c.block_n)  # first bad: slice 2
    assert stale.first_bad["got"] == previous[16, 2 * c.block_n]
    missing = tiles[0, 3]
    assert missing.counts["missing-ranks"] == c.block_m * c.block_n - 1 and missing.counts["unwritten"] == 1
    assert missing.missing_ranks == (1,)
    corrupt = tiles[1, 4]
    assert (corrupt.first_bad["row"], corrupt.first_bad["col"]) == (c.block_m + 30, 15)
    assert corrupt.first_bad["expected"] == expected[c.block_m + 30, 15]
    assert tiles[1, hung_tile].hang == {"seen": 1, "step": 0, "polls": 8}


@pytest.mark.parametrize("stale_sums", [False, True])
def test_a_sum_with_one_ranks_previous_partial_is_stale_only_when_the_workspaces_are_kept(stale_sums):
    c = KernelConfig(kernel="all-reduce", **SMALL)
    g = torch.Generator().manual_seed(5)
    now, before = (make_inputs(c, parity=p, generator=g, device="cpu") for p in (0, 1))
    U, U_prev = expected_output(c, now) / 3, expected_output(c, before) / 3
    out = torch.stack([U * 3, U * 3]).to(torch.bfloat16)
    _tile(out[1], c, 7)[8:16] = (_tile(U, c, 7) + 2 * _tile(U_prev, c, 7))[8:16].to(torch.bfloat16)  # rank 1's old
    status = torch.zeros(c.world_size, 2 * c.tiles, 4, dtype=torch.int32)
    (tile,) = _summary(c, out, now, before, status, stale_sums=stale_sums)
    if stale_sums:
        assert (tile.kind, tile.stale_ranks, tile.counts["stale"]) == ("stale", (1,), 8 * c.block_n)
    else:  # with the workspaces zeroed such a value is no earlier sum: not stale
        assert tile.kind != "stale" and tile.counts["stale"] == 0


@pytest.mark.parametrize("poison", ["all", "outputs"])
def test_the_validation_launch_prepares_the_next_iteration_after_reading(poison):
    # all-scatter: the validated copy is `received`, the pushed copy `out`; both poisoned, the
    # workspace zeroed (poison all) and two lock arrays reset, by the same launch
    c = KernelConfig(kernel="all-scatter", **dict(SMALL, n=128))
    inputs = make_inputs(c, parity=1, generator=torch.Generator().manual_seed(2), device="cpu")
    expected = expected_output(c, inputs)
    received = torch.stack([expected, expected]).to(torch.bfloat16)
    _tile(received[1], c, 9)[:] = 0.0  # unwritten: read before it is poisoned
    out = received.clone()
    work = torch.full((2, c.m, c.n_per_rank), 3.0, dtype=torch.bfloat16)
    locks = (torch.full((2, 3, c.tiles), 7, dtype=torch.int32), torch.full((2, 1, c.tiles), 9, dtype=torch.int32))
    prepare = NextIteration(poison_out=True, other_out=out, work=work if poison == "all" else None, locks=locks)
    status = torch.zeros(c.world_size, 2 * c.tiles, 4, dtype=torch.int32)
    tiles = _summary(c, received, inputs, inputs, status, next_iteration=prepare)
    assert [(t.rank, t.tile, t.kind) for t in tiles] == [(1, 9, "unwritten")]
    assert torch.isnan(received.float()).all() and torch.isnan(out.float()).all()
    assert (work == 0).all() if poison == "all" else (work == 3.0).all()
    assert all((lock == 0).all() for lock in locks)


def test_at_most_two_lock_arrays_are_reset_by_the_validation_launch():
    c = KernelConfig(kernel="all-reduce", **SMALL)
    inputs = make_inputs(c, parity=0, generator=torch.Generator().manual_seed(0), device="cpu")
    out = torch.zeros(2, c.m, c.n, dtype=torch.bfloat16)
    status = torch.zeros(2, 2 * c.tiles, 4, dtype=torch.int32)
    with pytest.raises(ValueError, match="at most 2 lock arrays, got 3"):
        _summary(c, out, inputs, inputs, status, next_iteration=NextIteration(locks=(out, out, out)))
