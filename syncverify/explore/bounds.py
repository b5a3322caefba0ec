"""The explorer's bounds, its one clock, and the exception that reports a bound was reached.

Nothing is silently bounded: a bound that is hit stops the exploration and the answer built on it
is UNKNOWN (:attr:`syncverify.explore.driver.ExplorationResult.limit_hit`). The limits are named by the
``limit`` of :class:`LimitHit`: ``max-steps``, ``value-domain``, ``max-executions``, ``timeout``.
The time bound is one :class:`Clock`, made by whoever starts the exploration and passed to every
phase (GenMC's ``BoundDecider`` idea): each phase asks it, none reads the time itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable

DEFAULT_MAX_EXECUTIONS = 1_000_000
DEFAULT_MAX_STEPS = 500  # instructions one thread may execute on one path
DEFAULT_MAX_DOMAIN = 32  # distinct values one location may take


class LimitHit(Exception):
    """Raised inside the explorer when a bound is reached; the result becomes UNKNOWN."""

    def __init__(self, limit: str, detail: str) -> None:
        self.limit = limit
        self.detail = detail
        super().__init__(f"{limit}: {detail}")


DEFAULT_PROGRESS_INTERVAL = 0.5  # seconds between two progress reports, at least


class Clock:
    """An exploration's clock: when it started, its deadline (``timeout`` seconds on; None: no
    bound), and its progress reports.

    :meth:`check` is the one way a phase honours the time bound; the driver's :meth:`tick`, called
    wherever the enumeration may spend long (each combination of paths, each reads-from choice of
    a location, each candidate execution), also reports progress, at most every ``interval``
    seconds, through ``report``.
    """

    def __init__(self, timeout: float | None = None, report: Callable[[], None] | None = None,
                 interval: float = DEFAULT_PROGRESS_INTERVAL) -> None:
        self.start = time.monotonic()
        self.deadline = None if timeout is None else self.start + timeout
        self.report = report
        self.interval = interval
        self.next_report = self.start + interval

    def elapsed(self) -> float:
        """Seconds since the clock started."""
        return time.monotonic() - self.start

    def check(self, where: str) -> None:
        """Raise the ``timeout`` :class:`LimitHit` (saying ``where``) once the deadline has passed."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise LimitHit("timeout", where)

    def tick(self, where: str) -> None:
        """:meth:`check`, then a progress report if one is due."""
        now = time.monotonic()
        if self.deadline is not None and now > self.deadline:
            raise LimitHit("timeout", where)
        if self.report is not None and now >= self.next_report:
            self.next_report = now + self.interval
            self.report()
