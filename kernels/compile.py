"""Compile the kernels to PTX for sm_90 without a GPU (for the PTX audit and for reading).

``triton.compile(ASTSource(fn, signature, constexprs), target=GPUTarget("cuda", 90, 32))`` runs
Triton's whole NVIDIA pipeline on the CPU up to PTX (``ptxas`` is not needed for ``asm["ptx"]``).
The signature is derived from the kernel's own parameter list: pointer parameters get the element
type of the buffer they stand for, everything else not ``tl.constexpr`` is an ``i32``.
"""

from __future__ import annotations

import functools
import inspect
import re

from syncverify.kernels._deps import triton
from syncverify.kernels.build import BuiltKernel

_TRITON_TYPES = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32", "int32": "i32", "int8": "i8"}
SM90 = ("cuda", 90, 32)


def _pointer_types(built: BuiltKernel) -> dict[str, str]:
    c = built.config
    data = "*" + _TRITON_TYPES[c.dtype]
    lock = "*" + _TRITON_TYPES[c.lock_dtype]
    return {
        "A": data, "B": data, "partial": data, "local": data, "out": data, "received": data,
        "gathered": data, "inbox": data, "parked": data,
        "locks": lock, "push_locks": lock, "status": "*i32", "ownership": "*i32", "delay_table": "*i32",
        "stamps": "*i64",
        "partial_table": "*i64", "local_table": "*i64", "out_table": "*i64", "received_table": "*i64",
        "gathered_table": "*i64", "inbox_table": "*i64",
        "locks_table": "*i64", "push_locks_table": "*i64",
    }


def signature_and_constexprs(fn, built: BuiltKernel, meta: dict) -> tuple[dict, dict]:
    """``ASTSource`` arguments for kernel ``fn`` specialized by ``meta`` (its constexprs)."""
    pointers = _pointer_types(built)
    params = list(inspect.signature(fn.fn).parameters)
    signature, constexprs = {}, {}
    for index, name in enumerate(params):
        if name in meta:
            signature[name] = "constexpr"
            constexprs[(index,)] = meta[name]
        elif name == "stamps" and not meta.get("STAMPS"):  # no timestamps: None, as the launch passes
            signature[name] = "constexpr"
            constexprs[(index,)] = None
        elif name in pointers:
            signature[name] = pointers[name]
        elif name == "vals":
            signature[name] = "*i32"
        else:
            signature[name] = "i32"
    return signature, constexprs


def compile_ptx(fn, built: BuiltKernel, meta: dict, *, num_warps: int | None = None) -> str:
    """PTX of kernel ``fn`` for sm_90, specialized as ``meta`` says."""
    signature, constexprs = signature_and_constexprs(fn, built, meta)
    return _compile(fn, _freeze(signature), _freeze(constexprs),
                    num_warps or built.config.num_warps, built.config.num_stages)


def _freeze(d: dict):
    return tuple(d.items())  # hashable for the cache; keeps the signature's parameter order


@functools.lru_cache(maxsize=64)
def _compile(fn, signature, constexprs, num_warps: int, num_stages: int) -> str:
    # triton: only the GPU path needs it (the model runs without torch and triton)
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    source = ASTSource(fn=fn, signature=dict(signature), constexprs=dict(constexprs))
    compiled = triton.compile(source, target=GPUTarget(*SM90),
                              options={"num_warps": num_warps, "num_stages": num_stages})
    return compiled.asm["ptx"]


_DELAY_MARK = re.compile(r"/\* syncverify-delay ([\w-]+) \*/")


def sleep_counts(ptx: str) -> dict[str, int]:
    """Inline-asm delay instances per thread, by site mark (``before-store``, ``wait-read``, ``cta``).

    A per-warp delay runs once per tile element a thread holds, and how many that is depends on
    the layout Triton picked; the kernels divide the drawn delay by this count.
    """
    counts: dict[str, int] = {}
    for mark in _DELAY_MARK.findall(ptx):
        counts[mark] = counts.get(mark, 0) + 1
    return counts


def compile_like_launch(fn, *args, num_warps: int = 4, num_stages: int = 3, **meta):
    """Compile ``fn`` for sm_90 exactly as ``fn[grid](*args, **meta)`` would on an H200: the same
    argument binding, specialization and packing as ``JITFunction.run``, then ``triton.compile``
    through ``ptxas`` (bundled with triton). Works on a machine without a GPU, with CPU tensors
    standing in for device ones, so a launch that cannot compile fails in CI, not on the GPU.

    Returns the compiled kernel (``.asm["ptx"]``, ``.asm["cubin"]``).
    """
    # triton: only the GPU path needs it (the model runs without torch and triton)
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    backend, kwargs, (bound, specialization, options) = _bind(fn, args, num_warps, num_stages, meta)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, specialization, options)
    source = ASTSource(fn, signature, constexprs, attrs)
    return triton.compile(source, target=GPUTarget(*SM90), options=options.__dict__)


def launch_specialization(fn, *args, num_warps: int = 4, num_stages: int = 3, **meta) -> tuple:
    """What ``fn[grid](*args, **meta)`` specializes on (argument types, 16-byte alignment of
    pointers, integers equal to 1, ...): two launches with different values compile once."""
    return tuple(_bind(fn, args, num_warps, num_stages, meta)[2][1])


def _bind(fn, args, num_warps: int, num_stages: int, meta: dict):
    """Triton's own argument binding for sm_90: ``(backend, kwargs, (bound, specialization, options))``."""
    # triton: only the GPU path needs it (the model runs without torch and triton)
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.runtime.jit import create_function_from_signature

    backend = CUDABackend(GPUTarget(*SM90))
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    kwargs = dict(meta, num_warps=num_warps, num_stages=num_stages)
    return backend, kwargs, binder(*args, **kwargs)
