"""Residency on the GPU (issue 27): the examples/residency kernels at a grid the model says
deadlocks and one it says is safe, beside the model's answers, and where each CTA ran.

1. The resident capacity of ``grid_barrier_kernel`` (CTAs at once on this GPU): derived from the
   compiled kernel's registers, shared memory and warps with the machine kind's SM limits
   (``syncverify.explore.placement``), and measured as the largest grid whose barrier completes.
2. Runs 1-2's rows: the grid barrier at C and C + 1; ``placed_consumers_kernel`` (the
   consumers-first pattern, each program also writing its ``%smid``) in one grid and as two
   launches on two streams (consumers on ``comm``; on ``gemm``, behind ``torch.cuda._sleep``, the
   producers), at C - 1 and C consumers; and run 2's probes.
3. Lazy loading: the rows that disagreed in runs 1-2 were the first launch of a kernel (torch's
   sleep; a Triton function compiled during the row) behind spinning consumers. The sleep's first
   use is row 5, and row 7 repeats row 5 once it is loaded; rows 18-19 launch a Triton function
   compiled but not loaded, and one loaded but never launched.
4. Per SM: ``marker_kernel`` (one warp) and the producers as another function, beside 15
   consumers on an SM; and producers of 8 warps (256 threads) when every SM holds 15 consumers
   (128 threads left: no SM has room, though 132 slots are free) or 14 (room).

Each row has the model's answers: the old one pool of C slots (``pool``); per SM with the
consumers anywhere they fit (``any placement``: the adversarial answer) and where they were seen
(``%smid``); whether a kernel the row waits on is launched for the first time (under lazy
loading its module load may wait for the GPU to be idle). ``model``: the per-SM answer for the
placement seen, or a first use. ``agree`` compares it with the GPU.

Every wait gives up after ``--timeout-ms`` of ``%globaltimer``: a deadlock shows as programs that
timed out, never as a hung GPU; a watchdog also ends the process (exit 3) if one launch runs past
``--watchdog`` seconds. The per-SM rule at small sizes is pinned against the model's own check
by ``tests/test_placement.py``.

Run from the repository root on the GPU machine (under a minute; run 3 took 7 s)::

    export PYTHONPATH=$PWD PYTHONUNBUFFERED=1; python3 benchmarks/residency_gpu.py

Raw results: ``$OUT/residency_gpu.json`` (or ``./residency_gpu.json``), with every row's SM
histogram. Exit 0 when every row agrees with the model, 1 when one does not, 2 without a CUDA
GPU, 3 watchdog.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "residency"))
from spin_grid import (deadlocks, deadlocks_per_sm, grid_barrier_kernel, marker_kernel,  # noqa: E402
                       placed_consumers_kernel)

from syncverify.explore.placement import MACHINES, Costs, Footprint, occupancy  # noqa: E402

MACHINE = MACHINES["nvidia-h200"]
SLEEP_CYCLES = 1_000_000  # torch.cuda._sleep before the producers: about 0.5 ms, the consumers take the SMs first


def footprint(compiled) -> Footprint | None:
    """A compiled kernel's :class:`Footprint` (None: Triton did not say)."""
    n_regs = getattr(compiled, "n_regs", None)
    meta = getattr(compiled, "metadata", None)
    warps = getattr(meta, "num_warps", None)
    if not n_regs or not warps:
        return None
    return Footprint(warps=int(warps), registers=int(n_regs), shared=int(getattr(meta, "shared", 0) or 0))


def derived_occupancy(compiled) -> int | None:
    """CTAs per SM from a compiled kernel's registers, shared memory and warps (None: unknown)."""
    fp = footprint(compiled)
    return None if fp is None else occupancy(fp, MACHINE)


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


#: The same code compiled as a second function: a kernel distinct from ``placed_consumers_kernel``;
#: and two more, first launched in rows 18-19 (one compiled only, one compiled and loaded).
other_kernel = triton.jit(placed_consumers_kernel.fn, do_not_specialize=["N_CONSUMERS", "PID_OFFSET"])
fresh_unloaded = triton.jit(placed_consumers_kernel.fn, do_not_specialize=["N_CONSUMERS", "PID_OFFSET"])
fresh_loaded = triton.jit(placed_consumers_kernel.fn, do_not_specialize=["N_CONSUMERS", "PID_OFFSET"])


def consumer_run(n: int, streams: bool, args, dog: Watchdog, *, before: str = "sleep", producer_kernel=None,
                 producers_first: bool = False, producer_warps: int = 4) -> dict:
    """``n`` consumers and ``n`` producers of ``placed_consumers_kernel``: how many consumers gave
    up, whether every other one read its value, the SM of each consumer, and the marker's SM.
    ``streams``: consumers and producers as two launches on two streams; ``before`` the producer
    launch on its stream: ``sleep`` (``torch.cuda._sleep``), ``marker`` (``marker_kernel``, one
    warp) or ``none``; ``producers_first``: the producer launch issued first; ``producer_kernel``:
    the producers in another compiled function (``producer_warps`` warps)."""
    flags, data, out, timed_out = (torch.zeros(n, dtype=torch.int32, device="cuda") for _ in range(4))
    sm = torch.full((2 * n,), -1, dtype=torch.int32, device="cuda")
    started = torch.zeros(1, dtype=torch.int32, device="cuda")
    marker_sm = torch.full((1,), -1, dtype=torch.int32, device="cuda")
    b = budget(args.timeout_ms)

    def launch() -> None:
        if not streams:
            placed_consumers_kernel[(2 * n,)](flags, data, out, timed_out, sm, n, 0, **b)
            return
        comm, gemm = torch.cuda.Stream(), torch.cuda.Stream()
        producers = producer_kernel or placed_consumers_kernel

        def produce() -> None:
            with torch.cuda.stream(gemm):
                if before == "sleep" and not producers_first:
                    torch.cuda._sleep(SLEEP_CYCLES)
                elif before == "marker":
                    marker_kernel[(1,)](started, marker_sm, USE_TIMER=True, num_warps=1)
                producers[(n,)](flags, data, out, timed_out, sm, n, n, num_warps=producer_warps, **b)

        if producers_first:
            produce()
        with torch.cuda.stream(comm):
            placed_consumers_kernel[(n,)](flags, data, out, timed_out, sm, n, 0, **b)
        if not producers_first:
            produce()

    dog.run(f"consumers n={n} streams={streams} before={before}", launch)
    expected = torch.arange(1, n + 1, dtype=torch.int32, device="cuda")
    values_ok = bool(((out == expected) | (timed_out == 1)).all().item())
    consumer_sms = sm[:n].tolist()
    return dict(timed_out=int(timed_out.sum().item()), values_ok=values_ok,
                histogram=sorted(Counter(s for s in consumer_sms if s >= 0).values(), reverse=True),
                marker_sm=int(marker_sm.item()) if before == "marker" else None)


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


def per_sm_answers(n: int, waiting: list[str], costs: Costs, histogram: list[int] | None) -> tuple[bool, bool | None]:
    """The per-SM model's answers (``spin_grid.deadlocks_per_sm``) for ``n`` consumers resident and
    the kernels ``waiting`` in turn on the producers' stream: with the consumers anywhere they fit,
    and where they were seen (None: not seen)."""
    anywhere = deadlocks_per_sm(n, waiting, costs)
    return anywhere, (None if histogram is None else deadlocks_per_sm(n, waiting, costs, histogram))


def bounds(argv: list[str] | None, doc: str, timeout_ms: float, watchdog: float, budget_s: float):
    """The residency scripts' command line (every wait's budget, the watchdog, the time budget for
    rows) with these defaults; None (after saying so) when no CUDA GPU is visible."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--timeout-ms", type=float, default=timeout_ms, help=f"each wait's budget (default {timeout_ms})")
    parser.add_argument("--watchdog", type=float, default=watchdog, help=f"seconds per launch (default {watchdog})")
    parser.add_argument("--budget", type=float, default=budget_s,
                        help=f"seconds after which the remaining rows are skipped and the table printed (default {budget_s})")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU (none visible)")
        return None
    return args


def main(argv: list[str] | None = None) -> int:
    args = bounds(argv, __doc__, 200.0, 30.0, 28.0)
    if args is None:
        return 2
    start = time.monotonic()
    dog = Watchdog(args.watchdog)
    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    if sms != MACHINE.sms:
        print(f"warning: {sms} SMs here, {MACHINE.name} has {MACHINE.sms}: the limits are {MACHINE.name}'s", flush=True)
    _, compiled = barrier_timeouts(1, args, dog)
    occupancy_barrier = derived_occupancy(compiled)
    derived = None if occupancy_barrier is None else sms * occupancy_barrier
    capacity = measured_capacity(args, dog, top=sms * MACHINE.ctas + 1)
    print(f"{props.name}: {sms} SMs; grid_barrier_kernel: {footprint(compiled)}; "
          f"derived capacity {derived}, measured {capacity}", flush=True)

    # Every kernel a row waits on is compiled and loaded here (a launch with n = 1), except
    # torch's sleep (first used in row 5) and the two fresh functions of rows 18-19: under CUDA
    # lazy loading a kernel's first launch may wait for the GPU to be idle (docs/residency.md).
    one = lambda: torch.ones(1, dtype=torch.int32, device="cuda")  # noqa: E731
    zero = lambda: torch.zeros(1, dtype=torch.int32, device="cuda")  # noqa: E731
    b = budget(args.timeout_ms)
    compiled_cf = dog.run("placed_consumers compile", lambda: placed_consumers_kernel[(1,)](
        one(), zero(), zero(), zero(), zero(), 1, 0, **b))
    compiled_other = dog.run("other compile", lambda: other_kernel[(1,)](one(), zero(), zero(), zero(), zero(), 1, 0, **b))
    compiled_other8 = dog.run("other, 8 warps, compile", lambda: other_kernel[(1,)](
        one(), zero(), zero(), zero(), zero(), 1, 0, num_warps=8, **b))
    compiled_marker = dog.run("marker compile", lambda: marker_kernel[(1,)](zero(), zero(), USE_TIMER=True, num_warps=1))
    try:
        fresh_unloaded.warmup(one(), zero(), zero(), zero(), zero(), 1, 0, grid=(1,), **b)  # compiled, module not loaded
        fresh_loaded.warmup(one(), zero(), zero(), zero(), zero(), 1, 0, grid=(1,), **b)._init_handles()  # loaded, never run
        fresh_ok = True
    except Exception as error:  # noqa: BLE001 -- a probe: report it and run the other rows
        print(f"warmup of the fresh kernels failed ({type(error).__name__}: {error}): rows 18-19 skipped", flush=True)
        fresh_ok = False
    loaded = {"consumers", "other", "other8", "marker", "fresh_loaded"}
    footprints = {"consumers": footprint(compiled_cf), "other": footprint(compiled_other),
                  "other8": footprint(compiled_other8), "marker": footprint(compiled_marker),
                  "sleep": Footprint(warps=1, registers=16),  # torch's sleep kernel: one thread, no shared memory
                  "fresh_unloaded": footprint(compiled_cf), "fresh_loaded": footprint(compiled_cf)}
    if any(fp is None for fp in footprints.values()):
        print(f"no footprint from Triton for {[k for k, fp in footprints.items() if fp is None]}")
        return 2
    costs = Costs.from_footprints(dataclasses.replace(MACHINE, sms=sms), footprints)
    occ_cf = occupancy(footprints["consumers"], MACHINE)
    capacity_cf = sms * occ_cf
    print(f"footprints: {footprints}; consumers' capacity {capacity_cf}; "
          f"CUDA_MODULE_LOADING={os.environ.get('CUDA_MODULE_LOADING', '(unset: LAZY)')}", flush=True)
    rows = []

    def row(case: str, pattern: str, size: int, cap: int, result: dict, waiting: list[str]) -> None:
        pool = "deadlock" if deadlocks(pattern, size, cap) else "safe"
        first_use = [k for k in waiting if k not in loaded]  # lazy loading: its load waits for the GPU to idle
        if pattern == "grid_barrier":
            anywhere = seen = deadlocks(pattern, size, cap)
        elif size >= cap:
            anywhere, seen = True, True  # the consumers' own kernel fills every SM
        else:
            anywhere, seen = per_sm_answers(size, waiting, costs, result.get("histogram"))
        model = bool(seen) or bool(first_use and size > 0 and pattern == "consumers_first" and waiting)
        loaded.update(waiting)
        words = lambda d: "?" if d is None else ("deadlock" if d else "safe")  # noqa: E731
        gpu = "deadlock" if result["timed_out"] else "completed"
        agree = model == bool(result["timed_out"]) and result.get("values_ok", True)
        hist = result.get("histogram")
        placement = "" if hist is None else f"{len(hist)} SMs used, {sms - len(hist)} empty, fullest {hist[0] if hist else 0}"
        rows.append(dict(case=case, size=size, capacity=cap, pool=pool, any_placement=words(anywhere),
                         seen=words(seen), first_use=",".join(first_use), model=words(model), gpu=gpu, agree=agree,
                         placement=placement, waiting=waiting, **result))
        print(f"  {case} size={size}: pool {pool}, per-SM any {words(anywhere)}, seen {words(seen)}, first use "
              f"{first_use or '-'}, model {words(model)}; GPU {gpu} ({result['timed_out']} timed out); {placement}",
              flush=True)

    for grid in (capacity, capacity + 1):
        row("grid barrier", "grid_barrier", grid, capacity, dict(timed_out=barrier_timeouts(grid, args, dog)[0]), [])
    for n in (capacity_cf - 1, capacity_cf):
        row("consumers first, one grid", "consumers_first", n, capacity_cf, consumer_run(n, False, args, dog),
            ["consumers"])
    for n in (capacity_cf - 1, capacity_cf):  # the sleep's first use is the first of these
        row("consumers first, two streams", "consumers_first", n, capacity_cf, consumer_run(n, True, args, dog),
            ["sleep", "consumers"])

    cases = (  # (case, consumers, options, the kernels the producers' stream waits on, in turn)
        ("two streams, sleep loaded", capacity_cf - 1, {}, ["sleep", "consumers"]),
        ("two streams, no sleep", capacity_cf - 1, dict(before="none"), ["consumers"]),
        ("two streams, producers another function", capacity_cf - 1, dict(producer_kernel=other_kernel),
         ["sleep", "other"]),
        ("two streams, producers issued first", capacity_cf - 1, dict(producers_first=True), []),
        ("two streams, an SM's worth free", capacity_cf - occ_cf, {}, ["sleep", "consumers"]),
        ("two streams, 132 slots free", capacity_cf - sms, {}, ["sleep", "consumers"]),
        ("marker, one slot free", capacity_cf - 1, dict(before="marker"), ["marker", "consumers"]),
        ("marker, one consumer per SM", sms, dict(before="marker"), ["marker", "consumers"]),
        ("other function, no sleep", capacity_cf - 1, dict(before="none", producer_kernel=other_kernel), ["other"]),
        # ----- per SM: a footprint that fits in no SM's leftover room, whatever the slots free
        ("8-warp producers, 15 consumers per SM", sms * (occ_cf - 1),
         dict(producer_kernel=other_kernel, producer_warps=8), ["sleep", "other8"]),
        ("8-warp producers, 14 consumers per SM", sms * (occ_cf - 2),
         dict(producer_kernel=other_kernel, producer_warps=8), ["sleep", "other8"]),
        # ----- lazy loading: a kernel compiled but not loaded, and one loaded but never launched
        ("fresh kernel, module not loaded", capacity_cf - 1, dict(producer_kernel=fresh_unloaded),
         ["sleep", "fresh_unloaded"]),
        ("fresh kernel, module loaded", capacity_cf - 1, dict(producer_kernel=fresh_loaded),
         ["sleep", "fresh_loaded"]),
    )
    for case, n, options, waiting in cases:
        if case.startswith("fresh kernel") and not fresh_ok:
            continue
        if time.monotonic() - start > args.budget:
            print(f"  {case}: skipped, past the {args.budget} s budget", flush=True)
            continue
        row(case, "consumers_first", n, capacity_cf, consumer_run(n, True, args, dog, **options), waiting)

    result = dict(device=props.name, sms=sms, derived_capacity=derived, measured_capacity=capacity,
                  consumers_capacity=capacity_cf, footprints={k: vars(v) for k, v in footprints.items()},
                  timeout_ms=args.timeout_ms, rows=rows, seconds=round(time.monotonic() - start, 1))
    out_dir = Path(os.environ.get("OUT", "out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "residency_gpu.json").write_text(json.dumps(result, indent=2))
    print()
    print("| case | size | pool | per-SM, any placement | per-SM, placement seen | first use (lazy load) | model | GPU (timed out) | placement seen | agree |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['case']} | {r['size']} | {r['pool']} | {r['any_placement']} | {r['seen']} | {r['first_use'] or '-'} | "
              f"{r['model']} | {r['gpu']} ({r['timed_out']}) | {r['placement']} | {'yes' if r['agree'] else 'NO'} |")
    print(f"{sms} SMs; capacity derived {derived}, measured {capacity}; consumers' {capacity_cf}; {result['seconds']} s")
    return 0 if all(r["agree"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
