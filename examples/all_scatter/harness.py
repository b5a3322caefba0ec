"""Harnesses for ``gemm_all_scatter_wg_specialization.py`` (seed 001: iris example 10).

Each rank computes one column block of C = A @ B (small integers, so results are exact) with one
GEMM program and one communication program in one launch, and every rank's whole C must be
written by each call. One tile per rank (4 x 4), the smallest size that shows the bugs.

The report names three bugs. Bug 1 (``torchrun`` around a script that spawns its own
processes) is about launching, not synchronization: nothing to check here. Bug 3 (memory
ordering) is the kernel's handshake, bug 2 (the lock reset) the host's:

* ``original`` (``VERSION="wt"``), UNSAFE: **race**, **unwritten-read**. ``.wt`` picks a cache
  policy, not an order: the lock's weak store after ``tl.debug_barrier()`` has no release and the
  ``.cv`` volatile poll no acquire, so the communication program may put a tile before it is
  written (and the lock itself is a data race). Built-in ``wt-cv-flag``.
* ``seed_fix`` (``VERSION="xchg"``), UNSAFE: **race**, **unwritten-read**. The report implies SAFE;
  the PTX model finds two holes: with no CTA barrier before it, thread 0's release exchange does
  not order the other warps' tile stores, and the acquire CAS runs on thread 0 with its result
  unused, so no ``bar.sync`` orders the other warps' reads after it. Built-in
  ``release-xchg-cas-acquire``, same verdict (on the H200 it stayed latent: docs/RESULTS.md).
* ``fix_with_barriers`` (``VERSION="barrier_xchg"``), SAFE: a ``tl.debug_barrier()`` before the
  release exchange and one after the acquire CAS.
* ``reset_on_gemm_stream`` (two calls), UNSAFE: **hang**, **race**, **stale-read**. Bug 2: each
  call zeroes the locks on stream ``gemm`` while the kernel runs on ``main``; nothing orders the
  two. A reset that lands after the producer's exchange leaves the consumer spinning (hang);
  one that lands late lets the second call's consumer see the first call's lock and scatter the
  first call's tile (stale-read). Checked with ``--calls 2``.
* ``reset_between_barriers`` (two calls), SAFE: the report's fix, the reset in a preamble between
  two host barriers (``shmem.barrier(); locks.zero_(); shmem.barrier()``).

Run: ``syncverify check examples/all_scatter/harness.py::reset_on_gemm_stream --world-size 2 --calls 2``.
"""

import torch

import syncverify
from gemm_all_scatter_wg_specialization import persistent_gemm_all_scatter_wg_specialization as kernel

#: harness -> (world size, calls, safe?, violation kinds, the built-in protocol with the same verdict)
EXPECTED = {
    "original": (2, 1, False, ("race", "unwritten-read"), "wt-cv-flag"),
    "seed_fix": (2, 1, False, ("race", "unwritten-read"), "release-xchg-cas-acquire"),
    "fix_with_barriers": (2, 1, True, (), None),
    "reset_on_gemm_stream": (2, 2, False, ("hang", "race", "stale-read"), None),
    "reset_between_barriers": (2, 2, True, (), None),
}

BLOCK = 4  # tile and K size: the model's cost grows with programs and steps, not elements
# The defaults are the sizes the model checks; ``syncverify stress`` on a GPU sets STRESS_SIZES (each
# ``--define`` over them): 13,012 validated iterations/s on one H200 (docs/RESULTS.md run 6), with every
# buggy variant still failing there (docs/stress.md).
STRESS_SIZES = {"SIZE": 1024, "BLOCK": 64, "BLOCK_K": 64, "PROGRAMS": 64, "B_K_MAJOR": 1}
SIZE = None  # None: one tile per rank; else C is SIZE x SIZE, K = SIZE, each rank SIZE / W columns
BLOCK_K = None  # the K step (None: BLOCK)
PROGRAMS = 1  # GEMM programs, and as many communication programs, per rank
# Stress only (``--define B_K_MAJOR=1``): each B laid out K-major (its transpose contiguous), the same values.
# Triton's tf32 wgmma takes B K-major; an N-major B is copied into shared memory with 4-byte copies,
# a K-major one with 16-byte copies (sm_90 PTX, docs/stress.md). The kernel is the same; only the
# harness's input layout changes. The model check keeps 0 (one tile: layout is not what it checks).
B_K_MAJOR = 0


def all_scatter(sv, version: str, reset: str):
    """Calls of the GEMM + all-scatter at ``sv.world_size`` ranks; ``reset``: how locks are zeroed
    before each call (``"none"``, ``"gemm-stream"`` racing with the kernel, ``"between-barriers"``)."""
    W = sv.world_size
    # one tile per rank: rank r computes C[:, r*N:(r+1)*N]
    M, N, K = (BLOCK, BLOCK, BLOCK) if SIZE is None else (SIZE, SIZE // W, SIZE)
    g = torch.Generator().manual_seed(1)
    A = torch.randint(-2, 3, (M, K), generator=g).float()
    B = [torch.randint(-2, 3, (K, N), generator=g).float() for _ in range(W)]
    if B_K_MAJOR:
        B = [b.t().contiguous().t() for b in B]  # strides (1, K): the same matrix, K-major
    reference = torch.cat([A @ B[r] for r in range(W)], dim=1)

    c_global = sv.heap.zeros((M, N * W), torch.float32)
    locks = sv.heap.zeros(((M // BLOCK) * (N // BLOCK),), torch.int32)  # one lock per tile of this rank's block

    def call(k):
        if reset == "gemm-stream":  # bug 2: the reset on another stream than the kernel's
            for r in range(W):
                sv.zero_(locks.on(r), rank=r, stream="gemm")
        elif reset == "between-barriers":  # the fix: a preamble between two host barriers
            sv.host_barrier()
            for r in range(W):
                sv.zero_(locks.on(r), rank=r, stream="main")
            sv.host_barrier()
        for r in range(W):
            sv.launch(kernel, (2 * PROGRAMS,), A, B[r], c_global.on(r), locks.on(r), M, N, K,
                      A.stride(0), A.stride(1), B[r].stride(0), B[r].stride(1), N * W, 1,
                      BLOCK_SIZE_M=BLOCK, BLOCK_SIZE_N=BLOCK, BLOCK_SIZE_K=BLOCK_K or BLOCK, GEMM_SMS=PROGRAMS,
                      NUM_SMS=2 * PROGRAMS,
                      VERSION=version, heap_bases=sv.heap.bases, cur_rank=r, world_size=W,
                      rank=r, stream="main")
        sv.host_barrier()  # the benchmark loop's barrier after each iteration
        sv.expect_equal(c_global, reference, tile=(BLOCK, BLOCK))  # bad tiles classified under stress

    return call


@syncverify.harness
def original(sv):
    """The original kernel: ``debug_barrier`` + ``.wt`` lock store, ``.cv`` volatile spin."""
    return all_scatter(sv, "wt", "none")


@syncverify.harness
def seed_fix(sv):
    """The report's fix of bug 3: release ``atomic_xchg``, ``.cv`` poll, acquire ``atomic_cas``."""
    return all_scatter(sv, "xchg", "none")


@syncverify.harness
def fix_with_barriers(sv):
    """The fix of bug 3 with a CTA barrier before the exchange and after the CAS."""
    return all_scatter(sv, "barrier_xchg", "none")


@syncverify.harness
def reset_on_gemm_stream(sv):
    """Bug 2: ``locks.zero_()`` on the gemm stream, racing with the kernel on main (use ``--calls 2``)."""
    return all_scatter(sv, "barrier_xchg", "gemm-stream")


@syncverify.harness
def reset_between_barriers(sv):
    """Bug 2's fix: zero the locks in a preamble between two host barriers (use ``--calls 2``)."""
    return all_scatter(sv, "barrier_xchg", "between-barriers")
