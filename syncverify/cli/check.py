"""``syncverify check PROTOCOL|FILE``: can this protocol race, read unwritten or stale tiles, or hang?"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from syncverify import exitcodes
from syncverify.cli.app import app, err, out
from syncverify.cli.progress import StderrProgress
from syncverify.explore.driver import DEFAULT_MAX_EXECUTIONS, DEFAULT_MAX_STEPS, Progress
from syncverify.protocols.rules import RESET_HELP, describe_reset
from syncverify.cli.output_files import check_writable, write_or_warn
from syncverify.protocols.registry import load_protocol
from syncverify.scenarios.build import ScenarioOptions, build
from syncverify.verdicts.check import check, sample
from syncverify.verdicts.graphs import write_graph
from syncverify.verdicts.suggest import Suggestions, suggest

DEFAULT_TIMEOUT = 600.0  # seconds: a check answers unknown rather than run on unseen
PROGRESS_AFTER = 2.0  # seconds before a check starts showing progress
PLAIN_PROGRESS_EVERY = 5.0  # seconds between two plain progress lines (stderr not a terminal)


@app.command("check")
def check_command(
    protocol: str = typer.Argument(..., help="A built-in protocol name (see 'syncverify list') or a .toml file.", show_default=False),
    scenario: str = typer.Option("all-reduce", "--scenario", help="all-reduce | all-scatter | all-gather-gemm | gemm-reduce-scatter."),
    world_size: int = typer.Option(2, "--world-size", help="Ranks (1 to 64)."),
    tiles: int = typer.Option(1, "--tiles", help="Tiles (>= 1)."),
    epochs: int = typer.Option(1, "--epochs", help="Kernel iterations, counted from 0."),
    threads_per_cta: int = typer.Option(2, "--threads-per-cta", help="Threads modeled per CTA (2 shows missing CTA barriers)."),
    production: str = typer.Option("every-rank", "--production", help="every-rank | owner-only (all-reduce)."),
    distribution: str = typer.Option("striding", "--distribution", help="striding | block (all-reduce)."),
    push: str = typer.Option("epoch-flag", "--push", help="all-scatter: the protocol of the cross-rank push stage (comm CTAs -> every rank's receivers), a built-in name or a .toml file."),
    reset: Optional[str] = typer.Option(None, "--reset", help=RESET_HELP, show_default=False),
    launches: str = typer.Option("host-barrier", "--launches", help="host-barrier (every rank's launch k before any rank's launch k+1) | per-rank-stream (only each GPU's stream orders its launches: buffer-reuse bugs)."),
    no_symmetry: bool = typer.Option(False, "--no-symmetry", help="Build every tile and rank (no symmetry reduction or slicing)."),
    graph: Optional[Path] = typer.Option(None, "--graph", help="Draw the first violation's execution to PATH.dot or PATH.png.", show_default=False),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    max_executions: int = typer.Option(DEFAULT_MAX_EXECUTIONS, "--max-executions", min=1, help="Answer unknown after this many executions."),
    max_steps: int = typer.Option(DEFAULT_MAX_STEPS, "--max-steps", min=1, help="Answer unknown when one thread runs more instructions than this on one path (a protocol with many steps needs more)."),
    timeout: float = typer.Option(DEFAULT_TIMEOUT, "--timeout", min=0.001, help="Seconds before answering unknown (exit 3).", show_default=True),
    first: bool = typer.Option(False, "--first", help="Stop at the first violation found and print its counterexample (exit 1)."),
    progress_every: Optional[float] = typer.Option(None, "--progress-every", min=0.01, hidden=True, help="Seconds before progress shows and between plain progress lines (tests)."),
    samples: Optional[int] = typer.Option(None, "--sample", min=1, help="Check N random executions instead of all (finding none is not a proof).", show_default=False),
    seed: int = typer.Option(0, "--seed", help="Seed of --sample."),
    suggest: bool = typer.Option(False, "--suggest", help="After an unsafe verdict, search the weakest fixes (1 or 2 strengthenings) and print at most 5 with TOML diffs."),
) -> int:
    """Check a protocol in a kernel scenario against the PTX memory model.

    Exit 0 safe, 1 violations found, 2 bad input, 3 unknown (a bound was hit, or --sample found none).

    Sizes decided in under a minute on a 2-core machine (barrier-fenced-release-acquire,
    docs/BENCHMARKS.md): all-reduce up to --world-size 12 with one epoch (8: under 1 s), 4 with
    --epochs 2 (5 takes a minute or more); all-scatter up to --world-size 8 with one epoch, 4 with
    --epochs 2 (checked stage by stage). Beyond that, --timeout answers unknown. A check that runs longer than 2 s
    shows its progress on stderr.
    """
    if graph is not None and graph.suffix not in (".dot", ".png"):
        raise typer.BadParameter(f"--graph {graph}: give a path ending in .dot or .png")
    if graph is not None:
        check_writable(graph, "--graph")  # before the run; an unwritable path is bad input (exit 2)
    proto = load_protocol(protocol)
    built = build(proto, ScenarioOptions(scenario=scenario, world_size=world_size, tiles=tiles, epochs=epochs,
                                         threads_per_cta=threads_per_cta, production=production,
                                         distribution=distribution, reset=reset, symmetry=not no_symmetry,
                                         push=push, launches=launches))
    if samples is not None:
        result = sample(built, samples=samples, seed=seed, timeout=timeout, max_steps=max_steps)
    else:
        if not as_json:
            err.print(f"checking {proto.name} in {scenario} (world size {world_size}) ...", markup=False)
        after = PROGRESS_AFTER if progress_every is None else progress_every
        every = PLAIN_PROGRESS_EVERY if progress_every is None else progress_every
        with ProgressReport(after=after, plain_every=every) as report:
            result = check(built, max_executions=max_executions, timeout=timeout, progress=report.update,
                           progress_interval=min(0.5, every), first=first, max_steps=max_steps)
    suggestions = _suggest(proto, built.options, result) if suggest else None
    if as_json:  # the verdict first: a failure while drawing cannot lose it
        doc = result.to_json()
        if suggestions is not None:
            doc.update(suggestions.to_json(limit=MAX_SUGGESTIONS))
        out.print(json.dumps(doc, indent=2), markup=False)
    else:
        _print_text(result)
        if suggestions is not None:
            _print_suggestions(suggestions)
    if graph is not None and result.violations:
        witness = next(iter(result.violations.values()))
        drawn = write_or_warn(lambda: write_graph(witness.execution, graph, title=f"{proto.name} / {scenario}: {witness.kind}",
                                                  highlight=witness.evidence, needed=getattr(witness.cause(result.scenario), "evidence", ())), "--graph", graph)
        if drawn and not as_json:
            out.print(f"graph of the first counterexample: {graph}", markup=False)
    elif graph is not None:  # say so rather than leave the user looking for a file
        err.print(f"--graph {graph}: nothing drawn: no violation was found (--graph draws a counterexample)",
                  markup=False)
    if result.violations:
        return exitcodes.FOUND
    if result.safe is None:
        return exitcodes.UNKNOWN
    return exitcodes.OK


def _print_text(result) -> None:
    opts = result.scenario.options
    verdict = {True: "SAFE", False: "UNSAFE", None: "UNKNOWN"}[result.safe]
    out.print(f"{result.scenario.protocol.name} in {opts.scenario}: {verdict}", markup=False)
    out.print(f"  world size {opts.world_size}, tiles {opts.tiles}, epochs {opts.epochs}, "
              f"{opts.threads_per_cta} threads per CTA, production {opts.production}, "
              f"reset {describe_reset(opts.reset, result.scenario.protocol.reset)}", markup=False)
    for note in result.scenario.notes:
        out.print(f"  note: {note}", markup=False)
    if result.sampled is not None:
        out.print(f"  sampled {_count(result.sampled, 'candidate execution')} (seed {result.seed}; "
                  f"--seed N draws others), {result.executions} consistent", markup=False)
        if not result.violations:
            out.print(f"  none in {_count(result.sampled, 'sample')}: this is not a proof of safety", markup=False)
    else:
        out.print(f"  {_count(result.executions, 'consistent execution')} "
                  f"({_count(result.candidates, 'candidate')}) in {result.seconds:.2f}s", markup=False)
    if result.stages:
        parts = "; ".join(f"{name} {_count(n, 'execution')}, {seconds:.2f}s" for name, n, seconds in result.stages)
        out.print(f"  checked stage by stage (exact; see 'docs/scenarios.md'): {parts}", markup=False)
    if result.stopped_at_first:
        out.print("  stopped at the first violation (--first): other kinds may exist", markup=False)
    if result.limit_hit and result.violations:
        out.print(f"  unsafe: the violations below are real; the search stopped early (limit '{result.limit_hit}' "
                  f"hit: {result.limit_detail}), so other kinds may exist", markup=False)
    elif result.limit_hit:
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
        out.print(f"  cause: {v.cause(result.scenario).text}", markup=False)
        for row in v.trace(result.scenario):
            mark = ">>" if row["offending"] else "  "
            rf = f" <- {row['reads_from']}" if row["reads_from"] else ""
            out.print(f"  {mark} rank {row['rank']} {row['cta']} t{row['thread']}: {row['event']}"
                      f"  [{row['step']}]{rf}", markup=False)


MAX_SUGGESTIONS = 5  # fixes shown by --suggest


def _suggest(proto, options, result):
    """:func:`syncverify.verdicts.suggest.suggest` in the checked scenario (nothing to search unless unsafe)."""
    if result.safe is None:
        return Suggestions(max_changes=2, note="the verdict is unknown: no fix searched (--suggest needs an unsafe verdict)")
    if result.safe:
        return Suggestions(max_changes=2, safe_already=True)
    fields = {k: getattr(options, k) for k in ("tiles", "epochs", "threads_per_cta", "production",
                                                "distribution", "reset", "symmetry", "push")}
    return suggest(proto, scenario=options.scenario, world_size=options.world_size, **fields)


def _print_suggestions(suggestions) -> None:
    out.print(f"suggest: {suggestions.message}", markup=False)
    for number, fix in enumerate(suggestions[:MAX_SUGGESTIONS], start=1):
        out.print(f"fix {number}: {fix.description}", markup=False)
        out.print(fix.diff.rstrip("\n"), markup=False)


def _count(n: int, noun: str) -> str:
    """``1 candidate``, ``2 candidates``: a count with its noun, plural unless it is one."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def progress_line(progress: Progress | None, seconds: float) -> str:
    """One line on how far a check is: executions, violations by kind, rate, elapsed."""
    executions = progress.executions if progress is not None else 0
    violations = progress.violations if progress is not None else {}
    found = ", ".join(f"{kind} {n}" for kind, n in sorted(violations.items())) or "none"
    rate = executions / seconds if seconds > 0 else 0.0
    # Violations last: on a narrow terminal they are what gets cut, not the clock.
    return (f"checking: {executions:,} executions, {rate:,.0f}/s, {seconds:.0f}s elapsed, "
            f"violations: {found}")


class ProgressReport(StderrProgress):
    """A long check's progress (:mod:`syncverify.cli.progress`): the check hands over its latest
    :class:`~syncverify.explore.driver.Progress` (:meth:`update`)."""

    def __init__(self, *, after: float, plain_every: float) -> None:
        super().__init__(after=after, plain_every=plain_every)
        self.latest: Progress | None = None

    def update(self, progress: Progress) -> None:
        self.latest = progress

    def line(self) -> str:
        return progress_line(self.latest, self.elapsed())
