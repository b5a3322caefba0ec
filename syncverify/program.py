"""The programs the explorer runs: threads of PTX-like instructions placed in a scope tree.

This is the one intermediate form shared by the litmus parser (``syncverify.litmus``) and the
protocol scenarios (``syncverify.scenarios``): both build a :class:`Program`, the explorer runs it.

Operands are either a register name (``str``) or an integer constant (``int``). Memory locations
are plain names; every location a program touches has an initial value (0 unless ``init`` says).

Modeling choices made here (the model itself is in ``syncverify.ptx``):

* ``ld.volatile`` / ``st.volatile`` are recorded as relaxed at system scope (PTX ISA 8.x,
  "Volatile operations": "a volatile operation behaves as a relaxed operation with system scope").
* ``membar.cta`` / ``membar.gl`` / ``membar.sys`` are ``fence.sc`` at cta / gpu / sys scope
  (PTX ISA 8.x, ``membar``: "membar.{cta,gl,sys} have the same semantics as fence.sc").
* An ``atom``/``red`` with no semantics is ``.relaxed``; with no scope, ``.gpu`` (PTX ISA defaults).
* A ``fence.sc`` is also an acquire-release fence (PTX ISA: "fence.sc ... is a fence.acq_rel that
  additionally ...").

GHOST accesses (``Load(ghost=True)`` / ``Store(ghost=True)``) are the tile data of a protocol
scenario. They take part in program order, causality and race detection, but the explorer makes no
reads-from or coherence choice for them: ``syncverify.check`` computes which writes each ghost read
could see from the happens-before order of each execution. This is exact when, as in every
scenario, the data's values never reach a branch, a lock or an address, and each location is read
at most once per thread (then the choices for different reads are independent of each other and of
the lock protocol).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Union

from syncverify.values import wrap_int32
from syncverify.choices import one_of
from syncverify.errors import UnsupportedConstruct

Scope = Literal["cta", "gpu", "sys"]
SCOPES: tuple[str, ...] = ("cta", "gpu", "sys")

Operand = Union[str, int]  # a register name or an integer constant

LOAD_SEMS = ("weak", "relaxed", "acquire")
STORE_SEMS = ("weak", "relaxed", "release")
ATOMIC_SEMS = ("relaxed", "acquire", "release", "acq_rel")
FENCE_KINDS = ("sc", "acq_rel")
ATOMIC_OPS = ("add", "sub", "exch", "cas", "min", "max", "and", "or")


def _check(value: str, allowed: tuple[str, ...], what: str) -> None:
    one_of(what, value, allowed, error=UnsupportedConstruct)


@dataclass(frozen=True)
class Load:
    """``ld.SEM.SCOPE dst, [loc]``: reads ``loc`` into register ``dst``."""

    dst: str
    loc: str
    sem: str = "weak"
    scope: str | None = None
    line: int | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)  # what a protocol step calls it, for traces
    ghost: bool = False  # see GHOST below

    def __post_init__(self) -> None:
        _check(self.sem, LOAD_SEMS, "load sem")
        _scope_rule(self.sem, self.scope)


@dataclass(frozen=True)
class Store:
    """``st.SEM.SCOPE [loc], value``."""

    loc: str
    value: Operand
    sem: str = "weak"
    scope: str | None = None
    line: int | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)
    ghost: bool = False

    def __post_init__(self) -> None:
        _check(self.sem, STORE_SEMS, "store sem")
        _scope_rule(self.sem, self.scope)


@dataclass(frozen=True)
class Atomic:
    """``atom.SEM.SCOPE.OP dst, [loc], operands`` (``dst`` is None for ``red``).

    ``operands`` is ``(b,)`` for every op except ``cas``, which takes ``(compare, value)``.
    The read and the write of one atomic form an ``rmw`` pair; a ``cas`` whose compare fails
    writes nothing (PTX ISA: "atom.cas ... stores ... only if the comparison succeeds").
    """

    op: str
    dst: str | None
    loc: str
    operands: tuple[Operand, ...]
    sem: str = "relaxed"
    scope: str = "gpu"
    line: int | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        _check(self.op, ATOMIC_OPS, "atomic op")
        _check(self.sem, ATOMIC_SEMS, "atomic sem")
        _check(self.scope, SCOPES, "scope")
        want = 2 if self.op == "cas" else 1
        if len(self.operands) != want:
            raise UnsupportedConstruct(f"atom.{self.op} takes {want} operand(s), got {len(self.operands)}")
        if self.dst is None and self.sem in ("acquire", "acq_rel"):
            raise UnsupportedConstruct(f"red has no result, so .{self.sem} is not allowed (PTX ISA, red)")
        if self.dst is None and self.op == "cas":
            raise UnsupportedConstruct("red.cas does not exist; use atom.cas")


@dataclass(frozen=True)
class Fence:
    """``fence.KIND.SCOPE`` (``membar.*`` is parsed as ``fence.sc``)."""

    kind: str
    scope: str
    line: int | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        _check(self.kind, FENCE_KINDS, "fence kind")
        _check(self.scope, SCOPES, "scope")


@dataclass(frozen=True)
class Barrier:
    """A CTA barrier: ``bar.sync id{, count}`` (``kind='sync'``) or ``bar.cta.arrive id, count``.

    The k-th barrier operation of a thread on barrier ``barrier_id`` joins the k-th instance of
    that barrier in its CTA. ``count`` (threads) must equal the number of the CTA's threads that
    use the barrier: partial participation is refused, not approximated.
    """

    kind: str
    barrier_id: int = 0
    count: int | None = None
    line: int | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        _check(self.kind, ("sync", "arrive"), "barrier kind")
        if self.kind == "arrive" and self.count is None:
            raise UnsupportedConstruct("bar.arrive needs a thread count (PTX ISA, bar.arrive)")


@dataclass(frozen=True)
class RegOp:
    """Register arithmetic: ``mov dst, a`` (``op='mov'``, ``rhs`` ignored) or ``add``/``sub``."""

    op: str
    dst: str
    lhs: Operand
    rhs: Operand = 0
    line: int | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        _check(self.op, ("mov", "add", "sub"), "register op")


@dataclass(frozen=True)
class Branch:
    """``beq a, b, L`` (``cond='eq'``), ``bne a, b, L`` (``'ne'``), ``bge``/``blt``, or ``goto L`` (``None``)."""

    target: str
    cond: str | None = None
    lhs: Operand = 0
    rhs: Operand = 0
    line: int | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.cond is not None:
            _check(self.cond, ("eq", "ne", "ge", "lt"), "branch condition")


@dataclass(frozen=True)
class Label:
    """A branch target."""

    name: str
    line: int | None = field(default=None, compare=False)


Instruction = Union[Load, Store, Atomic, Fence, Barrier, RegOp, Branch, Label]


def _scope_rule(sem: str, scope: str | None) -> None:
    if sem == "weak":
        if scope is not None:
            raise UnsupportedConstruct(f"a .weak access takes no scope (got .{scope})")
    else:
        if scope is None:
            raise UnsupportedConstruct(f"a .{sem} access needs a scope (.cta, .gpu or .sys)")
        _check(scope, SCOPES, "scope")


@dataclass(frozen=True)
class Thread:
    """One thread, placed in the scope tree by ``(gpu, cta)``; threads of one CTA share both."""

    name: str
    gpu: int
    cta: int
    instructions: tuple[Instruction, ...]
    role: str = ""  # e.g. "rank 1 consumer, thread 0": shown in counterexamples
    phase: str = ""  # host-side phase (kernel launch / reset) the thread runs in; see Program.host_order


# ----- final conditions (litmus) -------------------------------------------------------------

@dataclass(frozen=True)
class RegRef:
    """``Pn:reg`` in a condition."""

    thread: str
    reg: str


@dataclass(frozen=True)
class LocRef:
    """A memory location in a condition: its final (coherence-last) value."""

    loc: str


Term = Union[RegRef, LocRef, int]


@dataclass(frozen=True)
class Compare:
    lhs: Term
    op: str  # "==" or "!="
    rhs: Term


@dataclass(frozen=True)
class And:
    parts: tuple["Prop", ...]


@dataclass(frozen=True)
class Or:
    parts: tuple["Prop", ...]


@dataclass(frozen=True)
class Not:
    part: "Prop"


@dataclass(frozen=True)
class TrueProp:
    """``true``: the empty conjunction."""


Prop = Union[Compare, And, Or, Not, TrueProp]


@dataclass(frozen=True)
class Condition:
    """A final condition: ``exists``, ``~exists`` or ``forall`` over ``prop``."""

    quantifier: str
    prop: Prop

    def __post_init__(self) -> None:
        _check(self.quantifier, ("exists", "~exists", "forall"), "quantifier")


def evaluate(prop: Prop, registers: dict[tuple[str, str], int], memory: dict[str, int]) -> bool:
    """Truth of ``prop`` in a final state (registers keyed by ``(thread, reg)``)."""
    if isinstance(prop, TrueProp):
        return True
    if isinstance(prop, And):
        return all(evaluate(p, registers, memory) for p in prop.parts)
    if isinstance(prop, Or):
        return any(evaluate(p, registers, memory) for p in prop.parts)
    if isinstance(prop, Not):
        return not evaluate(prop.part, registers, memory)

    def value(term: Term) -> int:
        if isinstance(term, int):
            return wrap_int32(term)  # compared as the 32-bit value it denotes (syncverify.values)
        if isinstance(term, RegRef):
            return registers.get((term.thread, term.reg), 0)
        return memory[term.loc]

    lhs, rhs = value(prop.lhs), value(prop.rhs)
    return lhs == rhs if prop.op == "==" else lhs != rhs


@dataclass(frozen=True)
class Program:
    """A finite concurrent program with initial memory and (for litmus tests) a final condition."""

    name: str
    threads: tuple[Thread, ...]
    init: dict[str, int] = field(default_factory=dict, hash=False)
    registers: dict[tuple[str, str], int] = field(default_factory=dict, hash=False)  # initial values
    condition: Condition | None = None
    comment: str = ""
    # (a, b): every event of phase a happens before every event of phase b (a host barrier, or
    # stream order between two launches). Pairs are closed transitively by the explorer.
    host_order: tuple[tuple[str, str], ...] = ()
    # Groups of interchangeable units (each a tuple of thread indices): see explore's symmetry.
    symmetry: tuple[tuple[tuple[int, ...], ...], ...] = ()
    # Registers whose final values matter (a litmus condition reads them); None: all of them.
    # A scenario observes none: its verdicts come from events, so a poll register is dead after
    # its branch, which lets the explorer drop failed poll iterations (explore.live_registers).
    observed_registers: frozenset[str] | None = None

    def __post_init__(self) -> None:
        # Memory and registers are 32-bit (syncverify.values): an initial value is held wrapped.
        object.__setattr__(self, "init", {loc: wrap_int32(v) for loc, v in self.init.items()})
        object.__setattr__(self, "registers", {key: wrap_int32(v) for key, v in self.registers.items()})

    def phases_after(self) -> dict[str, frozenset[str]]:
        """For each phase, the phases the host orders after it (``host_order`` closed transitively)."""
        after: dict[str, set[str]] = {}
        for a, b in self.host_order:
            after.setdefault(a, set()).add(b)
        changed = True
        while changed:
            changed = False
            for a in list(after):
                extra = set().union(*(after.get(b, set()) for b in after[a])) - after[a]
                if extra:
                    after[a] |= extra
                    changed = True
        return {a: frozenset(bs) for a, bs in after.items()}

    def locations(self) -> tuple[str, ...]:
        """Every location the program touches or initialises, in first-seen order."""
        seen: dict[str, None] = dict.fromkeys(self.init)
        for thread in self.threads:
            for ins in thread.instructions:
                loc = getattr(ins, "loc", None)
                if loc is not None:
                    seen.setdefault(loc, None)
        return tuple(seen)
