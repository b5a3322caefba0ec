"""syncverify: verify and stress-test the synchronization protocols inside fused multi-GPU kernels."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from pathlib import Path
from importlib.machinery import PathFinder

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

    after = [i for i, f in enumerate(sys.meta_path) if f is PathFinder]
    sys.meta_path.insert(after[0] + 1 if after else len(sys.meta_path), _SourceFolders())


_install_finder()

#: The API a user scripts, imported on first use (``import syncverify`` stays light: the GPU
#: half imports torch and triton only inside ``run_campaign``).
_EXPORTS = {
    # protocols: the data
    "load_protocol": "syncverify.protocols", "parse_protocol": "syncverify.protocols",
    "protocol_from_dict": "syncverify.protocols", "builtin_names": "syncverify.protocols",
    "Protocol": "syncverify.protocols",
    # scenarios and the model check
    "ScenarioOptions": "syncverify.scenarios.build", "build_scenario": ("syncverify.scenarios.build", "build"),
    "ROLES": "syncverify.scenarios.build", "check_protocol": "syncverify.verdicts.check", "CheckResult": "syncverify.verdicts.check",
    "Violation": "syncverify.verdicts.check", "assert_safe": "syncverify.testing",
    # the user's own Triton kernels, through a harness
    "harness": "syncverify.frontend.harness", "check_kernel": "syncverify.frontend.check",
    "assert_kernel_safe": "syncverify.testing", "KernelCheckResult": "syncverify.frontend.verdicts",
    # litmus tests
    "parse_litmus": "syncverify.litmus.parser", "parse_litmus_file": "syncverify.litmus.parser",
    "run_litmus": "syncverify.litmus.runner",
    # stress on the GPU (or the Triton interpreter)
    "run_campaign": "syncverify.stress.campaign",
    "guided_plan": "syncverify.stress.guided", "run_guided": "syncverify.stress.guided",
    "positive_control": "syncverify.stress.controls", "replay": "syncverify.stress.replay",
}


def __getattr__(name: str):
    """Import an exported name on first use (PEP 562)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'syncverify' has no attribute {name!r}")
    where = _EXPORTS[name]
    module, attribute = where if isinstance(where, tuple) else (where, name)
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


__all__ = [
    "CheckResult",
    "KernelCheckResult",
    "LitmusSyntaxError",
    "Protocol",
    "ProtocolError",
    "ROLES",
    "ScenarioError",
    "ScenarioOptions",
    "SyncVerifyError",
    "UnsupportedConstruct",
    "Violation",
    "__version__",
    "assert_kernel_safe",
    "assert_safe",
    "build_scenario",
    "check_kernel",
    "builtin_names",
    "check_protocol",
    "load_protocol",
    "parse_litmus",
    "parse_litmus_file",
    "parse_protocol",
    "protocol_from_dict",
    "guided_plan",
    "harness",
    "positive_control",
    "replay",
    "run_campaign",
    "run_guided",
    "run_litmus",
]
