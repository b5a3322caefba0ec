"""Cases run in worker processes within a time budget, a record as each ends (no torch here).

Shared by the cross-check runner (``crosscheck_scenarios``) and ``benchmarks/layout_verdicts.py``.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait


def run_pool(jobs: list, run: Callable, record: Callable, *, workers: int,
             pick: Callable[[list], object] = lambda queue: queue[0],
             over_budget: Callable[[object], bool] = lambda job: False) -> list:
    """Run ``run(job)`` for each of ``jobs`` in ``workers`` processes, ``record(job, result)`` as
    each ends; the next job is ``pick(queue)``, and a job that ``over_budget`` says could not end
    in time is not started. Returns the jobs not started. Processes are spawned, not forked (each
    imports its modules afresh: the Triton interpreter's patches are per process), one job per
    process, so memory does not pile up."""
    late = []
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), max_tasks_per_child=1) as pool:
        pending: dict = {}
        queue = list(jobs)
        while queue or pending:
            while queue and len(pending) < workers:
                job = pick(queue)
                queue.remove(job)
                if over_budget(job):
                    late.append(job)
                    continue
                pending[pool.submit(run, job)] = job
            if not pending:
                break
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                record(pending.pop(future), future.result())
    return late
