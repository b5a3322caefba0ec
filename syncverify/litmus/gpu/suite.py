"""One test on the device, from program to report: the model's outcomes, the kernel, the launches.

:func:`check_on_device` is what ``syncverify litmus --gpu`` runs per file, and what the tuning
search and the GPU session script run per test and mutant.
"""

from __future__ import annotations

from typing import Callable

from syncverify.litmus.gpu.codegen import NotOnGpu, gpus_needed
from syncverify.litmus.gpu.outcomes import ModelOutcomes, model_outcomes
from syncverify.litmus.gpu.report import TestReport, judge, refused
from syncverify.litmus.gpu.stress import StressParams
from syncverify.program import Program
from syncverify.litmus.gpu.launch import plan_for, run_on_device


def gpu_refusal(program: Program, model: ModelOutcomes | None) -> str | None:
    """Why ``program`` cannot run on one GPU, or None (the compiler's own refusals come later).
    Without ``model`` only what needs no exploration is checked."""
    why = gpus_needed(program)
    if why is not None:
        return why
    if model is not None and model.barrier_hang:
        return ("the model has an execution that waits forever at a CTA barrier; a GPU barrier "
                "cannot be bounded, so the test is not launched")
    return None


def check_on_device(program: Program, params: StressParams, *, iterations: int, seconds: float, seed: int = 0,
                    file: str = "", model: ModelOutcomes | None = None,
                    progress: Callable | None = None, model_timeout: float | None = 60.0,
                    interpret: bool | None = None) -> TestReport:
    """Run ``program`` on the device (or the interpreter) and judge it against the model."""

    why = gpu_refusal(program, None)  # before exploring: no model work wasted
    if why is not None:
        return refused(program.name, why, file=file)
    model = model or model_outcomes(program, timeout=model_timeout)
    why = gpu_refusal(program, model)
    if why is not None:
        return refused(program.name, why, file=file)
    try:
        plan = plan_for(program, interpret=interpret)
    except NotOnGpu as error:
        return refused(program.name, str(error), file=file)
    run = run_on_device(program, params, iterations=iterations, seconds=seconds, seed=seed, progress=progress,
                        plan=plan, interpret=interpret)
    report = judge(program, model, dict(run.counts), form=run.form, timeouts=run.timeouts, launches=run.launches,
                   misaligned=run.misaligned, seconds=run.seconds, kernel_seconds=run.kernel_seconds,
                   params=run.params.to_json())
    report.file = file
    return report
