"""The programs the explorer runs: threads of PTX-like instructions placed in a scope tree.

This is the one intermediate form shared by the litmus parser (``syncverify.litmus``) and the
protocol scenarios (``syncverify.scenarios.build``): both build a :class:`Program`, the explorer runs it.

Operands are either a register name (``str``) or an integer constant (``int``). Memory locations
are plain names; every location a program touches has an initial value (0 unless ``init`` says).

Modeling choices made here (the model itself is in ``syncverify.model.ptx``):

* ``ld.volatile`` / ``st.volatile`` are recorded as relaxed at system scope (PTX ISA 8.x,
  "Volatile operations": "a volatile operation behaves as a relaxed operation with system scope").
* ``membar.cta`` / ``membar.gl`` / ``membar.sys`` are ``fence.sc`` at cta / gpu / sys scope
  (PTX ISA 8.x, ``membar``: "membar.{cta,gl,sys} have the same semantics as fence.sc").
* An ``atom``/``red`` with no semantics is ``.relaxed``; with no scope, ``.gpu`` (PTX ISA defaults).
* A ``fence.sc`` is also an acquire-release fence (PTX ISA: "fence.sc ... is a fence.acq_rel that
  additionally ...").
* Named barriers (``Barrier``): 16 per CTA, ids and counts constants or registers, ``sync``,
  ``arrive`` and ``red``; which arrivals form which phase, and when a barrier hangs, is
  :mod:`syncverify.explore.barriers`.

GHOST accesses (``Load(ghost=True)`` / ``Store(ghost=True)``) are the tile data of a protocol
scenario. They take part in program order, causality and race detection, but the explorer makes no
reads-from or coherence choice for them: ``syncverify.verdicts.check`` computes which writes each ghost read
could see from the happens-before order of each execution. This is exact when, as in every
scenario, the data's values never reach a branch, a lock or an address, and each location is read
at most once per thread (then the choices for different reads are independent of each other and of
the lock protocol).

IDENTITY: a scenario's thread carries who it is (:class:`ThreadOrigin`, its ``role``) and the host
phase it runs in (:class:`Phase`), made once by the scenario builder; the builder also keeps what
each location and each protocol step's label is (``syncverify.scenarios.build.Location``,
``StepOrigin``). Causes, pictures, traces, the drift test and guided stress read those fields;
nothing parses a name back. The explorer only compares them.
"""

from __future__ import annotations

import functools
import itertools
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Union

from syncverify.model.int32 import wrap_int32
from syncverify.model.mbarrier import MAX_COMPLETIONS, Completion, FirstPhase, phase_completions
from syncverify.validation import one_of
from syncverify.errors import UnsupportedConstruct

SCOPES: tuple[str, ...] = ("cta", "gpu", "sys")
#: The state spaces a location may live in (PTX ISA, "State Spaces"): ``.shared`` is ``.shared::cta``.
GLOBAL, SHARED_CTA, SHARED_CLUSTER = "global", "shared::cta", "shared::cluster"
SPACES: tuple[str, ...] = (GLOBAL, SHARED_CTA, SHARED_CLUSTER)
#: The proxies an access goes through (PTX ISA, "Proxies"; ASYNC below).
PROXIES: tuple[str, ...] = ("generic", "async")

Operand = Union[str, int]  # a register name or an integer constant
#: MIXED-SIZE: an access of ``size`` bytes at byte ``offset`` of a byte-addressed location
#: ``(location, offset, size)``. Such a location is held as one location per byte (``x[0]``,
#: ``x[1]``, ...: :func:`byte_location`) and an access of it as one load or store per byte, each
#: carrying its access's footprint; syncverify.model.ptx (choice 12) reads them back as one access.
Footprint = tuple[str, int, int]


def byte_location(loc: str, byte: int) -> str:
    """The name of byte ``byte`` of the byte-addressed location ``loc``: ``x[1]``."""
    return f"{loc}[{byte}]"

LOAD_SEMS = ("weak", "relaxed", "acquire")
STORE_SEMS = ("weak", "relaxed", "release")
ATOMIC_SEMS = ("relaxed", "acquire", "release", "acq_rel")
FENCE_KINDS = ("sc", "acq_rel")
ATOMIC_OPS = ("add", "sub", "exch", "cas", "min", "max", "and", "or", "xor", "inc", "dec", "mul", "div")
#: The ``atom``/``red`` operations of the PTX ISA (``sub``, ``mul``, ``div`` are Dartagnan's).
ISA_ATOMIC_OPS = ("add", "exch", "cas", "min", "max", "and", "or", "xor", "inc", "dec")


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
    space: str = GLOBAL  # the state space of ``loc`` (ASYNC below)
    proxy: str = "generic"  # "async": the read of a bulk copy (ASYNC below)
    copy: int | None = None  # the bulk copy it is part of
    footprint: Footprint | None = None  # MIXED-SIZE below: the access this byte belongs to
    byte: int = 0  # which byte of ``footprint`` ``loc`` is

    def __post_init__(self) -> None:
        _check(self.sem, LOAD_SEMS, "load sem")
        _scope_rule(self.sem, self.scope)
        _check(self.space, SPACES, "state space")
        _check(self.proxy, PROXIES, "proxy")


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
    space: str = GLOBAL
    proxy: str = "generic"
    copy: int | None = None
    footprint: Footprint | None = None
    byte: int = 0

    def __post_init__(self) -> None:
        _check(self.sem, STORE_SEMS, "store sem")
        _scope_rule(self.sem, self.scope)
        _check(self.space, SPACES, "state space")
        _check(self.proxy, PROXIES, "proxy")


@dataclass(frozen=True)
class Atomic:
    """``atom.SEM.SCOPE.OP dst, [loc], operands`` (``dst`` is None for ``red``).

    ``operands`` is ``(b,)`` for every op except ``cas``, which takes ``(compare, value)``.
    The read and the write of one atomic form an ``rmw`` pair; a ``cas`` whose compare fails
    writes nothing (PTX ISA: "atom.cas ... stores ... only if the comparison succeeds").
    ``unsigned``: ``min``/``max`` compare as ``.u32`` (``inc``/``dec`` always do, as the ISA
    defines them); the value semantics are in :func:`syncverify.explore.instructions.atomic_result`.
    """

    op: str
    dst: str | None
    loc: str
    operands: tuple[Operand, ...]
    sem: str = "relaxed"
    scope: str = "gpu"
    line: int | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)
    unsigned: bool = False
    copy: int | None = None  # the NVSHMEM delivery it performs (a signal update; syncverify.delivery)

    def __post_init__(self) -> None:
        _check(self.op, ATOMIC_OPS, "atomic op")
        _check(self.sem, ATOMIC_SEMS, "atomic sem")
        _check(self.scope, SCOPES, "scope")
        want = 2 if self.op == "cas" else 1
        if len(self.operands) != want:
            raise UnsupportedConstruct(f"atom.{self.op} takes {want} operand(s), got {len(self.operands)}")
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


#: The 16 named barriers of a CTA (PTX ISA, ``bar``: "Each CTA instance has sixteen barriers
#: numbered 0..15").
BARRIER_IDS = range(16)
BARRIER_KINDS = ("sync", "arrive", "red")
RED_OPS = ("popc", "and", "or")


@dataclass(frozen=True)
class Barrier:
    """A named CTA barrier: ``bar.sync a{, b}``, ``bar.arrive a{, b}`` or ``bar.red.OP d, a{, b}, {!}c``.

    ``barrier_id`` (``a``) and ``count`` (``b``, in threads) are constants or registers. Without
    a count the barrier's participants are the threads of the CTA that use that barrier (see
    :mod:`syncverify.explore.barriers`). Arrivals are grouped into *phases*: a phase completes when as
    many threads as its count have arrived, and the barrier is then reused (PTX ISA, ``bar``).
    ``sync`` and ``red`` wait for their phase to complete; ``arrive`` does not. ``red`` also
    reduces ``predicate`` (its complement with ``negate``) over the phase's ``red`` arrivals into
    ``dst``: ``popc`` counts the true ones, ``and``/``or`` give 1 or 0.
    """

    kind: str
    barrier_id: Operand = 0
    count: Operand | None = None
    line: int | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)
    op: str = ""  # red: popc | and | or
    dst: str | None = None  # red: the result register
    predicate: Operand | None = None  # red: the predicate register (or a constant 0/1)
    negate: bool = False  # red: {!}c

    def __post_init__(self) -> None:
        _check(self.kind, BARRIER_KINDS, "barrier kind")
        if isinstance(self.barrier_id, int) and self.barrier_id not in BARRIER_IDS:
            raise UnsupportedConstruct(f"barrier id {self.barrier_id} is out of range: PTX has barriers 0 to 15")
        if isinstance(self.count, int) and self.count <= 0:
            raise UnsupportedConstruct(f"barrier thread count {self.count} must be positive")
        if self.kind == "red":
            _check(self.op, RED_OPS, "bar.red operation")
            if self.dst is None or self.predicate is None:
                raise UnsupportedConstruct("bar.red needs a destination register and a predicate")


@dataclass(frozen=True)
class RegOp:
    """Register arithmetic: ``mov dst, a`` (``op='mov'``, ``rhs`` ignored), ``add``, ``sub``,
    ``mul`` or ``div`` (truncating, as PTX's ``div.s32``)."""

    op: str
    dst: str
    lhs: Operand
    rhs: Operand = 0
    line: int | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        _check(self.op, ("mov", "add", "sub", "mul", "div"), "register op")


@dataclass(frozen=True)
class Branch:
    """``beq a, b, L`` (``cond='eq'``), ``bne a, b, L`` (``'ne'``), ``bge``/``blt``/``bgt``/``ble``,
    or ``goto L`` (``None``)."""

    target: str
    cond: str | None = None
    lhs: Operand = 0
    rhs: Operand = 0
    line: int | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.cond is not None:
            _check(self.cond, ("eq", "ne", "ge", "lt", "gt", "le"), "branch condition")


@dataclass(frozen=True)
class Label:
    """A branch target."""

    name: str
    line: int | None = field(default=None, compare=False)


# ----- asynchronous bulk copies and the async proxy (ASYNC) ---------------------------------------
#
# ASYNC: ``cp.async.bulk{.tensor}`` copies are performed by the async proxy, not by the issuing
# thread (PTX ISA, "Asynchronous Operations": they are not in the issuing thread's program order).
# Each copy becomes a thread of its own, an *agent* placed in the issuing thread's CTA, of two
# async-proxy accesses: the read of its source and the write of its destination (a data
# dependency between them). The issuing thread keeps an issue point (:class:`BulkCopy`) and its
# completion mechanisms (:class:`BulkWait`, :class:`MbarWait`), which :func:`lower_async` ties to
# the copies they complete; what orders what is syncverify.model.ptx, choice 11.

#: How a copy signals its completion: to a bulk async-group of its thread, or to an mbarrier; or
#: ``delivery``: an NVSHMEM delivery (syncverify.delivery), completed by what that module lowers.
COMPLETIONS = ("bulk_group", "mbarrier", "delivery")


@dataclass(frozen=True)
class BulkCopy:
    """``cp.async.bulk{.tensor}.DST.SRC.COMPLETION [dst], [src]{, [mbar]}``: an asynchronous copy of
    ``src`` (in ``src_space``) to ``dst`` (in ``dst_space``), completed through a bulk async-group
    or the mbarrier ``mbarrier``. ``copy`` numbers it within the program (given by
    :func:`lower_async`; the agent thread that performs it carries the same number).

    The kernel front end's TMA copies of tiles follow one side only, a ghost location when
    ``ghost``: a store (``src`` is "") writes the constant ``value`` to ``dst``; a load (``dst``
    is "") reads ``src`` (its shared-memory side, private to the CTA, is not modelled)."""

    dst: str
    src: str
    dst_space: str
    src_space: str
    completion: str
    mbarrier: str | None = None
    copy: int = 0
    line: int | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)
    value: int | None = None
    ghost: bool = False
    size: int = 4  # bytes: the completeCount of its complete-tx (syncverify.model.mbarrier)

    def __post_init__(self) -> None:
        _check(self.dst_space, SPACES, "state space")
        _check(self.src_space, SPACES, "state space")
        _check(self.completion, COMPLETIONS, "completion mechanism")
        if (self.completion == "mbarrier") != (self.mbarrier is not None):
            raise UnsupportedConstruct("an mbarrier-completed copy names its mbarrier, and only it does")


@dataclass(frozen=True)
class BulkCommit:
    """``cp.async.bulk.commit_group``: the thread's copies issued since its last commit form a bulk
    async-group (PTX ISA, ``cp.async.bulk.commit_group``)."""

    line: int | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)


@dataclass(frozen=True)
class BulkWait:
    """``cp.async.bulk.wait_group{.read} N``: waits until at most ``pending`` of the thread's most
    recent bulk async-groups are pending. ``read``: only until their copies have read their
    sources. ``copies``: the copies it completes, filled in by :func:`lower_async`."""

    pending: int
    read: bool = False
    copies: tuple[int, ...] = ()
    line: int | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.pending < 0:
            raise UnsupportedConstruct(f"cp.async.bulk.wait_group takes N >= 0, got {self.pending}")


@dataclass(frozen=True)
class ProxyFence:
    """``fence.proxy.async{.SPACE}``: a bi-directional proxy fence between the generic and the async
    proxy, limited to ``space`` ("" for every state space; PTX ISA, ``membar``/``fence``)."""

    space: str = ""
    line: int | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.space:
            _check(self.space, SPACES, "state space")


@dataclass(frozen=True)
class MbarArrive:
    """``mbarrier.arrive{.expect_tx}.release.cta.shared::cta.b64 _, [mbarrier]{, tx}``: a release
    arrival on ``mbarrier``, after an expect-tx of ``tx`` bytes with ``.expect_tx``
    (syncverify.model.mbarrier)."""

    mbarrier: str
    expect_tx: bool = False
    line: int | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)
    tx: int = 0


@dataclass(frozen=True)
class MbarInit:
    """``mbarrier.init.shared::cta.b64 [mbarrier], count``: the pending arrival count of its first
    phase (read statically by :func:`lower_async`; the instruction orders nothing)."""

    mbarrier: str
    count: int
    line: int | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.count < 1:
            raise UnsupportedConstruct(f"mbarrier.init takes a count >= 1, got {self.count}")


@dataclass(frozen=True)
class MbarTx:
    """``mbarrier.expect_tx`` (``complete=False``) or ``mbarrier.complete_tx`` (``complete=True``),
    ``.relaxed.cta``, of ``tx`` bytes: they move the tx-count and order nothing ("The .relaxed
    qualifier ..."; syncverify.model.mbarrier); read statically by :func:`lower_async`."""

    mbarrier: str
    tx: int
    complete: bool = False
    line: int | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.tx < 0:
            raise UnsupportedConstruct(f"a transaction count is unsigned, got {self.tx}")


@dataclass(frozen=True)
class MbarWait:
    """``mbarrier.try_wait{.parity}.acquire.cta.shared::cta.b64 dst, [mbarrier], ...`` read as the
    try that returns True (``dst`` = 1): the phase completed, every copy tracked by the mbarrier
    (``copies``, filled in by :func:`lower_async`) and every arrival on it done.

    With transaction counts (syncverify.model.mbarrier) :func:`lower_async` fills in ``choices``,
    each set of copies the completed phase may have seen (the explorer takes each), or ``never``,
    why the phase never completes (the thread waits forever). ``parity``: the ``.parity`` form's
    operand (0: the first phase; 1: the phase before it, complete from the start)."""

    dst: str | None
    mbarrier: str
    copies: tuple[int, ...] = ()
    line: int | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)
    parity: int | None = None
    choices: tuple[tuple[int, ...], ...] = ()
    never: str = ""


#: The instructions of the async proxy (besides the loads and stores of its agent threads).
ASYNC_INSTRUCTIONS = (BulkCopy, BulkCommit, BulkWait, ProxyFence, MbarArrive, MbarWait, MbarInit, MbarTx)

Instruction = Union[Load, Store, Atomic, Fence, Barrier, RegOp, Branch, Label,
                    BulkCopy, BulkCommit, BulkWait, ProxyFence, MbarArrive, MbarWait, MbarInit, MbarTx]


def _scope_rule(sem: str, scope: str | None) -> None:
    if sem == "weak":
        if scope is not None:
            raise UnsupportedConstruct(f"a .weak access takes no scope (got .{scope})")
    else:
        if scope is None:
            raise UnsupportedConstruct(f"a .{sem} access needs a scope (.cta, .gpu or .sys)")
        _check(scope, SCOPES, "scope")


# ----- identity: who a thread is, and the host phase it runs in ----------------------------------

#: The role of a host thread that zeroes a rank's locks between launches (a ``memset``).
HOST_RESET = "host reset"


@dataclass(frozen=True)
class Phase:
    """A host-side phase: kernel launch ``epoch`` (``kind="launch"``; of ``rank`` alone when only
    each rank's stream orders the launches), or the host's reset of locks after launch ``epoch``
    (``kind="reset"``: between host barriers; ``"racing"``: on another stream, unordered with the
    next launch), or one stream memory operation of launch ``epoch``'s stream (``kind="stream"``,
    ``kernel`` naming it: syncverify.streams). Made once by the scenario builder (:func:`syncverify.protocols.rules.launch_phase`);
    its text (``e1``, ``e1.r0``, ``reset0``, ``racing0``) is what traces and pictures show.

    >>> str(Phase("launch", 1, rank=0)), Phase("reset", 0).words()
    ('e1.r0', 'host reset after epoch 0')
    """

    kind: str
    epoch: int
    rank: int | None = None
    kernel: str = ""  # one of several kernels a call launches (``--launches two-stream``/``pdl``): gemm, comm

    def __post_init__(self) -> None:
        _check(self.kind, ("launch", "reset", "racing", "stream"), "phase kind")

    def __str__(self) -> str:
        if self.kind == "launch":
            return (f"e{self.epoch}" + ("" if self.rank is None else f".r{self.rank}")
                    + (f".{self.kernel}" if self.kernel else ""))
        if self.kind == "stream":  # one stream memory operation (syncverify.streams); ``kernel`` names it
            return f"stream{self.epoch}.{self.kernel}"
        return f"{self.kind}{self.epoch}"

    def __lt__(self, other: object) -> bool:
        # The explorer and the pictures sort phases: in the order of their names, as when they were names.
        return str(self) < str(other)

    @property
    def launch_epoch(self) -> int | None:
        """The epoch of a kernel launch; None for a host reset."""
        return self.epoch if self.kind == "launch" else None

    def words(self) -> str:
        """``kernel launch, epoch 0`` (``(rank 1's stream)``), ``host reset after epoch 0``."""
        if self.kind == "launch":
            return (f"kernel launch, epoch {self.epoch}" + ("" if self.rank is None else f" (rank {self.rank}'s stream)")
                    + (f" ({self.kernel} kernel)" if self.kernel else ""))
        if self.kind == "reset":
            return f"host reset after epoch {self.epoch}"
        if self.kind == "stream":
            return f"stream operation {self.kernel} of epoch {self.epoch}" + (
                "" if self.rank is None else f" (rank {self.rank}'s stream)")
        return str(self)


@dataclass(frozen=True)
class ThreadOrigin:
    """Who a thread of a scenario is: thread ``thread`` of the CTA that plays ``role`` (producer,
    consumer, comm, receiver, sender, gemm) on ``rank`` for ``tile`` in launch ``epoch``; or, with
    ``role`` :data:`HOST_RESET`, the host zeroing ``rank``'s locks ``after_epoch``.

    Made once by the scenario builder and read by every consumer (causes, pictures, the drift
    test, guided stress); its text is the thread's name in counterexamples.

    >>> origin = ThreadOrigin(1, "producer", thread=0, tile=0, epoch=0)
    >>> str(origin), origin.cta
    ('rank 1 producer tile 0 epoch 0 thread 0', 'producer of tile 0')
    >>> reset = ThreadOrigin(0, HOST_RESET, after_epoch=0)
    >>> str(reset), reset.trace_name
    ("host reset of rank 0's locks after epoch 0", 'host reset after epoch 0')
    """

    rank: int
    role: str
    thread: int = 0
    tile: int | None = None
    epoch: int | None = None  # the launch; None for a host reset
    after_epoch: int | None = None  # a host reset: the launch it follows
    #: A CTA that handles several tiles in its loop (``ScenarioOptions.ctas``): them, in the
    #: order it visits them (``tile`` is the first); empty for a CTA of one tile.
    tiles: tuple[int, ...] = ()
    #: A CTA whose tiles other CTAs of its role and rank visit too, each for other column tiles
    #: (all-gather-gemm's GEMM programs with ``ScenarioOptions.columns``): which program of them
    #: it is; None for the others.
    program: int | None = None

    @property
    def is_host_reset(self) -> bool:
        return self.role == HOST_RESET

    @property
    def tile_words(self) -> str:
        """``tile 0``, or ``tiles 0, 1`` for a CTA that loops over several."""
        return f"tiles {', '.join(map(str, self.tiles))}" if self.tiles else f"tile {self.tile}"

    @property
    def cta(self) -> str:
        """The CTA's part: ``producer of tile 0``, ``producer of tiles 0, 1``, or ``host reset``."""
        return self.role if self.is_host_reset else f"{self.role}{self._program_words} of {self.tile_words}"

    @property
    def _program_words(self) -> str:
        return "" if self.program is None else f" program {self.program}"

    @property
    def trace_name(self) -> str:
        """The thread in a trace's ``role`` column: its text, ``host reset after epoch 0`` for a reset."""
        return f"{HOST_RESET} after epoch {self.after_epoch}" if self.is_host_reset else str(self)

    def __str__(self) -> str:
        if self.is_host_reset:
            return f"{HOST_RESET} of rank {self.rank}'s locks after epoch {self.after_epoch}"
        return f"rank {self.rank} {self.role}{self._program_words} {self.tile_words} epoch {self.epoch} thread {self.thread}"


@dataclass(frozen=True)
class Thread:
    """One thread, placed in the scope tree by ``(gpu, cta)``; threads of one CTA share both.

    ``role`` says who it is (shown in counterexamples): a scenario's :class:`ThreadOrigin`, or any
    text for a hand-written program. ``phase`` is the host-side phase it runs in (see
    ``Program.host_order``): a scenario's :class:`Phase`, or any name (the explorer only compares
    phases). ``steps``: how many protocol steps of each section its code holds, ``(("signal", 3),)``
    (the scenario builder counts them; a message about a thread's size names them).
    """

    name: str
    gpu: int
    cta: int
    instructions: tuple[Instruction, ...]
    role: ThreadOrigin | str = ""
    phase: Phase | str = ""
    steps: tuple[tuple[str, int], ...] = ()


#: The locations a PDL primary's threads write to say ``griddepcontrol.launch_dependents`` (one per
#: thread, read by no one: the write marks when it ran, for the residency schedule).
PDL_TRIGGER = "pdl.trigger"


#: Where a kernel runs ``griddepcontrol.X`` (read from its code by the kernel front end), until the
#: launch it belongs to gives it a meaning (:func:`grid_dependency`): a placeholder no model reads.
GDC_PLACEHOLDER = {"wait": "pdl.gdc.wait", "launch_dependents": "pdl.gdc.launch_dependents"}


def grid_dependency(code: tuple, thread: str, *, primary_done: str | None, dependent_on: tuple[str, int] | None) -> tuple:
    """A kernel thread's ``code`` with each :data:`GDC_PLACEHOLDER` given its ISA meaning (PTX ISA,
    ``griddepcontrol``): ``launch_dependents``, when the thread's launch is a PDL primary, the
    write of its :data:`PDL_TRIGGER` (scheduling only: no memory order), else nothing; ``wait``,
    when the launch is a programmatic dependent of a primary whose completion count is
    ``dependent_on = (done, count)``, the acquire poll of :func:`pdl_dependent`, else nothing
    (without PDL there is no prerequisite grid in flight: stream order already ran it). With
    ``primary_done``, 1 is added to that count at the end, as :func:`pdl_primary` does."""
    out: list = []
    waits = 0
    for ins in code:
        if isinstance(ins, Store) and ins.loc == GDC_PLACEHOLDER["launch_dependents"]:
            if primary_done is not None:
                out.append(replace(ins, loc=f"{PDL_TRIGGER}.{thread}"))
        elif isinstance(ins, Store) and ins.loc == GDC_PLACEHOLDER["wait"]:
            if dependent_on is not None:
                waits += 1
                out.extend(pdl_wait(dependent_on[0], dependent_on[1], ins.label, f"__gdc_wait{waits}", line=ins.line))
        else:
            out.append(ins)
    if primary_done is not None:
        out.append(Atomic("add", None, primary_done, (1,), sem="release", scope="sys",
                          label="grid completion and flush (griddepcontrol)"))
    return tuple(out)


def pdl_wait(done: str, count: int, label: str, name: str = "__pdl_wait", *, line: int | None = None) -> tuple:
    """``griddepcontrol.wait``: poll the primary's completion count ``done`` with acquire loads at
    system scope until all its ``count`` threads have added to it (``name``: the loop's label)."""
    return (Label(name), Load("__pdl_done", done, sem="acquire", scope="sys", label=label, line=line),
            Branch(name, "lt", "__pdl_done", count, label=label, line=line))


def pdl_primary(code: tuple, thread: str, done: str, where: str = "") -> tuple:
    """A PDL primary thread's ``code``: ``griddepcontrol.launch_dependents`` first (a write of its
    :data:`PDL_TRIGGER`: scheduling only, no memory order), then its code, then 1 added to the
    completion count ``done`` with a release at system scope (the grid's completion and flush,
    which ``griddepcontrol.wait`` waits for: PTX ISA, ``griddepcontrol``). ``where``: a label prefix."""
    return ((Store(f"{PDL_TRIGGER}.{thread}", 1, label=f"{where}griddepcontrol.launch_dependents"),) + code
            + (Atomic("add", None, done, (1,), sem="release", scope="sys", label=f"{where}grid completion and flush"),))


def pdl_dependent(code: tuple, done: str, count: int, where: str = "") -> tuple:
    """A PDL dependent thread's ``code`` behind ``griddepcontrol.wait``: poll the primary's completion
    count ``done`` with acquire loads at system scope until all its ``count`` threads have added to it."""
    return pdl_wait(done, count, f"{where}griddepcontrol.wait") + code


#: The register an agent thread carries a copied value in (not a name a litmus test can write).
AGENT_REGISTER = "%copied"


def lower_async(threads: tuple[Thread, ...]) -> tuple[Thread, ...]:
    """The threads with one agent thread appended per bulk copy, and each wait given the copies
    it completes (ASYNC above); ``threads`` unchanged when they issue no copy and wait on no mbarrier.
    Copies are numbered here, in thread order and then program order.

    A wait completes what is decided in program text: ``cp.async.bulk.wait_group N`` the copies of
    all but the ``N`` most recent groups committed before it (PTX ISA: "wait until only N or fewer
    of the most recent bulk async-groups are pending and all the prior bulk async-groups committed
    by the executing threads are complete"), ``mbarrier.try_wait`` every copy that completes on its
    mbarrier. A copy runs at most once (one inside a loop is refused, naming its line); its agent
    runs only in the executions whose issuing thread issues it (:attr:`Program.agent_copies`,
    syncverify.explore.driver), and a wait completes only the copies that were issued, so a
    ``wait_group 0`` may follow branches; ``wait_group N`` with N > 0 after one is refused.

    An mbarrier with a transaction count (an ``init``, an ``expect_tx`` or a ``complete_tx`` on
    it) has its first phase's completions from :func:`syncverify.model.mbarrier.phase_completions`:
    a ``try_wait`` of it gets them as ``choices`` (or ``never``); ``try_wait.parity`` with parity 1
    returns True at once ("the immediately preceding phase, for which waitComplete returns True")
    and orders nothing, so it becomes ``mov dst, 1``. ``init``, ``expect_tx`` and ``complete_tx``
    are read here and leave no instruction (they order nothing).
    """
    if not any(isinstance(ins, (BulkCopy, MbarArrive, MbarWait, MbarInit, MbarTx)) for t in threads for ins in t.instructions):
        return threads
    numbered = itertools.count()
    threads = tuple(replace(t, instructions=tuple(replace(ins, copy=next(numbered)) if isinstance(ins, BulkCopy) else ins
                                                  for ins in t.instructions)) for t in threads)
    tracked: dict[str, list[int]] = {}
    arrivals: set[str] = set()
    for thread in threads:
        for ins in thread.instructions:
            if isinstance(ins, BulkCopy) and ins.mbarrier is not None:
                tracked.setdefault(ins.mbarrier, []).append(ins.copy)
            elif isinstance(ins, MbarArrive):
                arrivals.add(ins.mbarrier)
    phases = _mbarrier_phases(threads)
    issuers, agents = [], []
    for thread in threads:
        code: list[Instruction] = []
        uncommitted: list[int] = []
        groups: list[tuple[int, ...]] = []
        control: Instruction | None = None
        loops = loop_positions(thread.instructions)
        for position, ins in enumerate(thread.instructions):
            if isinstance(ins, (Label, Branch, Barrier)) and control is None:
                control = ins
            if isinstance(ins, (BulkCopy, BulkCommit)) and position in loops:
                raise _at_line(f"a bulk copy or commit_group inside a loop is not modelled: each must run at most "
                               f"once ({thread.name})", ins.line)
            if isinstance(ins, BulkWait) and ins.pending and control is not None:
                raise _at_line(f"cp.async.bulk.wait_group {ins.pending} after a label, branch or barrier (line "
                               f"{control.line}) is not modelled: which groups are pending depends on the path; "
                               f"wait_group 0 is ({thread.name})", ins.line)
            if isinstance(ins, (MbarInit, MbarTx)):
                continue  # read by _mbarrier_phases
            if isinstance(ins, BulkCopy):
                if ins.completion == "bulk_group":
                    uncommitted.append(ins.copy)
                agents.append(_agent(thread, ins))
            elif isinstance(ins, BulkCommit):
                groups.append(tuple(uncommitted))
                uncommitted = []
            elif isinstance(ins, BulkWait):
                done = groups[:len(groups) - ins.pending] if ins.pending else groups
                ins = replace(ins, copies=tuple(c for group in done for c in group))
            elif isinstance(ins, MbarWait) and ins.parity == 1:
                if ins.dst is not None:
                    code.append(RegOp("mov", ins.dst, 1, line=ins.line, label=ins.label))
                continue
            elif isinstance(ins, MbarWait) and ins.mbarrier in phases:
                phase = phases[ins.mbarrier]
                ins = replace(ins, copies=phase.ways[0] if phase.ways else (), choices=phase.ways,
                              never=f"mbarrier {ins.mbarrier}: {phase.never}" if phase.never else "")
            elif isinstance(ins, MbarWait):
                if ins.mbarrier not in tracked and ins.mbarrier not in arrivals:
                    raise _at_line(f"mbarrier {ins.mbarrier} is waited on, but no copy completes on it and "
                                   f"no thread arrives on it ({thread.name})", ins.line)
                ins = replace(ins, copies=tuple(tracked.get(ins.mbarrier, ())))
            code.append(ins)
        issuers.append(replace(thread, instructions=tuple(code)))
    return tuple(issuers) + tuple(agents)


def _mbarrier_phases(threads: tuple[Thread, ...]) -> dict[str, FirstPhase]:
    """Each mbarrier with a transaction count -> the ways its first phase completes (the copies
    seen complete), or why it never does (syncverify.model.mbarrier). What counts is read from
    program text, so an instruction that moves a count or completes on such an mbarrier after a
    label or branch, or inside a loop, is refused (the count would depend on the path)."""
    counted = {ins.mbarrier for t in threads for ins in t.instructions
               if isinstance(ins, (MbarInit, MbarTx)) or (isinstance(ins, MbarArrive) and ins.expect_tx)}
    if not counted:
        return {}
    inits: dict[str, int] = {}
    arrivals: dict[str, int] = {}
    expected: dict[str, int] = {}
    completions: dict[str, list[Completion]] = {}
    for thread in threads:
        control: Instruction | None = None
        for ins in thread.instructions:
            if isinstance(ins, (Label, Branch)) and control is None:
                control = ins
            bar = getattr(ins, "mbarrier", None) if not isinstance(ins, MbarWait) else None
            if bar not in counted:
                continue
            if control is not None:
                raise _at_line(f"{type(ins).__name__} on mbarrier {bar} after a label or branch (line {control.line}) "
                               f"is not modelled: its transaction count would depend on the path ({thread.name})",
                               ins.line)
            if isinstance(ins, MbarInit):
                if bar in inits:
                    raise _at_line(f"mbarrier {bar} is initialised twice: one phase is modelled ({thread.name})", ins.line)
                inits[bar] = ins.count
            elif isinstance(ins, MbarArrive):
                arrivals[bar] = arrivals.get(bar, 0) + 1
                expected[bar] = expected.get(bar, 0) + ins.tx
            elif isinstance(ins, MbarTx) and not ins.complete:
                expected[bar] = expected.get(bar, 0) + ins.tx
            else:  # a copy completing on it, or mbarrier.complete_tx
                completions.setdefault(bar, []).append(
                    Completion(ins.size, ins.copy) if isinstance(ins, BulkCopy) else Completion(ins.tx))
    out: dict[str, FirstPhase] = {}
    for bar in sorted(counted):
        count = inits.get(bar, arrivals.get(bar, 0))
        if arrivals.get(bar, 0) > count:
            raise UnsupportedConstruct(f"mbarrier {bar}: {arrivals[bar]} arrivals for an init count of {count}: "
                                       f"phases after the first are not modelled")
        if len(completions.get(bar, ())) > MAX_COMPLETIONS:
            raise UnsupportedConstruct(f"mbarrier {bar}: more than {MAX_COMPLETIONS} completions are not modelled")
        out[bar] = phase_completions(count=count, arrivals=arrivals.get(bar, 0), expected=expected.get(bar, 0),
                                     completions=tuple(completions.get(bar, ())))
    return out


def loop_positions(code: tuple) -> set[int]:
    """The instructions inside some loop: those on a cycle of the thread's control flow, the
    only ones one run of the thread can execute more than once.

    Why cycles and not spans (between a backward branch's target and the branch): code lowered
    from a protocol is structured, and there the two agree; code the kernel front end lifts
    (:mod:`syncverify.frontend.lift`) jumps backward to merge paths whose futures are equal, a
    jump that closes no cycle. Every use asks "can this run twice in one run?" (an increment
    that may repeat has no bound, :mod:`syncverify.explore.value_domain`; an atomic that may
    repeat keeps value classes off, :mod:`syncverify.explore.value_classes`; a bulk copy must
    run at most once), and an instruction on no cycle runs at most once whatever the span says.
    The strongly connected components (Kosaraju, iterative: no recursion limit on long code)
    with more than one instruction, or one that branches to itself, are the cycles.
    """
    successors = _successors(code)
    order: list[int] = []  # every position, in the order its depth-first search finishes
    done: set[int] = set()
    for root in range(len(code)):
        if root in done:
            continue
        done.add(root)
        stack = [(root, iter(successors[root]))]
        while stack:
            node, rest = stack[-1]
            nxt = next((q for q in rest if q not in done), None)
            if nxt is None:
                stack.pop()
                order.append(node)
            else:
                done.add(nxt)
                stack.append((nxt, iter(successors[nxt])))
    predecessors: list[list[int]] = [[] for _ in code]
    for p, qs in enumerate(successors):
        for q in qs:
            predecessors[q].append(p)
    component = [-1] * len(code)
    for root in reversed(order):
        if component[root] >= 0:
            continue
        component[root], pending = root, [root]
        while pending:
            node = pending.pop()
            for q in predecessors[node]:
                if component[q] < 0:
                    component[q] = root
                    pending.append(q)
    sizes = Counter(component)
    return {p for p in range(len(code)) if sizes[component[p]] > 1 or p in successors[p]}


def _successors(code: tuple) -> list[tuple[int, ...]]:
    """Each position's successors in the thread's control flow (a branch: its target, and the
    next instruction when it is conditional; the last instruction: none)."""
    labels = {ins.name: i for i, ins in enumerate(code) if isinstance(ins, Label)}
    out: list[tuple[int, ...]] = []
    for i, ins in enumerate(code):
        fall = (i + 1,) if i + 1 < len(code) else ()
        if isinstance(ins, Branch):
            out.append((labels[ins.target],) + (fall if ins.cond is not None else ()))
        else:
            out.append(fall)
    return out


def _at_line(message: str, line: int | None) -> UnsupportedConstruct:
    """An :class:`UnsupportedConstruct` that carries the ``line`` it is about (as ``.line``)."""
    error = UnsupportedConstruct(message)
    error.line = line  # type: ignore[attr-defined]
    return error


def _agent(thread: Thread, copy: BulkCopy) -> Thread:
    """The thread that performs ``copy`` for ``thread``: the async-proxy read of its source, then
    the async-proxy write of what it read to its destination."""
    text = copy.label or f"cp.async.bulk {copy.dst}, {copy.src} (copy {copy.copy})"
    if not copy.dst:  # the destination is not followed: the copy reads its source
        code = (Load(AGENT_REGISTER, copy.src, space=copy.src_space, proxy="async", copy=copy.copy, line=copy.line,
                     label=text, ghost=copy.ghost),)
        return Thread(f"{thread.name}.copy{copy.copy}", thread.gpu, thread.cta, code, role=thread.role, phase=thread.phase)
    if copy.value is not None:  # the source is not followed: the copy writes the constant
        code: tuple[Instruction, ...] = (Store(copy.dst, copy.value, space=copy.dst_space, proxy="async", copy=copy.copy,
                                               line=copy.line, label=text, ghost=copy.ghost),)
        return Thread(f"{thread.name}.copy{copy.copy}", thread.gpu, thread.cta, code, role=thread.role, phase=thread.phase)
    return Thread(
        f"{thread.name}.copy{copy.copy}", thread.gpu, thread.cta,
        (Load(AGENT_REGISTER, copy.src, space=copy.src_space, proxy="async", copy=copy.copy, line=copy.line, label=text),
         Store(copy.dst, AGENT_REGISTER, space=copy.dst_space, proxy="async", copy=copy.copy, line=copy.line, label=text)),
        role=thread.role, phase=thread.phase)


# ----- mixed-size accesses: byte-addressed locations (MIXED-SIZE) ------------------------------

def mixed_size_locations(code: list[list[Instruction]]) -> set[str]:
    """The locations some load or store accesses at a byte offset or with fewer than 4 bytes."""
    return {ins.loc for instructions in code for ins in instructions
            if isinstance(ins, (Load, Store)) and ins.footprint is not None and ins.footprint[1:] != (ins.loc, 0, 4)[1:]}


def split_mixed_sizes(code: list[list[Instruction]], memory: dict[str, int]) -> list[list[Instruction]]:
    """Mixed-size accesses (MIXED-SIZE above; syncverify.model.ptx, choice 12): each location of
    :func:`mixed_size_locations` becomes one location per byte, its initial value in ``memory``
    split little-endian (``memory`` is changed), and each access of it one load or store per byte
    (a load's bytes combined into its register); an access without a footprint is of the whole
    4 bytes. Other locations keep whole-location accesses (their footprints dropped). The one
    source of both the litmus parser's and the scenario builder's byte ranges.

    Raises :class:`UnsupportedConstruct` (its ``line`` the instruction's) for what is not
    modelled: an atomic, copy or other instruction on a byte-addressed location, one wider than
    4 bytes, an initial value that does not fit, a store of a register to one."""
    split = mixed_size_locations(code)
    if not split:
        return [[replace(ins, footprint=None) if isinstance(ins, (Load, Store)) else ins for ins in instructions]
                for instructions in code]
    width = {loc: max(_footprint(ins)[1] + _footprint(ins)[2] for instructions in code for ins in instructions
                      if isinstance(ins, (Load, Store)) and ins.loc == loc) for loc in split}
    for instructions in code:
        for ins in instructions:
            named = {getattr(ins, name, None) for name in ("loc", "dst", "src")} & split
            if named and not isinstance(ins, (Load, Store)):
                raise _at_line(f"location {sorted(named)[0]} is accessed with mixed sizes; only ld and st of it "
                               f"are modelled (not {type(ins).__name__})", getattr(ins, "line", None))
    for loc in sorted(split):
        value = memory.pop(loc, 0) & 0xFFFFFFFF
        if width[loc] > 4 or value >> (8 * width[loc]):
            raise _at_line(f"location {loc} is {width[loc]} bytes wide with mixed-size accesses; at most 4 bytes "
                           f"(32-bit values) and an initial value that fits are modelled", None)
        for k in range(width[loc]):
            memory[byte_location(loc, k)] = (value >> (8 * k)) & 0xFF
    out = []
    for instructions in code:
        expanded: list[Instruction] = []
        for ins in instructions:
            if isinstance(ins, (Load, Store)) and ins.loc in split:
                expanded.extend(_bytes_of(replace(ins, footprint=_footprint(ins))))
            elif isinstance(ins, (Load, Store)):
                expanded.append(replace(ins, footprint=None))
            else:
                expanded.append(ins)
        out.append(expanded)
    return out


def _footprint(ins: Load | Store) -> Footprint:
    """An access's footprint: its own, or the whole 4 bytes of its location."""
    return ins.footprint if ins.footprint is not None else (ins.loc, 0, 4)


def _bytes_of(ins: Load | Store) -> list[Instruction]:
    """One access of a byte-addressed location as one load or store per byte (little-endian)."""
    loc, offset, size = ins.footprint  # type: ignore[misc]
    if size > 4:
        raise _at_line(f"a {size}-byte access of {loc}: at most 4 bytes are modelled", ins.line)
    cells = [dict(loc=byte_location(loc, offset + k), footprint=ins.footprint, byte=k) for k in range(size)]
    if isinstance(ins, Store):
        if not isinstance(ins.value, int):
            raise _at_line(f"a store of a register to {loc}, which is accessed with mixed sizes, is not modelled: "
                           f"store a constant", ins.line)
        value = ins.value & 0xFFFFFFFF
        if value >> (8 * size):
            raise _at_line(f"{ins.value} does not fit the {size}-byte store to {loc}", ins.line)
        return [replace(ins, value=(value >> (8 * k)) & 0xFF, **cell) for k, cell in enumerate(cells)]
    if size == 1:
        return [replace(ins, **cells[0])]
    parts = [f"{ins.dst}%b{k}" for k in range(size)]  # '%' keeps them apart from any test register
    out: list[Instruction] = [replace(ins, dst=part, **cell) for part, cell in zip(parts, cells)]
    out.append(RegOp("mov", ins.dst, parts[0], line=ins.line))
    for k in range(1, size):
        out.append(RegOp("mul", parts[k], parts[k], 1 << (8 * k), line=ins.line))
        out.append(RegOp("add", ins.dst, ins.dst, parts[k], line=ins.line))
    return out


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
    op: str  # "==", "!=", "<", "<=", ">" or ">="
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
            return wrap_int32(term)  # compared as the 32-bit value it denotes (syncverify.model.int32)
        if isinstance(term, RegRef):
            return registers.get((term.thread, term.reg), 0)
        return memory[term.loc]

    return COMPARISONS[prop.op](value(prop.lhs), value(prop.rhs))


#: What each comparison of a final condition means.
COMPARISONS = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
               "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


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
    host_order: tuple[tuple[Phase | str, Phase | str], ...] = ()
    # (primary, dependent): programmatic dependent launch (PDL). The dependent's CTAs become
    # resident only once every CTA of the primary has triggered (a write of a PDL_TRIGGER location:
    # griddepcontrol.launch_dependents) or exited; scheduling only, no memory order (explore.residency).
    pdl: tuple[tuple[Phase | str, Phase | str], ...] = ()
    # Groups of interchangeable units (each a tuple of thread indices): see explore's symmetry.
    symmetry: tuple[tuple[tuple[int, ...], ...], ...] = ()
    # (unit a, unit b, location pairs): the locations that renaming the ranks of two units of one
    # symmetry group swaps (every other location stays), where the builder knows them; the
    # explorer's rf-symmetry pruning swaps two units only where they are listed here.
    unit_renamings: tuple[tuple[tuple[int, ...], tuple[int, ...], tuple[tuple[str, str], ...]], ...] = ()
    # Registers whose final values matter (a litmus condition reads them); None: all of them.
    # A scenario observes none: its verdicts come from events, so a poll register is dead after
    # its branch, which lets the explorer drop failed poll iterations (explore.live_registers).
    observed_registers: frozenset[str] | None = None
    # A litmus test's ``filter``: executions whose final state fails it are not counted.
    filter: Prop | None = None
    # Constructs accepted where the PTX ISA is stricter than the reference syntax (one line each).
    warnings: tuple[str, ...] = ()
    # (launch phase, kernel): the compiled kernel each launch runs, for per-SM placement (CTAs of
    # one kernel share an SM's room; explore.placement). A phase not named runs its Phase.kernel,
    # or "kernel" (one kernel for every launch, as one fused kernel per call is).
    kernels: tuple[tuple[Phase | str, str], ...] = ()
    # (launch phase, binary): the compiled binary (module) each launch loads, for lazy loading
    # (explore.residency.first_launches). One kernel compiled for other meta-parameters, argument
    # specializations or launch options is another binary with a first launch of its own (GPU
    # residency run 5); a phase not named loads its kernel's one binary.
    binaries: tuple[tuple[Phase | str, str], ...] = ()

    def __post_init__(self) -> None:
        # Memory and registers are 32-bit (syncverify.model.int32): an initial value is held wrapped.
        object.__setattr__(self, "init", {loc: wrap_int32(v) for loc, v in self.init.items()})
        object.__setattr__(self, "registers", {key: wrap_int32(v) for key, v in self.registers.items()})

    def phases_after(self) -> dict[str, frozenset[str]]:
        """For each phase, the phases the host orders after it (``host_order`` closed transitively).

        Computed once per program (the explorer asks for it per combination of paths)."""
        return self._phases_after

    @functools.cached_property
    def _phases_after(self) -> dict[str, frozenset[str]]:
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

    @functools.cached_property
    def agent_copies(self) -> dict[int, int]:
        """Each agent thread of a bulk copy (ASYNC above), by index, with the copy it performs: a
        thread whose accesses belong to a copy (a rewrite may have added fences between them)."""
        copies = ((t, [ins.copy for ins in thread.instructions
                       if isinstance(ins, (Load, Store, Atomic)) and ins.copy is not None])
                  for t, thread in enumerate(self.threads))
        return {t: found[0] for t, found in copies if found}

    def cta_size(self, thread: Thread) -> int:
        """How many threads of the program share ``thread``'s CTA."""
        return sum(1 for u in self.threads if (u.gpu, u.cta) == (thread.gpu, thread.cta))

    def locations(self) -> tuple[str, ...]:
        """Every location the program touches or initialises, in first-seen order (computed once)."""
        return self._locations

    @functools.cached_property
    def _locations(self) -> tuple[str, ...]:
        seen: dict[str, None] = dict.fromkeys(self.init)
        for thread in self.threads:
            for ins in thread.instructions:
                loc = getattr(ins, "loc", None)
                if loc is not None:
                    seen.setdefault(loc, None)
        return tuple(seen)
