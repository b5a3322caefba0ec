"""The first two-GPU session (issues 30 and 31): every run, in priority order, in parts of one device call each.

Runs, one subprocess each, in this order (:func:`plan`):

1. ``gpu-tests``: the GPU tests (``pytest -m gpu tests``; on two GPUs the four skipped on one run);
2. ``zoo-*``: the zoo's reproductions that one GPU cannot force, on real ranks with random delays:
   each bug next to its fix (iris #462 gpu- vs sys-scope release; ``ready-flag-no-done`` and
   ``two-slot-early-reuse`` vs ``done-flag``, per-rank streams; the relaxed-wait signal pad vs
   the acquire one);
3. ``stress-*``: validated iterations per second of all four kernels at 1024^3, W = 2, no delays
   (issue target: >= 5,000 it/s); the every-built-in table on real ranks
   (``benchmarks/stress_bench.py --sections processes``); guided schedules on one unsafe pair and
   on a safe pair with its positive control;
4. ``compare``: ``syncverify compare --real-ranks`` over every built-in in every scenario (every
   pair's stress campaign in one launch of two processes);
5. ``bench-*``: ``syncverify bench`` on real ranks against cuBLAS + NCCL: the issue-14 target
   sweep (``benchmarks/sweeps/target-2gpu.toml``, gate ``--min-speedup 1.1``), the two newer
   kernels, and the 2-GPU collective-matmul shape (per shard M = 1024, K = 4096, N = 4096);
6. ``user-*`` (issue 31): every shipped example harness on real ranks (``stress FILE.py::NAME
   --real-ranks``), buggy ones guided, fixed ones under random delays;
7. ``litmus-x2`` (issue 31): cross-GPU litmus rates (``benchmarks/litmus_x2.py``: the stress's
   mutation score on the cross-GPU mutants, then every cross-GPU shape, one process per GPU).

A run whose code is not built yet (:attr:`Run.missing`; none today) is listed with what is missing
and not started on the GPU; its CPU stand-in still runs in the rehearsal where one exists.

Issue 30's runs fit the issue's 25 minutes (:data:`SESSION_SECONDS`). A device call runs at most
10 minutes, so the plan is cut into parts (``--part N``, :func:`parts`) whose budgets sum to at
most :data:`PART_SECONDS` each, in priority order: one device call per part.

Each run has its own time budget (the budgets sum to at most :data:`SESSION_SECONDS`); a run is
killed at its budget (its process group, by id) and a run that would start with less session time
left than its budget is skipped and listed as such. Raw output: ``$OUT/NN-name.log`` per run (and
whatever the run writes under ``$OUT/NN-name/``), ``$OUT/session.json`` rewritten after every run;
the compact table is printed last.

On ``nvidia-h200-x2`` (from the repository root), one device call per part (N = 1, 2, ...;
``--list`` prints the parts)::

    export PYTHONPATH=$PWD PYTHONUNBUFFERED=1; python3 benchmarks/x2_session.py --part N --out $OUT

Rehearsal on the CPU (the same plan, each run's CPU stand-in: the interpreter at tiny sizes, real
ranks as one process per rank with gloo where the run has real ranks; seconds per run, nothing it
prints is a measurement)::

    python3 benchmarks/x2_session.py --rehearse --out /tmp/x2

``--only NAME,...`` runs a subset (the others are listed as not selected); ``--list`` prints the
plan with both commands and runs nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from text_table import print_table  # noqa: E402  (beside this script)

#: Device seconds the session may take (the issue's 25 minutes); the plan's budgets sum to at most this.
SESSION_SECONDS = 1500.0
#: Budget seconds of one part (one device call: at most 10 minutes, 8 asked for, with start-up).
PART_SECONDS = 450.0
#: Per-run budget in the rehearsal, whatever the GPU run's: every stand-in is a tiny interpreter or
#: gloo run, slower than its GPU run (a harness's model check and two interpreted processes).
REHEARSE_SECONDS = 240.0
#: The whole rehearsal's budget: every run's stand-in, on a 2-core machine shared with other work.
REHEARSE_SESSION_SECONDS = 3600.0
PY = "{python}"  # replaced by sys.executable when a command runs
OUT = "{out}"  # replaced by the run's own output folder

#: (bug, fix) pairs of the zoo that need real ranks (per-rank streams, or two GPUs' caches).
ZOO_PAIRS = (("iris-462-gpu-scope-release", "iris-462-sys-scope-release"),
             ("ready-flag-no-done", "done-flag"),
             ("two-slot-early-reuse", "done-flag"),
             ("pytorch-signal-pad-relaxed-wait", "pytorch-signal-pad"))
KERNELS = ("all-reduce", "all-scatter", "all-gather-gemm", "gemm-reduce-scatter")
#: A protocol the model calls safe in all four kernels (docs/frontend.md's cross-check).
SAFE = "barrier-fenced-release-acquire"
#: The bench's interpreter sizes in the rehearsal (tests/test_bench.py's TINY): the GPU shapes
#: would take minutes per case in the interpreter.
TINY = ("--interpret", "--m", "32", "--n", "64", "--k", "64", "--block-m", "16", "--block-n", "16",
        "--block-k", "16", "--gemm-sms", "2", "--comm-sms", "1", "--recv-sms", "1")


@dataclass(frozen=True)
class Run:
    """One run of the session: its GPU command, its CPU stand-in and its budget in seconds."""

    name: str
    group: str
    seconds: float
    gpu: tuple[str, ...]
    rehearse: tuple[str, ...]
    why: str = ""
    issue: int = 30
    missing: str = ""  # code a GPU run needs and that is not built: the run is listed, not started on the GPU


def _cli(*args: str) -> tuple[str, ...]:
    return (PY, "-m", "syncverify", *args)


def _zoo_runs() -> list[Run]:
    """Each bug, then its fix (a fix shared by two bugs runs once), on real ranks with random delays."""
    from syncverify.protocols.registry import zoo_protocols

    scenario = {p.name: p.zoo.scenario for p in zoo_protocols()}
    names: list[str] = []
    for bug, fix in ZOO_PAIRS:
        names += [n for n in (bug, fix) if n not in names]
    return [Run(f"zoo-{name}", "zoo", 40.0,
                _cli("stress", "--protocol", name, "--kernel", scenario[name], "--world-size", "2",
                     "--seconds", "10", "--delays", "random", "--json"),
                _cli("stress", "--protocol", name, "--kernel", scenario[name], "--world-size", "2",
                     "--interpret", "--real-ranks", "--order", "last-rank-late", "--iterations", "2", "--json"),
                "real ranks, per-rank streams; rehearsal: interpreter, one process per rank, the last one late")
            for name in names]


def plan() -> list[Run]:
    """Every run of the session, in priority order."""
    runs = [Run("gpu-tests", "gpu-tests", 240.0,
                (PY, "-m", "pytest", "-q", "-m", "gpu", "-rs", "-p", "no:cacheprovider", "tests"),
                (PY, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "tests/gpu"),
                "rehearsal: collection only (every GPU test skips on the CPU)")]
    runs += _zoo_runs()
    for kernel in KERNELS:
        runs.append(Run(f"stress-rate-{kernel}", "stress", 40.0,
                        _cli("stress", "--protocol", SAFE, "--kernel", kernel, "--world-size", "2",
                             "--seconds", "10", "--json"),
                        _cli("stress", "--protocol", SAFE, "--kernel", kernel, "--world-size", "2",
                             "--interpret", "--real-ranks", "--iterations", "2", "--json"),
                        "1024^3, W = 2, no delays, 10 s; target >= 5,000 it/s"))
    runs.append(Run("stress-table", "stress", 150.0,
                    (PY, "benchmarks/stress_bench.py", "--sections", "env,processes", "--processes-parts", "table",
                     "--seconds", "1.5", "--seed", "2026", "--out", OUT),
                    (PY, "benchmarks/stress_bench.py", "--sections", "processes", "--processes-parts", "table",
                     "--seconds", "1.5", "--dry-run", "--out", OUT),
                    "every built-in, all-reduce and all-scatter, random delays; rehearsal: the processes "
                    "section says it needs 2 GPUs"))
    runs.append(Run("stress-guided-unsafe", "stress", 50.0,
                    _cli("stress", "--protocol", "add-counter", "--kernel", "all-reduce", "--world-size", "2",
                         "--guided", "--seconds", "5", "--schedule", f"{OUT}/schedule.json"),
                    _cli("stress", "--protocol", "add-counter", "--kernel", "all-reduce", "--world-size", "2",
                         "--interpret", "--guided", "--seconds", "2", "--no-random",
                         "--schedule", f"{OUT}/schedule.json"),
                    "the model's counterexamples as delay schedules"))
    runs.append(Run("stress-guided-control", "stress", 50.0,
                    _cli("stress", "--protocol", SAFE, "--kernel", "all-reduce", "--world-size", "2",
                         "--guided", "--seconds", "5", "--schedule", f"{OUT}/schedule.json"),
                    _cli("stress", "--protocol", SAFE, "--kernel", "all-reduce", "--world-size", "2",
                         "--interpret", "--guided", "--seconds", "2", "--no-random",
                         "--schedule", f"{OUT}/schedule.json"),
                    "a safe protocol aimed at its positive control's counterexamples"))
    runs.append(Run("compare", "compare", 160.0,
                    _cli("compare", "--scenario", "all", "--world-size", "2", "--seconds", "1", "--real-ranks",
                         "--out", OUT),
                    _cli("compare", *REHEARSE_COMPARE, "--scenario", "all-reduce", "--world-size", "2",
                         "--real-ranks", "--interpret", "--jobs", "1", "--out", OUT),
                    "every built-in x every scenario on real ranks (one launch); rehearsal: a bug and its fix "
                    "on real ranks in the interpreter"))
    runs.append(Run("bench-target", "bench", 200.0,
                    _cli("bench", "--sweep", "benchmarks/sweeps/target-2gpu.toml", "--out", OUT,
                         "--min-speedup", "1.1", "--watchdog", "150"),
                    _cli("bench", "--kernel", "all-reduce,all-scatter", "--protocol", "barrier-fenced-release-acquire,epoch-flag",
                         *TINY, "--out", OUT),
                    "issue 14's target: >= 1.1x over cuBLAS + NCCL at 8192x4608x36864"))
    for kernel in ("all-gather-gemm", "gemm-reduce-scatter"):
        runs.append(Run(f"bench-{kernel}", "bench", 70.0,
                        _cli("bench", "--kernel", kernel, "--world-size", "2", "--out", OUT, "--watchdog", "60"),
                        _cli("bench", "--kernel", kernel, "--world-size", "2", *TINY, "--out", OUT),
                        "the newer kernels at the default shape"))
    runs.append(Run("bench-collective-matmul", "bench", 70.0,
                    _cli("bench", "--kernel", "all-gather-gemm", "--world-size", "2", "--m", "2048", "--k", "4096",
                         "--n", "4096", "--out", OUT, "--watchdog", "60"),
                    _cli("bench", "--kernel", "all-gather-gemm", "--world-size", "2", *TINY, "--out", OUT),
                    "per shard M = 1024, K = 4096, N = 4096 (Mosaic GPU: 1.44x over NCCL + cuBLAS, 2 x H100)"))
    runs += _user_runs()
    runs.append(Run("litmus-x2", "litmus", 90.0,
                    (PY, "benchmarks/litmus_x2.py", "--budget", "80", "--out", OUT),
                    (PY, "benchmarks/litmus_x2.py", "--rehearse", "--budget", "200", "--out", OUT),
                    "MP, SB, LB, IRIW, CoRR, CoRR2, 2+2W, CoWW with threads on two GPUs, weak / relaxed / "
                    "release-acquire at gpu and sys scope: rates with 95% intervals, the stress's mutation score",
                    issue=31))
    return runs


#: The example harnesses (issue 31's run 1): (file, name, buggy).
USER_HARNESSES = (("examples/one_shot_all_reduce/harness.py", "original", True),
                  ("examples/one_shot_all_reduce/harness.py", "barrier_without_fence", True),
                  ("examples/one_shot_all_reduce/harness.py", "seed_fix", True),
                  ("examples/one_shot_all_reduce/harness.py", "fix_with_barrier", False),
                  ("examples/one_shot_all_reduce/harness.py", "fix_with_barrier_one_slot", False),
                  ("examples/all_scatter/harness.py", "original", True),
                  ("examples/all_scatter/harness.py", "seed_fix", True),
                  ("examples/all_scatter/harness.py", "fix_with_barriers", False),
                  ("examples/all_scatter/harness.py", "reset_on_gemm_stream", True),
                  ("examples/all_scatter/harness.py", "reset_between_barriers", False))
#: The rehearsal's compare: a bug and its fix, each caught or passed across two processes.
REHEARSE_COMPARE = ("iris-465-hardcoded-lock-value", "iris-465-call-number")


def _user_runs() -> list[Run]:
    """Each example harness on real ranks, at its file's ``STRESS_SIZES`` (the command's GPU sizes):
    buggy ones guided (their first failure), fixed ones under random delays (clean, with the positive
    control failing)."""
    runs = []
    for path, name, buggy in USER_HARNESSES:
        target = f"{path}::{name}"
        how = ("--guided", "--iterations", "100") if buggy else ("--delays", "random", "--iterations", "20000")
        runs.append(Run(f"user-{Path(path).parent.name}-{name}", "user", 60.0,
                        _cli("stress", target, "--real-ranks", *how, "--watchdog", "30", "--model-timeout",
                             "30", "--json"),
                        _cli("stress", target, "--real-ranks", "--interpret", *how[:-1], "2", "--no-control",
                             "--watchdog", "120", "--json"),
                        ("buggy: guided, first failure" if buggy else "fixed: random delays, clean + control")
                        + "; the harnesses' symmetric-memory heap runs here for the first time",
                        issue=31))
    return runs


def parts(runs: list[Run]) -> list[list[Run]]:
    """The plan cut in order into parts whose budgets sum to at most :data:`PART_SECONDS` each
    (runs not built count nothing: they do not start on the GPU)."""
    cut: list[list[Run]] = [[]]
    used = 0.0
    for r in runs:
        cost = 0.0 if r.missing else r.seconds
        if cut[-1] and used + cost > PART_SECONDS:
            cut.append([])
            used = 0.0
        cut[-1].append(r)
        used += cost
    return cut


def _command(argv: tuple[str, ...], out: Path) -> list[str]:
    return [a.replace(PY, sys.executable).replace(OUT, str(out)) for a in argv]


def _last_line(text: str) -> str:
    """The table's last column: a stress run's JSON result in a few words (:func:`_stress_words`),
    else the log's last line."""
    start = text.find("\n{")
    if start >= 0:
        try:
            words = _stress_words(json.loads(text[start + 1:]))
        except ValueError:
            words = None
        if words:
            return words
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:90] if lines else ""


def _stress_words(document: dict) -> str | None:
    """``syncverify stress --json`` (a protocol's campaign, or a harness's ``{"result": ...}``) as
    iterations, bad iterations, validated iterations per second and why it stopped; None for
    other JSON.

    >>> _stress_words({"iterations": 51200, "bad_iterations": 0, "iterations_per_second": 5120.4, "stopped": None})
    '51,200 it, 0 bad, 5,120 it/s'
    >>> _stress_words({"result": {"iterations": 7, "bad_iterations": 1, "stopped": "watchdog"}})
    '7 it, 1 bad, stopped: watchdog'
    """
    result = document.get("result", document) if isinstance(document, dict) else None
    if not isinstance(result, dict) or "iterations" not in result:
        return None
    words = f"{result['iterations']:,} it, {result.get('bad_iterations', 0):,} bad"
    if result.get("iterations_per_second"):
        words += f", {result['iterations_per_second']:,.0f} it/s"
    if result.get("stopped"):
        words += f", stopped: {result['stopped']}"
    return words[:90]


#: A rehearsed run that exited 1 cleanly: a finding of the interpreter's (a positive control that
#: did not fail, a bug not shown), which means nothing on the CPU; the command itself worked.
REHEARSED_FOUND = "ran (exit 1: no meaning on the CPU)"


def _result(code: int | None, seconds: float, text: str, *, rehearse: bool) -> str:
    """A run's result cell: ok, a finding, bad input, a crash, or killed at its budget."""
    if code is None:
        return f"killed at {seconds:.0f} s budget"
    if code == 0:
        return "ok"
    if rehearse and code == 1 and "Traceback" not in text:
        return REHEARSED_FOUND
    return f"exit {code}" + (" (traceback)" if "Traceback" in text else "")


def execute(argv: list[str], *, log: Path, seconds: float, env: dict) -> tuple[int | None, float]:
    """Run ``argv`` from the repository root, stdout and stderr into ``log``; kill its whole process
    group (this run's own, by id) at ``seconds``. Returns (exit code or None if killed, wall s)."""
    start = time.monotonic()
    with log.open("w") as sink:
        sink.write("$ " + " ".join(argv) + "\n")
        sink.flush()
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)  # its own group: spawned ranks die with it
        try:
            code: int | None = proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
    return code, time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    """Run the plan (or ``--only`` part of it); exit 0 if every selected run exited 0, else 1."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "x2-out")))
    parser.add_argument("--rehearse", action="store_true", help="the CPU stand-in of every run")
    parser.add_argument("--budget", type=float, default=None,
                        help=f"seconds for the whole session (default: {SESSION_SECONDS:.0f}; rehearsal: "
                             f"{REHEARSE_SESSION_SECONDS:.0f})")
    parser.add_argument("--only", default="", help="comma-separated run names (default: all)")
    parser.add_argument("--part", type=int, default=0, help="run part N of the plan only (one device call each; "
                                                            "0: every part)")
    parser.add_argument("--list", action="store_true", help="print the plan and run nothing")
    args = parser.parse_args(argv)
    if args.budget is None:
        args.budget = REHEARSE_SESSION_SECONDS if args.rehearse else SESSION_SECONDS
    runs = plan()
    cut = parts(runs)
    names = {r.name for r in runs}
    only = [n for n in args.only.split(",") if n]
    unknown = [n for n in only if n not in names]
    if unknown:
        print(f"x2_session: error: unknown run(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}",
              file=sys.stderr)
        return 2
    if not 0 <= args.part <= len(cut):
        print(f"x2_session: error: --part {args.part}: the plan has parts 1..{len(cut)} (0: all)", file=sys.stderr)
        return 2
    part_of = {r.name: n for n, runs_of_part in enumerate(cut, 1) for r in runs_of_part}
    if args.part:
        only = [r.name for r in cut[args.part - 1] if not only or r.name in only]
    if args.list:
        for i, r in enumerate(runs, 1):
            print(f"{i:02d} {r.name} [part {part_of[r.name]}, issue {r.issue}, {r.group}, {r.seconds:.0f} s] {r.why}"
                  + (f"\n   NOT BUILT: {r.missing}" if r.missing else "")
                  + f"\n   gpu: {' '.join(r.gpu)}\n   cpu: {' '.join(r.rehearse) or '-'}")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    if args.rehearse:
        env.update(TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")
    session = {"rehearse": args.rehearse, "budget": args.budget, "runs": []}
    began = time.monotonic()
    print(f"x2 session: {len(runs)} runs, {sum(r.seconds for r in runs):.0f} s of budgets, "
          f"session budget {args.budget:.0f} s{' (rehearsal on the CPU)' if args.rehearse else ''}", flush=True)
    rows = []
    for i, r in enumerate(runs, 1):
        tag = f"{i:02d}-{r.name}"
        seconds = REHEARSE_SECONDS if args.rehearse else r.seconds  # the interpreter is slower than the GPU
        left = args.budget - (time.monotonic() - began)
        record = {"name": r.name, "group": r.group, "budget": seconds, "code": None, "wall": 0.0}
        if only and r.name not in only:
            record["result"] = "not selected"
        elif r.missing and not (args.rehearse and r.rehearse):
            record["result"] = "not built"
            record["missing"] = r.missing
        elif left < seconds:
            record["result"] = f"skipped: {left:.0f} s left, needs {seconds:.0f}"
        else:
            argv_run = _command(r.rehearse if args.rehearse else r.gpu, args.out / tag)
            if any(OUT in a for a in (r.rehearse if args.rehearse else r.gpu)):
                (args.out / tag).mkdir(exist_ok=True)
            print(f"[{time.monotonic() - began:6.0f} s] {tag} (budget {seconds:.0f} s)", flush=True)
            log = args.out / f"{tag}.log"
            code, wall = execute(argv_run, log=log, seconds=seconds, env=env)
            record.update(code=code, wall=round(wall, 1), command=argv_run, log=log.name,
                          last=_last_line(log.read_text(errors="replace")))
            record["result"] = _result(code, seconds, log.read_text(errors="replace"), rehearse=args.rehearse)
            print(f"         {record['result']} in {wall:.0f} s: {record['last']}", flush=True)
        session["runs"].append(record)
        (args.out / "session.json").write_text(json.dumps(session, indent=1))
        rows.append((tag, r.group, f"{seconds:.0f}", f"{record['wall']:.0f}", record["result"],
                     record.get("last", "")))
    print()
    print_table(("run", "group", "budget s", "wall s", "result", "last line"), rows)
    for x in session["runs"]:
        if x["result"] == "not built":
            print(f"not built: {x['name']}: {x['missing']}")
    ran = [x for x in session["runs"] if x["result"] not in ("not selected", "not built")]
    return 0 if all(x["result"] in ("ok", REHEARSED_FOUND) for x in ran) else 1


if __name__ == "__main__":
    sys.exit(main())
