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
   expected output poisoned, its own tagged poison; the outputs the previous iteration's
   validation already poisoned are not copied again; ``"previous"``: the outputs keep the
   previous iteration's values), runs ``calls`` calls of the harness, validates every
   expectation after its call on the device (``syncverify.stress.expect``: counts, first bad
   element, device clock, and per tile where the harness names ``tile=``: never written,
   partial, stale, wrong value; the output poisoned for the next call) and records the hangs the
   bounded waits counted. On a GPU a block of iterations (:data:`GRAPH_BLOCK`) is captured once
   per ring as a CUDA graph (the ring's reset, the launches, host writes and validations) and
   replayed; two rings let the host read one block's results (copied to pinned memory, one read
   per block) while the device runs the next (:class:`_Blocks`). Eager launches stand in where
   a graph cannot: the first iteration (it compiles), a run shorter than a block, a harness that
   is one call (new tensors every call), a capture that fails (the report says which). Every
   block is timed with CUDA events: the rate is device time. The kernels read the iteration
   number from their control block, so every iteration draws new delays;
4. **report**: the bad iterations (:class:`Failure`, with their bad tiles), time to first failure
   from the device clock, ``reproduced k/N`` replays of the first failure (:func:`replay_first`),
   a positive control for a harness the model calls safe (``syncverify.frontend.mutants``).

Hangs: :func:`run_in_worker` runs the iterations in a child process whose progress mirror is
shared memory mapped into the GPU's address space (``syncverify.kernels.user_delays``); a
watchdog that sees no progress kills only the child and reports, from the mirror, which programs
finished, where each unfinished one waited and the value it last polled. Every finished block is
appended to ``output`` (JSON lines) as it completes, so partial results stay on disk.
"""

from __future__ import annotations

import contextlib
import functools
import dataclasses
import itertools
import json
import math
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
from syncverify.frontend.harness import (Heap, HarnessError, SymmetricTensor, _call_capturing_locals, _name_buffers,
                                         tile_shape,
                                         run_harness)
from syncverify.frontend.mutants import candidates, launched
from syncverify.frontend.rewrite import RewriteError, Site, rewrite_kernel
from syncverify.frontend.runner import patch_lang
from syncverify.frontend.schedule import GuidedEntry
from syncverify.kernels.placement import MixedHeap, backing_for

#: Iterations per CUDA graph (one replay); the host reads the results once per block.
GRAPH_BLOCK = 128
#: Poll cap of a bounded wait: on the GPU about a second of polling; in the interpreter, where a
#: wait for a later program can never succeed, a few polls.
GPU_CAP = 1 << 20
INTERPRET_CAP = 32
MODES = ("none", "random", "guided")
POISONS = ("all", "previous")
MIRROR_HEADER = 8  # int32 words before the program slots: [iterations done, -, set up, ...]
#: What one iteration does (:meth:`Engine.iteration`); a stress run does all of it, the timing split
#: (``syncverify.frontend.stress_timing``) leaves parts out to time the rest.
PARTS = frozenset({"restore", "launches", "validate", "epilogue"})
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
    bound_seconds: float | None = None  # an iterations run stops here (host clock) and says so in ``stopped``

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
    after_writes: int = 0  # launches and host writes of the iteration issued before this validation
    tile: tuple = ()  # the tile shape the harness named (``tile=``), () for none
    tag: int = 0  # this output's poison tag (syncverify.stress.expect)


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
    n_stale: int = 0
    tiles: list = field(default_factory=list)  # the bad tiles, where the harness names tiles: class and counts

    def tile_classes(self) -> dict[str, int]:
        """How many of this failure's bad tiles fell in each class."""
        found: dict[str, int] = {}
        for t in self.tiles:
            found[t["class"]] = found.get(t["class"], 0) + 1
        return found

    def describe(self) -> str:
        what = f"iteration {self.iteration}, call {self.call}, {self.expectation}: {self.kind}"
        if self.hang:
            h = self.hang
            what += f" (a wait at {h['site']} reached its poll cap, last value {h['value']}, program {h['program']})"
        if self.n_bad:
            what += (f"; {self.n_bad} bad elements ({self.n_unwritten} unwritten, {self.n_stale} stale, "
                     f"{self.n_corrupt} corrupt)")
        if self.tiles:
            first = self.tiles[0]
            what += ("; bad tiles: " + ", ".join(f"{n} {c}" for c, n in sorted(self.tile_classes().items()))
                     + f" (first: tile {tuple(first['at'])} {first['class']}, {first['bad']} of {first['size']} "
                     "elements bad)")
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
    # device time (CUDA events; 0 in the interpreter): every block's iterations, the steady state
    # (after the first iteration, which compiles), and the CUDA-graph blocks alone
    device_seconds: float = 0.0
    steady_iterations: int = 0
    steady_device_seconds: float = 0.0
    graph_iterations: int = 0
    graph_device_seconds: float = 0.0
    tile_classes: dict = field(default_factory=dict)  # bad tiles of the whole run, per class (tile=)

    @property
    def clean(self) -> bool:
        return self.bad_iterations == 0 and self.stopped is None

    @property
    def rate(self) -> float:
        """Validated iterations per second: of the steady state on the device clock where there
        is one (a GPU), else of the host's clock (the interpreter)."""
        if self.steady_device_seconds > 0:
            return self.steady_iterations / self.steady_device_seconds
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
    tiles: tuple = ()  # per expectation, in issue order: how many tiles it names (0: none)
    buffers: tuple[str, ...] = ()  # the heap's allocations in order, named as the model check names them


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
    placed = placed_buffers(options) or frozenset()  # None (no placement) or empty (the whole heap): no name to check
    buffers = tuple(a.name for a in recorded.heap.allocations)
    if placed - set(buffers):
        raise StressInputError(f"the guided placement names {', '.join(sorted(placed - set(buffers)))}, which harness "
                               f"{name} does not allocate (its heap buffers: {', '.join(buffers) or 'none'})")
    return Plan(fn, name, len(expects), sum(op.kind == "launch" for op in recorded.ops), tiles_named(expects), buffers)


def tiles_named(expects) -> tuple[int, ...]:
    """Per expectation, in issue order: how many tiles it names (0: none; ``tile=`` not given)."""
    return tuple(math.prod(n // t for n, t in zip(op.tensor.shape, op.tile)) if op.tile else 0 for op in expects)


def stress_sizes(target: str) -> dict:
    """The harness file's ``STRESS_SIZES``: the module constants a GPU run sets (as ``--define``
    does), or ``{}`` where the file names none. The model check keeps the file's values; a GPU
    run at those (a few 4 x 4 tiles) would show the hardware nothing. Bad input raises one line."""
    fn, name = load_harness(target)
    sizes = fn.__globals__.get("STRESS_SIZES")
    if sizes is None:
        return {}
    if not isinstance(sizes, dict) or not all(
            isinstance(k, str) and (v is None or (isinstance(v, int) and not isinstance(v, bool)))
            for k, v in sizes.items()):
        raise StressInputError(f"harness {name}: STRESS_SIZES must map module constant names to integers "
                               f"(or None), as --define NAME=VALUE does; it is {sizes!r}"[:300])
    unknown = sorted(k for k in sizes if k not in fn.__globals__)
    if unknown:
        raise StressInputError(f"harness {name}: STRESS_SIZES names {', '.join(unknown)}, which its module does "
                               "not have")
    return dict(sizes)


def with_stress_sizes(options: StressOptions) -> tuple[StressOptions, str]:
    """On a GPU, the harness file's ``STRESS_SIZES`` with each ``--define`` over them, and the line
    that says so ("" where nothing changed: the interpreter, or a file that names none)."""
    if options.interpret:
        return options, ""
    sizes = stress_sizes(options.target)
    if not sizes:
        return options, ""
    defines = {**sizes, **options.defines}
    over = sorted(k for k, v in options.defines.items() if sizes.get(k, object()) != v)
    return dataclasses.replace(options, defines=defines), (
        "sizes: " + " ".join(f"{k}={v}" for k, v in defines.items()) + " (the harness's STRESS_SIZES"
        + (f", --define {', '.join(over)} over them" if over else "") + "; the model checks the file's own values)")


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
        # the planned placement (guided entries where="place"): named buffers in host-mapped memory and
        # the rest on the GPU, in one address range (syncverify.kernels.placement); no name: the whole heap
        self.host_heap = self.mixed_heap = None
        self.placed = placed_buffers(options)
        if self.placed is not None and not self.interpret:
            if self.placed:
                self.mixed_heap = MixedHeap(options.world_size, options.heap_bytes, device=torch.cuda.current_device())
                on_host = {i for i, name in enumerate(plan.buffers) if name in self.placed}
                self.heap = Heap(options.world_size, options.heap_bytes, device=self.device, block=self.mixed_heap.block,
                                 backing=backing_for(self.mixed_heap, on_host.__contains__),
                                 align=self.mixed_heap.granule)
            else:
                self.host_heap, block = host_mapped_block(options.world_size, options.heap_bytes)
                self.heap = Heap(options.world_size, options.heap_bytes, device=self.device, block=block)
        else:
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
        self.ring = self.hang_ring = self.tile_ring = None
        self.slot_in_block = 0
        self.expect_index = 0
        self.launch_slot = 0
        self.control = None if self.interpret else torch.cuda.current_stream()
        self.heartbeat = None  # the mirror's host view, when a watchdog reads it
        self.dry = False  # the setup run of a one-call harness: allocations only
        self.one_call = False
        self._capturing: "_EngineGraph | None" = None  # sv.graph() being captured: calls recorded, not run
        self.writes = 0  # launches and host writes issued in the current iteration
        self.tags: dict = {}  # (data_ptr, numel, dtype) of each expected output -> its poison tag
        self.tile_offsets = list(itertools.accumulate(plan.tiles, initial=0))[:-1]
        self.restore: list | None = None  # (rank or None for every rank, start, end) byte ranges (plan_restore)
        self.parts = PARTS  # what an iteration does (the timing split leaves parts out)
        # the planned L2 congestion (a guided entry where="congest"): its ns, and its buffer once allocated
        self.congest_ns = max((e.ns_hi for e in options.guided if e.where == "congest"), default=0) \
            if options.delays == "guided" else 0
        self.congest_buf = None
        # the planned traffic aimed at heap buffers (guided entries where="aim"): (buffer, ns), and its sink
        self.aims = [(e.buffer, e.ns_hi) for e in options.guided if e.where == "aim"] \
            if options.delays == "guided" else []
        self.aim_sink = None
        self.as_written = False  # launch the user's kernels as written, not rewritten (the timing split)

    # ----- the harness API ------------------------------------------------------------------------
    def resident(self, capacity: int, **options) -> None:
        """``sv.resident``: what the model assumes of the GPU; the device has its own residency."""

    def graph(self) -> "_EngineGraph":
        """``sv.graph()``: launches and fills captured, then issued again by each ``replay()``."""
        return _EngineGraph(self)

    def launch(self, kernel, grid, *args, rank: int, stream: str = "main", pdl: bool = False,
               pdl_wait: bool = False, **kwargs) -> None:
        self.heap.check_rank(rank)
        if self._capturing is not None:
            self._capturing.calls.append(functools.partial(self.launch, kernel, grid, *args, rank=rank, stream=stream,
                                                           pdl=pdl, pdl_wait=pdl_wait, **kwargs))
            return
        if self.dry:
            return
        # PDL: Triton's own launch option on the GPU (the kernel's griddepcontrol runs as written;
        # pdl_wait declares a wait the model adds, nothing to run); the interpreter runs launches
        # one after another, which PDL only relaxes.
        if kwargs.pop("launch_pdl", False) or pdl:
            if not self.interpret:
                kwargs["launch_pdl"] = True
        kernel = self.options.substitutes.get(id(kernel), kernel)
        if "launches" not in self.parts:
            return
        if self.as_written:  # the timing split: the kernel the user wrote, no delays, bounds or mirror
            self._launch_as_written(kernel, grid, args, kwargs, rank, stream)
            return
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
                     sv_slot=self.launch_slot, SV_DELAYS=self._delay_sites(rewritten.name),
                     SV_BOUND=True, SV_MIRROR=self.options.mirror, SV_WARPS=num_warps,
                     SV_WORLD=self.world_size, SV_INTERPRET=self.interpret)
        self.launch_slot += programs
        self.writes += 1
        if self.heartbeat is not None:  # the host is issuing (a first launch compiles: seconds, not a hang)
            self.heartbeat[2] += 1
        run = rewritten.kernel.launcher(grid, interpret=self.interpret)
        with self._on(rank, stream), (self.fences_as_no_ops() if self.interpret else contextlib.nullcontext()), \
                (_extern_builtins(rewritten.kernel) if self.interpret else contextlib.nullcontext()):
            try:
                run(*args, **kwargs, **extra, num_warps=num_warps)
            except SyncVerifyError:
                raise
            except Exception as error:  # noqa: BLE001 -- the user's kernel: one line, exit 2
                raise RewriteError(f"kernel {rewritten.name} does not compile or run as launched at "
                                   f"{self.launches[-1].site}: {type(error).__name__}: {_first_line(error)}") from None

    def _launch_as_written(self, kernel, grid, args, kwargs, rank: int, stream: str) -> None:
        """The user's kernel itself on the harness's stream (only the timing split does this: an
        unbounded wait could hang here, so it runs only what a clean stress run has just run)."""
        grid = (grid,) if isinstance(grid, int) else tuple(int(g) for g in grid)
        args = [self._device(a) for a in args]
        kwargs = {k: self._device(v) for k, v in kwargs.items()}
        with self._on(rank, stream):
            kernel[grid](*args, **kwargs)

    def zero_(self, tensor, *, rank: int, stream: str = "main") -> None:
        self._write(tensor, 0, rank, stream, _site())

    def fill_(self, tensor, value, *, rank: int, stream: str = "main") -> None:
        self._write(tensor, value, rank, stream, _site())

    def _write(self, tensor, value, rank: int, stream: str, site: str) -> None:
        self.heap.check_rank(rank)
        if self._capturing is not None:
            self._capturing.calls.append(functools.partial(self._write, tensor, value, rank, stream, site))
            return
        if self.dry:
            return
        if isinstance(tensor, SymmetricTensor):
            raise HarnessError(f"name one rank's copy ({tensor.name}.on(rank)) here ({site})")
        with self._on(rank, stream):
            self.writes += 1
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

    def expect_written(self, tensor, *, tile=None) -> None:
        self._expect(tensor, None, tile)

    def expect_equal(self, tensor, reference, *, tile=None) -> None:
        self._expect(tensor, reference, tile)

    # ----- the API's plumbing ---------------------------------------------------------------------
    def _expect(self, tensor, reference, tile) -> None:
        from syncverify.stress.expect import expect, tag_of  # torch/triton: the validation kernel

        if self.dry:
            return
        site = _site(3)
        self._join(list(self.forked))
        if "validate" not in self.parts:  # the timing split: the launches without their validation
            return
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
            shape = tile_shape(tile, view, site)
            key = (view.data_ptr(), view.numel(), view.dtype)
            if key not in self.tags:  # one poison per distinct output (syncverify.stress.expect)
                self.tags[key] = tag_of(len(self.tags), view.dtype)
            if len(self.expectations) < self.plan.expectations:
                label = f"{name}" + (f" on rank {rank}" if rank is not None else "")
                self.expectations.append(Expectation(index, self.call, label, rank, view, ref, tuple(view.shape), site,
                                                     self.writes, shape, self.tags[key]))
            tiles = None
            if shape:
                first = self.tile_offsets[index]
                tiles = self.tile_ring[self.slot_in_block, first:first + self.plan.tiles[index]]
            expect(view, ref, self.ring[self.slot_in_block, index], tiles, tile=shape, tag=self.tags[key],
                   poison=self.options.poison == "all", interpret=self.interpret)

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
        from (its own tagged poison, ``syncverify.stress.expect``), so that an element no write
        of the iteration reaches is seen as unwritten, and one copied from another output before
        that output was written as stale."""
        from syncverify.stress.expect import fill_poison  # torch/triton: the validation kernel's module

        if self.options.poison != "all":
            return
        for e in self.expectations:
            offset = e.tensor.data_ptr() - self.heap.block.data_ptr()
            rank, start = divmod(offset, self.heap.size)
            nbytes = e.tensor.numel() * e.tensor.element_size()
            if start + nbytes > self.top:
                continue
            fill_poison(self.snapshot[rank, start:start + nbytes].view(e.tensor.dtype), e.tag)

    def prepare(self, call: Callable, block: int) -> None:
        """Buffers of a block; the snapshot the heap is restored from; the guided table; the mirror."""
        torch = self.torch
        from syncverify.stress.expect import NO_BAD, NTILE_FIELDS, ROW_WORDS  # torch/triton: the validation kernel's module

        self.call_fn = call
        self.block_size = block
        # two rings on a GPU: the host reads one block's results while the device runs the next block
        tiles = max(sum(self.plan.tiles), 1)
        self.rings = [(torch.zeros((block, self.plan.expectations, ROW_WORDS), dtype=torch.int32, device=self.device),
                       torch.zeros((block, 4), dtype=torch.int32, device=self.device),
                       torch.zeros((block, tiles, NTILE_FIELDS), dtype=torch.int32, device=self.device))
                      for _ in range(1 if self.interpret else 2)]
        self.use_ring(0)
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

    def _delay_sites(self, kernel: str) -> int:
        """``SV_DELAYS`` for a launch of ``kernel``: the bit mask of the delay sites compiled in
        (``syncverify.frontend.rewrite``): every site for random delays, only the sites the guided
        schedule delays for guided ones (the rest of the kernel runs as written between them), none
        without delays or in the interpreter (no clock)."""
        if self.options.delays == "none" or self.interpret:
            return 0
        if self.options.delays != "guided":
            return -1
        return sum({1 << site.id for entry in self.options.guided for site in self._sites_of(entry)
                    if site.kernel == kernel})

    def _sites_of(self, entry: GuidedEntry) -> list[Site]:
        if entry.where in ("host", "congest", "aim", "place"):  # not a kernel site: the host delays a write / launches a kernel
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
        self.writes = 0
        if "restore" not in self.parts:  # the timing split: the rest of an iteration without its restore
            pass
        elif self.restore is not None:
            for rank, start, end in self.restore:
                rows = slice(None) if rank is None else rank
                self.heap.block[rows, start:end].copy_(self.snapshot[rows, start:end])
        elif self.options.poison == "all" or not self.expectations:
            self.heap.block[:, :self.top].copy_(self.snapshot)
        else:
            self._restore_inputs()
        if self.congest_ns and "launches" in self.parts:
            self._congest()
        if self.aims and "launches" in self.parts:
            self._aim()
        for k in range(self.options.calls):
            self.call = k
            self.call_fn(k)
        self._join(list(self.forked))
        if "epilogue" in self.parts:
            epilogue_kernel.launcher((1,), interpret=self.interpret)(
                self.ctl, self.hang_ring[j], HANGS=ud.HANGS.value, FIELDS=4, ITERATION=ud.ITERATION.value)

    def _congest(self) -> None:
        """The guided schedule's L2 congestion (``syncverify.kernels.congest``): a bounded kernel on
        its own stream, issued before the harness's launches so that it runs beside them; the
        harness's next join (its host barrier) waits for it."""
        from syncverify.kernels import congest  # triton: a kernel

        if self.congest_buf is None:
            n = congest.INTERPRET_ELEMENTS if self.interpret else congest.GPU_ELEMENTS
            self.congest_buf = self.torch.zeros(n, dtype=self.torch.int32, device=self.device)
        ctas = 1 if self.interpret else congest.CTAS
        with self._on(0, "sv-congest"):
            congest.sv_congest.launcher((ctas,), interpret=self.interpret)(
                self.congest_buf, self.congest_buf.numel(), self.congest_ns, BLOCK=congest.BLOCK,
                ROUNDS=congest.INTERPRET_ROUNDS, INTERPRET=self.interpret)

    def _aim(self) -> None:
        """The guided schedule's aimed traffic (``syncverify.kernels.congest.sv_aim``): for each aimed
        buffer, a bounded kernel of loads of every rank's copy (in this process's heap) on the
        congestion's stream, issued before the harness's launches; joined with it."""
        from syncverify.kernels import congest  # triton: a kernel

        torch = self.torch
        if self.aim_sink is None:
            self.aim_sink = torch.zeros(2 * congest.BLOCK, dtype=torch.int32, device=self.device)
        ctas = 1 if self.interpret else congest.AIM_CTAS
        for name, ns in self.aims:
            found = [a for a in self.heap.allocations if a.name == name]
            if not found:
                raise StressInputError(f"the guided schedule aims traffic at {name!r}, which the harness does not "
                                       f"allocate (its buffers: {', '.join(a.name for a in self.heap.allocations)})")
            a = found[0]
            words = a.nbytes // 4
            for row in range(self.heap.block.shape[0]):
                view = self.heap.block[row, a.offset:a.offset + words * 4].view(torch.int32)
                with self._on(0, "sv-congest"):
                    congest.sv_aim.launcher((ctas,), interpret=self.interpret)(
                        view, words, self.aim_sink, ns, BLOCK=congest.BLOCK, ROUNDS=congest.INTERPRET_ROUNDS,
                        INTERPRET=self.interpret)

    def plan_restore(self) -> None:
        """``poison="all"``, once the first iteration has shown the expectations: the ranges the
        next iterations restore from the snapshot. An expected output whose last validation came
        after the iteration's last write is left out: that validation poisoned it, so it already
        holds what the (poisoned) snapshot would put there; everything else (inputs, flags,
        workspaces) is restored. Saves copying the outputs twice per iteration."""
        if self.options.poison != "all" or not self.expectations:
            return
        base = self.heap.block.data_ptr()
        # one list per row of the heap block this engine restores (one row in a real-rank process)
        skip: list[list[tuple[int, int]]] = [[] for _ in range(self.heap.block.shape[0])]
        for e in self.expectations:
            if e.after_writes != self.writes:
                continue
            rank, start = divmod(e.tensor.data_ptr() - base, self.heap.size)
            skip[rank].append((start, start + e.tensor.numel() * e.tensor.element_size()))
        per_rank = [_complement(sorted(ranges), self.top) for ranges in skip]
        if all(ranges == per_rank[0] for ranges in per_rank):
            self.restore = [(None, a, b) for a, b in per_rank[0]]
        else:
            self.restore = [(r, a, b) for r, ranges in enumerate(per_rank) for a, b in ranges]

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

    def close(self) -> None:
        """Give back a placed heap's mappings (``syncverify.kernels.placement``): a process that runs
        several stress runs (replays, benchmarks) would otherwise keep every run's pinned host pages."""
        if self.mixed_heap is not None:
            self.mixed_heap.close()
            self.mixed_heap = None

    def use_ring(self, index: int) -> None:
        """The iterations issued from now on write their results into ring ``index``."""
        self.ring, self.hang_ring, self.tile_ring = self.rings[index]

    def reset_ring(self) -> None:
        self.ring.zero_()
        self.ring[:, :, 3] = self.no_bad
        if any(self.plan.tiles):
            self.tile_ring.zero_()


def _complement(ranges: list[tuple[int, int]], top: int) -> list[tuple[int, int]]:
    """``[0, top)`` without the sorted ``ranges``, as ``(start, end)`` pairs."""
    out, at = [], 0
    for start, end in ranges:
        if start > at:
            out.append((at, start))
        at = max(at, end)
    if at < top:
        out.append((at, top))
    return out


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
    if total is not None:  # the first iteration runs eager (it compiles): a short run is that, then one block
        block = max(1, min(block, total - 1 if total > 1 else total))
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
    try:
        return _iterate(options, plan, engine, block, host, progress, output)
    finally:
        engine.close()


def _iterate(options: StressOptions, plan: Plan, engine: Engine, block: int, host: Any,
             progress: Callable[[str], None] | None, output: Any) -> StressResult:
    """:func:`run_stress`'s iterations, blocks and result, on an engine already set up."""
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
                            "a clean run here is no evidence about the GPU; no CUDA graphs there either (a capture "
                            "needs a GPU): iterations run one at a time, timed on the host's clock")
        if engine.placed is not None:
            result.notes.append("the planned placement of the heap in host-mapped memory is a GPU action: the "
                                "interpreter's heap is host memory already, read and written in program order")
    elif engine.host_heap is not None:
        result.notes.append("the symmetric heap is in host-mapped memory (the guided schedule's placement)")
    elif engine.mixed_heap is not None:
        result.notes.append(f"{', '.join(sorted(engine.placed))} in host-mapped memory, the rest of the heap on the GPU, "
                            f"in one address range (the guided schedule's placement)")
    started = time.monotonic()
    blocks = _Blocks(engine, result, options, block, output=output, mirror=mirror)
    last_report = started
    while True:
        if total is not None and blocks.issued >= total:
            break
        if options.seconds is not None and time.monotonic() - started >= options.seconds:
            break
        if options.stop_on_failure and result.bad_iterations:
            break
        if options.bound_seconds is not None and time.monotonic() - started >= options.bound_seconds:
            result.stopped = (f"the time bound of {options.bound_seconds:g} s, after {blocks.issued} of {total} "
                              "iterations issued")
            break
        if blocks.graphs is None and blocks.issued >= 1 and options.graphs and not options.interpret and block > 1 \
                and not engine.one_call and (total is None or total - blocks.issued >= block):
            blocks.capture()
        left = block if total is None else total - blocks.issued
        if blocks.graphs and left >= block:
            blocks.issue(block, graph=True)
        else:  # eager: the first iteration (it compiles), a run shorter than a block, or no graphs
            blocks.issue(1 if blocks.issued == 0 or options.stop_on_failure else min(block, left), graph=False)
        if progress is not None and time.monotonic() - last_report > 2.0:
            last_report = time.monotonic()
            progress(f"{blocks.harvested} iterations, {result.bad_iterations} bad")
    blocks.drain()
    result.iterations = blocks.harvested
    result.seconds = time.monotonic() - started
    blocks.timing()
    if not result.graphs and not options.interpret and not engine.one_call and blocks.capturable:
        why = ("CUDA graphs are off (graphs=False)" if not options.graphs else
               f"the run is shorter than one CUDA-graph block ({block} iterations after the first)")
        result.notes.append(f"iterations ran as eager launches: {why}")
    return result


class _Blocks:
    """Blocks of iterations issued to the device and read back, at most one block in flight
    while the host reads the other (two rings on a GPU).

    A block is a CUDA-graph replay (its ring's reset, ``block`` iterations of launches, host
    writes and validations, all captured) or eager launches. Its results (the ring: per
    iteration and expectation the counts, the first bad element and the device clock; per
    iteration the hang fields) are copied into pinned host memory behind the block and read once
    per block. Every block is timed with CUDA events around its iterations: the rate is device
    time, not the host's clock."""

    def __init__(self, engine: Engine, result: StressResult, options: StressOptions, block: int, *,
                 output: Any, mirror: Any) -> None:
        self.engine, self.result, self.options, self.block = engine, result, options, block
        self.output, self.mirror = output, mirror
        self.graphs: list | None = None  # one CUDA graph per ring, once captured
        self.capturable = True
        self.issued = self.harvested = 0
        self.free = list(range(len(engine.rings)))
        self.pending: list[dict] = []
        self.t0: list[int] = []
        self.timed: list[tuple[Any, Any, int, bool]] = []  # (start event, end event, iterations, graph)
        self.host = None
        if not engine.interpret:
            torch = engine.torch
            self.host = [tuple(torch.empty(tuple(t.shape), dtype=t.dtype, pin_memory=True) for t in ring)
                         for ring in engine.rings]

    def capture(self) -> None:
        """One graph per ring (after the eager first iteration compiled every kernel); a launch
        the graph cannot hold leaves the run on eager launches, with a note saying why."""
        if not self.capturable:
            return
        self.drain()
        try:
            self.graphs = [_capture(self.engine, self.block, ring) for ring in range(len(self.engine.rings))]
            self.result.graphs = True
        except Exception as error:  # noqa: BLE001 -- a launch the graph cannot hold: eager launches
            self.graphs, self.capturable = [], False
            engine = self.engine
            engine.control = engine.torch.cuda.current_stream()
            engine.forked.clear()
            self.result.notes.append(f"CUDA graph capture failed ({type(error).__name__}: {_first_line(error)}): "
                                     "iterations ran as eager launches")

    def issue(self, n: int, *, graph: bool) -> None:
        """``n`` iterations into a free ring (reading the oldest block back first when none is free)."""
        engine = self.engine
        if not self.free:
            self._harvest(self.pending.pop(0))
        ring = self.free.pop(0)
        engine.use_ring(ring)
        start = end = None
        if not engine.interpret:
            start = engine.torch.cuda.Event(enable_timing=True)
            start.record()
        if graph:
            self.graphs[ring].replay()
        else:
            engine.reset_ring()
            for j in range(n):
                engine.iteration(j)
        if self.issued == 0:
            engine.poison_snapshot()  # the expectations are known once the first iteration has been issued
            engine.plan_restore()
        rows, hangs, tiles, done = engine.ring[:n], engine.hang_ring[:n], engine.tile_ring[:n], None
        if not engine.interpret:
            end = engine.torch.cuda.Event(enable_timing=True)
            end.record()
            host_rows, host_hangs, host_tiles = self.host[ring]
            rows = host_rows[:n].copy_(rows, non_blocking=True)
            hangs = host_hangs[:n].copy_(hangs, non_blocking=True)
            if any(engine.plan.tiles):
                tiles = host_tiles[:n].copy_(tiles, non_blocking=True)
            done = engine.torch.cuda.Event()
            done.record()
            self.timed.append((start, end, n, graph))
        self.pending.append({"ring": ring, "first": self.issued, "n": n, "rows": rows, "hangs": hangs, "tiles": tiles,
                             "done": done})
        self.issued += n
        if engine.interpret or not graph:
            # eager blocks are read back before the next is issued, as before the rings: the host's
            # launch gaps inside an iteration are part of the timing the guided schedules were
            # measured under (docs/RESULTS.md, run 3); run 4, with eager blocks issued ahead, saw
            # one_shot_all_reduce::seed_fix clean in 100 guided iterations (not understood)
            self._harvest(self.pending.pop(0))

    def drain(self) -> None:
        while self.pending:
            self._harvest(self.pending.pop(0))

    def _harvest(self, block: dict) -> None:
        if block["done"] is not None:
            block["done"].synchronize()
        rows, hangs = block["rows"], block["hangs"]
        if self.t0 and not bool(rows[:, :, 0].any()) and not bool(hangs[:, 0].any()):
            found = []  # the common case: a clean block, read without a Python loop over its rows
        else:
            found = _failures(self.engine, rows.tolist(), hangs.tolist(), first_iteration=block["first"], t0=self.t0,
                              tiles=block["tiles"])
        self.free.append(block["ring"])
        self.harvested += block["n"]
        if self.mirror is not None:
            self.mirror[0] = self.harvested
        _record(self.result, found, self.options)
        if self.output is not None:
            self.output.write(json.dumps({"block": self.harvested, "failures": [f.to_dict() for f in found]}) + "\n")
            self.output.flush()

    def timing(self) -> None:
        """Device time of the run (CUDA events): every block's, and the rate of the steady state
        (the blocks after the first iteration, which compiles: from the first one's start to the
        last one's end, so gaps where the device waited for the host count)."""
        if not self.timed:
            return
        result = self.result
        result.device_seconds = sum(start.elapsed_time(end) for start, end, _n, _g in self.timed) / 1e3
        steady = self.timed[1:] or self.timed
        span = steady[0][0].elapsed_time(steady[-1][1]) / 1e3
        result.steady_iterations = sum(n for _s, _e, n, _g in steady)
        result.steady_device_seconds = span
        graph_blocks = [t for t in self.timed if t[3]]
        if graph_blocks:
            result.graph_iterations = sum(n for _s, _e, n, _g in graph_blocks)
            result.graph_device_seconds = graph_blocks[0][0].elapsed_time(graph_blocks[-1][1]) / 1e3


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


def _capture(engine: Engine, block: int, ring: int):
    """``block`` iterations into ring ``ring`` captured as one CUDA graph, the ring's reset first
    (the kernels were compiled by the eager iterations)."""
    torch = engine.torch
    graph = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    engine.use_ring(ring)
    with torch.cuda.graph(graph):
        engine.control = torch.cuda.current_stream()
        engine.forked.clear()
        engine.reset_ring()
        for j in range(block):
            engine.iteration(j)
    engine.control = torch.cuda.current_stream()
    return graph


def _bad_tiles(engine: Engine, e: Expectation, tiles: Any, j: int) -> list[dict]:
    """Row ``j`` (an iteration) of the tile ring: the bad tiles of expectation ``e``, classified."""
    # torch/triton: the tile classes live beside the validation kernel
    from syncverify.stress.expect import tile_class

    first = engine.tile_offsets[e.index]
    rows = tiles[j, first:first + engine.plan.tiles[e.index]]
    bad = rows[:, 0].nonzero().flatten().tolist()
    size = math.prod(e.tile)
    per_row = e.shape[-1] // e.tile[-1]
    out = []
    for t in bad:
        n_bad, n_unwritten, n_stale, n_wrong = (int(v) for v in rows[t].tolist())
        out.append({"tile": t, "at": [t // per_row, t % per_row] if len(e.tile) == 2 else [t],
                    "class": tile_class(n_bad, n_unwritten, n_stale, n_wrong, size), "bad": n_bad,
                    "unwritten": n_unwritten, "stale": n_stale, "wrong": n_wrong, "size": size})
    return out


def _failures(engine: Engine, rows: list, hangs: list, *, first_iteration: int, t0: list,
              tiles: Any = None) -> list[Failure]:
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
            n_bad, n_unw, n_cor, first, got, exp, lo, hi, n_stale = row[:9]  # syncverify.stress.expect.FIELDS
            if n_bad == 0 and hang_info is None:
                continue
            element = None
            if n_bad:
                element = tuple(int(i) for i in _unravel(first, e.shape))
            counts = {"unwritten": n_unw, "stale": n_stale, "corrupt": n_cor}
            kind = "hang" if hang_info else max(counts, key=lambda k: (counts[k], k == "unwritten"))
            ns = device_ns(lo, hi)
            bad_tiles = _bad_tiles(engine, e, tiles, j) if e.tile and n_bad and tiles is not None else []
            out.append(Failure(iteration, e.call, e.name, kind, n_bad, n_unw, n_cor, element,
                               _float(got) if n_bad else None, _float(exp) if n_bad else None,
                               ns - t0[0] if t0 and ns else 0, hang_info, n_stale, bad_tiles))
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
    for f in found:
        for kind, n in f.tile_classes().items():
            result.tile_classes[kind] = result.tile_classes.get(kind, 0) + n
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


@contextlib.contextmanager
def _extern_builtins(kernel):
    """In the interpreter, Triton's ``tl.extra.cuda`` builtins the kernel names (``gdc_wait()``,
    ...) given the interpreter's semantics, as the model's runs do (:func:`patch_lang`)."""
    scope = patch_lang(getattr(kernel, "fn", kernel))
    try:
        yield
    finally:
        scope.restore()


class _EngineGraph:
    """``sv.graph()`` on the device: the captured launches and fills, issued again in capture order
    by each :meth:`replay` (eagerly: the same work on the same streams; the stress loop may
    capture the whole iteration as a CUDA graph of its own). The recording run
    (:class:`~syncverify.frontend.harness.Graph`) already refused what a capture may not hold."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.calls: list[Callable[[], None]] = []

    def __enter__(self) -> "_EngineGraph":
        self.engine._capturing = self
        return self

    def __exit__(self, *exc) -> None:
        self.engine._capturing = None

    def replay(self, times: int = 1) -> None:
        for _ in range(times):
            for call in self.calls:
                call()


class _HostPointer:
    """A host-mapped buffer as Triton reads a tensor argument: an address the GPU can use and a dtype."""

    def __init__(self, ptr: int, dtype) -> None:
        self._ptr, self.dtype = ptr, dtype

    def data_ptr(self) -> int:
        return self._ptr


def placed_buffers(options: StressOptions) -> frozenset[str] | None:
    """The heap buffers a guided schedule places in host-mapped memory (entries ``where="place"``):
    None without placement, empty for the whole heap (an entry naming no buffer)."""
    place = [e for e in options.guided if e.where == "place"] if options.delays == "guided" else []
    if not place:
        return None
    return frozenset() if any(not e.buffer for e in place) else frozenset(e.buffer for e in place)


def host_mapped_block(world_size: int, size: int):
    """``(pinned host tensor, the same bytes as a CUDA tensor)``: a heap block in host-mapped memory
    (pinned with cudaHostAlloc: mapped, and with unified addressing its device address is its host
    address), seen by torch as a CUDA tensor through ``__cuda_array_interface__``, so the harness's
    stream operations, restores and validations run on it unchanged; the kernels' stores to it
    cross the host link. Keep the first alive as long as the second."""
    # torch: only a stress run on a GPU places the heap
    import torch

    host = torch.zeros((world_size, size), dtype=torch.uint8, pin_memory=True)

    class _View:
        __cuda_array_interface__ = {"shape": (world_size, size), "typestr": "|u1", "data": (host.data_ptr(), False),
                                    "version": 3, "strides": None}

    return host, torch.as_tensor(_View(), device="cuda")


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
