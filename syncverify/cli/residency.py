"""``syncverify check ... --resident-sweep``: at which resident capacities a program can deadlock.

The answer a user acts on: the largest capacity (CTAs resident per GPU at once) at which some
admission of CTAs leaves every slot to a CTA that waits forever, and the smallest from which no
larger one does (``syncverify.explore.residency``; docs/residency.md maps it to SMs x occupancy
and to a ``COMM_SMS`` for a given ``GEMM_SMS``)."""

from __future__ import annotations

from syncverify import exitcodes
from syncverify.explore.residency import Sweep

ANSWER = {True: "can deadlock", False: "no deadlock", None: "unknown (bound hit)"}


def sweep_json(sweep: Sweep, order: str, *, fair_hang: bool) -> dict:
    """``--json``'s ``residency_sweep`` object."""
    return {"order": order, "answers": {str(r): d for r, d in sorted(sweep.answers.items())},
            "largest_deadlocking": sweep.largest_deadlocking, "smallest_safe": sweep.smallest_safe,
            "hangs_without_residency": fair_hang}


def sweep_lines(sweep: Sweep, order: str, *, fair_hang: bool) -> list[str]:
    """The sweep in words: one line per capacity, then the two numbers."""
    admitted = "any order" if order == "any" else "blockIdx order per launch"
    lines = [f"residency sweep (CTAs admitted in {admitted}; a resident CTA is never preempted):"]
    if fair_hang:
        lines.append("  it hangs even with every CTA resident (see the verdict above): no capacity is safe")
    for capacity, answer in sorted(sweep.answers.items()):
        lines.append(f"  --resident {capacity}: {ANSWER[answer]}")
    top, safe = sweep.largest_deadlocking, sweep.smallest_safe
    if not sweep.answers:
        lines.append("  every GPU has at most one CTA: residency changes nothing")
    elif safe is None:
        lines.append("  unknown: a bound was hit at some capacity (raise --timeout)")
    else:
        lines.append(f"  largest capacity at which it can deadlock: {top if top is not None else 'none'}; "
                     f"smallest at which it cannot (nor at any larger): {safe}")
    return lines


def sweep_exit(sweep: Sweep, *, fair_hang: bool) -> int:
    """1 when it can hang at some capacity, 3 when a capacity's answer is unknown, else 0."""
    if fair_hang or sweep.largest_deadlocking is not None:
        return exitcodes.FOUND
    if sweep.smallest_safe is None:
        return exitcodes.UNKNOWN
    return exitcodes.OK
