"""Mutants of litmus tests, and the mutation score of a stress setting (MC Mutants' measure).

A *mutant* weakens one instruction of a test whose target outcome the model forbids, such that
the model allows the target for the mutant: a fence dropped, an acquire or release made relaxed,
a relaxed access made weak, or a scope narrowed to ``.cta``. The target is then a behaviour the
hardware *may* show; the fraction of mutants whose target the stress did show is the mutation
score (Levine et al., "MC Mutants", ASPLOS '23). It measures the stress, not the model: a mutant
that is never killed is a weak behaviour the stress could not bring out (or the hardware never
has).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterator

from syncverify.litmus.gpu.outcomes import ModelOutcomes, is_target, model_outcomes
from syncverify.litmus.gpu.shapes import classic_tests
from syncverify.litmus.gpu.suite import check_on_device
from syncverify.litmus.parser import parse_litmus
from syncverify.program import Atomic, Fence, Load, Program, Store, Thread

#: The classic tests whose mutants measure the stress (names from :mod:`~syncverify.litmus.gpu.shapes`).
MUTATION_BASES = ("MP+relacq-gpu+diff-cta", "MP+fence-gpu+diff-cta", "SB+fence-gpu+diff-cta",
                  "LB+relacq-gpu+diff-cta", "IRIW+fence-gpu+diff-cta", "CoRR+relaxed-gpu+diff-cta",
                  "2+2W+fence-gpu+diff-cta", "MP+relacq-cta+same-cta", "MP+bar.sync+same-cta")


@dataclass(frozen=True)
class Mutant:
    """A weakened test whose target the model allows (and forbids for ``original``)."""

    name: str
    original: str
    change: str  # what was weakened, e.g. "P1 line 7: ld.acquire.gpu -> ld.relaxed.gpu"
    program: Program
    model: ModelOutcomes


def _weakenings(ins) -> Iterator[tuple[object | None, str]]:
    """Each weaker form of one instruction (None: dropped), with a word on what changed."""
    if isinstance(ins, Fence):
        yield None, f"fence.{ins.kind}.{ins.scope} dropped"
    if isinstance(ins, (Load, Store)) and ins.sem in ("acquire", "release"):
        yield replace(ins, sem="relaxed"), f"{ins.sem}.{ins.scope} -> relaxed.{ins.scope}"
    if isinstance(ins, (Load, Store)) and ins.sem == "relaxed":
        yield replace(ins, sem="weak", scope=None), f"relaxed.{ins.scope} -> weak"
    if isinstance(ins, Atomic) and ins.sem != "relaxed":
        yield replace(ins, sem="relaxed"), f"atom {ins.sem} -> relaxed"
    scope = getattr(ins, "scope", None)
    if scope in ("gpu", "sys") and not (isinstance(ins, (Load, Store)) and ins.sem == "weak"):
        yield replace(ins, scope="cta"), f".{scope} -> .cta"


def mutants_of(program: Program, *, model: ModelOutcomes | None = None) -> list[Mutant]:
    """The mutants of ``program`` (empty if the model already allows its target)."""
    model = model or model_outcomes(program)
    if any(is_target(program, model.items, o) for o in model.allowed):
        return []
    found = []
    for t, thread in enumerate(program.threads):
        for n, ins in enumerate(thread.instructions):
            for weaker, change in _weakenings(ins):
                code = list(thread.instructions)
                if weaker is None:
                    del code[n]
                else:
                    code[n] = weaker
                threads = list(program.threads)
                threads[t] = Thread(thread.name, thread.gpu, thread.cta, tuple(code), thread.role, thread.phase)
                where = f"{thread.name}" + (f" line {ins.line}" if getattr(ins, "line", None) else f" #{n}")
                name = f"{program.name}~{thread.name}.{n}:{change.split(' ')[0]}"
                mutant = replace(program, name=name, threads=tuple(threads))
                mutant_model = model_outcomes(mutant)
                if mutant_model.limit is None and any(is_target(mutant, mutant_model.items, o)
                                                      for o in mutant_model.allowed):
                    found.append(Mutant(name, program.name, f"{where}: {change}", mutant, mutant_model))
    return found


def default_mutants(*, per_base: int | None = 2) -> list[Mutant]:
    """The mutants of :data:`MUTATION_BASES`, at most ``per_base`` of each (None: all), taken
    spread over the test's threads so that one base does not dominate the score."""
    tests = {t.name: t for t in classic_tests()}
    chosen = []
    for base in MUTATION_BASES:
        found = mutants_of(parse_litmus(tests[base].text))
        if per_base is not None and len(found) > per_base:
            step = len(found) / per_base
            found = [found[int(k * step)] for k in range(per_base)]
        chosen.extend(found)
    return chosen


@dataclass(frozen=True)
class MutationScore:
    """How many mutants' targets a stress setting showed."""

    killed: int
    total: int
    weak_instances: int  # target outcomes seen over all mutants
    instances: int
    per_mutant: tuple[tuple[str, int, int], ...]  # (name, target instances, instances)

    @property
    def score(self) -> float:
        return self.killed / self.total if self.total else 0.0

    def to_json(self) -> dict:
        return {"score": round(self.score, 4), "killed": self.killed, "total": self.total,
                "weak_instances": self.weak_instances, "instances": self.instances,
                "per_mutant": [{"name": n, "weak": w, "instances": i} for n, w, i in self.per_mutant]}


def mutation_score(mutants: list[Mutant], params, *, seconds_each: float, iterations_each: int = 1 << 30,
                   seed: int = 0, run: Callable | None = None) -> MutationScore:
    """Run every mutant for ``seconds_each`` (or ``iterations_each`` launches) and count the kills.

    ``run`` replaces :func:`~syncverify.litmus.gpu.suite.check_on_device` (tests pass a fake)."""
    if run is None:
        run = check_on_device
    per, killed, weak_total, total = [], 0, 0, 0
    for n, m in enumerate(mutants):
        report = run(m.program, params, iterations=iterations_each, seconds=seconds_each, seed=seed + n, model=m.model)
        weak = report.target_seen
        per.append((m.name, weak, report.instances))
        killed += weak > 0
        weak_total += weak
        total += report.instances
    return MutationScore(killed, len(mutants), weak_total, total, tuple(per))
