"""Issue 25 on one H200: can the three latent buggy examples' witness happen on the hardware?

Their witness: a producer stores a tile, reaches a CTA barrier, then stores a weak flag; the
consumer sees the flag and reads the tile as it was before the store. No delay of the producer
reorders that (the barrier waits for the store). This script measures two ways the hardware could
still serve the old tile, and then runs the shipped harnesses under the planner's guided schedules:

**Part A, the mechanism** (plain Triton kernels shaped like the examples, ``P`` producer/consumer
CTA pairs per launch, 4 warps, a 64 x 64 int32 tile, iteration ``it`` stores ``it``; a consumer
counts the elements it read that are not ``it``):

* ``touch``: the consumer loads the tile before its poll (its value unused, kept by
  ``syncverify.kernels.user_delays.sv_keep``), so its SM's L1 holds the old line; the producer
  starts ``--late-ns`` late. Then, after the poll sees the flag, the read is served from L1 or not,
  depending on what comes between: nothing (``all_scatter::original``: a ``.cv`` volatile poll,
  then ``iris.put``'s plain load), an acquire CAS at sys scope whose result is used
  (``one_shot_all_reduce::original``/``barrier_without_fence``), an acquire fence, or the read
  itself ``.cv`` (void as a control: Triton 3.6 drops ``.cv`` on a non-volatile load, a plain
  ``ld.global`` in the PTX; docs/RESULTS.md 2026-12-02);
* ``noise``: no touch; a second kernel on another stream hammers L2 with atomics on other lines
  while the pairs run (can the data store reach L2 after the flag store when L2 is congested?).

**Part B, the harnesses** (``syncverify stress`` at 1024^3, two virtual ranks, as
``benchmarks/user_stress_gpu.py``): ``all_scatter::original`` under its guided schedule (a touch of
the tile before the wait, the producers late: ``syncverify.frontend.schedule``), at most 100
iterations; the same schedule on ``seed_fix`` (buggy) and on ``fix_with_barriers`` (fixed: must stay
clean); random delays on the two one-shot latent examples for comparison; and, for the one-shot
examples, whose consumer acquires after its poll, the plan says why none is aimed at.

**Part C**: ``--real-ranks`` at ``--world-size 1`` (one process, nccl, its watchdog) on a clean
test harness, 20 iterations, if the budget leaves time.

Raw results: ``$OUT/user_stress_latent_gpu.json``. A compact table is printed last. Run from the
repository root on the GPU machine (under 2 minutes: no step starts after ``--budget``, 100 s; what matters
most runs first, and every row is printed as it finishes)::

    export PYTHONPATH=$PWD PYTHONUNBUFFERED=1; python3 benchmarks/user_stress_latent_gpu.py

``--interpret`` runs Part B's rows for one iteration each in Triton's interpreter (a CPU check of
this script; Part A needs inline PTX and is skipped there).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import triton  # noqa: E402 -- a GPU script: Part A's kernels are defined at import
import triton.language as tl  # noqa: E402

from benchmarks.user_stress_gpu import summary  # noqa: E402 -- one summary of a run for both GPU scripts
from syncverify.frontend.real_ranks import run_real_ranks  # noqa: E402
from syncverify.frontend.schedule import GuidedEntry  # noqa: E402
from syncverify.frontend.user_stress import StressOptions, replay_first, run_stress  # noqa: E402
from syncverify.kernels.user_delays import KEEP, sv_keep, sv_spin  # noqa: E402

PLANS = ROOT / "benchmarks" / "user_stress_plans.json"
SCALE = {"SIZE": 1024, "BLOCK": 128, "BLOCK_K": 32, "PROGRAMS": 16}
SCATTER = "examples/all_scatter/harness.py"
ONE_SHOT = "examples/one_shot_all_reduce/harness.py"

#: Part A's variants: name -> (touch, producer late, what the consumer does between poll and read, noise)
#: ``between``: "none", "acquire-cas" (sys, result used), "acquire-fence" (fence.acq_rel.gpu), "cv-read"
VARIANTS = {
    "plain": (0, 0, "none", 0),
    "late": (0, 1, "none", 0),
    "touch": (1, 0, "none", 0),
    "touch+late": (1, 1, "none", 0),
    "touch+late, .cv read": (1, 1, "cv-read", 0),
    "touch+late, acquire CAS": (1, 1, "acquire-cas", 0),
    "touch+late, acquire fence": (1, 1, "acquire-fence", 0),
    "L2 noise": (0, 0, "none", 1),
    "L2 noise, acquire CAS": (0, 0, "acquire-cas", 1),
    "touch+late, L2 noise, acquire CAS": (1, 1, "acquire-cas", 1),
}
BETWEEN = {"none": 0, "acquire-cas": 1, "acquire-fence": 2, "cv-read": 3}


@triton.jit
def acquire_fence():
    return tl.inline_asm_elementwise("fence.acq_rel.gpu; mov.u32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False,
                                     pack=1)


@triton.jit
def globaltimer():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def pairs(data, flag, ready, out, ctl, it, late_ns, P, BM: tl.constexpr, BN: tl.constexpr, TOUCH: tl.constexpr,
          BETWEEN: tl.constexpr, FIXED: tl.constexpr = 0, FIRST: tl.constexpr = 0):
    """Producer ``pid < P``: the tile (``.wt``), a CTA barrier, a weak ``.wt`` flag (one thread; FIXED:
    a release ``atomic_xchg`` at sys scope, the fixed twin). Consumer ``P + i``: (touch), ``.cv``
    poll, (between), read, count what is not ``it``. ``FIRST``: the first program's role number (a
    launch of the consumers only, as a kernel of their own: ``FIRST=P``)."""
    pid = tl.program_id(0) + FIRST
    offs = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    if pid < P:
        sv_spin(globaltimer() + late_ns)
        tl.store(data + pid * BM * BN + offs, tl.full((BM, BN), 0, tl.int32) + it, cache_modifier=".wt")
        tl.debug_barrier()
        if FIXED:
            tl.atomic_xchg(flag + pid * 32, it, sem="release", scope="sys")
        else:
            tl.store(flag + pid * 32, it, cache_modifier=".wt")
    else:
        i = pid - P
        tile = data + i * BM * BN + offs
        if TOUCH:
            # as the rewrite does: behind a run-time test, so the touch does not dominate the read
            # (the compiler cannot merge the two loads)
            if tl.load(ctl + 1) == 0:
                sv_keep(tl.load(tile), ctl, False)
        polls = 0
        while (tl.load(flag + i * 32, cache_modifier=".cv", volatile=True) != it) & (polls < 1_000_000):
            polls += 1
        extra = 0
        if BETWEEN == 1:
            extra = tl.atomic_cas(ready + i * 32, 0, 0, sem="acquire", scope="sys") - 1  # ready is 1: 0
        if BETWEEN == 2:
            extra = acquire_fence()
        if BETWEEN == 3:
            d = tl.load(tile + extra, cache_modifier=".cv")
        else:
            d = tl.load(tile + extra)
        tl.store(out + i * 4, tl.sum((d != it).to(tl.int32)))
        tl.store(out + i * 4 + 1, tl.sum((d == it - 1).to(tl.int32)))
        tl.store(out + i * 4 + 2, polls)


@triton.jit
def noise(buf, n, until, BLOCK: tl.constexpr):
    """Relaxed atomics over ``buf`` (larger than L2) until ``%globaltimer`` passes ``until``."""
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    k = 0
    while globaltimer() < until:
        base = ((pid * 7919 + k * 104729) % (n // BLOCK)) * BLOCK
        tl.atomic_add(buf + base + offs, 1, sem="relaxed", scope="gpu")
        k += 1


@triton.jit
def read_clock(out):
    tl.store(out, globaltimer())


class PartA:
    """Part A's buffers and kernels on the GPU; :meth:`run` measures one variant."""

    def __init__(self, args) -> None:
        import torch

        self.torch, self.args = torch, args
        P, dev = args.pairs, "cuda"
        self.data = torch.zeros(P * 64 * 64, dtype=torch.int32, device=dev)
        self.flag = torch.zeros(P * 32, dtype=torch.int32, device=dev)
        self.ready = torch.ones(P * 32, dtype=torch.int32, device=dev)
        self.out = torch.zeros(P * 4, dtype=torch.int32, device=dev)
        self.ctl = torch.zeros(16, dtype=torch.int32, device=dev)
        assert KEEP.value < self.ctl.numel()
        self.clock = torch.zeros(1, dtype=torch.int64, device=dev)
        self.noise_buf = None
        self.side = torch.cuda.Stream()
        self.it = 0

    def run(self, name: str) -> dict:
        """``--launches`` launches of ``--pairs`` pairs of variant ``name``: stale tiles and elements."""
        torch, args, P = self.torch, self.args, self.args.pairs
        touch, late, between, with_noise = VARIANTS[name]
        if with_noise and self.noise_buf is None:
            self.noise_buf = torch.zeros(64 << 20, dtype=torch.int32, device="cuda")  # 256 MB: more than L2
        def issue() -> None:
            if with_noise:
                until = self.clock_now() + args.noise_ns
                with torch.cuda.stream(self.side):  # runs beside the pairs, stops at its own deadline
                    noise[(args.noise_ctas,)](self.noise_buf, self.noise_buf.numel(), until, BLOCK=1024, num_warps=4)
            pairs[(2 * P,)](self.data, self.flag, self.ready, self.out, self.ctl, self.it, args.late_ns if late else 0,
                            P, BM=64, BN=64, TOUCH=touch, BETWEEN=BETWEEN[between], num_warps=4)

        return {"variant": name, "touch": touch, "late_ns": args.late_ns if late else 0, "between": between,
                "noise": with_noise, **self.measure(issue, args.variant_seconds)}

    def clock_now(self) -> int:
        """The device's ``%globaltimer`` now (ns; the host waits for it)."""
        read_clock[(1,)](self.clock)
        return int(self.clock.item())

    def measure(self, issue, seconds: float) -> dict:
        """``--launches`` launches of ``issue()`` (a new ``self.it`` each), at most ``seconds``: what the
        consumers counted."""
        torch, P = self.torch, self.args.pairs
        t0 = time.monotonic()
        stale_tiles = stale_elems = old_elems = capped = launches = 0
        for _ in range(self.args.launches):
            if time.monotonic() - t0 > seconds:  # a bound: polls that time out are slow
                break
            self.it += 1
            launches += 1
            issue()
            torch.cuda.synchronize()
            o = self.out.view(P, 4).cpu()
            stale_tiles += int((o[:, 0] > 0).sum())
            stale_elems += int(o[:, 0].sum())
            old_elems += int(o[:, 1].sum())
            capped += int((o[:, 2] >= 1_000_000).sum())
        return {"pairs": P * launches, "stale_tiles": stale_tiles, "stale_elements": stale_elems,
                "previous_value_elements": old_elems, "capped_polls": capped,
                "seconds": round(time.monotonic() - t0, 1)}


def error_row(key: str, name: str, error: Exception) -> dict:
    """A probe row that raised: its name under ``key``, the error's line and the trace's tail."""
    return {key: name, "error": f"{type(error).__name__}: {error}"[:300], "trace": traceback.format_exc()[-1500:]}


def a_line(r: dict) -> str:
    return (f"| {r['variant']} | {r['between']} | {r['noise']} | {r['stale_tiles']}/{r['pairs']} | "
            f"{r['stale_elements']} ({r['previous_value_elements']}) | {r['capped_polls']} |")


def guided_entries(plan: dict) -> tuple[GuidedEntry, ...]:
    """The realizable schedules' delays of a plan, each for every program of its kernel (the GPU's
    sizes have more programs than the model's), as ``benchmarks/user_stress_gpu.py`` replays them."""
    found: list[GuidedEntry] = []
    for schedule in plan["schedules"]:
        if not schedule["realizable"]:
            continue
        for e in schedule["entries"]:
            entry = dataclasses.replace(GuidedEntry(**e), program=-1)
            if entry not in found:
                found.append(entry)
    return tuple(found)


def b_rows(args) -> list[tuple[str, str, dict]]:
    """Part B's rows ``(harness, run, options)``, most important first."""
    plans = json.loads(PLANS.read_text())
    touch = guided_entries(plans[f"{SCATTER}::original"])
    n = 1 if args.interpret else args.guided_iterations
    many = 1 if args.interpret else args.clean_iterations
    return [
        (f"{SCATTER}::original", "guided (touch)", dict(delays="guided", guided=touch, iterations=n)),
        (f"{SCATTER}::original", "guided without the touch (producers late only)",
         dict(delays="guided", guided=tuple(e for e in touch if e.where != "touch"), iterations=n)),
        (f"{SCATTER}::fix_with_barriers", "original's guided (touch), must stay clean",
         dict(delays="guided", guided=touch, iterations=many)),
        (f"{SCATTER}::seed_fix", "original's guided (touch)", dict(delays="guided", guided=touch, iterations=n)),
        (f"{ONE_SHOT}::original", "random", dict(delays="random", iterations=many)),
        (f"{ONE_SHOT}::barrier_without_fence", "random", dict(delays="random", iterations=many)),
        (f"{SCATTER}::original", "no delays", dict(delays="none", iterations=many)),
    ]


def run_b(args, target: str, label: str, options: dict) -> dict:
    """One Part B row: ``syncverify stress`` of ``target`` at the GPU's sizes, stopping at the first failure."""
    plan = json.loads(PLANS.read_text())[target]
    t0 = time.monotonic()
    row = {"harness": target.split("examples/", 1)[1].replace("/harness.py", ""), "run": label,
           "schedule": [s["note"] for s in plan["schedules"] if s["kind"] != "race"]}
    try:
        base = StressOptions(target, world_size=2, defines={} if args.interpret else dict(SCALE), seed=1,
                             interpret=args.interpret, max_ns=50_000, graphs=False, stop_on_failure=True, cap=1 << 16)
        result = run_stress(dataclasses.replace(base, **options))
        row.update(summary(result))
        if result.first_failure is not None and options["delays"] == "guided" and args.replays:
            replay = replay_first(dataclasses.replace(base, **options), result.first_failure, times=args.replays)
            row["replay"] = replay.get("summary") if isinstance(replay, dict) else str(replay)
    except Exception as error:  # noqa: BLE001 -- a row's error is recorded, the others still run
        row["error"] = f"{type(error).__name__}: {error}"[:400]
        row["trace"] = traceback.format_exc()[-1500:]
    row["seconds"] = round(time.monotonic() - t0, 1)
    return row


def run_c(args) -> dict:
    """Part C: ``--real-ranks`` on one GPU (one rank, one process, nccl, the watchdog): a clean harness,
    random delays, 20 iterations, through ``syncverify.frontend.real_ranks``."""
    t0 = time.monotonic()
    target = str(ROOT / "tests" / "user_kernels" / "harness.py") + "::clean"
    try:
        result = run_real_ranks(StressOptions(target, world_size=1, iterations=20, delays="random",
                                              interpret=args.interpret), watchdog=60)
        row = {"run": "real ranks, W=1", **summary(result), "stopped": result.stopped}
    except Exception as error:  # noqa: BLE001 -- recorded
        row = {"run": "real ranks, W=1", "error": f"{type(error).__name__}: {error}"[:400],
               "trace": traceback.format_exc()[-1500:]}
    row["seconds"] = round(time.monotonic() - t0, 1)
    return row


def b_line(r: dict) -> str:
    if "error" in r:
        return f"| {r['harness']} | {r['run']} | ERROR {r['error'][:80]} | | | | {r['seconds']} |"
    first = "-" if r["first"] is None else f"iteration {r['first']}"
    return (f"| {r['harness']} | {r['run']} | {r['iterations']} | {first} | {r['kind'] or '-'} | "
            f"{(r.get('replay') or '-').split(' (')[0]} | {r['seconds']} |")


#: The order steps run in (a hard time cap may end the run: what matters most comes first).
A_FIRST = ("plain", "touch+late", "touch+late, acquire CAS", "touch+late, .cv read")
B_FIRST = 4  # Part B's first rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=32, help="producer/consumer CTA pairs per launch (default 32)")
    parser.add_argument("--launches", type=int, default=300, help="launches per Part A variant (default 300)")
    parser.add_argument("--late-ns", type=int, default=20_000, help="the producers' late start in Part A (ns)")
    parser.add_argument("--noise-ctas", type=int, default=64, help="CTAs of the L2 noise kernel (default 64)")
    parser.add_argument("--noise-ns", type=int, default=300_000, help="how long the noise kernel runs (ns)")
    parser.add_argument("--variant-seconds", type=float, default=8.0, help="Part A: launches of a variant stop "
                        "after this many seconds (default 8)")
    parser.add_argument("--guided-iterations", type=int, default=100)
    parser.add_argument("--clean-iterations", type=int, default=500)
    parser.add_argument("--replays", type=int, default=1)
    parser.add_argument("--budget", type=float, default=100.0, help="seconds: no step starts after this (default 100)")
    parser.add_argument("--parts", default="a,b,c", help="which parts (default a,b,c; c: --real-ranks at W=1)")
    parser.add_argument("--interpret", action="store_true", help="CPU: Part B in the interpreter, one iteration")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    args = parser.parse_args(argv)
    import torch

    if not args.interpret and not torch.cuda.is_available():
        print("needs a CUDA GPU (none visible); --interpret checks Part B on the CPU")
        return 2
    started = time.monotonic()
    raw: dict = {"device": "interpreter" if args.interpret else torch.cuda.get_device_name(),
                 "torch": torch.__version__, "triton": __import__("triton").__version__, "args": vars(args) | {
                     "out": str(args.out)}, "a": [], "b": [], "skipped": []}
    parts = set(args.parts.split(","))
    a_names = list(A_FIRST) + [n for n in VARIANTS if n not in A_FIRST] if "a" in parts and not args.interpret else []
    b_specs = b_rows(args) if "b" in parts else []
    steps = ([("a", n) for n in a_names[:len(A_FIRST)]] + [("b", spec) for spec in b_specs[:B_FIRST]]
             + [("a", n) for n in a_names[len(A_FIRST):]] + ([("c", None)] if "c" in parts else [])
             + [("b", spec) for spec in b_specs[B_FIRST:]])
    args.out.mkdir(parents=True, exist_ok=True)
    part_a = None
    for part, step in steps:
        if time.monotonic() - started > args.budget:
            raw["skipped"].append({"a": lambda: step, "b": lambda: f"{step[0]} {step[1]}", "c": lambda: "real ranks"}[part]())
            continue
        if part == "c":
            raw["c"] = run_c(args)
            print("C", json.dumps(raw["c"])[:600], flush=True)
            (args.out / "user_stress_latent_gpu.json").write_text(json.dumps(raw, indent=1, default=str))
            continue
        if part == "a":
            try:
                part_a = part_a or PartA(args)
                row = part_a.run(step)
            except Exception as error:  # noqa: BLE001 -- the other steps still run
                row = error_row("variant", step, error)
            raw["a"].append(row)
            print("A", a_line(row) if "error" not in row else json.dumps(row)[:600], flush=True)
        else:
            row = run_b(args, *step)
            raw["b"].append(row)
            print("B", b_line(row), json.dumps({k: row.get(k) for k in ("failure", "replay", "notes")})[:500],
                  flush=True)
        (args.out / "user_stress_latent_gpu.json").write_text(json.dumps(raw, indent=1, default=str))
    print(f"\n{raw['device']}, torch {raw['torch']}, triton {raw['triton']}, {time.monotonic() - started:.0f} s"
          + (f"; skipped past --budget {args.budget:g} s: {', '.join(raw['skipped'])}" if raw["skipped"] else ""))
    if raw["a"]:
        print(f"\nPart A: {args.pairs} pairs x {args.launches} launches per row, 64 x 64 int32 tiles, 4 warps, "
              f"producers late {args.late_ns} ns where 'late'")
        print("| variant | between poll and read | noise | stale tiles | stale elements (previous value) | capped |")
        print("| --- | --- | --- | ---: | ---: | ---: |")
        for r in raw["a"]:
            print(a_line(r) if "error" not in r else f"| {r['variant']} | ERROR {r['error'][:80]} | | | | |")
    if raw["b"]:
        print("\nPart B: syncverify stress, W=2 virtual ranks" + ("" if args.interpret else " at 1024^3"))
        print("| harness | run | iterations | first failure | kind | replay | seconds |")
        print("| --- | --- | ---: | --- | --- | --- | ---: |")
        for r in raw["b"]:
            print(b_line(r))
    if raw.get("c"):
        c = raw["c"]
        how = ", gloo, interpreter" if args.interpret else ", nccl"
        print(f"\nPart C: --real-ranks, W=1 (one process{how}): " + (
            f"ERROR {c['error'][:100]}" if "error" in c else
            f"{c['iterations']} iterations, {c['bad']} bad, stopped: {c['stopped']}, {c['seconds']} s"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
