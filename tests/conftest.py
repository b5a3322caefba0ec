"""The syncverify pytest plugin for our own tests.

Installed, syncverify brings it through the ``pytest11`` entry point; a source tree run without
installing (the GPU machines get a copy of it) loads it here. Loading it twice is an error, so
this asks only when the entry point does not.
"""

from __future__ import annotations

import os
from importlib.metadata import entry_points


def _from_entry_point() -> bool:
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return False
    return any(ep.value == "syncverify.pytest_plugin" for ep in entry_points(group="pytest11"))


pytest_plugins = [] if _from_entry_point() else ["syncverify.pytest_plugin"]
