"""What the kernel front end costs: a fused GEMM + one-shot all-reduce, iris style, checked as written.

The kernel (below) is what a user writes: GEMM programs compute their rank's partial tiles, store
them on the rank's heap, pass a CTA barrier and add 1 to the tile owner's counter (release, sys,
through a translated pointer); comm programs wait until their tile's counter reaches the world
size (acquire), read every rank's partial, sum and write the tile to every rank's output.

Run (CPU only; prints a table last, recorded in docs/BENCHMARKS.md):

    python benchmarks/frontend_bench.py            # the issue's size and the neighbouring ones
    python benchmarks/frontend_bench.py --quick    # the issue's size only

The harness is also checkable from the command line:
``syncverify check benchmarks/frontend_bench.py::issue_size --world-size 2``.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
import triton
import triton.language as tl

import syncverify


@triton.jit
def translate(ptr, from_rank, to_rank, heap_bases):
    """``ptr`` in ``from_rank``'s heap, as the same offset in ``to_rank``'s heap (iris.translate)."""
    from_base = tl.load(heap_bases + from_rank)
    to_base = tl.load(heap_bases + to_rank)
    offset = tl.cast(ptr, tl.uint64) - from_base
    return tl.cast(tl.cast(to_base, tl.pointer_type(tl.int8)) + offset, ptr.dtype)


@triton.jit
def gemm_all_reduce(
    # symmetric heap: inputs (this rank's K-slice), partial tiles, output, one counter per tile
    A, B, partial, out, counters, heap_bases,
    # which rank this launch is
    rank,
    # meta-parameters
    WORLD: tl.constexpr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GEMM_SMS: tl.constexpr, COMM_SMS: tl.constexpr, BARRIER: tl.constexpr, SIGNAL_SEM: tl.constexpr,
):
    pid = tl.program_id(0)
    num_n: tl.constexpr = N // BLOCK_N
    n_tiles: tl.constexpr = (M // BLOCK_M) * num_n
    rm = tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if pid < GEMM_SMS:
        # ----- GEMM: this rank's partial of each tile, then signal the tile's owner -------------
        for t in range(pid, n_tiles, GEMM_SMS):
            offs_m = (t // num_n) * BLOCK_M + rm
            offs_n = (t % num_n) * BLOCK_N + rn
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for k in range(0, K, BLOCK_K):
                a = tl.load(A + offs_m[:, None] * K + (k + rk)[None, :])
                b = tl.load(B + (k + rk)[:, None] * N + offs_n[None, :])
                acc += tl.dot(a, b)
            tl.store(partial + offs_m[:, None] * N + offs_n[None, :], acc)
            if BARRIER:
                tl.debug_barrier()  # every warp's share of the tile before the signal
            owner = t % WORLD
            tl.atomic_add(translate(counters + t, rank, owner, heap_bases), 1, sem=SIGNAL_SEM, scope="sys")
    else:
        # ----- comm: wait for every rank's partial of my tiles, sum, write to every rank --------
        for j in range(pid - GEMM_SMS, n_tiles // WORLD, COMM_SMS):
            t = rank + j * WORLD
            while tl.atomic_add(counters + t, 0, sem="acquire", scope="sys") < WORLD:
                pass
            offs_m = (t // num_n) * BLOCK_M + rm
            offs_n = (t % num_n) * BLOCK_N + rn
            c = offs_m[:, None] * N + offs_n[None, :]
            total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for s in range(WORLD):
                total += tl.load(translate(partial + c, rank, s, heap_bases))
            for d in range(WORLD):
                tl.store(translate(out + c, rank, d, heap_bases), total)


def make_harness(*, tiles_m: int = 2, tiles_n: int = 2, block: int = 16, gemm_sms: int = 2, comm_sms: int = 2,
                 barrier: bool = True, signal_sem: str = "release"):
    """A harness of one fused launch per rank: ``tiles_m x tiles_n`` tiles of ``block``^2."""

    def harness(sv):
        W = sv.world_size
        if (tiles_m * tiles_n) % W:
            raise ValueError(f"{tiles_m * tiles_n} tiles do not divide over {W} ranks")
        M, N, K = tiles_m * block, tiles_n * block, block
        A = sv.heap.zeros((M, K), torch.float32)
        B = sv.heap.zeros((K, N), torch.float32)
        partial = sv.heap.zeros((M, N), torch.float32)
        out = sv.heap.zeros((M, N), torch.float32)
        counters = sv.heap.zeros((tiles_m * tiles_n,), torch.int32)
        for r in range(W):
            A.on(r).copy_(torch.randn(M, K))
            B.on(r).copy_(torch.randn(K, N))
        for r in range(W):
            sv.launch(gemm_all_reduce, (gemm_sms + comm_sms,), A.on(r), B.on(r), partial.on(r), out.on(r),
                      counters.on(r), sv.heap.bases, r, WORLD=W, M=M, N=N, K=K, BLOCK_M=block, BLOCK_N=block,
                      BLOCK_K=block, GEMM_SMS=gemm_sms, COMM_SMS=comm_sms, BARRIER=barrier,
                      SIGNAL_SEM=signal_sem, rank=r)
        sv.expect_written(out)
    return harness


#: The issue's size: W = 2, 4 tiles, 2 GEMM and 2 comm programs per rank, 2 model threads per CTA.
issue_size = syncverify.harness(make_harness())
#: The same kernel without its CTA barrier (a race the check must find).
no_barrier = make_harness(barrier=False)


def measure(label: str, harness, *, world_size: int = 2, threads: int = 2, timeout: float = 120.0) -> dict:
    start = time.perf_counter()
    result = syncverify.check_kernel(harness, world_size=world_size, threads_per_cta=threads, timeout=timeout)
    seconds = time.perf_counter() - start
    row = {"case": label, "W": world_size, "threads/CTA": threads, "verdict": result.verdict,
           "kinds": ",".join(result.violations) or "-", "programs": result.size.get("programs", 0),
           "model threads": result.size.get("threads", 0), "paths": result.size.get("paths", 0),
           "executions": result.executions, "seconds": round(seconds, 1),
           "limit": result.limit_hit or "-"}
    print(row, file=sys.stderr, flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the issue's size")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    cases = [("issue: 4 tiles, 2+2 programs/rank", issue_size, 2, 2),
             ("same, no CTA barrier (race)", no_barrier, 2, 2)]
    if not args.quick:
        cases += [("4 tiles, 1 model thread/CTA", issue_size, 2, 1),
                  ("8 tiles (2x4), 2+2 programs/rank", make_harness(tiles_n=4), 2, 2),
                  ("4 tiles, 1+1 programs/rank", make_harness(gemm_sms=1, comm_sms=1), 2, 2),
                  ("4 tiles, W=4, 2+2 programs/rank", make_harness(), 4, 2)]
    rows = [measure(label, h, world_size=w, threads=t, timeout=args.timeout) for label, h, w, t in cases]
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(str(row[k]) for k in keys) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
