"""Harnesses for tests/test_user_stress.py (kernels in ``kernels.py`` beside this file)."""

import torch

import syncverify
from kernels import broken, waiter, while_else, writer
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
