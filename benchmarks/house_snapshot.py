"""A snapshot of what the house's moves must not change, taken the same way on any tree:

    python -m benchmarks.house_snapshot verdicts --out V.jsonl [--worlds 2,3] [--timeout 120] [--jobs 2]
    python -m benchmarks.house_snapshot litmus --out L.jsonl
    python -m benchmarks.house_snapshot ptx --out P.jsonl      # every PTX tests/test_ptx_audit.py compiles
    python -m benchmarks.house_snapshot compare BEFORE AFTER

``verdicts``: every built-in and zoo protocol in every scenario at each world size (one call, the
protocol's own reset), each in a child process under a hard timeout: verdict, kinds, executions.
``litmus``: every shipped litmus test's answer and execution count. ``ptx``: runs the PTX audit
with ``compile_ptx`` wrapped, and records each compiled kernel's name and the hash of its PTX with
line information stripped (``.loc``, ``.file`` and the debug sections). It imports the modules by
their names before and after the house (``syncverify.check`` / ``syncverify.verdicts.check``), so
one script measures both trees. ``compare`` prints every row that differs; exit 1 if any does.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import re
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.verdict_table import print_differences

SCENARIOS = ("all-reduce", "all-scatter", "all-gather-gemm", "gemm-reduce-scatter")


def _module(*names: str):
    for name in names:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError:
            continue
    raise ModuleNotFoundError(names[-1])


def _protocols() -> list[str]:
    registry = _module("syncverify.protocols.registry")
    zoo = sorted(str(p) for p in (Path(registry.__file__).parent / "zoo").glob("*.toml"))
    return list(registry.builtin_names()) + zoo


def verdict_row(spec: dict) -> dict:
    check = _module("syncverify.verdicts.check", "syncverify.check")
    scenarios = _module("syncverify.scenarios.build", "syncverify.scenarios")
    registry = _module("syncverify.protocols.registry")
    protocol = registry.load_protocol(spec["protocol"])
    try:
        built = scenarios.build(protocol, scenarios.ScenarioOptions(scenario=spec["scenario"],
                                                                    world_size=spec["world_size"]))
    except Exception as error:  # a protocol a scenario refuses: recorded as such, both sides alike
        return dict(spec, verdict="refused", error=f"{type(error).__name__}: {error}")
    result = check.check(built, timeout=spec["timeout"])
    return dict(spec, verdict={True: "safe", False: "unsafe", None: "unknown"}[result.safe],
                kinds=sorted(result.violations), executions=result.executions, limit=result.limit_hit)


def _child(spec: dict) -> dict:
    try:
        done = subprocess.run([sys.executable, "-m", "benchmarks.house_snapshot", "one", json.dumps(spec)],
                              capture_output=True, text=True, timeout=spec["timeout"] + 60)
    except subprocess.TimeoutExpired:
        return dict(spec, verdict="timeout")
    if done.returncode != 0:
        return dict(spec, verdict="error", error=(done.stderr.strip().splitlines() or [""])[-1])
    return json.loads(done.stdout.strip().splitlines()[-1])


def verdicts(out: str, worlds: list[int], timeout: float, jobs: int) -> None:
    todo = [dict(protocol=Path(p).stem if p.endswith(".toml") else p, path=p, scenario=s, world_size=w,
                 timeout=timeout) for p in _protocols() for s in SCENARIOS for w in worlds]
    for spec in todo:
        spec["protocol"] = spec.pop("path")
    start = time.monotonic()
    with open(out, "w", encoding="utf-8") as f, ThreadPoolExecutor(jobs) as pool:
        for n, row in enumerate(pool.map(_child, todo), 1):
            row["protocol"] = Path(row["protocol"]).stem if row["protocol"].endswith(".toml") else row["protocol"]
            f.write(json.dumps(row, sort_keys=True) + "\n")
            print(f"[{n}/{len(todo)} {time.monotonic() - start:.0f}s] {row['protocol']} {row['scenario']} "
                  f"W={row['world_size']}: {row['verdict']} {row.get('kinds', '')} {row.get('executions', '')}",
                  flush=True)


def litmus(out: str) -> None:
    parser = _module("syncverify.litmus.parser")
    runner = _module("syncverify.litmus.runner")
    folders = (Path(parser.__file__).parent / "examples", Path("tests/litmus/known"))
    with open(out, "w", encoding="utf-8") as f:
        for path in sorted(p for folder in folders for p in folder.glob("*.litmus")):
            for program in _programs(parser.parse_litmus_file(path)):
                result = runner.run_litmus(program)
                row = {"protocol": f"{path.name}:{program.name}", "scenario": "litmus", "world_size": 0,
                       "verdict": f"{result.validation} {result.observation} {result.positive}/{result.negative} "
                                  f"hang={result.can_hang} unknown={result.unknown}",
                       "executions": result.executions}
                f.write(json.dumps(row, sort_keys=True) + "\n")


def _programs(parsed):
    return parsed if isinstance(parsed, (list, tuple)) else [parsed]


_LINE_INFO = re.compile(r"^\s*(\.loc|\.file)\b.*$", re.M)


def strip_line_info(ptx: str) -> str:
    """PTX without line information: ``.loc``/``.file`` lines and the ``.debug_*`` sections."""
    ptx = _LINE_INFO.sub("", ptx)
    ptx = re.sub(r"\.section\s+\.debug_\w+\s*\{.*?\n\s*\}", "", ptx, flags=re.S)
    return "\n".join(line for line in ptx.splitlines() if line.strip())


def ptx(out: str) -> None:
    import pytest

    seen: list[dict] = []

    class Recorder:
        def pytest_configure(self, config):
            compile_module = importlib.import_module("syncverify.kernels.compile")
            original = compile_module.compile_ptx

            def recorded(fn, built, meta, **kwargs):
                text = original(fn, built, meta, **kwargs)
                name = getattr(getattr(fn, "fn", fn), "__name__", str(fn))
                seen.append({"protocol": f"{name}:{built.protocol.name}", "scenario": "ptx", "world_size": 0,
                             "verdict": hashlib.sha256(strip_line_info(text).encode()).hexdigest()[:16]})
                return text

            compile_module.compile_ptx = recorded

    code = pytest.main(["-q", "-p", "no:cacheprovider", "tests/test_ptx_audit.py"], plugins=[Recorder()])
    counted = Counter((row["protocol"], row["verdict"]) for row in seen)
    with open(out, "w", encoding="utf-8") as f:
        for (name, digest), n in sorted(counted.items()):
            f.write(json.dumps({"protocol": name, "scenario": "ptx", "world_size": 0, "verdict": digest,
                                "executions": n}, sort_keys=True) + "\n")
    print(f"audit exit {code}; {len(seen)} compiles, {len(counted)} distinct (kernel, protocol, PTX)")


def compare(before: str, after: str) -> int:
    def rows(path: str) -> dict:
        found: dict = {}
        for line in Path(path).read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                found[(row["protocol"], row["scenario"], row["world_size"], row.get("verdict")
                       if row["scenario"] == "ptx" else "")] = row
        return found

    b, a = rows(before), rows(after)
    paired = {key: {"before": b.get(key, {}), "after": a.get(key, {})} for key in set(b) | set(a)}
    return print_differences(paired, ("verdict", "kinds", "executions"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("verdicts", "litmus", "ptx", "compare", "one"))
    parser.add_argument("args", nargs="*")
    parser.add_argument("--out")
    parser.add_argument("--worlds", default="2,3")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    if args.what == "one":
        print(json.dumps(verdict_row(json.loads(args.args[0]))))
    elif args.what == "compare":
        return compare(*args.args)
    elif args.what == "verdicts":
        verdicts(args.out, [int(w) for w in args.worlds.split(",")], args.timeout, args.jobs)
    elif args.what == "litmus":
        litmus(args.out)
    else:
        ptx(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
