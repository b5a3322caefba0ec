"""What a litmus outcome is, and which outcomes the model allows.

An *outcome* is the tuple of the values of a test's *observed items*, in a fixed order: every
register (``Pn:r``) and location named by the final condition or the filter. A test whose
condition names nothing observes every register its threads write. The model's allowed set is the
outcome of every complete execution the explorer (:func:`syncverify.explore.explore`) reports;
executions whose final state fails the test's ``filter`` are left out on both sides.

The *target* of a test is the outcome its condition asks about: an outcome satisfying the
proposition of an ``exists`` / ``~exists`` test, violating the proposition of a ``forall`` test.
By litmus convention the target is the relaxed ("weak") behaviour (MP's stale read, SB's two
zeros), so the report calls allowed targets *weak* outcomes. This is the test author's notion of
weak, not a sequential-consistency check (no SC interpreter runs here).
"""

from __future__ import annotations

from dataclasses import dataclass

from syncverify.program import (
    And, Atomic, Barrier, Compare, Load, LocRef, Not, Or, Program, Prop, RegOp, RegRef, TrueProp, evaluate,
)

Item = tuple[str, str, str]  # ("reg", thread, register) or ("loc", location, "")
Outcome = tuple[int, ...]


def _refs(prop: Prop | None, found: dict[Item, None]) -> None:
    if prop is None or isinstance(prop, TrueProp):
        return
    if isinstance(prop, (And, Or)):
        for part in prop.parts:
            _refs(part, found)
        return
    if isinstance(prop, Not):
        _refs(prop.part, found)
        return
    assert isinstance(prop, Compare)
    for term in (prop.lhs, prop.rhs):
        if isinstance(term, RegRef):
            found.setdefault(("reg", term.thread, term.reg), None)
        elif isinstance(term, LocRef):
            found.setdefault(("loc", term.loc, ""), None)


def written_registers(program: Program) -> dict[str, tuple[str, ...]]:
    """Each thread's registers that some instruction writes, in first-written order."""
    out: dict[str, tuple[str, ...]] = {}
    for thread in program.threads:
        regs: dict[str, None] = {}
        for ins in thread.instructions:
            dst = getattr(ins, "dst", None) if isinstance(ins, (Load, Atomic, RegOp, Barrier)) else None
            if dst is not None:
                regs.setdefault(dst, None)
        out[thread.name] = tuple(regs)
    return out


def observed_items(program: Program) -> tuple[Item, ...]:
    """The items an outcome lists, in order (condition first, then filter)."""
    found: dict[Item, None] = {}
    _refs(program.condition.prop if program.condition else None, found)
    _refs(program.filter, found)
    if not found:
        for thread, regs in written_registers(program).items():
            for reg in regs:
                found.setdefault(("reg", thread, reg), None)
    return tuple(found)


def outcome_of(program: Program, items: tuple[Item, ...], registers: dict[tuple[str, str], int],
               memory: dict[str, int]) -> Outcome:
    """The outcome of a final state (an unwritten register or location keeps its initial value)."""
    values = []
    for kind, name, reg in items:
        if kind == "reg":
            values.append(registers.get((name, reg), program.registers.get((name, reg), 0)))
        else:
            values.append(memory.get(name, program.init.get(name, 0)))
    return tuple(values)


def state_of(items: tuple[Item, ...], outcome: Outcome) -> tuple[dict[tuple[str, str], int], dict[str, int]]:
    """The registers and memory an outcome lists, as :func:`syncverify.program.evaluate` takes them."""
    registers = {(name, reg): v for (kind, name, reg), v in zip(items, outcome) if kind == "reg"}
    memory = {name: v for (kind, name, _), v in zip(items, outcome) if kind == "loc"}
    return registers, memory


def is_target(program: Program, items: tuple[Item, ...], outcome: Outcome) -> bool:
    """Whether ``outcome`` is the behaviour the test's condition asks about (see the module doc)."""
    if program.condition is None:
        return False
    registers, memory = state_of(items, outcome)
    holds = evaluate(program.condition.prop, registers, memory)
    return not holds if program.condition.quantifier == "forall" else holds


def passes_filter(program: Program, items: tuple[Item, ...], outcome: Outcome) -> bool:
    """Whether ``outcome`` passes the test's ``filter`` (always, without one)."""
    if program.filter is None:
        return True
    registers, memory = state_of(items, outcome)
    return evaluate(program.filter, registers, memory)


def item_name(item: Item) -> str:
    """``P1:r2`` or ``x``, as a litmus condition writes it."""
    kind, name, reg = item
    return f"{name}:{reg}" if kind == "reg" else name


@dataclass(frozen=True)
class ModelOutcomes:
    """The model's side of a test: its allowed outcomes and whether the list is complete."""

    items: tuple[Item, ...]
    allowed: frozenset[Outcome]
    can_hang: bool
    barrier_hang: bool  # some execution waits forever at a CTA barrier (a GPU run would hang)
    limit: str | None  # the explorer bound hit (then ``allowed`` may be incomplete)


def model_outcomes(program: Program, *, timeout: float | None = 60.0) -> ModelOutcomes:
    """Every outcome the explorer allows for ``program`` (filtered executions left out)."""
    from syncverify.explore import explore  # the model is heavy to import; only runs need it
    from syncverify.litmus.runner import hang_reasons

    items = observed_items(program)
    allowed: set[Outcome] = set()
    barrier_hang = [False]

    def collect(x) -> None:
        if not x.is_complete:
            if any(reason["on"] == "barrier" for reason in hang_reasons(x)):
                barrier_hang[0] = True
            return
        outcome = outcome_of(program, items, x.final_registers, x.final_memory)
        if passes_filter(program, items, outcome):
            allowed.add(outcome)

    result = explore(program, timeout=timeout, on_execution=collect, keep=False)
    return ModelOutcomes(items=items, allowed=frozenset(allowed), can_hang=result.can_hang,
                         barrier_hang=barrier_hang[0], limit=result.limit_hit)
