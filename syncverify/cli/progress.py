"""Progress on stderr for long commands, from a background thread: one lifecycle for all of them.

Nothing for the first ``after`` seconds (a quick command stays quiet); then, on a terminal, a rich
display that the subclass draws (:meth:`StderrProgress.terminal`), and otherwise one plain line
(:meth:`StderrProgress.line`) every ``plain_every`` seconds, so logs and CI keep every line. The
command only hands over its latest state (``update``); the thread reads the clock itself, so the
elapsed time moves on even while nothing new is reported.
"""

from __future__ import annotations

import threading
import time

from syncverify.cli.app import err


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
