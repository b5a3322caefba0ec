"""One test on the device, from program to report: the model's outcomes, the kernel, the launches.

:func:`check_on_device` is what ``syncverify litmus --gpu`` runs per file, and what the tuning
search and the GPU session script run per test and mutant.
"""

from __future__ import annotations

from typing import Callable

from syncverify.errors import SyncVerifyError
from syncverify.litmus.gpu.codegen import NotOnGpu, gpus_needed
from syncverify.litmus.gpu.outcomes import ModelOutcomes, model_outcomes
from syncverify.litmus.gpu.ranks import INTERPRETER_GPUS, WATCHDOG_SECONDS, prepare, run_across_gpus
from syncverify.litmus.gpu.report import TestReport, judge, refused, stopped
from syncverify.litmus.gpu.stress import StressParams
from syncverify.program import Program
from syncverify.litmus.gpu.launch import DeviceRun, interpreting, plan_for, run_on_device


def gpu_refusal(program: Program, model: ModelOutcomes | None, *, cross_gpu: bool = False) -> str | None:
    """Why ``program`` cannot run on one GPU (``cross_gpu``: on its GPUs, one process each), or
    None (the compiler's own refusals come later). Without ``model`` only what needs no
    exploration is checked."""
    why = None if cross_gpu else gpus_needed(program)
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
    """Run ``program`` on the device (or the interpreter) and judge it against the model; a test
    with threads on several GPUs runs on one process per GPU (:func:`check_across_gpus`)."""

    if gpus_needed(program) is not None:
        return check_across_gpus([program], params, iterations=iterations, seconds=seconds, seed=seed, files=[file],
                                 models=[model], model_timeout=model_timeout, interpret=interpret)[0]
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
    return _judged(program, model, run, file=file)


def _judged(program: Program, model: ModelOutcomes, run: DeviceRun, *, file: str, gpus: int = 1) -> TestReport:
    report = judge(program, model, dict(run.counts), form=run.form, timeouts=run.timeouts, launches=run.launches,
                   misaligned=run.misaligned, seconds=run.seconds, kernel_seconds=run.kernel_seconds,
                   params=run.params.to_json(), gpus=gpus)
    report.file = file
    return report


def visible_gpus(interpret: bool) -> int:
    """The GPUs a run across GPUs may use: CUDA's count, or :data:`~syncverify.litmus.gpu.ranks.INTERPRETER_GPUS`
    for the interpreter (each a process on the CPU)."""
    if interpret:
        return INTERPRETER_GPUS
    import torch  # lazily: only a GPU run counts GPUs (the model runs without torch)

    return torch.cuda.device_count()


def check_across_gpus(programs: list[Program], params: StressParams, *, iterations: int, seconds: float,
                      seed: int = 0, files: list[str] | None = None, models: list[ModelOutcomes | None] | None = None,
                      progress: Callable[[str], None] | None = None, model_timeout: float | None = 60.0,
                      interpret: bool | None = None, gpus: int | None = None,
                      watchdog: float = WATCHDOG_SECONDS) -> list[TestReport]:
    """Run tests with threads on several GPUs, every one in ONE start of the rank processes
    (:mod:`~syncverify.litmus.gpu.ranks`), and judge each against the model. Test ``n`` uses
    ``seed + n``; a test that cannot be placed is refused (its report, exit 2), the others run."""
    interpret = interpreting() if interpret is None else interpret
    gpus = visible_gpus(interpret) if gpus is None else gpus
    files = files or [""] * len(programs)
    models = list(models or [None] * len(programs))  # filled in below: the caller's list stays as it was
    reports: list[TestReport | None] = [None] * len(programs)
    jobs, owners = [], []
    for n, (program, file) in enumerate(zip(programs, files)):
        try:
            job = prepare(program, params, iterations=iterations, seconds=seconds, seed=seed + n,
                          interpret=interpret, gpus=gpus)  # placement first: no model work wasted
            models[n] = models[n] or model_outcomes(program, timeout=model_timeout)
        except SyncVerifyError as error:
            reports[n] = refused(program.name, str(error), file=file)
            continue
        why = gpu_refusal(program, models[n], cross_gpu=True)
        if why is not None:
            reports[n] = refused(program.name, why, file=file)
            continue
        jobs.append(job)
        owners.append(n)
    runs, why_stopped = run_across_gpus(jobs, interpret=interpret, watchdog=watchdog, progress=progress)
    for job, n, run in zip(jobs, owners, runs):
        if run is None:
            reports[n] = stopped(programs[n].name, why_stopped or "the ranks ended before this test", file=files[n])
        else:
            reports[n] = _judged(programs[n], models[n], run, file=files[n], gpus=job.world)
    return reports
