"""torch and triton, imported once, with a clear error when they are missing.

``kernels`` and ``stress`` modules that need them import ``torch``, ``triton`` and ``tl`` from here,
so a machine without them gets one :class:`~syncverify.kernels.errors.MissingDependency` line, not a
``ModuleNotFoundError`` traceback from deep inside a module.
"""

from __future__ import annotations

import os

from syncverify.kernels.errors import MissingDependency

try:
    import torch
    import triton
    import triton.language as tl
except ImportError as error:  # pragma: no cover - CI always has the CPU builds
    raise MissingDependency(
        f"the GPU half of syncverify needs torch and triton ({error}); "
        "install them in the syncverify checkout with: python -m pip install -e '.[gpu]' "
        "(CPU builds, no GPU: torch==2.13.0 triton==3.6.0 numpy)"
    ) from error


def interpreting() -> bool:
    """True when Triton runs kernels in its CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def require_cuda(what: str) -> None:
    """Raise :class:`MissingDependency` unless a CUDA device is visible."""
    if not torch.cuda.is_available():
        raise MissingDependency(
            f"{what} needs a CUDA GPU and none is visible; use --interpret (TRITON_INTERPRET=1) "
            "to run the same kernels on the CPU at tiny sizes"
        )


__all__ = ["torch", "triton", "tl", "interpreting", "require_cuda"]
