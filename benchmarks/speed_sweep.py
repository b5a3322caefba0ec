"""Issue 28 on one H200: tile/split/stages sweeps, the fused kernels' protocol overhead, and what
the model's fixes of unsafe protocols cost, timed against cuBLAS in the same run.

Run from the repository root on the GPU machine (syncverify need not be installed)::

    export PYTHONPATH=$PWD PYTHONUNBUFFERED=1; python3 benchmarks/speed_sweep.py --phase 1 --out $OUT

Method (``/work/.library/device/METHOD.md``; ``syncverify.kernels.bench.timing``): every timed
thing is a CUDA graph of ``launches`` launches on rotating input sets (together at least three
times the L2), replayed round-robin with the others of its group after warm-up, median of
``repeats`` replays, CUDA events; cuBLAS (``torch.matmul`` on the same per-rank operands) is in
every group. Every synchronized build and every GEMM part is validated against fp32
``torch.matmul`` after timing; ``none`` (no synchronization) is the cost baseline, never
validated.

Stages, in priority order, each bounded by ``--budget`` seconds in all (what does not fit is
listed as skipped, never silently dropped):

1. ``part``: the GEMM part (``gemm_only``: every program multiplies) of each candidate tile /
   stages / warps configuration per kernel and shape (``CANDIDATES``);
2. ``fused``: at the fastest GEMM part of each (kernel, shape), the fused kernel with ``none``
   and every safe built-in, at the default split and the splits of ``SPLITS``;
3. ``overhead``: 8192x4608x8192 in the three kernels whose GEMM is already at speed, each safe
   built-in against ``none`` at several producer/consumer splits;
4. ``fixes``: the model's proven-safe fixes (``syncverify.verdicts.suggest``) of unsafe built-ins,
   each timed as a fused kernel (what ``bench --suggest --cost`` ranks).

Before timing, every kernel of a stage is compiled in parallel worker processes exactly as its
GPU launch compiles it (``syncverify.kernels.compile.compile_like_launch``, CPU tensors standing
in), which fills Triton's on-disk cache: the timed process then loads instead of compiling.

Output: ``$OUT/speed-phaseN.json`` (every measurement, the stage log, the ceilings) and a
compact table last on stdout.
"""

from __future__ import annotations

import argparse
import concurrent.futures as futures
import json
import multiprocessing
import os
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, replace
from pathlib import Path

import torch

from syncverify.kernels.bench.report import Case, default_split, machine_kind, problem_flops
from syncverify.kernels.bench.timing import (FusedRun, Timer, cublas_replay, input_sets, measure_ceilings,
                                            operand_shapes)
from syncverify.kernels.bench.tuning import choose_tiles
from syncverify.kernels.build import build, runtime_values_tensor, torch_dtype
from syncverify.kernels.compile import compile_like_launch
from syncverify.kernels.delays import stamp_row
from syncverify.kernels.launch import launch_arguments
from syncverify.kernels.registry import kernel_function
from syncverify.protocols.registry import load_protocol
from syncverify.verdicts.suggest import suggest

W = 2
SAFE = ("barrier-fenced-release-acquire", "epoch-flag")  # the built-ins the model calls safe at W = 2
BIG = (8192, 4608, 8192)
SMALL = ((1024, 1024, 1024), (3840, 3840, 4352))

# (block, stages, warps, group_m) candidates per kernel and shape; all-gather-gemm's block_m is
# rows per shard (its GEMM tile is W * block_m rows)
_STD_SMALL = [((128, 256, 64), 3, 8, 8), ((128, 128, 64), 4, 8, 8), ((64, 128, 64), 4, 4, 8),
              ((128, 64, 64), 4, 4, 8), ((64, 64, 64), 4, 4, 8)]
_STD_MID = [((128, 256, 64), 3, 8, 8), ((128, 128, 64), 4, 8, 8), ((64, 128, 64), 4, 4, 8),
            ((64, 256, 64), 3, 4, 8)]
_SCATTER_MID = [((128, 128, 64), 3, 8, 8), ((128, 128, 64), 4, 8, 8), ((64, 128, 64), 4, 4, 8),
                ((128, 64, 64), 4, 4, 8)]
CANDIDATES = {
    ("all-gather-gemm", BIG): [((64, 256, 64), 3, 8, 8), ((64, 256, 64), 4, 8, 8), ((128, 128, 64), 3, 8, 8),
                               ((128, 128, 64), 4, 8, 8), ((64, 128, 64), 4, 8, 8), ((64, 256, 64), 3, 8, 1)],
    ("all-gather-gemm", SMALL[0]): [((64, 128, 64), 3, 8, 8), ((64, 64, 64), 4, 4, 8), ((32, 128, 64), 4, 4, 8),
                                    ((32, 64, 64), 4, 4, 8), ((64, 256, 64), 3, 8, 8)],
    ("all-gather-gemm", SMALL[1]): [((64, 256, 64), 3, 8, 8), ((64, 128, 64), 4, 8, 8), ((128, 128, 64), 3, 8, 8),
                                    ((32, 128, 64), 4, 4, 8)],
    ("all-reduce", SMALL[0]): _STD_SMALL, ("gemm-reduce-scatter", SMALL[0]): _STD_SMALL,
    ("all-scatter", SMALL[0]): _STD_SMALL[:4],
    ("all-reduce", SMALL[1]): _STD_MID, ("gemm-reduce-scatter", SMALL[1]): _STD_MID,
    ("all-scatter", SMALL[1]): _SCATTER_MID,
}
#: extra splits (programs per rank) tried in the fused stage beside the default one
SPLITS = {
    ("all-gather-gemm", BIG): [(3, 63), (10, 56)],
    ("all-reduce", SMALL[0]): [(54, 12)], ("gemm-reduce-scatter", SMALL[0]): [(54, 12)],
    ("all-scatter", SMALL[0]): [(54, 6, 6)], ("all-gather-gemm", SMALL[0]): [(12, 54)],
}
OVERHEAD_SPLITS = {"all-reduce": [(60, 6), (62, 4), (58, 8)], "gemm-reduce-scatter": [(60, 6), (62, 4), (58, 8)],
                   "all-scatter": [(58, 4, 4), (56, 5, 5), (54, 6, 6)]}
UNSAFE_TO_FIX = (("all-reduce", "fenced-release-acquire"), ("all-reduce", "xchg-flag"),
                 ("all-scatter", "fenced-release-acquire"))
MAX_FIXES = 6


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# ----- what is built and timed -------------------------------------------------------------------

def make_case(kernel: str, shape, block, stages, warps, group_m, split=()) -> Case:
    return Case(kernel=kernel, m=shape[0], n=shape[1], k=shape[2], block=tuple(block), stages=stages, warps=warps,
                group_m=group_m, split=tuple(split))


def resolved(case: Case, sms: int) -> Case:
    """``case`` with its split filled in (the default one for the GPU's SMs when it has none)."""
    return case if case.split else replace(case, split=default_split(case.kernel, sms=sms, world_size=W))


def builds_of(case: Case, protocols: dict, *, sms: int, part: bool) -> dict:
    """label -> BuiltKernel: the GEMM part (every program multiplies) and the fused kernel with
    each protocol (name -> loaded protocol, ``none`` -> None)."""
    case = resolved(case, sms)
    out = {}
    if part:
        config = replace(case.kernel_config(world_size=W, gemm_only=True), gemm_sms=sms // W)
        out["gemm-part"] = build(None, config, sms=sms)
    for name, protocol in protocols.items():
        out[name] = build(protocol, case.kernel_config(world_size=W), sms=sms)
    return out


def _compile_one(built) -> str:
    """Compile one build as its launch will (CPU tensors of the run's shapes), filling the cache."""
    try:
        c = built.config
        run = FusedRun(built, torch.device("cpu"))
        a_shape, b_shape = operand_shapes(Case(kernel=c.kernel, m=c.m, n=c.n, k=c.k), W)
        dtype = torch_dtype(c.dtype)
        A, B = torch.empty(a_shape, dtype=dtype), torch.empty(b_shape, dtype=dtype)
        vals = runtime_values_tensor(built, range(2), "cpu")[0]
        stamps = torch.zeros((c.grid, stamp_row(c.stamps)), dtype=torch.int64) if c.stamps else None  # profile_tail.py
        module, fn = kernel_function(c.kernel)
        args, kwargs = launch_arguments(fn, module.meta_parameters, built, run.heap, A, B, run.status, vals=vals,
                                        stamps=stamps)
        compile_like_launch(fn, *args, **kwargs)
        return ""
    except Exception as error:  # reported, and the timed process compiles it itself
        return f"{type(error).__name__}: {error}".splitlines()[0][:200]


def precompile(builds: list, workers: int) -> dict:
    """Compile ``builds`` in parallel processes; ``{"seconds", "failed"}``."""
    start = time.time()
    failed = []
    try:
        ctx = multiprocessing.get_context("spawn")  # workers import torch afresh (no CUDA context)
        with futures.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            for built, problem in zip(builds, pool.map(_compile_one, builds)):
                if problem:
                    failed.append(f"{built.config.kernel} {built.plan.protocol}: {problem}")
    except Exception as error:
        failed.append(f"pool: {type(error).__name__}: {error}")
    return {"seconds": round(time.time() - start, 1), "builds": len(builds), "failed": failed}


def time_group(case: Case, builds: dict, *, timer: Timer, seed: int = 0) -> list[dict]:
    """cuBLAS and every build of ``builds`` timed round-robin; then each validated."""
    device = timer.device
    generator = torch.Generator(device=device).manual_seed(seed)
    sets = input_sets(case, W, device, generator=generator)
    fresh = input_sets(case, W, device, generator=generator, count=1)[0]
    runs = {label: FusedRun(built, device) for label, built in builds.items()}
    replays = [cublas_replay(case, sets, timer)]
    replays += [run.capture(timer, sets) for run in runs.values()]
    times = timer.interleaved(replays)
    del replays
    flops = problem_flops(case, W)
    rows = [dict(what="cublas", label="cublas", us=times[0][0] * 1e6, min_us=times[0][1] * 1e6,
                 max_us=times[0][2] * 1e6, tflops=flops / times[0][0] / 1e12, validated="")]
    for (label, run), t in zip(runs.items(), times[1:]):
        c_ = run.config
        validated = "not validated (none)" if label == "none" else run.validate(fresh)
        rows.append(dict(what="gemm-part" if c_.gemm_only else "fused", label=label, us=t[0] * 1e6,
                         min_us=t[1] * 1e6, max_us=t[2] * 1e6, tflops=flops / t[0] / 1e12, validated=validated,
                         programs=[c_.gemm_sms, c_.comm_sms] + ([c_.recv_sms] if c_.kernel == "all-scatter" else [])))
    del runs
    torch.cuda.empty_cache()
    return [dict(r, case=asdict(case), key=case.key) for r in rows]


# ----- the stages --------------------------------------------------------------------------------

class Run:
    def __init__(self, args, device) -> None:
        self.args, self.device = args, device
        self.sms = torch.cuda.get_device_properties(device).multi_processor_count
        self.deadline = time.time() + args.budget
        self.rows: list[dict] = []
        self.stages: list[dict] = []
        self.skipped: list[str] = []

    def timer(self, case: Case) -> Timer:
        small = case.m * case.n * case.k <= 4096 ** 3 // 4
        return Timer(self.device, launches=40 if small else 10, repeats=10, warmup=3)

    def left(self) -> float:
        return self.deadline - time.time()

    def stage(self, name: str, groups: list[tuple[Case, dict, bool, str]]) -> list[dict]:
        """Precompile then time ``groups`` (case, protocols, with the GEMM part, note)."""
        built = []
        for case, protocols, part, note in groups:
            try:
                built.append((resolved(case, self.sms), builds_of(case, protocols, sms=self.sms, part=part), note))
            except Exception as error:
                self.skipped.append(f"{name} {case.key}: {type(error).__name__}: {error}")
        pre = precompile([b for _, builds, _ in built for b in builds.values()], self.args.workers)
        log(f"stage {name}: precompiled {pre['builds']} builds in {pre['seconds']} s, {len(pre['failed'])} failed")
        for problem in pre["failed"][:5]:
            log(f"  precompile: {problem}")
        out = []
        for case, builds, note in built:
            if self.left() < 15:
                self.skipped.append(f"{name} {case.key} (budget)")
                continue
            start = time.time()
            try:
                rows = time_group(case, builds, timer=self.timer(case))
            except Exception as error:
                self.skipped.append(f"{name} {case.key}: {type(error).__name__}: {error}")
                traceback.print_exc()
                torch.cuda.empty_cache()
                continue
            for r in rows:
                r.update(stage=name, note=note)
            out += rows
            log(f"{name} {case.key}: " + ", ".join(f"{r['label']} {r['us']:.1f}" for r in rows)
                + f" ({time.time() - start:.1f} s)")
        self.rows += out
        self.stages.append(dict(name=name, precompile=pre, groups=len(built)))
        return out


def best_parts(rows: list[dict]) -> dict:
    """(kernel, shape) -> the case of the fastest validated GEMM part."""
    best: dict = {}
    for r in rows:
        if r["what"] != "gemm-part" or r["validated"] != "ok":
            continue
        key = (r["case"]["kernel"], (r["case"]["m"], r["case"]["n"], r["case"]["k"]))
        if key not in best or r["us"] < best[key]["us"]:
            best[key] = r
    return {key: Case(**{**r["case"], "block": tuple(r["case"]["block"]), "split": ()}) for key, r in best.items()}


def phase_one(run: Run) -> None:
    safe = {name: load_protocol(name) for name in SAFE}
    protocols = {"none": None, **safe}
    parts = [(make_case(kernel, shape, *cand), {}, True, "candidate")
             for (kernel, shape), cands in CANDIDATES.items() for cand in cands]
    run.stage("part", parts)
    best = best_parts(run.rows)
    fused = []
    for key, case in best.items():
        fused.append((case, protocols, False, "best part, default split"))
        for split in SPLITS.get(key, []):
            fused.append((replace(case, split=split), protocols, False, "best part, other split"))
    run.stage("fused", fused)
    overhead = [(make_case(kernel, BIG, (128, 256, 64), 3, 8, 8, split), protocols, split == splits[0],
                 "shipped config")
                for kernel, splits in OVERHEAD_SPLITS.items() for split in splits]
    run.stage("overhead", overhead)
    fixes = []
    for kernel, name in UNSAFE_TO_FIX:
        found = fixes_of(name, kernel)
        run.stages.append(dict(name="suggest", protocol=name, kernel=kernel, fixes=list(found)))
        if found:
            fixes.append((make_case(kernel, BIG, (128, 256, 64), 3, 8, 8), {"none": None, **safe, **found}, False,
                          f"fixes of {name}"))
    run.stage("fixes", fixes)


#: Phase 2: per (kernel, shape), the configurations (block, stages, warps, group_m, split) timed for
#: the shipped tile table: phase 1's fastest GEMM parts (docs/RESULTS.md, 2026-12-02) at the
#: splits that moved the safe protocols' time there, plus (all-gather-gemm) a smaller tile group
#: so the first wave waits for fewer tiles, and (all-scatter 1024^3) a 128-deep K step.
_AGG_BIG = ((64, 256, 64), 3, 8)
_STD_BIG = ((128, 256, 64), 3, 8)
FINAL: dict = {
    ("all-gather-gemm", BIG): [(*_AGG_BIG, 8, (6, 60)), (*_AGG_BIG, 8, (10, 56)), (*_AGG_BIG, 4, (6, 60)),
                               (*_AGG_BIG, 4, (8, 58))],
    ("all-gather-gemm", SMALL[1]): [(*_AGG_BIG, 8, (6, 60)), (*_AGG_BIG, 8, (10, 56)), (*_AGG_BIG, 4, (8, 58))],
    ("all-gather-gemm", SMALL[0]): [((64, 128, 64), 3, 8, 8, (6, 60)), ((64, 128, 64), 3, 8, 8, (12, 54)),
                                    ((64, 128, 64), 3, 8, 2, (12, 54))],
    ("all-reduce", SMALL[0]): [((128, 128, 64), 4, 8, 8, split) for split in ((54, 12), (48, 18), (42, 24))],
    ("gemm-reduce-scatter", SMALL[0]): [((128, 128, 64), 4, 8, 8, split) for split in ((54, 12), (48, 18), (42, 24))],
    ("all-scatter", SMALL[0]): [((64, 128, 64), 4, 4, 8, split) for split in ((54, 6, 6), (50, 8, 8), (46, 10, 10))]
                               + [((64, 128, 128), 3, 4, 8, (54, 6, 6))],
    ("all-reduce", SMALL[1]): [(*_STD_BIG, 8, split) for split in ((60, 6), (56, 10), (52, 14))],
    ("gemm-reduce-scatter", SMALL[1]): [(*_STD_BIG, 8, split) for split in ((60, 6), (56, 10), (52, 14))],
    ("all-scatter", SMALL[1]): [((128, 128, 64), 4, 8, 8, split) for split in ((58, 4, 4), (54, 6, 6), (50, 8, 8))],
    ("all-reduce", BIG): [(*_STD_BIG, 8, split) for split in OVERHEAD_SPLITS["all-reduce"]]
                         + [((128, 256, 64), 4, 8, 8, (60, 6))],
    ("gemm-reduce-scatter", BIG): [(*_STD_BIG, 8, split) for split in OVERHEAD_SPLITS["gemm-reduce-scatter"]]
                                  + [((128, 256, 64), 4, 8, 8, (60, 6))],
    ("all-scatter", BIG): [(*_STD_BIG, 8, split) for split in OVERHEAD_SPLITS["all-scatter"]],
}


def phase_two(run: Run) -> None:
    """Time ``FINAL``'s configurations (GEMM part, none, each safe built-in), choose the shipped
    tile table from them, write it and the baseline rows, then run ``check --suggest --cost``."""
    protocols = {"none": None, **{name: load_protocol(name) for name in SAFE}}
    groups = [(make_case(kernel, shape, *config), protocols, True, "final")
              for (kernel, shape), configs in FINAL.items() for config in configs]
    rows = run.stage("final", groups)
    flat = [dict(kernel=r["case"]["kernel"], m=r["case"]["m"], n=r["case"]["n"], k=r["case"]["k"],
                 block=r["case"]["block"], stages=r["case"]["stages"], warps=r["case"]["warps"],
                 group_m=r["case"]["group_m"], split=r["case"]["split"], what=r["what"],
                 protocol="" if r["what"] != "fused" else r["label"], time_us=round(r["us"], 2),
                 validated=r["validated"] if r["label"] != "none" else "not validated (none)") for r in rows]
    machine = machine_kind(torch.cuda.get_device_name(run.device), torch.cuda.device_count())
    table = choose_tiles(flat, machine=machine, safe=SAFE, source="benchmarks/speed_sweep.py --phase 2")
    out = Path(run.args.out)
    tiles = out / f"tiles-{machine}.json"
    tiles.write_text(json.dumps(table, indent=1) + "\n")
    baseline = {f"{r['key']} | {r['what']}" + (f" | {r['label']}" if r["what"] == "fused" else ""): round(r["tflops"], 1)
                for r in rows if r["what"] != "cublas"}
    (out / f"baseline-rows-{machine}.json").write_text(json.dumps(baseline, indent=1, sort_keys=True) + "\n")
    log(f"tile table: {len(table['entries'])} entries -> {tiles}")
    shipped = json.loads((Path(__file__).parent / "baselines" / f"{machine}.json").read_text())
    merged = dict(shipped, tflops={**shipped["tflops"], **baseline}, date=time.strftime("%Y-%m-%d"),
                  command=shipped["command"] + "; benchmarks/speed_sweep.py --phase 2 (tuned rows)")
    (out / f"baseline-{machine}.json").write_text(json.dumps(merged, indent=1, sort_keys=True) + "\n")
    gate = [sys.executable, "-m", "syncverify", "bench", "--kernel", "all-gather-gemm", "--virtual-ranks",
            "--tiles", str(tiles), "--check", str(out / f"baseline-{machine}.json")]
    commands = [("bench --check (all-gather-gemm, tuned, new baseline)", gate)]
    commands += [(f"check {name} --suggest --cost", [sys.executable, "-m", "syncverify", "check", name, "--suggest",
                                                     "--cost", "--cost-tiles", str(tiles)])
                 for name in ("fenced-release-acquire", "xchg-flag")]  # the CLI end to end, on the table just chosen
    for title, command in commands:
        if run.left() < 60:
            run.skipped.append(f"{title} (budget)")
            continue
        start = time.time()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=max(30, run.left() - 10))
        except subprocess.TimeoutExpired:
            run.skipped.append(f"{title} (timed out)")
            continue
        run.stages.append(dict(name=title, command=" ".join(command[1:]), rc=done.returncode,
                               seconds=round(time.time() - start, 1), stdout=done.stdout[-6000:],
                               stderr=done.stderr[-2000:]))
        log(f"{title}: exit {done.returncode} in {time.time() - start:.0f} s")
        print("\n".join(line for line in done.stdout.splitlines()
                        if line.startswith(("cost", "  ", "gate", "REGRESSION", "|"))), flush=True)
        if done.returncode not in (0, 1):
            print(done.stderr[-1500:], flush=True)


def fixes_of(name: str, kernel: str) -> dict:
    """label -> protocol: the model's proven-safe fixes of ``name`` in ``kernel`` (W = 2)."""
    try:
        found = suggest(name, scenario=kernel, world_size=W, timeout=60)
    except Exception as error:
        log(f"suggest {name} {kernel}: {type(error).__name__}: {error}")
        return {}
    log(f"suggest {name} in {kernel}: {found.message}")
    return {f"fix{i + 1} {name}: {fix.description}": fix.protocol for i, fix in enumerate(found[:MAX_FIXES])}


# ----- the table ---------------------------------------------------------------------------------

def table(rows: list[dict]) -> str:
    """One line per timed group: cuBLAS, GEMM part (% of cuBLAS), none, each protocol (+% over none)."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["stage"], r["key"]), []).append(r)
    lines = ["| stage | case | cuBLAS µs | part µs (% cuBLAS) | none µs (% cuBLAS) | protocols µs (+% over none) | not ok |",
             "| --- | --- | ---: | ---: | ---: | --- | --- |"]
    for (stage, key), rs in groups.items():
        by = {r["label"]: r for r in rs}
        cub = by["cublas"]["us"]
        part = by.get("gemm-part")
        none = by.get("none")
        part_text = f"{part['us']:.1f} ({100 * cub / part['us']:.0f}%)" if part else "-"
        none_text = f"{none['us']:.1f} ({100 * cub / none['us']:.0f}%)" if none else "-"
        prot = [f"{label[:40]} {r['us']:.1f}" + (f" ({100 * (r['us'] / none['us'] - 1):+.1f}%)" if none else "")
                for label, r in by.items() if label not in ("cublas", "gemm-part", "none")]
        bad = [f"{label[:20]}: {r['validated']}" for label, r in by.items()
               if r["validated"] not in ("", "ok", "not validated (none)")]
        short = key.replace(" bf16", "").replace(" descriptor", "")
        lines.append(f"| {stage} | {short} | {cub:.1f} | {part_text} | {none_text} | {'; '.join(prot) or '-'} | "
                     f"{'; '.join(bad) or ''} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase", type=int, default=1, choices=[1, 2])
    parser.add_argument("--out", default=os.environ.get("OUT", "out"))
    parser.add_argument("--budget", type=float, default=420.0, help="seconds for the whole run (default 420)")
    parser.add_argument("--workers", type=int, default=max(1, min(14, (os.cpu_count() or 2) - 2)))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda")
    run = Run(args, device)
    log(f"{torch.cuda.get_device_name(device)}, {run.sms} SMs, torch {torch.__version__}, budget {args.budget} s, "
        f"{args.workers} compile workers")
    ceilings = measure_ceilings(Timer(device, launches=10, repeats=10))
    log(f"ceilings: {ceilings}")
    try:
        (phase_one if args.phase == 1 else phase_two)(run)
    finally:
        result = dict(phase=args.phase, ceilings=asdict(ceilings), stages=run.stages, skipped=run.skipped,
                      rows=run.rows, torch=torch.__version__)
        (out / f"speed-phase{args.phase}.json").write_text(json.dumps(result, indent=1, default=str))
        print("\nskipped:", *(run.skipped or ["nothing"]), sep="\n  ")
        print(f"\nceilings: {ceilings.peak_tflops:.0f} TFLOP/s bf16, {ceilings.bandwidth_tbs:.2f} TB/s copy\n")
        print(table(run.rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
