"""The schema of a lock protocol file, and its parser.

A protocol says what a producer does after storing its tile (``signal`` steps) and what a
consumer does before reading tiles (``wait`` steps). It is data: the model
(``syncverify.scenarios``) turns it into memory events and the kernels (``syncverify.kernels.signals``)
into Triton code, both from the same :class:`Protocol` object. The file format is documented in
one place, ``docs/protocols.md``; this module is its implementation.

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
* Expressions (``value``, ``compare``, the right side of ``until``) are parsed once with
  :mod:`ast` under a whitelist (integers, ``world_size``, ``epoch``, ``+ - * //``, unary minus,
  parentheses) and evaluated by a tiny interpreter; nothing is ever passed to ``eval``.
* Every problem raises :class:`syncverify.errors.ProtocolError` with one line:
  ``FILE[:LINE]: [signal|wait step N: ]what is wrong``. Steps are numbered from 1.
"""

from __future__ import annotations

import ast
import difflib
import re
import sys
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from syncverify.errors import ProtocolError

__all__ = [
    "Expr",
    "Protocol",
    "Step",
    "TileLoad",
    "TileStore",
    "Until",
    "parse_expr",
    "parse_protocol",
    "parse_until",
    "protocol_from_dict",
]

# ----- vocabulary ------------------------------------------------------------------------------

SCOPES: tuple[str, ...] = ("cta", "gpu", "sys")
FENCE_SEMS: tuple[str, ...] = ("release", "acquire", "acq_rel", "sc")
STORE_SEMS: tuple[str, ...] = ("weak", "relaxed", "release")
ATOMIC_SEMS: tuple[str, ...] = ("relaxed", "acquire", "release", "acq_rel")
READ_SEMS: tuple[str, ...] = ("relaxed", "acquire", "acq_rel")
STORE_CACHES: tuple[str, ...] = ("", ".wt", ".cg", ".cs")
LOAD_CACHES: tuple[str, ...] = ("", ".ca", ".cg", ".cv")
TARGETS: tuple[str, ...] = ("all", "others", "self", "owner")
SOURCES: tuple[str, ...] = ("self", "each")
READS: tuple[str, ...] = ("load", "volatile_load", "atomic_cas", "atomic_add")
RESETS: tuple[str, ...] = ("host", "consumer", "none")
COMPARISONS: tuple[str, ...] = ("==", "!=", ">=", ">", "<=", "<")
VARIABLES: tuple[str, ...] = ("world_size", "epoch")
SIGNAL_OPS: tuple[str, ...] = ("barrier", "fence", "store", "atomic_xchg", "atomic_add")
WAIT_OPS: tuple[str, ...] = ("await", "atomic_cas", "fence", "barrier")
SECTIONS: tuple[str, ...] = ("signal", "wait")

DEFAULT_LOCK = "ready"
TRITON_ATOMIC_SEM = "acq_rel"  # tl.atomic_* default sem
TRITON_ATOMIC_SCOPE = "gpu"  # tl.atomic_* default scope

TOP_FIELDS: tuple[str, ...] = (
    "name", "summary", "origin", "believed", "notes", "reset", "tile_store", "tile_load",
    "signal", "wait",
)
REQUIRED_TOP_FIELDS: tuple[str, ...] = ("name", "summary", "origin", "signal", "wait")
TILE_STORE_FIELDS: tuple[str, ...] = ("cache",)
TILE_LOAD_FIELDS: tuple[str, ...] = ("volatile",)

# The fields each op takes (besides ``op``); an ``await`` takes ``_AWAIT_COMMON`` plus the
# fields of its ``read``.
_OP_FIELDS: dict[str, tuple[str, ...]] = {
    "barrier": (),
    "fence": ("sem", "scope"),
    "store": ("value", "sem", "scope", "cache", "to", "lock"),
    "atomic_xchg": ("value", "sem", "scope", "to", "lock"),
    "atomic_add": ("value", "sem", "scope", "to", "lock"),
    "atomic_cas": ("compare", "value", "sem", "scope", "from", "lock"),
}
_AWAIT_COMMON: tuple[str, ...] = ("read", "until", "from", "lock")
_READ_FIELDS: dict[str, tuple[str, ...]] = {
    "load": ("cache",),
    "volatile_load": ("cache",),
    "atomic_cas": ("compare", "value", "sem", "scope"),
    "atomic_add": ("value", "sem", "scope"),
}
_ALL_STEP_FIELDS: tuple[str, ...] = (
    "op", "read", "sem", "scope", "value", "compare", "cache", "to", "from", "lock", "until",
)

_NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]*\Z")
_LOCK_RE = re.compile(r"[a-z_][a-z0-9_]*\Z")
_EXPR_CHARS_RE = re.compile(r"[0-9A-Za-z_ \t+\-*/()]*\Z")
_UNTIL_RE = re.compile(r"\s*(==|!=|>=|<=|>|<)(.*)\Z", re.DOTALL)
_TOML_POS_RE = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*\Z")
_TOML_END_RE = re.compile(r"\s*\(at end of document\)\s*\Z")
_MAX_EXPR_CHARS = 200


class _Invalid(Exception):
    """A problem found below the parser's entry point; the entry point adds the location."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.key = key  # the field at fault, to find its TOML line


def _one_of(name: str, value: object, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str):
        raise _Invalid(f"{name}={value!r} must be a string, one of {_quoted(allowed)}", key=name)
    if value not in allowed:
        raise _Invalid(f"{name}={value!r} is not one of {_quoted(allowed)}", key=name)
    return value


def _quoted(names: tuple[str, ...] | list[str]) -> str:
    return ", ".join(repr(n) for n in names)


def _did_you_mean(word: str, known: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


# ----- expressions -----------------------------------------------------------------------------

_BINOPS: dict[type, str] = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//"}
_OP_NAMES: dict[type, str] = {
    ast.Div: "/", ast.Mod: "%", ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>",
    ast.BitOr: "|", ast.BitAnd: "&", ast.BitXor: "^", ast.MatMult: "@", ast.Invert: "~",
    ast.Not: "not",
}


@dataclass(frozen=True)
class Expr:
    """An integer expression in ``world_size`` and ``epoch``, parsed once.

    ``tree`` is a nested tuple: ``("int", n)``, ``("var", name)``, ``(op, lhs, rhs)`` with ``op``
    one of ``+ - * //``, or ``("neg", operand)``. ``source`` is the text as written, for display;
    two expressions are equal when their trees are.

    Examples
    --------
    >>> target = parse_expr("world_size * (epoch + 1)")
    >>> target.evaluate(world_size=4, epoch=2)
    12
    >>> sorted(target.variables), str(target)
    (['epoch', 'world_size'], 'world_size * (epoch + 1)')
    """

    tree: tuple
    source: str = field(compare=False)

    def evaluate(self, *, world_size: int, epoch: int) -> int:
        """Value at ``world_size`` ranks in iteration ``epoch`` (``//`` floors, as in Python)."""
        env = {"world_size": world_size, "epoch": epoch}
        try:
            return _evaluate(self.tree, env)
        except ZeroDivisionError:
            raise ProtocolError(
                f"{self.source!r} divides by zero at world_size={world_size}, epoch={epoch}"
            ) from None

    @property
    def variables(self) -> frozenset[str]:
        """The variables the expression uses: without ``epoch`` it can be a Triton constexpr."""
        return frozenset(_variables(self.tree))

    @property
    def literal(self) -> int | None:
        """The integer if the expression is a bare integer literal, else ``None``."""
        return self.tree[1] if self.tree[0] == "int" else None

    def to_plain(self) -> int | str:
        """A bare literal as an ``int``, anything else as its source text."""
        return self.literal if self.literal is not None else self.source

    def __str__(self) -> str:
        return self.source

    def __repr__(self) -> str:
        return f"Expr({self.source!r})"


def _evaluate(tree: tuple, env: Mapping[str, int]) -> int:
    kind = tree[0]
    if kind == "int":
        return tree[1]
    if kind == "var":
        return env[tree[1]]
    if kind == "neg":
        return -_evaluate(tree[1], env)
    lhs, rhs = _evaluate(tree[1], env), _evaluate(tree[2], env)
    if kind == "+":
        return lhs + rhs
    if kind == "-":
        return lhs - rhs
    if kind == "*":
        return lhs * rhs
    return lhs // rhs  # "//"


def _variables(tree: tuple) -> set[str]:
    if tree[0] == "var":
        return {tree[1]}
    if tree[0] == "int":
        return set()
    return set().union(*(_variables(t) for t in tree[1:]))


_EXPR_RULE = "expressions are integers, world_size and epoch with + - * // and parentheses"


def _expr_tree(node: ast.AST) -> tuple:
    """The whitelisted tree of ``node``; raises :class:`_Invalid` with the problem only."""
    if isinstance(node, ast.Constant):
        if type(node.value) is int:
            return ("int", node.value)
        raise _Invalid(f"uses {node.value!r}, which is not an integer")
    if isinstance(node, ast.Name):
        if node.id in VARIABLES:
            return ("var", node.id)
        raise _Invalid(
            f"uses unknown name {node.id!r}{_did_you_mean(node.id, VARIABLES)}; "
            f"expressions may use world_size and epoch"
        )
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return (_BINOPS[type(node.op)], _expr_tree(node.left), _expr_tree(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = _expr_tree(node.operand)
        return ("neg", operand) if isinstance(node.op, ast.USub) else operand
    op = getattr(node, "op", None)
    what = repr(_OP_NAMES[type(op)]) if type(op) in _OP_NAMES else type(node).__name__.lower()
    hint = " (use '//' for integer division)" if isinstance(op, ast.Div) else ""
    raise _Invalid(f"uses {what}, which is not allowed{hint}; {_EXPR_RULE}")


def _expr_problem(text: str) -> tuple:
    if not text:
        raise _Invalid("is empty; give an integer or an expression such as 'world_size - 1'")
    if len(text) > _MAX_EXPR_CHARS:
        raise _Invalid(f"is longer than {_MAX_EXPR_CHARS} characters")
    if not _EXPR_CHARS_RE.match(text):
        bad = next(c for c in text if not _EXPR_CHARS_RE.match(c))
        raise _Invalid(f"contains {bad!r}; {_EXPR_RULE}")
    try:
        node = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise _Invalid(f"is not an expression; {_EXPR_RULE}") from None
    return _expr_tree(node)


def _parse_expr(value: object, name: str, *, shown: str | None = None) -> Expr:
    """Parse ``value``; a problem reads ``NAME=SHOWN problem`` (``shown`` defaults to ``value``)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise _Invalid(
            f"{name}={value!r} must be an integer or an expression string such as "
            f"'world_size - 1'",
            key=name,
        )
    text = str(value).strip()
    try:
        return Expr(_expr_problem(text), text)
    except _Invalid as error:
        shown = shown if shown is not None else repr(value)
        raise _Invalid(f"{name}={shown} {error.message}", key=name) from None


def parse_expr(value: int | str, *, name: str = "value") -> Expr:
    """Parse an integer or an expression string in ``world_size`` and ``epoch``.

    Parameters
    ----------
    value : int or str
        ``3``, ``"world_size - 1"``, ``"world_size * (epoch + 1)"``, ...
    name : str, optional
        The field's name, used in the error message.

    Returns
    -------
    Expr

    Raises
    ------
    ProtocolError
        If ``value`` is not an int or a whitelisted expression.

    Examples
    --------
    >>> parse_expr("world_size - 1").evaluate(world_size=8, epoch=0)
    7
    >>> parse_expr("2 ** 3")
    Traceback (most recent call last):
    ...
    syncverify.errors.ProtocolError: value='2 ** 3' uses '**', which is not allowed; ...
    """
    try:
        return _parse_expr(value, name)
    except _Invalid as error:
        raise ProtocolError(error.message) from None


@dataclass(frozen=True)
class Until:
    """An ``await`` loop's exit condition: ``observed OP target``.

    Examples
    --------
    >>> until = parse_until(">= world_size * (epoch + 1)")
    >>> until.target(world_size=4, epoch=2), until.holds(12, world_size=4, epoch=2)
    (12, True)
    >>> str(until)
    '>= world_size * (epoch + 1)'
    """

    op: str
    rhs: Expr

    def target(self, *, world_size: int, epoch: int) -> int:
        """The right-hand side's value."""
        return self.rhs.evaluate(world_size=world_size, epoch=epoch)

    def holds(self, observed: int, *, world_size: int, epoch: int) -> bool:
        """Whether a poll that read ``observed`` leaves the loop."""
        target = self.target(world_size=world_size, epoch=epoch)
        return {
            "==": observed == target, "!=": observed != target,
            ">=": observed >= target, ">": observed > target,
            "<=": observed <= target, "<": observed < target,
        }[self.op]

    @property
    def source(self) -> str:
        return f"{self.op} {self.rhs.source}"

    def __str__(self) -> str:
        return self.source

    def __repr__(self) -> str:
        return f"Until({self.source!r})"


def _parse_until(value: object) -> Until:
    if not isinstance(value, str):
        raise _Invalid(f"until={value!r} must be a string such as '>= world_size'", key="until")
    match = _UNTIL_RE.match(value)
    if not match:
        raise _Invalid(
            f"until={value!r} must start with one of {' '.join(COMPARISONS)} followed by an "
            f"expression, e.g. '>= world_size'",
            key="until",
        )
    return Until(match.group(1), _parse_expr(match.group(2), "until", shown=repr(value)))


def parse_until(text: str) -> Until:
    """Parse an ``until`` condition such as ``">= world_size"``.

    Raises
    ------
    ProtocolError
        If ``text`` is not a comparison operator followed by a whitelisted expression.
    """
    try:
        return _parse_until(text)
    except _Invalid as error:
        raise ProtocolError(error.message) from None


# ----- steps and protocols ---------------------------------------------------------------------

@dataclass(frozen=True)
class Step:
    """One signal or wait step. Fields that do not apply to ``op`` are ``None``.

    Attributes
    ----------
    op : str
        ``barrier``, ``fence``, ``store``, ``atomic_xchg``, ``atomic_add`` (signal side);
        ``await``, ``atomic_cas``, ``fence``, ``barrier`` (wait side).
    sem, scope : str or None
        Memory semantics and scope, with defaults already applied. A weak store has
        ``sem="weak"`` and ``scope=None``; load/volatile_load awaits have neither.
    value, compare : Expr or None
        The value written (store, xchg, add, the CAS's new value) and the CAS's compare value.
    cache : str or None
        Cache modifier of a store or of a load/volatile_load poll (``""`` for none).
    to : str or None
        Whose copy of the lock a write goes to: ``all``, ``others``, ``self``, ``owner``.
    from_ : str or None
        Whose copy a wait-side access reads: ``self`` or ``each`` (``from`` in the file).
    lock : str or None
        The lock array (``"ready"`` unless the file names another).
    read : str or None
        How an ``await`` polls: ``load``, ``volatile_load``, ``atomic_cas``, ``atomic_add``.
    until : Until or None
        An ``await``'s exit condition.
    line : int or None
        The step's line in its TOML file, when known (not part of equality).
    """

    op: str
    sem: str | None = None
    scope: str | None = None
    value: Expr | None = None
    compare: Expr | None = None
    cache: str | None = None
    to: str | None = None
    from_: str | None = None
    lock: str | None = None
    read: str | None = None
    until: Until | None = None
    line: int | None = field(default=None, compare=False)

    @property
    def changes_lock(self) -> bool:
        """Whether the step can change its lock's value, judged from the expressions as written.

        A CAS with ``compare == value`` and an ``atomic_add`` of 0 never do (the model still
        counts them as read-modify-writes); this is what ``reset = "consumer"`` requires.
        """
        if self.op in ("store", "atomic_xchg"):
            return True
        if self.op == "atomic_add" or (self.op == "await" and self.read == "atomic_add"):
            return self.value is not None and self.value.tree != ("int", 0)
        if self.op == "atomic_cas" or (self.op == "await" and self.read == "atomic_cas"):
            return self.compare != self.value
        return False

    def to_dict(self) -> dict[str, Any]:
        """The step as a file would say it: defaults filled in, ``None`` fields left out."""
        out: dict[str, Any] = {"op": self.op}
        for key, attr in (
            ("read", "read"), ("lock", "lock"), ("to", "to"), ("from", "from_"),
            ("compare", "compare"), ("value", "value"), ("cache", "cache"), ("sem", "sem"),
            ("scope", "scope"), ("until", "until"),
        ):
            item = getattr(self, attr)
            if item is None:
                continue
            if isinstance(item, Expr):
                item = item.to_plain()
            elif isinstance(item, Until):
                item = item.source
            out[key] = item
        return out


@dataclass(frozen=True)
class TileStore:
    """How a producer stores its tile: ``tl.store(..., cache_modifier=cache)``."""

    cache: str = ""


@dataclass(frozen=True)
class TileLoad:
    """How a consumer reads tiles: ``tl.load(..., volatile=volatile)``."""

    volatile: bool = False


@dataclass(frozen=True)
class Protocol:
    """A lock protocol: a producer's ``signal`` steps and a consumer's ``wait`` steps.

    Immutable and hashable, so it can key caches and describe a kernel at compile time.
    Build one with :func:`parse_protocol`, :func:`protocol_from_dict` or
    :func:`syncverify.protocols.registry.load_protocol`; the constructor itself does not validate.

    Examples
    --------
    >>> text = '''
    ... name = "tiny"
    ... summary = "release xchg, acquire poll"
    ... origin = "an example"
    ... [[signal]]
    ... op = "atomic_xchg"
    ... value = 1
    ... sem = "release"
    ... [[wait]]
    ... op = "await"
    ... read = "atomic_add"
    ... sem = "acquire"
    ... until = "== 1"
    ... '''
    >>> p = parse_protocol(text, path="tiny.toml")
    >>> p.signal[0].scope, p.wait[0].value, p.locks
    ('gpu', Expr('0'), ('ready',))
    >>> protocol_from_dict(p.to_dict()) == p
    True
    """

    name: str
    summary: str
    origin: str
    signal: tuple[Step, ...]
    wait: tuple[Step, ...]
    reset: str = "host"
    tile_store: TileStore = TileStore()
    tile_load: TileLoad = TileLoad()
    believed: str = ""
    notes: str = ""
    path: str = field(default="<string>", compare=False)

    @property
    def locks(self) -> tuple[str, ...]:
        """Every lock array the protocol uses, in first-seen order."""
        seen = dict.fromkeys(s.lock for s in self.signal + self.wait if s.lock is not None)
        return tuple(seen)

    def to_dict(self) -> dict[str, Any]:
        """A plain, JSON-ready dict in the file's own layout (``protocol_from_dict`` inverts it)."""
        out: dict[str, Any] = {
            "name": self.name,
            "summary": self.summary,
            "origin": self.origin,
        }
        if self.believed:
            out["believed"] = self.believed
        if self.notes:
            out["notes"] = self.notes
        out["reset"] = self.reset
        out["tile_store"] = {"cache": self.tile_store.cache}
        out["tile_load"] = {"volatile": self.tile_load.volatile}
        out["signal"] = [s.to_dict() for s in self.signal]
        out["wait"] = [s.to_dict() for s in self.wait]
        return out


# ----- locating problems in the text -----------------------------------------------------------

class _Lines:
    """Cheap line lookup in the TOML text: ``[[signal]]``/``[[wait]]`` headers and ``key =``."""

    _HEADER = re.compile(r"\s*\[\[\s*(signal|wait)\s*\]\]\s*(#.*)?\Z")
    _ANY_HEADER = re.compile(r"\s*\[")

    def __init__(self, text: str | None) -> None:
        self.lines = text.splitlines() if text is not None else []
        self.headers: dict[str, list[int]] = {"signal": [], "wait": []}
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
    except _Invalid as error:  # a top-level problem
        raise _fail(path, lines.top(error.key), "", error.message) from None


def _build_checked(data: Mapping[str, Any], path: str, lines: _Lines) -> Protocol:
    for key in data:
        if key not in TOP_FIELDS:
            raise _Invalid(
                f"unknown field {key!r}{_did_you_mean(str(key), TOP_FIELDS)}; "
                f"a protocol takes {_quoted(TOP_FIELDS)}",
                key=str(key),
            )
    for key in REQUIRED_TOP_FIELDS:
        if key not in data:
            raise _Invalid(f"missing field {key!r}")
    name = _text(data, "name")
    if not _NAME_RE.match(name):
        raise _Invalid(
            f"name={name!r} must be lowercase letters, digits, '-' and '_', starting with a "
            f"letter or digit",
            key="name",
        )
    summary = _text(data, "summary")
    if "\n" in summary or "\r" in summary:
        raise _Invalid("summary must be one line", key="summary")
    origin = _text(data, "origin")
    believed = _text(data, "believed", required=False)
    notes = _text(data, "notes", required=False)
    reset = _one_of("reset", data.get("reset", "host"), RESETS)
    cache = _table(data, "tile_store", TILE_STORE_FIELDS).get("cache", "")
    try:
        tile_store = TileStore(_one_of("tile_store.cache", cache, STORE_CACHES))
    except _Invalid as error:
        raise _Invalid(error.message, key="tile_store") from None
    volatile = _table(data, "tile_load", TILE_LOAD_FIELDS).get("volatile", False)
    if not isinstance(volatile, bool):
        raise _Invalid(f"tile_load.volatile={volatile!r} must be true or false", key="tile_load")
    signal = _steps(data, "signal", path, lines)
    wait = _steps(data, "wait", path, lines)
    protocol = Protocol(
        name=name, summary=summary, origin=origin, signal=signal, wait=wait, reset=reset,
        tile_store=tile_store, tile_load=TileLoad(volatile), believed=believed,
        notes=notes, path=path,
    )
    _check_locks(protocol, path, lines)
    if reset == "consumer" and not any(step.changes_lock for step in wait):
        raise _Invalid(
            "reset='consumer' but no wait step can change its lock; reset with an atomic_cas "
            "whose value differs from compare, or say reset = 'host' or 'none'",
            key="reset",
        )
    return protocol


def _text(data: Mapping[str, Any], key: str, *, required: bool = True) -> str:
    value = data.get(key, None if required else "")
    if not isinstance(value, str):
        raise _Invalid(f"{key}={value!r} must be a string", key=key)
    if required and not value.strip():
        raise _Invalid(f"{key} is empty", key=key)
    return value


def _table(data: Mapping[str, Any], key: str, fields: tuple[str, ...]) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        raise _Invalid(f"{key} must be a table such as {{ {fields[0]} = ... }}", key=key)
    for inner in value:
        if inner not in fields:
            raise _Invalid(
                f"{key}: unknown field {inner!r}{_did_you_mean(str(inner), fields)}; "
                f"{key} takes {_quoted(fields)}",
                key=key,
            )
    return value


def _steps(data: Mapping[str, Any], section: str, path: str, lines: _Lines) -> tuple[Step, ...]:
    raw = data[section]
    if not isinstance(raw, list) or not all(isinstance(item, Mapping) for item in raw):
        raise _Invalid(
            f"{section!r} must be an array of tables ([[{section}]] entries)", key=section
        )
    if not raw:
        raise _Invalid(
            f"{section!r} is empty; a protocol needs at least one {section} step", key=section
        )
    steps = []
    for index, table in enumerate(raw):
        try:
            step = _step(table, section)
        except _Invalid as error:
            line = lines.step(section, index, len(raw), error.key)
            raise _fail(path, line, f"{section} step {index + 1}: ", error.message) from None
        steps.append(replace(step, line=lines.step(section, index, len(raw), None)))
    return tuple(steps)


def _step(table: Mapping[str, Any], section: str) -> Step:
    ops = SIGNAL_OPS if section == "signal" else WAIT_OPS
    if "op" not in table:
        raise _Invalid(f"missing field 'op' (one of {_quoted(ops)})")
    op = table["op"]
    if not isinstance(op, str) or op not in ops:
        other = "wait" if section == "signal" else "signal"
        if isinstance(op, str) and op in (WAIT_OPS if section == "signal" else SIGNAL_OPS):
            raise _Invalid(
                f"op {op!r} belongs in [[{other}]]; {section} ops are {_quoted(ops)}", key="op"
            )
        hint = _did_you_mean(op, ops) if isinstance(op, str) else ""
        raise _Invalid(f"unknown op {op!r}{hint}; {section} ops are {_quoted(ops)}", key="op")
    if op == "await":
        if "read" not in table:
            raise _Invalid(f"missing field 'read' (one of {_quoted(READS)})")
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
            raise _Invalid(f"field {key!r} does not apply to {owner} ({takes})", key=str(key))
        raise _Invalid(
            f"unknown field {key!r}{_did_you_mean(str(key), allowed or _ALL_STEP_FIELDS)}; {takes}",
            key=str(key),
        )
    return _STEP_BUILDERS[op](table, read)


def _require(table: Mapping[str, Any], key: str, owner: str) -> Any:
    if key not in table:
        raise _Invalid(f"missing field {key!r} ({owner} needs it)")
    return table[key]


def _lock(table: Mapping[str, Any]) -> str:
    lock = table.get("lock", DEFAULT_LOCK)
    if not isinstance(lock, str) or not _LOCK_RE.match(lock):
        raise _Invalid(
            f"lock={lock!r} must be a name of lowercase letters, digits and '_'", key="lock"
        )
    return lock


def _atomic_sem_scope(table: Mapping[str, Any], sems: tuple[str, ...]) -> tuple[str, str]:
    sem = _one_of("sem", table.get("sem", TRITON_ATOMIC_SEM), sems)
    scope = _one_of("scope", table.get("scope", TRITON_ATOMIC_SCOPE), SCOPES)
    return sem, scope


def _barrier(table: Mapping[str, Any], read: str | None) -> Step:
    return Step("barrier")


def _fence(table: Mapping[str, Any], read: str | None) -> Step:
    sem = _one_of("sem", _require(table, "sem", "fence"), FENCE_SEMS)
    scope = _one_of("scope", _require(table, "scope", "fence"), SCOPES)
    return Step("fence", sem=sem, scope=scope)


def _store(table: Mapping[str, Any], read: str | None) -> Step:
    value = _parse_expr(_require(table, "value", "store"), "value")
    sem = _one_of("sem", table.get("sem", "weak"), STORE_SEMS)
    cache = _one_of("cache", table.get("cache", ""), STORE_CACHES)
    if sem == "weak":
        if "scope" in table:
            raise _Invalid(
                "a weak store takes no scope; give sem = 'relaxed' or 'release'", key="scope"
            )
        scope = None
    else:
        scope = _one_of("scope", _require(table, "scope", f"a {sem} store"), SCOPES)
        if cache:
            raise _Invalid(
                f"cache={cache!r} applies to weak stores only (PTX st.{sem} takes no cache "
                f"operator)",
                key="cache",
            )
    to = _one_of("to", table.get("to", "self"), TARGETS)
    return Step("store", sem=sem, scope=scope, value=value, cache=cache, to=to, lock=_lock(table))


def _rmw(op: str) -> Any:
    def build(table: Mapping[str, Any], read: str | None) -> Step:
        value = _parse_expr(_require(table, "value", op), "value")
        sem, scope = _atomic_sem_scope(table, ATOMIC_SEMS)
        to = _one_of("to", table.get("to", "self"), TARGETS)
        return Step(op, sem=sem, scope=scope, value=value, to=to, lock=_lock(table))

    return build


def _cas(table: Mapping[str, Any], read: str | None) -> Step:
    compare = _parse_expr(_require(table, "compare", "atomic_cas"), "compare")
    value = _parse_expr(_require(table, "value", "atomic_cas"), "value")
    sem, scope = _atomic_sem_scope(table, READ_SEMS)
    source = _one_of("from", table.get("from", "self"), SOURCES)
    return Step(
        "atomic_cas", sem=sem, scope=scope, value=value, compare=compare, from_=source,
        lock=_lock(table),
    )


def _await(table: Mapping[str, Any], read: str | None) -> Step:
    until = _parse_until(_require(table, "until", "await"))
    source = _one_of("from", table.get("from", "self"), SOURCES)
    lock = _lock(table)
    if read in ("load", "volatile_load"):
        default = ".cv" if read == "volatile_load" else ""
        cache = _one_of("cache", table.get("cache", default), LOAD_CACHES)
        return Step("await", read=read, cache=cache, until=until, from_=source, lock=lock)
    sem, scope = _atomic_sem_scope(table, READ_SEMS)
    if read == "atomic_cas":
        owner = "await with read='atomic_cas'"
        compare = _parse_expr(_require(table, "compare", owner), "compare")
        value = _parse_expr(_require(table, "value", owner), "value")
    else:
        compare = None
        value = _parse_expr(table.get("value", 0), "value")
    return Step(
        "await", read=read, sem=sem, scope=scope, value=value, compare=compare, until=until,
        from_=source, lock=lock,
    )


_STEP_BUILDERS = {
    "barrier": _barrier,
    "fence": _fence,
    "store": _store,
    "atomic_xchg": _rmw("atomic_xchg"),
    "atomic_add": _rmw("atomic_add"),
    "atomic_cas": _cas,
    "await": _await,
}


def _check_locks(protocol: Protocol, path: str, lines: _Lines) -> None:
    written = [s.lock for s in protocol.signal if s.lock is not None]
    for index, step in enumerate(protocol.wait):
        if step.lock is not None and step.lock not in written:
            known = tuple(dict.fromkeys(written))
            hint = _did_you_mean(step.lock, known)
            line = lines.step("wait", index, len(protocol.wait), "lock")
            raise _fail(
                path, line, f"wait step {index + 1}: ",
                f"lock={step.lock!r} is never written by a signal step{hint}; signal steps write "
                f"{_quoted(known) if known else 'no lock'}",
            )
