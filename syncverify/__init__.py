"""syncverify: verify and stress-test the synchronization protocols inside fused multi-GPU kernels."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from pathlib import Path

from syncverify.errors import (
    LitmusSyntaxError,
    ProtocolError,
    ScenarioError,
    SyncVerifyError,
    UnsupportedConstruct,
)

__version__ = "0.1.0"

#: Folders that sit at the top of a source checkout and install as ``syncverify.NAME``.
_SOURCE_FOLDERS = ("protocols", "kernels", "stress")


class _SourceFolders(importlib.abc.MetaPathFinder):
    """Run from a source checkout without installing (the GPU machines get a copy of the tree),
    ``syncverify.kernels`` is the top-level ``kernels/`` folder, as ``pyproject.toml`` maps it
    when installing. Installed, the subpackage exists inside ``syncverify/`` and this finder,
    placed after the standard ones, is never asked."""

    root = Path(__file__).resolve().parent.parent

    def find_spec(self, fullname, path=None, target=None):
        prefix, _, name = fullname.partition(".")
        if prefix != __name__ or name not in _SOURCE_FOLDERS:
            return None
        init = self.root / name / "__init__.py"
        if not init.is_file():
            return None
        return importlib.util.spec_from_file_location(fullname, init,
                                                      submodule_search_locations=[str(init.parent)])


if not any(isinstance(f, _SourceFolders) for f in sys.meta_path):
    sys.meta_path.append(_SourceFolders())

__all__ = [
    "LitmusSyntaxError",
    "ProtocolError",
    "ScenarioError",
    "SyncVerifyError",
    "UnsupportedConstruct",
    "__version__",
]
