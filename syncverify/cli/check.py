"""``syncverify check PROTOCOL|FILE``: can this protocol race, read unwritten or stale tiles, or hang?"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from syncverify import exitcodes
from syncverify.cli import app, err, out
from syncverify.explore import DEFAULT_MAX_EXECUTIONS


@app.command("check")
def check_command(
    protocol: str = typer.Argument(..., help="A built-in protocol name (see 'syncverify list') or a .toml file.", show_default=False),
    scenario: str = typer.Option("all-reduce", "--scenario", help="all-reduce | all-scatter."),
    world_size: int = typer.Option(2, "--world-size", help="Ranks (1 to 64)."),
    tiles: int = typer.Option(1, "--tiles", help="Tiles (>= 1)."),
    epochs: int = typer.Option(1, "--epochs", help="Kernel iterations, counted from 0."),
    threads_per_cta: int = typer.Option(2, "--threads-per-cta", help="Threads modeled per CTA (2 shows missing CTA barriers)."),
    production: str = typer.Option("every-rank", "--production", help="every-rank | owner-only (all-reduce)."),
    distribution: str = typer.Option("striding", "--distribution", help="striding | block (all-reduce)."),
    push: str = typer.Option("epoch-flag", "--push", help="all-scatter: the protocol of the cross-rank push stage (comm CTAs -> every rank's receivers), a built-in name or a .toml file."),
    reset: Optional[str] = typer.Option(None, "--reset", help="none | host-between-barriers | host-racing (default: from the protocol's reset).", show_default=False),
    no_symmetry: bool = typer.Option(False, "--no-symmetry", help="Build every tile and rank (no symmetry reduction or slicing)."),
    graph: Optional[Path] = typer.Option(None, "--graph", help="Draw the first violation's execution to PATH.dot or PATH.png.", show_default=False),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    max_executions: int = typer.Option(DEFAULT_MAX_EXECUTIONS, "--max-executions", min=1, help="Answer unknown after this many executions."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=0.001, help="Seconds before answering unknown (default: none).", show_default=False),
    samples: Optional[int] = typer.Option(None, "--sample", min=1, help="Check N random executions instead of all (finding none is not a proof).", show_default=False),
    seed: int = typer.Option(0, "--seed", help="Seed of --sample."),
) -> int:
    """Check a protocol in a kernel scenario against the PTX memory model.

    Exit 0 safe, 1 violations found, 2 bad input, 3 unknown (a bound was hit, or --sample found none).
    """
    from syncverify.protocols.registry import load_protocol
    from syncverify.check import check, sample
    from syncverify.graphs import write_graph
    from syncverify.scenarios import ScenarioOptions, build
    from syncverify.cli.paths import check_writable, write_or_warn

    if graph is not None and graph.suffix not in (".dot", ".png"):
        raise typer.BadParameter(f"--graph {graph}: give a path ending in .dot or .png")
    if graph is not None:
        check_writable(graph, "--graph")  # before the run; an unwritable path is bad input (exit 2)
    proto = load_protocol(protocol)
    built = build(proto, ScenarioOptions(scenario=scenario, world_size=world_size, tiles=tiles, epochs=epochs,
                                         threads_per_cta=threads_per_cta, production=production,
                                         distribution=distribution, reset=reset, symmetry=not no_symmetry,
                                         push=push))
    if samples is not None:
        result = sample(built, samples=samples, seed=seed, timeout=timeout)
    else:
        if not as_json:
            err.print(f"checking {proto.name} in {scenario} (world size {world_size}) ...", markup=False)
        result = check(built, max_executions=max_executions, timeout=timeout)
    if as_json:  # the verdict first: a failure while drawing cannot lose it
        out.print(json.dumps(result.to_json(), indent=2), markup=False)
    else:
        _print_text(result)
    if graph is not None and result.violations:
        first = next(iter(result.violations.values()))
        drawn = write_or_warn(lambda: write_graph(first.execution, graph, title=f"{proto.name} / {scenario}: {first.kind}",
                                                  highlight=first.evidence), "--graph", graph)
        if drawn and not as_json:
            out.print(f"graph of the first counterexample: {graph}", markup=False)
    if result.violations:
        return exitcodes.FOUND
    if result.safe is None:
        return exitcodes.UNKNOWN
    return exitcodes.OK


def _print_text(result) -> None:
    from rich.table import Table

    opts = result.scenario.options
    verdict = {True: "SAFE", False: "UNSAFE", None: "UNKNOWN"}[result.safe]
    out.print(f"{result.scenario.protocol.name} in {opts.scenario}: {verdict}", markup=False)
    out.print(f"  world size {opts.world_size}, tiles {opts.tiles}, epochs {opts.epochs}, "
              f"{opts.threads_per_cta} threads per CTA, production {opts.production}, reset {opts.reset}", markup=False)
    for note in result.scenario.notes:
        out.print(f"  note: {note}", markup=False)
    if result.sampled is not None:
        out.print(f"  sampled {result.sampled} candidate executions (seed given), {result.executions} consistent", markup=False)
        if not result.violations:
            out.print(f"  none in {result.sampled} samples: this is not a proof of safety", markup=False)
    else:
        out.print(f"  {result.executions} consistent executions ({result.candidates} candidates) in {result.seconds:.2f}s", markup=False)
    if result.limit_hit:
        out.print(f"  unknown: limit '{result.limit_hit}' hit ({result.limit_detail}); explored so far as above", markup=False)
    if not result.violations:
        return
    table = Table(title="violations", show_lines=True)
    table.add_column("kind")
    table.add_column("what goes wrong")
    for v in result.violations.values():
        table.add_row(v.kind, v.explanation)
    out.print(table)
    for v in result.violations.values():
        out.print(f"counterexample for {v.kind}:", markup=False)
        for row in v.trace(result.scenario):
            mark = ">>" if row["offending"] else "  "
            rf = f" <- {row['reads_from']}" if row["reads_from"] else ""
            out.print(f"  {mark} rank {row['rank']} {row['cta']} t{row['thread']}: {row['event']}"
                      f"  [{row['step']}]{rf}", markup=False)
