"""The GPU session script: check, time and stress in one call; a compact table last.

    PYTHONUNBUFFERED=1 python -m stress.bench --out $OUT [--seconds 3] [--sections all]

Sections (each one guarded: a failure is printed and the next section runs):

* ``env``: versions, GPU, SMs;
* ``bench``: validated iterations per second (every iteration poisoned, launched, validated on
  the GPU, synchronized every 64) at 1024x1024x1024 bf16, W=2 virtual ranks, no delays, for both
  kernels with a protocol the model calls safe; plus the fused kernel alone (``do_bench``) and
  cuBLAS for the same per-rank GEMMs, for scale;
* ``delays``: what the delays cost (kernel time with every site delayed vs none);
* ``table``: every built-in protocol x both kernels x W in (2, 4), virtual ranks, random delays,
  ``--seconds`` each: iterations, bad iterations, bad tiles per class, time to first failure;
* ``long``: ``--long-iterations`` iterations of each named safe protocol, both kernels, W=2.

Every campaign appends its result to ``OUT/bench.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback


def _log(out_dir, record):
    with open(os.path.join(out_dir, "bench.jsonl"), "a") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")


def _campaign(out_dir, **options):
    from stress.campaign import run_campaign

    t0 = time.perf_counter()
    result = run_campaign(**options)
    record = result.to_dict()
    record["failures"] = record["failures"][:5]
    record["wall_seconds"] = round(time.perf_counter() - t0, 2)
    _log(out_dir, {"type": "campaign", **record})
    return result, record


def section_env(args, rows):
    import torch
    import triton

    p = torch.cuda.get_device_properties(0)
    line = (f"torch {torch.__version__} triton {triton.__version__} {p.name} sms={p.multi_processor_count} "
            f"gpus={torch.cuda.device_count()}")
    print(line, flush=True)
    _log(args.out, {"type": "env", "line": line})


def section_bench(args, rows):
    import torch
    import triton

    W, size = 2, 1024
    for kernel, protocol in (("all-reduce", "barrier-fenced-release-acquire"),
                             ("all-scatter", "barrier-release-xchg-cas-acquire")):
        opts = dict(kernel=kernel, protocol=protocol, world_size=W, virtual_ranks=True,
                    m=size, n=size, k=size, dtype="bf16")
        _campaign(args.out, iterations=128, **opts)  # warm-up: compiles
        result, record = _campaign(args.out, iterations=args.bench_iterations, **opts)
        rows.append(("bench", kernel, protocol, W, "none", record))
        print(f"bench {kernel} {protocol}: {result.iterations} it, {result.iterations_per_second:.0f} it/s, "
              f"clean={result.clean}", flush=True)
    # the kernel alone, and cuBLAS for the same GEMMs
    from kernels.build import build
    from kernels.config import KernelConfig
    from kernels.heap import VirtualHeap
    from kernels.gemm_all_reduce import launch_all_reduce
    from protocols import load_protocol
    from stress.inputs import make_inputs

    from stress.campaign import campaign_options, default_programs

    gemm, comm = default_programs(campaign_options(world_size=W, virtual_ranks=True),
                                  torch.cuda.get_device_properties(0).multi_processor_count)
    cfg = KernelConfig(world_size=W, m=size, n=size, k=size, gemm_sms=gemm, comm_sms=comm)
    built = build(load_protocol("epoch-flag"), cfg)  # no reset needed between timed launches
    heap = VirtualHeap(W, "cuda")
    heap.allocate("partial", (size, size), torch.bfloat16)
    heap.allocate("out", (size, size), torch.bfloat16)
    heap.allocate("locks", (1, cfg.tiles), torch.int32)
    status = torch.zeros(W, cfg.tiles + 1, 4, dtype=torch.int32, device="cuda")
    inputs = make_inputs(cfg, parity=0, generator=torch.Generator("cuda").manual_seed(0), device="cuda")
    epoch = [0]

    def fused():
        launch_all_reduce(built, heap, inputs.A, inputs.B, status, epoch=epoch[0], max_polls=1 << 16)
        epoch[0] += 1

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
    import torch
    import triton

    from kernels.build import build
    from kernels.config import KernelConfig
    from kernels.gemm_all_reduce import launch_all_reduce
    from kernels.heap import VirtualHeap
    from protocols import load_protocol
    from stress.inputs import make_inputs

    W, size = 2, 1024
    for max_ns in (0, 2000, 8000):
        cfg = KernelConfig(world_size=W, m=size, n=size, k=size, delays=max_ns > 0)
        built = build(load_protocol("epoch-flag"), cfg)
        heap = VirtualHeap(W, "cuda")
        heap.allocate("partial", (size, size), torch.bfloat16)
        heap.allocate("out", (size, size), torch.bfloat16)
        heap.allocate("locks", (1, cfg.tiles), torch.int32)
        status = torch.zeros(W, cfg.tiles + 1, 4, dtype=torch.int32, device="cuda")
        inputs = make_inputs(cfg, parity=0, generator=torch.Generator("cuda").manual_seed(0), device="cuda")
        epoch = [0]

        def fused():
            launch_all_reduce(built, heap, inputs.A, inputs.B, status, epoch=epoch[0],
                              max_polls=1 << 16, delay_pct=100 if max_ns else 0,
                              delay_max_ns=max(max_ns, 1), delay_seed=1)
            epoch[0] += 1

        fused()
        t = triton.testing.do_bench(fused, warmup=10, rep=100, return_mode="median")
        hang = int(status[:, :, 0].sum().item())
        line = f"delays max_ns={max_ns} pct=100 (every site, every tile): kernel {t * 1e3:.1f} us, hang flags {hang}"
        print(line, flush=True)
        _log(args.out, {"type": "delay-cost", "max_ns": max_ns, "kernel_us": t * 1e3, "hang_flags": hang})


def section_table(args, rows):
    from protocols import builtin_names

    for W in args.worlds:
        for kernel in ("all-reduce", "all-scatter"):
            for name in builtin_names():
                opts = dict(kernel=kernel, protocol=name, world_size=W, virtual_ranks=True,
                            seconds=args.seconds, delays="random", seed=args.seed,
                            delay_pct=args.delay_pct, delay_max_ns=args.delay_max_ns,
                            max_polls=args.max_polls)
                try:
                    result, record = _campaign(args.out, **opts)
                    rows.append(("table", kernel, name, W, "random", record))
                    c = result.counts
                    print(f"table W={W} {kernel} {name}: {result.iterations} it, bad {result.bad_iterations}, "
                          f"{c}, ttf {result.time_to_first_failure}", flush=True)
                except Exception as error:  # keep going: one broken run must not hide the rest
                    print(f"table W={W} {kernel} {name}: ERROR {type(error).__name__}: {error}", flush=True)
                    _log(args.out, {"type": "error", "options": opts, "error": traceback.format_exc()})


def section_long(args, rows):
    for name in args.safe:
        for kernel in ("all-reduce", "all-scatter"):
            opts = dict(kernel=kernel, protocol=name, world_size=2, virtual_ranks=True,
                        iterations=args.long_iterations, seconds=args.long_seconds,
                        delays="random", seed=args.seed + 1,
                        delay_pct=args.delay_pct, delay_max_ns=args.delay_max_ns,
                        max_polls=args.max_polls)
            try:
                result, record = _campaign(args.out, **opts)
                rows.append(("long", kernel, name, 2, "random", record))
                print(f"long {kernel} {name}: {result.iterations} it, bad {result.bad_iterations}, "
                      f"{result.iterations_per_second:.0f} it/s", flush=True)
            except Exception as error:
                print(f"long {kernel} {name}: ERROR {type(error).__name__}: {error}", flush=True)
                _log(args.out, {"type": "error", "options": opts, "error": traceback.format_exc()})


SECTIONS = {"env": section_env, "bench": section_bench, "delays": section_delays,
            "table": section_table, "long": section_long}


def _table(rows) -> str:
    head = f"{'what':5} {'kernel':11} {'protocol':33} {'W':>1} {'iters':>7} {'bad':>6} {'unwr':>5} {'stale':>5} {'miss':>5} {'corr':>5} {'hang':>5} {'ttf_s':>7} {'it/s':>6}"
    lines = [head]
    for what, kernel, name, W, _, r in rows:
        c = r["counts"]
        ttf = "-" if r["time_to_first_failure"] is None else f"{r['time_to_first_failure']:.3f}"
        lines.append(f"{what:5} {kernel:11} {name:33} {W:>1} {r['iterations']:>7} {r['bad_iterations']:>6} "
                     f"{c['unwritten']:>5} {c['stale']:>5} {c['missing-ranks']:>5} {c['corrupt']:>5} "
                     f"{c['hang']:>5} {ttf:>7} {r['iterations_per_second']:>6.0f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "out"))
    parser.add_argument("--sections", default="env,bench,delays,table")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--worlds", default="2,4", help="world sizes of the table")
    parser.add_argument("--bench-iterations", type=int, default=4096)
    parser.add_argument("--long-iterations", type=int, default=100_000)
    parser.add_argument("--long-seconds", type=float, default=110.0, help="cap per long run")
    parser.add_argument("--safe", default="barrier-fenced-release-acquire,epoch-flag")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--delay-pct", type=int, default=50)
    parser.add_argument("--delay-max-ns", type=int, default=4000)
    parser.add_argument("--max-polls", type=int, default=1 << 14)
    args = parser.parse_args(argv)
    args.safe = [s for s in args.safe.split(",") if s]
    args.worlds = [int(w) for w in args.worlds.split(",") if w]
    os.makedirs(args.out, exist_ok=True)
    rows: list = []
    for name in args.sections.split(","):
        t0 = time.perf_counter()
        try:
            SECTIONS[name](args, rows)
        except Exception:
            print(f"section {name} FAILED:\n{traceback.format_exc()}", flush=True)
        print(f"[section {name}: {time.perf_counter() - t0:.1f} s]", flush=True)
    print(_table(rows), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
