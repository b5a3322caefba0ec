"""``syncverify bench``: what each protocol costs inside the fused kernels, against ``none``, cuBLAS
and (real ranks) cuBLAS + NCCL.

Device-timed (CUDA graphs of many launches, inputs rotated past the L2, the same run's measured
ceilings; ``syncverify.kernels.bench.timing``), reported per configuration as time, TFLOP/s, arithmetic
intensity, efficiency against the measured bf16 peak, each protocol's overhead against ``none``
and the GEMM part's share of cuBLAS (``syncverify.kernels.bench.report``). ``--out DIR`` writes ``bench.csv``,
``bench.md``, ``roofline.png``, ``bench.json`` and ``baseline.json``; ``--check BASELINE.json``
exits 1 when a configuration falls under ``--tolerance`` times its recorded TFLOP/s.

Ranks: ``--virtual-ranks`` runs every rank's programs in one launch on one GPU; without it, a
world size above 1 runs one process per GPU (``syncverify.kernels.bench.ranks``, stress's
launcher and watchdog), with ``torch.matmul`` + NCCL ``all_reduce`` / ``all_gather_into_tensor``
timed in the same run and each fused kernel's speedup against it (``--min-speedup`` gates it).
Such a run writes each case to ``bench-partial.jsonl`` as it arrives (in ``--out``, or a
temporary file it names), and a run the watchdog stopped reports the cases it has, exit 3.

Exit codes: 0 done (and the gates passed), 1 a regression against ``--check``, a fused kernel
under ``--min-speedup``, or a synchronized build that computed a wrong result, 2 bad input (one
line: sizes that do not divide the tiles, a sweep with unknown keys, a baseline for another
machine kind, more ranks than GPUs, no GPU without ``--interpret``), 3 a real-rank run stopped
(watchdog, a rank that failed) before every case reported. torch and triton are imported inside
the command only.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Optional
from dataclasses import replace

import typer

from syncverify import exitcodes
from syncverify.kernels.bench.report import (BenchInputError, Case, PROCESSES, Sweep, VIRTUAL, check_machine, machine_kind,
                                             check_rows, check_speedup, check_world, draw_roofline, load_baseline,
                                             load_sweep, machine_kind, make_baseline, report_rows, to_csv,
                                             to_markdown, with_baseline_protocol)
from syncverify.cli.app import app, err, fail, out
from syncverify.kernels.config import KERNELS, MAX_WORLD
from syncverify.validation import one_of
from syncverify.cli.output_files import check_writable, write_or_warn
from syncverify.cli.progress import StderrProgress
from syncverify.errors import SyncVerifyError
from syncverify.kernels.bench.ranks import check_cases, run_sweep_ranks
from syncverify.kernels.bench.tuning import load_tile_table, tuned_case

DEFAULT_PROTOCOLS = "barrier-fenced-release-acquire,epoch-flag"
NCCL_UNAVAILABLE = ("cuBLAS + NCCL (torch.matmul then all_reduce / all_gather_into_tensor / reduce_scatter_tensor, "
                    "or all_gather_into_tensor of A then torch.matmul, on real ranks): "
                    "not measured: --virtual-ranks runs every rank on one GPU; without it, a world size "
                    "above 1 runs one process per GPU and times it")
PARTIAL = "bench-partial.jsonl"


class SweepProgress(StderrProgress):
    """``bench: 3/17 all-reduce 8192x4608x8192 ...: epoch-flag, 12.0 s``."""

    def __init__(self) -> None:
        super().__init__(after=0.5, plain_every=10.0, name="syncverify-bench-progress")
        self.state = (0, 1, "starting")

    def update(self, done: int, total: int, label: str) -> None:
        self.state = (done, total, label)

    def line(self) -> str:
        done, total, label = self.state
        return f"bench: {done}/{total} {label}, {self.elapsed():.1f} s"


def _cli_sweep(kernel: str, protocols: tuple[str, ...], world_size: int, case: dict, launches: int,
               repeats: int) -> Sweep:
    split = tuple(v for v in case.pop("split") if v is not None)
    return Sweep(name="syncverify bench", protocols=protocols, world_size=world_size, launches=launches,
                 repeats=repeats, cases=(Case(kernel=kernel, split=split, **case),))


@app.command("bench")
def bench_command(
    kernel: str = typer.Option("all-reduce", "--kernel", help="all-reduce | all-scatter | all-gather-gemm | gemm-reduce-scatter (default: all-reduce; a sweep file may name several)"),
    protocol: str = typer.Option(DEFAULT_PROTOCOLS, "--protocol", help=f"comma-separated protocol names or files; 'none' (no synchronization, UNSAFE, the cost baseline) is always added (default: {DEFAULT_PROTOCOLS})"),
    world_size: int = typer.Option(2, "--world-size", help="ranks (default: 2)"),
    virtual_ranks: bool = typer.Option(False, "--virtual-ranks", help="every rank on one GPU (default at --world-size > 1: one process per GPU, with cuBLAS + NCCL timed beside)"),
    interpret: bool = typer.Option(False, "--interpret", help="run in Triton's CPU interpreter at tiny sizes (checks the pipeline; host-timed numbers mean nothing)"),
    sweep_file: Optional[Path] = typer.Option(None, "--sweep", help="a sweep TOML file (docs/bench.md); instead of --m/--n/--k and the tile options"),
    m: int = typer.Option(8192, "--m", help="rows of C (default: 8192)"),
    n: int = typer.Option(4608, "--n", help="columns of C (default: 4608)"),
    k: int = typer.Option(8192, "--k", help="inner dimension (default: 8192)"),
    dtype: str = typer.Option("bf16", "--dtype", help="bf16 | fp16 (default: bf16)"),
    block_m: int = typer.Option(128, "--block-m", help="tile rows (default: 128)"),
    block_n: int = typer.Option(256, "--block-n", help="tile columns (default: 256)"),
    block_k: int = typer.Option(64, "--block-k", help="K step (default: 64)"),
    stages: int = typer.Option(3, "--stages", help="software-pipelining stages (default: 3)"),
    warps: int = typer.Option(8, "--warps", help="warps per program (default: 8)"),
    gemm_sms: Optional[int] = typer.Option(None, "--gemm-sms", help="producer (all-gather-gemm: sender) programs per rank (default: from the SMs, e.g. 60 of 66 at W=2 virtual ranks, 120 of 132 on real ranks)"),
    comm_sms: Optional[int] = typer.Option(None, "--comm-sms", help="consumer (all-scatter: comm; all-gather-gemm: GEMM) programs per rank"),
    recv_sms: Optional[int] = typer.Option(None, "--recv-sms", help="all-scatter receiver programs per rank"),
    group_m: int = typer.Option(8, "--group-m", help="tile rows per group of the producers' order (default: 8)"),
    loads: str = typer.Option("descriptor", "--loads", help="descriptor | pointer: how producers read A and B (default: descriptor)"),
    launches: int = typer.Option(20, "--launches", help="launches per timed CUDA graph (default: 20)"),
    repeats: int = typer.Option(10, "--repeats", help="timed graph replays; the median is reported (default: 10)"),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="write bench.csv, bench.md, roofline.png, bench.json, baseline.json here"),
    json_output: bool = typer.Option(False, "--json", help="print the rows as one JSON object"),
    check: Optional[Path] = typer.Option(None, "--check", help="a baseline JSON (from --out): exit 1 if a configuration is under --tolerance x its recorded TFLOP/s"),
    tolerance: float = typer.Option(0.8, "--tolerance", help="share of the recorded TFLOP/s --check requires (default: 0.8)"),
    seed: int = typer.Option(0, "--seed", help="seed of the random inputs (default: 0)"),
    min_speedup: Optional[float] = typer.Option(None, "--min-speedup", help="real ranks: exit 1 if a synchronized fused kernel is under this many times as fast as cuBLAS + NCCL (the issue's target: 1.1)"),
    watchdog: float = typer.Option(300.0, "--watchdog", help="real ranks: stop the run (exit 3, partial results kept) when no rank has reported for this many seconds (default: 300)"),
    tiles: Optional[Path] = typer.Option(None, "--tiles", help="a tile table (kernels/bench/tiles/<machine>.json, shipped per machine kind): every case takes the tile, stages, warps, tile order and split the table gives its kernel and shape (a shape it lacks is bad input)"),
    graphs: bool = typer.Option(True, "--graphs/--no-graphs", help="replay the timed launches as CUDA graphs (default), or launch them eagerly between the same CUDA events"),
) -> None:
    """Time the fused kernels per protocol against 'none', cuBLAS and (real ranks) cuBLAS + NCCL; tables, roofline, gates.

    Exit codes: 0 done, 1 a regression (--check), a kernel under --min-speedup or a wrong result,
    2 bad input, 3 a real-rank run stopped before every case reported.
    """
    try:
        if not 0 < tolerance <= 1:
            raise BenchInputError(f"--tolerance={tolerance} must be in (0, 1]: the share of the recorded TFLOPS to keep")
        baseline = load_baseline(check) if check is not None else None
        if out_dir is not None:
            check_writable(out_dir, "--out", kind="dir")
        names = tuple(p.strip() for p in protocol.split(",") if p.strip())
        kernels = tuple(x.strip() for x in kernel.split(",") if x.strip())
        for name in kernels:  # bad options before the missing GPU: the user fixes what they typed first
            one_of("--kernel", name, KERNELS, error=BenchInputError)
        if not 1 <= world_size <= MAX_WORLD:
            raise BenchInputError(f"--world-size={world_size} must be in 1..{MAX_WORLD}")
        if sweep_file is not None:
            sweep = load_sweep(sweep_file, kernels=kernels, protocols=names, world_size=world_size)
        else:
            case = dict(m=m, n=n, k=k, dtype=dtype, block=(block_m, block_n, block_k), stages=stages,
                        warps=warps, split=(gemm_sms, comm_sms, recv_sms if kernels[0] == "all-scatter" else None),
                        group_m=group_m, loads=loads)
            sweep = _cli_sweep(kernels[0], with_baseline_protocol(names), world_size, case, launches, repeats)
        table = None
        if tiles is not None:
            table = load_tile_table(tiles)
            sweep = replace(sweep, cases=tuple(tuned_case(c, table, path=f"--tiles {tiles}") for c in sweep.cases))
        real = sweep.world_size > 1 and not virtual_ranks and not interpret
        if min_speedup is not None and not real:
            raise BenchInputError("--min-speedup compares with cuBLAS + NCCL, which runs on real ranks only: "
                                  "drop --virtual-ranks/--interpret and give --world-size > 1")
        if min_speedup is not None:
            check_speedup([], minimum=min_speedup)  # a value that cannot be a speedup is bad input now
        if watchdog <= 0:
            raise BenchInputError(f"--watchdog={watchdog} must be positive (seconds without a report)")
        stopped = partial = None
        if real:
            rows, ceilings, bad, stopped, partial = _measure_ranks(
                sweep, seed=seed, baseline=baseline, check=check, graphs=graphs, watchdog=watchdog, out_dir=out_dir,
                tiles=(table, tiles))
        else:
            rows, ceilings, bad = _measure(sweep, interpret=interpret, seed=seed, baseline=baseline, check=check,
                                           graphs=graphs, tiles=(table, tiles))
    except SyncVerifyError as error:
        raise fail(str(error))
    if stopped is not None:
        err.print(f"syncverify: bench stopped, verdict unknown: {stopped}; partial results: {partial}", markup=False)
    if ceilings is None:  # stopped before the first measurement: nothing to report but why
        if json_output:
            out.print(json.dumps({"ranks": PROCESSES, "world_size": sweep.world_size, "stopped": stopped,
                                  "partial": str(partial), "rows": []}, sort_keys=True), markup=False)
        raise typer.Exit(exitcodes.UNKNOWN)
    gate = check_rows(rows, baseline, tolerance=tolerance) if baseline is not None else None
    slow = check_speedup(rows, minimum=min_speedup) if min_speedup is not None else ()
    unavailable = [] if real else [NCCL_UNAVAILABLE]
    document = {"machine": ceilings.machine, "peak_tflops": round(ceilings.peak_tflops, 1),
                "bandwidth_tbs": round(ceilings.bandwidth_tbs, 3), "world_size": sweep.world_size,
                "virtual_ranks": not real, "ranks": PROCESSES if real else VIRTUAL,
                "unavailable": unavailable, "stopped": stopped, "partial": None if partial is None else str(partial),
                "rows": rows,
                "gate": None if gate is None else {"tolerance": tolerance, "passed": gate.passed,
                                                   "regressions": [list(r) for r in gate.regressions],
                                                   "checked": len(gate.checked), "missing": list(gate.missing)},
                "speedup_gate": None if min_speedup is None else {"minimum": min_speedup, "passed": not slow,
                                                                  "under": [list(s) for s in slow]}}
    markdown = to_markdown(rows, ceilings, title=sweep.name, note=sweep.note, unavailable=unavailable,
                           stopped=stopped)
    if out_dir is not None:
        _write_outputs(out_dir, rows, ceilings, document, markdown, sweep)
    if json_output:
        out.print(json.dumps(document, sort_keys=True), markup=False)
    else:
        out.print(markdown, markup=False)
        if gate is not None:
            for key, got, recorded in gate.regressions:
                out.print(f"REGRESSION {key}: {got:.1f} TFLOP/s < {tolerance:g} x {recorded:.1f}", markup=False)
            out.print(f"gate: {len(gate.checked)} checked, {len(gate.regressions)} under {tolerance:g} x baseline, "
                      f"{len(gate.missing)} without a baseline figure", markup=False)
        for key, speedup in slow:
            out.print(f"TOO SLOW {key}: {speedup:.3f}x cuBLAS+NCCL < {min_speedup:g}x", markup=False)
    for row in bad:
        err.print(f"syncverify: wrong result: {row['key']}: {row['validated']}", markup=False)
    if bad or (gate is not None and not gate.passed) or slow:
        raise typer.Exit(exitcodes.FOUND)
    raise typer.Exit(exitcodes.UNKNOWN if stopped is not None else exitcodes.OK)


def _wrong_results(rows: list[dict]) -> list[dict]:
    """Synchronized rows whose validation failed (``none`` is never validated; cuBLAS is not ours)."""
    return [r for r in rows if r["validated"] not in ("", "ok") and not r["unsafe"]]


def _gpus() -> tuple[int, str, int]:
    """``(visible GPUs, the first one's name, its SMs)``; no GPU is bad input (torch imported here)."""
    # torch/triton: syncverify.kernels._deps imports them; only the GPU path needs it
    from syncverify.kernels._deps import require_cuda, torch

    require_cuda("syncverify bench")
    props = torch.cuda.get_device_properties(0)
    return torch.cuda.device_count(), props.name, props.multi_processor_count


def _check_tiles_machine(tiles: tuple, machine: str) -> None:
    """A tile table measured on another machine kind is bad input (its choices were made there)."""
    table, path = tiles
    if table is not None and table.get("machine") != machine:
        raise BenchInputError(f"--tiles {path}: measured on {table.get('machine')!r}, this machine is {machine!r}; "
                              f"use a tile table of {machine!r}")


def _measure_ranks(sweep: Sweep, *, seed: int, baseline, check, graphs: bool, watchdog: float, out_dir,
                   tiles: tuple = (None, None)):
    """One process per GPU (``syncverify.kernels.bench.ranks``): GPUs, sizes and the baseline's
    machine are checked before any process starts."""
    gpus, name, sms = _gpus()
    check_world(sweep.world_size, gpus)
    _check_tiles_machine(tiles, machine_kind(name, gpus))
    if baseline is not None:
        check_machine(baseline, machine_kind(name, gpus), path=str(check))
    check_cases(sweep, sms=sms, gpus=gpus)
    if out_dir is not None:
        partial = out_dir / PARTIAL
    else:
        handle, where = tempfile.mkstemp(prefix="syncverify-bench-", suffix=".jsonl")
        os.close(handle)
        partial = Path(where)
    with SweepProgress() as progress:
        outcome = run_sweep_ranks(sweep, seed=seed, graphs=graphs, watchdog_seconds=watchdog, partial=partial,
                                  progress=progress.update)
    if outcome.ceilings is None:
        return [], None, [], outcome.stopped or "no rank reported", partial
    rows = report_rows(outcome.measurements, outcome.ceilings, world_size=sweep.world_size, ranks=PROCESSES)
    stopped = outcome.stopped
    if stopped is not None:
        stopped = f"{stopped} ({outcome.cases_reported} of {outcome.cases_total} cases reported)"
    return rows, outcome.ceilings, _wrong_results(rows), stopped, partial


def _measure(sweep: Sweep, *, interpret: bool, seed: int, baseline, check, graphs: bool = True,
             tiles: tuple = (None, None)):
    """Run the sweep (torch and triton imported here); the baseline's machine is checked first."""
    if interpret:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    # torch/triton: syncverify.kernels._deps imports them; only the GPU path needs it
    from syncverify.kernels._deps import require_cuda, torch
    from syncverify.kernels.bench.timing import run_sweep

    if interpret:
        device, machine = "cpu", "cpu-interpreter"
    else:
        require_cuda("syncverify bench")
        device = "cuda"
        machine = machine_kind(torch.cuda.get_device_name(0), torch.cuda.device_count())
    if baseline is not None:
        check_machine(baseline, machine, path=str(check))
    if not interpret:  # the interpreter runs a GPU's table at its own (tiny) sizes
        _check_tiles_machine(tiles, machine)
    if interpret:
        sweep = _interpreted(sweep)
    with SweepProgress() as progress:
        ceilings, measurements = run_sweep(sweep, device=device, progress=progress.update, seed=seed,
                                           graphs=graphs)
    rows = report_rows(measurements, ceilings, world_size=sweep.world_size)
    return rows, ceilings, _wrong_results(rows)


def _interpreted(sweep: Sweep) -> Sweep:
    """The interpreter times nothing real: one launch per graph, one repeat."""
    return replace(sweep, launches=1, repeats=1)


def _write_outputs(out_dir: Path, rows, ceilings, document, markdown: str, sweep: Sweep) -> None:
    out_dir.mkdir(exist_ok=True)
    (out_dir / "bench.csv").write_text(to_csv(rows), encoding="utf-8")
    (out_dir / "bench.md").write_text(markdown, encoding="utf-8")
    (out_dir / "bench.json").write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    command = "syncverify " + " ".join(sys.argv[1:]) if sys.argv else ""
    baseline = make_baseline(rows, machine=ceilings.machine, command=command,
                             date=datetime.date.today().isoformat())
    (out_dir / "baseline.json").write_text(json.dumps(baseline, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    write_or_warn(lambda: draw_roofline(rows, ceilings, out_dir / "roofline.png", title=sweep.name),
                  "--out", out_dir / "roofline.png")


__all__ = ["bench_command"]
