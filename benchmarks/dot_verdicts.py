"""Which shipped protocol's verdict does ``tl.dot``'s CTA barrier change? (issue 22)

    python3 benchmarks/dot_verdicts.py [--world-size 2] [--tiles 1] [--ctas N] [--timeout 60] [--jobs N]
                                       [--budget S] [--scenarios ...] [--protocols ...] [--out DIR]

Every built-in and zoo protocol in every scenario, checked twice by the protocol check: as the
model was before the GEMM step (``syncverify.scenarios.build.Dot``; ``lower_dot`` patched to
nothing in this process) and as it is now (the roles that run a GEMM execute its ``bar.sync 0``:
``syncverify.protocols.lowering.lower_dot``). ``--tiles``/``--ctas``: the layout
(``--tiles 2 --ctas 1``: one CTA per role and rank looping over two tiles, as the cross-check's
reduce-scatter harness). A row per case as it ends (``same``, ``CHANGED``, ``unknown``), the
counts last; the rule and ``--budget`` as ``benchmarks/layout_verdicts.py``'s. ``--out``:
``dot.jsonl`` and ``dot.md`` there. Pure Python: no GPU, no torch.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.layout_verdicts import compare, sweep, sweep_arguments, verdict  # noqa: E402
from syncverify.protocols import lowering  # noqa: E402
from syncverify.verdicts.check import check_protocol  # noqa: E402


def one_case(job: tuple) -> dict:
    """Both models of one (scenario, protocol); a protocol the scenario cannot build is ``skipped``."""
    scenario, protocol, world, tiles, ctas, timeout = job
    row = dict(scenario=scenario, protocol=protocol, world_size=world, tiles=tiles, ctas=ctas)
    start = time.monotonic()
    layout = dict(tiles=tiles) | ({} if ctas is None else dict(ctas=ctas))
    dot = lowering.lower_dot
    try:
        lowering.lower_dot = lambda: ()  # the model of before: a GEMM orders nothing
        try:
            before = check_protocol(protocol, scenario=scenario, world_size=world, timeout=timeout, **layout)
        finally:
            lowering.lower_dot = dot
        now = check_protocol(protocol, scenario=scenario, world_size=world, timeout=timeout, **layout)
    except Exception as error:  # noqa: BLE001 - a protocol a scenario refuses is a row, not a crash
        return row | dict(outcome="skipped", why=f"{type(error).__name__}: {error}", seconds=time.monotonic() - start)
    return row | dict(outcome=compare(before, now), before=verdict(before), now=verdict(now),
                      seconds=time.monotonic() - start)


def main(argv: list[str]) -> int:
    """Run the sweep; exit 0 no verdict changed, 1 one did, 3 unknowns."""
    args, scenarios, names = sweep_arguments(__doc__, argv, tiles=1, timeout=60.0, ctas=True)
    jobs = [(s, p, args.world_size, args.tiles, args.ctas, args.timeout) for s in scenarios
            for p in args.protocols or names]
    layout = f"{args.tiles} tile(s)" + ("" if args.ctas is None else f", {args.ctas} CTA(s) per role looping")
    header = f"W = {args.world_size}, {layout}, {args.timeout:.0f} s bound per check"
    return sweep(jobs, one_case, workers=args.jobs, budget=args.budget, timeout=args.timeout, out=args.out,
                 stem="dot", header=header, columns=(("before", "before (no GEMM barrier)"),
                                                     ("now", "with tl.dot's barrier")))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
