"""The examples' kernels (examples/*/harness.py) on a real GPU: do the device-API shims and the
seed-style kernels build and compute the right numbers there?

Every rank's heap lives on one GPU (virtual ranks), each stream name is a CUDA stream, and each
harness runs ``--calls`` calls (default 2) at world size 2 with 16 x 16 tiles (``tl.dot``'s
smallest). Stress is not the point (issue 25 does that): a run shows the shims are plain Triton
that compiles and runs on the GPU, with ``import iris`` given by syncverify's device API.
``reset_on_gemm_stream`` is left out: its reset races the kernel by design and may leave a
consumer spinning forever. A watchdog ends the run (exit 3) if a harness takes longer than
``--seconds`` (a hang), naming it.

Run from the repository root on the GPU machine::

    python -m benchmarks.examples_gpu            # prints one row per harness, table last

Exit 0 when every harness computed the reference, 1 when one did not, 2 without a CUDA GPU.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

import torch

from tests.sequential_harness import example_module, run_harness

FOLDERS = ("one_shot_all_reduce", "all_scatter")
LEFT_OUT = {"reset_on_gemm_stream"}  # races by design: may hang on the GPU


def _watchdog(seconds: float, what: list[str]) -> threading.Timer:
    def fire() -> None:
        print(f"TIMEOUT: {what[0]} ran longer than {seconds} s (a consumer spinning?)", flush=True)
        os._exit(3)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    return timer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=120.0, help="watchdog per harness (default 120)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU (none visible)")
        return 2
    rows, failed = [], False
    for folder in FOLDERS:
        with example_module(folder) as harnesses:
            harnesses.BLOCK = 16
            for name, (world_size, *_rest) in harnesses.EXPECTED.items():
                if name in LEFT_OUT:
                    continue
                current = [f"{folder}::{name}"]
                timer = _watchdog(args.seconds, current)
                start = time.perf_counter()
                sv = run_harness(getattr(harnesses, name), world_size, args.calls, mode="cuda")
                seconds = time.perf_counter() - start
                timer.cancel()
                ok = all(torch.equal(got, ref) for got, ref in sv.expected) and len(sv.expected) == args.calls * world_size
                failed |= not ok
                rows.append((current[0], world_size, args.calls, "ok" if ok else "WRONG", f"{seconds:.2f}"))
                print(*rows[-1], flush=True)
    print(f"\n{torch.cuda.get_device_name()}, triton {__import__('triton').__version__}, torch {torch.__version__}")
    print(f"{'harness':<50} {'W':>2} {'calls':>5} {'result':>6} {'s':>7}")
    for harness, w, calls, result, seconds in rows:
        print(f"{harness:<50} {w:>2} {calls:>5} {result:>6} {seconds:>7}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
