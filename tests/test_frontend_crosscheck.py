"""One program, checked two ways (issue 22, item 6): our own fused all-reduce kernel with a protocol
compiled in, run through the kernel front end (the real Triton code re-executed under the PTX
model, ``tests/frontend_kernels/crosscheck.py``), gets the same verdict and violation kinds as
``syncverify check`` of that protocol in the all-reduce scenario, at W = 2.

The kernels bound every wait with a poll budget; the front end would explore the timeout path,
which the protocol model treats as an unbounded spin. The cross-check runs them in their
unbounded-wait build (:func:`syncverify.kernels.steps.unbounded_waits`, interpreter only; the
compiled default keeps its PTX, ``tests/test_ptx_audit.py``).

The harness checks one tile, the program the protocol check builds; model threads per CTA as
the protocol check chooses them (2; one per warp for a barrier step that selects warps, FA3's
epilogues, whose kernel runs 8 warps).

Default suite: a slice of six protocols, one of each shape a lifting rule was found for (``SLICE``),
compared exactly. Under ``slow``, run with ``SYNCVERIFY_CROSSCHECK_FULL=1``: every built-in and zoo
protocol exactly, one tile against two, and at W = 3 the protocols that finished within a minute
in the last measurement (``W3``); the other three kernels: ``tests/test_frontend_crosscheck_scenarios.py``.
Disagreements are listed in ``DISAGREE`` (strict xfail), not papered over.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

import syncverify  # noqa: E402
from syncverify.kernels.errors import StressConfigError, UnsupportedStep  # noqa: E402
from syncverify.kernels.steps import unbounded_waits  # noqa: E402
from syncverify.protocols.registry import builtin_names, zoo_names  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent / "frontend_kernels"))
from crosscheck import all_reduce_harness, threads_per_cta  # noqa: E402
from crosscheck_scenarios import DECIDED, num_warps, scenario_config  # noqa: E402

WORLD = 2


def both_ways(protocol: str, timeout: float, *, world_size: int = WORLD, tiles: int = 1, **options) -> tuple[tuple, tuple]:
    """(safe, kinds) of the kernel through the front end, and of the protocol check."""
    options.setdefault("threads_per_cta", threads_per_cta(protocol))
    with unbounded_waits():
        kernel = syncverify.check_kernel(all_reduce_harness(protocol, tiles=tiles), world_size=world_size,
                                         timeout=timeout, **options)
    # the harness's tiles laid out over its one program per role, as its kernel loops over them
    layout = scenario_config("all-reduce", world_size, tiles=tiles, warps=num_warps(protocol)).model_layout()
    model = syncverify.check_protocol(protocol, scenario="all-reduce", world_size=world_size, **layout)
    assert kernel.limit_hit is None, f"{protocol}: the front end hit {kernel.limit_hit}: {kernel.limit_detail}"
    return (kernel.safe, sorted(kernel.violations)), (model.safe, sorted(model.violations))


# ----- the default suite's slice: one protocol of each shape the full run found a lifting rule for
# (each exact, one tile: 3-30 s each on the shared 2-core machine, ~65 s in all) -------------------

SLICE = (
    "fenced-release-acquire",  # UNSAFE race, unwritten-read: a fence orders only its own thread's stores
    "barrier-fenced-release-acquire",  # SAFE, a counter polled with the read-only CAS idiom
    "iris-462-sys-scope-release",  # SAFE, every rank's copy polled in turn through one helper line
    "add-counter-cas-reset",  # UNSAFE, a CAS poll that resets what it waits for
    "add-counter-skip-self",  # UNSAFE hang: the consumer never leaves its poll
    "fa3-epilogue-named-barrier",  # SAFE, warp-selected bar.arrive / bar.sync with a count (8 warps)
)


@pytest.mark.parametrize("protocol", SLICE)
def test_a_slice_of_protocols_in_our_all_reduce_kernel_gets_the_protocol_checks_verdict(protocol):
    kernel, model = both_ways(protocol, timeout=300)
    assert kernel == model


# ----- the exact comparisons of every protocol (SYNCVERIFY_CROSSCHECK_FULL=1; last full run in
# docs/frontend.md) -------------------------------------------------------------------------------

FULL = os.environ.get("SYNCVERIFY_CROSSCHECK_FULL") == "1"

#: Where the two sides disagree, found by the last full run (docs/frontend.md); strict: a fix shows.
#: Empty since the last run: the eight earlier disagreements were front-end lifting errors, each
#: fixed with a test that failed before it (tests/test_frontend_lift.py).
DISAGREE: dict[str, str] = {}


def _full(protocol: str):
    marks = [pytest.mark.slow]
    if not FULL:
        marks.append(pytest.mark.skip(reason="the full cross-check: set SYNCVERIFY_CROSSCHECK_FULL=1"))
    if protocol in DISAGREE:
        marks.append(pytest.mark.xfail(reason=DISAGREE[protocol], strict=True))
    return pytest.param(protocol, marks=marks)


@pytest.mark.parametrize("protocol", [_full(p) for p in builtin_names() + zoo_names()])
def test_every_protocol_in_our_all_reduce_kernel_gets_the_protocol_checks_verdict(protocol):
    try:
        kernel, model = both_ways(protocol, timeout=600)
    except (StressConfigError, UnsupportedStep) as error:  # the kernels do not run every protocol
        pytest.skip(f"the all-reduce kernel does not build {protocol}: {error}")
    assert kernel == model


@pytest.mark.parametrize("protocol", [_full(p) for p in ("fenced-release-acquire", "barrier-fenced-release-acquire")])
def test_two_tiles_give_the_verdict_of_one(protocol):
    """Two tiles in the harness's one CTA per role (the kernel's loop; the protocol check lays
    them out the same way, ``KernelConfig.model_layout``) give the verdict of one tile for these
    protocols, which reuse no CTA barrier across tiles (24 x 24 executions where one tile has 24)."""
    one, _ = both_ways(protocol, timeout=600)
    two, _ = both_ways(protocol, timeout=600, tiles=2)
    assert one == two


#: At W = 3, the protocols whose front-end check decided within 60 s (docs/frontend.md: on the shared
#: machine, and the two trtllm-14537 zoo protocols on the device run of 2026-12-02, where three tiles
#: decided within 60 s); the others hit that bound (a counter incremented by every rank, FA3's 8
#: model threads per CTA).
W3 = tuple(p for s, p in DECIDED[3] if s == "all-reduce")  # one list with the runner's --undecided


@pytest.mark.parametrize("protocol", [_full(p) for p in W3])
def test_at_three_ranks_our_all_reduce_kernel_gets_the_protocol_checks_verdict(protocol):
    kernel, model = both_ways(protocol, timeout=300, world_size=3)
    assert kernel == model
