"""Library device APIs a user's kernel imports, provided over the check's symmetric heap.

A kernel engineer's file does ``import iris`` (AMD's Iris) or calls PyTorch symmetric-memory
helpers; the check runs that file as written. Each shim here is a plain Triton module with the
library's device signatures, implemented over ``tl.load``/``tl.store``/``tl.atomic_*`` and pointer
arithmetic, so the front end's hooks see ordinary primitives (with the user's sem/scope/cache)
and the same module also runs compiled on a GPU:

* :mod:`syncverify.frontend.devices.iris`: iris's functional device API (``translate``,
  ``load``, ``store``, ``copy``, ``get``, ``put``, ``atomic_add/sub/xchg/cas/and/or/xor/min/max``
  with ``sem``/``scope``, ``heap_bases``);
* :mod:`syncverify.frontend.devices.symm_mem`: PyTorch's symmetric-memory Triton helpers
  (``get_remote_ptr`` from ``buffer_ptrs``, ``send_signal``/``wait_signal`` on signal pads,
  ``symm_mem_sync``);
* :mod:`syncverify.frontend.devices.libshmem_device`: NVSHMEM's device API as Triton-distributed
  exposes it (``putmem{_signal}{_nbi}_block``, ``signal_op``, ``signal_wait_until``, ``quiet``,
  ``fence``), recorded as NVSHMEM calls and checked as deliveries (docs/nvshmem.md; the
  interpreter only). Raw peer pointers (an int64 address table loaded and cast with
  ``.to(tl.pointer_type(...))``) need nothing: they are ordinary loads and casts.

:func:`provided` makes ``import iris`` in a user's file give the shim, for the duration of a
check only. ``docs/kernels.md`` lists every function and what it lowers to.

This module imports neither torch nor triton: the shims are imported (and triton with them)
only inside :func:`provided` or by a kernel file that names them.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator, Mapping
from types import ModuleType

from syncverify.errors import SyncVerifyError

#: Each shim: its short name and the module that implements it.
SHIMS: dict[str, str] = {
    "iris": "syncverify.frontend.devices.iris",
    "symm_mem": "syncverify.frontend.devices.symm_mem",
    "libshmem_device": "syncverify.frontend.devices.libshmem_device",
}

#: What a check provides unless told otherwise: ``import iris`` gives the iris shim.
DEFAULT_IMPORTS: dict[str, str] = {"iris": "iris"}

_ABSENT = object()


def shim(name: str) -> ModuleType:
    """The shim module called ``name`` (``"iris"`` or ``"symm_mem"``), imported on first use.

    >>> shim("iris").__name__
    'syncverify.frontend.devices.iris'
    """
    if name not in SHIMS:
        raise SyncVerifyError(f"no device API called {name!r}: the provided ones are {', '.join(sorted(SHIMS))}")
    return importlib.import_module(SHIMS[name])  # imports triton: only now, when a kernel needs it


@contextlib.contextmanager
def provided(imports: Mapping[str, str] | None = None) -> Iterator[dict[str, ModuleType]]:
    """While inside, ``import NAME`` gives the shim ``imports[NAME]`` (default: ``iris`` -> iris).

    Whatever ``sys.modules`` held under each name before (a real, installed iris, or nothing)
    is put back on exit, exception or not, so a real iris is shadowed only during a check.
    A module imported inside keeps the shim it was given: load the user's file inside.

    Parameters
    ----------
    imports
        Top-level module name a user's file imports -> shim name (a key of :data:`SHIMS`), e.g.
        ``{"iris": "iris", "my_symm_helpers": "symm_mem"}``.

    Yields
    ------
    dict
        The modules installed, by the name they were installed under.

    Examples
    --------
    >>> import sys
    >>> before = sys.modules.get("iris")
    >>> with provided() as mods:
    ...     import iris
    ...     iris is mods["iris"]
    True
    >>> sys.modules.get("iris") is before
    True
    """
    wanted = dict(DEFAULT_IMPORTS if imports is None else imports)
    for name, shim_name in wanted.items():
        if not name or "." in name:
            raise SyncVerifyError(f"cannot provide a device API as {name!r}: give a top-level module name "
                                  "(the name after `import`, without dots)")
        if shim_name not in SHIMS:
            raise SyncVerifyError(f"no device API called {shim_name!r} (for `import {name}`): "
                                  f"the provided ones are {', '.join(sorted(SHIMS))}")
    saved = {name: sys.modules.get(name, _ABSENT) for name in wanted}
    try:
        installed = {name: shim(shim_name) for name, shim_name in wanted.items()}
        sys.modules.update(installed)
        yield installed
    finally:
        for name, before in saved.items():
            if before is _ABSENT:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = before
