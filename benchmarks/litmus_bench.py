"""Benchmark the explorer on the known-answer litmus suite (issue: litmus performance).

For every litmus file: seconds, consistent executions, candidates checked, executions per second,
and the brute-force enumeration's candidates on the same test (no pruning: every reads-from
choice, every partial order of each location's writes as coherence), so the pruning is measured.
"same outcomes" compares the two's final states and whether each can hang (their execution
counts differ since coherence is partial: brute force counts every partial order, the explorer
the least coherence of each choice). Prints a Markdown table; the last line sums it up.

    python benchmarks/litmus_bench.py [FILES...]   (default: tests/litmus/known/*.litmus)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from syncverify.explore.driver import brute_force, explore
from syncverify.litmus.parser import parse_litmus_file


def main(argv: list[str]) -> int:
    files = [Path(a) for a in argv] or sorted(Path("tests/litmus/known").glob("*.litmus"))
    print("| test | threads | seconds | executions | candidates | exec/s | brute-force candidates | brute-force seconds | same outcomes |")
    print("|---|---|---|---|---|---|---|---|---|")
    total, total_exec, worst = 0.0, 0, (0.0, "")
    for f in files:
        program = parse_litmus_file(f)
        start = time.perf_counter()
        result = explore(program)
        seconds = time.perf_counter() - start
        bstart = time.perf_counter()
        brute = brute_force(program, timeout=60)
        bseconds = time.perf_counter() - bstart
        executions = result.complete_count + result.hang_count
        same = "yes" if brute.limit_hit is None and (result.outcomes, result.can_hang) == (brute.outcomes, brute.can_hang) else (
            "brute-force timed out" if brute.limit_hit else "NO")
        rate = executions / seconds if seconds > 0 else float("inf")
        print(f"| {program.name} | {len(program.threads)} | {seconds:.3f} | {executions} | {result.candidates} | "
              f"{rate:.0f} | {brute.candidates} | {bseconds:.3f} | {same} |")
        total += seconds
        total_exec += executions
        worst = max(worst, (seconds, program.name))
    print(f"\n{len(files)} tests in {total:.2f} s (explorer only), {total_exec} executions, "
          f"{total_exec / total:.0f} executions/s overall; slowest {worst[1]} {worst[0]:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
