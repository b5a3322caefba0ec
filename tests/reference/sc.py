"""An operational sequential-consistency interpreter for :class:`syncverify.program.Program`.

The reference the explorer (``syncverify.explore.driver``) is tested against. It shares no code with the
explorer: it runs every interleaving of the threads' instructions on one shared memory, one
instruction at a time, and memoises on the whole state (every thread's pc, registers and barrier
progress, plus memory), so a spin loop is a cycle in a finite graph, not an endless search.

Semantics, instruction by instruction:

* ``Load`` / ``Store`` / ``Atomic`` act on memory at once, whatever their ``.sem`` and ``.scope``:
  under SC every access is strong and every fence is redundant, so ``Fence`` is a no-op.
* ``Atomic`` writes ``dst`` (when not None, i.e. not a ``red``) with the old value; a ``cas``
  whose compare fails writes nothing.
* ``Barrier``: the k-th barrier operation of a thread on id ``b`` joins the k-th instance of ``b``
  in its CTA (same ``gpu`` and ``cta``). Its participants are the CTA's threads that use ``b`` at
  all. ``bar.arrive`` arrives and goes on; ``bar.sync`` arrives, then waits until every
  participant has arrived at its k-th operation on ``b``.
* Reading a register never written gives its initial value (``Program.registers``), else 0.

A *terminating* run is one in which every thread ran past its last instruction. Its outcome is
``(frozenset(final_registers.items()), frozenset(final_memory.items()))`` where
``final_registers`` holds every register initialised or written, keyed ``(thread, reg)``, and
``final_memory`` every location of ``program.locations()``.

``can_hang`` is true when some reachable state cannot reach termination: a stuck state (a barrier
that never completes, a spin nobody releases) or a cycle with no way out. Under SC with a fair
scheduler a spin that *can* be released eventually is, so it is not a hang.
"""

from __future__ import annotations

from dataclasses import dataclass

from syncverify.program import (
    Atomic,
    Barrier,
    Branch,
    Fence,
    Label,
    Load,
    Operand,
    Program,
    RegOp,
    Store,
)

Outcome = tuple[frozenset, frozenset]

# One thread's part of a state: (pc, registers as a sorted tuple of items,
# barrier arrivals as a tuple aligned with the thread's barrier ids, waiting-at-bar.sync flag).
ThreadState = tuple[int, tuple[tuple[str, int], ...], tuple[int, ...], bool]
State = tuple[tuple[ThreadState, ...], tuple[int, ...]]


class StateSpaceExceeded(RuntimeError):
    """More reachable states than ``max_states``: the program is too big for the reference."""


@dataclass(frozen=True)
class ScResult:
    """What SC allows for a program: the outcomes of its terminating runs, and whether it can hang."""

    outcomes: frozenset[Outcome]
    can_hang: bool
    states: int  # reachable states explored


# ----- the program, prepared for stepping ----------------------------------------------------

@dataclass(frozen=True)
class _Prepared:
    program: Program
    locations: tuple[str, ...]
    labels: tuple[dict[str, int], ...]  # per thread: label name -> instruction index
    barrier_ids: tuple[tuple[int, ...], ...]  # per thread: the barrier ids it uses, sorted
    # per (thread, barrier id): the participants as (thread index, position of id in that
    # thread's barrier_ids)
    participants: dict[tuple[int, int], tuple[tuple[int, int], ...]]


def _prepare(program: Program) -> _Prepared:
    labels = []
    barrier_ids = []
    for thread in program.threads:
        names = {}
        for index, ins in enumerate(thread.instructions):
            if isinstance(ins, Label):
                if ins.name in names:
                    raise ValueError(f"label {ins.name!r} defined twice in thread {thread.name}")
                names[ins.name] = index
        for ins in thread.instructions:
            if isinstance(ins, Branch) and ins.target not in names:
                raise ValueError(f"branch to unknown label {ins.target!r} in thread {thread.name}")
        labels.append(names)
        barrier_ids.append(tuple(sorted({i.barrier_id for i in thread.instructions if isinstance(i, Barrier)})))
    participants = {}
    for t, thread in enumerate(program.threads):
        for b in barrier_ids[t]:
            participants[(t, b)] = tuple(
                (u, barrier_ids[u].index(b))
                for u, other in enumerate(program.threads)
                if (other.gpu, other.cta) == (thread.gpu, thread.cta) and b in barrier_ids[u]
            )
    return _Prepared(program, program.locations(), tuple(labels), tuple(barrier_ids), participants)


def _initial_state(prep: _Prepared) -> State:
    program = prep.program
    threads = []
    for t, thread in enumerate(program.threads):
        regs = tuple(sorted((reg, value) for (name, reg), value in program.registers.items() if name == thread.name))
        threads.append((0, regs, (0,) * len(prep.barrier_ids[t]), False))
    memory = tuple(program.init.get(loc, 0) for loc in prep.locations)
    return tuple(threads), memory


# ----- one step --------------------------------------------------------------------------------

def _read(regs: dict[str, int], operand: Operand) -> int:
    return operand if isinstance(operand, int) else regs.get(operand, 0)


def _atomic(op: str, old: int, operands: tuple[int, ...]) -> int | None:
    """The value an atomic writes, or None when it writes nothing (a failed cas)."""
    if op == "cas":
        compare, value = operands
        return value if old == compare else None
    (b,) = operands
    return {
        "add": lambda: old + b,
        "sub": lambda: old - b,
        "exch": lambda: b,
        "min": lambda: min(old, b),
        "max": lambda: max(old, b),
        "and": lambda: old & b,
        "or": lambda: old | b,
    }[op]()


def _branch_taken(cond: str | None, a: int, b: int) -> bool:
    if cond is None:
        return True
    return {"eq": a == b, "ne": a != b, "ge": a >= b, "lt": a < b}[cond]


def _normalise_barriers(prep: _Prepared, threads: list[ThreadState]) -> None:
    """Subtract from every participant of a barrier the arrivals all of them have made.

    Only the differences between participants' arrival counts matter, so this keeps a loop
    around a barrier a finite cycle of states.
    """
    for (t, b), members in prep.participants.items():
        if members[0][0] != t:  # handle each (CTA, barrier id) once, from its first participant
            continue
        low = min(threads[u][2][k] for u, k in members)
        if low:
            for u, k in members:
                pc, regs, arrivals, waiting = threads[u]
                arrivals = arrivals[:k] + (arrivals[k] - low,) + arrivals[k + 1:]
                threads[u] = (pc, regs, arrivals, waiting)


def _step(prep: _Prepared, state: State, t: int) -> State | None:
    """The state after thread ``t`` takes one step, or None when it cannot move."""
    threads, memory = state
    pc, regs_t, arrivals, waiting = threads[t]
    code = prep.program.threads[t].instructions
    if pc >= len(code):
        return None
    ins = code[pc]
    regs = dict(regs_t)
    mem = list(memory)
    next_pc = pc + 1

    if isinstance(ins, Load):
        regs[ins.dst] = mem[prep.locations.index(ins.loc)]
    elif isinstance(ins, Store):
        mem[prep.locations.index(ins.loc)] = _read(regs, ins.value)
    elif isinstance(ins, Atomic):
        where = prep.locations.index(ins.loc)
        old = mem[where]
        new = _atomic(ins.op, old, tuple(_read(regs, o) for o in ins.operands))
        if new is not None:
            mem[where] = new
        if ins.dst is not None:
            regs[ins.dst] = old
    elif isinstance(ins, (Fence, Label)):
        pass
    elif isinstance(ins, RegOp):
        a, b = _read(regs, ins.lhs), _read(regs, ins.rhs)
        regs[ins.dst] = {"mov": a, "add": a + b, "sub": a - b}[ins.op]
    elif isinstance(ins, Branch):
        if _branch_taken(ins.cond, _read(regs, ins.lhs), _read(regs, ins.rhs)):
            next_pc = prep.labels[t][ins.target]
    elif isinstance(ins, Barrier):
        k = prep.barrier_ids[t].index(ins.barrier_id)
        if not waiting:  # arrive
            arrivals = arrivals[:k] + (arrivals[k] + 1,) + arrivals[k + 1:]
            if ins.kind == "sync":
                new_threads = list(threads)
                new_threads[t] = (pc, regs_t, arrivals, True)
                _normalise_barriers(prep, new_threads)
                return tuple(new_threads), memory
        else:  # waiting at bar.sync: leave once every participant has arrived this far
            mine = arrivals[k]
            if any(threads[u][2][j] < mine for u, j in prep.participants[(t, ins.barrier_id)]):
                return None
            waiting = False
    else:  # pragma: no cover - Program only holds the kinds above
        raise TypeError(f"unknown instruction {ins!r}")

    new_threads = list(threads)
    new_threads[t] = (next_pc, tuple(sorted(regs.items())), arrivals, waiting)
    _normalise_barriers(prep, new_threads)
    return tuple(new_threads), tuple(mem)


def _outcome(prep: _Prepared, state: State) -> Outcome:
    threads, memory = state
    registers = frozenset(
        ((prep.program.threads[t].name, reg), value)
        for t, (_, regs, _, _) in enumerate(threads)
        for reg, value in regs
    )
    return registers, frozenset(zip(prep.locations, memory))


# ----- the search ------------------------------------------------------------------------------

def sc_outcomes(program: Program, *, max_states: int = 200_000) -> ScResult:
    """Every outcome of a terminating SC run of ``program``, and whether some run can hang.

    Raises :class:`StateSpaceExceeded` when more than ``max_states`` states are reachable (an
    unbounded counter in a loop, or just a big program).

    >>> from syncverify.program import Program, Thread, Store, Load
    >>> p = Program("mp", (Thread("P0", 0, 0, (Store("x", 1),)), Thread("P1", 0, 0, (Load("r0", "x"),))))
    >>> sorted(dict(regs)[("P1", "r0")] for regs, _ in sc_outcomes(p).outcomes)
    [0, 1]
    """
    prep = _prepare(program)
    start = _initial_state(prep)
    successors: dict[State, tuple[State, ...]] = {}
    stack = [start]
    while stack:
        state = stack.pop()
        if state in successors:
            continue
        if len(successors) >= max_states:
            raise StateSpaceExceeded(f"{program.name}: more than {max_states} reachable SC states")
        nexts = tuple(
            s for s in (_step(prep, state, t) for t in range(len(program.threads))) if s is not None
        )
        successors[state] = nexts
        stack.extend(s for s in nexts if s not in successors)

    def done(state: State) -> bool:
        return all(pc >= len(th.instructions) for (pc, *_), th in zip(state[0], program.threads))

    final = [s for s in successors if done(s)]
    # Backward reachability from the final states: whatever cannot reach one can hang.
    predecessors: dict[State, list[State]] = {s: [] for s in successors}
    for s, nexts in successors.items():
        for n in nexts:
            predecessors[n].append(s)
    can_finish = set(final)
    work = list(final)
    while work:
        for p in predecessors[work.pop()]:
            if p not in can_finish:
                can_finish.add(p)
                work.append(p)
    return ScResult(
        outcomes=frozenset(_outcome(prep, s) for s in final),
        can_hang=len(can_finish) < len(successors),
        states=len(successors),
    )
