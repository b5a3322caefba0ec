"""``syncverify compare [PROTOCOL|FILE ...]``: the model's verdicts beside the hardware's, one table.

The work is :func:`syncverify.compare.compare`; this module parses options, shows progress,
prints the table (or ``--json``) and writes ``--out DIR``. Exit 0 when no row is MODEL UNSOUND,
1 when one is, 2 on bad input (checked before any work, ``--out`` included).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Column, Table

from syncverify import compare as comparison, exitcodes
from syncverify.cli.app import app, err, out
from syncverify.cli.progress import StderrProgress
from syncverify.compare import DEFAULT_SECONDS, DEFAULT_TIMEOUT
from syncverify.cli.output_files import check_writable, write_or_warn

PROGRESS_AFTER = 2.0  # seconds before progress shows
PLAIN_PROGRESS_EVERY = 5.0  # seconds between two plain progress lines (stderr not a terminal)


@app.command("compare")
def compare_command(
    protocols: Optional[List[str]] = typer.Argument(None, help="Built-in protocol names or .toml files (default: every built-in).", show_default=False),
    scenario: str = typer.Option("all", "--scenario", help="all-reduce | all-scatter | all-gather-gemm | gemm-reduce-scatter | all (the four)."),
    world_sizes: Optional[List[int]] = typer.Option(None, "--world-size", help="Ranks; repeat for several (default: 2).", show_default=False),
    seconds: float = typer.Option(DEFAULT_SECONDS, "--seconds", help="Stress seconds per (protocol, scenario, world size) on the GPU."),
    no_gpu: bool = typer.Option(False, "--no-gpu", help="Model columns only, even where a GPU is present."),
    real_ranks: bool = typer.Option(False, "--real-ranks", help="Stress on one process per GPU (as 'syncverify stress' without --virtual-ranks: --world-size GPUs, NCCL, symmetric memory) instead of virtual ranks on GPU 0; every pair of a world size in one launch. With --interpret: one process per rank on the CPU (gloo)."),
    interpret: bool = typer.Option(False, "--interpret", help="Stress in Triton's CPU interpreter instead of a GPU: tiny sizes, 2 iterations per pair (with --real-ranks the last rank launched late: the interpreter runs no delays); checks the kernels' logic across ranks, not a GPU's memory model."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Write report.md, report.json, bad-tiles.png and graphs/ to DIR (created if missing; its parent must exist).", show_default=False),
    as_json: bool = typer.Option(False, "--json", help="Print report.json's content instead of the table."),
    timeout: float = typer.Option(DEFAULT_TIMEOUT, "--timeout", help="Seconds per model check before it answers unknown."),
    jobs: Optional[int] = typer.Option(None, "--jobs", help="Model checks run at once (default: the number of cores).", show_default=False),
    progress_every: Optional[float] = typer.Option(None, "--progress-every", min=0.01, hidden=True, help="Seconds before progress shows and between plain progress lines (tests)."),
) -> int:
    """Model-check every protocol and, on a GPU, stress it in the real kernel; say where they agree.

    agreement: 'agree' (model safe and hardware clean, or unsafe and failed), 'latent (N
    iterations)' (a violation the hardware has not shown yet), 'MODEL UNSOUND' (the hardware failed
    where the model says safe), 'unknown' (the model check hit --timeout). Without a GPU (or with
    --no-gpu) only the model columns are shown. All built-ins, all four scenarios, W=2: a few seconds.

    Exit 0 nothing unsound, 1 a row is MODEL UNSOUND, 2 bad input.
    """
    if out_dir is not None:
        check_writable(out_dir, "--out", kind="dir")  # before the run: an unwritable path is bad input
    if no_gpu and interpret:
        err.print("syncverify: error: --no-gpu and --interpret exclude each other (--interpret stresses on the CPU)",
                  markup=False)
        return exitcodes.INPUT_ERROR
    if interpret:
        gpu, note = False, ("hardware columns: Triton's interpreter on the CPU"
                            + (", one process per rank (gloo), the last rank launched late" if real_ranks else ", virtual ranks")
                            + "; a check of the kernels' logic, not of a GPU")
    elif no_gpu:
        gpu, note = False, "--no-gpu: model columns only"
    else:
        gpu = comparison.cuda_available()
        note = None if gpu else "no GPU: model columns only"
    after = PROGRESS_AFTER if progress_every is None else progress_every
    every = PLAIN_PROGRESS_EVERY if progress_every is None else progress_every
    with CompareProgress(after=after, plain_every=every) as report:
        rows = comparison.compare(protocols or [], [scenario], world_sizes or [2], seconds=seconds, gpu=gpu,
                                  jobs=jobs, timeout=timeout, progress=report.update, real_ranks=real_ranks,
                                  interpret=interpret)
        if out_dir is not None:
            # The answer is computed: a failure while drawing is a warning, not exit 2.
            write_or_warn(lambda: comparison.write_report(rows, out_dir, note=note, jobs=jobs, progress=report.update),
                          "--out", out_dir)
    if as_json:
        out.print(json.dumps(comparison.report_json(rows, note=note), indent=2), markup=False)
    else:
        _print_table(rows, note)
        if out_dir is not None:
            out.print(f"report: {out_dir / 'report.md'}", markup=False)
    unsound = [row for row in rows if row.unsound]
    for line in comparison.unsound_lines(rows):
        (err if as_json else out).print(line, style="bold red", markup=False)
    return exitcodes.FOUND if unsound else exitcodes.OK


def _print_table(rows, note: str | None) -> None:
    hardware = comparison.has_hardware(rows)
    if note:
        out.print(note, markup=False)
    table = Table(title="model vs hardware" if hardware else "model")
    for header in comparison.MODEL_HEADERS + (comparison.HARDWARE_HEADERS if hardware else ()):
        # Names are never cut; kinds and bad tiles wrap at commas on a narrow terminal.
        table.add_column(header, justify="right" if header in ("executions", "seconds", "iterations") else "left",
                         no_wrap=header not in ("violation kinds", "bad tiles"),
                         min_width=len("unwritten-read,") if header == "violation kinds" else None)
    styles = {"agree": "green", comparison.UNSOUND: "bold red", "unknown": "yellow"}
    for row, cells in zip(rows, comparison.table_rows(rows, hardware=hardware)):
        style = styles.get(row.agreement or "", "") if hardware else ""
        table.add_row(*cells, style=style or None)
    # Never cut a name into "barrier-fenc…": piped (80 columns by default) the table prints at its
    # natural width; on a terminal narrower than the table's least width (kinds and bad tiles
    # wrapped), at that width, and the terminal wraps the lines. rich clamps
    # ``print(width=...)`` to the console's width, hence a console of the width needed.

    measured = Measurement.get(out, out.options.update_width(1000), table)
    needed = measured.minimum if out.is_terminal else measured.maximum
    console = out
    if needed > out.width:
        console = Console(file=out.file, width=needed, highlight=False, soft_wrap=True,
                          force_terminal=out.is_terminal, color_system=out.color_system)
    console.print(table)


class CompareProgress(StderrProgress):
    """Where a comparison is (:mod:`syncverify.cli.progress`): on a terminal a rich progress bar
    for the current phase (model checks, stress campaigns, graphs). :meth:`update` is
    :func:`syncverify.compare.compare`'s ``progress`` callback.
    """

    PHASES = {"model": "model checks", "hardware": "stress campaigns", "graphs": "graphs"}

    def __init__(self, *, after: float, plain_every: float) -> None:
        super().__init__(after=after, plain_every=plain_every, name="syncverify-compare-progress")
        self.latest: tuple[str, int, int, str] = ("model", 0, 0, "")

    def update(self, phase: str, done: int, total: int, detail: str) -> None:
        self.latest = (phase, done, total, detail)

    def line(self) -> str:
        phase, done, total, detail = self.latest
        return (f"compare: {self.PHASES.get(phase, phase)} {done}/{total}, {self.elapsed():.0f}s elapsed"
                + (f" ({detail})" if detail else ""))

    def terminal(self) -> None:
        # Fixed widths but the detail's, which is cut to what is left: the bar does not jitter.
        columns = (TextColumn("{task.description}", table_column=Column(width=16, no_wrap=True)),
                   BarColumn(bar_width=24), MofNCompleteColumn(table_column=Column(width=7, no_wrap=True)),
                   TimeElapsedColumn(),
                   TextColumn("{task.fields[detail]}", table_column=Column(no_wrap=True, overflow="ellipsis", ratio=1)))
        with Progress(*columns, console=err, transient=True, expand=True) as bar:
            task = bar.add_task("compare", total=None, detail="")
            while True:
                phase, done, total, detail = self.latest
                bar.update(task, description=self.PHASES.get(phase, phase), completed=done,
                           total=total or None, detail=detail)
                if self.done.wait(0.25):
                    return
