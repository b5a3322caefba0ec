"""One process per GPU: a free port, NCCL, symmetric memory, and a watchdog.

:func:`run_workers` starts ``world_size`` worker processes (``spawn``), each on its own GPU,
joined by an NCCL process group (:func:`init_rank`) on a port the OS picked (a fixed 29500
collides: seed 001, bug 1) with ``torch.distributed._symmetric_memory`` for the heap. A watchdog
kills every worker and reports the run as stopped if no worker has reported for
``watchdog_seconds`` (the kernels' waits are bounded, so this catches a stuck collective or a
driver hang, not a protocol hang). Stress campaigns (``syncverify.stress.campaign``), the user's
kernels on real ranks (``syncverify.frontend.real_ranks``) and the real-rank bench
(``syncverify.kernels.bench.ranks``) all launch through it.

On the CPU (Triton's interpreter) the same launch runs with ``gloo`` and every rank's heap in one
file in shared memory (:func:`run_ranks` with ``heap_bytes``): each process maps the whole file
(:func:`join_ranks`), so a peer's copy is an ordinary address and two ranks' interpreted kernels
really run at the same time, one process each. Stress campaigns of the fused kernels and the
user's harnesses share this path.

NVLink multicast stays off in every process started here (``NCCL_NVLS_ENABLE=0``,
``TORCH_SYMM_MEM_DISABLE_MULTICAST=1``, ``NVSHMEM_DISABLE_NVLS=1``): PLATFORM.md.
"""

from __future__ import annotations

import contextlib
import os
import queue as queue_module
import socket
import tempfile
import time
import traceback
from collections.abc import Iterator
from typing import Any, Callable
import multiprocessing as mp

from syncverify.errors import SyncVerifyError

MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}

#: Poll cap of a bounded wait in the interpreter with real ranks: a peer is another process that runs
#: at the same time, so a wait can succeed, but only after the peer's interpreted programs (seconds).
REAL_INTERPRET_CAP = 1 << 16
#: Where :func:`run_ranks` puts the interpreter's heap file: memory, where the system has a tmpfs there.
HEAP_FOLDER = "/dev/shm" if os.path.isdir("/dev/shm") else None


def free_port() -> int:
    """A TCP port the OS reports free on localhost (bind port 0, read it back)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_workers(target: Callable, args: tuple, *, world_size: int, watchdog_seconds: float,
                on_message: Callable[[int, str, Any], None] | None = None) -> dict:
    """Start ``target(rank, world_size, port, queue, *args)`` in ``world_size`` processes.

    Workers report through ``queue`` with ``(rank, kind, payload)`` tuples; any message resets
    the watchdog. Returns ``{"messages": [...], "exitcodes": [...], "stopped": None | reason}``.
    On a watchdog timeout or a worker that dies, every worker still alive is killed (by its own
    process object, never by name).
    """
    os.environ.update(MULTICAST_OFF)  # inherited by every worker, whatever the caller had set
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=target, args=(rank, world_size, port, q, *args), daemon=True)
             for rank in range(world_size)]
    for p in procs:
        p.start()
    messages: list = []
    stopped = None
    last = time.monotonic()
    finished: set[int] = set()
    while True:
        try:
            rank, kind, payload = q.get(timeout=0.2)
            last = time.monotonic()
            messages.append((rank, kind, payload))
            if kind in ("done", "error"):
                finished.add(rank)
            if on_message is not None:
                on_message(rank, kind, payload)
            if kind == "error":
                stopped = f"rank {rank} failed: {payload.splitlines()[-1] if payload else 'error'}"
                first = _died_first(procs, finished | {rank})
                if first is not None:  # a peer's death made this rank's collective fail: name the cause
                    stopped = f"rank {first} exited with code {procs[first].exitcode} before reporting; then {stopped}"
                break
            continue
        except queue_module.Empty:
            pass
        if len(finished) == world_size:
            break
        dead = [r for r, p in enumerate(procs) if p.exitcode not in (None, 0) and r not in finished]
        if dead:
            stopped = f"rank {dead[0]} exited with code {procs[dead[0]].exitcode} before reporting"
            break
        if time.monotonic() - last > watchdog_seconds:
            stopped = f"watchdog: no report from any rank for {watchdog_seconds:g} s; killed"
            break
    for rank, p in enumerate(procs):  # ranks that reported done are exiting: let them
        p.join(timeout=10 if (stopped is None or rank in finished) else 0.5)
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
    return {"messages": messages, "exitcodes": [p.exitcode for p in procs], "stopped": stopped}


def _died_first(procs: list, reported: set[int], *, grace: float = 1.0) -> int | None:
    """A rank that died without reporting, looked for during ``grace`` seconds (a process that
    just died may not be reaped yet), or None."""
    deadline = time.monotonic() + grace
    while True:
        dead = [r for r, p in enumerate(procs) if p.exitcode not in (None, 0) and r not in reported]
        if dead or time.monotonic() > deadline:
            return dead[0] if dead else None
        time.sleep(0.05)


def scripted_worker(rank: int, world_size: int, port: int, q, script: tuple[str, ...]) -> None:
    """A :func:`run_workers` target for the launcher's own checks; it imports nothing, so it
    starts in a fraction of a second. It reports ``(port, multicast settings)``, then does
    ``script[rank]``: ``"nap:S"`` (sleep S s, then report done: past the watchdog it must be
    killed), ``"raise"`` (report an error, as ``campaign_worker`` does), ``"exit:N"`` (die
    with code N without reporting)."""
    q.put((rank, "progress", (port, {key: os.environ.get(key) for key in MULTICAST_OFF})))
    action, _, arg = script[rank].partition(":")
    if action == "raise":
        q.put((rank, "error", "Traceback (most recent call last):\nRuntimeError: scripted failure"))
        return
    if action == "exit":
        os._exit(int(arg))
    time.sleep(float(arg or 0))
    q.put((rank, "done", None))


@contextlib.contextmanager
def reporting_errors(rank: int, queue) -> Iterator[None]:
    """A rank worker's body: what it raises goes to the parent (:func:`run_workers`) as its
    ``error`` message: bad input as one line (``input: ...``), anything else as a traceback."""
    try:
        yield
    except SyncVerifyError as error:
        queue.put((rank, "error", f"input: {error}"))
    except Exception:  # noqa: BLE001 -- the parent reports it
        queue.put((rank, "error", traceback.format_exc()))


def init_rank(rank: int, world_size: int, port: int | None, backend: str = "nccl"):
    # torch: only the GPU path needs it (the model runs without torch and triton)
    import torch
    import torch.distributed as dist

    os.environ.update(MULTICAST_OFF)
    if port is not None:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if backend == "gloo":  # CPU tensors: the launch path of bench's baselines, checked without GPUs
        dist.init_process_group("gloo", rank=rank, world_size=world_size)
        return torch, dist, "cpu"
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", rank=rank, world_size=world_size,
                            device_id=torch.device(f"cuda:{local}"))
    return torch, dist, f"cuda:{local}"


def backend(interpret: bool) -> str:
    """The process group's backend: ``gloo`` for the interpreter's CPU tensors, else ``nccl``."""
    return "gloo" if interpret else "nccl"


def refuse_more_ranks_than_gpus(world_size: int, gpus: int | None, *, error: type[Exception], fix: str) -> None:
    """One line of bad input when a real-rank run wants more ranks than there are GPUs (one per
    rank); ``gpus`` None: not asked (the interpreter runs)."""
    if gpus is not None and world_size > gpus:
        raise error(f"--world-size={world_size} on real ranks needs {world_size} GPUs (one per rank) and "
                    f"{gpus} {'is' if gpus == 1 else 'are'} visible; {fix}")


def run_ranks(target: Callable, args: tuple, *, world_size: int, watchdog_seconds: float,
              on_message: Callable[[int, str, Any], None] | None = None, heap_bytes: int | None = None) -> dict:
    """:func:`run_workers` for ``target(rank, world_size, port, queue, *args, heap_path)``.

    ``heap_bytes`` (the interpreter): a sparse file in shared memory (``/dev/shm`` where there is
    one) of ``world_size * heap_bytes`` bytes, every rank's heap, whose path each worker gets as
    ``heap_path`` and maps with :func:`join_ranks`; removed when the workers are gone, whatever
    happened. None (GPUs): ``heap_path`` is None."""
    heap_path = None
    if heap_bytes is not None:
        with tempfile.NamedTemporaryFile(prefix="syncverify-heap-", dir=HEAP_FOLDER, delete=False) as heap_file:
            heap_file.truncate(world_size * heap_bytes)
        heap_path = heap_file.name
    try:
        return run_workers(target, (*args, heap_path), world_size=world_size, watchdog_seconds=watchdog_seconds,
                           on_message=on_message)
    finally:
        if heap_path is not None:
            os.unlink(heap_path)


def join_ranks(rank: int, world_size: int, port: int | None, *, interpret: bool, heap_path: str | None = None,
               heap_bytes: int = 0):
    """In a worker of :func:`run_ranks`: join the process group (:func:`backend`) and, given
    ``heap_bytes``, every rank's heap of that many bytes as this process sees it. Returns
    ``(torch, dist, device, heap)``, ``heap`` a list of ``world_size`` uint8 tensors (rank ``r``'s
    heap at ``heap[r]``) or None:

    * the interpreter (the run's ``heap_path``): rows of the shared file, mapped ``MAP_SHARED``
      (every process sees the same bytes; sparse: pages exist where ranks write);
    * GPUs, ``world_size > 1``: one block of symmetric memory per rank
      (``torch.distributed._symmetric_memory``, a collective: every rank calls it), each peer's
      mapped into this process (``get_buffer``), as the fused kernels' symmetric heap does per buffer;
    * otherwise (no ``heap_bytes``, or one rank on one GPU): None, the caller's own heap.
    """
    torch, dist, device = init_rank(rank, world_size, port, backend=backend(interpret))
    heap = None
    if heap_path is not None:
        heap = list(torch.from_file(heap_path, shared=True, size=world_size * heap_bytes,
                                    dtype=torch.uint8).view(world_size, heap_bytes))
    elif heap_bytes and not interpret and world_size > 1:
        # torch: only the GPU path needs it (the model runs without torch and triton)
        import torch.distributed._symmetric_memory as symm_mem

        own = symm_mem.empty(heap_bytes, dtype=torch.uint8, device=device)
        own.zero_()
        handle = symm_mem.rendezvous(own, dist.group.WORLD)
        heap = [own if r == rank else handle.get_buffer(r, (heap_bytes,), torch.uint8) for r in range(world_size)]
    return torch, dist, device, heap
