"""Issue 28's misses, profiled on one H200: where a safe protocol's extra µs go, and what helps.

Run from the repository root on the GPU machine (syncverify need not be installed)::

    export PYTHONPATH=$PWD PYTHONUNBUFFERED=1; python3 benchmarks/profile_tail.py --out $OUT

``--run 1`` (the first GPU run, 2026-12-02): for each profiled case (``CASES``: the shipped tile
table's configuration at 1024^3 in all four kernels, and all-reduce / gemm-reduce-scatter at
8192x4608x8192 where the +3.6 % / +3.8 % were measured), ``none`` against the cheapest safe
built-in (``epoch-flag``). ``--run 2`` (default): ``PLAN``, what run 1's profile pointed at: the
candidate protocols of ``benchmarks/protocols/`` (proven safe, drift-tested and audited:
``tests/test_candidates.py``) beside ``none`` and ``epoch-flag``, the 8192x4608x8192 misses and
all-gather-gemm profiled, all-scatter with more comm programs. In each case:

1. **device time**: cuBLAS and every build, ``none`` and ``epoch-flag`` also built with timestamps,
   each a CUDA graph of ``launches`` launches replayed round-robin (median of 10 replays;
   ``syncverify.kernels.bench.timing``), so the timestamps' own cost is measured too; every
   synchronized build validated;
2. **timeline**: the timestamped builds' last replay read back (every program's start and end, and
   per tile its role's three times: ``syncverify.kernels.bench.profile.EVENTS``), the median over
   launches 1-5 of ``syncverify.kernels.bench.profile.timeline``: each role's last end, the tail
   after the producers' last end, the waiting roles' backlog / wake-up / work per tile and the
   iteration that ended last.

Also the ``%globaltimer`` step on this GPU, whether ``ncu`` / ``nsys`` exist, and with ``--extras``
``torch.profiler``'s kernel times of eager launches, ``ncu``'s (if on PATH) and the model's fix 5
of ``xchg-flag``. Each case's rows print as it finishes; ``$OUT/profile.json`` (every number) and
``$OUT/stamps.json`` (each timestamped build's last launch, raw), compact tables last.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

from benchmarks.speed_sweep import precompile
from syncverify.kernels._deps import tl
from syncverify.kernels._jit import jit
from syncverify.kernels.bench.profile import iterations_needed, median_timeline, timeline
from syncverify.kernels.bench.report import Case, problem_flops
from syncverify.kernels.bench.timing import FusedRun, Timer, cublas_replay, input_sets
from syncverify.kernels.build import build, runtime_values_tensor
from syncverify.kernels.delays import now_ns, stamp_row
from syncverify.kernels.registry import kernel_function
from syncverify.protocols.registry import load_protocol
from syncverify.verdicts.suggest import suggest

W = 2
SAFE = "epoch-flag"  # the cheapest safe built-in in all 12 entries of the shipped tile table
SMALL = (1024, 1024, 1024)
BIG = (8192, 4608, 8192)

#: (kernel, shape, block, stages, warps, group_m, split)
_AR_SMALL = ("all-reduce", SMALL, (128, 128, 64), 4, 8, 8, (48, 18))
_RS_SMALL = ("gemm-reduce-scatter", SMALL, (128, 128, 64), 4, 8, 8, (54, 12))
_AS_SMALL = ("all-scatter", SMALL, (64, 128, 64), 4, 4, 8, (46, 10, 10))
_AG_SMALL = ("all-gather-gemm", SMALL, (64, 128, 64), 3, 8, 2, (12, 54))
_AR_BIG = ("all-reduce", BIG, (128, 256, 64), 3, 8, 8, (60, 6))
_RS_BIG = ("gemm-reduce-scatter", BIG, (128, 256, 64), 4, 8, 8, (60, 6))
#: run 1 (2026-12-02, commit 873cb7e): the misses at the configurations measured, ``none`` against
#: ``SAFE``, each with timestamps too (all-gather-gemm crashed there: the stamps bug fixed in c297777)
CASES = [_AR_SMALL, _RS_SMALL, _AS_SMALL, _AG_SMALL, _AR_BIG, _RS_BIG]
#: run 2, in priority order (the device call is capped): (case, with timestamps, candidate protocols).
#: Run 1 showed each release at sys scope costing the producer about 1.2 µs per tile (epoch-flag makes W
#: of them) and, in all-scatter, the comm programs' backlog; so: the 8192x4608x8192 misses profiled
#: with the candidates that make fewer sys-scope releases, the same at 1024^3, all-gather-gemm's
#: profile, all-scatter with more comm programs, and the shipped tile table's 8192x4608x8192 entries.
PLAN = [
    (_AR_BIG, True, ("epoch-owner", "epoch-flag-local")),
    (_RS_BIG, True, ("epoch-owner", "epoch-flag-local")),
    (_AR_SMALL, False, ("epoch-owner", "epoch-flag-local")),
    (_RS_SMALL, False, ("epoch-owner", "epoch-flag-local")),
    (_AG_SMALL, True, ("epoch-flag-local",)),
    (("all-scatter", SMALL, (64, 128, 64), 4, 4, 8, (34, 22, 10)), False, ("epoch-flag-local",)),
    (("all-scatter", SMALL, (128, 128, 64), 4, 8, 8, (40, 16, 10)), False, ("epoch-flag-local",)),
    (_AS_SMALL, False, ("epoch-flag-local",)),
    (("all-reduce", BIG, (128, 256, 64), 3, 8, 8, (62, 4)), False, ("epoch-owner", "epoch-flag-local")),
    (("gemm-reduce-scatter", BIG, (128, 256, 64), 3, 8, 8, (62, 4)), False, ("epoch-owner", "epoch-flag-local")),
]
CANDIDATE_DIR = Path(__file__).parent / "protocols"
#: the kernels each candidate (``CANDIDATE_DIR/<name>.toml``) is proven safe in (``tests/test_candidates.py``)
CANDIDATE_SCENARIOS: dict = json.loads((CANDIDATE_DIR / "scenarios.json").read_text())


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def make_case(kernel, shape, block, stages, warps, group_m, split) -> Case:
    return Case(kernel=kernel, m=shape[0], n=shape[1], k=shape[2], block=tuple(block), stages=stages, warps=warps,
                group_m=group_m, split=tuple(split))


#: all-reduce also with the cheapest proven-safe fix measured (2026-12-02: +3.1 % at 62+4, epoch-flag
#: +6.9 %): the model's fix 5 of ``xchg-flag`` (``syncverify.verdicts.suggest``), found in :func:`main`
FIXES: dict = {}


def builds_of(case: Case, *, stamps: bool, candidates: tuple = ()) -> dict:
    """label -> BuiltKernel: ``none``, ``SAFE`` and ``candidates`` (names in :data:`CANDIDATE_DIR`),
    and (``stamps``) ``none`` and ``SAFE`` again with timestamps; all-reduce also with :data:`FIXES`."""
    config = case.kernel_config(world_size=W)
    protocols = {"none": None, SAFE: load_protocol(SAFE)}
    out = {label: build(p, config) for label, p in protocols.items()}
    for name in candidates:
        if case.kernel not in CANDIDATE_SCENARIOS[name]:
            raise ValueError(f"{name} is not proven safe in {case.kernel}")
        out[name] = build(load_protocol(CANDIDATE_DIR / f"{name}.toml"), config)
    if case.kernel == "all-reduce":
        out.update({label: build(p, config) for label, p in FIXES.items()})
    if stamps:
        stamped = replace(config, stamps=iterations_needed(config))
        out.update({f"{label}+stamps": build(p, stamped) for label, p in protocols.items()})
    return out


def time_case(case: Case, builds: dict, device, *, launches: int, repeats: int = 10) -> dict:
    """cuBLAS and every build timed round-robin; the stamped builds' last replay read back as
    timelines; every synchronized build validated. Returns ``{rows, timelines, raw}``."""
    timer = Timer(device, launches=launches, repeats=repeats, warmup=3)
    generator = torch.Generator(device=device).manual_seed(0)
    sets = input_sets(case, W, device, generator=generator)
    fresh = input_sets(case, W, device, generator=generator, count=1)[0]
    runs = {}
    for label, built in builds.items():
        run = FusedRun(built, device)
        if built.config.stamps:
            run.stamp_rows = torch.zeros((launches, built.config.grid, stamp_row(built.config.stamps)),
                                         dtype=torch.int64, device=device)
        runs[label] = run
    replays = [cublas_replay(case, sets, timer)] + [run.capture(timer, sets) for run in runs.values()]
    times = timer.interleaved(replays)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    flops = problem_flops(case, W)
    rows = [dict(label="cublas", us=times[0][0] * 1e6, min_us=times[0][1] * 1e6, max_us=times[0][2] * 1e6,
                 tflops=flops / times[0][0] / 1e12, validated="")]
    timelines, raw = {}, {}
    for (label, run), t in zip(runs.items(), times[1:]):
        if run.stamp_rows is not None:  # the last replay's launches, before validation overwrites nothing
            stamps = run.stamp_rows.cpu().tolist()
            per_launch = [timeline(run.config, rows_) for rows_ in stamps[1:6]]  # launch 0 follows the zeroing
            timelines[label] = dict(median=median_timeline(per_launch), first=per_launch[0],
                                    launches=len(per_launch))
            raw[label] = stamps[-1]
        validated = "not validated (none)" if label.startswith("none") else run.validate(fresh)
        rows.append(dict(label=label, us=t[0] * 1e6, min_us=t[1] * 1e6, max_us=t[2] * 1e6,
                         tflops=flops / t[0] / 1e12, validated=validated))
    del replays, runs
    torch.cuda.empty_cache()
    return dict(case=asdict(case), key=case.key, rows=rows, timelines=timelines, raw=raw)


# ----- the clock, the profilers ---------------------------------------------------------------------

@jit
def _clock_kernel(out, N: tl.constexpr):
    for i in range(N):
        tl.store(out + i, now_ns(False))


def globaltimer_step(device) -> dict:
    """The smallest and median non-zero step between back-to-back ``%globaltimer`` reads."""
    out = torch.zeros(4096, dtype=torch.int64, device=device)
    _clock_kernel[(1,)](out, N=4096)
    torch.cuda.synchronize(device)
    values = out.cpu().tolist()
    steps = [b - a for a, b in zip(values, values[1:]) if b != a]
    return dict(reads=len(values), distinct=len(set(values)), span_ns=values[-1] - values[0],
                min_step_ns=min(steps) if steps else None,
                median_step_ns=statistics.median(steps) if steps else None)


def torch_profile(case: Case, builds: dict, device, launches: int = 20) -> dict:
    """``torch.profiler`` (CUPTI) kernel times of ``launches`` eager launches of each build:
    µs per launch, median, a check of the graph timing that involves no graph."""
    from torch.profiler import ProfilerActivity, profile  # torch: only the GPU path needs it

    generator = torch.Generator(device=device).manual_seed(1)
    sets = input_sets(case, W, device, generator=generator, count=2)
    out = {}
    for label, built in builds.items():
        if built.config.stamps:
            continue
        run = FusedRun(built, device)
        run.vals = runtime_values_tensor(built, range(launches + 1), device)
        run.zero_locks()
        run.launch(sets[0], 0)  # compile and warm
        torch.cuda.synchronize(device)
        run.zero_locks()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for i in range(launches):
                if i:
                    run.zero_locks(between=True)
                run.launch(sets[i % 2], i)
            torch.cuda.synchronize(device)
        name = kernel_function(built.config.kernel)[1].fn.__name__
        times = [e.time_range.elapsed_us() for e in prof.events() if e.name.startswith(name)]
        out[label] = dict(launches=len(times), median_us=round(statistics.median(times), 2) if times else None)
    return out


def ncu_run(out: Path, timeout: float) -> dict:
    """If ``ncu`` exists: its ``gpu__time_duration`` of the first profiled case's builds (a child
    of this script, ``--ncu-child``), bounded by ``timeout`` s."""
    tool = shutil.which("ncu")
    if not tool:
        return dict(ran=False)
    command = [tool, "--metrics", "gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed",
               "--kernel-name", "regex:gemm", "--launch-count", "8", "--csv",
               sys.executable, __file__, "--ncu-child", "--out", str(out)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(ran=True, timed_out=True)
    (out / "ncu.csv").write_text(done.stdout)
    return dict(ran=True, rc=done.returncode, stdout_tail=done.stdout[-3000:], stderr_tail=done.stderr[-1500:])


def ncu_child() -> None:
    """Eager launches of the first case's ``none`` and ``SAFE`` builds, for ``ncu`` to profile."""
    device = torch.device("cuda")
    case = make_case(*CASES[0])
    sets = input_sets(case, W, device, generator=torch.Generator(device=device).manual_seed(2), count=2)
    for label, built in builds_of(case, stamps=False).items():
        run = FusedRun(built, device)
        run.vals = runtime_values_tensor(built, range(5), device)
        run.zero_locks()
        for i in range(4):
            if i:
                run.zero_locks(between=True)
            run.launch(sets[i % 2], i)
        torch.cuda.synchronize(device)


# ----- the tables ------------------------------------------------------------------------------------

def time_table(results: list[dict]) -> str:
    """Per case: cuBLAS, ``none``, then every other build (+% over ``none``)."""
    lines = ["| case | cuBLAS | none | protocols, µs (+% over none) | timestamped builds | not ok |",
             "| --- | ---: | ---: | --- | --- | --- |"]
    for r in results:
        by = {row["label"]: row for row in r["rows"]}
        none = by["none"]["us"]
        protocols = [f"{label} {row['us']:.1f} ({100 * (row['us'] / none - 1):+.1f}%)" for label, row in by.items()
                     if label not in ("cublas", "none") and not label.endswith("+stamps")]
        stamped = [f"{label} {row['us']:.1f}" for label, row in by.items() if label.endswith("+stamps")]
        bad = [f"{label}: {row['validated']}" for label, row in by.items()
               if row["validated"] not in ("", "ok", "not validated (none)")]
        lines.append(f"| {short(r['key'])} | {by['cublas']['us']:.1f} | {none:.1f} | {'; '.join(protocols)} | "
                     f"{'; '.join(stamped) or '-'} | {'; '.join(bad)} |")
    return "\n".join(lines)


def timeline_table(results: list[dict]) -> str:
    """Per profiled case and build: µs from the first program start (median over launches)."""
    lines = ["| case | build | span | role ends (last; median) | tail after producers | waiting role: backlog / "
             "wake / work per tile (median) | tiles behind | last tile: ready -> wait start -> flag -> done "
             "(backlog, wake, work; its program's tiles after source end) |",
             "| --- | --- | ---: | --- | ---: | --- | ---: | --- |"]
    for r in results:
        for label, t in r["timelines"].items():
            m = t["median"]
            ends = "; ".join(f"{role} {v['last_end']:.2f} ({v['median_end']:.2f})" for role, v in m["roles"].items())
            waiting = [role for role in ("consumer", "comm", "receiver", "gemm") if role in m]
            parts, crits, behind = [], [], []
            for role in waiting:
                w = m[role]
                c = w["critical"]
                parts.append(f"{role} {w['backlog']:.2f} / {w['wake']:.2f} / {w['work']:.2f}")
                behind.append(f"{role} {w['behind']:.0f}")
                crits.append(f"{role} {c['ready']:.2f} -> {c['wait_start']:.2f} -> {c['flag']:.2f} -> {c['done']:.2f} "
                             f"({c['backlog']:.2f}, {c['wake']:.2f}, {c['work']:.2f}; {c['after_source_end']:.0f})")
            lines.append(f"| {short(r['key'])} | {label} | {m['span']:.2f} | {ends} | {m['tail']:.2f} | "
                         f"{'; '.join(parts)} | {'; '.join(behind)} | {'; '.join(crits)} |")
    return "\n".join(lines)


def short(key: str) -> str:
    return key.replace(" bf16", "").replace(" descriptor", "")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=int, default=2, choices=[1, 2], help="1: CASES profiled (as on 2026-12-02); "
                        "2 (default): PLAN, the candidates")
    parser.add_argument("--out", default=os.environ.get("OUT", "out"))
    parser.add_argument("--budget", type=float, default=160.0, help="seconds for the whole run (default 160)")
    parser.add_argument("--workers", type=int, default=max(1, min(14, (os.cpu_count() or 2) - 2)))
    parser.add_argument("--extras", action="store_true", help="also torch.profiler, ncu if on PATH, fix5 of xchg-flag")
    parser.add_argument("--ncu-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.ncu_child:
        ncu_child()
        return 0
    start = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda")
    log(f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}, run {args.run}, budget {args.budget} s")
    result: dict = dict(torch=torch.__version__, run=args.run, cases=[], skipped=[])
    result["globaltimer"] = globaltimer_step(device)
    result["tools"] = {name: shutil.which(name) for name in ("ncu", "nsys")}
    log(f"globaltimer: {result['globaltimer']}; profilers on PATH: {result['tools']}")
    if args.extras:
        try:
            found = suggest("xchg-flag", scenario="all-reduce", world_size=W, timeout=60)
            fix = next(f for f in found if "atomic_add(0)" in f.description and "gpu scope" in f.description)
            FIXES["fix5 xchg-flag"] = fix.protocol
            result["fix"] = fix.description
        except Exception as error:  # reported; the cases still run without it
            result["skipped"].append(f"suggest xchg-flag: {type(error).__name__}: {error}"[:300])
    plan = [(c, True, ()) for c in CASES] if args.run == 1 else PLAN
    built = [(make_case(*c), stamped, builds_of(make_case(*c), stamps=stamped, candidates=cands))
             for c, stamped, cands in plan]
    pre = precompile([b for _, _, bs in built for b in bs.values()], args.workers)
    log(f"precompiled {pre['builds']} builds in {pre['seconds']} s; {len(pre['failed'])} failed: {pre['failed'][:3]}")
    result["precompile"] = pre
    raw: dict = {}
    try:
        for case, stamped, builds in built:
            if time.time() - start > args.budget - 15:
                result["skipped"].append(f"{case.key} (budget)")
                continue
            t = time.time()
            small = case.m * case.n * case.k <= 4096 ** 3 // 4
            try:
                r = time_case(case, builds, device, launches=40 if small else 10)
            except Exception as error:  # reported; the next case still runs (unless the context is lost)
                result["skipped"].append(f"{case.key}: {type(error).__name__}: {error}"[:300])
                continue
            raw.update({f"{short(r['key'])} | {label}": rows for label, rows in r.pop("raw").items()})
            result["cases"].append(r)
            log(f"{short(r['key'])} ({time.time() - t:.1f} s):")
            print(time_table([r]).splitlines()[-1], flush=True)  # as it goes: a kill leaves what was done
            (out / "profile.json").write_text(json.dumps(result, indent=1, default=str))
            if r["timelines"]:
                print(*timeline_table([r]).splitlines()[2:], sep="\n", flush=True)
        if args.extras and time.time() - start < args.budget - 60:
            case = make_case(*CASES[0])
            result["torch_profiler"] = torch_profile(case, builds_of(case, stamps=False), device)
            if result["tools"]["ncu"] and time.time() - start < args.budget - 90:
                result["ncu"] = ncu_run(out, timeout=max(30.0, args.budget - (time.time() - start) - 30))
    finally:
        (out / "profile.json").write_text(json.dumps(result, indent=1, default=str))
        (out / "stamps.json").write_text(json.dumps(raw))  # each timestamped build's last launch, raw
        print("\nskipped:", *(result["skipped"] or ["nothing"]), sep="\n  ")
        print(f"\nglobaltimer: {result['globaltimer']}; profilers: {result['tools']}; "
              f"torch.profiler: {result.get('torch_profiler')}\n")
        print("Device time, µs per launch (CUDA graphs, median of 10 replays):\n")
        print(time_table(result["cases"]))
        print("\nTimeline, µs from the launch's first program start (median over the launches of one replay):\n")
        print(timeline_table([r for r in result["cases"] if r["timelines"]]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
