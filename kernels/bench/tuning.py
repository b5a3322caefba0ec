"""Per-shape kernel configurations chosen by measurement, and the model's fixes ranked by cost.

Pure Python on numbers (no torch, no triton), so CI tests it on synthetic timings:

* a **tile table** (:func:`load_tile_table`, shipped per machine kind as
  ``kernels/bench/tiles/<machine>.json``, format :data:`TILE_FORMAT`) says, per kernel and shape,
  which tile, stages, warps, tile order and producer/consumer split to run, what that measured
  (cuBLAS, the GEMM part, ``none``, each safe built-in) and which safe built-in protocol was the
  cheapest there. :func:`tuned_case` applies it to a bench case (``bench --tiles FILE``); a
  (kernel, shape) the table does not have is bad input, never a silent default;
* :func:`choose_tiles` makes such a table from sweep rows: per (kernel, shape) the configuration
  whose fastest safe fused kernel is fastest (what a user would run), validated;
* :func:`rank_fixes` orders the model's proven-safe fixes of an unsafe protocol
  (``syncverify.verdicts.suggest``) by their measured time in the fused kernel, against ``none``
  and the safe built-ins timed beside them (``check --suggest --cost``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from syncverify.inputs import read_input_file
from syncverify.kernels.bench.report import NO_SYNC, BenchInputError, Case

TILE_FORMAT = "syncverify-tile-table/1"
#: Where the shipped tables are: ``<machine kind>.json``.
TILES_DIR = Path(__file__).parent / "tiles"
#: The fields of a table entry that configure a case (the rest are its measured figures).
CONFIG_FIELDS = ("block", "stages", "warps", "group_m", "split")


def shape_text(m: int, n: int, k: int) -> str:
    return f"{m}x{n}x{k}"


def shipped_table(machine: str) -> Path:
    """The shipped tile table of ``machine`` (e.g. ``nvidia-h200``); bad input if none is shipped."""
    path = TILES_DIR / f"{machine}.json"
    if not path.is_file():
        known = sorted(p.stem for p in TILES_DIR.glob("*.json"))
        raise BenchInputError(f"no tile table is shipped for {machine!r} (shipped: {', '.join(known) or 'none'}); "
                              "give --tiles FILE")
    return path


def load_tile_table(path: str | Path) -> dict:
    """Read a tile table; anything that is not one (or an entry missing a field) is bad input."""
    raw = read_input_file(path, "--tiles", BenchInputError)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BenchInputError(f"--tiles {path}: not a JSON file ({type(error).__name__})") from None
    if not isinstance(data, dict) or data.get("format") != TILE_FORMAT or not isinstance(data.get("entries"), list):
        raise BenchInputError(f"--tiles {path}: not a syncverify tile table (format {TILE_FORMAT!r} with 'entries')")
    for number, entry in enumerate(data["entries"], start=1):
        missing = [f for f in ("kernel", "shape", *CONFIG_FIELDS) if f not in entry]
        if missing:
            raise BenchInputError(f"--tiles {path}: entry {number} lacks {', '.join(missing)}")
    return data


def tuned_case(case: Case, table: dict, *, path: str = "--tiles") -> Case:
    """``case`` with the configuration ``table`` gives its kernel and shape.

    >>> table = {"entries": [{"kernel": "all-reduce", "shape": "1024x1024x1024", "block": [64, 128, 64],
    ...                       "stages": 4, "warps": 4, "group_m": 8, "split": [60, 6]}]}
    >>> tuned_case(Case(m=1024, n=1024, k=1024), table).key
    'all-reduce 1024x1024x1024 bf16 64x128x64 s4 w4 60+6 g8 descriptor'
    """
    shape = shape_text(case.m, case.n, case.k)
    for entry in table["entries"]:
        if entry["kernel"] == case.kernel and entry["shape"] == shape:
            return replace(case, block=tuple(entry["block"]), stages=entry["stages"], warps=entry["warps"],
                           group_m=entry["group_m"], split=tuple(entry["split"]))
    have = sorted(e["shape"] for e in table["entries"] if e["kernel"] == case.kernel)
    raise BenchInputError(f"{path}: no entry for {case.kernel} {shape} (it has {', '.join(have) or 'none'} for "
                          f"{case.kernel}); drop --tiles or add the shape")


def choose_tiles(rows: list[dict], *, machine: str, safe: tuple[str, ...], source: str = "") -> dict:
    """A tile table from timed rows: per (kernel, shape) the configuration whose fastest safe,
    validated fused kernel is the fastest, with its figures and that cheapest safe protocol.

    ``rows``: dicts with ``kernel``, ``m``, ``n``, ``k``, ``block``, ``stages``, ``warps``,
    ``group_m``, ``split`` (the resolved one), ``what`` (``cublas``, ``gemm-part``, ``fused``),
    ``protocol`` (fused rows), ``time_us`` and ``validated``. A configuration counts only where
    every protocol of ``safe`` was timed and validated ``ok``, and ``none`` was timed.

    >>> def row(what, protocol, us, block=(128, 256, 64)):
    ...     return dict(kernel="all-reduce", m=1024, n=1024, k=1024, block=block, stages=3, warps=8, group_m=8,
    ...                 split=(60, 6), what=what, protocol=protocol, time_us=us, validated="ok")
    >>> rows = [row("cublas", "", 9.0), row("gemm-part", "", 12.0), row("fused", "none", 14.0),
    ...         row("fused", "a", 16.0), row("fused", "b", 15.0), row("fused", "none", 13.0, (64, 128, 64)),
    ...         row("fused", "a", 14.5, (64, 128, 64)), row("fused", "b", 30.0, (64, 128, 64))]
    >>> entry, = choose_tiles(rows, machine="m", safe=("a", "b"))["entries"]
    >>> entry["block"], entry["cheapest_safe"], entry["overhead_pct"]
    ([64, 128, 64], 'a', 11.54)
    """
    configs: dict[tuple, dict[tuple[str, str], dict]] = {}
    for r in rows:
        config = (r["kernel"], shape_text(r["m"], r["n"], r["k"]), tuple(r["block"]), r["stages"], r["warps"],
                  r["group_m"], tuple(r["split"]))
        configs.setdefault(config, {})[(r["what"], r.get("protocol") or "")] = r
    best: dict[tuple[str, str], tuple[float, tuple, dict]] = {}
    for config, timed in configs.items():
        none = timed.get(("fused", NO_SYNC))
        safe_rows = [timed.get(("fused", p)) for p in safe]
        if none is None or any(r is None or r["validated"] != "ok" for r in safe_rows):
            continue
        cheapest = min(safe_rows, key=lambda r: r["time_us"])
        key = config[:2]
        if key not in best or cheapest["time_us"] < best[key][0]:
            best[key] = (cheapest["time_us"], config, timed)
    entries = []
    for (kernel, shape), (_, config, timed) in sorted(best.items()):
        none = timed[("fused", NO_SYNC)]
        figures = {p: timed[("fused", p)]["time_us"] for p in safe}
        cheapest = min(safe, key=lambda p: figures[p])
        part = timed.get(("gemm-part", ""))
        cublas = timed.get(("cublas", ""))
        entries.append({
            "kernel": kernel, "shape": shape, "block": list(config[2]), "stages": config[3], "warps": config[4],
            "group_m": config[5], "split": list(config[6]),
            "cublas_us": cublas["time_us"] if cublas else None,
            "gemm_part_us": part["time_us"] if part else None,
            "gemm_part_of_cublas_pct": (round(100 * cublas["time_us"] / part["time_us"], 1)
                                        if part and cublas else None),
            "none_us": none["time_us"], "safe_us": figures, "cheapest_safe": cheapest,
            "overhead_pct": round(100 * (figures[cheapest] / none["time_us"] - 1), 2),
        })
    return {"format": TILE_FORMAT, "machine": machine, "source": source, "entries": entries}


# ----- the model's fixes by measured cost --------------------------------------------------------

@dataclass(frozen=True)
class RankedFix:
    """One fix (or reference protocol) with what it measured: ``time_us`` per launch, its overhead
    over ``none``, and the model's own order (1: the smallest change the search found)."""

    label: str
    description: str
    time_us: float
    overhead_pct: float | None
    model_order: int | None
    validated: str

    @property
    def ok(self) -> bool:
        return self.validated == "ok"


def rank_fixes(rows: list[dict], fixes: dict[str, str], *, references: tuple[str, ...] = ()) -> list[RankedFix]:
    """The fixes (label -> description, in the model's order) and ``references`` (e.g. the safe
    built-ins) ranked by measured time, cheapest first; a build whose result was wrong goes last
    whatever its time (it is no fix on this GPU). ``rows``: bench report rows of one case
    (``what``, ``protocol``, ``time_us``, ``overhead_pct``, ``validated``); a fix with no row is
    bad input (it was not timed).

    >>> rows = [dict(what="fused", protocol="none", time_us=100.0, overhead_pct=None, validated="not validated"),
    ...         dict(what="fused", protocol="fix1", time_us=110.0, overhead_pct=10.0, validated="ok"),
    ...         dict(what="fused", protocol="fix2", time_us=103.0, overhead_pct=3.0, validated="ok"),
    ...         dict(what="fused", protocol="epoch-flag", time_us=105.0, overhead_pct=5.0, validated="ok")]
    >>> [f.label for f in rank_fixes(rows, {"fix1": "barrier", "fix2": "fence"}, references=("epoch-flag",))]
    ['fix2', 'epoch-flag', 'fix1']
    """
    timed = {r["protocol"]: r for r in rows if r["what"] == "fused"}
    out = []
    for order, (label, description) in enumerate(list(fixes.items()) + [(p, "(safe built-in)") for p in references]):
        if label not in timed:
            raise BenchInputError(f"{label} ({description}) was not timed")
        r = timed[label]
        out.append(RankedFix(label, description, r["time_us"], r["overhead_pct"],
                             order + 1 if order < len(fixes) else None, r["validated"]))
    return sorted(out, key=lambda f: (not f.ok, f.time_us))


def ranking_lines(ranked: list[RankedFix], *, none_us: float | None) -> list[str]:
    """The ranking as text, one line per entry: rank, time, overhead, the model's order, what."""
    lines = [f"cost: {len([f for f in ranked if f.model_order])} fix(es) by measured time"
             + (f" (none: {none_us:.1f} µs)" if none_us else "")]
    for rank, f in enumerate(ranked, start=1):
        overhead = f"{f.overhead_pct:+.1f}%" if f.overhead_pct is not None else "-"
        model = f"model's #{f.model_order}" if f.model_order else "reference"
        wrong = "" if f.ok else f"  WRONG RESULT: {f.validated}"
        lines.append(f"  {rank}. {f.label}: {f.time_us:.1f} µs ({overhead} over none; {model}): {f.description}{wrong}")
    return lines
