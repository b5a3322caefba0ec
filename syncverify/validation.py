"""One check for "this value must be one of these names", with one message everywhere.

Protocol files, scenario options, kernel configurations and command-line options all pick a
value from a fixed set of names. They share this check so that every refusal reads the same and
offers the closest name when there is one::

    reset='hostt' is not one of 'host', 'consumer', 'none' (did you mean 'host'?)

The caller picks the exception (each part of syncverify raises its own
:class:`syncverify.errors.SyncVerifyError` subclass) and may say where the value came from.
Pure Python: nothing here imports torch or triton.
"""

from __future__ import annotations

import difflib
from typing import Callable, Sequence

__all__ = ["did_you_mean", "one_of"]

# difflib's own default: close enough that 'hostt' suggests 'host' and 'atomic_load' suggests
# 'atomic_add', far enough that 'cluster' suggests none of 'cta', 'gpu', 'sys'.
SUGGESTION_CUTOFF = 0.6


def did_you_mean(word: object, known: Sequence[str]) -> str:
    """``" (did you mean 'NAME'?)"`` for the name in ``known`` closest to ``word``, else ``""``.

    Only a string can be close to a name; anything else gets no suggestion.

    Examples
    --------
    >>> did_you_mean("hostt", ("host", "consumer", "none"))
    " (did you mean 'host'?)"
    >>> did_you_mean("cluster", ("cta", "gpu", "sys"))
    ''
    """
    if not isinstance(word, str):
        return ""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=SUGGESTION_CUTOFF)
    return f" (did you mean {close[0]!r}?)" if close else ""


def one_of(
    name: str,
    value: object,
    allowed: Sequence[str],
    *,
    error: Callable[[str], Exception],
    where: str = "",
) -> str:
    """Return ``value`` if it is one of ``allowed``; otherwise raise ``error`` with one line.

    Parameters
    ----------
    name : str
        The field or option as the user wrote it (``"reset"``, ``"--lock-dtype"``).
    value : object
        What the user gave. A value that is not a string is refused with a message saying so.
    allowed : sequence of str
        The accepted names, in the order the message should list them.
    error : callable
        An exception class, or any callable that makes the exception from the message (for
        instance ``functools.partial`` of a class that takes more arguments).
    where : str, optional
        Where the value came from (``"protocols/my.toml, step 3"``), appended in parentheses.

    Returns
    -------
    str
        ``value`` itself, so a caller can check and assign in one line.

    Raises
    ------
    Exception
        Whatever ``error`` makes, with the message
        ``NAME=VALUE is not one of 'A', 'B'[ (did you mean 'A'?)][ (WHERE)]``.

    Examples
    --------
    >>> one_of("scope", "gpu", ("cta", "gpu", "sys"), error=ValueError)
    'gpu'
    >>> one_of("reset", "hostt", ("host", "consumer", "none"), error=ValueError)
    Traceback (most recent call last):
    ...
    ValueError: reset='hostt' is not one of 'host', 'consumer', 'none' (did you mean 'host'?)
    >>> one_of("scope", "cluster", ("cta", "gpu", "sys"), error=ValueError, where="my.toml, step 3")
    Traceback (most recent call last):
    ...
    ValueError: scope='cluster' is not one of 'cta', 'gpu', 'sys' (my.toml, step 3)
    """
    if isinstance(value, str) and value in allowed:
        return value
    raise error(_not_one_of(name, value, allowed, where))


def _not_one_of(name: str, value: object, allowed: Sequence[str], where: str) -> str:
    """The refusal's text; a non-string is told it must be a string (``3`` is never ``'3'``)."""
    names = ", ".join(repr(a) for a in allowed)
    if isinstance(value, str):
        problem = f"is not one of {names}{did_you_mean(value, allowed)}"
    else:
        problem = f"must be a string, one of {names}"
    place = f" ({where})" if where else ""
    return f"{name}={value!r} {problem}{place}"
