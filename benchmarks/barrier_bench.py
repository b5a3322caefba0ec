"""Benchmark the explorer on litmus tests with named barriers (issue 10, part B: performance).

Times every shipped litmus test (``tests/litmus/known`` and ``syncverify/litmus/examples``) and
100 generated four-thread programs of one CTA with named barriers (seeded; each thread 1-3
accesses on ``x``/``y`` and 1-2 of ``bar.sync``/``bar.arrive`` on barrier 0 or 1, each barrier with
one count for all its uses, none (every user), 2 or 4: the ISA expects every participant to
give the same count), and prints each set's total, slowest and how many took a second or more.
The target: under a second per test.

    python benchmarks/barrier_bench.py [SEED]
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

from syncverify.explore.driver import explore
from syncverify.litmus.parser import parse_litmus_file
from syncverify.program import Barrier, Load, Program, Store, Thread

GENERATED = 100


def timed(program: Program) -> float:
    start = time.perf_counter()
    explore(program, keep=False, timeout=30)
    return time.perf_counter() - start


def generated(rnd: random.Random) -> Program:
    """One four-thread program of one CTA with named barriers (see the module docstring)."""
    threads = []
    counts = {b: rnd.choice((None, 2, 4)) for b in (0, 1)}
    for t in range(4):
        body: list = []
        for i in range(rnd.randint(1, 3)):
            loc = rnd.choice("xy")
            sem = rnd.choice(("weak", "relaxed"))
            scope = None if sem == "weak" else "cta"
            body.append(Store(loc, rnd.randint(1, 2), sem, scope) if rnd.random() < 0.5 else
                        Load(f"r{i}", loc, sem, scope))
        for _ in range(rnd.randint(1, 2)):
            body.insert(rnd.randint(0, len(body)),
                        Barrier(rnd.choice(("sync", "arrive")), b := rnd.randint(0, 1), counts[b]))
        threads.append(Thread(f"P{t}", 0, 0, tuple(body)))
    return Program("generated", tuple(threads))


def main(argv: list[str]) -> int:
    rnd = random.Random(int(argv[0]) if argv else 10)
    files = sorted(Path("tests/litmus/known").glob("*.litmus")) + sorted(Path("syncverify/litmus/examples").glob("*.litmus"))
    shipped = sorted(((timed(parse_litmus_file(f)), f.name) for f in files), reverse=True)
    made = sorted(((timed(generated(rnd)), f"#{i}") for i in range(GENERATED)), reverse=True)
    for label, rows in (("shipped litmus", shipped), ("generated 4-thread with barriers", made)):
        total = sum(s for s, _ in rows)
        over = sum(1 for s, _ in rows if s >= 1.0)
        print(f"{label}: {len(rows)} tests, {total:.2f} s in all, slowest {rows[0][1]} {rows[0][0]:.3f} s, "
              f"{over} at 1 s or more")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
