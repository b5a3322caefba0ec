"""A counterexample in words, one format for ``syncverify check`` and ``assert_safe``: its cause,
then its trace, offending events marked ``>>``, each event labelled with its epoch (the call of
the kernel) when the scenario has more than one."""

from __future__ import annotations

__all__ = ["counterexample_lines", "trace_line"]


def trace_line(row: dict, *, epochs: int) -> str:
    """One row of :func:`syncverify.verdicts.check.execution_trace` as a line.

    >>> row = {"offending": True, "rank": 0, "cta": "consumer of tile 0", "thread": 1, "epoch": 1,
    ...        "event": "R.acq.sys ready.r0.t0=1", "step": "wait step 1 (await)", "reads_from": "the initial state"}
    >>> trace_line(row, epochs=2)
    '>> rank 0 consumer of tile 0 t1 epoch 1: R.acq.sys ready.r0.t0=1  [wait step 1 (await)] <- the initial state'
    """
    mark = ">>" if row["offending"] else "  "
    rf = f" <- {row['reads_from']}" if row["reads_from"] else ""
    epoch = f" epoch {row['epoch']}" if epochs > 1 and row.get("epoch") is not None else ""
    return f"{mark} rank {row['rank']} {row['cta']} t{row['thread']}{epoch}: {row['event']}  [{row['step']}]{rf}"


def counterexample_lines(violation, scenario) -> list[str]:
    """The ``cause:`` line, then the trace, of one violation (each line unindented)."""
    epochs = scenario.options.epochs
    lines = [f"cause: {violation.cause(scenario).text}"]
    lines += [trace_line(row, epochs=epochs) for row in violation.trace(scenario)]
    return lines
