"""Bad input for the kernel front end: each harness must be refused in one line (exit 2)."""

import torch
import triton
import triton.language as tl

import syncverify


@triton.jit
def divides_by_zero(x_ptr):
    v = tl.load(x_ptr)
    tl.store(x_ptr, v // 0 + tl.zeros((3,), tl.int32))  # shapes do not match: the interpreter refuses


@triton.jit
def unknown_asm(x_ptr):
    tl.inline_asm_elementwise("s_waitcnt vmcnt(0); mov.u32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
    tl.store(x_ptr, 1)


@triton.jit
def fenced(x_ptr):
    tl.store(x_ptr, 1)
    tl.inline_asm_elementwise("fence.acq_rel.sys; mov.u32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)


@syncverify.harness
def raises(sv):
    raise ValueError("this harness needs a GPU named Bob")


def refuses_world_size(sv):
    if sv.world_size != 2:
        raise ValueError(f"needs world size 2, got {sv.world_size}")
    return None


def cannot_run(sv):
    x = sv.heap.zeros((1,), torch.int32)
    sv.launch(divides_by_zero, (1,), x.on(0), rank=0)


def asm_unknown(sv):
    x = sv.heap.zeros((1,), torch.int32)
    sv.launch(unknown_asm, (1,), x.on(0), rank=0)


def asm_fence(sv):
    x = sv.heap.zeros((1,), torch.int32)
    sv.launch(fenced, (1,), x.on(0), rank=0)


@triton.jit
def spins_on_nothing(flag_ptr):
    while tl.load(flag_ptr, volatile=True) == 0:  # no one ever sets it
        pass


def spin_forever(sv):
    flag = sv.heap.zeros((1,), torch.int32)
    sv.launch(spins_on_nothing, (1,), flag.on(0), rank=0)


@triton.jit
def writes_past_the_end(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 1, mask=offs < 4)  # inside: masked
    tl.store(x_ptr + 4 + offs, 2)  # BUG: the buffer has 4 elements


def out_of_bounds(sv):
    x = sv.heap.zeros((4,), torch.int32)
    sv.launch(writes_past_the_end, (1,), x.on(0), BLOCK=4, rank=0)


@triton.jit
def descriptor_copy(src_ptr, dst_ptr, BLOCK: tl.constexpr):
    src = tl.make_tensor_descriptor(src_ptr, shape=[BLOCK], strides=[1], block_shape=[BLOCK])
    dst = tl.make_tensor_descriptor(dst_ptr, shape=[BLOCK], strides=[1], block_shape=[BLOCK])
    dst.store([0], src.load([0]))


def descriptors(sv):
    src = sv.heap.zeros((16,), torch.int32)
    dst = sv.heap.zeros((16,), torch.int32)
    sv.launch(descriptor_copy, (1,), src.on(0), dst.on(0), BLOCK=16, rank=0)
    sv.expect_written(dst.on(0))


@triton.jit
def loops_without_memory(x_ptr):
    i = 0
    while i >= 0:  # never ends, and touches no memory
        i = (i + 1) % 7
    tl.store(x_ptr, i)


def silent_loop(sv):
    x = sv.heap.zeros((1,), torch.int32)
    sv.launch(loops_without_memory, (1,), x.on(0), rank=0)


@triton.jit
def spins_on_heap_bases(heap_bases):
    while tl.load(heap_bases) != 0:  # a heap's base address is never 0: forever
        pass


def spin_on_heap_bases(sv):
    sv.launch(spins_on_heap_bases, (1,), sv.heap.bases, rank=0)
