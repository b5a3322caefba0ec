"""The kernel front end lifts NVSHMEM's device calls (Triton-distributed's ``libshmem_device``) as
deliveries (docs/nvshmem.md; syncverify.model.ptx, choice 13): the same answers the litmus tests
and the zoo give, from a user's kernel.

NVIDIA/nvshmem #84's cumulative ``SIGNAL_ADD`` counter waited for with ``CMP_GE`` is UNSAFE and a
signal per chunk is SAFE; a ``putmem_nbi`` then a ``signal_op`` is UNSAFE without ``quiet`` and
SAFE with it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("triton")

import syncverify  # noqa: E402

KERNELS = Path(__file__).parent / "frontend_kernels" / "nvshmem.py"


def _check(name: str):
    return syncverify.check_kernel(f"{KERNELS}::{name}", world_size=2, timeout=120)


def test_a_cumulative_signal_add_counter_says_how_many_chunks_arrived_not_which():
    result = _check("cumulative_signal")
    assert result.safe is False
    assert {"unwritten-read", "race"} <= set(result.violations)
    assert "its NVSHMEM delivery" in result.violations["race"].explanation


def test_a_signal_per_chunk_is_safe():
    result = _check("per_chunk_signal")
    assert result.safe is True, result.text()


def test_a_signal_op_after_put_nbi_needs_quiet():
    assert _check("put_nbi_then_signal").safe is False
    result = _check("put_nbi_quiet_then_signal")
    assert result.safe is True, result.text()


def test_a_kernel_boundary_completes_deliveries_on_purpose():
    """syncverify.model.delivery, "Differs on purpose: kernel boundaries complete deliveries": a put
    with no quiet, then a host barrier and the next launch, is SAFE here though the specification
    completes a put only by quiet (or host-side synchronization on the stream). Pinned so that a
    change of that choice shows."""
    result = syncverify.check_kernel(f"{KERNELS}::put_nbi_then_next_launch", world_size=2, timeout=120)
    assert result.safe is True, result.text()
