"""Positive controls for a user's kernels: the synchronization the model relies on, taken away.

A clean stress run of a harness the model calls safe is evidence only if the same delays break a
kernel that is *not* safe. The control is a **mutant** of the user's kernel (the file untouched:
the kernel's source rewritten in memory, as ``syncverify.frontend.rewrite`` does) with one
synchronization step taken away, in this order (a missing CTA barrier is what per-warp delays
expose fastest on an H200):

1. a ``tl.debug_barrier()`` removed;
2. a fence removed (a call of a ``@triton.jit`` helper whose only synchronization is a fence,
   or the fence's inline asm itself);
3. a ``sem="release"``/``"acquire"``/``"acq_rel"`` weakened to ``"relaxed"``.

Only steps on the code the harness's launches run are tried: a branch whose test reads only
``tl.constexpr`` arguments (``if VERSION == "xchg":``) is decided from the launches' values. The
first mutant that the model check of the same harness calls **unsafe** is the control
(:func:`positive_control`); stress runs it under the same delays, and a control that does not
fail means the delays were ineffective (``DELAYS INEFFECTIVE``, exit 1).
"""

from __future__ import annotations

import ast
import itertools
import linecache
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from syncverify.frontend.check import check_kernel, load_harness
from syncverify.frontend.harness import DEFAULT_HEAP_BYTES, run_harness
from syncverify.frontend.rewrite import _Analyzer, _attr_chain, kernel_source, statement_kinds

_WEAKER = {"release": "relaxed", "acquire": "relaxed", "acq_rel": "relaxed"}
_count = itertools.count()


@dataclass
class Control:
    """A mutant the model calls unsafe: which kernel, what was taken away, the model's verdict."""

    change: str
    substitutes: dict  # id(original kernel) -> the mutant JITFunction
    violations: tuple
    kernel: str

    def describe(self) -> str:
        return (f"positive control: {self.kernel} with {self.change}; the model calls it unsafe "
                f"({', '.join(self.violations)})")


def _constexprs(fn_tree: ast.FunctionDef, launches: list) -> dict:
    """The values every launch of the kernel gives its plain (str/int/bool) keyword arguments, where all agree."""
    values: dict = {}
    for kwargs in launches:
        for name, value in kwargs.items():
            if isinstance(value, (str, int, bool)):
                values.setdefault(name, set()).add(value)
    return {name: next(iter(v)) for name, v in values.items() if len(v) == 1}


def _static(test: ast.expr, known: dict) -> bool | None:
    """The value of a branch test that reads only known constexpr arguments, else None."""
    names = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)}
    if not names or not names <= set(known):
        return None
    try:
        return bool(eval(compile(ast.Expression(test), "<test>", "eval"), {"__builtins__": {}}, dict(known)))  # noqa: S307
    except Exception:  # noqa: BLE001 -- not decidable here: keep both branches
        return None


def _reached(body: list[ast.stmt], known: dict) -> Iterator[ast.stmt]:
    """Statements of ``body`` (recursively) on branches the known constexprs do not rule out."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If):
            taken = _static(stmt.test, known)
            if taken is not False:
                yield from _reached(stmt.body, known)
            if taken is not True:
                yield from _reached(stmt.orelse, known)
        elif isinstance(stmt, (ast.For, ast.While)):
            yield from _reached(stmt.body, known)


def candidates(kernel: Any, launches: list) -> Iterator[tuple[str, Any]]:
    """``(change, mutant JITFunction)`` for each synchronization step of ``kernel`` the launches
    reach, in the module docstring's order."""
    tree, file, first, lines = kernel_source(kernel)
    known = _constexprs(tree, launches)
    analyzer = _Analyzer()
    scope = kernel.fn.__globals__
    reached = list(_reached(tree.body, known))
    found: list[tuple[int, str, ast.stmt, Callable]] = []
    for stmt in reached:
        if not isinstance(stmt, ast.Expr) or not isinstance(stmt.value, ast.Call):
            continue
        line = first + stmt.lineno - 1
        where = f"{file.rsplit('/', 1)[-1]}:{line}"
        chain = _attr_chain(stmt.value.func) or []
        kinds = statement_kinds(stmt, analyzer, scope, file)
        if chain[-1:] == ["debug_barrier"]:
            found.append((0, f"its tl.debug_barrier() at {where} removed", stmt, _remove))
        elif kinds == frozenset({"fence"}):
            found.append((1, f"its fence at {where} removed ({lines[stmt.lineno - 1].strip()})", stmt, _remove))
    for stmt in reached:
        for node in ast.walk(stmt) if not isinstance(stmt, (ast.If, ast.For, ast.While)) else ast.walk(
                getattr(stmt, "test", None) or stmt.iter):
            if isinstance(node, ast.Call):
                sem = next((k for k in node.keywords if k.arg == "sem"), None)
                if sem is not None and isinstance(sem.value, ast.Constant) and sem.value.value in _WEAKER:
                    line = first + node.lineno - 1
                    where = f"{file.rsplit('/', 1)[-1]}:{line}"
                    found.append((2, f"sem={sem.value.value!r} at {where} weakened to 'relaxed'", node,
                                  _weaken))
    seen = set()
    for _order, change, node, mutate in sorted(found, key=lambda item: item[0]):
        if change in seen:
            continue
        seen.add(change)
        text = list(lines)
        mutate(text, node)
        yield change, _build(kernel, tree, text, file, first)


def _remove(text: list[str], stmt: ast.stmt) -> None:
    """The statement's lines: ``pass`` on its first, the rest blank (line numbers kept)."""
    first = text[stmt.lineno - 1]
    text[stmt.lineno - 1] = first[:len(first) - len(first.lstrip())] + "pass"
    for i in range(stmt.lineno, stmt.end_lineno):
        text[i] = ""


_SEM = re.compile(r"""sem\s*=\s*(['"])(release|acquire|acq_rel)\1""")


def _weaken(text: list[str], call: ast.Call) -> None:
    """The call's ``sem=`` (the first one in its span) set to ``"relaxed"``."""
    for i in range(call.lineno - 1, call.end_lineno):
        start = call.col_offset if i == call.lineno - 1 else 0
        line = text[i]
        new = line[:start] + _SEM.sub('sem="relaxed"', line[start:], count=1)
        if new != line:
            text[i] = new
            return


def _build(kernel: Any, tree: ast.FunctionDef, text: list[str], file: str, first: int) -> Any:
    """The mutated kernel as a ``JITFunction``: its source registered in ``linecache`` under
    ``FILE~mutantN`` at the original line numbers (so a counterexample names the user's lines),
    its decorators blanked, its globals the original's."""
    # triton: only a stress run builds mutants (the model runs without it)
    from syncverify.kernels._jit import DualJITFunction

    body = ["" if i < tree.lineno - 1 else line for i, line in enumerate(text)]
    source = "\n" * (first - 1) + "\n".join(body) + "\n"
    filename = f"{file}~mutant{next(_count)}"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    scope = dict(kernel.fn.__globals__)
    exec(compile(source, filename, "exec"), scope)  # noqa: S102 -- the user's own kernel, one step removed
    return DualJITFunction(scope[tree.name])


def substituting(fn: Callable, substitutes: dict) -> Callable:
    """Harness ``fn`` with every launch of a substituted kernel launching its mutant instead."""

    def harness(sv):
        launch = sv.launch

        def substituted(kernel, *args, **kwargs):
            return launch(substitutes.get(id(kernel), kernel), *args, **kwargs)

        sv.launch = substituted
        return fn(sv)

    harness.__name__ = getattr(fn, "__name__", "harness")
    return harness


def launched(fn: Callable, world_size: int, calls: int, *,
             heap_bytes: int = DEFAULT_HEAP_BYTES) -> dict[int, tuple[Any, list[dict]]]:
    """``{id(kernel): (kernel, [keyword arguments of each launch])}`` of a harness, in launch order."""
    kernels: dict[int, tuple[Any, list]] = {}
    for op in run_harness(fn, world_size, calls, heap_bytes=heap_bytes).ops:
        if op.kind == "launch":
            kernels.setdefault(id(op.kernel), (op.kernel, []))[1].append(op.kwargs)
    return kernels


def positive_control(target: Any, *, world_size: int, calls: int, timeout: float = 120.0,
                     progress: Callable[[str], None] | None = None, defines: dict | None = None) -> Control | None:
    """The first mutant (module docstring) the model check of the harness calls unsafe; None if none is."""
    fn, _name = load_harness(target)
    for key, (kernel, launches) in launched(fn, world_size, calls).items():
        for change, mutant in candidates(kernel, launches):
            if progress is not None:
                progress(f"positive control: checking {kernel.fn.__name__} with {change}")
            result = check_kernel(substituting(fn, {key: mutant}), world_size=world_size, calls=calls,
                                  timeout=timeout, first=True)
            if result.safe is False:
                return Control(change, {key: mutant}, tuple(result.violations), kernel.fn.__name__)
    return None
