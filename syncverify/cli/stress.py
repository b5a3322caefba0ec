"""``syncverify stress``: run a fused kernel with a protocol many times and classify every bad tile.

``stress_command`` is the typer command, registered on the app as ``stress``.
Exit codes (``syncverify.exitcodes``): 0 no bad tile, 1 bad tiles (or a stopped run, or a positive
control that did not fail: the delays were ineffective), 2 bad input with one line on stderr
(sizes that do not divide, more ranks than GPUs, int8 locks with atomics, unknown protocol, no
GPU without ``--interpret``, an ``--output`` that cannot be written: checked before the run).

Three ways to run: a campaign (default; on a GPU a protocol the model calls safe also runs its
positive control, ``syncverify.stress.controls``), ``--guided`` (delay schedules built from the
model's counterexamples, ``syncverify.stress.guided``, next to random delays under the same
budget) and ``--replay I`` (iteration ``I`` again with its exact delays, ``--replay-times`` times,
``syncverify.stress.replay``).
"""

from __future__ import annotations

import contextlib
import inspect
import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from syncverify import exitcodes
from syncverify.cli.output_files import check_writable
from syncverify.errors import SyncVerifyError
from syncverify.cli.app import app
from syncverify.protocols.rules import RESET_HELP
from syncverify.scenarios.build import push_option
from syncverify.stress.report import INTERPRETER_NOTE, interpreter_lines, render_text
from syncverify.cli.progress import StderrProgress
from syncverify.cli.kernel import is_harness_argument
from syncverify.cli.user_stress import parse_defines, stress_harness
from syncverify.frontend.user_stress import StressOptions
from syncverify.stress.campaign import campaign_options, default_programs, refuse_unsynchronized, run_campaign
from syncverify.stress.controls import control_verdict, positive_control
from syncverify.stress.guided import guided_plan, render_rows, run_guided
from syncverify.stress.replay import replay
from syncverify.verdicts.check import check_protocol
from syncverify.kernels.config import check_config
from syncverify.stress.campaign import kernel_config
from syncverify.stress.report import campaign_verdict
from syncverify.verdicts.check import calls_words



def _programs_help(role: int) -> str:
    """The default program counts as runs use them (``default_programs``), on a 132-SM H200."""
    def count(kernel: str, world: int, virtual: bool) -> int:
        return default_programs(campaign_options(kernel=kernel, world_size=world, virtual_ranks=virtual), 132)[role]

    return (f"{count('all-reduce', 2, True)} at W=2 and {count('all-reduce', 4, True)} at W=4 with --virtual-ranks, "
            f"{count('all-reduce', 2, False)} per GPU with one process per GPU (all-reduce, on a 132-SM H200"
            + ("; all-scatter: " + f"{count('all-scatter', 2, True)} at W=2" if role else "") + ")")


def _consoles():
    return (Console(highlight=False, soft_wrap=True),
            Console(stderr=True, highlight=False, soft_wrap=True))


def stress_command(
    target: Optional[str] = typer.Argument(None, help="a harness FILE.py[::NAME] that launches your own Triton kernels (see 'syncverify check FILE.py'); omit it to stress a protocol (--protocol) in the built-in kernels", show_default=False),
    protocol: Optional[str] = typer.Option(None, "--protocol", help="a built-in protocol name or a protocol .toml file"),
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
    gemm_sms: Optional[int] = typer.Option(None, "--gemm-sms", help="producer programs per rank (default: two thirds of three quarters of the SMs a rank gets: " + _programs_help(0) + "; 2 interpreted)"),
    comm_sms: Optional[int] = typer.Option(None, "--comm-sms", help="consumer (all-scatter: comm) programs per rank (default: the rest: " + _programs_help(1) + "; 1 interpreted)"),
    recv_sms: Optional[int] = typer.Option(None, "--recv-sms", help="all-scatter receiver programs per rank (default: the other half; 1 interpreted)"),
    push: Optional[str] = typer.Option(None, "--push", help="all-scatter only: the protocol of the cross-rank push stage, as in 'syncverify check --push' (default: epoch-flag)"),
    distribution: str = typer.Option("striding", "--distribution", help="all-reduce tile owners: striding | block (default: striding)"),
    production: str = typer.Option("every-rank", "--production", help="all-reduce partials: every-rank | owner-only (default: every-rank)"),
    reset: Optional[str] = typer.Option(None, "--reset", help=RESET_HELP),
    poison: str = typer.Option("all", "--poison", help="all | outputs | previous: poison C (NaN) and the workspaces (0) each iteration, only C, or nothing (the previous iteration's values stay: reading them is 'stale') (default: all)"),
    lock_dtype: str = typer.Option("int32", "--lock-dtype", help="int32 | int8 (default: int32)"),
    max_polls: Optional[int] = typer.Option(None, "--max-polls", help="poll budget of each consumer program (default: 65536 with virtual ranks, 4194304 with one process per GPU, 8 interpreted)"),
    order: str = typer.Option("producers-first", "--order", help="interpreter schedule: producers-first | consumers-first | last-rank-late (with --launches two-stream: which launch the host issues first, on a GPU too)"),
    launches: str = typer.Option("fused", "--launches", help="fused (one kernel per call) | two-stream | pdl | pdl-no-wait: the producers and the others as two launches, as 'syncverify check --launches' of the same name (docs/residency.md)"),
    output: Optional[Path] = typer.Option(None, "--output", help="append JSON lines (progress, bad tiles, result) to this file (its directory must exist)"),
    json_output: bool = typer.Option(False, "--json", help="print the result as one JSON object"),
    guided: bool = typer.Option(False, "--guided", help="delay schedules built from the model's counterexamples, each run until its first failure or --seconds (default 10), next to random delays under the same budget; the schedule is printed and saved (--schedule)"),
    schedule: Optional[Path] = typer.Option(None, "--schedule", help="--guided: where to save the schedules as JSON (default: beside --output, else ./guided-PROTOCOL-KERNEL-wW.json)"),
    compare_random: bool = typer.Option(True, "--random/--no-random", help="--guided: also run random delays under the same budget (default: on)"),
    control: Optional[bool] = typer.Option(None, "--control/--no-control", help="when the model calls the protocol safe, also run a sibling it calls unsafe (one ordering step taken away) under the same delays; exit 1 if that sibling does not fail (default: on a GPU, off with --interpret)"),
    replay_iteration: Optional[int] = typer.Option(None, "--replay", help="run iterations 0..I again with the same options and count how often iteration I fails the same way (--replay-rank/--replay-tile/--replay-kind name the tile)"),
    replay_times: int = typer.Option(10, "--replay-times", help="--replay: how many times (default: 10)"),
    replay_rank: Optional[int] = typer.Option(None, "--replay-rank", help="--replay: the bad tile's rank (default: any)"),
    replay_tile: Optional[int] = typer.Option(None, "--replay-tile", help="--replay: the bad tile (default: any)"),
    replay_kind: Optional[str] = typer.Option(None, "--replay-kind", help="--replay: the bad tile's class (default: any)"),
    calls: int = typer.Option(1, "--calls", help="harness (FILE.py) only: calls of the harness's operation per iteration, from a restored heap, as 'check --calls' models them (default: 1)"),
    define: list[str] = typer.Option([], "--define", help="harness only: set a module constant of the harness file, NAME=INTEGER (sizes for the GPU: --define SIZE=1024), over the file's STRESS_SIZES on a GPU; the model check keeps the file's values"),
    graphs: bool = typer.Option(True, "--graphs/--no-graphs", help="harness only: replay blocks of iterations as CUDA graphs (default: on)"),
    mirror: bool = typer.Option(True, "--mirror/--no-mirror", help="harness only: mirror each program's progress and polled values to host memory, read by the watchdog (default: on)"),
    watchdog: float = typer.Option(60.0, "--watchdog", help="harness only: seconds without progress before the worker process is killed and the hang reported from the mirror (default: 60)"),
    in_process: bool = typer.Option(False, "--in-process", help="harness only: run in this process (no worker, no watchdog)"),
    real_ranks: bool = typer.Option(False, "--real-ranks", help="one process per rank (one GPU each; with --interpret, gloo and every rank's heap in one shared file) and a watchdog. A harness: a process-group barrier for sv.host_barrier(), needs --iterations (default: virtual ranks on one GPU). A protocol: the default on GPUs without --virtual-ranks; with --interpret, --order last-rank-late launches the last rank late"),
    timing_split: bool = typer.Option(False, "--timing-split", help="harness only: after a clean run, time an iteration's parts on the device (the user's kernels as written, the rewrite's additions, the harness's restore, validation and epilogue) and print what the harness costs per iteration apart from the kernels (syncverify.frontend.stress_timing)"),
    model_timeout: float = typer.Option(120.0, "--model-timeout", help="harness only: seconds for the model check of the harness (default: 120)"),
) -> None:
    """Stress a protocol inside the real fused GEMM kernel; report every bad tile and why.

    Exit codes: 0 clean (no bad tile), 1 bad tiles found (or a stopped run), 2 bad input.
    """
    out, err = _consoles()
    if target is not None:
        raise typer.Exit(_harness(target, locals(), err))
    if protocol is None:
        err.print("syncverify: error: name a harness FILE.py[::NAME] or give --protocol", markup=False)
        raise typer.Exit(exitcodes.INPUT_ERROR)
    options = dict(
        protocol=protocol, kernel=kernel, world_size=world_size, virtual_ranks=virtual_ranks,
        interpret=interpret, real_ranks=real_ranks, iterations=iterations, seconds=seconds, delays=delays, seed=seed,
        delay_pct=delay_pct, delay_max_ns=delay_max_ns, delay_sites=delay_sites, m=m, n=n, k=k,
        dtype=dtype,
        block_m=block_m, block_n=block_n, block_k=block_k, gemm_sms=gemm_sms, comm_sms=comm_sms,
        recv_sms=recv_sms, push=push,
        distribution=distribution, production=production, reset=reset, poison=poison,
        lock_dtype=lock_dtype, max_polls=max_polls, order=order, launches=launches,
        output=str(output) if output is not None else None,
    )
    if iterations is not None and seconds is not None:
        err.print("syncverify: error: give --iterations or --seconds, not both", markup=False)
        raise typer.Exit(exitcodes.INPUT_ERROR)
    try:
        refuse_unsynchronized(protocol)  # before the model is asked about it
        options["push"] = push_option(kernel, push)
        _check_before_work(options, replay_iteration)
        if output is not None:  # before the run: an unwritable path is bad input, not a late traceback
            check_writable(output, "--output")
        if replay_iteration is not None:
            code = _replay(options, out, json_output, iteration=replay_iteration, times=replay_times,
                           rank=replay_rank, tile=replay_tile, kind=replay_kind)
        elif guided:
            code = _guided(options, out, json_output, schedule=schedule, compare_random=compare_random)
        else:
            code = _campaign(options, out, json_output, control=control)
    except SyncVerifyError as error:
        err.print(f"syncverify: error: {error}", markup=False)
        raise typer.Exit(exitcodes.INPUT_ERROR)
    raise typer.Exit(code)


#: ``stress`` options that mean something for a protocol in the built-in kernels only.
_PROTOCOL_ONLY = ("protocol", "kernel", "virtual_ranks", "m", "n", "k", "dtype", "block_m", "block_n", "block_k",
                  "gemm_sms", "comm_sms", "recv_sms", "push", "reset", "replay_iteration")


def _harness(target: str, given: dict, err) -> int:
    """``syncverify stress FILE.py[::NAME]`` (``syncverify.cli.user_stress``); returns the exit code."""
    defaults = {name: param.default for name, param in inspect.signature(stress_command).parameters.items()}
    wrong = [name for name in _PROTOCOL_ONLY if given[name] != getattr(defaults[name], "default", defaults[name])]
    try:
        if not is_harness_argument(target):
            raise SyncVerifyError(f"{target!r} is not a harness: name a FILE.py[::NAME] (a protocol goes in --protocol)")
        if wrong:
            raise SyncVerifyError(f"--{wrong[0].replace('_', '-')} applies to a protocol in the built-in kernels, not to "
                                  f"a harness ({target}): the harness says what runs")
        if given["delays"] not in ("none", "random"):
            raise SyncVerifyError(f"--delays {given['delays']}: none | random (model-guided: --guided)")
        options = StressOptions(
            target, world_size=given["world_size"], calls=given["calls"], iterations=given["iterations"],
            seconds=given["seconds"], delays="guided" if given["guided"] else given["delays"], seed=given["seed"],
            pct=given["delay_pct"], max_ns=given["delay_max_ns"], poison=given["poison"],
            interpret=given["interpret"], graphs=given["graphs"], mirror=given["mirror"], cap=given["max_polls"],
            defines=parse_defines(given["define"]), stop_on_failure=given["guided"])
        return stress_harness(target, options=options, model_timeout=given["model_timeout"], control=given["control"],
                              replay_times=given["replay_times"] if given["replay_iteration"] is None else 0,
                              watchdog=given["watchdog"], in_process=given["in_process"], real_ranks=given["real_ranks"],
                              as_json=given["json_output"], output=given["output"], schedule=given["schedule"],
                              timing_split=given["timing_split"],
                              compare_random=given["guided"] and given["compare_random"])
    except SyncVerifyError as error:
        err.print(f"syncverify: error: {error}", markup=False)
        return exitcodes.INPUT_ERROR


def _check_before_work(options: dict, replay_iteration: int | None) -> None:
    """Bad options first, then the missing GPU, before the model is asked anything (and before a
    progress line can show): the user fixes what they typed before looking for a GPU."""

    check_config(kernel_config(campaign_options(**options)))
    if replay_iteration is not None:
        iterations = options.get("iterations")
        if replay_iteration < 0:
            raise SyncVerifyError(f"--replay={replay_iteration} must be an iteration number (0 or more)")
        if iterations is not None and replay_iteration >= iterations:
            raise SyncVerifyError(f"--replay={replay_iteration} is past the run's --iterations={iterations} "
                                  f"(iterations 0..{iterations - 1}): replay one of those, or give "
                                  f"--iterations {replay_iteration + 1} or more")
    if not options["interpret"]:
        from syncverify.kernels._deps import require_cuda  # torch/triton: loaded only where a kernel runs

        require_cuda("syncverify stress without --interpret")


def _model_verdict(options: dict):
    """The model's verdict over the calls the campaign makes (:func:`~syncverify.stress.report.campaign_verdict`),
    with a progress line on stderr while it runs (two calls at a large world size take a while)."""

    class Display(StderrProgress):
        def line(self) -> str:
            return f"model: checking {options['protocol']} over 1, then 2 calls, {self.elapsed():.0f} s"

    with Display(after=2.0, plain_every=5.0, name="syncverify-stress-model"):
        return campaign_verdict(options)


def _verdict_words(model) -> str:

    words = calls_words(model)
    return words if model.safe is not None else f"{words}: limit '{model.limit_hit}' ({model.limit_detail})"


def unsound_line(result, model) -> str | None:
    """MODEL UNSOUND, in words, when the run failed where the model (over the same calls) says
    safe; None otherwise. Never two quiet lines: the one answer that matters most is said."""
    if result.clean or model.safe is not True:
        return None

    found = ", ".join(f"{kind} {n}" for kind, n in result.counts.items() if n) or result.stopped or "bad tiles"
    return (f"MODEL UNSOUND: the run failed ({found}) where the model says {calls_words(model)} for "
            f"{result.protocol} in {result.kernel} at world size {result.world_size}: a bug in the model, "
            "the lowering or the kernels (or a run option the model does not see); replay it and report it")


def _campaign(options: dict, out, json_output: bool, *, control: bool | None) -> int:
    """A campaign, its interpreter caveats, and (on a GPU, model-safe protocol) its positive control."""
    interpret = options["interpret"]
    model = _model_verdict(options)
    result = _run(options, json_output=json_output)
    run_control = control if control is not None else not interpret
    control_info = None
    if run_control and model.safe:
        control_info = _positive_control(options, result, json_output=json_output)
    code = exitcodes.OK if result.clean else exitcodes.FOUND
    notes = interpreter_lines(result, model) if interpret else []
    if interpret and result.bad_iterations and _only_order_artifacts(result, model):
        code = exitcodes.OK
        notes.append("verdict: no protocol failure (exit 0): every bad tile is a hang of --order consumers-first")
    if control_info is not None and not control_info["effective"]:
        code = exitcodes.FOUND
    unsound = None if code == exitcodes.OK else unsound_line(result, model)
    if json_output:
        data = result.to_dict()
        data["model"] = {"safe": model.safe, "violations": list(model.violations),
                         "calls": model.scenario.options.epochs, "verdict": _verdict_words(model),
                         "unsound": unsound is not None}
        if interpret:
            data["notes"] = notes
        if control_info is not None:
            data["control"] = control_info
        out.print(json.dumps(data, sort_keys=True), markup=False)
    else:
        text = render_text(result, model=_verdict_words(model))
        out.print(text, markup=False)
        if unsound is not None:
            out.print(unsound, markup=False)
        for line in notes:
            out.print(line, markup=False)
        if control_info is not None:
            out.print(control_info["describe"], markup=False)
            out.print(control_info["verdict"], markup=False)
    return code


def _only_order_artifacts(result, model) -> bool:
    """Whether every bad tile of an interpreted run is a hang that ``--order consumers-first``
    makes (consumers ran and timed out before any producer) and the model finds no hang."""
    return (result.options.get("order") == "consumers-first" and "hang" not in model.violations
            and result.counts.get("hang", 0) > 0
            and all(result.counts.get(name, 0) == 0 for name in result.counts if name != "hang"))


def _positive_control(options: dict, result, *, json_output: bool) -> dict:
    """Run the safe protocol's sibling under the same delays; say whether the delays worked."""
    found = positive_control(options["protocol"], kernel=options["kernel"], world_size=options["world_size"],
                             push=options.get("push") or "epoch-flag")
    sibling = None
    if found is not None:
        run = dict(result.options, protocol=found.protocol, output=None)
        if options.get("seconds") is None:
            run["seconds"] = None
            run["iterations"] = result.options["iterations"]
        sibling = _run(run, json_output=json_output)
    effective, verdict = control_verdict(found, sibling)
    return {"effective": effective, "verdict": verdict,
            "describe": found.describe() if found else "positive control: none found",
            "sibling": found.protocol.to_dict() if found else None,
            "result": sibling.to_dict() if sibling is not None else None}


def _guided(options: dict, out, json_output: bool, *, schedule: Path | None, compare_random: bool) -> int:
    """Schedules from the model's counterexamples; each run next to random delays."""
    o = {k: v for k, v in options.items() if k not in ("protocol", "delays", "iterations", "seconds")}
    seconds = options.get("seconds") or 10.0
    num_warps = campaign_options(**{k: v for k, v in options.items() if k in (
        "protocol", "kernel", "world_size", "interpret", "virtual_ranks")}).num_warps
    plan = guided_plan(options["protocol"], kernel=options["kernel"], world_size=options["world_size"],
                       num_warps=num_warps, push=options.get("push") or "epoch-flag", reset=options.get("reset"),
                       production=options.get("production") or "every-rank",
                       distribution=options.get("distribution") or "striding")
    control = None
    if plan.safe:  # aim at the positive control's counterexample, with the safe protocol under it too
        control = positive_control(options["protocol"], kernel=options["kernel"], world_size=options["world_size"],
                                   push=options.get("push") or "epoch-flag")
        if control is not None:
            sibling_plan = guided_plan(control.protocol, kernel=options["kernel"], world_size=options["world_size"],
                                       num_warps=num_warps, push=options.get("push") or "epoch-flag")
            plan.schedules = sibling_plan.schedules
    path = schedule or _schedule_path(options)
    plan.save(str(path))
    lines = [plan.describe(), f"schedules saved to {path}"]
    if control is not None:
        lines.insert(1, f"the model calls {plan.protocol} safe: its schedules aim at the counterexamples of its "
                        f"{control.describe()[len('positive control: '):]}")
    with _progress("guided") as progress:
        report = run_guided(options["protocol"], seconds=seconds, compare_random=compare_random, plan=plan,
                            progress=progress, **o)
    rows = report["rows"]
    code = exitcodes.FOUND if any(r["guided_reproduced"] for r in rows) else exitcodes.OK
    if plan.safe:  # the protocol itself failed under the schedules, where the model says safe
        failed = [r for r in [*report["guided"], report["random"]] if r is not None and not r.clean]
        if failed:
            lines.append(unsound_line(failed[0], _model_verdict(options)) or "")
            code = exitcodes.FOUND
    if control is not None:
        with _progress("control") as progress:
            sibling = run_guided(control.protocol, seconds=seconds, compare_random=False, plan=plan,
                                 progress=progress, **o)
        effective = any(r["guided_reproduced"] for r in sibling["rows"])
        lines.append(f"positive control {control.protocol.name} under the same schedules: "
                     + ("failed as it must (the schedules are effective)" if effective else
                        "DELAYS INEFFECTIVE: it did not fail, so the clean run is no evidence"))
        code = exitcodes.OK if effective and code == exitcodes.OK else exitcodes.FOUND
    if options["interpret"]:
        lines.append(INTERPRETER_NOTE)
    if json_output:
        out.print(json.dumps({"plan": plan.to_dict(), "rows": rows}, sort_keys=True, default=str), markup=False)
    else:
        out.print("\n".join(lines + [render_rows(rows)]), markup=False)
    return code


def _schedule_path(options: dict) -> Path:
    name = Path(str(options["protocol"])).stem
    base = f"guided-{name}-{options['kernel']}-w{options['world_size']}.json"
    if options.get("output"):
        return Path(options["output"]).with_name(Path(options["output"]).stem + "." + base)
    return Path(base)


def _replay(options: dict, out, json_output: bool, *, iteration: int, times: int, rank, tile, kind) -> int:
    if times < 1:
        raise SyncVerifyError(f"--replay-times={times} must be at least 1")
    with _progress("replay") as progress:
        result = replay(options, iteration=iteration, rank=rank, tile=tile, kind=kind, times=times,
                        progress=progress)
    if json_output:
        out.print(json.dumps(result.to_dict(), sort_keys=True), markup=False)
    else:
        out.print(result.line(), markup=False)
        if options["interpret"]:
            out.print(INTERPRETER_NOTE, markup=False)
    return exitcodes.FOUND if result.reproduced else exitcodes.OK


class _StressProgress:
    """The latest (iterations, bad iterations, seconds) of a running campaign, for
    :class:`syncverify.cli.progress.StderrProgress`."""

    def __init__(self, label: str) -> None:
        self.label, self.done, self.bad, self.seconds = label, 0, 0, 0.0

    def __call__(self, done, _total, seconds, bad=0) -> None:
        self.done, self.seconds, self.bad = done, seconds, bad

    def line(self) -> str:
        return f"{self.label}: {self.done} iterations, {self.bad} bad, {self.seconds:.1f} s"


@contextlib.contextmanager
def _progress(label: str):
    """A progress display on stderr while the body runs (a status on a terminal, a plain line
    every 5 s otherwise: logs and CI see it too); yields the callback campaigns report to."""
    state = _StressProgress(label)

    class Display(StderrProgress):
        def line(self) -> str:
            return state.line()

    with Display(after=1.0, plain_every=5.0, name="syncverify-stress-progress"):
        yield state


def _run(options: dict, *, json_output: bool):
    """One campaign with its progress display."""
    with _progress("stress") as progress:
        return run_campaign(progress=progress, **options)


app.command("stress")(stress_command)
