"""``syncverify check FILE.py[::HARNESS]``: the user's own Triton kernels, through a harness.

The ``check`` command hands a ``.py`` argument here (every other argument keeps its meaning);
exit codes are ``check``'s: 0 safe, 1 violations, 2 bad input, 3 unknown.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from syncverify import exitcodes
from syncverify.cli.app import err, out
from syncverify.errors import SyncVerifyError
from syncverify.frontend.check import check_kernel, residency_sweep
from syncverify.cli.residency import sweep_exit, sweep_json, sweep_lines
from syncverify.explore.residency import Residency, Sweep
from syncverify.frontend.suggest import search_fixes
from syncverify.cli.output_files import write_or_warn
from syncverify.verdicts.graphs import write_graph

SUGGEST_PROGRESS_EVERY = 5.0  # seconds between two progress lines of --suggest's search


def is_harness_argument(argument: str) -> bool:
    """Whether ``check``'s argument names a harness file (``FILE.py`` or ``FILE.py::NAME``)."""
    return argument.partition("::")[0].endswith(".py")


def parse_declarations(declarations: list[str]) -> dict[str, str]:
    """``--declare-asm 'TEXT=MEANING'`` options as a dict (MEANING ``no-op`` or PTX)."""
    found = {}
    for text in declarations:
        asm, sep, meaning = text.partition("=")
        if not sep or not asm.strip():
            raise SyncVerifyError(f"--declare-asm {text!r}: write 'INLINE ASM=MEANING', MEANING no-op or PTX")
        found[asm.strip()] = meaning.strip()
    return found


def check_harness(argument: str, *, world_size: int, calls: int, threads_per_cta: int, timeout: float,
                  max_executions: int, max_steps: int, first: bool, as_json: bool, graph: Path | None,
                  declare_asm: list[str], suggest: bool, progress_every: float | None,
                  resident: int | None = None, resident_order: str = "any", resident_sweep: bool = False,
                  resident_sms: int = 0, resident_occupancy: tuple = ()) -> int:
    """Run :func:`syncverify.frontend.check.check_kernel` and print the verdict (``resident_sweep``:
    then every resident capacity, :mod:`syncverify.cli.residency`)."""

    started = time.monotonic()
    every = 5.0 if progress_every is None else progress_every
    shown = [started]

    def progress(line: str) -> None:
        now = time.monotonic()
        if now - started >= min(2.0, every) and now - shown[0] >= every:
            shown[0] = now
            err.print(f"  {line}", markup=False)

    if resident_sweep:
        Residency(1, resident_order)  # the order, validated before the run
    if not as_json:
        err.print(f"checking {argument} (world size {world_size}, {calls} call(s)) ...", markup=False)
    result = check_kernel(argument, world_size=world_size, calls=calls, threads_per_cta=threads_per_cta,
                          timeout=timeout, max_executions=max_executions, max_steps=max_steps, first=first,
                          declare_asm=parse_declarations(declare_asm), progress=progress,
                          progress_interval=min(2.0, every), resident=None if resident_sweep else resident,
                          resident_order=resident_order, fair=resident_sweep, resident_sms=resident_sms,
                          resident_occupancy=resident_occupancy)
    if resident_sweep:
        fair_hang = "hang" in result.violations
        left = max(timeout - (time.monotonic() - started), 0.001)
        swept = (residency_sweep(result, resident_order, timeout=left, max_executions=max_executions,
                                 max_steps=max_steps) if result.lifted is not None else Sweep())
        if as_json:
            doc = result.to_json()
            doc["residency_sweep"] = sweep_json(swept, resident_order, fair_hang=fair_hang)
            out.print(json.dumps(doc, indent=2), markup=False)
        else:
            out.print(result.text(), markup=False)
            for line in sweep_lines(swept, resident_order, fair_hang=fair_hang):
                out.print(line, markup=False)
        return sweep_exit(swept, fair_hang=fair_hang) if result.limit_hit is None else exitcodes.UNKNOWN
    fixes = None
    if suggest and result.violations:

        shown = [0.0]

        def progress(line: str) -> None:  # a plain line every few seconds: the search re-checks for minutes
            if time.monotonic() - shown[0] >= SUGGEST_PROGRESS_EVERY:
                shown[0] = time.monotonic()
                err.print(line, markup=False)

        search = search_fixes(argument, result, world_size=world_size, calls=calls,
                              threads_per_cta=threads_per_cta, timeout=timeout, budget=timeout, progress=progress)
        fixes = search.fixes
    if as_json:
        doc = result.to_json()
        if fixes is not None:
            doc["suggestions"] = [f.to_json() for f in fixes]
            doc["suggest_bound"] = search.bound or None
        out.print(json.dumps(doc, indent=2), markup=False)
    else:
        out.print(result.text(), markup=False)
        if fixes is not None:
            out.print("suggested fixes (each re-checked):" if fixes else search.summary(), markup=False)
            for fix in fixes:
                out.print(f"  {fix.text()}", markup=False)
    if graph is not None and result.violations:

        witness = next(iter(result.violations.values()))
        drawn = write_or_warn(lambda: write_graph(witness.execution, graph, title=f"{argument}: {witness.kind}",
                                                  highlight=witness.evidence), "--graph", graph)
        if drawn and not as_json:
            out.print(f"graph of the first counterexample: {graph}", markup=False)
    if result.violations:
        return exitcodes.FOUND
    if result.safe is None:
        return exitcodes.UNKNOWN
    return exitcodes.OK
