"""CPU seconds per part of the issue-24 checks still unknown (in-process, one run each).

    PYTHONPATH=TREE python benchmarks/scale_parts.py [--timeout S] [--only N,...]

Each case is built as ``syncverify check`` builds it, then each of its programs (the whole one, or
each stage and call program the exact splits make) is checked on its own with ``--timeout`` (default
30 s) and printed as one JSON line: the part, the threads per role, the ranks whose GEMM (or
receiver) CTA is built, the symmetry group's units, the verdict's kinds, the bound hit, executions,
and the part's CPU seconds (``time.process_time``), which the load of a shared machine does not
inflate as it does wall seconds.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter

from syncverify.protocols import load_protocol
from syncverify.scenarios.build import ScenarioOptions, build
from syncverify.verdicts.check import check

PRS = dict(epochs=3, launches="per-rank-stream", reset="none")
CASES = [
    ("fenced-release-acquire", dict(scenario="all-gather-gemm", world_size=4, epochs=3)),
    ("add-counter", dict(scenario="all-gather-gemm", world_size=4, epochs=3)),
    ("xchg-flag", dict(scenario="all-gather-gemm", world_size=4, epochs=3)),
    ("barrier-fenced-release-acquire", dict(scenario="all-gather-gemm", world_size=4, epochs=3)),
    ("add-counter-cas-reset", dict(scenario="all-gather-gemm", world_size=4, epochs=3)),
    ("add-counter", dict(scenario="all-gather-gemm", world_size=3)),
    ("add-counter", dict(scenario="all-reduce", world_size=3)),
    ("epoch-flag", dict(scenario="all-scatter", world_size=2, **PRS)),
    ("epoch-flag", dict(scenario="all-gather-gemm", world_size=2, **PRS)),
    ("trtllm-14537-launch-dependents-no-visibility", dict(scenario="all-scatter", world_size=2, **PRS)),
    ("add-counter-cas-reset", dict(scenario="all-scatter", world_size=2, **PRS)),
    ("release-xchg-cas-acquire", dict(scenario="all-gather-gemm", world_size=4, epochs=3)),
]


def leaves(scenario):
    """The programs the check explores: the scenario's parts, recursively, or the scenario."""
    if not scenario.parts:
        return [scenario]
    return [leaf for part in scenario.parts for leaf in leaves(part)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--only", help="comma-separated case numbers (from 0)")
    args = parser.parse_args()
    chosen = [int(n) for n in args.only.split(",")] if args.only else range(len(CASES))
    for n in chosen:
        name, options = CASES[n]
        scenario = build(load_protocol(name), ScenarioOptions(**options))
        for part in leaves(scenario):
            threads = part.program.threads
            polling = {"gemm", "receiver"} & {th.role.role for th in threads}
            cpu = time.process_time()
            result = check(part, timeout=args.timeout)
            print(json.dumps(dict(case=n, protocol=name, **options, part=part.stage or "whole",
                                  threads=dict(Counter(th.role.role for th in threads)),
                                  polling_ranks=sorted({th.gpu for th in threads if th.role.role in polling}),
                                  units=[len(group) for group in part.program.symmetry],
                                  kinds=sorted(result.violations), limit=result.limit_hit,
                                  executions=result.executions, cpu=round(time.process_time() - cpu, 2))),
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
