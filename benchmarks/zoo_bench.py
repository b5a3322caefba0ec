"""Time every zoo protocol's check in its zoo scenario (issue 15: W = 2 and 4 under 60 s each).

    python -m benchmarks.zoo_bench [--worlds 2,4,8] [--runs 3] [--timeout 60] [--names a,b]
                                   [--json FILE]

For each zoo protocol (``syncverify list --zoo``) and world size, runs
``python -m syncverify check NAME --scenario S --world-size W --epochs E --launches L
--timeout T --json`` (the scenario, epochs and launch order the protocol's ``[zoo]`` table
names) ``--runs`` times as a fresh process each, and prints one row: the verdict and its kinds,
consistent executions, and the whole process's wall and CPU seconds (median, min-max; CPU is
the child's user + system time). A run that answers unknown says which limit it hit.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.text_table import print_table

ROOT = Path(__file__).resolve().parent.parent


def zoo_cases(names: list[str] | None) -> list[tuple[str, str, int, str]]:
    """(name, scenario, epochs, launches) of each zoo protocol, from its ``[zoo]`` table."""
    from syncverify.protocols import load_protocol
    from syncverify.protocols.registry import zoo_names

    cases = []
    for name in names or zoo_names():
        zoo = load_protocol(name).zoo
        cases.append((name, zoo.scenario, zoo.epochs, zoo.launches))
    return cases


def timed_check(name: str, scenario: str, world: int, epochs: int, launches: str, timeout: float) -> dict:
    """One whole-process ``syncverify check --json`` run: its answer, wall and CPU seconds."""
    command = [sys.executable, "-m", "syncverify", "check", name, "--scenario", scenario, "--world-size", str(world),
               "--epochs", str(epochs), "--launches", launches, "--timeout", str(timeout), "--json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout + 120)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    try:
        answer = json.loads(done.stdout)
    except json.JSONDecodeError:
        answer = {"safe": None, "limit": f"exit {done.returncode}: {done.stderr.strip()[-200:]}", "violations": [],
                  "executions": None}
    return dict(wall=wall, cpu=cpu, safe=answer.get("safe"), limit=answer.get("limit"),
                kinds=sorted({v["kind"] for v in answer.get("violations", [])}), executions=answer.get("executions"))


def verdict(run: dict) -> str:
    """``safe``, ``unsafe (kinds)`` or ``unknown (limit)``."""
    if run["safe"] is True:
        return "safe"
    if run["safe"] is False:
        return f"unsafe ({', '.join(run['kinds'])})" + (f", {run['limit']} hit" if run["limit"] else "")
    return f"unknown ({run['limit']})"


def spread(values: list[float]) -> str:
    """``median (min-max)`` with one decimal, or the single value."""
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", default="2,4,8")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--names", default=None, help="comma-separated zoo protocols (default: all)")
    parser.add_argument("--json", default=None, help="also write every run to this file")
    args = parser.parse_args(argv)
    worlds = [int(w) for w in args.worlds.split(",")]
    rows, record = [], []
    for name, scenario, epochs, launches in zoo_cases(args.names.split(",") if args.names else None):
        for world in worlds:
            runs = [timed_check(name, scenario, world, epochs, launches, args.timeout) for _ in range(args.runs)]
            record.append(dict(protocol=name, scenario=scenario, epochs=epochs, launches=launches, world=world, runs=runs))
            rows.append((name, f"{epochs}, {launches}", str(world), verdict(runs[-1]), str(runs[-1]["executions"]),
                         spread([r["wall"] for r in runs]), spread([r["cpu"] for r in runs])))
            print(f"{name} W={world}: {rows[-1][3]}, {rows[-1][5]} s wall", file=sys.stderr, flush=True)
    print_table(("protocol", "epochs, launches", "W", "verdict", "executions", "wall s", "cpu s"), rows)
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
