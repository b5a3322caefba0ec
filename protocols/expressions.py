"""Integer expressions in ``world_size`` and ``epoch``, and ``until`` conditions built on them.

A protocol's ``value``, ``compare`` and the right side of ``until`` are expressions. Each is
parsed once with :mod:`ast` under a whitelist (integers, ``world_size``, ``epoch``,
``+ - * //``, unary minus, parentheses) and evaluated by a tiny interpreter; nothing is ever
passed to ``eval``. This decision is repeated in ``docs/protocols.md``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Mapping

from syncverify.validation import did_you_mean
from syncverify.errors import ProtocolError

__all__ = ["Expr", "Until", "parse_expr", "parse_until"]

COMPARISONS: tuple[str, ...] = ("==", "!=", ">=", ">", "<=", "<")
VARIABLES: tuple[str, ...] = ("world_size", "epoch")

_EXPR_CHARS_RE = re.compile(r"[0-9A-Za-z_ \t+\-*/()]*\Z")
_UNTIL_RE = re.compile(r"\s*(==|!=|>=|<=|>|<)(.*)\Z", re.DOTALL)
_MAX_EXPR_CHARS = 200


class DivisionByZero(ProtocolError):
    """An expression divided by zero at one ``world_size`` and ``epoch`` (see :func:`evaluate_at`)."""

    def __init__(self, source: str, world_size: int, epoch: int) -> None:
        self.source, self.world_size, self.epoch = source, world_size, epoch
        super().__init__(f"{source!r} divides by zero at world_size={world_size}, epoch={epoch}")


def step_place(path: str, section: str, number: int, line: int | None) -> str:
    """``PATH:LINE: signal step N``, as the loader's messages name a step (no ``:LINE`` if unknown)."""
    at = f"{path}:{line}" if line is not None else path
    return f"{at}: {section} step {number}"


def evaluate_at(expr: "Expr", *, place: str, name: str, shown: str | None = None,
                world_size: int, epoch: int) -> int:
    """``expr.evaluate(...)``; a division by zero names the protocol field that has it.

    >>> evaluate_at(parse_expr("1 // (world_size - 2)"), place="my.toml:9: signal step 1",
    ...             name="value", world_size=2, epoch=0)
    Traceback (most recent call last):
    ...
    syncverify.errors.ProtocolError: my.toml:9: signal step 1: value='1 // (world_size - 2)' divides by zero at world_size=2, epoch=0
    """
    try:
        return expr.evaluate(world_size=world_size, epoch=epoch)
    except DivisionByZero:
        text = shown if shown is not None else repr(expr.source)
        raise ProtocolError(f"{place}: {name}={text} divides by zero "
                            f"at world_size={world_size}, epoch={epoch}") from None


class Invalid(Exception):
    """A problem found below the loader's entry point; the entry point adds the location.

    Internal to the protocols package: :mod:`syncverify.protocols.loader` turns every one into a
    :class:`~syncverify.errors.ProtocolError` before it reaches a caller.
    """

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.key = key  # the field at fault, to find its TOML line


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
            raise DivisionByZero(self.source, world_size, epoch) from None

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


#: A literal the lock dtype (int32) cannot hold is refused: stored, it would wrap silently.
LOCK_MIN, LOCK_MAX = -(2**31), 2**31 - 1

_EXPR_RULE = "expressions are integers, world_size and epoch with + - * // and parentheses"


def _expr_tree(node: ast.AST) -> tuple:
    """The whitelisted tree of ``node``; raises :class:`Invalid` with the problem only."""
    if isinstance(node, ast.Constant):
        if type(node.value) is int:
            if not LOCK_MIN <= node.value <= LOCK_MAX:
                wrapped = (node.value - LOCK_MIN) % 2**32 + LOCK_MIN
                raise Invalid(f"uses {node.value}, which a 32-bit lock cannot hold (it would wrap to {wrapped}); "
                              f"use {LOCK_MIN} to {LOCK_MAX}")
            return ("int", node.value)
        raise Invalid(f"uses {node.value!r}, which is not an integer")
    if isinstance(node, ast.Name):
        if node.id in VARIABLES:
            return ("var", node.id)
        raise Invalid(
            f"uses unknown name {node.id!r}{did_you_mean(node.id, VARIABLES)}; "
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
    raise Invalid(f"uses {what}, which is not allowed{hint}; {_EXPR_RULE}")


def _expr_problem(text: str) -> tuple:
    if not text:
        raise Invalid("is empty; give an integer or an expression such as 'world_size - 1'")
    if len(text) > _MAX_EXPR_CHARS:
        raise Invalid(f"is longer than {_MAX_EXPR_CHARS} characters")
    if not _EXPR_CHARS_RE.match(text):
        bad = next(c for c in text if not _EXPR_CHARS_RE.match(c))
        raise Invalid(f"contains {bad!r}; {_EXPR_RULE}")
    try:
        node = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise Invalid(f"is not an expression; {_EXPR_RULE}") from None
    return _expr_tree(node)


def parse_expr_field(value: object, name: str, *, shown: str | None = None) -> Expr:
    """Parse ``value``; a problem reads ``NAME=SHOWN problem`` (``shown`` defaults to ``value``)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise Invalid(
            f"{name}={value!r} must be an integer or an expression string such as "
            f"'world_size - 1'",
            key=name,
        )
    text = str(value).strip()
    try:
        return Expr(_expr_problem(text), text)
    except Invalid as error:
        shown = shown if shown is not None else repr(value)
        raise Invalid(f"{name}={shown} {error.message}", key=name) from None


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
        return parse_expr_field(value, name)
    except Invalid as error:
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


def parse_until_field(value: object) -> Until:
    if not isinstance(value, str):
        raise Invalid(f"until={value!r} must be a string such as '>= world_size'", key="until")
    match = _UNTIL_RE.match(value)
    if not match:
        raise Invalid(
            f"until={value!r} must start with one of {' '.join(COMPARISONS)} followed by an "
            f"expression, e.g. '>= world_size'",
            key="until",
        )
    return Until(match.group(1), parse_expr_field(match.group(2), "until", shown=repr(value)))


def parse_until(text: str) -> Until:
    """Parse an ``until`` condition such as ``">= world_size"``.

    Raises
    ------
    ProtocolError
        If ``text`` is not a comparison operator followed by a whitelisted expression.
    """
    try:
        return parse_until_field(text)
    except Invalid as error:
        raise ProtocolError(error.message) from None
