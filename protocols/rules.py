"""The rules a protocol follows inside a scenario, each stated once, for the model and the kernels.

Whatever both sides must agree on lives here and nowhere else: whose lock copy a signal writes
(``to``), whose copy a wait polls (``from``), when a poll loop exits (``until``), who resets locks
between launches, which rank owns a tile, and how many ranks each side can handle. The model
(:mod:`syncverify.scenarios.build`) calls these functions to build its program; the kernels
(:mod:`syncverify.kernels`) take the same answers as compile-time flags (:func:`to_flags`,
:func:`from_flags`) or as host-computed tables (:func:`owner_table`), and the drift test
(``tests/test_drift.py``) fails when what they execute differs from the model's program.

Pure Python: no torch, no triton.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Callable

from syncverify.program import Phase
from syncverify.protocols.expressions import parse_expr_field
from syncverify.protocols.model import Step, warp_text

# ----- ranks ---------------------------------------------------------------------------------

#: The model builds one program over symbolic ranks; past 64 nobody can wait for the answer.
MODEL_MAX_WORLD = 64
#: The kernels unroll per-rank loops (``tl.static_range(WORLD)``) and keep rank bitmasks in int32
#: validation fields: 8 ranks is what one node of GPUs has and what the unrolling stays small for.
KERNEL_MAX_WORLD = 8


# ----- named barriers ------------------------------------------------------------------------

#: Threads of one CTA of the kernels (``KernelConfig.num_warps`` = 8 warps of 32): what a
#: protocol barrier's ``count`` is measured against.
KERNEL_CTA_THREADS = 8 * 32
WARP_SIZE = 32
#: Warps of one CTA of the kernels, numbered 0 to 7 (warp ``w`` is threads ``32w .. 32w + 31``).
#: Warp 0 holds thread 0, which runs every one-thread operation (scalar atomics, flag stores,
#: the read of each poll; :mod:`syncverify.protocols.lowering`).
KERNEL_WARPS = KERNEL_CTA_THREADS // WARP_SIZE
ALL_WARPS: tuple[int, ...] = tuple(range(KERNEL_WARPS))
#: Model threads per CTA that split the kernels' warps into equal consecutive groups.
WARP_GROUPINGS: tuple[int, ...] = tuple(t for t in range(1, KERNEL_WARPS + 1) if KERNEL_WARPS % t == 0)


def model_warps(thread: int, threads_per_cta: int) -> tuple[int, ...]:
    """The kernel warps model thread ``thread`` of ``threads_per_cta`` stands for (equal,
    consecutive shares; thread 0's share holds warp 0).

    >>> model_warps(0, 2), model_warps(1, 2), model_warps(3, 8)
    ((0, 1, 2, 3), (4, 5, 6, 7), (3,))
    """
    share = KERNEL_WARPS // threads_per_cta
    return tuple(range(thread * share, (thread + 1) * share))


def model_threads_per_cta(asked: int, selections) -> int:
    """The model threads per CTA a scenario is built with: ``asked`` (``--threads-per-cta``),
    raised to the fewest that give each barrier step's warp selection whole model threads.

    ``selections`` are the warp sets barrier steps select (the warps that take part, the warps
    that only arrive). A model thread stands for an equal share of the kernels' 8 warps and
    executes a barrier step as all of its warps do, so a selection must be a union of shares:
    warps ``1-7`` need one model thread per warp. Without selections ``asked`` stands.

    >>> model_threads_per_cta(2, []), model_threads_per_cta(2, [(0, 1, 2, 3)]), model_threads_per_cta(2, [(1, 2)])
    (2, 2, 8)
    """
    selections = [frozenset(s) for s in selections if s is not None]
    if not selections:
        return asked
    for threads in WARP_GROUPINGS:
        if threads >= asked and all(
                all(set(model_warps(t, threads)) <= s or not set(model_warps(t, threads)) & s
                    for t in range(threads)) for s in selections):
            return threads
    return KERNEL_WARPS


def barrier_id_clash(steps) -> tuple[str, str, int] | None:
    """The first two barrier steps of one CTA, in the order it runs them, that share an id while
    one of them selects warps: ``(first place, second place, id)``, or None.

    ``steps`` are ``(place, step)`` pairs. At a step that selects warps (``warps``, ``arrive``)
    the warps do different things (skip it, only arrive, wait), so some can reach the next
    step with the same id while the others are still in the first step's phase: their arrivals
    would join it and the phase would complete with the wrong warps, or never. So such a step
    needs an id of its own, in its protocol (the loader) and in a CTA that runs two protocols
    (all-scatter's comm CTA: the protocol's wait, then the push protocol's signal).
    """
    seen: dict[int, tuple[str, object]] = {}
    for place, step in steps:
        if step.op != "barrier":
            continue
        barrier_id = step.barrier_id or 0
        first_place, first = seen.setdefault(barrier_id, (place, step))
        if first is not step and (step.selects_warps or first.selects_warps):
            return first_place, place, barrier_id
    return None


BARRIER_ID_CLASH = ("a barrier step that selects warps (warps, arrive) needs an id of its own, or warps that skip or "
                    "only arrive at one step reach the other while the rest are still in the first step's phase; "
                    "give one of them another id")


# ----- to: whose lock copy a signal write goes to ---------------------------------------------

@dataclass(frozen=True)
class Targets:
    """Which ranks' copies a signal writes, relative to the signalling rank: its own, every other
    rank's, or the copy of the rank that consumes the tile (``owner``). ``all`` and ``others``
    write one copy per rank, in rank order."""

    own: bool
    others: bool
    owner: bool


TO: dict[str, Targets] = {
    "self": Targets(own=True, others=False, owner=False),
    "others": Targets(own=False, others=True, owner=False),
    "all": Targets(own=True, others=True, owner=False),
    "owner": Targets(own=False, others=False, owner=True),
}


def signal_targets(to: str | None, rank: int, owner: int, world_size: int) -> list[int]:
    """The ranks whose copy of a lock a signal step writes, in the order it writes them.

    >>> signal_targets("others", 1, 0, 3), signal_targets("owner", 2, 0, 3)
    ([0, 2], [0])
    """
    t = TO[to or "self"]
    if t.owner:
        return [owner]
    return [d for d in range(world_size) if (d == rank and t.own) or (d != rank and t.others)]


def to_flags(to: str | None) -> tuple[bool, bool, bool]:
    """``(own, others, owner)`` for a kernel's compile-time branches (the same table)."""
    t = TO[to or "self"]
    return (t.own, t.others, t.owner)


# ----- from: whose lock copy a wait polls ----------------------------------------------------

#: ``self``: the waiting rank's own copy; ``each``: every rank's copy, in rank order.
FROM: tuple[str, ...] = ("self", "each")


def wait_sources(from_: str | None, rank: int, world_size: int) -> list[int]:
    """The ranks whose copy of a lock a wait step polls (or CASes), in order."""
    if (from_ or "self") == "self":
        return [rank]
    return list(range(world_size))


def from_flags(from_: str | None) -> bool:
    """Whether a kernel's wait step loops over every rank's copy (``each``)."""
    return (from_ or "self") == "each"


# ----- until: when a poll loop exits ---------------------------------------------------------

UNTIL_OPS: dict[str, Callable[[int, int], bool]] = {
    "==": operator.eq, "!=": operator.ne, ">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt,
}


def until_holds(op: str, observed: int, target: int) -> bool:
    """Whether a poll that read ``observed`` leaves its loop: ``observed OP target``."""
    return UNTIL_OPS[op](observed, target)


def loop_back(op: str, target: int) -> tuple[str, int]:
    """The branch ``(condition, value)`` that repeats a poll while ``observed OP target`` fails,
    with conditions ``eq ne lt ge`` on integers (the model's :class:`~syncverify.program.Branch`)."""
    return {"==": ("ne", target), "!=": ("eq", target), ">=": ("lt", target), ">": ("lt", target + 1),
            "<=": ("ge", target + 1), "<": ("ge", target)}[op]


# ----- resets between launches ---------------------------------------------------------------

#: What the host does to a protocol's locks between two launches:
#: ``none``: nothing, locks carry over; ``host-between-barriers``: zeroes them between two host
#: barriers (seed 001's fix: every rank's launch is ordered after the zeroing);
#: ``host-racing``: zeroes them on another stream, unordered with the next launch (seed 001's bug).
RESET_POLICIES: tuple[str, ...] = ("none", "host-between-barriers", "host-racing")

#: A protocol's own ``reset`` field -> its default policy.
PROTOCOL_RESET: dict[str, str] = {"host": "host-between-barriers", "consumer": "none", "owner": "none",
                                  "none": "none"}


#: The mapping above in words, for ``--help`` and messages that name one side of it.
RESET_MAPPING = "the protocol's reset field: host -> host-between-barriers, consumer/owner/none -> none"

#: ``reset = "owner"``: the device resets, not the host. After its tile loads, the consumer (the
#: owner of the lock copies it polls) stores 0 into its own copy of each lock it polled with
#: ``from = "self"``, one ``st.relaxed.sys`` per lock (producers on other GPUs write that copy, so
#: the store must be strong at system scope to be ordered with their atomics in coherence).
OWNER_RESET_SEM = "relaxed"
OWNER_RESET_SCOPE = "sys"


def owner_resets(protocol) -> tuple:
    """The steps of a ``reset = "owner"`` protocol's device-side reset, run after ``after_load``
    (empty for the other policies). Both the model and the kernel plans run them as steps."""
    if protocol.reset != "owner":
        return ()
    locks = dict.fromkeys(s.lock for s in protocol.wait if s.op == "await" and (s.from_ or "self") == "self")
    zero = parse_expr_field(0, "value")
    return tuple(Step("store", sem=OWNER_RESET_SEM, scope=OWNER_RESET_SCOPE, value=zero, to="self", lock=lock)
                 for lock in locks)


#: The protocol's step lists in the order a tile meets them; ``after_load`` ends with the owner's
#: reset (:func:`owner_resets`). The one place both sides read a protocol's sections from.
SECTIONS: tuple[str, ...] = ("before_store", "signal", "wait", "after_load")


def section_steps(protocol, section: str) -> tuple:
    """The steps of ``section`` as the model and the kernels run them (the owner reset included)."""
    steps = tuple(getattr(protocol, section, ()))
    return steps + owner_resets(protocol) if section == "after_load" else steps


# ----- slots and launches ----------------------------------------------------------------------

def slot(epoch: int, slots: int) -> int:
    """The slot of tiles and locks that launch ``epoch`` uses: ``epoch mod slots``.

    >>> [slot(e, 2) for e in range(4)]
    [0, 1, 0, 1]
    """
    return epoch % slots


#: How launches (epochs) are ordered: ``host-barrier``: every rank's launch ``k`` finishes before
#: any rank's launch ``k + 1`` starts (a host barrier between calls); ``per-rank-stream``: only each
#: GPU's own stream orders its launches, so rank 0's call ``k + 1`` may run while rank 1 is still
#: in call ``k`` (what a library call without a barrier gives; buffer reuse bugs need it).
LAUNCH_ORDERS: tuple[str, ...] = ("host-barrier", "per-rank-stream", "two-stream", "pdl", "pdl-no-wait")
#: Launch modes that launch the producing roles (the ``gemm`` kernel) and the consuming roles (the
#: ``comm`` kernel) as two kernels: ``two-stream`` on two streams, concurrent (the seeds' one-shot
#: all-reduce); ``pdl`` the consumer launched after the producer on one stream with programmatic
#: dependent launch (the producer triggers ``griddepcontrol.launch_dependents`` first thing, the
#: consumer runs ``griddepcontrol.wait`` first thing); ``pdl-no-wait`` the same without the wait.
SPLIT_LAUNCHES: tuple[str, ...] = ("two-stream", "pdl", "pdl-no-wait")

#: ``--reset``'s help text (check and stress).
RESET_HELP = f"none | host-between-barriers | host-racing (default: from {RESET_MAPPING})."


def describe_reset(policy: str, protocol_reset: str) -> str:
    """The reset policy as a verdict line names it, with the protocol field it comes from.

    >>> print(describe_reset("host-between-barriers", "host"))
    host-between-barriers (the protocol's reset = "host")
    >>> print(describe_reset("none", "host"))
    none (from --reset; the protocol's reset = "host" gives host-between-barriers)
    """
    if policy == PROTOCOL_RESET[protocol_reset]:
        return f'{policy} (the protocol\'s reset = "{protocol_reset}")'
    return f'{policy} (from --reset; the protocol\'s reset = "{protocol_reset}" gives {PROTOCOL_RESET[protocol_reset]})'


def reset_policy(protocol_reset: str, override: str | None = None) -> str:
    """The reset policy for a protocol's locks: ``override`` if given, else its own field's."""
    return override if override is not None else PROTOCOL_RESET[protocol_reset]


# ----- tiles: who owns (consumes, reduces) which ---------------------------------------------

#: ``striding``: tile ``t`` belongs to rank ``t % W``; ``block``: contiguous ranges of ``ceil(T / W)``.
DISTRIBUTIONS: tuple[str, ...] = ("striding", "block")


def tile_owner(tile: int, tiles: int, world_size: int, distribution: str) -> int:
    """The rank that consumes ``tile`` of ``tiles``.

    >>> [tile_owner(t, 5, 2, "striding") for t in range(5)], [tile_owner(t, 5, 2, "block") for t in range(5)]
    ([0, 1, 0, 1, 0], [0, 0, 0, 1, 1])
    """
    if distribution == "striding":
        return tile % world_size
    return tile // math.ceil(tiles / world_size)


def owner_table(tiles: int, world_size: int, distribution: str) -> list[int]:
    """:func:`tile_owner` of every tile: the table the kernels read (one rule, host-computed)."""
    return [tile_owner(t, tiles, world_size, distribution) for t in range(tiles)]


def owned_tiles(rank: int, tiles: int, world_size: int, distribution: str) -> list[int]:
    """The tiles ``rank`` owns, in increasing order."""
    return [t for t in range(tiles) if tile_owner(t, tiles, world_size, distribution) == rank]


def loop_tiles(sequence: list[int], ctas: int | None) -> list[tuple[int, ...]]:
    """The tiles each program of a role handles, in its loop's order: the fused kernels' roles are
    persistent (``syncverify.kernels.roles``: ``for i in range(first, n, SMS)``), program ``c``
    taking the positions ``c, c + ctas, c + 2 * ctas, ...`` of the role's tile ``sequence`` one
    after another, on the same CTA-scoped resources (named barriers, shared memory). A position
    whose entry is None is a tile the program visits and skips (an ``owner-only`` producer's tile
    of another rank). ``ctas`` None: one program per tile. Programs with no tile are left out.

    >>> loop_tiles([0, 1, 2], 2), loop_tiles([0, None, 2, None], 1), loop_tiles([0, 1], None)
    ([(0, 2), (1,)], [(0, 2)], [(0,), (1,)])
    """
    if ctas is None:
        return [(t,) for t in sequence if t is not None]
    loops = (tuple(t for t in sequence[c::ctas] if t is not None) for c in range(ctas))
    return [loop for loop in loops if loop]


def grouped_tile(i: int, rows: int, columns: int, group_m: int) -> int:
    """The row-major index of the ``i``-th of ``rows x columns`` tiles in grouped order: ``group_m``
    rows at a time, down each column of the group, then the next column (``group_m`` 1:
    row-major). The arithmetic of the kernels' ``tile_of`` (``syncverify.kernels.tile``, Triton
    code); ``tests/test_drift.py`` traces the kernels' order against :func:`unit_visits`.

    >>> [grouped_tile(i, 3, 2, 2) for i in range(6)], [grouped_tile(i, 2, 3, 1) for i in range(6)]
    ([0, 2, 1, 3, 4, 5], [0, 1, 2, 3, 4, 5])
    """
    if group_m == 1:
        return i
    per_group = group_m * columns
    first_m = (i // per_group) * group_m
    height = min(rows - first_m, group_m)
    return (first_m + (i % per_group) % height) * columns + (i % per_group) // height


def gemm_units(columns: int, after_load: bool) -> int:
    """Units of work per tile of all-gather-gemm's GEMM programs (its kernel's ``UNITS``): each of
    the tile's ``columns`` column tiles of C its own unit, spread over the programs; one unit (a
    whole tile, every column tile) when the protocol has ``after_load`` steps, whose back-signal
    counts a tile's readers (one reader per tile and rank).

    >>> gemm_units(3, False), gemm_units(3, True)
    (3, 1)
    """
    return 1 if after_load else columns


def unit_visits(tiles: int, units: int, ctas: int, group_m: int = 1) -> list[tuple[tuple[int, tuple[int, ...]], ...]]:
    """What each of ``ctas`` persistent programs visits when every tile is ``units`` units of work
    (all-gather-gemm's GEMM programs, ``syncverify.kernels.roles.consumer`` with ``UNITS`` > 1):
    program ``c`` takes units ``c, c + ctas, ...`` of the ``tiles x units`` grid in grouped order
    (:func:`grouped_tile`), unit ``u`` being column tile ``u % units`` of tile ``u // units``.
    A visit is ``(tile, its column tiles)``: the program waits for the tile when it comes to it
    and again when it comes back after another tile. Programs with nothing to do are left out.

    >>> unit_visits(2, 3, 2)
    [((0, (0, 2)), (1, (1,))), ((0, (1,)), (1, (0, 2)))]
    >>> unit_visits(1, 2, 3)
    [((0, (0,)),), ((0, (1,)),)]
    """
    out = []
    for c in range(ctas):
        visits: list[tuple[int, list[int]]] = []
        for j in range(c, tiles * units, ctas):
            tile, column = divmod(grouped_tile(j, tiles, units, group_m), units)
            if visits and visits[-1][0] == tile:
                visits[-1][1].append(column)
            else:
                visits.append((tile, [column]))
        if visits:
            out.append(tuple((t, tuple(columns)) for t, columns in visits))
    return out


def ownership_table(tiles: int, world_size: int, distribution: str) -> list[int]:
    """Who owns what, as the one int32 array the kernels read instead of computing it again:
    ``[owner of each tile (T) | tiles each rank owns (W) | each rank's tiles, ceil(T / W) a row,
    padded with -1]``.

    >>> ownership_table(5, 2, "block")
    [0, 0, 0, 1, 1, 3, 2, 0, 1, 2, 3, 4, -1]
    """
    per_rank = -(-tiles // world_size)
    owned = [owned_tiles(r, tiles, world_size, distribution) for r in range(world_size)]
    assert all(len(o) <= per_rank for o in owned)
    rows = [t for o in owned for t in o + [-1] * (per_rank - len(o))]
    return owner_table(tiles, world_size, distribution) + [len(o) for o in owned] + rows


def launch_phase(epoch: int, rank: int, launches: str, kernel: str = "") -> Phase:
    """The host phase of ``rank``'s launch ``epoch``: ``e1`` for every rank with a host barrier
    between launches, ``e1.r0`` per rank when only each rank's stream orders them, ``e1.comm``
    for the ``comm`` kernel of a :data:`SPLIT_LAUNCHES` mode.

    >>> str(launch_phase(1, 0, "host-barrier")), str(launch_phase(2, 0, "per-rank-stream"))
    ('e1', 'e2.r0')
    >>> str(launch_phase(0, 1, "pdl", "comm"))
    'e0.comm'
    """
    if launches in SPLIT_LAUNCHES:
        return Phase("launch", epoch, None, kernel)
    return Phase("launch", epoch, None if launches == "host-barrier" else rank)
