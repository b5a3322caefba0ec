"""Lock protocols defined once, as data.

The package's public names are re-exported here; the modules behind them are

* ``expressions``: integer expressions in ``world_size`` and ``epoch`` (:class:`Expr`) and
  ``until`` conditions (:class:`Until`), parsed under a whitelist;
* ``model``: the dataclasses :class:`Protocol`, :class:`Step`, :class:`TileStore`,
  :class:`TileLoad`;
* ``loader``: TOML text or a plain dict in, a validated :class:`Protocol` out, with one-line
  ``FILE:LINE`` errors;
* ``registry``: the built-ins shipped as ``protocols/*.toml``, and loading by name or path.

The file format is documented in ``docs/protocols.md``.
"""

from syncverify.protocols.registry import builtin_names, builtin_protocols, load_protocol
from syncverify.protocols.expressions import Expr, Until, parse_expr, parse_until
from syncverify.protocols.loader import parse_protocol, protocol_from_dict
from syncverify.protocols.model import Protocol, Step, TileLoad, TileStore

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
