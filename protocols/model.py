"""The data model of a lock protocol: :class:`Protocol`, its :class:`Step` s, and how tiles move.

A protocol says what a producer does after storing its tile (``signal`` steps) and what a
consumer does before reading tiles (``wait`` steps). It is data: the model
(``syncverify.scenarios.build``) turns it into memory events and the kernels (``syncverify.kernels.steps``)
into Triton code, both from the same :class:`Protocol` object. The classes here hold values that
:mod:`syncverify.protocols.loader` has already checked; their constructors do not validate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from syncverify.protocols.expressions import Expr, Until

__all__ = ["Protocol", "Step", "TileLoad", "TileStore", "Zoo"]


def warp_text(warps) -> str:
    """A set of warps as a protocol file writes it: runs as ``a-b``, joined by commas.

    >>> warp_text((1, 2, 3, 4, 5, 6, 7)), warp_text((0,)), warp_text((0, 2, 3))
    ('1-7', '0', '0,2-3')
    """
    runs: list[list[int]] = []
    for w in sorted(set(warps)):
        if runs and w == runs[-1][1] + 1:
            runs[-1][1] = w
        else:
            runs.append([w, w])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


@dataclass(frozen=True)
class Step:
    """One signal or wait step. Fields that do not apply to ``op`` are ``None``.

    Attributes
    ----------
    op : str
        ``barrier``, ``fence``, ``store``, ``atomic_xchg``, ``atomic_add``, ``atomic_cas``,
        ``await``; any op may appear in any section.
    sem, scope : str or None
        Memory semantics and scope, with defaults already applied. A weak store has
        ``sem="weak"`` and ``scope=None``; load/volatile_load awaits have neither.
    value, compare : Expr or None
        The value written (store, xchg, add, the CAS's new value) and the CAS's compare value.
    cache : str or None
        Cache modifier of a store or of a load/volatile_load poll (``""`` for none).
    to : str or None
        Whose copy of the lock a write goes to: ``all``, ``others``, ``self``, ``owner``.
    from_ : str or None
        Whose copy a wait-side access reads: ``self`` or ``each`` (``from`` in the file).
    lock : str or None
        The lock array (``"ready"`` unless the file names another).
    read : str or None
        How an ``await`` polls: ``load``, ``volatile_load``, ``atomic_cas``, ``atomic_add``.
    until : Until or None
        An ``await``'s exit condition, or an ``atomic_cas`` repeated until the value it read satisfies it.
    barrier_id, count : int or None
        A ``barrier``'s named barrier (0 to 15; ``id`` in the file, default 0) and how many
        threads of the CTA take part (``count``, a multiple of 32, as written; None: not written,
        the threads of ``warps``).
    warps, arrive : tuple of int or None
        A ``barrier``'s warp selection (warps 0 to 7 of the kernels' CTA): the warps that execute
        it (None: every warp) and, of those, the ones that only arrive (``bar.arrive``: they do
        not wait; None: none). The others of ``warps`` wait (``bar.sync``).
    line : int or None
        The step's line in its TOML file, when known (not part of equality).
    bytes : (offset, size) or None
        BYTE RANGES: a ``store`` or a ``load``/``volatile_load`` ``await`` that accesses ``size``
        bytes (1, 2 or 4) at byte ``offset`` of its lock word (an integer, or ``"rank"``: the
        executing rank), as ``bytes = { offset = "rank", size = 1 }`` in the file; None: the
        whole word. The model holds such a lock one location per byte (syncverify.model.ptx,
        choice 12: partial overlap is not morally strong, a read may combine bytes of several
        writes); the fused kernels refuse it (``syncverify.kernels.plan.build_plan``).
    """

    op: str
    sem: str | None = None
    scope: str | None = None
    value: Expr | None = None
    compare: Expr | None = None
    cache: str | None = None
    to: str | None = None
    from_: str | None = None
    lock: str | None = None
    read: str | None = None
    until: Until | None = None
    line: int | None = field(default=None, compare=False)
    barrier_id: int | None = None
    count: int | None = None
    warps: tuple[int, ...] | None = None
    arrive: tuple[int, ...] | None = None
    bytes: tuple[int | str, int] | None = None  # (offset, size) of the lock word: BYTE RANGES below

    @property
    def selects_warps(self) -> bool:
        """Whether a ``barrier`` step is executed by part of the CTA's warps or lets some only arrive."""
        return self.warps is not None or bool(self.arrive)

    @property
    def changes_lock(self) -> bool:
        """Whether the step can change its lock's value, judged from the expressions as written.

        A CAS with ``compare == value`` and an ``atomic_add`` of 0 never do (the model still
        counts them as read-modify-writes); this is what ``reset = "consumer"`` requires.
        """
        if self.op in ("store", "atomic_xchg", "nvshmem_signal_set", "stream_write_value"):
            return True
        if self.op in ("atomic_add", "nvshmem_signal_add") or (self.op == "await" and self.read == "atomic_add"):
            return self.value is not None and self.value.tree != ("int", 0)
        if self.op == "atomic_cas" or (self.op == "await" and self.read == "atomic_cas"):
            return self.compare != self.value
        return False

    def to_dict(self) -> dict[str, Any]:
        """The step as a file would say it: defaults filled in, ``None`` fields left out."""
        out: dict[str, Any] = {"op": self.op}
        for key, attr in (
            ("read", "read"), ("lock", "lock"), ("to", "to"), ("from", "from_"),
            ("compare", "compare"), ("value", "value"), ("cache", "cache"), ("sem", "sem"),
            ("scope", "scope"), ("until", "until"), ("id", "barrier_id"), ("count", "count"),
            ("warps", "warps"), ("arrive", "arrive"), ("bytes", "bytes"),
        ):
            item = getattr(self, attr)
            if item is None:
                continue
            if attr in ("warps", "arrive"):
                item = warp_text(item)
            elif attr == "bytes":
                item = {"offset": item[0], "size": item[1]}
            elif isinstance(item, Expr):
                item = item.to_plain()
            elif isinstance(item, Until):
                item = item.source
            out[key] = item
        return out


@dataclass(frozen=True)
class TileStore:
    """How a producer stores its tile: ``tl.store(..., cache_modifier=cache)``."""

    cache: str = ""


@dataclass(frozen=True)
class TileLoad:
    """How a consumer reads tiles: ``tl.load(..., volatile=volatile)``."""

    volatile: bool = False


@dataclass(frozen=True)
class Zoo:
    """A reported bug's record (the ``[zoo]`` table of a file in ``protocols/zoo/``).

    ``scenario``/``epochs``/``launches``/``push``/``resident``/``resident_order``: how the bug is checked; ``expected``: ``safe`` or
    the violation kinds the model finds, comma-separated (pinned by ``tests/test_zoo.py``);
    ``users_saw``: the symptom reported; ``model_shows``: what the counterexample shows;
    ``source``: the public issue or code it comes from.
    """

    scenario: str
    epochs: int
    launches: str
    expected: str
    users_saw: str
    model_shows: str
    source: str
    push: str = ""
    resident: int | None = None  # CTAs resident per GPU (syncverify.explore.residency); None: all
    resident_order: str = "any"

    def check_options(self) -> dict[str, Any]:
        """The scenario options the bug is checked with (``ScenarioOptions`` fields), one place."""
        out: dict[str, Any] = dict(scenario=self.scenario, epochs=self.epochs, launches=self.launches)
        if self.resident is not None:
            out.update(resident=self.resident, resident_order=self.resident_order)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The table as the file says it."""
        out = dict(scenario=self.scenario, epochs=self.epochs, launches=self.launches, expected=self.expected,
                   users_saw=self.users_saw, model_shows=self.model_shows, source=self.source)
        if self.push:
            out["push"] = self.push
        if self.resident is not None:
            out["resident"], out["resident_order"] = self.resident, self.resident_order
        return out


@dataclass(frozen=True)
class Protocol:
    """A lock protocol: a producer's ``signal`` steps and a consumer's ``wait`` steps.

    Immutable and hashable, so it can key caches and describe a kernel at compile time.
    Build one with :func:`parse_protocol`, :func:`protocol_from_dict` or
    :func:`syncverify.protocols.registry.load_protocol`; the constructor itself does not validate.

    Examples
    --------
    >>> from syncverify.protocols.loader import parse_protocol, protocol_from_dict
    >>> text = '''
    ... name = "tiny"
    ... summary = "release xchg, acquire poll"
    ... origin = "an example"
    ... [[signal]]
    ... op = "atomic_xchg"
    ... value = 1
    ... sem = "release"
    ... [[wait]]
    ... op = "await"
    ... read = "atomic_add"
    ... sem = "acquire"
    ... until = "== 1"
    ... '''
    >>> p = parse_protocol(text, path="tiny.toml")
    >>> p.signal[0].scope, p.wait[0].value, p.locks
    ('gpu', Expr('0'), ('ready',))
    >>> protocol_from_dict(p.to_dict()) == p
    True
    """

    name: str
    summary: str
    origin: str
    signal: tuple[Step, ...]
    wait: tuple[Step, ...]
    reset: str = "host"
    tile_store: TileStore = TileStore()
    tile_load: TileLoad = TileLoad()
    believed: str = ""
    notes: str = ""
    path: str = field(default="<string>", compare=False)
    #: the producer's steps before its tile store (waiting until consumers are done with the buffer)
    before_store: tuple[Step, ...] = ()
    #: the consumer's steps after its tile loads (the back-signal, "done")
    after_load: tuple[Step, ...] = ()
    #: tiles and locks rotate over this many slots: epoch e uses slot e mod slots
    slots: int = 1
    zoo: Zoo | None = None

    @property
    def locks(self) -> tuple[str, ...]:
        """Every lock array the protocol uses, in first-seen order."""
        seen = dict.fromkeys(s.lock for s in self.before_store + self.signal + self.wait + self.after_load
                             if s.lock is not None)
        return tuple(seen)

    def to_dict(self) -> dict[str, Any]:
        """A plain, JSON-ready dict in the file's own layout (``protocol_from_dict`` inverts it)."""
        out: dict[str, Any] = {
            "name": self.name,
            "summary": self.summary,
            "origin": self.origin,
        }
        if self.believed:
            out["believed"] = self.believed
        if self.notes:
            out["notes"] = self.notes
        out["reset"] = self.reset
        if self.slots != 1:
            out["slots"] = self.slots
        out["tile_store"] = {"cache": self.tile_store.cache}
        out["tile_load"] = {"volatile": self.tile_load.volatile}
        if self.before_store:
            out["before_store"] = [s.to_dict() for s in self.before_store]
        out["signal"] = [s.to_dict() for s in self.signal]
        out["wait"] = [s.to_dict() for s in self.wait]
        if self.after_load:
            out["after_load"] = [s.to_dict() for s in self.after_load]
        if self.zoo is not None:
            out["zoo"] = self.zoo.to_dict()
        return out

    @property
    def producer_steps(self) -> tuple[Step, ...]:
        """Every step a producer runs, in order: ``before_store`` then ``signal``."""
        return self.before_store + self.signal

    @property
    def consumer_steps(self) -> tuple[Step, ...]:
        """Every step a consumer runs, in order: ``wait`` then ``after_load``."""
        return self.wait + self.after_load
