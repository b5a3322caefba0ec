"""The first phase of an mbarrier with transaction counts (``syncverify.model.mbarrier``,
syncverify.model.ptx choice 14), stated as properties over drawn completions."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from syncverify.model.mbarrier import Completion, phase_completions

sizes = st.lists(st.sampled_from([4, 8, 16]), min_size=0, max_size=5)


@settings(max_examples=200, deadline=None)
@given(sizes)
def test_expecting_exactly_what_the_copies_bring_has_one_way_every_copy_complete(copy_sizes):
    completions = tuple(Completion(size, copy) for copy, size in enumerate(copy_sizes))
    phase = phase_completions(count=1, arrivals=1, expected=sum(copy_sizes), completions=completions)
    assert phase.ways == (tuple(range(len(copy_sizes))),) and phase.never == ""


@settings(max_examples=200, deadline=None)
@given(sizes, st.integers(min_value=0, max_value=64))
def test_each_way_is_whole_completions_at_or_below_the_expected_count_and_the_rest_in_flight(copy_sizes, expected):
    completions = tuple(Completion(size, copy) for copy, size in enumerate(copy_sizes))
    phase = phase_completions(count=1, arrivals=1, expected=expected, completions=completions)
    total = sum(copy_sizes)
    if total < expected:
        assert phase.ways == () and "never reaches zero" in phase.never
        return
    for way in phase.ways:
        done = sum(copy_sizes[c] for c in way)
        in_flight = total - done
        assert done == expected or done < expected < done + in_flight
    exact = any(sum(copy_sizes[c] for c in way) == expected for way in phase.ways)
    assert bool(phase.never) == (not exact)  # a hang only where no whole completions make the count


def test_an_arrival_short_of_the_count_never_completes():
    phase = phase_completions(count=2, arrivals=1, expected=0, completions=())
    assert phase.ways == () and "pending arrival count" in phase.never
