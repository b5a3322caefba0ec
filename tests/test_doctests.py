"""The examples in docstrings are tests too: every model, protocol and stress module's doctests
run here (they need no GPU), so an example that stops being true fails CI."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import syncverify
import syncverify.protocols
import syncverify.stress


def _modules_with_examples() -> list[str]:
    names = []
    for package in (syncverify, syncverify.protocols, syncverify.stress):
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            if info.ispkg:
                continue
            path = Path(info.module_finder.path) / (info.name.rsplit(".", 1)[1] + ".py")
            if path.exists() and ">>>" in path.read_text():
                names.append(info.name)
    return sorted(set(names))


MODULES = _modules_with_examples()


def test_the_examples_are_found():
    assert "syncverify.relations" in MODULES and "syncverify.stress.guided" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed"
