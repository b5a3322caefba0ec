"""Honest replay: run a failure's exact iteration again, with its exact delays, and count.

A failure record names an iteration ``i`` (and the rank, tile and class of the bad tile). Its
delays are a function of ``(seed, site, rank, tile, i)`` and its inputs of the seed and the block
size, so running the same options again reproduces both exactly; the hardware's timing does not
come back with them. So a replay runs iterations ``0 .. i`` again (the ones before ``i`` leave the
locks and buffers as they were: counters that carry over, stale workspaces) ``times`` times and
reports how often iteration ``i`` failed the same way: ``reproduced k/N``, never "replayed".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from syncverify.stress.campaign import run_campaign


@dataclass
class ReplayResult:
    """How often one failure came back."""

    iteration: int
    rank: int | None
    tile: int | None
    kind: str | None
    runs: int = 0
    reproduced: int = 0  # the same (rank, tile, class) bad again at ``iteration``
    iteration_failed: int = 0  # any bad tile at ``iteration``
    details: list = field(default_factory=list)  # per run: the bad tiles at ``iteration``

    def line(self) -> str:
        what = f"{self.kind} at rank {self.rank}'s tile {self.tile}" if self.kind else "any bad tile"
        return (f"reproduced {self.reproduced}/{self.runs} (iteration {self.iteration}, {what}; iteration "
                f"{self.iteration} had some bad tile in {self.iteration_failed}/{self.runs})")

    def to_dict(self) -> dict:
        return dict(self.__dict__, summary=self.line())


def replay(options: dict[str, Any], *, iteration: int, rank: int | None = None, tile: int | None = None,
           kind: str | None = None, times: int = 10, progress=None) -> ReplayResult:
    """Run ``options`` (a campaign's, as ``CampaignResult.options`` holds them) for iterations
    ``0 .. iteration``, ``times`` times; count the runs whose iteration ``iteration`` has the bad
    tile ``(rank, tile, kind)`` (any bad tile when those are None)."""
    if times < 1:
        raise ValueError(f"replay times={times} must be at least 1")
    run = {k: v for k, v in options.items() if k not in ("iterations", "seconds", "output", "stop_on_failure")}
    run.update(iterations=iteration + 1, seconds=None, max_records=1 << 30)
    out = ReplayResult(iteration, rank, tile, kind)
    for _ in range(times):
        result = run_campaign(progress=progress, **run)
        there = [t for t in result.failures if t["iteration"] == iteration]
        out.runs += 1
        out.iteration_failed += bool(there)
        out.reproduced += any((rank is None or t["rank"] == rank) and (tile is None or t["tile"] == tile)
                              and (kind is None or t["kind"] == kind) for t in there)
        out.details.append([(t["rank"], t["tile"], t["kind"]) for t in there][:8])
    return out

