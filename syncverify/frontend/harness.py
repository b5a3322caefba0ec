"""The harness a user writes: a symmetric heap of W virtual ranks, launches and host operations.

A harness is a plain Python function ``harness(sv)`` (marked with :func:`harness`) that allocates
buffers on ``sv.heap``, and returns ``call(k)``, one call of the user's operation; a harness that
returns None is itself one call. Nothing runs a kernel here: :class:`Harness` only *records* what
the host does (launches, stream operations, events, synchronizations, expectations), in order, as
:class:`HostOp` values. :mod:`syncverify.frontend.check` runs every program of every launch under
the model afterwards.

Ordering, as CUDA streams order work (``syncverify.frontend.lift`` turns it into ``host_order``):

* operations on one ``(rank, stream)`` run in issue order;
* different streams are concurrent unless ordered by ``record_event``/``wait_event``,
  ``synchronize(rank)`` (every operation of that rank issued before it, before every one issued
  after it) or ``host_barrier()`` (``synchronize`` of every rank, then a barrier of the host
  threads: everything issued before it, on any rank, before everything issued after it);
* calls follow one another only as the harness orders them: nothing is synchronized between two
  calls unless the harness does it (a reset on the wrong stream can race with the previous call).

torch is imported lazily: ``syncverify`` stays importable without it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from syncverify.errors import SyncVerifyError
from syncverify.explore.residency import Residency
import math
import sys

#: Default size of each rank's heap (bytes). CPU pages are committed only when touched.
DEFAULT_HEAP_BYTES = 1 << 22
_ALIGN = 256  # allocations start at multiples of this many bytes, as iris's allocator does


class HarnessError(SyncVerifyError):
    """A harness that cannot be run as written (it raised, refused the world size, misused the API)."""


def harness(fn: Callable) -> Callable:
    """Mark ``fn(sv)`` as a harness: ``syncverify check FILE.py`` checks every marked function
    (``FILE.py::name`` selects one by name, marked or not)."""
    fn._syncverify_harness = True  # type: ignore[attr-defined]
    return fn


@dataclass
class Allocation:
    """One symmetric buffer: the same ``offset`` in every rank's heap."""

    name: str
    offset: int  # bytes from each heap's base
    shape: tuple[int, ...]
    dtype: Any  # torch.dtype
    itemsize: int
    numel: int

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize


class SymmetricTensor:
    """A buffer every rank has a copy of, at the same heap offset: ``X.on(r)`` is rank r's copy."""

    def __init__(self, heap: "Heap", allocation: Allocation) -> None:
        self.heap = heap
        self.allocation = allocation

    @property
    def name(self) -> str:
        return self.allocation.name

    def on(self, rank: int) -> Any:
        """Rank ``rank``'s copy: a torch tensor inside that rank's heap."""
        self.heap.check_rank(rank)
        a = self.allocation
        raw = self.heap.memory[rank][a.offset:a.offset + a.nbytes]
        return raw.view(a.dtype).view(a.shape)

    def __repr__(self) -> str:
        return f"SymmetricTensor({self.name}, shape={self.allocation.shape})"


class Heap:
    """W heaps of ``size`` bytes (one per virtual rank) and ``bases``, their base addresses."""

    def __init__(self, world_size: int, size: int = DEFAULT_HEAP_BYTES, *, device: str = "cpu") -> None:
        import torch  # lazily: the model runs without torch

        self.world_size = world_size
        self.size = size
        #: every rank's heap in one block (a stress run restores it with one copy per iteration)
        self.block = torch.zeros((world_size, size), dtype=torch.uint8, device=device)
        self.memory = list(self.block)
        #: each rank's heap base address (iris's ``heap_bases``), an int64 tensor
        self.bases = torch.tensor([m.data_ptr() for m in self.memory], dtype=torch.int64, device=device)
        self.allocations: list[Allocation] = []
        self.buffers: list[SymmetricTensor] = []
        #: names for the allocations by position, when a harness allocates again (a stress run of a one-call harness)
        self.names: list[str] = []
        self._top = 0

    def check_rank(self, rank: int) -> None:
        if not isinstance(rank, int) or not 0 <= rank < self.world_size:
            raise HarnessError(f"rank={rank!r} is not one of 0..{self.world_size - 1} (world size {self.world_size})")

    def _allocate(self, shape, dtype, name: str | None) -> SymmetricTensor:

        import torch  # torch/triton: loaded only where a kernel runs

        shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
        itemsize = torch.empty((), dtype=dtype).element_size()
        numel = math.prod(shape)
        offset = -(-self._top // _ALIGN) * _ALIGN
        if offset + numel * itemsize > self.size:
            raise HarnessError(f"the symmetric heap ({self.size} bytes per rank) is too small for "
                               f"{shape} {dtype}; pass heap_bytes= to check_kernel")
        self._top = offset + numel * itemsize
        index = len(self.allocations)
        known = self.names[index] if index < len(self.names) else f"buffer{index}"
        allocation = Allocation(name or known, offset, shape, dtype, itemsize, numel)
        self.allocations.append(allocation)
        tensor = SymmetricTensor(self, allocation)
        self.buffers.append(tensor)
        return tensor

    def zeros(self, shape, dtype=None, *, name: str | None = None) -> SymmetricTensor:
        """A symmetric buffer of zeros on every rank (``name``: how verdicts call it; by default
        the harness's variable name)."""
        import torch  # torch/triton: loaded only where a kernel runs

        return self._allocate(shape, dtype or torch.float32, name)

    def full(self, shape, value, dtype=None, *, name: str | None = None) -> SymmetricTensor:
        """A symmetric buffer filled with ``value`` on every rank."""
        tensor = self.zeros(shape, dtype, name=name)
        for r in range(self.world_size):
            tensor.on(r).fill_(value)
        return tensor


# ----- what the host does, recorded -----------------------------------------------------------

@dataclass
class HostOp:
    """One operation the host issued, in issue order. ``kind``: ``launch``, ``write`` (a
    ``zero_``/``fill_`` on a stream), ``record``, ``wait``, ``synchronize``, ``host_barrier``,
    ``expect``."""

    kind: str
    call: int
    rank: int | None = None
    stream: str | None = None
    kernel: Any = None  # launch: the @triton.jit function
    grid: tuple[int, ...] = ()
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    tensor: Any = None  # write / expect: a torch tensor view inside the heap
    value: float = 0.0  # write: the value written
    event: "StreamEvent | None" = None  # wait: the event waited for
    site: str = ""  # file:line of the harness statement that issued it
    index: int = 0  # position in issue order
    pdl: str = ""  # launch: "" (stream order), "wait" or "no-wait" (a programmatic dependent launch)
    tile: tuple[int, ...] = ()  # expect: the tile shape the harness names (stress classifies each bad tile)


@dataclass(frozen=True)
class StreamEvent:
    """A CUDA-like event: recorded on ``(rank, stream)`` after the operations issued there so far."""

    rank: int
    stream: str
    position: int  # index of the record op


def _site(depth: int = 2) -> str:

    frame = sys._getframe(depth)
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


class Harness:
    """What a harness function receives: the heap, ``world_size`` and the host operations.

    Every method only records; see the module docstring for the ordering each one gives.
    """

    def __init__(self, world_size: int, *, heap_bytes: int = DEFAULT_HEAP_BYTES) -> None:
        self.world_size = world_size
        self.heap = Heap(world_size, heap_bytes)
        self.ops: list[HostOp] = []
        self.call = 0
        self.args: list[Any] = []  # torch tensors outside the heap passed to launches
        self.residency: Residency | None = None  # sv.resident(...): None, every CTA runs

    def resident(self, capacity: int, *, order: str = "any") -> None:
        """At most ``capacity`` CTAs resident per GPU at once (its SMs times the kernels'
        occupancy), shared by every launch and stream of that GPU, admitted in ``order`` (``any``,
        what CUDA guarantees; ``index``: blockIdx order per launch, what the hardware does in
        practice). ``syncverify check --resident R`` overrides it. docs/residency.md says why."""
        try:
            self.residency = Residency(capacity, order)
        except SyncVerifyError as error:
            raise HarnessError(f"sv.resident: {error} ({_site()})") from None

    def _add(self, op: HostOp) -> HostOp:
        op.index = len(self.ops)
        self.ops.append(op)
        return op

    def _rank_stream(self, rank: int, stream: str) -> None:
        self.heap.check_rank(rank)
        if not isinstance(stream, str) or not stream:
            raise HarnessError(f"stream={stream!r} must be a non-empty name")

    def launch(self, kernel, grid, *args, rank: int, stream: str = "main", pdl: bool = False,
               pdl_wait: bool = True, **kwargs) -> None:
        """Launch ``kernel[grid](*args, **kwargs)`` on ``rank``'s ``stream``.

        ``pdl=True``: a programmatic dependent launch of the kernel launched before it on that
        stream (its primary). Declared, not read from the kernels (``gdc_launch_dependents`` and
        ``gdc_wait`` are inline PTX): the primary's programs run ``griddepcontrol.launch_dependents``
        first thing, so this launch's programs may be scheduled once every primary program has
        run it or exited (scheduling only: no memory order); ``pdl_wait=True`` declares that this
        kernel's programs run ``griddepcontrol.wait`` (``tl.extra.cuda.gdc_wait()``) first thing,
        which waits for the primary's completion and makes its writes visible (PTX ISA,
        ``griddepcontrol``); ``pdl_wait=False``: they do not. Both are listed in the verdict."""
        self._rank_stream(rank, stream)
        if not hasattr(kernel, "fn"):
            raise HarnessError(f"sv.launch: {kernel!r} is not a @triton.jit function ({_site()})")
        grid = (grid,) if isinstance(grid, int) else tuple(int(g) for g in grid)
        if not 1 <= len(grid) <= 3 or any(g < 1 for g in grid):
            raise HarnessError(f"sv.launch: grid {grid} must be 1 to 3 positive sizes ({_site()})")
        self._add(HostOp("launch", self.call, rank, stream, kernel, grid, tuple(args), dict(kwargs), site=_site(),
                         pdl=("wait" if pdl_wait else "no-wait") if pdl else ""))

    def zero_(self, tensor, *, rank: int, stream: str = "main") -> None:
        """``tensor.zero_()`` issued on ``rank``'s ``stream`` (a memset, ordered like a launch)."""
        self._write(tensor, 0, rank, stream, _site())

    def fill_(self, tensor, value, *, rank: int, stream: str = "main") -> None:
        """``tensor.fill_(value)`` issued on ``rank``'s ``stream``."""
        self._write(tensor, value, rank, stream, _site())

    def _write(self, tensor, value, rank: int, stream: str, site: str) -> None:
        """A host write, named by the harness line that issued it (``site``)."""
        self._rank_stream(rank, stream)
        self._add(HostOp("write", self.call, rank, stream, tensor=_view(tensor), value=value, site=site))

    def record_event(self, *, rank: int, stream: str = "main") -> StreamEvent:
        """An event after everything issued on ``(rank, stream)`` so far."""
        self._rank_stream(rank, stream)
        op = self._add(HostOp("record", self.call, rank, stream, site=_site()))
        return StreamEvent(rank, stream, op.index)

    def wait_event(self, event: StreamEvent, *, rank: int, stream: str = "main") -> None:
        """Work issued on ``(rank, stream)`` after this waits for ``event``."""
        self._rank_stream(rank, stream)
        if not isinstance(event, StreamEvent):
            raise HarnessError(f"sv.wait_event: {event!r} is not an event from sv.record_event ({_site()})")
        self._add(HostOp("wait", self.call, rank, stream, event=event, site=_site()))

    def synchronize(self, *, rank: int) -> None:
        """The host of ``rank`` waits for all the work it issued (``torch.cuda.synchronize``)."""
        self.heap.check_rank(rank)
        self._add(HostOp("synchronize", self.call, rank, site=_site()))

    def host_barrier(self) -> None:
        """Every rank synchronizes, then the host threads meet (``dist.barrier`` after a sync)."""
        self._add(HostOp("host_barrier", self.call, site=_site()))

    def expect_written(self, tensor, *, tile=None) -> None:
        """Every element of ``tensor`` (a symmetric buffer: every copy; or one copy, ``X.on(r)``)
        must hold a value written by this call once the call's work is done. ``tile``: the shape
        of the tiles the kernels write (an int or a tuple, one size per dimension of a 1-D or 2-D
        tensor, each dividing it); ``syncverify stress`` then classifies each bad tile."""
        for view in _views(tensor, self.world_size):
            self._add(HostOp("expect", self.call, tensor=view, site=_site(), tile=tile_shape(tile, view, _site())))

    def expect_equal(self, tensor, reference, *, tile=None) -> None:
        """``tensor`` must equal ``reference`` after this call. The model tracks which write each
        element holds, not data values: this is checked as :meth:`expect_written` (every element
        written by this call, none stale or unwritten), and the verdict lists it as an assumption.
        ``tile``: as for :meth:`expect_written`."""
        for view in _views(tensor, self.world_size):
            self._add(HostOp("expect", self.call, tensor=view, value=1.0, site=_site(),
                             tile=tile_shape(tile, view, _site())))


def tile_shape(tile, view, site: str) -> tuple[int, ...]:
    """The tile shape an expectation names (``()``: none), checked against the tensor: one
    positive size per dimension of a 1-D or 2-D tensor, each dividing it (else one line)."""
    if tile is None:
        return ()
    sizes = (tile,) if isinstance(tile, int) else tuple(tile)
    shape = tuple(view.shape)
    if not 1 <= len(shape) <= 2:
        raise HarnessError(f"tile={tile!r} at {site}: tiles are named for 1-D or 2-D tensors, this one has shape {shape}")
    if len(sizes) != len(shape) or not all(isinstance(t, int) and not isinstance(t, bool) and t > 0 for t in sizes):
        raise HarnessError(f"tile={tile!r} at {site}: give {len(shape)} positive int size(s), one per dimension of "
                           f"shape {shape}")
    if any(n % t for n, t in zip(shape, sizes)):
        raise HarnessError(f"tile={tile!r} at {site} does not divide the tensor's shape {shape}")
    return sizes


def _view(tensor) -> Any:
    if isinstance(tensor, SymmetricTensor):
        raise HarnessError(f"name one rank's copy ({tensor.name}.on(rank)) here ({_site(3)})")
    return tensor


def _views(tensor, world_size: int) -> list:
    if isinstance(tensor, SymmetricTensor):
        return [tensor.on(r) for r in range(world_size)]
    return [tensor]


def run_harness(fn: Callable, world_size: int, calls: int, *, heap_bytes: int = DEFAULT_HEAP_BYTES) -> Harness:
    """Run harness ``fn`` for ``calls`` calls, recording what it does; name buffers after the
    harness's variables. Anything it raises becomes one :class:`HarnessError` line."""
    sv = Harness(world_size, heap_bytes=heap_bytes)
    where = f"{getattr(fn, '__name__', fn)}"
    names: dict = {}
    try:
        call = _call_capturing_locals(fn, sv, names)
        _name_buffers(sv, call, names)
        if call is None:
            if calls != 1:
                raise HarnessError(f"harness {where} returned None (it is one call), but calls={calls} was asked; "
                                   "return a function call(k) to model several calls")
        else:
            for k in range(calls):
                sv.call = k
                call(k)
    except SyncVerifyError:
        raise
    except Exception as error:  # noqa: BLE001 -- the user's code: one line, never a traceback
        raise HarnessError(f"harness {where} raised {type(error).__name__}: {error}{_raise_site(error)}") from error
    return sv


def _raise_site(error: BaseException) -> str:
    tb = error.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    return f" ({last.tb_frame.f_code.co_filename}:{last.tb_lineno})" if last is not None else ""


def _call_capturing_locals(fn: Callable, sv: Harness, out: dict) -> Any:
    """``fn(sv)``, keeping the harness frame's locals when it returns (to name its buffers)."""

    code = getattr(fn, "__code__", None)
    file = getattr(code, "co_filename", None)

    def profile(frame, event, arg):
        # the harness and the helpers it calls from its own file: their buffer variables
        if event == "return" and file is not None and frame.f_code.co_filename == file:
            for var, value in frame.f_locals.items():
                out.setdefault(var, value)

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        return fn(sv)
    finally:
        sys.setprofile(previous)


def _name_buffers(sv: Harness, call, local_vars: dict) -> None:
    """Buffers named ``bufferN`` get the harness's variable names (its locals, or the closure
    of ``call``)."""
    names: dict[int, str] = {}
    for var, value in local_vars.items():
        if isinstance(value, SymmetricTensor):
            names.setdefault(id(value), var)
    closure = getattr(call, "__closure__", None) or ()
    for var, cell in zip(getattr(getattr(call, "__code__", None), "co_freevars", ()), closure):
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if isinstance(value, SymmetricTensor):
            names.setdefault(id(value), var)
    for buffer in sv.heap.buffers:
        if buffer.name.startswith("buffer") and id(buffer) in names:
            buffer.allocation.name = names[id(buffer)]
