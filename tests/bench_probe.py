"""A probe kernel for tests/test_bench.py: the kernels' tile order, run in the interpreter."""

from __future__ import annotations

from syncverify.kernels._deps import tl
from syncverify.kernels._jit import jit
from syncverify.kernels.tile import tile_of


@jit
def order_probe(out, tiles_m, tiles_n, N: tl.constexpr, GROUP_M: tl.constexpr):
    """``out[i] = tile_of(i)`` for every tile ``i`` (one program)."""
    for i in range(0, N):
        tl.store(out + i, tile_of(i, tiles_m, tiles_n, GROUP_M))
