"""``syncverify litmus --gpu FILE...``: the command's body (the option parsing is in
:mod:`syncverify.cli.litmus`).

Each file is parsed, explored for its allowed outcomes and run on the device for its budget; a bad
or refused file is one line and exit 2 in the end, and the others still run. The exit code is the
most severe of all tests' (:func:`syncverify.exitcodes.worst`): 1 for MODEL UNSOUND.
"""

from __future__ import annotations

import json
from pathlib import Path

from syncverify import exitcodes
from syncverify.errors import SyncVerifyError
from syncverify.litmus.gpu.stress import StressParams, load_tuned, machine_kind, tuned_kinds
from syncverify.litmus.gpu.launch import interpreting
from syncverify.litmus.gpu.report import refused, text
from syncverify.litmus.gpu.codegen import gpus_needed
from syncverify.litmus.gpu.suite import check_across_gpus, check_on_device
from syncverify.litmus.parser import parse_litmus_file
from syncverify.cli.output_files import check_writable
from syncverify.cli.output_files import write_or_warn
from syncverify.litmus.gpu.report import plot as draw


def load_params(path: Path | None):
    """The stress parameters: from ``path`` (a JSON object) or the tuned ones for this machine."""

    if path is None:
        return load_tuned("default" if interpreting() else machine_kind())
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise SyncVerifyError(f"--stress {path}: cannot read a JSON object ({error})") from None
    if not isinstance(data, dict):
        raise SyncVerifyError(f"--stress {path}: expected a JSON object of stress parameters")
    return StressParams.from_json(data.get("params", data), where=f"--stress {path}")


def load_cross_params(path: Path | None, params: StressParams) -> StressParams:
    """The stress parameters of tests across GPUs: ``--stress`` when given, else the tuned entry
    of this machine's two-GPU kind (``KIND-x2`` in ``tuned.json``) when one is stored, else ``params``."""
    if path is not None or interpreting():
        return params
    kind = f"{machine_kind()}-x2"
    return load_tuned(kind) if kind in tuned_kinds() else params


def run_gpu_command(files: list[Path], *, as_json: bool, iterations: int, seconds: float, seed: int,
                    stress: Path | None, plot: Path | None, out, err, model_timeout: float | None = None) -> int:
    """Run every file on the device and print the reports; returns the exit code.

    ``model_timeout`` bounds each test's exploration (``--timeout``; default 60 s): past it the
    model's list is incomplete and an outcome missing from it is reported as unknown (exit 3)."""

    if plot is not None:

        check_writable(plot, "--plot")
    params = load_params(stress)
    timeout = 60.0 if model_timeout is None else model_timeout
    reports: list = [None] * len(files)
    across: list[tuple[int, object]] = []  # tests with threads on several GPUs: one start of the ranks for all

    def show(report, path) -> None:
        if report.status != "ran":
            err.print(f"error: {path}: {report.reason}", markup=False)
        elif not as_json:
            for line in text(report):
                out.print(line, markup=False)
            out.print("", markup=False)

    for n, path in enumerate(files):
        err.print(f"[{n + 1}/{len(files)}] {path} ...", markup=False)

        def progress(run, path=path) -> None:
            err.print(f"  {path}: {run.launches} launches, {run.instances:,} instances, {run.seconds:.0f} s",
                      markup=False)

        try:
            program = parse_litmus_file(path)
            if gpus_needed(program) is not None:
                across.append((n, program))
                err.print(f"  {path}: threads on several GPUs: runs with the other such tests, one process per GPU",
                          markup=False)
                continue
            report = check_on_device(program, params, iterations=iterations, seconds=seconds, seed=seed + n,
                                     file=str(path), progress=progress, model_timeout=timeout)
        except SyncVerifyError as error:
            report = refused(Path(path).stem, str(error), file=str(path))
        reports[n] = report
        show(report, path)
    if across:
        err.print(f"{len(across)} test(s) across GPUs ...", markup=False)
        done = check_across_gpus([p for _, p in across], load_cross_params(stress, params), iterations=iterations,
                                 seconds=seconds, seed=seed, files=[str(files[n]) for n, _ in across],
                                 progress=lambda line: err.print(f"  {line}", markup=False), model_timeout=timeout)
        for (n, _), report in zip(across, done):
            reports[n] = report
            show(report, files[n])
    if as_json:
        out.print(json.dumps([r.to_json() for r in reports], indent=2), markup=False)
    if plot is not None:

        write_or_warn(lambda: draw(reports, plot), "--plot", plot)
    unsound = [r.name for r in reports if r.unsound]
    if unsound and not as_json:
        err.print(f"MODEL UNSOUND in {len(unsound)} test(s): {', '.join(unsound)}", markup=False)
    return exitcodes.worst([r.exit_code for r in reports])
