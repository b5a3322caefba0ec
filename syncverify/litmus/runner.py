"""Run a litmus test: explore its program and judge its final condition, herd7-style."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from syncverify.model.events import Execution
from syncverify.explore.driver import DEFAULT_MAX_EXECUTIONS, DEFAULT_MAX_STEPS, DEFAULT_PROGRESS_INTERVAL, Progress, explore
from syncverify.program import Program, TrueProp, evaluate


@dataclass
class LitmusVerdict:
    """herd7's ``Observation NAME Never|Sometimes|Always POS NEG`` plus whether it can hang.

    ``positive``/``negative`` count the consistent terminating executions that satisfy / do not
    satisfy the condition's proposition. ``validation`` is herd's Ok/No: ``exists`` holds if some
    execution satisfies it, ``~exists`` if none does, ``forall`` if all do. ``unknown`` names the
    limit hit (then counts are lower bounds and ``observation`` is ``"Unknown"``).
    """

    name: str
    quantifier: str
    observation: str
    positive: int
    negative: int
    can_hang: bool
    seconds: float
    validation: str
    executions: int
    candidates: int
    unknown: str | None = None
    unknown_detail: str = ""
    witness: Execution | None = field(default=None, repr=False)  # satisfies the proposition
    hang_witness: Execution | None = field(default=None, repr=False)
    hangs: list[dict] = field(default_factory=list)  # who waits forever, and on what (hang_reasons)
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict:
        """The ``--json`` object (issue contract keys first)."""
        return {
            "name": self.name,
            "quantifier": self.quantifier,
            "observation": self.observation,
            "positive": self.positive,
            "negative": self.negative,
            "can_hang": self.can_hang,
            "seconds": round(self.seconds, 4),
            "validation": self.validation,
            "executions": self.executions,
            "limit": self.unknown,
            "hangs": self.hangs,
            "warnings": list(self.warnings),
        }

    def line(self) -> str:
        """The herd7 observation line."""
        return f"Observation {self.name} {self.observation} {self.positive} {self.negative}"


MAX_HANG_REASONS = 20  # distinct (thread, what) pairs kept for --json


def hang_reasons(x: Execution) -> list[dict]:
    """Who waits forever in the hanging execution ``x``, and on what.

    A barrier: the thread, the barrier id, the count its phase waits for and how many arrived
    (the count can never be met). A spin: the locations and values its last iteration read, each
    the location's coherence-last value, so under any fair schedule it spins forever."""
    out = []
    for t, why in sorted(x.stuck.items()):
        name = x.thread_names[t]
        if why[0] == "mbarrier":  # a phase that never completes (syncverify.model.mbarrier)
            _tag, mbarrier, reason = why
            out.append({"thread": name, "on": "mbarrier", "mbarrier": mbarrier, "why": reason})
        elif why[0] == "barrier":
            _tag, _index, barrier_id, count, arrived = why
            out.append({"thread": name, "on": "barrier", "barrier": barrier_id, "count": count,
                        "arrived": arrived})
        else:
            out.append({"thread": name, "on": "spin",
                        "reads": [{"location": loc, "value": v} for loc, v in why[1]]})
    return out


def run_litmus(program: Program, *, max_executions: int = DEFAULT_MAX_EXECUTIONS,
               timeout: float | None = None, max_steps: int = DEFAULT_MAX_STEPS,
               progress: Callable[[Progress], None] | None = None,
               progress_interval: float = DEFAULT_PROGRESS_INTERVAL) -> LitmusVerdict:
    """Explore ``program`` and count the executions that satisfy its final condition.

    ``progress`` is handed to the explorer (:func:`~syncverify.explore.driver.explore`); a
    :class:`~syncverify.explore.bounds.LimitHit` it raises (a memory cap) makes the verdict Unknown."""
    condition = program.condition
    prop = condition.prop if condition is not None else TrueProp()
    quantifier = condition.quantifier if condition is not None else "exists"
    counts = {"pos": 0, "neg": 0}
    witnesses: dict[str, Execution] = {}

    hangs: dict[str, dict] = {}

    def judge(x: Execution) -> None:
        if not x.is_complete:
            witnesses.setdefault("hang", x)
            for reason in hang_reasons(x):
                if len(hangs) < MAX_HANG_REASONS:
                    hangs.setdefault(repr(sorted(reason.items())), reason)
            return
        if program.filter is not None and not evaluate(program.filter, x.final_registers, x.final_memory):
            return  # the litmus filter: not counted
        if evaluate(prop, x.final_registers, x.final_memory):
            counts["pos"] += 1
            witnesses.setdefault("pos", x)
        else:
            counts["neg"] += 1

    result = explore(program, max_executions=max_executions, timeout=timeout, max_steps=max_steps, on_execution=judge,
                     keep=False, progress=progress, progress_interval=progress_interval)
    pos, neg = counts["pos"], counts["neg"]
    if result.limit_hit:
        observation = "Unknown"
    elif pos == 0:
        observation = "Never"
    elif neg == 0:
        observation = "Always"
    else:
        observation = "Sometimes"
    holds = {"exists": pos > 0, "~exists": pos == 0, "forall": neg == 0}[quantifier]
    return LitmusVerdict(
        name=program.name, quantifier=quantifier, observation=observation, positive=pos, negative=neg,
        can_hang=result.can_hang, seconds=result.seconds, validation="Ok" if holds else "No",
        executions=result.complete_count, candidates=result.candidates, unknown=result.limit_hit,
        unknown_detail=result.limit_detail, witness=witnesses.get("pos"), hang_witness=witnesses.get("hang"),
        hangs=list(hangs.values()), warnings=program.warnings,
    )
