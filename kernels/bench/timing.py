"""``syncverify bench``'s GPU half: time the fused kernels per protocol against cuBLAS, on the device.

Method (``/work/.library/device/METHOD.md``; docs/bench.md):

* **device time**: each timed thing is captured once in a CUDA graph of ``launches`` launches,
  the graph is replayed (after warm-up replays) ``repeats`` times between CUDA events, and the
  median replay over ``launches`` is the time per launch; Triton's host launch path (80-180 µs)
  is not in it. In the interpreter (``--interpret``, CI) host time is taken instead: it checks the
  pipeline, and its numbers mean nothing.
* **inputs rotated**: launch ``i`` of a graph reads input set ``i % S``; ``S`` is chosen so the
  sets together are at least three times the L2, so the cache is not what is measured.
* **what a protocol costs includes its reset**: each graph starts by zeroing the lock arrays, and
  a protocol whose reset policy zeroes between launches (``host-between-barriers``,
  ``host-racing``) gets that memset before each of its launches, in stream order.
* **the same run's ceilings**: an 8192^3 bf16 ``torch.matmul`` (random data) and a 2 GiB device
  copy, timed the same way, give the peak TFLOP/s and TB/s the report divides by.
* **validated**: after timing, one more launch of each synchronized build on fresh inputs is
  compared with ``torch.matmul`` in fp32 (relative Frobenius error under 2e-2 for bf16/fp16); the
  ``none`` build is never validated (its output is a race) and is marked unsafe.

Baselines in the same run: ``torch.matmul`` alone on the same per-rank operands (one batched
call), and the fused kernel's producers alone (``gemm_only``: the GEMM part, every SM a
producer). cuBLAS followed by NCCL needs real ranks (one process per GPU):
``syncverify.kernels.bench.ranks`` times those with the same :class:`Timer` and :class:`FusedRun`,
a barrier across ranks before every replay (:attr:`Timer.sync`).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, replace
from typing import Callable

from syncverify.protocols import rules
from syncverify.kernels.bench.report import Case, Ceilings, Measurement, NO_SYNC, Sweep, machine_kind, resolve
from syncverify.kernels._deps import torch
from syncverify.kernels.build import BuiltKernel, build, runtime_values_tensor, torch_dtype
from syncverify.kernels.heap import VirtualHeap
from syncverify.kernels.registry import allocate, launch_function
from syncverify.protocols.registry import load_protocol

L2_BYTES = 60 * 1024 * 1024  # H200 (PyTorch reports 60 MB); the interpreter has no L2 to dodge
MAX_SETS = 8
TOLERANCE = 2e-2  # relative Frobenius error of a bf16/fp16 GEMM with fp32 accumulation
MAX_POLLS = 1 << 20


@dataclass
class Timer:
    """How things are timed: CUDA graphs on a GPU, the host clock in the interpreter.

    :meth:`capture` turns one timed thing into a replay function; :meth:`interleaved` replays
    several of them round-robin (``repeats`` rounds after ``warmup``), so that clock and power
    drift during a case falls on every variant alike instead of on whichever ran last."""

    device: "torch.device"
    launches: int = 20
    repeats: int = 10
    warmup: int = 2
    #: Called before every warm-up body and every replay (real ranks: a barrier across ranks, so
    #: every rank starts a replay together and none zeroes locks a peer still signals into).
    sync: Callable[[], None] | None = None
    #: False: replay the launches eagerly between the CUDA events instead of as a CUDA graph (for
    #: a stack whose NCCL cannot be captured; the launches' host time may then show).
    graphs: bool = True

    @property
    def interpret(self) -> bool:
        return self.device.type != "cuda"

    def _sync(self) -> None:
        if self.sync is not None:
            self.sync()

    def capture(self, prologue: Callable[[], None], launch: Callable[[int], None]) -> Callable[[], object]:
        """A function that runs ``prologue(); launch(0); ...; launch(L-1)`` once and returns what
        :meth:`interleaved` reads its time from (host seconds, or a pair of CUDA events)."""
        def body() -> None:
            prologue()
            for i in range(self.launches):
                launch(i)

        if self.interpret:
            def host() -> float:
                start = time.perf_counter()
                body()
                return time.perf_counter() - start
            return host
        self._sync()
        body()  # compile, load and warm the allocator outside the capture
        torch.cuda.synchronize(self.device)
        if not self.graphs:
            def eager():
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                body()
                end.record()
                return start, end
            return eager
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            body()

        def replay():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            return start, end, graph, body  # what the graph reads (operand rings) stays alive with it
        return replay

    def interleaved(self, replays: list[Callable[[], object]]) -> list[tuple[float, float, float]]:
        """``(median, min, max)`` seconds per launch of each replay function, timed round-robin."""
        for _ in range(0 if self.interpret else self.warmup):
            for replay in replays:
                self._sync()
                replay()
        marks: list[list] = [[] for _ in replays]
        for _ in range(self.repeats):
            for slot, replay in enumerate(replays):
                self._sync()
                marks[slot].append(replay())
        if not self.interpret:
            torch.cuda.synchronize(self.device)
        out = []
        for slot in marks:
            samples = [m / self.launches if isinstance(m, float) else m[0].elapsed_time(m[1]) / 1e3 / self.launches
                       for m in slot]
            out.append((statistics.median(samples), min(samples), max(samples)))
        return out

    def per_launch(self, prologue: Callable[[], None], launch: Callable[[int], None]) -> tuple[float, float, float]:
        """``(median, min, max)`` seconds per launch of one timed thing on its own."""
        return self.interleaved([self.capture(prologue, launch)])[0]


# ----- operands ----------------------------------------------------------------------------------

def operand_shapes(case: Case, world_size: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Per-rank A and B as ``[W, ...]`` (all-reduce, gemm-reduce-scatter: K split over ranks;
    all-scatter: N; all-gather-gemm: A's rows, each rank with its own ``K x N`` B)."""
    W = world_size
    if case.kernel in ("all-reduce", "gemm-reduce-scatter"):
        return (W, case.m, case.k // W), (W, case.k // W, case.n)
    if case.kernel == "all-gather-gemm":
        return (W, case.m // W, case.k), (W, case.k, case.n)
    return (W, case.m, case.k), (W, case.k, case.n // W)


def cublas_operands(case: Case, A, B) -> tuple:
    """What ``torch.matmul`` multiplies for the cuBLAS row: every rank's own GEMM of the case in
    one batched call (all-gather-gemm: the gathered A, ``[1, M, K]``, against each rank's B)."""
    if case.kernel == "all-gather-gemm":
        return A.reshape(1, -1, A.shape[-1]), B
    return A, B


def input_sets(case: Case, world_size: int, device, *, generator, count: int | None = None,
               per_rank: bool = False) -> list[tuple]:
    """``count`` random ``(A, B)`` sets of every rank's operands; by default enough to be
    together at least 3x the L2 (1 in the interpreter), counting one rank's share when
    ``per_rank`` (real ranks: each GPU keeps only its own, :func:`rank_slice`). Random normal
    values: never zeros, which run faster than real data (METHOD.md). The same generator seed
    gives the same sets on every rank."""
    a_shape, b_shape = operand_shapes(case, world_size)
    dtype = torch_dtype(case.dtype)
    size = (math.prod(a_shape) + math.prod(b_shape)) * torch.tensor([], dtype=dtype).element_size()
    size //= world_size if per_rank else 1
    sets = 1 if device.type != "cuda" else min(MAX_SETS, max(2, math.ceil(3 * L2_BYTES / size)))
    sets = count or sets
    out = []
    for _ in range(sets):
        A = torch.randn(a_shape, generator=generator, device=device, dtype=torch.float32).to(dtype)
        B = torch.randn(b_shape, generator=generator, device=device, dtype=torch.float32).to(dtype)
        if case.kernel == "all-scatter":  # every rank holds the same A
            A = A[:1].expand(a_shape).contiguous()
        out.append((A, B))
    return out


def rank_slice(inputs: tuple, rank: int) -> tuple:
    """One rank's ``([1, ...] A, [1, ...] B)`` of a set of every rank's operands, as its own tensors."""
    return tuple(t[rank:rank + 1].contiguous() for t in inputs)


def reference(case: Case, A, B) -> "torch.Tensor":
    """What C must be (fp32): the sum of the ranks' partial products (all-reduce,
    gemm-reduce-scatter), A times the column blocks side by side (all-scatter), or each rank's
    own ``[W, M, N]`` product of the gathered A with its B (all-gather-gemm)."""
    a, b = A.float(), B.float()
    if case.kernel in ("all-reduce", "gemm-reduce-scatter"):
        return torch.matmul(a, b).sum(dim=0)
    if case.kernel == "all-gather-gemm":
        return torch.matmul(*cublas_operands(case, a, b))
    return torch.cat(list(torch.matmul(a[:1], b)), dim=1)


def owned_mask(config, ranks, device) -> "torch.Tensor":
    """``[len(ranks), M, N]`` bool on ``device``: the tiles of C each of ``ranks`` owns in
    gemm-reduce-scatter (``syncverify.protocols.rules.ownership_table``): the only part of C that rank writes."""
    c = config
    owner = rules.ownership_table(c.tiles, c.world_size, c.distribution)[:c.tiles]
    tiles_n = c.n // c.block_n
    per_tile = torch.tensor(owner, device=device).view(c.m // c.block_m, tiles_n)
    per_element = per_tile.repeat_interleave(c.block_m, 0).repeat_interleave(c.block_n, 1)
    return torch.stack([per_element == r for r in ranks])


def relative_error(got, want) -> float:
    diff = (got.float() - want).norm().item()
    norm = want.norm().item()
    return diff / norm if norm else diff


# ----- one fused build ---------------------------------------------------------------------------

class FusedRun:
    """A built fused kernel with its heap, ready to time and to validate.

    Virtual ranks (default): a :class:`VirtualHeap` holding every rank. Real ranks: ``heap`` is
    this process's ``SymmetricHeap``, ``rank`` its rank, ``device_barrier`` a barrier across
    ranks queued on the stream (it is captured in the graph: a protocol that zeroes its locks
    between launches does barrier, zero, barrier, as ``syncverify stress`` does) and
    ``host_barrier`` one that also waits on the host (before a validation launch)."""

    def __init__(self, built: BuiltKernel, device, *, heap=None, rank: int = 0,
                 device_barrier: Callable[[], None] | None = None,
                 host_barrier: Callable[[], None] | None = None) -> None:
        c = built.config
        self.built, self.config, self.device = built, c, device
        self.rank, self.device_barrier, self.host_barrier = rank, device_barrier, host_barrier
        self.heap = heap if heap is not None else VirtualHeap(c.world_size, device)
        data = torch_dtype(c.dtype)
        if c.kernel in ("all-gather-gemm", "gemm-reduce-scatter"):  # their own buffers (kernels.registry)
            self.work = next(name for name in allocate(built, self.heap, data, torch.int32)
                             if name not in ("out", "locks"))
        else:
            self.work = "partial" if c.kernel == "all-reduce" else "local"
            self.heap.allocate(self.work, (c.m, c.n_per_rank), data)
            self.heap.allocate("out", (c.m, c.n), data)
            self.heap.allocate("locks", (built.lock_count, c.tiles), torch.int32)
        self.lock_names = ["locks"]
        self.resets = [rules.reset_policy(built.protocol.reset) if built.protocol is not None else "none"]
        if c.kernel == "all-scatter":
            self.heap.allocate("received", (c.m, c.n), data)
            self.heap.allocate("push_locks", (built.push_lock_count, c.tiles), torch.int32)
            self.lock_names.append("push_locks")
            push = None
            if built.protocol is not None:
                push = load_protocol(built.plan.push_protocol)
            self.resets.append(rules.reset_policy(push.reset) if push is not None else "none")
        self.status = torch.zeros((c.world_size, 2 * c.tiles, 4), dtype=torch.int32, device=device)
        self.launch_fn = launch_function(c.kernel)
        self.vals = None
        #: a build with ``stamps``: int64 ``[launches, grid, 2 + 4 * stamps]``, launch ``i`` (its epoch)
        #: writing row block ``i`` (``benchmarks/profile_tail.py``); else None
        self.stamp_rows = None

    def zero_locks(self, *, between: bool = False) -> None:
        """Zero every lock array (``between``: only those whose policy resets between launches;
        real ranks put a barrier on either side, so no peer still signals into them or reads
        them half-zeroed)."""
        zeroed = [name for name, policy in zip(self.lock_names, self.resets) if not between or policy != "none"]
        if between and zeroed and self.device_barrier is not None:
            self.device_barrier()
        for name in zeroed:
            self.heap[name].local.zero_()
        if between and zeroed and self.device_barrier is not None:
            self.device_barrier()

    def launch(self, inputs, epoch: int, *, compile_only: bool = False) -> None:
        A, B = inputs
        stamps = None if self.stamp_rows is None else self.stamp_rows[epoch % len(self.stamp_rows)]
        self.launch_fn(self.built, self.heap, A, B, self.status, rank=self.rank, epoch=epoch,
                       max_polls=MAX_POLLS, vals=self.vals[epoch], compile_only=compile_only, stamps=stamps)

    def compile(self, inputs) -> None:
        """Compile (and load) the kernel without launching it: real ranks compile at their own
        speed, and a rank whose first launch waited for a peer still compiling would time out."""
        self.vals = runtime_values_tensor(self.built, [0], self.device)
        self.launch(inputs, 0, compile_only=True)

    def capture(self, timer: Timer, sets: list) -> Callable[[], object]:
        """The timed replay: zero the locks, then ``launches`` launches on rotating input sets,
        epochs 0, 1, ..., with the protocol's own reset between launches. Real ranks queue a
        barrier after the first zeroing: no rank's first launch signals into a peer's locks
        before that peer has zeroed them."""
        ring = runtime_values_tensor(self.built, range(timer.launches), self.device)
        if self.config.gemm_only and self.config.kernel == "all-gather-gemm":
            self.fill_gathered(sets[0])  # the GEMM part reads A as if every shard had arrived

        def first() -> None:
            self.zero_locks()
            if self.device_barrier is not None:
                self.device_barrier()

        def one(i: int) -> None:
            if i:
                self.zero_locks(between=True)
            self.vals = ring
            self.launch(sets[i % len(sets)], i)

        return timer.capture(first, one)

    def fill_gathered(self, everyone) -> None:
        """all-gather-gemm's GEMM part: this process's ``gathered`` copies hold every rank's shard
        (block ``b``: rank ``b``'s A), as the senders would have left them. Given one rank's
        shard only (a real rank's timing sets), every block holds it: data, not zeros, either way."""
        A = everyone[0]
        gathered = self.heap["gathered"].local
        rows, k = A.shape[1], A.shape[2]
        for b in range(self.config.world_size):
            gathered[:, :rows, b * k:(b + 1) * k] = A[b % A.shape[0]]

    def validate(self, inputs, *, everyone=None) -> str:
        """One launch on ``inputs`` from zeroed locks; ``"ok"`` or what was wrong. Real ranks
        pass ``everyone``, every rank's operands, to compute what this rank's C must be."""
        c = self.config
        self.vals = runtime_values_tensor(self.built, [0], self.device)
        self.zero_locks()
        self.status.zero_()
        # gemm-reduce-scatter's GEMM part is checked by summing inboxes: its unwritten parts must be 0
        unwritten = 0.0 if c.gemm_only and c.kernel == "gemm-reduce-scatter" else math.nan
        for name in ("out", "received", self.work):
            if name in self.heap.buffers:
                self.heap[name].local.fill_(unwritten)
        if c.gemm_only and c.kernel == "all-gather-gemm":
            self.fill_gathered(everyone or inputs)
        if self.host_barrier is not None:  # every rank's locks zeroed before any rank launches
            self.host_barrier()
        self.launch(inputs, 0)
        got, want = self.result(inputs, everyone)
        timeouts = int(self.status[..., 0].sum().item())
        if timeouts:
            return f"{timeouts} waits timed out"
        error = relative_error(got, want)
        return "ok" if error < TOLERANCE else f"relative error {error:.2e} >= {TOLERANCE:g}"

    def result(self, inputs, everyone=None) -> tuple["torch.Tensor", "torch.Tensor"]:
        """``(what the launch left, what it must be)`` for this process's ranks, both fp32-able:
        C (or, for the GEMM part, the producers' partials); in gemm-reduce-scatter only the tiles
        each rank owns."""
        c = self.config
        A, B = inputs
        everyone = everyone or inputs
        ranks = list(range(c.world_size)) if c.virtual else [self.rank]
        if c.gemm_only and c.kernel == "gemm-reduce-scatter":
            # the owner's inbox holds rank b's partial of its tiles in block b: what rank r left
            # is, block b, rank b's product on the tiles r owns (0 elsewhere: filled before)
            mask = owned_mask(c, ranks, self.device).unsqueeze(1)  # [ranks, 1, M, N]
            inbox = self.heap[self.work].local[:, :c.m].float().view(len(ranks), c.m, c.world_size, c.n)
            partials = torch.matmul(everyone[0].float(), everyone[1].float())  # [W, M, N]
            return inbox.permute(0, 2, 1, 3) * mask, partials.unsqueeze(0) * mask
        if c.gemm_only and c.kernel == "all-gather-gemm":
            got = self.heap["out"].local
            return got, reference(Case(kernel=c.kernel), *everyone)[ranks]
        if c.gemm_only:
            return self.heap[self.work].local, torch.matmul(A.float(), B.float())
        if c.kernel == "all-gather-gemm":
            return self.heap["out"].local, reference(Case(kernel=c.kernel), *everyone)[ranks]
        if c.kernel == "gemm-reduce-scatter":
            mask = owned_mask(c, ranks, self.device)
            want = reference(Case(kernel=c.kernel), *everyone).expand(len(ranks), -1, -1)
            return torch.where(mask, self.heap["out"].local.float(), 0.0), want * mask
        got = self.heap["out" if c.kernel == "all-reduce" else "received"].local
        return got, reference(Case(kernel=c.kernel), *everyone).expand(got.shape[0], -1, -1)


def cublas_replay(case: Case, sets: list, timer: Timer) -> Callable[[], object]:
    """The cuBLAS row's timed replay: ``torch.matmul`` of each input set's per-rank operands
    (:func:`cublas_operands`), rotating like the fused kernels' launches."""
    operands = [cublas_operands(case, *inputs) for inputs in sets]
    a, b = operands[0]
    c = torch.empty(torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]),
                    device=timer.device, dtype=torch_dtype(case.dtype))
    return timer.capture(lambda: None, lambda i: torch.matmul(*operands[i % len(operands)], out=c))


# ----- ceilings ----------------------------------------------------------------------------------

def measure_ceilings(timer: Timer) -> Ceilings:
    """The bf16 matmul peak (8192^3, random data; 256^3 in the interpreter) and the device-copy
    bandwidth (2 GiB; 8 MiB in the interpreter), timed like everything else in this run."""
    device = timer.device
    if timer.interpret:
        name, count, sms, n, copy_bytes = "cpu-interpreter", 1, 0, 256, 8 << 20
    else:
        props = torch.cuda.get_device_properties(device)
        name, count, sms = props.name, torch.cuda.device_count(), props.multi_processor_count
        n, copy_bytes = 8192, 2 << 30
    generator = torch.Generator(device=device).manual_seed(1)
    dtype = torch.bfloat16 if not timer.interpret else torch.float32
    pairs = [(torch.randn(n, n, generator=generator, device=device).to(dtype),
              torch.randn(n, n, generator=generator, device=device).to(dtype)) for _ in range(2)]
    c = torch.empty(n, n, device=device, dtype=dtype)
    src = torch.randn(copy_bytes // 4, generator=generator, device=device)
    dst = torch.empty_like(src)
    warm = replace(timer, warmup=timer.warmup * 5)  # the clocks ramp up from idle on the first work
    (matmul, _, _), (copy, _, _) = warm.interleaved([
        warm.capture(lambda: None, lambda i: torch.matmul(*pairs[i % 2], out=c)),
        warm.capture(lambda: None, lambda i: dst.copy_(src))])
    return Ceilings(machine=machine_kind(name, count), peak_tflops=2 * n**3 / matmul / 1e12,
                    bandwidth_tbs=2 * copy_bytes / copy / 1e12, sms=sms)


# ----- one case, every protocol ------------------------------------------------------------------

def measure_case(case: Case, protocols: dict, *, world_size: int, timer: Timer, sms: int,
                 progress: Callable[[str], None] = lambda label: None, seed: int = 0) -> list[Measurement]:
    """Time ``case``: cuBLAS, the GEMM part, then the fused kernel with each protocol
    (``protocols``: name -> loaded protocol, ``none`` -> None). Bad sizes raise before any launch."""
    device = timer.device
    interpret = timer.interpret
    case = resolve(case, sms=sms, world_size=world_size)
    # build everything first: a size that does not divide is refused before any GPU time is spent
    gemm_sms = case.split[0] if interpret else max(1, sms // world_size)
    part_config = replace(case.kernel_config(world_size=world_size, interpret=interpret, gemm_only=True),
                          gemm_sms=gemm_sms)
    part = build(None, part_config, sms=None if interpret else sms)
    fused = {name: build(protocol, case.kernel_config(world_size=world_size, interpret=interpret),
                         sms=None if interpret else sms)
             for name, protocol in protocols.items()}
    generator = torch.Generator(device=device).manual_seed(seed)
    sets = input_sets(case, world_size, device, generator=generator)
    fresh = input_sets(case, world_size, device, generator=generator, count=1)[0]
    runs = {"gemm-part": FusedRun(part, device), **{name: FusedRun(b, device) for name, b in fused.items()}}
    progress(f"{case.key}: compile and capture")
    replays = [cublas_replay(case, sets, timer)]
    replays += [run.capture(timer, sets) for run in runs.values()]
    progress(f"{case.key}: time cuBLAS, GEMM part, {', '.join(fused)} interleaved")
    times = timer.interleaved(replays)
    del replays
    progress(f"{case.key}: validate")
    out = [Measurement(case, "cublas", times[0][0], spread=times[0][1:])]
    for (name, run), t in zip(runs.items(), times[1:]):
        if name == "gemm-part":
            out.append(Measurement(case, "gemm-part", t[0], spread=t[1:], validated=run.validate(fresh)))
        else:
            validated = "not validated (UNSAFE: no synchronization)" if name == NO_SYNC else run.validate(fresh)
            out.append(Measurement(case, "fused", t[0], protocol=name, spread=t[1:], validated=validated))
    del runs
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


def load_protocols(names) -> dict:
    """name -> loaded protocol (``none`` -> None); an unknown name is bad input."""
    return {name: (None if name == NO_SYNC else load_protocol(name)) for name in names}


def run_sweep(sweep: Sweep, *, device, progress: Callable[[int, int, str], None] = lambda d, t, s: None,
              seed: int = 0, graphs: bool = True, loaded: dict | None = None) -> tuple[Ceilings, list[Measurement]]:
    """Measure the ceilings, then every case of ``sweep``; ``progress(done, total, label)``
    (``graphs``: :attr:`Timer.graphs`). ``loaded``: label -> protocol object, instead of loading
    ``sweep.protocols`` by name (the model's fixes, which have no file: ``check --suggest --cost``)."""
    device = torch.device(device)
    timer = Timer(device, launches=sweep.launches, repeats=sweep.repeats, graphs=graphs)
    protocols = loaded if loaded is not None else load_protocols(sweep.protocols)
    sms = 2 if timer.interpret else torch.cuda.get_device_properties(device).multi_processor_count
    # refuse every bad case before the first timing
    for case in sweep.cases:
        resolved = resolve(case, sms=sms, world_size=sweep.world_size)
        build(None, resolved.kernel_config(world_size=sweep.world_size, interpret=timer.interpret),
              sms=None if timer.interpret else sms)
    total = len(sweep.cases) * 3 + 1
    done = 0

    def step(label: str) -> None:
        nonlocal done
        progress(done, total, label)
        done += 1

    step("ceilings: bf16 matmul peak, device copy")
    ceilings = measure_ceilings(timer)
    measurements: list[Measurement] = []
    for case in sweep.cases:
        measurements += measure_case(case, protocols, world_size=sweep.world_size, timer=timer, sms=sms,
                                     progress=step, seed=seed)
    progress(total, total, "done")
    return ceilings, measurements
