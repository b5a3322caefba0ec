"""The weakest fix: the smallest strengthenings of an unsafe protocol that the model proves safe.

:func:`suggest` edits the protocol as data (``Protocol.to_dict()``), never its text: it proposes
single strengthenings, then pairs, re-checks every candidate with
:func:`syncverify.verdicts.check.check_protocol` in the same scenario, and keeps those that come back
``safe is True``. Pure Python; no torch or triton.

Decisions made here:

* **Strengthenings** (values from :mod:`syncverify.protocols.loader`), each one :class:`Change`:

  - ``sem``: raise a step's semantics along the format's order: stores ``weak < relaxed <
    release`` (a weak store made relaxed/release needs a scope and loses its cache modifier, so
    one change names both the sem and the scope); signal atomics ``relaxed < release, acquire <
    acq_rel``; reads (wait ``atomic_cas``, ``atomic_cas``/``atomic_add`` polls) ``relaxed <
    acquire < acq_rel``; fences ``release, acquire < acq_rel < sc``. Any stronger value is one
    change.
  - ``scope``: widen ``cta < gpu < sys``; any wider scope is one change.
  - ``barrier``: insert ``{op = "barrier"}`` in any gap of ``signal`` or ``wait`` not next to a
    barrier already (two adjacent barriers are one).
  - ``fence``: a ``release`` fence at ``sys`` scope just before a signal write (``store``,
    ``atomic_xchg``, ``atomic_add``); an ``acquire`` fence at ``sys`` scope just after a wait
    step. Not next to the same fence already.
  - ``read``: poll with ``atomic_add`` of 0, ``acquire``, ``sys`` instead of a ``load`` or
    ``volatile_load``.

* **Positions** in descriptions are the *original* protocol's steps, counted from 1 ("add a CTA
  barrier before signal step 2"), whatever else a fix inserts.
* **Order** (smallest first): fewer changes first; then by cost, the sum over changes of
  ``KIND_COST`` (sem/scope 1, barrier 2, fence 3, read 4; a sem or scope raised two notches
  costs one more), then the changes' kinds, then the order changes were generated
  (signal before wait, step order). Only fixes with the fewest changes are returned: once single
  changes give a fix, pairs are not searched (a pair would add a change the model does not need).
* **Bounds**: ``max_checks`` re-checks and ``timeout`` seconds in all; each re-check has
  ``check_timeout`` seconds, and one that answers unknown is not a fix. A search stopped by a
  bound says so (``stopped``, ``tried``).
* **A fix is proven for the scenario it was checked in, no more.** ``xchg-flag``'s fixes at world
  size 2 (its ``xchg(1)`` to ``others`` reaches the one other rank) are unsafe at 3; check a fix
  at the sizes that matter, or search there (``world_size=3`` finds none within 2 changes).
* **Diffs** are unified diffs of the protocol's own file as written (:func:`file_diff`: its lines
  edited in place, comments and omitted defaults kept, a missing key added to its step's table),
  so they apply with ``patch -p0`` from the directory ``check`` ran in; each is checked by parsing
  the edited text back to the fixed protocol. A protocol with no file (or not one table per step)
  gets the diff of its re-written TOML (:func:`protocol_toml`) under a line saying so.
* **One fix per lowering**: two fixes whose protocols lower to the same PTX
  (:func:`lowering_key`: ``read = "load"`` with ``sem = "acquire"`` and ``read = "atomic_add"`` of 0
  with ``sem = "acquire"`` are both ``ld.acquire`` on one thread, then ``bar.sync``) are one; the
  first is kept and names the other (``same_ptx``).
"""

from __future__ import annotations

import difflib
import json
import re
import time
from dataclasses import dataclass
from typing import Any

from syncverify.errors import SyncVerifyError
from syncverify.protocols.loader import (
    ATOMIC_SEMS, FENCE_SEMS, READ_SEMS, SCOPES, STORE_SEMS, protocol_from_dict,
)
from syncverify.protocols.model import Protocol
from syncverify.protocols import load_protocol
from syncverify.verdicts.check import check_protocol
import tomllib
import os
from pathlib import Path
from syncverify.protocols.loader import parse_protocol
from syncverify.protocols.lowering import lower_step, lower_tile_load, lower_tile_store
from syncverify.protocols.rules import SECTIONS, section_steps

__all__ = ["Change", "Fix", "Suggestions", "protocol_toml", "suggest"]

DEFAULT_MAX_CHANGES = 2
DEFAULT_MAX_CHECKS = 200
DEFAULT_TIMEOUT = 120.0  # seconds for the whole search
DEFAULT_CHECK_TIMEOUT = 10.0  # seconds per re-check

#: Cost of one change of each kind: the order in which fixes are offered.
KIND_COST = {"sem": 1, "scope": 1, "barrier": 2, "reset": 2, "fence": 3, "target": 3, "read": 4}

#: ``until`` operators whose target can grow with the call (a counter or flag that only rises).
GROWING_UNTILS = ("==", ">=", ">")

SIGNAL_WRITES = ("store", "atomic_xchg", "atomic_add")

# "Stronger than" as a rank per value; values of equal rank are incomparable (release/acquire).
_STORE_RANK = {"weak": 0, "relaxed": 1, "release": 2}
_ATOMIC_RANK = {"relaxed": 0, "release": 1, "acquire": 1, "acq_rel": 2}
_READ_RANK = {"relaxed": 0, "acquire": 1, "acq_rel": 2}
_FENCE_RANK = {"release": 0, "acquire": 0, "acq_rel": 1, "sc": 2}
_SCOPE_RANK = {scope: rank for rank, scope in enumerate(SCOPES)}
assert set(_STORE_RANK) == set(STORE_SEMS) and set(_ATOMIC_RANK) == set(ATOMIC_SEMS)
assert set(_READ_RANK) == set(READ_SEMS) and set(_FENCE_RANK) == set(FENCE_SEMS)


# ----- changes ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Change:
    """One strengthening, placed on the original protocol.

    ``kind`` is ``sem``, ``scope``, ``barrier``, ``fence`` or ``read``. Edits (``sem``, ``scope``,
    ``read``) name a step (``index``, 0-based) and the fields they set (``fields``); insertions
    (``barrier``, ``fence``) name a gap (``index``: before original step ``index``; ``len(steps)``
    is after the last) and the step inserted (``fields``).
    """

    kind: str
    section: str
    index: int
    fields: tuple[tuple[str, Any], ...]
    description: str
    cost: int
    drop: tuple[str, ...] = ()  # fields an edit removes (a weak store's cache)

    @property
    def inserts(self) -> bool:
        return self.kind in ("barrier", "fence")

    def to_json(self) -> dict[str, Any]:
        edits = ({f"{section} step {i + 1}": {key: value} for section, i, key, value in self.fields}
                 if self.kind == "target" else dict(self.fields))
        return {"kind": self.kind, "section": self.section, "index": self.index,
                "set": edits, "description": self.description}


def _step_name(section: str, index: int) -> str:
    return f"{section} step {index + 1}"


def _gap_name(section: str, gap: int, count: int) -> str:
    if gap < count:
        return f"before {_step_name(section, gap)}"
    return f"after {_step_name(section, count - 1)}"


def _stronger(rank: dict[str, int], value: str) -> list[tuple[str, int]]:
    """Values strictly stronger than ``value``, with how many notches above it."""
    return [(v, r - rank[value]) for v, r in rank.items() if r > rank[value]]


def _sem_changes(section: str, index: int, step: dict[str, Any]) -> list[Change]:
    op, sem, where = step["op"], step.get("sem"), _step_name(section, index)
    if sem is None:
        return []
    if op == "store" and sem == "weak":
        return [Change("sem", section, index, (("sem", new), ("scope", scope)),
                       f"make {where}'s store {new} at {scope} scope (was weak)",
                       KIND_COST["sem"] + up - 1 + _SCOPE_RANK[scope], drop=("cache",))
                for new, up in _stronger(_STORE_RANK, sem) for scope in SCOPES]
    rank = {"store": _STORE_RANK, "fence": _FENCE_RANK}.get(op)
    if rank is None:
        rank = _ATOMIC_RANK if section == "signal" else _READ_RANK
    return [Change("sem", section, index, (("sem", new),), f"make {where}'s sem {new}",
                   KIND_COST["sem"] + up - 1)
            for new, up in _stronger(rank, sem)]


def _scope_changes(section: str, index: int, step: dict[str, Any]) -> list[Change]:
    scope = step.get("scope")
    if scope is None:
        return []
    return [Change("scope", section, index, (("scope", new),),
                   f"widen {_step_name(section, index)}'s scope to {new}", KIND_COST["scope"] + up - 1)
            for new, up in _stronger(_SCOPE_RANK, scope)]


def _read_changes(section: str, index: int, step: dict[str, Any]) -> list[Change]:
    if step["op"] != "await" or step.get("read") not in ("load", "volatile_load"):
        return []
    read = "a volatile load" if step["read"] == "volatile_load" else "a load"
    return [Change("read", section, index,
                   (("read", "atomic_add"), ("value", 0), ("sem", "acquire"), ("scope", "sys")),
                   f"poll with an acquire atomic_add(0) at sys scope instead of {read} in "
                   f"{_step_name(section, index)}", KIND_COST["read"], drop=("cache",))]


def _insertions(section: str, steps: list[dict[str, Any]]) -> list[Change]:
    count = len(steps)

    def neighbours(gap: int) -> list[dict[str, Any]]:
        return steps[max(gap - 1, 0):gap + 1]

    found = []
    for gap in range(count + 1):
        if not any(s["op"] == "barrier" for s in neighbours(gap)):
            found.append(Change("barrier", section, gap, (("op", "barrier"),),
                                f"add a CTA barrier {_gap_name(section, gap, count)}", KIND_COST["barrier"]))
    sem = "release" if section == "signal" else "acquire"
    fence = {"op": "fence", "sem": sem, "scope": "sys"}
    for gap in range(count + 1):
        if section == "signal" and (gap == count or steps[gap]["op"] not in SIGNAL_WRITES):
            continue
        if section == "wait" and gap == 0:
            continue
        if fence in neighbours(gap):
            continue
        where = (f"before {_step_name(section, gap)}" if section == "signal"
                 else f"after {_step_name(section, gap - 1)}")
        found.append(Change("fence", section, gap, tuple(fence.items()),
                            f"add {'a' if sem == 'release' else 'an'} {sem} fence (sys) {where}",
                            KIND_COST["fence"]))
    return found


def _reset_changes(data: dict[str, Any]) -> list[Change]:
    """Reset the locks between calls (a lock that keeps the last call's value satisfies the next
    call's wait): by the host between barriers, or by the consumer after its loads (``owner``,
    where some wait polls its own copy)."""
    owner_ok = any(s["op"] == "await" and s.get("from", "self") == "self" for s in data["wait"])
    return [Change("reset", "protocol", 0, (("reset", new),),
                   f'reset the locks between calls: reset = "{new}" (was "{data.get("reset", "none")}")',
                   KIND_COST["reset"])
            for new in ("host", "owner") if new != data.get("reset") and (new != "owner" or owner_ok)]


def _grown(expression: Any) -> str:
    """``expression`` times ``(epoch + 1)``: what a constant becomes once it grows with the call."""
    return "epoch + 1" if expression in (1, "1") else f"({expression}) * (epoch + 1)"


def _target_changes(data: dict[str, Any]) -> list[Change]:
    """Make the target grow with the call: every constant ``until`` of an ``await`` (``==``,
    ``>=``, ``>``) and every constant value an ``atomic_xchg`` or ``store`` signal writes, times
    ``(epoch + 1)`` (an ``atomic_add`` counts up by itself). One change: the two go together."""
    waits = [i for i, s in enumerate(data["wait"]) if s["op"] == "await" and "epoch" not in str(s["until"])
             and str(s["until"]).split()[0] in GROWING_UNTILS]
    if not waits:
        return []
    writes = [i for i, s in enumerate(data["signal"]) if s["op"] in ("store", "atomic_xchg")
              and "epoch" not in str(s["value"])]
    fields = tuple(("wait", i, "until", f"{data['wait'][i]['until'].split()[0]} "
                    f"{_grown(data['wait'][i]['until'].split(maxsplit=1)[1])}") for i in waits)
    fields += tuple(("signal", i, "value", _grown(data["signal"][i]["value"])) for i in writes)
    said = ", ".join(f"{_step_name(section, i)}'s {key} = {value!r}" for section, i, key, value in fields)
    return [Change("target", "protocol", 1, fields, f"make the target grow with the call: {said}",
                   KIND_COST["target"])]


def candidate_changes(protocol: Protocol, *, calls: int = 2, resets: bool = True) -> list[Change]:
    """Every single strengthening of ``protocol``, in generation order (signal, then wait, then,
    when ``calls`` > 1, what carries over between calls: a reset between them, a target that grows
    with them; ``resets=False`` leaves out the reset, as when the scenario's reset policy is given).
    One call has nothing between calls: neither change could matter there."""
    data = protocol.to_dict()
    changes: list[Change] = []
    for section in ("signal", "wait"):
        for index, step in enumerate(data[section]):
            changes += _sem_changes(section, index, step)
            changes += _scope_changes(section, index, step)
            changes += _read_changes(section, index, step)
        changes += _insertions(section, data[section])
    if calls > 1:
        changes += (_reset_changes(data) if resets else []) + _target_changes(data)
    return changes


def apply_changes(data: dict[str, Any], changes: tuple[Change, ...]) -> dict[str, Any]:
    """The protocol dict with ``changes`` applied (``data`` is not mutated).

    Insertions in one gap go in the order barrier, fence on the signal side (barrier; fence; write)
    and fence, barrier on the wait side.
    """
    out = dict(data)
    grown = {(section, i): {} for section in ("signal", "wait") for i in range(len(data[section]))}
    for change in changes:
        if change.kind == "reset":
            out.update(change.fields)
        elif change.kind == "target":
            for section, i, key, value in change.fields:
                grown[section, i][key] = value
    for section in ("signal", "wait"):
        steps = [{**s, **grown[section, i]} for i, s in enumerate(data[section])]
        for change in changes:
            if change.section == section and not change.inserts:
                step = steps[change.index]
                for key in change.drop:
                    step.pop(key, None)
                step.update(change.fields)
        order = ("barrier", "fence") if section == "signal" else ("fence", "barrier")
        built: list[dict[str, Any]] = []
        for gap in range(len(steps) + 1):
            for kind in order:
                built += [dict(c.fields) for c in changes
                          if c.section == section and c.inserts and c.index == gap and c.kind == kind]
            if gap < len(steps):
                built.append(steps[gap])
        out[section] = built
    return out


def _compatible(a: Change, b: Change) -> bool:
    """Whether two changes can be made together (not two edits of one field of one step)."""
    if a.section != b.section or a.index != b.index or a.inserts != b.inserts:
        return True
    if a.inserts:
        return a.kind != b.kind
    return not ({k for k, _ in a.fields} & {k for k, _ in b.fields})


# ----- TOML and diffs --------------------------------------------------------------------------

def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise SyncVerifyError(f"cannot write {value!r} as a protocol TOML value")


def protocol_toml(protocol: Protocol) -> str:
    """The protocol as a TOML file in the format of ``docs/protocols.md``.

    >>> from syncverify.protocols import load_protocol, parse_protocol
    >>> p = load_protocol("epoch-flag")
    >>> parse_protocol(protocol_toml(p)) == p
    True
    """
    data = protocol.to_dict()
    lines = [f"{key} = {_toml_value(value)}" for key, value in data.items()
             if key not in ("signal", "wait")]
    for section in ("signal", "wait"):
        for step in data[section]:
            lines += ["", f"[[{section}]]"]
            lines += [f"{key} = {_toml_value(value)}" for key, value in step.items()]
    return "\n".join(lines) + "\n"


def toml_diff(before: Protocol, after: Protocol) -> str:
    """Unified diff of the two protocols' TOML (:func:`protocol_toml`)."""
    return "".join(difflib.unified_diff(
        protocol_toml(before).splitlines(keepends=True), protocol_toml(after).splitlines(keepends=True),
        fromfile=f"a/{before.name}.toml", tofile=f"b/{after.name}.toml"))


_HEADER = re.compile(r"\s*\[\[\s*(before_store|signal|wait|after_load)\s*\]\]\s*(#.*)?\Z")
_ANY_HEADER = re.compile(r"\s*\[")
_KEY = re.compile(r"(?P<indent>\s*)(?P<key>[A-Za-z_][A-Za-z0-9_-]*|\"[^\"]+\")\s*=\s*(?P<rest>.*?)(?P<eol>\r?\n?)\Z")


def _key_of(line: str) -> str | None:
    match = _KEY.match(line)
    return match["key"].strip('"') if match and not _ANY_HEADER.match(line) else None


def _comment_of(rest: str) -> str:
    """The trailing comment of a ``key = value  # ...`` line ('' if none): the text after the
    first ``#`` at which what comes before it parses as a TOML value."""

    for at in [i for i, ch in enumerate(rest) if ch == "#"]:
        try:
            tomllib.loads(f"k = {rest[:at]}")
        except tomllib.TOMLDecodeError:
            continue
        value = rest[:at].rstrip()
        return rest[len(value):].rstrip() if value else ""  # the comment with the spaces before it
    return ""


class _FileText:
    """A protocol file's own text, edited in place: a fix's diff is against the file as written
    (its comments, its order of keys, the defaults it leaves out), so ``patch`` applies it."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines(keepends=True)
        if self.lines and not self.lines[-1].endswith("\n"):
            self.lines[-1] += "\n"
        self.tables: dict[str, list[tuple[int, int]]] = {}
        self.first_header = len(self.lines)
        headers = [i for i, line in enumerate(self.lines) if _ANY_HEADER.match(line)]
        for n, i in enumerate(headers):
            self.first_header = min(self.first_header, i)
            match = _HEADER.match(self.lines[i].rstrip("\r\n"))
            if match:
                end = headers[n + 1] if n + 1 < len(headers) else len(self.lines)
                self.tables.setdefault(match[1], []).append((i, end))
        self.replaced: dict[int, list[str]] = {}
        self.before: dict[int, list[str]] = {}  # lines inserted before line i (len(lines): at the end)

    def _body_end(self, start: int, end: int) -> int:
        """Just after the last ``key = value`` line in ``start..end`` (trailing blanks and comments
        belong to what follows)."""
        last = start
        for i in range(start, end):
            if _key_of(self.lines[i]) is not None:
                last = i
        return last + 1

    def set(self, start: int, end: int, key: str, value: Any) -> None:
        """Set ``key`` in the table whose lines are ``start..end``: its line edited (its comment
        kept), or a new line after the table's last key when the file left it out."""
        for i in range(start, end):
            if _key_of(self.lines[i]) == key:
                match = _KEY.match(self.lines[i])
                comment = _comment_of(match["rest"])
                self.replaced[i] = [f"{match['indent']}{key} = {_toml_value(value)}{comment}\n"]
                return
        self.before.setdefault(self._body_end(start, end), []).append(f"{key} = {_toml_value(value)}\n")

    def drop(self, start: int, end: int, key: str) -> None:
        for i in range(start, end):
            if _key_of(self.lines[i]) == key:
                self.replaced[i] = []

    def step(self, section: str, index: int) -> tuple[int, int]:
        return self.tables[section][index]

    def insert_step(self, section: str, gap: int, step: dict[str, Any]) -> None:
        """A new ``[[section]]`` table before original step ``gap`` (above the comments just over
        its header), or after the section's last table."""
        table = [f"[[{section}]]\n"] + [f"{k} = {_toml_value(v)}\n" for k, v in step.items()]
        tables = self.tables[section]
        if gap < len(tables):
            at = tables[gap][0]
            while at > 0 and self.lines[at - 1].lstrip().startswith("#"):
                at -= 1
            self.before.setdefault(at, []).extend(table + ["\n"])
        else:
            self.before.setdefault(self._body_end(*tables[-1]), []).extend(["\n"] + table)

    def text(self) -> str:
        out: list[str] = []
        for i, line in enumerate(self.lines):
            out += self.before.get(i, [])
            out += self.replaced.get(i, [line])
        out += self.before.get(len(self.lines), [])
        return "".join(out)


def _edited_text(text: str, data: dict[str, Any], changes: tuple[Change, ...]) -> str | None:
    """``text`` (a protocol file) with ``changes`` made to its lines, or None when its layout is
    not one table per step (inline arrays: the edit is not attempted)."""
    f = _FileText(text)
    for section in ("signal", "wait"):
        if len(f.tables.get(section, [])) != len(data[section]):
            return None
    for change in changes:
        if change.kind == "reset":
            for key, value in change.fields:
                f.set(0, f.first_header, key, value)
        elif change.kind == "target":
            for section, i, key, value in change.fields:
                f.set(*f.step(section, i), key, value)
        elif change.inserts:
            f.insert_step(change.section, change.index, dict(change.fields))
        else:
            start, end = f.step(change.section, change.index)
            for key in change.drop:
                f.drop(start, end, key)
            for key, value in change.fields:
                f.set(start, end, key, value)
    return f.text()


def _shown_path(path: str) -> str:
    """The file as ``patch -p0`` finds it from the current directory: relative when inside it."""

    absolute = os.path.abspath(path)
    relative = os.path.relpath(absolute)
    return relative if not relative.startswith("..") else absolute


def file_diff(protocol: Protocol, changes: tuple[Change, ...], fixed: Protocol) -> str:
    """The fix as a unified diff of the protocol's own file, as written: it applies with
    ``patch -p0`` (or ``git apply -p0``) from the current directory. A protocol with no file, or
    a file whose layout is not one ``[[signal]]``/``[[wait]]`` table per step, gets the diff of its
    re-written TOML (:func:`toml_diff`) under a line saying so."""


    path = getattr(protocol, "path", "") or ""
    if path and not path.startswith("<") and Path(path).is_file():
        text = Path(path).read_text(encoding="utf-8")
        edited = _edited_text(text, protocol.to_dict(), changes)
        if edited is not None and parse_protocol(edited, path=path).to_dict() == fixed.to_dict():
            shown = _shown_path(path)
            return "".join(difflib.unified_diff(text.splitlines(keepends=True), edited.splitlines(keepends=True),
                                                fromfile=shown, tofile=shown))
    where = f"{path}'s layout" if path and not path.startswith("<") else "a protocol with no file"
    return (f"# not a patch of {where}: the protocol re-written with its defaults filled in\n"
            + toml_diff(protocol, fixed))


def lowering_key(protocol: Protocol) -> tuple:
    """What a protocol runs, as the PTX it lowers to (:func:`syncverify.protocols.lowering.lower_step`)
    and every field the lowering does not carry (locks, targets, values, reset). Two fixes with
    one key are one fix: the same instructions on the GPU, whatever the TOML says."""

    def key(step) -> tuple:
        ops = lower_step(step)
        # an atomic_add of 0 that lowers to a load has no value on the GPU: ld.acquire reads
        carried = ("op", "sem", "scope", "read", "cache") + (("value",) if ops[0].kind == "ld" else ())
        return ops, tuple(sorted((k, str(v)) for k, v in step.to_dict().items() if k not in carried))

    steps = tuple((section, tuple(key(step) for step in section_steps(protocol, section))) for section in SECTIONS)
    return (protocol.reset, lower_tile_store(protocol), lower_tile_load(protocol), steps)


# ----- the search ------------------------------------------------------------------------------

@dataclass
class Fix:
    """Changes that make the protocol safe, the fixed protocol, and its TOML diff."""

    changes: tuple[Change, ...]
    protocol: Protocol
    diff: str
    same_ptx: tuple[str, ...] = ()  # descriptions of the fixes that lower to the same PTX as this one

    @property
    def description(self) -> str:
        return "; ".join(c.description for c in self.changes)

    @property
    def cost(self) -> int:
        return sum(c.cost for c in self.changes)

    def to_json(self) -> dict[str, Any]:
        return {"changes": [c.to_json() for c in self.changes], "description": self.description,
                "diff": self.diff, "same_ptx": list(self.same_ptx)}


class Suggestions(list):
    """The fixes found, smallest first (a list of :class:`Fix`), and how the search ended.

    ``safe_already``: the protocol needed no fix. ``tried``: candidates re-checked.
    ``stopped``: the bound that stopped the search (``"max-checks"``, ``"timeout"``) or ``None``.
    ``unknown``: candidates whose re-check answered unknown (timed out). ``message``: one line
    (``note`` replaces it when the search did not run).
    """

    def __init__(self, fixes=(), *, max_changes: int, tried: int = 0, stopped: str | None = None,
                 unknown: int = 0, safe_already: bool = False, seconds: float = 0.0,
                 note: str = "") -> None:
        super().__init__(fixes)
        self.note = note
        self.max_changes, self.tried, self.stopped = max_changes, tried, stopped
        self.unknown, self.safe_already, self.seconds = unknown, safe_already, seconds

    @property
    def message(self) -> str:
        if self.note:
            return self.note
        if self.safe_already:
            return "the protocol is safe: nothing to fix"
        plural = "strengthening" if self.max_changes == 1 else "strengthenings"
        if self.stopped:
            found = f"{len(self)} fix(es) found so far" if self else "no fix found"
            return (f"search stopped by its {self.stopped} bound after {self.tried} candidates tried; "
                    f"{found}")
        if not self:
            extra = f" ({self.unknown} re-checks timed out)" if self.unknown else ""
            return f"no fix within {self.max_changes} {plural} ({self.tried} candidates tried){extra}"
        size = len(self[0].changes)
        return (f"{len(self)} fix(es) with {size} change(s), smallest first "
                f"({self.tried} candidates tried)")

    def to_json(self, *, limit: int | None = None) -> dict[str, Any]:
        """``suggestions`` (at most ``limit``), ``suggest_message``, ``suggest_tried``, ``suggest_stopped``."""
        return {"suggestions": [f.to_json() for f in self[:limit]], "suggest_message": self.message,
                "suggest_tried": self.tried, "suggest_stopped": self.stopped}


def _one_per_lowering(fixes: list[Fix]) -> list[Fix]:
    """The fixes with one per PTX lowering (:func:`lowering_key`): the first, smallest, is kept and
    names the others (``same_ptx``)."""
    kept: dict[tuple, Fix] = {}
    for fix in fixes:
        key = lowering_key(fix.protocol)
        if key in kept:
            kept[key].same_ptx += (fix.description,)
        else:
            kept[key] = fix
    return list(kept.values())


def _order(changes: tuple[Change, ...], rank: dict[Change, int]) -> tuple:
    return (len(changes), sum(c.cost for c in changes),
            sorted(KIND_COST[c.kind] for c in changes), [rank[c] for c in changes])


def suggest(protocol, *, scenario: str = "all-reduce", world_size: int = 2,
            max_changes: int = DEFAULT_MAX_CHANGES, max_checks: int = DEFAULT_MAX_CHECKS,
            timeout: float = DEFAULT_TIMEOUT, check_timeout: float = DEFAULT_CHECK_TIMEOUT,
            **options) -> Suggestions:
    """The weakest fixes of ``protocol``: its smallest strengthenings that the model proves safe.

    Parameters
    ----------
    protocol : Protocol or str
        A protocol, a built-in name or a ``.toml`` path.
    scenario, world_size, options
        The scenario, as for :func:`syncverify.verdicts.check.check_protocol` (every candidate is checked
        in it).
    max_changes : int
        1 (single strengthenings) or 2 (also pairs).
    max_checks, timeout, check_timeout
        Bounds: re-checks in all, seconds in all, seconds per re-check.

    Returns
    -------
    Suggestions
        A list of :class:`Fix`, smallest first, with ``message``, ``tried`` and ``stopped``.

    Examples
    --------
    >>> fixes = suggest("fenced-release-acquire")
    >>> fixes[0].description
    'add a CTA barrier before signal step 1'
    """
    if max_changes not in (1, 2):
        raise SyncVerifyError(f"max_changes={max_changes!r} must be 1 or 2")
    if max_checks < 1:
        raise SyncVerifyError(f"max_checks={max_checks!r} must be at least 1")
    if not hasattr(protocol, "signal"):
        protocol = load_protocol(protocol)
    start = time.monotonic()

    def run(candidate: Protocol, limit: float):
        return check_protocol(candidate, scenario=scenario, world_size=world_size, timeout=limit, **options)

    base = run(protocol, max(timeout, 0.001))
    if base.safe:
        return Suggestions(max_changes=max_changes, safe_already=True, seconds=time.monotonic() - start)
    data = protocol.to_dict()
    singles = candidate_changes(protocol, calls=options.get("epochs", 1), resets=options.get("reset") is None)
    rank = {change: n for n, change in enumerate(singles)}
    seen: set[str] = {json.dumps(data, sort_keys=True)}
    state = {"tried": 0, "unknown": 0, "stopped": None}

    def search(groups: list[tuple[Change, ...]]) -> list[Fix]:
        fixes = []
        for changes in sorted(groups, key=lambda g: _order(g, rank)):
            try:
                candidate = protocol_from_dict(apply_changes(data, changes), path=protocol.path)
            except SyncVerifyError:
                continue  # the format refuses it: not a protocol
            key = json.dumps(candidate.to_dict(), sort_keys=True)
            if key in seen:
                continue  # the same protocol reached another way
            seen.add(key)
            left = timeout - (time.monotonic() - start)
            if state["tried"] >= max_checks or left <= 0:
                state["stopped"] = "max-checks" if state["tried"] >= max_checks else "timeout"
                return fixes
            state["tried"] += 1
            result = run(candidate, min(check_timeout, left))
            if result.safe is None:
                state["unknown"] += 1
            elif result.safe:
                fixes.append(Fix(changes, candidate, file_diff(protocol, changes, candidate)))
        return _one_per_lowering(fixes)

    fixes = search([(c,) for c in singles])
    if not fixes and not state["stopped"] and max_changes == 2:
        pairs = [(a, b) for i, a in enumerate(singles) for b in singles[i + 1:] if _compatible(a, b)]
        fixes = search(pairs)
    return Suggestions(fixes, max_changes=max_changes, tried=state["tried"], stopped=state["stopped"],
                       unknown=state["unknown"], seconds=time.monotonic() - start)
