"""The ``--json`` outputs' schema: one version number and the keys each command promises.

Every ``--json`` object carries ``schema_version`` (:data:`SCHEMA_VERSION`) and ``command``. A
change that removes or renames a key, or changes its type, raises the version; adding a key does
not. ``docs/json-schema.md`` documents each key; :data:`SCHEMAS` is the machine-readable part,
and :func:`problems` checks an output against it (the tests run it on real outputs, and check
that the document names every key listed here).
"""

from __future__ import annotations

__all__ = ["SCHEMA_VERSION", "SCHEMAS", "problems", "versioned"]

SCHEMA_VERSION = 1

_INT, _NUM, _STR, _BOOL, _LIST, _DICT, _NONE = int, (int, float), str, bool, list, dict, type(None)

#: command -> required key -> the types its value may have (``None`` where the value may be null).
SCHEMAS: dict[str, dict[str, tuple]] = {
    "check": {
        "schema_version": (_INT,), "command": (_STR,), "protocol": (_STR,), "scenario": (_STR,),
        "world_size": (_INT,), "tiles": (_INT,), "epochs": (_INT,), "threads_per_cta": (_INT,),
        "production": (_STR,), "distribution": (_STR,), "reset": (_STR,),
        "safe": (_BOOL, _NONE), "violations": (_LIST,), "executions": (_INT,), "seconds": _NUM,
        "limit": (_STR, _NONE), "sampled": (_INT, _NONE), "seed": (_INT, _NONE), "notes": (_LIST,),
        "push": (_STR, _NONE), "stages": (_LIST,), "assumptions": (_DICT,), "accepted": (_LIST,),
        "resident": (_INT, _NONE), "resident_order": (_STR, _NONE),
        "world_sizes": (_STR,),
    },
    "litmus": {  # one object per file, in a list
        "schema_version": (_INT,), "command": (_STR,), "file": (_STR,),
    },
    "list": {  # list --json has protocols, scenarios, roles, default_push; list --zoo --json has zoo
        "schema_version": (_INT,), "command": (_STR,),
    },
    "compare": {
        "schema_version": (_INT,), "command": (_STR,), "hardware": (_BOOL,), "note": (_STR, _NONE),
        "unsound": (_LIST,), "rows": (_LIST,),
    },
}

#: The keys of each violation in ``check``'s ``violations``.
VIOLATION_KEYS = ("kind", "explanation", "cause", "trace", "accepted")


def versioned(doc: dict, command: str) -> dict:
    """``doc`` with ``schema_version`` and ``command`` first."""
    return {"schema_version": SCHEMA_VERSION, "command": command, **doc}


def problems(doc: object, command: str) -> list[str]:
    """What in ``doc`` breaks the schema of ``command`` (empty: it conforms).

    >>> problems({"schema_version": 1, "command": "compare", "hardware": False, "note": None,
    ...           "unsound": [], "rows": []}, "compare")
    []
    >>> problems({"schema_version": "1"}, "compare")[:2]
    ["schema_version: expected int, got str '1'", 'command: missing']
    """
    if command == "litmus" and isinstance(doc, list):
        return [f"[{i}] {p}" for i, item in enumerate(doc) for p in problems(item, "litmus-file")]
    schema = SCHEMAS["litmus" if command == "litmus-file" else command]
    if not isinstance(doc, dict):
        return [f"expected an object, got {type(doc).__name__}"]
    found = []
    for key, types in schema.items():
        if key not in doc:
            found.append(f"{key}: missing")
        elif not isinstance(doc[key], types) or (isinstance(doc[key], bool) and bool not in types):
            names = "/".join(t.__name__ for t in types)
            found.append(f"{key}: expected {names}, got {type(doc[key]).__name__} {doc[key]!r}")
    if doc.get("schema_version") not in (None, SCHEMA_VERSION) and isinstance(doc.get("schema_version"), int):
        found.append(f"schema_version: {doc['schema_version']}, this is version {SCHEMA_VERSION}")
    if command == "check":
        for n, violation in enumerate(doc.get("violations") or []):
            missing = [k for k in VIOLATION_KEYS if k not in violation]
            if missing:
                found.append(f"violations[{n}]: missing {', '.join(missing)}")
    return found
