"""``syncverify litmus FILE... [--json] [--graph DIR]``: run PTX litmus tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from syncverify import exitcodes
from syncverify.cli.app import app, err, fail, out
from syncverify.json_schema import versioned
from syncverify.cli.check import DEFAULT_TIMEOUT, PLAIN_PROGRESS_EVERY, PROGRESS_AFTER, ProgressReport
from syncverify.cli.progress import DEFAULT_MAX_MEMORY_MB
from syncverify.explore.driver import DEFAULT_MAX_EXECUTIONS, DEFAULT_MAX_STEPS
from syncverify.cli.output_files import check_writable, write_or_warn
from syncverify.errors import SyncVerifyError
from syncverify.litmus.parser import parse_litmus_file
from syncverify.litmus.runner import run_litmus
from syncverify.verdicts.graphs import write_graph
from syncverify.cli.litmus_gpu import run_gpu_command


@app.command("litmus")
def litmus_command(
    files: List[Path] = typer.Argument(..., help="PTX litmus files (herd7 / Dartagnan syntax).", show_default=False),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list of verdicts instead of text."),
    graph: Optional[Path] = typer.Option(None, "--graph", help="Write DOT and PNG of one witnessing execution per test into this folder (created if missing; its parent must exist).", show_default=False),
    max_executions: int = typer.Option(DEFAULT_MAX_EXECUTIONS, "--max-executions", min=1, help="Stop and answer Unknown after this many executions."),
    max_steps: int = typer.Option(DEFAULT_MAX_STEPS, "--max-steps", min=1, help="Answer Unknown when one thread runs more instructions than this on one path."),
    timeout: float = typer.Option(DEFAULT_TIMEOUT, "--timeout", min=0.001, help="Seconds per test before answering Unknown (exit 3), as in 'syncverify check'.", show_default=True),
    max_memory: float = typer.Option(DEFAULT_MAX_MEMORY_MB, "--max-memory", min=1, help="MiB of memory before answering Unknown (exit 3, limit 'memory'), checked with the clock.", show_default=True),
    progress_every: Optional[float] = typer.Option(None, "--progress-every", min=0.01, hidden=True, help="Seconds before progress shows and between plain progress lines (tests)."),
    gpu: bool = typer.Option(False, "--gpu", help="Run each test on the GPU (TRITON_INTERPRET=1: Triton's CPU interpreter) and hold its outcomes against the model; MODEL UNSOUND exits 1. See docs/litmus-gpu.md."),
    iterations: Optional[int] = typer.Option(None, "--iterations", min=1, help="--gpu: launches per test, each running many instances (default: 100).", show_default=False),
    seconds: Optional[float] = typer.Option(None, "--seconds", min=0.001, help="--gpu: wall-clock seconds per test; stops at whichever of --iterations / --seconds comes first (default: 10).", show_default=False),
    seed: Optional[int] = typer.Option(None, "--seed", help="--gpu: seed of the random placement; test n uses seed + n (default: 0).", show_default=False),
    stress: Optional[Path] = typer.Option(None, "--stress", help="--gpu: a JSON object of stress parameters (default: the tuned ones for this machine, syncverify/litmus/gpu/tuned.json).", show_default=False),
    plot: Optional[Path] = typer.Option(None, "--plot", help="--gpu: write a bar chart of each test's weak-outcome rate to this PNG.", show_default=False),
) -> int:
    """Explore every execution the PTX model allows and print herd7-style observations.

    Observations are results, not failures (as in herd7): exit 0 when every test was explored,
    2 on bad input, 3 when a bound was hit (Unknown: --timeout, default 600 s, --max-memory, ...).
    A test that runs longer than 2 s shows its progress on stderr, as 'check' does. Each test's Ok/No validation is printed.
    With several files, each is reported (a bad one does not stop the others) and the exit code
    is the most severe one (bad input, then Unknown, then 0).
    """
    gpu_only = {"--iterations": iterations, "--seconds": seconds, "--seed": seed, "--stress": stress, "--plot": plot}
    if not gpu and any(v is not None for v in gpu_only.values()):
        raise fail(f"{next(k for k, v in gpu_only.items() if v is not None)} needs --gpu")
    if gpu:
        if graph is not None:
            raise fail("--graph draws the model's executions; it does not apply to --gpu (use --plot)")

        return run_gpu_command(list(files), as_json=as_json, iterations=100 if iterations is None else iterations,
                               seconds=10.0 if seconds is None else seconds, seed=0 if seed is None else seed,
                               stress=stress, plot=plot, model_timeout=timeout, out=out, err=err)
    if graph is not None:
        check_writable(graph, "--graph", kind="dir")  # bad input fails before work, as below
    # Each file is parsed and run on its own: a bad file is reported (one line, exit 2 in the
    # end) and the others still run; the exit code is the most severe of all files'.
    programs, verdicts, codes, reports = [], [], [], []
    for path in files:
        if not as_json and len(files) > 1:
            err.print(f"running {path} ...", markup=False)
        try:
            program = parse_litmus_file(path)
            for warning in program.warnings:  # accepted where the ISA is stricter: one line per rule
                err.print(warning, markup=False)
            after = PROGRESS_AFTER if progress_every is None else progress_every
            every = PLAIN_PROGRESS_EVERY if progress_every is None else progress_every
            with ProgressReport(after=after, plain_every=every, max_memory=max_memory, violations=False) as report:
                verdict = run_litmus(program, max_executions=max_executions, timeout=timeout, max_steps=max_steps,
                                     progress=report.update, progress_interval=min(0.5, every))
        except SyncVerifyError as error:
            codes.append(exitcodes.INPUT_ERROR)
            reports.append(versioned({"file": str(path), "error": str(error), "exit_code": exitcodes.INPUT_ERROR}, "litmus"))
            if not as_json:
                err.print(f"error: {error}", markup=False)
            continue
        programs.append(program)
        verdicts.append(verdict)
        codes.append(exitcodes.UNKNOWN if verdict.unknown else exitcodes.OK)
        reports.append(versioned(dict(verdict.to_json(), file=str(path)), "litmus"))
        if not as_json:
            _print_text(verdict)
    if as_json:
        out.print(json.dumps(reports, indent=2), markup=False)
    # Graphs only once every verdict is out: a failure while drawing warns and keeps the exit code.
    for program, verdict in zip(programs, verdicts):
        witness = verdict.witness or verdict.hang_witness
        if graph is not None and witness is None:  # say so rather than leave the user looking for a file
            err.print(f"--graph {graph}: nothing drawn for {program.name}: no execution satisfies its condition "
                      f"and none hangs (--graph draws one that does)", markup=False)
        if graph is not None and witness is not None:
            stem = graph / _safe(program.name)
            what = "satisfies the condition" if verdict.witness is not None else "hangs"
            write_or_warn(lambda: write_graph(witness, stem, title=f"{program.name}: an execution that {what}"),
                          "--graph", stem)
    return exitcodes.worst(codes)


def _describe_hang(hang: dict) -> str:
    """One hang reason in words (see ``syncverify.litmus.runner.hang_reasons``)."""
    if hang["on"] == "mbarrier":
        return f"{hang['thread']} waits forever in mbarrier.try_wait: {hang['why']}"
    if hang["on"] == "barrier":
        count = "every thread that uses it" if hang["count"] is None else f"{hang['count']} threads"
        return (f"{hang['thread']} waits at barrier {hang['barrier']} for {count}; "
                f"its phase got {hang['arrived']} and can never complete")
    reads = ", ".join(f"{r['location']} == {r['value']}" for r in hang["reads"]) or "nothing"
    return f"{hang['thread']} spins forever reading {reads} (the last values written)"


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "test"


def _print_text(v) -> None:
    out.print(f"Test {v.name} {v.validation if not v.unknown else 'Unknown'}", markup=False)
    out.print(v.line(), markup=False)
    judged = "unknown" if v.unknown else ("holds" if v.validation == "Ok" else "fails")
    out.print(f"Condition {v.quantifier} ({judged})"
              f"  executions {v.executions}  can hang: {'yes' if v.can_hang else 'no'}  time {v.seconds:.3f}s",
              markup=False)
    for hang in v.hangs:
        out.print(f"Hang: {_describe_hang(hang)}", markup=False)
    if v.unknown:
        out.print(f"Unknown: limit '{v.unknown}' hit ({v.unknown_detail}); counts are lower bounds", markup=False)
    out.print("", markup=False)
