"""The GPU session script: check, time and stress in one call; a compact table last.

    PYTHONUNBUFFERED=1 python -m benchmarks.stress_bench --out $OUT [--seconds 3] [--sections all]

Run from the repository root (``benchmarks`` is a folder of scripts, not part of the package).

Sections (each one guarded: a failure is printed and the next section runs):

* ``env``: versions, GPU, SMs;
* ``bench``: validated iterations per second (every iteration poisoned, launched, validated on
  the GPU, synchronized every 64) at 1024x1024x1024 bf16, W=2 virtual ranks, no delays, for both
  kernels with a protocol the model calls safe; plus the fused kernel alone (``do_bench``) and
  cuBLAS for the same per-rank GEMMs, for scale;
* ``delays``: what the delays cost (kernel time with every site delayed vs none);
* ``overwrite``: seed 000's xchg-flag in the all-reduce kernel, by world size, delay site,
  production mode and lock reset (:data:`OVERWRITE_RUNS`): where its bugs show on the hardware;
* ``racing``: ``--reset host-racing`` (the clear on a side stream, unordered with the next
  kernel: seed 001's bug 2) against ``host-between-barriers``, with and without delays before
  the reset, for :data:`RACING_PROTOCOLS` in both kernels (:data:`RACING_VARIANTS`);
* ``table``: every built-in protocol x both kernels x ``--worlds`` (``W`` or ``W:seconds``),
  virtual ranks, random delays: iterations, bad iterations, bad tiles per class, time to first
  failure (compilation excluded: the first launch is not timed);
* ``long``: ``--long-iterations`` iterations of each named safe protocol, both kernels, W=2;
* ``processes``: real ranks, one process per GPU (needs 2 GPUs): the it/s benchmark, the long
  runs and the per-protocol table at W=2, all in one launch (:func:`section_processes`);
* ``throughput``: validated iterations per second with each block of 256 iterations replayed as
  one CUDA graph against the eager path (one host launch sequence per iteration), both kernels,
  W=2 virtual ranks, no delays and random delays;
* ``kernel``: device times from CUDA events around a CUDA graph of many launches: the fused
  all-reduce kernel, cuBLAS for the same per-rank GEMMs, and one whole stress iteration (poison,
  kernel, validation);
* ``guided``: every built-in x both kernels x ``--worlds``: the model's verdict; for a pair it
  calls unsafe, each guided schedule (``syncverify.stress.guided``) until its first failure or
  ``W:seconds``, random delays under the same budget, and (``--replay-times``) the honest replay of
  the guided first failure; for a safe pair, the positive control's schedules on the pair and on
  its sibling (``syncverify.stress.controls``), which must fail.

``table`` runs once per ``--poisons`` mode (``all``: a read of the previous iteration's tile is
``unwritten``; ``previous``: the previous iteration's values stay, so it is ``stale``).

Every campaign appends its result to ``OUT/bench.jsonl``; no new campaign starts once
``--budget-seconds`` have passed since :func:`main` started (it says which it skipped). Importing
this module starts no clock and touches no GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections import Counter


def _log(out_dir, record):
    with open(os.path.join(out_dir, "bench.jsonl"), "a") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")


def failure_sample(failures: list[dict], per_class: int = 3) -> list[dict]:
    """The first ``per_class`` failure records of each class, in run order (keeps a log line
    short without hiding a rare class behind a common one)."""
    kept: Counter = Counter()
    sample = []
    for record in failures:
        if kept[record["kind"]] < per_class:
            kept[record["kind"]] += 1
            sample.append(record)
    return sample


def _campaign(out_dir, tags: dict | None = None, **options):
    from syncverify.stress.campaign import run_campaign

    t0 = time.perf_counter()
    result = run_campaign(**options)
    record = result.to_dict()
    record["failures"] = failure_sample(record["failures"])
    record["wall_seconds"] = round(time.perf_counter() - t0, 2)
    _log(out_dir, {"type": "campaign", **(tags or {}), **record})
    return result, record


def _row(args, rows, section: str, label: str, **options) -> None:
    """One campaign as one table row; an error or the spent budget is printed, never raised."""
    where = f"{section} {label} W={options.get('world_size')} {options.get('kernel')} {options.get('protocol')}"
    if time.perf_counter() - args.started > args.budget_seconds:
        print(f"{where}: skipped (--budget-seconds={args.budget_seconds:g} spent)", flush=True)
        return
    if args.dry_run:  # the same options on the CPU: one interpreted iteration, a small poll budget
        options = dict(options, interpret=True, iterations=1, seconds=None, max_polls=8)
    try:
        result, record = _campaign(args.out, {"section": section, "label": label}, **options)
    except Exception as error:  # keep going: one broken run must not hide the rest
        print(f"{where}: ERROR {type(error).__name__}: {error}", flush=True)
        _log(args.out, {"type": "error", "section": section, "label": label, "options": options,
                        "error": traceback.format_exc()})
        args.failed.append(where)
        return
    rows.append((section, label, record))
    print(f"{where}: {result.iterations} it in {result.seconds:.1f} s (+{result.compile_seconds:.1f} s "
          f"compile), bad {result.bad_iterations}, {result.counts}, ttf {result.time_to_first_failure}",
          flush=True)


def _random_delays(args, **overrides) -> dict:
    return dict(dict(delays="random", seed=args.seed, delay_pct=args.delay_pct,
                     delay_max_ns=args.delay_max_ns), **overrides)


def section_env(args, rows):
    import torch
    import triton

    p = torch.cuda.get_device_properties(0)
    line = (f"torch {torch.__version__} triton {triton.__version__} {p.name} sms={p.multi_processor_count} "
            f"gpus={torch.cuda.device_count()}")
    print(line, flush=True)
    _log(args.out, {"type": "env", "line": line})


def _all_reduce_alone(cfg, *, with_parts: bool = False, **launch_options):
    """The all-reduce kernel alone on virtual ranks, with epoch-flag (no reset needed between
    launches): a ``launch()`` to time, its status rows, and the inputs."""
    import torch

    from syncverify.kernels.build import build
    from syncverify.kernels.gemm_all_reduce import launch_all_reduce
    from syncverify.kernels.heap import VirtualHeap
    from syncverify.protocols import load_protocol
    from syncverify.stress.inputs import make_inputs

    W = cfg.world_size
    built = build(load_protocol("epoch-flag"), cfg)
    heap = VirtualHeap(W, "cuda")
    heap.allocate("partial", (cfg.m, cfg.n), torch.bfloat16)
    heap.allocate("out", (cfg.m, cfg.n), torch.bfloat16)
    heap.allocate("locks", (1, cfg.tiles), torch.int32)
    status = torch.zeros(W, 2 * cfg.tiles, 4, dtype=torch.int32, device="cuda")
    inputs = make_inputs(cfg, parity=0, generator=torch.Generator("cuda").manual_seed(0), device="cuda")
    epoch = [0]

    def launch():
        launch_all_reduce(built, heap, inputs.A, inputs.B, status, epoch=epoch[0], max_polls=1 << 16,
                          **launch_options)
        epoch[0] += 1

    if with_parts:
        return launch, status, inputs, built, heap
    return launch, status, inputs


#: The benchmark's (kernel, protocol) pairs: protocols the model calls safe in that kernel. (Until
#: 2026-12-01 all-scatter used barrier-release-xchg-cas-acquire, which the model calls unsafe.)
BENCH_PAIRS: tuple[tuple[str, str], ...] = (("all-reduce", "barrier-fenced-release-acquire"),
                                            ("all-scatter", "barrier-fenced-release-acquire"))


def section_bench(args, rows):
    import torch
    import triton

    W, size = 2, 1024
    for kernel, protocol in BENCH_PAIRS:
        opts = dict(kernel=kernel, protocol=protocol, world_size=W, virtual_ranks=True,
                    m=size, n=size, k=size, dtype="bf16")
        _campaign(args.out, iterations=128, **opts)  # warm-up: compiles
        result, record = _campaign(args.out, iterations=args.bench_iterations, **opts)
        rows.append(("bench", "no-delays", record))
        print(f"bench {kernel} {protocol}: {result.iterations} it, {result.iterations_per_second:.0f} it/s, "
              f"clean={result.clean}", flush=True)
    # the kernel alone, and cuBLAS for the same GEMMs
    from syncverify.kernels.config import KernelConfig
    from syncverify.stress.campaign import campaign_options, default_programs

    gemm, comm = default_programs(campaign_options(world_size=W, virtual_ranks=True),
                                  torch.cuda.get_device_properties(0).multi_processor_count)
    cfg = KernelConfig(world_size=W, m=size, n=size, k=size, gemm_sms=gemm, comm_sms=comm)
    fused, status, inputs = _all_reduce_alone(cfg)
    t_fused = triton.testing.do_bench(fused, warmup=25, rep=200, return_mode="median")
    a = [inputs.A[r] for r in range(W)]
    b = [inputs.B[r] for r in range(W)]
    t_mm = triton.testing.do_bench(lambda: [torch.matmul(a[r], b[r]) for r in range(W)], warmup=25,
                                   rep=200, return_mode="median")
    hang = int(status[:, :, 0].sum().item())
    line = (f"kernel alone (all-reduce epoch-flag, {size}^3 bf16, W={W} virtual, {gemm}+{comm} programs/rank): {t_fused * 1e3:.1f} us; "
            f"cuBLAS for the {W} per-rank GEMMs: {t_mm * 1e3:.1f} us; hang flags {hang}")
    print(line, flush=True)
    _log(args.out, {"type": "kernel-time", "fused_us": t_fused * 1e3, "cublas_us": t_mm * 1e3,
                    "hang_flags": hang})


def section_delays(args, rows):
    """Kernel time with every delay site drawn at max_ns vs none: does a delay cost what it says?"""
    import triton

    from syncverify.kernels.config import KernelConfig

    W, size = 2, 1024
    for max_ns in (0, 2000, 8000):
        cfg = KernelConfig(world_size=W, m=size, n=size, k=size, delays=max_ns > 0)
        fused, status, _inputs = _all_reduce_alone(cfg, delay_pct=100 if max_ns else 0,
                                                   delay_max_ns=max(max_ns, 1), delay_seed=1)
        fused()
        t = triton.testing.do_bench(fused, warmup=10, rep=100, return_mode="median")
        hang = int(status[:, :, 0].sum().item())
        line = f"delays max_ns={max_ns} pct=100 (every site, every tile): kernel {t * 1e3:.1f} us, hang flags {hang}"
        print(line, flush=True)
        _log(args.out, {"type": "delay-cost", "max_ns": max_ns, "kernel_us": t * 1e3, "hang_flags": hang})


def section_table(args, rows):
    from syncverify.protocols import builtin_names

    for poison in args.poisons:
        for W, seconds in args.worlds:
            for kernel in ("all-reduce", "all-scatter"):
                for name in builtin_names():
                    _row(args, rows, "table", f"random,poison={poison}", kernel=kernel, protocol=name, world_size=W,
                         virtual_ranks=True, seconds=seconds, max_polls=args.max_polls, poison=poison,
                         **_random_delays(args))


def _needs_gpu(args, name: str) -> bool:
    if args.dry_run:
        print(f"{name}: skipped in a dry run (CUDA graphs and events need a GPU)", flush=True)
    return args.dry_run


def section_throughput(args, rows):
    """Validated iterations per second: CUDA-graph blocks against the eager path."""
    if _needs_gpu(args, "throughput"):
        return
    variants = (("graphs", dict(graphs=True)),
                ("eager", dict(graphs=False, chunk=64)),
                ("graphs,random-delays", dict(graphs=True, **_random_delays(args))))
    for kernel, protocol in BENCH_PAIRS:
        for label, variant in variants:
            iterations = args.throughput_iterations if variant["graphs"] else args.bench_iterations
            _row(args, rows, "throughput", label, kernel=kernel, protocol=protocol, world_size=2, virtual_ranks=True,
                 m=1024, n=1024, k=1024, dtype="bf16", iterations=iterations, **variant)


def _events_us(fn, repeats: int) -> float:
    """Device time of ``fn()`` per repeat (CUDA events around the calls), in microseconds."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / repeats


def section_kernel(args, rows):
    """Device times: a CUDA graph of ``n`` launches timed by CUDA events (no host in between)."""
    if _needs_gpu(args, "kernel"):
        return
    import torch

    from syncverify.kernels.build import runtime_values_tensor
    from syncverify.kernels.config import KernelConfig
    from syncverify.kernels.gemm_all_reduce import launch_all_reduce
    from syncverify.stress.campaign import campaign_options, default_programs

    W, size, n = 2, 1024, 200
    gemm, comm = default_programs(campaign_options(world_size=W, virtual_ranks=True),
                                  torch.cuda.get_device_properties(0).multi_processor_count)[:2]
    cfg = KernelConfig(world_size=W, m=size, n=size, k=size, gemm_sms=gemm, comm_sms=comm)
    _fused, status, inputs, built, heap = _all_reduce_alone(cfg, with_parts=True)
    ring = runtime_values_tensor(built, range(n), "cuda")
    epoch = [0]

    def launches():
        for j in range(n):
            launch_all_reduce(built, heap, inputs.A, inputs.B, status, max_polls=1 << 16, vals=ring[j])

    def refill():  # epoch-flag's counters grow: the next n launches wait for the next n epochs
        ring.copy_(runtime_values_tensor(built, range(epoch[0], epoch[0] + n), "cuda"))
        epoch[0] += n

    refill()
    launches()  # compiles, warms up
    torch.cuda.synchronize()
    refill()
    eager = _events_us(launches, n)  # host-bound: the launch path between kernels
    graph = torch.cuda.CUDAGraph()  # captured, not run: the epochs advance only at the refills below
    with torch.cuda.graph(graph):
        launches()
    times = []
    for _ in range(5):
        refill()
        times.append(_events_us(graph.replay, n))
    hang = int(status[:, :, 0].sum().item())
    a = [inputs.A[r] for r in range(W)]
    b = [inputs.B[r] for r in range(W)]
    mm = torch.cuda.CUDAGraph()
    [torch.matmul(a[r], b[r]) for r in range(W)]
    torch.cuda.synchronize()
    with torch.cuda.graph(mm):
        for _ in range(n):
            [torch.matmul(a[r], b[r]) for r in range(W)]
    cublas = sorted(_events_us(mm.replay, n) for _ in range(5))
    record = {"type": "kernel-time", "fused_graph_us": sorted(times), "fused_eager_events_us": eager,
              "cublas_graph_us": cublas, "launches": n, "programs": [gemm, comm], "hang_flags": hang}
    _log(args.out, record)
    print(f"kernel (device, CUDA events over a graph of {n} launches): fused all-reduce epoch-flag {size}^3 bf16 W={W} "
          f"virtual {gemm}+{comm} programs/rank: median {sorted(times)[2]:.1f} us (runs {[round(t, 1) for t in sorted(times)]}); "
          f"the same launched eagerly, events around {n} launches: {eager:.1f} us per launch; cuBLAS for the {W} "
          f"per-rank GEMMs in a graph: median {cublas[2]:.1f} us; hang flags {hang}", flush=True)


def section_profile(args, rows):
    """Where a stress iteration's time goes, 1024^3 bf16, W=2 virtual ranks, both kernels: the
    profiler's device time per kernel over one CUDA-graph block, with no delays and with random
    delays; the host phases of a whole graph campaign and of an eager one (with the host
    functions that cost most, ``cProfile``); and which line of an input redraw synchronizes."""
    if _needs_gpu(args, "profile"):
        return
    for kernel, protocol in BENCH_PAIRS:
        for label, delays in (("no delays", {}), ("random delays", _random_delays(args))):
            _profile_block(args, kernel, protocol, label, **delays)
        phases = campaign_phases(kernel=kernel, protocol=protocol, world_size=2, virtual_ranks=True, m=1024,
                                 n=1024, k=1024, dtype="bf16", iterations=args.throughput_iterations)
        print(f"phases {kernel} {protocol} graphs: {phases_line(phases)}", flush=True)
        _log(args.out, {"type": "phases", "kernel": kernel, "protocol": protocol, "graphs": True, **phases})
        _eager_host_profile(args, kernel, protocol)
    _redraw_syncs()


def _bench_runner(kernel: str, protocol: str, **options):
    """A graph :class:`~syncverify.stress.runner.Runner` for the benchmark's size, compiled and
    with both block graphs captured, and its options."""
    import torch

    from syncverify.kernels.build import build
    from syncverify.kernels.heap import VirtualHeap
    from syncverify.stress.campaign import _reset_policy, campaign_options, delay_config, kernel_config, load
    from syncverify.stress.runner import Runner

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    o = campaign_options(sms=sms, kernel=kernel, protocol=protocol, world_size=2, virtual_ranks=True,
                         m=1024, n=1024, k=1024, dtype="bf16", **options)
    p = load(protocol)
    built = build(p, kernel_config(o), push=load(o.push))
    runner = Runner(built, VirtualHeap(2, "cuda:0"), device="cuda:0", delays=delay_config(o),
                    reset=_reset_policy(o, p), poison=o.poison, max_polls=o.max_polls, seed=o.seed,
                    chunk=o.chunk, push_reset=load(o.push).reset, graphs=True)
    runner.compile()
    return runner, o


def _profile_block(args, kernel: str, protocol: str, label: str, **options) -> None:
    """Device time per iteration of one graph block (CUDA events) and per kernel (profiler)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    runner, o = _bench_runner(kernel, protocol, **options)
    for start in range(4):
        runner.run_block(start * o.chunk)
        runner.drain(keep=1)
    runner.drain()
    t0 = time.perf_counter()
    runner._begin_block(4 * o.chunk)  # block 4 is ring half 0: runner.graph's
    torch.cuda.synchronize()
    host_begin = time.perf_counter() - t0
    replay_us = _events_us(runner.graph.replay, o.chunk)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        runner.run_block(5 * o.chunk)
        runner.drain()
    averages = prof.key_averages()
    key = "self_device_time_total" if hasattr(averages[0], "self_device_time_total") else "self_cuda_time_total"
    table = averages.table(sort_by=key, row_limit=8, max_name_column_width=60)
    print(f"profile {kernel} {protocol} {label}: graph replay {replay_us:.1f} us of device time per iteration "
          f"(CUDA events over one block of {o.chunk}); host work before a block {host_begin * 1e3:.1f} ms\n{table}",
          flush=True)
    _log(args.out, {"type": "profile", "kernel": kernel, "protocol": protocol, "label": label,
                    "replay_us_per_iteration": replay_us, "host_begin_ms": host_begin * 1e3, "table": table})


def _eager_host_profile(args, kernel: str, protocol: str) -> None:
    """The eager path (one host launch sequence per iteration): its phases, and the host
    functions with the most time of their own (``cProfile``)."""
    import cProfile
    import io
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    phases = campaign_phases(kernel=kernel, protocol=protocol, world_size=2, virtual_ranks=True, m=1024, n=1024,
                             k=1024, dtype="bf16", iterations=max(args.bench_iterations // 4, 64), graphs=False,
                             chunk=64)
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(14)
    top = "\n".join(line[:160] for line in text.getvalue().splitlines() if line.strip())
    print(f"phases {kernel} {protocol} eager: {phases_line(phases)}\n{top}", flush=True)
    _log(args.out, {"type": "phases", "kernel": kernel, "protocol": protocol, "graphs": False, **phases,
                    "cprofile": top})


def _redraw_syncs() -> None:
    """The first operation of an input redraw that synchronizes with the GPU (torch's sync debug
    mode raises there), or that none does."""
    import traceback

    import torch

    from syncverify.kernels.config import KernelConfig
    from syncverify.stress.inputs import make_inputs

    config = KernelConfig(world_size=2, m=1024, n=1024, k=1024)
    generator = torch.Generator("cuda").manual_seed(0)
    make_inputs(config, parity=0, generator=generator, device="cuda")  # warm
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        make_inputs(config, parity=0, generator=generator, device="cuda")
        line = "redraw: no synchronizing operation"
    except RuntimeError:
        frames = [f for f in traceback.extract_tb(sys.exc_info()[2]) if "syncverify" in f.filename
                  or "stress" in f.filename]
        line = "redraw synchronizes at: " + " <- ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} {f.line}"
                                                        for f in reversed(frames[-2:]))
    finally:
        torch.cuda.set_sync_debug_mode(0)
    print(line, flush=True)


#: The :class:`syncverify.stress.runner.Runner` methods (and module functions it calls) whose host
#: time :func:`campaign_phases` adds up. Inclusive: ``run_block`` includes ``begin_block``,
#: ``eager`` (one iteration queued launch by launch) includes it at a block's slot 0, ``drain``
#: includes the wait for the GPU to finish the block, ``compile`` the captures (not timed).
PHASES: tuple[tuple[str, str], ...] = (("Runner._begin_block", "begin_block"), ("make_inputs", "redraw"),
                                       ("runtime_values_tensor", "operands"), ("Runner.iteration", "eager"),
                                       ("Runner.run_block", "run_block"), ("Runner.drain", "drain"),
                                       ("Runner.compile", "compile"), ("Runner._capture", "capture"))


def campaign_phases(**options) -> dict:
    """Host seconds per phase of one campaign (:data:`PHASES`), with ``seconds`` and
    ``iterations`` from the campaign's result.

    The host clock is right here: these are host phases (queueing work, waiting in ``drain``),
    not kernel times, which the profiler above gives."""
    from syncverify.stress import runner as runner_module
    from syncverify.stress.campaign import run_campaign

    totals: Counter = Counter()
    calls: Counter = Counter()
    originals = {}

    def timed(owner, attribute, name):
        original = getattr(owner, attribute)
        originals[(owner, attribute)] = original

        def wrapper(*a, **kw):
            t0 = time.perf_counter()
            try:
                return original(*a, **kw)
            finally:
                totals[name] += time.perf_counter() - t0
                calls[name] += 1
        setattr(owner, attribute, wrapper)

    for path, name in PHASES:
        owner_name, _, attribute = path.rpartition(".")
        owner = getattr(runner_module, owner_name) if owner_name else runner_module
        timed(owner, attribute or path, name)
    try:
        result = run_campaign(**options)
    finally:
        for (owner, attribute), original in originals.items():
            setattr(owner, attribute, original)
    return {"iterations": result.iterations, "seconds": round(result.seconds, 4),
            "compile_seconds": result.compile_seconds, "graphs": result.graphs,
            "phase_seconds": {k: round(v, 4) for k, v in sorted(totals.items())}, "phase_calls": dict(calls)}


def phases_line(phases: dict) -> str:
    """One line: iterations, seconds, and each phase's host seconds and calls."""
    parts = [f"{phases['iterations']} it in {phases['seconds']:.3f} s "
             f"({phases['iterations'] / max(phases['seconds'], 1e-9):.0f} it/s, graphs={phases['graphs']})"]
    parts += [f"{k} {v * 1e3:.1f} ms/{phases['phase_calls'][k]}" for k, v in phases["phase_seconds"].items()]
    return "; ".join(parts)


def section_guided(args, rows):
    """The guided table: every pair, model verdict, guided and random time to first failure."""
    from syncverify.verdicts.check import check_protocol
    from syncverify.protocols import builtin_names
    from syncverify.stress.controls import positive_control
    from syncverify.stress.guided import guided_plan, run_guided
    from syncverify.stress.replay import replay

    for W, seconds in args.worlds:
        for kernel in args.kernels:
            for name in [n for n in builtin_names() if not args.protocols or n in args.protocols]:
                where = f"guided W={W} {kernel} {name}"
                if time.perf_counter() - args.started > args.budget_seconds:
                    print(f"{where}: skipped (--budget-seconds={args.budget_seconds:g} spent)", flush=True)
                    continue
                try:
                    common = dict(kernel=kernel, world_size=W, virtual_ranks=True, seed=args.seed,
                                  delay_pct=args.delay_pct, delay_max_ns=args.delay_max_ns, max_polls=args.max_polls)
                    if args.dry_run:  # once through the interpreter: one block per run
                        common.update(interpret=True, max_polls=8, virtual_ranks=False)
                        seconds = 0.01
                    model = check_protocol(name, scenario=kernel, world_size=W, timeout=120)
                    control = None
                    if model.safe:
                        control = positive_control(name, kernel=kernel, world_size=W)
                        plan = guided_plan(control.protocol, kernel=kernel, world_size=W)
                        plan.protocol = name
                        report = run_guided(name, plan=plan, seconds=min(seconds, args.control_seconds),
                                            compare_random=False, **common)
                        sibling = run_guided(control.protocol, plan=plan, seconds=min(seconds, args.control_seconds),
                                             compare_random=False, **common)
                        record = {"control": control.protocol.name, "control_change": control.change,
                                  "control_rows": sibling["rows"]}
                    else:
                        plan = guided_plan(name, kernel=kernel, world_size=W)
                        report = run_guided(name, plan=plan, seconds=seconds, compare_random=args.guided_random,
                                            **common)
                        record = {}
                    if (args.ablation and model.safe is False
                            and not any(r["guided_reproduced"] for r in report["rows"])):
                        record["ablation"] = _ablation(name, plan, seconds=min(seconds, args.control_seconds),
                                                       **common)
                    first = next((r for r in report["guided"] if r.first_failure), None)
                    if first is not None and args.replay_times and model.safe is False and W <= args.replay_max_world:
                        f = first.first_failure
                        again = replay(first.options, iteration=f["iteration"], rank=f["rank"], tile=f["tile"],
                                       kind=f["kind"], times=1 if args.dry_run else args.replay_times)
                        record["replay"] = again.to_dict()
                    record.update({"type": "guided", "kernel": kernel, "protocol": name, "world_size": W,
                                   "model_safe": model.safe, "model_violations": list(model.violations),
                                   "plan": plan.to_dict(), "rows": report["rows"],
                                   "guided_iterations": [r.iterations for r in report["guided"]],
                                   "guided_seconds": [round(r.seconds, 3) for r in report["guided"]],
                                   "compile_seconds": [r.compile_seconds for r in report["guided"]]})
                    _log(args.out, record)
                    rows.append(("guided", "", record))
                    print(f"{where}: {_guided_line(record)}", flush=True)
                except Exception as error:  # keep going: one broken pair must not hide the rest
                    print(f"{where}: ERROR {type(error).__name__}: {error}", flush=True)
                    _log(args.out, {"type": "error", "section": "guided", "where": where,
                                    "error": traceback.format_exc()})
                    args.failed.append(where)


def _ablation(name, plan, *, seconds: float, **common) -> dict:
    """A pair the guided schedules did not break: the same protocol with its CTA barrier taken
    away (one instruction, ``bar.sync``), under the schedules of its own counterexamples. If that
    fails at once, the delays reach the code and the barrier is what orders the stores on this
    GPU (``plan``: the pair's own schedules, for the record)."""
    from syncverify.protocols import load_protocol
    from syncverify.stress.controls import sibling_candidates
    from syncverify.stress.guided import run_guided

    change, sibling = next(((c, p) for c, p in sibling_candidates(load_protocol(name)) if "barrier" in c),
                           (None, None))
    if sibling is None:
        return {"change": None}
    report = run_guided(sibling, seconds=seconds, compare_random=False, **common)
    return {"change": change, "protocol": sibling.name, "rows": report["rows"], "plan": report["plan"].to_dict(),
            "iterations": [r.iterations for r in report["guided"]], "counts": [r.counts for r in report["guided"]]}


def _guided_line(record: dict) -> str:
    """One compact line of a guided record."""
    def ttf(row, prefix):
        if not row.get(f"{prefix}_reproduced"):
            return f"no ({row.get(f'{prefix}_iterations')} it)" if f"{prefix}_reproduced" in row else "-"
        return f"it {row[f'{prefix}_first_failure_iteration']} {row[f'{prefix}_ttf_s']}s"

    verdict = {True: "safe", False: "unsafe", None: "unknown"}[record["model_safe"]]
    parts = [f"model {verdict}"]
    for row in record["rows"]:
        parts.append(f"{row['kind']}[{'realizable' if row['realizable'] else 'unforceable'}] guided {ttf(row, 'guided')} "
                     f"random {ttf(row, 'random')}")
    if "control_rows" in record:
        parts.append(f"control {record['control']}: " + ", ".join(
            f"{row['kind']} {ttf(row, 'guided')}" for row in record["control_rows"]))
    if "replay" in record:
        parts.append(record["replay"]["summary"])
    if record.get("ablation", {}).get("rows"):
        a = record["ablation"]
        parts.append(f"ablation {a['change']}: " + ", ".join(f"{row['kind']} {ttf(row, 'guided')}" for row in a["rows"]))
    return "; ".join(parts)


#: (label, options) of the ``overwrite`` section: xchg-flag in the all-reduce kernel. The
#: overwrite needs two or more ranks signalling one flag (W >= 3) and a consumer that polls
#: between the first and the last of them: late producers, not late consumers. The
#: ``local-path`` runs look for the model's W = 2 counterexample (the weak .wt flag / .cv poll
#: pair letting the owner read its own partial unwritten); ``reset-none`` leaves flags set.
OVERWRITE_RUNS: tuple[tuple[str, dict], ...] = (
    ("no-delays", dict(world_size=4, delays="none")),
    ("producers-late", dict(world_size=4, delay_sites="before-store,store-signal")),
    ("consumers-late", dict(world_size=4, delay_sites="before-wait,wait-read")),
    ("producers-late", dict(world_size=8, delay_sites="before-store,store-signal")),
    ("owner-only", dict(world_size=4, production="owner-only")),
    ("local-path,before-store@100%", dict(world_size=2, delay_sites="before-store", delay_pct=100,
                                          seconds=15.0)),
    ("reset-none", dict(world_size=2, reset="none")),
    ("reset-none", dict(world_size=4, reset="none")),
    ("scatter,local-path,before-store@100%", dict(kernel="all-scatter", world_size=2,
                                                  delay_sites="before-store", delay_pct=100,
                                                  seconds=15.0)),
    ("scatter,reset-none", dict(kernel="all-scatter", world_size=2, reset="none")),
)


def section_overwrite(args, rows):
    for label, options in OVERWRITE_RUNS:
        options = dict(dict(kernel="all-reduce", protocol="xchg-flag", virtual_ranks=True,
                            seconds=args.seconds, max_polls=args.max_polls),
                       **_random_delays(args, **options))
        if options["delays"] == "none":
            for key in ("delay_pct", "delay_max_ns", "delay_sites"):
                options.pop(key, None)
        _row(args, rows, "overwrite", label, **options)


#: Protocols that rely on the host clearing their locks between launches.
RACING_PROTOCOLS: tuple[str, ...] = ("xchg-flag", "barrier-release-xchg-cas-acquire",
                                     "barrier-fenced-release-acquire")
#: (label, options): the reset policy, and the delays (``before-reset`` is the side stream's sleep
#: before the clear; it applies to ``host-racing`` only).
RACING_VARIANTS: tuple[tuple[str, dict], ...] = (
    ("between,no-delays", dict(reset="host-between-barriers", delays="none")),
    ("between,all-sites", dict(reset="host-between-barriers")),
    ("racing,no-delays", dict(reset="host-racing", delays="none")),
    ("racing,before-reset<100us", dict(reset="host-racing", delay_sites="before-reset",
                                        delay_pct=100, delay_max_ns=100_000)),
    ("racing,before-reset<1ms", dict(reset="host-racing", delay_sites="before-reset",
                                      delay_pct=100, delay_max_ns=1_000_000)),
    ("racing,all-sites", dict(reset="host-racing")),
)


def section_racing(args, rows):
    for protocol in RACING_PROTOCOLS:
        for kernel in ("all-reduce", "all-scatter"):
            for label, variant in RACING_VARIANTS:
                options = _random_delays(args, **variant)
                if options["delays"] == "none":
                    options = dict(reset=variant["reset"], delays="none")
                _row(args, rows, "racing", label, kernel=kernel, protocol=protocol, world_size=2,
                     virtual_ranks=True, seconds=args.racing_seconds, max_polls=args.max_polls,
                     **options)


def section_long(args, rows):
    for name in args.safe:
        for kernel in ("all-reduce", "all-scatter"):
            _row(args, rows, "long", "random", kernel=kernel, protocol=name, world_size=2,
                 virtual_ranks=True, iterations=args.long_iterations, seconds=args.long_seconds,
                 max_polls=args.max_polls, **_random_delays(args, seed=args.seed + 1))


def section_processes(args, rows):
    """Real ranks: one process per GPU, all campaigns in one launch (start-up and NCCL paid once).

    In order: the it/s benchmark of both kernels (no delays), ``--long-iterations`` of the first
    safe protocol in both kernels, every built-in in both kernels for ``--seconds`` with random
    delays, then the long runs of the other safe protocols. Each campaign is capped in time, so
    the launch is bounded; what reported before a stop is kept.
    """
    import torch

    from syncverify.protocols import builtin_names
    from syncverify.stress.campaign import campaign_options, load
    from syncverify.stress.campaign import run_processes_batch

    W = torch.cuda.device_count()
    if W < 2:
        print(f"processes: needs 2 or more GPUs, {W} visible; skipped", flush=True)
        return
    W = 2
    parts = set(args.processes_parts.split(","))
    plan: list[tuple[str, str, dict]] = []
    for kernel, protocol in () if "bench" not in parts else BENCH_PAIRS:
        plan.append(("bench", "no-delays", dict(kernel=kernel, protocol=protocol, iterations=args.bench_iterations)))

    def long(name):
        return [("long", "random", dict(kernel=k, protocol=name, iterations=args.long_iterations,
                                        seconds=args.long_seconds, **_random_delays(args, seed=args.seed + 1)))
                for k in ("all-reduce", "all-scatter")]

    plan += long(args.safe[0]) if args.safe and "long" in parts else []
    plan += [("table", "random", dict(kernel=k, protocol=name, seconds=args.seconds, **_random_delays(args)))
             for k in ("all-reduce", "all-scatter") for name in builtin_names() if "table" in parts]
    for name in args.safe[1:] if "long" in parts else ():
        plan += long(name)
    campaigns = []
    for _section, _label, options in plan:
        o = campaign_options(world_size=W, virtual_ranks=False, m=1024, n=1024, k=1024, dtype="bf16",
                             max_polls=args.max_polls, watchdog_seconds=240, **options)
        campaigns.append((o, load(options["protocol"])))
    if args.dry_run:
        print(f"processes: {len(campaigns)} campaigns planned (dry run: not launched)", flush=True)
        return

    def reported(index, payload):
        section, label, _o = plan[index]
        record = dict(payload, failures=failure_sample(payload.get("failures", [])))
        _log(args.out, {"type": "campaign", "section": f"processes-{section}", "label": label, **record})
        print(f"processes {section} {label} {payload['kernel']} {payload['protocol']}: {payload['iterations']} it "
              f"in {payload['seconds']:.1f} s, {payload['iterations_per_second']:.0f} it/s, bad "
              f"{payload['bad_iterations']}, {payload['counts']}", flush=True)

    results = run_processes_batch(campaigns, on_result=reported)
    for (section, label, _o), result in zip(plan, results):
        rows.append((f"x{W}-{section}", label, result.to_dict()))
        if result.stopped:
            print(f"processes {section} {label} {result.kernel} {result.protocol}: stopped: {result.stopped}", flush=True)


SECTIONS = {"env": section_env, "processes": section_processes, "bench": section_bench, "delays": section_delays,
            "overwrite": section_overwrite, "racing": section_racing, "table": section_table,
            "long": section_long, "throughput": section_throughput, "kernel": section_kernel,
            "guided": section_guided, "profile": section_profile}


def _table(rows) -> str:
    head = (f"{'section':9} {'label':36} {'kernel':11} {'protocol':32} {'W':>1} {'iters':>7} {'bad':>6} "
            f"{'unwr':>6} {'stale':>5} {'miss':>6} {'corr':>5} {'hang':>6} {'ttf_s':>7} {'it/s':>6}")
    lines = [head]
    for section, label, r in rows:
        if section == "guided":
            lines.append(f"guided W={r['world_size']} {r['kernel']:11} {r['protocol']:32} {_guided_line(r)}")
            continue
        c = r["counts"]
        ttf = "-" if r["time_to_first_failure"] is None else f"{r['time_to_first_failure']:.3f}"
        lines.append(f"{section:9} {label:36} {r['kernel']:11} {r['protocol']:32} {r['world_size']:>1} "
                     f"{r['iterations']:>7} {r['bad_iterations']:>6} {c['unwritten']:>6} {c['stale']:>5} "
                     f"{c['missing-ranks']:>6} {c['corrupt']:>5} {c['hang']:>6} {ttf:>7} "
                     f"{r['iterations_per_second']:>6.0f}")
    return "\n".join(lines)


def _worlds(text: str, seconds: float) -> list[tuple[int, float]]:
    """``"4:6,2:3"`` (or ``"2,4"``, every world ``seconds``) as ``[(4, 6.0), (2, 3.0)]``."""
    out = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        world, _, run = item.partition(":")
        out.append((int(world), float(run) if run else seconds))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "out"))
    parser.add_argument("--sections", default="env,bench,delays,table")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--worlds", default="2,4", help="world sizes of the table: W or W:seconds, comma-separated")
    parser.add_argument("--bench-iterations", type=int, default=4096)
    parser.add_argument("--long-iterations", type=int, default=100_000)
    parser.add_argument("--long-seconds", type=float, default=110.0, help="cap per long run")
    parser.add_argument("--safe", default="barrier-fenced-release-acquire,epoch-flag")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--delay-pct", type=int, default=50)
    parser.add_argument("--delay-max-ns", type=int, default=4000)
    parser.add_argument("--max-polls", type=int, default=None,
                        help="poll budget per consumer (default: the campaign's, 65536 virtual, 4194304 real ranks)")
    parser.add_argument("--processes-parts", default="bench,long,table",
                        help="what the processes section runs: bench, long, table")
    parser.add_argument("--racing-seconds", type=float, default=1.5, help="per racing run")
    parser.add_argument("--budget-seconds", type=float, default=float("inf"),
                        help="start no campaign after this many seconds")
    parser.add_argument("--protocols", default="", help="guided: only these built-ins (comma-separated; default all)")
    parser.add_argument("--kernels", default="all-reduce,all-scatter", help="guided: the kernels")
    parser.add_argument("--no-guided-random", dest="guided_random", action="store_false",
                        help="guided: skip the random-delay run next to each schedule")
    parser.add_argument("--no-ablation", dest="ablation", action="store_false",
                        help="guided: skip the CTA-barrier ablation of pairs the schedules do not break")
    parser.add_argument("--poisons", default="all", help="table: poison modes, comma-separated (all, outputs, previous)")
    parser.add_argument("--throughput-iterations", type=int, default=20480, help="throughput: iterations per graph run")
    parser.add_argument("--control-seconds", type=float, default=2.0, help="guided: budget of a safe pair and its control")
    parser.add_argument("--replay-times", type=int, default=10, help="guided: replays of each first failure (0: none)")
    parser.add_argument("--replay-max-world", type=int, default=2, help="guided: replay only at world sizes up to this")
    parser.add_argument("--dry-run", action="store_true",
                        help="run every campaign of the sections once in the CPU interpreter (check the options)")
    args = parser.parse_args(argv)
    args.started = time.perf_counter()  # --budget-seconds counts from here
    args.safe = [s for s in args.safe.split(",") if s]
    args.worlds = _worlds(args.worlds, args.seconds)
    args.poisons = [p for p in args.poisons.split(",") if p]
    args.protocols = [p for p in args.protocols.split(",") if p]
    args.kernels = [k for k in args.kernels.split(",") if k]
    args.failed = []  # sections (or guided pairs) that raised: the exit status says so
    unknown = [name for name in args.sections.split(",") if name not in SECTIONS]
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}; known: {', '.join(SECTIONS)}")
    os.makedirs(args.out, exist_ok=True)
    rows: list = []
    for name in args.sections.split(","):
        t0 = time.perf_counter()
        try:
            SECTIONS[name](args, rows)
        except Exception:
            print(f"section {name} FAILED:\n{traceback.format_exc()}", flush=True)
            args.failed.append(f"section {name}")
        print(f"[section {name}: {time.perf_counter() - t0:.1f} s]", flush=True)
    print(_table(rows), flush=True)
    if args.failed:
        print(f"FAILED: {', '.join(args.failed)} (exit 1)", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
