"""The exhaustive exactness run (``tests/test_reductions_exact.py`` at its full example count), in parallel.

    python3 benchmarks/exact_full.py [--jobs N] [--examples 40] [--shard-examples 4 | --shard-s S] [--bound 480]
                                     [--check-s 20] [--only NAME,...] [--seed 0] [--out DIR] [--wheels DIR]

Every property of ``tests/test_reductions_exact.py`` (each builder reduction, the tiles one, the looped tiles one, each
explorer pruning: :func:`properties`) is run with ``SYNCVERIFY_EXACT_FULL=1`` (every scenario,
both launch orders, 1-3 calls, W = 2 and 3, a ``--check-s`` bound per check, default 20 s) until ``--examples``
comparisons of it were made. The examples of one property are split into shards of
``--shard-examples``, each a process of its own with its own Hypothesis seed (no example database,
no shrinking: a difference is reported as drawn), ``--jobs`` processes at a time, the properties
interleaved so that each advances from the start.

Time: no comparison starts after ``--bound`` minus one comparison (2 x ``--check-s`` + 5 s), and a
shard still running at ``--bound`` is killed; what it compared is kept (each shard writes a JSON
line per example). A plain progress line is printed every 10 s, the summary table last (property,
examples compared of the target, discards, differences, shards, CPU seconds of its shards). Raw
results: ``DIR/shards/*.jsonl`` and ``*.err``, ``DIR/summary.json``.

Exit code: 0 every property reached its target with no difference; 1 a difference (or a shard
failed: its ``.err`` says why); 3 the bound stopped the run before every target was reached; 2
bad input or a missing module.

Dependencies: the tests need hypothesis (+ sortedcontainers), pytest (+ iniconfig, pluggy,
packaging, pygments) and networkx. Where one is missing, ``--wheels DIR`` (default ``.wheels`` when
it exists) names a folder of wheels (made with ``pip download``, see docs/reductions.md); each
wheel that fits this interpreter is unpacked under ``DIR/site`` and put on the path, which is
enough for these pure-Python (or, for hypothesis, per-version binary) wheels.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import math
import os
import platform
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NEEDED = ("hypothesis", "sortedcontainers", "pytest", "iniconfig", "pluggy", "packaging", "pygments", "networkx")
PROGRESS_EVERY_S = 10.0
CHECK_S = 20.0  # the full run's bound on one check (tests/test_reductions_exact.py's TIMEOUT_S); --check-s


def comparison_s(check_s: float) -> float:
    """The longest one comparison takes: two checks under the bound, and some slack."""
    return 2 * check_s + 5


# ----- the properties ----------------------------------------------------------------------------

def properties() -> list[str]:
    """Every property of the file, named ``builder:R``, ``tiles``, ``looped-tiles``, ``pruning:P`` or ``rf-symmetry``."""
    sys.path.insert(0, str(ROOT))
    from syncverify.explore.driver import PRUNINGS
    from syncverify.scenarios.build import REDUCTIONS

    return ([f"builder:{r}" for r in REDUCTIONS if r != "tiles"] + ["tiles", "looped-tiles"]
            + [f"pruning:{p}" for p in PRUNINGS] + ["rf-symmetry"])


def run_property(name: str) -> None:
    """In a shard's process: run the property ``name`` (its settings come from the environment)."""
    sys.path.insert(0, str(ROOT))
    exact = importlib.import_module("tests.test_reductions_exact")
    kind, _, param = name.partition(":")
    if kind == "builder":
        exact.test_each_builder_reduction_keeps_the_verdict(reduction=param)
    elif kind == "tiles":
        exact.test_checking_tile_0_of_two_tiles_keeps_the_verdict()
    elif kind == "looped-tiles":  # two tiles in one CTA's loop against the program built whole
        exact.test_tiles_in_one_ctas_loop_keep_the_verdict_of_the_program_built_whole()
    elif kind == "rf-symmetry":  # at W = 3 and 4, where the symmetry group has units to rename
        exact.test_rf_symmetry_keeps_the_verdict_where_ranks_are_interchangeable()
    else:
        exact.test_each_explorer_pruning_keeps_the_verdict(pruning=param)


def worker(name: str, log: str) -> int:
    """A shard: run the property, append its outcome to ``log``; exit 0 passed, 1 failed."""
    start = time.process_time()
    try:
        run_property(name)
    except BaseException as error:  # noqa: BLE001 - the outcome of any failure is recorded, then re-raised
        stop_at = float(os.environ.get("SYNCVERIFY_EXACT_STOP_AT", "inf"))
        if type(error).__name__ == "Unsatisfiable" and time.time() > stop_at:
            return 0  # every example after the bound was rejected: the shard was stopped, not failed
        row = dict(outcome="failed", error=f"{type(error).__name__}: {str(error)[:2000]}",
                   cpu=time.process_time() - start)
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        raise
    with open(log, "a", encoding="utf-8") as f:
        f.write(json.dumps(dict(outcome="passed", cpu=time.process_time() - start)) + "\n")
    return 0


# ----- dependencies ------------------------------------------------------------------------------

def missing_modules() -> list[str]:
    return [m for m in NEEDED if importlib.util.find_spec(m) is None]


def wheel_fits(wheel: Path) -> bool:
    """Whether ``wheel`` installs on this interpreter (pure Python, or built for this version)."""
    tags = wheel.name[:-len(".whl")].split("-")[-3:]  # python tag, abi tag, platform tag
    version = f"cp{sys.version_info.major}{sys.version_info.minor}"
    if tags[2] == "any":
        return any(t.startswith("py3") or t == version for t in tags[0].split("."))
    system, machine = sysconfig.get_platform().split("-")[0], platform.machine()
    return tags[0] == version and any(system in t and t.endswith(machine) for t in tags[2].split("."))


def unpack_wheels(wheels: Path, site: Path) -> list[str]:
    """Unpack each wheel of ``wheels`` that fits into ``site``; the names unpacked."""
    site.mkdir(parents=True, exist_ok=True)
    done = []
    for wheel in sorted(wheels.glob("*.whl")):
        if wheel_fits(wheel):
            with zipfile.ZipFile(wheel) as z:
                z.extractall(site)
            done.append(wheel.name)
    return done


def ensure_modules(wheels: Path | None, out: Path) -> str | None:
    """Make every needed module importable (from ``wheels`` if need be); the extra path, or exit 2."""
    missing = missing_modules()
    if not missing:
        return None
    if wheels is None or not wheels.is_dir():
        print(f"exact_full: missing Python module(s) {', '.join(missing)}: install them or pass --wheels DIR "
              "(a folder of their wheels, see docs/reductions.md)", file=sys.stderr)
        raise SystemExit(2)
    site = out / "site"
    unpacked = unpack_wheels(wheels, site)
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    still = missing_modules()
    if still:
        print(f"exact_full: missing Python module(s) {', '.join(still)}, also after unpacking {len(unpacked)} "
              f"wheel(s) of {wheels} for Python {sys.version_info.major}.{sys.version_info.minor}", file=sys.stderr)
        raise SystemExit(2)
    print(f"exact_full: {', '.join(missing)} taken from {len(unpacked)} wheel(s) in {wheels}", flush=True)
    return str(site)


# ----- the parallel run --------------------------------------------------------------------------

#: Seconds one comparison of each property took on the device machine's CPUs, discards and the
#: shard's start included (2026-12-02, commit 02cf2e5, 20 s per check, 13 jobs: each property's
#: shard seconds over its comparisons; docs/reductions.md). Properties not in that run:
#: DEFAULT_COST_S. Only the shards' sizes and order depend on these.
COST_S = {"builder:slicing": 16.8, "builder:ranks": 18.1, "builder:stages": 51.5, "builder:symmetry": 19.7,
          "tiles": 116.7, "pruning:value-classes": 14.1, "pruning:ceilings": 12.9,
          "pruning:combination-search": 24.5, "pruning:barrier-orders": 8.7, "pruning:partial-causality": 26.9,
          "pruning:alike": 14.0,
          "looped-tiles": 45.0}  # 2026-12-02 fourth session, device CPUs: 18 comparisons in 811 s at 10 s per check
DEFAULT_COST_S = 20.0


def plan(names: list[str], examples: int, per_shard: int, seed: int = 0, shard_s: float = 0.0) -> list[dict]:
    """The shards: ``per_shard`` comparisons each, or, with ``shard_s``, about ``shard_s`` seconds of
    each property's comparisons at its measured cost (:data:`COST_S`; at least one). Interleaved
    across properties (shard 0 of each, then shard 1 of each, ...), and with ``shard_s`` the
    costliest shards first (the longest-first order leaves the fewest cores idle at the end).
    Shard ``k`` of property ``n`` draws with seed ``seed + 1000 n + k``."""
    per_property = []
    for n, name in enumerate(names):
        cost = COST_S.get(name, DEFAULT_COST_S)
        size = max(1, min(examples, int(shard_s // cost))) if shard_s else per_shard
        count = math.ceil(examples / size)
        sizes = [size] * (count - 1) + [examples - size * (count - 1)]
        per_property.append([dict(property=name, shard=k, examples=n_examples, seed=seed + 1000 * n + k,
                                  id=f"{name.replace(':', '-')}-{k}", cost=n_examples * cost)
                             for k, n_examples in enumerate(sizes)])
    longest = max(len(shards) for shards in per_property)
    shards = [shards[k] for k in range(longest) for shards in per_property if k < len(shards)]
    return sorted(shards, key=lambda shard: -shard["cost"]) if shard_s else shards


def read_log(path: Path) -> list[dict]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut by a kill
            pass
    return rows


def tally(shards: list[dict], out: Path) -> dict[str, dict]:
    """Per property: comparisons, discards, differences, shards by state, CPU seconds."""
    table: dict[str, dict] = {}
    for shard in shards:
        row = table.setdefault(shard["property"], dict(target=0, same=0, discards=0, differences=0, passed=0,
                                                       failed=0, killed=0, pending=0, cpu=0.0, found=[], errors=[]))
        row["target"] += shard["examples"]
        for line in read_log(out / "shards" / f"{shard['id']}.jsonl"):
            outcome = line["outcome"]
            if outcome == "same":
                row["same"] += 1
            elif outcome == "discard":
                row["discards"] += 1
            elif outcome == "difference":
                row["differences"] += 1
                row["found"].append(line)
            elif outcome == "failed" and "with the reduction" not in line["error"]:
                row["errors"].append(f"shard {shard['id']}: {line['error'][:300]}")
        state = shard.get("state", "pending")
        row[state if state in ("passed", "failed", "killed") else "pending"] += 1
        row["cpu"] += shard.get("cpu", 0.0)
    return table


def shard_command(shard: dict, out: Path, stop_at: float, site: str | None,
                  check_s: float = CHECK_S) -> tuple[list[str], dict]:
    log = out / "shards" / f"{shard['id']}.jsonl"
    log.unlink(missing_ok=True)
    path = os.pathsep.join(p for p in (str(ROOT), site, os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "SYNCVERIFY_EXACT_FULL": "1", "SYNCVERIFY_HYPOTHESIS_RANDOM": "1",
           "SYNCVERIFY_EXACT_EXAMPLES": str(shard["examples"]), "SYNCVERIFY_EXACT_SEED": str(shard["seed"]),
           "SYNCVERIFY_EXACT_LOG": str(log), "SYNCVERIFY_EXACT_STOP_AT": str(stop_at),
           "SYNCVERIFY_EXACT_CHECK_S": str(check_s)}
    return [sys.executable, str(Path(__file__).resolve()), "--worker", shard["property"], "--log", str(log)], env


def run(shards: list[dict], jobs: int, bound: float, out: Path, site: str | None, check_s: float = CHECK_S) -> float:
    """Run the shards ``jobs`` at a time under the wall-clock ``bound``; the seconds taken."""
    (out / "shards").mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    last = comparison_s(check_s)
    stop_at = time.time() + bound - last
    pending, running = list(shards), []
    last_progress = start
    while pending or running:
        now = time.monotonic()
        while pending and len(running) < jobs and now - start < bound - last:
            shard = pending.pop(0)
            command, env = shard_command(shard, out, stop_at, site, check_s)
            err = open(out / "shards" / f"{shard['id']}.err", "w", encoding="utf-8")
            shard["process"], shard["began"], shard["err"] = (
                subprocess.Popen(command, cwd=ROOT, env=env, stdout=err, stderr=subprocess.STDOUT), now, err)
            running.append(shard)
        if now - start >= bound - last:
            pending.clear()  # too late to start one: its comparisons would be stopped anyway
        for shard in list(running):
            code = shard["process"].poll()
            if code is None and now - start < bound:
                continue
            if code is None:
                shard["process"].kill()
                shard["process"].wait()
                shard["state"] = "killed"
            else:
                shard["state"] = "passed" if code == 0 else "failed"
            shard["err"].close()
            shard["cpu"] = now - shard["began"]  # the shard's wall seconds (one process, one core)
            running.remove(shard)
        if now - last_progress >= PROGRESS_EVERY_S:
            last_progress = now
            totals = tally(shards, out).values()
            print(f"exact_full {now - start:4.0f}s: shards {sum(1 for s in shards if 'state' in s)} done, "
                  f"{len(running)} running, {len(pending)} waiting; compared {sum(r['same'] for r in totals)}, "
                  f"discarded {sum(r['discards'] for r in totals)}, "
                  f"differences {sum(r['differences'] for r in totals)}", flush=True)
        time.sleep(0.5)
    return time.monotonic() - start


def summary(table: dict[str, dict], seconds: float) -> int:
    """Print the table (and each difference and failure); the exit code."""
    print(f"\n{'property':<28} {'compared':>12} {'discards':>9} {'differences':>12} "
          f"{'shards ok/fail/killed/not run':>30} {'shard s':>8}")
    for name, row in table.items():
        compared = row["same"] + row["differences"]
        shards = f"{row['passed']}/{row['failed']}/{row['killed']}/{row['pending']}"
        print(f"{name:<28} {compared:>5} of {row['target']:<4} {row['discards']:>9} {row['differences']:>12} "
              f"{shards:>30} {row['cpu']:>8.0f}")
    for name, row in table.items():
        for found in row["found"]:
            print(f"DIFFERENCE {name}: {json.dumps(found)}")
        for error in row["errors"]:
            print(f"FAILED {name}: {error}")
    short = any(r["same"] + r["differences"] < r["target"] for r in table.values())
    print(f"\nexact_full: {seconds:.0f} s wall; "
          + ("differences or failures found" if any(r["differences"] or r["errors"] for r in table.values())
             else "every target reached, no difference" if not short else "stopped by the bound, no difference"))
    if any(r["differences"] or r["errors"] or r["failed"] > r["differences"] for r in table.values()):
        return 1
    return 3 if short else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--examples", type=int, default=40, help="comparisons per property (default 40)")
    parser.add_argument("--shard-examples", type=int, default=4, help="comparisons per shard (default 4)")
    parser.add_argument("--shard-s", type=float, default=0.0,
                        help="instead: about this many seconds of a property's comparisons per shard, at its "
                             "measured cost, costliest shards first (default: off)")
    parser.add_argument("--bound", type=float, default=480.0, help="wall-clock seconds (default 480)")
    parser.add_argument("--check-s", type=float, default=CHECK_S,
                        help="bound on one check in seconds; an example whose check reaches it is discarded "
                             "(default 20)")
    parser.add_argument("--only", help="comma-separated properties (default: every one)")
    parser.add_argument("--seed", type=int, default=0,
                        help="added to every shard's seed: another run draws other examples (default 0)")
    parser.add_argument("--out", default=os.environ.get("OUT") and f"{os.environ['OUT']}/exact" or "out/exact")
    parser.add_argument("--wheels", default=str(ROOT / ".wheels"))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--log", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker, args.log)
    if args.jobs < 1 or args.examples < 1 or args.shard_examples < 1 or args.check_s <= 0 or args.shard_s < 0 or \
            args.bound <= comparison_s(args.check_s):
        print(f"exact_full: --jobs, --examples and --shard-examples must be at least 1, --check-s positive and "
              f"--bound more than 2 x --check-s + 5 s", file=sys.stderr)
        return 2
    out = Path(args.out)
    site = ensure_modules(Path(args.wheels) if args.wheels else None, out)
    names = properties()
    if args.only:
        unknown = sorted(set(args.only.split(",")) - set(names))
        if unknown:
            print(f"exact_full: unknown property {unknown[0]!r}; choose from {', '.join(names)}", file=sys.stderr)
            return 2
        names = [n for n in names if n in args.only.split(",")]
    shards = plan(names, args.examples, args.shard_examples, args.seed, args.shard_s)
    expected = sum(shard["cost"] for shard in shards)
    print(f"exact_full: about {expected:.0f} s of comparisons at the costs measured with 20 s per check "
          f"({expected / args.jobs:.0f} s wall on {args.jobs} jobs; less with a smaller --check-s)", flush=True)
    print(f"exact_full: {len(names)} properties x {args.examples} comparisons in {len(shards)} shards, "
          f"{args.jobs} at a time, bound {args.bound:.0f} s, {args.check_s:.0f} s per check; raw results in {out}",
          flush=True)
    seconds = run(shards, args.jobs, args.bound, out, site, args.check_s)
    table = tally(shards, out)
    (out / "summary.json").write_text(json.dumps(dict(seconds=seconds, properties=table), indent=1),
                                      encoding="utf-8")
    return summary(table, seconds)


if __name__ == "__main__":
    raise SystemExit(main())
