"""Progress on stderr for long commands, from a background thread: one lifecycle for all of them.

Nothing for the first ``after`` seconds (a quick command stays quiet); then, on a terminal, a rich
display that the subclass draws (:meth:`StderrProgress.terminal`), and otherwise one plain line
(:meth:`StderrProgress.line`) every ``plain_every`` seconds, so logs and CI keep every line. The
command only hands over its latest state (``update``); the thread reads the clock itself, so the
elapsed time moves on even while nothing new is reported.
"""

from __future__ import annotations

import os
import resource
import threading
import time

from syncverify.cli.app import err
from syncverify.explore.bounds import LimitHit

#: MiB a check or litmus run may hold before it answers unknown (``limit: memory``): a run that
#: outgrows it would be killed by the system instead, with no answer at all.
DEFAULT_MAX_MEMORY_MB = 8192


def memory_in_use_mb() -> float:
    """This process's resident memory in MiB (Linux's ``/proc/self/statm``; elsewhere the peak)."""
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
        return peak / 2**10 if peak < 2**40 else peak / 2**20


class MemoryCap:
    """Checked with the clock (each progress report): over ``max_mb`` it raises the ``memory``
    :class:`LimitHit`, which the explorer turns into an unknown answer like its own bounds."""

    def __init__(self, max_mb: float | None) -> None:
        self.max_mb = max_mb

    def __call__(self) -> None:
        if self.max_mb is None:
            return
        used = memory_in_use_mb()
        if used > self.max_mb:
            raise LimitHit("memory", f"{used:,.0f} MiB in use, over --max-memory {self.max_mb:,.0f} MiB")


class StderrProgress:
    """A progress display as a context manager; subclasses say what a line is and how a terminal
    shows it."""

    def __init__(self, *, after: float, plain_every: float, name: str = "syncverify-progress") -> None:
        self.after = after
        self.plain_every = plain_every
        self.start = time.monotonic()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def __enter__(self) -> "StderrProgress":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def line(self) -> str:
        """The state in one plain line."""
        raise NotImplementedError

    def terminal(self) -> None:
        """Draw on a terminal until ``self.done`` is set (default: :meth:`line` as a status)."""
        with err.status(self.line()) as status:
            while not self.done.wait(0.5):
                status.update(self.line())

    def _run(self) -> None:
        if self.done.wait(self.after):
            return
        if err.is_terminal:
            self.terminal()
            return
        while True:
            err.print(self.line(), markup=False)
            if self.done.wait(self.plain_every):
                return
