"""One process per GPU: a free port, NCCL, symmetric memory, and a watchdog.

:func:`run_processes` starts ``world_size`` worker processes (``spawn``), each on its own GPU,
joined by an NCCL process group on a port the OS picked (a fixed 29500 collides: seed 001, bug 1)
with ``torch.distributed._symmetric_memory`` for the heap. Rank 0 records; every rank runs the
same :func:`syncverify.stress.campaign.drive` loop. A watchdog kills every worker and reports the run as
stopped if no worker has reported for ``watchdog_seconds`` (the kernels' waits are bounded, so
this catches a stuck collective or a driver hang, not a protocol hang).

Under ``torchrun`` (``RANK``/``WORLD_SIZE`` set), ``python -m syncverify.stress.launch --options JSON``
runs one worker in the current process instead; rank 0 prints the result as JSON.

NVLink multicast stays off in every process started here (``NCCL_NVLS_ENABLE=0``,
``TORCH_SYMM_MEM_DISABLE_MULTICAST=1``, ``NVSHMEM_DISABLE_NVLS=1``): PLATFORM.md.
"""

from __future__ import annotations

import argparse
import json
import os
import queue as queue_module
import socket
import sys
import time
import traceback
from typing import Any, Callable

MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


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
    import multiprocessing as mp

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


def _init(rank: int, world_size: int, port: int | None, backend: str = "nccl"):
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


def campaign_worker(rank: int, world_size: int, port: int | None, q, campaigns: list[tuple[dict, object]]) -> None:
    """One rank of one or more multi-process campaigns, run one after another in this process
    (a :func:`run_workers` target): the process group and the process start are paid once."""
    try:
        torch, dist, device = _init(rank, world_size, port)
        from syncverify.kernels.build import build
        from syncverify.kernels.heap import SymmetricHeap
        from syncverify.stress.campaign import (CampaignOptions, CampaignResult, Recorder, _reset_policy,
                                                delay_config, drive, kernel_config, load)
        from syncverify.stress.runner import Runner

        def should_stop(local: bool) -> bool:
            flag = torch.tensor([int(local)], device=device)
            dist.broadcast(flag, 0)
            return bool(flag.item())

        for index, (options, protocol) in enumerate(campaigns):
            o = CampaignOptions(**options)
            config = kernel_config(o)
            push = load(o.push)
            built = build(protocol, config, push=push)
            heap = SymmetricHeap(world_size, rank, device)
            runner = Runner(built, heap, device=device, rank=rank, delays=delay_config(o),
                            reset=_reset_policy(o, protocol), poison=o.poison, max_polls=o.max_polls,
                            seed=o.seed, chunk=o.chunk, process_group=dist.group.WORLD,
                            push_reset=push.reset)
            result = CampaignResult(protocol.name, o.kernel, world_size, "processes",
                                    torch.cuda.get_device_name(device), options=o.to_dict())
            recorder = Recorder(result, o, config.num_warps) if rank == 0 else None

            def progress(done, total, seconds, bad=0, index=index):
                if q is not None:
                    q.put((rank, "progress", (index, done, total, seconds, bad)))

            drive(runner, o, recorder, progress, should_stop=should_stop)
            if rank == 0:
                payload = result.to_dict()
                if q is not None:
                    q.put((rank, "result", (index, payload)))
                else:
                    print(json.dumps(payload, sort_keys=True))
            dist.barrier()
            del runner, heap, built
        dist.destroy_process_group()
        if q is not None:
            q.put((rank, "done", None))
    except BaseException:  # report, never hang the parent
        if q is not None:
            q.put((rank, "error", traceback.format_exc()))
        raise


def run_processes_batch(campaigns: list, *, progress=None, on_result=None) -> list:
    """Several campaigns (``(CampaignOptions, protocol)`` pairs, one world size) in one launch
    of ``world_size`` processes; a ``CampaignResult`` for each, in order. A campaign that never
    reported (the run was stopped first) gets an empty result, stopped, never clean."""
    from syncverify.stress.campaign import CampaignResult

    world_sizes = {o.world_size for o, _p in campaigns}
    if len(world_sizes) != 1:
        raise ValueError(f"one launch runs one world size, got {sorted(world_sizes)}")
    payloads: dict[int, dict] = {}

    def on_message(rank, kind, payload):
        if kind == "progress" and rank == 0 and progress is not None:
            progress(*payload)
        if kind == "result" and rank == 0:
            payloads[payload[0]] = payload[1]
            if on_result is not None:
                on_result(*payload)

    watchdog = max(o.watchdog_seconds or 180.0 for o, _p in campaigns)
    outcome = run_workers(campaign_worker, ([(o.to_dict(), p) for o, p in campaigns],),
                          world_size=world_sizes.pop(), watchdog_seconds=watchdog, on_message=on_message)
    for rank, kind, payload in outcome["messages"]:  # messages seen before on_message existed
        if kind == "result" and rank == 0:
            payloads.setdefault(payload[0], payload[1])
    fields = set(CampaignResult.__dataclass_fields__)
    results = []
    for index, (o, protocol) in enumerate(campaigns):
        payload = payloads.get(index)
        if payload is None:
            result = CampaignResult(protocol.name, o.kernel, o.world_size, "processes", "cuda",
                                    options=o.to_dict())
            result.stopped = outcome["stopped"] or "the launch ended before this campaign reported"
        else:
            result = CampaignResult(**{k: v for k, v in payload.items() if k in fields})
            result.stopped = outcome["stopped"] if index == max(payloads) and outcome["stopped"] else result.stopped
        results.append(result)
    return results


def run_processes(o, protocol, *, progress=None):
    """A campaign over ``o.world_size`` GPUs, one process each; returns a ``CampaignResult``."""
    return run_processes_batch([(o, protocol)],
                               progress=None if progress is None else lambda _i, *p: progress(*p))[0]


def main(argv: list[str] | None = None) -> int:
    """``python -m syncverify.stress.launch --options JSON`` under torchrun: one rank in this process."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--options", required=True, help="campaign options as a JSON object")
    args = parser.parse_args(argv)
    from syncverify.stress.campaign import campaign_options, load

    options = json.loads(args.options)
    protocol = load(options.pop("protocol"))
    options["protocol"] = protocol.name
    o = campaign_options(**options)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    campaign_worker(rank, world, None, None, [(o.to_dict(), protocol)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
