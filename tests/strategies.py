"""Hypothesis strategies for small random :class:`syncverify.program.Program` s.

Sizes are kept small on purpose: the explorer enumerates every execution the PTX model allows,
and ``brute_force`` every candidate execution, so a program of a dozen accesses is already slow.
Every drawn program respects ``program.py``'s validity rules (weak accesses take no scope, strong
ones need one, a ``red`` is relaxed or release).
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from syncverify.program import (
    SCOPES,
    Atomic,
    Barrier,
    Branch,
    Fence,
    Label,
    Load,
    Program,
    Store,
    Thread,
)

LOCATIONS = ("x", "y")
VALUES = (1, 2)
ACCESSES = (Load, Store, Atomic)


def _scope_for(draw, sem: str) -> str | None:
    return None if sem == "weak" else draw(st.sampled_from(SCOPES))


@st.composite
def loads(draw, dst: str, locations=LOCATIONS) -> Load:
    sem = draw(st.sampled_from(("weak", "relaxed", "acquire")))
    return Load(dst, draw(st.sampled_from(locations)), sem, _scope_for(draw, sem))


@st.composite
def stores(draw, locations=LOCATIONS) -> Store:
    sem = draw(st.sampled_from(("weak", "relaxed", "release")))
    return Store(draw(st.sampled_from(locations)), draw(st.sampled_from(VALUES)), sem, _scope_for(draw, sem))


@st.composite
def atomics(draw, dst: str, locations=LOCATIONS) -> Atomic:
    """``atom.add`` / ``atom.exch`` / ``atom.cas``, or now and then a ``red.add`` (no result)."""
    op = draw(st.sampled_from(("add", "exch", "cas")))
    loc = draw(st.sampled_from(locations))
    scope = draw(st.sampled_from(SCOPES))
    if op == "add" and draw(st.integers(0, 3)) == 0:  # red.add
        sem = draw(st.sampled_from(("relaxed", "release")))
        return Atomic("add", None, loc, (draw(st.sampled_from(VALUES)),), sem, scope)
    sem = draw(st.sampled_from(("relaxed", "acquire", "release", "acq_rel")))
    if op == "cas":
        operands = (draw(st.sampled_from((0,) + VALUES)), draw(st.sampled_from(VALUES)))
    else:
        operands = (draw(st.sampled_from(VALUES)),)
    return Atomic(op, dst, loc, operands, sem, scope)


@st.composite
def fences(draw) -> Fence:
    return Fence(draw(st.sampled_from(("sc", "acq_rel"))), draw(st.sampled_from(SCOPES)))


@st.composite
def thread_bodies(draw, *, max_instructions: int = 4, locations=LOCATIONS, with_fences: bool = True,
                  with_atomics: bool = True):
    """1..max_instructions instructions; every load and atomic result goes to a fresh register."""
    kinds = ["load", "store"] + (["atomic"] if with_atomics else []) + (["fence"] if with_fences else [])
    body = []
    for _ in range(draw(st.integers(1, max_instructions))):
        kind = draw(st.sampled_from(kinds))
        dst = f"r{len(body)}"
        if kind == "load":
            body.append(draw(loads(dst, locations)))
        elif kind == "store":
            body.append(draw(stores(locations)))
        elif kind == "atomic":
            body.append(draw(atomics(dst, locations)))
        else:
            body.append(draw(fences()))
    return tuple(body)


@st.composite
def placements(draw, n_threads: int) -> list[tuple[int, int]]:
    """``(gpu, cta)`` per thread over 1-2 GPUs and 1-2 CTAs per GPU."""
    n_gpus = draw(st.integers(1, 2))
    n_ctas = draw(st.integers(1, 2))
    return [(draw(st.integers(0, n_gpus - 1)), draw(st.integers(0, n_ctas - 1))) for _ in range(n_threads)]


@st.composite
def programs(draw, *, min_threads: int = 2, max_threads: int = 3, max_instructions: int = 4,
             max_accesses: int | None = None, with_fences: bool = True, with_atomics: bool = True) -> Program:
    """A loop-free program of ``min_threads..max_threads`` threads over locations ``x`` (and ``y``).

    ``max_accesses`` caps the memory accesses of the whole program (the explorer's cost grows
    with them much faster than with threads).
    """
    n_threads = draw(st.integers(min_threads, max_threads))
    locations = LOCATIONS[: draw(st.integers(1, len(LOCATIONS)))]
    where = draw(placements(n_threads))
    bodies = []
    budget = max_accesses
    for t in range(n_threads):
        # leave at least one access for each thread still to draw
        most = max_instructions if budget is None else max(1, min(max_instructions, budget - (n_threads - t - 1)))
        body = draw(thread_bodies(max_instructions=most, locations=locations,
                                  with_fences=with_fences, with_atomics=with_atomics))
        if budget is not None:
            budget -= sum(isinstance(i, ACCESSES) for i in body)
        bodies.append(body)
    threads = tuple(Thread(f"P{i}", gpu, cta, body) for i, ((gpu, cta), body) in enumerate(zip(where, bodies)))
    return Program("random", threads)


@st.composite
def programs_with_a_spin(draw, **kwargs) -> Program:
    """A loop-free program, then one thread gets a spin ``L: ld r, [y]; beq r, 0, L``.

    The spin goes at the start or the end of a thread, on a location the program may or may not
    write, so some programs can hang and some cannot.
    """
    program = draw(programs(**kwargs))
    t = draw(st.integers(0, len(program.threads) - 1))
    thread = program.threads[t]
    loc = draw(st.sampled_from(program.locations() or LOCATIONS))
    spin = (Label("L"), draw(loads("rs", (loc,))), Branch("L", "eq", "rs", 0))
    body = spin + thread.instructions if draw(st.booleans()) else thread.instructions + spin
    threads = program.threads[:t] + (replace(thread, instructions=body),) + program.threads[t + 1:]
    return replace(program, threads=threads, name="random-spin")


@st.composite
def barriers(draw) -> Barrier:
    """``bar.sync`` or ``bar.arrive`` on named barrier 0 or 1, with no count (every thread of
    the CTA that uses the barrier) or a count of 1 to 3, so that phases fill, overfill (the
    barrier is reused) or never complete (a hang)."""
    return Barrier(draw(st.sampled_from(("sync", "arrive"))), draw(st.sampled_from((0, 1))),
                   draw(st.sampled_from((None, 1, 2, 3))))


@st.composite
def programs_with_barriers(draw, *, max_barriers: int = 3, **kwargs) -> Program:
    """A loop-free program with 1..max_barriers named-barrier operations inserted anywhere, its
    threads in one CTA more often than not (barriers only match within a CTA)."""
    program = draw(programs(**kwargs))
    threads = list(program.threads)
    if draw(st.booleans()):
        threads = [replace(th, gpu=0, cta=0) for th in threads]
    for _ in range(draw(st.integers(1, max_barriers))):
        t = draw(st.integers(0, len(threads) - 1))
        code = threads[t].instructions
        i = draw(st.integers(0, len(code)))
        threads[t] = replace(threads[t], instructions=code[:i] + (draw(barriers()),) + code[i:])
    return replace(program, threads=tuple(threads), name="random-barriers")


@st.composite
def programs_with_racing_weak_writes(draw, **kwargs) -> Program:
    """A loop-free program in which two threads each start with a weak store to ``x`` (values 1
    and 2): racing writes that coherence may leave unordered, so readers may see them in
    different orders (ptx-v6.0.cat's partial co)."""
    program = draw(programs(min_threads=2, **kwargs))
    first, second = draw(st.lists(st.integers(0, len(program.threads) - 1), min_size=2, max_size=2, unique=True))
    threads = list(program.threads)
    for t, value in ((first, 1), (second, 2)):
        threads[t] = replace(threads[t], instructions=(Store("x", value, "weak", None),) + threads[t].instructions)
    return replace(program, threads=tuple(threads), name="random-racing-weak")


# ----- transformations -----------------------------------------------------------------------

_WIDER = {"cta": ("gpu", "sys"), "gpu": ("sys",), "sys": ()}


def _stronger_versions(ins, draw) -> list:
    """Every instruction that is ``ins`` made stronger in exactly one respect (may be empty)."""
    out = []
    if isinstance(ins, (Load, Store)):
        if ins.sem == "weak":
            out.append(replace(ins, sem="relaxed", scope=draw(st.sampled_from(SCOPES))))
        elif ins.sem == "relaxed":
            out.append(replace(ins, sem="acquire" if isinstance(ins, Load) else "release"))
    elif isinstance(ins, Atomic):
        if ins.dst is None:
            if ins.sem == "relaxed":
                out.append(replace(ins, sem="release"))
        elif ins.sem != "acq_rel":
            out.append(replace(ins, sem="acq_rel"))
    elif isinstance(ins, Fence) and ins.kind == "acq_rel":
        out.append(replace(ins, kind="sc"))
    scope = getattr(ins, "scope", None)
    if scope is not None and not isinstance(ins, Label):
        out.extend(replace(ins, scope=wider) for wider in _WIDER[scope])
    return out


def strengthen(program: Program, draw) -> Program:
    """``program`` with one access or fence made stronger, or one ``fence.sc`` inserted.

    Stronger means: weak -> relaxed (any scope) -> acquire/release; a relaxed/acquire/release atom
    -> acq_rel; red.relaxed -> red.release; fence.acq_rel -> fence.sc; a scope widened. ``draw`` is
    the draw function of the enclosing ``@st.composite``.
    """
    choices = []  # (thread index, position, replacement or None for an insertion)
    for t, thread in enumerate(program.threads):
        for i, ins in enumerate(thread.instructions):
            choices.extend((t, i, new) for new in _stronger_versions(ins, draw))
        choices.extend((t, i, None) for i in range(len(thread.instructions) + 1))
    t, i, new = draw(st.sampled_from(choices))
    code = program.threads[t].instructions
    if new is None:
        code = code[:i] + (Fence("sc", draw(st.sampled_from(SCOPES))),) + code[i:]
    else:
        code = code[:i] + (new,) + code[i + 1:]
    threads = program.threads[:t] + (replace(program.threads[t], instructions=code),) + program.threads[t + 1:]
    return replace(program, threads=threads, name=program.name + "-stronger")


@st.composite
def program_and_strengthened(draw, **kwargs) -> tuple[Program, Program]:
    program = draw(programs(**kwargs))
    return program, strengthen(program, draw)


def all_strong_sys_with_sc_fences(program: Program) -> Program:
    """Every access made at least relaxed at ``.sys``, fences dropped, ``fence.sc.sys`` between
    every two accesses of a thread."""
    threads = []
    for thread in program.threads:
        code = []
        for ins in thread.instructions:
            if isinstance(ins, Fence):
                continue
            if isinstance(ins, (Load, Store)) and ins.sem == "weak":
                ins = replace(ins, sem="relaxed", scope="sys")
            elif isinstance(ins, (Load, Store, Atomic)):
                ins = replace(ins, scope="sys")
            if code:
                code.append(Fence("sc", "sys"))
            code.append(ins)
        if not code:  # a thread that was all fences: keep it non-empty and harmless
            code = [Fence("sc", "sys")]
        threads.append(replace(thread, instructions=tuple(code)))
    return replace(program, threads=tuple(threads), name=program.name + "-sc-fenced")


def listing(program: Program) -> str:
    """A litmus-style listing of ``program`` (for reports of counterexamples)."""
    def show(ins) -> str:
        sc = f".{ins.scope}" if getattr(ins, "scope", None) else ""
        if isinstance(ins, Load):
            return f"ld.{ins.sem}{sc} {ins.dst}, [{ins.loc}]"
        if isinstance(ins, Store):
            return f"st.{ins.sem}{sc} [{ins.loc}], {ins.value}"
        if isinstance(ins, Atomic):
            ops = ", ".join(map(str, ins.operands))
            if ins.dst is None:
                return f"red.{ins.sem}{sc}.{ins.op} [{ins.loc}], {ops}"
            return f"atom.{ins.sem}{sc}.{ins.op} {ins.dst}, [{ins.loc}], {ops}"
        if isinstance(ins, Fence):
            return f"fence.{ins.kind}{sc}"
        if isinstance(ins, Label):
            return f"{ins.name}:"
        if isinstance(ins, Branch):
            if ins.cond is None:
                return f"bra {ins.target}"
            return f"b{ins.cond} {ins.lhs}, {ins.rhs}, {ins.target}"
        if isinstance(ins, Barrier):
            return f"bar.{ins.kind} {ins.barrier_id}" + ("" if ins.count is None else f", {ins.count}")
        return repr(ins)

    lines = [f"PTX {program.name}"]
    if program.init:
        lines.append("{ " + "; ".join(f"{k}={v}" for k, v in program.init.items()) + " }")
    for th in program.threads:
        lines.append(f"{th.name} (gpu {th.gpu}, cta {th.cta}):")
        lines.extend(f"    {show(ins)}" for ins in th.instructions)
    return "\n".join(lines)


def observable_executions(executions) -> frozenset:
    """What tells executions apart once coherence is a partial order: each one's reads-from,
    final registers and final memory. The explorer builds one execution per observable
    difference (the least coherence the axioms allow, one memory order per final value); brute
    force builds one per partial order and linear extension, so raw counts differ."""
    return frozenset(
        (frozenset(e.rf.items()), frozenset(e.final_registers.items()), frozenset(e.final_memory.items()))
        for e in executions
    )
