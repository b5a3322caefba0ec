"""The plain text tables the GPU session scripts print last (pipe-separated, padded columns)."""

from __future__ import annotations


def bad_tile_counts(counts: dict) -> str:
    """``class=count`` for each class with bad tiles, or ``none``."""
    return " ".join(f"{k}={v}" for k, v in sorted(counts.items()) if v) or "none"


def print_table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    """Print ``head`` and ``rows`` with every column padded to its widest cell."""
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    for row in [head] + rows:
        print(" | ".join(c.ljust(w) for c, w in zip(row, widths)))
