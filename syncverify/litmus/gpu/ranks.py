"""Litmus tests whose threads lie on several GPUs: one process per GPU, test memory across them.

A test with threads on GPUs ``0 .. W-1`` runs on ``W`` processes, rank ``r`` on GPU ``r``, started
by :func:`syncverify.kernels.processes.run_ranks` (spawned, a process group on a free port, a
watchdog that kills only the workers it started), as the fused kernels' and the user's real-rank
stress runs are. Every rank launches the test's ONE kernel (:func:`~syncverify.litmus.gpu.codegen.generate`
with ``cross_gpu``), with tables that place only its own GPU's test CTAs; an instance's threads
on GPU 0 run in rank 0's launch and its threads on GPU 1 in rank 1's, at the same time.

Memory: each rank's heap (``join_ranks``: symmetric memory on GPUs, every peer's block mapped in
each process; rows of one shared file under Triton's interpreter) holds a region per launch of a
round. Each (instance, location) lies on a *home* GPU drawn at random per launch (the stress
parameter ``shuffle_locations`` spreads the slots, the home spreads them over GPUs: a thread reads
and writes local and peer memory alike). The kernel gets rank 0's region as its base and a 64-bit
word offset per location, computed per process (a peer's block lies at another address in each
process). The start counter lies on rank 0 and the aligned start meets at sys scope.

A round (:func:`rank_worker`): every rank writes its home slots' initial values, the ranks meet
(``dist.barrier``), each launches the round's kernels, synchronizes, meets again; registers and
done flags are summed onto rank 0 (each thread's columns are written by its own GPU's launch,
zero elsewhere), which reads the locations from their homes, tallies the outcomes and tells the
others whether another round follows (the ranks must agree on how many launches they make).

On the CPU the same code runs with ``gloo`` and the interpreter, which runs programs one after
another within a process: its start barrier times out (counted as misaligned starts) and it
shows only sequentially consistent outcomes, but every table, offset and merge is the GPU run's.

Bad input, one line each (:func:`placement_refusal`): a test on more GPUs than the machine has, a
thread on a GPU that does not exist, stress parameters with fewer test programs than test CTAs.
"""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from syncverify.errors import SyncVerifyError
from syncverify.kernels.processes import join_ranks, reporting_errors, run_ranks
from syncverify.litmus.gpu.codegen import KernelPlan, generate
from syncverify.litmus.gpu.launch import DeviceRun, INTERPRETER_POOL, LAYOUT_POOL, columns_of, tally, interpreting, \
    load_kernel, runtime_args
from syncverify.litmus.gpu.layout import Layout, make_layout, scratch_words
from syncverify.litmus.gpu.outcomes import observed_items
from syncverify.litmus.gpu.stress import LINE_WORDS, StressParams, interpreter_sized
from syncverify.program import Program

#: The GPUs the interpreter stands in for: the two of ``nvidia-h200-x2``, the machine these runs are for.
INTERPRETER_GPUS = 2
#: Seconds without a report from any rank before the watchdog stops the run (a round reports).
WATCHDOG_SECONDS = 120.0


def gpus_of(program: Program) -> list[int]:
    """The GPUs ``program``'s threads are placed on, in order."""
    return sorted({t.gpu for t in program.threads})


def placement_refusal(program: Program, gpus: int, params: StressParams | None = None) -> str | None:
    """Why ``program`` cannot be placed on a machine of ``gpus`` GPUs (one process each), or None."""
    used = gpus_of(program)
    if len(used) > gpus:
        hint = "; without a GPU, TRITON_INTERPRET=1 runs it through Triton's CPU interpreter" if gpus == 0 else ""
        return (f"{program.name}: the test's threads are on {len(used)} GPUs ({', '.join(map(str, used))}) and "
                f"{gpus} {'is' if gpus == 1 else 'are'} available (one process per GPU){hint}")
    for thread in program.threads:
        if thread.gpu >= gpus:
            return (f"{program.name}: thread {thread.name} is placed on gpu {thread.gpu}, which does not exist "
                    f"(GPUs 0..{gpus - 1}; rank r runs on gpu r)")
    if params is not None:
        ctas = len({(t.gpu, t.cta) for t in program.threads})
        if params.test_programs < ctas:
            return (f"{program.name}: test_programs={params.test_programs} cannot place the test's {ctas} CTAs "
                    f"on {len(used)} GPUs: each test CTA needs at least one program")
    return None


@dataclass(frozen=True)
class RankTables:
    """One rank's part of one launch: its programs' placement tables (int32)."""

    test_programs: int
    cta: np.ndarray
    role: np.ndarray
    instance: np.ndarray
    line: np.ndarray  # every program's scratch line, this rank's stress programs included
    delay: np.ndarray


@dataclass(frozen=True)
class CrossLaunch:
    """One launch over every GPU: where each (instance, location) lies and each rank's tables."""

    layout: Layout
    home: np.ndarray  # [instances * locations]: the rank whose heap holds the slot
    ranks: tuple[RankTables, ...]


def split_layout(layout: Layout, plan: KernelPlan, world: int, params: StressParams,
                 rng: np.random.Generator) -> CrossLaunch:
    """``layout`` (every GPU's test programs) cut into each rank's tables, with a home per slot."""
    block = 32 * plan.num_warps
    gpu_of_program = np.asarray(plan.cta_gpus, dtype=np.int32)[layout.cta_of_program]
    role = layout.role.reshape(layout.test_programs, block)
    instance = layout.instance.reshape(layout.test_programs, block)
    delay = layout.delay.reshape(layout.test_programs, block)
    tables = []
    for rank in range(world):
        mine = np.flatnonzero(gpu_of_program == rank)
        line = np.concatenate([layout.line_of_program[mine],
                               rng.integers(0, params.stress_lines, size=params.stress_programs, dtype=np.int32)])
        tables.append(RankTables(len(mine), layout.cta_of_program[mine].copy(), role[mine].reshape(-1).copy(),
                                 instance[mine].reshape(-1).copy(), line.astype(np.int32), delay[mine].reshape(-1).copy()))
    home = rng.integers(0, world, size=layout.address.shape[0], dtype=np.int32)
    return CrossLaunch(layout, home, tuple(tables))


@dataclass(frozen=True)
class CrossJob:
    """One test's run across GPUs: the kernel, the budget and the launches' tables (a pool that
    rounds cycle through, as :func:`~syncverify.litmus.gpu.launch.run_on_device` does)."""

    program: Program
    plan: KernelPlan
    params: StressParams
    iterations: int
    seconds: float
    launches: tuple[CrossLaunch, ...]
    world: int

    @property
    def memory_words(self) -> int:
        return self.launches[0].layout.memory_words

    @property
    def region_words(self) -> int:
        """Words of each rank's heap this job uses: a memory region per launch, then two start
        counter words per launch (only rank 0's are used)."""
        return len(self.launches) * (self.memory_words + 2)


def prepare(program: Program, params: StressParams, *, iterations: int, seconds: float, seed: int = 0,
            interpret: bool | None = None, gpus: int | None = None) -> CrossJob:
    """The job of ``program`` (its tables drawn from ``seed``); bad placement is one line (SyncVerifyError)."""
    interpret = interpreting() if interpret is None else interpret
    world = max(gpus_of(program)) + 1
    why = placement_refusal(program, INTERPRETER_GPUS if gpus is None else gpus, params)
    if why is not None:
        raise SyncVerifyError(why)
    if interpret:
        params = interpreter_sized(params)
    plan = generate(program, "interpret" if interpret else "ptx", cross_gpu=True)
    rng = np.random.default_rng(seed)
    pool = []
    for _ in range(min(INTERPRETER_POOL if interpret else LAYOUT_POOL, iterations)):
        layout = make_layout(plan.ctas, plan.num_warps, len(plan.locations), params, rng, single_lane=plan.single_lane)
        pool.append(split_layout(layout, plan, world, params, rng))
    return CrossJob(program, plan, params, iterations, seconds, tuple(pool), world)


def run_across_gpus(jobs: list[CrossJob], *, interpret: bool | None = None, watchdog: float = WATCHDOG_SECONDS,
                    progress: Callable[[str], None] | None = None, budget: float | None = None,
                    on_result: Callable[[int, DeviceRun], None] | None = None,
                    ) -> tuple[list[DeviceRun | None], str | None]:
    """Run ``jobs`` one after another in one start of the rank processes (as many as the widest
    job's GPUs); returns each job's run (None where the run stopped before it) and why the run
    stopped (None: it finished). ``budget``: seconds after the ranks start past which no further
    job starts (each job is bounded by its own ``seconds``). ``on_result(index, run)`` is called
    as each job finishes."""
    if not jobs:
        return [], None
    interpret = interpreting() if interpret is None else interpret
    world = max(job.world for job in jobs)
    heap_bytes = 4 * max(job.region_words for job in jobs)
    heap_bytes = -(-heap_bytes // 4096) * 4096
    results: list[DeviceRun | None] = [None] * len(jobs)

    def on_message(rank: int, kind: str, payload: Any) -> None:
        if kind == "result":
            index, run = payload
            results[index] = run
            if on_result is not None:
                on_result(index, run)
        if progress is not None and (kind == "progress" or (kind == "result" and on_result is None)):
            progress(payload if kind == "progress" else f"{jobs[payload[0]].program.name}: "
                     f"{payload[1].instances:,} instances in {payload[1].launches} launches")

    run = run_ranks(rank_worker, (jobs, interpret, heap_bytes, budget), world_size=world, watchdog_seconds=watchdog,
                    on_message=on_message, heap_bytes=heap_bytes if interpret else None)
    errors = [payload for _rank, kind, payload in run["messages"] if kind == "error"]
    inputs = [e for e in errors if e.startswith("input: ")]
    if inputs:
        raise SyncVerifyError(inputs[0][len("input: "):])
    why = run["stopped"]
    if why is None and any(r is None for r in results):
        why = f"the budget of {budget:g} s was spent before this test started"
    return results, why


def rank_worker(rank: int, world: int, port: int, queue, jobs: list[CrossJob], interpret: bool, heap_bytes: int,
                budget: float | None, heap_path: str | None) -> None:
    """One rank (a :func:`~syncverify.kernels.processes.run_ranks` target): every job's rounds
    (module doc); rank 0 reports ``result`` per job, every rank ``done`` or ``error``. Rank 0
    decides whether the next job starts (``budget``) and tells the others."""
    with reporting_errors(rank, queue):
        torch, dist, device, heap = join_ranks(rank, world, port, interpret=interpret, heap_path=heap_path,
                                               heap_bytes=heap_bytes)
        if heap is None:  # join_ranks maps no heap for one rank: a job here spans two GPUs at least
            raise SyncVerifyError(f"a run across GPUs needs 2 ranks or more, not {world}")
        views = [h.view(torch.int32) for h in heap]
        _run_jobs(jobs, rank, world, views, torch, dist, device, interpret, budget,
                  lambda kind, payload: queue.put((rank, kind, payload)))
        queue.put((rank, "done", None))
        dist.destroy_process_group()


def _run_jobs(jobs: list[CrossJob], rank: int, world: int, views: list, torch, dist, device: str, interpret: bool,
              budget: float | None, put: Callable[[str, Any], None]) -> None:
    """Every job on this rank, while rank 0 says the budget allows another; rank 0 puts
    ``("result", (index, run))`` per job and every rank ``("progress", line)``."""
    began = time.perf_counter()
    start = torch.ones(1, dtype=torch.int32, device=device)
    for index, job in enumerate(jobs):
        if rank == 0:
            start.fill_(int(budget is None or time.perf_counter() - began < budget))
        dist.broadcast(start, src=0)
        if int(start.item()) == 0:
            return
        run = _run_job(job, rank, world, views, torch, dist, device, interpret, lambda line: put("progress", line))
        if rank == 0:
            put("result", (index, run))


class _ThreadGroup:
    """The process group calls :func:`_run_jobs` makes (barrier, sum onto one rank, broadcast),
    for ranks that are threads of one process (:func:`run_on_one_device`). Every wait is bounded
    (``timeout``): a rank that does not arrive breaks the barrier and the run stops."""

    def __init__(self, world: int, timeout: float) -> None:
        self.gate = threading.Barrier(world, timeout=timeout)
        self.slots: list = [None] * world
        self.launch_lock = threading.Lock()  # Triton's first launch compiles: one thread at a time

    def member(self, rank: int) -> "_ThreadGroup":
        mine = _ThreadGroup.__new__(_ThreadGroup)
        mine.__dict__.update(self.__dict__, rank=rank)
        return mine

    def barrier(self) -> None:
        self.gate.wait()

    def reduce(self, tensor, dst: int = 0) -> None:
        self.slots[self.rank] = tensor
        self.gate.wait()
        if self.rank == dst:
            for r, other in enumerate(self.slots):
                if r != dst:
                    tensor += other
        self.gate.wait()

    def broadcast(self, tensor, src: int = 0) -> None:
        self.slots[self.rank] = tensor
        self.gate.wait()
        if self.rank != src:
            tensor.copy_(self.slots[src])
        self.gate.wait()


def run_on_one_device(jobs: list[CrossJob], *, interpret: bool | None = None, budget: float | None = None,
                      timeout: float = WATCHDOG_SECONDS, on_result: Callable[[int, DeviceRun], None] | None = None,
                      progress: Callable[[str], None] | None = None) -> tuple[list[DeviceRun | None], str | None]:
    """:func:`run_across_gpus` with every rank a thread of this process on ONE device (its own
    CUDA stream), every rank's heap a row of one tensor: the same kernels, tables, offsets and
    merge, on one GPU. It checks the PTX form of a cross-GPU run on a machine with one GPU (no
    NVLink, so the rates say nothing about two GPUs), and the runner on the CPU without starting
    processes. Same return value."""
    import torch  # lazily: the model runs without torch

    if not jobs:
        return [], None
    interpret = interpreting() if interpret is None else interpret
    device = "cpu" if interpret else "cuda"
    world = max(job.world for job in jobs)
    heap_bytes = -(-4 * max(job.region_words for job in jobs) // 4096) * 4096
    block = torch.zeros((world, heap_bytes), dtype=torch.uint8, device=device)
    views = [block[r].view(torch.int32) for r in range(world)]
    group = _ThreadGroup(world, timeout)
    results: list[DeviceRun | None] = [None] * len(jobs)
    errors: list[str] = []

    def body(rank: int) -> None:
        def put(kind: str, payload: Any) -> None:
            if kind == "result":
                results[payload[0]] = payload[1]
                if on_result is not None:
                    on_result(*payload)
            elif progress is not None:
                progress(payload)

        try:
            stream = None if interpret else torch.cuda.Stream()
            with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                _run_jobs(jobs, rank, world, views, torch, group.member(rank), device, interpret, budget, put)
        except threading.BrokenBarrierError:  # another rank failed (its error is listed) or did not arrive in time
            errors.append(f"rank {rank}: the ranks' barrier broke (a rank failed, or did not arrive within {timeout:g} s)")
        except Exception:  # noqa: BLE001 -- reported as why the run stopped
            errors.append(f"rank {rank}: {traceback.format_exc().strip().splitlines()[-1]}")
            group.gate.abort()

    for job in jobs:  # imported here once: two threads importing one kernel module would race
        load_kernel(job.plan)
    threads = [threading.Thread(target=body, args=(rank,), daemon=True) for rank in range(world)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    why = "; ".join(sorted(errors)) or None
    if why is None and any(r is None for r in results):
        why = f"the budget of {budget:g} s was spent before this test started"
    return results, why


def _run_job(job: CrossJob, rank: int, world: int, views: list, torch, dist, device: str, interpret: bool,
             report: Callable[[str], None]) -> DeviceRun:
    """Every round of one job on this rank; rank 0's tally (other ranks return an empty run)."""
    plan, params, program = job.plan, job.params, job.program
    kernel = load_kernel(plan)
    items = observed_items(program)
    n_loc, n_out, n_threads = len(plan.locations), max(1, len(plan.outputs)), len(program.threads)
    columns = columns_of(items, plan, program)
    words, pool = job.memory_words, len(job.launches)
    base = views[0]  # every launch's base pointer: rank 0's block, as this process maps it
    delta = [(v.data_ptr() - base.data_ptr()) // 4 for v in views]
    init = np.array([program.init.get(loc, 0) for loc in plan.locations], dtype=np.int64)
    image = np.zeros(pool * words, dtype=np.int32)  # this rank's home slots, every launch
    uploads = []
    for k, launch in enumerate(job.launches):
        lay, tables = launch.layout, launch.ranks[rank]
        slot = lay.address.astype(np.int64) + k * words
        value = np.tile(init, lay.instances)
        mine = launch.home == rank
        image[slot[mine]] = value[mine]
        addr = slot + np.asarray(delta, dtype=np.int64)[launch.home]
        up = {name: torch.from_numpy(np.ascontiguousarray(a)).to(device) for name, a in (
            ("addr", addr), ("cta", tables.cta), ("role", tables.role), ("inst", tables.instance),
            ("line", tables.line), ("delay", tables.delay))}
        up["slot"] = torch.from_numpy(slot.reshape(lay.instances, n_loc)).to(device)
        up["home"] = torch.from_numpy(launch.home.astype(np.int64).reshape(lay.instances, n_loc)).to(device)
        uploads.append(up)
    image_t = torch.from_numpy(image).to(device)
    instances = job.launches[0].layout.instances
    out_buf = torch.zeros((pool, instances * n_out), dtype=torch.int32, device=device)
    status_buf = torch.zeros((pool, instances * n_threads), dtype=torch.int32, device=device)
    scratch = torch.zeros(scratch_words(params), dtype=torch.int32, device=device)
    total_programs = sum(t.test_programs for t in job.launches[0].ranks)
    run = DeviceRun(name=program.name, form=plan.form, items=items, params=params)
    go = torch.ones(1, dtype=torch.int32, device=device)
    start = last_report = time.perf_counter()
    while True:
        count = min(pool, job.iterations - run.launches)
        views[rank][:pool * words].copy_(image_t)
        if rank == 0:
            views[0][pool * words:pool * (words + 2)].zero_()
        out_buf.zero_()
        status_buf.zero_()
        _meet(torch, dist, interpret)
        k0 = time.perf_counter()
        for k in range(count):
            up, tables = uploads[k], job.launches[k].ranks[rank]
            sync = views[0][pool * words + 2 * k:]
            with getattr(dist, "launch_lock", contextlib.nullcontext()):  # ranks that are threads: one at a time
                kernel.launcher((tables.test_programs + params.stress_programs,), interpret=interpret)(
                    base, up["addr"], up["cta"], up["role"], up["inst"], out_buf[k], status_buf[k], scratch,
                    up["line"], sync, up["delay"], *runtime_args(params, tables.test_programs, total_programs),
                    BLOCK=32 * plan.num_warps, NLOC=n_loc, NOUT=n_out, NTHREADS=n_threads, LINE_WORDS=LINE_WORDS,
                    num_warps=plan.num_warps)
        _meet(torch, dist, interpret)
        run.kernel_seconds += time.perf_counter() - k0
        dist.reduce(out_buf, dst=0)
        dist.reduce(status_buf, dst=0)
        if rank == 0:
            _tally_round(run, job, uploads[:count], views, out_buf, status_buf, columns, torch)
            run.launches += count
            run.seconds = time.perf_counter() - start
            if run.launches >= job.iterations:
                run.stopped_by = "iterations"
            elif run.seconds >= job.seconds:
                run.stopped_by = "seconds"
            go.fill_(0 if run.stopped_by else 1)
            if time.perf_counter() - last_report >= 2.0:
                report(f"{program.name}: {run.launches} launches, {run.instances:,} instances, {run.seconds:.0f} s")
                last_report = time.perf_counter()
        dist.broadcast(go, src=0)
        if int(go.item()) == 0:
            return run


def _meet(torch, dist, interpret: bool) -> None:
    """Every rank's launches so far finished, then a barrier of the process group."""
    if not interpret:
        torch.cuda.synchronize()
    dist.barrier()


def _tally_round(run: DeviceRun, job: CrossJob, uploads: list[dict], views: list, out_buf, status_buf,
                 columns: list[tuple[str, int]], torch) -> None:
    """Rank 0: the round's outcomes (registers summed from every rank, locations read at their homes)."""
    words, pool, n_threads = job.memory_words, len(job.launches), len(job.program.threads)
    memory = None
    if any(kind == "loc" for kind, _ in columns):
        memory = torch.stack([v[:pool * words] for v in views])  # peer blocks copied here once per round
    misaligned = views[0][pool * words:pool * (words + 2)].view(pool, 2)[:, 1].cpu().tolist()  # one copy a round
    for k, up in enumerate(uploads):
        instances = job.launches[k].layout.instances
        out = out_buf[k].view(instances, -1)
        status = status_buf[k].view(instances, n_threads)
        cols = [out[:, c] if kind == "out" else memory[up["home"][:, c], up["slot"][:, c]] for kind, c in columns]
        values = torch.stack(cols, dim=1) if cols else torch.zeros((instances, 0), dtype=torch.int32)
        finished = (status == 1).all(dim=1)
        tally(run, values.cpu().numpy(), finished.cpu().numpy(), int((status == 2).any(dim=1).sum()), misaligned[k])
