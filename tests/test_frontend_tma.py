"""The kernel front end lifts tensor descriptors as TMA loads and stores through the async proxy
(docs/async.md, "The kernel front end"; syncverify.model.ptx, choice 11).

A TMA epilogue that signals after its descriptor store (Triton 3.6 waits with ``wait_group.read``
only) and a consumer that TMA-loads a tile written with generic stores are UNSAFE; the same kernel
with pointer stores and loads is SAFE.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("triton")

import syncverify  # noqa: E402

TMA = Path(__file__).parent / "frontend_kernels" / "tma.py"


def _check(name: str):
    return syncverify.check_kernel(f"{TMA}::{name}", world_size=1, timeout=120)


def test_a_signal_after_a_descriptor_store_can_overtake_the_tile():
    result = _check("tma_store_then_signal")
    assert result.safe is False
    assert {"unwritten-read", "race"} <= set(result.violations)
    assert "W.async" in result.violations["race"].explanation
    assert "wait_group.read 0 only" in result.text()


def test_the_same_epilogue_with_pointer_stores_is_safe():
    result = _check("pointer_store_then_signal")
    assert result.safe is True, result.text()


def test_a_descriptor_load_of_generically_written_data_after_an_acquire_races_without_a_proxy_fence():
    result = _check("tma_load_after_acquire")
    assert result.safe is False
    assert "race" in result.violations
    assert "R.async" in result.violations["race"].explanation


def test_a_thread_reading_its_own_generic_stores_back_through_a_descriptor_needs_a_proxy_fence():
    result = _check("own_tma_load")
    assert result.safe is False
    assert "unwritten-read" in result.violations
