"""The role layer's host side (``syncverify.kernels.launch``, ``registry``) and the PTX comparison
of ``benchmarks/ptx_snapshot.py`` (docs/kernels-roles.md)."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")

from benchmarks.ptx_snapshot import loop_counts, skeleton  # noqa: E402
from syncverify.kernels.build import build  # noqa: E402
from syncverify.kernels.config import KernelConfig  # noqa: E402
from syncverify.kernels.launch import heap_fields  # noqa: E402
from syncverify.kernels.registry import buffers, kernel_function  # noqa: E402
from syncverify.protocols import load_protocol  # noqa: E402

KERNELS = ("all-reduce", "all-scatter", "all-gather-gemm", "gemm-reduce-scatter")
#: What the runner allocates for the two older kernels (syncverify.stress.runner); the newer two: registry.buffers.
OLDER = {"all-reduce": {"partial", "out", "locks"}, "all-scatter": {"local", "out", "received", "locks", "push_locks"}}


@pytest.mark.parametrize("kernel", KERNELS)
def test_every_meta_parameter_a_kernel_declares_is_built_and_no_other(kernel):
    module, fn = kernel_function(kernel)
    built = build(load_protocol("add-counter-cas-reset"), KernelConfig(kernel=kernel, m=256, n=256, k=256))
    assert set(module.meta_parameters(built)) == {p.name for p in fn.params if p.is_constexpr}


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_kernels_heap_arguments_name_the_buffers_its_launch_allocates(kernel):
    _, fn = kernel_function(kernel)
    built = build(load_protocol("epoch-flag"), KernelConfig(kernel=kernel, m=256, n=256, k=256))
    named = {name for name, field in heap_fields(fn) if field is not None}
    assert named == OLDER.get(kernel) or named == set(buffers(built))


PTX = """
.visible .entry k(
{
\tld.param.b64 \t%rd1, [k_param_1];
\tld.param.b64 \t%rd2, [k_param_0];
\tadd.s32 \t%r3, %r1, 127;
$L__BB0_1:                              // %loop
                                        // =>This Inner Loop Header: Depth=1
\tmul.lo.s32 \t%r4, %r3, 4;
\tatom.global.release.gpu.exch.b32 \t%r5, [%rd2], %r4;
\t// begin inline asm
\t/* syncverify-delay cta */ nanosleep.u32 %r4; mov.u32 %r6, 0;
\t// end inline asm
\t@%p1 bra \t$L__BB0_1;
\tret;
}
"""


def test_the_skeleton_keeps_memory_sync_and_asm_and_drops_arithmetic_and_numbering():
    swapped = "[k_param_0];\n\tld.param.b64 \t%rd2, [k_param_1]"  # the parameter loads in the other order
    renumbered = (PTX.replace("%r4", "%r9").replace("%r3", "%r8").replace("BB0_1", "BB0_7")
                  .replace("[k_param_1];\n\tld.param.b64 \t%rd2, [k_param_0]", swapped))
    moved = PTX.replace("\tadd.s32 \t%r3, %r1, 127;\n", "").replace("\tmul.lo", "\tadd.s32 \t%r3, %r1, 127;\n\tmul.lo")
    assert skeleton(renumbered) == skeleton(PTX) == skeleton(moved)
    assert skeleton(PTX.replace("release.gpu", "relaxed.gpu")) != skeleton(PTX)  # a different sem
    assert skeleton(PTX.replace("nanosleep.u32 %r4", "nanosleep.u32 %r6")) == skeleton(PTX)
    assert "nanosleep" in skeleton(PTX) and "mul.lo" not in skeleton(PTX)
    assert loop_counts(PTX) == (5, 3)  # in the loop block (to the next label): mul, atom, asm, bra, ret
