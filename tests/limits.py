"""Hypothesis properties over things that may be too big to check: discard those, but count them.

An example whose exploration hits a limit proves nothing either way, so it is discarded with
``assume``; a property fails afterwards if more than ``max_hits`` of its examples were, since then
the strategy draws inputs too big for the property to mean much.
"""

from __future__ import annotations

import functools
from collections import Counter

from hypothesis import assume, event


class LimitBudget:
    """How many examples of each property may be discarded because a bound was hit."""

    def __init__(self, max_hits: int, what: str) -> None:
        self.max_hits = max_hits
        self.what = what  # "explorer", "checker": for the messages
        self.hits: Counter[str] = Counter()
        self.running: list[str] = []

    def guard(self, test):
        """Decorator: run the Hypothesis ``test``, then fail if too many examples hit a limit."""

        @functools.wraps(test)
        def wrapper(*args, **kwargs):
            self.hits[test.__name__] = 0
            self.running.append(test.__name__)
            try:
                test(*args, **kwargs)
            finally:
                self.running.pop()
            assert self.hits[test.__name__] <= self.max_hits, (
                f"{self.hits[test.__name__]} examples hit a {self.what} limit: the strategy draws "
                "inputs too big to check")

        return wrapper

    def discard_if_hit(self, limit_hit: str | None) -> None:
        """Discard the current example (counted) when its exploration hit a limit."""
        if limit_hit is not None:
            self.hits[self.running[-1] if self.running else "?"] += 1
            event(f"{self.what} limit hit: {limit_hit}")
            assume(False)
