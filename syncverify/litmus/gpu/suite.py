"""One test on the device, from program to report: the model's outcomes, the kernel, the launches.

:func:`check_on_device` is what ``syncverify litmus --gpu`` runs per file, and what the tuning
search and the GPU session script run per test and mutant.
"""

from __future__ import annotations

from typing import Callable

from syncverify.litmus.gpu.codegen import NotOnGpu
from syncverify.litmus.gpu.outcomes import ModelOutcomes, model_outcomes
from syncverify.litmus.gpu.report import TestReport, judge, refused
from syncverify.litmus.gpu.stress import StressParams
from syncverify.program import Program


def gpu_refusal(program: Program, model: ModelOutcomes) -> str | None:
    """Why ``program`` cannot run on one GPU, or None (the compiler's own refusals come later)."""
    if len({t.gpu for t in program.threads}) > 1:
        gpus = sorted({t.gpu for t in program.threads})
        return (f"needs {len(gpus)} GPUs (threads on gpu {', '.join(map(str, gpus))}); "
                "--gpu runs single-GPU tests only")
    if model.barrier_hang:
        return ("the model has an execution that waits forever at a CTA barrier; a GPU barrier "
                "cannot be bounded, so the test is not launched")
    return None


def check_on_device(program: Program, params: StressParams, *, iterations: int, seconds: float, seed: int = 0,
                    file: str = "", model: ModelOutcomes | None = None,
                    progress: Callable | None = None, model_timeout: float | None = 60.0,
                    interpret: bool | None = None) -> TestReport:
    """Run ``program`` on the device (or the interpreter) and judge it against the model."""
    from syncverify.litmus.gpu.launch import plan_for, run_on_device  # lazily: needs triton

    if len({t.gpu for t in program.threads}) > 1:  # refused before exploring: no model work wasted
        return refused(program.name, gpu_refusal(program, ModelOutcomes((), frozenset(), False, False, None)) or "",
                       file=file)
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
