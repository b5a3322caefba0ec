"""``check --suggest --cost``: the model's proven-safe fixes of an unsafe protocol, ranked by what
each costs in the scenario's fused kernel on this GPU.

Each fix (``syncverify.verdicts.suggest``) is built into the scenario's Triton kernel and timed
by ``syncverify bench``'s machinery (``syncverify.kernels.bench.timing.run_sweep``: CUDA graphs,
inputs rotated past the L2, W virtual ranks on one GPU) beside ``none`` (no synchronization, the
cost baseline) and the built-ins the model calls safe in the same scenario, then validated; the
ranking is :func:`syncverify.kernels.bench.tuning.rank_fixes`. The configuration timed is printed
with the ranking: the scenario's entry of the tile table (``--cost-tiles``, default the shipped
``nvidia-h200`` table when it has the shape), else ``syncverify bench``'s default case.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from syncverify.kernels.bench.report import Case, Sweep, report_rows
from syncverify.kernels.bench.tuning import (RankedFix, TILES_DIR, load_tile_table, rank_fixes, ranking_lines,
                                             shape_text, tuned_case)
from syncverify.errors import SyncVerifyError
from syncverify.protocols import builtin_names
from syncverify.protocols.registry import load_protocol
from syncverify.verdicts.check import check_protocol

MAX_TIMED = 6  # fixes timed (the smallest first): each is one more kernel to compile and time
DEFAULT_TILES = TILES_DIR / "nvidia-h200.json"


class CostInputError(SyncVerifyError):
    """A ``--cost`` option that cannot be used; one line naming the fix."""


def parse_shape(text: str) -> tuple[int, int, int]:
    """``"8192x4608x8192"`` -> ``(8192, 4608, 8192)``; anything else is bad input.

    >>> parse_shape("1024x1024x1024")
    (1024, 1024, 1024)
    """
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise CostInputError(f"--cost-shape {text!r}: give MxNxK, three positive integers (e.g. 8192x4608x8192)")
    m, n, k = (int(p) for p in parts)
    return m, n, k


def cost_case(scenario: str, shape: tuple[int, int, int], tiles: Path | None) -> Case:
    """The case the fixes are timed in: the tile table's entry for the scenario and shape (an
    explicit ``tiles`` must have it), else bench's default configuration."""
    case = Case(kernel=scenario, m=shape[0], n=shape[1], k=shape[2])
    if tiles is not None:
        return tuned_case(case, load_tile_table(tiles), path=f"--cost-tiles {tiles}")
    if DEFAULT_TILES.is_file():
        table = load_tile_table(DEFAULT_TILES)
        if any(e["kernel"] == scenario and e["shape"] == shape_text(*shape) for e in table["entries"]):
            return tuned_case(case, table)
    return case


def safe_builtins(scenario: str, world_size: int) -> tuple[str, ...]:
    """The built-in protocols the model calls safe in ``scenario`` at ``world_size`` (one call)."""
    return tuple(name for name in builtin_names()
                 if check_protocol(name, scenario=scenario, world_size=world_size).safe is True)


def require_gpu() -> None:
    """Bad input unless a CUDA GPU is visible (checked before the model runs: the fixes are timed
    on the GPU, and the interpreter's host times would rank nothing)."""
    # torch: syncverify.kernels._deps imports it; only --cost needs it
    from syncverify.kernels._deps import torch

    if not torch.cuda.is_available():
        raise CostInputError("--cost times the fixes on a CUDA GPU and none is visible: run it on a GPU "
                             "machine, or drop --cost")


def measure_on_gpu(sweep: Sweep, loaded: dict):
    """``(ceilings, measurements)`` of ``sweep`` on this GPU (torch and triton imported here)."""
    # torch/triton: syncverify.kernels.bench.timing imports them; only the GPU path needs it
    from syncverify.kernels.bench.timing import run_sweep

    require_gpu()
    return run_sweep(sweep, device="cuda", loaded=loaded)


def fix_costs(fixes, *, scenario: str, world_size: int, case: Case,
              measure: Callable[[Sweep, dict], tuple] | None = None) -> tuple[list[RankedFix], list[str]]:
    """Time the first :data:`MAX_TIMED` of ``fixes`` (a ``Suggestions`` list) in ``case`` beside
    ``none`` and the safe built-ins; the ranking and its text (the case timed first). ``measure``:
    ``(sweep, loaded) -> (ceilings, measurements)``, :func:`measure_on_gpu` unless given."""
    references = safe_builtins(scenario, world_size)
    timed = list(fixes[:MAX_TIMED])
    labels = {f"fix{number}": fix for number, fix in enumerate(timed, start=1)}
    loaded = {"none": None, **{name: load_protocol(name) for name in references},
              **{label: fix.protocol for label, fix in labels.items()}}
    sweep = Sweep(name="check --suggest --cost", protocols=tuple(loaded), world_size=world_size, launches=10,
                  repeats=10, cases=(case,))
    ceilings, measurements = (measure or measure_on_gpu)(sweep, loaded)
    rows = report_rows(measurements, ceilings, world_size=world_size)
    ranked = rank_fixes(rows, {label: fix.description for label, fix in labels.items()}, references=references)
    none = next((r["time_us"] for r in rows if r["what"] == "fused" and r["protocol"] == "none"), None)
    config = next((r["key"].split(" | ")[0] for r in rows if r["what"] == "fused"), case.key)
    head = [f"cost: timed on {ceilings.machine}, W = {world_size} virtual ranks, {config}"
            + (f" (the first {MAX_TIMED} of {len(fixes)} fixes)" if len(fixes) > MAX_TIMED else "")]
    return ranked, head + ranking_lines(ranked, none_us=none)
