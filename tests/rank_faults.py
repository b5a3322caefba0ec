"""Workers for :func:`syncverify.kernels.processes.run_ranks` that fail on purpose (tests): a module
of its own so that spawned processes can import them by name."""

from __future__ import annotations

import os

from syncverify.stress.campaign import campaign_worker


class _DieAfter:
    """A queue for rank 1 that ends its process (exit code 3, no report) at its ``n``-th progress
    message, i.e. after ``n`` iterations; other messages pass."""

    def __init__(self, queue, n: int) -> None:
        self.queue, self.n = queue, n

    def put(self, message) -> None:
        if message[1] == "progress":
            self.n -= 1
            if self.n == 0:
                os._exit(3)
        self.queue.put(message)


def dies_after_first_iteration(rank, world_size, port, queue, campaigns, heap_path=None):
    """:func:`~syncverify.stress.campaign.campaign_worker`, but rank 1 dies once it has run one iteration."""
    campaign_worker(rank, world_size, port, _DieAfter(queue, 1) if rank == 1 else queue, campaigns, heap_path)
