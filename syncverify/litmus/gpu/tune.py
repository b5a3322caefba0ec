"""A random search over stress parameters that maximises the mutation score (MC Mutants' tuning).

Each candidate runs every mutant for a short while; the best score wins, ties broken by the rate
of target outcomes (weak instances per instance). The search stops when its time budget is spent,
after finishing the candidate it is on (each candidate's run is itself bounded).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Callable

from syncverify.litmus.gpu.mutants import Mutant, MutationScore, mutation_score
from syncverify.litmus.gpu.stress import StressParams, sample


@dataclass
class TuneResult:
    """The best parameters found and every candidate tried."""

    best: StressParams
    best_score: MutationScore
    tried: list[tuple[StressParams, MutationScore]] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {"best": self.best.to_json(), "best_score": self.best_score.to_json(), "seconds": round(self.seconds, 2),
                "tried": [{"params": p.to_json(), "score": s.score, "weak_instances": s.weak_instances,
                           "instances": s.instances} for p, s in self.tried]}


def _key(score: MutationScore) -> tuple[float, float]:
    return (score.score, score.weak_instances / score.instances if score.instances else 0.0)


def search(mutants: list[Mutant], *, budget_seconds: float, seconds_each: float, start: list[StressParams] = (),
           seed: int = 0, progress: Callable[[str], None] | None = None,
           run: Callable | None = None) -> TuneResult:
    """Try every point of ``start`` (e.g. the shipped and default parameters), then random points
    of :data:`~syncverify.litmus.gpu.stress.SPACE` until ``budget_seconds`` have passed."""
    rng = random.Random(seed)
    began = time.perf_counter()
    tried: list[tuple[StressParams, MutationScore]] = []
    queue = list(start) or [StressParams()]
    while True:
        params = queue.pop(0) if queue else sample(rng)
        score = mutation_score(mutants, params, seconds_each=seconds_each, seed=seed + len(tried), run=run)
        tried.append((params, score))
        if progress is not None:
            progress(f"candidate {len(tried)}: score {score.killed}/{score.total}, "
                     f"{score.weak_instances} weak of {score.instances} instances")
        if not queue and time.perf_counter() - began >= budget_seconds:
            break
    best, best_score = max(tried, key=lambda ps: _key(ps[1]))
    return TuneResult(best, best_score, tried, time.perf_counter() - began)
