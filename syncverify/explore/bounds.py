"""The explorer's bounds, and the exception that reports one was reached.

Nothing is silently bounded: a bound that is hit stops the exploration and the answer built on it
is UNKNOWN (:attr:`syncverify.explore.driver.ExplorationResult.limit_hit`). The limits are named by the
``limit`` of :class:`LimitHit`: ``max-steps``, ``value-domain``, ``max-executions``, ``timeout``.
"""

from __future__ import annotations

import time

DEFAULT_MAX_EXECUTIONS = 1_000_000
DEFAULT_MAX_STEPS = 500  # instructions one thread may execute on one path
DEFAULT_MAX_DOMAIN = 32  # distinct values one location may take


class LimitHit(Exception):
    """Raised inside the explorer when a bound is reached; the result becomes UNKNOWN."""

    def __init__(self, limit: str, detail: str) -> None:
        self.limit = limit
        self.detail = detail
        super().__init__(f"{limit}: {detail}")


def check_deadline(deadline: float | None, where: str) -> None:
    """Raise the ``timeout`` :class:`LimitHit` once ``deadline`` (a ``time.monotonic()`` value) has passed."""
    if deadline is not None and time.monotonic() > deadline:
        raise LimitHit("timeout", where)
