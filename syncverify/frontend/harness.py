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
  calls unless the harness does it (a reset on the wrong stream can race with the previous call);
* ``with sv.graph() as g:`` captures the launches and fills issued inside it, running nothing
  (as ``torch.cuda.graph`` does); each ``g.replay()`` issues them again, in capture order on
  their streams, as one more call: memory is what the last call left (a counter the graph does
  not reset carries over), and later host operations belong to that replay's call.

torch is imported lazily: ``syncverify`` stays importable without it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from syncverify.errors import SyncVerifyError
from syncverify.explore.residency import Residency
from syncverify.streams import WAIT_COMPARISONS  # the comparisons every side of stream operations reads
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

    def __init__(self, world_size: int, size: int = DEFAULT_HEAP_BYTES, *, device: str = "cpu", block=None,
                 backing: Callable[[int, int, int], int] | None = None, align: int = 0) -> None:
        import torch  # lazily: the model runs without torch

        self.world_size = world_size
        #: every rank's heap in one block (a stress run restores it with one copy per iteration); ``block``:
        #: a zeroed ``(world_size, size)`` uint8 tensor to use instead (a stress run's host-mapped heap)
        self.block = torch.zeros((world_size, size), dtype=torch.uint8, device=device) if block is None else block
        self.size = self.block.shape[1]
        #: a stress run's placed heap (``syncverify.kernels.placement``): ``backing(index, offset, nbytes)``
        #: maps each allocation's bytes as it is made and returns how many it mapped (whole ``align``-byte
        #: granules, where every allocation then starts)
        self.backing, self.align = backing, max(align, _ALIGN)
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
        offset = -(-self._top // self.align) * self.align
        if offset + numel * itemsize > self.size:
            raise HarnessError(f"the symmetric heap ({self.size} bytes per rank) is too small for "
                               f"{shape} {dtype}; pass heap_bytes= to check_kernel")
        self._top = offset + numel * itemsize
        index = len(self.allocations)
        if self.backing is not None:
            self._top = offset + self.backing(index, offset, numel * itemsize)  # restores copy up to the top: all mapped
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
    ``zero_``/``fill_`` on a stream), the stream memory operations ``write_value``
    (``cuStreamWriteValue32``), ``wait_value`` (``cuStreamWaitValue32``) and ``copy`` (a peer copy
    by the copy engine), ``record``, ``wait``, ``synchronize``, ``host_barrier``, ``expect``."""

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
    pdl: str = ""  # launch: "" (stream order), "kernel" or "wait" (a programmatic dependent launch; "wait": a
    # griddepcontrol.wait declared first thing, besides those read from the kernel)
    source: Any = None  # copy: the torch tensor view copied from
    cmp: str = ""  # wait_value: "geq" or "eq" (CU_STREAM_WAIT_VALUE_GEQ / _EQ)
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
        self._calls = 0  # call numbers taken (by calls and graph replays: next_call)
        self._issued: set[int] = set()  # call numbers some operation was issued in
        self._capturing: "Graph | None" = None  # the graph being captured into, if any
        self.args: list[Any] = []  # torch tensors outside the heap passed to launches
        self.residency: Residency | None = None  # sv.resident(...): None, every CTA runs

    def resident(self, capacity: int, *, order: str = "any", sms: int = 0, occupancy: dict | None = None,
                 lazy_loading: bool = False, loaded: tuple = ()) -> None:
        """At most ``capacity`` CTAs resident per GPU at once (its SMs times the kernels'
        occupancy), shared by every launch and stream of that GPU, admitted in ``order`` (``any``,
        what CUDA guarantees; ``index``: blockIdx order per launch, what the hardware does in
        practice). ``sms``: spread over that many SMs, ``capacity // sms`` CTAs of one kernel per
        SM, or ``occupancy[kernel]`` (keys: @triton.jit functions or their names) for the kernels
        named; a CTA needs an SM with room for its footprint. ``lazy_loading``: each compiled
        binary's first launch waits for the work issued before it on its GPU, as CUDA lazy loading
        may (docs/residency.md). A kernel launched with other meta-parameters, argument
        specializations or launch options (``num_warps=4`` spelled out or not) is another binary,
        as Triton keys it (GPU run 5). ``loaded``: kernels every binary of which had its module
        loaded before the harness (a warm-up launch, or Triton's ``CompiledKernel._init_handles()``:
        a module loaded but never launched did not stall in run 5); a warm-up launch inside the
        harness is tracked binary by binary. The host is blocked in a load, so later launches
        wait with it. ``syncverify check --resident R`` overrides it."""
        name = lambda k: getattr(getattr(k, "fn", k), "__name__", k)  # noqa: E731
        named = tuple(sorted((name(k), n) for k, n in (occupancy or {}).items()))
        try:
            self.residency = Residency(capacity, order, sms, named, bool(lazy_loading), tuple(name(k) for k in loaded))
        except SyncVerifyError as error:
            raise HarnessError(f"sv.resident: {error} ({_site()})") from None

    def _add(self, op: HostOp) -> HostOp:
        if self._capturing is not None:
            return self._capturing._capture(op)
        op.index = len(self.ops)
        self.ops.append(op)
        self._issued.add(op.call)
        return op

    def next_call(self) -> int:
        """The call number of a graph replay: the current call while nothing was issued in it, else
        one after it and every number taken."""
        number = self.call if self.call not in self._issued else max(self._calls, self.call + 1)
        self._calls = max(self._calls, number + 1)
        return number

    def graph(self) -> "Graph":
        """A graph to capture into: ``with sv.graph() as g: ...`` then ``g.replay()`` (see the
        module docstring)."""
        return Graph(self, _site())

    def _rank_stream(self, rank: int, stream: str) -> None:
        self.heap.check_rank(rank)
        if not isinstance(stream, str) or not stream:
            raise HarnessError(f"stream={stream!r} must be a non-empty name")

    def launch(self, kernel, grid, *args, rank: int, stream: str = "main", pdl: bool = False,
               pdl_wait: bool = False, **kwargs) -> None:
        """Launch ``kernel[grid](*args, **kwargs)`` on ``rank``'s ``stream``.

        ``pdl=True`` (or Triton's own ``launch_pdl=True``): a programmatic dependent launch of the
        kernel launched before it on that stream (its primary). The ``griddepcontrol``
        instructions are read from the kernels (``tl.extra.cuda.gdc_launch_dependents()`` /
        ``gdc_wait()``, or the PTX by hand) and get their ISA meaning where they stand: the
        primary's ``launch_dependents`` lets this launch's programs be scheduled once every primary
        program has run it or exited (scheduling only: no memory order); this kernel's ``wait``
        waits for the primary's completion and makes its writes visible (PTX ISA,
        ``griddepcontrol``). ``pdl_wait=True`` declares one more ``wait`` first thing, for a
        kernel whose code does not show it (listed in the verdict)."""
        self._rank_stream(rank, stream)
        if not hasattr(kernel, "fn"):
            raise HarnessError(f"sv.launch: {kernel!r} is not a @triton.jit function ({_site()})")
        grid = (grid,) if isinstance(grid, int) else tuple(int(g) for g in grid)
        if not 1 <= len(grid) <= 3 or any(g < 1 for g in grid):
            raise HarnessError(f"sv.launch: grid {grid} must be 1 to 3 positive sizes ({_site()})")
        pdl = bool(kwargs.pop("launch_pdl", False)) or pdl
        if pdl_wait and not pdl:
            raise HarnessError(f"sv.launch: pdl_wait=True needs pdl=True (a wait has no prerequisite grid without it) "
                               f"({_site()})")
        self._add(HostOp("launch", self.call, rank, stream, kernel, grid, tuple(args), dict(kwargs), site=_site(),
                         pdl=("wait" if pdl_wait else "kernel") if pdl else ""))

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

    # ----- stream memory operations: ordered by their stream, performed by no SM thread -------------

    def write_value(self, word, value: int, *, rank: int, stream: str = "main") -> None:
        """``cuStreamWriteValue32(stream, word, value, CU_STREAM_WRITE_VALUE_DEFAULT)``: after the
        work issued on ``(rank, stream)`` before it, a 32-bit release write at system scope (the
        default flag's "memory barrier" before the write: docs/nvshmem.md, "Stream memory
        operations"). ``word``: one 32-bit element of a heap buffer."""
        self._rank_stream(rank, stream)
        self._add(HostOp("write_value", self.call, rank, stream, tensor=_word(word, "sv.write_value"),
                         value=int(value), site=_site()))

    def wait_value(self, word, value: int, *, rank: int, stream: str = "main", cmp: str = "geq") -> None:
        """``cuStreamWaitValue32(stream, word, value, CU_STREAM_WAIT_VALUE_GEQ|EQ)``: work issued on
        ``(rank, stream)`` after it waits until ``word`` (one 32-bit element) holds ``>= value``
        (``cmp="geq"``) or ``== value`` (``"eq"``); read with acquire at system scope."""
        self._rank_stream(rank, stream)
        if cmp not in WAIT_COMPARISONS:
            raise HarnessError(f"sv.wait_value: cmp={cmp!r} is not 'geq' or 'eq' ({_site()})")
        self._add(HostOp("wait_value", self.call, rank, stream, tensor=_word(word, "sv.wait_value"),
                         value=int(value), cmp=cmp, site=_site()))

    def copy_(self, dst, src, *, rank: int, stream: str = "main") -> None:
        """``dst.copy_(src)`` by the copy engine on ``(rank, stream)`` (a peer copy, iris's copy-engine
        path): ordered after the stream's earlier work and before its later work, by no SM thread;
        ``dst`` and ``src`` name one rank's copy each, with as many elements."""
        self._rank_stream(rank, stream)
        dst, src = _view(dst), _view(src)
        if dst.numel() != src.numel():
            raise HarnessError(f"sv.copy_: {dst.numel()} elements from {src.numel()} ({_site()})")
        self._add(HostOp("copy", self.call, rank, stream, tensor=dst, source=src, site=_site()))

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


class Graph:
    """A captured sequence of launches and fills (``torch.cuda.CUDAGraph``'s part the model needs):
    captured with ``with sv.graph() as g:``, issued again by each :meth:`replay` as one more call."""

    #: What a capture may hold: work on streams. A host synchronization, a barrier, an event or an
    #: expectation inside a capture is refused (CUDA refuses synchronizing during a capture).
    CAPTURED = ("launch", "write")

    def __init__(self, sv: "Harness", site: str) -> None:
        self.sv = sv
        self.site = site
        self.ops: list[HostOp] = []
        self.state = "new"  # new -> capturing -> captured

    def __enter__(self) -> "Graph":
        if self.state != "new" or self.sv._capturing is not None:
            raise HarnessError(f"sv.graph() at {self.site}: a graph is captured once, and not inside another capture")
        self.state, self.sv._capturing = "capturing", self
        return self

    def __exit__(self, *exc) -> None:
        self.state, self.sv._capturing = "captured", None

    def _capture(self, op: HostOp) -> HostOp:
        if op.kind not in self.CAPTURED:
            raise HarnessError(f"{op.site}: {op.kind} inside the graph capture begun at {self.site} is not modeled; "
                               "capture launches and fills only")
        self.ops.append(op)
        return op

    def replay(self, times: int = 1) -> None:
        """Issue the captured work ``times`` more times, each replay one more call of the harness,
        with memory as the previous call left it."""
        if self.state != "captured":
            raise HarnessError(f"g.replay() at {_site()}: the graph of {self.site} is not captured yet "
                               "(replay after its with-block)")
        if not isinstance(times, int) or times < 1:
            raise HarnessError(f"g.replay(times={times!r}) at {_site()}: give a positive number")
        for _ in range(times):
            self.sv.call = self.sv.next_call()
            for op in self.ops:
                self.sv._add(replace(op, call=self.sv.call, index=0))


def _view(tensor) -> Any:
    if isinstance(tensor, SymmetricTensor):
        raise HarnessError(f"name one rank's copy ({tensor.name}.on(rank)) here ({_site(3)})")
    return tensor


def _word(tensor, what: str) -> Any:
    """One 32-bit element of one rank's copy (what ``cuStream{Write,Wait}Value32`` take)."""
    view = _view(tensor)
    if view.numel() != 1 or view.element_size() != 4:
        raise HarnessError(f"{what}: name one 32-bit element ({tuple(view.shape)} of {view.element_size()}-byte "
                           f"elements given) ({_site(3)})")
    return view


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
                sv.call = max(k, sv._calls)  # k, unless graph replays took call numbers
                sv._calls = sv.call + 1
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
