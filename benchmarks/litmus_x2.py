"""Cross-GPU litmus rates (issue 31, run 2): litmus tests with threads on two GPUs, one process per GPU.

Two starts of the rank processes (:mod:`syncverify.litmus.gpu.ranks`), within ``--budget`` seconds:

1. **Stress**: the mutation score (MC Mutants) of each candidate stress setting on the cross-GPU
   mutants (:data:`~syncverify.litmus.gpu.mutants.CROSS_MUTATION_BASES`, each sys-scope access
   narrowed to gpu scope): the shipped tuned parameters of one H200, the defaults, and
   ``--random`` points of the search space, ``--mutant-seconds`` per mutant each. The best (score,
   then rate of target outcomes) runs the suite; it is written to ``$OUT/litmus-x2.json`` as the
   ``nvidia-h200-x2`` entry the coordinator may copy into ``syncverify/litmus/gpu/tuned.json``.
2. **Suite**: every cross-GPU shape (:func:`~syncverify.litmus.gpu.shapes.cross_gpu_tests`:
   MP, SB, LB, IRIW, CoRR, CoRR2, 2+2W, CoWW; weak, relaxed and release-acquire at gpu and sys
   scope), sys-scope release-acquire first, then the known-answer tests with threads on two GPUs
   that the shapes do not already hold, ``--seconds-each`` apiece. Tests that would start after
   the budget are listed as not run.

Each test's row is printed as it finishes (a kill still leaves them), ``$OUT/litmus-x2.json`` is
rewritten after every test, and the compact table is printed last: each test's outcome count, the
rate of its target outcome with a 95% Wilson interval, weak outcomes seen, and MODEL UNSOUND for
any outcome the model forbids (exit 1).

On ``nvidia-h200-x2`` (from the repository root)::

    export PYTHONPATH=$PWD PYTHONUNBUFFERED=1; python3 benchmarks/litmus_x2.py --out $OUT

Rehearsal on the CPU (gloo, the interpreter; tiny sizes, no weak outcomes can show)::

    python3 benchmarks/litmus_x2.py --rehearse --out /tmp/lx2

On ONE GPU (``--one-gpu``: both ranks are threads of one process on one device, each on its own
stream; the same PTX kernels, tables, offsets and merge; no NVLink, so no rate here is a
two-GPU rate, but any MODEL UNSOUND is a runner bug, and the kernels are known to launch and
finish on Hopper before the two-GPU call)::

    export PYTHONPATH=$PWD PYTHONUNBUFFERED=1; python3 benchmarks/litmus_x2.py --one-gpu --budget 100 --out $OUT
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from text_table import print_table  # noqa: E402  (beside this script)

#: Suite order: the issue's sys-scope release-acquire first, then gpu scope (too narrow), relaxed, weak.
FLAVOUR_ORDER = ("relacq-sys", "relacq-gpu", "relaxed-sys", "relaxed-gpu", "weak")


def suite_programs() -> list[tuple[str, object]]:
    """(group, program) of every test of the suite, in run order (see the module doc)."""
    from syncverify.litmus.gpu.shapes import cross_gpu_tests
    from syncverify.litmus.parser import parse_litmus, parse_litmus_file

    shapes = cross_gpu_tests()
    rank = {f: i for i, f in enumerate(FLAVOUR_ORDER)}
    shapes.sort(key=lambda t: rank[t.name.split("+")[-2]] if t.name.count("+") >= 2 else 0)
    programs = [("shape", parse_litmus(t.text)) for t in shapes]
    names = {p.name for _, p in programs}
    for path in sorted((ROOT / "tests" / "litmus" / "known").glob("*-diff-gpu.litmus")):
        program = parse_litmus_file(path)
        if program.name not in names:
            programs.append(("known", program))
    return programs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=float, default=80.0, help="seconds for both steps (default 80)")
    parser.add_argument("--seconds-each", type=float, default=0.4, help="seconds per suite test (default 0.4)")
    parser.add_argument("--mutant-seconds", type=float, default=0.25, help="seconds per mutant per candidate")
    parser.add_argument("--random", type=int, default=1, help="random candidates besides tuned and default (1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rehearse", action="store_true", help="the CPU stand-in: interpreter, 2 launches each")
    parser.add_argument("--one-gpu", action="store_true",
                        help="every rank a thread of this process on ONE device (ranks.run_on_one_device): checks "
                             "the PTX form of the run on a one-GPU machine; its rates say nothing about NVLink")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "litmus-x2-out")))
    args = parser.parse_args()
    if args.rehearse:  # before triton is imported: it reads the variable once
        os.environ["TRITON_INTERPRET"] = "1"

    from syncverify.errors import SyncVerifyError
    from syncverify.litmus.gpu.mutants import default_mutants, scores_across_gpus
    from syncverify.litmus.gpu.outcomes import model_outcomes
    from syncverify.litmus.gpu.ranks import INTERPRETER_GPUS, prepare, run_across_gpus, run_on_one_device
    from syncverify.litmus.gpu.suite import visible_gpus
    from syncverify.litmus.gpu.outcomes import is_target
    from syncverify.litmus.gpu.report import describe, judge, wilson
    from syncverify.litmus.gpu.stress import StressParams, load_tuned, sample

    began = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    runner = run_on_one_device if args.one_gpu else run_across_gpus
    gpus = INTERPRETER_GPUS if args.one_gpu or args.rehearse else visible_gpus(False)
    iterations = 2 if args.rehearse else 1 << 30
    document: dict = {"rehearse": args.rehearse, "one_gpu": args.one_gpu, "budget": args.budget, "stress": [],
                      "tests": []}

    def save() -> None:
        (args.out / "litmus-x2.json").write_text(json.dumps(document, indent=1))

    # ----- 1. the stress: mutation score of each candidate, one start of the ranks
    rng = random.Random(args.seed)
    candidates = [("tuned nvidia-h200", load_tuned("nvidia-h200")), ("default", StressParams())]
    candidates += [(f"random {i + 1}", sample(rng)) for i in range(args.random)]
    mutants = default_mutants(cross_gpu=True)
    print(f"[{time.monotonic() - began:5.0f} s] stress: {len(candidates)} candidates x {len(mutants)} mutants "
          f"({', '.join(m.change.split(': ')[1] + ' in ' + m.original for m in mutants[:1])}, ...)", flush=True)
    try:
        scores, why = scores_across_gpus(mutants, [p for _, p in candidates], seconds_each=args.mutant_seconds,
                                         seed=args.seed, gpus=gpus, runner=runner)
    except SyncVerifyError as error:  # e.g. one GPU visible without --one-gpu: one line, exit 2
        print(f"litmus_x2: error: {error}", file=sys.stderr)
        return 2
    best = None
    for (label, params), score in zip(candidates, scores):
        entry = {"candidate": label, "params": params.to_json(), "score": score.to_json() if score else None}
        document["stress"].append(entry)
        if score is not None:
            print(f"  {label}: {score.killed}/{score.total} mutants killed, {score.weak_instances:,} target "
                  f"instances of {score.instances:,}", flush=True)
            key = (score.score, score.weak_instances / score.instances if score.instances else 0.0)
            if best is None or key > best[0]:
                best = (key, label, params, score)
    if best is None:
        print(f"stress: no candidate finished ({why}); the suite runs the tuned parameters", flush=True)
        best = ((0.0, 0.0), candidates[0][0], candidates[0][1], None)
    _, label, params, score = best
    document["chosen"] = {"candidate": label, "tuned_entry": {"nvidia-h200-x2": {
        "params": params.to_json(), "score": score.to_json() if score else None}}}
    save()

    # ----- 2. the suite with the chosen stress, one start of the ranks
    programs = suite_programs()
    left = args.budget - (time.monotonic() - began)
    print(f"[{time.monotonic() - began:5.0f} s] suite: {len(programs)} tests with '{label}', "
          f"{args.seconds_each:g} s each, {left:.0f} s left", flush=True)
    jobs, models, rows = [], [], []
    for n, (_, program) in enumerate(programs):
        models.append(model_outcomes(program, timeout=30))
        jobs.append(prepare(program, params, iterations=iterations, seconds=args.seconds_each, seed=args.seed + n,
                            gpus=gpus))

    def on_result(index: int, run) -> None:
        group, program = programs[index]
        report = judge(program, models[index], dict(run.counts), form=run.form, timeouts=run.timeouts,
                       launches=run.launches, misaligned=run.misaligned, seconds=run.seconds,
                       kernel_seconds=run.kernel_seconds, params=run.params.to_json(), gpus=jobs[index].world)
        target = sum(r.count for r in report.rows if r.target)
        low, high = wilson(target, report.instances)
        status = "MODEL UNSOUND" if report.unsound else ("unknown" if report.unexplained else "ok")
        weak = ", ".join(describe(report.items, r.outcome) for r in report.weak_seen) or "-"
        row = (program.name, group, f"{report.instances:,}", f"{target:,}",
               f"{target / report.instances if report.instances else 0:.2e} [{low:.1e}, {high:.1e}]",
               "yes" if any(is_target(program, report.items, o) for o in report.allowed) else "no", weak[:40], status)
        rows.append(row)
        print("  " + " | ".join(row), flush=True)
        document["tests"].append(dict(report.to_json(), group=group))
        save()

    try:
        _, stopped = runner(jobs, budget=max(0.0, left - 5.0), on_result=on_result,
                            progress=lambda line: print(f"  {line}", flush=True))
    except SyncVerifyError as error:
        print(f"suite: error: {error}", flush=True)
        stopped = str(error)
    done = {t["name"] for t in document["tests"]}
    document["not_run"] = [p.name for _, p in programs if p.name not in done]
    document["stopped"] = stopped
    save()
    print()
    print_table(("test", "group", "instances", "target", "target rate [95% CI]", "model allows", "weak seen",
                 "verdict"), rows)
    if score is not None:
        print(f"stress '{label}': mutation score {score.killed}/{score.total} on the cross-GPU mutants")
    if document["not_run"]:
        print(f"not run ({stopped}): {len(document['not_run'])} test(s): {', '.join(document['not_run'])}")
    unsound = [r[0] for r in rows if r[-1] == "MODEL UNSOUND"]
    if unsound:
        print(f"MODEL UNSOUND in {len(unsound)} test(s): {', '.join(unsound)}")
    return 1 if unsound else 0


if __name__ == "__main__":
    sys.exit(main())
