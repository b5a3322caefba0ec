"""Poll shapes our fused kernels use, as small kernels with harnesses (tests/test_frontend_lift.py).

Each kernel is the smallest one showing one lifting rule: the polls of two flags in turn through
one helper (``from = "each"``), a CAS poll that resets what it waits for, and a consumer that never
writes what the host expects.
"""

import torch
import triton
import triton.language as tl

# ----- two flags polled in turn through one helper ---------------------------------------------

@triton.jit
def _poll(ptr):
    """One helper polls every flag: two polls in a row are at one line, with nothing in between."""
    while tl.atomic_add(ptr, 0, sem="acquire", scope="gpu") != 1:
        pass


@triton.jit
def two_flags(data_ptr, flags_ptr, out_ptr, BLOCK: tl.constexpr, FLAGS: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    if pid == 0:  # consumer: waits for every producer's flag, then reads every producer's block
        for f in tl.static_range(FLAGS):
            _poll(flags_ptr + f)
        total = tl.load(data_ptr + offs)
        for f in tl.static_range(1, FLAGS):
            total += tl.load(data_ptr + f * BLOCK + offs)
        tl.store(out_ptr + offs, total)
    else:  # producer pid - 1: its block, a CTA barrier, its flag
        tl.store(data_ptr + (pid - 1) * BLOCK + offs, offs + pid)
        tl.debug_barrier()
        tl.atomic_xchg(flags_ptr + pid - 1, 1, sem="release", scope="gpu")


def two_flags_harness(sv):
    data = sv.heap.zeros((2 * 8,), torch.int32)
    flags = sv.heap.zeros((2,), torch.int32)
    out = sv.heap.zeros((8,), torch.int32)
    sv.launch(two_flags, (3,), data.on(0), flags.on(0), out.on(0), BLOCK=8, FLAGS=2, rank=0)
    sv.expect_written(out.on(0))


# ----- a CAS poll that resets the counter it waits for (seed 000's first attempt) ----------------

@triton.jit
def cas_reset(data_ptr, counter_ptr, out_ptr, BLOCK: tl.constexpr, LATE: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    if pid == 0:  # consumer: CAS(1 -> 0) until it reads 1 (a failed poll reads 0 and writes nothing)
        while tl.atomic_cas(counter_ptr, 1, 0, sem="acquire", scope="gpu") < 1:
            pass
        tl.store(out_ptr + offs, tl.load(data_ptr + offs))
    else:
        if not LATE:
            tl.store(data_ptr + offs, offs + 1)
        tl.debug_barrier()
        tl.atomic_add(counter_ptr, 1, sem="release", scope="gpu")
        if LATE:
            tl.store(data_ptr + offs, offs + 1)  # BUG: after the signal


def _cas_reset(sv, late: bool):
    data, counter, out = sv.heap.zeros((8,), torch.int32), sv.heap.zeros((1,), torch.int32), sv.heap.zeros((8,), torch.int32)
    sv.launch(cas_reset, (2,), data.on(0), counter.on(0), out.on(0), BLOCK=8, LATE=late, rank=0)
    sv.expect_written(out.on(0))


def cas_reset_harness(sv):
    _cas_reset(sv, late=False)


def cas_reset_late_harness(sv):
    _cas_reset(sv, late=True)


# ----- a consumer that never gets to write what the host expects ---------------------------------

@triton.jit
def never_signalled(flag_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    while tl.atomic_add(flag_ptr, 0, sem="acquire", scope="gpu") == 0:  # no one sets it
        pass
    tl.store(out_ptr + offs, offs)


def never_signalled_harness(sv):
    """A big output (more elements than the explorer's steps per thread) the hanging kernel never writes."""
    flag = sv.heap.zeros((1,), torch.int32)
    out = sv.heap.zeros((1024,), torch.int32)
    sv.launch(never_signalled, (1,), flag.on(0), out.on(0), BLOCK=1024, rank=0)
    sv.expect_written(out.on(0))
