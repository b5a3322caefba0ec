"""The kernel front end's CTA facts against compiled PTX (sm_90, compiled on the CPU).

For each tiny kernel of tests/frontend_kernels/facts.py, the global-memory operations and
barriers of its PTX (which kind, sem, scope, whether predicated to one thread) must equal what the
front end's model threads execute (thread 0 and thread 1 of the CTA): the audit of
``syncverify.protocols.lowering`` (tests/test_ptx_audit.py), done for the front end. It also shows the fact
``lowering.py`` did not have: a used scalar result reaches the other threads through
``st.shared``, ``bar.sync``, ``ld.shared`` (the front end's broadcast).
"""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

import syncverify  # noqa: E402
from syncverify.program import Atomic, Barrier, Load, Store  # noqa: E402

from tests.frontend_kernels import facts  # noqa: E402

_SEMS = ("relaxed", "acquire", "release", "acq_rel")
_SCOPES = ("cta", "gpu", "sys")


def ptx_ops(ptx: str) -> list[tuple]:
    """``(kind, sem, scope, one_thread)`` of each global access and ``bar.sync`` in ``ptx``."""
    ops = []
    for line in ptx.splitlines():
        text = line.strip()
        m = re.match(r"(@%p\d+\s+)?(atom|red|ld|st)\.(volatile\.)?global\.([\w.]*)", text)
        if m:
            tokens = m[4].split(".")
            if m[3]:
                sem, scope = "relaxed", "sys"  # ld.volatile: relaxed at sys scope (PTX ISA)
            else:
                sem = next((t for t in tokens if t in _SEMS), "weak" if m[2] in ("ld", "st") else "relaxed")
                scope = next((t for t in tokens if t in _SCOPES), None if sem == "weak" else "gpu")
            ops.append(("atom" if m[2] in ("atom", "red") else m[2], sem, scope, bool(m[1])))
        elif text.startswith("bar.sync"):
            ops.append(("bar", None, None, False))
    return ops


def _kind(ins) -> tuple | None:
    if isinstance(ins, Barrier):
        return ("bar", None, None)
    if getattr(ins, "loc", "").startswith("smem."):
        return None  # the broadcast through shared memory is not a global access
    if isinstance(ins, Atomic):
        return ("atom", ins.sem, ins.scope)
    if isinstance(ins, Load):
        return ("ld", ins.sem, ins.scope)
    if isinstance(ins, Store):
        return ("st", ins.sem, ins.scope)
    return None


def frontend_ops(name: str) -> list[tuple]:
    """The same tuple for what model threads 0 and 1 of the CTA execute (one_thread: thread 0 only)."""
    result = syncverify.check_kernel(facts.harness_for(name), world_size=1, threads_per_cta=2)
    program = result.lifted.program
    t0, t1 = ([k for k in map(_kind, t.instructions) if k is not None] for t in program.threads[:2])
    t1_left = list(t1)
    ops = []
    for k in t0:
        if k in t1_left:
            t1_left.remove(k)
            ops.append(k + (False,))
        else:
            ops.append(k + (True,))
    assert not t1_left, f"thread 1 executes {t1_left} that thread 0 does not"
    return ops


@pytest.mark.parametrize("name", sorted(facts.KERNELS))
def test_frontend_cta_facts_equal_the_compiled_ptx(name):
    from syncverify.kernels.compile import compile_like_launch

    kernel, nargs, meta = facts.KERNELS[name]
    args = [torch.zeros(256, dtype=torch.int32) for _ in range(nargs)]
    ptx = compile_like_launch(kernel, *args, num_warps=4, **meta).asm["ptx"]
    compiled = ptx_ops(ptx)
    model = frontend_ops(name)
    # the front end keeps one tile store per model thread; PTX may split it in vector stores
    dedup = [op for i, op in enumerate(compiled) if i == 0 or op != compiled[i - 1] or op[0] == "bar"]
    assert model == dedup, f"{name}: PTX {compiled} vs front end {model}"


def test_a_used_scalar_result_reaches_the_other_threads_through_shared_memory():
    from syncverify.kernels.compile import compile_like_launch

    args = [torch.zeros(256, dtype=torch.int32) for _ in range(2)]
    ptx = compile_like_launch(facts.poll_used, *args, num_warps=4).asm["ptx"]
    body = [line.strip() for line in ptx.splitlines()]
    shared = [i for i, l in enumerate(body) if l.startswith("@%p") and "st.shared" in l]
    bar = [i for i, l in enumerate(body) if l.startswith("bar.sync")]
    load = [i for i, l in enumerate(body) if l.startswith("ld.shared")]
    assert shared and bar and load and shared[0] < bar[0] < load[0]
