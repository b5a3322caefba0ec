"""Stress every built-in protocol in all-gather-gemm and gemm-reduce-scatter on one GPU; one table.

For each scenario and built-in protocol: the model's verdict at the same world size
(``syncverify.verdicts.check``), then a stress campaign with W virtual ranks on one GPU, random delays,
``--seconds`` each. The kernels are compiled first by ``--workers`` processes in parallel (one
iteration each, which fills Triton's cache), then the timed campaigns run one after another in
this process, so no two campaigns share the GPU. Rows that would start after ``--budget`` seconds
are reported as not run. Usage (on the device)::

    python3 benchmarks/new_scenarios_stress.py --seconds 1.5 --world-size 2 --out DIR
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from text_table import bad_tile_counts, print_table  # beside this script

SCENARIOS = ("all-gather-gemm", "gemm-reduce-scatter")


def model_verdict(scenario: str, protocol: str, world_size: int) -> str:
    """``safe`` or the violation kinds the model finds (one launch, default options)."""
    from syncverify.verdicts.check import check
    from syncverify.protocols import load_protocol
    from syncverify.scenarios.build import ScenarioOptions, build

    result = check(build(load_protocol(protocol), ScenarioOptions(scenario=scenario, world_size=world_size)),
                   timeout=60)
    if result.safe is None:
        return "undecided"
    return "safe" if result.safe else ", ".join(sorted(result.violations))


def campaign(scenario: str, protocol: str, world_size: int, **options) -> dict:
    """One stress campaign, virtual ranks, random delays; the result as a dict (or the error)."""
    from syncverify.stress.campaign import run_campaign

    try:
        result = run_campaign(protocol=protocol, kernel=scenario, world_size=world_size, virtual_ranks=True,
                              delays="random", seed=0, **options)
    except Exception as error:  # a row's failure is that row's result
        return {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:80]}"}
    return dict(result.to_dict(), clean=result.clean, iterations_per_second=result.iterations_per_second)


def main() -> int:
    """Model verdicts, parallel compilation, then the timed campaigns; prints the table last."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument("--budget", type=float, default=85.0, help="seconds after which no row starts")
    parser.add_argument("--out", type=Path, default=None, help="folder for results.json")
    args = parser.parse_args()
    from syncverify.protocols import builtin_names

    start = time.monotonic()
    W = args.world_size
    pairs = [(s, p) for s in SCENARIOS for p in builtin_names()]
    verdicts = {(s, p): model_verdict(s, p, W) for s, p in pairs}
    print(f"model verdicts: {time.monotonic() - start:.1f} s", flush=True)
    with ProcessPoolExecutor(args.workers, mp_context=get_context("spawn")) as pool:
        warm = dict(zip(pairs, pool.map(campaign, *zip(*pairs), [W] * len(pairs), chunksize=1)))
    print(f"compiled (one iteration each, {args.workers} processes): {time.monotonic() - start:.1f} s", flush=True)
    rows, results = [], {}
    for s, p in pairs:
        if time.monotonic() - start > args.budget:
            rows.append((s, p, verdicts[s, p], "not run (budget)", "-", "-", "-"))
            continue
        if "error" in warm[s, p]:
            rows.append((s, p, verdicts[s, p], "error: " + warm[s, p]["error"], "-", "-", "-"))
            continue
        r = campaign(s, p, W, seconds=args.seconds)
        results[f"{s}/{p}"] = r
        if "error" in r:
            rows.append((s, p, verdicts[s, p], "error: " + r["error"], "-", "-", "-"))
            continue
        counts = bad_tile_counts(r["counts"])
        rows.append((s, p, verdicts[s, p], "clean" if r["clean"] else "FAILED", str(r["iterations"]),
                     f"{r['iterations_per_second']:.0f}", counts))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    print(f"total {time.monotonic() - start:.1f} s; W = {W} virtual ranks, random delays, {args.seconds:g} s each")
    head = ("scenario", "protocol", "model verdict", "GPU", "iterations", "it/s", "bad tiles")
    print_table(head, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
