"""TMA message passing on the GPU against the model (issue 26, part 4 of the helper brief).

Each *variant* is a message-passing shape through the async proxy, run as many instances at once
(``PAIRS`` producer/consumer CTA pairs per launch, one tile and one flag per pair, a fresh value
``it`` per launch so an old tile is seen as stale), with and without random ``nanosleep`` delays:

| variant | producer | consumer | litmus test (the model's answer) |
| --- | --- | --- | --- |
| ``store-wait-group`` | TMA store (descriptor) of its tile, ``cp.async.bulk.wait_group 0``, ``bar.sync``, release flag | acquire flag, generic loads | ``async-tma-store-mp-wait-group`` (stale: Never) |
| ``store-wait-group-read`` | the same with only Triton's own ``wait_group.read 0`` | the same | ``async-tma-store-mp-wait-group-read`` (Sometimes) |
| ``store-signal-first`` | release flag, then the TMA store (the positive control) | the same | ``async-tma-store-signal-before-store`` (Sometimes) |
| ``load-fence`` | generic stores, ``bar.sync``, release flag | acquire flag, ``fence.proxy.async.global``, TMA load | ``async-tma-load-peer-cta-with-fence`` (Never) |
| ``load-no-fence`` | the same | acquire flag, TMA load (Triton's own ``fence.proxy.async.shared::cta`` only) | ``async-tma-load-peer-cta-no-fence`` (Sometimes) |

An instance's outcome is ``fresh`` (every element of the tile the consumer read is ``it``),
``stale`` (some element is not: ``partial`` counts those with some fresh elements too) or
``timeout`` (the flag never came within ``MAX_POLLS`` polls). A stale tile in a variant whose
litmus test says Never is an outcome the model forbids: **MODEL UNSOUND** (exit 1). The model's
answers are computed here from the litmus files (``syncverify`` on ``PYTHONPATH``, no install).

Before running, each variant is compiled to sm_90 PTX and checked to hold the instructions the
table says, in that order (``ptx_findings``): the run measures what it claims to.

GPU (about 4 minutes; compact table last; raw counts and each variant's PTX under ``$OUT``)::

    export PYTHONPATH=$PWD PYTHONUNBUFFERED=1; python3 benchmarks/tma_litmus_gpu.py

CPU path (``TRITON_INTERPRET=1``: the interpreter runs programs one after another, so it can only
show fresh tiles; ``tests/test_tma_litmus_gpu.py`` runs it)::

    TRITON_INTERPRET=1 python benchmarks/tma_litmus_gpu.py --seconds 0 --launches 2 --pairs 2

Exit codes: 0 no outcome the model forbids, 1 MODEL UNSOUND or a PTX check failed, 2 no GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[1]
KNOWN = ROOT / "tests" / "litmus" / "known"
INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"

#: variant -> (kind: 0 TMA store / 1 TMA load, full wait_group, signal first, proxy fence, litmus file)
VARIANTS: dict[str, tuple[int, bool, bool, bool, str]] = {
    "store-wait-group": (0, True, False, False, "async-tma-store-mp-wait-group.litmus"),
    "store-wait-group-read": (0, False, False, False, "async-tma-store-mp-wait-group-read.litmus"),
    "store-signal-first": (0, True, True, False, "async-tma-store-signal-before-store.litmus"),
    "load-fence": (1, False, False, True, "async-tma-load-peer-cta-with-fence.litmus"),
    "load-no-fence": (1, False, False, False, "async-tma-load-peer-cta-no-fence.litmus"),
}
CONTROL = "store-signal-first"  # a stale tile must show here, else the run shows nothing


# ----- device helpers (inline PTX; the interpreter cannot run inline asm: no-ops there) --------

@triton.jit
def sleep_ns(ns, ON_GPU: tl.constexpr):
    """``nanosleep`` for ``ns`` nanoseconds (a delay: widens the windows the test looks into)."""
    if ON_GPU:
        tl.inline_asm_elementwise("nanosleep.u32 $1; mov.u32 $0, 0;", "=r,r", [ns],
                                  dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def bulk_wait_group_all(ON_GPU: tl.constexpr):
    """``cp.async.bulk.wait_group 0``: the issuing thread's bulk stores have written their
    destination (Triton itself waits only with ``.read``, which says the source was read)."""
    if ON_GPU:
        tl.inline_asm_elementwise("cp.async.bulk.wait_group 0; mov.u32 $0, 0;", "=r", [],
                                  dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def proxy_fence_global(ON_GPU: tl.constexpr):
    """``fence.proxy.async.global``: orders the generic accesses before it (the acquire) with the
    async-proxy accesses after it (the TMA load) on global memory."""
    if ON_GPU:
        tl.inline_asm_elementwise("fence.proxy.async.global; mov.u32 $0, 0;", "=r", [],
                                  dtype=tl.int32, is_pure=False, pack=1)


# ----- the kernel ----------------------------------------------------------------------------

@triton.jit
def tma_mp_kernel(tiles_ptr, flags_ptr, out_ptr, delays_ptr, it, PAIRS,
                  TILE: tl.constexpr, LOAD: tl.constexpr, FULL_WAIT: tl.constexpr,
                  SIGNAL_FIRST: tl.constexpr, PROXY_FENCE: tl.constexpr, MAX_POLLS: tl.constexpr,
                  ON_GPU: tl.constexpr):
    """Programs ``0..PAIRS-1`` produce, ``PAIRS..2 PAIRS-1`` consume (producers first: the
    interpreter runs programs in order). ``out[pair]``: the consumer's stale element count, -1 on
    timeout."""
    # ----- roles -----
    pid = tl.program_id(0)
    pair = pid % PAIRS
    desc = tl.make_tensor_descriptor(tiles_ptr, shape=[PAIRS * TILE, TILE], strides=[TILE, 1],
                                     block_shape=[TILE, TILE])
    rows = tl.arange(0, TILE)[:, None]
    cols = tl.arange(0, TILE)[None, :]
    tile_ptrs = tiles_ptr + (pair * TILE + rows) * TILE + cols
    sleep_ns(tl.load(delays_ptr + pid), ON_GPU)
    if pid < PAIRS:
        # ----- producer: the tile, then the flag -----
        fresh = tl.full([TILE, TILE], 0, tl.int32) + it
        if SIGNAL_FIRST:
            tl.atomic_xchg(flags_ptr + pair, it, sem="release", scope="gpu")
        if LOAD:
            tl.store(tile_ptrs, fresh)
        else:
            desc.store([pair * TILE, 0], fresh)
            if FULL_WAIT:
                bulk_wait_group_all(ON_GPU)
        tl.debug_barrier()
        if not SIGNAL_FIRST:
            tl.atomic_xchg(flags_ptr + pair, it, sem="release", scope="gpu")
    else:
        # ----- consumer: the flag, then the tile -----
        seen = tl.atomic_add(flags_ptr + pair, 0, sem="acquire", scope="gpu")
        polls = 1
        while (seen != it) & (polls < MAX_POLLS):
            seen = tl.atomic_add(flags_ptr + pair, 0, sem="acquire", scope="gpu")
            polls += 1
        if seen != it:
            tl.store(out_ptr + pair, -1)
        else:
            if LOAD:
                if PROXY_FENCE:
                    proxy_fence_global(ON_GPU)
                got = desc.load([pair * TILE, 0])
            else:
                got = tl.load(tile_ptrs)
            tl.store(out_ptr + pair, tl.sum((got != it).to(tl.int32)))


# ----- the PTX each variant must compile to --------------------------------------------------

#: variant -> the instructions (regular expressions over PTX lines) that must appear in this order
EXPECTED_PTX: dict[str, tuple[str, ...]] = {
    "store-wait-group": (r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.bulk_group",
                         r"cp\.async\.bulk\.commit_group", r"cp\.async\.bulk\.wait_group\.read\s+0",
                         r"cp\.async\.bulk\.wait_group\s+0", r"bar\.sync", r"atom\.global\.gpu\.release\.exch"),
    "store-wait-group-read": (r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.bulk_group",
                              r"cp\.async\.bulk\.commit_group", r"cp\.async\.bulk\.wait_group\.read\s+0",
                              r"bar\.sync", r"atom\.global\.gpu\.release\.exch"),
    "store-signal-first": (r"atom\.global\.gpu\.release\.exch",
                           r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.bulk_group",
                           r"cp\.async\.bulk\.wait_group\s+0"),
    "load-fence": (r"st\.global", r"bar\.sync", r"atom\.global\.gpu\.release\.exch",
                   r"ld\.global\.gpu\.acquire|atom\.global\.gpu\.acquire", r"fence\.proxy\.async\.global",
                   r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global", r"mbarrier\.try_wait"),
    "load-no-fence": (r"st\.global", r"bar\.sync", r"atom\.global\.gpu\.release\.exch",
                      r"ld\.global\.gpu\.acquire|atom\.global\.gpu\.acquire",
                      r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global", r"mbarrier\.try_wait"),
}
#: variant -> instructions that must NOT appear anywhere (what would make the variant another one)
ABSENT_PTX: dict[str, tuple[str, ...]] = {
    "store-wait-group-read": (r"cp\.async\.bulk\.wait_group\s+\d",),
    "load-no-fence": (r"fence\.proxy\.async\.global",),
}


def constexprs(variant: str, *, tile: int, max_polls: int, on_gpu: bool) -> dict:
    """The kernel's ``tl.constexpr`` arguments for ``variant``."""
    load, full_wait, signal_first, proxy_fence, _litmus = VARIANTS[variant]
    return dict(TILE=tile, LOAD=bool(load), FULL_WAIT=full_wait, SIGNAL_FIRST=signal_first,
                PROXY_FENCE=proxy_fence, MAX_POLLS=max_polls, ON_GPU=on_gpu)


def compile_ptx(variant: str, *, tile: int = 64, max_polls: int = 1 << 20) -> str:
    """sm_90 PTX of ``variant``'s kernel, compiled on the CPU (no GPU needed)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature = {"tiles_ptr": "*i32", "flags_ptr": "*i32", "out_ptr": "*i32", "delays_ptr": "*i32",
                 "it": "i32", "PAIRS": "i32"}
    consts = constexprs(variant, tile=tile, max_polls=max_polls, on_gpu=True)
    signature.update({name: "constexpr" for name in consts})
    src = ASTSource(tma_mp_kernel, signature, consts)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32)).asm["ptx"]


def ordered_findings(variant: str, ptx: str, expected: tuple[str, ...], absent: tuple[str, ...] = ()) -> list[str]:
    """What is wrong with ``variant``'s PTX: an ``expected`` instruction (regular expressions over
    PTX lines) missing or out of order, or an ``absent`` one present (empty: none)."""
    lines = [line.strip() for line in ptx.splitlines()]
    findings, at = [], 0
    for pattern in expected:
        hit = next((i for i in range(at, len(lines)) if re.search(pattern, lines[i])), None)
        if hit is None:
            findings.append(f"{variant}: no /{pattern}/ after line {at} of its PTX")
            break
        at = hit + 1
    for pattern in absent:
        if any(re.search(pattern, line) for line in lines):
            findings.append(f"{variant}: /{pattern}/ appears in its PTX")
    return findings


def ptx_findings(variant: str, ptx: str) -> list[str]:
    """What is wrong with ``variant``'s PTX (empty: it compiles to what the table says)."""
    return ordered_findings(variant, ptx, EXPECTED_PTX[variant], ABSENT_PTX.get(variant, ()))


# ----- the model's answers -------------------------------------------------------------------

def litmus_allows(path: Path) -> bool:
    """Whether the model allows the condition of the litmus test at ``path`` (not Never)."""
    sys.path.insert(0, str(ROOT))
    from syncverify.litmus.parser import parse_litmus_file
    from syncverify.litmus.runner import run_litmus

    verdict = run_litmus(parse_litmus_file(path), timeout=60)
    if verdict.observation == "Unknown":
        raise SystemExit(f"the model did not answer {path.name} (limit: {verdict.unknown})")
    return verdict.observation != "Never"


def model_allows_stale(variant: str) -> bool:
    """Whether the model allows a stale tile in ``variant`` (its litmus test's observation)."""
    return litmus_allows(KNOWN / VARIANTS[variant][4])


# ----- the run -------------------------------------------------------------------------------

def run_variant(variant: str, *, pairs: int, tile: int, seconds: float, min_launches: int, batch: int,
                max_delay_ns: int, max_polls: int, device: str) -> dict:
    """Launch ``variant`` for ``seconds`` (at least ``min_launches`` launches), half without and
    half with random delays; tally each outcome."""
    tiles = torch.zeros((pairs * tile, tile), dtype=torch.int32, device=device)
    flags = torch.zeros(pairs, dtype=torch.int32, device=device)
    consts = constexprs(variant, tile=tile, max_polls=max_polls, on_gpu=not INTERPRET)
    it = 0

    def launch(delays: torch.Tensor, out: torch.Tensor) -> None:
        nonlocal it
        for b in range(batch):
            it += 1
            tma_mp_kernel[(2 * pairs,)](tiles, flags, out[b], delays[b], it, pairs, num_warps=4, **consts)

    return delay_campaign(variant, launch, pairs=pairs, ctas=2 * pairs, seconds=seconds, min_launches=min_launches,
                          batch=batch, max_delay_ns=max_delay_ns, device=device,
                          extra={"partial": lambda out: int(((out > 0) & (out < tile * tile)).sum())})


def delay_campaign(variant: str, launch: Callable, *, pairs: int, ctas: int, seconds: float, min_launches: int,
                   batch: int, max_delay_ns: int, device: str, extra: dict | None = None) -> list[dict]:
    """``launch(delays, out)`` (one batch of launches: ``delays[b]`` per CTA, ``out[b]`` per pair: 0
    fresh, > 0 stale, < 0 timeout) for ``seconds`` (at least ``min_launches``), half without and
    half with random delays up to ``max_delay_ns``; each setting's counts (and ``extra``'s)."""
    rows = []
    for delayed in (False, True):
        counts = dict(fresh=0, stale=0, **{name: 0 for name in extra or {}}, timeout=0, launches=0)
        start = time.monotonic()
        while counts["launches"] < min_launches or time.monotonic() - start < seconds / 2:
            out = torch.zeros((batch, pairs), dtype=torch.int32, device=device)
            delays = torch.randint(0, max_delay_ns + 1 if delayed else 1, (batch, ctas), dtype=torch.int32,
                                   device=device)
            launch(delays, out)
            if device == "cuda":
                torch.cuda.synchronize()
            out = out.cpu()
            counts["fresh"] += int((out == 0).sum())
            counts["stale"] += int((out > 0).sum())
            for name, count in (extra or {}).items():
                counts[name] += count(out)
            counts["timeout"] += int((out < 0).sum())
            counts["launches"] += batch
        counts["seconds"] = round(time.monotonic() - start, 2)
        rows.append(dict(variant=variant, delays=f"0-{max_delay_ns} ns" if delayed else "none", **counts))
    return rows


def main(argv: list[str] | None = None) -> int:
    """Compile and check each variant's PTX, run it, hold it against the model, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser, VARIANTS, seconds=40.0, pairs=(66, "producer/consumer CTA pairs per launch"),
                     max_delay_ns=2000)
    parser.add_argument("--tile", type=int, default=64, help="tile side, int32 elements (default 64)")
    args = parser.parse_args(argv)
    where = setup()
    if where is None:
        return 2
    out_dir, device = where
    if not INTERPRET:
        triton.set_allocator(lambda size, alignment, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    variants = args.variant or list(VARIANTS)
    findings, ptx_ok = [], {}
    for variant in variants if not INTERPRET else ():  # the interpreter's kernels do not compile
        ptx = compile_ptx(variant, tile=args.tile, max_polls=args.max_polls)
        (out_dir / f"tma_litmus_{variant}.ptx").write_text(ptx)
        problems = ptx_findings(variant, ptx)
        ptx_ok[variant] = not problems
        findings += problems
        print(f"ptx {variant}: {'as expected' if not problems else '; '.join(problems)}", flush=True)
    rows = judged(variants, model_allows_stale, lambda variant: run_variant(
        variant, pairs=args.pairs, tile=args.tile, seconds=args.seconds, min_launches=args.launches,
        batch=64 if not INTERPRET else 1, max_delay_ns=args.max_delay_ns, max_polls=args.max_polls, device=device))
    for row in rows:
        row["ptx_ok"] = ptx_ok.get(row["variant"])
    extra = dict(args=vars(args), ptx_findings=findings)
    return report(rows, findings, out_dir=out_dir, name="tma_litmus_gpu", what="tiles", control=CONTROL,
                  variants=variants, extra=extra, columns=("partial",))


def common_arguments(parser: argparse.ArgumentParser, variants: dict, *, seconds: float, pairs: tuple[int, str],
                     max_delay_ns: int) -> None:
    """The options every GPU litmus script here takes, with its defaults."""
    parser.add_argument("--seconds", type=float, default=seconds, help=f"per variant (default {seconds:g})")
    parser.add_argument("--launches", type=int, default=64, help="at least this many per delay setting (default 64)")
    parser.add_argument("--pairs", type=int, default=pairs[0], help=f"{pairs[1]} (default {pairs[0]})")
    parser.add_argument("--max-delay-ns", type=int, default=max_delay_ns,
                        help=f"random delays up to (default {max_delay_ns})")
    parser.add_argument("--max-polls", type=int, default=1 << 20, help="a wait's polls before timeout")
    parser.add_argument("--variant", action="append", choices=sorted(variants), help="default: all")


def setup() -> tuple[Path, str] | None:
    """``$OUT`` (made) and the device to run on; None, having said why, without a GPU or the interpreter."""
    if not INTERPRET and not torch.cuda.is_available():
        print("no CUDA GPU (run with TRITON_INTERPRET=1 for the CPU path)", file=sys.stderr)
        return None
    out_dir = Path(os.environ.get("OUT", "out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    return out_dir, "cpu" if INTERPRET else "cuda"


def judged(variants: list[str], allows: Callable[[str], bool], run: Callable[[str], list[dict]]) -> list[dict]:
    """Each variant's rows (``run``), each held against the model (``allows``: may it go stale?):
    ``model_stale`` and ``verdict`` (MODEL UNSOUND: stale where the model says Never), printed as
    they come so a killed run still shows them."""
    rows = []
    for variant in variants:
        allowed = allows(variant)
        for row in run(variant):
            row["model_stale"] = "Sometimes" if allowed else "Never"
            row["verdict"] = "MODEL UNSOUND" if row["stale"] and not allowed else "ok"
            rows.append(row)
            print(f"{variant} delays={row['delays']}: {row}", flush=True)
    return rows


def report(rows: list[dict], findings: list[str], *, out_dir: Path, name: str, what: str, control: str,
           variants: list[str], extra: dict, columns: tuple[str, ...] = (), control_fails: bool = False) -> int:
    """Write ``name.json`` under ``out_dir`` and print the compact table last, the PTX checks, the
    positive control and the verdict; the exit code (1: MODEL UNSOUND, a PTX finding, or with
    ``control_fails`` a control that showed nothing on the GPU)."""
    control_seen = any(r["stale"] for r in rows if r["variant"] == control)
    raw = dict(date=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), interpret=INTERPRET,
               device=torch.cuda.get_device_name() if not INTERPRET else "cpu (TRITON_INTERPRET=1)",
               torch=torch.__version__, triton=triton.__version__, rows=rows, control_stale_seen=control_seen,
               **extra)
    (out_dir / f"{name}.json").write_text(json.dumps(raw, indent=2))
    unsound = [r for r in rows if r["verdict"] != "ok"]
    heads = ["variant", "delays", "launches", "instances", "fresh", "stale", *columns, "timeout", "model: stale",
             "verdict"]
    print()
    print("| " + " | ".join(heads) + " |")
    print("|" + " --- |" * len(heads))
    for r in rows:
        cells = [r["variant"], r["delays"], r["launches"], r["fresh"] + r["stale"] + r["timeout"], r["fresh"],
                 r["stale"], *(r[c] for c in columns), r["timeout"], r["model_stale"], r["verdict"]]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    if INTERPRET:
        print(f"ptx checks: not under the interpreter (tests/test_{name}.py compiles them)")
        print(f"interpreter: programs run one after another; it can show only fresh {what}")
    else:
        print(f"ptx checks: {'all as expected' if not findings else '; '.join(findings)}")
        if control in variants:
            print(f"positive control ({control}): "
                  f"{f'stale {what} seen' if control_seen else f'NO stale {what[:-1]}: the run shows nothing'}")
    print("MODEL UNSOUND" if unsound else "no outcome the model forbids")
    control_failed = control_fails and not INTERPRET and control in variants and not control_seen
    return 1 if unsound or findings or control_failed else 0


if __name__ == "__main__":
    sys.exit(main())
