"""Our own fused all-reduce kernel, a protocol compiled in, as a kernel front-end harness.

Issue 22, item 6: the same program checked two ways. :func:`all_reduce_harness` launches
``gemm_all_reduce_kernel`` (``syncverify.kernels.gemm_all_reduce``) once per rank, one process
per rank as on GPUs (``TABLE``: address tables of each rank's copy on the front end's symmetric
heap), with the protocol's plan compiled in, ``tiles`` tiles of one block (tile t is rank t % W's), one
producer and one consumer program per rank; the checker runs it under
:func:`syncverify.kernels.steps.unbounded_waits` (every wait polls until its condition holds, as
the protocol model's ``await``). Every rank's C must be written by the call.

One tile by default: the program the protocol check builds (``syncverify.scenarios.build``
checks tile 0 only, every other tile being a renaming of it with disjoint locks and data). More
tiles are the same check as a product: two tiles explore 24 x 24 executions where one explores 24.
"""

import torch

from syncverify.kernels.build import build
from syncverify.kernels.config import KernelConfig
from syncverify.kernels.gemm_all_reduce import all_reduce_arguments, gemm_all_reduce_kernel
from syncverify.kernels.heap import Buffer
from syncverify.protocols import load_protocol, rules

BLOCK = 16  # the smallest tile the kernel's config accepts
THREADS_PER_CTA = 2  # model threads per CTA, as the protocol check's default (2 shows barrier bugs)


def _warp_selections(protocol: str) -> list:
    p = load_protocol(protocol)
    return [chosen for section in rules.SECTIONS for s in rules.section_steps(p, section) if s.op == "barrier"
            for chosen in (s.warps, s.arrive) if chosen is not None]


def threads_per_cta(protocol: str) -> int:
    """Model threads per CTA for ``protocol``: the protocol check's rule
    (``syncverify.scenarios.build.warp_threads``): 2, raised until each warp selection of a
    barrier step is whole model threads (FA3's ``arrive = "1-7"``: one per warp)."""
    return rules.model_threads_per_cta(THREADS_PER_CTA, _warp_selections(protocol))


def num_warps(protocol: str) -> int:
    """The kernel's warps: a barrier step that selects warps names warps of an 8-warp CTA."""
    return rules.KERNEL_WARPS if _warp_selections(protocol) else 4


def all_reduce_harness(protocol: str, *, tiles: int = 1):
    """A harness (``sv`` -> None, one call) for the all-reduce kernel with ``protocol`` compiled in."""

    def harness(sv):
        W = sv.world_size
        config = KernelConfig(kernel="all-reduce", world_size=W, m=tiles * BLOCK, n=BLOCK, k=W * BLOCK, block_m=BLOCK,
                              block_n=BLOCK, block_k=BLOCK, gemm_sms=1, comm_sms=1, dtype="fp32", virtual=False,
                              table=True, interpret=False, loads="pointer", num_warps=num_warps(protocol), num_stages=1)
        built = build(load_protocol(protocol), config)
        plan = built.plan
        heap = {name: sv.heap.zeros(shape, dtype, name=name) for name, shape, dtype in (
            ("partial", (plan.slots * config.m * config.n,), torch.float32),
            ("out", (config.m * config.n,), torch.float32),
            ("locks", (plan.slots * len(plan.locks) * config.tiles,), torch.int32))}
        tables = {name: torch.tensor([b.on(r).data_ptr() for r in range(W)], dtype=torch.int64)
                  for name, b in heap.items()}
        g = torch.Generator().manual_seed(0)
        for r in range(W):
            A = torch.randint(-2, 3, (1, config.m, config.k_per_rank), generator=g).float()
            B = torch.randint(-2, 3, (1, config.k_per_rank, config.n), generator=g).float()
            status = torch.zeros((W, 2 * config.tiles, 4), dtype=torch.int32)
            views = {name: Buffer(b.on(r), tables[name], 0) for name, b in heap.items()}
            args, meta = all_reduce_arguments(built, views, A, B, status, rank=r)
            sv.launch(gemm_all_reduce_kernel, (config.grid,), *args, rank=r, stream="main", **meta)
        sv.host_barrier()
        sv.expect_written(heap["out"])

    harness.__name__ = f"all_reduce[{protocol}]" if tiles == 1 else f"all_reduce[{protocol}, {tiles} tiles]"
    return harness
