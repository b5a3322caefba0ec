"""Run a harness's launches directly, without the model: in Triton's interpreter, one after another
in issue order, or compiled for sm_90 on the CPU. For the example tests (tests/test_examples.py).

:class:`SequentialHarness` is the harness API (``sv.heap``, ``sv.launch``, ``sv.zero_``, ...) with
each operation *executed* where ``syncverify.frontend.harness`` only records it. The interpreter
runs each launch's programs in program-id order, so a harness whose producers are issued (and
numbered) before their consumers runs to the end and computes real numbers; it shows one
sequentially consistent execution, never a weak one, so it checks the arithmetic, not the
synchronization. Inline PTX the interpreter refuses is let through only when it is a fence (a
sequential run already orders everything a fence could).
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import sys
from pathlib import Path

import torch

import syncverify
from syncverify.frontend import devices
from syncverify.kernels._jit import _interpreted, _interpreting_calls, fences_as_no_ops

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@contextlib.contextmanager
def compiled_jit():
    """``triton.jit`` makes ``JITFunction`` s while inside, whatever ``TRITON_INTERPRET`` says: it picks
    interpreted or compiled when it decorates, and other tests (``bench --interpret``) set it for
    the whole process. A ``JITFunction`` both compiles and, here, interprets."""
    saved = os.environ.pop("TRITON_INTERPRET", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["TRITON_INTERPRET"] = saved


def jit(fn):
    """``triton.jit`` under :func:`compiled_jit`: a test kernel that both compiles and interprets."""
    import triton

    with compiled_jit():
        return triton.jit(fn)


with compiled_jit():
    devices.shim("iris"), devices.shim("symm_mem")  # decorated once, as JITFunctions


class Symmetric:
    """One symmetric buffer: rank ``r``'s copy at the same offset of every rank's heap."""

    def __init__(self, heap: "Heap", offset: int, shape: tuple[int, ...], dtype) -> None:
        self.heap, self.offset, self.shape, self.dtype = heap, offset, shape, dtype

    def on(self, rank: int) -> torch.Tensor:
        nbytes = math.prod(self.shape) * torch.empty((), dtype=self.dtype).element_size()
        return self.heap.memory[rank][self.offset:self.offset + nbytes].view(self.dtype).view(self.shape)


class Heap:
    """``world_size`` heaps of ``size`` bytes and ``bases``, their addresses (iris's ``heap_bases``)."""

    def __init__(self, world_size: int, size: int = 1 << 16, device: str = "cpu") -> None:
        self.memory = [torch.zeros(size, dtype=torch.uint8, device=device) for _ in range(world_size)]
        self.bases = torch.tensor([m.data_ptr() for m in self.memory], dtype=torch.int64, device=device)
        self.top = 0

    def zeros(self, shape, dtype=torch.float32) -> Symmetric:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.top = -(-self.top // 256) * 256
        buffer = Symmetric(self, self.top, shape, dtype)
        self.top += math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        assert self.top <= self.memory[0].numel(), "heap too small for the example"
        return buffer


class SequentialHarness:
    """The harness API, executed: launches run at once (``mode="interpret"``), compile for sm_90
    (``mode="compile"``, their PTX kept in ``ptx``) or run on a CUDA GPU (``mode="cuda"``: every
    rank's heap on one GPU, one CUDA stream per stream name, inputs copied to the GPU);
    ``expect_equal`` records what to compare."""

    def __init__(self, world_size: int, *, mode: str = "interpret") -> None:
        self.world_size = world_size
        self.heap = Heap(world_size, device="cuda" if mode == "cuda" else "cpu")
        self.mode = mode
        self.streams: dict[str, torch.cuda.Stream] = {}
        self.on_gpu: dict[int, torch.Tensor] = {}
        self.expected: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.ptx: dict[str, str] = {}

    def launch(self, kernel, grid, *args, rank: int, stream: str = "main", **kwargs) -> None:
        if self.mode == "compile":
            from syncverify.kernels.compile import compile_like_launch

            key = f"{kernel.fn.__name__}[{kwargs.get('VERSION', '')}]"
            self.ptx.setdefault(key, compile_like_launch(kernel, *args, **kwargs).asm["ptx"])
            return
        if self.mode == "cuda":
            args = [self._gpu(a) for a in args]
            with torch.cuda.stream(self._stream(stream)):
                kernel[tuple(grid)](*args, **kwargs)
            return
        with _interpreting_calls(), fences_as_no_ops():
            _interpreted(kernel)[tuple(grid)](*args, **kwargs)

    def _stream(self, name: str):
        return self.streams.setdefault(name, torch.cuda.Stream())

    def _gpu(self, value):
        """A CPU tensor argument's copy on the GPU (made once); anything else as it is."""
        if isinstance(value, torch.Tensor) and not value.is_cuda:
            return self.on_gpu.setdefault(id(value), value.cuda())
        return value

    def zero_(self, tensor, *, rank: int, stream: str = "main") -> None:
        if self.mode == "cuda":
            with torch.cuda.stream(self._stream(stream)):
                tensor.zero_()
        else:
            tensor.zero_()

    def synchronize(self, *, rank: int) -> None:
        if self.mode == "cuda":
            torch.cuda.synchronize()

    def host_barrier(self) -> None:
        self.synchronize(rank=0)

    def expect_equal(self, tensor: Symmetric, reference: torch.Tensor, *, tile=None) -> None:
        """``tile``: the tiles stress classifies (``Harness.expect_equal``); compared whole here."""
        self.synchronize(rank=0)
        for r in range(self.world_size):
            self.expected.append((tensor.on(r).cpu().clone(), reference))


@contextlib.contextmanager
def example_module(folder: str, module: str = "harness"):
    """``examples/FOLDER/MODULE.py`` imported as a check imports it: its folder on ``sys.path``,
    ``import iris`` giving syncverify's device API, ``@syncverify.harness`` available (until the
    front end's core is merged, a stand-in that returns the function)."""
    path = str(EXAMPLES / folder)
    local = {p.stem for p in (EXAMPLES / folder).glob("*.py")}
    forget = lambda: [sys.modules.pop(name, None) for name in local]  # noqa: E731
    forget()  # a fresh import, bound to the device API installed now
    stand_in = not hasattr(syncverify, "harness")
    if stand_in:
        syncverify.harness = lambda fn: fn
    sys.path.insert(0, path)
    try:
        with devices.provided():
            with compiled_jit():
                imported = importlib.import_module(module)
            yield imported
    finally:
        sys.path.remove(path)
        forget()
        if stand_in:
            del syncverify.harness


def run_harness(harness, world_size: int, calls: int, *, mode: str = "interpret") -> SequentialHarness:
    """Run ``harness`` for ``calls`` calls on a :class:`SequentialHarness`."""
    sv = SequentialHarness(world_size, mode=mode)
    call = harness(sv)
    for k in range(calls):
        call(k)
    return sv
