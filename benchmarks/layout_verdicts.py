"""Does any shipped protocol's verdict change when a CTA loops over several tiles? (issue 22)

    python3 benchmarks/layout_verdicts.py [--world-size 2] [--tiles 2] [--ctas 1] [--columns 1]
                                          [--timeout 120] [--jobs N] [--budget S] [--scenarios ...]
                                          [--protocols ...] [--out DIR]

Every built-in and zoo protocol (``protocols/*.toml``, ``protocols/zoo``) in every scenario,
checked twice by the protocol check at ``--tiles`` tiles: one CTA per tile (``ctas`` None: every
tile a renaming of tile 0, the layout of before) and one CTA per role and rank looping over them
(``ctas`` 1: the kernels' persistent loop with fewer programs than tiles,
:func:`syncverify.scenarios.build.cta_tiles`; ``--ctas`` more). ``--columns C`` (all-gather-gemm):
the second layout also spreads each tile's ``C`` column tiles over the ``--ctas`` GEMM CTAs, as
the kernel does without ``after_load`` steps (:func:`syncverify.scenarios.build.cta_visits`). A row per case as it ends (``same``, ``CHANGED``,
``unknown`` where either side hit ``--timeout``), the counts last. ``--budget``: no case starts
unless its two bounds end within that many seconds of the start (each one not started is listed).
``--out``: ``layout.jsonl`` (a line per case as it ends) and ``layout.md`` there.
Pure Python: no GPU, no torch.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from syncverify.protocols.registry import builtin_names, zoo_names  # noqa: E402
from syncverify.scenarios.build import SCENARIOS  # noqa: E402
from syncverify.verdicts.check import check_protocol  # noqa: E402
from tests.frontend_kernels.pool import run_pool  # noqa: E402


def verdict(result) -> str:
    """``SAFE``, ``UNSAFE kinds``, or ``UNKNOWN (bound)``."""
    if result.safe is None:
        return f"UNKNOWN ({result.limit_hit})"
    words = "SAFE" if result.safe else "UNSAFE " + ", ".join(sorted(result.violations))
    return words + (f" (bound hit: {result.limit_hit})" if result.limit_hit else "")


def compare(apart, looped) -> str:
    """``same``, ``CHANGED``, or ``unknown``: a bound hit leaves it open, unless the bounded side
    found a kind of violation the other side's decided verdict lacks (a change, whatever else the
    bound hides)."""
    if not apart.limit_hit and not looped.limit_hit:
        same = (apart.safe, sorted(apart.violations)) == (looped.safe, sorted(looped.violations))
        return "same" if same else "CHANGED"
    for decided, bounded in ((apart, looped), (looped, apart)):
        if not decided.limit_hit and set(bounded.violations) - set(decided.violations):
            return "CHANGED"
    return "unknown"


def one_case(job: tuple) -> dict:
    """Both layouts of one (scenario, protocol); a protocol the scenario cannot build is ``skipped``."""
    scenario, protocol, world, tiles, timeout, ctas, columns = job
    row = dict(scenario=scenario, protocol=protocol, world_size=world, tiles=tiles, ctas=ctas, columns=columns)
    start = time.monotonic()
    try:
        apart = check_protocol(protocol, scenario=scenario, world_size=world, tiles=tiles, timeout=timeout)
        looped = check_protocol(protocol, scenario=scenario, world_size=world, tiles=tiles, ctas=ctas, timeout=timeout,
                                **({"columns": columns} if columns > 1 else {}))
    except Exception as error:  # noqa: BLE001 - a protocol a scenario refuses is a row, not a crash
        return row | dict(outcome="skipped", why=f"{type(error).__name__}: {error}",
                          seconds=time.monotonic() - start)
    outcome = compare(apart, looped)
    return row | dict(outcome=outcome, apart=verdict(apart), looped=verdict(looped),
                      seconds=time.monotonic() - start)


def main(argv: list[str]) -> int:
    """Run the sweep (see the module docstring); exit 0 no verdict changed, 1 one did, 3 unknowns."""
    args, scenarios, names = sweep_arguments(__doc__, argv, tiles=2, timeout=120.0, ctas=1, columns=True)
    error = None
    if args.columns == 1 and args.tiles <= args.ctas:
        error = f"--tiles {args.tiles} over --ctas {args.ctas}: no CTA loops (give more tiles, or --columns)"
    elif args.columns > 1 and scenarios != ["all-gather-gemm"]:
        error = "--columns: column tiles as units of work are all-gather-gemm's (--scenarios all-gather-gemm)"
    if error is not None:
        print(f"layout_verdicts.py: error: {error}", file=sys.stderr)
        return 2
    jobs = [(s, p, args.world_size, args.tiles, args.timeout, args.ctas, args.columns)
            for s in scenarios for p in args.protocols or names]
    header = f"W = {args.world_size}, {args.tiles} tiles, {args.timeout:.0f} s bound per check"
    layout = f"{args.ctas} CTA(s) per role" + (f", {args.columns} column tiles as units" if args.columns > 1 else " looping")
    return sweep(jobs, one_case, workers=args.jobs, budget=args.budget, timeout=args.timeout, out=args.out,
                 stem="layout", header=header, columns=(("apart", "one CTA per tile"), ("looped", layout)))


def sweep_arguments(doc: str, argv: list[str], *, tiles: int, timeout: float, ctas: bool | int = False,
                    columns: bool = False):
    """``(args, scenarios, protocol names)`` of a verdict sweep's command line (``doc``: its
    module docstring); ``ctas``: it takes ``--ctas`` (an int: its default, else None);
    ``columns``: it takes ``--columns``. Unknown names and counts below 1 are refused."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--tiles", type=int, default=tiles)
    if ctas is not False:
        parser.add_argument("--ctas", type=int, default=None if ctas is True else ctas,
                            help="CTAs per role and rank of the kernels' layout")
    if columns:
        parser.add_argument("--columns", type=int, default=1, help="all-gather-gemm: column tiles per tile")
    parser.add_argument("--timeout", type=float, default=timeout, help="bound of each check (seconds)")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--budget", type=float, default=None, help="start no case that could end after this")
    parser.add_argument("--scenarios", nargs="*", default=None, metavar="SCENARIO")
    parser.add_argument("--protocols", nargs="*", default=None, metavar="PROTOCOL")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    scenarios = args.scenarios or list(SCENARIOS)
    names = builtin_names() + zoo_names()
    for name, known in [(s, SCENARIOS) for s in scenarios] + [(p, names) for p in args.protocols or []]:
        if name not in known:
            parser.error(f"unknown name {name!r} (known: {', '.join(known)})")
    if min(args.jobs, args.tiles, args.world_size, getattr(args, "ctas", None) or 1, getattr(args, "columns", 1)) < 1:
        parser.error("--jobs, --tiles, --world-size, --ctas and --columns are at least 1")
    return args, scenarios, names


def sweep(jobs: list, one_case, *, workers: int, budget: float | None, timeout: float, out: Path | None, stem: str,
          header: str, columns: tuple[tuple[str, str], tuple[str, str]]) -> int:
    """Run ``one_case`` on each job in ``workers`` processes, a line per case as it ends, the
    table and counts last (``out``: ``STEM.jsonl`` and ``STEM.md`` there); ``columns``: the two
    verdicts' keys in a row and their headings. Exit 1 if a verdict changed, 3 for unknowns or
    cases not started (``budget``: none starts that could end after it), else 0."""
    (first, first_head), (second, second_head) = columns
    start = time.monotonic()
    rows: list[dict] = []

    def record(row: dict) -> None:
        rows.append(row)
        print(f"[{time.monotonic() - start:5.0f} s] {row['scenario']} {row['protocol']}: {row['outcome']}"
              f" | {first_head}: {row.get(first, row.get('why'))} | {second_head}: {row.get(second, '')}"
              f" | {row['seconds']:.0f} s", flush=True)
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            with open(out / f"{stem}.jsonl", "a") as f:
                f.write(json.dumps(row) + "\n")

    def over_budget() -> bool:
        return budget is not None and time.monotonic() - start + 2 * timeout > budget

    late = run_pool(jobs, one_case, lambda _job, row: record(row), workers=workers,
                    over_budget=lambda _job: over_budget())
    lines = [header, "", f"| scenario | protocol | {first_head} | {second_head} | | seconds |",
             "| --- | --- | --- | --- | --- | --- |"]
    for row in sorted(rows, key=lambda r: (r["scenario"], r["protocol"])):
        lines.append(f"| {row['scenario']} | {row['protocol']} | {row.get(first, row.get('why', ''))} | "
                     f"{row.get(second, '')} | {row['outcome']} | {row['seconds']:.0f} |")
    lines += [f"not started (--budget): {s} {p}" for s, p, *_ in late]
    counts = Counter(r["outcome"] for r in rows)
    lines += ["", ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) + f", {len(late)} not started"]
    text = "\n".join(lines)
    print(text, flush=True)
    if out is not None:
        (out / f"{stem}.md").write_text(text + "\n")
    if counts["CHANGED"]:
        return 1
    return 3 if counts["unknown"] or late else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
