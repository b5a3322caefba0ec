"""Lifting rules of the kernel front end found by the cross-check of our own kernels (issue 22,
item 6): each test is a small kernel (tests/frontend_kernels/polls.py) that got a wrong answer
before its rule was fixed."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

import syncverify  # noqa: E402

POLLS = Path(__file__).parent / "frontend_kernels" / "polls.py"


def check(name: str, **options):
    """The harness ``name`` of polls.py, one rank, bounded at 120 s."""
    return syncverify.check_kernel(f"{POLLS}::{name}", world_size=1, timeout=120, **options)


def test_a_poll_of_the_next_flag_at_the_same_line_keeps_the_previous_polls_cta_barrier():
    """The first flag's successful poll is followed by the second flag's poll at the same line,
    with nothing in between: it is not a failed iteration, and its ``bar.sync`` (thread 0's
    acquire, then the other threads' reads) stays. Dropped, thread 1 of the consumer never left
    the first barrier and its share of ``out`` was reported unwritten."""
    result = check("two_flags_harness")
    assert result.safe is True, result.text()


def test_a_failed_cas_poll_writes_nothing_so_its_value_domain_settles():
    """``atomic_cas(c, 1, 0)`` polled until it reads 1: a failed iteration reads 0 and writes
    nothing, so the loop is no unbounded chain of writes to ``c`` (counted as one, the domain grew
    every round and the check answered unknown)."""
    safe = check("cas_reset_harness", threads_per_cta=1)
    assert safe.limit_hit is None and safe.safe is True, safe.text()
    late = check("cas_reset_late_harness", threads_per_cta=1)
    assert late.limit_hit is None and "race" in late.violations, late.text()


def test_expected_memory_no_one_writes_is_one_location_not_one_read_per_element():
    """The consumer hangs and never writes its 1024 outputs: the host's check reads them as one
    never-written group (one read per element was more than the explorer's steps per thread)."""
    result = check("never_signalled_harness", threads_per_cta=1)
    assert result.limit_hit is None, result.text()
    assert "hang" in result.violations, result.text()
