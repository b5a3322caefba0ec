"""Which module runs each kernel scenario, and the buffers the two newer ones allocate.

``all-gather-gemm`` and ``gemm-reduce-scatter`` describe their symmetric buffers in their own
module (``buffers(built)``: name -> shape per rank and whether it holds data or locks), so the
stress runner and the drift test allocate them from one place.
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


def allocate(built: Any, heap: Any, data_dtype: Any, lock_dtype: Any) -> dict[str, Any]:
    """Allocate the buffers of an all-gather-gemm or gemm-reduce-scatter kernel on ``heap``."""
    module = importlib.import_module(MODULES[built.config.kernel][0])
    return {name: heap.allocate(name, shape, data_dtype if kind == "data" else lock_dtype)
            for name, (shape, kind) in module.buffers(built).items()}
