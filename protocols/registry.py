"""Finding protocols: the built-ins shipped as ``protocols/*.toml``, or a user's own file.

A built-in's name is its file's stem, and the ``name`` inside the file must match it.
"""

from __future__ import annotations

import functools
import os
from importlib import resources

from syncverify.validation import did_you_mean
from syncverify.errors import ProtocolError
from syncverify.inputs import read_input_file

from syncverify.protocols.loader import parse_protocol
from syncverify.protocols.model import Protocol

__all__ = ["builtin_names", "builtin_protocols", "load_protocol", "zoo_litmus", "zoo_names", "zoo_protocols"]

_PACKAGE = "syncverify.protocols"
_SUFFIX = ".toml"
#: The zoo of reported bugs: protocol files with a ``[zoo]`` record, loadable by name like built-ins.
_ZOO = "zoo"


@functools.lru_cache(maxsize=None)
def _builtin_files() -> dict[str, str]:
    """Built-in name -> file name, read once from the package data."""
    root = resources.files(_PACKAGE)
    names = {
        entry.name[: -len(_SUFFIX)]: entry.name
        for entry in root.iterdir()
        if entry.name.endswith(_SUFFIX) and entry.is_file()
    }
    return dict(sorted(names.items()))


@functools.lru_cache(maxsize=None)
def _zoo_files() -> dict[str, str]:
    """Zoo name -> file name (``zoo/NAME.toml``), read once from the package data."""
    root = resources.files(_PACKAGE).joinpath(_ZOO)
    names = {
        entry.name[: -len(_SUFFIX)]: f"{_ZOO}/{entry.name}"
        for entry in root.iterdir()
        if entry.name.endswith(_SUFFIX) and entry.is_file()
    }
    return dict(sorted(names.items()))


@functools.lru_cache(maxsize=None)
def zoo_litmus() -> dict[str, dict[str, str]]:
    """The zoo's litmus entries (``zoo/NAME.litmus``): reported bugs the protocol language cannot
    state yet (mixed-size flags), each a PTX litmus test whose ``// key: value`` header lines
    (``source``, ``origin``, ``users_saw``, ``model_shows``, ``scaled``) say where it comes from;
    name -> those fields and ``text``, the file's contents."""
    root = resources.files(_PACKAGE).joinpath(_ZOO)
    entries = {}
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".litmus") and entry.is_file():
            text = entry.read_text()
            fields = dict(line[2:].strip().split(": ", 1) for line in text.splitlines()
                          if line.startswith("// ") and ": " in line)
            entries[entry.name[: -len(".litmus")]] = {**fields, "text": text}
    return entries


def zoo_names() -> list[str]:
    """Names of the protocols in the zoo of reported bugs (``protocols/zoo/``), sorted."""
    return list(_zoo_files())


def zoo_protocols() -> list[Protocol]:
    """Every zoo protocol, in :func:`zoo_names` order; each has a ``zoo`` record."""
    protocols = [_load_builtin(name) for name in _zoo_files()]
    for protocol in protocols:
        if protocol.zoo is None:
            raise ProtocolError(f"{protocol.path}: a zoo file needs a [zoo] table (scenario, expected, users_saw, "
                                f"model_shows, source)")
    return protocols


@functools.lru_cache(maxsize=None)
def _load_builtin(name: str) -> Protocol:
    file_name = _builtin_files().get(name) or _zoo_files()[name]
    shown = f"protocols/{file_name}"  # where it lives in the repository
    text = resources.files(_PACKAGE).joinpath(file_name).read_text(encoding="utf-8")
    protocol = parse_protocol(text, path=shown)
    if protocol.name != name:
        raise ProtocolError(f"{shown}: name={protocol.name!r} must match the file name {name!r}")
    return protocol


def builtin_names() -> list[str]:
    """Names of the built-in protocols, sorted.

    Examples
    --------
    >>> "xchg-flag" in builtin_names()
    True
    """
    return list(_builtin_files())


def builtin_protocols() -> list[Protocol]:
    """Every built-in protocol, in :func:`builtin_names` order."""
    return [_load_builtin(name) for name in _builtin_files()]


def load_protocol(name_or_path: str | os.PathLike[str]) -> Protocol:
    """Load a built-in protocol by name, or a protocol file by path.

    A string is a path if it ends in ``.toml`` or contains a path separator; otherwise it is a
    built-in name.

    Parameters
    ----------
    name_or_path : str or os.PathLike
        ``"epoch-flag"``, ``"protocols/my.toml"``, ``pathlib.Path("my.toml")``, ...

    Returns
    -------
    Protocol

    Raises
    ------
    ProtocolError
        Unknown name (the message lists the built-ins and suggests the closest), unreadable file,
        or a file the schema refuses.

    Examples
    --------
    >>> load_protocol("epoch-flag").reset
    'none'
    >>> load_protocol("epoch-flg")
    Traceback (most recent call last):
    ...
    syncverify.errors.ProtocolError: unknown protocol 'epoch-flg' (did you mean 'epoch-flag'?); ...
    """
    if isinstance(name_or_path, os.PathLike):
        return _load_file(os.fspath(name_or_path))
    if not isinstance(name_or_path, str):
        raise ProtocolError(
            f"expected a protocol name or a path to a .toml file, got {name_or_path!r}"
        )
    if name_or_path in _builtin_files() or name_or_path in _zoo_files():
        return _load_builtin(name_or_path)
    if name_or_path.lower().endswith(".litmus"):
        raise ProtocolError(f"{name_or_path} is a litmus test, not a protocol: run it with "
                            f"'syncverify litmus {name_or_path}'")
    if _looks_like_path(name_or_path) or os.path.exists(name_or_path):  # proto.txt is a file too
        return _load_file(name_or_path)
    names = builtin_names()
    raise ProtocolError(
        f"unknown protocol {name_or_path!r}{did_you_mean(name_or_path, names)}; "
        f"built-in protocols are {', '.join(names)}, "
        f"zoo protocols ('syncverify list --zoo') are {', '.join(zoo_names())}, "
        f"or give a path to a .toml file"
    )


def _looks_like_path(text: str) -> bool:
    separators = [sep for sep in (os.sep, os.altsep, "/") if sep]
    return text.endswith(_SUFFIX) or any(sep in text for sep in separators)


def _load_file(path: str) -> Protocol:
    data = read_input_file(path, "protocol file", ProtocolError)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ProtocolError(
            f"{path}: protocol file is not UTF-8 text ({error.reason} at byte {error.start})"
        ) from None
    return parse_protocol(text, path=path)
