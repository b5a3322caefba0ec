"""``syncverify bench`` on real ranks: one process per GPU, the fused kernels against cuBLAS + NCCL.

One launch of ``world_size`` processes through stress's launcher
(:func:`syncverify.kernels.processes.run_workers`: spawn, a free port, NVLink multicast off, and a
watchdog that kills every rank when none has reported for ``watchdog_seconds``). Every rank runs
the same sweep on its own GPU (:func:`bench_worker`):

1. the ceilings of its GPU, timed like everything else (rank 0's are reported);
2. per case, each timed thing captured as on one GPU (``syncverify.kernels.bench.timing``: CUDA graphs
   of ``launches`` launches, inputs rotated past the L2, replays interleaved), with a barrier
   across ranks before every replay (:attr:`~syncverify.kernels.bench.timing.Timer.sync`), so every rank
   starts a replay together:

   * ``cublas``: ``torch.matmul`` of this rank's operands (all-reduce ``[M, K/W] x [K/W, N]``,
     all-scatter ``[M, K] x [K, N/W]``);
   * ``cublas+nccl``: the same matmul, then NCCL ``all_reduce`` of C (all-reduce),
     ``all_gather_into_tensor`` of the column blocks into ``[W M, N/W]`` (all-scatter; the
     blocks are not rearranged into ``[M, N]``, which would only add to the baseline's time) or
     ``reduce_scatter_tensor`` of C into ``M / W`` rows (gemm-reduce-scatter); all-gather-gemm
     gathers A's shards first, then multiplies (:class:`CollectiveBaseline`);
   * ``gemm-part``: the fused kernel's producers alone, every SM of the GPU a producer;
   * ``fused``: the fused kernel with each protocol (``none`` first) on a symmetric-memory heap;

   then each is validated once on fresh inputs (C against an fp32 ``torch.matmul`` of every
   rank's operands, which every rank draws alike from one seed);
3. rank 0 gathers every rank's measurements (``torch.distributed.gather_object``), keeps the
   slowest rank's time of each (:func:`syncverify.kernels.bench.report.combine_ranks`) and reports the case.

The parent (:func:`run_sweep_ranks`) appends the ceilings and each case to a JSON-lines file as
they arrive, so a run the watchdog stopped leaves what it measured, and says why it stopped.

With ``backend="gloo"`` the ranks are CPU processes and only the two baselines run (symmetric
memory and Triton across processes need GPUs): the CPU tests drive the whole launch, gathering
and reporting path that way, with a scripted timer. Nothing here imports torch at module level:
the parent stays light, each worker imports what it needs.
"""

from __future__ import annotations

import json
import time
import traceback
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from syncverify.kernels.bench.report import (BenchInputError, Case, Ceilings, Measurement, NO_SYNC, Sweep,
                                             combine_ranks, resolve)
from syncverify.kernels.build import build, torch_dtype
from syncverify.kernels.processes import init_rank, run_workers

BACKENDS = ("nccl", "gloo")
DEFAULT_WATCHDOG = 300.0  # seconds without a report from any rank (a case's compiles report in between)


@dataclass(frozen=True)
class RanksJob:
    """What every rank of one launch runs (pickled to each process)."""

    sweep: Sweep
    seed: int = 0
    backend: str = "nccl"
    graphs: bool = True
    #: A ``syncverify.kernels.bench.timing.Timer`` to time with instead of the default (tests: scripted).
    timer: Any = None

    @property
    def fused(self) -> bool:
        """Whether the fused kernels run (they need a GPU per rank)."""
        return self.backend == "nccl"


# ----- the baselines: torch.matmul, then NCCL ----------------------------------------------------

def gather_into_tensor(dist) -> Callable:
    """``torch.distributed``'s gather of equal blocks into one tensor (``all_gather_single`` in
    torch >= 2.13, ``all_gather_into_tensor`` before: the same call)."""
    return getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


def scatter_reduced(dist) -> Callable:
    """``torch.distributed``'s reduce-scatter of one tensor into equal blocks
    (``reduce_scatter_single`` where it exists, ``reduce_scatter_tensor`` before: the same call)."""
    return getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


class CollectiveBaseline:
    """``torch.matmul`` of this rank's operands and the collective that gives every rank its
    part of C: the cuBLAS + NCCL time a fused kernel has to beat.

    * all-reduce: the partial product, then ``all_reduce`` of C;
    * all-scatter: the column block, then the gather of every rank's block;
    * all-gather-gemm: the gather of every rank's shard of A (``[M, K]``), then the product with
      this rank's B (each rank its own ``M x N`` C);
    * gemm-reduce-scatter: the partial product, then ``reduce_scatter`` of C: this rank keeps
      ``M / W`` rows of the sum (the fused kernel keeps the tiles it owns: the same share).
    """

    def __init__(self, case: Case, *, world_size: int, dist, device, rank: int = 0) -> None:
        # torch/triton: syncverify.kernels._deps imports them; only the GPU path needs it
        from syncverify.kernels._deps import torch

        self.case, self.world_size, self.dist, self.rank = case, world_size, dist, rank
        self.n_local = case.n // world_size if case.kernel == "all-scatter" else case.n
        dtype = torch_dtype(case.dtype)
        self.c = torch.empty((case.m, self.n_local), dtype=dtype, device=device)
        self.gathered = (torch.empty((world_size * case.m, self.n_local), dtype=dtype, device=device)
                         if case.kernel == "all-scatter" else None)
        self.a_full = (torch.empty((case.m, case.k), dtype=dtype, device=device)
                       if case.kernel == "all-gather-gemm" else None)
        self.scattered = (torch.empty((case.m // world_size, case.n), dtype=dtype, device=device)
                          if case.kernel == "gemm-reduce-scatter" else None)
        self.gather = gather_into_tensor(dist)

    def matmul(self, inputs) -> None:
        """This rank's GEMM alone (``inputs``: this rank's ``[1, ...]`` A and B; all-gather-gemm:
        the gathered A as the last gather left it)."""
        # torch/triton: syncverify.kernels._deps imports them; only the GPU path needs it
        from syncverify.kernels._deps import torch

        A, B = inputs
        torch.matmul(A[0] if self.a_full is None else self.a_full, B[0], out=self.c)

    def matmul_then_collective(self, inputs) -> None:
        """This rank's GEMM and its collective (the class docstring)."""
        if self.a_full is not None:
            self.gather(self.a_full, inputs[0][0])
        self.matmul(inputs)
        if self.gathered is not None:
            self.gather(self.gathered, self.c)
        elif self.scattered is not None:
            scatter_reduced(self.dist)(self.scattered, self.c)
        elif self.a_full is None:
            self.dist.all_reduce(self.c)

    def result(self):
        """This rank's C: the all-reduced C, the gathered blocks side by side ``[M, N]``, its own
        product (all-gather-gemm) or its ``M / W`` rows of the sum (gemm-reduce-scatter)."""
        # torch/triton: syncverify.kernels._deps imports them; only the GPU path needs it
        from syncverify.kernels._deps import torch

        if self.scattered is not None:
            return self.scattered
        if self.gathered is None:
            return self.c
        return torch.cat(self.gathered.view(self.world_size, self.case.m, self.n_local).unbind(0), dim=1)

    def validate(self, inputs, everyone) -> str:
        """One more run on ``inputs``, C compared with every rank's operands' fp32 product."""
        # torch/triton: syncverify.kernels.bench.timing imports them; only the GPU path needs it
        from syncverify.kernels.bench.timing import TOLERANCE, reference, relative_error

        self.matmul_then_collective(inputs)
        want = reference(self.case, *everyone)
        if self.case.kernel == "all-gather-gemm":
            want = want[self.rank]
        elif self.scattered is not None:
            rows = self.case.m // self.world_size
            want = want[self.rank * rows:(self.rank + 1) * rows]
        error = relative_error(self.result(), want)
        return "ok" if error < TOLERANCE else f"relative error {error:.2e} >= {TOLERANCE:g}"


# ----- one rank's side of a case -----------------------------------------------------------------

@dataclass
class RankContext:
    """This process's place in the launch, and its two barriers across ranks."""

    rank: int
    world_size: int
    device: Any  # torch.device
    dist: Any
    sms: int
    token: Any = None  # one int32 on the device: the in-stream barrier's operand

    def host_barrier(self) -> None:
        """Every rank's queued work done, then a barrier: what follows starts on every rank together."""
        # torch/triton: syncverify.kernels._deps imports them; only the GPU path needs it
        from syncverify.kernels._deps import torch

        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.dist.barrier()

    def device_barrier(self) -> None:
        """A barrier queued on the stream (a one-element ``all_reduce``), so a CUDA graph holds it:
        nothing after it on this rank's stream runs before every rank has reached it."""
        self.dist.all_reduce(self.token)


def real_configs(case: Case, *, world_size: int, sms: int):
    """``(gemm-part config, fused config)`` of a case on real ranks: the split from the whole GPU
    one rank has, the GEMM part with every SM a producer."""
    case = resolve(case, sms=sms, world_size=1)
    fused = case.kernel_config(world_size=world_size, virtual=False)
    part = replace(case.kernel_config(world_size=world_size, virtual=False, gemm_only=True), gemm_sms=sms)
    return case, part, fused


def check_cases(sweep: Sweep, *, sms: int, gpus: int) -> None:
    """Build every case's configurations for real ranks: sizes that do not divide, or programs
    that do not fit the GPU, are refused (one line) before any process starts."""
    for case in sweep.cases:
        if case.kernel == "gemm-reduce-scatter" and case.m % sweep.world_size:
            raise BenchInputError(f"{case.key}: M={case.m} does not divide into {sweep.world_size} row blocks, "
                                  "which the cuBLAS + NCCL baseline's reduce_scatter needs")
        _case, part, fused = real_configs(case, world_size=sweep.world_size, sms=sms)
        build(None, part, sms=sms, gpus=gpus)
        build(None, fused, sms=sms, gpus=gpus)


def measure_case_ranks(case: Case, protocols: dict, *, ctx: RankContext, timer, fused: bool = True,
                       progress: Callable[[str], None] = lambda label: None, seed: int = 0) -> list[Measurement]:
    """This rank's measurements of ``case``: cuBLAS, cuBLAS + NCCL, then (``fused``) the GEMM part
    and the fused kernel with each protocol, every rank in the same order."""
    # torch/triton: syncverify.kernels._deps imports them; only the GPU path needs it
    from syncverify.kernels._deps import torch
    from syncverify.kernels.bench.timing import FusedRun, input_sets, rank_slice

    device, W, rank = ctx.device, ctx.world_size, ctx.rank
    case, part_config, fused_config = real_configs(case, world_size=W, sms=ctx.sms)
    generator = torch.Generator(device=device).manual_seed(seed)
    everyone = input_sets(case, W, device, generator=generator, per_rank=True)
    sets = [rank_slice(s, rank) for s in everyone]
    del everyone
    fresh_everyone = input_sets(case, W, device, generator=generator, count=1)[0]
    fresh = rank_slice(fresh_everyone, rank)
    baseline = CollectiveBaseline(case, world_size=W, dist=ctx.dist, device=device, rank=rank)
    runs: dict[str, FusedRun] = {}
    progress(f"{case.key}: compile and capture")
    if fused:
        # torch/triton: syncverify.kernels.heap imports them; only the GPU path needs it
        from syncverify.kernels.heap import SymmetricHeap

        ctx.token = torch.zeros(1, dtype=torch.int32, device=device)
        builds = {"gemm-part": build(None, part_config, sms=ctx.sms),
                  **{name: build(protocol, fused_config, sms=ctx.sms) for name, protocol in protocols.items()}}
        for name, built in builds.items():
            runs[name] = FusedRun(built, device, heap=SymmetricHeap(W, rank, device), rank=rank,
                                  device_barrier=ctx.device_barrier, host_barrier=ctx.host_barrier)
            runs[name].compile(sets[0])
    replays = [timer.capture(lambda: None, lambda i: baseline.matmul(sets[i % len(sets)])),
               timer.capture(lambda: None, lambda i: baseline.matmul_then_collective(sets[i % len(sets)]))]
    replays += [run.capture(timer, sets) for run in runs.values()]
    progress(f"{case.key}: time cuBLAS, cuBLAS + NCCL{', GEMM part, ' if runs else ''}"
             f"{', '.join(name for name in runs if name != 'gemm-part')} interleaved on {W} ranks")
    times = timer.interleaved(replays)
    del replays
    progress(f"{case.key}: validate")
    ctx.host_barrier()
    out = [Measurement(case, "cublas", times[0][0], spread=times[0][1:]),
           Measurement(case, "cublas+nccl", times[1][0], spread=times[1][1:],
                       validated=baseline.validate(fresh, fresh_everyone))]
    for (name, run), t in zip(runs.items(), times[2:]):
        ctx.host_barrier()  # no rank zeroes its locks for a validation while a peer still runs
        if name == "gemm-part":
            out.append(Measurement(case, "gemm-part", t[0], spread=t[1:],
                                   validated=run.validate(fresh, everyone=fresh_everyone)))
        elif name == NO_SYNC:
            out.append(Measurement(case, "fused", t[0], protocol=name, spread=t[1:],
                                   validated="not validated (UNSAFE: no synchronization)"))
        else:
            out.append(Measurement(case, "fused", t[0], protocol=name, spread=t[1:],
                                   validated=run.validate(fresh, everyone=fresh_everyone)))
    ctx.host_barrier()
    del runs
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


def bench_worker(rank: int, world_size: int, port: int, q, job: RanksJob) -> None:
    """One rank of a real-rank bench (a :func:`syncverify.kernels.processes.run_workers` target).

    Reports ``(rank, kind, payload)``: rank 0 ``progress`` ``(done, total, label)``,
    ``ceilings`` (:class:`~syncverify.kernels.bench.report.Ceilings`), ``case`` ``(index, measurements)``; every
    rank ``done`` at the end, or ``error`` with its traceback."""
    try:
        torch, dist, device = init_rank(rank, world_size, port, job.backend)
        # torch/triton: syncverify.kernels.bench.timing imports them; only the GPU path needs it
        from syncverify.kernels.bench import timing

        device = torch.device(device)
        sweep = job.sweep
        sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 0
        ctx = RankContext(rank, world_size, device, dist, sms)
        timer = job.timer or timing.Timer(device, launches=sweep.launches, repeats=sweep.repeats,
                                          graphs=job.graphs)
        timer = replace(timer, sync=ctx.host_barrier)
        total, done = len(sweep.cases) * 3 + 1, 0

        def step(label: str) -> None:
            nonlocal done
            if rank == 0:
                q.put((rank, "progress", (done, total, label)))
            done += 1

        step("ceilings: bf16 matmul peak, device copy")
        ceilings = timing.measure_ceilings(timer)
        if rank == 0:
            q.put((rank, "ceilings", ceilings))
        protocols = timing.load_protocols(sweep.protocols) if job.fused else {}
        for index, case in enumerate(sweep.cases):
            mine = measure_case_ranks(case, protocols, ctx=ctx, timer=timer, fused=job.fused,
                                      progress=step, seed=job.seed)
            gathered = [None] * world_size if rank == 0 else None
            dist.gather_object(mine, gathered, dst=0)
            if rank == 0:
                q.put((rank, "case", (index, combine_ranks(gathered))))
        dist.barrier()
        dist.destroy_process_group()
        q.put((rank, "done", None))
    except BaseException:  # report, never leave the parent waiting for the watchdog
        q.put((rank, "error", traceback.format_exc()))
        raise


# ----- the parent: launch, collect, record -------------------------------------------------------

@dataclass
class RanksOutcome:
    """What a real-rank bench measured: the ceilings (None if it stopped before them), the
    cases that reported (combined over ranks), and why it stopped early (None: it finished)."""

    ceilings: Ceilings | None
    measurements: list[Measurement] = field(default_factory=list)
    cases_reported: int = 0
    cases_total: int = 0
    stopped: str | None = None
    partial: Path | None = None


class PartialRecord:
    """The JSON-lines file a real-rank run leaves as it goes: ``start``, ``ceilings``, one
    ``case`` line per reported case, then ``end`` (with ``stopped`` when the run was stopped)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("", encoding="utf-8")

    def write(self, record: dict) -> None:
        if self.path is None:
            return
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")


def run_sweep_ranks(sweep: Sweep, *, seed: int = 0, backend: str = "nccl", graphs: bool = True,
                    timer: Any = None, watchdog_seconds: float = DEFAULT_WATCHDOG, partial: Path | None = None,
                    progress: Callable[[int, int, str], None] = lambda done, total, label: None) -> RanksOutcome:
    """Run ``sweep`` on ``sweep.world_size`` processes, one per GPU (``backend="gloo"``: CPU
    processes, baselines only); see the module's docstring.

    Every case that reported is in the outcome and in ``partial`` (JSON lines) whatever happens
    after it; a rank that fails, dies, or leaves every rank silent for ``watchdog_seconds`` stops
    the run (every rank killed), and ``stopped`` says which.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is not one of {BACKENDS}")
    outcome = RanksOutcome(ceilings=None, cases_total=len(sweep.cases), partial=partial)
    record = PartialRecord(partial)
    record.write({"type": "start", "sweep": sweep.name, "world_size": sweep.world_size,
                  "protocols": list(sweep.protocols), "cases": len(sweep.cases), "time": time.time()})

    def on_message(rank: int, kind: str, payload: Any) -> None:
        if kind == "progress" and rank == 0:
            progress(*payload)
        elif kind == "ceilings":
            outcome.ceilings = payload
            record.write({"type": "ceilings", **asdict(payload)})
        elif kind == "case":
            index, measurements = payload
            outcome.measurements += measurements
            outcome.cases_reported += 1
            record.write({"type": "case", "index": index, "measurements": [asdict(m) for m in measurements]})

    job = RanksJob(sweep=sweep, seed=seed, backend=backend, graphs=graphs, timer=timer)
    launched = run_workers(bench_worker, (job,), world_size=sweep.world_size,
                           watchdog_seconds=watchdog_seconds, on_message=on_message)
    outcome.stopped = launched["stopped"]
    record.write({"type": "end", "stopped": outcome.stopped, "cases_reported": outcome.cases_reported,
                  "exitcodes": launched["exitcodes"]})
    progress(outcome.cases_total * 3 + 1, outcome.cases_total * 3 + 1, "done" if not outcome.stopped else "stopped")
    return outcome


__all__ = ["CollectiveBaseline", "PartialRecord", "RanksJob", "RanksOutcome", "bench_worker", "check_cases",
           "gather_into_tensor", "scatter_reduced", "measure_case_ranks", "real_configs", "run_sweep_ranks"]
