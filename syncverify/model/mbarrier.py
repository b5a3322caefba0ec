"""mbarrier phases with transaction counts (syncverify.model.ptx, choice 14).

An mbarrier's current phase completes when "The count of the pending arrivals has reached zero"
and "The tx-count has reached zero" (PTX ISA, "Phase Completion of the mbarrier object"). The
tx-count moves by two operations: "The expect-tx operation, with an expectCount argument,
increases the tx-count of an mbarrier object by the value specified by expectCount"
(``mbarrier.expect_tx``, and ``mbarrier.arrive.expect_tx``, which "first performs an expect-tx
operation ... then performs an arrive-on operation"), and the complete-tx operation, by which
"tx-count is decremented by completeCount": a copy with ``.mbarrier::complete_tx::bytes`` performs
it "Upon the completion of the asynchronous copy operation ... with completeCount argument equal
to amount of data copied in bytes", and ``mbarrier.complete_tx`` "only simulates the completion of
an asynchronous memory operation and its side effect of signaling to the mbarrier object".

So which copies a successful ``try_wait`` of the first phase has seen complete is a set of
*completions* whose byte counts make up the phase's expected count, taken once every arrival is
in: that is :func:`phase_completions`. Readings (docs/async.md, "mbarrier transaction counts"):

* A copy's complete-tx is one operation of the copy's size at its completion (the ISA's sentence
  above): the phase may complete with any set of completions whose sizes sum to the expected
  count; the copies outside it are still in flight, unordered with the waiter's reads.
* The ISA does not say whether the hardware performs a large copy's complete-tx in parts (as
  data lands). Where the completions bring more bytes than expected, both readings are kept: the
  phase may complete while copies are partly done (a set of whole completions below the expected
  count, with copies in flight that would carry it past), and, if no set of whole completions
  makes the count exactly, the tx-count may never reach zero (a hang). Either is a bug the check
  reports; the model allows what each reading allows.
* Every expect-tx and every arrival in the program counts toward the first phase, whatever
  their order: the usual protocol (Triton's and CUTLASS's ``arrive.expect_tx`` before the copies
  it covers). A tx-count that passes through zero on the way (a copy completing before the
  ``expect_tx`` that covers it) is not modelled.
* The pending arrival count starts at ``mbarrier.init``'s count, or at the number of arrive
  instructions on the mbarrier when the test has no ``init`` (``init`` is read for its count;
  ordering it before the mbarrier's other operations is the program's business, as the ISA
  makes every other use undefined).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

#: More completions than this on one mbarrier are refused (subsets are enumerated).
MAX_COMPLETIONS = 12


@dataclass(frozen=True)
class Completion:
    """A complete-tx operation: of copy ``copy`` (its size in ``tx``), or of an
    ``mbarrier.complete_tx`` instruction (``copy`` is None)."""

    tx: int
    copy: int | None = None


@dataclass(frozen=True)
class FirstPhase:
    """How an mbarrier's first phase completes: ``ways``, each the copies (sorted) a waiter has
    seen complete when it does; ``never``, why it may never complete ("" when it always does)."""

    ways: tuple[tuple[int, ...], ...]
    never: str = ""


def phase_completions(*, count: int, arrivals: int, expected: int,
                      completions: tuple[Completion, ...]) -> FirstPhase:
    """The ways the first phase can complete, and whether it may never complete (module docstring).

    >>> phase_completions(count=1, arrivals=1, expected=8, completions=(Completion(4, 0), Completion(4, 1)))
    FirstPhase(ways=((0, 1),), never='')
    >>> phase_completions(count=1, arrivals=1, expected=4, completions=(Completion(4, 0), Completion(4, 1))).ways
    ((0,), (1,), ())
    >>> phase_completions(count=1, arrivals=1, expected=16, completions=(Completion(8, 0),)).never
    'its tx-count never reaches zero: 16 bytes expected, completions of 8 bytes'
    """
    sizes = "+".join(str(c.tx) for c in completions) or "no"
    if arrivals < count:
        return FirstPhase((), f"its pending arrival count never reaches zero: {count} expected, {arrivals} arrive")
    total = sum(c.tx for c in completions)
    if total < expected:
        return FirstPhase((), f"its tx-count never reaches zero: {expected} bytes expected, completions of {sizes} bytes")
    exact: list[tuple[int, ...]] = []
    partial: list[tuple[int, ...]] = []
    for size in range(len(completions) + 1):
        for subset in itertools.combinations(range(len(completions)), size):
            done = sum(completions[i].tx for i in subset)
            copies = tuple(sorted(completions[i].copy for i in subset if completions[i].copy is not None))
            if done == expected:
                exact.append(copies)
            elif done < expected < done + sum(c.tx for i, c in enumerate(completions)
                                              if i not in subset and c.copy is not None):
                partial.append(copies)  # copies in flight carry the count past zero: they land in parts
    ways = tuple(dict.fromkeys(exact + partial))
    never = "" if exact else (f"its tx-count may never reach zero: {expected} bytes expected, completions of "
                              f"{sizes} bytes (none sums to it)")
    return FirstPhase(ways, never)
