"""Residency on the GPU (issue 27): the examples/residency kernels at a grid the model says
deadlocks and one it says is safe, beside the model's answer.

1. The resident capacity of ``grid_barrier_kernel`` (CTAs at once on this GPU): derived from the
   compiled kernel's registers, shared memory and warps with the sm_90 limits, and measured as the
   largest grid whose barrier completes (bisection: the barrier deadlocks iff the grid exceeds it).
2. ``grid_barrier_kernel`` at grid C (model: safe) and C + 1 (model: deadlock).
3. ``consumers_first_kernel`` in one grid (consumers at the low blockIdx) with C - 1 and C consumers
   (model: safe, deadlock), C being the same kernel's measured capacity.
4. The same kernel as two launches on two streams (the seeds' GEMM + communication pattern): the
   consumer grid first, the producer grid on another stream behind a short ``torch.cuda._sleep``
   (so the consumers take the SMs first, as the model's deadlock has it), C - 1 and C consumers.
5. Probes of run 1's disagreement (two streams, C - 1 consumers: every consumer timed out, where
   the model, one pool of C slots shared by every kernel, says the free slot lets the producers
   through): without the sleep; the producers in a distinct compiled function (another kernel of
   the same code); C - 16 and C - 132 consumers (a whole SM's worth of slots free, one per SM);
   and the producers launched first. Each row says whether a CTA of a second kernel could use
   slots that the first kernel's CTAs left free.

Every wait gives up after ``--timeout-ms`` of ``%globaltimer``: a deadlock shows as programs that
timed out, never as a hung GPU; a watchdog also ends the process (exit 3) if one launch runs past
``--watchdog`` seconds. The model's rule for these kernels (``spin_grid.deadlocks``) is pinned
against the model's own check at small sizes by ``tests/test_residency.py``.

Run from the repository root on the GPU machine (about 1 minute; run 1 took 12 s)::

    export PYTHONPATH=$PWD PYTHONUNBUFFERED=1; python3 benchmarks/residency_gpu.py

Raw results: ``$OUT/residency_gpu.json`` (or ``./residency_gpu.json``). Exit 0 when every row
agrees with the model, 1 when one does not, 2 without a CUDA GPU, 3 watchdog.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "residency"))
from spin_grid import consumers_first_kernel, deadlocks, grid_barrier_kernel  # noqa: E402

#: sm_90 (H100/H200) per-SM limits (CUDA C programming guide, "Technical Specifications per Compute
#: Capability", 9.0): threads, CTAs, 32-bit registers, shared memory bytes, and the per-CTA
#: shared memory the driver reserves.
SM90 = dict(threads=2048, ctas=32, registers=65536, shared=233472, reserved_shared=1024)


def derived_occupancy(compiled) -> int | None:
    """CTAs per SM from a compiled kernel's registers, shared memory and warps (None: unknown)."""
    n_regs = getattr(compiled, "n_regs", None)
    meta = getattr(compiled, "metadata", None)
    warps = getattr(meta, "num_warps", None)
    shared = getattr(meta, "shared", 0) or 0
    if not n_regs or not warps:
        return None
    per_warp = -(-n_regs * 32 // 256) * 256  # registers are allocated per warp in units of 256
    limits = [SM90["ctas"], SM90["threads"] // (32 * warps), SM90["registers"] // (per_warp * warps)]
    limits.append(SM90["shared"] // (shared + SM90["reserved_shared"]))
    return min(limits)


class Watchdog:
    """Ends the process (exit 3) if one launch runs past ``seconds``: never a hung machine."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def run(self, what: str, fn):
        def fire() -> None:
            print(f"WATCHDOG: {what} ran longer than {self.seconds} s", flush=True)
            os._exit(3)

        timer = threading.Timer(self.seconds, fire)
        timer.daemon = True
        timer.start()
        try:
            out = fn()
            torch.cuda.synchronize()
            return out
        finally:
            timer.cancel()


def budget(timeout_ms: float) -> dict:
    return dict(MAX_SPINS=0, TIMEOUT_NS=int(timeout_ms * 1e6), USE_TIMER=True)


def barrier_timeouts(grid: int, args, dog: Watchdog) -> tuple[int, object]:
    """Programs of a ``grid``-wide barrier that gave up; and the compiled kernel."""
    count = torch.zeros(1, dtype=torch.int32, device="cuda")
    timed_out = torch.zeros(grid, dtype=torch.int32, device="cuda")
    compiled = dog.run(f"grid_barrier grid={grid}",
                       lambda: grid_barrier_kernel[(grid,)](count, timed_out, grid, **budget(args.timeout_ms)))
    return int(timed_out.sum().item()), compiled


#: The same code compiled as a second function: a kernel distinct from ``consumers_first_kernel``.
other_kernel = triton.jit(consumers_first_kernel.fn, do_not_specialize=["N_CONSUMERS", "PID_OFFSET"])


def consumer_timeouts(n: int, streams: bool, args, dog: Watchdog, *, sleep: bool = True,
                      producer_kernel=None, producers_first: bool = False) -> tuple[int, bool]:
    """Consumers (of ``n``) that gave up, and whether every consumer that did not read its value.
    ``streams``: consumers and producers as two launches on two streams (``producers_first``:
    the producer launch issued first; ``sleep``: the producer launch behind a short sleep;
    ``producer_kernel``: the producers in another compiled function)."""
    flags = torch.zeros(n, dtype=torch.int32, device="cuda")
    data = torch.zeros(n, dtype=torch.int32, device="cuda")
    out = torch.zeros(n, dtype=torch.int32, device="cuda")
    timed_out = torch.zeros(n, dtype=torch.int32, device="cuda")
    b = budget(args.timeout_ms)

    def launch() -> None:
        if not streams:
            consumers_first_kernel[(2 * n,)](flags, data, out, timed_out, n, 0, **b)
            return
        comm, gemm = torch.cuda.Stream(), torch.cuda.Stream()
        producers = producer_kernel or consumers_first_kernel

        def produce() -> None:
            with torch.cuda.stream(gemm):
                if sleep and not producers_first:
                    torch.cuda._sleep(1_000_000)  # about 0.5 ms: the consumer grid takes the SMs first
                producers[(n,)](flags, data, out, timed_out, n, n, **b)

        if producers_first:
            produce()
        with torch.cuda.stream(comm):
            consumers_first_kernel[(n,)](flags, data, out, timed_out, n, 0, **b)
        if not producers_first:
            produce()

    dog.run(f"consumers_first n={n} streams={streams}", launch)
    expected = torch.arange(1, n + 1, dtype=torch.int32, device="cuda")
    values_ok = bool(((out == expected) | (timed_out == 1)).all().item())
    return int(timed_out.sum().item()), values_ok


def measured_capacity(args, dog: Watchdog, top: int) -> int:
    """The largest grid whose barrier completes (the barrier deadlocks iff the grid exceeds it)."""
    lo, hi = 1, top  # lo completes; hi is assumed not to
    if barrier_timeouts(hi, args, dog)[0] == 0:
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if barrier_timeouts(mid, args, dog)[0] == 0:
            lo = mid
        else:
            hi = mid
    return lo


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout-ms", type=float, default=200.0, help="each wait's budget (default 200)")
    parser.add_argument("--watchdog", type=float, default=60.0, help="seconds per launch (default 60)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU (none visible)")
        return 2
    start = time.monotonic()
    dog = Watchdog(args.watchdog)
    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    _, compiled = barrier_timeouts(1, args, dog)
    occupancy = derived_occupancy(compiled)
    derived = None if occupancy is None else sms * occupancy
    capacity = measured_capacity(args, dog, top=sms * SM90["ctas"] + 1)
    print(f"{props.name}: {sms} SMs; grid_barrier_kernel: {getattr(compiled, 'n_regs', '?')} registers, "
          f"{getattr(compiled.metadata, 'num_warps', '?')} warps, {getattr(compiled.metadata, 'shared', '?')} B shared; "
          f"derived capacity {derived}, measured {capacity}", flush=True)
    _, compiled_cf = dog.run("consumers_first compile", lambda: (None, consumers_first_kernel[(1,)](
        torch.ones(1, dtype=torch.int32, device="cuda"), torch.zeros(1, dtype=torch.int32, device="cuda"),
        torch.zeros(1, dtype=torch.int32, device="cuda"), torch.zeros(1, dtype=torch.int32, device="cuda"),
        1, 0, **budget(args.timeout_ms))))
    occ_cf = derived_occupancy(compiled_cf)
    # The consumers_first kernel's own capacity: its occupancy may differ from the barrier's.
    capacity_cf = capacity if occ_cf is None or occ_cf == occupancy else sms * occ_cf
    rows = []

    def row(case: str, pattern: str, size: int, cap: int, timed_out: int, values_ok: bool = True) -> None:
        model = "deadlock" if deadlocks(pattern, size, cap) else "safe"
        gpu = "deadlock" if timed_out else "completed"
        agree = (model == "deadlock") == bool(timed_out) and values_ok
        rows.append(dict(case=case, size=size, capacity=cap, model=model, gpu=gpu, timed_out=timed_out,
                         values_ok=values_ok, agree=agree))
        print(f"  {case} size={size}: model {model}, GPU {gpu} ({timed_out} timed out)", flush=True)

    for grid in (capacity, capacity + 1):
        row("grid barrier", "grid_barrier", grid, capacity, barrier_timeouts(grid, args, dog)[0])
    for n in (capacity_cf - 1, capacity_cf):
        row("consumers first, one grid", "consumers_first", n, capacity_cf, *consumer_timeouts(n, False, args, dog))
    for n in (capacity_cf - 1, capacity_cf):
        row("consumers first, two streams", "consumers_first", n, capacity_cf, *consumer_timeouts(n, True, args, dog))

    probes = (("two streams, no sleep", capacity_cf - 1, dict(sleep=False)),
              ("two streams, producers another function", capacity_cf - 1, dict(producer_kernel=other_kernel)),
              ("two streams, producers issued first", capacity_cf - 1, dict(producers_first=True)),
              ("two streams, an SM's worth free", capacity_cf - 16, {}),
              ("two streams, 132 slots free", capacity_cf - sms, {}))
    for case, n, options in probes:
        row(case, "consumers_first", n, capacity_cf, *consumer_timeouts(n, True, args, dog, **options))

    result = dict(device=props.name, sms=sms, derived_capacity=derived, measured_capacity=capacity,
                  consumers_first_capacity=capacity_cf, timeout_ms=args.timeout_ms, rows=rows,
                  seconds=round(time.monotonic() - start, 1))
    out_dir = Path(os.environ.get("OUT", "."))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "residency_gpu.json").write_text(json.dumps(result, indent=2))
    print()
    print(f"| case | size | capacity (CTAs) | model | GPU (timed out) | agree |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['case']} | {r['size']} | {r['capacity']} | {r['model']} | {r['gpu']} ({r['timed_out']}) | "
              f"{'yes' if r['agree'] else 'NO'} |")
    print(f"{sms} SMs; capacity derived {derived}, measured {capacity}; {result['seconds']} s")
    return 0 if all(r["agree"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
