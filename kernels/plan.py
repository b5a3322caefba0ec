"""A protocol's steps as the compile-time tuples the kernels branch on.

The kernels do not describe a protocol a second time: they read the same
:class:`syncverify.protocols.model.Protocol` the model reads, through the two functions here.
:func:`signal_plan` and :func:`wait_plan` turn each step into one flat tuple (fields in
:data:`FIELDS` order, built by :func:`make_step`); ``syncverify.kernels.steps`` branches on those fields with ``tl.constexpr``
conditions, so each protocol compiles to straight-line code with no run-time dispatch.

Integer fields (``value``, ``compare``, the ``until`` target) are *operands*:

* ``("c", n)``: an expression without ``epoch``, evaluated here at ``world_size``; it becomes an
  immediate in the PTX. This matters: ``tl.atomic_add(p, 0, sem="acquire")`` lowers to an
  acquire *load* only when the 0 is a compile-time constant.
* ``("r", i)``: an expression in ``epoch``; the host evaluates it at every launch
  (:meth:`KernelPlan.runtime_values`) and passes it in slot ``i`` of a run-time tuple argument.

A step the kernels cannot express raises :class:`syncverify.kernels.errors.UnsupportedStep` here, at build
time, never in a running kernel. Pure Python: importing this module needs neither torch nor
triton (the kernels wrap the tuples in ``tl.constexpr`` themselves).

Examples
--------
>>> from protocols import load_protocol
>>> plan = build_plan(load_protocol("epoch-flag"), world_size=2)
>>> plan.signal[1][:4]
('atomic_add', '', 'release', 'sys')
>>> plan.wait[0][FIELDS.index("target")], plan.runtime_values(epoch=3)
(('r', 1), (3, 8))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from syncverify.protocols import rules
from syncverify.protocols.lowering import barrier_ptx, lower_barrier
from syncverify.validation import one_of
from syncverify.kernels.errors import UnsupportedStep
from syncverify.protocols.expressions import evaluate_at, step_place

#: Field order of a step tuple (the kernels index with the same names in ``syncverify.kernels.steps``).
FIELDS: tuple[str, ...] = (
    "op",  # barrier | fence | store | atomic_xchg | atomic_add | atomic_cas | await
    "read",  # await: load | volatile_load | atomic_cas | atomic_add ("" otherwise)
    "sem",  # as in the protocol; fences keep it for the audit, the PTX is fence.{acq_rel|sc}
    "scope",  # cta | gpu | sys ("" for weak stores and plain/volatile loads)
    "cache",  # tl.store / tl.load cache modifier ("" for none)
    "to",  # signal writes: all | others | self | owner
    "source",  # wait reads: self | each
    "lock",  # index into KernelPlan.locks
    "value",  # operand: ("c", n) or ("r", slot)
    "compare",  # operand (CAS compare)
    "until",  # await exit comparison: == != >= > <= <
    "target",  # operand: the until right-hand side
    "barrier",  # barrier: its inline PTX (syncverify.protocols.lowering.barrier_ptx, warp selections included); "" is tl.debug_barrier()
    "writes",  # True: the step writes the copies `to` names (a signal, or a consumer's back-signal)
)

#: Lock element types the kernels can allocate, and which of them atomics accept.
LOCK_DTYPES: tuple[str, ...] = ("int32", "int8")

_NO_OPERAND = ("c", 0)

#: The value of every field but ``op`` when a step does not set it (:func:`make_step`).
STEP_DEFAULTS: dict[str, Any] = {
    "read": "", "sem": "", "scope": "", "cache": "", "to": "", "source": "", "lock": 0,
    "value": _NO_OPERAND, "compare": _NO_OPERAND, "until": "", "target": _NO_OPERAND,
    "barrier": "", "writes": False,
}


def make_step(*, op: str, **fields: Any) -> tuple:
    """A step tuple (fields in :data:`FIELDS` order) from keyword fields; a field not given takes
    its :data:`STEP_DEFAULTS` value. Every step tuple is built here.

    Raises
    ------
    TypeError
        A keyword that is not one of :data:`FIELDS`.

    Examples
    --------
    >>> make_step(op="fence", sem="acq_rel", scope="gpu")
    ('fence', '', 'acq_rel', 'gpu', '', '', '', 0, ('c', 0), ('c', 0), '', ('c', 0), '', False)
    """
    unknown = sorted(set(fields) - set(STEP_DEFAULTS))
    if unknown:
        raise TypeError(f"make_step: {', '.join(map(repr, unknown))} is not a step field ({', '.join(FIELDS)})")
    fields = dict(STEP_DEFAULTS, op=op, **fields)
    return tuple(fields[name] for name in FIELDS)


@dataclass(frozen=True)
class KernelPlan:
    """What one protocol compiles to at one world size.

    Attributes
    ----------
    protocol : str
        The protocol's name.
    signal, wait : tuple of tuple
        One tuple per step, fields in :data:`FIELDS` order.
    locks : tuple of str
        Lock array names; a step's ``lock`` field indexes this tuple.
    epoch_exprs : tuple
        The ``Expr`` objects of the run-time operand slots 1.. (slot 0 is ``epoch`` itself).
    world_size : int
    tile_store_cache : str
    tile_load_volatile : bool
    lock_dtype : str
    """

    protocol: str
    signal: tuple[tuple, ...]
    wait: tuple[tuple, ...]
    locks: tuple[str, ...]
    epoch_exprs: tuple[Any, ...]
    world_size: int
    tile_store_cache: str
    tile_load_volatile: bool
    lock_dtype: str = "int32"
    #: all-scatter's push stage: the push protocol's steps, on their own lock arrays; its
    #: run-time operands share the slots above (one operand tuple per launch).
    push_protocol: str = ""
    push_signal: tuple[tuple, ...] = ()
    push_wait: tuple[tuple, ...] = ()
    push_locks: tuple[str, ...] = ()
    #: ``(place, field, shown)`` of each of ``epoch_exprs``, for a division by zero at run time
    epoch_places: tuple[tuple[str, str, Any], ...] = ()
    #: the producer's steps before its tile store and the consumer's after its tile loads
    #: (``syncverify.protocols.rules.section_steps``: the owner's device reset included)
    before_store: tuple[tuple, ...] = ()
    after_load: tuple[tuple, ...] = ()
    #: tiles and locks rotate over ``slots`` slots, launch ``epoch`` using ``epoch mod slots``:
    #: lock array ``slot * len(locks) + lock``, data rows ``slot * M ..``
    slots: int = 1

    def runtime_values(self, *, epoch: int) -> tuple[int, ...]:
        """The run-time operand tuple for one launch: ``(epoch, slot1, slot2, ...)``."""
        places = self.epoch_places or tuple((f"protocol {self.protocol!r}", "value", None) for _ in self.epoch_exprs)
        values = (epoch,) + tuple(
            evaluate_at(e, place=place, name=name, shown=shown, world_size=self.world_size, epoch=epoch)
            for e, (place, name, shown) in zip(self.epoch_exprs, places)
        )
        for value in values:
            if not -(2**31) <= value < 2**31:
                raise UnsupportedStep(
                    f"protocol {self.protocol!r}: an operand evaluates to {value} at epoch {epoch}, "
                    "outside int32; run fewer iterations"
                )
        return values

    @property
    def uses_atomics(self) -> bool:
        """Whether any step is an atomic (or a non-weak store, which is inline PTX on 32 bits)."""
        steps = self.before_store + self.signal + self.wait + self.after_load + self.push_signal + self.push_wait
        return any(
            s[0].startswith("atomic") or s[1].startswith("atomic") or (s[0] == "store" and s[2] != "weak")
            for s in steps
        )


class _Operands:
    """Allocates run-time slots for ``epoch``-dependent expressions (slot 0 is ``epoch``)."""

    def __init__(self, world_size: int) -> None:
        self.world_size = world_size
        self.exprs: list[Any] = []
        self.places: list[tuple[str, str, str | None]] = []  # (place, field, shown) of each of exprs

    def operand(self, expr: Any, where: str, *, place: str = "", name: str = "", shown: str | None = None) -> tuple[str, int]:
        if expr is None:
            return _NO_OPERAND
        if "epoch" not in expr.variables:
            value = evaluate_at(expr, place=place or where, name=name or "value", shown=shown,
                                world_size=self.world_size, epoch=0)
            if not -(2**31) <= value < 2**31:
                raise UnsupportedStep(f"{where}: {expr.source!r} = {value} does not fit in int32")
            return ("c", value)
        if expr.tree == ("var", "epoch"):
            return ("r", 0)
        for index, known in enumerate(self.exprs):
            if known == expr:
                return ("r", index + 1)
        self.exprs.append(expr)
        self.places.append((place or where, name or "value", shown))
        return ("r", len(self.exprs))


def _step_tuple(step: Any, section: str, number: int, locks: tuple[str, ...],
                operands: _Operands, where: str, path: str = "") -> tuple:
    at = f"{where}{section} step {number}"
    lock = locks.index(step.lock) if step.lock is not None else 0
    until = step.until.op if step.until is not None else ""
    # a CAS repeated `until` polls like an await whose read is that CAS
    read = step.read or ("atomic_cas" if step.op == "atomic_cas" and step.until is not None else "")
    writes = step.op in ("store", "atomic_xchg", "atomic_add") or (step.op == "atomic_cas" and step.to is not None)
    place = step_place(path, section, number, step.line) if path else at
    target = operands.operand(step.until.rhs if step.until is not None else None, f"{at} until", place=place,
                              name="until", shown=repr(step.until.source) if step.until is not None else None)
    return make_step(
        op=step.op,
        read=read,
        sem=step.sem or "",
        scope=step.scope or "",
        cache=step.cache or "",
        to=step.to or "",
        source=step.from_ or "",
        lock=lock,
        value=operands.operand(step.value, f"{at} value", place=place, name="value"),
        compare=operands.operand(step.compare, f"{at} compare", place=place, name="compare"),
        until=until,
        target=target,
        barrier=barrier_ptx(lower_barrier(step)) if step.op == "barrier" else "",
        writes=writes,
    )


def _check_step(step: Any, section: str, number: int, lock_dtype: str, where: str) -> None:
    at = f"{where}{section} step {number}"
    atomic = step.op.startswith("atomic") or (step.read or "").startswith("atomic")
    one_of("lock dtype", lock_dtype, LOCK_DTYPES, error=UnsupportedStep)
    if lock_dtype == "int8" and (atomic or (step.op == "store" and step.sem != "weak")):
        what = f"op={step.op!r}" + (f" read={step.read!r}" if step.read else "")
        raise UnsupportedStep(
            f"{at}: {what} needs 32-bit locks (Triton has no 8-bit atomics, iris example 10's fix made "
            "its int8 locks int32); use --lock-dtype int32"
        )
    if step.op not in ("barrier", "fence", "store", "atomic_xchg", "atomic_add", "atomic_cas", "await"):
        raise UnsupportedStep(f"{at}: op={step.op!r} has no Triton lowering in syncverify.kernels.steps")
    if getattr(step, "bytes", None) is not None:
        offset, size = step.bytes
        raise UnsupportedStep(f"{at}: bytes = {{ offset = {offset!r}, size = {size} }} (a byte range of the lock "
                              f"word) is not executed by the fused kernels, whose locks are whole 32-bit words; "
                              f"the model checks it (syncverify check), stress and bench cannot run it")


def build_plan(protocol: Any, *, world_size: int, lock_dtype: str = "int32", push: Any = None) -> KernelPlan:
    """Compile-time description of ``protocol`` at ``world_size`` ranks.

    Parameters
    ----------
    protocol : syncverify.protocols.model.Protocol
    push : syncverify.protocols.model.Protocol, optional
        all-scatter's push protocol (``syncverify.scenarios.build.ROLES``): its steps become
        ``push_signal``/``push_wait``.
    world_size : int
        Number of ranks (1..64); expressions without ``epoch`` are evaluated at it.
    lock_dtype : {"int32", "int8"}
        Element type of the lock arrays; ``int8`` refuses atomics (Triton has none on 8 bits).

    Raises
    ------
    UnsupportedStep
        A step the kernels cannot express, with the step's number and the fix.
    """
    if not isinstance(world_size, int) or not 1 <= world_size <= rules.MODEL_MAX_WORLD:
        raise UnsupportedStep(f"world_size={world_size!r} must be an integer in 1..{rules.MODEL_MAX_WORLD}")
    operands = _Operands(world_size)
    sections, locks = _sections(protocol, operands, lock_dtype)
    extra = {}
    if push is not None:
        push_sections, push_locks = _sections(push, operands, lock_dtype)
        if push_sections["before_store"] or push_sections["after_load"] or push.slots != 1:
            raise UnsupportedStep(f"push protocol {push.name!r}: before_store, after_load and slots are run by "
                                  "the kernels in the protocol's own stage only, not in all-scatter's push stage")
        extra = dict(push_protocol=push.name, push_signal=push_sections["signal"],
                     push_wait=push_sections["wait"], push_locks=push_locks)
    return KernelPlan(
        protocol=protocol.name,
        signal=sections["signal"],
        wait=sections["wait"],
        locks=locks,
        epoch_exprs=tuple(operands.exprs),
        epoch_places=tuple(operands.places),
        world_size=world_size,
        tile_store_cache=protocol.tile_store.cache,
        tile_load_volatile=bool(protocol.tile_load.volatile),
        lock_dtype=lock_dtype,
        before_store=sections["before_store"],
        after_load=sections["after_load"],
        slots=protocol.slots,
        **extra,
    )


def _sections(protocol: Any, operands: _Operands, lock_dtype: str) -> tuple[dict, tuple[str, ...]]:
    """One protocol's signal and wait step tuples, and its lock array names."""
    where = f"{protocol.path}: " if getattr(protocol, "path", "") not in ("", "<string>") else ""
    locks = tuple(protocol.locks) or ("ready",)
    sections = {}
    for section in rules.SECTIONS:
        steps = rules.section_steps(protocol, section)
        for number, step in enumerate(steps, start=1):
            _check_step(step, section, number, lock_dtype, where)
        sections[section] = tuple(
            _step_tuple(step, section, number, locks, operands, where, getattr(protocol, "path", "") or protocol.name)
            for number, step in enumerate(steps, start=1)
        )
    return sections, locks


def signal_plan(protocol: Any, *, world_size: int, lock_dtype: str = "int32") -> tuple[tuple, ...]:
    """The ``signal`` steps of ``protocol`` as step tuples (see :func:`build_plan`)."""
    return build_plan(protocol, world_size=world_size, lock_dtype=lock_dtype).signal


def wait_plan(protocol: Any, *, world_size: int, lock_dtype: str = "int32") -> tuple[tuple, ...]:
    """The ``wait`` steps of ``protocol`` as step tuples (see :func:`build_plan`)."""
    return build_plan(protocol, world_size=world_size, lock_dtype=lock_dtype).wait


def step_dict(step: tuple) -> dict[str, Any]:
    """A step tuple as a ``{field: value}`` dict, for messages and tests."""
    return dict(zip(FIELDS, step))
