"""The house's plan, checked: the import graph of the installed layout has no cycle and no import
that runs upward, counting imports inside functions (a lazy import hides an edge from a reader,
not from Python). The layers, bottom first, are the README's layout section in data."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Where each installed package's files are in a checkout (pyproject.toml's package-dir).
SOURCES = {"syncverify": ROOT / "syncverify", "syncverify.protocols": ROOT / "protocols",
           "syncverify.kernels": ROOT / "kernels", "syncverify.stress": ROOT / "stress"}
#: Bottom first. A module may import its own layer and the layers below it, never one above.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("syncverify", "syncverify.errors", "syncverify.exitcodes", "syncverify.validation"),
    ("syncverify.model",),
    ("syncverify.program",),
    ("syncverify.explore",),
    ("syncverify.protocols",),
    ("syncverify.scenarios",),
    ("syncverify.verdicts",),
    ("syncverify.litmus",),
    ("syncverify.kernels",),
    ("syncverify.stress", "syncverify.litmus.gpu"),  # litmus tests on the GPU: compiled like the kernels
    ("syncverify.frontend",),
    ("syncverify.compare",),
    # the user's doors: the command line, and the pytest helpers that print command lines
    ("syncverify.cli", "syncverify.__main__", "syncverify.testing", "syncverify.pytest_plugin"),
)


def modules() -> dict[str, Path]:
    """Every module of the installed layout and its file in this checkout."""
    found: dict[str, Path] = {}
    for package, folder in SOURCES.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if package == "syncverify" and parts[0] in ("protocols", "kernels", "stress"):
                continue  # the checkout's links to the folders above, seen once through SOURCES
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: dict) -> list[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            here = module.split(".") if is_package else module.split(".")[:-1]
            here = here[: len(here) - node.level + 1]
            base = ".".join(here + ([base] if base else []))
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    resolved = []
    for name in names:
        while name not in known and "." in name:
            name = name.rsplit(".", 1)[0]
        if name in known:
            resolved.append(name)
    return resolved


def import_graph() -> nx.DiGraph:
    """Module -> module it imports (anywhere in the file), for the project's own modules."""
    known = modules()
    graph = nx.DiGraph()
    graph.add_nodes_from(known)
    for module, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _imported(node, module, path.name == "__init__.py", known):
                    if target != module:
                        graph.add_edge(module, target)
    return graph


def layer_of(module: str) -> int:
    best, where = -1, None
    for index, layer in enumerate(LAYERS):
        for prefix in layer:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, where = len(prefix), index
    if where is None:
        raise AssertionError(f"{module} is in no layer of tests/test_house.py: add it where it belongs")
    return where


def test_every_module_has_a_layer():
    for module in modules():
        layer_of(module)


def test_no_import_cycle():
    cycles = [sorted(c) for c in nx.strongly_connected_components(import_graph()) if len(c) > 1]
    assert cycles == []


def test_no_import_runs_upward():
    upward = [(a, b) for a, b in import_graph().edges if layer_of(b) > layer_of(a)]
    assert upward == []


@pytest.mark.parametrize("folder", ["model", "explore", "scenarios", "verdicts", "litmus", "cli"])
def test_the_folders_of_the_plan_exist(folder):
    assert (ROOT / "syncverify" / folder / "__init__.py").is_file()
