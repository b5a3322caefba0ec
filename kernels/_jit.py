"""``@jit``: one Triton function that both compiles (GPU, PTX audit) and interprets (CPU).

``triton.jit`` picks compiled or interpreted once, when it decorates, from ``TRITON_INTERPRET``.
That would force one mode per process, but CI runs the interpreted kernels *and* compiles the same
kernels to PTX for the audit in one pytest process. So every kernel and helper here is a real
``JITFunction`` (what the compiler sees, inlines and caches), and :meth:`DualJITFunction.launcher`
with ``interpret=True`` runs it under triton's ``InterpretedFunction`` instead.

Inside an interpreted launch, kernel bodies are plain Python and call other jit functions
directly (ours, and ``tl.zeros``, ``tl.cdiv``, ``tl.sum``, ... which are ``@jit`` functions in
``triton.language.standard``). A ``JITFunction`` called from Python normally raises "Cannot call
@triton.jit'd outside of the scope of a kernel"; for the duration of an interpreted launch only,
:func:`_interpreting_calls` makes such a call run the function under the interpreter, which is
what ``TRITON_INTERPRET=1`` would have decorated it as. The compiler never calls ``__call__``, so
compiled launches are unaffected. The same context fixes one numpy >= 2.4 incompatibility of the
triton 3.6 interpreter (:func:`_patch_lang_tensor`).
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading

import numpy as np
import triton.language as tl

import triton.runtime.interpreter as _interpreter
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

from syncverify.kernels._deps import interpreting
from syncverify.kernels.errors import UnsupportedStep
from syncverify.kernels.ptx_reader import arrive_laps

_lock = threading.RLock()


def _interpreted(fn: JITFunction) -> InterpretedFunction:
    cached = fn.__dict__.get("_syncverify_interpreted")
    if cached is None:
        cached = InterpretedFunction(fn.fn)
        fn.__dict__["_syncverify_interpreted"] = cached
    return cached


def _call_interpreted(self, *args, **kwargs):
    # InterpretedFunction.__call__ patches triton.language for the callee's globals and never
    # restores it (harmless when a whole process interprets; here it would break the next
    # compile). Same patch, restored on return.
    scope = _interpreter._patch_lang(self.fn)
    try:
        return _interpreted(self).rewrite()(*args, **kwargs)
    except Exception as error:
        raise _interpreter.InterpreterError(repr(error)) from error
    finally:
        scope.restore()


def _patch_lang_tensor(tensor, scope):
    """triton 3.6's patch, with ``__index__`` accepting the interpreter's 1-element scalars.

    The interpreter keeps a scalar as a shape-(1,) array and converts it with ``int(array)``,
    which numpy >= 2.4 refuses ("only 0-dimensional arrays can be converted to Python scalars"):
    ``range(tl.program_id(0), n, step)`` would fail. ``.item()`` converts either shape.
    """
    _original_patch_lang_tensor(tensor, scope)
    scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0].item()))


_original_patch_lang_tensor = _interpreter._patch_lang_tensor


@contextlib.contextmanager
def _interpreting_calls():
    """While active, a ``JITFunction`` called from Python runs under the interpreter."""
    with _lock:
        original = JITFunction.__call__
        JITFunction.__call__ = _call_interpreted
        _interpreter._patch_lang_tensor = _patch_lang_tensor
        try:
            yield
        finally:
            JITFunction.__call__ = original
            _interpreter._patch_lang_tensor = _original_patch_lang_tensor


class DualJITFunction(JITFunction):
    """A ``JITFunction`` that can also run in Triton's CPU interpreter."""

    def interpreted(self) -> InterpretedFunction:
        """The same function under the interpreter (built once)."""
        return _interpreted(self)

    def _compile(self, grid, *args, **kwargs):
        kernel = self.warmup(*args, grid=grid, **kwargs)
        kernel = kernel.result() if hasattr(kernel, "result") else kernel  # an async compile
        refuse_arrive_laps(self.fn.__name__, kernel.asm["ptx"])
        # Load the binary and build the launcher now: the first launch would otherwise do it
        # (a C launcher stub, a module load), long enough for a peer's kernel to time out.
        kernel._init_handles()
        return kernel

    def launcher(self, grid, *, interpret: bool | None = None, compile_only: bool = False):
        """``kernel[grid]`` in the requested mode (default: ``TRITON_INTERPRET``).

        ``compile_only``: compile for these arguments (the same binding and specialization as a
        launch) without running; the interpreter has nothing to compile, so it does nothing.
        """
        if interpret is None:
            interpret = interpreting()
        if compile_only:
            return (lambda *args, **kwargs: None) if interpret else functools.partial(self._compile, grid)
        if not interpret:
            return self[grid]
        run = self.interpreted()[grid]

        def launch(*args, **kwargs):
            for option in ("num_warps", "num_stages", "num_ctas"):
                kwargs.pop(option, None)
            with _interpreting_calls():
                return run(*args, **kwargs)

        return launch


def refuse_arrive_laps(name: str, ptx: str) -> None:
    """Refuse a compiled kernel in which a warp that only arrives at a named barrier could arrive
    there again before the phase it arrived in completes (``syncverify.kernels.ptx_reader.arrive_laps``):
    the phase would complete with the wrong warps, or a waiting warp would hang at ``bar.sync``,
    which no bound can stop. Raises :class:`~syncverify.kernels.errors.UnsupportedStep`."""
    laps = arrive_laps(ptx)
    if laps:
        raise UnsupportedStep(f"{name}: {laps[0]}, so a warp that only arrives could arrive for its next tile "
                              f"before the waiting warp's phase completes (a hang); this kernel's role cannot run "
                              f"a barrier step with 'arrive' (a role whose tiles pass a GEMM can)")


def jit(fn=None, *, do_not_specialize=None):
    """Decorate a Triton kernel or helper (``@triton.jit`` that works in both modes).

    ``do_not_specialize`` names integer arguments that change from launch to launch (the
    iteration, a seed): Triton otherwise compiles a separate kernel when one equals 1 or is
    divisible by 16.
    """
    if fn is None:
        return lambda f: DualJITFunction(f, do_not_specialize=do_not_specialize)
    return DualJITFunction(fn, do_not_specialize=do_not_specialize)


_FENCE = re.compile(r"^\s*fence\.(sc|acq_rel)\.(cta|gpu|sys)\s*;\s*mov\.u32 \$0, 0;\s*$")
#: ``tl.extra.cuda.gdc_wait()`` / ``gdc_launch_dependents()``: Triton 3.6's strings.
_GRID_DEPENDENCY = re.compile(r"^\s*griddepcontrol\.(wait|launch_dependents)\s*;\s*(//.*)?$")


class _AsmCall:
    """What ``tl.inline_asm_elementwise`` expects from the builder: results by index."""

    def __init__(self, result) -> None:
        self.result = result

    def get_result(self, index: int):
        return self.result


@contextlib.contextmanager
def fences_as_no_ops():
    """Let ``fence.*; mov.u32 $0, 0;`` and ``griddepcontrol.*`` inline PTX through the interpreter
    (as no-ops); refuse any other.

    The interpreter runs one program at a time, sequentially consistent, and each launch to its
    end before the next: it already orders everything a fence or a PDL wait could (tests'
    sequential harness runs, ``syncverify stress --interpret``)."""
    builder = _interpreter.interpreter_builder
    original = builder.create_inline_asm

    def create_inline_asm(asm, constraints, values, type, is_pure, pack):
        if not (_FENCE.match(asm) or _GRID_DEPENDENCY.match(asm)):
            return original(asm, constraints, values, type, is_pure, pack)
        zero = _interpreter.TensorHandle(np.zeros(1, dtype=np.int32), tl.int32)
        return _AsmCall(zero)

    shadowed = "create_inline_asm" in vars(builder)
    builder.create_inline_asm = create_inline_asm
    try:
        yield
    finally:
        # take the instance attribute away again: left behind, the original bound method would
        # shadow the class method the front end's hooks patch (its inline asm then refused)
        if shadowed:
            builder.create_inline_asm = original
        else:
            del builder.create_inline_asm
