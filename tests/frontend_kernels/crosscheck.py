"""Our own fused all-reduce kernel, a protocol compiled in, as a kernel front-end harness.

Issue 22, item 6: the same program checked two ways. :func:`all_reduce_harness` is
``crosscheck_scenarios.scenario_harness`` for the all-reduce kernel (one harness for the four
kernels): ``gemm_all_reduce_kernel`` launched once per rank with address tables on the front
end's symmetric heap, ``tiles`` tiles of one block (tile t is rank t % W's), one producer and one
consumer program per rank; the checker runs it under
:func:`syncverify.kernels.steps.unbounded_waits`. Every rank's C must be written by the call.

One tile by default. With more, the one producer and one consumer program per rank loop over
them, and the protocol check is given the same layout (``KernelConfig.model_layout``: no tiles
reduction where tiles share a CTA, whose barriers they reuse); two tiles explore 24 x 24
executions where one explores 24.
"""

from crosscheck_scenarios import THREADS_PER_CTA, num_warps, scenario_harness, threads_per_cta

__all__ = ["THREADS_PER_CTA", "all_reduce_harness", "num_warps", "threads_per_cta"]


def all_reduce_harness(protocol: str, *, tiles: int = 1):
    """A harness (``sv`` -> None, one call) for the all-reduce kernel with ``protocol`` compiled in."""
    harness = scenario_harness("all-reduce", protocol, tiles=tiles)
    harness.__name__ = f"all_reduce[{protocol}]" if tiles == 1 else f"all_reduce[{protocol}, {tiles} tiles]"
    return harness
