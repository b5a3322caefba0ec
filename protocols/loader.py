"""Reading a protocol file: TOML in, a validated :class:`~syncverify.protocols.model.Protocol` out.

This module checks everything the format allows and says where a problem is. The format is
documented in one place, ``docs/protocols.md``; this module, with
:mod:`syncverify.protocols.expressions` (``value``, ``compare``, ``until``) and
:mod:`syncverify.protocols.model` (the classes it builds), is its implementation.

Decisions made here (each one is repeated in ``docs/protocols.md``):

* Defaults mirror Triton where Triton has one: an atomic without ``sem``/``scope`` is
  ``acq_rel``/``gpu`` (``tl.atomic_*`` defaults), a store without ``sem`` is a plain weak
  ``tl.store``. Fences have no Triton default (``tl.atomic_fence`` does not exist in triton 3.6),
  so a fence must name both ``sem`` and ``scope``.
* An ``await`` whose ``read`` is ``atomic_cas`` is a real CAS on every poll: it writes ``value``
  whenever the value it reads equals ``compare`` (PTX ISA, ``atom.cas``), whether or not the loop
  then exits. ``compare = 0, value = 0`` is the read-only idiom; ``compare = world_size - 1,
  value = 0`` both polls and resets (seed 000, first attempt).
* ``reset`` says who returns locks to zero between epochs (iterations, counted from 0): the host
  (every epoch starts from zeroed locks), the consumer (only the protocol's own wait-side writes
  reset; ``parse_protocol`` checks there is one), or nobody (locks carry over; the ``until``
  target has to grow with ``epoch``).
* ``from = "each"`` (poll every rank's copy of a lock, one poll loop per rank, in rank order) is
  supported but none of the seeds needs it: in both seeds the producers write into the
  consumer's copy and the consumer polls its own (``from = "self"``, the default).
* Locks are named (``lock``, default ``"ready"``) because seed 000's original kernel used two
  lock arrays: ``locks`` for the local tile and ``tile_ready`` for the remote ones. A wait step
  naming a lock that no signal step writes is refused (almost always a typo).
* Expressions are parsed under a whitelist, never ``eval``-ed: see
  :mod:`syncverify.protocols.expressions`.
* Every problem raises :class:`syncverify.errors.ProtocolError` with one line:
  ``FILE[:LINE]: [signal|wait step N: ]what is wrong``. Steps are numbered from 1.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import replace
from typing import Any, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from syncverify.validation import did_you_mean, one_of
from syncverify.errors import ProtocolError
from syncverify.protocols.expressions import Invalid, parse_expr_field, parse_until_field
from syncverify.protocols.model import Protocol, Step, TileLoad, TileStore, Zoo, warp_text
from syncverify.protocols.rules import ALL_WARPS, BARRIER_ID_CLASH, KERNEL_WARPS, WARP_SIZE, barrier_id_clash

__all__ = ["parse_protocol", "protocol_from_dict"]

# ----- vocabulary ------------------------------------------------------------------------------

SCOPES: tuple[str, ...] = ("cta", "gpu", "sys")
FENCE_SEMS: tuple[str, ...] = ("release", "acquire", "acq_rel", "sc")
STORE_SEMS: tuple[str, ...] = ("weak", "relaxed", "release")
ATOMIC_SEMS: tuple[str, ...] = ("relaxed", "acquire", "release", "acq_rel")
READ_SEMS: tuple[str, ...] = ("relaxed", "acquire", "acq_rel")
#: A ``load`` poll with ``sem`` is PTX ``ld.SEM.SCOPE`` (``ld.acquire.sys``, ``ld.relaxed.gpu``).
LOAD_SEMS: tuple[str, ...] = ("relaxed", "acquire")
STORE_CACHES: tuple[str, ...] = ("", ".wt", ".cg", ".cs")
LOAD_CACHES: tuple[str, ...] = ("", ".ca", ".cg", ".cv")
TARGETS: tuple[str, ...] = ("all", "others", "self", "owner")
SOURCES: tuple[str, ...] = ("self", "each")
READS: tuple[str, ...] = ("load", "volatile_load", "atomic_cas", "atomic_add")
RESETS: tuple[str, ...] = ("host", "consumer", "owner", "none")
#: NVSHMEM's device calls (syncverify.delivery; docs/nvshmem.md): ``nvshmemx_signal_op`` with
#: ``NVSHMEM_SIGNAL_SET`` / ``NVSHMEM_SIGNAL_ADD`` to the lock copies ``to`` names, ``nvshmem_fence``,
#: ``nvshmem_quiet``. The model only: the kernels have no Triton lowering for them.
NVSHMEM_OPS: tuple[str, ...] = ("nvshmem_signal_set", "nvshmem_signal_add", "nvshmem_fence", "nvshmem_quiet")
#: Stream memory operations (syncverify.streams; docs/nvshmem.md): ``cuStreamWriteValue32`` of the lock
#: copies ``to`` names, performed by the role's stream after its kernel (last in a section), and
#: ``cuStreamWaitValue32`` on the copies ``from`` names, before its kernel (first in a section), with
#: ``until`` ``>= N`` (``CU_STREAM_WAIT_VALUE_GEQ``) or ``== N`` (``_EQ``). The model only.
STREAM_OPS: tuple[str, ...] = ("stream_write_value", "stream_wait_value")
STREAM_UNTIL: dict[str, str] = {">=": "geq", "==": "eq"}
SIGNAL_OPS: tuple[str, ...] = ("barrier", "fence", "store", "atomic_xchg", "atomic_add", "atomic_cas") + NVSHMEM_OPS
WAIT_OPS: tuple[str, ...] = ("await", "atomic_cas", "fence", "barrier")
#: Every op, in every section: a producer may wait (for a consumer's "done") and a consumer may
#: signal back; each section runs its steps in the order it lists them.
ALL_OPS: tuple[str, ...] = (("barrier", "fence", "store", "atomic_xchg", "atomic_add", "atomic_cas", "await") + NVSHMEM_OPS
                             + STREAM_OPS)
#: Sections in the order a tile meets them: the producer's ``before_store`` (before its tile store:
#: may I overwrite?) and ``signal`` (after it), the consumer's ``wait`` (before its tile loads) and
#: ``after_load`` (after them: the back-signal, "done").
SECTIONS: tuple[str, ...] = ("before_store", "signal", "wait", "after_load")
PRODUCER_SECTIONS: tuple[str, ...] = ("before_store", "signal")
CONSUMER_SECTIONS: tuple[str, ...] = ("wait", "after_load")
#: Ops that write a lock copy chosen by ``to`` (a CAS on the consumer side reads ``from`` unless ``to`` is given).
WRITE_OPS: tuple[str, ...] = ("store", "atomic_xchg", "atomic_add", "nvshmem_signal_set", "nvshmem_signal_add",
                              "stream_write_value")
MAX_SLOTS = 8
ZOO_FIELDS: tuple[str, ...] = ("scenario", "epochs", "launches", "push", "resident", "resident_order", "expected", "users_saw", "model_shows",
                               "source")
#: ``zoo.expected``: ``safe``, or the violation kinds the model finds, comma-separated.
ZOO_VERDICTS: tuple[str, ...] = ("race", "unwritten-read", "stale-read", "hang")

DEFAULT_LOCK = "ready"
TRITON_ATOMIC_SEM = "acq_rel"  # tl.atomic_* default sem
TRITON_ATOMIC_SCOPE = "gpu"  # tl.atomic_* default scope

TOP_FIELDS: tuple[str, ...] = (
    "name", "summary", "origin", "believed", "notes", "reset", "slots", "tile_store", "tile_load",
    "before_store", "signal", "wait", "after_load", "zoo",
)
REQUIRED_TOP_FIELDS: tuple[str, ...] = ("name", "summary", "origin", "signal", "wait")
TILE_STORE_FIELDS: tuple[str, ...] = ("cache",)
TILE_LOAD_FIELDS: tuple[str, ...] = ("volatile",)

# The fields each op takes (besides ``op``); an ``await`` takes ``_AWAIT_COMMON`` plus the
# fields of its ``read``.
_OP_FIELDS: dict[str, tuple[str, ...]] = {
    "barrier": ("id", "count", "warps", "arrive"),
    "fence": ("sem", "scope"),
    "store": ("value", "sem", "scope", "cache", "to", "lock", "bytes"),
    "atomic_xchg": ("value", "sem", "scope", "to", "lock"),
    "atomic_add": ("value", "sem", "scope", "to", "lock"),
    "atomic_cas": ("compare", "value", "sem", "scope", "to", "from", "lock", "until"),
    "nvshmem_signal_set": ("value", "to", "lock"),
    "nvshmem_signal_add": ("value", "to", "lock"),
    "nvshmem_fence": (),
    "nvshmem_quiet": (),
    "stream_write_value": ("value", "to", "lock"),
    "stream_wait_value": ("until", "from", "lock"),
}
_AWAIT_COMMON: tuple[str, ...] = ("read", "until", "from", "lock")
_READ_FIELDS: dict[str, tuple[str, ...]] = {
    "load": ("cache", "sem", "scope", "bytes"),
    "volatile_load": ("cache", "bytes"),
    "atomic_cas": ("compare", "value", "sem", "scope"),
    "atomic_add": ("value", "sem", "scope"),
}
_ALL_STEP_FIELDS: tuple[str, ...] = (
    "op", "read", "sem", "scope", "value", "compare", "cache", "to", "from", "lock", "until", "id", "count",
    "warps", "arrive", "bytes",
)

_NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]*\Z")
_LOCK_RE = re.compile(r"[a-z_][a-z0-9_]*\Z")
_TOML_POS_RE = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*\Z")
_TOML_END_RE = re.compile(r"\s*\(at end of document\)\s*\Z")


def _one_of(name: str, value: object, allowed: tuple[str, ...], *, key: str | None = None) -> str:
    """:func:`syncverify.validation.one_of`, raising :class:`Invalid` tied to the field's line.

    ``key`` is the field whose line a message points at, when it is not ``name`` itself
    (``tile_store.cache`` is found on the ``tile_store`` line).
    """
    return one_of(name, value, allowed, error=functools.partial(Invalid, key=key or name))


def _quoted(names: tuple[str, ...] | list[str]) -> str:
    return ", ".join(repr(n) for n in names)


# ----- locating problems in the text -----------------------------------------------------------

class _Lines:
    """Cheap line lookup in the TOML text: ``[[signal]]``/``[[wait]]`` headers and ``key =``."""

    _HEADER = re.compile(r"\s*\[\[\s*(before_store|signal|wait|after_load)\s*\]\]\s*(#.*)?\Z")
    _ANY_HEADER = re.compile(r"\s*\[")

    def __init__(self, text: str | None) -> None:
        self.lines = text.splitlines() if text is not None else []
        self.headers: dict[str, list[int]] = {section: [] for section in SECTIONS}
        self.first_header = len(self.lines) + 1
        for number, line in enumerate(self.lines, start=1):
            match = self._HEADER.match(line)
            if match:
                self.headers[match.group(1)].append(number)
            if self._ANY_HEADER.match(line):
                self.first_header = min(self.first_header, number)

    def step(self, section: str, index: int, count: int, key: str | None) -> int | None:
        """Line of step ``index`` (0-based) of ``section``, or of its ``key`` if found."""
        headers = self.headers[section]
        if len(headers) != count or index >= count:
            return None  # inline-array layout or a header inside a string: don't guess
        start = headers[index]
        if key is not None:
            found = self._key(key, start + 1)
            if found is not None:
                return found
        return start

    def top(self, key: str | None) -> int | None:
        if key is None:
            return None
        pattern = re.compile(rf"\s*(\[\s*)?(\"{re.escape(key)}\"|{re.escape(key)})\s*(=|\])")
        for number in range(1, len(self.lines) + 1):
            if pattern.match(self.lines[number - 1]):
                if number < self.first_header or self.lines[number - 1].lstrip().startswith("["):
                    return number
        return None

    def _key(self, key: str, start: int) -> int | None:
        pattern = re.compile(rf"\s*(\"{re.escape(key)}\"|{re.escape(key)})\s*=")
        for number in range(start, len(self.lines) + 1):
            line = self.lines[number - 1]
            if self._ANY_HEADER.match(line):
                return None
            if pattern.match(line):
                return number
        return None


def _fail(path: str, line: int | None, where: str, message: str) -> ProtocolError:
    place = f"{path}:{line}" if line is not None else path
    return ProtocolError(f"{place}: {where}{message}")


# ----- parsing ---------------------------------------------------------------------------------

def parse_protocol(text: str, *, path: str = "<string>") -> Protocol:
    """Parse and validate a protocol file's text.

    Parameters
    ----------
    text : str
        The TOML text.
    path : str, optional
        Where the text came from, for messages and :attr:`Protocol.path`.

    Returns
    -------
    Protocol

    Raises
    ------
    ProtocolError
        On malformed TOML or anything the schema refuses; the one-line message is
        ``PATH[:LINE]: [signal|wait step N: ]problem``. No other exception escapes.

    Examples
    --------
    >>> parse_protocol('''
    ... name = "tiny"
    ... summary = "a typo in reset"
    ... origin = "an example"
    ... reset = "hostt"
    ... signal = []
    ... wait = []
    ... ''', path="tiny.toml")
    Traceback (most recent call last):
    ...
    syncverify.errors.ProtocolError: tiny.toml:5: reset='hostt' is not one of 'host', 'consumer', 'owner', 'none' (did you mean 'host'?) (host gives --reset host-between-barriers, consumer/owner/none give none)
    """
    if not isinstance(text, str):
        raise ProtocolError(f"{path}: expected the protocol's TOML text, got {type(text).__name__}")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise _toml_error(path, str(error)) from None
    except RecursionError:
        raise ProtocolError(f"{path}: malformed TOML: nested too deeply") from None
    return _build(data, path=path, lines=_Lines(text))


def protocol_from_dict(data: Mapping[str, Any], *, path: str = "<dict>") -> Protocol:
    """Validate a protocol given as a plain dict (the layout of the file, or of ``to_dict()``).

    Raises
    ------
    ProtocolError
        On anything the schema refuses. No other exception escapes.
    """
    return _build(data, path=path, lines=_Lines(None))


def _toml_error(path: str, message: str) -> ProtocolError:
    line: int | None = None
    match = _TOML_POS_RE.search(message)
    if match:
        line = int(match.group(1))
        message = f"{message[: match.start()]} (column {match.group(2)})"
    else:
        end = _TOML_END_RE.search(message)
        if end:
            message = f"{message[: end.start()]} at end of file"
    message = message[:1].lower() + message[1:]
    place = f"{path}:{line}" if line is not None else path
    return ProtocolError(f"{place}: malformed TOML: {message}")


def _build(data: object, *, path: str, lines: _Lines) -> Protocol:
    if not isinstance(data, Mapping):
        raise _fail(path, None, "", f"a protocol is a table of fields, got {type(data).__name__}")
    try:
        return _build_checked(data, path, lines)
    except Invalid as error:  # a top-level problem
        raise _fail(path, lines.top(error.key), "", error.message) from None


def _build_checked(data: Mapping[str, Any], path: str, lines: _Lines) -> Protocol:
    for key in data:
        if key not in TOP_FIELDS:
            raise Invalid(
                f"unknown field {key!r}{did_you_mean(str(key), TOP_FIELDS)}; "
                f"a protocol takes {_quoted(TOP_FIELDS)}",
                key=str(key),
            )
    for key in REQUIRED_TOP_FIELDS:
        if key not in data:
            raise Invalid(f"missing field {key!r}")
    name = _text(data, "name")
    if not _NAME_RE.match(name):
        raise Invalid(
            f"name={name!r} must be lowercase letters, digits, '-' and '_', starting with a "
            f"letter or digit",
            key="name",
        )
    summary = _text(data, "summary")
    if "\n" in summary or "\r" in summary:
        raise Invalid("summary must be one line", key="summary")
    origin = _text(data, "origin")
    believed = _text(data, "believed", required=False)
    notes = _text(data, "notes", required=False)
    reset = one_of("reset", data.get("reset", "host"), RESETS, error=functools.partial(Invalid, key="reset"),
                   where="host gives --reset host-between-barriers, consumer/owner/none give none")
    cache = _table(data, "tile_store", TILE_STORE_FIELDS).get("cache", "")
    tile_store = TileStore(_one_of("tile_store.cache", cache, STORE_CACHES, key="tile_store"))
    volatile = _table(data, "tile_load", TILE_LOAD_FIELDS).get("volatile", False)
    if not isinstance(volatile, bool):
        raise Invalid(f"tile_load.volatile={volatile!r} must be true or false", key="tile_load")
    slots = data.get("slots", 1)
    if isinstance(slots, bool) or not isinstance(slots, int) or not 1 <= slots <= MAX_SLOTS:
        raise Invalid(f"slots={slots!r} must be an integer from 1 to {MAX_SLOTS} (epoch e uses slot e mod slots)",
                      key="slots")
    signal = _steps(data, "signal", path, lines)
    wait = _steps(data, "wait", path, lines)
    before_store = _steps(data, "before_store", path, lines, required=False)
    after_load = _steps(data, "after_load", path, lines, required=False)
    protocol = Protocol(
        name=name, summary=summary, origin=origin, signal=signal, wait=wait, reset=reset,
        tile_store=tile_store, tile_load=TileLoad(volatile), believed=believed,
        notes=notes, path=path, before_store=before_store, after_load=after_load, slots=slots,
        zoo=_zoo(data),
    )
    _check_locks(protocol, path, lines)
    _check_barrier_ids(protocol, path, lines)
    if reset == "owner" and not any(s.op == "await" and (s.from_ or "self") == "self" for s in wait):
        raise Invalid("reset='owner' resets the consumer's own copy of each lock it polls, but no wait step "
                      "polls its own copy (an await with from = 'self')", key="reset")
    if reset == "consumer" and not any(step.changes_lock for step in wait + after_load):
        raise Invalid(
            "reset='consumer' but no wait step can change its lock; reset with an atomic_cas "
            "whose value differs from compare, or say reset = 'host' or 'none'",
            key="reset",
        )
    return protocol


def _text(data: Mapping[str, Any], key: str, *, required: bool = True) -> str:
    value = data.get(key, None if required else "")
    if not isinstance(value, str):
        raise Invalid(f"{key}={value!r} must be a string", key=key)
    if required and not value.strip():
        raise Invalid(f"{key} is empty", key=key)
    return value


def _table(data: Mapping[str, Any], key: str, fields: tuple[str, ...]) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        raise Invalid(f"{key} must be a table such as {{ {fields[0]} = ... }}", key=key)
    for inner in value:
        if inner not in fields:
            raise Invalid(
                f"{key}: unknown field {inner!r}{did_you_mean(str(inner), fields)}; "
                f"{key} takes {_quoted(fields)}",
                key=key,
            )
    return value


def _steps(data: Mapping[str, Any], section: str, path: str, lines: _Lines, *,
           required: bool = True) -> tuple[Step, ...]:
    if not required and section not in data:
        return ()
    raw = data[section]
    if not isinstance(raw, list) or not all(isinstance(item, Mapping) for item in raw):
        raise Invalid(
            f"{section!r} must be an array of tables ([[{section}]] entries)", key=section
        )
    if not raw and required:
        raise Invalid(
            f"{section!r} is empty; a protocol needs at least one {section} step", key=section
        )
    steps = []
    for index, table in enumerate(raw):
        try:
            step = _step(table, section)
        except Invalid as error:
            line = lines.step(section, index, len(raw), error.key)
            raise _fail(path, line, f"{section} step {index + 1}: ", error.message) from None
        steps.append(replace(step, line=lines.step(section, index, len(raw), None)))
    return tuple(steps)


def _step(table: Mapping[str, Any], section: str) -> Step:
    ops = ALL_OPS
    if "op" not in table:
        raise Invalid(f"missing field 'op' (one of {_quoted(ops)})")
    op = table["op"]
    if not isinstance(op, str) or op not in ops:
        hint = did_you_mean(op, ops) if isinstance(op, str) else ""
        raise Invalid(f"unknown op {op!r}{hint}; {section} ops are {_quoted(ops)}", key="op")
    if op == "await":
        if "read" not in table:
            raise Invalid(f"missing field 'read' (one of {_quoted(READS)})")
        read = _one_of("read", table["read"], READS)
        allowed = _AWAIT_COMMON + _READ_FIELDS[read]
        owner = f"await with read={read!r}"
    else:
        read = None
        allowed = _OP_FIELDS[op]
        owner = op
    for key in table:
        if key == "op" or key in allowed:
            continue
        takes = f"{owner} takes {_quoted(allowed)}" if allowed else f"{owner} takes no fields"
        if key in _ALL_STEP_FIELDS:
            raise Invalid(f"field {key!r} does not apply to {owner} ({takes})", key=str(key))
        raise Invalid(
            f"unknown field {key!r}{did_you_mean(str(key), allowed or _ALL_STEP_FIELDS)}; {takes}",
            key=str(key),
        )
    if op == "atomic_cas":
        return _cas(table, section in PRODUCER_SECTIONS)
    step = _STEP_BUILDERS[op](table, read)
    return replace(step, bytes=_byte_range(table["bytes"])) if "bytes" in table else step


#: BYTE RANGES (``syncverify.protocols.model.Step.bytes``): the sizes an access may have.
BYTE_SIZES: tuple[int, ...] = (1, 2, 4)


def _byte_range(raw: Any) -> tuple[int | str, int]:
    """``bytes = { offset = N|"rank", size = 1|2|4 }``: the part of the lock word a store or a
    load poll accesses, inside its 4 bytes."""
    if not isinstance(raw, Mapping) or set(raw) != {"offset", "size"}:
        raise Invalid(f"bytes={raw!r} must be a table {{ offset = N or \"rank\", size = 1, 2 or 4 }}", key="bytes")
    offset, size = raw["offset"], raw["size"]
    if isinstance(size, bool) or size not in BYTE_SIZES:
        raise Invalid(f"bytes.size={size!r} must be one of {', '.join(map(str, BYTE_SIZES))}", key="bytes")
    if offset != "rank" and (isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= 4 - size):
        raise Invalid(f"bytes.offset={offset!r} must be \"rank\" or an integer 0..{4 - size} (a {size}-byte access "
                      f"inside the 4-byte lock word)", key="bytes")
    return offset, size


def _require(table: Mapping[str, Any], key: str, owner: str) -> Any:
    if key not in table:
        raise Invalid(f"missing field {key!r} ({owner} needs it)")
    return table[key]


def _lock(table: Mapping[str, Any]) -> str:
    lock = table.get("lock", DEFAULT_LOCK)
    if not isinstance(lock, str) or not _LOCK_RE.match(lock):
        raise Invalid(
            f"lock={lock!r} must be a name of lowercase letters, digits and '_'", key="lock"
        )
    return lock


def _atomic_sem_scope(table: Mapping[str, Any], sems: tuple[str, ...]) -> tuple[str, str]:
    sem = _one_of("sem", table.get("sem", TRITON_ATOMIC_SEM), sems)
    scope = _one_of("scope", table.get("scope", TRITON_ATOMIC_SCOPE), SCOPES)
    return sem, scope


def _barrier(table: Mapping[str, Any], read: str | None) -> Step:
    """``bar.sync id{, count}``, or per warp ``bar.arrive``/``bar.sync``: a named barrier.

    PTX ISA, ``bar``: "Each CTA instance has sixteen barriers numbered 0..15"; "Operand b
    specifies the number of threads participating in the barrier"; "When specifying a thread
    count, the value must be a multiple of the warp size"; "bar.arrive does not cause any waiting
    by the executing threads". Without ``id`` it is barrier 0; without ``warps`` every warp of
    the CTA executes it; ``arrive`` names the warps (of ``warps``) that only arrive. ``count``,
    when given, must be the threads of ``warps``: a smaller count completes a phase before every
    warp arrived and can leave the rest waiting forever, a larger one waits forever, and
    ``bar.sync`` cannot be bounded in a kernel. A step that selects warps needs an id other than
    0 (Triton's own ``bar.sync 0`` runs on every warp) and must include warp 0 (whose thread 0
    runs the one-thread operations the barrier exists to order)."""
    barrier_id = table.get("id")
    if barrier_id is not None and (isinstance(barrier_id, bool) or not isinstance(barrier_id, int)
                                   or not 0 <= barrier_id <= 15):
        raise Invalid(f"id={barrier_id!r} must be a named barrier, an integer 0 to 15", key="id")
    count = table.get("count")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count <= 0 or count % 32):
        raise Invalid(f"count={count!r} must be a positive multiple of 32 (the warp size), in threads",
                      key="count")
    warps = _warps(table, "warps")
    arrive = _warps(table, "arrive")
    taking_part = warps if warps is not None else ALL_WARPS
    who = "every warp of the CTA" if warps is None else f"warps {warp_text(warps)}"
    if 0 not in taking_part:
        raise Invalid(f"warps={warp_text(warps)!r} leaves out warp 0, whose thread 0 runs the protocol's one-thread "
                      f"operations (atomics, flag stores, each poll's read): the barrier would order nothing before "
                      f"or after them; include warp 0", key="warps")
    if arrive is not None and not set(arrive) <= set(taking_part):
        extra = warp_text(set(arrive) - set(taking_part))
        raise Invalid(f"arrive={warp_text(arrive)!r} names warp{'s' * (',' in extra or '-' in extra)} {extra}, "
                      f"which {'does' if extra.isdigit() else 'do'} not execute the step "
                      f"({who}); add them to 'warps' or drop them from 'arrive'", key="arrive")
    if arrive is not None and set(arrive) == set(taking_part):
        raise Invalid(f"arrive={warp_text(arrive)!r}: every warp that executes the step only arrives, and none "
                      f"waits for the arrivals with bar.sync, so the barrier orders nothing; leave the warp that "
                      f"goes on to signal (warp 0) out of 'arrive'", key="arrive")
    threads = WARP_SIZE * len(taking_part)
    if count is not None and count < threads:
        raise Invalid(f"count={count} is smaller than the {threads} threads that execute the step ({who}): a "
                      f"phase of the barrier completes after {count} of them arrive, before the others, and a "
                      f"warp left in an incomplete phase waits forever (Dao-AILab/quack PR #146); give "
                      f"count = {threads}, or name the warps that take part with 'warps'", key="count")
    if count is not None and count > threads:
        raise Invalid(f"count={count} is larger than the {threads} threads that execute the step ({who}): "
                      f"bar.sync would wait forever for the rest; give count = {threads}, or add the missing "
                      f"warps to 'warps'", key="count")
    if warps is not None and set(warps) == set(ALL_WARPS):
        warps = None  # every warp: the plain form
    if (barrier_id or 0) == 0 and (warps is not None or arrive is not None):
        raise Invalid("a barrier step that selects warps (warps, arrive) needs an id from 1 to 15: barrier 0 is "
                      "Triton's own bar.sync 0 (tl.debug_barrier, the broadcast after each poll), which every "
                      "warp executes", key="id")
    return Step("barrier", barrier_id=barrier_id, count=count, warps=warps, arrive=arrive)


def _warps(table: Mapping[str, Any], key: str) -> tuple[int, ...] | None:
    """A warp selection: one warp (an integer) or a string of warps and ranges (``"1-7"``,
    ``"0,4-7"``), each a warp 0 to 7 of the kernels' CTA; sorted, without repeats."""
    if key not in table:
        return None
    value = table[key]
    form = (f"{key}={value!r} must be a warp (0 to {KERNEL_WARPS - 1}) or a string of warps and ranges "
            f"such as '1-7' or '0,4-7'")
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise Invalid(form, key=key)
    found: set[int] = set()
    for part in str(value).split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if match is None:
            raise Invalid(form, key=key)
        first, last = int(match[1]), int(match[2] or match[1])
        if first > last:
            raise Invalid(f"{key}={value!r}: the range {first}-{last} runs backwards; write {last}-{first}", key=key)
        if last >= KERNEL_WARPS:
            raise Invalid(f"{key}={value!r} names warp {last}; the kernels' CTA has {KERNEL_WARPS} warps, "
                          f"0 to {KERNEL_WARPS - 1}", key=key)
        found.update(range(first, last + 1))
    return tuple(sorted(found))


def _fence(table: Mapping[str, Any], read: str | None) -> Step:
    sem = _one_of("sem", _require(table, "sem", "fence"), FENCE_SEMS)
    scope = _one_of("scope", _require(table, "scope", "fence"), SCOPES)
    return Step("fence", sem=sem, scope=scope)


def _store(table: Mapping[str, Any], read: str | None) -> Step:
    value = parse_expr_field(_require(table, "value", "store"), "value")
    sem = _one_of("sem", table.get("sem", "weak"), STORE_SEMS)
    cache = _one_of("cache", table.get("cache", ""), STORE_CACHES)
    if sem == "weak":
        if "scope" in table:
            raise Invalid(
                "a weak store takes no scope; give sem = 'relaxed' or 'release'", key="scope"
            )
        scope = None
    else:
        scope = _one_of("scope", _require(table, "scope", f"a {sem} store"), SCOPES)
        if cache:
            raise Invalid(
                f"cache={cache!r} applies to weak stores only (PTX st.{sem} takes no cache "
                f"operator)",
                key="cache",
            )
    to = _one_of("to", table.get("to", "self"), TARGETS)
    return Step("store", sem=sem, scope=scope, value=value, cache=cache, to=to, lock=_lock(table))


def _rmw(op: str) -> Any:
    def build(table: Mapping[str, Any], read: str | None) -> Step:
        value = parse_expr_field(_require(table, "value", op), "value")
        sem, scope = _atomic_sem_scope(table, ATOMIC_SEMS)
        to = _one_of("to", table.get("to", "self"), TARGETS)
        return Step(op, sem=sem, scope=scope, value=value, to=to, lock=_lock(table))

    return build


def _cas(table: Mapping[str, Any], producer_side: bool) -> Step:
    """A one-off CAS, or with ``until`` a CAS repeated until the value it read satisfies it.

    It writes the copies ``to`` names (the producer side's default, ``to = "self"``: PyTorch's
    signal pad, CAS 0 -> 1 with release) or reads and writes the copies ``from`` names (the
    consumer side's default, ``from = "self"``: seed 001's acquire CAS(1, 1)); not both.
    """
    compare = parse_expr_field(_require(table, "compare", "atomic_cas"), "compare")
    value = parse_expr_field(_require(table, "value", "atomic_cas"), "value")
    sem, scope = _atomic_sem_scope(table, ATOMIC_SEMS)
    if "to" in table and "from" in table:
        raise Invalid("atomic_cas takes 'to' (whose copies it signals) or 'from' (whose copies it reads), "
                      "not both", key="from")
    until = parse_until_field(table["until"]) if "until" in table else None
    if "to" in table or ("from" not in table and producer_side):
        to = _one_of("to", table.get("to", "self"), TARGETS)
        return Step("atomic_cas", sem=sem, scope=scope, value=value, compare=compare, to=to,
                    lock=_lock(table), until=until)
    source = _one_of("from", table.get("from", "self"), SOURCES)
    return Step(
        "atomic_cas", sem=sem, scope=scope, value=value, compare=compare, from_=source,
        lock=_lock(table), until=until,
    )


def _await(table: Mapping[str, Any], read: str | None) -> Step:
    until = parse_until_field(_require(table, "until", "await"))
    source = _one_of("from", table.get("from", "self"), SOURCES)
    lock = _lock(table)
    if read == "load" and "sem" in table:  # ld.acquire.SCOPE / ld.relaxed.SCOPE: the poll signal libraries use
        sem = _one_of("sem", table["sem"], LOAD_SEMS)
        scope = _one_of("scope", _require(table, "scope", f"a load with sem={sem!r}"), SCOPES)
        if table.get("cache", ""):
            raise Invalid(f"cache={table['cache']!r} applies to weak loads only (PTX ld.{sem} takes no "
                          f"cache operator)", key="cache")
        return Step("await", read=read, sem=sem, scope=scope, cache="", until=until, from_=source, lock=lock)
    if read == "load" and "scope" in table:
        raise Invalid("a weak load takes no scope; give sem = 'acquire' or 'relaxed' (ld.acquire.SCOPE)",
                      key="scope")
    if read in ("load", "volatile_load"):
        default = ".cv" if read == "volatile_load" else ""
        cache = _one_of("cache", table.get("cache", default), LOAD_CACHES)
        return Step("await", read=read, cache=cache, until=until, from_=source, lock=lock)
    sem, scope = _atomic_sem_scope(table, ATOMIC_SEMS)
    if read == "atomic_cas":
        owner = "await with read='atomic_cas'"
        compare = parse_expr_field(_require(table, "compare", owner), "compare")
        value = parse_expr_field(_require(table, "value", owner), "value")
    else:
        compare = None
        value = parse_expr_field(table.get("value", 0), "value")
    return Step(
        "await", read=read, sem=sem, scope=scope, value=value, compare=compare, until=until,
        from_=source, lock=lock,
    )


def _nvshmem(op: str) -> Any:
    def build(table: Mapping[str, Any], read: str | None) -> Step:
        if op in ("nvshmem_fence", "nvshmem_quiet"):
            return Step(op)
        # the signal update is a release atomic at system scope (syncverify.model.delivery, e)
        value = parse_expr_field(_require(table, "value", op), "value")
        to = _one_of("to", table.get("to", "self"), TARGETS)
        return Step(op, sem="release", scope="sys", value=value, to=to, lock=_lock(table))

    return build


def _stream_write_value(table: Mapping[str, Any], read: str | None) -> Step:
    # a release store at system scope (syncverify.streams: CU_STREAM_WRITE_VALUE_DEFAULT's fence)
    value = parse_expr_field(_require(table, "value", "stream_write_value"), "value")
    to = _one_of("to", table.get("to", "self"), TARGETS)
    return Step("stream_write_value", sem="release", scope="sys", value=value, to=to, lock=_lock(table))


def _stream_wait_value(table: Mapping[str, Any], read: str | None) -> Step:
    until = parse_until_field(_require(table, "until", "stream_wait_value"))
    if until.op not in STREAM_UNTIL:
        raise Invalid(f"until={until.source!r}: cuStreamWaitValue32 waits for {' or '.join(STREAM_UNTIL)} a value "
                      f"(CU_STREAM_WAIT_VALUE_GEQ, _EQ)", key="until")
    source = _one_of("from", table.get("from", "self"), SOURCES)
    # acquire loads at system scope until the comparison holds (syncverify.streams)
    return Step("stream_wait_value", sem="acquire", scope="sys", until=until, from_=source, lock=_lock(table))


_STEP_BUILDERS = {
    **{op: _nvshmem(op) for op in NVSHMEM_OPS},
    "stream_write_value": _stream_write_value,
    "stream_wait_value": _stream_wait_value,
    "barrier": _barrier,
    "fence": _fence,
    "store": _store,
    "atomic_xchg": _rmw("atomic_xchg"),
    "atomic_add": _rmw("atomic_add"),
    "await": _await,
}


def _check_locks(protocol: Protocol, path: str, lines: _Lines) -> None:
    """Every poll has a writer on the other side, and every back-signal has a poll.

    A lock polled (an ``await``, or a CAS reading ``from``) by the consumer must be written by some
    producer step, and one polled by the producer (waiting for "done") by some consumer step. A
    consumer's write to a lock that neither side polls (a back-signal no step waits for) is
    refused: it orders nothing. Each message names the step.
    """
    sides = {"producer": PRODUCER_SECTIONS, "consumer": CONSUMER_SECTIONS}
    other = {"producer": "consumer", "consumer": "producer"}
    steps = {side: [(section, index, step) for section in sections
                    for index, step in enumerate(getattr(protocol, section))]
             for side, sections in sides.items()}
    written = {side: [s.lock for _sec, _i, s in found if s.lock is not None and _writes(s)]
               for side, found in steps.items()}
    polled = {s.lock for found in steps.values() for _sec, _i, s in found if _polls(s)}
    for side, found in steps.items():
        for section, index, step in found:
            if step.lock is None or not _polls(step) or step.lock in written[other[side]]:
                continue
            known = tuple(dict.fromkeys(written[other[side]]))
            hint = did_you_mean(step.lock, known)
            line = lines.step(section, index, len(getattr(protocol, section)), "lock")
            writers = "signal step" if side == "consumer" else "consumer step (wait or after_load)"
            raise _fail(
                path, line, f"{section} step {index + 1}: ",
                f"lock={step.lock!r} is never written by a {writers}{hint}; those steps write "
                f"{_quoted(known) if known else 'no lock'}",
            )
    for section in CONSUMER_SECTIONS:
        for index, step in enumerate(getattr(protocol, section)):
            if step.op in WRITE_OPS + ("atomic_cas",) and step.to is not None and step.lock not in polled:
                line = lines.step(section, index, len(getattr(protocol, section)), "lock")
                raise _fail(path, line, f"{section} step {index + 1}: ",
                            f"back-signal to lock={step.lock!r} that no step waits for: add a producer "
                            f"step that polls it (an await in before_store), or drop the step")


def _check_barrier_ids(protocol: Protocol, path: str, lines: _Lines) -> None:
    """A barrier step that selects warps has its id to itself (:func:`syncverify.protocols.rules.barrier_id_clash`
    says why); the later of two steps that share one is refused, with both named."""
    steps = [((section, index), step) for section in SECTIONS for index, step in enumerate(getattr(protocol, section))]
    clash = barrier_id_clash(steps)
    if clash is None:
        return
    (first_section, first_index), (section, index), barrier_id = clash
    line = lines.step(section, index, len(getattr(protocol, section)), "id")
    raise _fail(path, line, f"{section} step {index + 1}: ",
                f"barrier id {barrier_id} is also used by {first_section} step {first_index + 1}; {BARRIER_ID_CLASH}")


def _polls(step: Step) -> bool:
    """Whether a step reads a lock copy to decide something: an ``await``, a CAS repeated ``until``
    something holds, or a CAS reading ``from`` (an acquire after a poll)."""
    return step.op in ("await", "stream_wait_value") or (
        step.op == "atomic_cas" and (step.from_ is not None or step.until is not None))


def _writes(step: Step) -> bool:
    """Whether a step can write a lock for the other side to see: a store, xchg or add, a CAS
    signalling ``to``, or a CAS (step or poll) whose value differs from its compare."""
    return step.op in WRITE_OPS or (step.op == "atomic_cas" and step.to is not None) or (
        step.op in ("atomic_cas", "await") and step.changes_lock)


def _zoo(data: Mapping[str, Any]):
    """The ``[zoo]`` table of a reported bug: how to check it, what users saw, what the model shows."""
    if "zoo" not in data:
        return None
    table = _table(data, "zoo", ZOO_FIELDS)
    for key in ("scenario", "expected", "users_saw", "model_shows", "source"):
        if key not in table:
            raise Invalid(f"zoo: missing field {key!r}", key="zoo")
    for key in ZOO_FIELDS:
        if key in table and key not in ("epochs", "resident") and not isinstance(table[key], str):
            raise Invalid(f"zoo.{key}={table[key]!r} must be a string", key="zoo")
    epochs = table.get("epochs", 1)
    if isinstance(epochs, bool) or not isinstance(epochs, int) or not 1 <= epochs <= 4:
        raise Invalid(f"zoo.epochs={epochs!r} must be an integer from 1 to 4", key="zoo")
    resident = table.get("resident")
    if resident is not None and (isinstance(resident, bool) or not isinstance(resident, int) or resident < 1):
        raise Invalid(f"zoo.resident={resident!r} must be a positive number of CTAs per GPU", key="zoo")
    if "resident_order" in table:
        _one_of("zoo.resident_order", table["resident_order"], ("any", "index"), key="zoo")
    expected = table["expected"]
    kinds = [k.strip() for k in expected.split(",")] if expected != "safe" else []
    for kind in kinds:
        _one_of("zoo.expected", kind, ZOO_VERDICTS, key="zoo")
    return Zoo(scenario=table["scenario"], epochs=epochs, launches=table.get("launches", "host-barrier"),
               expected=expected, users_saw=table["users_saw"], model_shows=table["model_shows"],
               source=table["source"], push=table.get("push", ""), resident=resident,
               resident_order=table.get("resident_order", "any"))
