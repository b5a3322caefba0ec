"""NVSHMEM kernels in Triton-distributed's style for the kernel front end (tests/test_frontend_nvshmem.py).

Rank 0 puts two chunks of a tile into rank 1's copy with ``putmem_signal_nbi_block``; rank 1 waits
for chunk 0 and copies it out. With one cumulative ``SIGNAL_ADD`` counter waited for with
``CMP_GE 1`` (NVIDIA/nvshmem #84) the count may come from chunk 1: UNSAFE. With a signal per
chunk: SAFE. And a ``putmem_nbi_block`` followed by a ``signal_op`` needs ``quiet`` (or ``fence``)
between them.
"""

import torch
import triton
import triton.language as tl

from syncverify.frontend.devices import libshmem_device


@triton.jit
def ring_step(data_ptr, sig_ptr, out_ptr, RANK: tl.constexpr, CHUNK: tl.constexpr, PER_CHUNK: tl.constexpr):
    offs = tl.arange(0, CHUNK)
    if RANK == 0:  # producer: two chunks to rank 1
        for k in tl.static_range(2):
            sig = sig_ptr + k if PER_CHUNK else sig_ptr
            op = libshmem_device.NVSHMEM_SIGNAL_SET if PER_CHUNK else libshmem_device.NVSHMEM_SIGNAL_ADD
            libshmem_device.putmem_signal_nbi_block(data_ptr + k * CHUNK, data_ptr + k * CHUNK, CHUNK * 4, sig, 1,
                                                    op, 1)
    else:  # consumer: wait for chunk 0, copy it out
        if PER_CHUNK:
            libshmem_device.signal_wait_until(sig_ptr, libshmem_device.NVSHMEM_CMP_EQ, 1)
        else:
            libshmem_device.signal_wait_until(sig_ptr, libshmem_device.NVSHMEM_CMP_GE, 1)  # BUG: a count, not which
        tl.store(out_ptr + offs, tl.load(data_ptr + offs))


def _two_ranks(sv, kernel, data_size, signals, **meta):
    """Rank 0 produces into rank 1's copy, rank 1 consumes; what rank 1 copies out must be written."""
    data = sv.heap.zeros((data_size,), torch.int32)
    sig = sv.heap.zeros((signals,), torch.int32)
    out = sv.heap.zeros((4,), torch.int32)
    for rank in range(2):
        sv.launch(kernel, (1,), data.on(rank), sig.on(rank), out.on(rank), RANK=rank, **meta, rank=rank)
    sv.expect_written(out.on(1))


def _ring(sv, per_chunk):
    _two_ranks(sv, ring_step, 8, 2, CHUNK=4, PER_CHUNK=per_chunk)


def cumulative_signal(sv):
    _ring(sv, False)


def per_chunk_signal(sv):
    _ring(sv, True)


@triton.jit
def put_then_signal(data_ptr, sig_ptr, out_ptr, RANK: tl.constexpr, N: tl.constexpr, QUIET: tl.constexpr):
    offs = tl.arange(0, N)
    if RANK == 0:
        libshmem_device.putmem_nbi_block(data_ptr, data_ptr, N * 4, 1)
        if QUIET:
            libshmem_device.quiet()
        libshmem_device.signal_op(sig_ptr, 1, libshmem_device.NVSHMEM_SIGNAL_SET, 1)
    else:
        libshmem_device.signal_wait_until(sig_ptr, libshmem_device.NVSHMEM_CMP_EQ, 1)
        tl.store(out_ptr + offs, tl.load(data_ptr + offs))


def _put(sv, quiet):
    _two_ranks(sv, put_then_signal, 4, 1, N=4, QUIET=quiet)


def put_nbi_then_signal(sv):
    _put(sv, False)


def put_nbi_quiet_then_signal(sv):
    _put(sv, True)


# ----- a kernel boundary after a put with no quiet (syncverify.model.delivery: differs on purpose) --

@triton.jit
def put_only(data_ptr, N: tl.constexpr):
    libshmem_device.putmem_nbi_block(data_ptr, data_ptr, N * 4, 1)  # no quiet before the kernel ends


@triton.jit
def copy_out(data_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(data_ptr + offs))


def put_nbi_then_next_launch(sv):
    """Rank 0's kernel puts into rank 1's copy and ends without quiet; after a host barrier rank 1's
    next kernel reads it. The model completes deliveries at the kernel boundary (SAFE); NVSHMEM's
    specification completes them only by quiet or a host-side quiet/barrier on the stream."""
    data = sv.heap.zeros((4,), torch.int32)
    out = sv.heap.zeros((4,), torch.int32)
    sv.launch(put_only, (1,), data.on(0), N=4, rank=0)
    sv.host_barrier()
    sv.launch(copy_out, (1,), data.on(1), out.on(1), N=4, rank=1)
    sv.expect_written(out.on(1))
