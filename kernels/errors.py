"""The errors the GPU half raises: all of them are :class:`syncverify.errors.SyncVerifyError`.

They are raised on the host, before anything is launched: a protocol step a kernel cannot
express fails when the kernel is *built* (``syncverify.kernels.plan``), a size that does not divide fails
when the launch is *checked*, never inside a running kernel.
"""

from __future__ import annotations

from syncverify.errors import ScenarioError, SyncVerifyError, UnsupportedConstruct


class UnsupportedStep(UnsupportedConstruct):
    """A protocol step the Triton kernels cannot express (``store`` with ``sem="release"``, ...)."""


class StressConfigError(ScenarioError):
    """Kernel or campaign options that cannot run (sizes that do not divide, too many ranks, ...)."""


class MissingDependency(SyncVerifyError):
    """torch, triton or CUDA is missing for a GPU-side module."""


class PlacementError(SyncVerifyError):
    """A stress run's heap cannot be placed as asked on this machine (``syncverify.kernels.placement``)."""
