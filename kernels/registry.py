"""Which module runs each kernel scenario, and the buffers the two newer ones allocate.

``all-gather-gemm`` and ``gemm-reduce-scatter`` describe their symmetric buffers here
(:func:`buffers`: name -> shape per rank and whether it holds data or locks), so the stress
runner and the drift test allocate them from one place.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

#: kernel -> (module, launch function, ``@jit`` kernel)
MODULES: dict[str, tuple[str, str, str]] = {
    "all-reduce": ("syncverify.kernels.gemm_all_reduce", "launch_all_reduce", "gemm_all_reduce_kernel"),
    "all-scatter": ("syncverify.kernels.gemm_all_scatter", "launch_all_scatter", "gemm_all_scatter_kernel"),
    "all-gather-gemm": ("syncverify.kernels.all_gather_gemm", "launch_all_gather_gemm", "all_gather_gemm_kernel"),
    "gemm-reduce-scatter": ("syncverify.kernels.gemm_reduce_scatter", "launch_reduce_scatter",
                            "gemm_reduce_scatter_kernel"),
}


def launch_function(kernel: str) -> Callable[..., Any]:
    """The host launcher of ``kernel`` (one iteration)."""
    module, name, _ = MODULES[kernel]
    return getattr(importlib.import_module(module), name)


def kernel_function(kernel: str) -> tuple[Any, Any]:
    """``(module, @jit kernel)`` of ``kernel``: what the PTX audit compiles."""
    module_name, _, name = MODULES[kernel]
    module = importlib.import_module(module_name)
    return module, getattr(module, name)


def buffers(built: Any) -> dict[str, tuple[tuple[int, ...], str]]:
    """The symmetric buffers of one all-gather-gemm or gemm-reduce-scatter launch: name -> (shape
    per rank, ``data`` or ``lock``). The published buffer (``gathered``: ``M / W`` rows, block ``b``
    of ``W * K`` columns holding rank ``b``'s shard; ``inbox``: ``M`` rows, block ``b`` of ``W * N``
    holding rank ``b``'s partial) has ``slots`` slots of rows (it rotates with them); ``parked``
    is private to each rank's GEMM programs (:func:`parked_shape`)."""
    c = built.config
    if c.kernel == "gemm-reduce-scatter":
        return {"inbox": ((c.m * built.plan.slots, c.world_size * c.n), "data"), "out": ((c.m, c.n), "data"),
                "locks": ((built.lock_count, c.tiles), "lock")}
    return {"gathered": ((c.m_per_rank * built.plan.slots, c.world_size * c.k), "data"),
            "out": ((c.m, c.n), "data"), "locks": ((built.lock_count, c.tiles), "lock"),
            "parked": (parked_shape(built), "data")}


def parked_shape(built: Any) -> tuple[int, int]:
    """Rows x columns per rank of all-gather-gemm's ``parked``: each GEMM program's ``ROWS x N`` C
    rows, held until ``after_load`` has run; one element when nothing is held (no ``after_load``
    steps, or one column tile)."""
    c = built.config
    if not built.plan.after_load or c.n <= c.block_n:
        return (1, 1)
    return (c.comm_sms * stacked_rows(c.world_size, c.block_m), c.n)


def stacked_rows(world_size: int, block_m: int) -> int:
    """Rows of all-gather-gemm's stacked operand: ``world_size * block_m`` up to a power of two."""
    rows = world_size * block_m
    return 1 << (rows - 1).bit_length()


def allocate(built: Any, heap: Any, data_dtype: Any, lock_dtype: Any) -> dict[str, Any]:
    """Allocate the buffers of an all-gather-gemm or gemm-reduce-scatter kernel on ``heap``."""
    return {name: heap.allocate(name, shape, data_dtype if kind == "data" else lock_dtype)
            for name, (shape, kind) in buffers(built).items()}
