"""Our four fused kernels, a protocol compiled in, as kernel front-end harnesses.

Issue 22, item 6: the same program checked two ways. :func:`scenario_harness` launches a
scenario's fused kernel (``syncverify.kernels.registry``) once per rank, one process per rank as
on GPUs (``TABLE``: address tables of each rank's copy on the front end's symmetric heap), with
the protocol's plan compiled in, at the smallest sizes the kernel takes (16 x 16 blocks;
:data:`SIZES`): one tile per rank and one program per role and rank. The checker runs it under
:func:`syncverify.kernels.steps.unbounded_waits` (every wait polls until its condition holds, as
the protocol model's ``await``). What must be written by the call is what the stress runner
validates (:func:`expectations`). :func:`both_ways` compares the verdict with
:func:`syncverify.check_protocol`'s; run as a script, every built-in and zoo protocol, as a table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

import syncverify
from syncverify.kernels.build import build
from syncverify.kernels.config import KernelConfig, model_launches
from syncverify.kernels.errors import StressConfigError, UnsupportedStep
from syncverify.kernels.heap import Buffer
from syncverify.kernels.launch import launch_arguments, split_launches
from syncverify.kernels.registry import buffers, kernel_function
from syncverify.kernels.steps import PARTS, unbounded_waits
from syncverify.protocols import load_protocol, rules
from syncverify.protocols.registry import builtin_names, zoo_names
from tests.frontend_kernels.pool import run_pool

BLOCK = 16  # the smallest tile the kernel's config accepts
WORLD = 2  # ranks of the cross-check

#: The scenarios of ``tests/test_frontend_crosscheck_scenarios.py`` (all-reduce's cross-check is
#: ``tests/test_frontend_crosscheck.py``, through ``crosscheck.all_reduce_harness``).
SCENARIOS = ("all-scatter", "gemm-reduce-scatter", "all-gather-gemm")

#: (m, n, k) in blocks, as functions of W: one tile per rank (all-reduce and reduce-scatter: W
#: tiles of C, tile t owned by rank t % W; all-scatter: the tile of each rank's column block;
#: all-gather-gemm: each rank's shard of A is one block of rows), each rank's slice of K one block.
SIZES = {
    "all-reduce": lambda W: (W, 1, W),
    "all-scatter": lambda W: (1, W, 1),
    "gemm-reduce-scatter": lambda W: (W, 1, W),
    "all-gather-gemm": lambda W: (W, 1, 1),
}


#: Per world size, the (scenario, protocol) cases the last measurements decided within 60 s (W = 3:
#: the device run of 2026-12-02 06:00, 12 workers on 16 cores, for the three scenarios of
#: ``tests/test_frontend_crosscheck_scenarios.py``, 30 of the 43 measured there; all-reduce's one
#: tile on the shared machine and, for the two trtllm-14537 protocols, on that device run;
#: docs/frontend.md). The W = 3 tests run these; ``--undecided`` leaves them out of a run.
#: gemm-reduce-scatter's 11 of before were left out when the protocol check started laying its W
#: tiles out in one CTA's loop as the kernel does (the model's program changed), and measured again
#: in the device run of 2026-12-02 08:20 with the rest: 17 more decided (after the comment below).
DECIDED: dict[int, tuple[tuple[str, str], ...]] = {3: (
    ('all-reduce', 'add-counter-cas-reset'),
    ('all-reduce', 'add-counter-skip-self'),
    ('all-reduce', 'barrier-release-xchg-cas-acquire'),
    ('all-reduce', 'release-xchg-cas-acquire'),
    ('all-reduce', 'wt-cv-flag'),
    ('all-reduce', 'xchg-flag'),
    ('all-reduce', 'done-flag'),
    ('all-reduce', 'iris-462-gpu-scope-release'),
    ('all-reduce', 'iris-462-sys-scope-release'),
    ('all-reduce', 'iris-465-call-number'),
    ('all-reduce', 'iris-465-hardcoded-lock-value'),
    ('all-reduce', 'pytorch-signal-pad'),
    ('all-reduce', 'pytorch-signal-pad-relaxed-wait'),
    ('all-reduce', 'ready-flag-no-done'),
    ('all-reduce', 'two-slot-early-reuse'),
    ('all-reduce', 'trtllm-14537-launch-dependents-no-visibility'),
    ('all-reduce', 'trtllm-14537-griddepcontrol-wait'),
    ('all-gather-gemm', 'aiter-4977-grid-clamped-to-occupancy'),
    ('all-gather-gemm', 'aiter-4977-persistent-grid-over-occupancy'),
    ('all-gather-gemm', 'barrier-release-xchg-cas-acquire'),
    ('all-gather-gemm', 'iris-462-gpu-scope-release'),
    ('all-gather-gemm', 'iris-462-sys-scope-release'),
    ('all-gather-gemm', 'iris-465-call-number'),
    ('all-gather-gemm', 'iris-465-hardcoded-lock-value'),
    ('all-gather-gemm', 'pytorch-signal-pad'),
    ('all-gather-gemm', 'pytorch-signal-pad-relaxed-wait'),
    ('all-gather-gemm', 'ready-flag-no-done'),
    ('all-gather-gemm', 'release-xchg-cas-acquire'),
    ('all-gather-gemm', 'trtllm-14537-griddepcontrol-wait'),
    ('all-gather-gemm', 'trtllm-14537-launch-dependents-no-visibility'),
    ('all-gather-gemm', 'two-slot-early-reuse'),
    ('all-gather-gemm', 'wt-cv-flag'),
    ('all-scatter', 'aiter-4977-grid-clamped-to-occupancy'),
    ('all-scatter', 'aiter-4977-persistent-grid-over-occupancy'),
    ('all-scatter', 'trtllm-14537-griddepcontrol-wait'),
    ('all-scatter', 'trtllm-14537-launch-dependents-no-visibility'),
    # the device run of 2026-12-02 08:20 (call 1): the W = 3 cases no run had decided, 60 s bound
    ('all-reduce', 'aiter-4977-grid-clamped-to-occupancy'),
    ('all-reduce', 'aiter-4977-persistent-grid-over-occupancy'),
    ('all-reduce', 'epoch-flag'),
    ('all-reduce', 'tokenspeed-351-counter-per-replay'),
    ('all-reduce', 'tokenspeed-351-graph-replay-shared-counter'),
    ('gemm-reduce-scatter', 'barrier-release-xchg-cas-acquire'),
    ('gemm-reduce-scatter', 'iris-462-gpu-scope-release'),
    ('gemm-reduce-scatter', 'iris-462-sys-scope-release'),
    ('gemm-reduce-scatter', 'iris-465-call-number'),
    ('gemm-reduce-scatter', 'iris-465-hardcoded-lock-value'),
    ('gemm-reduce-scatter', 'pytorch-signal-pad'),
    ('gemm-reduce-scatter', 'ready-flag-no-done'),
    ('gemm-reduce-scatter', 'release-xchg-cas-acquire'),
    ('gemm-reduce-scatter', 'trtllm-14537-griddepcontrol-wait'),
    ('gemm-reduce-scatter', 'trtllm-14537-launch-dependents-no-visibility'),
    ('gemm-reduce-scatter', 'two-slot-early-reuse'),
    ('gemm-reduce-scatter', 'wt-cv-flag'),
    # the device run of 2026-12-02 11:03 (aggunits, call 1): decided within 60 s with the faster
    # front end (both had agreed only on the kinds found before the bound)
    ('all-reduce', 'add-counter'),
    ('all-scatter', 'add-counter-skip-self'),
    ('gemm-reduce-scatter', 'pytorch-signal-pad-relaxed-wait'),  # call 2, 11:41
)}


THREADS_PER_CTA = 2  # model threads per CTA, as the protocol check's default (2 shows barrier bugs)


def _warp_selections(protocol: str) -> list:
    p = load_protocol(protocol)
    return [chosen for section in rules.SECTIONS for s in rules.section_steps(p, section) if s.op == "barrier"
            for chosen in (s.warps, s.arrive) if chosen is not None]


def threads_per_cta(protocol: str) -> int:
    """Model threads per CTA for ``protocol``: the protocol check's rule
    (``syncverify.scenarios.build.warp_threads``): 2, raised until each warp selection of a
    barrier step is whole model threads (FA3's ``arrive = "1-7"``: one per warp)."""
    return rules.model_threads_per_cta(THREADS_PER_CTA, _warp_selections(protocol))


_threads_rule = threads_per_cta  # both_ways's keyword of the same name hides it there


def num_warps(protocol: str) -> int:
    """The kernel's warps: a barrier step that selects warps names warps of an 8-warp CTA."""
    return rules.KERNEL_WARPS if _warp_selections(protocol) else 4


def scenario_config(scenario: str, world_size: int, *, tiles: int | None = None, warps: int = 4,
                    launches: str = "fused", columns: int = 1) -> KernelConfig:
    """The kernel configuration of ``scenario``'s harness at ``world_size`` ranks; ``tiles``: all-reduce's
    tiles of C (default one per rank; one is the program the protocol check builds, tile 0);
    ``launches``: the kernel's launch mode (``syncverify.kernels.config.LAUNCHES``); ``columns``:
    all-gather-gemm's column tiles of C, as many programs per role (each its own column tile
    when the protocol has no ``after_load`` steps: ``KernelConfig.model_layout``'s ``columns``)."""
    m, n, k = (BLOCK * blocks for blocks in SIZES[scenario](world_size))
    if tiles is not None:
        if scenario != "all-reduce":
            raise ValueError(f"tiles= is all-reduce's, not {scenario}'s")
        m = tiles * BLOCK
    if columns != 1:
        if scenario != "all-gather-gemm":
            raise ValueError(f"columns= is all-gather-gemm's, not {scenario}'s")
        n = columns * BLOCK
    return KernelConfig(kernel=scenario, world_size=world_size, m=m, n=n, k=k, block_m=BLOCK, block_n=BLOCK,
                        block_k=BLOCK, gemm_sms=columns, comm_sms=columns, recv_sms=1, dtype="fp32", virtual=False,
                        table=True, interpret=False, loads="pointer", num_warps=warps, num_stages=1,
                        launches=launches)


def heap_buffers(built) -> dict[str, tuple[tuple[int, ...], str]]:
    """name -> (shape per rank, ``data`` or ``lock``) of the kernel's symmetric buffers: the
    registry's for the two newer kernels, the older two's as the stress runner allocates them."""
    c = built.config
    if c.kernel in ("all-gather-gemm", "gemm-reduce-scatter"):
        return buffers(built)
    work = {"all-reduce": "partial", "all-scatter": "local"}[c.kernel]
    shapes = {work: ((built.data_rows, c.n_per_rank), "data"), "out": ((c.m, c.n), "data"),
              "locks": ((built.lock_count, c.tiles), "lock")}
    if c.kernel == "all-scatter":
        shapes |= {"received": ((c.m, c.n), "data"), "push_locks": ((built.push_lock_count, c.tiles), "lock")}
    return shapes


def expectations(built, heap: dict, world_size: int) -> list:
    """What the call must write: all-reduce's and all-gather-gemm's ``out`` on every rank;
    all-scatter's ``received`` on rank 0 (the one rank with a receiver, :func:`grid`);
    reduce-scatter's ``out`` rows of the tiles each rank owns, on that rank."""
    c = built.config
    if c.kernel == "all-scatter":
        return [heap["received"].on(0)]
    if c.kernel in ("all-reduce", "all-gather-gemm"):
        return [heap["out"]]
    owners = [rules.tile_owner(t, c.tiles, world_size, c.distribution) for t in range(c.tiles)]
    return [heap["out"].on(owner)[t * BLOCK:(t + 1) * BLOCK] for t, owner in enumerate(owners)]


def grid(config: KernelConfig, rank: int) -> int:
    """Rank ``rank``'s programs: all-scatter's receivers on rank 0 only (every rank's receiver is a
    renaming of rank 0's: the protocol model builds rank 0's alone, ``syncverify.scenarios.build``'s
    *ranks* reduction, and so does this harness, which halves what the front end explores)."""
    if config.kernel == "all-scatter" and rank:
        return config.grid - config.recv_sms
    return config.grid


#: The stream of each of :func:`syncverify.kernels.launch.split_launches`' streams in a harness.
HARNESS_STREAMS = {"current": "main", "first": "first", "rest": "rest"}


def scenario_harness(scenario: str, protocol: str, *, tiles: int | None = None, launches: str = "fused",
                     columns: int = 1):
    """A harness (``sv`` -> None, one call) for ``scenario``'s kernel with ``protocol`` compiled in
    (8 warps when a barrier step selects warps, :func:`num_warps`), launched as ``launches`` says
    (``syncverify.kernels.launch.split_launches``: the launches, streams and PDL the stress runner
    issues on the GPU, from the same table)."""
    module, kernel = kernel_function(scenario)

    def harness(sv):
        W = sv.world_size
        config = scenario_config(scenario, W, tiles=tiles, warps=num_warps(protocol), launches=launches,
                                 columns=columns)
        built = build(load_protocol(protocol), config)
        torch_dtype = {"data": torch.float32, "lock": torch.int32}
        heap = {name: sv.heap.zeros(shape, torch_dtype[kind], name=name)
                for name, (shape, kind) in heap_buffers(built).items()}
        tables = {name: torch.tensor([b.on(r).data_ptr() for r in range(W)], dtype=torch.int64)
                  for name, b in heap.items()}
        g = torch.Generator().manual_seed(0)
        for r in range(W):
            A = torch.randint(-2, 3, (1, config.m_per_rank, config.k_per_rank), generator=g).float()
            B = torch.randint(-2, 3, (1, config.k_per_rank, config.n_per_rank), generator=g).float()
            status = torch.zeros((W, 2 * config.tiles, 4), dtype=torch.int32)
            views = {name: Buffer(b.on(r), tables[name], 0) for name, b in heap.items()}
            args, meta = launch_arguments(kernel, module.meta_parameters, built, views, A, B, status, rank=r)
            for size, part, stream, pdl in split_launches(config):
                if part != PARTS["first"]:  # all-scatter's receivers: rank 0's only
                    size -= config.grid - grid(config, r)
                sv.launch(kernel, (size,), *args, rank=r, stream=HARNESS_STREAMS[stream], pdl=pdl,
                          **(meta | {"PART": part}))
        sv.host_barrier()
        for expected in expectations(built, heap, W):
            sv.expect_written(expected)

    harness.__name__ = (f"{scenario}[{protocol}]" if tiles is None else f"{scenario}[{protocol}, {tiles} tiles]") + (
        "" if launches == "fused" else f"[{launches}]") + ("" if columns == 1 else f"[{columns} column tiles]")
    return harness


# ----- the comparison, and the full matrix as a table (docs/frontend.md "Cross-check runs") ------

#: Every scenario of the full matrix (the script's default): all-reduce's harness is this one too.
ALL_SCENARIOS = ("all-reduce",) + SCENARIOS


@dataclass
class Case:
    """One protocol in one scenario checked both ways: ``(safe, kinds)`` of each side, or why the
    kernel does not build it (``skipped``)."""

    scenario: str
    protocol: str
    kernel: tuple = ()
    model: tuple = ()
    limit: str = ""  # the front end's bound, when it hit one
    model_limit: str = ""  # the protocol check's bound, when it hit one
    skipped: str = ""
    seconds: float = 0.0
    world_size: int = WORLD
    executions: int = 0  # the front end's
    timeout: float = 0.0  # the front end's time bound
    lift_seconds: float = 0.0  # of seconds, the front end's lifting (harness, interpreter runs, lift)
    model_seconds: float = 0.0  # of seconds, the protocol check's

    @property
    def agree(self) -> bool:
        """Both sides with a verdict (an UNSAFE found before a bound counts), the same one: two
        UNKNOWNs are not an agreement."""
        return not self.skipped and None not in (self.kernel[0], self.model[0]) and self.kernel == self.model


def both_ways(scenario: str, protocol: str, *, world_size: int = WORLD, threads_per_cta: int | None = None,
              timeout: float = 600, model_first: bool = False, launches: str = "fused", columns: int = 1,
              **options) -> Case:
    """``protocol`` compiled into ``scenario``'s kernel through the front end, and checked by
    :func:`syncverify.check_protocol`, both with ``threads_per_cta`` model threads per CTA (None:
    the protocol check's rule, :func:`threads_per_cta`: 2, one per warp for FA3's warp-selected
    barriers, whose kernels run 8 warps). ``options``: more of :func:`syncverify.check_kernel`'s
    (``first``, ...); ``model_first``: the protocol check too stops at its first violation.
    ``launches``: the kernel's launch mode, checked against the model's of the same name (``fused``:
    the model's ``host-barrier``, one fused kernel per call)."""
    threads = _threads_rule(protocol) if threads_per_cta is None else threads_per_cta
    case = Case(scenario, protocol, world_size=world_size, timeout=timeout)
    start = time.monotonic()
    try:
        build(load_protocol(protocol), scenario_config(scenario, world_size, warps=num_warps(protocol),
                                                       launches=launches, columns=columns))
    except (StressConfigError, UnsupportedStep) as error:  # the kernels do not run every protocol
        case.skipped = str(error)
        return case
    # all-reduce: one tile, as its cross-check (crosscheck.all_reduce_harness, the program the
    # protocol check builds; W tiles in one CTA per role cost more, and made FA3's epilogues hang before
    # the GEMM's tl.dot barrier was modelled: docs/frontend.md).
    tiles = 1 if scenario == "all-reduce" else None
    with unbounded_waits():
        kernel = syncverify.check_kernel(scenario_harness(scenario, protocol, tiles=tiles, launches=launches,
                                                          columns=columns),
                                         world_size=world_size, timeout=timeout, threads_per_cta=threads, **options)
    # the same program: the harness's tiles, laid out over its programs per role as its kernel does
    layout = scenario_config(scenario, world_size, tiles=tiles, warps=num_warps(protocol), columns=columns).model_layout()
    model_start = time.monotonic()
    model = syncverify.check_protocol(protocol, scenario=scenario, world_size=world_size, timeout=timeout,
                                      threads_per_cta=threads, first=model_first,
                                      launches=model_launches(launches), **layout)
    case.kernel = (kernel.safe, sorted(kernel.violations))
    case.model = (model.safe, sorted(model.violations))
    case.limit = f"{kernel.limit_hit}: {kernel.limit_detail}" if kernel.limit_hit else ""
    case.model_limit = f"{model.limit_hit}: {model.limit_detail}" if model.limit_hit else ""
    case.executions = kernel.executions
    case.seconds = time.monotonic() - start
    case.lift_seconds, case.model_seconds = kernel.lift_seconds, time.monotonic() - model_start
    return case


def _words(side: tuple, limit: str = "") -> str:
    """A side's verdict; a bound hit is named (UNSAFE with a bound hit: the kinds found so far)."""
    safe, kinds = side
    if safe is None:
        return f"UNKNOWN ({limit})" if limit else "UNKNOWN"
    words = "SAFE" if safe else "UNSAFE " + ", ".join(kinds)
    return f"{words} (bound hit: {limit})" if limit else words


def outcome(case: Case) -> str:
    """``agree``, ``differ``, ``unknown`` (a side hit its bound before any violation: its cost,
    not a verdict) or ``skipped`` (not built)."""
    if case.skipped:
        return "skipped"
    if case.kernel[0] is None or case.model[0] is None:
        return "unknown"
    return "agree" if case.agree else "differ"


def table_row(case: Case) -> str:
    """``| protocol | front end | protocol check | agree/differ/unknown/skipped | executions | seconds |
    lifting | explorer | protocol check |``: the seconds of both sides, then the front end's split
    into its lifting (harness, the programs' paths in the interpreter) and its explorer, and the
    protocol check's (which side, and which part of the front end, is slow)."""
    if case.skipped:
        return f"| {case.protocol} | not built ({case.skipped}) | | skipped | | 0 | | | |"
    verdict = {"differ": "**differ**"}.get(outcome(case), outcome(case))
    front = case.seconds - case.model_seconds
    return (f"| {case.protocol} | {_words(case.kernel, case.limit)} | {_words(case.model, case.model_limit)} | {verdict} | "
            f"{case.executions} | {case.seconds:.0f} | {case.lift_seconds:.0f} | {front - case.lift_seconds:.0f} | "
            f"{case.model_seconds:.0f} |")


TABLE_HEAD = ("| protocol | front end | protocol check | | executions | seconds | lifting | explorer | protocol check |\n"
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")


def _run(job: tuple) -> Case:
    """One case in a worker process (:func:`main`'s ``--jobs``)."""
    scenario, protocol, world_size, timeout = job
    return both_ways(scenario, protocol, world_size=world_size, timeout=timeout)


#: Seconds a worker takes to start a case besides its bound (spawn, import torch and triton).
STARTUP_S = 20


def _use_wheels(folder: Path) -> None:
    """Put the wheels in ``folder`` of modules this Python cannot import on the path, here and in
    every worker (through PYTHONPATH): pure-Python wheels import as zip files."""
    missing = []
    for module in ("networkx",):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    found = [str(w.resolve()) for w in sorted(folder.glob("*.whl")) if w.name.split("-")[0].lower() in missing]
    if len(found) < len(missing):
        sys.exit(f"crosscheck_scenarios: missing {', '.join(missing)} and no wheel of it in {folder}")
    sys.path[:0] = found
    os.environ["PYTHONPATH"] = os.pathsep.join(found + [p for p in [os.environ.get("PYTHONPATH", "")] if p])


def _runs_of(text: str) -> tuple[int, str]:
    """``W:PROTOCOL``."""
    world, _, protocol = text.partition(":")
    if not world.isdigit() or not protocol:
        raise argparse.ArgumentTypeError(f"{text!r} is not W:PROTOCOL (for example 3:fa3-epilogue-named-barrier)")
    return int(world), protocol


def _runs(text: str) -> tuple[int, float]:
    """``W:SECONDS`` (a world size and the bound of each of its cases)."""
    try:
        world, seconds = text.split(":")
        return int(world), float(seconds)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not W:SECONDS (for example 2:600)") from None


def main(argv: list[str]) -> int:
    """``python -m tests.frontend_kernels.crosscheck_scenarios [--runs W:S ...] [--jobs N] [--out DIR]
    [--budget S] [--protocols P ...] [SCENARIO...]``: every built-in and zoo protocol in each
    scenario (all four by default), at each world size of ``--runs`` (default ``2:600``: W = 2, a
    600 s bound per case and side), ``--jobs`` cases at a time in worker processes; a row as each
    case ends, then one markdown table per (scenario, W) and the counts. ``--out``: every case as it
    ends (``crosscheck.jsonl``, a line each) and the tables (``crosscheck.md``) there. ``--budget``: no case starts
    unless its bound lets it end within that many seconds of the start (each one not started is
    reported, never silently dropped). ``--undecided``: leave out the cases :data:`DECIDED` lists (what
    the last measurements decided), to measure the rest within one bounded run. ``--wheels DIR``: pure-Python wheels (networkx) for modules
    this Python lacks, put on the path of every worker (a machine with no package index)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    # checked below, not with choices=: argparse checks an empty or default list against choices as one value
    parser.add_argument("scenarios", nargs="*", metavar="SCENARIO", help=f"of {', '.join(ALL_SCENARIOS)} (default: all)")
    parser.add_argument("--runs", nargs="+", type=_runs, default=[(WORLD, 600.0)], metavar="W:SECONDS",
                        help="world sizes and the time bound of each case there (default 2:600)")
    parser.add_argument("--jobs", type=int, default=1, help="cases at a time, in worker processes (default 1)")
    parser.add_argument("--out", type=Path, default=None, help="write crosscheck.jsonl and crosscheck.md there")
    parser.add_argument("--budget", type=float, default=None,
                        help="start a case only if its bound ends within this many seconds of the start")
    parser.add_argument("--wheels", type=Path, default=None, help="wheels of missing pure-Python modules")
    names = builtin_names() + zoo_names()
    parser.add_argument("--protocols", nargs="*", default=names, choices=names, metavar="PROTOCOL")
    parser.add_argument("--exclude", nargs="*", type=_runs_of, default=[], metavar="W:PROTOCOL",
                        help="leave PROTOCOL out at world size W (FA3's 8 model threads per CTA at W = 3)")
    parser.add_argument("--undecided", action="store_true",
                        help="leave out the cases the last measurements decided (DECIDED): run the rest only")
    args = parser.parse_args(argv)
    args.scenarios = args.scenarios or list(ALL_SCENARIOS)
    for scenario in args.scenarios:
        if scenario not in ALL_SCENARIOS:
            parser.error(f"unknown scenario {scenario!r} (known: {', '.join(ALL_SCENARIOS)})")
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs} must be at least 1")
    if args.wheels is not None:
        _use_wheels(args.wheels)
    jobs = [(scenario, protocol, world, seconds) for world, seconds in args.runs
            for scenario in args.scenarios for protocol in args.protocols if (world, protocol) not in args.exclude
            and not (args.undecided and (scenario, protocol) in DECIDED.get(world, ()))]
    print(f"crosscheck_scenarios: {len(jobs)} cases" + (" (--undecided: the decided ones left out)" if args.undecided
                                                        else ""), flush=True)
    start = time.monotonic()
    cases: dict[tuple, Case] = {}
    late: list[tuple] = []

    def record(job: tuple, case: Case) -> None:
        cases[job] = case
        print(f"[{time.monotonic() - start:4.0f} s] {job[0]} W={job[2]} " + table_row(case), flush=True)
        if args.out is not None:  # as each case ends: a run stopped from outside keeps what it did
            args.out.mkdir(parents=True, exist_ok=True)
            with open(args.out / "crosscheck.jsonl", "a") as rows:
                rows.write(json.dumps(asdict(case) | {"outcome": outcome(case)}) + "\n")

    def cost(job: tuple) -> float:
        """A case's expected cost: the seconds of the same case at the largest smaller W already
        run (a larger W goes cheapest first, so the budget measures as many as it can); 0 at the
        smallest W (the order given)."""
        smaller = [c for j, c in cases.items() if j[:2] == job[:2] and j[2] < job[2]]
        if job[2] == min(w for w, _s in args.runs):
            return 0.0
        if not smaller:
            return float("inf")
        last = max(smaller, key=lambda c: c.world_size)
        return float("inf") if last.limit or last.model_limit or outcome(last) == "unknown" else last.seconds

    def over_budget(job: tuple) -> bool:  # both sides' bounds, one after the other, and a worker's start-up
        return args.budget is not None and time.monotonic() - start + 2 * job[3] + STARTUP_S > args.budget

    if args.jobs == 1:
        for job in jobs:
            if over_budget(job):
                late.append(job)
                continue
            record(job, _run(job))
    else:
        late += run_pool(jobs, _run, record, workers=args.jobs, over_budget=over_budget,
                         pick=lambda queue: min(queue, key=lambda j: (j[2], cost(j))))  # the first of the cheapest
    lines = []
    for world, seconds in args.runs:
        for scenario in args.scenarios:
            mine = [cases[j] for j in jobs if j[0] == scenario and j[2] == world and j in cases]
            if not mine:
                continue
            counts = Counter(outcome(c) for c in mine)
            threads = sorted({threads_per_cta(c.protocol) for c in mine})
            lines += [f"\n{scenario} (W = {world}, {'/'.join(map(str, threads))} model thread(s) per CTA, "
                      f"{seconds:.0f} s bound)\n", TABLE_HEAD]
            lines += [table_row(c) for c in mine]
            lines.append("\n" + ", ".join(f"{counts[k]} {k}" for k in ("agree", "differ", "unknown", "skipped")))
    for job in late:
        lines.append(f"not started (--budget {args.budget:.0f} s): {job[0]} {job[1]} W={job[2]}")
    lines += ["", "| scenario | W | agree | differ | unknown | skipped | not started |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for world, _seconds in args.runs:
        for scenario in args.scenarios:
            counts = Counter(outcome(c) for j, c in cases.items() if j[0] == scenario and j[2] == world)
            unstarted = sum(1 for j in late if j[0] == scenario and j[2] == world)
            lines.append(f"| {scenario} | {world} | " + " | ".join(
                str(counts[k]) for k in ("agree", "differ", "unknown", "skipped")) + f" | {unstarted} |")
    text = "\n".join(lines)
    print(text, flush=True)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "crosscheck.md").write_text(text + "\n")  # every case is in crosscheck.jsonl already
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
