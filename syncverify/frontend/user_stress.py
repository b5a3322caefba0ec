"""``syncverify stress FILE.py[::NAME]``: the user's own kernels on the GPU, from the harness the model check reads.

The harness is the model check's (``syncverify.frontend.harness``); here its operations *run*:

1. **plan** (:func:`plan_harness`): the harness runs once through the recording ``Harness`` of
   the model check, so bad input (no expectation, a harness that raises, a world size it
   refuses) is one line before any GPU work, and the expectations are known;
2. **rewrite** (``syncverify.frontend.rewrite``): each launched ``@triton.jit`` kernel gets delays
   at its synchronization sites, bounded waits and progress; the user's files are only read;
3. **iterations** (:class:`Engine`): W virtual ranks in one heap on one GPU (or in Triton's CPU
   interpreter, ``interpret=True``); each harness stream name on each rank is a CUDA stream;
   ``host_barrier``/``synchronize``/events order them as the model assumes. One iteration
   restores the heap as the harness left it after its setup (``poison="all"``: with every
   expected output poisoned; ``"previous"``: the outputs keep the previous iteration's values),
   runs ``calls`` calls of the harness, validates every expectation after its call on the device
   (``syncverify.stress.expect``: counts, first bad element, device clock; the output poisoned
   for the next call) and records the hangs the bounded waits counted. On a GPU a block of
   iterations is captured once as a CUDA graph and replayed (:data:`GRAPH_BLOCK` iterations a
   replay); the kernels read the iteration number from their control block, so every iteration
   draws new delays;
4. **report**: the bad iterations (:class:`Failure`), time to first failure from the device
   clock, ``reproduced k/N`` replays of the first failure (:func:`replay_first`), a positive
   control for a harness the model calls safe (``syncverify.frontend.mutants``).

Hangs: :func:`run_in_worker` runs the iterations in a child process whose progress mirror is
shared memory mapped into the GPU's address space (``syncverify.kernels.user_delays``); a
watchdog that sees no progress kills only the child and reports, from the mirror, which programs
finished, where each unfinished one waited and the value it last polled. Every finished block is
appended to ``output`` (JSON lines) as it completes, so partial results stay on disk.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import multiprocessing
import os
import sys
import time
from multiprocessing import shared_memory
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from syncverify.errors import SyncVerifyError
from syncverify.frontend.check import load_harness
from syncverify.frontend.devices import provided
from syncverify.frontend.harness import (Heap, HarnessError, SymmetricTensor, _call_capturing_locals, _name_buffers,
                                         run_harness)
from syncverify.frontend.mutants import candidates, launched
from syncverify.frontend.rewrite import RewriteError, Site, rewrite_kernel
from syncverify.frontend.schedule import GuidedEntry

#: Iterations per CUDA graph (one replay); the host reads the results once per block.
GRAPH_BLOCK = 128
#: Poll cap of a bounded wait: on the GPU about a second of polling; in the interpreter, where a
#: wait for a later program can never succeed, a few polls.
GPU_CAP = 1 << 20
INTERPRET_CAP = 32
MODES = ("none", "random", "guided")
POISONS = ("all", "previous")
MIRROR_HEADER = 8  # int32 words before the program slots: [iterations done, -, set up, ...]
#: Seconds a worker may take to import torch and triton, rewrite and set up before the watchdog counts.
STARTUP_SECONDS = 300.0


class StressInputError(SyncVerifyError):
    """A stress run that cannot start as asked (one line, exit 2)."""


@dataclass
class StressOptions:
    """What ``syncverify stress FILE.py`` runs (the CLI's options)."""

    target: Any
    world_size: int = 2
    calls: int = 1
    iterations: int | None = None
    seconds: float | None = None
    delays: str = "random"
    seed: int = 0
    pct: int = 50
    max_ns: int = 4000
    poison: str = "all"
    interpret: bool = False
    graphs: bool = True
    mirror: bool = True
    cap: int | None = None
    heap_bytes: int = 1 << 26  # per rank (CPU pages are committed only where a harness allocates)
    defines: dict = field(default_factory=dict)
    guided: tuple = ()  # GuidedEntry
    stop_on_failure: bool = False
    max_failures: int = 64
    mutant: str | None = None  # a positive control: the change (syncverify.frontend.mutants) made to a kernel
    substitutes: dict = field(default_factory=dict)  # id(kernel) -> its mutant (filled from ``mutant``)

    def resolved_iterations(self) -> int | None:
        if self.seconds is not None:
            return None
        return self.iterations if self.iterations is not None else (4 if self.interpret else 10_000)


@dataclass
class Expectation:
    """One ``expect_*`` of one call, on the device."""

    index: int  # position in the iteration
    call: int
    name: str
    rank: int | None
    tensor: Any
    reference: Any
    shape: tuple
    site: str


@dataclass
class Failure:
    """One expectation that came out wrong in one iteration (or a hang there), and why."""

    iteration: int
    call: int
    expectation: str
    kind: str  # "unwritten", "corrupt", "hang"
    n_bad: int = 0
    n_unwritten: int = 0
    n_corrupt: int = 0
    element: tuple | None = None
    got: float | None = None
    expected: float | None = None
    device_ns: int = 0
    hang: dict | None = None

    def describe(self) -> str:
        what = f"iteration {self.iteration}, call {self.call}, {self.expectation}: {self.kind}"
        if self.hang:
            h = self.hang
            what += f" (a wait at {h['site']} reached its poll cap, last value {h['value']}, program {h['program']})"
        if self.n_bad:
            what += f"; {self.n_bad} bad elements ({self.n_unwritten} unwritten, {self.n_corrupt} corrupt)"
        if self.element is not None:
            what += f"; element {self.element} expected {self.expected:g}, got {self.got:g}"
        return what

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class StressResult:
    """A stress run of a harness: iterations, failures, timing, the delays it used."""

    harness: str
    world_size: int
    calls: int
    delays: str
    iterations: int = 0
    seconds: float = 0.0
    failures: list = field(default_factory=list)
    bad_iterations: int = 0
    first_failure: Failure | None = None
    first_failure_iteration: int | None = None
    time_to_first_failure_ns: int | None = None
    sites: list = field(default_factory=list)
    interpret: bool = False
    graphs: bool = False
    stopped: str | None = None  # why the run stopped early (a hang the watchdog ended, ...)
    hang_report: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return self.bad_iterations == 0 and self.stopped is None

    @property
    def rate(self) -> float:
        return self.iterations / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict:
        out = {k: v for k, v in self.__dict__.items() if k not in ("failures", "first_failure", "sites")}
        out["failures"] = [f.to_dict() for f in self.failures]
        out["first_failure"] = self.first_failure.to_dict() if self.first_failure else None
        out["sites"] = [s.to_dict() for s in self.sites]
        out["clean"] = self.clean
        out["iterations_per_second"] = round(self.rate, 1)
        return out


# ----- plan: the harness recorded once, as the model check records it ----------------------------

@dataclass
class Plan:
    """The harness function, its name, and what one iteration does (from a recording run)."""

    fn: Callable
    name: str
    expectations: int  # per iteration (all calls)
    launches: int


def plan_harness(options: StressOptions) -> Plan:
    """Load and record the harness; bad input (no expectation, ...) raises one line."""
    if options.delays not in MODES:
        raise StressInputError(f"delays={options.delays!r} is not one of {', '.join(MODES)}")
    if options.poison not in POISONS:
        raise StressInputError(f"poison={options.poison!r} is not one of {', '.join(POISONS)}")
    if options.iterations is not None and options.seconds is not None:
        raise StressInputError("give iterations or seconds, not both")
    if options.iterations is not None and options.iterations < 1:
        raise StressInputError(f"iterations={options.iterations} must be at least 1")
    if options.seconds is not None and options.seconds <= 0:
        raise StressInputError(f"seconds={options.seconds} must be positive")
    if not 0 <= options.pct <= 100 or options.max_ns < 0 or options.max_ns > 1_000_000:
        raise StressInputError(f"delay pct={options.pct} (0..100) or max_ns={options.max_ns} (0..1000000) out of range")
    fn, name = load_harness(options.target)
    _define(fn, options.defines)
    recorded = run_harness(fn, options.world_size, options.calls, heap_bytes=options.heap_bytes)
    expects = [op for op in recorded.ops if op.kind == "expect"]
    if not expects:
        raise HarnessError(f"harness {name} has no expectation (sv.expect_written or sv.expect_equal): a stress run "
                           "would have nothing to validate")
    return Plan(fn, name, len(expects), sum(op.kind == "launch" for op in recorded.ops))


def _define(fn: Callable, defines: dict) -> None:
    """Set module constants of the harness's file (``--define BLOCK=128``): only names it has."""
    scope = fn.__globals__
    for name, value in defines.items():
        if name not in scope:
            raise StressInputError(f"--define {name}: the harness's module has no {name} to set")
        scope[name] = value


# ----- the engine: the harness API, executed ----------------------------------------------------------

@dataclass
class LaunchRecord:
    index: int
    kernel: str
    rank: int
    stream: str
    programs: int
    slot: int
    site: str


class Engine:
    """The harness API (``sv``) executed on the device: what :class:`~syncverify.frontend.harness.Harness`
    records, run (module docstring)."""

    def __init__(self, options: StressOptions, plan: Plan, mirror: Any = None) -> None:
        # torch: only a stress run needs it (the model runs without it)
        import torch

        # torch/triton: the device helpers and the interpreter's patches import them
        from syncverify.kernels import user_delays as ud
        from syncverify.kernels._jit import fences_as_no_ops

        self.fences_as_no_ops = fences_as_no_ops
        self.torch, self.ud = torch, ud
        self.options, self.plan = options, plan
        self.interpret = options.interpret
        self.device = "cpu" if self.interpret else "cuda"
        self.world_size = options.world_size
        self.heap = Heap(options.world_size, options.heap_bytes, device=self.device)
        self.call = 0
        self.rewrites: dict[int, Any] = {}
        self.sites: list[Site] = []
        self._ids = __import__("itertools").count()
        self.on_device: dict[int, Any] = {}
        self.streams: dict[tuple[int, str], Any] = {}
        self.forked: set = set()
        self.expectations: list[Expectation] = []
        self.launches: list[LaunchRecord] = []
        self.ctl = torch.zeros(ud.CTL_SIZE, dtype=torch.int32, device=self.device)
        cap = options.cap or (INTERPRET_CAP if self.interpret else GPU_CAP)
        values = {"seed": options.seed & 0x7FFFFFFF, "mode": 1 if options.delays == "guided" else 0,
                  "pct": options.pct if options.delays == "random" else 0, "max_ns": options.max_ns, "cap": cap}
        for key, value in values.items():
            self.ctl[ud.CTL_INDEX[key]] = value
        self.table = torch.zeros((1, options.world_size, ud.TABLE_WIDTH.value), dtype=torch.int32)
        self.mirror = mirror if mirror is not None else torch.zeros(MIRROR_HEADER + 4096 * ud.SLOT_SIZE.value,
                                                                    dtype=torch.int32, device=self.device)
        self.ring = None
        self.hang_ring = None
        self.slot_in_block = 0
        self.expect_index = 0
        self.launch_slot = 0
        self.control = None if self.interpret else torch.cuda.current_stream()
        self.heartbeat = None  # the mirror's host view, when a watchdog reads it
        self.dry = False  # the setup run of a one-call harness: allocations only
        self.one_call = False

    # ----- the harness API ------------------------------------------------------------------------
    def launch(self, kernel, grid, *args, rank: int, stream: str = "main", **kwargs) -> None:
        self.heap.check_rank(rank)
        if self.dry:
            return
        kernel = self.options.substitutes.get(id(kernel), kernel)
        rewritten = self._rewritten(kernel)
        grid = (grid,) if isinstance(grid, int) else tuple(int(g) for g in grid)
        programs = 1
        for g in grid:
            programs *= g
        num_warps = kwargs.pop("num_warps", 4)
        args = [self._device(a) for a in args]
        kwargs = {k: self._device(v) for k, v in kwargs.items()}
        self.launches.append(LaunchRecord(len(self.launches), rewritten.name, rank, stream, programs,
                                          self.launch_slot, _site()))
        extra = dict(sv_ctl=self.ctl, sv_table=self.table_device, sv_mirror=self.mirror_arg, sv_rank=rank,
                     sv_slot=self.launch_slot, SV_DELAYS=self.options.delays != "none" and not self.interpret,
                     SV_BOUND=True, SV_MIRROR=self.options.mirror, SV_WARPS=num_warps,
                     SV_WORLD=self.world_size, SV_INTERPRET=self.interpret)
        self.launch_slot += programs
        if self.heartbeat is not None:  # the host is issuing (a first launch compiles: seconds, not a hang)
            self.heartbeat[2] += 1
        run = rewritten.kernel.launcher(grid, interpret=self.interpret)
        with self._on(rank, stream), (self.fences_as_no_ops() if self.interpret else contextlib.nullcontext()):
            try:
                run(*args, **kwargs, **extra, num_warps=num_warps)
            except SyncVerifyError:
                raise
            except Exception as error:  # noqa: BLE001 -- the user's kernel: one line, exit 2
                raise RewriteError(f"kernel {rewritten.name} does not compile or run as launched at "
                                   f"{self.launches[-1].site}: {type(error).__name__}: {_first_line(error)}") from None

    def zero_(self, tensor, *, rank: int, stream: str = "main") -> None:
        self._write(tensor, 0, rank, stream, _site())

    def fill_(self, tensor, value, *, rank: int, stream: str = "main") -> None:
        self._write(tensor, value, rank, stream, _site())

    def _write(self, tensor, value, rank: int, stream: str, site: str) -> None:
        self.heap.check_rank(rank)
        if self.dry:
            return
        if isinstance(tensor, SymmetricTensor):
            raise HarnessError(f"name one rank's copy ({tensor.name}.on(rank)) here ({site})")
        with self._on(rank, stream):
            late = self._host_delay(site, rank)
            if late and not self.interpret:
                self.torch.cuda._sleep(int(late * 2))  # SM cycles: about 2 per ns on an H200 (1.98 GHz)
            tensor.fill_(value)

    def record_event(self, *, rank: int, stream: str = "main"):
        if self.interpret:
            return None
        event = self.torch.cuda.Event()
        with self._on(rank, stream) as s:
            event.record(s)
        return event

    def wait_event(self, event, *, rank: int, stream: str = "main") -> None:
        if self.interpret:
            return
        with self._on(rank, stream) as s:
            s.wait_event(event)

    def synchronize(self, *, rank: int) -> None:
        self._join([key for key in self.forked if key[0] == rank])

    def host_barrier(self) -> None:
        self._join(list(self.forked))

    def expect_written(self, tensor) -> None:
        self._expect(tensor, None)

    def expect_equal(self, tensor, reference) -> None:
        self._expect(tensor, reference)

    # ----- the API's plumbing ---------------------------------------------------------------------
    def _expect(self, tensor, reference) -> None:
        from syncverify.stress.expect import expect  # torch/triton: the validation kernel

        if self.dry:
            return
        site = _site(3)
        self._join(list(self.forked))
        views = ([(tensor.name, r, tensor.on(r)) for r in range(self.world_size)] if isinstance(tensor, SymmetricTensor)
                 else [(_name(self.heap, tensor), None, tensor)])
        for name, rank, view in views:
            if not view.is_contiguous():
                raise HarnessError(f"an expectation on a non-contiguous view at {site}: expect a contiguous tensor")
            ref = None
            if reference is not None:
                ref = self._device(reference)
                if tuple(ref.shape) != tuple(view.shape):
                    raise HarnessError(f"expect_equal at {site}: reference shape {tuple(ref.shape)} is not the "
                                       f"tensor's {tuple(view.shape)}")
                key = ("ref", id(reference))
                if key not in self.on_device:
                    self.on_device[key] = ref.to(self.torch.float32).contiguous()
                ref = self.on_device[key]
            index = self.expect_index
            self.expect_index += 1
            if len(self.expectations) < self.plan.expectations:
                label = f"{name}" + (f" on rank {rank}" if rank is not None else "")
                self.expectations.append(Expectation(index, self.call, label, rank, view, ref, tuple(view.shape), site))
            row = self.ring[self.slot_in_block, index]
            expect(view, ref, row, poison=self.options.poison == "all", interpret=self.interpret)

    def _rewritten(self, kernel):
        key = id(kernel)
        if key not in self.rewrites:
            self.rewrites[key] = rewrite_kernel(kernel, next_id=self._ids)
            self.sites.extend(self.rewrites[key].sites)
        return self.rewrites[key]

    def _device(self, value):
        torch = self.torch
        if isinstance(value, torch.Tensor) and value.device.type != self.device:
            if id(value) not in self.on_device:  # copied once, before any graph capture (the eager iteration)
                self.on_device[id(value)] = value.to(self.device)
            return self.on_device[id(value)]
        return value

    def _on(self, rank: int, stream: str):
        engine = self

        class _Scope:
            def __enter__(self):
                if engine.interpret:
                    return None
                key = (rank, stream)
                s = engine.streams.get(key)
                if s is None:
                    s = engine.streams[key] = engine.torch.cuda.Stream()
                if key not in engine.forked:
                    s.wait_stream(engine.control)
                    engine.forked.add(key)
                self.ctx = engine.torch.cuda.stream(s)
                self.ctx.__enter__()
                return s

            def __exit__(self, *exc):
                if not engine.interpret:
                    self.ctx.__exit__(*exc)
                return False

        return _Scope()

    def _join(self, keys) -> None:
        if self.interpret:
            return
        for key in keys:
            self.control.wait_stream(self.streams[key])
            self.forked.discard(key)

    def _host_delay(self, site: str, rank: int) -> int:
        base, _, line = site.rpartition(":")
        for e in self.options.guided if self.options.delays == "guided" else ():
            if e.where == "host" and e.rank == rank and str(e.line) == line and os.path.basename(base) == e.file:
                return e.ns_lo
        return 0

    # ----- iterations ---------------------------------------------------------------------------
    def setup(self) -> Callable:
        """Run the harness's setup (allocations, inputs) here; returns its ``call``, its buffers
        named after the harness's variables as the model check names them.

        A harness that returns None is itself one call: it runs once here with its operations
        dropped (only its allocations kept), then again each iteration, its allocations landing
        at the same offsets (no CUDA graphs then: its inputs are new tensors every call)."""
        names: dict = {}
        self.dry = True
        try:
            call = _call_capturing_locals(self.plan.fn, self, names)
        finally:
            self.dry = False
        _name_buffers(self, call, names)
        if call is None:
            self.one_call = True
            self.heap.names = [a.name for a in self.heap.allocations]

            def call(k):
                self.heap._top = 0
                self.heap.allocations.clear()
                self.heap.buffers.clear()
                self.plan.fn(self)
        return call

    def poison_snapshot(self) -> None:
        """``poison="all"``: every expected output poisoned in the snapshot the heap is restored
        from (NaN for floats, the type's minimum for integers), so that an element no write of
        the iteration reaches is seen as unwritten."""
        from syncverify.stress.expect import poison_value  # torch/triton: the validation kernel's module

        if self.options.poison != "all":
            return
        for e in self.expectations:
            offset = e.tensor.data_ptr() - self.heap.block.data_ptr()
            rank, start = divmod(offset, self.heap.size)
            nbytes = e.tensor.numel() * e.tensor.element_size()
            if start + nbytes > self.top:
                continue
            region = self.snapshot[rank, start:start + nbytes].view(e.tensor.dtype)
            is_float, sentinel = poison_value(e.tensor.dtype)
            region.fill_(float("nan") if is_float else sentinel)

    def prepare(self, call: Callable, block: int) -> None:
        """Buffers of a block; the snapshot the heap is restored from; the guided table; the mirror."""
        torch, ud = self.torch, self.ud
        from syncverify.stress.expect import NFIELDS, NO_BAD  # torch/triton: the validation kernel's module

        self.call_fn = call
        self.block_size = block
        self.ring = torch.zeros((block, self.plan.expectations, NFIELDS), dtype=torch.int32, device=self.device)
        self.hang_ring = torch.zeros((block, 4), dtype=torch.int32, device=self.device)
        self.no_bad = NO_BAD.value
        self.top = max(self.heap._top, 1)
        self.snapshot = self.heap.block[:, :self.top].clone()
        self.table_device = self.table.to(self.device)
        # the kernels' slots start after the header the host writes
        if isinstance(self.mirror, _HostPointer):
            self.mirror_arg = _HostPointer(self.mirror.data_ptr() + 4 * MIRROR_HEADER, self.mirror.dtype)
        else:
            self.mirror_arg = self.mirror[MIRROR_HEADER:]

    def fill_table(self) -> None:
        """The guided table, now that the rewrite has numbered the sites."""
        torch, ud = self.torch, self.ud
        rows = max(len(self.sites), 1)
        table = torch.zeros((rows, self.world_size, ud.TABLE_WIDTH.value), dtype=torch.int32)
        for entry in self.options.guided if self.options.delays == "guided" else ():
            for site in self._sites_of(entry):
                table[site.id, entry.rank] = torch.tensor([entry.ns_lo, entry.ns_hi, _signed(entry.warps), entry.pct,
                                                           entry.program])
        self.table_device = table.to(self.device)

    def _sites_of(self, entry: GuidedEntry) -> list[Site]:
        if entry.where == "host":
            return []
        kernel = [s for s in self.sites if s.kernel == entry.kernel]
        if entry.where == "start":
            return [s for s in kernel if s.where == "start"]
        exact = [s for s in kernel if s.line == entry.line and s.where == entry.where]
        if exact:
            return exact
        if entry.where == "hold":  # a store inside a device helper: every data store of the kernel
            return [s for s in kernel if s.where == "hold"]
        return [s for s in kernel if s.line == entry.line and s.where in ("before", "wait")]

    def iteration(self, j: int) -> None:
        """One iteration into ring row ``j`` (on the control stream; captured or eager)."""
        from syncverify.stress.expect import epilogue_kernel  # torch/triton: a kernel

        ud = self.ud
        self.slot_in_block = j
        self.expect_index = 0
        self.launch_slot = 0
        if self.options.poison == "all" or not self.expectations:
            self.heap.block[:, :self.top].copy_(self.snapshot)
        else:
            self._restore_inputs()
        for k in range(self.options.calls):
            self.call = k
            self.call_fn(k)
        self._join(list(self.forked))
        epilogue_kernel.launcher((1,), interpret=self.interpret)(
            self.ctl, self.hang_ring[j], HANGS=ud.HANGS.value, FIELDS=4, ITERATION=ud.ITERATION.value)

    def _restore_inputs(self) -> None:
        """``poison="previous"``: every allocation but the expected outputs restored."""
        outputs = set()
        for e in self.expectations:
            outputs.add(e.tensor.data_ptr())
        for a in self.heap.allocations:
            for r in range(self.world_size):
                if self.heap.memory[r].data_ptr() + a.offset in outputs:
                    continue
                self.heap.block[r, a.offset:a.offset + a.nbytes].copy_(self.snapshot[r, a.offset:a.offset + a.nbytes])

    def reset_ring(self) -> None:
        self.ring.zero_()
        self.ring[:, :, 3] = self.no_bad


def _signed(mask: int) -> int:
    return mask - (1 << 32) if mask >= 1 << 31 else mask


def _site(depth: int = 2) -> str:
    frame = sys._getframe(depth)
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def _name(heap, tensor) -> str:
    ptr = tensor.data_ptr()
    for a in heap.allocations:
        for r in range(heap.world_size):
            start = heap.memory[r].data_ptr() + a.offset
            if start <= ptr < start + a.nbytes:
                return f"{a.name}@{r}"
    raise HarnessError("an expectation names memory outside the symmetric heap")


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[-1] if text else type(error).__name__


# ----- a run ---------------------------------------------------------------------------------------

def start_engine(options: StressOptions, *, mirror: Any = None,
                 engine: Callable[..., Engine] | None = None) -> tuple[Plan, Engine, int]:
    """Everything before the first iteration: the harness planned, its kernels rewritten, its
    setup run, the buffers of a block and the guided table; ``(plan, engine, block)``. Nothing runs
    a kernel yet (a dry run at the GPU's sizes on the CPU stops here). ``engine``: what builds the
    engine (default :class:`Engine`; one rank of a real-rank run: ``syncverify.frontend.real_ranks``)."""
    plan = plan_harness(options)
    if options.delays == "guided" and not options.guided:
        raise StressInputError("delays='guided' needs a schedule (syncverify.frontend.schedule.guided_schedules)")
    if options.mutant and not options.substitutes:
        options.substitutes = mutant_substitutes(plan, options)
    engine = (engine or Engine)(options, plan, mirror)
    for kernel in _launched_kernels(plan, options):
        engine._rewritten(options.substitutes.get(id(kernel), kernel))
    total = options.resolved_iterations()
    block = 1 if options.interpret or not options.graphs else GRAPH_BLOCK
    if total is not None:
        block = max(1, min(block, total))
    engine.prepare(engine.setup(), block)
    engine.fill_table()
    return plan, engine, block


def run_stress(options: StressOptions, *, mirror: Any = None, progress: Callable[[str], None] | None = None,
               output: Any = None, engine: Callable[..., Engine] | None = None) -> StressResult:
    """Run the harness's iterations in this process (module docstring); ``mirror``: the
    progress mirror's ``(host view, kernel argument)``; ``output``: a file object that gets one
    JSON line per block as it finishes (partial results on disk); ``engine``: as :func:`start_engine`."""
    host = mirror[0] if mirror is not None else None
    plan, engine, block = start_engine(options, mirror=mirror[1] if mirror is not None else None, engine=engine)
    total = options.resolved_iterations()
    engine.heartbeat = mirror = host
    if mirror is not None:
        mirror[2] = 1  # set up: the parent's watchdog counts from here (imports and setup may take long)
    result = StressResult(plan.name, options.world_size, options.calls, options.delays, sites=list(engine.sites),
                          interpret=options.interpret, graphs=False)
    if engine.one_call and options.graphs and not options.interpret:
        result.notes.append("the harness is one call (it returns None): its inputs are new tensors every call, so "
                            "iterations run as eager launches, not CUDA graphs (return call(k) for graphs)")
    if options.interpret:
        result.notes.append("Triton's interpreter runs one program at a time, in program-id order, with no delays: "
                            "a clean run here is no evidence about the GPU")
    started = time.monotonic()
    t0: list[int] = []
    graph = None
    capturable = True
    done = 0
    last_report = started
    while True:
        if total is not None and done >= total:
            break
        if options.seconds is not None and time.monotonic() - started >= options.seconds:
            break
        engine.reset_ring()
        if graph is None and capturable and done >= 1 and options.graphs and not options.interpret and block > 1 \
                and not engine.one_call \
                and (total is None or total - done >= block):
            try:
                graph = _capture(engine, block)
                result.graphs = True
            except Exception as error:  # noqa: BLE001 -- a launch the graph cannot hold: eager launches
                graph, capturable = None, False
                engine.control = engine.torch.cuda.current_stream()
                engine.forked.clear()
                result.notes.append(f"CUDA graph capture failed ({type(error).__name__}: {_first_line(error)}): "
                                    "iterations ran as eager launches")
        if graph is not None and (total is None or total - done >= block):
            graph.replay()
            n = block
        else:
            engine.iteration(0)
            n = 1
        rows, hangs = engine.ring[:n].cpu().tolist(), engine.hang_ring[:n].cpu().tolist()
        found = _failures(engine, rows, hangs, first_iteration=done, t0=t0)
        if done == 0:
            engine.poison_snapshot()  # the expectations are known once the first iteration has run
        done += n
        if mirror is not None:
            mirror[0] = done
        _record(result, found, options)
        if output is not None:
            output.write(json.dumps({"block": done, "failures": [f.to_dict() for f in found]}) + "\n")
            output.flush()
        if progress is not None and time.monotonic() - last_report > 2.0:
            last_report = time.monotonic()
            progress(f"{done} iterations, {result.bad_iterations} bad")
        if options.stop_on_failure and result.bad_iterations:
            result.stopped = None
            break
    result.iterations = done
    result.seconds = time.monotonic() - started
    return result


def mutant_substitutes(plan: Plan, options: StressOptions) -> dict:
    """``{id(kernel): mutant}`` for ``options.mutant`` (a change :func:`syncverify.frontend.mutants.candidates` names)."""
    kernels = launched(plan.fn, options.world_size, options.calls, heap_bytes=options.heap_bytes)
    for key, (kernel, launches) in kernels.items():
        for change, mutant in candidates(kernel, launches):
            if change == options.mutant:
                return {key: mutant}
    raise StressInputError(f"no kernel of {plan.name} has the change {options.mutant!r}")


def replay_first(options: StressOptions, failure: Failure, *, times: int = 3) -> dict:
    """Iterations ``0 .. i`` of the first failure again, ``times`` times, with the same seed (the
    same delays and inputs; not the same hardware timing): how often iteration ``i`` fails the
    same way. ``reproduced k/N``, never "replayed"."""
    again = dataclasses.replace(options, iterations=failure.iteration + 1, seconds=None, stop_on_failure=False)
    reproduced = failed = 0
    for _ in range(times):
        result = run_stress(again)
        there = [f for f in result.failures if f.iteration == failure.iteration]
        failed += bool(there)
        reproduced += any(f.expectation == failure.expectation and f.kind == failure.kind for f in there)
    return {"iteration": failure.iteration, "expectation": failure.expectation, "kind": failure.kind,
            "runs": times, "reproduced": reproduced, "iteration_failed": failed,
            "summary": f"reproduced {reproduced}/{times} (iteration {failure.iteration}, {failure.kind} in "
                       f"{failure.expectation}; iteration {failure.iteration} had some failure in {failed}/{times})"}


def _launched_kernels(plan: Plan, options: StressOptions) -> list:
    kernels = launched(plan.fn, options.world_size, options.calls, heap_bytes=options.heap_bytes)
    return [kernel for kernel, _launches in kernels.values()]


def _capture(engine: Engine, block: int):
    """``block`` iterations captured as one CUDA graph (the kernels were compiled by the eager ones)."""
    torch = engine.torch
    graph = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        engine.control = torch.cuda.current_stream()
        engine.forked.clear()
        for j in range(block):
            engine.iteration(j)
    engine.control = torch.cuda.current_stream()
    return graph


def _failures(engine: Engine, rows: list, hangs: list, *, first_iteration: int, t0: list) -> list[Failure]:
    # torch/triton: the summary rows' helpers live beside the fused kernels' validation kernel
    from syncverify.stress.classify import _float, device_ns

    out = []
    for j, (per_expect, hang) in enumerate(zip(rows, hangs)):
        iteration = first_iteration + j
        if not t0 and per_expect:
            t0.append(device_ns(per_expect[0][6], per_expect[0][7]))
        hang_info = None
        if hang[0]:
            site = next((s for s in engine.sites if s.id == hang[1]), None)
            hang_info = {"count": hang[0], "site": f"{os.path.basename(site.file)}:{site.line}" if site else "?",
                         "kernel": site.kernel if site else "?", "value": hang[2], "program": hang[3]}
        for e, row in zip(engine.expectations, per_expect):
            n_bad, n_unw, n_cor, first, got, exp, lo, hi = row
            if n_bad == 0 and hang_info is None:
                continue
            element = None
            if n_bad:
                element = tuple(int(i) for i in _unravel(first, e.shape))
            kind = "hang" if hang_info else ("unwritten" if n_unw >= n_cor else "corrupt")
            ns = device_ns(lo, hi)
            out.append(Failure(iteration, e.call, e.name, kind, n_bad, n_unw, n_cor, element,
                               _float(got) if n_bad else None, _float(exp) if n_bad else None,
                               ns - t0[0] if t0 and ns else 0, hang_info))
            if hang_info is not None:
                break  # one hang line per iteration
    return out


def _unravel(index: int, shape: tuple) -> list[int]:
    out = []
    for size in reversed(shape):
        out.append(index % size)
        index //= size
    return out[::-1]


def _record(result: StressResult, found: list[Failure], options: StressOptions) -> None:
    iterations = {f.iteration for f in found}
    result.bad_iterations += len(iterations)
    if found and result.first_failure is None:
        result.first_failure = found[0]
        result.first_failure_iteration = found[0].iteration
        result.time_to_first_failure_ns = found[0].device_ns
    room = options.max_failures - len(result.failures)
    result.failures.extend(found[:max(room, 0)])


# ----- the worker process, its watchdog and the progress mirror ------------------------------------

def mirror_words(programs: int) -> int:
    """int32 words of a mirror for ``programs`` program slots (header included)."""
    # torch/triton: the slot layout is the kernels' (syncverify.kernels.user_delays)
    from syncverify.kernels.user_delays import SLOT_SIZE

    return MIRROR_HEADER + max(programs, 1) * SLOT_SIZE.value


class _HostPointer:
    """A host-mapped buffer as Triton reads a tensor argument: an address the GPU can use and a dtype."""

    def __init__(self, ptr: int, dtype) -> None:
        self._ptr, self.dtype = ptr, dtype

    def data_ptr(self) -> int:
        return self._ptr


def map_mirror(buffer, *, interpret: bool):
    """``(host view, kernel argument)`` of a shared-memory mirror: on a GPU the pages are
    registered with CUDA (mapped: the kernels store straight into them, the host and the parent
    process read them while a kernel runs); in the interpreter the host view is the argument."""
    # torch: only a stress run maps the mirror (the model runs without it)
    import torch

    host = torch.frombuffer(buffer, dtype=torch.int32)
    if interpret:
        return host, host
    cudart = torch.cuda.cudart()
    flags = 2  # cudaHostRegisterMapped: with unified addressing the device address is the host address
    code = cudart.cudaHostRegister(host.data_ptr(), host.numel() * 4, flags)
    if int(code) != 0:
        raise StressInputError(f"cannot map the progress mirror into the GPU (cudaHostRegister error {int(code)}); "
                               "run with --no-mirror")
    return host, _HostPointer(host.data_ptr(), torch.int32)


def _worker(options: StressOptions, shm_name: str, output: str | None, results) -> None:
    """The child process: run the iterations with the mirror in shared memory; send the result."""
    shm = shared_memory.SharedMemory(name=shm_name)
    try:
        host, arg = map_mirror(shm.buf, interpret=options.interpret)
        with (open(output, "a", encoding="utf-8") if output else contextlib.nullcontext()) as out:
            result = run_stress(options, mirror=(host, arg) if options.mirror else None, output=out)
        results.put(("ok", result))
    except SyncVerifyError as error:
        results.put(("input", str(error)))
    except Exception as error:  # noqa: BLE001 -- sent to the parent as one line
        results.put(("error", f"{type(error).__name__}: {_first_line(error)}"))
    finally:
        host = arg = None  # the views of the shared pages go before the pages
        shm.close()


def run_in_worker(options: StressOptions, *, watchdog: float = 30.0, output: str | None = None,
                  progress: Callable[[str], None] | None = None) -> StressResult:
    """:func:`run_stress` in a child process, ended by a watchdog when it makes no progress for
    ``watchdog`` seconds; the report of a killed child comes from the shared progress mirror."""
    plan = plan_harness(options)  # bad input: one line, before a process starts
    slots = _slots(plan, options)
    programs = sum(n for *_rest, n in slots)
    shm = shared_memory.SharedMemory(create=True, size=mirror_words(programs) * 4)
    try:
        view = memoryview(shm.buf).cast("i")
        for i in range(len(view)):
            view[i] = 0
        ctx = multiprocessing.get_context("spawn")
        results = ctx.Queue()
        child = ctx.Process(target=_worker, args=(options, shm.name, output, results), daemon=True)
        started = time.monotonic()
        child.start()
        seen, moved = (-1, 0), time.monotonic()
        while True:
            try:
                status, payload = results.get(timeout=0.5)
                break
            except Exception:  # noqa: BLE001 -- queue.Empty: the child is still running
                pass
            if (view[0], view[2]) != seen:  # iterations done, set up: the header the worker writes
                seen, moved = (view[0], view[2]), time.monotonic()
                if progress is not None and seen[0] > 0:
                    progress(f"{seen[0]} iterations")
            if not child.is_alive():
                status, payload = "error", f"the worker process died (exit code {child.exitcode})"
                break
            limit = watchdog if seen[1] else max(watchdog, STARTUP_SECONDS)
            if time.monotonic() - moved > limit:
                child.kill()  # only the worker: the GPU is never reset
                child.join(10)
                result = StressResult(plan.name, options.world_size, options.calls, options.delays,
                                      interpret=options.interpret)
                result.iterations = int(view[0])
                result.seconds = time.monotonic() - started
                result.stopped = f"watchdog: no progress for {watchdog:g} s; the worker process was killed"
                result.hang_report = hang_report(list(view), slots, _site_names(plan, options))
                return result
        child.join(10)
        if status == "input":
            raise StressInputError(payload)
        if status == "error":
            raise SyncVerifyError(f"stress worker failed: {payload}")
        return payload
    finally:
        del view
        shm.close()
        shm.unlink()


def _slots(plan: Plan, options: StressOptions) -> list[tuple[str, int, str, int, int]]:
    """Each launch of one iteration: ``(kernel, rank, stream, first slot, programs)``, in issue order."""
    out, slot = [], 0
    for op in run_harness(plan.fn, options.world_size, options.calls, heap_bytes=options.heap_bytes).ops:
        if op.kind != "launch":
            continue
        n = 1
        for g in op.grid:
            n *= g
        out.append((op.kernel.fn.__name__, op.rank, op.stream, slot, n))
        slot += n
    return out


def _site_names(plan: Plan, options: StressOptions) -> dict[int, str]:
    ids = __import__("itertools").count()
    names = {}
    for kernel in _launched_kernels(plan, options):
        for site in rewrite_kernel(options.substitutes.get(id(kernel), kernel), next_id=ids).sites:
            names[site.id] = f"{os.path.basename(site.file)}:{site.line} ({site.kind}, {site.where})"
    return names


def hang_report(words: list[int], slots: list, sites: dict[int, str]) -> list[str]:
    """What the mirror says about each program of the iteration that was running: finished, or
    where it waited and the value it last polled."""
    # torch/triton: the slot layout is the kernels' (syncverify.kernels.user_delays)
    from syncverify.kernels.user_delays import SLOT_SIZE, STATES

    size = SLOT_SIZE.value
    rows = [words[MIRROR_HEADER + i * size:MIRROR_HEADER + (i + 1) * size] for i in
            range((len(words) - MIRROR_HEADER) // size)]
    current = max((r[4] for r in rows if r[0]), default=0)
    lines = [f"iteration {current} (the mirror's latest; {words[0]} iterations had completed):"]
    for kernel, rank, stream, first, n in slots:
        for p in range(n):
            state, site, value, polls, iteration = rows[first + p] if first + p < len(rows) else (0, 0, 0, 0, 0)
            who = f"rank {rank} {kernel}[{p}] ({stream})"
            if state == 0 or iteration != current:
                lines.append(f"  {who}: not started in this iteration")
            elif STATES[state] == "finished":
                lines.append(f"  {who}: finished")
            else:
                lines.append(f"  {who}: {STATES[state]}, last at {sites.get(site, site)}, last polled value {value}"
                             f" after {polls} polls")
    return lines
