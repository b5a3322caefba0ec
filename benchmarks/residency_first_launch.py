"""Residency run 5 (issue 27): why "sleep, then the producers as another function" deadlocked in
runs 2 and 4 and completed in run 3 with the same placement.

The row: ``C - 1`` consumers spinning on stream ``comm`` (one slot free on a GPU holding ``C``),
then on stream ``gemm`` a sleep and the producers, compiled as another ``@triton.jit`` function.
The hypotheses this script separates, each by several repetitions of its own:

* **A fresh binary (Triton's in-memory cache key).** Triton 3.6 keys a function's compiled
  binaries by its specialization *and the launch options exactly as passed*
  (``compute_cache_key(..., str(options))``): a launch with ``num_warps=4`` spelled out misses the
  binary a launch without it compiled, even though both compile to the same code. The miss
  returns a new ``CompiledKernel`` (from the on-disk cache), whose module is loaded on that launch
  and whose kernel is launched for the first time: under CUDA lazy loading, a first launch behind
  spinning consumers. Run 4's warm-up launched the function without ``num_warps``, its row with
  ``num_warps=4``; run 3's script passed no ``num_warps`` in either. Rows ``A``/``B``.
* **Module load or first launch.** A fresh function per repetition, compiled only (``C``), its
  module loaded before the consumers start but never launched (``D``), loaded while they spin
  (``E``, the load timed on the host), launched first without any sleep (``F``).
* **The sleep's length** (``torch.cuda._sleep`` counts SM clock cycles, which depend on the
  clock): the row with the producers' binary warm and 10^4 to 10^7 cycles (``G``), and with a
  sleep of our own measured in ``%globaltimer`` ns, which writes when and where it ran (``H``).
* **Streams**: fresh streams per repetition (every row above) against one fixed pair (``I``);
  each row records its streams' ids.
* **Placement**: every consumer and producer writes its ``%smid`` and start time
  (``%globaltimer``): which SM had the free slot, where the first producer ran, and whether it
  ran while the consumers spun or only after they gave up.
* ``J``: the consumers' own kernel as the producers (the control that completed in every run).

Per trial the script records whether the producers' launch used a ``CompiledKernel`` object new
to that launch (``fresh``), whether its module was loaded before the trial (``loaded``), and
whether that object had been launched before (``launched``): the model columns read
``deadlock`` iff the producers' binary is launched for the first time after the consumers were
issued (the rule
``syncverify.explore.residency`` takes under ``lazy_loading``, by binary), and iff its module was
not loaded before (the alternative).

Every wait gives up after ``--timeout-ms`` of ``%globaltimer``; a watchdog ends the process (exit 3)
if one trial runs past ``--watchdog`` seconds; rows past ``--budget`` seconds are skipped, the
table still printed. Run from the repository root on the GPU machine (about 30 s)::

    export PYTHONPATH=$PWD PYTHONUNBUFFERED=1; python3 benchmarks/residency_first_launch.py

Raw results: ``$OUT/residency_first_launch.json``. Exit 0 when every trial agrees with the
binary rule, 1 when one does not, 2 without a CUDA GPU, 3 watchdog.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import torch
import triton

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "examples" / "residency"))
sys.path.insert(0, str(HERE))
from residency_gpu import Watchdog, bounds, budget, footprint  # noqa: E402
from spin_grid import spin_for_kernel, stamped_consumers_kernel  # noqa: E402

from syncverify.explore.placement import MACHINES, occupancy  # noqa: E402

MACHINE = MACHINES["nvidia-h200"]
SLEEP_CYCLES = 1_000_000  # the sleep of runs 1-4: about 0.5 ms at 1,980 MHz
NOT_SPECIALIZED = ["N_CONSUMERS", "PID_OFFSET"]


def another_function():
    """``stamped_consumers_kernel``'s code as a new ``@triton.jit`` function: binaries of its own
    (the on-disk cache may hold them already; their modules are new to the process)."""
    return triton.jit(stamped_consumers_kernel.fn, do_not_specialize=NOT_SPECIALIZED)


def binaries(fn) -> dict:
    """``fn``'s in-memory compiled binaries on this GPU: Triton 3.6's key -> ``CompiledKernel``."""
    return fn.device_caches[torch.cuda.current_device()][0]


class Buffers:
    """One trial's tensors for ``n`` consumers and as many producers."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.flags, self.data, self.out, self.timed_out = (torch.zeros(n, dtype=torch.int32, device="cuda")
                                                           for _ in range(4))
        self.sm = torch.full((2 * n,), -1, dtype=torch.int32, device="cuda")
        self.start = torch.zeros(2 * n, dtype=torch.int64, device="cuda")
        self.spin = torch.zeros(3, dtype=torch.int64, device="cuda")

    def launch(self, fn, grid: int, offset: int, options: dict, b: dict):
        """Every launch of the stamped kernels goes through here: the same arguments, so the same
        Triton cache key for the same ``options``. Returns the ``CompiledKernel`` it ran."""
        return fn[(grid,)](self.flags, self.data, self.out, self.timed_out, self.sm, self.start,
                           self.n, offset, **options, **b)

    def warm(self, fn, options: dict, b: dict, how: str):
        """Prepare ``fn``'s binary for ``options`` before a trial: ``launched`` (one launch of
        one producer), ``compiled`` (compiled only), ``loaded`` (compiled, module loaded, never
        launched). Returns the ``CompiledKernel``."""
        if how == "launched":
            kernel = Buffers(1).launch(fn, 1, 1, options, b)
            torch.cuda.synchronize()
            return kernel
        kernel = fn.warmup(self.flags, self.data, self.out, self.timed_out, self.sm, self.start,
                           self.n, self.n, grid=(self.n,), **options, **b)
        if how == "loaded":
            kernel._init_handles()
        return kernel


def trial(n: int, producers, options: dict, *, before: str, sleep: int, streams, consumers, b: dict,
          dog: Watchdog, launched: set, load: object = None, order: str = "consumers") -> dict:
    """``n`` consumers of ``consumers`` on ``streams[0]``; on ``streams[1]`` ``before`` (``torch``:
    ``torch.cuda._sleep(sleep)`` cycles, ``spin``: ``spin_for_kernel`` for ``sleep`` ns, ``none``),
    then ``n`` producers of ``producers`` launched with ``options``. ``load``: a ``CompiledKernel``
    whose module is loaded (timed) while the consumers spin, before the producers' launch.
    ``order``: ``consumers`` (issued first, as in runs 1-4), ``gap`` (the same, the host waiting
    5 ms before the producers' stream: every consumer resident first), ``producers`` (the
    producers' stream issued first)."""
    bufs = Buffers(n)
    comm, gemm = streams
    known = {id(k): k.module is not None for k in binaries(producers).values()}
    host: dict = {}

    def run():
        if order != "producers":
            issue_consumers()
        if order == "gap":
            time.sleep(0.005)
        kernel = issue_producers()
        if order == "producers":
            issue_consumers()
        return kernel

    def issue_consumers() -> None:
        with torch.cuda.stream(comm):
            bufs.launch(consumers, n, 0, {}, b)

    def issue_producers():
        with torch.cuda.stream(gemm):
            if before == "torch":
                torch.cuda._sleep(sleep)
            elif before == "spin":
                spin_for_kernel[(1,)](bufs.spin, sleep, USE_TIMER=True, num_warps=1)
            if load is not None:
                t0 = time.perf_counter()
                load._init_handles()
                host["load_ms"] = round((time.perf_counter() - t0) * 1e3, 2)
            t0 = time.perf_counter()
            kernel = bufs.launch(producers, n, n, options, b)
            host["launch_ms"] = round((time.perf_counter() - t0) * 1e3, 2)
        return kernel

    kernel = dog.run(f"trial n={n} before={before}", run)
    first = id(kernel) not in launched
    launched.add(id(kernel))
    return dict(timed_out=int(bufs.timed_out.sum().item()), values_ok=values_ok(bufs),
                fresh=id(kernel) not in known, loaded=known.get(id(kernel), False), first_launch=first,
                streams=[comm.stream_id, gemm.stream_id], **host, **placement(bufs), **spin_row(bufs, before))


def values_ok(bufs: Buffers) -> bool:
    """Every consumer that did not give up read its producer's value."""
    expected = torch.arange(1, bufs.n + 1, dtype=torch.int32, device="cuda")
    return bool(((bufs.out == expected) | (bufs.timed_out == 1)).all().item())


def placement(bufs: Buffers) -> dict:
    """Where and when: the consumers per SM, the SMs with fewer than the fullest, the first
    producer's SM, and its start after the last consumer's (us; negative: before)."""
    n, sm, start = bufs.n, bufs.sm.tolist(), bufs.start.tolist()
    per_sm = Counter(s for s in sm[:n] if s >= 0)
    fullest = max(per_sm.values(), default=0)
    started = [(t, s) for t, s in zip(start[n:], sm[n:]) if t > 0]
    consumer_times = [t for t in start[:n] if t > 0]
    out = dict(sms_used=len(per_sm), fullest=fullest,
               free_sms=sorted(s for s, k in per_sm.items() if k < fullest))
    if started and consumer_times:
        t_first, s_first = min(started)
        out.update(producer_sm=s_first, producer_after_us=round((t_first - max(consumer_times)) / 1e3, 1),
                   consumers_spread_us=round((max(consumer_times) - min(consumer_times)) / 1e3, 1))
    return out


def spin_row(bufs: Buffers, before: str) -> dict:
    """The own sleep's length and SM, and its start after the first consumer's (us)."""
    if before != "spin":
        return {}
    s0, s1, sm = bufs.spin.tolist()
    first = min((t for t in bufs.start.tolist()[:bufs.n] if t > 0), default=s0)
    return dict(spin_us=round((s1 - s0) / 1e3, 1), spin_sm=sm, spin_after_us=round((s0 - first) / 1e3, 1))


def sleep_ms(cycles: int) -> float:
    """How long ``torch.cuda._sleep(cycles)`` runs alone (CUDA events, ms): its clock."""
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    torch.cuda._sleep(cycles)
    end.record()
    torch.cuda.synchronize()
    return begin.elapsed_time(end)


def main(argv: list[str] | None = None) -> int:
    args = bounds(argv, __doc__, 100.0, 20.0, 80.0)
    if args is None:
        return 2
    start = time.monotonic()
    dog, b = Watchdog(args.watchdog), budget(args.timeout_ms)
    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    one = Buffers(1)
    consumers = stamped_consumers_kernel
    compiled = one.warm(consumers, {}, b, "launched")
    dog.run("sleep, first use", lambda: torch.cuda._sleep(1000))
    dog.run("spin, first use", lambda: spin_for_kernel[(1,)](one.spin, 1000, USE_TIMER=True, num_warps=1))
    clock_mhz = [round(SLEEP_CYCLES / sleep_ms(SLEEP_CYCLES) / 1e3) for _ in range(3)]
    fp = footprint(compiled)
    per_sm = occupancy(fp, MACHINE)
    n = sms * per_sm - 1  # one slot free
    print(f"{props.name}: {sms} SMs; stamped_consumers_kernel {fp}: {per_sm} per SM; {n} consumers; "
          f"CUDA_MODULE_LOADING={os.environ.get('CUDA_MODULE_LOADING', '(unset: LAZY)')}; "
          f"torch {torch.__version__}, triton {triton.__version__}; torch's sleep of {SLEEP_CYCLES:,} cycles on an "
          f"idle GPU ran at {clock_mhz} MHz", flush=True)
    launched = {id(compiled)}
    fresh_streams = lambda: (torch.cuda.Stream(), torch.cuda.Stream())  # noqa: E731
    fixed = fresh_streams()
    four = dict(num_warps=4)  # run 4's producers: num_warps spelled out

    # the functions whose binaries stay warm across repetitions
    run4_like, warm_fn = another_function(), another_function()
    Buffers(1).launch(run4_like, 1, 1, {}, b)  # run 4's warm-up: no num_warps
    one.warm(warm_fn, four, b, "launched")
    torch.cuda.synchronize()
    launched.update(id(k) for fn in (run4_like, warm_fn) for k in binaries(fn).values())

    # (row, what, reps, producers, options, before, sleep, streams: a fixed pair, None: fresh ones,
    # or an issue order of trial()'s, with fresh ones); producers "fresh:HOW": a new
    # function each repetition, its binary for ``options`` prepared HOW (Buffers.warm; load-during:
    # compiled, its module loaded inside the trial)
    rows = (
        ("A", "run 4's row: warm-up without num_warps, the row with num_warps=4", 3, run4_like, four, "torch",
         SLEEP_CYCLES, None),
        ("B", "the same with the row's own key launched once before", 3, warm_fn, four, "torch", SLEEP_CYCLES, None),
        ("C", "fresh function each rep, compiled only", 3, "fresh:compiled", four, "torch", SLEEP_CYCLES, None),
        ("D", "fresh function each rep, module loaded before, never launched", 3, "fresh:loaded", four, "torch",
         SLEEP_CYCLES, None),
        ("E", "fresh function each rep, module loaded while the consumers spin", 2, "fresh:load-during", four,
         "torch", SLEEP_CYCLES, None),
        ("F", "fresh function each rep, compiled only, no sleep", 2, "fresh:compiled", four, "none", 0, None),
        *((f"G{cycles:.0e}", f"warm binary, torch sleep {cycles:,} cycles", 2, warm_fn, four, "torch", cycles, None)
          for cycles in (10_000, 100_000, 1_000_000, 10_000_000)),
        *((f"H{ns // 1000}us", f"warm binary, own sleep {ns // 1000} us of %globaltimer", 2, warm_fn, four, "spin", ns,
           None) for ns in (100_000, 1_000_000, 10_000_000)),
        ("I", "warm binary, one fixed pair of streams", 4, warm_fn, four, "torch", SLEEP_CYCLES, fixed),
        ("K", "fresh function each rep, compiled only, host waits 5 ms before the producers' stream", 2,
         "fresh:compiled", four, "torch", SLEEP_CYCLES, "gap"),
        ("L", "fresh function each rep, compiled only, the producers' stream issued first", 2, "fresh:compiled", four,
         "torch", SLEEP_CYCLES, "producers"),
        ("J", "the consumers' own kernel as the producers", 2, consumers, {}, "torch", SLEEP_CYCLES, None),
    )
    results = []
    for row, what, reps, producers, options, before, sleep, streams in rows:
        for rep in range(reps):
            if time.monotonic() - start > args.budget:
                print(f"  {row} rep {rep}: skipped, past the {args.budget} s budget", flush=True)
                continue
            load = None
            if isinstance(producers, str):
                how = producers.removeprefix("fresh:")
                fn = another_function()
                kernel = Buffers(n).warm(fn, options, b, "compiled" if how == "load-during" else how)
                load = kernel if how == "load-during" else None
            else:
                fn = producers
            order = streams if isinstance(streams, str) else "consumers"
            pair = streams if isinstance(streams, tuple) else fresh_streams()
            r = trial(n, fn, options, before=before, sleep=sleep, streams=pair, consumers=consumers, b=b, dog=dog,
                      launched=launched, load=load, order=order)
            r.update(row=row, what=what, rep=rep, gpu="deadlock" if r["timed_out"] else "completed",
                     by_binary="deadlock" if r["first_launch"] and order != "producers" else "safe",
                     by_module="deadlock" if not r["loaded"] and order != "producers" else "safe")
            deadlocked = r["gpu"] == "deadlock"
            r["agree"] = ((r["by_binary"] == "deadlock") == deadlocked) and r["values_ok"]
            r["agree_by_module"] = ((r["by_module"] == "deadlock") == deadlocked) and r["values_ok"]
            results.append(r)
            print(f"  {row} rep {rep}: GPU {r['gpu']} ({r['timed_out']} timed out); fresh {r['fresh']}, loaded "
                  f"{r['loaded']}, first launch {r['first_launch']}; producers after {r.get('producer_after_us')} us "
                  f"on SM {r.get('producer_sm')} (free {r['free_sms']}); launch {r.get('launch_ms')} ms"
                  + (f", load {r['load_ms']} ms" if "load_ms" in r else "")
                  + (f"; spin {r['spin_us']} us on SM {r['spin_sm']}" if "spin_us" in r else ""), flush=True)

    seconds = round(time.monotonic() - start, 1)
    out_dir = Path(os.environ.get("OUT", "out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "residency_first_launch.json").write_text(json.dumps(dict(
        device=props.name, sms=sms, consumers=n, footprint=vars(fp), timeout_ms=args.timeout_ms, sleep_clock_mhz=clock_mhz,
        seconds=seconds, trials=results), indent=2))
    print()
    print("| row | what | trials | GPU deadlocked | first launch of the binary | module not loaded before | "
          "producers after the last consumer (us, median) | host launch (ms, max) | agree: by binary | by module |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for row, what, *_ in rows:
        mine = [r for r in results if r["row"] == row]
        if not mine:
            continue
        after = [r["producer_after_us"] for r in mine if "producer_after_us" in r]
        pattern = lambda key: "".join("x" if r[key] else "." for r in mine)  # noqa: E731
        print(f"| {row} | {what} | {len(mine)} | {pattern('timed_out')} | {pattern('first_launch')} | "
              f"{''.join('.' if r['loaded'] else 'x' for r in mine)} | "
              f"{statistics.median(after) if after else '-'} | {max(r.get('launch_ms', 0) for r in mine)} | "
              f"{sum(r['agree'] for r in mine)}/{len(mine)} | {sum(r['agree_by_module'] for r in mine)}/{len(mine)} |")
    print(f"x: yes, per repetition in order. {sms} SMs; {n} consumers; timeout {args.timeout_ms} ms; {seconds} s")
    return 0 if all(r["agree_by_module"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
