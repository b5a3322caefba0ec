"""Where a stress run's symmetric heap lives: some buffers in host-mapped memory, the rest on the GPU,
in one address range.

Why. A store, a CTA barrier, then a weak flag, read by a consumer that acquires after its poll
(``one_shot_all_reduce::original``): no delay can reorder the store and the flag (the barrier
waits for the store however late its warps are), and the acquire invalidates the reader's L1.
Only the memory system can deliver the flag first. On one H200 it did when the *data* lived in
host-mapped memory and the *flags* in device memory (docs/RESULTS.md, 2026-12-02 fourth session:
2,123 and 3,536 of 9,600 tiles read stale in plain kernels of that shape, 0 with a release flag and
an acquire fence), and hardly when both were host-mapped (153 of 9,600): the data's stores cross
the host link while the flag's reaches L2 at once, and the barrier waits for neither.

How. iris-style kernels translate a pointer between ranks by its offset from ``heap_bases[rank]``,
so each rank's heap must stay one contiguous range of addresses. CUDA's virtual memory management
gives that with mixed backing: :class:`MixedHeap` reserves one range for every rank's heap
(``cuMemAddressReserve``) and maps each buffer, as the harness allocates it, onto physical memory
created on the host (``CU_MEM_LOCATION_TYPE_HOST``) or on the device (``cuMemCreate``,
``cuMemMap``, ``cuMemSetAccess``: read-write for the GPU). Mappings are whole granules (2 MB on the
H200), so the heap aligns such a buffer to the granule. torch sees the range as a CUDA tensor
through ``__cuda_array_interface__``, so the harness's stream writes, restores and validations run
on it unchanged.

The driver API comes from NVIDIA's ``cuda-python`` bindings (``cuda.bindings.driver``, on the CUDA
image with torch): a maintained binding, not our own ``ctypes`` structs. Without them, or where the
driver refuses host-located allocations, :class:`MixedHeap` raises :class:`PlacementError` (one
line: the run cannot place as asked).
"""

from __future__ import annotations

from collections.abc import Callable

from syncverify.kernels.errors import PlacementError


def _driver():
    try:
        from cuda.bindings import driver  # cuda-python (NVIDIA's driver bindings): only a placed stress run needs them
    except ImportError as error:
        raise PlacementError(f"placing a buffer in host-mapped memory needs NVIDIA's cuda-python bindings "
                             f"(pip install cuda-bindings): {error}") from None
    return driver


def _check(what: str, result) -> object:
    """The value of a ``cuda.bindings`` call (``(CUresult, value...)``), or one line naming the error."""
    status, *values = result if isinstance(result, tuple) else (result,)
    if int(status) != 0:
        raise PlacementError(f"{what} failed: CUDA driver error {int(status)} ({getattr(status, 'name', status)})")
    return values[0] if len(values) == 1 else tuple(values)


def round_up(value: int, granule: int) -> int:
    """``value`` rounded up to a multiple of ``granule``."""
    return -(-value // granule) * granule


class MixedHeap:
    """``world_size`` heaps of ``size`` bytes in one reserved range of device addresses, each
    buffer's pages mapped on the host or on the device as it is allocated (module docstring)."""

    def __init__(self, world_size: int, size: int, *, device: int = 0) -> None:
        import torch  # torch: only a stress run on a GPU places the heap

        cu = _driver()
        self.cu, self.device = cu, device
        torch.cuda.init()  # the primary context current on this thread, as torch's own allocations
        # the larger of the two granularities (2 MB each on the H200), so any range maps either way
        self.granule = max(self._granule(cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE), 2 << 20)
        self.world_size, self.size = world_size, round_up(size, self.granule)
        self.base = int(_check("cuMemAddressReserve", cu.cuMemAddressReserve(world_size * self.size, self.granule, 0, 0)))
        #: (offset in each rank's heap, length, on the host?) of every mapped range, in mapping order
        self.mapped: list[tuple[int, int, bool]] = []
        self._handles: list[tuple[int, int, object]] = []  # (address, length, handle) to unmap and release

        class _View:
            __cuda_array_interface__ = {"shape": (world_size, self.size), "typestr": "|u1",
                                        "data": (self.base, False), "version": 3, "strides": None}

        self.block = torch.as_tensor(_View(), device=f"cuda:{device}")

    def _properties(self, location):
        cu = self.cu
        prop = cu.CUmemAllocationProp()
        prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        prop.location.type = location
        prop.location.id = self.device if location == cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE else 0
        return prop

    def _create(self, length: int, on_host: bool):
        """A physical allocation of ``length`` bytes; on the host: any NUMA node, else node 0 (drivers
        that take host allocations only per NUMA node)."""
        kinds = self.cu.CUmemLocationType
        if not on_host:
            return _check(f"cuMemCreate (device, {length} bytes)",
                          self.cu.cuMemCreate(length, self._properties(kinds.CU_MEM_LOCATION_TYPE_DEVICE), 0))
        errors = []
        for location in (kinds.CU_MEM_LOCATION_TYPE_HOST, kinds.CU_MEM_LOCATION_TYPE_HOST_NUMA):
            status, handle = self.cu.cuMemCreate(length, self._properties(location), 0)
            if int(status) == 0:
                return handle
            errors.append(f"{location.name}: {getattr(status, 'name', status)}")
        raise PlacementError(f"the CUDA driver refuses host memory for a mapped heap range ({'; '.join(errors)})")

    def _granule(self, location) -> int:
        flag = self.cu.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM
        return int(_check("cuMemGetAllocationGranularity",
                          self.cu.cuMemGetAllocationGranularity(self._properties(location), flag)))

    def back(self, offset: int, length: int, *, on_host: bool) -> None:
        """Map ``[offset, offset + length)`` of every rank's heap (whole granules) on the host or on
        the device, zeroed. A range mapped before (a one-call harness allocates again each
        iteration, at the same offsets) is kept if its placement is the same."""
        if offset % self.granule or length % self.granule or offset + length > self.size:
            raise PlacementError(f"heap range [{offset}, {offset + length}) is not whole {self.granule}-byte granules "
                                 f"inside {self.size} bytes")
        for start, span, host in self.mapped:
            if offset < start + span and start < offset + length:
                if (start, span, host) == (offset, length, on_host):
                    return
                raise PlacementError(f"heap range [{offset}, {offset + length}) overlaps one mapped before")
        cu = self.cu
        access = cu.CUmemAccessDesc()
        access.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        access.location.id = self.device
        access.flags = cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        for rank in range(self.world_size):
            address = self.base + rank * self.size + offset
            handle = self._create(length, on_host)
            _check("cuMemMap", cu.cuMemMap(address, length, 0, handle, 0))
            self._handles.append((address, length, handle))
            _check("cuMemSetAccess", cu.cuMemSetAccess(address, length, [access], 1))
            _check("cuMemsetD8", cu.cuMemsetD8(address, 0, length))
        self.mapped.append((offset, length, on_host))

    def close(self) -> None:
        """Unmap and release every range and the reservation (after the last use of :attr:`block`)."""
        import torch  # torch: its device synchronization, before the ranges go

        torch.cuda.synchronize(self.device)
        self.block = None
        for address, length, handle in reversed(self._handles):
            self.cu.cuMemUnmap(address, length)
            self.cu.cuMemRelease(handle)
        self._handles.clear()
        if self.base:
            self.cu.cuMemAddressFree(self.base, self.world_size * self.size)
            self.base = 0


def backing_for(heap: MixedHeap, on_host: Callable[[int], bool]) -> Callable[[int, int, int], int]:
    """The heap's allocation hook: the allocation at position ``index`` (offset, bytes) mapped on
    the host where ``on_host(index)``, else on the device; returns the bytes mapped (whole granules)."""

    def back(index: int, offset: int, nbytes: int) -> int:
        length = round_up(max(nbytes, 1), heap.granule)
        heap.back(offset, length, on_host=on_host(index))
        return length

    return back
