"""Litmus tests on one H200 (issue 29): a short tuning search, then every single-GPU test; one table.

Runs, in one command, within ``--budget`` seconds:

1. **Warm-up** (parallel, ``--workers`` processes): each test's model outcomes are explored and
   its kernel compiled and launched once (Triton's disk cache is then warm for the timed runs).
2. **Tuning**: :func:`syncverify.litmus.gpu.tune.search` over the mutants of
   :data:`~syncverify.litmus.gpu.mutants.MUTATION_BASES`, starting from the shipped tuned and the
   default parameters, for ``--tune-seconds``. The best parameters and their mutation score go to
   ``$OUT/tuned.json`` (the coordinator copies the entry into ``syncverify/litmus/gpu/tuned.json``).
3. **Suite**: the shipped examples, the classic shapes (:mod:`syncverify.litmus.gpu.shapes`) and
   the known-answer suite (``tests/litmus/known``), each for ``--seconds-each`` with the tuned
   parameters. A test that fails is recorded with its error and the rest go on; tests that would
   start after the budget are listed as not run.

Raw results: ``$OUT/session.json`` (rewritten after every test, so a cut-off run keeps what it
did), ``$OUT/table.txt`` (every row), ``$OUT/rates.png``. The table printed last shows the
examples and classic shapes, and any known-suite test with a weak outcome or MODEL UNSOUND.

On the H200 (from the repository root)::

    timeout 540 python3 benchmarks/litmus_gpu_session.py --out $OUT

Rehearsal on the CPU (tiny sizes, the interpreter: no weak outcomes can show)::

    TRITON_INTERPRET=1 python3 benchmarks/litmus_gpu_session.py --budget 120 --tune-seconds 5 --workers 0 --out /tmp/s
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, wait
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from text_table import print_table  # noqa: E402  (beside this script)


def all_tests() -> list[tuple[str, str, str]]:
    """(group, name, litmus text) of every test, in run order."""
    from syncverify.litmus.gpu.shapes import classic_tests

    tests = [("example", p.stem, p.read_text()) for p in sorted((ROOT / "syncverify/litmus/examples").glob("*.litmus"))]
    tests += [("classic", t.name, t.text) for t in classic_tests()]
    known = ROOT / "tests" / "litmus" / "known"
    tests += [("known", p.stem, p.read_text()) for p in sorted(known.glob("*.litmus"))]
    return tests


def warm(test) -> dict:
    """Worker: the model's outcomes and one launch (fills Triton's cache) of a test (its litmus
    text, or a mutant's program). Never raises."""
    try:
        from syncverify.litmus.gpu.codegen import gpus_needed
        from syncverify.litmus.gpu.outcomes import model_outcomes
        from syncverify.litmus.gpu.stress import StressParams
        from syncverify.litmus.gpu.suite import check_on_device
        from syncverify.litmus.parser import parse_litmus

        program = parse_litmus(test) if isinstance(test, str) else test
        if gpus_needed(program):
            return {"model": None}
        model = model_outcomes(program, timeout=60)
        check_on_device(program, StressParams(), iterations=1, seconds=0.01, model=model)
        return {"model": model}
    except Exception as error:  # recorded, the timed run reports it again
        return {"model": None, "error": f"{type(error).__name__}: {error}"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=float, default=420.0, help="seconds for the whole session")
    parser.add_argument("--tune-seconds", type=float, default=75.0, help="seconds of tuning search")
    parser.add_argument("--seconds-each", type=float, default=1.0, help="seconds per test in the suite")
    parser.add_argument("--mutant-seconds", type=float, default=0.25, help="seconds per mutant per candidate")
    parser.add_argument("--workers", type=int, default=12, help="warm-up processes (0: warm-up in this process)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "litmus-gpu-out")))
    args = parser.parse_args()
    began = time.perf_counter()
    left = lambda: args.budget - (time.perf_counter() - began)  # noqa: E731
    args.out.mkdir(parents=True, exist_ok=True)

    from syncverify.litmus.gpu.launch import interpreting
    from syncverify.litmus.gpu.mutants import default_mutants
    from syncverify.litmus.gpu.report import plot, refused
    from syncverify.litmus.gpu.stress import StressParams, load_tuned, machine_kind, store_tuned
    from syncverify.litmus.gpu.suite import check_on_device
    from syncverify.litmus.gpu.tune import search
    from syncverify.litmus.parser import parse_litmus

    interpret = interpreting()
    kind = "default" if interpret else machine_kind()
    session: dict = {"kind": kind, "interpret": interpret, "args": {k: str(v) for k, v in vars(args).items()},
                     "env": environment(), "tests": [], "not_run": []}
    save = lambda: (args.out / "session.json").write_text(json.dumps(session, indent=1))  # noqa: E731
    print(f"litmus-gpu session on {session['env'].get('device')} ({kind}), budget {args.budget:.0f} s", flush=True)

    # ----- 1. warm-up: models and compiles, in parallel
    tests = all_tests()
    mutants = default_mutants()
    models: dict[str, object] = {}
    warm_deadline = min(150.0, 0.3 * args.budget)
    t0 = time.perf_counter()
    texts = {name: text for _, name, text in tests}
    if args.workers > 0:
        pool = ProcessPoolExecutor(args.workers, mp_context=get_context("spawn"))
        futures = {pool.submit(warm, text): name for name, text in texts.items()}
        futures.update({pool.submit(warm, m.program): m.name for m in mutants})  # their kernels, for tuning
        done, pending = wait(futures, timeout=warm_deadline)
        for future in done:
            result = future.result()
            if result.get("model") is not None:
                models[futures[future]] = result["model"]
        pool.shutdown(wait=False, cancel_futures=True)
        print(f"warm-up: {len(done)} of {len(futures)} tests in {time.perf_counter() - t0:.0f} s"
              f"{'' if not pending else f'; {len(pending)} left cold'}", flush=True)
    session["warm_seconds"] = round(time.perf_counter() - t0, 1)

    # ----- 2. tuning
    start = [load_tuned(kind), StressParams()]
    tune_budget = max(0.0, min(args.tune_seconds, left() * 0.25))
    t0 = time.perf_counter()
    try:
        tuned = search(mutants, budget_seconds=tune_budget, seconds_each=args.mutant_seconds, start=start,
                       seed=args.seed, progress=lambda line: print(f"tune: {line}", flush=True))
        params = tuned.best
        session["tuning"] = tuned.to_json()
        score = tuned.best_score
        session["mutation_score"] = score.to_json()
        store_tuned(kind, params, score.to_json(), path=args.out / "tuned.json")
        print(f"tuning: {len(tuned.tried)} candidates in {time.perf_counter() - t0:.0f} s; best mutation score "
              f"{score.killed}/{score.total}", flush=True)
    except Exception as error:
        params = start[0]
        session["tuning"] = {"error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()}
        print(f"tuning failed ({type(error).__name__}: {error}); using the shipped parameters", flush=True)
    save()

    # ----- 3. the suite
    reports = []
    for n, (group, name, text) in enumerate(tests):
        remaining = len(tests) - n
        if left() < 5:
            session["not_run"] = [nm for _, nm, _ in tests[n:]]
            print(f"budget spent: {remaining} tests not run", flush=True)
            break
        seconds = max(0.05, min(args.seconds_each, (left() - 5) / remaining))
        try:
            program = parse_litmus(text)
            report = check_on_device(program, params, iterations=1 << 30, seconds=seconds, seed=args.seed + n,
                                     file=f"{group}/{name}", model=models.get(name))
        except Exception as error:
            report = refused(name, f"failed: {type(error).__name__}: {error}", file=f"{group}/{name}")
            report.status = "failed"
        report.name = name
        reports.append((group, report))
        session["tests"].append(dict(report.to_json(), group=group))
        save()
        print(f"[{n + 1}/{len(tests)}] {name}: {status_word(report)}", flush=True)
    try:
        plot([r for _, r in reports], args.out / "rates.png")
    except Exception as error:
        print(f"plot not drawn: {error}", flush=True)
    session["seconds"] = round(time.perf_counter() - began, 1)
    save()

    # ----- the table
    head = ("test", "inst/s", "device%", "instances", "outcomes", "weak seen", "UNSOUND")
    rows = [row(r) for _, r in reports]
    with open(args.out / "table.txt", "w") as f:
        widths = [max(len(x[i]) for x in rows + [head]) for i in range(len(head))]
        for x in [head] + rows:
            f.write(" | ".join(c.ljust(w) for c, w in zip(x, widths)) + "\n")
    shown = [row(r) for g, r in reports if g != "known" or r.unsound or r.weak_seen or r.status == "failed"]
    print()
    print_table(head, shown)
    ran = [r for _, r in reports if r.status == "ran"]
    unsound = [r.name for r in ran if r.unsound]
    weak = [r.name for r in ran if r.weak_seen]
    ms = session.get("mutation_score", {})
    print(f"ran {len(ran)}, refused {sum(r.status == 'refused' for _, r in reports)}, failed "
          f"{sum(r.status == 'failed' for _, r in reports)}, not run {len(session['not_run'])}; "
          f"weak seen in {len(weak)}; MODEL UNSOUND in {len(unsound)}{': ' + ', '.join(unsound) if unsound else ''}")
    print(f"mutation score (tuned): {ms.get('killed', '?')}/{ms.get('total', '?')}; "
          f"instances/s median {median([r.instances_per_second for r in ran]):,.0f}; "
          f"session {time.perf_counter() - began:.0f} s; raw JSON {args.out / 'session.json'}")
    return 1 if unsound else 0


def status_word(report) -> str:
    if report.status != "ran":
        return f"{report.status}: {report.reason[:90]}"
    tags = [f"{report.instances:,} inst", f"{report.instances_per_second:,.0f}/s"]
    if report.weak_seen:
        tags.append("weak seen")
    if report.unsound:
        tags.append("MODEL UNSOUND")
    if report.timeouts:
        tags.append(f"{report.timeouts} timeouts")
    return ", ".join(tags)


def row(report) -> tuple[str, ...]:
    if report.status != "ran":
        return (report.name, "-", "-", "-", "-", report.status, "-")
    weak = sum(r.count for r in report.weak_seen)
    rate = f" ({weak / report.instances:.2e})" if report.instances and weak else ""
    device = f"{100 * report.kernel_seconds / report.seconds:.0f}" if report.seconds else "-"
    return (report.name, f"{report.instances_per_second:,.0f}", device, f"{report.instances:,}", str(len(report.rows)),
            f"{weak:,}{rate}", "MODEL UNSOUND" if report.unsound else "-")


def median(values: list[float]) -> float:
    values = sorted(values)
    return values[len(values) // 2] if values else 0.0


def environment() -> dict:
    try:
        import torch
        import triton

        device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu (interpreter)"
        return {"device": device, "torch": torch.__version__, "triton": triton.__version__, "python": sys.version.split()[0]}
    except Exception as error:
        return {"device": f"unknown ({error})"}


if __name__ == "__main__":
    sys.exit(main())
