"""The built-in kernels launched as two kernels on the GPU (issue 27): ``two-stream``, ``pdl``,
``pdl-no-wait`` (``syncverify.kernels.launch.split_launches``, the model's ``--launches`` modes).

1. **The residency hazard of two streams.** All-reduce at W = 2 virtual ranks, the consumers'
   launch issued first on its own stream (``order="consumers-first"``, as the seeds' one-shot
   all-reduce issues its communication kernel), with enough tiles that every consumer program
   has one to wait on. A probe run compiles the two parts; their footprints (warps, registers,
   shared memory of each compiled binary) give the per-SM model's answer
   (``syncverify.explore.placement``): the fewest consumer programs that, spread over the SMs
   as the H200 places one kernel's CTAs (GPU residency run 3), leave no SM with room for a
   producer (deadlock), and the most that leave one (safe). Both are run; every wait is
   bounded by a poll budget, so a deadlock shows as tiles whose wait timed out (``hang``).
2. **Each kernel split in two, stress.** Every kernel in ``two-stream`` and ``pdl`` (all-reduce
   also ``pdl-no-wait`` and the fused launch beside them) with a safe protocol, random delays,
   the default program counts: bad tiles per class, iterations per second.

Run from the repository root on the GPU machine (under 2 minutes; rows past ``--budget`` seconds
are skipped, the table still printed)::

    export PYTHONPATH=$PWD PYTHONUNBUFFERED=1; python3 benchmarks/launch_modes_gpu.py

Raw results: ``$OUT/launch_modes_gpu.json``. Exit 0 when the residency rows agree with the model
and every stress row is clean, 1 otherwise, 2 without a CUDA GPU.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

# Before CUDA starts: every module loaded whole, so no first launch of a part waits for a load behind
# the other part's spinning programs (CUDA lazy loading; benchmarks/residency_first_launch.py). The
# command line may set it otherwise (CUDA_MODULE_LOADING=LAZY) to see that hazard instead.
os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")

import torch  # noqa: E402

from syncverify.explore.placement import MACHINES, Costs, Footprint, blocked, occupancy  # noqa: E402
from syncverify.kernels.registry import kernel_function  # noqa: E402
from syncverify.stress.campaign import _checked, _run_local, run_campaign  # noqa: E402

MACHINE = MACHINES["nvidia-h200"]
SAFE = "barrier-fenced-release-acquire"
W = 2
PRODUCERS = 16  # producer programs per rank in the residency rows
BLOCK = 128


def binaries(kernel: str) -> list:
    """The compiled binaries of ``kernel``'s function in this process, in compile order."""
    _module, fn = kernel_function(kernel)
    return list(fn.device_caches[torch.cuda.current_device()][0].values())


def footprint(compiled) -> Footprint:
    """A compiled binary's :class:`Footprint`."""
    meta = compiled.metadata
    return Footprint(warps=int(meta.num_warps), registers=int(compiled.n_regs), shared=int(getattr(meta, "shared", 0)))


def spread(ctas: int, sms: int) -> list[int]:
    """CTAs per SM when one kernel's ``ctas`` spread evenly over ``sms`` (what run 3 saw)."""
    q, r = divmod(ctas, sms)
    return [q + 1] * r + [q] * (sms - r)


def deadlocks(consumers: int, costs: Costs) -> bool:
    """Per SM: the consumers spread over the SMs leave no SM with room for a producer."""
    return blocked(costs, [("consumers",) * k for k in spread(consumers, costs.sms)], "producers")


def residency_run(comm: int, polls: int) -> dict:
    """All-reduce, two streams, consumers issued first, ``comm`` consumer programs per rank; one
    call. Tiles: at least one per consumer program (striding ownership: half the tiles a rank)."""
    side = BLOCK * math.ceil(math.sqrt(2 * comm * W))
    options = dict(kernel="all-reduce", protocol=SAFE, world_size=W, virtual_ranks=True, launches="two-stream",
                   order="consumers-first", gemm_sms=PRODUCERS, comm_sms=comm, m=side, n=side, k=W * 64, block_m=BLOCK,
                   block_n=BLOCK, block_k=64, iterations=1, delays="none", max_polls=polls, graphs=False)
    o, config, protocol = _checked(options)  # not _on_this_gpu: its grid <= SMs check is what this row exceeds
    start = time.monotonic()
    result = _run_local(o, config, protocol, "cuda:0", None)
    return dict(comm=comm, tiles=config.tiles, hang=result.counts["hang"], counts=result.counts,
                bad=result.bad_iterations, seconds=round(time.monotonic() - start, 1),
                footprints=[vars(footprint(b)) for b in binaries("all-reduce")[-2:]])  # this row's two parts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--polls", type=int, default=1 << 16, help="each wait's poll budget in the residency rows")
    parser.add_argument("--iterations", type=int, default=200, help="iterations per stress row (default 200)")
    parser.add_argument("--budget", type=float, default=95.0, help="seconds after which rows are skipped")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU (none visible)")
        return 2
    start = time.monotonic()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    machine = MACHINE if sms == MACHINE.sms else MACHINE.__class__(**{**vars(MACHINE), "sms": sms})
    out: dict = dict(device=torch.cuda.get_device_name(0), sms=sms, module_loading=os.environ["CUDA_MODULE_LOADING"],
                     residency=[], stress=[])
    print(f"{out['device']}: {sms} SMs; CUDA_MODULE_LOADING={out['module_loading']}", flush=True)
    ok = True

    # ----- 1. the residency hazard of two streams --------------------------------------------------
    probe = residency_run(PRODUCERS, args.polls)
    parts = binaries("all-reduce")  # consumers issued first: their part (PART 2) compiles first
    if len(parts) >= 2:
        fc, fp = footprint(parts[0]), footprint(parts[1])
        costs = Costs.from_footprints(machine, {"consumers": fc, "producers": fp})
        capacity = sms * occupancy(fc, machine)
        lowest = next((n for n in range(2, capacity + 2, 2) if deadlocks(n, costs)), None)
        print(f"probe: {probe}; consumers' part {fc} ({occupancy(fc, machine)} per SM alone, {capacity} in all); "
              f"producers' part {fp}; fewest consumer programs (W = {W}) the per-SM model says deadlock: {lowest}",
              flush=True)
        out.update(probe=probe, consumers_footprint=vars(fc), producers_footprint=vars(fp), capacity=capacity,
                   lowest_deadlock=lowest)
        for total, model in ((lowest, "deadlock"), (lowest - 2, "safe")) if lowest else ():
            if time.monotonic() - start > args.budget:
                print(f"  residency {total}: skipped, past the budget", flush=True)
                continue
            row = residency_run(total // W, args.polls)
            row.update(consumer_programs=total, model=model, gpu="deadlock" if row["hang"] else "completed")
            row["agree"] = (row["gpu"] == "deadlock") == (model == "deadlock")
            ok &= row["agree"]
            out["residency"].append(row)
            print(f"  residency: {total} consumer programs, {row['tiles']} tiles: model {model}, GPU {row['gpu']} "
                  f"({row['hang']} tiles timed out) in {row['seconds']} s", flush=True)
    else:
        print(f"probe: {probe}; the kernel's binaries were not found ({len(parts)}): residency rows skipped", flush=True)
        ok = False

    # ----- 2. each kernel split in two, stress ------------------------------------------------------
    rows = [("all-reduce", "fused"), ("all-reduce", "two-stream"), ("all-reduce", "pdl"), ("all-reduce", "pdl-no-wait")]
    rows += [(k, m) for k in ("all-scatter", "all-gather-gemm", "gemm-reduce-scatter") for m in ("two-stream", "pdl")]
    for kernel, mode in rows:
        if time.monotonic() - start > args.budget:
            print(f"  {kernel} {mode}: skipped, past the budget", flush=True)
            continue
        r = run_campaign(kernel=kernel, protocol=SAFE, world_size=W, virtual_ranks=True, launches=mode,
                         iterations=args.iterations, delays="random", seed=0)
        rate = round(r.iterations / r.seconds) if r.seconds else None
        row = dict(kernel=kernel, launches=mode, iterations=r.iterations, bad=r.bad_iterations, counts=r.counts,
                   it_per_s=rate, compile_s=round(r.compile_seconds, 1), graphs=r.graphs, stopped=r.stopped)
        ok &= r.bad_iterations == 0
        out["stress"].append(row)
        print(f"  {kernel} {mode}: {r.iterations} iterations, {r.bad_iterations} bad {r.counts}; {rate} it/s; "
              f"compile {row['compile_s']} s; graphs {r.graphs}", flush=True)

    out["seconds"] = round(time.monotonic() - start, 1)
    out_dir = Path(os.environ.get("OUT", "out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "launch_modes_gpu.json").write_text(json.dumps(out, indent=2, default=str))
    print()
    print("| residency row | consumer programs | tiles | model (per SM) | GPU (tiles timed out) | agree |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in out["residency"]:
        print(f"| all-reduce, two streams, consumers first | {r['consumer_programs']} | {r['tiles']} | {r['model']} | "
              f"{r['gpu']} ({r['hang']}) | {'yes' if r['agree'] else 'NO'} |")
    print()
    print("| kernel | launches | iterations | bad | it/s | compile s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in out["stress"]:
        print(f"| {r['kernel']} | {r['launches']} | {r['iterations']} | {r['bad']} | {r['it_per_s']} | {r['compile_s']} |")
    print(f"{sms} SMs; {out['seconds']} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
