"""Symmetry: interchangeable ranks take their paths in non-decreasing order.

A scenario's ranks often run the same code up to renaming; ``program.symmetry`` names them
(:mod:`syncverify.scenarios.build`). Executions that differ only by which rank took which path are
renamings of each other, so one of each is explored. The pruning search in
:mod:`syncverify.explore.combinations` applies the same order as it assigns threads.

Why it is exact: the builder puts into one group the units (every thread one rank runs) of ranks
that are the same code up to renaming the rank, with their locations, launch phases and host
order renamed too (per-rank launch phases ``e1.r1`` rename to ``e1.r2``). Renaming two units
maps every execution to an execution with the same violation kinds, so the executions in which
the units take their paths in non-decreasing order show every kind. ``tests/test_reductions_exact.py``
compares the verdicts with the group and without it (``build(..., without={"symmetry"})``) in
every scenario and launch order. A group is dropped, which is always exact, where listing its
units' path tuples would cost more than the reduction saves (:func:`affordable`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import replace

from syncverify.errors import UnsupportedConstruct
from syncverify.program import Program


#: The most path tuples one unit of a symmetry group may have (the product of its threads' path
#: counts): the searches list them all before the first combination (:mod:`syncverify.explore.combinations`).
MAX_UNIT_OPTIONS = 2048


def affordable(program: Program, counts: list[int]) -> Program:
    """``program`` without the symmetry groups whose units have more than :data:`MAX_UNIT_OPTIONS`
    path tuples (``counts``: each thread's number of paths).

    A unit is every thread one rank runs in the program (all its roles, in every call), so its
    path tuples grow as a power of its threads: a unit of eight threads with three paths each has
    6561, listed for each unit before the search starts and with no bound on the time it takes.
    Dropping a group is exact (every assignment of paths to its units is explored instead of one
    per renaming), and where the units have that many tuples the search costs no more without it.
    """
    kept = tuple(group for group in program.symmetry
                 if math.prod(counts[t] for t in group[0]) <= MAX_UNIT_OPTIONS)
    return program if kept == program.symmetry else replace(program, symmetry=kept)


def combinations(program: Program, per_thread: list[list]) -> Iterator[tuple]:
    """One item per thread: the product of ``per_thread``, reduced by the program's symmetry.

    ``program.symmetry`` lists groups of interchangeable *units* (tuples of threads that are the
    same code up to renaming their rank, with path lists that correspond index by index). For
    such a group, executions that differ only by which unit took which path are renamings of each
    other, so only one order is kept: units take their path tuples in non-decreasing order
    (a multiset instead of a sequence). With the group's units ``k`` and path tuples ``n``, this
    explores ``C(n + k - 1, k)`` instead of ``n ** k`` combinations.
    """
    program = affordable(program, [len(paths) for paths in per_thread])
    if not program.symmetry:
        yield from itertools.product(*per_thread)
        return
    grouped = {t for group in program.symmetry for unit in group for t in unit}
    free = [t for t in range(len(per_thread)) if t not in grouped]
    group_choices = []
    for group in program.symmetry:
        unit_tuples = list(itertools.product(*(range(len(per_thread[t])) for t in group[0])))
        for unit in group[1:]:
            if [len(per_thread[t]) for t in unit] != [len(per_thread[t]) for t in group[0]]:
                raise UnsupportedConstruct("symmetric units with different numbers of paths")
        group_choices.append((group, unit_tuples,
                              list(itertools.combinations_with_replacement(range(len(unit_tuples)), len(group)))))
    for free_choice in itertools.product(*(per_thread[t] for t in free)):
        slots: list = [None] * len(per_thread)
        for t, item in zip(free, free_choice):
            slots[t] = item
        for picks in itertools.product(*(choices for _g, _u, choices in group_choices)):
            for (group, unit_tuples, _c), multiset in zip(group_choices, picks):
                for unit, idx in zip(group, multiset):
                    for t, path_index in zip(unit, unit_tuples[idx]):
                        slots[t] = per_thread[t][path_index]
            yield tuple(slots)

