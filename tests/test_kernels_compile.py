"""The launches the GPU will make compile for sm_90 here, through ptxas, with CPU tensors standing
in: the same binding, specialization and packing as ``kernel[grid](...)`` (``compile_like_launch``),
so a kernel that cannot build fails in CI instead of on the GPU machine."""

from __future__ import annotations

import pytest
import torch

from syncverify.kernels import gemm_all_reduce, gemm_all_scatter
from syncverify.kernels.build import build, ownership_tensor, runtime_values_tensor, torch_dtype
from syncverify.kernels.compile import compile_like_launch, launch_specialization, sleep_counts
from syncverify.kernels.config import KernelConfig
from syncverify.kernels.heap import VirtualHeap
from syncverify.kernels.build import delay_table_tensor
from syncverify.protocols import load_protocol
from syncverify.stress.inputs import make_inputs
from syncverify.stress.validate import NFIELDS, NextIteration, classify_arguments, classify_kernel


def _launch_args(built, heap, inputs, status, vals=None):
    c = built.config
    vals = runtime_values_tensor(built, [3], "cpu")[0] if vals is None else vals
    A, B = inputs.A, inputs.B
    strides = (A.stride(0), A.stride(1), A.stride(2), B.stride(0), B.stride(1), B.stride(2))
    run = (0, vals, 1 << 14, 7, 50, 4000, 0b11110, delay_table_tensor(None, "cpu"))  # ..., sites mask, table
    if c.kernel == "all-reduce":
        p, o, l = heap["partial"], heap["out"], heap["locks"]
        return (A, B, p.local, p.table, o.local, o.table, l.local, l.table, ownership_tensor(c, "cpu"), status, c.m, c.n,
                c.k_per_rank, *strides, p.rank_stride, o.rank_stride, l.rank_stride, *run)
    p, o, r, l, q = heap["local"], heap["out"], heap["received"], heap["locks"], heap["push_locks"]
    return (A, B, p.local, p.table, o.local, o.table, r.local, r.table, l.local, l.table, q.local, q.table,
            status, c.m, c.n_per_rank, c.k, *strides, p.rank_stride, o.rank_stride, r.rank_stride,
            l.rank_stride, q.rank_stride, *run)


def _kernel_and_heap(kernel, protocol, world, table, dtype):
    c = KernelConfig(kernel=kernel, world_size=world, m=256, n=512, k=256, delays=True,
                     table=table, dtype=dtype)
    built = build(load_protocol(protocol), c)
    heap = VirtualHeap(world, "cpu", table=table)
    heap.allocate("partial" if kernel == "all-reduce" else "local", (c.m, c.n_per_rank), torch_dtype(dtype))
    heap.allocate("out", (c.m, c.n), torch_dtype(dtype))
    heap.allocate("locks", (built.lock_count, c.tiles), torch.int32)
    if kernel == "all-scatter":
        heap.allocate("received", (c.m, c.n), torch_dtype(dtype))
        heap.allocate("push_locks", (built.push_lock_count, c.tiles), torch.int32)
    inputs = make_inputs(c, parity=0, generator=torch.Generator().manual_seed(0), device="cpu")
    module = gemm_all_reduce if kernel == "all-reduce" else gemm_all_scatter
    fn = module.gemm_all_reduce_kernel if kernel == "all-reduce" else module.gemm_all_scatter_kernel
    return c, built, heap, inputs, module, fn


@pytest.mark.parametrize("kernel, protocol", [("all-reduce", "xchg-flag"), ("all-scatter", "epoch-flag")])
def test_every_launch_of_a_chunk_reuses_one_compiled_kernel(kernel, protocol):
    # The runner passes row i of a [chunk, slots] operand ring; a row that is not 16-byte aligned
    # changes Triton's specialization and compiles the kernel again (it did, at iteration 1).
    c, built, heap, inputs, module, fn = _kernel_and_heap(kernel, protocol, 2, False, "bf16")
    ring = runtime_values_tensor(built, range(8), "cpu")
    status = torch.zeros(8, 2, 2 * c.tiles, 4, dtype=torch.int32)
    keys = {launch_specialization(fn, *_launch_args(built, heap, inputs, status[i], ring[i]),
                                  num_warps=c.num_warps, **module.meta_parameters(built))
            for i in range(8)}
    assert len(keys) == 1
    assert ring[5].tolist()[:len(built.plan.runtime_values(epoch=5))] == list(built.plan.runtime_values(epoch=5))


@pytest.mark.parametrize("kernel, protocol, world, table, dtype", [
    ("all-reduce", "xchg-flag", 2, False, "bf16"),
    ("all-scatter", "epoch-flag", 4, True, "fp32"),
])
def test_the_fused_kernel_and_its_validation_compile_for_sm90(kernel, protocol, world, table, dtype):
    c, built, heap, inputs, module, fn = _kernel_and_heap(kernel, protocol, world, table, dtype)
    status = torch.zeros(world, 2 * c.tiles, 4, dtype=torch.int32)
    compiled = compile_like_launch(fn, *_launch_args(built, heap, inputs, status),
                                   num_warps=c.num_warps, num_stages=c.num_stages,
                                   **module.meta_parameters(built))
    assert compiled.asm["cubin"]
    assert set(sleep_counts(compiled.asm["ptx"])) == {"before-store", "cta", "wait-read"}
    out = heap["out"].local
    summary = torch.zeros(world, (c.m // c.block_m) * (c.n // c.block_n), NFIELDS, dtype=torch.int32)
    # as the runner launches it with virtual ranks: preparing the next iteration too
    locks = heap["locks"].local
    prepare = NextIteration(poison_out=True, work=heap["partial" if kernel == "all-reduce" else "local"].local,
                            other_out=out if kernel == "all-scatter" else None, locks=(locks, locks))
    args, meta = classify_arguments(c, out, inputs, inputs, status, summary, next_iteration=prepare)
    checked = compile_like_launch(classify_kernel, *args, **meta)
    assert "globaltimer" in checked.asm["ptx"]  # the device clock of time to first failure
    assert checked.asm["cubin"]
