"""One family of exceptions for everything a user can get wrong.

Every message names the offending value and, where there is one, the fix; the CLI prints
``str(error)`` on one line and exits with :data:`syncverify.exitcodes.INPUT_ERROR`.
"""

from __future__ import annotations


class SyncVerifyError(Exception):
    """Base class: bad input or an unsupported construct. Never a bug in syncverify itself."""


class LitmusSyntaxError(SyncVerifyError):
    """A litmus file that does not parse. ``str()`` is ``FILE:LINE: what is wrong``."""

    def __init__(self, message: str, *, path: str = "<string>", line: int | None = None) -> None:
        self.path = path
        self.line = line
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")


class UnsupportedConstruct(SyncVerifyError):
    """An instruction or option the model cannot interpret: refused, never silently skipped."""


class ProtocolError(SyncVerifyError):
    """A protocol file or name that cannot be loaded (unknown name, malformed TOML, bad step)."""


class ScenarioError(SyncVerifyError):
    """Scenario options out of range (world size, tiles, epochs, ...)."""
