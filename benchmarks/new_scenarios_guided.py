"""The guided table of the two newer scenarios, and the zoo, on one GPU; compact tables last.

Three parts, in one process after a parallel compile:

1. **guided**: every built-in protocol in all-gather-gemm and gemm-reduce-scatter at each
   ``--worlds`` (virtual ranks): the model's verdict (``syncverify.verdicts.check``); for a pair it calls
   unsafe, each guided schedule (``syncverify.stress.guided``) until its first failure or
   ``--seconds``, and random delays under the same budget; for a safe pair, the schedules of its
   positive control (``syncverify.stress.controls``) on the pair and on the control, which must
   fail (else the delays were ineffective);
2. **zoo**: every zoo protocol in its own scenario at W = 2, guided the same way (the model
   checked with the zoo file's epochs and launch order);
3. **zoo-new**: zoo protocols in the two newer scenarios at W = 2, random delays, the model
   checked for one launch (done-flag's back-signal there runs the C tiles of every column tile
   but the last through all-gather-gemm's ``parked`` rows).

Before the timed runs, ``--workers`` processes run one iteration of every kernel the runs will
use (filling Triton's cache, so no timed run compiles). Every result is appended to
``OUT/records.jsonl``; no run starts after ``--budget`` seconds (the table says which).
Usage: build the guided plans on the CPU first (the model's search for a counterexample a delay
can force takes seconds per pair, which need not be spent on the device), then on the device,
from the repository root::

    PYTHONPATH=$PWD python3 benchmarks/new_scenarios_guided.py --worlds 2,4 --save-plans plans.json
    PYTHONPATH=$PWD python3 benchmarks/new_scenarios_guided.py --worlds 2,4 --plans plans.json --out $OUT

``--dry-run`` runs everything once in the CPU interpreter at tiny sizes (checks the script).
"""

from __future__ import annotations

import argparse
import json
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from text_table import bad_tile_counts, print_table  # beside this script

SCENARIOS = ("all-gather-gemm", "gemm-reduce-scatter")
TINY = dict(interpret=True, m=32, n=32, k=32, block_m=16, block_n=16, block_k=16, max_polls=64)


def load(name):
    from syncverify.protocols import load_protocol

    return load_protocol(name)


def zoo_settings(protocol) -> dict:
    """The model options of a zoo file (epochs, launch order); none for a built-in."""
    z = protocol.zoo
    return {} if z is None else {"epochs": z.epochs, "launches": z.launches}


def run_options(args) -> dict:
    """Campaign options every run shares: virtual ranks on the GPU, or tiny interpreted sizes."""
    return dict(TINY, seed=args.seed) if args.dry_run else dict(virtual_ranks=True, seed=args.seed)


def common_options(args, kernel: str, world_size: int) -> dict:
    return dict(run_options(args), kernel=kernel, world_size=world_size)


def warm(job) -> str:
    """Compile one (protocol, kernel, W) by running one iteration with random delays (the
    kernels guided and random runs share). Runs in a worker process."""
    protocol, kernel, world_size, options = job
    from syncverify.stress.campaign import run_campaign

    try:
        run_campaign(protocol=protocol, kernel=kernel, world_size=world_size, delays="random", iterations=1,
                     **options)
        return "ok"
    except Exception as error:  # the timed run reports it again, in its row
        return f"{type(error).__name__}: {str(error).splitlines()[0][:80]}"


def verdict_text(model) -> str:
    if model.safe is None:
        return "undecided"
    return "safe" if model.safe else ", ".join(sorted(model.violations))


def ttf(row: dict, prefix: str) -> str:
    """``it N, S s`` of a run's first failure that shows the kind, or ``none in N it``."""
    if f"{prefix}_reproduced" not in row:
        return "-"
    first = row[f"{prefix}_first_failure_iteration"]
    if first is None:
        return f"none in {row[f'{prefix}_iterations']} it"
    return f"it {first}, {row[f'{prefix}_ttf_s']} s"


def plan_for(args, protocol, kernel: str, world_size: int, **model_options):
    """The guided plan of a pair: from ``--plans`` when it holds it (built on the CPU before the
    call: the search for a forceable counterexample takes seconds per pair), else built now."""
    from syncverify.stress.guided import GuidedPlan, guided_plan

    key = f"{kernel}|{protocol.name}|{world_size}"
    if key not in args.plans:
        args.plans[key] = guided_plan(protocol, kernel=kernel, world_size=world_size, **model_options).to_dict()
    return GuidedPlan.from_dict(args.plans[key])


def guided_pair(args, protocol, kernel: str, world_size: int, **model_options) -> dict:
    """One pair: the model, then its schedules (or its control's) on the GPU."""
    from syncverify.verdicts.check import check_protocol
    from syncverify.stress.controls import positive_control
    from syncverify.stress.guided import run_guided

    common = common_options(args, kernel, world_size)
    seconds = 0.01 if args.dry_run else args.seconds
    model = check_protocol(protocol, scenario=kernel, world_size=world_size, timeout=120, **model_options)
    record = {"protocol": protocol.name, "kernel": kernel, "world_size": world_size, "model": verdict_text(model),
              "model_options": model_options}
    if model.safe:
        control = positive_control(protocol, kernel=kernel, world_size=world_size, **model_options)
        if control is None:
            record["control"] = None
            return record
        plan = plan_for(args, control.protocol, kernel, world_size, **model_options)
        mine = run_guided(protocol, plan=plan, seconds=seconds, compare_random=False, **common)
        sibling = run_guided(control.protocol, plan=plan, seconds=seconds, compare_random=False, **common)
        record.update(control=control.protocol.name, change=control.change, plan=plan.to_dict(),
                      rows=mine["rows"], control_rows=sibling["rows"])
    else:
        plan = plan_for(args, protocol, kernel, world_size, **model_options)
        report = run_guided(protocol, plan=plan, seconds=seconds, compare_random=True, **common)
        record.update(plan=plan.to_dict(), rows=report["rows"])
    return record


def guided_cells(record: dict) -> tuple[str, str, str, str]:
    """(schedule, guided, random, control) cells of a guided record."""
    if "error" in record:
        return ("error: " + record["error"], "-", "-", "-")
    if "rows" not in record:
        return ("none", "-", "-", "no control found" if record.get("control", 1) is None else "-")
    schedules = record["plan"]["schedules"]

    def schedule(s):
        if not s["entries"]:
            return "none (" + ("hang" if s["kind"] == "hang" else "unforceable") + ")"
        e = s["entries"][0]
        return f"{e['site']} r{e['rank']} {e['ns_lo']}-{e['ns_hi']} ns w{e['warps']:#x}" + (
            " + store-signal" if len(s["entries"]) > 1 else "")

    first = schedules[0] if schedules else None
    plan = schedule(first) if first else "-"
    rows = record["rows"]
    if "control_rows" in record:
        guided = "; ".join(f"{r['kind']}: {ttf(r, 'guided')}" for r in rows[:1])
        control = "; ".join(f"{r['kind']}: {ttf(r, 'guided')}" for r in record["control_rows"][:1])
        effective = any(r["guided_reproduced"] for r in record["control_rows"])
        return (f"control's: {plan}", guided, "-",
                f"{record['control']}: {control} ({'delays effective' if effective else 'DELAYS INEFFECTIVE'})")
    guided = "; ".join(f"{r['kind']}: {ttf(r, 'guided')}" for r in rows)
    random = ttf(rows[0], "random") if rows else "-"
    return (plan, guided, random, "-")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", default="2,4")
    parser.add_argument("--seconds", type=float, default=1.5, help="per guided, random or control run")
    parser.add_argument("--zoo-seconds", type=float, default=1.0, help="per zoo-new run")
    parser.add_argument("--parts", default="guided,zoo,zoo-new")
    parser.add_argument("--protocols", default="", help="guided: only these built-ins (default: all)")
    parser.add_argument("--zoo-new", default="", help="zoo-new: only these zoo protocols (default: all)")
    parser.add_argument("--workers", type=int, default=12)
    parser.add_argument("--budget", type=float, default=240.0, help="seconds after which no run starts")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--out", type=Path, default=Path("out"))
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--plans", type=Path, default=None, help="guided plans built beforehand (--save-plans)")
    parser.add_argument("--save-plans", type=Path, default=None,
                        help="build every pair's guided plan (CPU only), write them here and stop")
    args = parser.parse_args()
    args.plans = json.loads(args.plans.read_text()) if args.plans else {}
    from syncverify.protocols import builtin_names
    from syncverify.protocols.registry import zoo_protocols
    from syncverify.stress.controls import positive_control

    start = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    records = args.out / "records.jsonl"
    parts = args.parts.split(",")
    worlds = [int(w) for w in args.worlds.split(",") if w]
    names = [n for n in builtin_names() if not args.protocols or n in args.protocols.split(",")]
    zoo = list(zoo_protocols())

    # ----- what will run, and one iteration of each kernel in parallel (compilation) -------------
    pairs = [(load(n), s, W, {}) for W in worlds for s in SCENARIOS for n in names] if "guided" in parts else []
    pairs += [(p, p.zoo.scenario, 2, zoo_settings(p)) for p in zoo] if "zoo" in parts else []
    new = [(p, s, 2) for s in SCENARIOS for p in zoo
           if not args.zoo_new or p.name in args.zoo_new.split(",")] if "zoo-new" in parts else []
    controls = {(p.name, s, W): positive_control(p, kernel=s, world_size=W, **options) for p, s, W, options in pairs}
    kernels = {(p.name, s, W): p for p, s, W, _o in pairs} | {(p.name, s, W): p for p, s, W in new}
    kernels |= {(c.protocol.name, s, W): c.protocol for (_n, s, W), c in controls.items() if c is not None}
    jobs = sorted(kernels)
    work = [(kernels[job], job[1], job[2], run_options(args)) for job in jobs]
    print(f"model checks for the controls: {time.monotonic() - start:.1f} s; {len(jobs)} kernels to compile",
          flush=True)
    if args.save_plans is not None:
        for p, s, W, options in pairs:
            control = controls[(p.name, s, W)]
            plan_for(args, control.protocol if control is not None else p, s, W, **options)
        args.save_plans.write_text(json.dumps(args.plans, indent=1, sort_keys=True))
        print(f"{len(args.plans)} plans written to {args.save_plans}: {time.monotonic() - start:.1f} s")
        return 0
    with ProcessPoolExecutor(args.workers, mp_context=get_context("spawn")) as pool:
        warmed = dict(zip(jobs, pool.map(warm, work, chunksize=1)))
    broken = {k: v for k, v in warmed.items() if v != "ok"}
    print(f"compiled {len(jobs)} kernels ({args.workers} processes): {time.monotonic() - start:.1f} s; "
          f"{len(broken)} failed: {broken}", flush=True)

    # ----- the timed runs -------------------------------------------------------------------
    guided_rows, zoo_rows = [], []

    def log(record: dict) -> None:
        with records.open("a") as handle:
            handle.write(json.dumps(record, default=str) + "\n")

    from syncverify.stress.campaign import run_campaign

    # zoo-new first: few runs, and the only GPU check of all-gather-gemm's parked C tiles
    for protocol, kernel, W in new:
        if time.monotonic() - start > args.budget:
            zoo_rows.append((kernel, protocol.name, "-", "not run (budget)", "-", "-"))
            continue
        try:
            from syncverify.verdicts.check import check_protocol

            # one launch: the zoo files' settings (two or three launches, per-rank streams) are
            # for all-reduce, and all-gather-gemm's done flag over two launches does not finish in
            # two minutes on the CPU; virtual ranks order launches by the host anyway
            model = verdict_text(check_protocol(protocol, scenario=kernel, world_size=W, timeout=30))
            result = run_campaign(protocol=protocol, delays="random", seconds=0.01 if args.dry_run else args.zoo_seconds,
                                  **common_options(args, kernel, W))
            log({"part": "zoo-new", "protocol": protocol.name, "kernel": kernel, "world_size": W, "model": model,
                 "result": result.to_dict()})
            zoo_rows.append((kernel, protocol.name, model, "clean" if result.clean else "FAILED",
                             str(result.iterations), bad_tile_counts(result.counts)))
        except Exception as error:
            zoo_rows.append((kernel, protocol.name, "-", f"error: {type(error).__name__}: {error}"[:90], "-", "-"))

    for protocol, kernel, W, options in pairs:
        where = ("zoo" if options else "guided", protocol.name, kernel, W)
        if time.monotonic() - start > args.budget:
            record = {"protocol": protocol.name, "kernel": kernel, "world_size": W, "model": "-",
                      "error": "not run (budget)"}
        else:
            try:
                record = guided_pair(args, protocol, kernel, W, **options)
            except Exception as error:  # one broken pair must not hide the rest
                record = {"protocol": protocol.name, "kernel": kernel, "world_size": W, "model": "-",
                          "error": f"{type(error).__name__}: {str(error).splitlines()[0][:70]}",
                          "traceback": traceback.format_exc()}
        record["part"] = where[0]
        log(record)
        cells = guided_cells(record)
        print(f"{' '.join(map(str, where))}: {record['model']} | {' | '.join(cells)}", flush=True)
        guided_rows.append((where[0], str(W), kernel, protocol.name, record["model"], *cells))

    print(f"total {time.monotonic() - start:.1f} s; virtual ranks, seed {args.seed}, {args.seconds:g} s per run "
          f"(zoo-new {args.zoo_seconds:g} s, random delays)")
    if guided_rows:
        print_table(("part", "W", "scenario", "protocol", "model", "schedule (first kind)", "guided: first failure",
                     "random: first failure", "positive control"), guided_rows)
    if zoo_rows:
        print_table(("scenario", "zoo protocol", "model (1 launch)", "GPU", "iterations", "bad tiles"), zoo_rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
