"""``--suggest`` for a harness: fixes phrased as source changes, each re-checked.

Candidates come from the lines the kernels' synchronization runs at (the labels of the lifted
program's instructions carry each one's ``file:line`` and source text):

* a ``sem="relaxed"`` (or a ``sem=`` left at a weaker value) strengthened to ``"release"``,
  ``"acquire"`` or ``"acq_rel"``; a ``scope="cta"``/``"gpu"`` widened;
* ``tl.debug_barrier()`` inserted before a line that signals (an atomic or a store of a flag): the
  CTA barrier that makes the other threads' stores part of the release;
* ``tl.atomic_xchg`` replaced by ``tl.atomic_add`` (an exchange overwrites another signal);
* when no single change is enough, pairs of them (a release needs its acquire), the weakest
  pairs first (:func:`strength`: the sum of what each change adds), bounded: at most
  :data:`MAX_PAIRS` pairs and, over the whole search, a time bound after which it answers
  unknown (:class:`FixSearch`), with a progress line after each re-check.

Each candidate is applied to a copy of the file in a temporary folder, the check is run again on
the mutated source (same harness, same bounds), and only the candidates that make it SAFE are
suggested: never a guess that was not checked.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from itertools import combinations
from syncverify.errors import SyncVerifyError
from syncverify.frontend.check import check_kernel

MAX_FIXES = 5
MAX_CANDIDATES = 24
MAX_PAIRS = 40  # pairs of changes tried when no single change makes the harness safe


@dataclass(frozen=True)
class Fix:
    """One source change and what it does to the verdict."""

    file: str
    line: int
    change: str  # in words: "`sem="relaxed"` → `sem="release"`" or "insert `tl.debug_barrier()` before"
    new_text: str  # the whole new line(s) replacing the old one

    def text(self) -> str:
        where = f"{os.path.basename(self.file)}:{self.line}"
        if self.change.startswith("insert"):
            return f"{self.change} line {self.line} ({where}); re-checked: SAFE"
        return f"line {self.line} ({where}): {self.change}; re-checked: SAFE"

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "change": self.change, "new_text": self.new_text}


_SEM = re.compile(r"""sem\s*=\s*(["'])(relaxed|acquire|release|acq_rel)\1""")
_SCOPE = re.compile(r"""scope\s*=\s*(["'])(cta|gpu)\1""")
_STRONGER = {"relaxed": ("release", "acquire", "acq_rel"), "acquire": ("acq_rel",), "release": ("acq_rel",)}
_WIDER = {"cta": ("gpu", "sys"), "gpu": ("sys",)}
_SIGNALS = ("tl.atomic_", "tl.store(")


def candidates(lifted) -> list[Fix]:
    """Single-line changes around the kernels' synchronization lines (see the module docstring)."""
    sites: dict[tuple[str, int], None] = {}
    for thread in lifted.program.threads:
        for ins in thread.instructions:
            label = getattr(ins, "label", "") or ""
            line = getattr(ins, "line", None)
            if line is None or " (" not in label:
                continue
            sites.setdefault((_file_of(lifted, label), line), None)
    fixes: list[Fix] = []
    for file, line in sites:
        if not file or not os.path.isfile(file):
            continue
        text = Path(file).read_text().splitlines()[line - 1]
        for m in _SEM.finditer(text):
            for stronger in _STRONGER.get(m[2], ()):
                new = text[:m.start()] + f'sem="{stronger}"' + text[m.end():]
                fixes.append(Fix(file, line, f'`sem="{m[2]}"` → `sem="{stronger}"`', new))
        for m in _SCOPE.finditer(text):
            for wider in _WIDER.get(m[2], ()):
                new = text[:m.start()] + f'scope="{wider}"' + text[m.end():]
                fixes.append(Fix(file, line, f'`scope="{m[2]}"` → `scope="{wider}"`', new))
        if "tl.atomic_xchg(" in text:
            fixes.append(Fix(file, line, "`tl.atomic_xchg` → `tl.atomic_add`",
                             text.replace("tl.atomic_xchg(", "tl.atomic_add(")))
        if any(s in text for s in _SIGNALS) and "while" not in text and not text.lstrip().startswith("if "):
            indent = text[:len(text) - len(text.lstrip())]
            fixes.append(Fix(file, line, "insert `tl.debug_barrier()` before", f"{indent}tl.debug_barrier()\n{text}"))
    return fixes[:MAX_CANDIDATES]


def _file_of(lifted, label: str) -> str:
    """The full path of the file a label names by its base name (``known.py:27 (kernel) ...``)."""
    base = label.split(":", 1)[0]
    for path in lifted.files:
        if os.path.basename(path) == base:
            return path
    return ""


#: What each kind of change adds, weakest first: a pair's strength is the sum of its two.
_STRENGTH = {"release": 1, "acquire": 1, "acq_rel": 2, "gpu": 1, "sys": 2, "insert": 1, "`tl.atomic_xchg`": 1}


def strength(fix: "Fix") -> int:
    """How much ``fix`` strengthens (1: a release, an acquire, one scope step, a barrier, an
    exchange made an add; 2: ``acq_rel``, or a scope widened to ``sys``), for weakest-first order.

    >>> strength(Fix("k.py", 3, '`sem="relaxed"` → `sem="acq_rel"`', "")), strength(Fix("k.py", 3, "insert `tl.debug_barrier()` before", ""))
    (2, 1)
    """
    new = fix.change.split("→")[-1]
    for word, rank in _STRENGTH.items():
        if f'"{word}"' in new or fix.change.startswith(word):
            return rank
    return 1


@dataclass
class FixSearch:
    """What :func:`search_fixes` found: the fixes (each a :class:`Fix` or a :class:`Pair`, each
    re-checked SAFE), how many re-checks it made of how many candidates, and ``bound``: why it
    stopped before trying them all ("" : it did not), which makes "no fix found" unknown."""

    fixes: list = field(default_factory=list)
    singles: int = 0
    pairs: int = 0
    rechecked: int = 0
    bound: str = ""

    def summary(self) -> str:
        """One line for an empty result: no fix of one or two changes, or unknown (the bound)."""
        if self.bound:
            return (f"no fix found before the search's bound ({self.bound}; {self.rechecked} re-checks of "
                    f"{self.singles} single changes and up to {self.pairs} pairs): unknown")
        return f"no fix of one or two changes found ({self.singles} single changes and {self.pairs} pairs re-checked)"


def suggest_fixes(argument, result, *, world_size: int, calls: int, threads_per_cta: int,
                  timeout: float | None = 60.0) -> list:
    """:func:`search_fixes`' fixes (single changes, then pairs when no single one works)."""
    return search_fixes(argument, result, world_size=world_size, calls=calls, threads_per_cta=threads_per_cta,
                        timeout=timeout).fixes


def search_fixes(argument, result, *, world_size: int, calls: int, threads_per_cta: int,
                 timeout: float | None = 60.0, budget: float | None = None,
                 progress: Callable[[str], None] | None = None) -> FixSearch:
    """The candidates that make the harness SAFE, each re-checked on the mutated source: single
    changes, then, when none works, pairs weakest first (a pair is a :class:`Pair`). ``timeout``
    bounds each re-check; ``budget`` the whole search (seconds; None: no bound), after which it
    stops and says so (``FixSearch.bound``). ``progress`` gets a line after each re-check."""
    search = FixSearch()
    if result.lifted is None or not isinstance(argument, str):
        return search
    start = time.monotonic()
    singles = candidates(result.lifted)
    search.singles = len(singles)
    pairs = sorted(((a, b) for a, b in combinations(singles, 2) if (a.file, a.line) != (b.file, b.line)),
                   key=lambda pair: strength(pair[0]) + strength(pair[1]))[:MAX_PAIRS]

    def safe_with(fixes: list, what: str) -> bool | None:
        """The re-check, or None when the budget is spent (the search then stops)."""
        left = None if budget is None else budget - (time.monotonic() - start)
        if left is not None and left <= 0:
            search.bound = f"{budget:.0f} s"
            return None
        bound = timeout if left is None else left if timeout is None else min(timeout, left)
        safe = _safe_with(argument, fixes, world_size, calls, threads_per_cta, bound)
        search.rechecked += 1
        if progress is not None:
            progress(f"suggest: {search.rechecked} re-checked ({what}), {len(search.fixes)} fixes, "
                     f"{time.monotonic() - start:.0f} s")
        return safe

    fixed: set = set()  # (file, line, what) already fixed by a weaker change: stronger ones are not suggested
    for n, fix in enumerate(singles, 1):
        kind = (fix.file, fix.line, fix.change.split("=")[0])
        if kind in fixed:
            continue
        safe = safe_with([fix], f"single change {n} of {len(singles)}")
        if safe is None:
            return search
        if safe:
            search.fixes.append(fix)
            fixed.add(kind)
            if len(search.fixes) >= MAX_FIXES:
                return search
    if search.fixes:
        return search
    search.pairs = len(pairs)
    paired: set = set()  # line pairs already fixed by weaker changes
    for n, (a, b) in enumerate(pairs, 1):
        lines = ((a.file, a.line), (b.file, b.line))
        if lines in paired:
            continue
        safe = safe_with([a, b], f"pair {n} of {len(pairs)}")
        if safe is None:
            return search
        if safe:
            search.fixes.append(Pair(a, b))
            paired.add(lines)
            if len(search.fixes) >= MAX_FIXES:
                break
    return search


@dataclass(frozen=True)
class Pair:
    """Two changes that are safe together (neither alone is)."""

    first: Fix
    second: Fix

    def text(self) -> str:
        return (self.first.text().replace("; re-checked: SAFE", "") + " and " +
                self.second.text().replace("; re-checked: SAFE", "") + "; re-checked together: SAFE")

    def to_json(self) -> dict:
        return {"together": [self.first.to_json(), self.second.to_json()]}


def _safe_with(argument: str, fixes: list, world_size: int, calls: int, threads_per_cta: int,
               timeout: float | None) -> bool:

    harness_file, _, name = argument.partition("::")
    try:
        with _mutated(harness_file, fixes) as mutated:
            target = mutated + (f"::{name}" if name else "")
            again = check_kernel(target, world_size=world_size, calls=calls, threads_per_cta=threads_per_cta,
                                 timeout=timeout)
    except SyncVerifyError:
        return False
    return again.safe is True


class _mutated:
    """A copy of the harness's folder with one line changed, imported in place of the original
    (modules loaded from the original folder are set aside meanwhile, then restored)."""

    def __init__(self, harness_file: str, fixes: list) -> None:
        self.harness = Path(harness_file).resolve()
        self.fixes = fixes

    def __enter__(self) -> str:
        folder = self.harness.parent
        self.tmp = tempfile.mkdtemp(prefix="syncverify-fix-")
        for path in folder.glob("*.py"):
            shutil.copy(path, self.tmp)
        # later lines first, so that an inserted line does not move the next change
        for fix in sorted(self.fixes, key=lambda f: -f.line):
            target = Path(self.tmp) / Path(fix.file).name
            if Path(fix.file).resolve().parent != folder and not target.exists():
                shutil.copy(fix.file, target)
            lines = target.read_text().splitlines(keepends=True)
            lines[fix.line - 1] = fix.new_text + "\n"
            target.write_text("".join(lines))
        folders = (str(folder),) + tuple(str(Path(f.file).parent) for f in self.fixes)
        self.saved = {n: m for n, m in sys.modules.items() if str(getattr(m, "__file__", "") or "").startswith(folders)}
        for n in self.saved:
            del sys.modules[n]
        sys.path.insert(0, self.tmp)
        return str(Path(self.tmp) / self.harness.name)

    def __exit__(self, *exc) -> None:
        if self.tmp in sys.path:
            sys.path.remove(self.tmp)
        for n, m in list(sys.modules.items()):
            if str(getattr(m, "__file__", "") or "").startswith(self.tmp):
                del sys.modules[n]
        sys.modules.update(self.saved)
        shutil.rmtree(self.tmp, ignore_errors=True)
