"""Kernels of two ranks for tests/test_real_ranks.py (``import iris``: the shim a check provides)."""

import iris
import triton
import triton.language as tl


@triton.jit
def wait_then_copy(out, data, flag, N: tl.constexpr):
    """Wait (acquire) for ``flag``, then copy ``data`` (this rank's copy) to ``out``."""
    while tl.atomic_add(flag, 0, sem="acquire", scope="sys") != 1:
        pass
    offs = tl.arange(0, N)
    tl.store(out + offs, tl.load(data + offs))


@triton.jit
def put_then_signal(data, flag, heap_bases, me: tl.constexpr, peer: tl.constexpr, N: tl.constexpr):
    """Write ``1..N`` into ``peer``'s copy of ``data``, then set ``peer``'s ``flag`` (release)."""
    offs = tl.arange(0, N)
    iris.store(data + offs, offs.to(tl.float32) + 1.0, me, peer, heap_bases)
    iris.atomic_xchg(flag, 1, me, peer, heap_bases, sem="release", scope="sys")
