"""A scripted timer for the real-rank bench's CPU tests, in a module of its own: the spawned ranks
unpickle it by importing this module (a test module would drag pytest's collection along)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from syncverify.kernels.bench.timing import Timer


def scripted_seconds(slot: int, rank: int) -> tuple[float, float, float]:
    """``(median, min, max)`` the scripted timer reports for replay ``slot`` on ``rank``: slot
    ``s`` takes ``(s + 1) x (rank + 1)`` ms, spread 10 % either side, so the slowest rank is the
    last one and every row differs."""
    median = (slot + 1) * (rank + 1) * 1e-3
    return median, 0.9 * median, 1.1 * median


@dataclass
class ScriptedTimer(Timer):
    """Runs every replay once, each after :meth:`Timer._sync` (the barrier), so the collectives
    really run; reports :func:`scripted_seconds`. ``hang = (rank, call)``: that rank sleeps for
    an hour instead of timing its ``call``-th case (counting from 0): a hung collective."""

    hang: tuple[int, int] | None = None
    calls: int = 0

    def interleaved(self, replays):
        import torch.distributed as dist

        rank = dist.get_rank()
        if self.hang == (rank, self.calls):
            time.sleep(3600)
        self.calls += 1
        for replay in replays:
            self._sync()
            replay()
        return [scripted_seconds(slot, rank) for slot in range(len(replays))]
