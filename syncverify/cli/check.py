"""``syncverify check PROTOCOL|FILE``: can this protocol race, read unwritten or stale tiles, or hang?"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from syncverify import exitcodes
from syncverify.baseline import findings_of, read_baseline
from syncverify.baseline import write_baseline as write_baseline_file
from syncverify.cli.app import app, err, out
from syncverify.cli import cost as cost_cli
from syncverify.json_schema import versioned
from syncverify.verdicts.text import counterexample_lines
from syncverify.cli.progress import DEFAULT_MAX_MEMORY_MB, MemoryCap, StderrProgress
from syncverify.explore.driver import DEFAULT_MAX_EXECUTIONS, DEFAULT_MAX_STEPS, Progress
from syncverify.protocols.rules import RESET_HELP, describe_reset
from syncverify.cli.output_files import check_writable, write_or_warn
from syncverify.protocols.registry import load_protocol
from syncverify.scenarios.build import ScenarioOptions, build
from syncverify.verdicts.check import check, sample
from syncverify.verdicts.graphs import write_graph
from syncverify.verdicts.suggest import Suggestions, suggest
from syncverify.verdicts.cutoff import world_size_claim
from syncverify.cli.kernel import check_harness, is_harness_argument
from syncverify.cli.residency import sweep_exit, sweep_json, sweep_lines
from syncverify.explore.bounds import Clock
from syncverify.explore.residency import Residency, parse_occupancy, sweep
from syncverify.verdicts.check import check
from syncverify.scenarios.build import ScenarioOptions, build, push_option
import time

DEFAULT_TIMEOUT = 600.0  # seconds: a check answers unknown rather than run on unseen
PROGRESS_AFTER = 2.0  # seconds before a check starts showing progress
PLAIN_PROGRESS_EVERY = 5.0  # seconds between two plain progress lines (stderr not a terminal)


@app.command("check")
def check_command(
    protocol: str = typer.Argument(..., help="A built-in protocol name (see 'syncverify list'), a .toml file, or a harness FILE.py[::NAME] that launches your own Triton kernels.", show_default=False),
    scenario: str = typer.Option("all-reduce", "--scenario", help="all-reduce | all-scatter | all-gather-gemm | gemm-reduce-scatter."),
    world_size: int = typer.Option(2, "--world-size", help="Ranks, 1..64."),
    tiles: int = typer.Option(1, "--tiles", help="Tiles, at least 1."),
    ctas: Optional[int] = typer.Option(None, "--ctas", help="Programs per role and rank, as the kernels are launched (--gemm-sms/--comm-sms/--recv-sms): with fewer than --tiles, a CTA handles several tiles one after another in its loop, on the same named barriers, as the kernels do (default: one CTA per tile).", show_default=False),
    columns: int = typer.Option(1, "--columns", help="all-gather-gemm with --ctas: column tiles of C per tile; without after_load steps each is a unit of work its GEMM programs share out, as the kernel does (UNITS; default 1: whole tiles)."),
    group_m: int = typer.Option(1, "--group-m", help="all-gather-gemm with --columns: tile rows per group of the GEMM programs' grouped order (the kernel's --group-m)."),
    epochs: int = typer.Option(1, "--epochs", help="Calls of the kernel on the same locks (state persists between them), at least 1; counted from 0 in traces."),
    threads_per_cta: int = typer.Option(2, "--threads-per-cta", help="Threads modeled per CTA, 1..8 (2 shows missing CTA barriers)."),
    production: str = typer.Option("every-rank", "--production", help="every-rank | owner-only (all-reduce)."),
    distribution: str = typer.Option("striding", "--distribution", help="striding | block (all-reduce)."),
    push: Optional[str] = typer.Option(None, "--push", help="all-scatter only: the protocol of the cross-rank push stage (comm CTAs -> every rank's receivers), a built-in name or a .toml file (default: epoch-flag).", show_default=False),
    reset: Optional[str] = typer.Option(None, "--reset", help=RESET_HELP, show_default=False),
    launches: str = typer.Option("host-barrier", "--launches", help="host-barrier (every rank's launch k before any rank's launch k+1) | per-rank-stream (only each GPU's stream orders its launches: buffer-reuse bugs) | two-stream (GEMM and communication roles as two concurrent kernels) | pdl | pdl-no-wait (the consumer kernel a programmatic dependent launch, with or without griddepcontrol.wait; docs/residency.md)."),
    no_symmetry: bool = typer.Option(False, "--no-symmetry", help="Build every tile and rank (no symmetry reduction or slicing)."),
    graph: Optional[Path] = typer.Option(None, "--graph", help="Draw the first violation's execution to PATH.dot or PATH.png.", show_default=False),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    max_executions: int = typer.Option(DEFAULT_MAX_EXECUTIONS, "--max-executions", min=1, help="Answer unknown after this many executions."),
    max_steps: int = typer.Option(DEFAULT_MAX_STEPS, "--max-steps", min=1, help="Answer unknown when one thread runs more instructions than this on one path (a protocol with many steps needs more)."),
    timeout: float = typer.Option(DEFAULT_TIMEOUT, "--timeout", min=0.001, help="Seconds before answering unknown (exit 3).", show_default=True),
    max_memory: float = typer.Option(DEFAULT_MAX_MEMORY_MB, "--max-memory", min=1, help="MiB of memory before answering unknown (exit 3, limit 'memory'), checked with the clock.", show_default=True),
    first: bool = typer.Option(False, "--first", help="Stop at the first violation found and print its counterexample (exit 1)."),
    progress_every: Optional[float] = typer.Option(None, "--progress-every", min=0.01, hidden=True, help="Seconds before progress shows and between plain progress lines (tests)."),
    samples: Optional[int] = typer.Option(None, "--sample", min=1, help="Check N random executions instead of all (finding none is not a proof); where the exhaustive check answers within 2 s, its exact answer is given instead (a note says so).", show_default=False),
    seed: int = typer.Option(0, "--seed", help="Seed of --sample."),
    baseline: Optional[Path] = typer.Option(None, "--baseline", help="Accepted findings (a file --write-baseline wrote): still listed, marked accepted, but only the others fail (exit 1).", show_default=False),
    write_baseline: Optional[Path] = typer.Option(None, "--write-baseline", help="Write this run's findings to FILE, to accept them with --baseline FILE.", show_default=False),
    suggest: bool = typer.Option(False, "--suggest", help="After an unsafe verdict, search the weakest fixes (1 or 2 strengthenings; with --epochs 2 or more also a reset between calls or a target that grows with the call), one per PTX lowering, and print at most 5, each a diff of the protocol file as written (apply with: patch -p0)."),
    cost: bool = typer.Option(False, "--cost", help="With --suggest, on a GPU: time each fix (the first 6) in the scenario's fused kernel (W virtual ranks, --cost-shape) beside 'none' and the safe built-ins, validate it, and rank the fixes by measured time."),
    cost_shape: str = typer.Option("8192x4608x8192", "--cost-shape", help="With --cost: the problem MxNxK the fixes are timed at."),
    cost_tiles: Optional[Path] = typer.Option(None, "--cost-tiles", help="With --cost: a tile table (kernels/bench/tiles/*.json) giving the tile, stages, warps and split to time at (default: the shipped nvidia-h200 table when it has the scenario and shape, else bench's default case).", show_default=False),
    calls: int = typer.Option(1, "--calls", min=1, help="Harness (FILE.py) only: how many calls of the harness's operation to model."),
    declare_asm: list[str] = typer.Option([], "--declare-asm", help="Harness only: the meaning of inline asm the model cannot read, 'TEXT=no-op' or 'TEXT=PTX' (repeatable; listed in the verdict).", show_default=False),
    resident: Optional[int] = typer.Option(None, "--resident", help="CTAs resident per GPU at once (SMs x occupancy), shared by every launch and stream; a resident CTA is never preempted: can spinning CTAs hold every slot? (docs/residency.md; default: every CTA runs)", show_default=False),
    resident_order: str = typer.Option("any", "--resident-order", help="any (what CUDA guarantees) | index (blockIdx order per launch: what the hardware does in practice, not guaranteed)."),
    sms: int = typer.Option(0, "--sms", help="Per-SM placement: spread --resident over this many SMs, --resident/--sms CTAs of one kernel per SM; a CTA needs an SM with room for its footprint, the SM it goes to is any (docs/residency.md; default 0: one pool shared by every kernel)."),
    occupancy: list[str] = typer.Option([], "--occupancy", help="With --sms: KERNEL=N, N CTAs of that kernel alone per SM (its footprint); protocols' kernels: kernel (one fused launch), gemm and comm (--launches two-stream/pdl). Repeatable.", show_default=False),
    resident_sweep: bool = typer.Option(False, "--resident-sweep", help="Check every capacity from 1 up and print the largest at which it can deadlock and the smallest at which it cannot (exit 1 if it can deadlock at some capacity)."),
) -> int:
    """Check a protocol in a kernel scenario against the PTX memory model.

    Exit 0 safe, 1 violations found, 2 bad input, 3 unknown (a bound was hit, or --sample found none).

    Sizes decided in under a minute on a 2-core machine (barrier-fenced-release-acquire,
    docs/BENCHMARKS.md): all-reduce up to --world-size 12 with one epoch (8: under 1 s), 4 with
    --epochs 2 (5 takes a minute or more); all-scatter up to --world-size 8 with one epoch, 4 with
    --epochs 2 (checked stage by stage). Beyond that, --timeout answers unknown. A check that runs longer than 2 s
    shows its progress on stderr.
    """

    protocol_only = {"--scenario": scenario != "all-reduce", "--tiles": tiles != 1, "--ctas": ctas is not None,
                     "--columns": columns != 1, "--group-m": group_m != 1, "--epochs": epochs != 1,
                     "--production": production != "every-rank", "--distribution": distribution != "striding",
                     "--push": push is not None, "--reset": reset is not None,
                     "--launches": launches != "host-barrier", "--no-symmetry": no_symmetry,
                     "--sample": samples is not None}
    harness_only = {"--calls": calls != 1, "--declare-asm": bool(declare_asm)}
    occupancy_pairs = parse_occupancy(occupancy)
    if sms and (resident is None or resident_sweep):
        raise typer.BadParameter("--sms spreads --resident R over SMs: give it with --resident (the sweep "
                                 "counts one pool)")
    if is_harness_argument(protocol):  # the user's own kernels, through a harness
        given = [name for name, set_ in protocol_only.items() if set_]
        if given:
            raise typer.BadParameter(f"{', '.join(given)} applies to protocols, not to a harness ({protocol}): "
                                     "the harness says what runs")
        if graph is not None and graph.suffix not in (".dot", ".png"):
            raise typer.BadParameter(f"--graph {graph}: give a path ending in .dot or .png")
        return check_harness(protocol, world_size=world_size, calls=calls, threads_per_cta=threads_per_cta,
                             timeout=timeout, max_executions=max_executions, max_steps=max_steps, first=first,
                             as_json=as_json, graph=graph, declare_asm=declare_asm, suggest=suggest,
                             progress_every=progress_every, resident=resident, resident_order=resident_order,
                             resident_sweep=resident_sweep, resident_sms=sms, resident_occupancy=occupancy_pairs)
    given = [name for name, set_ in harness_only.items() if set_]
    if given:
        raise typer.BadParameter(f"{', '.join(given)} applies to a harness (FILE.py), not to protocol {protocol}")
    if (cost or cost_tiles is not None or cost_shape != "8192x4608x8192") and not (cost and suggest):
        raise typer.BadParameter("--cost (and --cost-shape/--cost-tiles with it) ranks --suggest's fixes: "
                                 "give --suggest --cost")
    shape = cost_cli.parse_shape(cost_shape) if cost else None
    if cost:
        cost_cli.require_gpu()

    if graph is not None and graph.suffix not in (".dot", ".png"):
        raise typer.BadParameter(f"--graph {graph}: give a path ending in .dot or .png")
    if graph is not None:
        check_writable(graph, "--graph")  # before the run; an unwritable path is bad input (exit 2)
    if write_baseline is not None:
        check_writable(write_baseline, "--write-baseline")
    accepted_findings = read_baseline(baseline) if baseline is not None else set()
    proto = load_protocol(protocol)
    push = push_option(scenario, push)
    built = build(proto, ScenarioOptions(scenario=scenario, world_size=world_size, tiles=tiles, ctas=ctas, epochs=epochs,
                                         columns=columns, group_m=group_m, threads_per_cta=threads_per_cta, production=production,
                                         distribution=distribution, reset=reset,
                                         push=push, launches=launches,
                                         symmetry=not (no_symmetry or resident_sweep),
                                         resident=None if resident_sweep else resident, resident_order=resident_order,
                                         resident_sms=sms, resident_occupancy=occupancy_pairs))
    if resident_sweep:
        Residency(1, resident_order)  # the order, validated before the run
        return _resident_sweep(built, resident_order, as_json=as_json, timeout=timeout,
                               max_executions=max_executions, max_steps=max_steps)
    if samples is not None:
        result = _sample_or_exact(built, samples=samples, seed=seed, timeout=timeout, max_steps=max_steps)
    else:
        if not as_json:
            err.print(f"checking {proto.name} in {scenario} (world size {world_size}) ...", markup=False)
        after = PROGRESS_AFTER if progress_every is None else progress_every
        every = PLAIN_PROGRESS_EVERY if progress_every is None else progress_every
        with ProgressReport(after=after, plain_every=every, max_memory=max_memory) as report:
            result = check(built, max_executions=max_executions, timeout=timeout, progress=report.update,
                           progress_interval=min(0.5, every), first=first, max_steps=max_steps)
    # World-size independence: only for an exhaustive SAFE (the checks below the cutoff are cheap).
    exhaustive = result.sampled is None and not result.limit_hit and not result.stopped_at_first
    claim = world_size_claim(proto, built.options, result.safe if exhaustive else None, timeout=timeout)
    suggestions = _suggest(proto, built.options, result, reset=reset) if suggest else None
    accepted = [kind for (_p, _s, kind) in findings_of(result) if (_p, _s, kind) in accepted_findings]
    ranked, cost_text = None, []
    if cost and suggestions:  # fixes found: each timed in the scenario's kernel on this GPU
        ranked, cost_text = cost_cli.fix_costs(suggestions, scenario=scenario, world_size=world_size,
                                               case=cost_cli.cost_case(scenario, shape, cost_tiles))
    elif cost:
        cost_text = [f"cost: nothing to time ({suggestions.message})"]
    if as_json:  # the verdict first: a failure while drawing cannot lose it
        doc = versioned(result.to_json(), "check")
        doc["assumptions"] = assumptions(result)
        doc["accepted"] = accepted
        doc["world_sizes"] = claim
        for violation in doc["violations"]:
            violation["accepted"] = violation["kind"] in accepted
        if suggestions is not None:
            doc.update(suggestions.to_json(limit=MAX_SUGGESTIONS))
        if ranked is not None:
            doc["cost"] = {"timed": cost_text[0], "ranking": [dataclasses.asdict(f) for f in ranked]}
        out.print(json.dumps(doc, indent=2), markup=False)
    else:
        _print_text(result, accepted, baseline, claim)
        if suggestions is not None:
            _print_suggestions(suggestions)
        for line in cost_text:
            out.print(line, markup=False)
    if graph is not None and result.violations:
        witness = next(iter(result.violations.values()))
        drawn = write_or_warn(lambda: write_graph(witness.execution, graph, title=f"{proto.name} / {scenario}: {witness.kind}",
                                                  highlight=witness.evidence, needed=getattr(witness.cause(result.scenario), "evidence", ())), "--graph", graph)
        if drawn and not as_json:
            out.print(f"graph of the first counterexample: {graph}", markup=False)
    elif graph is not None:  # say so rather than leave the user looking for a file
        err.print(f"--graph {graph}: nothing drawn: no violation was found (--graph draws a counterexample)",
                  markup=False)
    if write_baseline is not None:
        write_or_warn(lambda: write_baseline_file(write_baseline, findings_of(result)), "--write-baseline", write_baseline)
        if not as_json:
            out.print(f"baseline: {len(result.violations)} finding(s) written to {write_baseline}", markup=False)
    if set(result.violations) - set(accepted):
        return exitcodes.FOUND
    if result.safe is None or result.limit_hit:
        return exitcodes.UNKNOWN
    return exitcodes.OK


def _resident_sweep(built, order: str, *, as_json: bool, timeout: float, max_executions: int,
                    max_steps: int) -> int:
    """``--resident-sweep``: the fair check of the whole program (every tile and rank), then each
    capacity (:func:`syncverify.explore.residency.sweep`) in what is left of ``timeout``."""
    start = time.monotonic()
    fair = check(built, max_executions=max_executions, timeout=timeout, max_steps=max_steps)
    left = max(timeout - (time.monotonic() - start), 0.001)
    swept = sweep(built.program, order, clock=Clock(left),
                  explore_options=dict(max_executions=max_executions, max_steps=max_steps))
    fair_hang = "hang" in fair.violations
    if as_json:
        doc = versioned(fair.to_json(), "check")
        doc["assumptions"], doc["accepted"] = assumptions(fair), []
        doc["world_sizes"] = (f"checked for W = {built.options.world_size} (a residency sweep: docs/cutoff.md's "
                              "argument assumes every CTA runs)")
        doc["residency_sweep"] = sweep_json(swept, order, fair_hang=fair_hang)
        out.print(json.dumps(doc, indent=2), markup=False)
    else:
        _print_text(fair)
        for line in sweep_lines(swept, order, fair_hang=fair_hang):
            out.print(line, markup=False)
    return sweep_exit(swept, fair_hang=fair_hang)


#: What every verdict assumes, printed beside it (a SAFE holds for these bounds only).
MODEL = "PTX memory model (Dartagnan's ptx-v6.0.cat axioms, syncverify/model/ptx.py)"


def assumptions(result) -> dict:
    """The bounds and assumptions a verdict holds under: ``--json``'s ``assumptions``."""
    opts = result.scenario.options
    return {"model": MODEL, "world_size": opts.world_size, "calls": opts.epochs, "tiles": opts.tiles,
            "threads_per_cta": opts.threads_per_cta, "launches": opts.launches,
            "residency": None if opts.resident is None else Residency(opts.resident, opts.resident_order,
                                                                      opts.resident_sms,
                                                                      opts.resident_occupancy).words(),
            "exhaustive": result.sampled is None and not result.limit_hit and not result.stopped_at_first}


def _print_text(result, accepted: list[str] = (), baseline: Path | None = None, claim: str = "") -> None:

    opts = result.scenario.options
    verdict = {True: "SAFE", False: "UNSAFE", None: "UNKNOWN"}[result.safe]
    out.print(f"{result.scenario.protocol.name} in {opts.scenario}: {verdict}", markup=False)
    out.print(f"  world size {opts.world_size}, tiles {opts.tiles}, epochs {opts.epochs}, "
              f"{opts.threads_per_cta} threads per CTA, production {opts.production}, "
              f"reset {describe_reset(opts.reset, result.scenario.protocol.reset)}", markup=False)
    bounds = assumptions(result)
    calls = "1 call" if bounds["calls"] == 1 else f"{bounds['calls']} calls"
    out.print(f"  assumes: the {MODEL}; {opts.world_size} ranks, {calls} of the kernel on the same locks "
              f"(--epochs), {opts.threads_per_cta} threads per CTA, launches {opts.launches}"
              + ("; every CTA runs" if opts.resident is None else f"; {bounds['residency']} (--resident)")
              + ("; holds for these bounds only" if result.safe else ""), markup=False)
    if claim:
        out.print(f"  world sizes: {claim}", markup=False)
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
        first = result.scenario.parts[0] if result.scenario.parts else None
        how = ("call by call, from the state each call leaves (exact; see 'docs/reductions.md')"
               if first is not None and first.call is not None
               else "stage by stage, each stage call by call (exact; see 'docs/scenarios.md', 'docs/reductions.md')"
               if first is not None and first.parts else "stage by stage (exact; see 'docs/scenarios.md')")
        out.print(f"  checked {how}: {parts}", markup=False)
    if result.stopped_at_first:
        out.print("  stopped at the first violation (--first): other kinds may exist", markup=False)
    if result.every_kind and not result.limit_hit:
        out.print("  stopped once every violation kind this program can show was found: more executions "
                  "cannot change the verdict (the counts above are of the executions explored until then)",
                  markup=False)
    if result.limit_hit and result.violations:
        out.print(f"  unsafe: the violations below are real; the search stopped early (limit '{result.limit_hit}' "
                  f"hit: {result.limit_detail}), so other kinds may exist", markup=False)
    elif result.limit_hit:
        out.print(f"  unknown: limit '{result.limit_hit}' hit ({result.limit_detail}); explored so far as above", markup=False)
    if not result.violations:
        return
    if accepted:
        left = len(result.violations) - len(accepted)
        out.print(f"  baseline {baseline}: {len(accepted)} of {len(result.violations)} finding(s) accepted "
                  f"({', '.join(accepted)}); {left} not accepted", markup=False)
    table = Table(title="violations", show_lines=True)
    table.add_column("kind")
    table.add_column("what goes wrong")
    for v in result.violations.values():
        table.add_row(v.kind + (f" (accepted: baseline {baseline})" if v.kind in accepted else ""), v.explanation)
    out.print(table)
    for v in result.violations.values():
        out.print(f"counterexample for {v.kind}:", markup=False)
        for line in counterexample_lines(v, result.scenario):
            out.print(f"  {line}", markup=False)


MAX_SUGGESTIONS = 5  # fixes shown by --suggest
#: --sample first tries the exhaustive check for this long: a sampler must see the whole candidate
#: stream (reservoir sampling), which in a scenario checked stage by stage (all-scatter) is far
#: larger than the stages' together, so sampling could run to --timeout where the exact answer
#: takes 0.03 s. Past this budget the sampler runs in the time left.
EXACT_FIRST = 2.0


def _sample_or_exact(built, *, samples: int, seed: int, timeout: float, max_steps: int):
    """``--sample N``: the exhaustive check when it answers within :data:`EXACT_FIRST` seconds
    (exact, said in a note), else N sampled executions in the time left."""


    start = time.monotonic()
    exact = check(built, timeout=min(EXACT_FIRST, timeout), max_steps=max_steps) if EXACT_FIRST > 0 else None
    if exact is not None and exact.limit_hit is None:
        built.notes.append(f"--sample {samples}: the exhaustive check answered in {exact.seconds:.2f}s, so this "
                           f"answer is exact, not sampled")
        return exact
    left = max(timeout - (time.monotonic() - start), 0.001)
    return sample(built, samples=samples, seed=seed, timeout=left, max_steps=max_steps)


def _suggest(proto, options, result, *, reset: str | None):
    """:func:`syncverify.verdicts.suggest.suggest` in the checked scenario (nothing to search unless
    unsafe). ``reset``: the ``--reset`` given, if any (None: each candidate's own ``reset`` field
    decides, so a fix may change it)."""

    if result.safe is None:
        return Suggestions(max_changes=2, note="the verdict is unknown: no fix searched (--suggest needs an unsafe verdict)")
    if result.safe:
        return Suggestions(max_changes=2, safe_already=True)
    fields = {k: getattr(options, k) for k in ("tiles", "epochs", "threads_per_cta", "production",
                                                "distribution", "symmetry", "push")}
    return suggest(proto, scenario=options.scenario, world_size=options.world_size, reset=reset, **fields)


def _print_suggestions(suggestions) -> None:
    out.print(f"suggest: {suggestions.message}", markup=False)
    for number, fix in enumerate(suggestions[:MAX_SUGGESTIONS], start=1):
        out.print(f"fix {number}: {fix.description}", markup=False)
        for same in fix.same_ptx:
            out.print(f"  (the same PTX as: {same})", markup=False)
        out.print(fix.diff.rstrip("\n"), markup=False)


def _count(n: int, noun: str) -> str:
    """``1 candidate``, ``2 candidates``: a count with its noun, plural unless it is one."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def progress_line(progress: Progress | None, seconds: float, *, violations: bool = True) -> str:
    """One line on how far a check is: executions, violations by kind (``violations``: a litmus
    test has none to count), rate, elapsed."""
    executions = progress.executions if progress is not None else 0
    found = ", ".join(f"{kind} {n}" for kind, n in sorted((progress.violations if progress else {}).items())) or "none"
    rate = executions / seconds if seconds > 0 else 0.0
    # Violations last: on a narrow terminal they are what gets cut, not the clock.
    return (f"checking: {executions:,} executions, {rate:,.0f}/s, {seconds:.0f}s elapsed"
            + (f", violations: {found}" if violations else ""))


class ProgressReport(StderrProgress):
    """A long check's progress (:mod:`syncverify.cli.progress`): the check hands over its latest
    :class:`~syncverify.explore.driver.Progress` (:meth:`update`)."""

    def __init__(self, *, after: float, plain_every: float, max_memory: float | None = None,
                 violations: bool = True) -> None:
        super().__init__(after=after, plain_every=plain_every)
        self.latest: Progress | None = None
        self.memory_cap = MemoryCap(max_memory)
        self.violations = violations

    def update(self, progress: Progress) -> None:
        """Keep the latest progress; over the memory cap, stop the check (``limit: memory``)."""
        self.latest = progress
        self.memory_cap()

    def line(self) -> str:
        return progress_line(self.latest, self.elapsed(), violations=self.violations)
