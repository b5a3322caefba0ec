"""The ``syncverify`` typer application and its two consoles (results on stdout, diagnostics on
stderr): what every subcommand module registers itself on."""

from __future__ import annotations

import typer
from rich.console import Console

from syncverify import exitcodes

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
