"""Reading a user's input file (a protocol, a litmus test, a baseline): bounded before it is read.

Only a regular file is read: a FIFO would block forever, ``/dev/zero`` would fill memory, and a
directory cannot be parsed; each is one line naming the file. A file larger than
:data:`MAX_INPUT_BYTES` is refused before it is read whole (the largest file we ship is a few KB).
"""

from __future__ import annotations

import os
import stat
from typing import Callable

__all__ = ["MAX_INPUT_BYTES", "read_input_file"]

#: 1 MiB: a thousand times the largest protocol or litmus test we ship, small enough to parse at once.
MAX_INPUT_BYTES = 1 << 20


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_input_file(path: str | os.PathLike[str], what: str, error: Callable[[str], Exception],
                    *, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of the regular file ``path``; anything else raises ``error`` with one line.

    ``what`` names the file in the message (``"protocol file"``, ``"litmus file"``).

    Examples
    --------
    >>> read_input_file("/dev/zero", "litmus file", ValueError)
    Traceback (most recent call last):
    ...
    ValueError: /dev/zero: cannot read litmus file: it is a device, not a regular file
    """
    name = os.fspath(path)
    try:
        info = os.stat(name)  # stat, not open: opening a FIFO blocks until a writer comes
    except OSError as exc:
        raise error(f"{name}: cannot read {what}: {exc.strerror or type(exc).__name__}") from None
    except ValueError as exc:  # an embedded NUL in the path
        raise error(f"{name!r}: not a usable path: {exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise error(f"{name}: cannot read {what}: it is {_kind(info.st_mode)}, not a regular file")
    if info.st_size > limit:
        raise error(f"{name}: {what} is {info.st_size:,} bytes, over the limit of {limit:,}")
    try:
        with open(name, "rb") as handle:
            data = handle.read(limit + 1)  # the file may have grown since stat
    except OSError as exc:
        raise error(f"{name}: cannot read {what}: {exc.strerror or type(exc).__name__}") from None
    if len(data) > limit:
        raise error(f"{name}: {what} is over the limit of {limit:,} bytes")
    return data
