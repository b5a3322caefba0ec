"""The Triton helpers every generated litmus kernel calls: stress and the aligned start.

Both use plain Triton operations (no inline asm), so they run the same on the GPU and under
``TRITON_INTERPRET=1``. Neither touches test memory: stress works on scratch lines, the start
barrier on its own counter.
"""

import triton.language as tl

from syncverify.kernels._jit import jit


@jit
def stress_line(line, tid, ITERS, PATTERN, LINE_WORDS: tl.constexpr):
    """``ITERS`` accesses by every thread to one word of a scratch line (MC Mutants' patterns).

    PATTERN 0 store-store, 1 store-load, 2 load-store, 3 load-load. Volatile loads and stores of
    the loaded value keep the compiler from folding the loop. Ordering argument: none needed,
    scratch is never read as a result.
    """
    p = line + tid % LINE_WORDS
    acc = tid
    i = 0
    while i < ITERS:  # a runtime bound (the interpreter's range() wants a constant)
        if PATTERN == 0:
            tl.store(p, acc + i)
            tl.store(p, acc - i)
        elif PATTERN == 1:
            tl.store(p, acc + i)
            acc += tl.load(p, volatile=True)
        elif PATTERN == 2:
            acc += tl.load(p, volatile=True)
            tl.store(p, acc)
        else:
            acc += tl.load(p, volatile=True)
            acc += tl.load(p, volatile=True)
        i += 1
    if PATTERN == 3:  # keep the loads live
        tl.store(p, acc, mask=acc == -1)


@jit
def global_barrier(sync_ptr, NPROGS, SPINS, SCOPE: tl.constexpr):
    """All test programs meet here before the test; a program that polls ``SPINS`` times
    without seeing them all counts itself in ``sync_ptr[1]`` (a misaligned start) and goes on.

    Ordering argument: a release arrival and acquire polls at ``SCOPE`` (``"gpu"``; ``"sys"``
    when the programs are on several GPUs and the counter on one of them); the barrier only
    aligns start times, the test's own memory is untouched. Triton predicates these scalar atomics to
    one thread and broadcasts with ``bar.sync`` (before the test, so no test ordering is added).
    """
    tl.atomic_add(sync_ptr, 1, sem="release", scope=SCOPE)
    seen = tl.atomic_add(sync_ptr, 0, sem="acquire", scope=SCOPE)
    spins = 0
    while (seen < NPROGS) & (spins < SPINS):
        seen = tl.atomic_add(sync_ptr, 0, sem="acquire", scope=SCOPE)
        spins += 1
    if seen < NPROGS:
        tl.atomic_add(sync_ptr + 1, 1, sem="relaxed", scope=SCOPE)
