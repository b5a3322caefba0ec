"""``syncverify list``: the built-in protocols and the scenarios."""

from __future__ import annotations

import json

import typer
from rich.table import Table

from syncverify import exitcodes
from syncverify.json_schema import versioned
from syncverify.cli.app import app, out
from syncverify.protocols.registry import builtin_protocols, zoo_litmus, zoo_protocols
from syncverify.scenarios.build import DEFAULT_PUSH, ROLES, SCENARIOS, Dot, Stage


@app.command("list")
def list_command(as_json: bool = typer.Option(False, "--json", help="Print JSON."),
                 zoo: bool = typer.Option(False, "--zoo", help="List the zoo of reported bugs (protocols/zoo/): "
                                                               "source, what users saw, the model's verdict.")) -> int:
    """List the built-in protocols and the scenarios they can be checked in (--zoo: the reported bugs)."""
    if zoo:
        return _list_zoo(as_json)

    protocols = builtin_protocols()
    items = protocols.values() if isinstance(protocols, dict) else protocols
    if as_json:
        out.print(json.dumps(versioned({"protocols": [{"name": p.name, "summary": p.summary, "origin": p.origin}
                                                   for p in items],
                                        "scenarios": list(SCENARIOS),
                                        "roles": {s: [_role_json(r) for r in ROLES[s]] for s in SCENARIOS},
                                        "default_push": DEFAULT_PUSH}, "list"), indent=2), markup=False)
        return exitcodes.OK

    table = Table(title="built-in protocols")
    table.add_column("name", no_wrap=True)
    table.add_column("summary")
    for p in items:
        table.add_row(p.name, p.summary)
    out.print(table)
    roles = Table(title="scenarios: what each role's CTAs do for one tile, in order")
    roles.add_column("scenario", no_wrap=True)
    roles.add_column("role", no_wrap=True)
    roles.add_column("steps")
    for scenario in SCENARIOS:
        for role in ROLES[scenario]:
            roles.add_row(scenario, role.name, "; ".join(_step_text(step) for step in role.steps))
    out.print(roles)
    out.print(f"all-scatter's push stage runs the protocol given by --push (default: {DEFAULT_PUSH}, a built-in above)",
              markup=False)
    return exitcodes.OK


def _step_text(step) -> str:
    """One role step in words, e.g. ``wait (pub, protocol)`` or ``store out: each rank's copy``."""
    if isinstance(step, Stage):
        which = "the protocol" if step.protocol == "protocol" else "the push protocol"
        return f"{step.kind} ({step.stage or 'ready'} locks, {which})"
    if isinstance(step, Dot):
        return "gemm (tl.dot: bar.sync 0)"
    whose = "each rank's copy" if step.copies == "each" else "own copy"
    block = {"": "", "self": ", own column block", "each": ", every rank's column block"}[step.block]
    into = f" into {step.into}" if step.into else ""
    return f"{step.kind} {step.buffer}{into} ({whose}{block})"


def _role_json(role) -> dict:
    return {"name": role.name, "runs_on": role.runs_on, "steps": [_step_text(s) for s in role.steps]}


def _list_zoo(as_json: bool) -> int:
    """``list --zoo``: each zoo protocol with how it is checked, the verdict the model gives
    (pinned by ``tests/test_zoo.py``), what users saw and its source."""
    protocols = zoo_protocols()
    if as_json:
        out.print(json.dumps(versioned({"zoo": [{"name": p.name, "summary": p.summary, "origin": p.origin,
                                                 **p.zoo.to_dict()} for p in protocols]}, "list"), indent=2),
                  markup=False)
        return exitcodes.OK

    table = Table(title="zoo of reported bugs (syncverify check NAME --scenario S --epochs E --launches L)")
    for column in ("name", "checked in", "model verdict", "users saw"):
        table.add_column(column, no_wrap=column == "name")
    for p in protocols:
        z = p.zoo
        residency = "" if z.resident is None else f", --resident {z.resident} ({z.resident_order} order)"
        table.add_row(p.name, f"{z.scenario}, {z.epochs} epoch{'s' if z.epochs > 1 else ''}, {z.launches}{residency}",
                      z.expected, z.users_saw)
    out.print(table)
    # Sources below the table, one whole line each: a URL cut to fit a column cannot be opened.
    out.print("sources:", markup=False)
    for p in protocols:
        out.print(f"  {p.name}: {p.zoo.source}", markup=False)
    # Bugs the protocol language cannot state yet, kept as litmus tests (protocols/zoo/*.litmus).
    out.print("litmus entries (syncverify litmus protocols/zoo/NAME.litmus):", markup=False)
    for name, fields in zoo_litmus().items():
        out.print(f"  {name}: {fields.get('model_shows', '')} ({fields.get('source', '')})", markup=False)
    return exitcodes.OK
