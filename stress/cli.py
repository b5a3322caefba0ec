"""``syncverify stress``: run a fused kernel with a protocol many times and classify every bad tile.

``stress_command`` is a typer command function; ``syncverify.cli`` mounts it as ``stress``.
Exit codes (``syncverify.exitcodes``): 0 no bad tile, 1 bad tiles (or a stopped run), 2 bad input
with one line on stderr (sizes that do not divide, more ranks than GPUs, int8 locks with atomics,
unknown protocol, no GPU without ``--interpret``, an ``--output`` that cannot be written: checked
before the run).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from syncverify import exitcodes
from syncverify.cli.paths import check_writable
from syncverify.errors import SyncVerifyError
from syncverify.rules import RESET_HELP


def _consoles():
    from rich.console import Console

    return (Console(highlight=False, soft_wrap=True),
            Console(stderr=True, highlight=False, soft_wrap=True))


def stress_command(
    protocol: str = typer.Option(..., "--protocol", help="a built-in protocol name or a protocol .toml file"),
    kernel: str = typer.Option("all-reduce", "--kernel", help="all-reduce | all-scatter | all-gather-gemm | gemm-reduce-scatter (default: all-reduce)"),
    world_size: int = typer.Option(2, "--world-size", help="ranks (default: 2)"),
    virtual_ranks: bool = typer.Option(False, "--virtual-ranks", help="every rank on one GPU, each with its own heap region"),
    interpret: bool = typer.Option(False, "--interpret", help="run in Triton's CPU interpreter at tiny sizes (virtual ranks)"),
    iterations: Optional[int] = typer.Option(None, "--iterations", help="iterations to run (default: 1000; 4 with --interpret)"),
    seconds: Optional[float] = typer.Option(None, "--seconds", help="run for this long instead of --iterations"),
    delays: str = typer.Option("none", "--delays", help="none | random: seeded delays at named sites and per warp (default: none)"),
    seed: int = typer.Option(0, "--seed", help="seed of inputs and delays (default: 0)"),
    delay_pct: int = typer.Option(50, "--delay-pct", help="percent of (site, rank, tile, iteration) that sleep (default: 50)"),
    delay_max_ns: int = typer.Option(4000, "--delay-max-ns", help="longest delay in ns (default: 4000)"),
    delay_sites: str = typer.Option("all", "--delay-sites", help="all, or some of before-store,store-signal,before-wait,wait-read,before-reset (default: all)"),
    m: Optional[int] = typer.Option(None, "--m", help="rows of C (default: 1024; 32 interpreted)"),
    n: Optional[int] = typer.Option(None, "--n", help="columns of C (default: 1024)"),
    k: Optional[int] = typer.Option(None, "--k", help="inner dimension (default: 1024)"),
    dtype: str = typer.Option("bf16", "--dtype", help="bf16 | fp16 | fp32 (default: bf16)"),
    block_m: Optional[int] = typer.Option(None, "--block-m", help="tile rows (default: 128)"),
    block_n: Optional[int] = typer.Option(None, "--block-n", help="tile columns (default: 128)"),
    block_k: Optional[int] = typer.Option(None, "--block-k", help="K step (default: 64)"),
    gemm_sms: Optional[int] = typer.Option(None, "--gemm-sms", help="producer programs per rank (default: two thirds of the SMs a rank gets, of three quarters of the GPU's; 2 interpreted)"),
    comm_sms: Optional[int] = typer.Option(None, "--comm-sms", help="consumer (all-scatter: comm) programs per rank (default: the rest; all-scatter: half the rest; 1 interpreted)"),
    recv_sms: Optional[int] = typer.Option(None, "--recv-sms", help="all-scatter receiver programs per rank (default: the other half; 1 interpreted)"),
    push: str = typer.Option("epoch-flag", "--push", help="all-scatter: the protocol of the cross-rank push stage, as in 'syncverify check --push' (default: epoch-flag)"),
    distribution: str = typer.Option("striding", "--distribution", help="all-reduce tile owners: striding | block (default: striding)"),
    production: str = typer.Option("every-rank", "--production", help="all-reduce partials: every-rank | owner-only (default: every-rank)"),
    reset: Optional[str] = typer.Option(None, "--reset", help=RESET_HELP),
    poison: str = typer.Option("all", "--poison", help="all | outputs: also zero the workspaces each iteration, or keep them (default: all)"),
    lock_dtype: str = typer.Option("int32", "--lock-dtype", help="int32 | int8 (default: int32)"),
    max_polls: Optional[int] = typer.Option(None, "--max-polls", help="poll budget of each consumer program (default: 65536 with virtual ranks, 4194304 with one process per GPU, 8 interpreted)"),
    order: str = typer.Option("producers-first", "--order", help="interpreter schedule: producers-first | consumers-first | last-rank-late"),
    output: Optional[Path] = typer.Option(None, "--output", help="append JSON lines (progress, bad tiles, result) to this file (its directory must exist)"),
    json_output: bool = typer.Option(False, "--json", help="print the result as one JSON object"),
) -> None:
    """Stress a protocol inside the real fused GEMM kernel; report every bad tile and why.

    Exit codes: 0 clean (no bad tile), 1 bad tiles found (or a stopped run), 2 bad input.
    """
    out, err = _consoles()
    options = dict(
        protocol=protocol, kernel=kernel, world_size=world_size, virtual_ranks=virtual_ranks,
        interpret=interpret, iterations=iterations, seconds=seconds, delays=delays, seed=seed,
        delay_pct=delay_pct, delay_max_ns=delay_max_ns, delay_sites=delay_sites, m=m, n=n, k=k,
        dtype=dtype,
        block_m=block_m, block_n=block_n, block_k=block_k, gemm_sms=gemm_sms, comm_sms=comm_sms,
        recv_sms=recv_sms, push=push,
        distribution=distribution, production=production, reset=reset, poison=poison,
        lock_dtype=lock_dtype, max_polls=max_polls, order=order,
        output=str(output) if output is not None else None,
    )
    if iterations is not None and seconds is not None:
        err.print("syncverify: error: give --iterations or --seconds, not both", markup=False)
        raise typer.Exit(exitcodes.INPUT_ERROR)
    try:
        if output is not None:  # before the run: an unwritable path is bad input, not a late traceback
            check_writable(output, "--output")
        result = _run(options, show_progress=not json_output and sys.stderr.isatty(), err=err)
    except SyncVerifyError as error:
        err.print(f"syncverify: error: {error}", markup=False)
        raise typer.Exit(exitcodes.INPUT_ERROR)
    if json_output:
        out.print(json.dumps(result.to_dict(), sort_keys=True), markup=False)
    else:
        from syncverify.stress.report import render_text

        out.print(render_text(result), markup=False)
    raise typer.Exit(exitcodes.OK if result.clean else exitcodes.FOUND)


def _run(options: dict, *, show_progress: bool, err):
    from syncverify.stress.campaign import run_campaign

    if not show_progress:
        return run_campaign(**options)
    from rich.progress import Progress

    with Progress(console=err, transient=True) as bar:
        task = bar.add_task("stress", total=options.get("iterations"))

        def progress(done, total, seconds):
            bar.update(task, completed=done, total=total,
                       description=f"stress {done} it, {seconds:.1f} s")

        return run_campaign(progress=progress, **options)
