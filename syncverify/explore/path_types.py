"""The data of one thread's paths: its local events, a path, and where the search stands on one.

A :class:`Path` is one way a thread can run (:mod:`syncverify.explore.thread_paths` finds them all);
its :class:`LocalEvent` s are numbered into an execution's events by :mod:`syncverify.explore.skeleton`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LocalEvent:
    """An event of one thread's path, before the execution numbers it."""

    kind: str
    loc: str | None = None
    value: int | None = None
    sem: str = "weak"
    scope: str | None = None
    barrier_id: int | None = None
    count: int | None = None  # barrier arrivals: the phase's thread count (None: every user)
    red_op: str = ""  # bar.red: popc | and | or
    predicate: int | None = None  # bar.red: this thread's predicate, 0 or 1
    rmw_with_previous: bool = False  # the write half of an atomic
    deps: frozenset[int] = frozenset()  # local indices of reads it depends on (data | ctrl)
    label: str = ""
    line: int | None = None
    ghost: bool = False
    # A read of a merged path (syncverify.explore.value_classes): the values it may return (``value`` is
    # None); the write it reads from decides which.
    values: frozenset[int] | None = None
    # The async proxy (syncverify.model.events.Event has the same three fields).
    proxy: str = "generic"
    space: str = ""
    copies: tuple[int, ...] = ()
    footprint: tuple[str, int, int] | None = None  # mixed-size accesses (syncverify.program, MIXED-SIZE)
    byte: int = 0


@dataclass(frozen=True)
class Path:
    """One way a thread can run: its events, final registers, and why it never ends (if so)."""

    events: tuple[LocalEvent, ...]
    registers: tuple[tuple[str, int], ...]
    stuck: tuple | None = None  # ("spin", ((loc, value), ...)); barriers: syncverify.explore.barriers
    # Registers (name, local event index) whose final value is what that read of a merged path
    # returns (syncverify.explore.value_classes); their entry in ``registers`` is None.
    bound: tuple[tuple[str, int], ...] = ()
    # False only for syncverify.explore.launch_order.NEVER_STARTED: the thread's launch never starts.
    started: bool = True


@dataclass(frozen=True)
class PathState:
    """Where one path of a thread stands: what the explicit stack of :func:`thread_paths` holds.

    ``taint`` maps a register to the local indices of the reads its value depends on; ``ctrl`` are
    the reads the branches taken so far depend on. ``seen`` maps (pc, live registers) to where the
    path last was there (its event count) and its full registers then.
    """

    pc: int
    regs: dict[str, int]
    taint: dict[str, frozenset[int]]
    ctrl: frozenset[int]
    events: tuple[LocalEvent, ...]
    seen: dict
    steps: int
    # Registers holding what a read of a value class returned (syncverify.explore.value_classes), with
    # that read's local index: their value is the class's smallest until reads-from decides.
    bound: tuple[tuple[str, int], ...] = ()
