"""The ``syncverify`` command line: one module per subcommand, one entry point, ruff-style exit codes.

Results go to stdout; diagnostics (errors, progress) to stderr. Every bad input ends in one line
on stderr and exit code 2, never a traceback.

Options that write files (``check --graph``, ``litmus --graph``, ``stress --output``) are checked
before the run by :func:`syncverify.cli.paths.check_writable` (a path that cannot be written is bad
input). Graphs are drawn after the verdict is printed; a drawing failure is one warning line on
stderr and the verdict's exit code stands (:func:`syncverify.cli.paths.write_or_warn`).
"""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from syncverify import exitcodes
from syncverify.errors import SyncVerifyError

app = typer.Typer(
    name="syncverify",
    help="Verify and stress-test the synchronization protocols inside fused multi-GPU kernels.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

@app.callback()
def _root() -> None:
    """Verify and stress-test the synchronization protocols inside fused multi-GPU kernels.

    Exit codes: 0 clean, 1 violations found, 2 bad input, 3 unknown (a bound was hit).
    """


out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(message: str) -> "typer.Exit":
    """Print one diagnostic line and return the exit for bad input (``raise fail(...)``)."""
    err.print(f"syncverify: error: {message}", markup=False)
    return typer.Exit(exitcodes.INPUT_ERROR)


def _register() -> None:
    from syncverify.cli import bench, check, compare, listing, litmus, stress  # noqa: F401  (registers commands)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns (and exits with) the exit code."""
    _register()
    try:
        code = app(args=argv, standalone_mode=False)
        code = code if isinstance(code, int) else exitcodes.OK
    except SyncVerifyError as error:
        err.print(f"syncverify: error: {error}", markup=False)
        code = exitcodes.INPUT_ERROR
    except typer.Abort:
        err.print("syncverify: interrupted", markup=False)
        code = 130
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
