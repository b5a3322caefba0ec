"""Model against hardware: the model's verdict and a GPU stress campaign, side by side.

For each (protocol, scenario, world size) :func:`compare` runs

* the model check (:func:`syncverify.verdicts.check.check_protocol`), in parallel across processes
  (``jobs``), each bounded by ``timeout`` (a check that hits it is ``unknown``);
* where a CUDA GPU is present, a stress campaign in the real kernel
  (:func:`syncverify.stress.campaign.run_campaign`: virtual ranks, random delays, ``seconds`` per
  pair), one at a time: the GPU is one resource; with ``real_ranks`` one process per GPU;
* with ``interpret``, the same campaigns in Triton's interpreter on the CPU instead
  (:data:`INTERPRET_ITERATIONS` iterations, tiny sizes; with ``real_ranks`` one process per rank,
  gloo, the last rank launched late: the interpreter has no delays): a check of the kernels'
  logic across ranks, not of a GPU's memory model, and what CI runs of ``--real-ranks``.

and joins the two into an *agreement* (:func:`agreement`):

============================  ==============================================================
``agree``                     model safe and hardware clean, or model unsafe and hardware failed
``latent (N iterations)``     the model finds a violation the hardware has not shown in N iterations
``MODEL UNSOUND``             the hardware failed where the model says safe: a bug in the model,
                              the lowering, or the kernels, and the one answer that matters most
``unknown``                   the model check hit a bound (timeout, executions)
============================  ==============================================================

Without hardware data a row has no agreement (``None``).

This module imports neither torch nor triton: :func:`cuda_available` and :func:`stress_pair`
import them (through the stress package) only when called. :func:`write_report` draws with
matplotlib, imported inside it.

Reports (``--out DIR``, :func:`write_report`): ``report.md``, ``report.json``, ``bad-tiles.png``
and ``graphs/PROTOCOL-SCENARIO-W-KIND.{dot,png}``. Without hardware data ``bad-tiles.png`` shows
the model's violation kinds per protocol instead (how many (scenario, world size) pairs show each
kind), and ``report.md`` says so: the chart then answers the question a CPU machine can answer.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
import json
import multiprocessing

from syncverify.errors import SyncVerifyError
from syncverify.json_schema import versioned
from syncverify.scenarios.build import KERNEL_SCENARIOS
from syncverify.kernels.build import build
from syncverify.protocols import builtin_names, load_protocol
from syncverify.scenarios.build import ScenarioOptions
from syncverify.stress.campaign import NOT_STARTED, campaign_options, kernel_config, run_campaign, \
    run_campaigns_on_ranks
from syncverify.validation import one_of
from syncverify.verdicts.check import check_protocol
from syncverify.verdicts.graphs import write_graph
from syncverify.verdicts.check import check_calls
import threading
import time

__all__ = [
    "CLASS_NAMES",
    "DEFAULT_SECONDS",
    "DEFAULT_TIMEOUT",
    "HardwareColumns",
    "ModelColumns",
    "Row",
    "Witness",
    "agreement",
    "compare",
    "cuda_available",
    "model_columns",
    "report_json",
    "stress_pair",
    "to_markdown",
    "write_report",
]

DEFAULT_SECONDS = 3.0  #: stress seconds per (protocol, scenario, world size)
DEFAULT_TIMEOUT = 600.0  #: seconds per model check before it answers unknown
#: Iterations per pair in the interpreter: a stale lock shows from the second call on.
INTERPRET_ITERATIONS = 2
#: Seconds without a report before a real-rank campaign in the interpreter is stopped: an iteration
#: takes 5-20 s there (a 2-core machine under load); a protocol that hangs polls to its cap for minutes.
INTERPRET_WATCHDOG = 90.0
#: Bad-tile classes of a campaign (``syncverify.stress.campaign.CLASS_NAMES``, repeated here so
#: this module does not import the stress package).
CLASS_NAMES = ("unwritten", "stale", "missing-ranks", "corrupt", "hang")
#: Every scenario the model checks and the kernels run (``--scenario all``): one source, the scenarios' own.
SCENARIO_NAMES = KERNEL_SCENARIOS
UNSOUND = "MODEL UNSOUND"

#: ``progress(phase, done, total, detail)``: phase is ``"model"``, ``"hardware"`` or ``"graphs"``.
ProgressFn = Callable[[str, int, int, str], None]


class CompareError(SyncVerifyError):
    """Bad options of a comparison (``--seconds 0``, ``--jobs 0``, no GPU where one was required)."""


# ----- the columns ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Witness:
    """One violation kind the model found: its sentence and the execution that shows it."""

    kind: str
    explanation: str
    execution: Any = field(repr=False, compare=False)  # syncverify.model.events.Execution
    evidence: tuple = ()


@dataclass
class ModelColumns:
    """The model check of one pair: ``verdict`` is ``"safe"``, ``"unsafe"`` or ``"unknown"``."""

    verdict: str
    kinds: tuple[str, ...] = ()
    executions: int = 0
    seconds: float = 0.0
    limit: str | None = None
    limit_detail: str = ""
    witnesses: dict[str, Witness] = field(default_factory=dict, repr=False)
    calls: int = 1  # consecutive kernel calls checked (a campaign's iterations are calls)

    def to_json(self, graphs: dict[str, str] | None = None) -> dict:
        graphs = graphs or {}
        return {
            "verdict": self.verdict,
            "calls": self.calls,
            "safe": {"safe": True, "unsafe": False}.get(self.verdict),
            "kinds": list(self.kinds),
            "executions": self.executions,
            "seconds": round(self.seconds, 3),
            "limit": self.limit,
            "limit_detail": self.limit_detail,
            "violations": [{"kind": w.kind, "explanation": w.explanation,
                            **({"graph": graphs[w.kind]} if w.kind in graphs else {})}
                           for w in self.witnesses.values()],
        }


@dataclass
class HardwareColumns:
    """A stress campaign of one pair: iterations, bad tiles per class, time to the first failure."""

    iterations: int
    bad_iterations: int = 0
    counts: dict[str, int] = field(default_factory=lambda: {name: 0 for name in CLASS_NAMES})
    time_to_first_failure: float | None = None
    seconds: float = 0.0
    device: str = ""
    stopped: str | None = None  # why the campaign ended early (a watchdog), if it did
    first_failure: dict | None = None

    @property
    def failed(self) -> bool:
        """Some tile was bad, or the run was stopped (a hang the watchdog caught)."""
        return self.bad_iterations > 0 or self.stopped is not None

    @classmethod
    def from_campaign(cls, result) -> "HardwareColumns":
        """From a :class:`syncverify.stress.campaign.CampaignResult`."""
        return cls(iterations=result.iterations, bad_iterations=result.bad_iterations,
                   counts={name: result.counts.get(name, 0) for name in CLASS_NAMES},
                   time_to_first_failure=result.time_to_first_failure, seconds=result.seconds,
                   device=result.device, stopped=result.stopped, first_failure=result.first_failure)

    def to_json(self) -> dict:
        return {"iterations": self.iterations, "bad_iterations": self.bad_iterations,
                "counts": dict(self.counts), "time_to_first_failure": self.time_to_first_failure,
                "seconds": round(self.seconds, 3), "device": self.device, "stopped": self.stopped,
                "clean": not self.failed, "first_failure": self.first_failure}


def agreement(model: ModelColumns, hardware: HardwareColumns | None) -> str | None:
    """How the model's verdict and the hardware's result relate (see the module docstring).

    Examples
    --------
    >>> agreement(ModelColumns("safe"), HardwareColumns(iterations=10))
    'agree'
    >>> agreement(ModelColumns("unsafe", ("race",)), HardwareColumns(iterations=10))
    'latent (10 iterations)'
    >>> agreement(ModelColumns("safe"), HardwareColumns(iterations=10, bad_iterations=1))
    'MODEL UNSOUND'
    >>> agreement(ModelColumns("unknown"), None) is None
    True
    """
    if hardware is None:
        return None
    if model.verdict == "unknown":
        return "unknown"
    if model.verdict == "safe":
        return UNSOUND if hardware.failed else "agree"
    if hardware.failed:
        return "agree"
    return f"latent ({hardware.iterations:,} iteration{'' if hardware.iterations == 1 else 's'})"


@dataclass
class Row:
    """One (protocol, scenario, world size): the model's columns, the hardware's, their agreement."""

    protocol: str
    scenario: str
    world_size: int
    model: ModelColumns
    hardware: HardwareColumns | None = None

    @property
    def agreement(self) -> str | None:
        return agreement(self.model, self.hardware)

    @property
    def unsound(self) -> bool:
        return self.agreement == UNSOUND

    @property
    def label(self) -> str:
        return f"{self.protocol} / {self.scenario} / W={self.world_size}"

    def to_json(self, graphs: dict[str, str] | None = None) -> dict:
        return {"protocol": self.protocol, "scenario": self.scenario, "world_size": self.world_size,
                "model": self.model.to_json(graphs),
                "hardware": self.hardware.to_json() if self.hardware is not None else None,
                "agreement": self.agreement}


# ----- the two halves ---------------------------------------------------------------------------

def model_columns(protocol: str, scenario: str, world_size: int, timeout: float) -> ModelColumns:
    """Check one pair (in a worker process: arguments and result are picklable) over the calls a
    campaign makes (:func:`~syncverify.verdicts.check.check_calls`): a campaign's iterations are
    calls on the same locks, so the verdict beside it covers two calls, not one."""

    result = check_calls(protocol, scenario=scenario, world_size=world_size, timeout=timeout)
    verdict = {True: "safe", False: "unsafe", None: "unknown"}[result.safe]
    witnesses = {kind: Witness(kind, v.explanation, v.execution, tuple(v.evidence))
                 for kind, v in result.violations.items()}
    return ModelColumns(verdict, tuple(result.violations), result.executions, result.seconds,
                        result.limit_hit, result.limit_detail, witnesses, result.scenario.options.epochs)


def cuda_available() -> bool:
    """Whether torch is installed and sees a CUDA GPU (imports torch only when it is there)."""
    if importlib.util.find_spec("torch") is None:
        return False
    # torch: only the GPU path needs it (the model runs without torch and triton)
    import torch

    return bool(torch.cuda.is_available())


def _campaign_options(protocol: str, scenario: str, world_size: int, seconds: float, *,
                      real_ranks: bool = False, interpret: bool = False) -> dict:
    if interpret:  # no delays run there: on real ranks the last rank's late launch is the perturbation
        # (virtual ranks: that order is a grid order, in which every waiting consumer times out)
        return dict(protocol=protocol, kernel=scenario, world_size=world_size, interpret=True, real_ranks=real_ranks,
                    iterations=INTERPRET_ITERATIONS, order="last-rank-late" if real_ranks else "producers-first",
                    watchdog_seconds=INTERPRET_WATCHDOG)
    return dict(protocol=protocol, kernel=scenario, world_size=world_size, virtual_ranks=not real_ranks,
                seconds=seconds, delays="random")


def check_stress_pair(protocol: str, scenario: str, world_size: int, *, seconds: float,
                      real_ranks: bool = False, interpret: bool = False) -> None:
    """Refuse, before anything runs, a pair the kernels cannot run (a world size beyond 1..8, a
    step the kernels cannot express): the same checks as ``syncverify stress``, no torch needed."""
    options = campaign_options(**_campaign_options(protocol, scenario, world_size, seconds, real_ranks=real_ranks,
                                                   interpret=interpret))
    build(load_protocol(protocol), kernel_config(options), push=load_protocol(options.push))


def stress_pair(protocol: str, scenario: str, world_size: int, *, seconds: float,
                progress: Callable[[int, float], None] | None = None, interpret: bool = False) -> HardwareColumns:
    """Stress one pair on the GPU for ``seconds``: virtual ranks, random delays (``interpret``:
    virtual ranks in the interpreter, :func:`_campaign_options`).

    ``progress(iterations, seconds)`` is called at every synchronization of the campaign.
    """
    def report(done: int, _total: int | None, elapsed: float, _bad: int = 0) -> None:
        if progress is not None:
            progress(done, elapsed)

    result = run_campaign(progress=report, **_campaign_options(protocol, scenario, world_size, seconds,
                                                               interpret=interpret))
    return HardwareColumns.from_campaign(result)


# ----- the comparison ---------------------------------------------------------------------------

def _scenarios(scenarios: Iterable[str]) -> list[str]:
    chosen: list[str] = []
    for name in scenarios:
        one_of("--scenario", name, (*SCENARIO_NAMES, "all"), error=CompareError)
        for s in SCENARIO_NAMES if name == "all" else (name,):
            if s not in chosen:
                chosen.append(s)
    if not chosen:
        raise CompareError(f"no scenario given: use {', '.join(SCENARIO_NAMES)} or all")
    return chosen


def plan(protocols: Sequence[str], scenarios: Iterable[str], worlds: Iterable[int]) -> list[tuple[str, str, str, int]]:
    """The pairs to run, ``(argument, protocol name, scenario, world size)``, every one checked.

    No protocol named means every built-in. An unknown protocol, scenario or a world size the
    model refuses raises a one-line :class:`~syncverify.errors.SyncVerifyError` here, before any
    work.
    """
    arguments = list(protocols) or builtin_names()
    chosen = _scenarios(scenarios)
    sizes = list(dict.fromkeys(worlds))
    if not sizes:
        raise CompareError("no world size given: use --world-size N (1 or more)")
    loaded = [(argument, load_protocol(argument)) for argument in arguments]
    pairs = []
    for argument, protocol in loaded:
        for scenario in chosen:
            for w in sizes:
                ScenarioOptions(scenario=scenario, world_size=w).validated(protocol)
                pairs.append((str(argument), protocol.name, scenario, w))
    return pairs


def compare(protocols: Sequence[str], scenarios: Iterable[str] = ("all",), worlds: Iterable[int] = (2,), *,
            seconds: float = DEFAULT_SECONDS, gpu: bool | None = None, jobs: int | None = None,
            timeout: float = DEFAULT_TIMEOUT, progress: ProgressFn | None = None,
            real_ranks: bool = False, interpret: bool = False) -> list[Row]:
    """Model-check and (with a GPU) stress every (protocol, scenario, world size); one row each.

    Parameters
    ----------
    protocols
        Built-in names or ``.toml`` paths; empty: every built-in.
    scenarios
        A scenario name, or ``"all"`` (the four of :data:`SCENARIO_NAMES`).
    worlds
        World sizes.
    seconds
        Stress seconds per pair (> 0).
    gpu
        ``None``: stress where a CUDA GPU is present; ``False``: never; ``True``: a GPU is required.
    jobs
        Model checks run at once, in worker processes (default ``os.cpu_count()``; 1: in this process).
        The workers start from a fork server, as all of Python's will from 3.14: a script that
        calls this with ``jobs > 1`` needs the usual ``if __name__ == "__main__":`` guard, and
        cannot be read from stdin (``python - < script.py``).
    timeout
        Seconds per model check before it answers unknown.
    progress
        ``progress(phase, done, total, detail)`` after each model check and at every
        synchronization of a campaign (real ranks: as each campaign reports).
    real_ranks
        Stress on one process per GPU (``world size`` GPUs, NCCL, symmetric memory) instead of
        virtual ranks on GPU 0: every pair of one world size in one launch of the processes
        (:func:`syncverify.stress.campaign.run_campaigns_on_ranks`). Needs a GPU (``gpu`` not False)
        unless ``interpret``.
    interpret
        Stress in Triton's interpreter on the CPU (module docstring), whatever ``gpu`` says; with
        ``real_ranks`` one process per rank (gloo, every rank's heap in one shared file).

    Returns
    -------
    list of Row
        In the order protocol, scenario, world size. ``row.hardware`` is None without a GPU.

    Raises
    ------
    SyncVerifyError
        Bad input, before anything runs.

    Examples
    --------
    >>> [r.model.verdict for r in compare(["epoch-flag", "xchg-flag"], ["all-reduce"], [2], gpu=False, jobs=1)]
    ['safe', 'unsafe']
    """
    if not seconds > 0:
        raise CompareError(f"--seconds={seconds:g} must be positive")
    if not timeout > 0:
        raise CompareError(f"--timeout={timeout:g} must be positive")
    jobs = (os.cpu_count() or 1) if jobs is None else jobs
    if jobs < 1:
        raise CompareError(f"--jobs={jobs} must be at least 1")
    pairs = plan(protocols, scenarios, worlds)
    use_gpu = cuda_available() if gpu is None else gpu
    if gpu and not cuda_available():
        raise CompareError("no CUDA GPU is visible to torch; run without a GPU requirement (gpu=None) "
                           "or with --no-gpu")
    if interpret:
        use_gpu = True  # the hardware columns come from the interpreter: "gpu" is where the kernels run
    elif real_ranks and not use_gpu:
        raise CompareError("--real-ranks stresses on one process per GPU: no CUDA GPU is visible to torch "
                           "(or --no-gpu was given)")
    if use_gpu:
        for argument, _name, scenario, w in pairs:
            check_stress_pair(argument, scenario, w, seconds=seconds, real_ranks=real_ranks, interpret=interpret)
    report = progress or (lambda *_: None)
    models = _run_models(pairs, jobs=jobs, timeout=timeout, progress=report)
    rows = [Row(name, scenario, w, model) for (_a, name, scenario, w), model in zip(pairs, models)]
    if use_gpu and real_ranks:
        _stress_on_ranks(pairs, rows, seconds=seconds, report=report, interpret=interpret)
    elif use_gpu:
        for i, ((argument, name, scenario, w), row) in enumerate(zip(pairs, rows)):
            what = f"stress {name} {scenario} W={w}"
            report("hardware", i, len(rows), what)

            def step(done: int, elapsed: float, i=i, what=what) -> None:
                report("hardware", i, len(rows), f"{what}: {done:,} iterations, {elapsed:.1f}/{seconds:g} s")

            row.hardware = stress_pair(argument, scenario, w, seconds=seconds, progress=step, interpret=interpret)
        report("hardware", len(rows), len(rows), "done")
    return rows


def _stress_on_ranks(pairs, rows: list[Row], *, seconds: float, report: ProgressFn, interpret: bool = False) -> None:
    """Every pair on real ranks, one launch per world size; each row's hardware columns as its
    campaign reports."""
    done: list[int] = []

    def reported(i: int, payload: dict) -> None:
        done.append(i)
        report("hardware", len(done), len(rows), f"stress {rows[i].label} on real ranks: "
                                                 f"{payload.get('iterations', 0):,} iterations")

    each = f"{INTERPRET_ITERATIONS} interpreted iterations" if interpret else f"{seconds:g} s"
    report("hardware", 0, len(rows), f"stress {len(rows)} pairs on real ranks, {each} each")
    results = run_campaigns_on_ranks(
        [_campaign_options(argument, scenario, w, seconds, real_ranks=True, interpret=interpret)
         for argument, _n, scenario, w in pairs],
        on_result=reported)
    for row, result in zip(rows, results):
        # a campaign the launch never reached has no hardware data: its row shows the model alone
        never = result.stopped is not None and result.stopped.startswith(NOT_STARTED)
        row.hardware = None if never else HardwareColumns.from_campaign(result)
    report("hardware", len(rows), len(rows), "done")


def _run_models(pairs, *, jobs: int, timeout: float, progress: ProgressFn) -> list[ModelColumns]:
    """Every model check, ``jobs`` at a time in worker processes (1: here), in ``pairs`` order."""
    total = len(pairs)
    progress("model", 0, total, "")
    results: list[ModelColumns | None] = [None] * total

    def done(i: int, model: ModelColumns, count: int) -> None:
        results[i] = model
        _a, name, scenario, w = pairs[i]
        progress("model", count, total, f"{name} {scenario} W={w}: {model.verdict}")

    if jobs == 1 or total == 1:
        for i, (argument, _name, scenario, w) in enumerate(pairs):
            done(i, model_columns(argument, scenario, w, timeout), i + 1)
        return results  # type: ignore[return-value]
    with _pool(jobs, total) as pool:
        futures = {pool.submit(model_columns, argument, scenario, w, timeout): i
                   for i, (argument, _name, scenario, w) in enumerate(pairs)}
        for count, (i, model) in enumerate(_as_done(pool, futures), 1):
            done(i, model, count)
    return results  # type: ignore[return-value]


def _pool(jobs: int, tasks: int) -> ProcessPoolExecutor:
    """Worker processes for ``tasks`` tasks, at most ``jobs``.

    forkserver: workers are forked from a clean server process, not from this one (which runs a
    progress thread, and forking a threaded process can deadlock); the server imports the checker
    and the graphs once and every worker inherits them.
    """
    try:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["syncverify.verdicts.check", "syncverify.verdicts.graphs"])
    except ValueError:  # no forkserver on this platform
        context = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(max_workers=min(jobs, tasks), mp_context=context,
                               initializer=_die_with, initargs=(os.getpid(),))


WATCHDOG_EVERY = 0.5  # seconds between a worker's looks at its main process


def _die_with(main_pid: int) -> None:
    """A worker's watchdog: exit as soon as the main process is gone (even SIGKILLed, when nothing
    else would stop a check running up to its timeout). A worker's parent is the forkserver, not
    the main process, so ``PR_SET_PDEATHSIG`` would not see it go; the main process's id is polled."""

    def watch() -> None:
        while True:
            time.sleep(WATCHDOG_EVERY)
            try:
                os.kill(main_pid, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:  # the pid was reused by another user's process: ours is gone
                os._exit(1)

    threading.Thread(target=watch, name="syncverify-worker-watchdog", daemon=True).start()


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and end the workers now: a check already running would
    otherwise run to its timeout (Python's exit waits for the pool's workers)."""
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14+
    if terminate is not None:
        terminate()
        return
    # Before 3.14 there is no public way; shutdown() forgets the processes, so take them first.
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()


def _as_done(pool: ProcessPoolExecutor, futures: dict) -> Iterable[tuple[Any, Any]]:
    """``(futures[f], f.result())`` as each finishes; on any error or interrupt, cancel the rest."""
    try:
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                yield futures[future], future.result()
    except BaseException:  # an error, or Ctrl-C / kill -INT: stop every worker with us
        _stop_workers(pool)
        raise


# ----- reports ----------------------------------------------------------------------------------

def model_cells(model: ModelColumns) -> tuple[str, str, str, str]:
    """verdict, kinds, executions, seconds: the model's four cells."""
    calls = f"{model.calls} call{'' if model.calls == 1 else 's'}"
    verdict = model.verdict.upper() + (f" ({calls}, bound hit: {model.limit})" if model.limit else f" ({calls})")
    return verdict, ", ".join(model.kinds) or "-", f"{model.executions:,}", f"{model.seconds:.2f}"


def hardware_cells(hardware: HardwareColumns | None) -> tuple[str, str, str]:
    """iterations, bad tiles per class (the classes that occurred), time to the first failure."""
    if hardware is None:
        return "-", "-", "-"
    bad = ", ".join(f"{name} {n:,}" for name, n in hardware.counts.items() if n) or "none"
    if hardware.stopped:
        bad += f" (stopped: {hardware.stopped})"
    first = "-" if hardware.time_to_first_failure is None else f"{hardware.time_to_first_failure:.3f} s"
    return f"{hardware.iterations:,}", bad, first


MODEL_HEADERS = ("protocol", "scenario, W", "model", "violation kinds", "executions", "seconds")
HARDWARE_HEADERS = ("iterations", "bad tiles", "first failure", "agreement")


def table_rows(rows: Sequence[Row], *, hardware: bool) -> list[tuple[str, ...]]:
    """The table as text cells (the CLI's rich table and report.md share it)."""
    out = []
    for row in rows:
        cells = (row.protocol, f"{row.scenario}, {row.world_size}", *model_cells(row.model))
        if hardware:
            cells += (*hardware_cells(row.hardware), row.agreement or "-")
        out.append(cells)
    return out


def has_hardware(rows: Sequence[Row]) -> bool:
    return any(row.hardware is not None for row in rows)


def unsound_lines(rows: Sequence[Row]) -> list[str]:
    """One line per MODEL UNSOUND row: what the hardware saw that the model says cannot happen."""
    lines = []
    for row in rows:
        if row.unsound:
            _it, bad, first = hardware_cells(row.hardware)
            lines.append(f"MODEL UNSOUND: {row.label}: the model says safe ({row.model.calls} calls), the "
                         "hardware showed bad tiles "
                         f"({bad}; first after {first})")
    return lines


def report_json(rows: Sequence[Row], *, note: str | None = None,
                graphs: dict[tuple[int, str], str] | None = None) -> dict:
    """report.json (and ``compare --json``): every row, plus the hardware note and the unsound rows."""
    graphs = graphs or {}
    return versioned({
        "hardware": has_hardware(rows),
        "note": note,
        "unsound": [row.label for row in rows if row.unsound],
        "rows": [row.to_json({kind: path for (i2, kind), path in graphs.items() if i2 == i})
                 for i, row in enumerate(rows)],
    }, "compare")


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def to_markdown(rows: Sequence[Row], *, note: str | None = None,
                graphs: dict[tuple[int, str], str] | None = None, chart: str | None = None) -> str:
    """report.md: the table, the unsound rows, each violation's explanation (and graph)."""
    graphs = graphs or {}
    hardware = has_hardware(rows)
    headers = MODEL_HEADERS + (HARDWARE_HEADERS if hardware else ())
    lines = ["# syncverify compare", ""]
    if note:
        lines += [note, ""]
    lines.append("| " + " | ".join(headers) + " |")
    lines.append("|" + "|".join(" --- " for _ in headers) + "|")
    for cells in table_rows(rows, hardware=hardware):
        lines.append("| " + " | ".join(_md_escape(c) for c in cells) + " |")
    lines.append("")
    for line in unsound_lines(rows):
        lines += [f"**{line}**", ""]
    if chart:
        lines += [chart, ""]
    unknown = [row for row in rows if row.model.verdict == "unknown"]
    if unknown:
        lines += ["## Unknown", ""]
        lines += [f"- {row.label}: limit `{row.model.limit}` ({row.model.limit_detail})" for row in unknown]
        lines.append("")
    found = [(i, row) for i, row in enumerate(rows) if row.model.witnesses]
    if found:
        lines += ["## Violations", ""]
        for i, row in found:
            lines += [f"### {row.label}", ""]
            for kind, witness in row.model.witnesses.items():
                graph = graphs.get((i, kind))
                link = f" ([graph]({graph}), [dot]({Path(graph).with_suffix('.dot').as_posix()}))" if graph else ""
                lines.append(f"- **{kind}**: {witness.explanation}{link}")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def graph_name(row: Row, kind: str) -> str:
    """``graphs/PROTOCOL-SCENARIO-W-KIND`` (no suffix: ``.dot`` and ``.png`` are both written)."""
    return f"graphs/{_safe_name(row.protocol)}-{row.scenario}-{row.world_size}-{kind}"


def write_chart(rows: Sequence[Row], path: Path) -> str:
    """bad-tiles.png: bad tiles per protocol and class, or (no hardware data) violation kinds per
    protocol. Returns the sentence report.md says about it."""
    # matplotlib: about a second to import, only for drawing a picture
    import matplotlib

    matplotlib.use("Agg")
    # matplotlib: about a second to import, only for drawing a picture
    import matplotlib.pyplot as plt

    protocols = list(dict.fromkeys(row.protocol for row in rows))
    if has_hardware(rows):
        series = {name: [sum(r.hardware.counts.get(name, 0) for r in rows if r.protocol == p and r.hardware)
                         for p in protocols] for name in CLASS_NAMES}
        ylabel, title = "bad tiles (summed over scenarios and world sizes)", "bad tiles per protocol and class"
        sentence = "`bad-tiles.png`: bad tiles per protocol and class, summed over scenarios and world sizes."
    else:
        kinds = list(dict.fromkeys(k for row in rows for k in row.model.kinds)) or ["race"]
        series = {kind: [sum(kind in r.model.kinds for r in rows if r.protocol == p) for p in protocols]
                  for kind in kinds}
        ylabel = "(scenario, world size) pairs showing it"
        title = "no hardware data: the model's violation kinds per protocol"
        sentence = ("No hardware data: `bad-tiles.png` shows the model's violation kinds per protocol "
                    "instead (how many (scenario, world size) pairs show each kind).")
    # matplotlib: about a second to import, only for drawing a picture
    from matplotlib.ticker import MaxNLocator

    # Grouped bars (one per class or kind), not stacked: each count reads off the axis. Bad tiles
    # range from one to millions, so their axis turns logarithmic when the counts spread.
    shown = {name: values for name, values in series.items() if any(values)}
    width = 0.8 / max(1, len(shown))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(protocols) + 2), 5))
    for j, (name, values) in enumerate(shown.items()):
        ax.bar([x + (j - (len(shown) - 1) / 2) * width for x in range(len(protocols))], values, width, label=name)
    totals = [sum(values[x] for values in series.values()) for x in range(len(protocols))]
    for x, total in enumerate(totals):
        if not total:
            ax.text(x, 0, "clean" if has_hardware(rows) else "safe", ha="center", va="bottom",
                    fontsize=8, color="#2ca02c")
    if has_hardware(rows) and max(totals, default=0) > 100:
        ax.set_yscale("symlog", linthresh=1)
    else:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xticks(range(len(protocols)))
    ax.set_xticklabels(protocols, rotation=45, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if shown:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(str(path), dpi=100)
    plt.close(fig)
    return sentence


def _draw(execution, path: Path, title: str, evidence) -> list[Path]:
    """One violation's happens-before graph, ``path.dot`` and ``path.png`` (in a worker process)."""
    return write_graph(execution, path, title=title, highlight=evidence)


def write_report(rows: Sequence[Row], directory: str | Path, *, note: str | None = None,
                 jobs: int | None = None, progress: ProgressFn | None = None) -> list[Path]:
    """Write report.md, report.json, bad-tiles.png and graphs/ under ``directory``; returns the files.

    ``directory`` is created (one level) if missing; the caller checks it can be (before the run:
    :func:`syncverify.cli.output_files.check_writable` with ``kind="dir"``). The graphs are drawn
    ``jobs`` at a time in worker processes (default ``os.cpu_count()``; 1: in this process).
    """
    jobs = (os.cpu_count() or 1) if jobs is None else jobs
    directory = Path(directory)
    directory.mkdir(exist_ok=True)
    report = progress or (lambda *_: None)
    todo = [(i, row, kind) for i, row in enumerate(rows) for kind in row.model.witnesses]
    graphs = {(i, kind): f"{graph_name(row, kind)}.png" for i, row, kind in todo}
    tasks = [(row.model.witnesses[kind].execution, directory / graph_name(row, kind), f"{row.label}: {kind}",
              row.model.witnesses[kind].evidence) for _i, row, kind in todo]
    written: list[Path] = []
    report("graphs", 0, len(todo), "")
    if jobs == 1 or len(tasks) <= 1:
        for n, task in enumerate(tasks, 1):
            written += _draw(*task)
            report("graphs", n, len(todo), task[2])
    else:  # matplotlib takes ~0.3 s a picture: draw them in parallel too
        with _pool(jobs, len(tasks)) as pool:
            futures = {pool.submit(_draw, *task): task[2] for task in tasks}
            for n, (title, files) in enumerate(_as_done(pool, futures), 1):
                written += files
                report("graphs", n, len(todo), title)
    report("graphs", len(todo), len(todo), "chart")
    chart = directory / "bad-tiles.png"
    sentence = write_chart(rows, chart)
    (directory / "report.md").write_text(to_markdown(rows, note=note, graphs=graphs, chart=sentence))
    (directory / "report.json").write_text(json.dumps(report_json(rows, note=note, graphs=graphs), indent=2) + "\n")
    return [directory / "report.md", directory / "report.json", chart, *written]
