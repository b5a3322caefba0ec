"""The examples in docstrings are tests too: every module of the installed layout whose source has
an example (``>>>``) runs it here (none needs a GPU; the kernels' modules need triton's CPU
build, which CI installs), so an example that stops being true fails CI. The modules are found by
walking the files of every package (``tests/test_house.py``'s map), so a module moved into a new
folder is still collected."""

from __future__ import annotations

import doctest
import importlib

import pytest

from tests.test_house import modules

MODULES = sorted(name for name, path in modules().items() if ">>>" in path.read_text())


def test_the_examples_are_found():
    for name in ("syncverify.model.relations", "syncverify.explore.driver", "syncverify.verdicts.check",
                 "syncverify.stress.guided", "syncverify.protocols.rules", "syncverify.kernels.plan"):
        assert name in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 or name in _PROSE_ONLY, f"no example of {name} ran"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed"


#: Modules whose ``>>>`` is inside prose or a string, not a docstring example.
_PROSE_ONLY: frozenset[str] = frozenset()
