"""Issue 24's exchange rows of the performance table, with and without the rf-symmetry pruning.

    PYTHONPATH=TREE python benchmarks/xchg_rows.py [--timeout 60] [--jobs 14] [--out FILE.jsonl]
    PYTHONPATH=TREE python benchmarks/xchg_rows.py --compare 3,4:1,2 [--timeout 10] [--jobs 14] [--out FILE.jsonl]

Each row (protocol, scenario, world size, calls) is checked in a process of its own, as
``syncverify check`` checks it (the scenario built with every builder reduction), once with every
pruning and once without ``rf-symmetry``, with ``--timeout`` seconds each; the rows run ``--jobs``
at a time. One JSON line per check as it finishes (verdict kinds, bound hit, executions, the
call or stage programs' seconds, the process's CPU seconds and wall seconds), then a compact
table. ``--compare`` checks every built-in protocol (in each scenario) and zoo protocol (in its
own) with and without the pruning instead and counts the differences. Needs only the model's dependencies (networkx), not the CLI's: it runs on the device's CPUs.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

ROWS = [
    ("xchg-flag", "all-reduce", 8, 2),
    ("xchg-flag", "all-scatter", 8, 2),
    ("xchg-flag", "gemm-reduce-scatter", 8, 2),
    ("xchg-flag", "all-gather-gemm", 8, 2),
    ("xchg-flag", "all-gather-gemm", 4, 3),
    ("release-xchg-cas-acquire", "all-gather-gemm", 8, 2),
    ("barrier-release-xchg-cas-acquire", "all-gather-gemm", 8, 2),
]


def one(row: tuple, without: tuple[str, ...], timeout: float) -> dict:
    """Check one row in this process; its figures."""
    from syncverify.protocols import load_protocol
    from syncverify.scenarios.build import ScenarioOptions, build
    from syncverify.verdicts.check import check

    name, scenario, world, calls = row
    cpu, wall = time.process_time(), time.monotonic()
    built = build(load_protocol(name), ScenarioOptions(scenario=scenario, world_size=world, epochs=calls))
    result = check(built, timeout=timeout, without=frozenset(without))
    verdict = "unknown" if result.safe is None else "safe" if result.safe else "unsafe"
    return dict(protocol=name, scenario=scenario, world=world, calls=calls, without=list(without),
                verdict=verdict, kinds=sorted(result.violations), limit=result.limit_hit,
                executions=result.executions, cpu=round(time.process_time() - cpu, 2),
                wall=round(time.monotonic() - wall, 1))


def compared(case: tuple, timeout: float) -> dict:
    """One protocol in one scenario checked with and without ``rf-symmetry``: the kinds of each."""
    from syncverify.errors import SyncVerifyError
    from syncverify.protocols import load_protocol
    from syncverify.scenarios.build import ScenarioOptions, build
    from syncverify.verdicts.check import check

    name, scenario, world, calls = case
    try:
        built = build(load_protocol(name), ScenarioOptions(scenario=scenario, world_size=world, epochs=calls))
    except SyncVerifyError:
        return dict(case=list(case), outcome="n/a")
    cpu = time.process_time()
    both = [check(built, timeout=timeout, without=frozenset(off)) for off in ((), ("rf-symmetry",))]
    kinds = [sorted(r.violations) for r in both]
    outcome = "bound" if any(r.limit_hit for r in both) else "same" if kinds[0] == kinds[1] else "DIFFERENT"
    return dict(case=list(case), outcome=outcome, with_it=kinds[0], without_it=kinds[1],
                executions=[r.executions for r in both], cpu=round(time.process_time() - cpu, 2))


def compare(worlds: list[int], calls: list[int], timeout: float, jobs: int, out: str | None) -> int:
    """Every built-in protocol in every scenario and every zoo protocol in its own, at ``worlds`` x
    ``calls``, with and without ``rf-symmetry``; a line per difference or bound, counts last."""
    from syncverify.protocols.registry import builtin_names, load_protocol, zoo_names

    scenarios = ("all-reduce", "all-scatter", "all-gather-gemm", "gemm-reduce-scatter")
    pairs = [(n, s) for n in builtin_names() for s in scenarios] + [(n, load_protocol(n).zoo.scenario)
                                                                      for n in zoo_names()]
    counts: dict[str, int] = {}
    with ProcessPoolExecutor(jobs) as pool:
        futures = [pool.submit(compared, (n, s, w, c), timeout) for n, s in pairs for w in worlds for c in calls]
        for future in as_completed(futures):
            line = future.result()
            counts[line["outcome"]] = counts.get(line["outcome"], 0) + 1
            if line["outcome"] not in ("same", "n/a"):
                print(json.dumps(line), flush=True)
            if out:
                with open(out, "a", encoding="utf-8") as f:
                    f.write(json.dumps(line) + "\n")
    print(f"compare: {counts}", flush=True)
    return 1 if counts.get("DIFFERENT") else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--jobs", type=int, default=14)
    parser.add_argument("--out", help="a JSON line per check, appended as it finishes")
    parser.add_argument("--compare", help="WORLDS:CALLS (e.g. 3,4:1,2): compare every built-in and zoo "
                        "protocol with and without rf-symmetry instead of the rows")
    args = parser.parse_args()
    if args.compare:
        worlds, _, calls = args.compare.partition(":")
        return compare([int(w) for w in worlds.split(",")], [int(c) for c in calls.split(",")], args.timeout,
                       args.jobs, args.out)
    runs = [(row, without) for row in ROWS for without in ((), ("rf-symmetry",))]
    done: list[dict] = []
    with ProcessPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(one, row, without, args.timeout) for row, without in runs]
        for future in as_completed(futures):
            line = future.result()
            done.append(line)
            print(json.dumps(line), flush=True)
            if args.out:
                with open(args.out, "a", encoding="utf-8") as f:
                    f.write(json.dumps(line) + "\n")
    print("\n| protocol | scenario | W | calls | with rf-symmetry | without |")
    print("|---|---|---|---|---|---|")
    for row in ROWS:
        cells = []
        for without in ([], ["rf-symmetry"]):
            r = next(d for d in done if (d["protocol"], d["scenario"], d["world"], d["calls"]) == row
                     and d["without"] == without)
            bound = f", {r['limit']} hit" if r["limit"] else ""
            cells.append(f"{r['verdict']} ({', '.join(r['kinds'])}){bound}, {r['executions']} executions, "
                         f"{r['cpu']} CPU s, {r['wall']} s")
        print(f"| {row[0]} | {row[1]} | {row[2]} | {row[3]} | {cells[0]} | {cells[1]} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
