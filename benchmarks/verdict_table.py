"""Every built-in protocol's verdict, violation kinds and execution counts, for before/after checks.

    python -m benchmarks.verdict_table [--scenarios all-reduce,all-scatter] [--worlds 2,3]
                                       [--epochs 1,2] [--timeout 60] [--jobs 2] --out FILE.jsonl
    python -m benchmarks.verdict_table --compare BEFORE.jsonl AFTER.jsonl

One JSON line per (protocol, scenario, world size, epochs, reset policy): verdict, violation kinds,
consistent executions, candidates, seconds. Each check runs in a child process under a hard
timeout (a check that does not finish is recorded as ``timeout``, never waited on). With two
epochs every reset policy is checked; with one epoch only the protocol's own.

``--compare`` prints the rows whose verdict, kinds or execution counts differ, and exits 1 if any
do (a refactor must exit 0).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

RESETS = ("none", "host-between-barriers", "host-racing")


def run_one(spec: dict) -> dict:
    """One check in this process (the child side)."""
    from syncverify.verdicts.check import check
    from syncverify.protocols.registry import load_protocol
    from syncverify.scenarios.build import ScenarioOptions, build

    built = build(load_protocol(spec["protocol"]),
                  ScenarioOptions(scenario=spec["scenario"], world_size=spec["world_size"],
                                  epochs=spec["epochs"], reset=spec["reset"]))
    result = check(built, timeout=spec["timeout"])
    return dict(spec, verdict={True: "safe", False: "unsafe", None: "unknown"}[result.safe],
                kinds=sorted(result.violations), executions=result.executions,
                candidates=result.candidates, seconds=round(result.seconds, 3),
                limit=result.limit_hit, reset_used=built.options.reset)


def specs(scenarios: list[str], worlds: list[int], epochs: list[int], timeout: float) -> list[dict]:
    from syncverify.protocols.registry import builtin_names

    out = []
    for protocol in builtin_names():
        for scenario in scenarios:
            for world in worlds:
                for e in epochs:
                    for reset in (RESETS if e > 1 else (None,)):
                        out.append(dict(protocol=protocol, scenario=scenario, world_size=world, epochs=e,
                                        reset=reset, timeout=timeout))
    return out


def run_child(spec: dict) -> dict:
    try:
        done = subprocess.run([sys.executable, "-m", "benchmarks.verdict_table", "--one", json.dumps(spec)],
                              capture_output=True, text=True, timeout=spec["timeout"] + 30)
    except subprocess.TimeoutExpired:
        return dict(spec, verdict="timeout")
    if done.returncode != 0:
        return dict(spec, verdict="error", error=done.stderr.strip().splitlines()[-1:] or [""])
    return json.loads(done.stdout.strip().splitlines()[-1])


def key(row: dict) -> tuple:
    return (row["protocol"], row["scenario"], row["world_size"], row["epochs"], row["reset"])


def compare(before: str, after: str) -> int:
    rows = {}
    for tag, path in (("before", before), ("after", after)):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    rows.setdefault(key(row), {})[tag] = row
    return print_differences(rows, ("verdict", "kinds", "executions", "candidates"))


def print_differences(rows: dict, fields: tuple[str, ...]) -> int:
    """Print each key whose ``before`` and ``after`` rows differ in ``fields``, then a count; 1 if any do."""
    differ = 0
    for k, pair in sorted(rows.items(), key=lambda kv: str(kv[0])):
        b, a = pair.get("before", {}), pair.get("after", {})
        if any(b.get(f) != a.get(f) for f in fields):
            differ += 1
            print(f"{k}: " + "; ".join(f"{f} {b.get(f)} -> {a.get(f)}" for f in fields if b.get(f) != a.get(f)))
    print(f"{len(rows)} rows, {differ} differ")
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default="all-reduce,all-scatter")
    parser.add_argument("--worlds", default="2")
    parser.add_argument("--epochs", default="1,2")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(run_one(json.loads(args.one))))
        return 0
    if args.compare:
        return compare(*args.compare)
    if not args.out:
        parser.error("--out FILE is required (or --compare)")
    todo = specs(args.scenarios.split(","), [int(w) for w in args.worlds.split(",")],
                 [int(e) for e in args.epochs.split(",")], args.timeout)
    start = time.monotonic()
    with open(args.out, "w", encoding="utf-8") as f, ThreadPoolExecutor(args.jobs) as pool:
        for n, row in enumerate(pool.map(run_child, todo), 1):
            f.write(json.dumps(row) + "\n")
            f.flush()
            print(f"[{n}/{len(todo)} {time.monotonic() - start:.0f}s] {row['protocol']} {row['scenario']} "
                  f"W={row['world_size']} e={row['epochs']} {row['reset']}: {row['verdict']} "
                  f"{row.get('kinds', '')} {row.get('executions', '')} {row.get('seconds', '')}s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
