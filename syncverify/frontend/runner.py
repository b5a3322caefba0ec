"""One run of one program (CTA) of one launch, as one model thread sees it, in Triton's interpreter.

The user's ``@triton.jit`` code runs unchanged; what the model needs it gets from hooks around
Triton 3.6's interpreter primitives (the same ones ``syncverify.kernels.trace`` hooks):

* ``InterpreterBuilder.create_masked_load/store`` (every ``tl.load``/``tl.store``, block pointers
  and tensor descriptors included), ``create_atomic_rmw/cas``, ``create_barrier``
  (``tl.debug_barrier``), ``create_inline_asm`` (read with the litmus parser,
  :mod:`syncverify.frontend.asm`), ``create_descriptor_load/store`` (TMA loads and stores through the async proxy, docs/async.md);
* every other builder method and the interpreter's reductions propagate a *taint* (which reads a
  value came from) on the handles they make, and the places where a value leaves data flow are
  *sinks*: a tensor turned into a Python ``bool``/``int`` (a branch, a loop bound, an assert), a
  pointer or mask of a memory access, an atomic's operand, a value stored to a synchronization
  location. A read whose value reaches no sink leaves the run unchanged whatever it returns.

Nothing is written to memory: reads are answered by the :class:`Oracle` (the value the driver
chose, :mod:`syncverify.frontend.programs`), or, for data (GHOST) locations and memory no one
writes, the memory's contents when the harness finished. So a run is a pure function of its
choices, which is what lets the driver re-run a program to enumerate them (GenMC/loom style).

Which model thread executes what (``syncverify.protocols.lowering``'s CTA facts, checked against compiled
PTX by ``tests/test_frontend_ptx.py``): a block access is split over the CTA's model threads (each
its contiguous share of the block's elements, in row-major order); a scalar load runs on every
thread; a scalar store or atomic on thread 0; ``atomic_add(p, 0)`` with a literal 0 and sem
relaxed/acquire is a load on thread 0; a scalar atomic whose result is used is followed by
``bar.sync`` (and, for threads other than 0, the value arrives through that barrier: a *broadcast*
choice); ``tl.load(volatile=True)`` is relaxed at sys scope; ``tl.debug_barrier()`` is ``bar.sync 0``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import os
import sys
import types
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from syncverify.explore.bounds import LimitHit
from syncverify.errors import SyncVerifyError, UnsupportedConstruct
from syncverify.frontend.asm import ModelThread, read_inline_asm
from syncverify.frontend.items import Item, Loc, Site
from syncverify.protocols import lowering
from syncverify.model.int32 import wrap_int32
import threading
import ctypes
import time as clock
import linecache
from syncverify.explore.instructions import atomic_result

#: Triton versions whose interpreter internals these hooks were written and tested against.
TESTED_TRITON = ("3.6.0",)


class KernelError(SyncVerifyError):
    """The user's kernel cannot run in the interpreter (its error and line)."""


class _Cut(BaseException):
    """A run reached a choice point in a state it was already in (a BaseException: Triton wraps
    every ``Exception`` raised inside a helper call)."""

    def __init__(self, choice: int) -> None:
        self.choice = choice


class _Spin(BaseException):
    """A run returned to a read of memory no one writes in the same state, with no choice in
    between: it spins forever on a value nothing can change."""

    def __init__(self, loc, value: int, site, shown: Any) -> None:
        # value: the model's 32-bit picture of it; shown: the memory's own value (a 64-bit address
        # in heap_bases, a float), what the verdict prints
        self.loc, self.value, self.site, self.shown = loc, value, site, shown


class _Stuck(BaseException):
    """Raised into a run by the watchdog: the kernel's Python code ran too long without reaching
    any memory operation (a loop with no read or write in it)."""


class _Bound(BaseException):
    def __init__(self, hit: LimitHit) -> None:
        self.hit = hit


@dataclass
class RunResult:
    """Everything one run recorded."""

    items: list[Item] = field(default_factory=list)
    chosen: list[int] = field(default_factory=list)  # the value of each choice
    domains: list[tuple[int, ...]] = field(default_factory=list)  # the values each choice could take
    cut: int | None = None  # the run returned to the state of this choice
    spin: tuple | None = None  # (Loc, model value, Site, value as stored): it spins forever reading constant memory
    sinks: set = field(default_factory=set)  # taint ids that reached a sink
    used: set = field(default_factory=set)  # taint ids whose value was used at all
    ghost_reads: set = field(default_factory=set)  # ghost locations read
    written: dict = field(default_factory=dict)  # Loc -> values written (model ints)
    transitions: dict = field(default_factory=dict)  # Loc -> {(old or None, new)}: what each write makes of it
    accessed: dict = field(default_factory=dict)  # Loc -> set of access kinds ("weak", "sync")
    parts: dict = field(default_factory=dict)  # Loc -> {(byte, size)}: its accesses of part of it (mixed sizes)
    byte_writes: dict = field(default_factory=dict)  # Loc -> {byte: values}: what part stores write to each byte
    descriptor: bool = False
    assumptions: set = field(default_factory=set)


class Memory:
    """The allocations a check knows (each rank's heap buffers, ``heap_bases``, other launch
    arguments) and their contents when the harness finished: what constant and ghost reads see."""

    def __init__(self) -> None:
        self.ranges: list[tuple[int, int, str, int | None, int, np.ndarray]] = []  # start, end, name, rank, itemsize, bytes
        self.last_itemsize: int | None = None  # of the allocation the last locate() found
        #: address -> what locate() answered: every run of every program asks again for the same
        #: addresses (the driver re-runs programs), and the allocations do not change once added
        self.found: dict[int, tuple[tuple[Loc, np.ndarray, int] | None, int | None]] = {}

    def add(self, name: str, rank: int | None, start: int, nbytes: int, itemsize: int, raw: np.ndarray) -> None:
        self.ranges.append((start, start + nbytes, name, rank, itemsize, raw))
        self.found.clear()

    def locate(self, address: int) -> tuple[Loc, np.ndarray, int] | None:
        """The element ``address`` falls in, the allocation's bytes and the byte offset in them;
        ``last_itemsize`` keeps that allocation's element size (None when it is in none)."""
        known = self.found.get(address)
        if known is None:
            known = self.found[address] = self._locate(address)
        self.last_itemsize = known[1]
        return known[0]

    def _locate(self, address: int) -> tuple[tuple[Loc, np.ndarray, int] | None, int | None]:
        for start, end, name, rank, itemsize, raw in self.ranges:
            if start <= address < end:
                offset = address - start
                return (Loc(name, rank, offset // itemsize), raw, offset), itemsize
        return None, None


def to_model(value: Any, np_dtype: np.dtype) -> int:
    """A stored element as the model's 32-bit value (floats by their bit pattern)."""
    arr = np.asarray(value, dtype=np_dtype).reshape(1)
    if arr.dtype.kind == "f":
        bits = arr.view(np.int32 if arr.dtype.itemsize == 4 else (np.int16 if arr.dtype.itemsize == 2 else np.int64))
        return wrap_int32(int(bits[0]))
    if arr.dtype.kind == "b":
        return int(bool(arr[0]))
    return wrap_int32(int(arr[0]))


def from_model(value: int, np_dtype: np.dtype) -> Any:
    """The inverse of :func:`to_model` for one element."""
    dt = np.dtype(np_dtype)
    if dt.kind == "f":
        width = {2: np.int16, 4: np.int32, 8: np.int64}[dt.itemsize]
        return np.array([value], dtype=width).view(dt)[0]
    if dt.kind == "b":
        return bool(value)
    return np.array([value & ((1 << (8 * dt.itemsize)) - 1)], dtype=np.uint64).astype(dt)[0] if dt.kind == "u" \
        else np.array([value], dtype=np.int64).astype(dt)[0]


class Oracle:
    """How one run answers reads: the classification of locations, their value domains, and the
    choices to replay (then the first value of each new choice)."""

    def __init__(self, *, nonghost: frozenset, written: frozenset, domains: dict, prefix: list[int],
                 thread: int, threads: int, max_items: int) -> None:
        self.nonghost = nonghost  # written Locs that are synchronization locations; the others are data
        self.written = written  # Locs some operation writes (others are constant)
        self.domains = domains  # Loc -> sorted tuple of model values
        self.prefix = prefix
        self.thread = thread
        self.threads = threads
        self.max_items = max_items


# ----- taint ------------------------------------------------------------------------------------

_TAINT = "syncverify_taint"
_CONSTANT = "syncverify_constant"
_EMPTY: frozenset = frozenset()


def taint_of(obj: Any) -> frozenset:
    """The read ids a value depends on (handles, tensors, block pointers, lists of them)."""
    import triton.runtime.interpreter as interp  # torch/triton: loaded only where a kernel runs

    if isinstance(obj, interp.TensorHandle):
        return obj.attr.get(_TAINT, _EMPTY)
    if isinstance(obj, interp.BlockPointerHandle):
        return taint_of(obj.base).union(*(taint_of(o) for o in obj.offsets))
    handle = getattr(obj, "handle", None)
    if handle is not None and handle is not obj:
        return taint_of(handle)
    if isinstance(obj, (list, tuple)):
        return _EMPTY.union(*(taint_of(o) for o in obj)) if obj else _EMPTY
    return _EMPTY


def _mark(obj: Any, taint: frozenset) -> None:
    import triton.runtime.interpreter as interp  # torch/triton: loaded only where a kernel runs

    if isinstance(obj, interp.TensorHandle):
        obj.attr[_TAINT] = obj.attr.get(_TAINT, _EMPTY) | taint
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            _mark(o, taint)
    else:
        handle = getattr(obj, "handle", None)
        if handle is not None and handle is not obj:
            _mark(handle, taint)


# ----- the hooks ----------------------------------------------------------------------------------

_SPECIAL = ("create_masked_load", "create_masked_store", "create_atomic_rmw", "create_atomic_cas",
            "create_barrier", "create_inline_asm", "create_descriptor_load", "create_descriptor_store",
            "create_load", "create_store", "create_tensor_pointer_load", "create_tensor_pointer_store",
            "create_descriptor_gather", "create_descriptor_scatter", "create_get_program_id",
            "create_get_num_programs", "create_make_range", "create_dot")

_active: "ProgramRun | None" = None
#: Seconds one run may go without a memory operation before the watchdog stops it (unknown).
RUN_SILENCE_LIMIT = 60.0


class _Watchdog:
    """Stops a run whose Python code loops without any memory operation (nothing the hooks see),
    which would otherwise hang the checker: the rule is that nothing may hang."""

    def __init__(self) -> None:

        self.target = threading.main_thread().ident if threading.current_thread() is threading.main_thread() \
            else threading.get_ident()
        self.stamp: float | None = None
        self.deadline: float | None = None  # the check's own deadline (monotonic)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="syncverify-watchdog", daemon=True)
        self.thread.start()

    def _watch(self) -> None:

        while not self.done.wait(0.5):
            stamp, now = self.stamp, clock.monotonic()
            late = self.deadline is not None and now > self.deadline
            if stamp is not None and (now - stamp > RUN_SILENCE_LIMIT or late):
                self.stamp = None
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self.target), ctypes.py_object(_Stuck))

    def stop(self) -> None:
        self.done.set()


_watchdog: "_Watchdog | None" = None


@dataclass(frozen=True)
class Delivery:
    """An NVSHMEM put or signal operation as one run saw it (syncverify.delivery): the PE, the
    destination elements (on that PE), the signal element (on that PE) and its update."""

    pe: int
    dst: tuple = ()
    signal: Loc | None = None
    signal_op: str = "set"
    signal_value: int = 0
    blocking: bool = False


def nvshmem_call(kind: str, *, dest=None, nbytes=None, pe=None, signal=None, signal_op: str = "set",
                 signal_value=None, blocking: bool = False) -> None:
    """What :mod:`syncverify.frontend.devices.libshmem_device` calls: ``kind`` is ``put``,
    ``quiet`` or ``fence``; the current run records it (thread 0 only: a ``_block`` call is one
    call by the CTA, issued by one thread, syncverify.delivery)."""
    _current().nvshmem(kind, dest, nbytes, pe, signal, signal_op, signal_value, blocking)


def _scalar(value: Any) -> int:
    """A kernel's scalar (a Python int, a constexpr, or an interpreter tensor of one element) as an int."""
    handle = getattr(value, "handle", None)
    if handle is not None and hasattr(handle, "data"):
        return int(np.asarray(handle.data).reshape(-1)[0])
    inner = getattr(value, "value", value)  # constexpr
    return int(inner)


def _current() -> "ProgramRun":
    if _active is None:  # a hook called outside a run: the front end's own bug
        raise RuntimeError("syncverify front end: interpreter hook called outside a run")
    return _active


def check_triton_version() -> None:
    """Refuse, in one line, a Triton whose interpreter internals these hooks were not tested on."""
    try:
        import triton  # torch/triton: loaded only where a kernel runs
    except ImportError as error:
        raise KernelError("checking a Triton kernel needs triton (and torch, numpy): "
                          f"pip install torch triton=={TESTED_TRITON[0]} numpy ({error})") from None
    if triton.__version__ not in TESTED_TRITON:
        raise KernelError(f"triton {triton.__version__} is not supported by the kernel front end, which hooks the "
                          f"interpreter's internals; tested with triton {', '.join(TESTED_TRITON)}")


@contextlib.contextmanager
def hooks():
    """While active, Triton's interpreter answers to the current :class:`ProgramRun`."""
    import triton.runtime.interpreter as interp  # torch/triton: loaded only where a kernel runs
    from triton.runtime.jit import JITFunction  # torch/triton: loaded only where a kernel runs
    from syncverify.kernels import _jit  # torch/triton: loaded only where a kernel runs

    b = interp.InterpreterBuilder
    saved: dict[str, Any] = {}

    def patch(owner, name, value):
        saved[(owner, name)] = owner.__dict__.get(name, _MISSING)
        setattr(owner, name, value)

    def propagating(fn):
        def run(self, *args, **kwargs):
            taint = taint_of(args) | taint_of(tuple(kwargs.values()))
            out = fn(self, *args, **kwargs)
            if taint:
                _current().used |= taint
                _mark(out, taint)
            return out
        return run

    def constant(fn):
        def make(self, *args):
            handle = fn(self, *args)
            handle.attr[_CONSTANT] = True
            return handle
        return make

    def call_in_launch_scope(self, *args, **kwargs):
        # A nested @jit call. kernels._jit patches triton.language again for every such call and
        # restores it on return: the same patch of the same global modules that patch_lang() holds
        # for the whole launch, so skipping it changes nothing, and it was a third of each run.
        try:
            return _jit._interpreted(self).rewrite()(*args, **kwargs)
        except Exception as error:
            raise interp.InterpreterError(repr(error)) from error

    with _jit._interpreting_calls():
        patch(JITFunction, "__call__", call_in_launch_scope)
        for name, member in list(vars(b).items()):
            if not callable(member) or name.startswith("_") or name in _SPECIAL:
                continue
            if name.startswith("get_") and not name.endswith("_ty"):
                patch(b, name, constant(member))
            elif name.startswith(("create_", "binary_op", "ternary_op", "unary_op", "cast_impl")):
                patch(b, name, propagating(member))
        patch(b, "create_masked_load", lambda self, ptrs, mask, other, cache_modifier, eviction_policy, is_volatile:
              _current().load(ptrs, mask, other, cache_modifier, is_volatile))
        patch(b, "create_masked_store", lambda self, ptrs, value, mask, cache_modifier, eviction_policy:
              _current().store(ptrs, value, mask))
        patch(b, "create_atomic_rmw", lambda self, rmw, ptr, val, mask, sem, scope:
              _current().atomic(rmw, ptr, (val,), mask, sem, scope))
        patch(b, "create_atomic_cas", lambda self, ptr, cmp, val, sem, scope:
              _current().atomic("cas", ptr, (cmp, val), None, sem, scope))
        patch(b, "create_barrier", lambda self: _current().barrier())
        run_dot = propagating(b.create_dot)

        def create_dot(self, *args, **kwargs):  # tl.dot: its CTA barrier, then the product
            _current().dot()
            return run_dot(self, *args, **kwargs)

        patch(b, "create_dot", create_dot)
        patch(b, "create_inline_asm", lambda self, asm, constraints, values, type, is_pure, pack:
              _current().inline_asm(asm, constraints, values, type, pack))
        for name in ("create_descriptor_load", "create_descriptor_store"):
            patch(b, name, _descriptor(getattr(b, name)))
        for name in ("create_tensor_pointer_load", "create_tensor_pointer_store"):
            patch(b, name, _addressing(getattr(b, name)))
        clone = interp.TensorHandle.clone

        def clone_keeping_taint(self):  # block pointers' offsets are cloned on every tl.advance
            out = clone(self)
            if _TAINT in self.attr:
                out.attr[_TAINT] = self.attr[_TAINT]
            return out

        patch(interp.TensorHandle, "clone", clone_keeping_taint)
        apply = interp.ReduceScanOpInterface.apply

        def reduce_apply(self, input):
            out = apply(self, input)
            taint = taint_of(input if isinstance(input, tuple) else (input,))
            if taint:
                _current().used |= taint
                _mark(out, taint)
            return out

        patch(interp.ReduceScanOpInterface, "apply", reduce_apply)
        bool_of_handle = interp.TensorHandle.__bool__

        def handle_bool(self):
            _current().sink(taint_of(self))
            return bool_of_handle(self)

        patch(interp.TensorHandle, "__bool__", handle_bool)
        lang_tensor = interp._patch_lang_tensor

        def patch_lang_tensor(tensor, scope):
            lang_tensor(tensor, scope)

            def to_bool(self):
                _current().sink(taint_of(self))
                data = self.handle.data
                return bool(data) if data.size == 1 else True

            def to_index(self):
                _current().sink(taint_of(self))
                return int(self.handle.data.reshape(-1)[0].item())

            def transpose(self):  # the interpreter's .T makes its handle outside the builder
                out = self.trans()
                _mark(out, taint_of(self))
                return out

            scope.set_attr(tensor, "__bool__", to_bool)
            scope.set_attr(tensor, "__index__", to_index)
            scope.set_attr(tensor, "T", property(transpose))

        interp._patch_lang_tensor = patch_lang_tensor
        # Overflow sanitizing: Triton builds, for every integer +, - and *, an int64 copy of it and a
        # range test for tl.device_assert, which does nothing unless the options' debug is set
        # (in the interpreter and in compiled code alike): values no sink sees, so leaving them
        # out changes no run, and they were a fifth of each run's time (docs/frontend.md).
        builder = interp.interpreter_builder
        options = builder.options
        if not options.debug:
            builder.options = dataclasses.replace(options, sanitize_overflow=False)
        global _watchdog
        _watchdog = _Watchdog()
        try:
            yield
        finally:
            _watchdog.stop()
            _watchdog = None
            builder.options = options
            interp._patch_lang_tensor = lang_tensor
            for (owner, name), value in saved.items():
                if value is _MISSING:
                    delattr(owner, name)
                else:
                    setattr(owner, name, value)


_MISSING = object()


def patch_lang(fn=None):
    """``triton.language`` patched for the interpreter for the whole of a launch's runs: both
    modules Triton's ``_patch_lang`` patches (``tl`` and ``tl.core``), whichever a kernel's or a
    helper's globals name, so that nested ``@jit`` calls need no patch of their own (:func:`hooks`).
    Also Triton's extern builtins outside them, which its interpreter leaves unpatched:
    ``tl.extra.cuda``'s (``gdc_wait()``, ``gdc_launch_dependents()``, inline asm the hooks read),
    as module attributes and as names the kernel ``fn``'s globals bind. Returns the scope to
    ``restore()``."""
    import triton.language as tl  # torch/triton: loaded only where a kernel runs
    import triton.language.extra.cuda as cuda  # torch/triton: loaded only where a kernel runs
    import triton.runtime.interpreter as interp  # torch/triton: loaded only where a kernel runs

    scope = interp._patch_lang(types.SimpleNamespace(__globals__={"tl": tl, "core": tl.core}))
    names = getattr(fn, "__globals__", {})
    bound = [name for name, value in names.items()
             if tl.core.is_builtin(value) and getattr(cuda, name, None) is value]
    interp._patch_builtin(cuda, interp.interpreter_builder, scope)
    for name in bound:
        scope.set_attr(_Globals(names), name, getattr(cuda, name))
    return scope


class _Globals:
    """A module's globals as attributes, so that the interpreter's patch scope sets and restores
    names in them as it does module attributes."""

    def __init__(self, names: dict) -> None:
        object.__setattr__(self, "_names", names)

    def __getattr__(self, name):
        try:
            return self._names[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value) -> None:
        self._names[name] = value

    def __delattr__(self, name) -> None:
        del self._names[name]


def _addressing(fn):
    """A block-pointer access: the pointer's base and offsets are an address (a sink)."""
    def run(self, ptr, *args, **kwargs):
        _current().sink(taint_of(ptr))
        return fn(self, ptr, *args, **kwargs)
    return run


#: What the check assumes of tensor descriptors: how Triton 3.6 compiles them for sm_90 (docs/async.md).
DESCRIPTOR_LOAD = ("tensor-descriptor loads are TMA loads: async-proxy reads of global memory completed by "
                   "mbarrier.try_wait, with no fence.proxy.async.global before them (Triton 3.6, sm_90)")
DOT_BARRIER = ("tl.dot is bar.sync 0 of the whole CTA after its operands are loaded (they are staged through "
               "shared memory for the MMA: Triton 3.6, sm_90, as read in our kernels' PTX; a dot compiled without "
               "shared memory would not order this way)")
DESCRIPTOR_STORE = ("tensor-descriptor stores are TMA stores: async-proxy writes waited for with "
                    "cp.async.bulk.wait_group.read 0 only (Triton 3.6, sm_90)")


def _descriptor(fn):
    """A tensor-descriptor access: a TMA load or store (syncverify.frontend.lift; assumption listed);
    its indices are an address."""
    def run(self, *args, **kwargs):
        current = _current()
        current.sink(taint_of(args[1:]) | taint_of(tuple(kwargs.values())))
        current.in_descriptor += 1
        try:
            return fn(self, *args, **kwargs)
        finally:
            current.in_descriptor -= 1
    return run


# ----- one run ------------------------------------------------------------------------------------

_SEM = _SCOPE = _RMW = None


def _names():
    global _SEM, _SCOPE, _RMW
    if _SEM is None:
        from triton._C.libtriton import ir  # torch/triton: loaded only where a kernel runs

        _SEM = {ir.MEM_SEMANTIC.ACQUIRE: "acquire", ir.MEM_SEMANTIC.RELEASE: "release",
                ir.MEM_SEMANTIC.RELAXED: "relaxed", ir.MEM_SEMANTIC.ACQUIRE_RELEASE: "acq_rel"}
        _SCOPE = {ir.MEM_SYNC_SCOPE.GPU: "gpu", ir.MEM_SYNC_SCOPE.CTA: "cta", ir.MEM_SYNC_SCOPE.SYSTEM: "sys"}
        _RMW = {ir.ATOMIC_OP.ADD: ("add", False), ir.ATOMIC_OP.XCHG: ("exch", False),
                ir.ATOMIC_OP.MAX: ("max", False), ir.ATOMIC_OP.MIN: ("min", False),
                ir.ATOMIC_OP.UMAX: ("max", True), ir.ATOMIC_OP.UMIN: ("min", True),
                ir.ATOMIC_OP.AND: ("and", False), ir.ATOMIC_OP.OR: ("or", False), ir.ATOMIC_OP.XOR: ("xor", False),
                ir.ATOMIC_OP.FADD: ("fadd", False)}
    return _SEM, _SCOPE, _RMW


_SKIP_DIRS: tuple[str, ...] = ()


def _skip_dirs() -> tuple[str, ...]:
    """The files whose frames are not the user's: Triton, numpy, contextlib, the front end itself
    and our jit wrapper (by the path Python loaded it from: a checkout reaches ``kernels/`` through
    the link ``syncverify/kernels``). The library device APIs (``frontend/devices``) are the user's
    code as far as state goes: their locals are part of a program's state."""
    global _SKIP_DIRS
    if not _SKIP_DIRS:
        import triton  # torch/triton: loaded only where a kernel runs
        from syncverify.kernels import _jit  # torch/triton: loaded only where a kernel runs

        here = os.path.dirname(os.path.abspath(__file__))
        _SKIP_DIRS = (os.path.dirname(os.path.abspath(triton.__file__)), os.path.dirname(np.__file__), here,
                      _jit.__file__, os.path.realpath(_jit.__file__), os.path.dirname(contextlib.__file__))
    return _SKIP_DIRS


def _is_library_frame(name: str) -> bool:
    return name.startswith(_skip_dirs()) and not name.startswith(_DEVICES)


_DEVICES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "devices") + os.sep


def _freeze(value: Any, depth: int = 0, memo: dict | None = None) -> Any:
    """A hashable picture of a kernel local (tensors by their contents). ``memo``: (id, depth) ->
    (object, picture) of what this run froze already, for objects that do not change in place (a
    handle's contents do not: Triton's interpreter makes a new one for every value; a tuple
    holding a list, a dict or a set is frozen anew each time, :func:`_changeable`). A helper's
    arguments are mostly its caller's objects: their pictures are made once."""
    if depth > 4:
        return ("deep",)
    if isinstance(value, (int, float, str, bool, type(None))):
        return value
    if memo is None:
        return _freeze_anew(value, depth, memo)
    kept = memo.get((id(value), depth))
    if kept is not None and kept[0] is value:
        return kept[1]
    frozen = _freeze_anew(value, depth, memo)
    if not _changeable(value):
        memo[(id(value), depth)] = (value, frozen)
    return frozen


def _freeze_anew(value: Any, depth: int, memo: dict | None) -> Any:
    handle = getattr(value, "handle", None)
    if handle is not None and hasattr(handle, "data"):
        data = np.asarray(handle.data)
        return ("t", data.dtype.str, data.shape, data.tobytes())
    if hasattr(value, "data") and isinstance(getattr(value, "data", None), np.ndarray):
        return ("h", value.data.tobytes())
    if hasattr(value, "offsets") and hasattr(value, "base"):  # a block pointer
        return ("bp", _freeze(value.base, depth + 1, memo), tuple(_freeze(o, depth + 1, memo) for o in value.offsets))
    if isinstance(value, (tuple, list)):
        return tuple(_freeze(v, depth + 1, memo) for v in value)
    inner = getattr(value, "value", None)  # constexpr
    if inner is not None and not callable(inner):
        return ("c", _freeze(inner, depth + 1, memo))
    return ("o", type(value).__name__, id(value))


def _changeable(value: Any, depth: int = 0) -> bool:
    """Whether a local may change in place while its frame waits (a list, a dict, a set, at any
    depth of a tuple): such a frame's frozen locals are not reused."""
    if isinstance(value, (list, dict, set, bytearray)):
        return True
    if isinstance(value, tuple):
        return depth < 4 and any(_changeable(v, depth + 1) for v in value)
    inner = getattr(value, "value", None)  # a constexpr holding a list
    return isinstance(inner, (list, dict, set, bytearray, tuple)) and _changeable(inner, depth + 1)


class ProgramRun:
    """One run of program ``pid`` of a launch for model thread ``oracle.thread``."""

    def __init__(self, launch, pid: tuple[int, int, int], memory: Memory, oracle: Oracle) -> None:
        self.launch = launch
        self.pid = pid
        self.memory = memory
        self.oracle = oracle
        self.result = RunResult()
        self.used = self.result.used
        self.seen: dict[Any, int] = {}  # state key -> choice index
        self.last_at: dict[tuple, int] = {}  # position -> the last choice made there
        self.constant_seen: set = set()
        self.reads = 0
        self.in_descriptor = 0
        #: id(frame) -> (frame, the kernel frame it had called, its locals' names and objects, their
        #: frozen picture): see _frozen_locals
        self.suspended: dict[int, tuple[Any, Any, tuple, tuple, tuple]] = {}
        self.handles: dict[tuple[int, int], tuple[Any, Any]] = {}  # _freeze's memo

    # ----- what the hooks call ----------------------------------------------------------------
    def sink(self, taint: frozenset) -> None:
        if taint:
            self.result.sinks |= taint
            self.used |= taint

    def _frames(self) -> list:
        frames = []
        frame = sys._getframe(2)
        while frame is not None and frame.f_code is not _invoke.__code__:
            name = frame.f_code.co_filename
            if not _is_library_frame(name) and not name.startswith("<"):
                frames.append(frame)
            frame = frame.f_back
        return frames

    def _site(self, frames) -> tuple[Site, tuple]:

        kernel = self.launch.kernel_name
        if not frames:
            return Site("<unknown>", 0, kernel, kernel), ()
        inner = frames[0]
        text = linecache.getline(inner.f_code.co_filename, inner.f_lineno).strip()
        site = Site(inner.f_code.co_filename, inner.f_lineno, inner.f_code.co_name, kernel, text)
        return site, tuple((f.f_code.co_filename, f.f_code.co_name, f.f_lasti) for f in frames)

    def _position(self, frames) -> tuple:
        """Where each kernel frame is, as the source span of its current instruction: the two
        copies CPython 3.11 compiles of a ``while`` condition (before the loop, at its end) are
        one point, two reads on one line are two."""
        return tuple((f.f_code.co_filename, f.f_code.co_name, _span(f.f_code, f.f_lasti)) for f in frames)

    def _state(self, frames, position: tuple) -> Any:
        """The state at a choice point: positions, every kernel frame's locals, and the values
        chosen since the last choice at this position (values a read left on the expression stack,
        ``tl.load(q) + tl.load(p)``, are not locals)."""
        since = self.last_at.get(position)
        pending = tuple(self.result.chosen[since + 1:]) if since is not None else ()
        return (position, pending, tuple(self._frozen_locals(f, frames[i - 1] if i else None)
                                         for i, f in enumerate(frames)))

    def _frozen_locals(self, frame, callee) -> tuple:
        """``frame``'s locals, frozen (:func:`_freeze`), reusing what is known not to have changed.

        The locals' objects do not change in place (Triton's interpreter makes a new handle for
        every value; a local that could change in place, a list, a dict or a set at any depth of a
        tuple, keeps its frame from being reused: :func:`_changeable`), so a frame frozen before
        has the same picture when

        * its kernel ``callee`` (the next kernel frame inward) is the same live frame object as
          then: it has not run since, waiting for that call all along (no look at its locals); or
        * each of its locals is bound to the very object it was bound to then (a loop rebinds
          what it changes to new objects: the rest are checked by identity, not frozen again).

        The kernel's own frame, with every launch argument, is so frozen about once per run
        instead of at every read."""
        kept = self.suspended.get(id(frame))
        if kept is not None and kept[0] is frame:
            if callee is not None and kept[1] is callee:
                return kept[4]
            names = frame.f_locals
            if len(names) == len(kept[2]) and all(
                    k == k2 and v is v2 for (k, v), k2, v2 in zip(names.items(), kept[2], kept[3])):
                self.suspended[id(frame)] = (frame, callee, kept[2], kept[3], kept[4])
                return kept[4]
        names = frame.f_locals
        memo = self.handles
        frozen = tuple(sorted((k, _freeze(v, 0, memo)) for k, v in names.items()))
        # _freeze kept each object it found unchangeable: one that is not kept is changeable
        if not any(isinstance(v, (list, dict, set, bytearray))
                   or (not isinstance(v, (int, float, str, bool, type(None))) and memo.get((id(v), 0), (None,))[0] is not v)
                   for v in names.values()):
            self.suspended[id(frame)] = (frame, callee, tuple(names), tuple(names.values()), frozen)
        return frozen

    def _add(self, item: Item) -> None:
        _tick()
        self.result.items.append(item)
        if len(self.result.items) > self.oracle.max_items:
            raise _Bound(LimitHit("max-steps", f"program {self.pid[0]} of {self.launch.kernel_name} made more than "
                                  f"{self.oracle.max_items} memory operations on one path without repeating a state "
                                  f"(last at {item.site}); raise max_steps"))

    def _choose(self, loc: Loc | None, domain: tuple[int, ...], frames, first: bool) -> tuple[int, int]:
        """A new choice: its index and the value the oracle answers. At the first choice of an
        operation, a state seen before in this run cuts the run there."""
        index = len(self.result.chosen)
        # a choice in between: coming back to a read of constant memory is no longer a spin on it
        # (a poll whose loop translates its pointer through heap_bases reads it on every iteration)
        self.constant_seen.clear()
        if first:
            position = self._position(frames)
            key = self._state(frames, position)
            if key in self.seen:
                raise _Cut(self.seen[key])
            self.seen[key] = index
            self.last_at[position] = index
        if index < len(self.oracle.prefix):
            value = domain[self.oracle.prefix[index]]
        else:
            value = domain[0]
        self.result.chosen.append(value)
        self.result.domains.append(domain)
        return index, value

    def _constant_read(self, frames, loc, value: Any, np_dtype, site) -> None:
        """A read of memory no one writes leaves no event, but a run that comes back to it in the
        same state with no choice in between loops forever (and must not hang the checker)."""
        self.reads += 1
        _tick()
        if self.reads > 20 * self.oracle.max_items:
            raise _Bound(LimitHit("max-steps", f"program {self.pid[0]} of {self.launch.kernel_name} read more than "
                                  f"{20 * self.oracle.max_items} times on one path ({site})"))
        key = ("constant", loc, self._state(frames, self._position(frames)))
        if key in self.constant_seen:
            raise _Spin(loc, to_model(value, np_dtype), site, value.item() if hasattr(value, "item") else value)
        self.constant_seen.add(key)

    def _shares(self, size: int) -> list[bool]:
        """Which elements of a block of ``size`` this model thread owns."""
        t, n = self.oracle.thread, self.oracle.threads
        return [j * n // size == t for j in range(size)]

    def _where(self, address: int, site: Site, kind: str, size: int):
        """The element an access of ``size`` bytes at ``address`` falls in: ``(loc, raw, offset,
        part)``, ``part`` None for an access of the whole element, else ``(byte, size)`` within it.

        An access of part of an element (narrower than it, or not at its start: a byte flag stored
        through an ``int8`` pointer into a 32-bit word, vLLM #2760's shape) is a mixed-size access
        (syncverify.model.ptx, choice 12): the element becomes byte-addressed in the lifted program
        (``syncverify.frontend.check``). Refused by name: part of an element wider than 4 bytes
        (the model's values are 32-bit) and an access that crosses from one element into the next."""
        found = self.memory.locate(int(address))
        if found is None:
            self.result.accessed.setdefault(("oob", str(site)), set()).add(kind)
            return found
        itemsize = self.memory.last_itemsize
        byte = found[2] % itemsize if itemsize is not None else 0
        if itemsize is None or (size == itemsize and byte == 0):
            return (*found, None)
        what = "load" if kind == "ld" else "store" if kind == "st" else "atomic"
        if itemsize > 4 or byte + size > itemsize:
            raise UnsupportedConstruct(
                f"{site}: a {size}-byte {what} at byte {byte} of {found[0]}, an element of {itemsize} bytes: accesses "
                f"of part of an element (mixed sizes) are lifted for elements of at most 4 bytes and within one "
                f"element (the model's values are 32-bit; docs/async.md); use a 32-bit flag word")
        if kind == "atom":
            raise UnsupportedConstruct(
                f"{site}: a {size}-byte atomic at byte {byte} of {found[0]}, an element of {itemsize} bytes: atomics "
                f"on part of an element (mixed sizes) are not modeled (docs/async.md)")
        part = (byte, size)
        self.result.parts.setdefault(found[0], set()).add(part)
        return (*found, part)

    def _check_pointer(self, ptrs, mask) -> None:
        self.sink(taint_of(ptrs) | (taint_of(mask) if mask is not None else _EMPTY))

    def load(self, ptrs, mask, other, cache_modifier, is_volatile, *, strong: tuple | None = None):
        """A load; ``strong``: (sem, scope) of an inline-PTX ``ld.relaxed/acquire`` (every thread)."""
        import triton.runtime.interpreter as interp  # torch/triton: loaded only where a kernel runs

        self._check_pointer(ptrs, mask)
        frames = self._frames()
        site, site_key = self._site(frames)
        dtype_tt = ptrs.get_element_ty()
        np_dtype = interp._get_np_dtype(dtype_tt)
        addrs = np.asarray(ptrs.data).reshape(-1)
        active = np.asarray(mask.data).reshape(-1) if mask is not None else np.ones(addrs.size, bool)
        if other is None:
            out = np.zeros(addrs.size, dtype=np_dtype)
        else:
            out = np.broadcast_to(np.asarray(other.data), np.asarray(ptrs.data).shape).reshape(-1).astype(np_dtype).copy()
        scalar = addrs.size == 1
        owned = [True] if scalar else self._shares(addrs.size)
        sem, scope = ("relaxed", "sys") if is_volatile else ("weak", None)
        if strong is not None:
            sem, scope = strong
            is_volatile = True  # a strong load: a synchronization location, never ghost
        descriptor = self.in_descriptor > 0
        if descriptor:
            self.result.assumptions.add(DESCRIPTOR_LOAD)
        taint: set = set()
        plain: list[Loc] = []
        first = True
        constant_checked = False
        for j in range(addrs.size):
            if not active[j]:
                continue
            found = self._where(addrs[j], site, "ld", out.itemsize)
            if found is None:
                if owned[j]:
                    self._add(Item("oob", site, site_key, op="ld"))
                continue
            loc, raw, offset, part = found
            kind = "sync" if is_volatile else "weak"
            self.result.accessed.setdefault(loc, set()).add(kind)
            if loc not in self.oracle.written:
                out[j] = raw[offset:offset + out.itemsize].view(np_dtype)[0]  # constant memory: its contents
                if constant_checked is False:  # once per operation: is this run looping on it?
                    constant_checked = True
                    self._constant_read(frames, loc, out[j], np_dtype, site)
                continue
            if loc not in self.oracle.nonghost and not is_volatile:
                out[j] = raw[offset:offset + out.itemsize].view(np_dtype)[0]
                taint.add(("ghost", loc))
                self.result.ghost_reads.add(loc)
                if owned[j]:
                    plain.append(loc)
                continue
            if not owned[j]:
                out[j] = raw[offset:offset + out.itemsize].view(np_dtype)[0]
                taint.add(("foreign", str(site)))
                continue
            # a part of a byte-addressed element: its own domain, the byte values combined as the model does
            domain = (self.oracle.domains.get(loc if part is None else (loc, *part))
                      or (to_model(raw[offset:offset + out.itemsize].view(np_dtype)[0], np_dtype),))
            index, value = self._choose(loc, domain, frames, first)
            first = False
            self._add(Item("read", site, site_key, (loc,), sem, scope, "ld", choice=index, descriptor=descriptor,
                           key=index, parts=(part,) if part is not None else ()))
            out[j] = from_model(value, np_dtype)
            taint.add(index)
        if plain:
            self._add(Item("ld", site, site_key, tuple(plain), sem, scope, descriptor=descriptor))
        handle = interp.TensorHandle(out.reshape(np.asarray(ptrs.data).shape), dtype_tt)
        if taint:
            handle.attr[_TAINT] = frozenset(taint)
        return handle

    def store(self, ptrs, value, mask, *, strong: tuple | None = None, everyone: bool = False):
        """A store; ``strong``: (sem, scope) of an inline-PTX ``st``; ``everyone``: unpredicated
        inline PTX, which every thread runs (Triton predicates its own scalar stores to one)."""
        import triton.runtime.interpreter as interp  # torch/triton: loaded only where a kernel runs

        self._check_pointer(ptrs, mask)
        frames = self._frames()
        site, site_key = self._site(frames)
        addrs = np.asarray(ptrs.data).reshape(-1)
        np_dtype = interp._get_np_dtype(ptrs.get_element_ty())
        values = np.broadcast_to(np.asarray(value.data), np.asarray(ptrs.data).shape).reshape(-1)
        active = np.asarray(mask.data).reshape(-1) if mask is not None else np.ones(addrs.size, bool)
        scalar = addrs.size == 1
        owned = [self.oracle.thread == 0 or everyone] if scalar else self._shares(addrs.size)
        sem, scope = strong if strong is not None else ("weak", None)
        descriptor = self.in_descriptor > 0
        if descriptor:
            self.result.assumptions.add(DESCRIPTOR_STORE)
        value_taint = taint_of(value)
        self.used |= value_taint
        locs, vals, parts = [], [], []
        for j in range(addrs.size):
            if not active[j]:
                continue
            found = self._where(addrs[j], site, "st", np.dtype(np_dtype).itemsize)
            if found is None:
                if owned[j]:
                    self._add(Item("oob", site, site_key, op="st"))
                continue
            loc, part = found[0], found[3]
            self.result.accessed.setdefault(loc, set()).add("weak" if strong is None else "sync")
            model_value = to_model(values[j], np_dtype)
            if part is not None:  # its bytes, little-endian, as the model splits the store (program.split_mixed_sizes)
                model_value &= (1 << (8 * part[1])) - 1
                for k in range(part[1]):
                    self.result.byte_writes.setdefault(loc, {}).setdefault(part[0] + k, set()).add(
                        (model_value >> (8 * k)) & 0xFF)
            else:
                self.result.transitions.setdefault(loc, set()).add((None, model_value))
            self.result.written.setdefault(loc, set()).add(model_value)
            if loc in self.oracle.nonghost:
                self.sink(value_taint)  # the value written to a synchronization location matters
            if owned[j]:
                locs.append(loc)
                vals.append(model_value)
                parts.append(part)
        if locs:
            self._add(Item("st", site, site_key, tuple(locs), sem, scope, values=tuple(vals), scalar_one=scalar,
                           descriptor=descriptor, parts=tuple(parts) if any(p is not None for p in parts) else ()))

    def atomic(self, rmw, ptr, operands, mask, sem, scope, *, everyone: bool = False):
        """An atomic; ``rmw`` a Triton op or ``("add", unsigned)``-style pair with ``sem``/``scope``
        as names (inline PTX); ``everyone``: unpredicated inline PTX, run by every thread."""
        import triton.runtime.interpreter as interp  # torch/triton: loaded only where a kernel runs

        sems, scopes, rmws = _names()
        self._check_pointer(ptr, mask)
        for operand in operands:
            self.sink(taint_of(operand))
        frames = self._frames()
        site, site_key = self._site(frames)
        named = isinstance(rmw, tuple)
        op, unsigned = rmw if named else (("cas", False) if rmw == "cas" else rmws[rmw])
        if op == "fadd":
            raise UnsupportedConstruct(f"{site}: a floating-point atomic_add is not modeled (the model's values are "
                                       "32-bit integers); use an integer counter")
        sem_name, scope_name = (sem, scope) if named else (sems[sem], scopes[scope])
        dtype_tt = ptr.get_element_ty()
        np_dtype = interp._get_np_dtype(dtype_tt)
        addrs = np.asarray(ptr.data).reshape(-1)
        shape = np.asarray(ptr.data).shape
        active = np.asarray(mask.data).reshape(-1) if mask is not None else np.ones(addrs.size, bool)
        args = [np.broadcast_to(np.asarray(o.data), shape).reshape(-1) for o in operands]
        constant = all(o.attr.get(_CONSTANT) for o in operands) and not named
        scalar = addrs.size == 1
        owned = [self.oracle.thread == 0 or everyone] if scalar else self._shares(addrs.size)
        # Triton 3.6: atomic_add(p, 0) with a literal 0 and sem relaxed/acquire is a load (PLATFORM.md)
        as_load = (op == "add" and constant and int(args[0][0]) == 0 and sem_name in ("relaxed", "acquire")
                   and scalar)
        out = np.zeros(addrs.size, dtype=np_dtype)
        taint: set = set()
        first = True
        for j in range(addrs.size):
            if not active[j]:
                continue
            found = self._where(addrs[j], site, "atom", np.dtype(np_dtype).itemsize)
            if found is None:
                if owned[j]:
                    self._add(Item("oob", site, site_key, op="atom"))
                continue
            loc, raw, offset, _part = found  # _where refuses an atomic on part of an element
            self.result.accessed.setdefault(loc, set()).add("sync")
            init = to_model(raw[offset:offset + out.itemsize].view(np_dtype)[0], np_dtype)
            domain = self.oracle.domains.get(loc) or (init,)
            ops = tuple(to_model(a[j], np_dtype) for a in args)
            if not as_load:
                for old in domain:  # what it can write, for the value domain
                    new = atomic_result(op, old, ops, unsigned)
                    if new is not None:
                        self.result.written.setdefault(loc, set()).add(wrap_int32(new))
                        self.result.transitions.setdefault(loc, set()).add((old, wrap_int32(new)))
            if not owned[j]:
                if scalar and not everyone:  # thread 0's result, broadcast through bar.sync: a choice of its own
                    index, value = self._choose(loc, domain, frames, first)
                    first = False
                    self._add(Item("read", site, site_key, (loc,), op="bcast", choice=index, key=index))
                    out[j] = from_model(value, np_dtype)
                    taint.add(index)
                else:
                    taint.add(("foreign", str(site)))
                continue
            index, value = self._choose(loc, domain, frames, first)
            first = False
            if as_load:
                self._add(Item("read", site, site_key, (loc,), sem_name, scope_name, "ld", choice=index, key=index,
                               scalar_one=True))
            else:
                self._add(Item("read", site, site_key, (loc,), sem_name, scope_name, "atom", operands=ops,
                               unsigned=unsigned, choice=index, key=index, scalar_one=scalar and not everyone,
                               fence_kind=op))
            out[j] = from_model(value, np_dtype)
            taint.add(index)
        handle = interp.TensorHandle(out.reshape(shape), dtype_tt)
        if taint:
            handle.attr[_TAINT] = frozenset(taint)
        return handle

    def nvshmem(self, kind: str, dest, nbytes, pe, signal, signal_op: str, signal_value, blocking: bool) -> None:
        """An NVSHMEM call (:func:`nvshmem_call`): a put of ``nbytes`` from the symmetric address
        ``dest`` (a pointer of this rank's copy) to PE ``pe``'s copy, with ``signal`` (likewise)
        updated by ``signal_op``; or ``quiet``/``fence``. Recorded for model thread 0."""
        frames = self._frames()
        site_key = self._site(frames)[1]
        site = self._site([f for f in frames if not f.f_code.co_filename.startswith(_DEVICES)] or frames)[0]  # the user's call
        if self.oracle.thread != 0:
            return
        for value in (pe, nbytes, signal_value):
            self.sink(taint_of(value))  # they decide what is written where
        if kind in ("quiet", "fence"):
            self._add(Item("quiet" if kind == "quiet" else "nvfence", site, site_key))
            return
        target = _scalar(pe)
        dst: list[Loc] = []
        if dest is not None:
            itemsize = dest.dtype.element_ty.primitive_bitwidth // 8
            count, rest = divmod(_scalar(nbytes), itemsize)
            if rest:
                raise UnsupportedConstruct(f"{site}: a put of {_scalar(nbytes)} bytes of {itemsize}-byte elements is "
                                           "not modeled: give a whole number of elements")
            base = self._located(dest, site)
            dst = [Loc(base.buffer, target, base.index + k) for k in range(count)]
            for loc in dst:  # tile data, as a store's (its value is the source's: not followed)
                self.result.accessed.setdefault(loc, set()).add("weak")
                self.result.written.setdefault(loc, set()).add(1)
        sig = None
        if signal is not None:
            mine = self._located(signal, site)
            sig = Loc(mine.buffer, target, mine.index)
            self.result.accessed.setdefault(sig, set()).add("sync")
            value = wrap_int32(_scalar(signal_value))
            for old in self.oracle.domains.get(sig) or (0,):
                new = wrap_int32(atomic_result("exch" if signal_op == "set" else "add", old, (value,), False))
                self.result.written.setdefault(sig, set()).add(new)
                self.result.transitions.setdefault(sig, set()).add((old, new))
        self._add(Item("put", site, site_key, tuple(dst), delivery=Delivery(
            target, tuple(dst), sig, signal_op, 0 if signal_value is None else wrap_int32(_scalar(signal_value)), blocking)))

    def _located(self, pointer, site: Site) -> Loc:
        """The element a scalar pointer (an interpreter tensor) points at; refused outside every allocation."""
        address = int(np.asarray(pointer.handle.data).reshape(-1)[0])
        found = self.memory.locate(address)
        if found is None or found[0].rank is None:
            raise UnsupportedConstruct(f"{site}: an NVSHMEM call's address is not in a symmetric heap buffer "
                                       "(allocate it with sv.heap)")
        return found[0]

    def barrier(self) -> None:
        site, site_key = self._site(self._frames())
        self._add(Item("bar", site, site_key))

    def dot(self) -> None:
        """A ``tl.dot``: what it orders, ``lower_dot``'s ``bar.sync 0`` of the whole CTA (its operands
        staged through shared memory), listed in the verdict as an assumption."""
        site, site_key = self._site(self._frames())
        for low in lowering.lower_dot():  # looked up at call time: one fact, patched in one place
            self._add(Item("bar", site, site_key, barrier_id=low.barrier_id, count=low.count))
        self.result.assumptions.add(DOT_BARRIER)

    def inline_asm(self, asm, constraints, values, type_, pack):
        import triton.runtime.interpreter as interp  # torch/triton: loaded only where a kernel runs

        site, site_key = self._site(self._frames())
        outputs = sum(1 for c in str(constraints).split(",") if c.strip().startswith("="))
        results = []
        loaded: dict[int, Any] = {}
        who = ModelThread(self.oracle.thread, self.oracle.threads, self.launch.num_warps)
        for item in read_inline_asm(str(asm), site, site_key, self.launch.declared_asm, who):
            if item.kind == "assume":
                self.result.assumptions.add(item.op)
            elif item.kind == "asm-memory":
                loaded.update(self._asm_memory(item, values, outputs, site))
            else:
                self._add(item)
        for ty in type_ if isinstance(type_, (list, tuple)) else [type_]:
            scalar = getattr(ty, "scalar", ty)
            shape = tuple(getattr(ty, "shape", ())) or (1,)
            results.append(interp.TensorHandle(np.zeros(shape, dtype=interp._get_np_dtype(scalar)), scalar))
        for index, handle in loaded.items():
            if index < len(results):
                results[index] = handle
        return _AsmResults(results)

    def _asm_memory(self, item: Item, values, outputs: int, site) -> dict:
        """One memory instruction of inline PTX (read by the litmus parser into ``item.op``: a
        Load, Store or Atomic whose operands name the asm's ``$N``), run like the Triton op."""
        ins, one = item.op, item.scalar_one

        def operand(name):
            if isinstance(name, int):
                return name
            index = int(name[1:])
            if index < outputs or index - outputs >= len(values):
                raise UnsupportedConstruct(f"{site}: inline asm operand ${index} is not an input")
            return values[index - outputs]

        address = operand(ins.loc)
        if np.asarray(address.data).size != 1:
            raise UnsupportedConstruct(f"{site}: inline asm memory access on a block (pack or elementwise over a "
                                       "tensor) is not modeled; use it on a scalar pointer")
        kind = type(ins).__name__
        pointee = np.dtype(interp_dtype(address.get_element_ty())).itemsize
        if item.width is not None and item.width != pointee:
            raise UnsupportedConstruct(f"{site}: inline asm {kind.lower()} of {item.width} byte(s) through a pointer to "
                                       f"{pointee}-byte elements: cast the pointer to the access's width "
                                       f"(tl.pointer_type(tl.int8) for .b8), so the model knows which bytes it touches")
        if kind == "Store":
            value = operand(ins.value)
            if isinstance(value, int):
                value = self._literal(value)
            self.store(address, value, None, strong=(ins.sem, ins.scope) if ins.sem != "weak" else None,
                       everyone=not one)
            return {}
        if one:
            raise UnsupportedConstruct(f"{site}: a predicated inline asm read gives the other threads no value; "
                                       "not modeled")
        if kind == "Load":
            out = self.load(address, None, None, None, ins.sem != "weak",
                            strong=(ins.sem, ins.scope) if ins.sem != "weak" else None)
            return {int(ins.dst[1:]): out}
        args = tuple(self._literal(o) if isinstance(o, int) else operand(o) for o in ins.operands)
        out = self.atomic((ins.op, ins.unsigned), address, args, None, ins.sem, ins.scope, everyone=True)
        return {int(ins.dst[1:]): out} if ins.dst else {}

    @staticmethod
    def _literal(value: int):
        import triton.language as tl  # torch/triton: loaded only where a kernel runs
        import triton.runtime.interpreter as interp  # torch/triton: loaded only where a kernel runs

        return interp.TensorHandle(np.array([value], dtype=np.int32), tl.int32)


def interp_dtype(ty) -> np.dtype:
    """The numpy dtype of a Triton element type, as the interpreter stores it."""
    import triton.runtime.interpreter as interp  # torch/triton: loaded only where a kernel runs

    return interp._get_np_dtype(ty)


class _AsmResults:
    """What ``create_inline_asm`` returns to ``tl.inline_asm_elementwise``: its results by index
    (zeros: a fence or barrier's output register carries no value)."""

    def __init__(self, results: list) -> None:
        self.results = results

    def get_result(self, index: int):
        return self.results[index]


_SPANS: dict = {}


def _span(code, lasti: int) -> tuple:
    """The source span (line, end line, column, end column) of the instruction at ``lasti``."""
    spans = _SPANS.get(code)
    if spans is None:
        spans = _SPANS[code] = list(code.co_positions())
    index = lasti // 2
    return spans[index] if 0 <= index < len(spans) else (lasti,)


def watch_deadline(deadline: float | None) -> None:
    """Let the watchdog stop a run that is still going at the check's deadline."""
    if _watchdog is not None:
        _watchdog.deadline = deadline


def _tick() -> None:
    """The current run is alive: it reached a memory operation."""

    if _watchdog is not None:
        _watchdog.stamp = clock.monotonic()


def _invoke(fn, args: dict) -> None:
    """The frame every run starts from (frames above it are the user's kernel)."""
    fn(**args)


def run_program(launch, pid: tuple[int, int, int], memory: Memory, oracle: Oracle) -> RunResult:
    """Run program ``pid`` of ``launch`` once under :func:`hooks` (the caller holds them)."""
    import triton.runtime.interpreter as interp  # torch/triton: loaded only where a kernel runs

    global _active
    run = ProgramRun(launch, pid, memory, oracle)
    builder = interp.interpreter_builder
    builder.set_grid_dim(*launch.grid3)
    builder.set_grid_idx(*pid)
    _active = run
    _tick()
    try:
        with np.errstate(all="ignore"):  # the kernel's own arithmetic (it runs on the values we chose)
            _invoke(launch.fn, launch.args)
    except _Cut as cut:
        run.result.cut = cut.choice
    except _Spin as spin:
        run.result.spin = (spin.loc, spin.value, spin.site, spin.shown)
    except _Bound as bound:
        raise bound.hit from None
    except _Stuck:
        raise LimitHit("timeout", f"program {pid[0]} of {launch.kernel_name} ran {RUN_SILENCE_LIMIT:.0f} s without "
                       "any memory operation (a loop with nothing the model sees in it)") from None
    except SyncVerifyError:
        raise
    except Exception as error:  # noqa: BLE001 -- the user's kernel: its error and line, one line
        ours = error.__cause__
        if isinstance(ours, SyncVerifyError):  # ours, raised where Triton's JIT wraps it (inline asm)
            raise ours from None
        raise KernelError(f"kernel {launch.kernel_name} (program {pid[0]}) cannot run in the interpreter: "
                          f"{_describe(error)}") from None
    finally:
        _active = None
        if _watchdog is not None:
            _watchdog.stamp = None
    return run.result


def _describe(error: BaseException) -> str:
    """The innermost user-code line of an error (through Triton's wrapping) and its message."""
    skip = _skip_dirs()
    place = ""
    root = error
    chain = [error]
    while chain[-1].__cause__ is not None:
        chain.append(chain[-1].__cause__)
    for e in chain:
        tb = e.__traceback__
        while tb is not None:
            name = tb.tb_frame.f_code.co_filename
            if not name.startswith(skip) and not name.startswith("<") and "syncverify" not in name:
                place = f"{name}:{tb.tb_lineno}"
            tb = tb.tb_next
        root = e
    if isinstance(root, SyncVerifyError):
        return str(root)
    return f"{type(root).__name__}: {root}" + (f" ({place})" if place else "")


def kernel_args(kernel, args: tuple, kwargs: dict):
    """The kernel's Python function (rewritten as the interpreter runs it) and its arguments as
    the interpreter passes them (tensors as pointers, scalars as tensors, constexprs as given)."""
    import triton.runtime.interpreter as interp  # torch/triton: loaded only where a kernel runs
    from triton.runtime.jit import _normalize_ty  # torch/triton: loaded only where a kernel runs

    fn = getattr(kernel, "fn", kernel)
    rewritten = interp.InterpretedFunction(fn).rewrite()
    names = list(inspect.signature(fn).parameters)
    annotations = {n: _normalize_ty(t) for n, t in fn.__annotations__.items()}
    constexprs = {n for n in names if annotations.get(n) == "constexpr"}
    kwargs = {k: v for k, v in kwargs.items() if k in names}
    bound = inspect.getcallargs(fn, *args, **kwargs)
    converted = {n: v if n in constexprs else interp._implicit_cvt(v) for n, v in bound.items()}
    return rewritten, converted, bound
