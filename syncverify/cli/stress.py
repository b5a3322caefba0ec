"""``syncverify stress``: mounts the on-GPU stress campaign command from ``syncverify.stress.cli``.

The model package imports neither torch nor triton: ``syncverify.stress.cli`` imports them lazily, inside
the command, so ``syncverify litmus``/``check`` work on machines without them.
"""

from __future__ import annotations

from syncverify.cli import app

try:
    from syncverify.stress.cli import stress_command
except ImportError as error:  # pragma: no cover - stress/ ships with the package
    stress_command = None
    _IMPORT_ERROR = error

if stress_command is not None:
    app.command("stress")(stress_command)
