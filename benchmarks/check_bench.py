"""How fast ``syncverify check`` explores a scenario, and what each reduction buys.

    python -m benchmarks.check_bench [--protocol NAME] [--worlds 2,3,4,6,8] [--epochs 1,2]
                                     [--variants all,no-symmetry,no-liveness,brute-force]
                                     [--timeout 120] [--json FILE]

Each (world size, epochs, variant) runs in a fresh process under a hard timeout and prints one
row: verdict, consistent executions, candidate executions, seconds. The variants switch one
reduction off at a time:

* ``all``: what ``syncverify check`` does;
* ``no-symmetry``: ``ScenarioOptions(symmetry=False)``: every tile built, no slicing of unpolled
  lock copies, no rank symmetry group;
* ``no-liveness``: every register counts as live everywhere, so a failed poll iteration that read
  a new value is not cut (the plain spin-assume of GenMC/Dartagnan); done by replacing
  ``syncverify.explore.thread_paths.live_registers`` (which ``thread_paths`` calls) in the child process;
* ``brute-force``: ``explore(prune=False)``: every combination of thread paths that is merely
  supported, every reads-from and every coherence permutation (no combination search, no static
  causality, no per-location pruning).

The figures in docs/BENCHMARKS.md come from this script; for the headline configuration time
``python -m syncverify check`` as a whole process too (median of several runs, as
``benchmarks/zoo_bench.py`` does).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

VARIANTS = ("all", "no-symmetry", "no-liveness", "brute-force")


def run_one(protocol: str, scenario: str, world: int, epochs: int, variant: str, timeout: float) -> dict:
    """One exploration in this process (the child side)."""
    from syncverify.protocols.registry import load_protocol
    from syncverify.verdicts.check import CheckResult, check
    from syncverify.explore.driver import explore
    from syncverify.scenarios.build import ScenarioOptions, build

    built = build(load_protocol(protocol), ScenarioOptions(scenario=scenario, world_size=world, epochs=epochs,
                                                             symmetry=variant != "no-symmetry"))
    if variant == "no-liveness":
        import syncverify.explore.thread_paths as paths_module

        def every_register(thread, observed):
            regs = frozenset(r for ins in thread.instructions for r in (getattr(ins, "dst", None),) if r)
            return [regs] * (len(thread.instructions) + 1)

        paths_module.live_registers = every_register
    start = time.monotonic()
    if variant == "brute-force":
        explored = explore(built.program, timeout=timeout, keep=False, prune=False)
        result = CheckResult(built, executions=explored.complete_count + explored.hang_count,
                             candidates=explored.candidates, limit_hit=explored.limit_hit)
        verdict = "unknown" if explored.limit_hit else "explored"
    else:
        result = check(built, timeout=timeout)
        verdict = {True: "safe", False: "unsafe", None: "unknown"}[result.safe]
    return {"protocol": protocol, "scenario": scenario, "world_size": world, "epochs": epochs,
            "variant": variant, "verdict": verdict, "executions": result.executions,
            "candidates": result.candidates, "seconds": round(time.monotonic() - start, 3),
            "limit": result.limit_hit}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocol", default="barrier-fenced-release-acquire")
    parser.add_argument("--scenario", default="all-reduce")
    parser.add_argument("--worlds", default="2,3,4,6,8")
    parser.add_argument("--epochs", default="1,2")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per exploration")
    parser.add_argument("--skip-after-timeout", action="store_true", default=True,
                        help="once a variant times out at some world size, skip its larger ones")
    parser.add_argument("--json", help="append one JSON line per run to this file")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # child mode: a JSON object of run_one's arguments
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(run_one(**json.loads(args.one))))
        return 0
    rows = []
    print("| W | epochs | variant | verdict | executions | candidates | seconds |")
    print("|---|---|---|---|---|---|---|")
    for epochs in (int(e) for e in args.epochs.split(",")):
        for variant in args.variants.split(","):
            if variant not in VARIANTS:
                print(f"check_bench: unknown variant {variant!r}; known: {', '.join(VARIANTS)}", file=sys.stderr)
                return 2
            gave_up = False
            for world in (int(w) for w in args.worlds.split(",")):
                if gave_up:
                    print(f"| {world} | {epochs} | {variant} | skipped (smaller W timed out) | | | |")
                    continue
                spec = dict(protocol=args.protocol, scenario=args.scenario, world=world, epochs=epochs,
                            variant=variant, timeout=args.timeout)
                try:
                    out = subprocess.run([sys.executable, "-m", "benchmarks.check_bench", "--one", json.dumps(spec)],
                                         capture_output=True, text=True, timeout=args.timeout + 60)
                    row = json.loads(out.stdout.strip().splitlines()[-1])
                except subprocess.TimeoutExpired:  # the explorer's own timeout did not stop it
                    row = dict(spec, verdict="killed", executions=None, candidates=None,
                               seconds=args.timeout + 60, limit="killed")
                rows.append(row)
                print(f"| {world} | {epochs} | {variant} | {row['verdict']} | {row['executions']} | "
                      f"{row['candidates']} | {row['seconds']} |", flush=True)
                if row["limit"]:
                    gave_up = args.skip_after_timeout
    if args.json:
        with open(args.json, "a") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
