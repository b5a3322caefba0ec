"""Snapshot the PTX of every variant the PTX audit compiles, for a before/after comparison.

Usage (CPU only; no GPU needed)::

    python benchmarks/ptx_snapshot.py OUT_DIR [PART]     # write OUT_DIR/<variant>.ptx and OUT_DIR/hashes.txt
    python benchmarks/ptx_snapshot.py --compare BEFORE AFTER   # list the variants whose PTX differs

The variants are those ``tests/test_ptx_audit.py`` compiles: the signal and wait probes of every
built-in and zoo protocol (and the audit's hand-made ones), and the four fused kernels for every
built-in (plus the address-table, volatile-tile, pointer-load and delay variants), compiled for
sm_90 with ``TRITON_DISABLE_LINE_INFO=1``; ``.loc``/``.file`` lines and debug sections are
stripped before hashing, so only instructions and their order count.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
from pathlib import Path



def strip(ptx: str) -> str:
    """PTX without line info: no ``.loc``/``.file`` lines, no ``.section .debug_*`` blocks."""
    out, skip = [], 0
    for line in ptx.splitlines():
        s = line.strip()
        if skip:
            skip += s.count("{") - s.count("}")
            continue
        if s.startswith(".section") and ".debug" in s:
            skip = max(s.count("{") - s.count("}"), 0) or 1 if "{" in s else 0
            continue
        if s.startswith((".loc", ".file")) or re.match(r"^\$L__(tmp|func_end|info|debug)", s):
            continue
        out.append(line)
    return "\n".join(out) + "\n"


#: Instructions that touch memory, synchronize, branch or are inline asm: a kernel's behaviour. The rest
#: (integer arithmetic, moves, compares, conversions) is where the compiler placed pure computations.
_KEPT = re.compile(r"^(@!?%p\d+\s+)?(ld|st|atom|red|bar|fence|bra|ret|call|cp|wgmma|mbarrier|tensormap|shfl|"
                   r"nanosleep|membar|elect|prefetch|\{|\})")


def skeleton(ptx: str) -> str:
    """The memory, synchronization, control-flow and inline-asm instructions (all of the asm) of stripped PTX, in
    order, with register numbers and branch labels replaced by placeholders (``%r12`` -> ``%r``,
    ``$L__BB0_7`` -> ``$L``; the kernel-parameter loads sorted): what stays when only the placement
    of arithmetic changed."""
    kept, params = [], []
    asm = False  # inside "// begin inline asm" .. "// end inline asm": delays, fences, flag stores
    for line in ptx.splitlines():
        s = line.strip()
        asm = (asm or s == "// begin inline asm") and s != "// end inline asm"
        if (asm and not s.startswith("//")) or _KEPT.match(s):
            s = re.sub(r"SVW\d+", "SVW", s)  # the delay spin's label, unique per asm instance
            s = re.sub(r"\$L__BB\d+_\d+", "$L", re.sub(r"%([a-z]+)\d+", r"%\1", s))
            (params if s.startswith("ld.param") else kept).append(s)
    return "\n".join(sorted(params) + kept) + "\n"  # parameter loads: which, not in what order


def loop_counts(ptx: str) -> tuple[int, int]:
    """Instructions ``(inside loops, outside)``, by LLVM's comments on the blocks (``in Loop``, ``Loop Header``)."""
    inside = outside = 0
    in_loop = label = False
    for line in ptx.splitlines():
        s = line.strip()
        if re.match(r"^(\$L__BB\d+_\d+:|// %bb\.\d+:)", s):
            in_loop, label = "in Loop" in s or "Loop Header" in s, True
            continue
        if label and s.startswith("//"):
            in_loop = in_loop or "in Loop" in s or "Loop Header" in s
            continue
        label = False
        if s and not s.startswith(("//", ".", "{", "}", "(", ")")) and not s.endswith(":"):
            inside, outside = (inside + 1, outside) if in_loop else (inside, outside + 1)
    return inside, outside


def variants():
    """``(name, thunk returning PTX)`` for every variant the audit compiles."""
    from syncverify.kernels.audit import kernel_ptx, probe_ptx
    from syncverify.kernels.build import build
    from syncverify.kernels.config import KernelConfig
    from syncverify.protocols import builtin_names, load_protocol, protocol_from_dict
    from syncverify.protocols.registry import zoo_names

    def volatile_tiles(name="xchg-flag"):
        data = load_protocol(name).to_dict()
        data.update(name=f"{name}-volatile-tiles", tile_load={"volatile": True})
        return protocol_from_dict(data)

    def add_zero(sem):
        return protocol_from_dict({
            "name": "add-zero-poll", "summary": "s", "origin": "test",
            "signal": [{"op": "atomic_add", "value": 1, "sem": "release", "scope": "sys", "to": "all"}],
            "wait": [{"op": "await", "read": "atomic_add", "value": 0, "sem": sem, "scope": "gpu",
                      "until": ">= world_size"}]})

    for name in list(builtin_names()) + list(zoo_names()):
        for side in ("signal", "wait"):
            yield f"probe-{side}-{name}", lambda n=name, s=side: probe_ptx(load_protocol(n), s)
    for side in ("signal", "wait"):
        yield f"probe-{side}-volatile-tiles", lambda s=side: probe_ptx(volatile_tiles(), s)
    for sem in ("relaxed", "acquire", "acq_rel"):
        yield f"probe-wait-add-zero-{sem}", lambda s=sem: probe_ptx(add_zero(s), "wait")

    kernels = ("all-reduce", "all-scatter", "all-gather-gemm", "gemm-reduce-scatter")
    cases = []
    for kernel in kernels:
        for name in builtin_names():
            cases.append((f"kernel-{kernel}-{name}", name, dict(kernel=kernel)))
    for kernel, name in (("all-reduce", "xchg-flag"), ("all-scatter", "epoch-flag"),
                         ("all-gather-gemm", "epoch-flag"), ("gemm-reduce-scatter", "xchg-flag")):
        cases.append((f"kernel-{kernel}-{name}-table", name, dict(kernel=kernel, table=True)))
    for kernel in kernels:
        cases.append((f"kernel-{kernel}-xchg-flag-delays", "xchg-flag", dict(kernel=kernel, delays=True)))
    for kernel in ("all-reduce", "all-scatter", "gemm-reduce-scatter"):
        for loads in ("descriptor", "pointer"):
            cases.append((f"kernel-{kernel}-volatile-tiles-{loads}", None, dict(kernel=kernel, loads=loads)))
    cases.append(("kernel-all-gather-gemm-volatile-tiles-descriptor", None, dict(kernel="all-gather-gemm")))
    for label, name, options in cases:
        def thunk(name=name, options=options):
            protocol = load_protocol(name) if name else volatile_tiles()
            return kernel_ptx(build(protocol, KernelConfig(m=256, n=256, k=256, **options)))
        yield label, thunk


def digests(ptx: str) -> tuple[str, str]:
    """The digests of stripped PTX and of its :func:`skeleton`."""
    return tuple(hashlib.sha256(text.encode()).hexdigest()[:16] for text in (ptx, skeleton(ptx)))


def snapshot(out: Path, only: str = "") -> None:
    out.mkdir(parents=True, exist_ok=True)
    lines = []
    for label, thunk in variants():
        if only not in label:
            continue
        ptx = strip(thunk())
        (out / f"{label}.ptx").write_text(ptx)
        lines.append(" ".join(digests(ptx)) + f"  {label}")
        print(lines[-1], flush=True)
    (out / "hashes.txt").write_text("\n".join(lines) + "\n")


def compare(before: Path, after: Path) -> int:
    """Print how the PTX in ``after`` differs from ``before``; 1 if a skeleton differs."""
    def read(p: Path) -> dict[str, tuple[str, str]]:  # the digests, from the PTX files themselves
        labels = (line.split("  ", 1)[1] for line in (p / "hashes.txt").read_text().splitlines())
        return {label: digests((p / f"{label}.ptx").read_text()) for label in labels}

    b, a = read(before), read(after)
    same = [k for k in b if a.get(k) == b[k]]
    shaped = [k for k in b if k in a and a[k] != b[k] and a[k][1] == b[k][1]]
    differ = [k for k in b if k in a and a[k][1] != b[k][1]]
    missing = sorted(set(b) ^ set(a))
    print(f"{len(b)} variants before, {len(a)} after: {len(same)} identical PTX, {len(shaped)} with the same "
          f"memory/sync/control skeleton (arithmetic placed differently), {len(differ)} skeletons differ, "
          f"{len(missing)} in one only")
    for k in shaped:
        (b_in, b_out), (a_in, a_out) = (loop_counts((p / f"{k}.ptx").read_text()) for p in (before, after))
        print(f"  same skeleton: {k}: instructions in loops {b_in} -> {a_in} ({a_in - b_in:+d}), "
              f"outside {b_out} -> {a_out} ({a_out - b_out:+d})")
    for k in differ + missing:
        print("  SKELETON DIFFERS:" if k in differ else "  one side only:", k)
    return 1 if differ or missing else 0


if __name__ == "__main__":
    os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="ptx-snapshot-"))  # compile, never reuse
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    if sys.argv[1:2] == ["--compare"]:
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
    snapshot(Path(sys.argv[1]), *sys.argv[2:3])  # an optional second argument: only labels containing it
