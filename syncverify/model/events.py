"""Events and candidate executions: the plain data the model's relations are computed from.

An :class:`Execution` is a *candidate* execution in the axiomatic sense: the events each thread
performed, program order, and the choices the explorer made (which write each read reads from,
the coherence order of each location, the Fence-SC order, the CTA-barrier instances). Whether it
is allowed is decided by :mod:`syncverify.model.ptx`.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

INIT_THREAD = -1

# ----- tags: an event's kind and semantics (the event sets ``ptx-v6.0.cat`` is written over) ------
# Named once here and refused at construction when they do not pair up, so that a typo in a tag
# is an error where the event is made, not a predicate of syncverify.model.ptx that is silently False.
READ, WRITE, FENCE, BARRIER, ASYNC = "R", "W", "F", "B", "A"
WEAK, RELAXED, ACQUIRE, RELEASE, ACQ_REL, SC = "weak", "relaxed", "acquire", "release", "acq_rel", "sc"
SYNC, ARRIVE, RED = "sync", "arrive", "red"
#: ``fence.proxy.async``: a bi-directional proxy fence (syncverify.model.ptx, choice 11).
PROXY = "proxy"
#: The issuing thread's side of an asynchronous bulk copy (syncverify.model.ptx, choice 11): the
#: issue point, a bulk-group wait (the full form and ``.read``), an mbarrier arrival and wait.
ISSUE, WAIT_GROUP, WAIT_GROUP_READ, MBAR_ARRIVE, MBAR_WAIT = "issue", "wait_group", "wait_group_read", "mbar_arrive", "mbar_wait"
#: An NVSHMEM ordering point (``nvshmem_quiet``, ``nvshmem_fence``): what precedes it precedes the
#: deliveries its thread issues after it (syncverify.model.ptx, choice 13).
ORDER = "order"
#: The memory proxies (PTX ISA, "Proxies"): generic accesses, and the async proxy of ``cp.async.bulk``.
GENERIC, ASYNC_PROXY = "generic", "async"
#: The semantics an event of each kind may carry (PTX ISA: ``ld``, ``st``, ``atom``, ``fence``, ``bar``,
#: ``cp.async.bulk`` and its completion mechanisms).
SEMANTICS: dict[str, frozenset[str]] = {
    READ: frozenset({WEAK, RELAXED, ACQUIRE}),
    WRITE: frozenset({WEAK, RELAXED, RELEASE}),
    FENCE: frozenset({ACQ_REL, SC, PROXY}),
    BARRIER: frozenset({SYNC, ARRIVE, RED}),
    ASYNC: frozenset({ISSUE, WAIT_GROUP, WAIT_GROUP_READ, MBAR_ARRIVE, MBAR_WAIT, ORDER}),
}


@dataclass(frozen=True)
class Event:
    """One memory event, fence or barrier arrival.

    ``kind`` is ``"R"``, ``"W"``, ``"F"`` or ``"B"``. ``sem`` is the event's own semantics: for
    reads ``weak|relaxed|acquire``, writes ``weak|relaxed|release``, fences ``acq_rel|sc``, barriers
    ``sync|arrive|red`` (:data:`SEMANTICS`; any other pair is refused). The two halves of an atomic read-modify-write are two events joined by ``rmw``.
    """

    eid: int
    thread: int  # index into the program's threads; INIT_THREAD for initial writes
    index: int  # position in the thread's program order
    kind: str
    loc: str | None = None
    value: int | None = None
    sem: str = "weak"
    scope: str | None = None
    gpu: int = 0
    cta: int = 0
    barrier_id: int | None = None
    label: str = ""  # what produced it: the instruction text or the protocol step
    line: int | None = None
    ghost: bool = False  # tile data: no rf/co choice (see syncverify.program, GHOST)
    phase: Hashable = ""  # its thread's host phase (a syncverify.program.Phase, or a hand-written name)
    # Barrier arrivals only: the thread count the phase waits for (None: every thread of the
    # CTA that uses the barrier), and for bar.red the operation and this thread's predicate
    # (``value`` holds the reduced result the thread received).
    count: int | None = None
    red_op: str = ""
    predicate: int | None = None
    # A read of a merged path (syncverify.explore.value_classes), in a skeleton only: the values it may
    # return. Executions carry the value of the write it reads from instead.
    values: frozenset[int] | None = None
    # The async proxy (syncverify.model.ptx, choice 11). ``proxy``: the proxy a memory access goes
    # through. ``space``: a memory access's state space (``global``, ``shared::cta``), or the one a
    # proxy fence is limited to ("" for all). ``copies``: the bulk copies an event belongs to (a
    # copy's own read and write, its issue point) or completes (a wait).
    proxy: str = GENERIC
    space: str = ""
    copies: tuple[int, ...] = ()
    # Mixed-size accesses (syncverify.model.ptx, choice 12): the access ``(location, offset, size)``
    # this event is byte ``byte`` of; None for a whole-location access.
    footprint: tuple[str, int, int] | None = None
    byte: int = 0

    def __post_init__(self) -> None:
        if self.sem not in SEMANTICS.get(self.kind, ()):
            raise ValueError(f"an event of kind {self.kind!r} cannot have the semantics {self.sem!r} "
                             f"(kinds and their semantics: syncverify.model.events.SEMANTICS)")
        if self.proxy not in (GENERIC, ASYNC_PROXY):
            raise ValueError(f"proxy {self.proxy!r} is not one of {GENERIC!r}, {ASYNC_PROXY!r}")

    @property
    def is_read(self) -> bool:
        return self.kind == READ

    @property
    def is_write(self) -> bool:
        return self.kind == WRITE

    @property
    def is_memory(self) -> bool:
        return self.kind in (READ, WRITE)

    @property
    def is_fence(self) -> bool:
        return self.kind == FENCE

    @property
    def is_barrier(self) -> bool:
        return self.kind == BARRIER

    @property
    def is_init(self) -> bool:
        return self.thread == INIT_THREAD

    @property
    def is_async_access(self) -> bool:
        """A memory access of a bulk copy, made through the async proxy."""
        return self.proxy == ASYNC_PROXY

    def describe(self) -> str:
        """Short herd-like text: ``W.rel.sys y=1``, ``R.acq.gpu x=0``, ``F.sc.cta``, ``B.sync 0``."""
        short = {"weak": "", "relaxed": ".rlx", "acquire": ".acq", "release": ".rel",
                 "acq_rel": ".acq_rel", "sc": ".sc", "sync": ".sync", "arrive": ".arrive", "red": ".red"}
        tag = short.get(self.sem, "." + self.sem)
        scope = f".{self.scope}" if self.scope else ""
        if self.kind == FENCE and self.sem == PROXY:
            return "F.proxy.async" + (f".{self.space}" if self.space else "")
        if self.kind == FENCE:
            return f"F{tag}{scope}"
        if self.kind == ASYNC:
            target = f" {self.loc}" if self.loc else ""  # an mbarrier event names its mbarrier
            return f"A.{self.sem}{target} copies {','.join(map(str, self.copies)) or '-'}"
        if self.kind == BARRIER:
            count = "" if self.count is None else f", {self.count}"
            red = f".{self.red_op} pred={self.predicate} -> {self.value}" if self.red_op else ""
            return f"B{tag}{red} {self.barrier_id}{count}"
        if self.is_init:
            return f"init {self.loc}={self.value}"
        if self.proxy == ASYNC_PROXY:
            tag = f"{tag}.async"
        if self.value is None:  # a ghost read: which write it sees is decided by syncverify.verdicts.check
            return f"{self.kind}{tag}{scope} {self.loc}"
        return f"{self.kind}{tag}{scope} {self.loc}={self.value}"


@dataclass
class Execution:
    """A candidate execution. Relations over event ids; see :mod:`syncverify.model.ptx` for the model.

    ``stuck`` maps a thread index to why it never terminates: ``("spin", ((loc, value), ...))``
    for a spin loop whose iteration reads those values and cannot exit, or ``("barrier", index,
    barrier id, count, arrived)`` for a thread blocked at a CTA barrier (its local ``index``)
    whose phase never gets the ``count`` arrivals it waits for (``arrived`` came).
    """

    events: tuple[Event, ...]
    thread_names: tuple[str, ...]
    po: frozenset  # immediate-and-transitive program order, pairs of eids
    rf: dict[int, int]  # read eid -> write eid
    # loc -> write eids in *memory order*: one linear extension of coherence (init first). Its last
    # write is the location's final value; when ``co_rel`` is None it is the coherence order itself.
    co: dict[str, tuple[int, ...]]
    rmw: frozenset  # (read eid, write eid) of one atomic
    dep: frozenset  # addr | data | ctrl, pairs (read eid, later eid)
    fence_sc: tuple[int, ...] = ()  # a total order of the fence.sc events (restricted by ms in ptx)
    barrier_sync: frozenset = frozenset()  # arrive/sync -> sync pairs of one barrier instance
    host_order: frozenset = frozenset()  # event pairs ordered by host barriers / stream order
    final_registers: dict[tuple[str, str], int] = field(default_factory=dict)
    stuck: dict[int, tuple] = field(default_factory=dict)
    roles: tuple[object, ...] = ()  # each thread's role (a syncverify.program.ThreadOrigin, or text)
    # The ISA's coherence order as a relation (transitively closed, pairs of write eids): a partial
    # order per location (syncverify.model.ptx, modeling choice 1). None: total, as listed in ``co``.
    co_rel: frozenset | None = None
    _memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def event(self, eid: int) -> Event:
        return self.events[eid]

    @property
    def final_memory(self) -> dict[str, int]:
        """Each location's final value: the last write of its memory order (a coherence-maximal write)."""
        return {loc: self.events[order[-1]].value for loc, order in self.co.items() if order}  # type: ignore[misc]

    @property
    def is_complete(self) -> bool:
        """Every thread ran to its end."""
        return not self.stuck

    def key(self) -> tuple:
        """Identity of the execution (events are determined by the paths, choices by rf/co/sc)."""
        return (
            tuple((e.thread, e.kind, e.loc, e.value, e.sem) for e in self.events),
            tuple(sorted(self.rf.items())),
            tuple(sorted(self.co.items())),
            tuple(sorted(self.co_rel)) if self.co_rel is not None else None,
            self.fence_sc,
        )
