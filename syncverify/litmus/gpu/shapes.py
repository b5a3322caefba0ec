"""The classic litmus shapes (MP, SB, LB, IRIW, CoRR, 2+2W) as litmus text, for ``--gpu`` runs.

Each shape is written once, with holes for the strength of its accesses; :func:`classic_tests`
fills them for each *flavour* and scope and places the threads in one CTA or in different CTAs
of one GPU. The text goes through the one litmus parser (:func:`syncverify.litmus.parser.parse_litmus`),
so the model and the kernel see exactly what a user's file would give them.

:func:`cross_gpu_tests` deals the same shapes' threads over two GPUs (``+diff-gpu``), for
``syncverify litmus --gpu`` on one process per GPU (:mod:`syncverify.litmus.gpu.ranks`).

Flavours: ``weak`` (plain ``.weak`` accesses), ``relaxed`` (``.relaxed.SCOPE``), ``relacq``
(release on the publishing store, acquire on the observing load, relaxed elsewhere) and ``fence``
(relaxed accesses with ``fence.sc.SCOPE`` between each thread's two accesses). Plus two barrier
shapes in one CTA: MP and SB ordered by ``bar.sync``.
"""

from __future__ import annotations

from dataclasses import dataclass

FLAVOURS = ("weak", "relaxed", "relacq", "fence")
SCOPE_NAMES = ("cta", "gpu", "sys")

# A shape: its threads (each a list of instructions with holes) and its condition.
# Holes: {W} a plain store, {L} a plain load, {REL} the publishing store, {ACQ} the observing load,
# {F} a fence line (empty unless the flavour is "fence").
SHAPES: dict[str, tuple[list[list[str]], str, str]] = {
    "MP": ([["st{W} x, 1", "{F}", "st{REL} y, 1"], ["ld{ACQ} r1, y", "{F}", "ld{L} r2, x"]],
           "exists (P1:r1 == 1 /\\ P1:r2 == 0)", "message passing: the flag seen, the data stale"),
    "SB": ([["st{W} x, 1", "{F}", "ld{ACQ} r1, y"], ["st{W} y, 1", "{F}", "ld{ACQ} r2, x"]],
           "exists (P0:r1 == 0 /\\ P1:r2 == 0)", "store buffering: both loads miss the other store"),
    "LB": ([["ld{ACQ} r1, x", "{F}", "st{REL} y, 1"], ["ld{ACQ} r2, y", "{F}", "st{REL} x, 1"]],
           "exists (P0:r1 == 1 /\\ P1:r2 == 1)", "load buffering: each load sees the other's later store"),
    "IRIW": ([["st{REL} x, 1"], ["st{REL} y, 1"], ["ld{ACQ} r1, x", "{F}", "ld{ACQ} r2, y"],
              ["ld{ACQ} r3, y", "{F}", "ld{ACQ} r4, x"]],
             "exists (P2:r1 == 1 /\\ P2:r2 == 0 /\\ P3:r3 == 1 /\\ P3:r4 == 0)",
             "independent reads of independent writes: the readers disagree on the order"),
    "CoRR": ([["st{REL} x, 1"], ["ld{ACQ} r1, x", "{F}", "ld{ACQ} r2, x"]],
             "exists (P1:r1 == 1 /\\ P1:r2 == 0)", "coherence of two reads: the second reads an older value"),
    "2+2W": ([["st{REL} x, 1", "{F}", "st{REL} y, 2"], ["st{REL} y, 1", "{F}", "st{REL} x, 2"]],
             "exists (x == 1 /\\ y == 1)", "two stores each: both first stores end last"),
    "CoWW": ([["st{REL} x, 1", "{F}", "st{REL} x, 2"], ["ld{ACQ} r1, x"]],
             "exists (x == 1)", "coherence of two writes: the first store ends last"),
    "CoRR2": ([["st{REL} x, 1"], ["st{REL} x, 2"], ["ld{ACQ} r1, x", "{F}", "ld{ACQ} r2, x"],
               ["ld{ACQ} r3, x", "{F}", "ld{ACQ} r4, x"]],
              "exists (P2:r1 == 1 /\\ P2:r2 == 2 /\\ P3:r3 == 2 /\\ P3:r4 == 1)",
              "coherence of two writers: two readers see them in opposite orders"),
}

#: The shapes of :func:`classic_tests` (one GPU).
CLASSIC_SHAPES = ("MP", "SB", "LB", "IRIW", "CoRR", "2+2W")
#: The shapes placed on two GPUs by :func:`cross_gpu_tests` (the classic ones and two coherence shapes).
CROSS_SHAPES = ("MP", "SB", "LB", "IRIW", "CoRR", "CoRR2", "2+2W", "CoWW")
#: The flavours of a cross-GPU test: weak, relaxed and release-acquire, each strong one at gpu
#: scope (too narrow across GPUs: the model allows what sys forbids) and at sys scope.
CROSS_FLAVOURS = ("weak", "relaxed", "relacq")


@dataclass(frozen=True)
class ShapeTest:
    """One generated test: its name and litmus text."""

    name: str
    text: str


def _fill(line: str, flavour: str, scope: str) -> str:
    strong = f".relaxed.{scope}"
    holes = {"W": ".weak" if flavour == "weak" else strong, "L": ".weak" if flavour == "weak" else strong,
             "REL": ".weak" if flavour == "weak" else (f".release.{scope}" if flavour == "relacq" else strong),
             "ACQ": ".weak" if flavour == "weak" else (f".acquire.{scope}" if flavour == "relacq" else strong),
             "F": f"fence.sc.{scope}" if flavour == "fence" else ""}
    return line.format(**holes)


def shape_test(shape: str, flavour: str, scope: str, *, same_cta: bool, gpus: int = 1) -> ShapeTest:
    """The litmus test of ``shape`` in ``flavour`` at ``scope``, threads in one CTA or one CTA each;
    with ``gpus`` > 1, thread ``i`` on GPU ``i % gpus`` (one CTA each: ``same_cta`` must be False)."""
    threads, condition, what = SHAPES[shape]
    code = [[_fill(line, flavour, scope) for line in thread] for thread in threads]
    code = [[line for line in thread if line] for thread in code]
    place = "same-cta" if same_cta else ("diff-cta" if gpus == 1 else "diff-gpu")
    name = f"{shape}+{flavour}" + ("" if flavour == "weak" else f"-{scope}") + f"+{place}"
    return ShapeTest(name, _table(name, what, code, condition, same_cta=same_cta, gpus=gpus))


def _table(name: str, what: str, code: list[list[str]], condition: str, *, same_cta: bool, gpus: int = 1) -> str:
    if same_cta and gpus > 1:
        raise ValueError(f"{name}: threads on {gpus} GPUs cannot share a CTA")
    heads = [f"P{i}@cta {0 if same_cta else i // gpus},gpu {i % gpus}" for i in range(len(code))]
    width = max(len(c) for c in heads + [line for thread in code for line in thread]) + 1
    rows = [" | ".join(h.ljust(width) for h in heads) + " ;"]
    for k in range(max(len(t) for t in code)):
        rows.append(" | ".join((t[k] if k < len(t) else "").ljust(width) for t in code) + " ;")
    return f'PTX {name}\n"{what}"\n{{\nx=0; y=0;\n}}\n' + "\n".join(rows) + f"\n{condition}\n"


def classic_tests() -> list[ShapeTest]:
    """Every shape: ``weak`` in one CTA and across CTAs; each other flavour at cta scope in one CTA,
    and at cta, gpu and sys scope across CTAs (cta scope across CTAs is too narrow on purpose)."""
    tests = []
    for shape in CLASSIC_SHAPES:
        tests.append(shape_test(shape, "weak", "gpu", same_cta=True))
        tests.append(shape_test(shape, "weak", "gpu", same_cta=False))
        for flavour in FLAVOURS[1:]:
            tests.append(shape_test(shape, flavour, "cta", same_cta=True))
            for scope in SCOPE_NAMES:
                tests.append(shape_test(shape, flavour, scope, same_cta=False))
    return tests + barrier_tests()


def cross_gpu_tests(*, gpus: int = 2) -> list[ShapeTest]:
    """Every shape of :data:`CROSS_SHAPES` with its threads dealt over ``gpus`` GPUs (thread ``i``
    on GPU ``i % gpus``, so each pair of threads that communicate is on two GPUs): ``weak``, and
    ``relaxed`` and ``relacq`` at gpu and sys scope."""
    tests = []
    for shape in CROSS_SHAPES:
        tests.append(shape_test(shape, "weak", "gpu", same_cta=False, gpus=gpus))
        for flavour in CROSS_FLAVOURS[1:]:
            for scope in ("gpu", "sys"):
                tests.append(shape_test(shape, flavour, scope, same_cta=False, gpus=gpus))
    return tests


def barrier_tests() -> list[ShapeTest]:
    """MP and SB in one CTA with ``bar.sync`` between the accesses (weak accesses)."""
    mp = ShapeTest("MP+bar.sync+same-cta", _table(
        "MP+bar.sync+same-cta", "message passing through a CTA barrier", [
            ["st.weak x, 1", "bar.sync 0", "st.weak y, 1"], ["bar.sync 0", "ld.weak r1, y", "ld.weak r2, x"]],
        "exists (P1:r2 == 0)", same_cta=True))
    sb = ShapeTest("SB+bar.sync+same-cta", _table(
        "SB+bar.sync+same-cta", "store buffering through a CTA barrier", [
            ["st.weak x, 1", "bar.sync 0", "ld.weak r1, y"], ["st.weak y, 1", "bar.sync 0", "ld.weak r2, x"]],
        "exists (P0:r1 == 0 \\/ P1:r2 == 0)", same_cta=True))
    return [mp, sb]
