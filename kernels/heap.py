"""The symmetric heap: each rank's copy of every buffer other ranks read or write.

A kernel sees a buffer as ``(base, table, rank_stride)`` and finds rank ``r``'s copy with
``syncverify.kernels.steps.rank_base``:

* :class:`VirtualHeap` (``--virtual-ranks`` and the interpreter): one tensor ``[world, ...]`` per
  buffer on one device; rank ``r``'s copy is ``base + r * rank_stride``. With ``table=True`` it
  also builds address tables, so a single GPU exercises the multi-GPU addressing path.
* :class:`SymmetricHeap` (one process per GPU): ``torch.distributed._symmetric_memory`` buffers;
  ``table`` holds every rank's device address (``buffer_ptrs``), ``base`` is this rank's copy.
* :class:`SharedFileHeap` (one process per rank in the interpreter): every rank's copies in one
  file in shared memory that each process maps (``syncverify.kernels.processes.join_ranks``);
  ``table`` holds this process's address of every rank's copy, as with symmetric memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from syncverify.kernels._deps import torch
from syncverify.kernels.errors import StressConfigError


@dataclass
class Buffer:
    """One symmetric buffer as a kernel receives it."""

    local: "torch.Tensor"  # this process's tensor (virtual: all ranks, [world, ...])
    table: "torch.Tensor"  # int64 device addresses, one per rank (a 1-element dummy when unused)
    rank_stride: int  # elements between ranks' copies in ``local`` (virtual only)


class VirtualHeap:
    """Every rank's buffers in one tensor per buffer, on one device (GPU or CPU)."""

    def __init__(self, world_size: int, device, *, table: bool = False) -> None:
        self.world_size = world_size
        self.device = torch.device(device)
        self.table = table
        self.buffers: dict[str, Buffer] = {}

    def allocate(self, name: str, shape: tuple[int, ...], dtype) -> Buffer:
        """A zeroed ``[world_size, *shape]`` buffer named ``name``."""
        local = torch.zeros((self.world_size, *shape), dtype=dtype, device=self.device)
        stride = local[0].numel()
        if self.table:
            element = local.element_size()
            table = torch.tensor(
                [local.data_ptr() + r * stride * element for r in range(self.world_size)],
                dtype=torch.int64, device=self.device,
            )
        else:
            table = torch.zeros(1, dtype=torch.int64, device=self.device)
        buffer = Buffer(local, table, stride)
        self.buffers[name] = buffer
        return buffer

    def __getitem__(self, name: str) -> Buffer:
        return self.buffers[name]

    def barrier(self) -> None:
        """All ranks live in one stream: ordering the stream is the barrier."""
        if self.device.type == "cuda":
            torch.cuda.current_stream(self.device).synchronize()


class SymmetricHeap:
    """This rank's copies of symmetric buffers, one process per GPU (NCCL process group)."""

    def __init__(self, world_size: int, rank: int, device, group=None) -> None:
        # torch: only the GPU path needs it (the model runs without torch and triton)
        import torch.distributed as dist
        import torch.distributed._symmetric_memory as symm_mem

        self.dist = dist
        self.symm_mem = symm_mem
        self.group = group if group is not None else dist.group.WORLD
        self.world_size = world_size
        self.rank = rank
        self.device = torch.device(device)
        self.buffers: dict[str, Buffer] = {}
        self.handles: dict[str, object] = {}

    def allocate(self, name: str, shape: tuple[int, ...], dtype) -> Buffer:
        """A zeroed symmetric ``shape`` buffer; ``local`` gets a leading rank axis of 1."""
        local = self.symm_mem.empty(shape, dtype=dtype, device=self.device)
        local.zero_()
        handle = self.symm_mem.rendezvous(local, self.group)
        table = torch.tensor(list(handle.buffer_ptrs), dtype=torch.int64, device=self.device)
        buffer = Buffer(local.unsqueeze(0), table, 0)
        self.buffers[name] = buffer
        self.handles[name] = handle
        return buffer

    def __getitem__(self, name: str) -> Buffer:
        return self.buffers[name]

    def barrier(self) -> None:
        """Finish this rank's stream, then a host barrier across ranks."""
        torch.cuda.current_stream(self.device).synchronize()
        self.dist.barrier(group=self.group)


class SharedFileHeap:
    """This rank's copies of symmetric buffers when every rank is a process on the CPU (Triton's
    interpreter, ``gloo``): ``shared`` holds every rank's row of one file every process maps
    (``syncverify.kernels.processes.join_ranks``). Each rank allocates the same buffers in the
    same order, so a buffer lies at the same offset of every rank's row; ``table`` holds every
    rank's copy's address in this process, as ``buffer_ptrs`` does on GPUs."""

    ALIGN = 128  # bytes: every buffer starts aligned for any element type (a uint8 row viewed as bf16, int64)

    def __init__(self, world_size: int, rank: int, shared, group=None) -> None:
        # torch: only the stress path needs it (the model runs without torch and triton)
        import torch.distributed as dist

        self.dist = dist
        self.group = group if group is not None else dist.group.WORLD
        self.world_size, self.rank, self.shared = world_size, rank, shared
        self.device = torch.device("cpu")
        self.buffers: dict[str, Buffer] = {}
        self.used = 0

    def allocate(self, name: str, shape: tuple[int, ...], dtype) -> Buffer:
        """This rank's zeroed ``shape`` copy; ``local`` gets a leading rank axis of 1."""
        start = -(-self.used // self.ALIGN) * self.ALIGN
        nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        if start + nbytes > self.shared[0].numel():
            raise StressConfigError(f"buffer {name!r} ({nbytes:,} bytes) does not fit the shared heap file's "
                                    f"{self.shared[0].numel():,} bytes per rank: lower --m/--n/--k")
        self.used = start + nbytes
        copies = [self.shared[r][start:start + nbytes].view(dtype).view(shape) for r in range(self.world_size)]
        copies[self.rank].zero_()  # each rank its own: a peer's is zeroed by the peer, before the first barrier
        table = torch.tensor([c.data_ptr() for c in copies], dtype=torch.int64)
        buffer = Buffer(copies[self.rank].unsqueeze(0), table, 0)
        self.buffers[name] = buffer
        return buffer

    def __getitem__(self, name: str) -> Buffer:
        return self.buffers[name]

    def barrier(self) -> None:
        """A host barrier across ranks (the interpreter finished this rank's launches when they returned)."""
        self.dist.barrier(group=self.group)
