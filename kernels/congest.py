"""An L2-congesting kernel: the planned action for a witness only the memory system can show.

Some witnesses of the model cannot be forced by delaying a program: a store, a CTA barrier, then
the signal (the barrier waits for the store however late its warps are), read by a consumer that
acquires after its poll (an acquire invalidates its SM's L1, so no stale line can serve the read
either). Only the memory system can then deliver the signal before the data. On one H200 it does,
under L2 congestion (docs/RESULTS.md, 2026-12-02, ``benchmarks/user_stress_latent_gpu.py``): with
64 CTAs of relaxed atomics over 256 MB (more than the 50 MB L2) beside kernels of that shape, 5 of
9,600 tiles read after an acquire CAS were stale (1,348 with a touch and late producers), none
without it.

:func:`sv_congest` is that kernel, bounded in time: each CTA issues relaxed atomic adds to
scattered ``BLOCK``-element lines of a buffer larger than L2 until ``ns`` nanoseconds of
``%globaltimer`` have passed since it started (so a CUDA graph can hold it: no host-provided
deadline). It touches only its own buffer and waits for nobody, so it cannot deadlock a kernel
beside it: a CTA of the user's kernel that finds no SM free waits at most ``ns``. In the
interpreter (no clock) it makes ``ROUNDS`` passes instead.
"""

from __future__ import annotations

from syncverify.kernels._deps import tl
from syncverify.kernels._jit import jit

#: CTAs of the congesting kernel (the probe's 64: room for the examples' 64 CTAs beside them on 132 SMs).
CTAS = 64
#: Its buffer on a GPU, in int32 elements: 256 MB, five times the H200's 50 MB L2 (the probe's).
GPU_ELEMENTS = 64 << 20
#: In the interpreter: a small buffer and a few passes (the CPU path only checks the launch).
INTERPRET_ELEMENTS = 4096
INTERPRET_ROUNDS = 2
#: Elements per atomic line of a CTA.
BLOCK = 1024


@jit
def _now():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@jit
def sv_congest(buf, n, ns, BLOCK: tl.constexpr, ROUNDS: tl.constexpr, INTERPRET: tl.constexpr):
    """Relaxed atomics over ``buf`` (``n`` int32, larger than L2 on a GPU) for ``ns`` ns from this
    CTA's start (``INTERPRET``: ``ROUNDS`` steps; module docstring)."""
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    lines = n // BLOCK
    if INTERPRET:
        for k in range(ROUNDS):
            base = ((pid * 7919 + k * 104729) % lines) * BLOCK
            tl.atomic_add(buf + base + offs, 1, sem="relaxed", scope="gpu")
    else:
        deadline = _now() + ns
        k = 0
        while _now() < deadline:  # bounded by the clock: ns from this CTA's start
            base = ((pid * 7919 + k * 104729) % lines) * BLOCK
            tl.atomic_add(buf + base + offs, 1, sem="relaxed", scope="gpu")
            k += 1


#: CTAs of the aimed-traffic kernel per rank's copy of the aimed buffer.
AIM_CTAS = 32


@jit
def sv_aim(buf, n, sink, ns, BLOCK: tl.constexpr, ROUNDS: tl.constexpr, INTERPRET: tl.constexpr):
    """Traffic aimed at one buffer's own lines: ``ld.global.cg`` loads (L2, not L1) of ``buf``'s
    ``n`` int32 words, ``BLOCK`` at a time, for ``ns`` ns from this CTA's start (``INTERPRET``:
    ``ROUNDS`` blocks). The values are kept by a store into ``sink`` masked by ``sink[0]``, which the
    host leaves 0, so nothing is ever written: a reader whose values nobody uses, beside a kernel
    that stores into ``buf``, can only add reads, never an outcome the kernel alone does not allow.
    Its point is the stores' way: they queue at the L2 slices that hold ``buf`` behind these loads,
    while a flag's line elsewhere is free."""
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    lines = tl.cdiv(n, BLOCK)
    never = tl.load(sink) != 0
    acc = tl.zeros((BLOCK,), tl.int32)
    if INTERPRET:
        for k in range(ROUNDS):
            at = ((pid + k * 7) % lines) * BLOCK + offs
            acc += tl.load(buf + at, mask=at < n, other=0)
    else:
        deadline = _now() + ns
        k = 0
        while _now() < deadline:  # bounded by the clock: ns from this CTA's start
            at = ((pid + k * 7) % lines) * BLOCK + offs
            acc += tl.load(buf + at, mask=at < n, other=0, cache_modifier=".cg")
            k += 1
    tl.store(sink + BLOCK + offs, acc, mask=never)  # aligned: no layout conversion, no bar.sync
