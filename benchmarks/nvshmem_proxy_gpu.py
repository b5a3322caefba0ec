"""A stress stand-in for NVSHMEM's put-with-signal on one GPU: a proxy program delivers the chunks.

The device has no NVSHMEM and no second node (docs/nvshmem.md, "Stress"), so this does not test
NVSHMEM. It tests the *protocol* around a delivery agent that has exactly the freedom the
specification gives one: "The operation is considered complete after a subsequent call to
nvshmem_quiet" (``put_nbi``), so chunks of non-blocking puts complete in any order, each chunk's
signal after its own data. Each instance is one ring step of NVIDIA/nvshmem #84's example:

* an **issuer** CTA writes two chunks of fresh data (``it``, a new value per launch) and posts a
  put-with-signal request per chunk (a release store of ``it`` to the chunk's request word: the
  ``nvshmem_putmem_signal_nbi`` call);
* two **proxy** CTAs, one per chunk (the delivery agents: NVSHMEM's proxy thread or the NIC), each
  wait for their request (acquire), sleep a random time, copy their chunk to the destination,
  then update the signal with a release atomic at system scope (choice 13 e);
* a **consumer** CTA waits for chunk 0 and reads it.

| variant | signal | the consumer waits | zoo entry (the model's answer) |
| --- | --- | --- | --- |
| ``cumulative-add`` | ``SIGNAL_ADD`` 1 on one counter | counter ``>= 1`` | ``nvshmem-84-cumulative-signal`` (stale chunk 0: Sometimes) |
| ``per-chunk-set`` | ``SIGNAL_SET`` ``it`` on the chunk's own signal | its signal ``== it`` | ``nvshmem-84-per-chunk-signal`` (Never) |

An instance is ``fresh`` (every element of chunk 0 the consumer read is ``it``), ``stale`` or
``timeout`` (its wait gave up after ``MAX_POLLS`` polls). A stale chunk where the zoo entry says
Never is an outcome the model forbids: **MODEL UNSOUND** (exit 1). ``cumulative-add`` is also the
positive control: with delays it must go stale (else the delays reorder nothing and the run shows
nothing). The model's answers are computed from the zoo files (``syncverify`` on ``PYTHONPATH``).
Each variant is first compiled to sm_90 PTX and checked for its signal and poll instructions.

GPU (about 60 s; compact table last; raw counts under ``$OUT``)::

    export PYTHONPATH=$PWD PYTHONUNBUFFERED=1; python3 benchmarks/nvshmem_proxy_gpu.py

CPU path (``TRITON_INTERPRET=1``: programs run one after another, issuer and proxies first, so
only fresh chunks; ``tests/test_nvshmem_proxy_gpu.py`` runs it)::

    TRITON_INTERPRET=1 python benchmarks/nvshmem_proxy_gpu.py --seconds 0 --launches 2 --pairs 2

Exit codes: 0 no outcome the model forbids, 1 MODEL UNSOUND, a PTX check failed or the positive
control showed nothing, 2 no GPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tma_litmus_gpu import (INTERPRET, common_arguments, delay_campaign, judged, litmus_allows,  # noqa: E402
                            ordered_findings, report, setup, sleep_ns)  # one harness for the GPU litmus scripts

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "protocols" / "zoo"

#: variant -> (cumulative SIGNAL_ADD counter, the zoo entry that states it)
VARIANTS: dict[str, tuple[bool, str]] = {
    "cumulative-add": (True, "nvshmem-84-cumulative-signal.litmus"),
    "per-chunk-set": (False, "nvshmem-84-per-chunk-signal.litmus"),
}
CONTROL = "cumulative-add"


@triton.jit
def wait_until(ptr, target, GE: tl.constexpr, MAX_POLLS: tl.constexpr):
    """Poll ``ptr`` with acquire loads at system scope until ``>= target`` (``GE``) or ``== target``
    (``nvshmem_signal_wait_until``, choice 13 g), at most ``MAX_POLLS`` times; whether it held."""
    seen = tl.atomic_add(ptr, 0, sem="acquire", scope="sys")
    polls = 1
    if GE:
        while (seen < target) & (polls < MAX_POLLS):
            seen = tl.atomic_add(ptr, 0, sem="acquire", scope="sys")
            polls += 1
        held = seen >= target
    else:
        while (seen != target) & (polls < MAX_POLLS):
            seen = tl.atomic_add(ptr, 0, sem="acquire", scope="sys")
            polls += 1
        held = seen == target
    return held


@triton.jit
def proxy_ring_kernel(src_ptr, dst_ptr, req_ptr, sig_ptr, out_ptr, delays_ptr, it, PAIRS,
                      CHUNK: tl.constexpr, CUMULATIVE: tl.constexpr, MAX_POLLS: tl.constexpr,
                      ON_GPU: tl.constexpr):
    """Programs ``[0, P)`` issue, ``[P, 3P)`` deliver (pair ``(pid - P) // 2``, chunk ``(pid - P) % 2``),
    ``[3P, 4P)`` consume: in program order for the interpreter. ``out[pair]``: the consumer's count
    of stale elements of chunk 0, -1 on a timeout (of the consumer, or of a proxy: -2)."""
    pid = tl.program_id(0)
    offs = tl.arange(0, CHUNK)
    if pid < PAIRS:
        # ----- issuer: both chunks' data, then a put-with-signal request per chunk -----
        pair = pid
        tl.store(src_ptr + pair * 2 * CHUNK + offs, tl.full([CHUNK], 0, tl.int32) + it)
        tl.store(src_ptr + (pair * 2 + 1) * CHUNK + offs, tl.full([CHUNK], 0, tl.int32) + it)
        tl.debug_barrier()
        tl.atomic_xchg(req_ptr + pair * 2, it, sem="release", scope="gpu")
        tl.atomic_xchg(req_ptr + pair * 2 + 1, it, sem="release", scope="gpu")
    elif pid < 3 * PAIRS:
        # ----- proxy (delivery agent) of one chunk: wait for its request, delay, copy, signal -----
        pair = (pid - PAIRS) // 2
        chunk = (pid - PAIRS) % 2
        if wait_until(req_ptr + pair * 2 + chunk, it, False, MAX_POLLS):
            sleep_ns(tl.load(delays_ptr + pid), ON_GPU)
            data = tl.load(src_ptr + (pair * 2 + chunk) * CHUNK + offs)
            tl.store(dst_ptr + (pair * 2 + chunk) * CHUNK + offs, data)
            tl.debug_barrier()
            if CUMULATIVE:  # NVSHMEM_SIGNAL_ADD on the pair's one counter (nvshmem #84)
                tl.atomic_add(sig_ptr + pair * 2, 1, sem="release", scope="sys")
            else:  # NVSHMEM_SIGNAL_SET of the chunk's own signal (the maintainer's fix)
                tl.atomic_xchg(sig_ptr + pair * 2 + chunk, it, sem="release", scope="sys")
        else:
            tl.store(out_ptr + pair, -2)
    else:
        # ----- consumer: wait for chunk 0, read it -----
        pair = pid - 3 * PAIRS
        if CUMULATIVE:  # CMP_GE 1: a count, not which chunk (BUG)
            held = wait_until(sig_ptr + pair * 2, 1, True, MAX_POLLS)
        else:
            held = wait_until(sig_ptr + pair * 2, it, False, MAX_POLLS)
        if held:
            got = tl.load(dst_ptr + pair * 2 * CHUNK + offs)
            tl.atomic_max(out_ptr + pair, tl.sum((got != it).to(tl.int32)), sem="relaxed", scope="gpu")
        else:
            tl.store(out_ptr + pair, -1)


#: variant -> instructions (regular expressions over PTX lines) that must appear, in this order
EXPECTED_PTX: dict[str, tuple[str, ...]] = {
    "cumulative-add": (r"atom\.global\.gpu\.release\.exch", r"atom\.global\.sys\.acquire|ld\.global\.sys\.acquire",
                       r"(atom|red)\.global\.sys\.release\.add"),
    "per-chunk-set": (r"atom\.global\.gpu\.release\.exch", r"atom\.global\.sys\.acquire|ld\.global\.sys\.acquire",
                      r"atom\.global\.sys\.release\.exch"),
}


def constexprs(variant: str, *, chunk: int, max_polls: int, on_gpu: bool) -> dict:
    """The kernel's ``tl.constexpr`` arguments for ``variant``."""
    return dict(CHUNK=chunk, CUMULATIVE=VARIANTS[variant][0], MAX_POLLS=max_polls, ON_GPU=on_gpu)


def compile_ptx(variant: str, *, chunk: int = 256, max_polls: int = 1 << 20) -> str:
    """sm_90 PTX of ``variant``'s kernel, compiled on the CPU (no GPU needed)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature = {"src_ptr": "*i32", "dst_ptr": "*i32", "req_ptr": "*i32", "sig_ptr": "*i32", "out_ptr": "*i32",
                 "delays_ptr": "*i32", "it": "i32", "PAIRS": "i32"}
    consts = constexprs(variant, chunk=chunk, max_polls=max_polls, on_gpu=True)
    signature.update({name: "constexpr" for name in consts})
    return triton.compile(ASTSource(proxy_ring_kernel, signature, consts), target=GPUTarget("cuda", 90, 32)).asm["ptx"]


def ptx_findings(variant: str, ptx: str) -> list[str]:
    """An expected instruction missing or out of order in ``variant``'s PTX (empty: as the table says)."""
    return ordered_findings(variant, ptx, EXPECTED_PTX[variant])


def model_allows_stale(variant: str) -> bool:
    """Whether the model allows a stale chunk 0 in ``variant`` (its zoo entry's observation)."""
    return litmus_allows(ZOO / VARIANTS[variant][1])


def run_variant(variant: str, *, pairs: int, chunk: int, seconds: float, min_launches: int, batch: int,
                max_delay_ns: int, max_polls: int, device: str) -> list[dict]:
    """Launch ``variant`` for ``seconds`` (at least ``min_launches`` launches), half without and half
    with random proxy delays; tally each outcome."""
    src = torch.zeros(pairs * 2 * chunk, dtype=torch.int32, device=device)
    dst = torch.zeros_like(src)
    req = torch.zeros(pairs * 2, dtype=torch.int32, device=device)
    sig = torch.zeros(pairs * 2, dtype=torch.int32, device=device)
    consts = constexprs(variant, chunk=chunk, max_polls=max_polls, on_gpu=not INTERPRET)
    it = 0

    def launch(delays: torch.Tensor, out: torch.Tensor) -> None:
        nonlocal it
        for b in range(batch):
            it += 1
            sig.zero_()  # the host resets the counters between calls (stream order)
            proxy_ring_kernel[(4 * pairs,)](src, dst, req, sig, out[b], delays[b], it, pairs, num_warps=1, **consts)

    return delay_campaign(variant, launch, pairs=pairs, ctas=4 * pairs, seconds=seconds, min_launches=min_launches,
                          batch=batch, max_delay_ns=max_delay_ns, device=device)


def main(argv: list[str] | None = None) -> int:
    """Check each variant's PTX, run it, hold it against the model, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser, VARIANTS, seconds=25.0, pairs=(32, "ring steps per launch, 4 CTAs each"),
                     max_delay_ns=4000)
    parser.add_argument("--chunk", type=int, default=256, help="chunk length, int32 elements (default 256)")
    args = parser.parse_args(argv)
    where = setup()
    if where is None:
        return 2
    out_dir, device = where
    variants = args.variant or list(VARIANTS)
    findings = []
    for variant in variants if not INTERPRET else ():  # the interpreter's kernels do not compile
        problems = ptx_findings(variant, compile_ptx(variant, chunk=args.chunk, max_polls=args.max_polls))
        findings += problems
        print(f"ptx {variant}: {'as expected' if not problems else '; '.join(problems)}", flush=True)
    rows = judged(variants, model_allows_stale, lambda variant: run_variant(
        variant, pairs=args.pairs, chunk=args.chunk, seconds=args.seconds, min_launches=args.launches,
        batch=64 if not INTERPRET else 1, max_delay_ns=args.max_delay_ns, max_polls=args.max_polls, device=device))
    return report(rows, findings, out_dir=out_dir, name="nvshmem_proxy_gpu", what="chunks", control=CONTROL,
                  variants=variants, extra=dict(args=vars(args), ptx_findings=findings), control_fails=True)


if __name__ == "__main__":
    sys.exit(main())
