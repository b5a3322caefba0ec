"""Harnesses for tests/test_user_stress.py (kernels in ``kernels.py`` beside this file)."""

import torch

import syncverify
from kernels import broken, tiled_bugs, waiter, while_else, writer
from rank_kernels import put_then_signal, wait_then_copy

N = 64


def _writes(sv, half: bool):
    out = sv.heap.zeros((N,), torch.float32)
    reference = torch.arange(N, dtype=torch.float32) + 1

    def call(k):
        for r in range(sv.world_size):
            sv.launch(writer, (1,), out.on(r), N=N, HALF=half, rank=r)
        sv.host_barrier()
        sv.expect_equal(out, reference)

    return call


@syncverify.harness
def clean(sv):
    return _writes(sv, False)


@syncverify.harness
def half_written(sv):
    return _writes(sv, True)


@syncverify.harness
def no_expectation(sv):
    out = sv.heap.zeros((N,), torch.float32)
    sv.launch(writer, (1,), out.on(0), N=N, HALF=False, rank=0)


@syncverify.harness
def hangs(sv):
    out = sv.heap.zeros((N,), torch.float32)
    flag = sv.heap.zeros((1,), torch.int32)
    sv.launch(waiter, (1,), out.on(0), flag.on(0), N=N, rank=0)
    sv.host_barrier()
    sv.expect_written(out.on(0))


@syncverify.harness
def does_not_compile(sv):
    out = sv.heap.zeros((N,), torch.float32)
    sv.launch(broken, (1,), out.on(0), N=N, rank=0)
    sv.expect_written(out.on(0))


@syncverify.harness
def unsupported(sv):
    out = sv.heap.zeros((N,), torch.float32)
    flag = sv.heap.zeros((1,), torch.int32)
    sv.launch(while_else, (1,), out.on(0), flag.on(0), N=N, rank=0)
    sv.expect_written(out.on(0))


@syncverify.harness
def tiled(sv):
    """Two 8 x 8 outputs in 4 x 4 tiles, one bad tile of each class (``kernels.tiled_bugs``)."""
    out = sv.heap.zeros((8, 8), torch.float32)
    src = sv.heap.zeros((8, 8), torch.float32)
    reference = (torch.arange(64, dtype=torch.float32) + 1).reshape(8, 8)

    def call(k):
        sv.launch(tiled_bugs, (1,), out.on(0), src.on(0), N=8, T=4, rank=0)
        sv.host_barrier()
        sv.expect_equal(out.on(0), reference, tile=(4, 4))
        sv.expect_equal(src.on(0), reference, tile=(4, 4))

    return call


@syncverify.harness
def tile_does_not_divide(sv):
    out = sv.heap.zeros((8, 8), torch.float32)
    sv.launch(writer, (1,), out.on(0), N=64, HALF=False, rank=0)
    sv.expect_written(out.on(0), tile=(3, 4))


@syncverify.harness
def second_call_half(sv):
    """Call 0 writes the whole output, call 1 only its first half (use ``calls=2``)."""
    out = sv.heap.zeros((N,), torch.float32)
    reference = torch.arange(N, dtype=torch.float32) + 1

    def call(k):
        sv.launch(writer, (1,), out.on(0), N=N, HALF=k == 1, rank=0)
        sv.host_barrier()
        sv.expect_equal(out.on(0), reference)

    return call


@syncverify.harness
def consumer_launched_first(sv):
    """Rank 1 waits for rank 0's put and signal; its launch is issued first. Virtual ranks in the
    interpreter run it to its poll cap before rank 0's kernel starts (a hang); real ranks run the
    two processes at the same time (clean)."""
    data = sv.heap.zeros((N,), torch.float32)
    flag = sv.heap.zeros((1,), torch.int32)
    out = sv.heap.zeros((N,), torch.float32)
    reference = torch.arange(N, dtype=torch.float32) + 1

    def call(k):
        sv.host_barrier()
        sv.zero_(flag.on(1), rank=1)
        sv.host_barrier()
        sv.launch(wait_then_copy, (1,), out.on(1), data.on(1), flag.on(1), N=N, rank=1)
        sv.launch(put_then_signal, (1,), data.on(0), flag.on(0), sv.heap.bases, me=0, peer=1, N=N, rank=0)
        sv.host_barrier()
        sv.expect_equal(out.on(1), reference)

    return call
