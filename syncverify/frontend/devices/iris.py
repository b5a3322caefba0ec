"""Iris's device API (``import iris`` in a kernel file) over a symmetric heap, as plain Triton.

A user's kernel that does ``import iris`` and calls ``iris.load(ptr, cur_rank, remote_rank,
heap_bases)`` is checked as written: while a check runs, ``import iris`` gives this module
(:func:`syncverify.frontend.devices.provided`). Every function has the signature of iris's
functional device API (``iris/mem/triton/ops.py`` in ROCm/iris: the rank arguments in iris's
order, ``mask``/``other``/cache modifiers/``volatile``/``hint``, ``sem``/``scope`` on the
atomics) and is written here from that contract, not copied: a pointer of the current rank's
heap is moved to another rank's heap with :func:`translate` (``p - heap_bases[from] +
heap_bases[to]``), then one ordinary ``tl.load``/``tl.store``/``tl.atomic_*`` runs on it. So
the front end's hooks see only Triton primitives, with the sem/scope/cache/volatile the user
wrote, and the same module runs compiled on a GPU (nothing here is interpreter-only).

What each function lowers to (``docs/kernels.md`` lists the same table; a test keeps the two
equal):

* ``translate`` / ``__translate``: two scalar loads of ``heap_bases`` (unwatched memory) and
  pointer arithmetic; no access to the heap.
* ``load``: one ``tl.load`` of the peer's copy; ``store``: one ``tl.store`` into it.
* ``get``: a load of the peer's copy, then a local store; ``put``: a local load, then a store into
  the peer's copy; ``copy``: a load from ``from_rank``'s copy and a store into ``to_rank``'s.
* ``atomic_add/sub/xchg/and/or/xor/min/max/cas``: the same ``tl.atomic_*`` on the peer's copy,
  ``sem``/``scope`` passed through (``None``: Triton's defaults, ``acq_rel`` at ``gpu`` scope,
  as iris documents).

Not provided: iris's object API (``DeviceContext``, ``iris.iris(...)`` on the host: a harness
allocates with ``sv.heap``), the SDMA copy engine (``use_copy_engine=True`` is refused at
compile time by a static assert naming it), and the gluon API. A name that is not here raises
an ``AttributeError`` naming what is covered, never a silent stand-in.

iris targets AMD GPUs; the check reads each access under the PTX model, as if the kernel were
compiled for NVIDIA (the verdict says so).
"""

from __future__ import annotations

import triton
import triton.language as tl

# ----- pointer translation -------------------------------------------------------------------


@triton.jit
def translate(ptr, from_rank, to_rank, heap_bases, hint: tl.constexpr = None):
    """``ptr`` (an address in ``from_rank``'s heap) moved to the same offset of ``to_rank``'s heap.

    ``heap_bases[r]`` is rank ``r``'s heap base address (int64). No memory access but the two
    loads of ``heap_bases``; ``hint`` adds ``tl.multiple_of``/``tl.max_contiguous`` as iris does.
    """
    from_base = tl.load(heap_bases + from_rank)
    to_base = tl.load(heap_bases + to_rank)
    offset = tl.cast(ptr, tl.uint64) - from_base
    moved = tl.cast(tl.cast(to_base, tl.pointer_type(tl.int8)) + offset, ptr.dtype)
    if hint is not None:
        moved = tl.max_contiguous(tl.multiple_of(moved, hint), hint)
    return moved


#: iris's own (module-private) name for the translation; kernels that call it keep working.
__translate = translate


# ----- loads and stores ----------------------------------------------------------------------


@triton.jit
def load(pointer, to_rank, from_rank, heap_bases, mask=None, other=None, cache_modifier=None,
         volatile=False, hint: tl.constexpr = None):
    """Read ``from_rank``'s copy of ``pointer`` (a pointer of ``to_rank``, the current rank).

    Lowers to one ``tl.load`` with the given mask, ``other``, cache modifier and volatility.
    Ordering: none by itself (a weak load, or a volatile one: relaxed at system scope).
    """
    remote = translate(pointer, to_rank, from_rank, heap_bases, hint)
    return tl.load(remote, mask=mask, other=other, cache_modifier=cache_modifier, volatile=volatile)


@triton.jit
def store(pointer, value, from_rank, to_rank, heap_bases, mask=None, hint: tl.constexpr = None,
          cache_modifier=None):
    """Write ``value`` into ``to_rank``'s copy of ``pointer`` (a pointer of ``from_rank``, the current rank).

    Lowers to one ``tl.store``. Ordering: none (a weak store, ``.wt`` included).
    """
    remote = translate(pointer, from_rank, to_rank, heap_bases, hint)
    tl.store(remote, value, mask=mask, cache_modifier=cache_modifier)


@triton.jit
def copy(src_ptr, dst_ptr, from_rank, to_rank, cur_rank, heap_bases, mask=None, other=None,
         load_cache_modifier=None, store_cache_modifier=None, hint: tl.constexpr = None):
    """Copy ``from_rank``'s ``src_ptr`` into ``to_rank``'s ``dst_ptr`` (both pointers of ``cur_rank``).

    Lowers to a ``tl.load`` of ``from_rank``'s copy and a ``tl.store`` into ``to_rank``'s.
    """
    data = load(src_ptr, cur_rank, from_rank, heap_bases, mask, other, load_cache_modifier, False, hint)
    store(dst_ptr, data, cur_rank, to_rank, heap_bases, mask, hint, store_cache_modifier)


@triton.jit
def get(from_ptr, to_ptr, from_rank, to_rank, heap_bases, mask=None, other=None,
        load_cache_modifier=None, store_cache_modifier=None, hint: tl.constexpr = None):
    """Copy ``from_rank``'s ``from_ptr`` into the current rank's (``to_rank``'s) local ``to_ptr``.

    Lowers to a ``tl.load`` of the peer's copy, then a local ``tl.store``.
    """
    data = load(from_ptr, to_rank, from_rank, heap_bases, mask, other, load_cache_modifier, False, hint)
    tl.store(to_ptr, data, mask=mask, cache_modifier=store_cache_modifier)


@triton.jit
def put(from_ptr, to_ptr, from_rank, to_rank, heap_bases, mask=None, other=None,
        load_cache_modifier=None, store_cache_modifier=None, hint: tl.constexpr = None,
        copy_engine_ctx=None, use_copy_engine: tl.constexpr = False):
    """Copy the current rank's (``from_rank``'s) local ``from_ptr`` into ``to_rank``'s ``to_ptr``.

    Lowers to a local ``tl.load``, then a ``tl.store`` into the peer's copy. iris's SDMA copy
    engine is not modeled: ``use_copy_engine=True`` fails to compile, naming it.
    """
    tl.static_assert(not use_copy_engine, "syncverify: iris.put(use_copy_engine=True) (SDMA) is not modeled")
    data = tl.load(from_ptr, mask=mask, other=other, cache_modifier=load_cache_modifier)
    store(to_ptr, data, from_rank, to_rank, heap_bases, mask, hint, store_cache_modifier)


# ----- atomics (sem/scope as iris: None means Triton's acq_rel at gpu scope) -----------------


@triton.jit
def atomic_add(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem=None, scope=None,
               hint: tl.constexpr = None, copy_engine_ctx=None, use_copy_engine: tl.constexpr = False):
    """``tl.atomic_add`` on ``to_rank``'s copy; returns the old value.

    Ordering: that of ``sem`` at ``scope`` (a release add orders this thread's earlier accesses
    before it; a CTA's other threads only through a ``tl.debug_barrier()`` before it).
    """
    tl.static_assert(not use_copy_engine, "syncverify: iris.atomic_add(use_copy_engine=True) (SDMA) is not modeled")
    remote = translate(pointer, from_rank, to_rank, heap_bases, hint)
    return tl.atomic_add(remote, val, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_sub(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem=None, scope=None,
               hint: tl.constexpr = None):
    """``tl.atomic_add`` of ``-val`` on ``to_rank``'s copy (Triton 3.6 has no ``atomic_sub``); returns the old value."""
    remote = translate(pointer, from_rank, to_rank, heap_bases, hint)
    return tl.atomic_add(remote, -val, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_xchg(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem=None, scope=None,
                hint: tl.constexpr = None):
    """``tl.atomic_xchg`` on ``to_rank``'s copy; returns the old value. An exchange overwrites:
    several ranks that each write 1 cannot be counted (seed 000)."""
    remote = translate(pointer, from_rank, to_rank, heap_bases, hint)
    return tl.atomic_xchg(remote, val, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_cas(pointer, cmp, val, from_rank, to_rank, heap_bases, sem=None, scope=None,
               hint: tl.constexpr = None, copy_engine_ctx=None, use_copy_engine: tl.constexpr = False):
    """``tl.atomic_cas`` on ``to_rank``'s copy: writes ``val`` where it equals ``cmp``; returns the old value.

    ``cmp == val`` (``atomic_cas(p, 0, 0, ...)``) is the read-only idiom: an atomic read with ``sem``.
    """
    tl.static_assert(not use_copy_engine, "syncverify: iris.atomic_cas(use_copy_engine=True) (SDMA) is not modeled")
    remote = translate(pointer, from_rank, to_rank, heap_bases, hint)
    return tl.atomic_cas(remote, cmp, val, sem=sem, scope=scope)


@triton.jit
def atomic_and(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem=None, scope=None,
               hint: tl.constexpr = None):
    """``tl.atomic_and`` on ``to_rank``'s copy; returns the old value."""
    remote = translate(pointer, from_rank, to_rank, heap_bases, hint)
    return tl.atomic_and(remote, val, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_or(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem=None, scope=None,
              hint: tl.constexpr = None):
    """``tl.atomic_or`` on ``to_rank``'s copy; returns the old value."""
    remote = translate(pointer, from_rank, to_rank, heap_bases, hint)
    return tl.atomic_or(remote, val, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_xor(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem=None, scope=None,
               hint: tl.constexpr = None):
    """``tl.atomic_xor`` on ``to_rank``'s copy; returns the old value."""
    remote = translate(pointer, from_rank, to_rank, heap_bases, hint)
    return tl.atomic_xor(remote, val, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_min(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem=None, scope=None,
               hint: tl.constexpr = None):
    """``tl.atomic_min`` on ``to_rank``'s copy; returns the old value."""
    remote = translate(pointer, from_rank, to_rank, heap_bases, hint)
    return tl.atomic_min(remote, val, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_max(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem=None, scope=None,
               hint: tl.constexpr = None):
    """``tl.atomic_max`` on ``to_rank``'s copy; returns the old value."""
    remote = translate(pointer, from_rank, to_rank, heap_bases, hint)
    return tl.atomic_max(remote, val, mask=mask, sem=sem, scope=scope)


#: Every device function this module provides, in the order ``docs/kernels.md`` lists them.
DEVICE_API = ("translate", "__translate", "load", "store", "copy", "get", "put", "atomic_add",
              "atomic_sub", "atomic_xchg", "atomic_cas", "atomic_and", "atomic_or", "atomic_xor",
              "atomic_min", "atomic_max")


def __getattr__(name: str):
    """A name iris has but this module does not provide: refused by name (never a silent stand-in)."""
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(name)  # Python's own protocol look-ups (__path__, __wrapped__, ...)
    raise AttributeError(
        f"iris.{name} is not provided by syncverify's iris device API (it covers: {', '.join(DEVICE_API)}); "
        "allocate buffers with sv.heap in the harness, see docs/kernels.md")
