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
from syncverify.litmus.gpu.shapes import classic_tests, cross_gpu_tests
from syncverify.litmus.gpu.launch import interpreting
from syncverify.litmus.gpu.ranks import prepare, run_across_gpus
from syncverify.litmus.gpu.report import TestReport, judge
from syncverify.litmus.gpu.suite import check_on_device, visible_gpus
from syncverify.litmus.parser import parse_litmus
from syncverify.program import Atomic, Fence, Load, Program, Store, Thread

#: The classic tests whose mutants measure the stress (names from :mod:`~syncverify.litmus.gpu.shapes`).
MUTATION_BASES = ("MP+relacq-gpu+diff-cta", "MP+fence-gpu+diff-cta", "SB+fence-gpu+diff-cta",
                  "LB+relacq-gpu+diff-cta", "IRIW+fence-gpu+diff-cta", "CoRR+relaxed-gpu+diff-cta",
                  "2+2W+fence-gpu+diff-cta", "MP+relacq-cta+same-cta", "MP+bar.sync+same-cta")
#: The tests across two GPUs whose mutants measure the stress there (:func:`~syncverify.litmus.gpu.shapes.cross_gpu_tests`):
#: each forbids its target at sys scope; its mutants include sys -> gpu, too narrow across GPUs.
CROSS_MUTATION_BASES = ("MP+relacq-sys+diff-gpu", "CoRR+relaxed-sys+diff-gpu", "CoRR2+relaxed-sys+diff-gpu")


@dataclass(frozen=True)
class Mutant:
    """A weakened test whose target the model allows (and forbids for ``original``)."""

    name: str
    original: str
    change: str  # what was weakened, e.g. "P1 line 7: ld.acquire.gpu -> ld.relaxed.gpu"
    program: Program
    model: ModelOutcomes


def _weakenings(ins, *, cross_gpu: bool = False) -> Iterator[tuple[object | None, str]]:
    """Each weaker form of one instruction (None: dropped), with a word on what changed;
    ``cross_gpu`` (the test's threads are on several GPUs) adds sys -> gpu, the scope that is one
    step too narrow there."""
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
        if cross_gpu and scope == "sys":
            yield replace(ins, scope="gpu"), ".sys -> .gpu"
        yield replace(ins, scope="cta"), f".{scope} -> .cta"


def mutants_of(program: Program, *, model: ModelOutcomes | None = None) -> list[Mutant]:
    """The mutants of ``program`` (empty if the model already allows its target)."""
    model = model or model_outcomes(program)
    if any(is_target(program, model.items, o) for o in model.allowed):
        return []
    found = []
    cross_gpu = len({t.gpu for t in program.threads}) > 1
    for t, thread in enumerate(program.threads):
        for n, ins in enumerate(thread.instructions):
            for weaker, change in _weakenings(ins, cross_gpu=cross_gpu):
                code = list(thread.instructions)
                if weaker is None:
                    del code[n]
                else:
                    code[n] = weaker
                threads = list(program.threads)
                threads[t] = Thread(thread.name, thread.gpu, thread.cta, tuple(code), thread.role, thread.phase)
                where = f"{thread.name}" + (f" line {ins.line}" if getattr(ins, "line", None) else f" #{n}")
                words = change.split(" ")
                # across GPUs a scope has two weakenings (sys -> gpu, sys -> cta): name the target too
                tag = words[0] + (words[-1] if cross_gpu and change.startswith(".") else "")
                name = f"{program.name}~{thread.name}.{n}:{tag}"
                mutant = replace(program, name=name, threads=tuple(threads))
                mutant_model = model_outcomes(mutant)
                if mutant_model.limit is None and any(is_target(mutant, mutant_model.items, o)
                                                      for o in mutant_model.allowed):
                    found.append(Mutant(name, program.name, f"{where}: {change}", mutant, mutant_model))
    return found


def default_mutants(*, per_base: int | None = 2, cross_gpu: bool = False) -> list[Mutant]:
    """The mutants of :data:`MUTATION_BASES` (``cross_gpu``: the sys -> gpu mutants of
    :data:`CROSS_MUTATION_BASES`), at most ``per_base`` of each (None: all), taken spread over the test's threads so that one base
    does not dominate the score."""
    tests = {t.name: t for t in (cross_gpu_tests() if cross_gpu else classic_tests())}
    chosen = []
    for base in CROSS_MUTATION_BASES if cross_gpu else MUTATION_BASES:
        found = mutants_of(parse_litmus(tests[base].text))
        if cross_gpu:  # the weakening only two GPUs tell apart: sys scope narrowed to gpu
            found = [m for m in found if m.change.endswith(".sys -> .gpu")] or found
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
    reports = [run(m.program, params, iterations=iterations_each, seconds=seconds_each, seed=seed + n, model=m.model)
               for n, m in enumerate(mutants)]
    return _score(mutants, reports)


def _score(mutants: list[Mutant], reports: list[TestReport]) -> MutationScore:
    """The mutation score of each mutant's report (killed: its target seen at least once)."""
    per, killed, weak_total, total = [], 0, 0, 0
    for m, report in zip(mutants, reports):
        weak = report.target_seen
        per.append((m.name, weak, report.instances))
        killed += weak > 0
        weak_total += weak
        total += report.instances
    return MutationScore(killed, len(mutants), weak_total, total, tuple(per))


def scores_across_gpus(mutants: list[Mutant], candidates: list, *, seconds_each: float, seed: int = 0,
                       interpret: bool | None = None, gpus: int | None = None,
                       progress: Callable[[str], None] | None = None,
                       runner: Callable = run_across_gpus) -> tuple[list[MutationScore | None], str | None]:
    """The mutation score of every candidate stress setting on mutants across GPUs, all in ONE
    start of the rank processes (starting them costs seconds: NCCL, symmetric memory); a
    candidate the run stopped before finishing has None. Also returns why the run stopped.
    ``runner``: :func:`~syncverify.litmus.gpu.ranks.run_across_gpus`, or ``run_on_one_device``."""
    gpus = visible_gpus(interpreting() if interpret is None else interpret) if gpus is None else gpus
    jobs = [prepare(m.program, params, iterations=1 << 30, seconds=seconds_each, seed=seed + n, interpret=interpret,
                    gpus=gpus) for params in candidates for n, m in enumerate(mutants)]
    runs, why = runner(jobs, interpret=interpret, progress=progress)
    scores: list[MutationScore | None] = []
    for c in range(len(candidates)):
        chunk = runs[c * len(mutants):(c + 1) * len(mutants)]
        scores.append(None if any(r is None for r in chunk) else
                      _score(mutants, [judge(m.program, m.model, dict(r.counts)) for m, r in zip(mutants, chunk)]))
    return scores, why
