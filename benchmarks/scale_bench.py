"""The performance table of issue 24: every built-in and zoo protocol at the sizes users run.

    python -m benchmarks.scale_bench [--timeout 60] [--jobs 1] [--names a,b] [--configs w8e2,w4e3,w2e3prs]
                                     [--bound SECONDS] --out FILE.jsonl
    python -m benchmarks.scale_bench --table OLD.jsonl [NEW.jsonl]

Three configurations, each a whole ``python -m syncverify check NAME --scenario S ... --timeout T
--json`` process (start-up included):

* ``w8e2``: ``--world-size 8 --epochs 2``;
* ``w4e3``: ``--world-size 4 --epochs 3``;
* ``w2e3prs``: ``--world-size 2 --epochs 3 --launches per-rank-stream``.

Built-in protocols run in all four scenarios, zoo protocols in the scenario their ``[zoo]`` table
names (a scenario that refuses the protocol, exit 2, is recorded as ``n/a``). Each case runs under
a hard wall-clock limit of ``--timeout`` + 30 s on top of the check's own ``--timeout`` (a case
past it is killed and recorded as ``killed``). One JSON line per case is appended to ``--out`` as
it finishes, so a run cut short keeps what it measured. ``--table`` prints the markdown table of
one run, or of two side by side (old, new). The run ends with a compact table: per configuration,
the cases decided within ``--timeout`` (a verdict with no bound hit) of the applicable ones, and
each miss. ``--bound``: no case starts that could end after that many seconds (``not run``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ("all-reduce", "all-scatter", "all-gather-gemm", "gemm-reduce-scatter")
CONFIGS = {
    "w8e2": ["--world-size", "8", "--epochs", "2"],
    "w4e3": ["--world-size", "4", "--epochs", "3"],
    "w2e3prs": ["--world-size", "2", "--epochs", "3", "--launches", "per-rank-stream"],
}


def cases(names: list[str] | None, configs: list[str]) -> list[dict]:
    """(protocol, scenario, config) of every case, built-ins in every scenario, zoo in its own."""
    from syncverify.protocols.registry import builtin_names, load_protocol, zoo_names

    pairs = [(name, scenario) for name in builtin_names() for scenario in SCENARIOS]
    pairs += [(name, load_protocol(name).zoo.scenario) for name in zoo_names()]
    return [dict(protocol=name, scenario=scenario, config=config) for config in configs
            for name, scenario in pairs if names is None or name in names]


def run_case(case: dict, timeout: float, root: Path) -> dict:
    """One whole-process check: exit code, verdict, kinds, executions, wall seconds, and the
    process's CPU seconds (``cpu``: what a loaded machine cannot spoil, unlike wall seconds)."""
    command = [sys.executable, "-m", "syncverify", "check", case["protocol"], "--scenario", case["scenario"],
               *CONFIGS[case["config"]], "--timeout", str(timeout), "--json"]
    env = {**os.environ, "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(command, cwd=root, env=env, stdout=out, stderr=err, text=True)
        while True:  # os.wait4 gives the child's own CPU time, which subprocess.run does not
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - start > timeout + 30:
                process.kill()
                _pid, status, usage = os.wait4(process.pid, 0)
                return dict(case, verdict="killed", wall=round(time.perf_counter() - start, 2),
                            cpu=round(usage.ru_utime + usage.ru_stime, 2))
            time.sleep(0.05)
        returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    wall = round(time.perf_counter() - start, 2)
    cpu = round(usage.ru_utime + usage.ru_stime, 2)
    if returncode == 2:
        return dict(case, verdict="n/a", wall=wall, cpu=cpu, error=stderr.strip()[-200:])
    try:
        answer = json.loads(stdout)
    except json.JSONDecodeError:
        return dict(case, verdict="error", wall=wall, cpu=cpu, error=stderr.strip()[-300:])
    safe = answer.get("safe")
    return dict(case, verdict={True: "safe", False: "unsafe", None: "unknown"}[safe], wall=wall, cpu=cpu,
                kinds=sorted({v["kind"] for v in answer.get("violations", [])}),
                executions=answer.get("executions"), limit=answer.get("limit"))


def cell(row: dict | None) -> str:
    """One table cell: verdict (kinds) and seconds."""
    if row is None:
        return "-"
    if row["verdict"] == "n/a":
        return "n/a"
    kinds = f" ({', '.join(row['kinds'])})" if row.get("kinds") else ""
    bound = f", {row['limit']} hit" if row.get("limit") and row["verdict"] != "unknown" else ""
    cpu = f" ({row['cpu']:.1f} CPU s)" if "cpu" in row else ""
    return f"{row['verdict']}{kinds}{bound} {row['wall']:.1f} s{cpu}"


def read_rows(path: str) -> dict[tuple, dict]:
    rows = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                rows[(row["protocol"], row["scenario"], row["config"])] = row
    return rows


def print_markdown(old: dict[tuple, dict], new: dict[tuple, dict] | None) -> None:
    """The table: one row per (protocol, scenario), one column per config (old -> new)."""
    configs = [c for c in CONFIGS if any(k[2] == c for k in old)]
    pairs = sorted({k[:2] for k in old})
    print("| protocol | scenario | " + " | ".join(configs) + " |")
    print("|---|---|" + "---|" * len(configs))
    for protocol, scenario in pairs:
        cells = []
        for c in configs:
            before = old.get((protocol, scenario, c))
            cells.append(cell(before) if new is None else f"{cell(before)} → {cell(new.get((protocol, scenario, c)))}")
        print(f"| {protocol} | {scenario} | " + " | ".join(cells) + " |")
    for tag, rows in (("old", old), ("new", new)):
        if rows is None:
            continue
        decided = [r for r in rows.values() if r["verdict"] in ("safe", "unsafe")]
        within = [r for r in decided if r["wall"] <= 60]
        applicable = [r for r in rows.values() if r["verdict"] != "n/a"]
        print(f"\n{tag}: {len(within)} of {len(applicable)} cases decided within 60 s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--names", default=None, help="comma-separated protocols (default: every one)")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--root", default=str(ROOT), help="the tree to check (default: this one)")
    parser.add_argument("--bound", type=float, default=0.0,
                        help="wall-clock seconds for the whole run: no case starts that could end after it (0: none)")
    parser.add_argument("--out")
    parser.add_argument("--table", nargs="+", metavar="JSONL")
    args = parser.parse_args(argv)
    if args.table:
        old = read_rows(args.table[0])
        print_markdown(old, read_rows(args.table[1]) if len(args.table) > 1 else None)
        return 0
    if not args.out:
        parser.error("--out FILE is required (or --table)")
    unknown = sorted(set(args.configs.split(",")) - set(CONFIGS))
    if unknown:
        parser.error(f"unknown config {unknown[0]!r}; choose from {', '.join(CONFIGS)}")
    todo = cases(args.names.split(",") if args.names else None, args.configs.split(","))
    start = time.monotonic()
    late = start + args.bound - args.timeout - 30 if args.bound else float("inf")

    def one(case: dict) -> dict:
        if time.monotonic() > late:  # it could not finish within --bound
            return dict(case, verdict="not run", wall=0.0)
        return run_case(case, args.timeout, Path(args.root))

    rows = []
    with open(args.out, "a", encoding="utf-8") as f, ThreadPoolExecutor(args.jobs) as pool:
        for n, row in enumerate(pool.map(one, todo), 1):
            rows.append(row)
            f.write(json.dumps(row) + "\n")
            f.flush()
            print(f"[{n}/{len(todo)} {time.monotonic() - start:.0f}s] {row['protocol']} {row['scenario']} "
                  f"{row['config']}: {cell(row)}", flush=True)
    print_summary(rows, args.timeout)
    return 0


def print_summary(rows: list[dict], limit: float) -> None:
    """The compact table: per configuration, cases decided within ``limit`` seconds of the applicable ones,
    and each miss."""
    print(f"\n{'config':<9} {'within':>7} {'applicable':>11} {'unknown':>8} {'slower':>7} {'not run':>8}")
    for config in CONFIGS:
        mine = [r for r in rows if r["config"] == config and r["verdict"] != "n/a"]
        if not mine:
            continue
        decided = [r for r in mine if r["verdict"] in ("safe", "unsafe")]
        within = [r for r in decided if r["wall"] <= limit and not r.get("limit")]
        print(f"{config:<9} {len(within):>7} {len(mine):>11} "
              f"{sum(r['verdict'] in ('unknown', 'killed', 'error') for r in mine):>8} {len(decided) - len(within):>7} "
              f"{sum(r['verdict'] == 'not run' for r in mine):>8}")
    for r in rows:
        if r["verdict"] not in ("n/a", "not run") and not (r["verdict"] in ("safe", "unsafe") and r["wall"] <= limit
                                                          and not r.get("limit")):
            print(f"miss: {r['protocol']} {r['scenario']} {r['config']}: {cell(r)}")


if __name__ == "__main__":
    raise SystemExit(main())
