"""Stream memory operations for the kernel front end (tests/test_frontend_streams.py, docs/nvshmem.md):
``cuStreamWriteValue32`` / ``cuStreamWaitValue32`` signalling and a copy-engine peer copy, ordered
by their stream and by no SM thread.

A producer kernel writes a tile; a flag written on the producer's stream after it (write_value)
publishes it to a consumer kernel on another stream that polls the flag: SAFE. Written on a stream
that does not follow the producer: UNSAFE. A copy on a side stream that waits for the producer's
own flag (wait_value) copies the finished tile: SAFE; without the wait: UNSAFE.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def produce(data_ptr, flag_ptr, N: tl.constexpr, SIGNAL: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(data_ptr + offs, offs + 1)
    if SIGNAL:
        tl.debug_barrier()
        tl.atomic_xchg(flag_ptr, 1, sem="release", scope="sys")


@triton.jit
def consume(data_ptr, flag_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    while tl.atomic_add(flag_ptr, 0, sem="acquire", scope="sys") == 0:
        pass
    tl.store(out_ptr + offs, tl.load(data_ptr + offs))


def _write_value(sv, stream):
    data = sv.heap.zeros((4,), torch.int32)
    flag = sv.heap.zeros((1,), torch.int32)
    out = sv.heap.zeros((4,), torch.int32)
    sv.launch(produce, (1,), data.on(0), flag.on(0), N=4, SIGNAL=False, rank=0)
    sv.write_value(flag.on(0)[0], 1, rank=0, stream=stream)
    sv.launch(consume, (1,), data.on(0), flag.on(0), out.on(0), N=4, rank=0, stream="consumer")
    sv.expect_written(out.on(0))


def write_value_after_producer(sv):
    _write_value(sv, "main")


def write_value_on_another_stream(sv):
    _write_value(sv, "side")  # BUG: the side stream does not follow the producer kernel


def _copy(sv, wait):
    data = sv.heap.zeros((4,), torch.int32)
    flag = sv.heap.zeros((1,), torch.int32)
    out = sv.heap.zeros((4,), torch.int32)
    sv.launch(produce, (1,), data.on(0), flag.on(0), N=4, SIGNAL=True, rank=0)
    if wait:
        sv.wait_value(flag.on(0)[0], 1, rank=0, stream="copy")
    sv.copy_(out.on(1), data.on(0), rank=0, stream="copy")  # BUG without the wait: may copy too early
    sv.expect_written(out.on(1))


def copy_after_wait_value(sv):
    _copy(sv, True)


def copy_without_wait(sv):
    _copy(sv, False)
