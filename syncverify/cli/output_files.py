"""Output paths: refused before a (possibly long) run starts, written only after the verdict is out.

Every option that writes files (``check --graph FILE``, ``litmus --graph DIR``,
``stress --output FILE``) calls :func:`check_writable` before any work, so a path that cannot be
written ends in one line on stderr and exit 2 (bad input), never a traceback after minutes of
exploration.

Drawing comes after the verdict is printed, through :func:`write_or_warn`: when it fails anyway
(disk full, a file replaced meanwhile, a plotting error), the verdict is already on stdout and
stays the exit code; one warning line on stderr says what was not written. Exit 2 would be wrong
there: the input was good and the answer was computed.

Writing onto an existing regular file is allowed (``check --graph`` overwrites it, ``stress
--output`` appends to it), as most tools do.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable, Literal

from syncverify.errors import SyncVerifyError
from syncverify.cli.app import err

__all__ = ["OutputPathError", "check_writable", "write_or_warn"]


class OutputPathError(SyncVerifyError):
    """An output path that cannot be written: ``OPTION PATH: what is wrong``."""


def check_writable(path: str | Path, option: str, *, kind: Literal["file", "dir"] = "file") -> Path:
    """Return ``path`` as a :class:`~pathlib.Path` if a ``kind`` can be written there, else raise.

    ``kind="file"``: ``path`` is an existing writable non-directory (overwritten or appended to by
    the caller), or does not exist and its directory does and lets us create a file in it.
    ``kind="dir"``: ``path`` is an existing writable directory, or does not exist and its parent
    does (the caller creates ``path`` itself, one level, like ``mkdir``). A missing parent is
    refused rather than created: a typo in it should not silently make a tree of folders.

    Writability is tried, not inferred from mode bits (root passes ``os.access`` on ``/proc``):
    a file or folder is created and removed at once where one would be written.

    Raises
    ------
    OutputPathError
        One line naming the option, the path and the problem.

    Examples
    --------
    >>> check_writable("/nope/x.png", "--graph")
    Traceback (most recent call last):
    ...
    syncverify.cli.output_files.OutputPathError: --graph /nope/x.png: directory /nope does not exist
    """
    path = Path(path)
    where = f"{option} {path}"
    if kind not in ("file", "dir"):
        raise ValueError(f"kind={kind!r} is not one of 'file', 'dir'")
    if path.is_dir():
        if kind == "file":
            raise OutputPathError(f"{where}: is a directory; give a file path")
        _probe_in(path, where)
        return path
    if path.exists() or path.is_symlink():
        if kind == "dir":
            raise OutputPathError(f"{where}: is a file; give a directory (it is created if missing)")
        if not os.access(path, os.W_OK):
            raise OutputPathError(f"{where}: file is not writable")
        return path
    parent = path.parent
    if not parent.exists():
        raise OutputPathError(f"{where}: directory {parent} does not exist")
    if not parent.is_dir():
        raise OutputPathError(f"{where}: {parent} is not a directory")
    _probe_create(path, where, kind)
    return path


def _probe_create(path: Path, where: str, kind: str) -> None:
    """Create ``path`` (exclusively, so nothing is clobbered) and remove it again."""
    try:
        if kind == "dir":
            os.mkdir(path)
            os.rmdir(path)
        else:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            os.unlink(path)
    except OSError as error:
        raise OutputPathError(f"{where}: cannot create a {'directory' if kind == 'dir' else 'file'} in {path.parent} "
                              f"({error.strerror or error})") from None


def _probe_in(directory: Path, where: str) -> None:
    """Create and remove a file inside ``directory``."""
    try:
        fd, name = tempfile.mkstemp(dir=directory, prefix=".syncverify-probe-")
        os.close(fd)
        os.unlink(name)
    except OSError as error:
        raise OutputPathError(f"{where}: cannot write in this directory ({error.strerror or error})") from None


def write_or_warn(write: Callable[[], object], option: str, path: str | Path) -> bool:
    """Run ``write()``; if it raises, print one warning line on stderr and return ``False``.

    Called after the verdict is printed. Any ``Exception`` is caught, not only ``OSError``:
    whatever fails while drawing, the verdict is the answer and its exit code stands.
    """
    try:
        write()
    except Exception as error:  # noqa: BLE001 - see the docstring
        detail = getattr(error, "strerror", None) or str(error) or type(error).__name__
        err.print(f"syncverify: warning: {option} {path}: not written ({detail}); "
                  f"the verdict above stands", markup=False)
        return False
    return True
