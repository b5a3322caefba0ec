"""Kernels that deadlock when their grid exceeds what the GPU keeps resident (issue 27).

Two patterns the reports show, each as small as it gets, every wait bounded:

* ``consumers_first_kernel``: programs ``pid + PID_OFFSET < N_CONSUMERS`` are consumers that spin
  (acquire) on their producer's flag; the rest are producers that store a value and release the
  flag. With the consumers at the low ``blockIdx`` (or launched first, on another stream, as the
  seeds' one-shot all-reduce does with its GEMM and communication kernels), they take the SMs
  first: once ``N_CONSUMERS`` reaches the GPU's resident capacity, every slot is held by a
  spinning consumer and no producer ever runs. The model (``syncverify check
  examples/residency/harness.py::consumers_first --resident R``) says: deadlock iff
  ``N_CONSUMERS >= R``, in any admission order.
* ``grid_barrier_kernel``: every program arrives on one counter and waits until all ``GRID``
  have (the same-``blockIdx`` barrier of NVIDIA/TensorRT-LLM #18834, the persistent grids that
  ROCm/aiter #4977 clamps): it deadlocks iff ``GRID`` exceeds the resident capacity.

**Bounded.** A wait gives up after ``TIMEOUT_NS`` of ``%globaltimer`` on the GPU (``USE_TIMER``),
or ``MAX_SPINS`` polls in Triton's interpreter (no inline PTX there), and records that it timed
out: a deadlock is a count of timed-out programs, never a hung machine. ``MAX_SPINS = 0`` polls
without a budget: the build the model checks (its explorer cuts a spin that makes no progress,
as the front end does for ``kernels/steps.UNBOUNDED_WAITS``); never launch that one on a GPU.
"""

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from syncverify.explore.placement import Costs, blocked, can_block


@triton.jit
def now_ns(USE_TIMER: tl.constexpr):
    """``%globaltimer`` in ns on the GPU; 0 in the interpreter (which runs no inline PTX)."""
    if USE_TIMER:
        return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64,
                                         is_pure=False, pack=1)
    else:
        return tl.zeros((), dtype=tl.int64)


@triton.jit
def wait_at_least(ptr, target, MAX_SPINS: tl.constexpr, TIMEOUT_NS: tl.constexpr, USE_TIMER: tl.constexpr):
    """Poll ``*ptr`` with acquire loads (gpu scope) until it is at least ``target``; 1 if the budget
    ran out first, else 0. The acquire orders the caller's later reads after the write it saw."""
    start = now_ns(USE_TIMER)
    seen = tl.atomic_add(ptr, 0, sem="acquire", scope="gpu")
    spins = 0
    gave_up = 0
    while (seen < target) & (gave_up == 0):
        seen = tl.atomic_add(ptr, 0, sem="acquire", scope="gpu")
        if USE_TIMER:
            gave_up = (now_ns(USE_TIMER) - start > TIMEOUT_NS).to(tl.int32)
        elif MAX_SPINS > 0:
            spins += 1
            gave_up = (spins >= MAX_SPINS).to(tl.int32)
    return gave_up


@triton.jit
def sm_id(USE_TIMER: tl.constexpr):
    """``%smid``, the SM this program runs on, on the GPU; 0 in the interpreter (no inline PTX)."""
    if USE_TIMER:
        return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
    else:
        return tl.zeros((), dtype=tl.int32)


@triton.jit
def consume_or_produce(flags_ptr, data_ptr, out_ptr, timed_out_ptr, N_CONSUMERS, PID_OFFSET,
                       MAX_SPINS: tl.constexpr, TIMEOUT_NS: tl.constexpr, USE_TIMER: tl.constexpr):
    """Program ``tl.program_id(0)``'s part of :func:`consumers_first_kernel` (its docstring says
    which); returns its role number."""
    # ----- role mapping
    pid = (tl.program_id(0) + PID_OFFSET) % (2 * N_CONSUMERS)
    if pid < N_CONSUMERS:
        # ----- consumer: wait for the flag, then read what it announces
        gave_up = wait_at_least(flags_ptr + pid, 1, MAX_SPINS, TIMEOUT_NS, USE_TIMER)
        tl.store(out_ptr + pid, tl.load(data_ptr + pid))
        tl.store(timed_out_ptr + pid, gave_up)
    else:
        # ----- producer: the value, then the release flag that announces it
        i = pid - N_CONSUMERS
        tl.store(data_ptr + i, i + 1)
        tl.atomic_xchg(flags_ptr + i, 1, sem="release", scope="gpu")
    return pid


@triton.jit(do_not_specialize=["N_CONSUMERS", "PID_OFFSET"])  # one binary for every launch of it
def consumers_first_kernel(
    # pointers
    flags_ptr, data_ptr, out_ptr, timed_out_ptr,
    # sizes
    N_CONSUMERS, PID_OFFSET,
    # meta-parameters: the wait's budget
    MAX_SPINS: tl.constexpr, TIMEOUT_NS: tl.constexpr, USE_TIMER: tl.constexpr,
):
    """Consumer ``i`` waits for producer ``i``. Role ``pid + PID_OFFSET`` (mod ``2 * N_CONSUMERS``):
    below ``N_CONSUMERS`` a consumer, else producer ``pid - N_CONSUMERS``. ``PID_OFFSET = 0`` puts
    the consumers at the low blockIdx; ``N_CONSUMERS`` puts the producers there (or, with a grid of
    ``N_CONSUMERS``, makes a launch of producers only)."""
    consume_or_produce(flags_ptr, data_ptr, out_ptr, timed_out_ptr, N_CONSUMERS, PID_OFFSET,
                       MAX_SPINS, TIMEOUT_NS, USE_TIMER)


@triton.jit(do_not_specialize=["N_CONSUMERS", "PID_OFFSET"])
def placed_consumers_kernel(
    # pointers
    flags_ptr, data_ptr, out_ptr, timed_out_ptr, sm_ptr,
    # sizes
    N_CONSUMERS, PID_OFFSET,
    # meta-parameters: the wait's budget
    MAX_SPINS: tl.constexpr, TIMEOUT_NS: tl.constexpr, USE_TIMER: tl.constexpr,
):
    """:func:`consumers_first_kernel`, each program also writing the SM it ran on to
    ``sm_ptr[role]``: the placement the GPU script feeds to the per-SM model."""
    role = consume_or_produce(flags_ptr, data_ptr, out_ptr, timed_out_ptr, N_CONSUMERS, PID_OFFSET,
                              MAX_SPINS, TIMEOUT_NS, USE_TIMER)
    tl.store(sm_ptr + role, sm_id(USE_TIMER))


@triton.jit(do_not_specialize=["N_CONSUMERS", "PID_OFFSET"])
def stamped_consumers_kernel(
    # pointers
    flags_ptr, data_ptr, out_ptr, timed_out_ptr, sm_ptr, start_ptr,
    # sizes
    N_CONSUMERS, PID_OFFSET,
    # meta-parameters: the wait's budget
    MAX_SPINS: tl.constexpr, TIMEOUT_NS: tl.constexpr, USE_TIMER: tl.constexpr,
):
    """:func:`placed_consumers_kernel`, each program also writing when it started
    (``%globaltimer``, int64 ns; 0 in the interpreter) to ``start_ptr[role]``: whether the
    producers ran while the consumers spun, or only after they gave up
    (``benchmarks/residency_first_launch.py``)."""
    start = now_ns(USE_TIMER)
    role = consume_or_produce(flags_ptr, data_ptr, out_ptr, timed_out_ptr, N_CONSUMERS, PID_OFFSET,
                              MAX_SPINS, TIMEOUT_NS, USE_TIMER)
    tl.store(sm_ptr + role, sm_id(USE_TIMER))
    tl.store(start_ptr + role, start)


@triton.jit(do_not_specialize=["DURATION_NS"])
def spin_for_kernel(stamps_ptr, DURATION_NS, USE_TIMER: tl.constexpr):
    """A sleep measured in ns of ``%globaltimer``, not in clock cycles (``torch.cuda._sleep``'s
    length depends on the SM clock): one program spins ``DURATION_NS``, then writes its start,
    end and SM to ``stamps_ptr[0..2]`` (int64). Launch it with ``num_warps=1``. In the
    interpreter (no inline PTX) it does not spin and writes zeros."""
    start = now_ns(USE_TIMER)
    now = start
    if USE_TIMER:
        while now - start < DURATION_NS:
            now = now_ns(USE_TIMER)
    tl.store(stamps_ptr, start)
    tl.store(stamps_ptr + 1, now)
    tl.store(stamps_ptr + 2, sm_id(USE_TIMER).to(tl.int64))


@triton.jit
def marker_kernel(started_ptr, sm_ptr, USE_TIMER: tl.constexpr):
    """A kernel unlike the others (launch it with ``num_warps=1``: one warp, no shared memory, like
    ``torch.cuda._sleep``'s): program ``i`` writes 1 to ``started[i]`` and its SM to ``sm[i]``.
    Stream-ordered before a launch, it shows whether a CTA of a different kernel got a slot."""
    pid = tl.program_id(0)
    tl.store(sm_ptr + pid, sm_id(USE_TIMER))
    tl.store(started_ptr + pid, 1)


@triton.jit
def copy_kernel(src_ptr, dst_ptr):
    """Program ``i`` copies ``src[i]`` to ``dst[i]``, with no flag: a kernel that counts on running
    after the one that wrote ``src`` (stream order, or PDL with ``griddepcontrol.wait``)."""
    pid = tl.program_id(0)
    tl.store(dst_ptr + pid, tl.load(src_ptr + pid))


@triton.jit
def write_then_trigger_kernel(data_ptr):
    """A PDL primary (NVIDIA/TensorRT-LLM #14537's shape): program ``i`` writes ``data[i]``, then
    runs ``griddepcontrol.launch_dependents``, which lets the dependent grid be scheduled and
    makes nothing visible to it."""
    pid = tl.program_id(0)
    tl.store(data_ptr + pid, pid + 1)
    gdc_launch_dependents()


@triton.jit
def dependent_copy_kernel(src_ptr, dst_ptr, WAIT: tl.constexpr):
    """:func:`copy_kernel` as a PDL dependent: with ``WAIT``, ``griddepcontrol.wait`` first (the
    primary grid complete and its writes visible); without, it reads what the primary may not
    have written yet (#14537: visibility assumed from ``launch_dependents``)."""
    if WAIT:
        gdc_wait()
    pid = tl.program_id(0)
    tl.store(dst_ptr + pid, tl.load(src_ptr + pid))


@triton.jit
def count_when_done_kernel(data_ptr, count_ptr):
    """lightseekorg/tokenspeed #351's producer, a PDL primary: ``launch_dependents`` first (the
    consumer may be scheduled at once), then program ``i`` writes ``data[i]`` and adds 1 to the
    completion counter with a release."""
    gdc_launch_dependents()
    pid = tl.program_id(0)
    tl.store(data_ptr + pid, pid + 1)
    tl.atomic_add(count_ptr, 1, sem="release", scope="gpu")


@triton.jit
def wait_count_kernel(count_ptr, data_ptr, out_ptr, TARGET,
                      MAX_SPINS: tl.constexpr, TIMEOUT_NS: tl.constexpr, USE_TIMER: tl.constexpr):
    """The consumer, a PDL dependent that relies on the counter (no ``gdc_wait``): wait until it
    reaches ``TARGET`` (acquire), then copy ``data``. Replayed in a CUDA graph, a counter nothing
    resets is already at ``TARGET`` from the previous replay: the wait passes before this
    replay's producers wrote (#351)."""
    pid = tl.program_id(0)
    wait_at_least(count_ptr, TARGET, MAX_SPINS, TIMEOUT_NS, USE_TIMER)
    tl.store(out_ptr + pid, tl.load(data_ptr + pid))


@triton.jit
def grid_barrier_kernel(
    # pointers
    count_ptr, timed_out_ptr,
    # sizes
    GRID,
    # meta-parameters: the wait's budget
    MAX_SPINS: tl.constexpr, TIMEOUT_NS: tl.constexpr, USE_TIMER: tl.constexpr,
):
    """Every program arrives (release add) and waits until all ``GRID`` programs have."""
    pid = tl.program_id(0)
    tl.atomic_add(count_ptr, 1, sem="release", scope="gpu")
    gave_up = wait_at_least(count_ptr, GRID, MAX_SPINS, TIMEOUT_NS, USE_TIMER)
    tl.store(timed_out_ptr + pid, gave_up)


def deadlocks(pattern: str, size: int, capacity: int) -> bool:
    """The model's answer for these kernels at any size: can ``pattern`` deadlock with ``size``
    (the grid of ``grid_barrier``, the consumers of ``consumers_first``, as many producers) when
    ``capacity`` CTAs fit on the GPU at once? The same in ``any`` and ``index`` admission order.
    ``tests/test_residency.py`` pins it against ``syncverify check ... --resident R`` at small
    sizes; the GPU script (``benchmarks/residency_gpu.py``) uses it at the GPU's capacity.

    >>> deadlocks("grid_barrier", 3, 2), deadlocks("consumers_first", 1, 2), deadlocks("consumers_first", 2, 2)
    (True, False, True)
    """
    if pattern == "grid_barrier":
        return size > capacity  # the last program to arrive must be resident with all the others
    if pattern == "consumers_first":
        return size >= capacity  # consumers can hold every slot, and a producer needs one
    raise ValueError(f"unknown pattern {pattern!r}: grid_barrier or consumers_first")


def deadlocks_per_sm(consumers: int, waiting: list[str], costs: Costs,
                     seen: list[int] | None = None) -> bool:
    """The per-SM model's answer for the two-stream pattern at any size: ``consumers`` CTAs of
    kernel ``consumers`` resident and spinning, and on the other stream the kernels ``waiting``
    in stream order (a sleep or marker kernel, then the producers' kernel). Each in turn needs an
    SM with room for its footprint (the ones before it exit, and leave the consumers where they
    are); once one producer runs, every consumer it frees makes room. Can the consumers be placed
    so that one of them finds none (``seen``: the consumers per SM the GPU showed, ``%smid``;
    None: any placement, the adversarial answer)? Module loading is not in it (the GPU script adds
    a first launch under lazy loading). ``tests/test_placement.py`` pins it against the model's
    search, ``syncverify check ... --resident R --sms S``.

    >>> costs = Costs.from_occupancy(2, {"wide": 1}, 2)   # 2 SMs, 2 CTAs each; a "wide" CTA takes a whole SM
    >>> deadlocks_per_sm(3, ["sleep", "consumers"], costs), deadlocks_per_sm(2, ["sleep", "wide"], costs)
    (False, True)
    >>> deadlocks_per_sm(2, ["wide"], costs, seen=[2]), deadlocks_per_sm(4, ["consumers"], costs)
    (False, True)
    """
    for kernel in waiting:
        if (can_block(costs, ["consumers"] * consumers, kernel) if seen is None
                else blocked(costs, [("consumers",) * k for k in seen], kernel)):
            return True
    return False
