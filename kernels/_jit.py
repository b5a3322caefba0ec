"""``@jit``: one Triton function that both compiles (GPU, PTX audit) and interprets (CPU).

``triton.jit`` picks compiled or interpreted once, when it decorates, from ``TRITON_INTERPRET``.
That would force one mode per process, but CI runs the interpreted kernels *and* compiles the same
kernels to PTX for the audit in one pytest process. So every kernel and helper here is a
:class:`DualJITFunction`: a real ``JITFunction`` (what the compiler sees, calls and caches) that,
when called from interpreted code or launched with ``interpret=True``, hands the call to a
``triton`` ``InterpretedFunction`` wrapping the same Python function.
"""

from __future__ import annotations

from kernels._deps import interpreting
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction


class DualJITFunction(JITFunction):
    """A ``JITFunction`` that can also run in Triton's CPU interpreter."""

    _interpreted_fn = None

    def interpreted(self) -> InterpretedFunction:
        """The same function under the interpreter (built once)."""
        if self._interpreted_fn is None:
            self._interpreted_fn = InterpretedFunction(self.fn)
        return self._interpreted_fn

    def __call__(self, *args, **kwargs):
        # The compiler never calls a helper: it inlines it. A call reaching Python comes from a
        # kernel body running in the interpreter.
        return self.interpreted()(*args, **kwargs)

    def launcher(self, grid, *, interpret: bool | None = None):
        """``kernel[grid]`` in the requested mode (default: ``TRITON_INTERPRET``)."""
        if interpret is None:
            interpret = interpreting()
        return self.interpreted()[grid] if interpret else self[grid]


def jit(fn) -> DualJITFunction:
    """Decorate a Triton kernel or helper (``@triton.jit`` that works in both modes)."""
    return DualJITFunction(fn)
