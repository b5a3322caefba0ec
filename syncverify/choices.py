"""One check for "this value must be one of these", with a did-you-mean, for every option and field."""

from __future__ import annotations

import difflib
from typing import Sequence


def one_of(name: str, value: object, allowed: Sequence[str], *, error: type[Exception], where: str = "") -> None:
    """Raise ``error`` with one line unless ``value`` is in ``allowed``.

    >>> one_of("reset", "hostt", ("host", "none"), error=ValueError)
    Traceback (most recent call last):
    ValueError: reset='hostt' is not one of 'host', 'none' (did you mean 'host'?)
    """
    if value in allowed:
        return
    close = difflib.get_close_matches(str(value), [str(a) for a in allowed], n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise error(f"{where}{name}={value!r} is not one of {', '.join(map(repr, allowed))}{hint}")
