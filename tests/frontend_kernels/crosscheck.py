"""Our own fused all-reduce kernel, a protocol compiled in, as a kernel front-end harness.

Issue 22, item 6: the same program checked two ways. :func:`all_reduce_harness` launches
``gemm_all_reduce_kernel`` (``syncverify.kernels.gemm_all_reduce``) once per rank, one process
per rank as on GPUs (``TABLE``: address tables of each rank's copy on the front end's symmetric
heap), with the protocol's plan compiled in, W tiles of one block (tile t is rank t % W's), one
producer and one consumer program per rank; the checker runs it under
:func:`syncverify.kernels.steps.unbounded_waits` (every wait polls until its condition holds, as
the protocol model's ``await``). Every rank's C must be written by the call.
"""

import torch

from syncverify.kernels.build import build
from syncverify.kernels.config import KernelConfig
from syncverify.kernels.gemm_all_reduce import all_reduce_arguments, gemm_all_reduce_kernel
from syncverify.kernels.heap import Buffer
from syncverify.protocols import load_protocol

BLOCK = 16  # the smallest tile the kernel's config accepts


def all_reduce_harness(protocol: str):
    """A harness (``sv`` -> None, one call) for the all-reduce kernel with ``protocol`` compiled in."""

    def harness(sv):
        W = sv.world_size
        config = KernelConfig(kernel="all-reduce", world_size=W, m=W * BLOCK, n=BLOCK, k=W * BLOCK, block_m=BLOCK,
                              block_n=BLOCK, block_k=BLOCK, gemm_sms=1, comm_sms=1, dtype="fp32", virtual=False,
                              table=True, interpret=False, loads="pointer", num_warps=4, num_stages=1)
        built = build(load_protocol(protocol), config)
        plan = built.plan
        tiles = config.tiles
        heap = {name: sv.heap.zeros(shape, dtype, name=name) for name, shape, dtype in (
            ("partial", (plan.slots * config.m * config.n,), torch.float32),
            ("out", (config.m * config.n,), torch.float32),
            ("locks", (plan.slots * len(plan.locks) * tiles,), torch.int32))}
        tables = {name: torch.tensor([b.on(r).data_ptr() for r in range(W)], dtype=torch.int64)
                  for name, b in heap.items()}
        g = torch.Generator().manual_seed(0)
        for r in range(W):
            A = torch.randint(-2, 3, (1, config.m, config.k_per_rank), generator=g).float()
            B = torch.randint(-2, 3, (1, config.k_per_rank, config.n), generator=g).float()
            status = torch.zeros((W, 2 * tiles, 4), dtype=torch.int32)
            views = {name: Buffer(b.on(r), tables[name], 0) for name, b in heap.items()}
            args, meta = all_reduce_arguments(built, views, A, B, status, rank=r)
            sv.launch(gemm_all_reduce_kernel, (config.grid,), *args, rank=r, stream="main", **meta)
        sv.host_barrier()
        sv.expect_written(heap["out"])

    harness.__name__ = f"all_reduce[{protocol}]"
    return harness
