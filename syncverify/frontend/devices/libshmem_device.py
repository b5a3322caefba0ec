"""NVSHMEM's device API as Triton-distributed exposes it (``libshmem_device``), for the check.

A kernel written for Triton-distributed calls ``libshmem_device.putmem_signal_nbi_block(dest,
source, nbytes, sig_addr, signal, sig_op, pe)``, ``libshmem_device.quiet()`` and so on. Here
each call is recorded by the front end as the NVSHMEM call it is (``syncverify.frontend.runner.
nvshmem_call``), lifted to :mod:`syncverify.delivery`'s instructions and checked under modeling
choice 13 (docs/nvshmem.md): a put's chunks land in any order until ``quiet``, a put-with-signal
updates its signal after its data, ``fence`` orders deliveries to one PE. A kernel file imports
it as ``from syncverify.frontend.devices import libshmem_device`` (or a harness maps a top-level
name to it with :func:`syncverify.frontend.devices.provided`).

The arguments are Triton-distributed's (NVSHMEM's): ``dest``, ``sig_addr`` are *symmetric*
addresses, pointers of the calling rank's copy of a ``sv.heap`` buffer; ``pe`` selects whose copy
is written. ``sig_op`` is :data:`NVSHMEM_SIGNAL_SET` or :data:`NVSHMEM_SIGNAL_ADD`, ``cmp`` one of
the ``NVSHMEM_CMP_*`` constants (NVSHMEM's values).

What each call lowers to (``docs/nvshmem.md``, "The kernel front end"):

* ``putmem_nbi_block`` / ``putmem_block`` (and ``_warp`` / plain): a :class:`~syncverify.delivery.Put`
  of the destination's elements on ``pe`` (tile data: ghost locations written with the call
  number; the read of ``source`` is not followed), by model thread 0: the CTA's one call;
* ``putmem_signal_nbi_block`` / ``putmem_signal_block``: the same with its signal update;
* ``signal_op``: a signal update alone (``nvshmemx_signal_op``);
* ``quiet``, ``fence``: :class:`~syncverify.delivery.Quiet`, :class:`~syncverify.delivery.DeliveryFence`;
* ``signal_wait_until``: ``tl.atomic_add(sig_addr, 0, sem="acquire", scope="sys")`` until the
  comparison holds (Triton 3.6 lowers it to ``ld.acquire.sys`` on one thread, then ``bar.sync``).

These functions run in Triton's interpreter only (the check's ``TRITON_INTERPRET=1`` path):
compiled, a kernel uses Triton-distributed's own ``libshmem_device``. A name not provided
raises an ``AttributeError`` naming what is covered.
"""

from __future__ import annotations

import triton.language as tl

from syncverify.frontend.runner import nvshmem_call

#: NVSHMEM's signal operators and comparisons (nvshmem.h's values).
NVSHMEM_SIGNAL_SET, NVSHMEM_SIGNAL_ADD = 0, 5
NVSHMEM_CMP_EQ, NVSHMEM_CMP_NE, NVSHMEM_CMP_GT, NVSHMEM_CMP_LE, NVSHMEM_CMP_LT, NVSHMEM_CMP_GE = 0, 1, 2, 3, 4, 5
_SIGNAL_OPS = {NVSHMEM_SIGNAL_SET: "set", NVSHMEM_SIGNAL_ADD: "add"}
_HOLDS = {NVSHMEM_CMP_EQ: lambda a, b: a == b, NVSHMEM_CMP_NE: lambda a, b: a != b,
          NVSHMEM_CMP_GT: lambda a, b: a > b, NVSHMEM_CMP_LE: lambda a, b: a <= b,
          NVSHMEM_CMP_LT: lambda a, b: a < b, NVSHMEM_CMP_GE: lambda a, b: a >= b}


def _constant(value, table: dict, what: str):
    key = int(getattr(value, "value", value))
    if key not in table:
        raise ValueError(f"{what} {key} is not one of NVSHMEM's ({', '.join(map(str, sorted(table)))})")
    return table[key]


def putmem_nbi_block(dest, source, nbytes, pe):
    """``nvshmemx_putmem_nbi_block``: returns at once; the data lands by ``quiet``."""
    nvshmem_call("put", dest=dest, nbytes=nbytes, pe=pe)


def putmem_block(dest, source, nbytes, pe):
    """``nvshmemx_putmem_block``: returns once the source is read; the data lands by ``quiet``."""
    nvshmem_call("put", dest=dest, nbytes=nbytes, pe=pe, blocking=True)


def putmem_signal_nbi_block(dest, source, nbytes, sig_addr, signal, sig_op, pe):
    """``nvshmemx_putmem_signal_nbi_block``: the data, then the signal update, delivered later."""
    nvshmem_call("put", dest=dest, nbytes=nbytes, pe=pe, signal=sig_addr,
                 signal_op=_constant(sig_op, _SIGNAL_OPS, "sig_op"), signal_value=signal)


def putmem_signal_block(dest, source, nbytes, sig_addr, signal, sig_op, pe):
    """``nvshmemx_putmem_signal_block``: as the ``_nbi`` form, returning once the source is read."""
    nvshmem_call("put", dest=dest, nbytes=nbytes, pe=pe, signal=sig_addr,
                 signal_op=_constant(sig_op, _SIGNAL_OPS, "sig_op"), signal_value=signal, blocking=True)


def signal_op(sig_addr, signal, sig_op, pe):
    """``nvshmemx_signal_op``: a signal update alone, delivered later."""
    nvshmem_call("put", pe=pe, signal=sig_addr, signal_op=_constant(sig_op, _SIGNAL_OPS, "sig_op"),
                 signal_value=signal)


def quiet():
    """``nvshmem_quiet``: every earlier delivery of the caller is complete after it."""
    nvshmem_call("quiet")


def fence():
    """``nvshmem_fence``: the caller's deliveries to a PE before it land before its later ones to that PE."""
    nvshmem_call("fence")


def signal_wait_until(sig_addr, cmp, cmp_val):
    """``nvshmem_signal_wait_until``: acquire loads at system scope until ``value CMP cmp_val``; returns the value."""
    holds = _constant(cmp, _HOLDS, "cmp")
    value = tl.atomic_add(sig_addr, 0, sem="acquire", scope="sys")
    while not holds(value, cmp_val):
        value = tl.atomic_add(sig_addr, 0, sem="acquire", scope="sys")
    return value


# Triton-distributed's other spellings of the same calls
putmem_nbi_warp = putmem_nbi = putmem_nbi_block
putmem_warp = putmem = putmem_block
putmem_signal_nbi_warp = putmem_signal_nbi = putmem_signal_nbi_block
putmem_signal_warp = putmem_signal = putmem_signal_block

#: Every device function this module provides.
DEVICE_API = ("putmem_nbi_block", "putmem_block", "putmem_signal_nbi_block", "putmem_signal_block", "signal_op",
              "quiet", "fence", "signal_wait_until", "putmem_nbi_warp", "putmem_nbi", "putmem_warp", "putmem",
              "putmem_signal_nbi_warp", "putmem_signal_nbi", "putmem_signal_warp", "putmem_signal")


def __getattr__(name: str):
    """A name libshmem_device has but this module does not provide: refused by name."""
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(name)
    raise AttributeError(f"libshmem_device.{name} is not provided by syncverify's NVSHMEM device API (it covers: "
                         f"{', '.join(DEVICE_API)}); see docs/nvshmem.md")
