"""A stress run's placed heap on a real GPU (skipped without one): one buffer in host memory, the
rest on the device, in one address range (``syncverify.kernels.placement``). CI has no GPU: the
CPU side (the heap's allocation hook, the planner, bad input) is ``tests/test_user_stress_timing.py``
and ``tests/test_user_schedule.py``."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="needs torch (in the checkout: python -m pip install -e '.[gpu]')")
pytest.importorskip("triton", reason="needs triton (in the checkout: python -m pip install -e '.[gpu]')")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none visible)"),
]

import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def _copy_across_ranks(bases, src_offset, dst_offset, n, BLOCK: tl.constexpr):
    """Rank 1's heap at ``dst_offset`` gets rank 0's ``src_offset`` plus one, through the heap
    bases as iris translates a pointer (so the range must be one, contiguous per rank)."""
    i = tl.arange(0, BLOCK)
    src = tl.load(bases + 0).to(tl.pointer_type(tl.int32)) + src_offset // 4
    dst = tl.load(bases + 1).to(tl.pointer_type(tl.int32)) + dst_offset // 4
    tl.store(dst + i, tl.load(src + i, mask=i < n) + 1, mask=i < n)


def _memory_type(address: int) -> int:
    from cuda.bindings import driver

    status, kind = driver.cuPointerGetAttribute(driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address)
    assert int(status) == 0
    return int(kind)


def test_a_mixed_heap_maps_host_and_device_ranges_in_one_range_that_kernels_and_torch_use():
    pytest.importorskip("cuda.bindings", reason="needs NVIDIA's cuda-python bindings")
    from syncverify.frontend.harness import Heap
    from syncverify.kernels.placement import MixedHeap, backing_for

    mixed = MixedHeap(2, 16 << 20)
    on_host = {1}
    heap = Heap(2, 16 << 20, device="cuda", block=mixed.block, backing=backing_for(mixed, on_host.__contains__),
                align=mixed.granule)
    flags = heap.zeros((256,), torch.int32)
    data = heap.zeros((256,), torch.int32)
    out = heap.zeros((256,), torch.int32)
    assert [b.allocation.offset for b in (flags, data, out)] == [0, mixed.granule, 2 * mixed.granule]
    assert [(o, host) for o, _n, host in mixed.mapped] == [(0, False), (mixed.granule, True), (2 * mixed.granule, False)]
    # where the driver says each range lives: rank 0's and rank 1's copies alike
    kinds = [_memory_type(b.on(r).data_ptr()) for b in (flags, data) for r in (0, 1)]
    assert kinds[0] == kinds[1] and kinds[2] == kinds[3] and kinds[0] != kinds[2]
    assert not data.on(0).any() and not data.on(1).any()  # zeroed when mapped
    data.on(0).copy_(torch.arange(256, dtype=torch.int32, device="cuda"))  # torch writes the host range
    _copy_across_ranks[(1,)](heap.bases, data.allocation.offset, out.allocation.offset, 256, BLOCK=256)
    torch.cuda.synchronize()
    assert torch.equal(out.on(1).cpu(), torch.arange(1, 257, dtype=torch.int32))
    assert not out.on(0).any()
    heap = flags = data = out = None
    mixed.close()
