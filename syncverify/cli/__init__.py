"""The ``syncverify`` command line: one module per subcommand, one entry point, ruff-style exit codes.

Results go to stdout; diagnostics (errors, progress) to stderr. Every bad input ends in one line
on stderr and exit code 2, never a traceback.

Options that write files (``check --graph``, ``litmus --graph``, ``stress --output``) are checked
before the run by :func:`syncverify.cli.output_files.check_writable` (a path that cannot be written is bad
input). Graphs are drawn after the verdict is printed; a drawing failure is one warning line on
stderr and the verdict's exit code stands (:func:`syncverify.cli.output_files.write_or_warn`).
"""

from __future__ import annotations

import signal
import sys
import threading

import typer

from syncverify import exitcodes
from syncverify.cli import bench, check, compare, listing, litmus, stress  # noqa: F401  (each registers its command)
from syncverify.cli.app import app, err, fail, out
from syncverify.errors import SyncVerifyError

__all__ = ["app", "err", "fail", "main", "out"]


INTERRUPTED = 130  # the shell's code for a command stopped by SIGINT


def _interruptible() -> None:
    """Let ``kill -INT`` stop any command: a command started in the background by a
    non-interactive shell inherits SIGINT *ignored*, and Python then leaves it ignored, so a long
    check or comparison could only be killed (leaving its workers behind)."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns (and exits with) the exit code."""
    _interruptible()
    try:
        code = app(args=argv, standalone_mode=False)
        code = code if isinstance(code, int) else exitcodes.OK
        if code == INTERRUPTED:  # typer turns Ctrl-C / kill -INT into Exit(130), returned here
            err.print("syncverify: interrupted", markup=False)
    except SyncVerifyError as error:
        err.print(f"syncverify: error: {error}", markup=False)
        code = exitcodes.INPUT_ERROR
    except typer.Abort:
        err.print("syncverify: interrupted", markup=False)
        code = INTERRUPTED
    except Exception as error:  # click's exceptions, whichever click typer carries
        if hasattr(error, "exit_code") and not hasattr(error, "format_message"):
            code = error.exit_code  # typer.Exit
        elif hasattr(error, "format_message"):  # UsageError and friends: one line, exit 2
            ctx = getattr(error, "ctx", None)
            name = ctx.command.name if ctx is not None and ctx.command is not None else ""
            where = f"syncverify {name} --help" if name and name != "syncverify" else "syncverify --help"
            err.print(f"syncverify: error: {error.format_message()} (see '{where}')", markup=False)
            code = exitcodes.INPUT_ERROR
        else:
            raise
    if argv is None:
        sys.exit(code)
    return code
