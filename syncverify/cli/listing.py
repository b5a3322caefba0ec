"""``syncverify list``: the built-in protocols and the scenarios."""

from __future__ import annotations

import json

import typer

from syncverify import exitcodes
from syncverify.cli import app, out


@app.command("list")
def list_command(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> int:
    """List the built-in protocols and the scenarios they can be checked in."""
    from syncverify.protocols.registry import builtin_protocols
    from syncverify.scenarios import SCENARIOS

    protocols = builtin_protocols()
    items = protocols.values() if isinstance(protocols, dict) else protocols
    if as_json:
        out.print(json.dumps({"protocols": [{"name": p.name, "summary": p.summary, "origin": p.origin} for p in items],
                              "scenarios": list(SCENARIOS)}, indent=2), markup=False)
        return exitcodes.OK
    from rich.table import Table

    table = Table(title="built-in protocols")
    table.add_column("name", no_wrap=True)
    table.add_column("summary")
    for p in items:
        table.add_row(p.name, p.summary)
    out.print(table)
    out.print(f"scenarios: {', '.join(SCENARIOS)}", markup=False)
    return exitcodes.OK
