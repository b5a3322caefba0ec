"""Tiny kernels, one CTA fact each: compiled to PTX and run through the front end
(tests/test_frontend_ptx.py compares the two)."""

import torch
import triton
import triton.language as tl


@triton.jit
def signal_unused(flag_ptr):
    tl.atomic_xchg(flag_ptr, 1, sem="release", scope="gpu")


@triton.jit
def poll_used(flag_ptr, out_ptr):
    tl.store(out_ptr, tl.atomic_add(flag_ptr, 0, sem="acquire", scope="gpu"))


@triton.jit
def add_acq_rel_used(flag_ptr, out_ptr):
    tl.store(out_ptr, tl.atomic_add(flag_ptr, 0, sem="acq_rel", scope="gpu"))


@triton.jit
def volatile_poll(flag_ptr, out_ptr):
    tl.store(out_ptr, tl.load(flag_ptr, volatile=True))


@triton.jit
def cas_used(flag_ptr, out_ptr):
    tl.store(out_ptr, tl.atomic_cas(flag_ptr, 0, 1, sem="acq_rel", scope="sys"))


@triton.jit
def tile_then_barrier(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), 1)
    tl.debug_barrier()


KERNELS = {
    "signal_unused": (signal_unused, 1, {}),
    "poll_used": (poll_used, 2, {}),
    "add_acq_rel_used": (add_acq_rel_used, 2, {}),
    "volatile_poll": (volatile_poll, 2, {}),
    "cas_used": (cas_used, 2, {}),
    "tile_then_barrier": (tile_then_barrier, 1, {"BLOCK": 256}),
}


def harness_for(name):
    kernel, nargs, meta = KERNELS[name]

    def harness(sv):
        buffers = [sv.heap.zeros((256,), torch.int32, name=f"b{i}") for i in range(nargs)]
        sv.zero_(buffers[0].on(0), rank=0)  # written: memory no one writes is constant, read with no event
        sv.launch(kernel, (1,), *(b.on(0) for b in buffers), rank=0, **meta)
    return harness
