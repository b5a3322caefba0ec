"""CPU seconds of the issue-24 cases its two measured failures came from (in-process, one run each).

    PYTHONPATH=TREE python benchmarks/scale_cpu_cases.py [TIMEOUT]

One JSON line per case: verdict, bound hit, executions, kinds, CPU seconds (``time.process_time``)
and wall seconds. Run it with ``PYTHONPATH`` at each tree to compare them on a loaded machine,
where wall seconds say little.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from syncverify.protocols import load_protocol
from syncverify.scenarios.build import ScenarioOptions, build
from syncverify.verdicts.check import check

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "protocols" / "tail-handshake-fence-sc-cta.toml"
CASES = [
    (str(FIXTURE), dict(scenario="all-reduce", world_size=2, epochs=2, launches="per-rank-stream")),
    ("iris-462-gpu-scope-release", dict(scenario="all-scatter", world_size=6)),
    ("iris-462-gpu-scope-release", dict(scenario="all-scatter", world_size=8)),
    ("done-flag", dict(scenario="all-scatter", world_size=8)),
    ("ready-flag-no-done", dict(scenario="all-scatter", world_size=8)),
]


def main() -> int:
    timeout = float(sys.argv[1]) if len(sys.argv) > 1 else 240.0
    for name, options in CASES:
        cpu, wall = time.process_time(), time.monotonic()
        result = check(build(load_protocol(name), ScenarioOptions(**options)), timeout=timeout)
        print(json.dumps(dict(case=Path(name).name, **options, safe=result.safe, limit=result.limit_hit,
                              executions=result.executions, kinds=sorted(result.violations),
                              cpu=round(time.process_time() - cpu, 2), wall=round(time.monotonic() - wall, 1))),
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
