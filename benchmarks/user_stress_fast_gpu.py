"""Issue 25 on one H200: what remained after runs 4 and 5 (docs/RESULTS.md).

Sections (``--sections``, in this order; each row is printed as it finishes, compact tables last):

* ``sizes``: the two fixed 1024^3, two-virtual-rank examples at several stress sizes (``BLOCK``,
  ``BLOCK_K``, ``PROGRAMS``, B's layout; ``SIZE`` stays 1024): the timing split
  (``syncverify.frontend.stress_timing``: the user's kernels as written, the rewrite's additions, the
  harness's own cost per iteration, device clock) and the validated rate of a stress run (CUDA-graph
  blocks, no delays, read back every block, device clock). The issue's target: 10,000 validated
  iterations per second;
* ``congest``: the three latent buggy examples under their guided schedules, which now hold the
  planner's L2-congesting kernel (``syncverify.kernels.congest``), ``--congest-iterations`` each,
  every iteration run (k/N bad), then the same delays without the congestion;
* ``reach``: at the sizes ``--reach-defines``: every buggy example under its guided schedule
  (<= 100 iterations, stop at the first failure) and every fixed example's positive control under
  random delays (must fail): do the bugs stay reachable at those sizes;
* ``actions``: rows ``--action-rows`` (``HARNESS<-PLAN:ACTIONS:SIZES:N``, ``;``-separated): harness
  ``HARNESS`` under the guided entries of ``PLAN``'s plan (a buggy example's; ``HARNESS`` itself when
  ``<-PLAN`` is left out) whose kind is one of ``ACTIONS`` (``+``-joined: ``start``, ``touch``,
  ``congest``, ``aim``, ``place``; ``touch1``: the touch once before the wait, not kept hot; ``place``
  is added where the plan has none; ``place@BUFFER``: only ``BUFFER`` host-mapped, the rest of the heap
  on the GPU; ``start@NS``: the plan's late starts, every program ``NS`` late; ``before@LINE@NS``, ``after@LINE@NS``:
  a delay of ``NS`` at that synchronization site of the plan's late-start kernel (its rank, every
  program and warp); ``graphs``: a buggy
  harness in CUDA-graph blocks too, its launches back to back; ``all``: a buggy harness runs all ``N``
  iterations, k/N bad), ``N`` iterations at
  ``SIZES``: a buggy harness stops at its first failure (it should fail), a fixed one runs them all in
  CUDA-graph blocks (it must stay clean under the new actions);
* ``long``: ``all_scatter::reset_between_barriers`` (two calls) for ``--long-iterations`` (10^5)
  iterations under random delays (50 % of keys, up to 50 us), bounded by ``--long-seconds``.

Every section keeps to ``--budget`` (rows after it are skipped and say so). Raw results:
``$OUT/user_stress_fast.json``.

Run from the repository root on the GPU machine::

    export PYTHONPATH=$PWD PYTHONUNBUFFERED=1; python3 benchmarks/user_stress_fast_gpu.py --out $OUT

CPU: ``--interpret`` runs every section through Triton's interpreter at the model's sizes, a few
iterations (checks the script; shows nothing about the GPU).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.user_stress_gpu import PLANS, entries, harnesses, short  # noqa: E402
from syncverify.frontend.stress_timing import split_timing  # noqa: E402
from syncverify.frontend.schedule import TOUCH_ONCE_NS, GuidedEntry  # noqa: E402
from syncverify.frontend.user_stress import StressOptions, run_stress  # noqa: E402

FIXED = {"all_scatter": "examples/all_scatter/harness.py::fix_with_barriers",
         "one_shot": "examples/one_shot_all_reduce/harness.py::fix_with_barrier"}
#: The sizes swept (SIZE=1024 always): BLOCK/BLOCK_K/PROGRAMS, a trailing "k": B laid out K-major
#: (``B_K_MAJOR=1``, the harness's input layout; the kernel is the same). The first is runs 4 and 5's.
SIZES = {"all_scatter": ("128/32/16", "128/32/16k", "128/32/32k", "64/64/64k", "128/64/32k", "64/32/128k"),
         "one_shot": ("128/32/16", "128/32/16k", "128/64/32k", "128/64/64k")}
LATENT = ("examples/one_shot_all_reduce/harness.py::original",
          "examples/one_shot_all_reduce/harness.py::barrier_without_fence",
          "examples/all_scatter/harness.py::original")
LONG = "examples/all_scatter/harness.py::reset_between_barriers"


def defines_of(text: str) -> dict:
    """``"128/32/16"`` (``"128/32/16k"``: B K-major) as the harness's defines at 1024^3."""
    block, block_k, programs = (int(v) for v in text.rstrip("k").split("/"))
    return {"SIZE": 1024, "BLOCK": block, "BLOCK_K": block_k, "PROGRAMS": programs,
            "B_K_MAJOR": int(text.endswith("k"))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default="sizes,congest,reach,long", help="comma-separated, run in the "
                        "order given: sizes, congest, reach, long")
    parser.add_argument("--budget", type=float, default=128.0, help="seconds; rows after it are skipped")
    parser.add_argument("--rate-iterations", type=int, default=4096)
    parser.add_argument("--sizes-budget", type=float, default=75.0, help="seconds: no sizes row starts after it")
    parser.add_argument("--only-sizes", default="", help="comma-separated example:B/BK/P rows of the sweep "
                        "(default: every row of SIZES)")
    parser.add_argument("--reach-defines", default="auto", help="B/BK/P of the reach and congest sections, or "
                        "EXAMPLE=B/BK/P,... per example, or auto: each example's fastest sizes in the sizes section "
                        "(the shipped 128/32/16 where it did not run)")
    parser.add_argument("--long-defines", default="128/32/16", help="B/BK/P of the long row, or auto (as "
                        "--reach-defines)")
    parser.add_argument("--long-iterations", type=int, default=100_000)
    parser.add_argument("--long-seconds", type=float, default=115.0, help="the long row's bound (host clock)")
    parser.add_argument("--congest-iterations", type=int, default=100)
    parser.add_argument("--congest-graphs", action="store_true", help="the congest rows in CUDA-graph blocks (more "
                        "iterations in the same time; default: eager, as a guided run of the CLI)")
    parser.add_argument("--reach-only", default="", help="comma-separated: the reach rows of harnesses whose "
                        "folder::name contains one of these (default: all)")
    parser.add_argument("--congest-only", default="", help="comma-separated: the congest rows of latent harnesses "
                        "whose folder::name contains one of these, in this order (default: all three)")
    parser.add_argument("--congest-defines", default="128/32/16", help="B/BK/P of the congest section (the shipped "
                        "stress sizes: 64 CTAs beside the congesting kernel's 64 on 132 SMs), or auto")
    parser.add_argument("--action-rows", default="", help="the actions section's rows: HARNESS[<-PLAN]:ACTIONS:"
                        "SIZES:N separated by ';' (HARNESS, PLAN: folder::name)")
    parser.add_argument("--max-ns", type=int, default=50_000)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    parser.add_argument("--interpret", action="store_true", help="CPU: the interpreter, the model's sizes, a few "
                        "iterations (checks the script)")
    args = parser.parse_args(argv)
    import torch

    if not args.interpret and not torch.cuda.is_available():
        print("needs a CUDA GPU (none visible; --interpret for the CPU path)")
        return 2
    sections = [s for s in args.sections.split(",") if s]
    unknown = set(sections) - {"sizes", "reach", "congest", "long", "actions"}
    if unknown:
        print(f"unknown section(s): {', '.join(sorted(unknown))}")
        return 2
    plans = json.loads(PLANS.read_text())
    world_of = {target: (world, calls, safe) for target, world, calls, safe in harnesses()}
    started = time.monotonic()
    raw = {"device": "interpreter" if args.interpret else torch.cuda.get_device_name(), "torch": torch.__version__,
           "triton": __import__("triton").__version__, "argv": sys.argv[1:], "rows": []}
    tables: dict[str, list] = {s: [] for s in sections}
    fastest: dict[str, tuple[int, str]] = {}  # example -> (validated it/s, sizes) of the sizes section

    def wanted(target: str) -> bool:
        names = [n for n in args.reach_only.split(",") if n]
        return not names or any(n in short(target) for n in names)

    def sizes_for(target: str, text: str) -> str:
        """The sizes a reach/congest row of ``target`` runs at (``--reach-defines``)."""
        example = "all_scatter" if "all_scatter" in target else "one_shot"
        if text == "auto":
            return fastest.get(example, (0, SIZES[example][0]))[1]
        if "=" in text:
            return dict(item.split("=") for item in text.split(","))[example]
        return text

    def options(target: str, sizes: str, **extra) -> StressOptions:
        world, calls, _safe = world_of[target]
        defines = {} if args.interpret else defines_of(sizes)
        return StressOptions(target, world_size=world, calls=calls, defines=defines, seed=1, interpret=args.interpret,
                             max_ns=args.max_ns, **extra)

    def row(section: str, label: str, run) -> dict | None:
        if time.monotonic() - started > args.budget:
            print(f"{section} | {label} | skipped (past --budget {args.budget:g} s)", flush=True)
            raw["rows"].append({"section": section, "label": label, "skipped": "budget"})
            return None
        t = time.monotonic()
        try:
            out = run()
        except Exception as error:  # noqa: BLE001 -- one row's error is recorded, the others still run
            out = {"error": f"{type(error).__name__}: {error}"[:400], "trace": traceback.format_exc()[-1200:]}
        out = {"section": section, "label": label, "s": round(time.monotonic() - t, 1), **out}
        raw["rows"].append(out)
        shown = json.dumps({k: v for k, v in out.items() if k != "trace"}, default=str)
        print(f"{section} | {label} | {shown[:700]}", flush=True)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "user_stress_fast.json").write_text(json.dumps(raw, indent=1, default=str))
        return out

    def run_summary(result) -> dict:
        f = result.first_failure
        return {"iterations": result.iterations, "bad": result.bad_iterations, "first": result.first_failure_iteration,
                "kind": f.kind if f else None, "rate": round(result.rate), "graphs": result.graphs,
                "steady_iterations": result.steady_iterations,
                "steady_device_s": round(result.steady_device_seconds, 4),
                "tile_classes": result.tile_classes, "stopped": result.stopped, "notes": result.notes[:3],
                # which iterations were bad ("x"), in order: clustering by block or run shows what varies
                "pattern": "".join("x" if i in {f.iteration for f in result.failures} else "."
                                   for i in range(result.iterations)) if result.failures else ""}

    def section_sizes() -> None:
        only = [s for s in args.only_sizes.split(",") if s]
        # the two examples alternate, so that a budget cut leaves rows of both
        order = [(example, sizes) for i in range(max(map(len, SIZES.values())))
                 for example, sizes in ((e, SIZES[e][i]) for e in FIXED if i < len(SIZES[e]))]
        for example, sizes in order:
            target = FIXED[example]
            if only and f"{example}:{sizes}" not in only:
                continue
            if args.interpret and sizes != SIZES[example][0]:
                continue
            if time.monotonic() - started > args.sizes_budget:
                print(f"sizes | {example} {sizes} | skipped (past --sizes-budget {args.sizes_budget:g} s)", flush=True)
                continue

            def measure(target=target, sizes=sizes):
                # the stress run first: its waits are bounded; the split then runs the kernels as
                # written (unbounded waits) only where that run saw no capped wait
                result = run_stress(options(target, sizes, delays="none",
                                            iterations=2 if args.interpret else args.rate_iterations))
                if result.bad_iterations:
                    return {"run": run_summary(result), "split": None}
                split = split_timing(options(target, sizes), iterations=1 if args.interpret else 128)
                return {"split": split, "run": run_summary(result)}

            out = row("sizes", f"{example} {sizes}", measure)
            if out and "error" not in out and out["split"] is None:
                tables["sizes"].append((example, sizes, "not split: the stress run had bad iterations", *["-"] * 4,
                                        f"{out['run']['rate']:,}", str(out["run"]["bad"]), "-"))
            elif out and "error" not in out:
                s, r = out["split"], out["run"]
                if r["bad"] == 0 and r["rate"] > fastest.get(example, (0, ""))[0]:
                    fastest[example] = (r["rate"], sizes)
                tables["sizes"].append((example, sizes, f"{s['us']['iteration']:.1f}", f"{s['kernels_us']:.1f}",
                                        f"{s['rewritten_us']:.1f}", f"{s['harness_us']:.1f}",
                                        f"{s['harness_rate'] or 0:,}", f"{r['rate']:,}", str(r["bad"]),
                                        "yes" if r["rate"] >= 10_000 else "no"))
            elif out:
                tables["sizes"].append((example, sizes, "ERROR " + out["error"][:80], *["-"] * 7))
    def section_congest() -> None:
        only = [n for n in args.congest_only.split(",") if n]
        for target in ([t for n in only for t in LATENT if n in short(t)] if only else LATENT):
            plan = plans.get(target, {})
            guided = entries(plan)
            if not guided:
                tables["congest"].append((short(target), "-", "-", "no schedule in the plan", "-", "-"))
                continue
            at = sizes_for(target, args.congest_defines)
            n = 2 if args.interpret else args.congest_iterations
            plain = tuple(e for e in guided if e.where != "congest")
            for label, schedule in (("with congestion", guided), ("without (the same delays)", plain)):
                if not schedule:
                    continue
                out = row("congest", f"{short(target)} {label} {at}", lambda t=target, g=schedule, at=at: run_summary(
                    run_stress(options(t, at, delays="guided", guided=g, iterations=n, graphs=args.congest_graphs,
                                       cap=1 << 16))))
                if out:
                    tables["congest"].append((short(target), at, label, ", ".join(sorted({e.where for e in schedule})),
                                              _cell(out), f"{out.get('bad', '-')}/{out.get('iterations', '-')}"))
    def section_reach() -> None:
        for target, world, calls, safe in [h for h in harnesses() if wanted(h[0])]:
            plan = plans.get(target, {})
            at = sizes_for(target, args.reach_defines)
            if not safe and entries(plan) and target not in LATENT:
                out = row("reach", f"{short(target)} guided {at}", lambda t=target, p=plan, at=at: run_summary(
                    run_stress(options(t, at, delays="guided", guided=entries(p), iterations=2 if
                                       args.interpret else 100, graphs=False, stop_on_failure=True, cap=1 << 16))))
            elif safe and plan.get("control"):
                out = row("reach", f"{short(target)} control {at}", lambda t=target, p=plan, at=at: run_summary(
                    run_stress(options(t, at, delays="random", mutant=p["control"],
                                       iterations=2 if args.interpret else 20_000, stop_on_failure=True,
                                       cap=1 << 16))))
            else:
                continue
            if out:
                want = "fails" if not safe or plan.get("control") else "clean"
                tables["reach"].append((short(target), at, "guided" if not safe else "control", _cell(out), want))
    def section_long() -> None:
        left = max(args.budget - (time.monotonic() - started), 5.0)
        seconds = min(args.long_seconds, left)
        at = sizes_for(LONG, args.long_defines)
        out = row("long", f"{short(LONG)} random {at}", lambda: run_summary(run_stress(options(
            LONG, at, delays="random", iterations=2 if args.interpret else args.long_iterations,
            bound_seconds=seconds))))
        if out:
            tables["long"].append((short(LONG), at, _cell(out), f"{out.get('rate', 0):,}",
                                   f"{seconds:.0f}"))
    def section_actions() -> None:
        for spec in [r.strip() for r in args.action_rows.split(";") if r.strip()]:
            try:
                who, actions, at, n = spec.rsplit(":", 3)
                name, _, plan_name = who.partition("<-")
                target, planned = long_name(name), long_name(plan_name or name)
                kinds = set(actions.split("+"))
                once = "touch1" in kinds  # the plan's touch made once before the wait only (a draw of 1)
                kinds |= {"touch"} if once else set()
                # place@BUFFER: only that buffer host-mapped, the rest of the heap on the GPU
                placed = [k.partition("@")[2] for k in kinds if k.startswith("place@")]
                kinds |= {"place"} if placed else set()
                # start@NS: the planned late starts, every program late by NS (not the plan's draw)
                starts = [int(k.partition("@")[2]) for k in kinds if k.startswith("start@")]
                kinds |= {"start"} if starts else set()
                # before@LINE@NS / after@LINE@NS: a delay at that sync site of the plan's late-start kernel
                # (its rank, every program, every warp), NS long: measured, not planned
                sited = [k.split("@") for k in kinds if k.split("@")[0] in ("before", "after")]
                graphs = "graphs" in kinds  # a buggy harness in CUDA-graph blocks too (launches back to back)
                every = "all" in kinds  # a buggy harness runs all N iterations (k/N bad), not to its first failure
                world, calls, safe = world_of[target]
                chosen = tuple(dataclasses.replace(e, ns_lo=TOUCH_ONCE_NS[0], ns_hi=TOUCH_ONCE_NS[1])
                               if e.where == "touch" and once else
                               dataclasses.replace(e, ns_lo=starts[0], ns_hi=starts[0]) if e.where == "start" and starts
                               else e for e in entries(plans[planned])
                               if e.where in kinds and not (placed and e.where == "place"))
                first = next(e for e in entries(plans[planned]) if e.where == "start") if sited else None
                chosen += tuple(GuidedEntry(first.kernel, int(line), where, first.rank, -1, 0xF, int(ns), int(ns),
                                            f"the row's {where}@{line}") for where, line, ns in sited)
                if "place" in kinds and not any(e.where == "place" for e in chosen):
                    chosen += tuple(GuidedEntry("", 0, "place", 0, -1, 0, 1, 1, "the probe's placement", buffer=b)
                                    for b in placed or [""])
                defines_of(at)
                iterations = 2 if args.interpret else int(n)
            except (ValueError, KeyError) as error:
                print(f"bad --action-rows entry {spec!r}: {error}")
                raise SystemExit(2) from None
            out = row("actions", f"{short(target)} under {short(planned)}'s {actions} {at}",
                      lambda t=target, g=chosen, at=at, it=iterations, safe=safe, gr=graphs, ev=every: run_summary(
                          run_stress(options(t, at, delays="guided", guided=g, iterations=it, graphs=safe or gr,
                                             stop_on_failure=not (safe or ev), cap=1 << 16,
                                             # a Failure per expectation and bad iteration: room for all
                                             max_failures=it * 64 if ev else 64))))
            if out:
                tables["actions"].append((short(target), short(planned), actions, at, _cell(out),
                                          "clean" if safe else "fails"))

    for section in sections:  # in the order given
        {"sizes": section_sizes, "congest": section_congest, "reach": section_reach, "long": section_long,
         "actions": section_actions}[section]()

    print(f"\n{raw['device']}, torch {raw['torch']}, triton {raw['triton']}, W = 2 virtual ranks, SIZE=1024, "
          f"{time.monotonic() - started:.0f} s; raw: {args.out / 'user_stress_fast.json'}")
    heads = {"sizes": ("example", "B/BK/P", "iteration us", "kernels as written us", "kernels rewritten us",
                       "harness us", "harness-only it/s", "validated it/s (stress run)", "bad", ">= 10,000"),
             "reach": ("harness", "B/BK/P", "run", "result", "wanted"),
             "congest": ("harness", "B/BK/P", "run", "guided actions", "result", "bad/iterations"),
             "long": ("harness", "B/BK/P", "result", "it/s", "bound s"),
             "actions": ("harness", "plan of", "actions", "B/BK/P", "result", "wanted")}
    for section in sections:
        print(f"\n{section}:")
        print("| " + " | ".join(heads[section]) + " |")
        print("|" + " --- |" * len(heads[section]))
        for r in tables[section]:
            print("| " + " | ".join(str(c) for c in r) + " |")
    return 0


def long_name(name: str) -> str:
    """``folder::name`` as a harness target (``examples/folder/harness.py::name``)."""
    folder, _, harness = name.partition("::")
    return f"examples/{folder}/harness.py::{harness}"


def _cell(out: dict) -> str:
    if "error" in out:
        return "ERROR " + out["error"][:80]
    if out.get("first") is not None:
        bad = f", {out['bad']:,}/{out['iterations']:,} bad" if out.get("iterations", 0) > out["first"] + 1 else ""
        return f"fails at it. {out['first']} ({out['kind']}; {out['tile_classes']}{bad})"
    return f"clean {out['iterations']:,}" + (f" STOPPED {out['stopped'][:40]}" if out.get("stopped") else "")


if __name__ == "__main__":
    sys.exit(main())
