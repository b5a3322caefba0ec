"""Harnesses for ``spin_grid.py``: kernels that hang when their grid exceeds residency (issue 27).

Each is checked with a resident capacity (``sv.resident`` below, or ``--resident R`` on the
command line) and the model says whether some admission of CTAs leaves every slot to a CTA that
waits forever. ``EXPECTED`` is the table the tests and ``docs/residency.md`` use:

* ``consumers_first`` (one grid: 2 consumers at blockIdx 0-1, their producers at 2-3): with 2
  CTAs resident the two consumers can hold both slots (**hang**); with 3 a slot is always left
  for a producer (SAFE). ``spin_grid.deadlocks("consumers_first", n, R)``: n >= R.
* ``two_streams`` (the seeds' one-shot all-reduce: the communication kernel on stream ``comm``,
  the GEMM kernel that produces on stream ``gemm``, concurrent; 2 CTAs each): the same verdicts,
  because kernels on different streams share the GPU's slots and either may take them first.
* ``producers_first`` (one grid, producers at blockIdx 0-1): a **hang** with 2 slots in ``any``
  order (CUDA promises no order), SAFE with ``--resident-order index`` (the order the hardware
  dispatches in practice): the model says which assumption a kernel leans on.
* ``grid_barrier`` (2 programs meet on one counter): **hang** with 1 slot, SAFE with 2.
* ``other_kernel_first`` / ``other_kernel_loaded`` (GPU runs 1-2's rows that disagreed, small:
  one SM of 2 slots, ``sv.resident(2, sms=1, lazy_loading=True)``): a consumer on stream
  ``comm``; on stream ``gemm`` a different kernel first (``marker_kernel``, as
  ``torch.cuda._sleep`` was), then the producers. The marker fits in the free slot, but its first
  launch loads its module, which waits for the spinning consumer: **hang**. With the marker
  ``loaded`` (warmed up): SAFE, as the GPU completed once the sleep kernel was loaded.
* ``producers_elsewhere`` (per SM, no lazy loading): the producers as a kernel of their own fit
  beside the consumer: SAFE, as GPU run 3 saw.
* ``wide_producers`` (2 SMs of 2 consumer slots; a producer CTA takes a whole SM,
  ``occupancy={producers_elsewhere_kernel: 1}``): 2 consumers, one per SM, leave 2 slots free and
  no SM with room for a producer: **hang** per SM, SAFE with one pool of 4 slots.
* ``warmed_up_other_options`` / ``warmed_up_same_options`` (GPU run 4's unexplained row, small;
  run 5 isolated it): ``producers_elsewhere_kernel`` warmed up by a launch, then one consumer on
  ``comm`` and one producer of it on ``gemm`` (one SM of 2 slots, lazy loading). Warmed up without
  ``num_warps`` and launched with ``num_warps=4``: two binaries to Triton (its cache key holds
  the launch options as passed), so the producer's is a first launch behind the spinning
  consumer: **hang**. Warmed up with ``num_warps=4`` too: SAFE.
* ``graph_shared_counter`` / ``graph_counter_reset`` (lightseekorg/tokenspeed #351's shape): a
  graph captured with ``sv.graph()`` holds the producers (``count_when_done_kernel``, a PDL
  primary that triggers first) and the consumer (``wait_count_kernel``, launched with
  ``launch_pdl=True``, waiting for a completion counter instead of ``gdc_wait``), replayed twice.
  Nothing resets the counter: replay 1's wait is satisfied by replay 0's count and the copy reads
  replay 0's data (UNSAFE: **stale-read**). With ``zero_`` of the counter captured first in the
  graph: SAFE.
* ``pdl_copy`` / ``pdl_copy_no_wait`` (NVIDIA/TensorRT-LLM #14537's shape, the PDL read from the
  kernels): ``write_then_trigger_kernel`` writes ``data`` and then runs
  ``gdc_launch_dependents()``; ``dependent_copy_kernel`` (no flag) copies it, launched as its
  programmatic dependent (``launch_pdl=True``, Triton's launch option). With ``gdc_wait()`` first
  in the copy: SAFE, even with one slot (the copy is scheduled only once every producer has
  triggered or exited). Without it: UNSAFE, **race** and **unwritten-read**:
  ``launch_dependents`` lets the copy start, and makes nothing visible.

Run: ``syncverify check examples/residency/harness.py::consumers_first --resident 2`` (UNSAFE:
hang, naming the resident consumers, the flags they poll, and the producers that never became
resident), ``--resident 3`` (SAFE); ``--resident-sweep`` prints the largest capacity that can
deadlock and the smallest from which none does.
"""

import torch

import syncverify
import triton
import triton.language as tl
from spin_grid import (consume_or_produce, consumers_first_kernel, count_when_done_kernel, dependent_copy_kernel,
                       grid_barrier_kernel, marker_kernel, wait_count_kernel, write_then_trigger_kernel)

N = 2  # consumers (and producers): the smallest that shows a pattern the GPU shows at 132 x occupancy

#: harness -> {resident capacity: (order, safe?)}: what the model says at each capacity.
EXPECTED = {
    "consumers_first": {2: ("any", False), 3: ("any", True)},
    "two_streams": {2: ("any", False), 3: ("any", True)},
    "producers_first": {2: ("any", False), 3: ("any", True)},
    "producers_first_index": {2: ("index", True)},
    "grid_barrier": {1: ("any", False), 2: ("any", True)},
    "pdl_copy": {1: ("any", True)},
    "pdl_copy_no_wait": {4: ("any", False)},
    "other_kernel_first": {2: ("any", True)},  # one pool, no module loading: optimistic (GPU runs 1-2 deadlocked)
    "wide_producers": {4: ("any", True)},  # one pool: optimistic (no SM has room for a producer)
}
#: harness -> (safe?, violation kinds): with every CTA running (no residency).
EXPECTED_FAIR = {
    "graph_shared_counter": (False, ("race", "stale-read")),
    "graph_counter_reset": (True, ()),
}
#: harness -> safe? with its own ``sv.resident(..., sms=..., lazy_loading=...)``: per SM, module loading.
EXPECTED_PER_SM = {
    "other_kernel_first": False,
    "other_kernel_loaded": True,
    "producers_elsewhere": True,
    "wide_producers": False,
    "warmed_up_other_options": False,
    "warmed_up_same_options": True,
}
#: harness -> the violation kinds of its UNSAFE rows (else a hang).
KINDS = {"pdl_copy_no_wait": ("race", "unwritten-read")}
UNBOUNDED = dict(MAX_SPINS=0, TIMEOUT_NS=0, USE_TIMER=False)  # the model cuts spins itself


def _buffers(sv):
    return (sv.heap.zeros((N,), torch.int32), sv.heap.zeros((N,), torch.int32),
            sv.heap.zeros((N,), torch.int32), sv.heap.zeros((N,), torch.int32))


@syncverify.harness
def consumers_first(sv):
    """One grid: consumers at the low blockIdx, each waits for a producer above them."""
    flags, data, out, timed_out = _buffers(sv)
    sv.resident(2)

    def call(k):
        sv.launch(consumers_first_kernel, (2 * N,), flags.on(0), data.on(0), out.on(0), timed_out.on(0),
                  N, 0, rank=0, **UNBOUNDED)
        sv.synchronize(rank=0)
        sv.expect_written(out.on(0))
    return call


@syncverify.harness
def two_streams(sv):
    """The seeds' pattern: consumers in one kernel on ``comm``, producers in another on ``gemm``."""
    flags, data, out, timed_out = _buffers(sv)
    sv.resident(2)

    def call(k):
        sv.launch(consumers_first_kernel, (N,), flags.on(0), data.on(0), out.on(0), timed_out.on(0),
                  N, N, rank=0, stream="gemm", **UNBOUNDED)  # producers (issued first: the interpreter
        sv.launch(consumers_first_kernel, (N,), flags.on(0), data.on(0), out.on(0), timed_out.on(0),
                  N, 0, rank=0, stream="comm", **UNBOUNDED)  # runs launches in issue order)
        sv.synchronize(rank=0)
        sv.expect_written(out.on(0))
    return call


def _producers_first(sv, order: str):
    flags, data, out, timed_out = _buffers(sv)
    sv.resident(2, order=order)

    def call(k):
        # PID_OFFSET = N: blockIdx 0..N-1 are the producers, N..2N-1 the consumers
        sv.launch(consumers_first_kernel, (2 * N,), flags.on(0), data.on(0), out.on(0), timed_out.on(0),
                  N, N, rank=0, **UNBOUNDED)
        sv.synchronize(rank=0)
        sv.expect_written(out.on(0))
    return call


@syncverify.harness
def producers_first(sv):
    """One grid, producers at the low blockIdx: safe only if CTAs become resident in that order."""
    return _producers_first(sv, "any")


@syncverify.harness
def producers_first_index(sv):
    """``producers_first`` assuming CTAs become resident in blockIdx order (not guaranteed)."""
    return _producers_first(sv, "index")


@syncverify.harness
def grid_barrier(sv):
    """Two programs arrive on one counter and wait for both."""
    count = sv.heap.zeros((1,), torch.int32)
    timed_out = sv.heap.zeros((2,), torch.int32)
    sv.resident(1)

    def call(k):
        sv.launch(grid_barrier_kernel, (2,), count.on(0), timed_out.on(0), 2, rank=0, **UNBOUNDED)
        sv.synchronize(rank=0)
        sv.expect_written(timed_out.on(0))
    return call


def _pdl_copy(sv, wait: bool):
    data, out = sv.heap.zeros((N,), torch.int32), sv.heap.zeros((N,), torch.int32)
    sv.resident(1)

    def call(k):
        # the primary writes data and triggers; the copy is its programmatic dependent
        sv.launch(write_then_trigger_kernel, (N,), data.on(0), rank=0)
        sv.launch(dependent_copy_kernel, (N,), data.on(0), out.on(0), rank=0, WAIT=wait, launch_pdl=True)
        sv.synchronize(rank=0)
        sv.expect_written(out.on(0))
    return call


@syncverify.harness
def pdl_copy(sv):
    """The copy kernel launched with PDL, ``griddepcontrol.wait`` first: the producers' writes are visible."""
    return _pdl_copy(sv, True)


@syncverify.harness
def pdl_copy_no_wait(sv):
    """The same without ``griddepcontrol.wait``: ``launch_dependents`` gives no visibility."""
    return _pdl_copy(sv, False)



@triton.jit
def producers_elsewhere_kernel(flags_ptr, data_ptr, out_ptr, timed_out_ptr, N_CONSUMERS, PID_OFFSET,
                               MAX_SPINS: tl.constexpr, TIMEOUT_NS: tl.constexpr, USE_TIMER: tl.constexpr):
    """``consumers_first_kernel``'s code as a kernel of its own (another compiled function)."""
    consume_or_produce(flags_ptr, data_ptr, out_ptr, timed_out_ptr, N_CONSUMERS, PID_OFFSET,
                       MAX_SPINS, TIMEOUT_NS, USE_TIMER)


def _one_consumer_then_other_kernel(sv, marker: bool, producers, *, lazy: bool, loaded: tuple = ()):
    """One consumer on ``comm``; on ``gemm`` the marker kernel (if ``marker``), then one producer of
    ``producers``; one SM holding two CTAs of one kernel."""
    flags, data, out, timed_out = (sv.heap.zeros((1,), torch.int32) for _ in range(4))
    started, sm = sv.heap.zeros((1,), torch.int32), sv.heap.zeros((1,), torch.int32)
    sv.resident(2, sms=1, lazy_loading=lazy, loaded=loaded)

    def call(k):
        sv.launch(consumers_first_kernel, (1,), flags.on(0), data.on(0), out.on(0), timed_out.on(0),
                  1, 0, rank=0, stream="comm", **UNBOUNDED)
        if marker:
            sv.launch(marker_kernel, (1,), started.on(0), sm.on(0), rank=0, stream="gemm", USE_TIMER=False,
                      num_warps=1)
        sv.launch(producers, (1,), flags.on(0), data.on(0), out.on(0), timed_out.on(0),
                  1, 1, rank=0, stream="gemm", **UNBOUNDED)
        sv.synchronize(rank=0)
        sv.expect_written(out.on(0))
    return call


@syncverify.harness
def other_kernel_first(sv):
    """GPU runs 1-2's disagreeing rows, small: another kernel's first launch behind the consumer."""
    return _one_consumer_then_other_kernel(sv, True, consumers_first_kernel, lazy=True)


@syncverify.harness
def other_kernel_loaded(sv):
    """The same with that kernel loaded beforehand (warmed up)."""
    return _one_consumer_then_other_kernel(sv, True, consumers_first_kernel, lazy=True, loaded=(marker_kernel,))


@syncverify.harness
def producers_elsewhere(sv):
    """The producers as another kernel: its CTA fits beside the consumer."""
    return _one_consumer_then_other_kernel(sv, False, producers_elsewhere_kernel, lazy=False)


@syncverify.harness
def wide_producers(sv):
    """Producers whose CTA takes a whole SM, after two consumers that may sit one per SM."""
    flags, data, out, timed_out = _buffers(sv)
    sv.resident(4, sms=2, occupancy={producers_elsewhere_kernel: 1})

    def call(k):
        sv.launch(consumers_first_kernel, (N,), flags.on(0), data.on(0), out.on(0), timed_out.on(0),
                  N, 0, rank=0, stream="comm", **UNBOUNDED)
        sv.launch(producers_elsewhere_kernel, (N,), flags.on(0), data.on(0), out.on(0), timed_out.on(0),
                  N, N, rank=0, stream="gemm", **UNBOUNDED)
        sv.synchronize(rank=0)
        sv.expect_written(out.on(0))
    return call


def _warmed_up_then_launched(sv, warm_up: dict, launch: dict):
    """GPU run 4's row 9 and run 5, small: ``producers_elsewhere_kernel`` warmed up by a launch
    with the options ``warm_up`` (its own buffers, the host waiting for it), then one consumer on
    ``comm`` and one producer of that kernel on ``gemm`` launched with ``launch``; one SM of two
    slots, lazy loading. Options that differ make another binary (Triton keys its cache by the
    options as passed), whose first launch waits for the spinning consumer."""
    flags, data, out, timed_out = (sv.heap.zeros((1,), torch.int32) for _ in range(4))
    spare = [sv.heap.zeros((1,), torch.int32) for _ in range(4)]
    sv.resident(2, sms=1, lazy_loading=True)

    def call(k):
        sv.launch(producers_elsewhere_kernel, (1,), *(b.on(0) for b in spare), 1, 1, rank=0, stream="gemm",
                  **warm_up, **UNBOUNDED)
        sv.synchronize(rank=0)
        sv.launch(consumers_first_kernel, (1,), flags.on(0), data.on(0), out.on(0), timed_out.on(0),
                  1, 0, rank=0, stream="comm", **UNBOUNDED)
        sv.launch(producers_elsewhere_kernel, (1,), flags.on(0), data.on(0), out.on(0), timed_out.on(0),
                  1, 1, rank=0, stream="gemm", **launch, **UNBOUNDED)
        sv.synchronize(rank=0)
        sv.expect_written(out.on(0))
    return call


@syncverify.harness
def warmed_up_other_options(sv):
    """Run 4's row: the warm-up without ``num_warps``, the producers with ``num_warps=4``."""
    return _warmed_up_then_launched(sv, {}, {"num_warps": 4})


@syncverify.harness
def warmed_up_same_options(sv):
    """The fix: warm up with the options the producers are launched with."""
    return _warmed_up_then_launched(sv, {"num_warps": 4}, {"num_warps": 4})


def _graph_counter(sv, reset: bool):
    """Producers and a PDL consumer on one completion counter, captured once and replayed twice."""
    n = 1  # one producer and one consumer per replay show it
    data, out, count = sv.heap.zeros((n,), torch.int32), sv.heap.zeros((n,), torch.int32), sv.heap.zeros((1,), torch.int32)
    with sv.graph() as g:
        if reset:
            sv.zero_(count.on(0), rank=0)  # the fix: the graph resets its own counter
        sv.launch(count_when_done_kernel, (n,), data.on(0), count.on(0), rank=0)
        sv.launch(wait_count_kernel, (n,), count.on(0), data.on(0), out.on(0), n, rank=0, launch_pdl=True,
                  **UNBOUNDED)
    g.replay(2)
    sv.synchronize(rank=0)
    sv.expect_written(out.on(0))


@syncverify.harness
def graph_shared_counter(sv):
    """tokenspeed #351: a completion counter shared by the replays of one graph."""
    _graph_counter(sv, False)


@syncverify.harness
def graph_counter_reset(sv):
    """The fix: the graph zeroes the counter before its producers."""
    _graph_counter(sv, True)
