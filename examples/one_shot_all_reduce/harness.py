"""Harnesses for ``gemm_one_shot_all_reduce.py`` (seed 000: iris example 17), one per version.

Each harness gives every rank a K-slice of A and B (small integers, so sums are exact), launches
the producer kernel on stream ``gemm`` and the consumer kernel on stream ``comm`` of every rank
(concurrent, as the example runs them), and expects every rank's C to be written by this call.
Sizes are the smallest that show the bugs: one tile per rank (``world_size`` tiles of 4 x 4),
one producer and one consumer program per rank, a K-slice of one block. From the second call
on, the flags are zeroed between two host barriers (seed 001's fix) before the launches.

What each version should get, and why (``EXPECTED`` below is the one table the tests and
``docs/kernels.md`` use):

* ``original`` (``VERSION="xchg"``), UNSAFE: **race**, **unwritten-read** (the ``C=0.0`` of the
  report). The local partial is announced by a weak ``.wt`` flag store after
  ``tl.debug_barrier()``: no release, and the ``.cv`` volatile poll is no acquire, so the
  consumer may sum a partial its own rank has not written yet (and the flag itself is a data
  race). From ``--world-size 3`` on, the two other ranks both ``atomic_xchg`` 1 into
  ``tile_ready``: the consumer leaves after the first and may read the second's partial unwritten.
* ``barrier_without_fence`` (``VERSION="add"``), UNSAFE: **race**, **unwritten-read**. Counting the
  remote signals with ``atomic_add`` fixes the overwrite, but the local path is still the CTA
  barrier and a plain flag with no release: "debug_barrier only synchronizes threads".
* ``seed_fix`` (``VERSION="fenced"``, the final commit as its description says), UNSAFE:
  **race**, **unwritten-read**. The report implies SAFE; the PTX model disagrees. A fence orders
  only the accesses of the thread that runs it, and the CTA barrier was removed: other warps'
  tile stores are not ordered before thread 0's release ``atomic_add`` (``docs/origins.md``:
  built-in ``fenced-release-acquire``, same verdict). The local ``.wt`` flag is also still a race.
* ``fix_with_barrier`` (``VERSION="fenced_barrier"``), SAFE: ``tl.debug_barrier()`` then the release
  fence and a release ``atomic_add`` on every rank's ``tile_ready`` (itself included); the
  consumer's acquire CAS (its result is used, so Triton broadcasts it behind a ``bar.sync``) waits
  for ``world_size``, then an acquire fence. Built-in ``barrier-fenced-release-acquire``.

Run: ``syncverify check examples/one_shot_all_reduce/harness.py::original --world-size 2``.
"""

import torch

import syncverify
from gemm_one_shot_all_reduce import persistent_all_reduce, persistent_gemm

#: harness -> (world size, calls, safe?, violation kinds, the built-in protocol with the same verdict)
EXPECTED = {
    "original": (2, 1, False, ("race", "unwritten-read"), "xchg-flag"),
    "barrier_without_fence": (2, 1, False, ("race", "unwritten-read"), "wt-cv-flag"),
    "seed_fix": (2, 1, False, ("race", "unwritten-read"), "fenced-release-acquire"),
    "fix_with_barrier": (2, 1, True, (), "barrier-fenced-release-acquire"),
}

BLOCK = 4  # tile and K-slice size: the model's cost grows with programs and steps, not elements
# The defaults are the sizes the model checks; ``syncverify stress`` on a GPU sets STRESS_SIZES (each
# ``--define`` over them). At 64 x 64 tiles every buggy version failed from iteration 1 under its guided
# schedule in every run on one H200 (96-99 of 100 iterations bad); at 128 x 128 the rate went from 0 to 90 %
# between runs (docs/RESULTS.md, 2026-12-02 seventh session; docs/stress.md).
STRESS_SIZES = {"SIZE": 1024, "BLOCK": 64, "BLOCK_K": 64, "PROGRAMS": 16}
SIZE = None  # None: W tiles of BLOCK; else C is SIZE x SIZE and each rank a K-slice of SIZE / W
BLOCK_K = None  # the K step (None: BLOCK)
PROGRAMS = 1  # producer programs, and as many consumer programs, per rank
# Stress only (``--define B_K_MAJOR=1``): each B laid out K-major (its transpose contiguous), the same values.
# Triton's tf32 wgmma takes B K-major; an N-major B is copied into shared memory with 4-byte copies,
# a K-major one with 16-byte copies (sm_90 PTX, docs/stress.md). The kernel is the same; only the
# harness's input layout changes. The model check keeps 0 (one tile: layout is not what it checks).
B_K_MAJOR = 0


def one_shot(sv, version: str):
    """One call of the one-shot all-reduce GEMM at ``sv.world_size`` ranks, kernels at ``version``."""
    W = sv.world_size
    if W < 2:
        raise ValueError(f"the one-shot all-reduce needs --world-size 2 or more (got {W})")
    # W tiles (tile t is rank t % W's), one K block per rank
    M, N, K = (W * BLOCK, BLOCK, BLOCK) if SIZE is None else (SIZE, SIZE, SIZE // W)
    g = torch.Generator().manual_seed(0)
    A = [torch.randint(-2, 3, (M, K), generator=g).float() for _ in range(W)]
    B = [torch.randint(-2, 3, (K, N), generator=g).float() for _ in range(W)]
    if B_K_MAJOR:
        B = [b.t().contiguous().t() for b in B]  # strides (1, K): the same matrix, K-major
    reference = sum(A[r] @ B[r] for r in range(W))

    local_C = sv.heap.zeros((M, N), torch.float32)
    C = sv.heap.zeros((M, N), torch.float32)
    tiles = (M // BLOCK) * (N // BLOCK)
    locks = sv.heap.zeros((tiles,), torch.int32)
    tile_ready = sv.heap.zeros((tiles,), torch.int32)
    meta = dict(BLOCK_SIZE_M=BLOCK, BLOCK_SIZE_N=BLOCK, VERSION=version, heap_bases=sv.heap.bases, world_size=W)

    def call(k):
        if k > 0:  # reset the flags between two host barriers (seed 001's preamble)
            sv.host_barrier()
            for r in range(W):
                sv.zero_(locks.on(r), rank=r, stream="gemm")
                sv.zero_(tile_ready.on(r), rank=r, stream="gemm")
            sv.host_barrier()
        for r in range(W):  # producers first: the Triton interpreter runs launches in issue order
            sv.launch(persistent_gemm, (PROGRAMS,), A[r], B[r], local_C.on(r), locks.on(r), tile_ready.on(r),
                      M, N, K, A[r].stride(0), A[r].stride(1), B[r].stride(0), B[r].stride(1), N, 1,
                      BLOCK_SIZE_K=BLOCK_K or BLOCK, GEMM_SMS=PROGRAMS, cur_rank=r, rank=r, stream="gemm", **meta)
        for r in range(W):
            sv.launch(persistent_all_reduce, (PROGRAMS,), local_C.on(r), C.on(r), locks.on(r), tile_ready.on(r),
                      M, N, N, 1, COMM_SMS=PROGRAMS, cur_rank=r, rank=r, stream="comm", **meta)
        sv.host_barrier()
        sv.expect_equal(C, reference, tile=(BLOCK, BLOCK))  # bad tiles classified under stress

    return call


@syncverify.harness
def original(sv):
    """The kernel the bug report was filed against: ``.wt`` flag + ``debug_barrier``, ``atomic_xchg`` signals."""
    return one_shot(sv, "xchg")


@syncverify.harness
def barrier_without_fence(sv):
    """``atomic_xchg`` replaced by ``atomic_add``; the CTA barrier and ``.wt`` flag, with no release, kept."""
    return one_shot(sv, "add")


@syncverify.harness
def seed_fix(sv):
    """The final commit as described: release fence instead of the CTA barrier, count ``world_size``."""
    return one_shot(sv, "fenced")


@syncverify.harness
def fix_with_barrier(sv):
    """The final commit with the CTA barrier put back and the ``.wt`` flag dropped: the fix that holds."""
    return one_shot(sv, "fenced_barrier")


#: The seeds' two-stream launch when the GPU keeps fewer CTAs resident than ``GEMM_SMS + COMM_SMS``
#: (issue 27, docs/residency.md): harness -> {CTAs resident per GPU: safe?}.
RESIDENT = {"fix_with_barrier_one_slot": {1: False, 2: True}}


@syncverify.harness
def fix_with_barrier_one_slot(sv):
    """``fix_with_barrier`` on a GPU that keeps one CTA resident at once (``GEMM_SMS + COMM_SMS = 2``):
    the communication kernel, on its own stream, can take the only slot and spin on ``tile_ready``
    while the GEMM CTA that would signal it never becomes resident: UNSAFE, **hang**. With two
    slots (``--resident 2``, every CTA co-resident, the seed's sizing) it is SAFE."""
    sv.resident(1)
    return one_shot(sv, "fenced_barrier")

