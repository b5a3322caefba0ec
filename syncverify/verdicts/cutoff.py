"""Verdicts for every world size, where a cutoff argument covers the protocol (issue 24, item 4).

The fragment (``docs/cutoff.md`` has the argument in full): the all-reduce scenario with one tile
(its owner is rank 0 at every world size), and a protocol whose every write to a lock goes to
the writer's own copy (``to = "self"``; a poll that writes, an ``atomic_cas`` or ``atomic_add``
await, reads its own copy only), and whose values and ``until`` targets do not mention
``world_size``. Then each rank's copy of a lock is written by that rank's threads only (and the
host's reset), so an execution at any W projected onto the threads of a set R of ranks that
contains the owner, restricted to the locations of R's ranks, renamed in rank order, is an
execution at W = |R|: every relation of the projection is contained in the original's, so every
axiom still holds and every race, unwritten or stale read (each an absence of causality) and
every hang stays. A violation names at most two ranks besides the owner, so it appears at some
W <= :data:`CUTOFF`: checking W = 1 .. CUTOFF and finding all of them safe proves the protocol
safe at every world size (for the same calls, tiles, threads per CTA and launch order).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from syncverify.protocols.model import Protocol
from syncverify.scenarios.build import ScenarioOptions, build
from syncverify.verdicts.check import check

#: The most ranks a violation needs (docs/cutoff.md): the owner and the ranks of its two events.
CUTOFF = 3

#: Polls that write the lock they read.
WRITING_POLLS = ("atomic_cas", "atomic_add")


@dataclass(frozen=True)
class Coverage:
    """Whether the cutoff argument covers a check: ``cutoff`` set, or ``why_not`` says why not."""

    cutoff: int | None
    why_not: str = ""


def coverage(protocol: Protocol, options: ScenarioOptions) -> Coverage:
    """Whether the argument of this module (``docs/cutoff.md``) covers ``protocol`` checked with
    ``options``: a :class:`Coverage` with the cutoff, or the first condition that fails.

    Examples
    --------
    >>> from syncverify.protocols import load_protocol
    >>> coverage(load_protocol("iris-462-sys-scope-release"), ScenarioOptions()).cutoff
    3
    >>> coverage(load_protocol("add-counter"), ScenarioOptions()).why_not
    "signal step 1 writes other ranks' copies (to = 'all')"
    """
    if options.scenario != "all-reduce":
        return Coverage(None, f"the argument covers the all-reduce scenario only, not {options.scenario}")
    if options.tiles != 1:
        return Coverage(None, "the argument covers one tile only (with more, tile owners depend on the world size)")
    if options.resident is not None:
        return Coverage(None, "the argument assumes every CTA runs (not --resident)")
    for section in ("before_store", "signal", "wait", "after_load"):
        for number, step in enumerate(getattr(protocol, section), 1):
            where = f"{section} step {number}"
            if step.to is not None and step.to != "self":
                return Coverage(None, f"{where} writes other ranks' copies (to = {step.to!r})")
            writes = step.op in WRITING_POLLS + ("atomic_xchg",) or (step.op == "await" and step.read in WRITING_POLLS)
            if writes and step.from_ not in (None, "self"):
                return Coverage(None, f"{where} writes other ranks' copies as it reads them ({step.read or step.op})")
            for name, expr in (("value", step.value), ("compare", step.compare), ("until", step.until)):
                if expr is not None and "world_size" in str(expr):
                    return Coverage(None, f"{where}'s {name} depends on the world size ({expr})")
    return Coverage(CUTOFF)


def world_size_claim(protocol: Protocol, options: ScenarioOptions, safe: bool | None, *,
                     timeout: float | None = None) -> str:
    """The line printed under a verdict: ``safe for every world size (cutoff k)`` when the
    argument covers the check, it is safe, and every W = 1 .. k is safe too (each checked here
    with the same options); otherwise ``checked for W = ...`` with the reason."""
    checked = f"checked for W = {options.world_size}"
    if safe is not True:
        return checked
    covered = coverage(protocol, options)
    if covered.cutoff is None:
        return f"{checked} only ({covered.why_not}: docs/cutoff.md)"
    for world in range(1, covered.cutoff + 1):
        if world == options.world_size:
            continue
        result = check(build(protocol, replace(options, world_size=world)), timeout=timeout)
        if result.safe is not True:
            answer = "unknown" if result.safe is None else "unsafe"
            return f"{checked} only (W = {world}, below the cutoff {covered.cutoff}, is {answer})"
    return f"safe for every world size (cutoff {covered.cutoff}: W = 1..{covered.cutoff} checked, docs/cutoff.md)"
