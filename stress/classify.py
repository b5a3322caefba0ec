"""Bad tiles as records: the device summary rows (``syncverify.stress.validate``) turned into plain data."""

from __future__ import annotations

import struct
from dataclasses import asdict, dataclass, field

from syncverify.stress.validate import CLASSES, FIELDS


def _float(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<i", int(bits)))[0]


@dataclass(frozen=True)
class BadTile:
    """One tile of one rank's C that came out wrong in one iteration, and why.

    ``rank`` is whose copy of C; ``tile`` indexes that copy's ``block_m x block_n`` tiles in
    row-major order; ``consumer`` / ``consumer_tile`` say which consumer program's wait produced
    it (for a hang: the lock value it saw last, ``seen``, at wait step ``step``).
    """

    iteration: int
    rank: int
    tile: int
    kind: str
    counts: dict = field(default_factory=dict)
    missing_ranks: tuple[int, ...] = ()
    first_bad: dict | None = None
    hang: dict | None = None
    consumer: int = 0
    consumer_tile: int = 0
    stale_ranks: tuple[int, ...] = ()  # all-reduce ``stale``: whose partial was the previous iteration's
    device_ns: int = 0  # the device clock when the tile was validated (0 in the interpreter)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["missing_ranks"] = list(self.missing_ranks)
        out["stale_ranks"] = list(self.stale_ranks)
        return out

    def describe(self) -> str:
        """One line for humans."""
        what = {
            "hang": lambda: (f"wait timed out (lock read {self.hang['seen']} at wait step "
                             f"{self.hang['step']}, {self.hang['polls']} polls)"),
            "missing-ranks": lambda: f"partials of rank(s) {list(self.missing_ranks)} missing",
            "stale": lambda: ("the previous iteration's value" + (
                f" (the partials of rank(s) {list(self.stale_ranks)})" if self.stale_ranks else "")),
        }.get(self.kind, lambda: self.kind)()
        where = f"iteration {self.iteration}, rank {self.rank}'s C, tile {self.tile}"
        if self.first_bad:
            fb = self.first_bad
            what += f"; element ({fb['row']}, {fb['col']}) expected {fb['expected']:g}, got {fb['got']:g}"
        return f"{where}: {what}"


def device_ns(lo: int, hi: int) -> int:
    """The 64-bit device clock from the two int32 halves of a summary row."""
    return ((int(hi) & 0xFFFFFFFF) << 32) | (int(lo) & 0xFFFFFFFF)


def bad_tiles(summary, *, iteration: int, n_cols: int, num_world: int) -> list[BadTile]:
    """Every non-ok row of one iteration's summary (``[ranks, tiles, NFIELDS]``, any array)."""
    rows = summary.tolist() if hasattr(summary, "tolist") else summary
    out = []
    for rank, per_rank in enumerate(rows):
        for tile, row in enumerate(per_rank):
            if row[0] == 0:
                continue
            f = dict(zip(FIELDS, row))
            first_bad = None
            if f["first_bad"] >= 0:
                first_bad = {
                    "row": f["first_bad"] // n_cols,
                    "col": f["first_bad"] % n_cols,
                    "expected": _float(f["expected_bits"]),
                    "got": _float(f["got_bits"]),
                }
            hang = None
            if f["hang"]:
                hang = {"seen": f["hang_value"], "step": f["hang_step"], "polls": f["hang_polls"]}
            ranks = tuple(r for r in range(num_world) if f["missing_mask"] >> r & 1)
            stale = CLASSES[f["class"]] == "stale"
            out.append(BadTile(
                iteration=iteration, rank=rank, tile=tile, kind=CLASSES[f["class"]],
                counts={"elements": f["n_bad"], "unwritten": f["n_unwritten"],
                        "stale": f["n_stale"], "missing-ranks": f["n_missing"],
                        "corrupt": f["n_corrupt"]},
                missing_ranks=() if stale else ranks, stale_ranks=ranks if stale else (),
                first_bad=first_bad, hang=hang,
                consumer=f["consumer_rank"], consumer_tile=f["consumer_tile"],
                device_ns=device_ns(f["time_lo"], f["time_hi"]),
            ))
    return out
