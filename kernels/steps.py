"""The protocol runners: a plan's step tuples walked in order, each step lowered to primitives.

:func:`run_signal` and :func:`run_wait` walk a protocol's step tuples (``syncverify.kernels.plan``)
and call the helpers of ``syncverify.kernels.primitives``, so every kernel runs exactly the steps of
the protocol object the model checks. Each step's fields are ``tl.constexpr`` conditions (indexed
with the names below), so a protocol compiles to straight-line code with no run-time dispatch.
Also here: where a rank's copy of a buffer is (:func:`rank_base`), a plan operand's value
(:func:`operand`), and which programs of the grid produce and which consume (:func:`program_role`).

Every spin-wait is bounded by a poll budget and reports the last value it saw; nothing here can
hang a kernel (but in :data:`UNBOUNDED_WAITS`, the interpreter-only build of the front end's
cross-check).
"""

from __future__ import annotations

import contextlib

from syncverify.protocols import rules
from syncverify.kernels._deps import tl
from syncverify.kernels._jit import jit
from syncverify.kernels.plan import FIELDS
from syncverify.kernels.primitives import (
    atomic_add_flag,
    atomic_cas_flag,
    atomic_xchg_flag,
    fence,
    launch_dependents,
    named_barrier,
    read_flag,
    store_flag,
    wait_for_primary,
    until_holds,
)

# Step-tuple field indices (syncverify.kernels.plan.FIELDS), as globals the kernels can index with.
OP = tl.constexpr(FIELDS.index("op"))
READ = tl.constexpr(FIELDS.index("read"))
SEM = tl.constexpr(FIELDS.index("sem"))
SCOPE = tl.constexpr(FIELDS.index("scope"))
CACHE = tl.constexpr(FIELDS.index("cache"))
TO = tl.constexpr(FIELDS.index("to"))
SOURCE = tl.constexpr(FIELDS.index("source"))
LOCK = tl.constexpr(FIELDS.index("lock"))
VALUE = tl.constexpr(FIELDS.index("value"))
COMPARE = tl.constexpr(FIELDS.index("compare"))
UNTIL = tl.constexpr(FIELDS.index("until"))
TARGET = tl.constexpr(FIELDS.index("target"))
BARRIER = tl.constexpr(FIELDS.index("barrier"))
WRITES = tl.constexpr(FIELDS.index("writes"))

#: The cross-check's build (:func:`unbounded_waits`, ``tests/test_frontend_crosscheck.py``):
#: every wait polls until its condition holds, with no budget, as the protocol model's ``await``
#: does, so the kernel front end sees the same spin loop the protocol check cuts. Only ever set
#: while the interpreter runs a kernel: the compiled default (False) keeps its PTX unchanged
#: (``tests/test_ptx_audit.py``), and a kernel on a GPU never waits unbounded.
UNBOUNDED_WAITS = tl.constexpr(False)


@contextlib.contextmanager
def unbounded_waits():
    """While active, kernels run in the interpreter poll with no budget (:data:`UNBOUNDED_WAITS`).

    The interpreter reads the module's globals each time a kernel runs. Use it around interpreter
    runs only: a compiled kernel records the flag when it compiles.
    """
    global UNBOUNDED_WAITS
    saved = UNBOUNDED_WAITS
    UNBOUNDED_WAITS = tl.constexpr(True)
    try:
        yield
    finally:
        UNBOUNDED_WAITS = saved


#: Polls a producer-side spin (a CAS repeated ``until``, an ``await`` in ``signal``) may make in
#: ``run_signal``: a spin that gives up leaves its signal unwritten, so the consumer's own bounded
#: wait times out and reports it.
SIGNAL_POLL_BUDGET = tl.constexpr(1 << 16)


def wrap_step(step: tuple) -> tuple:
    """A step tuple (``syncverify.kernels.plan.make_step``) with every field a ``tl.constexpr``: the
    form a compiled Triton kernel accepts for a ``tl.constexpr`` tuple argument (the interpreter
    takes either). An operand field such as ``("c", 1)`` becomes one constexpr holding the pair.

    ``to`` and ``from`` become what :mod:`syncverify.protocols.rules` says they mean, the flags
    ``(own, others, owner)`` and ``each``, so the kernels apply the model's rule instead of
    interpreting the names a second time."""
    fields = list(step)
    fields[TO] = rules.to_flags(fields[TO] or None)
    fields[SOURCE] = rules.from_flags(fields[SOURCE] or None)
    return tuple(tl.constexpr(field) for field in fields)


def wrap_plan(plan: tuple) -> tuple:
    """A plan (tuple of step tuples) with every step wrapped by :func:`wrap_step`."""
    return tuple(wrap_step(step) for step in plan)


# ----- addressing ------------------------------------------------------------------------------

@jit
def rank_base(base, table, rank_stride, rank, TABLE: tl.constexpr):
    """Address of ``rank``'s copy of a symmetric buffer.

    ``TABLE=False`` (virtual ranks, interpreter): one tensor holds every rank's region,
    ``rank_stride`` elements apart. ``TABLE=True`` (one process per GPU): ``table`` holds each
    rank's device address (``torch.distributed._symmetric_memory`` ``buffer_ptrs``).
    """
    if TABLE:
        return tl.load(table + rank).to(tl.pointer_type(base.dtype.element_ty))
    else:
        return base + rank * rank_stride


@jit
def operand(X: tl.constexpr, vals):
    """A plan operand: ``("c", n)`` is the constant ``n``; ``("r", i)`` is ``vals[i]``, an int32
    the host wrote for this launch (``KernelPlan.runtime_values``). A tensor, not scalar kernel
    arguments: Triton would compile a new kernel whenever an integer argument equals 1."""
    if X[0] == "c":
        return X[1]
    else:
        return tl.load(vals + X[1])


#: ``PART`` of a launch (:func:`program_role`): the whole grid (one fused launch), or one of the two
#: kernels of a split launch mode (``syncverify.protocols.rules.SPLIT_LAUNCHES``): the first role's
#: programs (producers; all-gather-gemm's senders: the roles that signal first, the PDL primary),
#: or every other role's (the dependent).
PARTS: dict[str, int] = {"fused": 0, "first": 1, "rest": 2}
#: ``PDL`` (:func:`program_role`): none; the primary triggers ``griddepcontrol.launch_dependents``
#: first thing and the dependent runs ``griddepcontrol.wait`` first thing (``pdl``); the trigger
#: alone (``pdl-no-wait``): the model's ``--launches`` modes of the same names.
PDL_MODES: dict[str, int] = {"pdl": 1, "pdl-no-wait": 2}


@jit
def program_role(pid, ORDER: tl.constexpr, GEMM_SMS: tl.constexpr, COMM_SMS: tl.constexpr,
                 RANKS: tl.constexpr, PART: tl.constexpr, PDL: tl.constexpr, INTERPRET: tl.constexpr):
    """``(is_producer, index among its role's programs)`` for program ``pid`` of a launch holding
    ``PART`` of the roles (:data:`PARTS`), after the launch's PDL prologue (:data:`PDL_MODES`).

    ``PART = 1`` holds the ``GEMM_SMS * RANKS`` producer programs alone, ``PART = 2`` the
    ``COMM_SMS * RANKS`` others alone, each numbered from 0. ``PART = 0`` (one fused launch):
    ``ORDER`` lays out the grid's program ids (all ranks' programs, rank-major within a role):
    ``producers-first`` (the GPU default; in the interpreter, which runs programs one after
    another by id, every producer finishes before any consumer starts), ``consumers-first``
    (every consumer runs, and times out or passes on stale locks, before any producer), and
    ``last-rank-late`` (the last rank's producers run after every consumer: a consumer sees
    every rank's signal but the last one's, e.g. one ``atomic_xchg`` overwriting another).
    """
    if PDL != 0:
        if PART == 1:
            launch_dependents(INTERPRET)
        elif PDL == 1:
            wait_for_primary(INTERPRET)
    n_producers = GEMM_SMS * RANKS
    n_consumers = COMM_SMS * RANKS
    if PART == 1:
        is_producer = pid >= 0
        index = pid
    elif PART == 2:
        is_producer = pid < 0
        index = pid
    elif ORDER == "consumers-first":
        is_producer = pid >= n_consumers
        index = tl.where(is_producer, pid - n_consumers, pid)
    elif ORDER == "last-rank-late":
        n_early = GEMM_SMS * (RANKS - 1)
        is_consumer = (pid >= n_early) & (pid < n_early + n_consumers)
        is_producer = is_consumer == 0
        index = tl.where(is_consumer, pid - n_early, tl.where(pid < n_early, pid, pid - n_consumers))
    else:
        is_producer = pid < n_producers
        index = tl.where(is_producer, pid, pid - n_producers)
    return is_producer, index


@jit
def role_rank(index, rank, PER_RANK: tl.constexpr, VIRTUAL: tl.constexpr):
    """``(rank, first tile)`` of the ``index``-th program of a role with ``PER_RANK`` programs per
    rank: with virtual ranks the role's programs are rank-major; one process per GPU is ``rank``."""
    if VIRTUAL:
        me = index // PER_RANK
        first = index % PER_RANK
    else:
        me = rank
        first = index
    return me, first


# ----- polls: one await's bounded loop ---------------------------------------------------------

@jit
def bounded_poll(ptr, S: tl.constexpr, vals, target, budget):
    """Poll ``ptr`` as step ``S`` says until ``S``'s ``until`` holds or ``budget`` polls were made.

    Returns ``(last value read, polls made)``; at least one poll is made. Ordering: that of the
    read (``S[READ]``); the loop adds none. Bounded: the caller reports a timeout, never hangs.
    """
    cmp = operand(S[COMPARE], vals)
    value = operand(S[VALUE], vals)
    v = read_flag(ptr, cmp, value, S[READ], S[SEM], S[SCOPE], S[CACHE])
    polls = 1
    if UNBOUNDED_WAITS:  # no countdown: a repeated poll comes back to the same state (a spin)
        while until_holds(v, S[UNTIL], target) == 0:
            v = read_flag(ptr, cmp, value, S[READ], S[SEM], S[SCOPE], S[CACHE])
    else:
        while (until_holds(v, S[UNTIL], target) == 0) & (polls < budget):
            v = read_flag(ptr, cmp, value, S[READ], S[SEM], S[SCOPE], S[CACHE])
            polls += 1
    return v, polls


# ----- protocol runners ------------------------------------------------------------------------

@jit
def write_flag(ptr, cmp, value, S: tl.constexpr, INTERPRET: tl.constexpr):
    """One write of step ``S`` to ``ptr``: ``store``, ``atomic_xchg``, ``atomic_add`` or a one-off
    ``atomic_cas`` (writes ``value`` if the copy holds ``cmp``)."""
    if S[OP] == "store":
        store_flag(ptr, value, S[SEM], S[SCOPE], S[CACHE], INTERPRET)
    elif S[OP] == "atomic_xchg":
        atomic_xchg_flag(ptr, value, S[SEM], S[SCOPE])
    elif S[OP] == "atomic_cas":
        atomic_cas_flag(ptr, cmp, value, S[SEM], S[SCOPE])
    else:
        atomic_add_flag(ptr, value, S[SEM], S[SCOPE])


@jit
def write_or_spin(ptr, vals, budget, ok, last, step, S: tl.constexpr, I: tl.constexpr,
                  INTERPRET: tl.constexpr):
    """One target copy of a writing step: a write, or (a CAS with ``until``, PyTorch's
    ``put_signal``) a CAS repeated until the value it read satisfies ``until``, bounded."""
    if S[UNTIL] == "":
        write_flag(ptr, operand(S[COMPARE], vals), operand(S[VALUE], vals), S, INTERPRET)
    else:
        target = operand(S[TARGET], vals)
        v, polls = bounded_poll(ptr, S, vals, target, budget)
        budget = budget - polls
        ok, last, step = _record(ok, last, step, v, until_holds(v, S[UNTIL], target), I)
    return budget, ok, last, step


@jit
def signal_step(locks, locks_table, locks_rank_stride, n_tiles, tile, rank, owner, vals, budget,
                ok, last, step, S: tl.constexpr, I: tl.constexpr, WORLD: tl.constexpr,
                TABLE: tl.constexpr, INTERPRET: tl.constexpr):
    """A writing step ``S`` for ``tile``: one write (or bounded CAS spin) per target rank
    (``to``: all/others in rank order, self, owner) into lock ``S[LOCK]``."""
    offset = S[LOCK] * n_tiles + tile
    OWN: tl.constexpr = S[TO][0]
    OTHERS: tl.constexpr = S[TO][1]
    if S[TO][2]:  # the owner's copy
        budget, ok, last, step = write_or_spin(
            rank_base(locks, locks_table, locks_rank_stride, owner, TABLE) + offset, vals, budget, ok, last,
            step, S, I, INTERPRET)
    elif OWN and not OTHERS:
        budget, ok, last, step = write_or_spin(
            rank_base(locks, locks_table, locks_rank_stride, rank, TABLE) + offset, vals, budget, ok, last,
            step, S, I, INTERPRET)
    else:  # every rank's copy in rank order, or every other rank's
        for d in tl.static_range(WORLD):
            if OWN:
                budget, ok, last, step = write_or_spin(
                    rank_base(locks, locks_table, locks_rank_stride, d, TABLE) + offset, vals, budget, ok,
                    last, step, S, I, INTERPRET)
            else:
                if d != rank:
                    budget, ok, last, step = write_or_spin(
                        rank_base(locks, locks_table, locks_rank_stride, d, TABLE) + offset, vals, budget,
                        ok, last, step, S, I, INTERPRET)
    return budget, ok, last, step


@jit
def run_signal(locks, locks_table, locks_rank_stride, n_tiles, tile, rank, owner, vals,
               PLAN: tl.constexpr, WORLD: tl.constexpr, TABLE: tl.constexpr,
               INTERPRET: tl.constexpr):
    """A producer's whole ``signal`` plan for ``tile``, steps in order (after its tile store).
    Its spins, if any, share :data:`SIGNAL_POLL_BUDGET` polls; returns ``(ok, last, step)``."""
    ok, last, step, _budget = run_steps(locks, locks_table, locks_rank_stride, n_tiles, tile, rank, owner,
                                        vals, rank * 0 + SIGNAL_POLL_BUDGET, PLAN, WORLD, TABLE, INTERPRET)
    return ok, last, step


@jit
def _record(ok, last, step, v, held, I: tl.constexpr):
    """Fold one poll loop's outcome into (ok, last, step): the first failing loop is kept."""
    first = (ok != 0) & (held == 0)
    last = tl.where(first, v, last)
    step = tl.where(first, I, step)
    ok = tl.where(held, ok, 0)
    return ok, last, step


@jit
def lock_step(locks, locks_table, locks_rank_stride, n_tiles, tile, rank, owner, vals, budget,
              ok, last, step, S: tl.constexpr, I: tl.constexpr, WORLD: tl.constexpr,
              TABLE: tl.constexpr, INTERPRET: tl.constexpr):
    """Step ``S`` (number ``I``) of any section for ``tile``: a barrier, a fence, a write (or CAS
    spin) to the copies ``to`` names, one CAS per source rank, or one bounded poll loop per source
    rank (``from``: self, or each rank). Any op may be on either side (a producer waiting for
    "done", a consumer signalling back)."""
    offset = S[LOCK] * n_tiles + tile
    if S[OP] == "barrier":
        named_barrier(S[BARRIER], INTERPRET)
    elif S[OP] == "fence":
        fence(S[SEM], S[SCOPE], INTERPRET)
    elif S[WRITES]:
        budget, ok, last, step = signal_step(locks, locks_table, locks_rank_stride, n_tiles, tile, rank, owner,
                                             vals, budget, ok, last, step, S, I, WORLD, TABLE, INTERPRET)
    elif S[OP] == "atomic_cas" and S[UNTIL] == "":  # one CAS, result unused (seed 001's acquire after the poll)
        cmp = operand(S[COMPARE], vals)
        value = operand(S[VALUE], vals)
        if S[SOURCE]:  # every rank's copy (from = "each")
            for s in tl.static_range(WORLD):
                atomic_cas_flag(rank_base(locks, locks_table, locks_rank_stride, s, TABLE) + offset,
                                cmp, value, S[SEM], S[SCOPE])
        else:
            atomic_cas_flag(rank_base(locks, locks_table, locks_rank_stride, rank, TABLE) + offset,
                            cmp, value, S[SEM], S[SCOPE])
    else:  # await, or a CAS reading `from` repeated until `until` holds
        target = operand(S[TARGET], vals)
        if S[SOURCE]:  # every rank's copy (from = "each")
            for s in tl.static_range(WORLD):
                v, polls = bounded_poll(rank_base(locks, locks_table, locks_rank_stride, s, TABLE)
                                        + offset, S, vals, target, budget)
                budget = budget - polls
                ok, last, step = _record(ok, last, step, v, until_holds(v, S[UNTIL], target), I)
        else:
            v, polls = bounded_poll(rank_base(locks, locks_table, locks_rank_stride, rank, TABLE)
                                    + offset, S, vals, target, budget)
            budget = budget - polls
            ok, last, step = _record(ok, last, step, v, until_holds(v, S[UNTIL], target), I)
    return ok, last, step, budget


@jit
def run_steps(locks, locks_table, locks_rank_stride, n_tiles, tile, rank, owner, vals, budget,
              PLAN: tl.constexpr, WORLD: tl.constexpr, TABLE: tl.constexpr, INTERPRET: tl.constexpr):
    """Every step of ``PLAN`` (any section) for ``tile``, in order (:func:`lock_step`).

    Every poll polls at most ``budget`` times in total across the steps (at least once each).
    Returns ``(ok, last, step, budget)``: ``ok`` is 1 if every poll saw its condition, else 0
    with ``last`` the value the first failing poll loop read last and ``step`` its index in the
    plan (-1 when ok); ``budget`` is what is left.
    """
    ok = (budget * 0 + 1).to(tl.int32)
    last = ok * 0
    step = ok * 0 - 1
    for i in tl.static_range(len(PLAN)):
        ok, last, step, budget = lock_step(locks, locks_table, locks_rank_stride, n_tiles, tile, rank, owner,
                                           vals, budget, ok, last, step, PLAN[i], i, WORLD, TABLE, INTERPRET)
    return ok, last, step, budget


@jit
def run_wait(locks, locks_table, locks_rank_stride, n_tiles, tile, rank, vals, budget,
             PLAN: tl.constexpr, WORLD: tl.constexpr, TABLE: tl.constexpr,
             INTERPRET: tl.constexpr):
    """A consumer's whole ``wait`` plan for ``tile``, steps in order (before its tile reads):
    :func:`run_steps` with the consumer as the owner of what it signals back."""
    return run_steps(locks, locks_table, locks_rank_stride, n_tiles, tile, rank, rank, vals, budget,
                     PLAN, WORLD, TABLE, INTERPRET)
