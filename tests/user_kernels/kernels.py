"""Tiny ``@triton.jit`` kernels for tests/test_user_stress.py: each shows one behaviour of
``syncverify stress FILE.py`` in Triton's interpreter."""

import triton
import triton.language as tl


@triton.jit
def writer(out, N: tl.constexpr, HALF: tl.constexpr):
    """Write ``1..N`` into ``out`` (only the first half when ``HALF``: a bug validation must catch)."""
    offs = tl.arange(0, N)
    mask = offs < (N // 2 if HALF else N)
    tl.store(out + offs, offs.to(tl.float32) + 1.0, mask=mask)


@triton.jit
def waiter(out, flag, N: tl.constexpr):
    """Wait for ``flag`` (nobody sets it: a hang), then write ``out``."""
    while tl.load(flag, volatile=True) != 1:
        pass
    offs = tl.arange(0, N)
    tl.store(out + offs, offs.to(tl.float32) + 1.0)


@triton.jit
def broken(out, N: tl.constexpr):
    """Does not compile: a name that does not exist."""
    tl.store(out + tl.arange(0, N), no_such_value)  # noqa: F821


@triton.jit
def while_else(out, flag, N: tl.constexpr):
    """A ``while ... else`` the rewrite refuses."""
    while tl.load(flag, volatile=True) != 1:
        pass
    else:
        tl.store(out + tl.arange(0, N), tl.zeros((N,), tl.float32))


@triton.jit
def tiled_bugs(out, src, N: tl.constexpr, T: tl.constexpr):
    """``out`` and ``src`` (``N x N``, tiles of ``T x T``) should both hold ``1 .. N*N``; one tile of
    each class is wrong (tests/test_user_stress.py): out's tile (0, 1) is never written, its tile
    (1, 0) only in its first ``T // 2`` rows, its tile (1, 1) is copied from ``src`` before ``src``
    is written (stale), and src's tile (0, 0) gets a wrong value."""
    r = tl.arange(0, T)[:, None]
    c = tl.arange(0, T)[None, :]
    # tile (1, 1) of out: a copy of src's, read before src is written this call
    at = (T + r) * N + (T + c)
    tl.store(out + at, tl.load(src + at))
    # src: every tile, tile (0, 0) off by one
    for ti in tl.static_range(2):
        for tj in tl.static_range(2):
            at = (ti * T + r) * N + (tj * T + c)
            tl.store(src + at, at.to(tl.float32) + 1.0 + (1.0 if ti + tj == 0 else 0.0))
    # out: tile (0, 0) whole, tile (1, 0) its first T // 2 rows, tile (0, 1) never
    at = r * N + c
    tl.store(out + at, at.to(tl.float32) + 1.0)
    at = (T + r) * N + c
    tl.store(out + at, at.to(tl.float32) + 1.0, mask=r < T // 2)


@triton.jit
def polled_reader(out, data, flag, N: tl.constexpr):
    """Poll ``flag`` (weak, volatile), then copy ``data`` to ``out``: a read whose address is known
    before the wait (what a guided touch makes early)."""
    offs = tl.arange(0, N)
    while tl.load(flag, volatile=True) != 1:
        pass
    tl.store(out + offs, tl.load(data + offs))

