"""syncverify: verify and stress-test the synchronization protocols inside fused multi-GPU kernels."""

from syncverify.errors import (
    LitmusSyntaxError,
    ProtocolError,
    ScenarioError,
    SyncVerifyError,
    UnsupportedConstruct,
)

__version__ = "0.1.0"

__all__ = [
    "LitmusSyntaxError",
    "ProtocolError",
    "ScenarioError",
    "SyncVerifyError",
    "UnsupportedConstruct",
    "__version__",
]
