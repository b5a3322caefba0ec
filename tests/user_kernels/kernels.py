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
def polled_reader(out, data, flag, N: tl.constexpr):
    """Poll ``flag`` (weak, volatile), then copy ``data`` to ``out``: a read whose address is known
    before the wait (what a guided touch makes early)."""
    offs = tl.arange(0, N)
    while tl.load(flag, volatile=True) != 1:
        pass
    tl.store(out + offs, tl.load(data + offs))

