"""Tensor-descriptor (TMA) kernels for the kernel front end's async-proxy lifting (tests/test_frontend_tma.py).

A producer program writes its C tile and signals; a consumer program waits for the signal and reads
the tile. Triton 3.6 compiles a descriptor store for sm_90 to ``cp.async.bulk.tensor ... bulk_group;
commit_group; wait_group.read 0`` and then the release (probed with ``triton.compile`` for
``GPUTarget("cuda", 90, 32)``: docs/async.md): the signal may overtake the tile's write.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def epilogue(c_ptr, flag_ptr, out_ptr, BLOCK: tl.constexpr, TMA_STORE: tl.constexpr, TMA_LOAD: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    c = tl.make_tensor_descriptor(c_ptr, shape=[BLOCK], strides=[1], block_shape=[BLOCK])
    if pid == 1:  # producer: its C tile, then the signal
        if TMA_STORE:
            c.store([0], offs + 1)  # BUG: waited for with wait_group.read only
        else:
            tl.store(c_ptr + offs, offs + 1)
        tl.debug_barrier()
        tl.atomic_xchg(flag_ptr, 1, sem="release", scope="gpu")
    else:  # consumer
        while tl.atomic_add(flag_ptr, 0, sem="acquire", scope="gpu") == 0:
            pass
        if TMA_LOAD:
            tile = c.load([0])  # BUG: an async-proxy read of generic writes, no fence.proxy.async
        else:
            tile = tl.load(c_ptr + offs)
        tl.store(out_ptr + offs, tile)


def _epilogue(sv, tma_store, tma_load):
    c = sv.heap.zeros((8,), torch.int32)
    flag = sv.heap.zeros((1,), torch.int32)
    out = sv.heap.zeros((8,), torch.int32)
    sv.launch(epilogue, (2,), c.on(0), flag.on(0), out.on(0), BLOCK=8, TMA_STORE=tma_store, TMA_LOAD=tma_load,
              rank=0)
    sv.expect_written(out.on(0))


def tma_store_then_signal(sv):
    _epilogue(sv, True, False)


def pointer_store_then_signal(sv):
    _epilogue(sv, False, False)


def tma_load_after_acquire(sv):
    _epilogue(sv, False, True)


@triton.jit
def store_then_own_tma_load(c_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    c = tl.make_tensor_descriptor(c_ptr, shape=[BLOCK], strides=[1], block_shape=[BLOCK])
    tl.store(c_ptr + offs, offs + 1)
    tl.store(out_ptr + offs, c.load([0]))  # BUG: its own generic stores, read back through the async proxy


def own_tma_load(sv):
    c = sv.heap.zeros((8,), torch.int32)
    out = sv.heap.zeros((8,), torch.int32)
    sv.launch(store_then_own_tma_load, (1,), c.on(0), out.on(0), BLOCK=8, rank=0)
    sv.expect_written(out.on(0))
