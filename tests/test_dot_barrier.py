"""``tl.dot``'s CTA barrier, one fact on both sides (issue 22).

Triton 3.6 stages a dot's operands through shared memory for sm_90's MMA, with ``bar.sync 0`` of
the whole CTA between the operand loads and the MMA (``syncverify.protocols.lowering.lower_dot``).
The protocol check's GEMM step (``syncverify.scenarios.build.Dot``) and the kernel front end's hook
on the interpreter's ``create_dot`` both take it from ``lower_dot``; the PTX audit
(``syncverify.kernels.audit.dot_barrier_problems``) checks it against the compiled kernels; the
drift test's trace (``syncverify.kernels.trace``) records it, so a model without it drifts.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from syncverify.program import Barrier
from syncverify.protocols import lowering
from syncverify.protocols.registry import load_protocol
from syncverify.scenarios.build import ROLES, Dot, ScenarioOptions, build

pytest.importorskip("torch")
pytest.importorskip("triton")

import syncverify  # noqa: E402
from syncverify.kernels import audit, drift  # noqa: E402
from tests.compiled import run_compiled  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent / "frontend_kernels"))
KNOWN = Path(__file__).parent / "frontend_kernels" / "known.py"


# ----- the fact, against compiled PTX --------------------------------------------------------------

#: Builds compiled for sm_90 (no GPU needed): each scenario's cross-check build (fp32 16 x 16 x 16,
#: pointer loads, one stage; FA3's at 8 warps), and the GPU defaults (bf16 128 x 128 x 64, 8
#: warps, descriptor loads, 3 stages) of reduce-scatter with FA3's handoff and all-gather-gemm.
_COMPILE = """
import dataclasses
from crosscheck_scenarios import scenario_config
from syncverify.kernels.audit import dot_barrier_problems, kernel_ptx
from syncverify.kernels.build import build
from syncverify.kernels.config import KernelConfig
from syncverify.protocols import load_protocol
import re
cases = [(s, 'epoch-flag', scenario_config(s, 2)) for s in ('all-reduce', 'all-scatter', 'all-gather-gemm')]
cases.append(('gemm-reduce-scatter', 'fa3-epilogue-named-barrier', scenario_config('gemm-reduce-scatter', 2, warps=8)))
cases.append(('gemm-reduce-scatter', 'fa3-epilogue-named-barrier', KernelConfig(kernel='gemm-reduce-scatter')))
cases.append(('all-gather-gemm', 'epoch-flag', KernelConfig(kernel='all-gather-gemm')))
for scenario, protocol, config in cases:
    ptx = kernel_ptx(build(load_protocol(protocol), config))
    mmas = len(re.findall(r'(?:wgmma\\.mma_async|mma\\.sync)\\.', ptx))
    assert mmas, (scenario, config)
    assert dot_barrier_problems(ptx) == [], (scenario, protocol, config, dot_barrier_problems(ptx))
    # seeded: the same PTX without its CTA barriers contradicts the fact at every MMA
    seeded = re.sub(r'(?m)^\\s*bar\\.sync\\s+0;$', '', ptx)
    found = dot_barrier_problems(seeded)
    assert len(found) == mmas and all('no bar.sync 0' in p for p in found), found[:2]
    print(scenario, protocol, config.dtype, config.loads, config.num_warps, mmas, 'ok')
"""


def test_every_mma_of_our_compiled_kernels_follows_a_cta_barrier_after_its_operand_loads():
    """The fact ``lower_dot`` states, in the PTX of our kernels' GEMMs (cross-check builds and GPU
    defaults), and the audit's seeded failure: the same PTX with its ``bar.sync 0`` removed is
    refused at every MMA."""
    done = run_compiled("sys.path.insert(0, 'tests/frontend_kernels'); sys.path.insert(0, '.');" + _COMPILE,
                        timeout=600)
    assert done.stdout.count(" ok") == 6, done.stdout


def test_the_audit_refuses_an_mma_whose_barrier_comes_before_its_operand_load():
    ptx = "\n".join(["$L__BB0_1:   // =>This Loop Header: Depth=1", "bar.sync 0;", "ld.global.b32 {%r1}, [%rd1];",
                     "st.shared.b32 [%r2], %r1;", "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%r3};"])
    assert audit.dot_barrier_problems(ptx) == [
        "PTX line 5: an MMA (wgmma.mma_async) with no bar.sync 0 of the whole CTA after its operand loads "
        "(line 3: ld.global)"]
    assert audit.dot_barrier_problems(ptx.replace("ld.global.b32 {%r1}, [%rd1];", "mov.b32 %r1, 0;")) == []


# ----- the protocol check's side ------------------------------------------------------------------

def test_every_role_that_runs_a_gemm_in_our_kernels_has_the_dot_step():
    """The roles whose kernel code calls ``tl.dot`` (``syncverify.kernels.tile``: the producers'
    ``gemm_tile``, all-gather-gemm's ``gathered_gemm``), and only those."""
    with_dot = {(s, r.name) for s, roles in ROLES.items() for r in roles if any(isinstance(x, Dot) for x in r.steps)}
    assert with_dot == {("all-reduce", "producer"), ("all-scatter", "producer"), ("gemm-reduce-scatter", "producer"),
                        ("all-gather-gemm", "gemm")}


def test_the_gemm_step_is_lower_dots_barrier_on_every_model_thread():
    scenario = build(load_protocol("epoch-flag"), ScenarioOptions(scenario="gemm-reduce-scatter", world_size=2,
                                                                   symmetry=False))
    producers = [t for t in scenario.program.threads if t.role.role == "producer"]
    assert producers
    for thread in producers:
        dots = [i for i in thread.instructions if isinstance(i, Barrier) and i.label == lowering.DOT_LABEL]
        assert [(b.kind, b.barrier_id, b.count) for b in dots] == [("sync", 0, None)]


def test_a_model_without_the_dot_barrier_drifts_from_the_kernel(monkeypatch):
    """The drift test sees the dot: the kernel's trace records it, so a model built without it
    (``lower_dot`` patched to nothing after the kernel was traced) differs at the producer's first step."""
    p = load_protocol("epoch-flag")
    ops, timed_out = drift.trace_kernel(p, "gemm-reduce-scatter", 2, epochs=1)
    opts = ScenarioOptions(scenario="gemm-reduce-scatter", world_size=2, symmetry=False)
    assert drift.compare(drift.model_ops(build(p, opts)), ops, timed_out=timed_out) == []
    monkeypatch.setattr("syncverify.protocols.lowering.lower_dot", lambda: ())
    found = drift.compare(drift.model_ops(build(p, opts)), ops, timed_out=timed_out)
    assert found and all("producer" in f and "tl.dot" in f for f in found), found


# ----- the front end's side -----------------------------------------------------------------------

def test_a_dot_between_the_tile_store_and_a_one_thread_signal_orders_the_tile_in_the_front_end(monkeypatch):
    """Known answers: the message pass with no CTA barrier races; with a ``tl.dot`` between the
    store and the signal it is SAFE, and the verdict says what it assumed; with ``lower_dot``
    patched to nothing (the one fact both sides read) the dot orders nothing and it races."""
    without = syncverify.check_kernel(f"{KNOWN}::no_dot_before_signal", world_size=1, timeout=120)
    assert without.safe is False and set(without.violations) == {"race", "unwritten-read"}
    assert not any("tl.dot" in a for a in without.assumptions)
    with_dot = syncverify.check_kernel(f"{KNOWN}::dot_before_signal", world_size=1, timeout=120)
    assert with_dot.safe is True, with_dot.text()
    assert any(a.startswith("tl.dot is bar.sync 0") for a in with_dot.assumptions)
    assert "tl.dot is bar.sync 0" in with_dot.text()
    monkeypatch.setattr("syncverify.protocols.lowering.lower_dot", lambda: ())
    unordered = syncverify.check_kernel(f"{KNOWN}::dot_before_signal", world_size=1, timeout=120)
    assert unordered.safe is False and set(unordered.violations) == {"race", "unwritten-read"}
