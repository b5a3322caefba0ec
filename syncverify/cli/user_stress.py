"""``syncverify stress FILE.py[::NAME]``: the user's own kernels under stress, from the harness ``check`` reads.

The ``stress`` command hands a ``.py`` argument here. The steps: the harness recorded (bad input
is one line, exit 2), the model check of the same harness (its verdict printed; a guided schedule
is built from its counterexamples, with the reason for every delay), the stress run (in a worker
process with a watchdog, ``syncverify.frontend.user_stress``), replays of the first failure
(``reproduced k/N``), with ``--guided`` random delays under the same budget beside it (where they
first catch the bug, or that they did not), and for a harness the model calls safe, a positive
control (a mutant of the kernel the model calls unsafe, ``syncverify.frontend.mutants``) that must
fail under the same delays, else ``DELAYS INEFFECTIVE``.

Exit codes: 0 clean (with an effective control), 1 failures, a hang, or delays shown ineffective,
2 bad input.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from syncverify import exitcodes
from syncverify.cli.app import err, out
from syncverify.errors import SyncVerifyError
from syncverify.frontend.check import check_kernel
from syncverify.frontend.mutants import positive_control
from syncverify.frontend.real_ranks import check_real_ranks, run_real_ranks
from syncverify.frontend.schedule import GuidedEntry, every_program, guided_schedules
from syncverify.frontend.stress_timing import describe, split_timing
from syncverify.frontend.user_stress import (StressInputError, StressOptions, plan_harness, replay_first,
                                             run_in_worker, run_stress, with_stress_sizes)


def parse_defines(texts: list[str]) -> dict:
    """``--define NAME=VALUE`` options (VALUE an integer, or None) as a dict."""
    found = {}
    for text in texts:
        name, sep, value = text.partition("=")
        if not sep or not name.strip().isidentifier():
            raise StressInputError(f"--define {text!r}: write NAME=VALUE (a module constant of the harness file)")
        value = value.strip()
        try:
            found[name.strip()] = None if value == "None" else int(value)
        except ValueError:
            raise StressInputError(f"--define {text!r}: VALUE must be an integer or None") from None
    return found


def stress_harness(target: str, *, options: StressOptions, model_timeout: float, control: bool | None,
                   replay_times: int, watchdog: float, in_process: bool, as_json: bool,
                   output: Path | None, schedule: Path | None, real_ranks: bool = False,
                   timing_split: bool = False, compare_random: bool = False) -> int:
    """Stress a harness (module docstring); returns the exit code. ``real_ranks``: one process per
    rank (``syncverify.frontend.real_ranks``) instead of virtual ranks in one. ``timing_split``: after
    a clean run, the iteration's time split into the user's kernels and the harness
    (``syncverify.frontend.stress_timing``). ``compare_random``: with guided delays, random delays
    under the same budget afterwards, to their first failure (:func:`random_beside`)."""
    say = (lambda line: None) if as_json else (lambda line: out.print(line, markup=False))
    note = lambda line: err.print(f"  {line}", markup=False)  # noqa: E731
    options, line = with_stress_sizes(options)
    if line:
        say(line)
    plan_harness(options)  # bad input before the model or the GPU
    if real_ranks:
        check_real_ranks(options, gpus=None)  # the GPU count is asked where the processes start
        if output is not None or in_process:
            raise StressInputError("--real-ranks runs one process per rank: --in-process and --output are "
                                   "virtual-rank options")
        replay_times = 0  # replays run virtual ranks: not the same run
        if timing_split:
            raise StressInputError("--timing-split times virtual ranks in one process: not with --real-ranks")
    if not options.interpret:
        from syncverify.kernels._deps import require_cuda  # torch/triton: loaded only where a kernel runs

        require_cuda("syncverify stress FILE.py without --interpret")
    err.print(f"model: checking {target} (world size {options.world_size}, {options.calls} call(s)) ...",
              markup=False)
    model = check_kernel(target, world_size=options.world_size, calls=options.calls, timeout=model_timeout)
    report: dict = {"harness": target, "defines": dict(options.defines),  # the run's sizes (--define, STRESS_SIZES)
                    "model": {"verdict": model.verdict, "violations": list(model.violations)}}
    say(f"model: {model.verdict}" + (f": {', '.join(model.violations)}" if model.violations else ""))
    guided = options.delays == "guided"
    if guided:
        schedules = guided_schedules(model, num_warps=4)
        report["schedules"] = [s.to_dict() for s in schedules]
        entries = []
        for s in schedules:
            for line in s.describe():
                say(f"  {line}")
            entries += [e for e in s.entries if e not in entries]
        if options.defines:  # other sizes than the model's: a program of the model is every program
            entries = every_program(entries)
            say("  at the run's sizes (not the model's), each delay applies to every program of its kernel and rank "
                "(the model's programs are the harness's default sizes)")
        if real_ranks:
            entries, left_out = for_real_ranks(entries)
            if left_out:
                say(f"  real ranks: {left_out}")
        if not entries:
            say("  no counterexample can be forced by delays: running without delays")
            options = dataclasses.replace(options, delays="none")
        options = dataclasses.replace(options, guided=tuple(entries))
        if schedule is not None:
            schedule.write_text(json.dumps(report["schedules"], indent=1), encoding="utf-8")
    result = _run(options, watchdog=watchdog, in_process=in_process, output=output, note=note, real_ranks=real_ranks)
    report["result"] = result.to_dict()
    _print_result(result, say)
    code = exitcodes.OK if result.clean else exitcodes.FOUND
    if timing_split and result.clean:
        # after a clean run only: the split runs the kernels as written once, whose waits are not bounded
        split = split_timing(options)
        report["timing"] = split
        say(describe(split))
    elif timing_split:
        say("no timing split: the run was not clean (the split runs the kernels as written, unbounded)")
    if result.first_failure is not None and replay_times > 0 and result.stopped is None:
        replay = replay_first(options, result.first_failure, times=replay_times)
        report["replay"] = replay
        say(replay["summary"])
    if compare_random and guided:
        random_result, line = random_beside(options, watchdog=watchdog, in_process=in_process, note=note,
                                            real_ranks=real_ranks)
        report["random"] = {"line": line, "result": random_result.to_dict()}
        say(line)
    run_control = control if control is not None else not options.interpret
    if run_control and model.safe and result.clean:
        control_info = positive_control(target, world_size=options.world_size, calls=options.calls,
                                        timeout=model_timeout, progress=note)
        if control_info is None:
            line = ("no positive control: every mutant with one synchronization step taken away is safe too (or "
                    "none could be built), so the clean run is no evidence that the delays work")
            report["control"] = {"effective": False, "line": line}
            say(line)
            code = exitcodes.FOUND
        else:
            say(control_info.describe())
            mutant = dataclasses.replace(options, mutant=control_info.change, stop_on_failure=True, substitutes={})
            controlled = _run(mutant, watchdog=watchdog, in_process=in_process, output=None, note=note,
                              real_ranks=real_ranks)
            effective = not controlled.clean
            line = (f"positive control failed as it must: {controlled.bad_iterations} bad iterations of "
                    f"{controlled.iterations} (first at iteration {controlled.first_failure_iteration}): the delays "
                    "are effective" if effective else
                    f"DELAYS INEFFECTIVE: the positive control ({control_info.change}), which the model calls unsafe, "
                    f"showed no failure in {controlled.iterations} iterations under the same delays; the clean run "
                    "is no evidence")
            report["control"] = {"effective": effective, "change": control_info.change, "line": line,
                                 "result": controlled.to_dict()}
            say(line)
            code = code if effective else exitcodes.FOUND
    if as_json:
        out.print(json.dumps(report, indent=1, default=str), markup=False)
    if output is not None:
        with open(output, "a", encoding="utf-8") as f:
            f.write(json.dumps({"report": report}, default=str) + "\n")
    return code


def random_beside(options: StressOptions, *, watchdog: float, in_process: bool, note, real_ranks: bool = False):
    """Random delays (the run's ``pct`` and ``max_ns``, no guided action: no placement, no touch) for
    the guided run's budget, stopping at their first failure: what a user gets without the model.
    Returns the result and its line: where they first caught the bug, or that they did not."""
    options = dataclasses.replace(options, delays="random", guided=(), stop_on_failure=True)
    result = _run(options, watchdog=watchdog, in_process=in_process, output=None, note=note, real_ranks=real_ranks)
    budget = f"{options.seconds:g} s" if options.seconds else f"{options.iterations} iterations"
    how = f"random delays ({options.pct} % of sites, up to {options.max_ns:,} ns) under the same budget ({budget})"
    if options.interpret:
        how += " (the interpreter has no clock: they do not sleep)"
    if result.stopped:
        return result, f"{how}: STOPPED at iteration {result.iterations}: {result.stopped}"
    if result.first_failure is not None:
        return result, (f"{how}: first failure at iteration {result.first_failure_iteration} "
                        f"({result.first_failure.kind})")
    return result, f"{how}: clean {result.iterations} iterations"


def for_real_ranks(entries: list[GuidedEntry]) -> tuple[list[GuidedEntry], str]:
    """A guided schedule's entries that real ranks can run, and what was left out (a line, or ""):
    a placement moves buffers of the virtual ranks' one heap (``syncverify.kernels.placement``);
    each real rank's heap is its own symmetric memory, so it runs without it, and says so."""
    kept = [e for e in entries if e.where != "place"]
    if len(kept) == len(entries):
        return entries, ""
    placed = ", ".join(sorted({e.buffer or "the whole heap" for e in entries if e.where == "place"}))
    return kept, (f"the placement of {placed} in host memory is left out (it places buffers of the virtual ranks' "
                  "one heap; each real rank's heap is its own symmetric memory)")


def _run(options: StressOptions, *, watchdog: float, in_process: bool, output: Path | None, note,
         real_ranks: bool = False):
    if real_ranks:
        return run_real_ranks(options, watchdog=watchdog, progress=note)
    if in_process:
        if output is None:
            return run_stress(options, progress=note)
        with open(output, "a", encoding="utf-8") as f:
            return run_stress(options, progress=note, output=f)
    return run_in_worker(options, watchdog=watchdog, output=str(output) if output else None, progress=note)


def _print_result(result, say) -> None:
    mode = "CUDA graphs" if result.graphs else ("interpreter" if result.interpret else "eager launches")
    clock = "device clock" if result.steady_device_seconds else "host clock"
    say(f"{result.iterations} iterations in {result.seconds:.2f} s ({result.rate:,.0f} validated iterations/s on the "
        f"{clock}, {mode}), delays {result.delays}: " + ("clean" if result.clean else
                                                          f"{result.bad_iterations} bad iterations"))
    if result.tile_classes:
        say("bad tiles: " + ", ".join(f"{n} {kind}" for kind, n in sorted(result.tile_classes.items(),
                                                                          key=lambda kv: -kv[1])))
    if result.first_failure is not None:
        ttf = result.time_to_first_failure_ns
        say(f"first failure at iteration {result.first_failure_iteration}"
            + (f", {ttf / 1e6:.3f} ms after the first validation (device clock)" if ttf else ""))
        for f in result.failures[:8]:
            say(f"  {f.describe()}")
    if result.stopped:
        say(f"STOPPED: {result.stopped}")
        for line in result.hang_report:
            say(f"  {line}")
    for line in result.notes:
        say(f"note: {line}")


__all__ = ["parse_defines", "random_beside", "stress_harness", "SyncVerifyError"]
