"""One process's side of a stress campaign: buffers, inputs, poisoning, resets, launches, validation.

The same :class:`Runner` drives virtual ranks (every rank in this process, one GPU or the CPU
interpreter) and one rank of a multi-process run (``syncverify.stress.launch``); only the heap and the
barriers differ. Per iteration ``i`` (the kernel's ``epoch``), in stream order:

1. poison (``poison``): ``all``: every C copy (and all-scatter's ``received``) to NaN and the
   workspace (``partial``/``local``) to 0; ``outputs``: only the C copies; ``previous``: nothing,
   so every buffer still holds the previous iteration's values, which differ from this one's
   (``syncverify.stress.inputs``): a read of last iteration's tile is classified ``stale``;
2. lock reset, by policy (all-scatter's ``push_locks`` by the push protocol's own policy,
   :func:`syncverify.rules.reset_policy`, as in the model): ``none``; ``host-between-barriers`` (barrier, zero, barrier: seed 001's
   fix); ``host-racing`` (zeroed on a side stream that waits for the previous iteration but not
   for this one's kernel: seed 001's bug; in the interpreter, deterministically *after* this
   iteration's launch, the latest the racing clear can land);
3. the fused kernel, with this iteration's inputs, delays and ``epoch = i``;
4. the validation kernel, into the summary ring.

Every ``chunk`` iterations (a *block*) the rings come back to the host (one synchronization) and
become :class:`syncverify.stress.classify.BadTile` records. Everything an iteration needs lives in
buffers fixed for the run (the input pool, the run-time operand ring, the status and summary
rings, the delay table), and the host writes what changes between blocks (the operands of the
block's epochs, a redrawn input pool) before the block starts. So on a GPU with virtual ranks
(``graphs=True``) one block is captured once as a CUDA graph and replayed: the host launches one
graph per block, and the kernels read their iteration from the operand ring on the device.
"""

from __future__ import annotations

import math
import sys

from syncverify import rules
from syncverify.kernels._deps import torch
from syncverify.kernels.build import BuiltKernel, lock_torch_dtype, runtime_values_tensor, torch_dtype
from syncverify.kernels.gemm_all_reduce import launch_all_reduce
from syncverify.kernels.gemm_all_scatter import launch_all_scatter
from syncverify.kernels.registry import allocate, launch_function
from syncverify.stress.classify import BadTile, bad_tiles, device_ns
from syncverify.stress.delays import DelayConfig, delay_table
from syncverify.stress.inputs import InputSet, make_inputs
from syncverify.stress.validate import FIELDS, NFIELDS, classify, output_tiles

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
                 process_group=None, push_reset: str = "none", graphs: bool = False) -> None:
        c = built.config
        self.built, self.config, self.heap, self.device = built, c, heap, torch.device(device)
        self.rank, self.delays, self.reset, self.poison = rank, delays, reset, poison
        self.max_polls, self.seed, self.chunk = max_polls, seed, chunk
        self.group = process_group
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
        self.status = torch.zeros((chunk, W, 2 * T, 4), dtype=torch.int32, device=self.device)
        self.summary = torch.zeros((chunk, W, output_tiles(c), NFIELDS), dtype=torch.int32,
                                   device=self.device)
        self.table = delay_table(delays, self.device)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.pool: list = []
        self.carry = None  # the exponents of the iteration before the block (its slot 0's "previous")
        self.vals = None  # the block's run-time operand ring, one 16-byte row per launch
        self.block: int | None = None  # first iteration of the block whose operands are in place
        self.side = SideStream(self.device) if self.device.type == "cuda" else None
        self.launch = {"all-reduce": launch_all_reduce, "all-scatter": launch_all_scatter}.get(c.kernel) \
            or launch_function(c.kernel)
        self.pending: list[int] = []  # iterations in the rings, in slot order
        policies = set(self.reset_groups.values())
        # A graph replays one block as it was captured: no host barrier, no side stream inside it.
        self.graphs = bool(graphs and self.device.type == "cuda" and self.virtual
                           and "host-racing" not in policies and chunk % POOL == 0)
        self.graph = None
        self.graph_error: str | None = None
        self.t0_ns: int | None = None  # device clock at iteration 0's validation

    # ----- a block's inputs and operands (host, before the block) --------------------------------
    def _begin_block(self, i: int) -> None:
        """Put the block starting at iteration ``i`` in place: the previous iteration's exponents
        (for ``stale``), every :data:`REDRAW` iterations a redrawn input pool (in place: a captured
        graph reads the same memory), and the operands of epochs ``i .. i + chunk - 1``.
        Idempotent per block."""
        if self.block == i:
            return
        self.block = i
        if self.carry is not None and i > 0:
            last = self.pool[(i - 1) % POOL]
            self.carry.row_exp.copy_(last.row_exp)
            self.carry.col_exp.copy_(last.col_exp)
        ranks = None if self.virtual else [self.rank]
        if not self.pool or (i // self.chunk) % max(1, REDRAW // self.chunk) == 0:
            drawn = [make_inputs(self.config, parity=p % 2, generator=self.generator, device=self.device,
                                 ranks=ranks) for p in range(POOL)]
            if not self.pool:
                self.pool = drawn
                first = drawn[0]
                self.carry = InputSet(first.A[:0], first.B[:0], first.row_exp.clone(), first.col_exp.clone(), 0)
            else:
                for old, new in zip(self.pool, drawn):
                    for name in ("A", "B", "row_exp", "col_exp"):
                        getattr(old, name).copy_(getattr(new, name))
        values = runtime_values_tensor(self.built, range(i, i + self.chunk), self.device)
        if self.vals is None or self.vals.shape != values.shape:
            self.vals = values
        else:
            self.vals.copy_(values)

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

    def compile(self) -> None:
        """Compile the fused kernel for iteration 0's arguments, before any barrier.

        Each rank compiles its own kernel at its own speed (seconds); compiling inside the first
        launch let one rank's kernel start that much before its peer's and wait out its poll
        budget (spurious ``hang`` tiles at iteration 0 on nvidia-h200-x2). The interpreter has
        nothing to compile."""
        self._begin_block(0)
        self._launch(0, 0, self.pool[0], compile_only=True)

    def _queue(self, i: int, slot: int) -> None:
        """Iteration ``i``'s work on the stream: poison, reset, kernel, validation (no host
        decision depends on ``i`` but the racing reset's delay: a graph can capture it)."""
        c = self.config
        inputs = self.pool[i % POOL]
        previous = self.carry if slot == 0 else self.pool[(i - 1) % POOL]
        if i == 0:
            previous = inputs  # nothing before iteration 0: nothing is stale
        if self.poison != "previous":
            self.heap["out"].local.fill_(math.nan)
            if self.validated is not self.heap["out"]:
                self.validated.local.fill_(math.nan)
        if self.poison == "all":
            self.work.local.zero_()
        if slot == 0:  # the status ring is idle between blocks (drain synchronized)
            self.status.zero_()
        policies = set(self.reset_groups.values())
        self._barrier()
        if "host-between-barriers" in policies:
            self._zero_locks("host-between-barriers")
            self._barrier()
        if "host-racing" in policies and self.side is not None and i > 0:
            self._racing_reset(i)
        self._launch(i, slot, inputs)
        if "host-racing" in policies and self.side is None and i > 0:
            self._zero_locks("host-racing")  # interpreter: the clear meant before kernel i lands after it
        if not self.virtual and self.group is not None:
            torch.distributed.all_reduce(self.status[slot], group=self.group)
        classify(c, self.validated.local, inputs, previous, self.status[slot], self.summary[slot],
                 first_copy=self.first_copy, stale_sums=self.poison != "all")

    def iteration(self, i: int) -> None:
        """Queue iteration ``i`` (poison, reset, kernel, validation) without synchronizing."""
        slot = i % self.chunk
        self._begin_block(i - slot)
        self._queue(i, slot)
        self.pending.append(i)

    def run_block(self, i: int) -> None:
        """Queue the whole block starting at ``i`` (a multiple of ``chunk``): one graph replay once
        a graph was captured (the first full block after iteration 0 runs eagerly and is captured
        for the next), else iteration by iteration."""
        if not self.graphs or i == 0:
            for j in range(i, i + self.chunk):
                self.iteration(j)
            return
        self._begin_block(i)
        if self.graph is None:
            # slot 0 is captured with i > 0, so it reads the carried exponents as "previous"
            torch.cuda.synchronize(self.device)
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph):
                    for slot in range(self.chunk):
                        self._queue(i + slot, slot)
            except Exception as error:  # noqa: BLE001 -- the eager path validates the same way
                self.graphs, self.graph_error = False, f"{type(error).__name__}: {error}"
                print(f"syncverify stress: CUDA graph capture failed ({self.graph_error}); running eagerly",
                      file=sys.stderr, flush=True)
                torch.cuda.synchronize(self.device)
                for j in range(i, i + self.chunk):
                    self.iteration(j)
                return
            self.graph = graph
        self.graph.replay()
        self.pending.extend(range(i, i + self.chunk))

    # ----- results -----------------------------------------------------------------------------
    def drain(self) -> tuple[list[BadTile], list[int]]:
        """Synchronize; return the bad tiles of the queued iterations and the iterations with at
        least one bad tile (each tile carries the device clock of its validation)."""
        if not self.pending:
            return [], []
        n = len(self.pending)
        summary = self.summary[:n]
        if not self.virtual and self.group is not None:
            torch.distributed.all_reduce(summary, group=self.group)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        if self.pending[0] == 0:
            first = summary[0, 0, 0].tolist()
            self.t0_ns = device_ns(first[FIELDS.index("time_lo")], first[FIELDS.index("time_hi")])
        tiles: list[BadTile] = []
        bad_iterations: list[int] = []
        classes = summary[..., 0]
        if bool((classes != 0).any().item()):
            host = summary.cpu()
            for slot, i in enumerate(self.pending):
                found = bad_tiles(host[slot], iteration=i, n_cols=self.config.n,
                                  num_world=self.config.world_size)
                if found:
                    bad_iterations.append(i)
                    tiles.extend(found)
        self.pending = []
        if not self.virtual:  # every rank adds only its own copies' rows into the all-reduce above
            self.summary[:n].zero_()
        return tiles, bad_iterations
