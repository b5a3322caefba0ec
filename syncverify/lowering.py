"""What each protocol step executes, and on which threads of the CTA: the one table both the model
and the PTX audit read.

Seen in triton 3.6's PTX for sm_90 (``../shared/PLATFORM.md``; ``tests/test_ptx_audit.py`` checks
it against the compiler):

* a tile ``tl.store``/``tl.load`` is executed by *every* thread (each owns a slice of the tile);
* a scalar atomic (``tl.atomic_add/xchg/cas`` on one address) is executed by *one* thread
  (predicated); Triton adds a ``bar.sync`` after it only when its result is used (a poll);
* a scalar ``tl.store`` of a flag is executed by one thread;
* inline-PTX fences and ``tl.load(volatile=True)`` polls run on every thread;
* ``tl.debug_barrier()`` is ``bar.sync 0`` on every thread; a ``barrier`` step with an ``id`` or a
  ``count`` is inline PTX ``bar.sync id{, count}`` on every thread (``count`` threads of the CTA
  take part: a count below the CTA's size synchronizes only part of it).

Fences: Triton has no ``tl.atomic_fence`` (PLATFORM.md); our kernels emit inline PTX
``fence.acq_rel.SCOPE`` for ``sem`` release, acquire or acq_rel (PTX has no release-only or
acquire-only ``fence`` at these scopes) and ``fence.sc.SCOPE`` for ``sc``.

A poll loop whose value comes from one thread is broadcast through shared memory and a
``bar.sync`` each iteration. The model keeps only the final iteration's ``bar.sync`` (the one after
the value that exits): the barriers of failed iterations order nothing the last one does not.
"""

from __future__ import annotations

from dataclasses import dataclass

from syncverify.choices import one_of
from syncverify.errors import UnsupportedConstruct

ALL = "all"  # every thread of the CTA
ONE = "one"  # thread 0 only


@dataclass(frozen=True)
class LoweredOp:
    """One PTX-level operation a step lowers to, and who executes it.

    ``kind`` is ``st``, ``ld``, ``atom``, ``fence`` or ``bar``; ``sem``/``scope`` as in PTX
    (``weak`` stores/loads have no scope; a volatile load is ``volatile``).
    """

    kind: str
    threads: str  # ALL or ONE
    sem: str = "weak"
    scope: str | None = None
    op: str = ""  # atom op: add, exch, cas
    poll: bool = False  # part of a poll loop (repeated until the step's condition holds)
    barrier_id: int = 0  # bar: the named barrier (Triton's own bar.sync is barrier 0)
    count: int | None = None  # bar: threads taking part (None: the whole CTA)

    @property
    def bar_operands(self) -> str:
        """A ``bar.sync``'s operands as PTX writes them: ``"1"`` or ``"1,256"``."""
        return str(self.barrier_id) if self.count is None else f"{self.barrier_id},{self.count}"


def barrier_ptx(barrier_id: int, count: int | None) -> str:
    """The inline PTX of a ``barrier`` step, ``""`` for barrier 0 of the whole CTA (which the
    kernels emit as ``tl.debug_barrier()``, itself ``bar.sync 0``).

    >>> barrier_ptx(0, None), barrier_ptx(1, 256), barrier_ptx(2, None)
    ('', 'bar.sync 1, 256;', 'bar.sync 2;')
    """
    if barrier_id == 0 and count is None:
        return ""
    return f"bar.sync {barrier_id}" + ("" if count is None else f", {count}") + ";"


def fence_kind(sem: str) -> str:
    """The PTX fence a protocol ``fence`` step lowers to."""
    one_of("fence sem", sem, ("release", "acquire", "acq_rel", "sc"), error=UnsupportedConstruct)
    return "sc" if sem == "sc" else "acq_rel"


def lower_step(step) -> tuple[LoweredOp, ...]:
    """The operations one protocol step (``syncverify.protocols.model.Step``) lowers to, in order."""
    op = step.op
    if op == "barrier":
        # Barrier 0 with no count is tl.debug_barrier(); any other is inline PTX bar.sync id, count.
        return (LoweredOp("bar", ALL, barrier_id=step.barrier_id or 0, count=step.count),)
    if op == "fence":
        return (LoweredOp("fence", ALL, fence_kind(step.sem), step.scope),)
    if op == "store":
        sem = step.sem or "weak"
        return (LoweredOp("st", ONE, sem, step.scope if sem != "weak" else None),)
    if op in ("atomic_xchg", "atomic_add"):
        return (LoweredOp("atom", ONE, step.sem, step.scope, "exch" if op == "atomic_xchg" else "add"),)
    if op == "atomic_cas":
        if step.until is not None:  # repeated until the value it read holds: used, so bar.sync after it
            return (LoweredOp("atom", ONE, step.sem, step.scope, "cas", poll=True), LoweredOp("bar", ALL))
        return (LoweredOp("atom", ONE, step.sem, step.scope, "cas"),)  # one-off, result unused: no bar.sync
    if op == "await":
        if step.read == "load" and step.sem in ("relaxed", "acquire"):
            # ld.acquire.SCOPE / ld.relaxed.SCOPE: the kernels emit it as tl.atomic_add(p, 0, sem, scope)
            # with a literal 0, which Triton 3.6 lowers to that load on one thread, then bar.sync
            return (LoweredOp("ld", ONE, step.sem, step.scope, poll=True), LoweredOp("bar", ALL))
        if step.read == "load":
            return (LoweredOp("ld", ALL, "weak", None, poll=True),)
        if step.read == "volatile_load":
            return (LoweredOp("ld", ALL, "volatile", "sys", poll=True),)
        if (step.read == "atomic_add" and step.value is not None and step.value.literal == 0
                and step.sem in ("relaxed", "acquire")):
            # Triton 3.6 lowers atomic_add(ptr, 0, sem=acquire|relaxed) to ld.acquire|ld.relaxed on
            # one thread, then bar.sync; with sem=acq_rel (Triton's default) it keeps the
            # atom.add.acq_rel (PLATFORM.md; checked by tests/test_ptx_audit.py).
            return (LoweredOp("ld", ONE, step.sem, step.scope, poll=True), LoweredOp("bar", ALL))
        if step.read in ("atomic_cas", "atomic_add"):
            op_name = "cas" if step.read == "atomic_cas" else "add"
            return (LoweredOp("atom", ONE, step.sem, step.scope, op_name, poll=True), LoweredOp("bar", ALL))
        raise UnsupportedConstruct(f"await read={step.read!r} cannot be lowered")
    raise UnsupportedConstruct(f"protocol step op={op!r} has no lowering (the model cannot interpret it)")


def lower_tile_store(protocol) -> LoweredOp:
    """A tile store (``tl.store`` of a 2-D block, with the protocol's ``tile_store.cache``): a weak
    ``st.global`` on every thread, each thread its own slice. A cache modifier (``.wt``, ``.cg``,
    ``.cs``) picks a cache policy and orders nothing."""
    return LoweredOp("st", ALL, "weak", None)


def lower_tile_load(protocol) -> LoweredOp:
    """A tile load: a weak ``ld.global`` on every thread, or with ``tile_load.volatile`` an
    ``ld.volatile.global``, which PTX treats as relaxed at system scope."""
    if protocol.tile_load.volatile:
        return LoweredOp("ld", ALL, "volatile", "sys")
    return LoweredOp("ld", ALL, "weak", None)
