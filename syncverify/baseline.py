"""A baseline of accepted findings, as linters keep one: adopt syncverify in CI without it staying red.

``check --write-baseline FILE`` records the findings of a run; ``check --baseline FILE`` still
lists every finding, marks those in the file ``accepted``, and fails (exit 1) only on the others.
A finding is ``(protocol, scenario, kind)``: accepting a protocol's race in all-reduce accepts it at
every world size and epoch count (the same bug at another size is the same finding), not in
another scenario, and not another kind. The file is JSON, versioned like ``--json``::

    {"schema_version": 1, "findings": [{"protocol": "xchg-flag", "scenario": "all-reduce", "kind": "race"}]}
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from syncverify.errors import SyncVerifyError
from syncverify.inputs import read_input_file

__all__ = ["BASELINE_VERSION", "Finding", "findings_of", "read_baseline", "write_baseline"]

BASELINE_VERSION = 1
Finding = tuple[str, str, str]  # protocol, scenario, kind
_KEYS = ("protocol", "scenario", "kind")


class BaselineError(SyncVerifyError):
    """A baseline file that cannot be read or is not a baseline."""


def findings_of(result) -> list[Finding]:
    """The findings of a :class:`~syncverify.verdicts.check.CheckResult`, one per violation kind."""
    name, scenario = result.scenario.protocol.name, result.scenario.options.scenario
    return [(name, scenario, kind) for kind in result.violations]


def read_baseline(path: str | os.PathLike[str]) -> set[Finding]:
    """The accepted findings in ``path``; a file that is not a baseline raises one line."""
    data = read_input_file(path, "baseline file", BaselineError)
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise BaselineError(f"{path}: not a baseline file (not JSON: {error})") from None
    if not isinstance(doc, dict) or doc.get("schema_version") != BASELINE_VERSION or not isinstance(doc.get("findings"), list):
        raise BaselineError(f"{path}: not a baseline file (expected schema_version {BASELINE_VERSION} and a "
                            f"'findings' list; write one with --write-baseline)")
    found: set[Finding] = set()
    for n, item in enumerate(doc["findings"]):
        if not isinstance(item, dict) or not all(isinstance(item.get(k), str) for k in _KEYS):
            raise BaselineError(f"{path}: findings[{n}] needs the strings {', '.join(_KEYS)}")
        found.add((item["protocol"], item["scenario"], item["kind"]))
    return found


def write_baseline(path: str | os.PathLike[str], findings: list[Finding]) -> None:
    """Write ``findings`` (sorted, no duplicates) as a baseline file."""
    doc = {"schema_version": BASELINE_VERSION,
           "findings": [dict(zip(_KEYS, f)) for f in sorted(set(findings))]}
    Path(path).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
