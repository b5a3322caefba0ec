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
    """In a source checkout, ``syncverify.kernels`` is the ``kernels/`` folder beside the imported
    ``syncverify/``, as ``pyproject.toml`` maps it when installing. That lets the tree run without
    installing (the GPU machines get a copy of it) and keeps a second checkout from importing the
    editable install's folders. Installed as a wheel, the subpackage is inside ``syncverify/`` and
    the standard path finder, asked first, finds it."""

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


def _install_finder() -> None:
    if any(isinstance(f, _SourceFolders) for f in sys.meta_path):
        return
    from importlib.machinery import PathFinder

    after = [i for i, f in enumerate(sys.meta_path) if f is PathFinder]
    sys.meta_path.insert(after[0] + 1 if after else len(sys.meta_path), _SourceFolders())


_install_finder()

__all__ = [
    "LitmusSyntaxError",
    "ProtocolError",
    "ScenarioError",
    "SyncVerifyError",
    "UnsupportedConstruct",
    "__version__",
]
