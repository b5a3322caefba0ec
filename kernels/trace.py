"""Record what a kernel does to its heap, per program, by running it in Triton's interpreter.

:func:`recording` hooks the *primitive* Triton operations, not our helper modules, so it keeps
working when helpers move between modules:

* memory operations: triton 3.6's interpreter implements ``tl.load``/``tl.store``/
  ``tl.atomic_*`` by calling ``triton.runtime.interpreter.interpreter_builder``'s
  ``create_load``/``create_masked_load``/``create_store``/``create_masked_store``/
  ``create_atomic_rmw``/``create_atomic_cas`` with the pointer array (absolute addresses), the
  cache modifier or volatility, and ``sem``/``scope``; ``tl.debug_barrier()`` calls
  ``create_barrier``. Each call is recorded once (``create_load`` calls ``create_masked_load``:
  only the outer call counts). A ``tl.dot`` (``create_dot``) is logged as its barrier,
  ``syncverify.protocols.lowering.lower_dot``'s ``bar.sync 0``, marked ``DOT_MARK``.
* a protocol barrier: ``named_barrier`` (its ``PTX`` and ``INTERPRET`` parameters) is logged as a
  ``bar`` with its operands and, for one that selects warps, what each warp does there (read
  back from its PTX by ``syncverify.protocols.lowering.read_barrier_ptx``); its interpreter form does nothing.
* inline PTX the interpreter skips: a jit helper with ``SEM``, ``SCOPE`` and ``INTERPRET``
  parameters is one whose compiled form is inline PTX (``fence``, a non-weak ``store_flag``) and
  whose interpreter form is not. Called with ``INTERPRET`` true, such a helper is recorded as a
  ``fence`` when it makes no memory access, and otherwise lends its ``SEM``/``SCOPE`` to the plain
  loads and stores it makes (the interpreter path of ``st.release`` is a ``tl.store``).
* whether an atomic's result is used: Triton broadcasts a used scalar atomic result through a
  ``bar.sync`` (``syncverify.protocols.lowering``). The recorder hands out the result as a handle that notes
  when the interpreter reads its value.
* constants: an operand made by the interpreter builder's ``get_int*`` (a literal in the
  kernel) is marked constant, so ``atomic_add(p, 0, sem="acquire")`` can be told from an add of
  a run-time 0 (only the first lowers to an acquire load).

Each access is mapped to ``(buffer, rank copy, index in the copy)`` through the data pointers of
the tensors it was told about (:meth:`Recorder.watch`); accesses to other memory (inputs, status
rows, run-time operands) are kept with ``buffer=None``. The interpreter runs one program after
another, so the log of one launch is in program order per program (``pid``).
"""

from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass, field

import numpy as np
import triton.runtime.interpreter as _interp
from syncverify.kernels import _jit
from syncverify.protocols import lowering
from syncverify.protocols.lowering import DOT_MARK, read_barrier_ptx
from triton._C.libtriton import ir

_SEM = {ir.MEM_SEMANTIC.ACQUIRE: "acquire", ir.MEM_SEMANTIC.RELEASE: "release",
        ir.MEM_SEMANTIC.RELAXED: "relaxed", ir.MEM_SEMANTIC.ACQUIRE_RELEASE: "acq_rel"}
_SCOPE = {ir.MEM_SYNC_SCOPE.GPU: "gpu", ir.MEM_SYNC_SCOPE.CTA: "cta", ir.MEM_SYNC_SCOPE.SYSTEM: "sys"}
_RMW = {ir.ATOMIC_OP.ADD: "add", ir.ATOMIC_OP.XCHG: "exch", ir.ATOMIC_OP.MAX: "max",
        ir.ATOMIC_OP.MIN: "min", ir.ATOMIC_OP.AND: "and", ir.ATOMIC_OP.OR: "or", ir.ATOMIC_OP.XOR: "xor"}


@dataclass
class Access:
    """One primitive operation of one program, as the interpreter executed it.

    ``kind``: ``ld``, ``st``, ``atom``, ``fence`` or ``bar``; ``op``: the atomic's op (``add``,
    ``exch``, ``cas``); ``sem``/``scope`` as Triton was given them (``weak`` plain accesses,
    ``volatile`` loads); ``buffer``/``copy``/``index``: which watched tensor, whose copy and the
    element indexes in it (None: unwatched memory); ``scalar``: one element (Triton runs a scalar
    store or atomic on one thread, a block access on every thread); ``operands``: the values an
    atomic or store wrote (and a CAS's compare first), ``constant`` whether they were literals;
    ``used``: an atomic's result was read afterwards; ``seen``: what a read returned (scalar).
    """

    pid: int
    kind: str
    op: str = ""
    sem: str = "weak"
    scope: str | None = None
    cache: str = ""
    buffer: str | None = None
    copy: int | None = None
    index: np.ndarray | None = field(default=None, repr=False)
    scalar: bool = True
    operands: tuple = ()
    constant: bool = False
    used: bool = False
    seen: int | None = None
    proxy: str = "generic"  # "async": a tensor-descriptor (TMA) load or store (issue 26)


@dataclass
class _Watched:
    name: str
    base: int
    elements: int  # per rank copy
    ranks: int
    itemsize: int


#: Interpreter builder methods that make a literal (``scalar_constant``: 0 is a "null value").
_CONSTANTS = ("get_null_value", "get_int32", "get_int64", "get_uint32", "get_uint64")


class Recorder:
    """The accesses of interpreted launches, in execution order (see :func:`recording`)."""

    def __init__(self) -> None:
        self.log: list[Access] = []
        self.watched: list[_Watched] = []
        self._depth = 0
        self._helpers: list[dict] = []  # active SEM/SCOPE/INTERPRET helper frames
        self._descriptor = 0  # inside a tensor-descriptor load or store: its accesses are the async proxy's

    def watch(self, name: str, tensor, *, rank_stride: int | None = None) -> None:
        """Name the accesses to ``tensor`` (``[ranks, ...]``; rank ``r``'s copy ``rank_stride``
        elements after rank ``r - 1``'s, as in ``syncverify.kernels.heap.VirtualHeap``)."""
        stride = rank_stride if rank_stride else tensor[0].numel()
        self.watched.append(_Watched(name, tensor.data_ptr(), stride, tensor.shape[0], tensor.element_size()))

    def where(self, addresses: np.ndarray) -> tuple[str | None, int | None, np.ndarray | None]:
        """``(buffer, copy, element indexes in the copy)`` of a pointer array (one buffer, one copy)."""
        flat = addresses.reshape(-1).astype(np.int64)
        for w in self.watched:
            off = flat - w.base
            if off.min() >= 0 and off.max() < w.elements * w.ranks * w.itemsize:
                elements = off // w.itemsize
                copies = np.unique(elements // w.elements)
                if len(copies) != 1:
                    raise AssertionError(f"one access spans copies {copies.tolist()} of {w.name}")
                return w.name, int(copies[0]), elements % w.elements
        return None, None, None

    # ----- what the hooks call -------------------------------------------------------------------
    def _pid(self) -> int:
        return int(_interp.interpreter_builder.grid_idx[0])

    def memory(self, kind: str, ptrs, *, op: str = "", sem: str = "weak", scope: str | None = None,
               cache: str = "", operands=(), constant: bool = False) -> Access:
        buffer, copy, index = self.where(ptrs.data)
        if kind in ("ld", "st") and self._helpers:
            helper = self._helpers[-1]
            helper["accessed"] = True
            if helper["sem"] not in ("", "weak"):
                sem, scope = helper["sem"], helper["scope"]
        access = Access(self._pid(), kind, op, sem, scope, cache or "", buffer, copy, index,
                        ptrs.data.size == 1, tuple(operands), constant,
                        proxy="async" if self._descriptor else "generic")
        self.log.append(access)
        return access

    def fence(self, sem: str, scope: str) -> None:
        self.log.append(Access(self._pid(), "fence", sem=sem, scope=scope))

    def barrier(self, ptx: str = "") -> None:
        """A barrier step (or ``tl.debug_barrier()``): ``op`` holds its operands as PTX writes them
        (``"0"``, ``"1,256"``), ``sem`` what each warp does at one that selects warps
        (``syncverify.protocols.lowering.barrier_split``: ``"sync 0 arrive 1-7"``; ``""`` for the whole CTA)."""
        operands, split = read_barrier_ptx(ptx)
        self.log.append(Access(self._pid(), "bar", op=operands, sem=split, scope="cta"))


def _value(handle) -> tuple:
    data = object.__getattribute__(handle, "data")
    return tuple(int(v) for v in np.asarray(data).reshape(-1)[:1])


def _is_constant(handle) -> bool:
    return bool(object.__getattribute__(handle, "attr").get("syncverify_constant"))


class _Result(_interp.TensorHandle):
    """An atomic's result: notes in its access when the interpreter reads the value."""

    def __getattribute__(self, name):
        if name == "data":
            access = object.__getattribute__(self, "__dict__").get("_access")
            if access is not None:
                access.used = True
        return object.__getattribute__(self, name)


def _result(handle, access: Access):
    out = _Result(object.__getattribute__(handle, "data"), handle.dtype)
    out.__dict__["_access"] = access
    return out


def _constexpr(value):
    return getattr(value, "value", value)


@contextlib.contextmanager
def recording(recorder: Recorder):
    """While active, interpreted launches log their memory operations, barriers and fences into
    ``recorder`` (see the module docstring). Not thread-safe: one recording at a time."""
    b = _interp.InterpreterBuilder
    saved = {name: getattr(b, name) for name in (
        "create_load", "create_masked_load", "create_store", "create_masked_store", "create_atomic_rmw",
        "create_atomic_cas", "create_barrier", "create_descriptor_load", "create_descriptor_store", "create_dot",
        *_CONSTANTS)}
    saved_call = _jit._call_interpreted
    rec = recorder

    def outer(fn):
        def run(self, *args, **kwargs):
            rec._depth += 1
            try:
                return fn(self, *args, **kwargs)
            finally:
                rec._depth -= 1
        return run

    def create_load(self, ptr, cache, eviction, is_volatile):
        out = outer(saved["create_load"])(self, ptr, cache, eviction, is_volatile)
        return _log_load(ptr, cache, is_volatile, out)

    # the interpreter's own parameter names: its descriptor loads call this one by keyword
    def create_masked_load(self, ptrs, mask, other, cache_modifier, eviction_policy, is_volatile):
        out = saved["create_masked_load"](self, ptrs, mask, other, cache_modifier, eviction_policy, is_volatile)
        return out if rec._depth else _log_load(ptrs, cache_modifier, is_volatile, out)

    def _log_load(ptrs, cache, is_volatile, out):
        access = rec.memory("ld", ptrs, sem="volatile" if is_volatile else "weak", cache=_cache(cache))
        if out.data.size == 1:
            access.seen = int(np.asarray(out.data).reshape(-1)[0])
        return out

    def create_store(self, ptr, val, cache, eviction):
        scalar = object.__getattribute__(val, "data").size == 1
        rec.memory("st", ptr, cache=_cache(cache), operands=_value(val) if scalar else (),
                   constant=_is_constant(val))
        return outer(saved["create_store"])(self, ptr, val, cache, eviction)

    def create_masked_store(self, ptrs, value, mask, cache_modifier, eviction_policy):
        if not rec._depth:
            rec.memory("st", ptrs, cache=_cache(cache_modifier),
                       operands=_value(value) if value.data.size == 1 else ())
        return saved["create_masked_store"](self, ptrs, value, mask, cache_modifier, eviction_policy)

    def create_atomic_rmw(self, rmw, ptr, val, mask, sem, scope):
        out = saved["create_atomic_rmw"](self, rmw, ptr, val, mask, sem, scope)
        access = rec.memory("atom", ptr, op=_RMW[rmw], sem=_SEM[sem], scope=_SCOPE[scope],
                            operands=_value(val), constant=_is_constant(val))
        access.seen = _value(out)[0]
        return _result(out, access)

    def create_atomic_cas(self, ptr, cmp, val, sem, scope):
        out = saved["create_atomic_cas"](self, ptr, cmp, val, sem, scope)
        access = rec.memory("atom", ptr, op="cas", sem=_SEM[sem], scope=_SCOPE[scope],
                            operands=_value(cmp) + _value(val),
                            constant=_is_constant(cmp) and _is_constant(val))
        access.seen = _value(out)[0]
        return _result(out, access)

    def create_barrier(self):
        rec.barrier()
        return saved["create_barrier"](self)

    def create_dot(self, *args, **kwargs):  # tl.dot: lower_dot's bar.sync 0, marked as the dot's
        for low in lowering.lower_dot():
            rec.log.append(Access(rec._pid(), "bar", op=str(low.barrier_id), sem=DOT_MARK, scope="cta"))
        return saved["create_dot"](self, *args, **kwargs)

    def descriptor(name):
        """A tensor-descriptor load or store: the interpreter runs it as masked loads or stores,
        logged as the async proxy's (``Access.proxy``)."""
        def run(self, *args, **kwargs):
            rec._descriptor += 1
            try:
                return saved[name](self, *args, **kwargs)
            finally:
                rec._descriptor -= 1
        return run

    def constant(name):
        def make(self, value):
            handle = saved[name](self, value)
            handle.attr["syncverify_constant"] = True
            return handle
        return make

    def call_interpreted(self, *args, **kwargs):
        params = inspect.signature(self.fn).parameters
        if {"PTX", "INTERPRET"} <= set(params):  # named_barrier: inline bar.sync, none interpreted
            bound = inspect.signature(self.fn).bind(*args, **kwargs).arguments
            if _constexpr(bound["INTERPRET"]):
                rec.barrier(str(_constexpr(bound["PTX"])))
            return saved_call(self, *args, **kwargs)
        if not {"SEM", "SCOPE", "INTERPRET"} <= set(params):
            return saved_call(self, *args, **kwargs)
        bound = inspect.signature(self.fn).bind(*args, **kwargs).arguments
        if not _constexpr(bound["INTERPRET"]):
            return saved_call(self, *args, **kwargs)
        frame = dict(sem=str(_constexpr(bound["SEM"])), scope=str(_constexpr(bound["SCOPE"])), accessed=False)
        rec._helpers.append(frame)
        try:
            out = saved_call(self, *args, **kwargs)
        finally:
            rec._helpers.pop()
        if not frame["accessed"]:  # inline PTX with no interpreter counterpart: a fence
            rec.fence(frame["sem"], frame["scope"])
        return out

    patches = dict(create_load=create_load, create_masked_load=create_masked_load, create_store=create_store,
                   create_masked_store=create_masked_store, create_atomic_rmw=create_atomic_rmw,
                   create_atomic_cas=create_atomic_cas, create_barrier=create_barrier, create_dot=create_dot,
                   create_descriptor_load=descriptor("create_descriptor_load"),
                   create_descriptor_store=descriptor("create_descriptor_store"),
                   **{n: constant(n) for n in _CONSTANTS})
    try:
        for name, fn in patches.items():
            setattr(b, name, fn)
        _jit._call_interpreted = call_interpreted
        yield recorder
    finally:
        for name, fn in saved.items():
            setattr(b, name, fn)
        _jit._call_interpreted = saved_call


def _cache(modifier) -> str:
    """A cache modifier as its PTX suffix (``.wt``); ``""`` for none."""
    if modifier is None:
        return ""
    name = getattr(modifier, "name", str(modifier))
    return "" if name.upper() == "NONE" else "." + name.lower()
