"""Benchmark the explorer on generated four-thread litmus tests (issue 10, performance).

    python -m benchmarks.generated_litmus_bench [--count 100] [--seed 10] [--timeout 30]
                                                [--instructions 1,2] [--json FILE]

Each test: four threads (placed on one or two GPUs and CTAs), one or two instructions each (the
shape of the classic litmus tests: IRIW, WRC, SB, MP with a fourth thread),
drawn from weak/relaxed/acquire loads, weak/relaxed/release stores, atomics (add, exch, cas, red)
and fences, over two locations, with racing weak stores common (every location is written by
several threads). A seeded ``random.Random`` draws them, so the same command gives the same tests.
Prints one line per slow test and a summary: median, 90th percentile and largest seconds, and how
many tests took a second or more.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

from syncverify.explore.driver import explore
from syncverify.program import Atomic, Fence, Load, Program, Store, Thread

LOCATIONS = ("x", "y")
SCOPES = ("cta", "gpu", "sys")


def _instruction(rng: random.Random, reg: str):
    loc = rng.choice(LOCATIONS)
    kind = rng.choices(("load", "store", "atomic", "fence"), weights=(4, 4, 2, 1))[0]
    if kind == "load":
        sem = rng.choice(("weak", "relaxed", "acquire"))
        return Load(reg, loc, sem, None if sem == "weak" else rng.choice(SCOPES))
    if kind == "store":
        sem = rng.choice(("weak", "weak", "relaxed", "release"))
        return Store(loc, rng.choice((1, 2)), sem, None if sem == "weak" else rng.choice(SCOPES))
    if kind == "atomic":
        op = rng.choice(("add", "exch", "cas"))
        scope = rng.choice(SCOPES)
        if op == "add" and rng.random() < 0.3:
            return Atomic("add", None, loc, (1,), rng.choice(("relaxed", "release")), scope)
        sem = rng.choice(("relaxed", "acquire", "release", "acq_rel"))
        operands = (rng.choice((0, 1)), 2) if op == "cas" else (rng.choice((1, 2)),)
        return Atomic(op, reg, loc, operands, sem, scope)
    return Fence(rng.choice(("sc", "acq_rel")), rng.choice(SCOPES))


def generated(seed: int, index: int, instructions: tuple[int, int] = (1, 2)) -> Program:
    """The ``index``-th generated four-thread test of ``seed``, each thread with between
    ``instructions[0]`` and ``instructions[1]`` instructions."""
    rng = random.Random(f"{seed}:{index}")
    threads = []
    for t in range(4):
        body = tuple(_instruction(rng, f"r{i}") for i in range(rng.randint(*instructions)))
        threads.append(Thread(f"P{t}", rng.randint(0, 1), rng.randint(0, 1), body))
    return Program(f"gen-{seed}-{index}", tuple(threads))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--seed", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--instructions", default="1,2", help="fewest,most instructions per thread")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    rows = []
    for i in range(args.count):
        low, high = (int(n) for n in args.instructions.split(","))
        program = generated(args.seed, i, (low, high))
        start = time.perf_counter()
        result = explore(program, keep=False, timeout=args.timeout)
        seconds = time.perf_counter() - start
        rows.append(dict(test=program.name, seconds=round(seconds, 4), executions=result.complete_count,
                         candidates=result.candidates, limit=result.limit_hit))
        if seconds >= 1.0 or result.limit_hit:
            print(f"{program.name}: {seconds:.3f} s, {result.complete_count} executions, limit {result.limit_hit}")
    times = sorted(r["seconds"] for r in rows)
    p90 = times[int(0.9 * (len(times) - 1))]
    slow = sum(1 for t in times if t >= 1.0)
    print(f"{len(rows)} generated four-thread tests: median {statistics.median(times):.3f} s, "
          f"90th percentile {p90:.3f} s, largest {times[-1]:.3f} s, {slow} at 1 s or more, "
          f"{sum(1 for r in rows if r['limit'])} hit a limit")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
