"""The house's plan, checked: the import graph of the installed layout has no cycle and no import
that runs upward, counting imports inside functions (a lazy import hides an edge from a reader,
not from Python). The layers, bottom first, are the README's layout section in data."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
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
    # NVSHMEM calls and stream memory operations lowered to program instructions
    ("syncverify.program", "syncverify.delivery", "syncverify.streams"),
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


@functools.cache
def _tree(path: Path) -> ast.Module:
    """The parsed file. Cached for the run (the sources do not change during it): the rules below
    walk every module five times, and parsing them was most of this file's time (2026-12-02)."""
    return ast.parse(path.read_text(), str(path))


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


@functools.cache
def import_graph() -> nx.DiGraph:
    """Module -> module it imports (anywhere in the file), for the project's own modules (one graph
    per run, shared by the tests that read it: none changes it)."""
    known = modules()
    graph = nx.DiGraph()
    graph.add_nodes_from(known)
    for module, path in known.items():
        for node in ast.walk(_tree(path)):
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


# ----- imports at the top of the file -----------------------------------------------------------

#: What a function may import lazily: torch and triton (the model runs without them, on a machine
#: without a GPU) and matplotlib (about a second to import, only for drawing a picture).
#: cuda: NVIDIA's cuda-python driver bindings, which only a stress run that places a buffer loads
#: (``syncverify.kernels.placement``).
LAZY_ROOTS = ("torch", "triton", "matplotlib", "cuda")
#: Modules a third party imports at its own start, which import the rest of syncverify only when
#: it is used, and the word their comment names: pytest loads the plugin in every session
#: (entry point ``pytest11``), where importing the campaign and the command line costs seconds.
DEFERRING = {"syncverify.pytest_plugin": "pytest"}


def _module_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append(child)
            elif not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child)

    visit(tree)
    return found


def _function_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    module_level = {id(n) for n in _module_level_imports(tree)}
    return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in module_level]


def _roots(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name.split(".")[0] for alias in node.names]
    return [] if node.level else [(node.module or "").split(".")[0]]


@functools.cache
def gpu_modules() -> frozenset[str]:
    """The project modules that import torch or triton when they are imported: directly, or
    through a project module that does (module-level imports only)."""
    known = modules()
    reaches: dict[str, set[str]] = {}
    gpu: set[str] = set()
    for module, path in known.items():
        tree = _tree(path)
        reaches[module] = set()
        for node in _module_level_imports(tree):
            if set(_roots(node)) & {"torch", "triton"}:
                gpu.add(module)
            reaches[module].update(_imported(node, module, path.name == "__init__.py", known))
    graph = nx.DiGraph([(a, b) for a, targets in reaches.items() for b in targets])
    return frozenset(gpu | {m for m in graph if m not in gpu and nx.descendants(graph, m) & gpu})


def _says_why(lines: list[str], index: int, words: tuple[str, ...] = LAZY_ROOTS) -> bool:
    """A comment naming one of ``words`` on line ``index`` or on the lines of comments and imports
    directly above it (one comment may head a group of lazy imports)."""
    def names_it(line: str) -> bool:
        return "#" in line and any(word in line.split("#", 1)[1] for word in words)

    while index >= 0:
        line = lines[index].strip()
        if names_it(line):
            return True
        if not line.startswith(("#", "import ", "from ")):
            return False
        index -= 1
    return False


def test_imports_sit_at_the_top_of_the_file_but_the_commented_torch_triton_guards():
    """Every import inside a function (or a method, or a lambda) of any module of the installed
    layout is a *lazy guard*: it imports torch, triton or matplotlib, or a project module of
    :func:`gpu_modules` (one whose import imports torch or triton), and a comment naming torch,
    triton or matplotlib says why, on the import's line or above its group of consecutive imports.
    The one other kind: in a module of :data:`DEFERRING` (the pytest plugin), any import, with a
    comment naming the third party that loads it. Any other import belongs at the top of the
    file, where a reader (and this file's import graph) sees it."""
    known = modules()
    gpu = gpu_modules()
    bad = []
    for module, path in known.items():
        lines = path.read_text().splitlines()
        for node in _function_imports(_tree(path)):
            targets = _imported(node, module, path.name == "__init__.py", known)
            guard = set(_roots(node)) & set(LAZY_ROOTS) or (targets and set(targets) <= gpu)
            deferred = module in DEFERRING and _says_why(lines, node.lineno - 1, (DEFERRING[module],))
            if not deferred and (not guard or not _says_why(lines, node.lineno - 1)):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    assert bad == []


def test_a_lazy_import_the_rule_refuses_is_found():
    """The rule above, on a module written for it: a project import in a function without a
    reason fails; the same import of a GPU module with a comment passes."""
    lines = ["def f():", "    from syncverify.errors import SyncVerifyError", "",
             "def g():", "    # torch: only the GPU path", "    from syncverify.kernels._deps import torch"]
    tree = ast.parse("\n".join(lines))
    found = [(n.lineno, _says_why(lines, n.lineno - 1)) for n in _function_imports(tree)]
    assert found == [(2, False), (6, True)]
    assert "syncverify.kernels._deps" in gpu_modules() and "syncverify.errors" not in gpu_modules()


#: The front doors that must work on a machine without torch and triton: the package, the model,
#: and the commands that need no GPU (each run to its end, in a fresh interpreter), with the exit
#: code each gives.
FRONT_DOORS = {
    "import syncverify": ("import syncverify; rc = 0", 0),
    "the model": ("import syncverify.model.ptx, syncverify.program, syncverify.explore.driver, "
                  "syncverify.scenarios.build, syncverify.verdicts.check; rc = 0", 0),
    "syncverify list": ("from syncverify.cli import main; rc = main(['list'])", 0),
    "syncverify check": ("from syncverify.cli import main; rc = main(['check', 'xchg-flag'])", 1),
    "syncverify litmus": ("from syncverify.cli import main; "
                          "rc = main(['litmus', 'syncverify/litmus/examples/mp-gpu.litmus'])", 0),
    "syncverify compare --no-gpu": ("from syncverify.cli import main; "
                                    "rc = main(['compare', 'epoch-flag', '--scenario', 'all-reduce', '--no-gpu'])", 0),
}


@pytest.fixture(scope="module")
def doors(tmp_path_factory):
    """Every front door started at once, each in its own fresh interpreter (what it imports is the
    claim, so they cannot share one): on CI's two idle cores two run at a time instead of one (on a
    saturated machine it gains nothing: 13.3 s -> 14.3 s at load 10, 2026-12-02). Output goes to
    files: a pipe nobody reads yet could fill and stall a door."""
    folder = tmp_path_factory.mktemp("doors")
    started = {}
    for index, (door, (code, _)) in enumerate(FRONT_DOORS.items()):
        out, err = (open(folder / f"{index}.{name}", "w+") for name in ("out", "err"))
        process = subprocess.Popen([sys.executable, "-c", f"import sys\n{code}\nprint(rc, sorted(m for m in "
                                    "sys.modules if m.split('.')[0] in ('torch', 'triton')))"],
                                   stdout=out, stderr=err, text=True, cwd=ROOT)
        started[door] = (process, out, err)
    yield started
    for process, out, err in started.values():
        if process.poll() is None:
            process.kill()
            process.wait()
        out.close()
        err.close()


@pytest.mark.parametrize("door", sorted(FRONT_DOORS))
def test_the_front_doors_import_neither_torch_nor_triton(door, doors):
    exit_code = FRONT_DOORS[door][1]
    process, out, err = doors[door]
    process.wait(timeout=300)
    stdout, stderr = (f.seek(0) or f.read() for f in (out, err))
    assert process.returncode == 0, stderr
    assert stdout.strip().splitlines()[-1] == f"{exit_code} []", stdout[-2000:]
