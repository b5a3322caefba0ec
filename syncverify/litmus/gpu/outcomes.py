"""What a litmus outcome is, and which outcomes the model allows.

An *outcome* is the tuple of the values of a test's *observed items*, in a fixed order: every
register (``Pn:r``) and location named by the final condition or the filter. A test whose
condition names nothing observes every register its threads write. The model's allowed set is the
outcome of every complete execution the explorer (:func:`syncverify.explore.driver.explore`) reports;
executions whose final state fails the test's ``filter`` are left out on both sides.

A *weak* outcome is one the model allows but sequential consistency does not. The SC outcomes
come from the same model run on the test *strengthened* (:func:`strengthened`): every access made
morally strong at system scope (loads acquire, stores release, atomics acq_rel) with a
``fence.sc.sys`` before each, which the PTX model makes sequentially consistent (Lustig et al.,
ASPLOS '19: fence.sc between every pair of accesses restores SC). One model, no second
interpreter; CTA barriers keep their meaning.

The *target* of a test is the outcome its condition asks about: an outcome satisfying the
proposition of an ``exists`` / ``~exists`` test, violating the proposition of a ``forall`` test.
Mutants (:mod:`~syncverify.litmus.gpu.mutants`) are judged on their target, as MC Mutants does.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from syncverify.program import (
    And, Atomic, Barrier, Compare, Fence, Load, LocRef, Not, Or, Program, Prop, RegOp, RegRef, Store, Thread,
    TrueProp, evaluate,
)
from syncverify.explore.driver import explore
from syncverify.litmus.runner import hang_reasons

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


def strengthened(program: Program) -> Program:
    """``program`` with every access morally strong at sys scope and a ``fence.sc.sys`` before
    each: its allowed outcomes are the sequentially consistent ones (see the module doc)."""
    threads = []
    for thread in program.threads:
        code: list = []
        for ins in thread.instructions:
            if isinstance(ins, (Load, Store, Atomic)):
                # A fence before every access but a thread's first: between every two accesses
                # in program order (one before the first orders nothing, and each fence.sc
                # multiplies the explorer's Fence-SC orders).
                if any(isinstance(i, (Load, Store, Atomic)) for i in code):
                    code.append(Fence("sc", "sys"))
                if isinstance(ins, Load):
                    code.append(replace(ins, sem="acquire", scope="sys", ghost=False))
                elif isinstance(ins, Store):
                    code.append(replace(ins, sem="release", scope="sys", ghost=False))
                else:
                    code.append(replace(ins, sem="acq_rel", scope="sys"))
            elif not isinstance(ins, Fence):  # the test's own fences are subsumed
                code.append(ins)
        threads.append(Thread(thread.name, thread.gpu, thread.cta, tuple(code), thread.role, thread.phase))
    return replace(program, name=f"{program.name} (SC)", threads=tuple(threads))


@dataclass(frozen=True)
class ModelOutcomes:
    """The model's side of a test: its allowed outcomes and whether the list is complete."""

    items: tuple[Item, ...]
    allowed: frozenset[Outcome]
    can_hang: bool
    barrier_hang: bool  # some execution waits forever at a CTA barrier (a GPU run would hang)
    limit: str | None  # the explorer bound hit (then ``allowed`` may be incomplete)
    sequential: frozenset[Outcome] | None = None  # the SC outcomes; None: not computed or bound hit


SC_TIMEOUT = 10.0  # seconds for the SC outcomes; past it weak outcomes are "unknown", not guessed


def model_outcomes(program: Program, *, timeout: float | None = 60.0, sequential: bool = True) -> ModelOutcomes:
    """Every outcome the explorer allows for ``program`` (filtered executions left out), and with
    ``sequential`` the SC ones (the same for :func:`strengthened` ``program``)."""

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
    sc = None
    if sequential:
        strong = model_outcomes(strengthened(program), timeout=min(timeout or SC_TIMEOUT, SC_TIMEOUT),
                                sequential=False)
        sc = strong.allowed if strong.limit is None else None
    return ModelOutcomes(items=items, allowed=frozenset(allowed), can_hang=result.can_hang,
                         barrier_hang=barrier_hang[0], limit=result.limit_hit, sequential=sc)


def is_weak(model: ModelOutcomes, outcome: Outcome) -> bool | None:
    """Whether an outcome the model allows is one SC does not (None: SC set unknown)."""
    if model.sequential is None:
        return None
    return outcome in model.allowed and outcome not in model.sequential
