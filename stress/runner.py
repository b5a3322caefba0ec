"""One process's side of a stress campaign: buffers, inputs, poisoning, resets, launches, validation.

The same :class:`Runner` drives virtual ranks (every rank in this process, one GPU or the CPU
interpreter) and one rank of a multi-process run (``syncverify.stress.launch``); only the heap and the
barriers differ. Per iteration ``i`` (the kernel's ``epoch``), in stream order:

1. poison (``poison``): ``all``: every C copy (and all-scatter's ``received``) to NaN and the
   workspace (``partial``/``local``) to 0; ``outputs``: only the C copies; ``previous``: nothing,
   so every buffer still holds the previous iteration's values, which differ from this one's
   (``syncverify.stress.inputs``): a read of last iteration's tile is classified ``stale``;
2. lock reset, by policy (all-scatter's ``push_locks`` by the push protocol's own policy,
   :func:`syncverify.protocols.rules.reset_policy`, as in the model): ``none``; ``host-between-barriers`` (barrier, zero, barrier: seed 001's
   fix); ``host-racing`` (zeroed on a side stream that waits for the previous iteration but not
   for this one's kernel: seed 001's bug; in the interpreter, deterministically *after* this
   iteration's launch, the latest the racing clear can land);
3. the fused kernel, with this iteration's inputs, delays and ``epoch = i``;
4. the validation kernel, into the summary ring.

With virtual ranks steps 1 and 2 (``host-between-barriers`` locks) of iteration ``i + 1`` are done
by iteration ``i``'s validation launch, after it has read each tile
(:class:`syncverify.stress.validate.NextIteration`): the same stores in the same stream order,
three or four launches fewer per iteration; iteration 0 gets them as separate launches.

Every ``chunk`` iterations (a *block*) the rings come back to the host and become
:class:`syncverify.stress.classify.BadTile` records. Everything an iteration needs lives in
buffers fixed for the run (the input pool, the run-time operand ring, the status and summary
rings, the delay table), and the host queues what changes between blocks (the operands of the
block's epochs, a redrawn input pool) on the stream before the block. So on a GPU with virtual
ranks (``graphs=True``) a block is captured once as a CUDA graph and replayed: the host launches
one graph per block, and the kernels read their iteration from the operand ring on the device.

With graphs the rings have two halves, one graph each, and blocks alternate between them
(*pipelined*): while block ``k`` runs, the host reads block ``k - 1``'s summary (copied to pinned
memory on a second stream that waits only for block ``k - 1``) and queues block ``k + 1``'s
operands and, every :data:`REDRAW` iterations, its redrawn pool, all stream-ordered after block
``k``. The GPU never waits for the host between blocks (the profiler measured 1.1 ms of host
work before each 256-iteration block, and a first block of 255 eager iterations, 121 ms, in a
20,480-iteration run: docs/RESULTS.md). Both graphs are captured before the first iteration
(:meth:`Runner.compile`), so every block, the first included, is a replay.
"""

from __future__ import annotations

import math
import sys
import time

from syncverify.protocols import rules
from syncverify.kernels._deps import torch
from syncverify.kernels.build import BuiltKernel, lock_torch_dtype, runtime_values_tensor, torch_dtype
from syncverify.kernels.gemm_all_reduce import launch_all_reduce
from syncverify.kernels.gemm_all_scatter import launch_all_scatter
from syncverify.kernels.registry import allocate, launch_function
from syncverify.stress.classify import BadTile, bad_tiles, device_ns
from syncverify.stress.delays import DelayConfig, delay_table
from syncverify.stress.inputs import InputSet, make_inputs
from syncverify.stress.validate import FIELDS, NFIELDS, NextIteration, classify, output_tiles

POOL = 4  # input sets in rotation (even: consecutive iterations alternate parity)
#: Iterations between redraws of the pool (at a block start): a redraw is ~120 small launches and
#: host work the GPU waits for (4-8 ms per block on an H200, the profiler), and consecutive
#: iterations differ by parity whatever the draw.
REDRAW = 2048


class SideStream:
    """Where a racing lock reset runs on the GPU (``--reset host-racing``, seed 001's bug 2).

    A second CUDA stream, ordered after everything the kernel's stream has queued so far (the
    previous iteration, this iteration's poison) but never waited for by it: the kernel queued
    next may start before, during or after the reset. ``run`` may first sleep on this stream
    (the ``before-reset`` delay), so the reset lands later still.
    """

    CYCLES_PER_NS = 2  # torch.cuda._sleep counts SM cycles; H200: 1980 MHz max (nvidia-smi)

    def __init__(self, device) -> None:
        self.device = device
        self.stream = torch.cuda.Stream(device)

    def run(self, reset, sleep_ns: int) -> None:
        """Queue ``reset()`` here, after what the current stream queued, after ``sleep_ns``."""
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.stream):
            if sleep_ns:
                torch.cuda._sleep(int(sleep_ns * self.CYCLES_PER_NS))
            reset()


class Runner:
    """Buffers and the per-iteration sequence for the ranks this process holds."""

    def __init__(self, built: BuiltKernel, heap, *, device, rank: int = 0, delays: DelayConfig,
                 reset: str, poison: str, max_polls: int, seed: int, chunk: int,
                 process_group=None, push_reset: str = "none", graphs: bool = False,
                 late_seconds: float = 0.0) -> None:
        c = built.config
        self.built, self.config, self.heap, self.device = built, c, heap, torch.device(device)
        self.rank, self.delays, self.reset, self.poison = rank, delays, reset, poison
        self.max_polls, self.seed, self.chunk = max_polls, seed, chunk
        self.group = process_group
        self.late_seconds = late_seconds  # host sleep before each launch (a late rank, real ranks in the interpreter)
        self.virtual = c.virtual
        self.copies = c.world_size if c.virtual else 1
        self.first_copy = 0 if c.virtual else rank
        data, lock = torch_dtype(c.dtype), lock_torch_dtype(c.lock_dtype)
        T, W = c.tiles, c.world_size
        work = {"all-reduce": "partial", "all-scatter": "local"}.get(c.kernel)
        if work is None:  # all-gather-gemm (gathered) and gemm-reduce-scatter (inbox): their own buffers
            work = next(name for name in allocate(built, heap, data, lock) if name not in ("out", "locks"))
        else:
            heap.allocate(work, (built.data_rows, c.n_per_rank), data)  # M rows per protocol slot
            heap.allocate("out", (c.m, c.n), data)
            heap.allocate("locks", (built.lock_count, T), lock)
        # The arrays a reset policy zeroes: the protocol's locks by ``reset``, all-scatter's push
        # locks by the push protocol's own policy.
        self.reset_groups = {"locks": reset}
        if c.kernel == "all-scatter":
            heap.allocate("received", (c.m, c.n), data)
            heap.allocate("push_locks", (built.push_lock_count, T), lock)
            self.reset_groups["push_locks"] = rules.reset_policy(push_reset)
        self.validated = heap["received" if c.kernel == "all-scatter" else "out"]
        self.work = heap[work]
        policies = set(self.reset_groups.values())
        # With virtual ranks iteration i's validation launch poisons and resets for iteration
        # i + 1 (every rank's kernel is done when it runs); real ranks reset between barriers.
        self.next_iteration = NextIteration()
        if self.virtual:
            self.next_iteration = NextIteration(
                poison_out=poison != "previous",
                other_out=heap["out"].local if poison != "previous" and self.validated is not heap["out"] else None,
                work=self.work.local if poison == "all" else None,
                locks=tuple(heap[name].local for name, policy in self.reset_groups.items()
                            if policy == "host-between-barriers"))
        # A graph replays one block as it was captured: no host barrier, no side stream inside it.
        self.graphs = bool(graphs and self.device.type == "cuda" and self.virtual
                           and "host-racing" not in policies and chunk % POOL == 0)
        self.halves = 2 if self.graphs else 1  # ring halves: blocks alternate between them
        slots = self.halves * chunk
        self.status = torch.zeros((slots, W, 2 * T, 4), dtype=torch.int32, device=self.device)
        self.summary = torch.zeros((slots, W, output_tiles(c), NFIELDS), dtype=torch.int32,
                                   device=self.device)
        self.table = delay_table(delays, self.device)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.pool: list = []
        self.carry = None  # the exponents of the iteration before the block (its slot 0's "previous")
        # the run-time operand ring, one 16-byte row per launch, written from a pinned host copy
        # (a pageable copy would wait for the GPU: the pipelined host must not)
        operands = runtime_values_tensor(built, range(slots), "cpu")
        pinned = self.device.type == "cuda"
        self.host_vals = torch.zeros(operands.shape, dtype=torch.int32, pin_memory=pinned)
        self.vals = torch.zeros(operands.shape, dtype=torch.int32, device=self.device)
        self.block: int | None = None  # first iteration of the block whose operands are in place
        self.side = SideStream(self.device) if self.device.type == "cuda" else None
        self.drawer = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None  # input redraws
        self.launch = {"all-reduce": launch_all_reduce, "all-scatter": launch_all_scatter}.get(c.kernel) \
            or launch_function(c.kernel)
        self.pending: list[tuple[int, int]] = []  # (iteration, ring slot) queued and not drained
        self.marks: list[tuple[int, object]] = []  # (pending entries, event) at the end of each replayed block
        self.graph_by_half: list = [None] * self.halves
        self.graph_error: str | None = None
        self.copier = torch.cuda.Stream(self.device) if self.graphs else None  # summary -> pinned host
        self.host_summary = (torch.zeros(self.summary.shape, dtype=torch.int32, pin_memory=True)
                             if self.graphs else None)
        self.t0_ns: int | None = None  # device clock at iteration 0's validation

    @property
    def graph(self):
        """The first captured block graph (None before a capture, or without graphs)."""
        return self.graph_by_half[0] if self.graphs else None

    @property
    def pipelined(self) -> bool:
        """Whether :meth:`drain` can leave the newest block running (graphs, both halves)."""
        return self.graphs

    def slot(self, i: int) -> int:
        """Iteration ``i``'s row in the rings: its half (blocks alternate), then its place in the block."""
        return ((i // self.chunk) % self.halves) * self.chunk + i % self.chunk

    # ----- a block's inputs and operands (host, before the block) --------------------------------
    def _begin_block(self, i: int) -> None:
        """Queue the block starting at iteration ``i``'s inputs: the previous iteration's
        exponents (for ``stale``; at iteration 0 its own, so nothing is stale), every
        :data:`REDRAW` iterations a redrawn input pool (in place: a captured graph reads the same
        memory), and the operands of epochs ``i .. i + chunk - 1`` into the block's half of the
        ring. All stream-ordered after the blocks queued before. Idempotent per block."""
        if self.block == i:
            return
        self.block = i
        if self.carry is not None and i > 0:
            last = self.pool[(i - 1) % POOL]
            self.carry.row_exp.copy_(last.row_exp)
            self.carry.col_exp.copy_(last.col_exp)
        if not self.pool or (i // self.chunk) % max(1, REDRAW // self.chunk) == 0:
            drawn = self._draw()
            if not self.pool:
                self.pool = drawn
                first = drawn[0]
                self.carry = InputSet(first.A[:0], first.B[:0], first.row_exp.clone(), first.col_exp.clone(), 0)
            else:
                for old, new in zip(self.pool, drawn):
                    for name in ("A", "B", "row_exp", "col_exp"):
                        getattr(old, name).copy_(getattr(new, name))
        if i == 0:  # a graph's slot 0 reads the carried exponents as "previous"
            self.carry.row_exp.copy_(self.pool[0].row_exp)
            self.carry.col_exp.copy_(self.pool[0].col_exp)
        # The pinned rows of this half were last copied for the block two before, which the
        # host has drained (so that copy is done) before it queues this one.
        rows = slice(self.slot(i), self.slot(i) + self.chunk)
        self.host_vals[rows] = runtime_values_tensor(self.built, range(i, i + self.chunk), "cpu")
        self.vals[rows].copy_(self.host_vals[rows], non_blocking=True)

    def _draw(self) -> list[InputSet]:
        """:data:`POOL` fresh input sets. On a GPU they are drawn on the drawer stream, and the
        kernel's stream waits for it: drawing synchronizes (a redraw took 12.6 ms of host time
        with a block in flight, 6.2 ms without: the profile section, docs/RESULTS.md), and a
        synchronization there waits for the drawer stream alone, not for the queued blocks."""
        ranks = None if self.virtual else [self.rank]

        def draw() -> list[InputSet]:
            return [make_inputs(self.config, parity=p % 2, generator=self.generator, device=self.device,
                                ranks=ranks) for p in range(POOL)]

        if self.drawer is None:
            return draw()
        kernel_stream = torch.cuda.current_stream(self.device)
        with torch.cuda.stream(self.drawer):
            drawn = draw()
        kernel_stream.wait_stream(self.drawer)
        for inputs in drawn:  # read on the kernel's stream: not freed (and reused) before that
            for tensor in (inputs.A, inputs.B, inputs.row_exp, inputs.col_exp):
                tensor.record_stream(kernel_stream)
        return drawn

    # ----- one iteration -----------------------------------------------------------------------
    def _barrier(self) -> None:
        if not self.virtual:
            self.heap.barrier()

    def _zero_locks(self, policy: str) -> None:
        for name, used in self.reset_groups.items():
            if used == policy:
                self.heap[name].local.zero_()

    def _racing_reset(self, i: int) -> None:
        self.side.run(lambda: self._zero_locks("host-racing"), self.delays.ns("before-reset", self.rank, 0, i))

    def _launch(self, i: int, slot: int, inputs, *, compile_only: bool = False):
        d = self.delays
        return self.launch(  # epoch i is row ``slot`` of the operand ring the kernel reads
            self.built, self.heap, inputs.A, inputs.B, self.status[slot], rank=self.rank, epoch=i,
            max_polls=self.max_polls, delay_seed=d.seed & 0x7FFFFFFF,
            delay_pct=d.kernel_pct, delay_max_ns=d.max_ns, delay_sites=d.site_mask,
            delay_table=self.table, vals=self.vals[slot], compile_only=compile_only,
        )

    def _classify(self, slot: int, inputs, previous, *, compile_only: bool = False):
        return classify(self.config, self.validated.local, inputs, previous, self.status[slot], self.summary[slot],
                        first_copy=self.first_copy, stale_sums=self.poison != "all",
                        next_iteration=self.next_iteration, compile_only=compile_only)

    def compile(self, *, capture: bool = True) -> None:
        """Compile the fused kernel and the validation kernel for iteration 0's arguments, before
        any barrier; with graphs (and ``capture``), capture both halves' block graphs too, so the
        first block is a replay like the rest.

        Each rank compiles its own kernel at its own speed (seconds); compiling inside the first
        launch let one rank's kernel start that much before its peer's and wait out its poll
        budget (spurious ``hang`` tiles at iteration 0 on nvidia-h200-x2). The interpreter has
        nothing to compile."""
        self._begin_block(0)
        self._launch(0, 0, self.pool[0], compile_only=True)
        self._classify(0, self.pool[0], self.pool[0], compile_only=True)
        if self.graphs and capture:
            # Before iteration 0 the poison, the lock reset and a validation (which prepares
            # iteration 0 the same way) change nothing iteration 0 would not set again: run once
            # outside the capture, they load their kernels.
            self._prepare_first()
            self._classify(0, self.pool[0], self.pool[0])
            self.status.zero_()
            for half in range(self.halves):
                self._capture(half)

    def _queue(self, i: int, slot: int) -> None:
        """Iteration ``i``'s work on the stream: poison, reset, kernel, validation (no host
        decision depends on ``i`` but the racing reset's delay: a graph can capture it)."""
        inputs = self.pool[i % POOL]
        previous = self.carry if slot % self.chunk == 0 else self.pool[(i - 1) % POOL]
        if i == 0:
            previous = inputs  # nothing before iteration 0: nothing is stale
        prepared = self.virtual and i > 0  # by iteration i - 1's validation launch
        if not prepared:
            self._poison_buffers()
        if slot % self.chunk == 0:  # this half of the status ring: its last block is done (stream order)
            self.status[slot: slot + self.chunk].zero_()
        policies = set(self.reset_groups.values())
        self._barrier()
        if "host-between-barriers" in policies and not prepared:
            self._zero_locks("host-between-barriers")
            self._barrier()
        if "host-racing" in policies and self.side is not None and i > 0:
            self._racing_reset(i)
        if self.late_seconds:
            time.sleep(self.late_seconds)
        self._launch(i, slot, inputs)
        if "host-racing" in policies and self.side is None and i > 0:
            self._zero_locks("host-racing")  # interpreter: the clear meant before kernel i lands after it
        if not self.virtual and self.group is not None:
            torch.distributed.all_reduce(self.status[slot], group=self.group)
        self._classify(slot, inputs, previous)

    def _poison_buffers(self) -> None:
        """The poison before an iteration (module docstring), as separate launches: before
        iteration 0, and before every iteration of real ranks."""
        if self.poison != "previous":
            self.heap["out"].local.fill_(math.nan)
            if self.validated is not self.heap["out"]:
                self.validated.local.fill_(math.nan)
        if self.poison == "all":
            self.work.local.zero_()

    def _prepare_first(self) -> None:
        """Poison and reset before iteration 0 (later iterations: the validation before them)."""
        self._poison_buffers()
        self._zero_locks("host-between-barriers")

    def iteration(self, i: int) -> None:
        """Queue iteration ``i`` (poison, reset, kernel, validation) without synchronizing."""
        self._begin_block(i - i % self.chunk)
        self._queue(i, self.slot(i))
        self.pending.append((i, self.slot(i)))

    def _capture(self, half: int) -> bool:
        """Capture the block graph of ring half ``half`` (False, and eager from now on, if the
        capture failed). It is captured for a nominal block after the first, so slot 0 reads the
        carried exponents as "previous" (at iteration 0 they are its own); nothing runs."""
        start = (half + self.halves) * self.chunk
        torch.cuda.synchronize(self.device)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                for j in range(start, start + self.chunk):
                    self._queue(j, self.slot(j))
        except Exception as error:  # noqa: BLE001 -- the eager path validates the same way
            self.graphs, self.graph_error = False, f"{type(error).__name__}: {error}"
            self.graph_by_half = [None] * self.halves
            print(f"syncverify stress: CUDA graph capture failed ({self.graph_error}); running eagerly",
                  file=sys.stderr, flush=True)
            torch.cuda.synchronize(self.device)
            return False
        self.graph_by_half[half] = graph
        return True

    def run_block(self, i: int) -> None:
        """Queue the whole block starting at ``i`` (a multiple of ``chunk``): one replay of its
        half's graph (captured now if :meth:`compile` did not), else iteration by iteration."""
        half = (i // self.chunk) % self.halves
        if any(slot // self.chunk == half for _, slot in self.pending):
            raise RuntimeError(f"block {i}: ring half {half} still holds iterations not drained; "
                               "drain(keep=1) after each block")
        if self.graphs and (self.graph_by_half[half] is not None or self._capture(half)):
            self._begin_block(i)
            if i == 0:  # the graph holds no poison or reset: each validation prepares the next iteration
                self._prepare_first()
            self.graph_by_half[half].replay()
            self.pending.extend((j, self.slot(j)) for j in range(i, i + self.chunk))
            event = torch.cuda.Event()
            event.record()
            self.marks.append((len(self.pending), event))
            return
        for j in range(i, i + self.chunk):
            self.iteration(j)

    # ----- results -----------------------------------------------------------------------------
    def drain(self, *, keep: int = 0) -> tuple[list[BadTile], list[int]]:
        """Return the bad tiles of the queued iterations and the iterations with at least one
        bad tile (each tile carries the device clock of its validation), leaving the newest
        ``keep`` replayed blocks running when the runner is :attr:`pipelined` (it waits only for
        the older ones); else synchronize and take everything."""
        if not self.pending:
            return [], []
        if keep and self.pipelined:
            if len(self.marks) <= keep:
                return [], []
            count, event = self.marks[-1 - keep]
            host = self._fetch(self.pending[:count], event)
        else:
            count = len(self.pending)
            host = None
        taken, self.pending = self.pending[:count], self.pending[count:]
        self.marks = [(n - count, e) for n, e in self.marks if n > count]
        slots = [slot for _, slot in taken]
        if host is None:
            host = self._gather(slots)
        if taken[0][0] == 0:
            first = host[0, 0, 0].tolist()
            self.t0_ns = device_ns(first[FIELDS.index("time_lo")], first[FIELDS.index("time_hi")])
        tiles: list[BadTile] = []
        bad_iterations: list[int] = []
        if bool((host[..., 0] != 0).any()):
            for k, (i, _) in enumerate(taken):
                found = bad_tiles(host[k], iteration=i, n_cols=self.config.n, num_world=self.config.world_size)
                if found:
                    bad_iterations.append(i)
                    tiles.extend(found)
        return tiles, bad_iterations

    def _gather(self, slots: list[int]):
        """The summary rows of ``slots`` on the host, after synchronizing (real ranks: summed over
        the ranks first, each rank having written its own copies' rows only)."""
        index = torch.tensor(slots, device=self.device)
        summary = self.summary.index_select(0, index)
        if not self.virtual and self.group is not None:
            torch.distributed.all_reduce(summary, group=self.group)
            self.summary.index_fill_(0, index, 0)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return summary.cpu()

    def _fetch(self, taken: list[tuple[int, int]], event):
        """The summary rows of ``taken`` (whole replayed blocks, done when ``event`` is) copied to
        pinned host memory on the copier stream, which waits for that event only: the blocks
        queued after it keep running."""
        rows = [(a, b + 1) for a, b in _runs([slot for _, slot in taken])]
        with torch.cuda.stream(self.copier):
            self.copier.wait_event(event)
            for a, b in rows:
                self.host_summary[a:b].copy_(self.summary[a:b], non_blocking=True)
            done = torch.cuda.Event()
            done.record(self.copier)
        done.synchronize()
        if len(rows) == 1:  # one block: read in place (its half is not written again before the next drain)
            return self.host_summary[rows[0][0]:rows[0][1]]
        return torch.cat([self.host_summary[a:b] for a, b in rows])


def _runs(values: list[int]) -> list[tuple[int, int]]:
    """Consecutive runs of ``values`` as ``(first, last)`` pairs, in order.

    >>> _runs([4, 5, 6, 0, 1])
    [(4, 6), (0, 1)]
    """
    out: list[tuple[int, int]] = []
    for v in values:
        if out and v == out[-1][1] + 1:
            out[-1] = (out[-1][0], v)
        else:
            out.append((v, v))
    return out
