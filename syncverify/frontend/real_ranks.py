"""``syncverify stress FILE.py --real-ranks``: one process per rank, as the built-in stress runner does.

With virtual ranks (``syncverify.frontend.user_stress``) one process runs every rank's launches on
one GPU. Here rank ``r`` is a process of its own (``syncverify.kernels.processes.run_workers``:
spawned, joined by a process group on a port the OS picked, a watchdog that kills only the
workers) that runs the harness and executes only what rank ``r`` does: its launches, its host
writes, its expectations (its own copy of a symmetric buffer). ``sv.host_barrier()`` is a barrier
of the process group (after the device is synchronized), and every iteration starts with one,
so no rank restores its heap while a peer still reads it.

The heap every rank's kernels address (``heap_bases``):

* **CPU** (Triton's interpreter, ``gloo``): one file in shared memory holds every rank's heap;
  each process maps it whole (``syncverify.kernels.processes.run_ranks``, shared with the fused
  kernels' real-rank campaigns), so a peer's copy is an ordinary address and the interpreted
  kernels of two processes really run at the same time (unlike virtual ranks in the interpreter,
  which run one program after another);
* **GPU** (``nccl``): one GPU per rank, each rank's heap one block of symmetric memory with every
  peer's mapped into each process (``join_ranks`` again: the same list of per-rank heaps as the
  CPU's file rows, so the engine below does not tell them apart). ``--world-size 1`` runs without
  symmetric memory. More ranks than GPUs is bad input (one line, exit 2). Not yet run on two
  GPUs (``nvidia-h200-x2`` has not been lent): ``benchmarks/x2_session.py``'s ``user-*`` runs.

An iteration count is fixed for every rank (``--iterations``, not ``--seconds``; no stop at the
first failure): the ranks meet at the same barriers. Each rank validates its own expectations;
the ranks' results are merged (:func:`merge`). Replays and the progress mirror's hang report are
virtual-rank features: a stopped real-rank run says which ranks finished.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any

from syncverify.frontend.harness import SymmetricTensor, run_harness
from syncverify.frontend.user_stress import Engine, Failure, StressInputError, StressOptions, StressResult, \
    placed_buffers, plan_harness, run_stress, tiles_named
from syncverify.kernels.processes import (REAL_INTERPRET_CAP, join_ranks, refuse_more_ranks_than_gpus,
                                         reporting_errors, run_ranks)


def check_real_ranks(options: StressOptions, *, gpus: int | None) -> None:
    """Bad input for a real-rank run, before a process starts (one line each); ``gpus``: how many
    the machine has (None: not asked, the interpreter runs)."""
    if options.seconds is not None or options.iterations is None:
        raise StressInputError("--real-ranks runs the same number of iterations on every rank: give --iterations "
                               "(not --seconds)")
    if placed_buffers(options) is not None:
        raise StressInputError("a guided placement (where=\"place\") places the virtual ranks' heap; real ranks each "
                               "have their own symmetric memory: run it without --real-ranks")
    if options.interpret:
        return
    refuse_more_ranks_than_gpus(options.world_size, gpus, error=StressInputError,
                                fix="use virtual ranks (without --real-ranks)")


@dataclasses.dataclass
class _OtherRank:
    """An event another rank's process records: it cannot be waited for here."""

    rank: int
    site: str


class RankEngine(Engine):
    """The harness API executed for one rank of a real-rank run (module docstring): other ranks'
    operations are theirs; the heap this engine snapshots and restores is its own rank's."""

    def __init__(self, options: StressOptions, plan, mirror: Any = None, *, rank: int, barrier: Callable[[], None],
                 shared: Any = None) -> None:
        expectations, tiles = own_expectations(plan, options, rank)
        super().__init__(options, dataclasses.replace(plan, expectations=expectations, tiles=tiles), mirror)
        self.rank, self._group_barrier = rank, barrier
        heap = self.heap
        # snapshot, restore and poison (Engine.prepare, iteration, poison_snapshot) touch this rank's heap only
        if shared is not None:  # every rank's heap as this process sees it (join_ranks: file rows, symmetric memory)
            heap.memory = list(shared)
            heap.bases = self.torch.tensor([m.data_ptr() for m in heap.memory], dtype=self.torch.int64,
                                           device=self.device)
            heap.block = shared[rank].unsqueeze(0)
        else:  # one rank on one GPU: the engine's own heap
            heap.block = heap.block[rank:rank + 1]

    def _barrier(self) -> None:
        if self.dry:
            return
        if not self.interpret:
            self.torch.cuda.synchronize()
        self._group_barrier()

    # ----- the harness API: this rank's part ---------------------------------------------------
    def launch(self, kernel, grid, *args, rank: int, stream: str = "main", **kwargs) -> None:
        if rank == self.rank:
            super().launch(kernel, grid, *args, rank=rank, stream=stream, **kwargs)
            return
        self.heap.check_rank(rank)
        if not self.dry:  # the mirror's slots stay where a virtual-rank run has them
            self.launch_slot += _programs(grid)

    def _write(self, tensor, value, rank: int, stream: str, site: str) -> None:
        self.heap.check_rank(rank)
        if rank == self.rank:
            super()._write(tensor, value, rank, stream, site)

    def record_event(self, *, rank: int, stream: str = "main"):
        self.heap.check_rank(rank)
        if rank != self.rank:
            return _OtherRank(rank, _where())
        return super().record_event(rank=rank, stream=stream)

    def wait_event(self, event, *, rank: int, stream: str = "main") -> None:
        self.heap.check_rank(rank)
        if rank != self.rank:
            return
        if isinstance(event, _OtherRank):
            raise StressInputError(f"rank {rank} waits at {_where()} for an event rank {event.rank} recorded at "
                                   f"{event.site}: with --real-ranks each rank is a process and a CUDA event does "
                                   "not cross processes (use sv.host_barrier())")
        super().wait_event(event, rank=rank, stream=stream)

    def synchronize(self, *, rank: int) -> None:
        if rank == self.rank:
            super().synchronize(rank=rank)

    def host_barrier(self) -> None:
        super().host_barrier()
        self._barrier()

    def expect_written(self, tensor, *, tile=None) -> None:
        view = self._mine(tensor)
        if view is not None:
            self._expect(view, None, tile)

    def expect_equal(self, tensor, reference, *, tile=None) -> None:
        view = self._mine(tensor)
        if view is not None:
            self._expect(view, reference, tile)

    def _mine(self, tensor):
        """This rank's copy of a symmetric buffer, a tensor in this rank's heap, else None."""
        if isinstance(tensor, SymmetricTensor):
            return tensor.on(self.rank)
        return tensor if _rank_of(self.heap.memory, tensor) in (self.rank, None) else None

    # ----- iterations --------------------------------------------------------------------------
    def prepare(self, call: Callable, block: int) -> None:
        def after_every_rank_restored(k: int) -> None:
            if k == 0:
                self._barrier()
            call(k)

        super().prepare(after_every_rank_restored, block)

    def iteration(self, j: int) -> None:
        self._barrier()  # every rank is done with the previous iteration before this one restores its heap
        super().iteration(j)

    def _restore_inputs(self) -> None:
        """``poison="previous"``: this rank's allocations but its expected outputs restored."""
        outputs = {e.tensor.data_ptr() for e in self.expectations}
        base = self.heap.memory[self.rank].data_ptr()
        for a in self.heap.allocations:
            if base + a.offset not in outputs:
                self.heap.block[0, a.offset:a.offset + a.nbytes].copy_(self.snapshot[0, a.offset:a.offset + a.nbytes])


def own_expectations(plan, options: StressOptions, rank: int) -> tuple[int, tuple[int, ...]]:
    """How many of an iteration's expectations are ``rank``'s (its copy of each symmetric buffer,
    and each tensor in its heap), and how many tiles each names, from a recording of the harness."""
    recorded = run_harness(plan.fn, options.world_size, options.calls, heap_bytes=options.heap_bytes)
    mine = [op for op in recorded.ops
            if op.kind == "expect" and _rank_of(recorded.heap.memory, op.tensor) in (rank, None)]
    return len(mine), tiles_named(mine)


def _rank_of(memory: list, tensor) -> int | None:
    """The rank whose heap holds ``tensor`` (None: outside every heap)."""
    ptr = tensor.data_ptr()
    for r, m in enumerate(memory):
        if m.data_ptr() <= ptr < m.data_ptr() + m.numel():
            return r
    return None


def _programs(grid) -> int:
    n = 1
    for g in ((grid,) if isinstance(grid, int) else tuple(grid)):
        n *= int(g)
    return n


def _where() -> str:
    """``file:line`` of the harness line that called the engine's method."""
    frame = sys._getframe(2)
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


# ----- the processes -------------------------------------------------------------------------------

def rank_worker(rank: int, world_size: int, port: int, queue, options: StressOptions, heap_path: str | None) -> None:
    """One rank (a :func:`~syncverify.kernels.processes.run_ranks` target): the process group, the
    heap, this rank's iterations; reports ``progress`` lines and ``done`` (the result as a dict) or
    ``error`` (a traceback, or one line of bad input)."""
    with reporting_errors(rank, queue):
        _torch, dist, _device, shared = join_ranks(rank, world_size, port, interpret=options.interpret,
                                                   heap_path=heap_path, heap_bytes=options.heap_bytes)

        def engine(opts, plan, mirror=None):
            return RankEngine(opts, plan, mirror, rank=rank, barrier=dist.barrier, shared=shared)

        result = run_stress(options, engine=engine, progress=lambda line: queue.put((rank, "progress", line)))
        queue.put((rank, "done", result))
        dist.destroy_process_group()


def run_real_ranks(options: StressOptions, *, watchdog: float = 60.0,
                   progress: Callable[[str], None] | None = None) -> StressResult:
    """``options`` on ``options.world_size`` processes (module docstring); the merged result."""
    gpus = None
    if not options.interpret:
        # torch: only a GPU run counts the GPUs
        import torch

        gpus = torch.cuda.device_count()
    check_real_ranks(options, gpus=gpus)
    plan = plan_harness(options)  # bad input: one line, before a process starts
    options = dataclasses.replace(options, stop_on_failure=False, graphs=False, mirror=False, substitutes={},
                                  cap=options.cap or (REAL_INTERPRET_CAP if options.interpret else None))

    def on_message(rank: int, kind: str, payload: Any) -> None:
        if progress is not None and kind == "progress":
            progress(f"rank {rank}: {payload}")

    run = run_ranks(rank_worker, (options,), world_size=options.world_size, watchdog_seconds=watchdog,
                    on_message=on_message, heap_bytes=options.heap_bytes if options.interpret else None)
    errors = [payload for _rank, kind, payload in run["messages"] if kind == "error"]
    inputs = [e for e in errors if e.startswith("input: ")]
    if inputs:
        raise StressInputError(inputs[0][len("input: "):])
    results = {rank: payload for rank, kind, payload in run["messages"] if kind == "done"}
    return merge(plan.name, options, results, stopped=run["stopped"] or (errors[0].strip().splitlines()[-1]
                                                                          if errors else None))


def merge(name: str, options: StressOptions, results: dict[int, StressResult], *, stopped: str | None) -> StressResult:
    """One result of every rank's: the iterations all ranks ran, the failures of every rank (each
    named after its rank's expectation), the first by iteration."""
    merged = StressResult(name, options.world_size, options.calls, options.delays, interpret=options.interpret)
    merged.iterations = min((r.iterations for r in results.values()), default=0)
    merged.seconds = max((r.seconds for r in results.values()), default=0.0)
    failures: list[Failure] = sorted((f for r in results.values() for f in r.failures), key=lambda f: f.iteration)
    merged.failures = failures[:options.max_failures]
    merged.bad_iterations = len({f.iteration for f in failures})
    if failures:
        merged.first_failure = failures[0]
        merged.first_failure_iteration = failures[0].iteration
        merged.time_to_first_failure_ns = failures[0].device_ns
    merged.sites = next(iter(results.values())).sites if results else []
    missing = sorted(set(range(options.world_size)) - set(results))
    if stopped or missing:
        merged.stopped = stopped or f"ranks {missing} did not report a result"
        merged.hang_report = [f"rank {r}: finished {results[r].iterations} iterations" if r in results else
                              f"rank {r}: no result (killed, or it failed)" for r in range(options.world_size)]
    merged.notes.append(f"real ranks: {options.world_size} process(es), "
                        + ("gloo, Triton's interpreter, every rank's heap in one shared file" if options.interpret
                           else "nccl, one GPU per rank") + "; eager launches (a process-group barrier cannot be "
                        "captured in a CUDA graph)")
    for r in sorted(results):
        merged.notes += [f"rank {r}: {note}" for note in results[r].notes]
    return merged
