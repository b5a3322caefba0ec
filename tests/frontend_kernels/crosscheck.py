"""Our own fused all-reduce kernel, a protocol compiled in, as a kernel front-end harness.

Issue 22, item 6: the same program checked two ways. :func:`all_reduce_harness` is
``crosscheck_scenarios.scenario_harness`` for the all-reduce kernel (one harness for the four
kernels): ``gemm_all_reduce_kernel`` launched once per rank with address tables on the front
end's symmetric heap, W tiles of one block (tile t is rank t % W's), one producer and one
consumer program per rank; the checker runs it under
:func:`syncverify.kernels.steps.unbounded_waits`. Every rank's C must be written by the call.
"""

from crosscheck_scenarios import scenario_harness


def all_reduce_harness(protocol: str):
    """A harness (``sv`` -> None, one call) for the all-reduce kernel with ``protocol`` compiled in."""
    return scenario_harness("all-reduce", protocol)
