"""What a run of a user's program records: where an operation comes from in the user's source
(:class:`Site`), which memory element it touches (:class:`Loc`), and what one model thread did at
one step (:class:`Item`). Plain data, shared by the runner and the inline-asm reader."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Site:
    """Where an operation comes from in the user's source."""

    file: str
    line: int
    function: str
    kernel: str
    text: str = ""

    def __str__(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line}"


@dataclass(frozen=True)
class Loc:
    """A memory element: ``buffer`` (an allocation's name), rank copy (None: not in the heap), index."""

    buffer: str
    rank: int | None
    index: int

    def __str__(self) -> str:
        where = "" if self.rank is None else f"@{self.rank}"
        return f"{self.buffer}{where}[{self.index}]"


@dataclass
class Item:
    """What one model thread did at one step of a run.

    ``kind``: ``ld``/``st``/``atom`` (plain accesses: ``locs`` are ghost or constant-free data),
    ``read`` (a choice point: one location's value), ``fence``, ``bar``, ``oob`` (an access
    outside every allocation), ``gdc`` (``griddepcontrol.wait``/``launch_dependents``: ``op``). ``key``: the state at a choice point (None: not a possible loop head).
    """

    kind: str
    site: Site
    site_key: tuple
    locs: tuple = ()
    sem: str = "weak"
    scope: str | None = None
    op: str = ""  # atom op / read: "ld", "atom" or "bcast"
    operands: tuple = ()
    values: tuple = ()  # st: one value per loc
    unsigned: bool = False
    scalar_one: bool = False  # a scalar op of thread 0 (bar.sync after it when its result is used)
    key: Any = None
    descriptor: bool = False
    choice: int | None = None  # read: its choice index in the run
    barrier_id: int = 0
    count: int | None = None
    fence_kind: str = ""
    delivery: Any = None  # put: an NVSHMEM call's Delivery (syncverify.frontend.runner)
    parts: tuple = ()  # mixed sizes: per loc, (byte, size) of the element accessed, or None for all of it
    width: int | None = None  # asm-memory: the bytes its PTX type names (.b8: 1), None when it names none
