"""Lock protocols defined once, as data: the schema (``schema``) and the built-ins (``registry``).

The file format is documented in ``docs/protocols.md``.
"""

from syncverify.protocols.registry import builtin_names, builtin_protocols, load_protocol
from syncverify.protocols.schema import (
    Expr,
    Protocol,
    Step,
    TileLoad,
    TileStore,
    Until,
    parse_expr,
    parse_protocol,
    parse_until,
    protocol_from_dict,
)

__all__ = [
    "Expr",
    "Protocol",
    "Step",
    "TileLoad",
    "TileStore",
    "Until",
    "builtin_names",
    "builtin_protocols",
    "load_protocol",
    "parse_expr",
    "parse_protocol",
    "parse_until",
    "protocol_from_dict",
]
