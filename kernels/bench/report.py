"""``syncverify bench``'s pure half: sweep files, the report's figures, tables, roofline and gate.

What a protocol costs is measured on the GPU by ``syncverify.kernels.bench.timing``; everything here is
plain Python on numbers (no torch, no triton), so CI tests it on synthetic timings:

* a **sweep file** (TOML, :func:`parse_sweep`) names the configurations: shapes, tiles, stages,
  warps, the producer/consumer split, the tile order, the load path and fp16/bf16; every key
  may be a list, and a case is the product of its lists. An unknown key is bad input (one line,
  exit 2), never ignored;
* a **report row** (:func:`report_rows`) per measurement: time, TFLOPS (``2 M N K / time``),
  arithmetic intensity, efficiency against the bf16 peak measured in the same run, each
  protocol's overhead against ``none`` and the GEMM's share of cuBLAS;
* **outputs**: CSV (:func:`to_csv`), markdown (:func:`to_markdown`), a roofline PNG
  (:func:`draw_roofline`: intensity against achieved TFLOPS with the measured ceilings);
* the **gate** (:func:`check_rows`): a row under ``tolerance x`` its recorded TFLOPS is a
  regression (exit 1); a baseline recorded on another machine kind is bad input (exit 2);
* **real ranks** (one process per GPU, ``syncverify.kernels.bench.ranks``): every rank times the
  same things; :func:`combine_ranks` keeps the slowest rank's time of each, the rows gain the
  same case's cuBLAS + NCCL time and the fused kernel's speedup against it
  (:func:`speedup_lines` against the issue's 1.1x target, :func:`check_speedup` as a gate).

The ``none`` protocol (``syncverify.kernels.build.NO_SYNC``) has no synchronization at all: its
rows are marked unsafe in every output and exist only as the cost baseline.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from syncverify.errors import SyncVerifyError
from syncverify.inputs import read_input_file
from syncverify.kernels.config import KernelConfig
from syncverify.validation import did_you_mean

NO_SYNC = "none"  # syncverify.kernels.build.NO_SYNC (that module needs no GPU either; kept equal by a test)
UNSAFE_NOTE = "UNSAFE: no synchronization, output not validated; cost baseline only"
#: How the ranks ran: every rank's programs in one launch on one GPU, or one process per GPU.
VIRTUAL, PROCESSES = "virtual", "processes"
#: The issue's target on two GPUs: the fused kernel at least 1.1x as fast as cuBLAS + NCCL.
SPEEDUP_TARGET = 1.1
BASELINE_FORMAT = "syncverify-bench-baseline/1"
ELEMENT_BYTES = {"bf16": 2, "fp16": 2}
KERNELS = ("all-reduce", "all-scatter", "all-gather-gemm", "gemm-reduce-scatter")
#: Kernels whose ``split`` has three entries (producers, comm, receivers); the others have two.
THREE_ROLE_KERNELS = ("all-scatter",)
LOADS = ("descriptor", "pointer")

#: What a row measured: the fused kernel, its producers alone (the GEMM part), cuBLAS alone, or
#: cuBLAS followed by NCCL (real ranks only).
WHATS = ("fused", "gemm-part", "cublas", "cublas+nccl")

TOP_KEYS = {
    "name": "a title for the tables",
    "note": "free text, copied into the markdown",
    "kernels": "all-reduce, all-scatter, all-gather-gemm, gemm-reduce-scatter (default: --kernel)",
    "protocols": "protocol names or files; 'none' is always added (default: --protocol)",
    "world_size": "ranks (default: --world-size)",
    "launches": "fused-kernel launches per timed CUDA graph (default: 20)",
    "repeats": "timed replays of each graph; the median is reported (default: 10)",
    "defaults": "a table of case keys every [[case]] starts from",
    "case": "[[case]] tables, one per group of configurations",
}
CASE_KEYS = {
    "shape": "[M, N, K] of the whole problem, or a list of them",
    "kernel": "all-reduce | all-scatter | all-gather-gemm | gemm-reduce-scatter (default: the sweep's kernels)",
    "dtype": "bf16 | fp16",
    "block": "[BLOCK_M, BLOCK_N, BLOCK_K]",
    "stages": "software-pipelining stages (num_stages)",
    "warps": "warps per program (num_warps)",
    "split": "programs per rank: [producers, consumers] (all-scatter: [producers, comm, receivers]; "
             "all-gather-gemm: [senders, GEMM programs]); default: from the GPU's SMs",
    "group_m": "tile rows per group of the producers' visiting order (1: row-major)",
    "loads": "descriptor | pointer: how producers read A and B",
}


class BenchInputError(SyncVerifyError):
    """A sweep file, baseline or bench option that cannot be used; one line naming the fix."""


# ----- one configuration ------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    """One fused-kernel configuration (sizes are the whole problem, as in ``KernelConfig``).

    ``split`` is ``()`` until resolved against the GPU's SMs (:func:`default_split`).
    """

    kernel: str = "all-reduce"
    m: int = 8192
    n: int = 4608
    k: int = 8192
    dtype: str = "bf16"
    block: tuple[int, int, int] = (128, 256, 64)
    stages: int = 3
    warps: int = 8
    split: tuple[int, ...] = ()
    group_m: int = 8
    loads: str = "descriptor"

    @property
    def shape(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"

    @property
    def key(self) -> str:
        """The configuration in one line; with a row's ``what`` and protocol, the gate's key."""
        split = "+".join(map(str, self.split)) or "auto"
        return (f"{self.kernel} {self.shape} {self.dtype} {'x'.join(map(str, self.block))} "
                f"s{self.stages} w{self.warps} {split} g{self.group_m} {self.loads}")

    @property
    def flops(self) -> int:
        """``2 M N K``: one ``M x N x K`` GEMM's multiply-adds (the whole problem of every kernel
        but all-gather-gemm, whatever the number of ranks; :func:`problem_flops`)."""
        return 2 * self.m * self.n * self.k

    @property
    def intensity(self) -> float:
        """FLOP per byte of the GEMM: ``2 M N K / ((M K + K N + M N) x element size)`` (the
        seeds' definition: each operand read once, C written once)."""
        return self.flops / ((self.m * self.k + self.k * self.n + self.m * self.n) * ELEMENT_BYTES[self.dtype])

    def kernel_config(self, *, world_size: int, virtual: bool = True, interpret: bool = False,
                      gemm_only: bool = False):
        """The ``syncverify.kernels.config.KernelConfig`` of this case (split resolved)."""
        gemm, comm, recv = (tuple(self.split) + (1, 1, 1))[:3]
        return KernelConfig(kernel=self.kernel, world_size=world_size, m=self.m, n=self.n, k=self.k,
                            block_m=self.block[0], block_n=self.block[1], block_k=self.block[2],
                            gemm_sms=gemm, comm_sms=comm, recv_sms=recv, dtype=self.dtype,
                            num_warps=self.warps, num_stages=self.stages, virtual=virtual,
                            table=not virtual,  # real ranks reach each other through address tables
                            interpret=interpret, loads=self.loads, group_m=self.group_m,
                            gemm_only=gemm_only)


def problem_flops(case: Case, world_size: int) -> int:
    """The multiply-adds of the whole problem on ``world_size`` ranks: ``2 M N K``, except in
    all-gather-gemm, where every rank multiplies the whole gathered A (``M x K``) by its own B
    (``K x N``): ``world_size`` GEMMs.

    >>> problem_flops(Case(kernel="all-gather-gemm", m=64, n=32, k=16), 2) == 2 * Case(m=64, n=32, k=16).flops
    True
    """
    return case.flops * (world_size if case.kernel == "all-gather-gemm" else 1)


def default_split(kernel: str, *, sms: int, world_size: int) -> tuple[int, ...]:
    """Programs per rank when the sweep gives none: every SM busy, about one in eleven programs
    consuming (all-reduce, gemm-reduce-scatter: 60 + 6 of an H200's 66 per rank at W = 2; all-scatter:
    58 + 4 + 4); in all-gather-gemm about one in eleven sends its shard and the rest multiply (6 + 60).

    >>> default_split("all-reduce", sms=132, world_size=2), default_split("all-scatter", sms=132, world_size=2)
    ((60, 6), (58, 4, 4))
    >>> default_split("all-gather-gemm", sms=132, world_size=2), default_split("gemm-reduce-scatter", sms=132, world_size=2)
    ((6, 60), (60, 6))
    """
    per_rank = sms // world_size
    if kernel in ("all-reduce", "gemm-reduce-scatter"):
        comm = max(1, per_rank // 11)
        return (max(1, per_rank - comm), comm)
    if kernel == "all-gather-gemm":  # the senders only copy A: about one in eleven sends, the rest multiply
        senders = max(1, per_rank // 11)
        return (senders, max(1, per_rank - senders))
    comm = max(1, per_rank // 16)
    return (max(1, per_rank - 2 * comm), comm, comm)


def resolve(case: Case, *, sms: int, world_size: int) -> Case:
    """``case`` with its split filled in from the GPU's SMs (unchanged if the sweep gave one)."""
    if case.split:
        return case
    return replace(case, split=default_split(case.kernel, sms=sms, world_size=world_size))


# ----- sweep files ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sweep:
    """A parsed sweep: the protocols to time (``none`` first) and the cases, in file order."""

    name: str
    protocols: tuple[str, ...]
    world_size: int
    launches: int
    repeats: int
    cases: tuple[Case, ...]
    note: str = ""


def _where(path: str, section: str) -> str:
    return f"{path}: {section}" if section else path


def _unknown(keys: Iterable[str], known: dict, path: str, section: str) -> None:
    for key in keys:
        if key not in known:
            hint = did_you_mean(key, list(known))
            raise BenchInputError(f"{_where(path, section)}: unknown key {key!r}{hint} "
                                  f"(known: {', '.join(known)})")


def _as_list(value: Any, *, nested: bool = False) -> list:
    """A sweep value as the list of its alternatives (``nested``: a list of lists stays one)."""
    if nested:
        return value if value and isinstance(value[0], list) else [value]
    return value if isinstance(value, list) else [value]


def _integer(value: Any, what: str, where: str, *, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise BenchInputError(f"{where}: {what}={value!r} must be an integer >= {low}")
    return value


def _one_case(values: dict, where: str) -> Case:
    shape = values["shape"]
    if not (isinstance(shape, list) and len(shape) == 3):
        raise BenchInputError(f"{where}: shape={shape!r} must be [M, N, K]")
    m, n, k = (_integer(v, "shape", where) for v in shape)
    block = values.get("block", list(Case.block))
    if not (isinstance(block, list) and len(block) == 3):
        raise BenchInputError(f"{where}: block={block!r} must be [BLOCK_M, BLOCK_N, BLOCK_K]")
    block = tuple(_integer(v, "block", where, low=16) for v in block)
    split = values.get("split", [])
    if not isinstance(split, list):
        raise BenchInputError(f"{where}: split={split!r} must be a list of programs per rank")
    split = tuple(_integer(v, "split", where) for v in split)
    kernel, dtype, loads = values["kernel"], values.get("dtype", Case.dtype), values.get("loads", Case.loads)
    for name, value, allowed in (("kernel", kernel, KERNELS), ("dtype", dtype, tuple(ELEMENT_BYTES)),
                                 ("loads", loads, LOADS)):
        if value not in allowed:
            raise BenchInputError(f"{where}: {name}={value!r} is not one of {', '.join(allowed)}")
    want = 3 if kernel in THREE_ROLE_KERNELS else 2
    if split and len(split) != want:
        shown = {"all-scatter": "[producers, comm, receivers]",
                 "all-gather-gemm": "[senders, GEMM programs]"}.get(kernel, "[producers, consumers]")
        raise BenchInputError(f"{where}: split={list(split)} must be {shown} for {kernel}")
    return Case(kernel=kernel, m=m, n=n, k=k, dtype=dtype, block=block,
                stages=_integer(values.get("stages", Case.stages), "stages", where),
                warps=_integer(values.get("warps", Case.warps), "warps", where),
                split=split, group_m=_integer(values.get("group_m", Case.group_m), "group_m", where),
                loads=loads)


def expand_case(table: dict, *, defaults: dict, kernels: tuple[str, ...], where: str) -> list[Case]:
    """Every configuration of one ``[[case]]`` table: the product of its (and the defaults') lists."""
    values = dict(defaults, **table)
    if "shape" not in values:
        raise BenchInputError(f"{where}: no shape (give shape = [M, N, K])")
    values.setdefault("kernel", list(kernels))
    axes = {key: _as_list(value, nested=key in ("shape", "block", "split")) for key, value in values.items()}
    names = list(axes)
    return [_one_case(dict(zip(names, combo)), where) for combo in itertools.product(*axes.values())]


def with_baseline_protocol(protocols: Iterable[str]) -> tuple[str, ...]:
    """``protocols`` with ``none`` first (each protocol's overhead is measured against it)."""
    rest = [p for p in dict.fromkeys(protocols) if p != NO_SYNC]
    return (NO_SYNC, *rest)


def parse_sweep(text: str, *, path: str = "<sweep>", kernels: tuple[str, ...] = ("all-reduce",),
                protocols: tuple[str, ...] = (NO_SYNC,), world_size: int = 2) -> Sweep:
    """Parse a sweep file's text; ``kernels``/``protocols``/``world_size`` are the command
    line's, used where the file gives none.

    Raises
    ------
    BenchInputError
        Malformed TOML, an unknown key (with the known ones), a value of the wrong kind.

    Examples
    --------
    >>> sweep = parse_sweep('[[case]]\\nshape = [[1024, 1024, 1024], [2048, 1024, 1024]]\\nstages = [3, 4]')
    >>> [(c.m, c.stages) for c in sweep.cases], sweep.protocols
    ([(1024, 3), (1024, 4), (2048, 3), (2048, 4)], ('none',))
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise BenchInputError(f"{path}: not valid TOML ({error})") from None
    _unknown(data, TOP_KEYS, path, "")
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise BenchInputError(f"{path}: defaults must be a table ([defaults])")
    _unknown(defaults, CASE_KEYS, path, "[defaults]")
    tables = data.get("case", [])
    if not isinstance(tables, list) or not tables:
        raise BenchInputError(f"{path}: no [[case]] tables: a sweep needs at least one")
    sweep_kernels = tuple(_as_list(data.get("kernels", list(kernels))))
    cases: list[Case] = []
    for number, table in enumerate(tables, start=1):
        where = f"{path}: [[case]] {number}"
        _unknown(table, CASE_KEYS, path, f"[[case]] {number}")
        cases += expand_case(table, defaults=defaults, kernels=sweep_kernels, where=where)
    names = _as_list(data.get("protocols", list(protocols)))
    if not all(isinstance(p, str) for p in names):
        raise BenchInputError(f"{path}: protocols must be names or files")
    return Sweep(name=str(data.get("name", Path(path).stem)), protocols=with_baseline_protocol(names),
                 world_size=_integer(data.get("world_size", world_size), "world_size", path),
                 launches=_integer(data.get("launches", 20), "launches", path),
                 repeats=_integer(data.get("repeats", 10), "repeats", path),
                 cases=tuple(dict.fromkeys(cases)), note=str(data.get("note", "")))


def load_sweep(path: str | Path, **defaults: Any) -> Sweep:
    """:func:`parse_sweep` of a file (an unreadable file is bad input)."""
    data = read_input_file(path, "--sweep file", BenchInputError)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BenchInputError(f"--sweep {path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    return parse_sweep(text, path=str(path), **defaults)


# ----- measurements and report rows -------------------------------------------------------------

@dataclass(frozen=True)
class Measurement:
    """One timed thing of one case: ``what`` (:data:`WHATS`), its protocol (fused rows) and the
    median seconds per launch (``spread``: (min, max) over the timed replays)."""

    case: Case
    what: str
    seconds: float
    protocol: str = ""
    spread: tuple[float, float] = (0.0, 0.0)
    validated: str = ""  # "ok", "not validated (none)", or what was wrong
    per_rank: tuple[float, ...] = ()  # real ranks: each rank's own median, rank order


@dataclass(frozen=True)
class Ceilings:
    """The machine's measured ceilings in the same run: bf16 matmul TFLOPS and copy TB/s."""

    machine: str
    peak_tflops: float
    bandwidth_tbs: float
    sms: int = 0


def tflops(flops: float, seconds: float) -> float:
    """``flops / seconds`` in TFLOP/s."""
    return flops / seconds / 1e12


def report_rows(measurements: list[Measurement], ceilings: Ceilings, *, world_size: int,
                ranks: str = VIRTUAL) -> list[dict]:
    """One row per measurement, with the figures derived from the same run's other rows.

    * ``tflops``: :func:`problem_flops` over the time (``2 M N K / time``; all-gather-gemm: every
      rank's GEMM, ``W`` times that); ``efficiency_pct``: of the measured bf16 peak (times the
      number of GPUs with real ranks: ``world_size`` GPUs share the problem);
    * ``overhead_pct`` (fused rows): time over the same case's ``none`` time, minus 1;
    * ``of_cublas_pct`` (fused and gemm-part rows): cuBLAS time over this time (100: as fast);
    * ``cublas_nccl_us`` and ``speedup_vs_cublas_nccl`` (fused rows, real ranks): the same case's
      ``torch.matmul`` + NCCL time, and that time over this one (1.1: 1.1x as fast).
    """
    if ranks not in (VIRTUAL, PROCESSES):
        raise ValueError(f"ranks={ranks!r} is not one of {VIRTUAL!r}, {PROCESSES!r}")
    peak = ceilings.peak_tflops * (world_size if ranks == PROCESSES else 1)
    by_case: dict[Case, dict[tuple[str, str], Measurement]] = {}
    for m in measurements:
        by_case.setdefault(m.case, {})[(m.what, m.protocol)] = m
    rows = []
    for m in measurements:
        same = by_case[m.case]
        none = same.get(("fused", NO_SYNC))
        cublas = same.get(("cublas", ""))
        nccl = same.get(("cublas+nccl", ""))
        rate = tflops(problem_flops(m.case, world_size), m.seconds)
        unsafe = m.protocol == NO_SYNC
        rows.append({
            "kernel": m.case.kernel, "what": m.what, "protocol": m.protocol,
            "world_size": world_size, "m": m.case.m, "n": m.case.n, "k": m.case.k, "dtype": m.case.dtype,
            "tile": "x".join(map(str, m.case.block)), "stages": m.case.stages, "warps": m.case.warps,
            "split": "+".join(map(str, m.case.split)), "group_m": m.case.group_m, "loads": m.case.loads,
            "time_us": round(m.seconds * 1e6, 2),
            "min_us": round(m.spread[0] * 1e6, 2), "max_us": round(m.spread[1] * 1e6, 2),
            "tflops": round(rate, 1), "intensity": round(m.case.intensity, 1),
            "efficiency_pct": round(100 * rate / peak, 1) if peak else None,
            "overhead_pct": (round(100 * (m.seconds / none.seconds - 1), 2)
                             if m.what == "fused" and none is not None and not unsafe else None),
            "of_cublas_pct": (round(100 * cublas.seconds / m.seconds, 1)
                              if m.what in ("fused", "gemm-part") and cublas is not None else None),
            "cublas_nccl_us": (round(nccl.seconds * 1e6, 2) if m.what == "fused" and nccl is not None else None),
            "speedup_vs_cublas_nccl": (round(nccl.seconds / m.seconds, 3)
                                       if m.what == "fused" and nccl is not None else None),
            "unsafe": unsafe,
            "validated": m.validated,
            "note": UNSAFE_NOTE if unsafe else "",
            "ranks": ranks,
            "per_rank_us": " ".join(f"{t * 1e6:.2f}" for t in m.per_rank),
            "key": row_key(m.case, m.what, m.protocol, ranks=ranks, world_size=world_size),
        })
    return rows


def row_key(case: Case, what: str, protocol: str, *, ranks: str = VIRTUAL, world_size: int = 0) -> str:
    """The gate's key of a row: the configuration, what was timed, and the protocol; real-rank
    rows end in ``| W processes`` (on one machine kind the two ways of running differ).

    >>> row_key(Case(split=(60, 6)), "fused", "epoch-flag", ranks="processes", world_size=2)
    'all-reduce 8192x4608x8192 bf16 128x256x64 s3 w8 60+6 g8 descriptor | fused | epoch-flag | 2 processes'
    """
    key = f"{case.key} | {what}" + (f" | {protocol}" if protocol else "")
    return key + (f" | {world_size} {PROCESSES}" if ranks == PROCESSES else "")


def combine_ranks(per_rank: list[list[Measurement]]) -> list[Measurement]:
    """One measurement per timed thing from every rank's own list (the same things, in the same
    order, on every rank): the slowest rank's median (a collective, and a fused kernel that
    waits for its peers, is done when its last rank is), the spread over every rank's replays,
    each rank's median in ``per_rank``, and ``ok`` only when every rank validated.

    >>> case = Case()
    >>> a = Measurement(case, "cublas+nccl", 2.0, spread=(1.9, 2.2), validated="ok")
    >>> b = Measurement(case, "cublas+nccl", 2.5, spread=(2.4, 2.6), validated="ok")
    >>> m, = combine_ranks([[a], [b]])
    >>> m.seconds, m.spread, m.per_rank, m.validated
    (2.5, (1.9, 2.6), (2.0, 2.5), 'ok')
    """
    if not per_rank or len({len(mine) for mine in per_rank}) != 1:
        raise ValueError(f"every rank must report the same things, got {[len(m) for m in per_rank]}")
    combined = []
    for same in zip(*per_rank):
        first = same[0]
        if any((m.case, m.what, m.protocol) != (first.case, first.what, first.protocol) for m in same):
            raise ValueError(f"ranks timed different things at {first.what} {first.protocol}")
        verdicts = [m.validated for m in same]
        validated = first.validated if len(set(verdicts)) == 1 else "; ".join(
            f"rank {rank}: {v or 'not validated'}" for rank, v in enumerate(verdicts) if v != "ok")
        combined.append(replace(first, seconds=max(m.seconds for m in same),
                                spread=(min(m.spread[0] for m in same), max(m.spread[1] for m in same)),
                                validated=validated, per_rank=tuple(m.seconds for m in same)))
    return combined


def check_world(world_size: int, gpus: int) -> None:
    """Refuse real ranks without a GPU each (one process per GPU).

    >>> check_world(2, 1)
    Traceback (most recent call last):
    ...
    syncverify.kernels.bench.report.BenchInputError: --world-size=2 runs one process per GPU and 1 GPU is visible; add --virtual-ranks to run every rank on one GPU
    """
    if world_size > gpus:
        visible = f"{gpus} GPU is" if gpus == 1 else f"{gpus} GPUs are"
        raise BenchInputError(f"--world-size={world_size} runs one process per GPU and {visible} visible; "
                              "add --virtual-ranks to run every rank on one GPU")


def _speedups(rows: list[dict]) -> list[dict]:
    """The synchronized fused rows that have a cuBLAS + NCCL time to compare with."""
    return [r for r in rows if r["what"] == "fused" and not r["unsafe"]
            and r.get("speedup_vs_cublas_nccl") is not None]


def speedup_lines(rows: list[dict], *, target: float = SPEEDUP_TARGET) -> list[str]:
    """Each synchronized fused row against cuBLAS + NCCL in one line: met, or short by how much.

    >>> rows = [{"what": "fused", "unsafe": False, "kernel": "all-reduce", "m": 8192, "n": 4608, "k": 36864,
    ...          "protocol": "epoch-flag", "time_us": 2000.0, "cublas_nccl_us": 2130.0,
    ...          "speedup_vs_cublas_nccl": 1.065}]
    >>> speedup_lines(rows)
    ['all-reduce 8192x4608x36864 epoch-flag: 1.065x cuBLAS+NCCL (2000.0 vs 2130.0 µs): target 1.1x missed by 3.2 %']
    """
    lines = []
    for r in _speedups(rows):
        speedup = r["speedup_vs_cublas_nccl"]
        verdict = ("met" if speedup >= target
                   else f"missed by {100 * (target - speedup) / target:.1f} %")
        lines.append(f"{r['kernel']} {r['m']}x{r['n']}x{r['k']} {r['protocol']}: {speedup:.3f}x cuBLAS+NCCL "
                     f"({r['time_us']:.1f} vs {r['cublas_nccl_us']:.1f} µs): target {target:g}x {verdict}")
    return lines


def check_speedup(rows: list[dict], *, minimum: float) -> tuple[tuple[str, float], ...]:
    """The synchronized fused rows under ``minimum`` x as fast as cuBLAS + NCCL: ``(key, speedup)``.

    >>> check_speedup([{"what": "fused", "unsafe": False, "key": "a", "speedup_vs_cublas_nccl": 1.05},
    ...                {"what": "fused", "unsafe": False, "key": "b", "speedup_vs_cublas_nccl": 1.2}], minimum=1.1)
    (('a', 1.05),)
    """
    if minimum <= 0:
        raise BenchInputError(f"--min-speedup={minimum} must be positive (1.1: 1.1x as fast as cuBLAS + NCCL)")
    return tuple((r["key"], r["speedup_vs_cublas_nccl"]) for r in _speedups(rows)
                 if r["speedup_vs_cublas_nccl"] < minimum)


CSV_FIELDS = ("kernel", "what", "protocol", "unsafe", "world_size", "m", "n", "k", "dtype", "tile",
              "stages", "warps", "split", "group_m", "loads", "time_us", "min_us", "max_us", "tflops",
              "intensity", "efficiency_pct", "overhead_pct", "of_cublas_pct", "validated", "note",
              "ranks", "cublas_nccl_us", "speedup_vs_cublas_nccl", "per_rank_us")


def to_csv(rows: list[dict]) -> str:
    """The rows as CSV (one header line, :data:`CSV_FIELDS`)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_FIELDS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    return buffer.getvalue()


def _cell(value: Any, suffix: str = "") -> str:
    return "-" if value is None or value == "" else f"{value}{suffix}"


def to_markdown(rows: list[dict], ceilings: Ceilings, *, title: str = "syncverify bench", note: str = "",
                unavailable: Iterable[str] = (), stopped: str | None = None) -> str:
    """The rows as a markdown document: the ceilings, then one table per kernel (with the
    cuBLAS + NCCL columns and the speedup against the 1.1x target when the run had real ranks),
    then what could not be measured here (``unavailable``, one line each) and why the run
    stopped early (``stopped``: its verdict is unknown)."""
    lines = [f"# {title}", "",
             f"Machine `{ceilings.machine}`: measured bf16 matmul peak **{ceilings.peak_tflops:.0f} TFLOP/s**, "
             f"device copy **{ceilings.bandwidth_tbs:.2f} TB/s** (bytes read + written), same run.", ""]
    real = [r for r in rows if r.get("ranks") == PROCESSES]
    if real:
        lines += [f"Real ranks: {real[0]['world_size']} processes, one GPU each; each time is the slowest "
                  "rank's; efficiency is against the peak times the GPUs.", ""]
    if note:
        lines += [note, ""]
    lines += [f"`none` rows: {UNSAFE_NOTE}.", ""]
    nccl = any(r["what"] == "cublas+nccl" for r in rows)
    header = ("| shape | tile | s | w | split | what | protocol | µs | TFLOP/s | AI | eff % | "
              "overhead vs none | % of cuBLAS |" + (" cuBLAS+NCCL µs | speedup vs cuBLAS+NCCL |" if nccl else ""))
    rule = "| --- | --- | ---: | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |" + (
        " ---: | ---: |" if nccl else "")
    for kernel in dict.fromkeys(r["kernel"] for r in rows):
        lines += [f"## {kernel}", "", header, rule]
        for r in (r for r in rows if r["kernel"] == kernel):
            protocol = f"{r['protocol']} (UNSAFE)" if r["unsafe"] else (r["protocol"] or "-")
            speedup = r.get("speedup_vs_cublas_nccl")
            extra = (f" {_cell(r.get('cublas_nccl_us'))} | {_cell(speedup and f'{speedup:.3f}', 'x')} |"
                     if nccl else "")
            lines.append(
                f"| {r['m']}x{r['n']}x{r['k']} {r['dtype']} | {r['tile']} {r['loads'][:4]} g{r['group_m']} | "
                f"{r['stages']} | {r['warps']} | {r['split']} | {r['what']} | {protocol} | {r['time_us']:.1f} | "
                f"{r['tflops']:.1f} | {r['intensity']:.0f} | {_cell(r['efficiency_pct'])} | "
                f"{_cell(r['overhead_pct'], ' %')} | {_cell(r['of_cublas_pct'], ' %')} |" + extra)
        lines.append("")
    verdicts = speedup_lines(rows)
    if verdicts:
        lines += [f"## Against cuBLAS + NCCL (target: {SPEEDUP_TARGET:g}x)", ""]
        lines += [f"* {line}" for line in verdicts] + [""]
    if stopped:
        lines += [f"**Stopped early, verdict unknown**: {stopped}. The rows above are the cases that "
                  "reported before it.", ""]
    for line in unavailable:
        lines.append(f"Not measured here: {line}")
    return "\n".join(lines).rstrip() + "\n"


def draw_roofline(rows: list[dict], ceilings: Ceilings, path: str | Path, *, title: str = "") -> None:
    """A roofline PNG: arithmetic intensity (x, log) against achieved TFLOP/s (y, log), one marker
    per row kind, the measured matmul peak and ``bandwidth x intensity`` drawn as the ceilings
    (times the GPUs for real-rank rows)."""
    # matplotlib: about a second to import, only for drawing a picture
    import matplotlib

    matplotlib.use("Agg")
    # matplotlib: about a second to import, only for drawing a picture
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=120)
    xs = [r["intensity"] for r in rows] or [1.0]
    lo, hi = min(xs) / 4, max(xs) * 4
    grid = [lo * (hi / lo) ** (i / 100) for i in range(101)]
    # real ranks: W GPUs share the problem, so the roof is W times one GPU's
    gpus = rows[0]["world_size"] if rows and rows[0].get("ranks") == PROCESSES else 1
    peak, bandwidth = ceilings.peak_tflops * gpus, ceilings.bandwidth_tbs * gpus
    roof = [min(peak, bandwidth * x) for x in grid]
    ax.plot(grid, roof, color="black", linewidth=1.5,
            label=f"measured ceilings: {peak:.0f} TFLOP/s, {bandwidth:.2f} TB/s"
                  + (f" ({gpus} GPUs x one GPU's)" if gpus > 1 else ""))
    styles = {"cublas": ("s", "tab:gray"), "gemm-part": ("D", "tab:blue"), "cublas+nccl": ("v", "tab:brown")}
    series: dict[str, list[dict]] = {}
    for r in rows:
        label = r["what"] if r["what"] != "fused" else f"fused {r['kernel']} {r['protocol']}" + (
            " (UNSAFE baseline)" if r["unsafe"] else "")
        series.setdefault(label, []).append(r)
    palette = iter(["tab:red", "tab:green", "tab:orange", "tab:purple", "tab:olive", "tab:cyan", "tab:pink"] * 4)
    for label, members in series.items():
        marker, color = styles.get(members[0]["what"], ("o" if not members[0]["unsafe"] else "x", None))
        ax.scatter([r["intensity"] for r in members], [r["tflops"] for r in members], marker=marker,
                   color=color or next(palette), label=label, s=28, alpha=0.85)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte: 2MNK / ((MK + KN + MN) x element size))")
    ax.set_ylabel("achieved TFLOP/s (2MNK / time)")
    ax.set_title(title or f"roofline, {ceilings.machine}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# ----- baselines and the gate -------------------------------------------------------------------

def make_baseline(rows: list[dict], *, machine: str, command: str = "", date: str = "") -> dict:
    """The baseline file's content: the machine kind and each gated row's TFLOPS by key (fused
    and gemm-part rows; cuBLAS is not ours to gate)."""
    return {"format": BASELINE_FORMAT, "machine": machine, "command": command, "date": date,
            "tflops": {r["key"]: r["tflops"] for r in rows if r["what"] in ("fused", "gemm-part")}}


def load_baseline(path: str | Path) -> dict:
    """Read a baseline file; anything that is not one is bad input."""
    raw = read_input_file(path, "--check baseline", BenchInputError)
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise BenchInputError(f"--check {path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise BenchInputError(f"--check {path}: not JSON ({error.msg}, line {error.lineno})") from None
    if not isinstance(data, dict) or data.get("format") != BASELINE_FORMAT or not isinstance(data.get("tflops"), dict):
        raise BenchInputError(f"--check {path}: not a syncverify bench baseline (format {BASELINE_FORMAT!r} "
                              "with a 'tflops' table; write one with --out)")
    return data


def check_machine(baseline: dict, machine: str, *, path: str = "baseline") -> None:
    """Refuse a baseline recorded on another machine kind (its TFLOPS mean nothing here)."""
    if baseline.get("machine") != machine:
        raise BenchInputError(f"--check {path}: recorded on {baseline.get('machine')!r}, this machine is "
                              f"{machine!r}; use a baseline measured on {machine!r}")


@dataclass(frozen=True)
class GateResult:
    """Rows checked against a baseline: the regressions (key, measured, recorded), the keys
    checked, and the rows the baseline has no figure for."""

    regressions: tuple[tuple[str, float, float], ...]
    checked: tuple[str, ...]
    missing: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return not self.regressions


def check_rows(rows: list[dict], baseline: dict, *, tolerance: float) -> GateResult:
    """Compare each fused/gemm-part row with its recorded TFLOPS: under ``tolerance x recorded``
    is a regression.

    >>> rows = [{"key": "a", "what": "fused", "tflops": 70.0}, {"key": "b", "what": "fused", "tflops": 90.0}]
    >>> check_rows(rows, {"tflops": {"a": 100.0, "b": 100.0}}, tolerance=0.8).regressions
    (('a', 70.0, 100.0),)
    """
    if not 0 < tolerance <= 1:
        raise BenchInputError(f"--tolerance={tolerance} must be in (0, 1]: the share of the recorded TFLOPS to keep")
    recorded = baseline["tflops"]
    regressions, checked, missing = [], [], []
    for r in rows:
        if r["what"] not in ("fused", "gemm-part"):
            continue
        if r["key"] not in recorded:
            missing.append(r["key"])
            continue
        checked.append(r["key"])
        if r["tflops"] < tolerance * float(recorded[r["key"]]):
            regressions.append((r["key"], r["tflops"], float(recorded[r["key"]])))
    return GateResult(tuple(regressions), tuple(checked), tuple(missing))


def machine_kind(device_name: str, count: int) -> str:
    """This workplace's name of a machine: ``nvidia-h200`` (one H200), ``nvidia-h200-x2``, ...;
    other GPUs by their lower-cased name.

    >>> machine_kind("NVIDIA H200", 1), machine_kind("NVIDIA H200", 2), machine_kind("cpu-interpreter", 1)
    ('nvidia-h200', 'nvidia-h200-x2', 'cpu-interpreter')
    """
    base = "-".join(device_name.lower().split())
    return base if count == 1 else f"{base}-x{count}"


__all__ = ["Case", "Ceilings", "GateResult", "Measurement", "Sweep", "BenchInputError", "check_rows",
           "check_machine", "check_speedup", "check_world", "combine_ranks", "default_split", "draw_roofline",
           "load_baseline", "load_sweep", "machine_kind", "make_baseline", "parse_sweep", "problem_flops", "report_rows",
           "resolve", "speedup_lines", "to_csv", "to_markdown"]
