"""Stress every zoo protocol (``protocols/zoo/``) on the GPU and print one table.

Each protocol runs ``syncverify stress --protocol NAME --virtual-ranks`` in its zoo scenario for
``--seconds`` with random delays, in its own process (a hang or crash is that row's result).
Usage (on the device): ``python benchmarks/zoo_stress.py --seconds 5 --world-size 2 --out DIR``.
With virtual ranks one launch holds every rank, so launches are host-ordered: reuse bugs that
need per-rank streams (``launches = "per-rank-stream"``) cannot show on one GPU.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from text_table import bad_tile_counts, print_table  # beside this script


def main() -> int:
    """Run the zoo (or the names given) and print ``name | verdict | iterations | counts``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds before a row is killed")
    parser.add_argument("--out", type=Path, default=None, help="folder for each row's JSON")
    args = parser.parse_args()
    from syncverify.protocols.registry import zoo_protocols

    rows = []
    for protocol in zoo_protocols():
        if args.names and protocol.name not in args.names:
            continue
        z = protocol.zoo
        epochs_note = f"{z.epochs} ep, {z.launches}"
        cmd = [sys.executable, "-m", "syncverify", "stress", "--protocol", protocol.name, "--kernel", z.scenario,
               "--virtual-ranks", "--world-size", str(args.world_size), "--seconds", str(args.seconds),
               "--delays", "random", "--json"]
        start = time.monotonic()
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
            result = json.loads(done.stdout) if done.stdout.strip().startswith("{") else None
            error = None if result else (done.stderr.strip().splitlines() or ["no output"])[-1]
        except subprocess.TimeoutExpired:
            result, error = None, f"killed after {args.timeout:.0f} s"
        wall = time.monotonic() - start
        if args.out is not None and result is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"{protocol.name}.json").write_text(json.dumps(result, indent=1))
        if result is None:
            rows.append((protocol.name, epochs_note, z.expected, "error: " + error[:60], "-", "-", f"{wall:.0f}"))
            continue
        counts = bad_tile_counts(result["counts"])
        rows.append((protocol.name, epochs_note, z.expected, "clean" if result["clean"] else "FAILED",
                     str(result["iterations"]), counts, f"{wall:.0f}"))
    head = ("protocol", "model setting", "model verdict", "GPU", "iterations", "bad tiles", "wall s")
    print_table(head, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
