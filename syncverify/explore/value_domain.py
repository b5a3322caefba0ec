"""The value domain: the values each location can hold, grown to a fixpoint.

Step 1 of the explorer (:mod:`syncverify.explore.driver`): thread paths let every read return every
value of its location's domain, so the domain decides how many paths there are. It starts from
the initial values and grows by the values written in *supported* combinations of paths
(:func:`value_domain`). Two shortcuts keep counters cheap: :func:`value_ceiling` bounds a
location whose writes are literals and literal increments, and :func:`value_candidates` takes
every sum of a counter's system-scoped increments as possible without a witness search.
"""

from __future__ import annotations

from syncverify.explore.bounds import DEFAULT_MAX_DOMAIN, DEFAULT_MAX_STEPS, Clock, LimitHit
from syncverify.explore.combinations import PathSummary, is_supported, summarize, supported_combinations
from syncverify.explore.liveness import loop_positions
from syncverify.explore.symmetry import affordable, combinations
from syncverify.explore.thread_paths import Path, initial_registers, thread_paths
from syncverify.explore.value_classes import shared_by_units
from syncverify.model.int32 import INT32_MAX, wrap_int32
from syncverify.program import Atomic, Load, Program, Store


def value_domain(
    program: Program,
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    max_domain: int = DEFAULT_MAX_DOMAIN,
    clock: Clock | None = None,
    prune: bool = True,
    classes: bool = True,
) -> tuple[dict[str, frozenset[int]], list[list[Path]]]:
    """The values each location can hold, and each thread's paths when reads return them.

    A fixpoint from the initial values: run every thread with reads returning any value of the
    domain, then add the values written in *supported* combinations of paths only, those in which
    every read's value is written by some other event (the initial write, another thread, or an
    earlier write of the same thread). Without that filter an ``atom.add`` would feed on its own
    results and the domain would never stop growing. With ``prune``, each value not yet in the
    domain is looked for with a search for one supported combination that writes it
    (:mod:`syncverify.explore.combinations`); without, every combination is tried (the brute-force reference).
    ``clock``: the exploration's clock (default: no time bound), passed on to every search here.
    ``classes=False``: no value classes even with ``prune`` (the exactness tests).
    """
    clock = clock if clock is not None else Clock()
    domain = {loc: frozenset({program.init.get(loc, 0)}) for loc in program.locations()}
    # Value classes (syncverify.explore.value_classes) with pruning, but not on locations symmetric units share.
    shared = shared_by_units(program)
    while True:
        all_paths = [
            thread_paths(t, domain, initial_registers(program, t), max_steps=max_steps, clock=clock,
                         observed=program.observed_registers, cta_threads=program.cta_size(t),
                         classes=prune and classes, unclassed=shared)
            for t in program.threads
        ]
        grown = {loc: set({program.init.get(loc, 0)}) for loc in domain}
        summaries = [[summarize(p) for p in paths] for paths in all_paths]

        def add(combo: tuple[PathSummary, ...]) -> None:
            for s in combo:
                for (loc, v), _n in s.writes:
                    grown[loc].add(v)

        if prune:
            searched = affordable(program, [len(paths) for paths in all_paths])
            top = value_ceiling(program)
            wanted = sorted({key for paths in summaries for s in paths for key, _n in s.writes
                             if key[1] not in domain[key[0]] and (top.get(key[0]) is None or key[1] <= top[key[0]])})
            candidates = value_candidates(program)
            for key in wanted:
                clock.check("while computing value domains")
                if key[1] in grown[key[0]]:
                    continue
                if key[1] in candidates.get(key[0], ()):
                    grown[key[0]].add(key[1])  # a possible value: no witness needed (value_candidates)
                    continue
                witness = next(supported_combinations(searched, summaries, atomicity=False, must_write=key, clock=clock),
                               None)
                if witness is not None:
                    add(tuple(summaries[t][p] for t, p in enumerate(witness)))
        else:
            for combo in combinations(program, summaries):
                clock.check("while computing value domains")
                if is_supported(combo, program.init):
                    add(combo)
        for loc, vals in grown.items():
            if len(vals) > max_domain:
                raise LimitHit("value-domain", f"location {loc} can hold more than {max_domain} values")
        frozen = {loc: frozenset(v) for loc, v in grown.items()}
        if all(frozen[loc] <= domain[loc] for loc in domain):
            return domain, all_paths
        domain = {loc: domain[loc] | frozen[loc] for loc in domain}


def _literal_writes(program: Program, phases: frozenset[str] | None = None,
                    with_init: bool = True) -> dict[str, tuple[frozenset[int], tuple[int, ...]] | None]:
    """Per location, the literal values written to it and the literal increments added to it.

    The literals are the initial value (``with_init``), stores, exchanges and ``cas`` values;
    the increments are ``atom.add`` of a positive literal outside any loop (an add of 0 writes
    back what it read). None for a location with any other write: a register operand, ``sub``,
    an add inside a loop. ``phases``: only the writes of threads of those phases.
    """
    literals: dict[str, set[int] | None] = {loc: ({program.init.get(loc, 0)} if with_init else {0})
                                             for loc in program.locations()}
    increments: dict[str, list[int]] = {loc: [] for loc in literals}
    for thread in program.threads:
        if phases is not None and thread.phase not in phases:
            continue
        code = thread.instructions
        in_loop = loop_positions(code)
        for i, ins in enumerate(code):
            loc = getattr(ins, "loc", None)
            if loc is None or getattr(ins, "ghost", False) or literals.get(loc) is None:
                continue
            if isinstance(ins, Store):
                literal = ins.value if isinstance(ins.value, int) else None
            elif isinstance(ins, Atomic) and ins.op in ("exch", "cas"):
                literal = ins.operands[-1] if isinstance(ins.operands[-1], int) else None
            elif isinstance(ins, Atomic) and ins.op == "add":
                b = ins.operands[0]
                if b == 0:
                    continue  # writes back the value it read
                if isinstance(b, int) and b > 0 and i not in in_loop:
                    increments[loc].append(b)
                    continue
                literal = None
            elif isinstance(ins, Load):
                continue
            else:
                literal = None
            if literal is None:
                literals[loc] = None
            else:
                literals[loc].add(wrap_int32(literal))  # type: ignore[union-attr]
    return {loc: (None if lits is None else (frozenset(lits), tuple(increments[loc])))
            for loc, lits in literals.items()}


def value_ceiling(program: Program, phases: frozenset[str] | None = None,
                  with_init: bool = True) -> dict[str, int | None]:
    """An upper bound on the values each location can ever hold (None: no bound found).

    When every write to a location is a literal (a store, an exchange, a ``cas`` value) or an
    ``atom.add`` of a positive literal outside any loop (an add of 0, a poll, anywhere), no value
    exceeds the largest literal (or initial value) plus all the increments together: the bound a
    counter's value search would otherwise have to prove by trying every combination. Anything
    else (a register operand, ``sub``, an add inside a loop) leaves the location unbounded.
    ``phases``: count only the writes of threads of those phases (and the initial values only
    ``with_init``); see :func:`_literal_writes`.
    """
    tops = {loc: (None if w is None else max(w[0]) + sum(w[1]))
            for loc, w in _literal_writes(program, phases, with_init).items()}
    # A sum past INT32_MAX wraps to negative values (syncverify.model.int32): no upper bound then.
    return {loc: (None if top is None or top > INT32_MAX else top) for loc, top in tops.items()}


def value_candidates(program: Program) -> dict[str, frozenset[int]]:
    """Per location with only literal writes of one value (see :func:`_literal_writes`) and
    system-scoped increments, every value it could hold: that literal plus some of the increments.

    It spares the search for a witness of each value, which for two epochs of W counters means
    chains of up to 2W increments. Taking a superset of the reachable values as the domain is
    sound only because every increment is morally strong with every other: SC-per-Location then
    orders each increment after the write it reads, so a value is read only once a chain of
    increments from a literal has produced it. Increments narrower than the system could feed
    each other out of thin air (the model has no axiom against it; the domain's growth from the
    initial values is what keeps such values out), so their locations are left to the search.
    """
    narrow = {ins.loc for thread in program.threads for ins in thread.instructions
              if isinstance(ins, Atomic) and ins.op == "add" and ins.scope != "sys"}
    out: dict[str, frozenset[int]] = {}
    for loc, w in _literal_writes(program).items():
        # One literal (a counter and its resets to 0): with several, their sums with the
        # increments overshoot what is reachable enough to slow the paths down; search instead.
        if w is None or loc in narrow or len(w[0]) > 1:
            continue
        sums = {0}
        for b in w[1]:
            sums |= {s + b for s in sums}
        out[loc] = frozenset(wrap_int32(lit + s) for lit in w[0] for s in sums)
    return out
