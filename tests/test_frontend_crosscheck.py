"""One program, checked two ways (issue 22, item 6): our own fused all-reduce kernel with a protocol
compiled in, run through the kernel front end (the real Triton code re-executed under the PTX
model, ``tests/frontend_kernels/crosscheck.py``), gets the same verdict and violation kinds as
``syncverify check`` of that protocol in the all-reduce scenario, at W = 2.

The kernels bound every wait with a poll budget; the front end would explore the timeout path,
which the protocol model treats as an unbounded spin. The cross-check runs them in their
unbounded-wait build (:func:`syncverify.kernels.steps.unbounded_waits`, interpreter only; the
compiled default keeps its PTX, ``tests/test_ptx_audit.py``).

Default suite: ``fenced-release-acquire`` (UNSAFE, stopped at its first violation) and
``barrier-fenced-release-acquire`` (SAFE, one model thread per CTA). Under ``slow``, run with
``SYNCVERIFY_CROSSCHECK_FULL=1``: every built-in and zoo protocol exactly, two model threads per
CTA (all-reduce only so far: the all-scatter, reduce-scatter and all-gather kernels have no
harness yet). Disagreements are listed in ``DISAGREE`` (strict xfail), not papered over.
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
from crosscheck import all_reduce_harness  # noqa: E402

WORLD = 2


def both_ways(protocol: str, timeout: float, **options) -> tuple[tuple, tuple]:
    """(safe, kinds) of the kernel through the front end, and of the protocol check."""
    with unbounded_waits():
        kernel = syncverify.check_kernel(all_reduce_harness(protocol), world_size=WORLD, timeout=timeout, **options)
    model = syncverify.check_protocol(protocol, scenario="all-reduce", world_size=WORLD)
    assert kernel.limit_hit is None, f"{protocol}: the front end hit {kernel.limit_hit}: {kernel.limit_detail}"
    return (kernel.safe, sorted(kernel.violations)), (model.safe, sorted(model.violations))


# ----- the default suite's slice (the front end explores ~576 executions where the protocol check,
# with its symmetry reductions, explores 4: the exact comparisons take ~70 s each, under slow) ------

def test_the_fenced_protocol_without_a_cta_barrier_is_unsafe_in_our_kernel_too():
    """Two model threads per CTA (the fence orders only its own thread's tile stores); stopped at
    the first violation: its kind is one the protocol check reports."""
    kernel, model = both_ways("fenced-release-acquire", timeout=120, first=True)
    assert model == (False, ["race", "unwritten-read"])
    assert kernel[0] is False and set(kernel[1]) <= set(model[1]) and kernel[1]


def test_the_barrier_fenced_protocol_is_safe_in_our_kernel_too_with_one_thread_per_cta():
    kernel, model = both_ways("barrier-fenced-release-acquire", timeout=120, threads_per_cta=1)
    assert kernel == model == (True, [])


# ----- the exact comparisons (SYNCVERIFY_CROSSCHECK_FULL=1: ~15 min on a 2-core machine, too long
# for CI's budget; last full run in docs/frontend.md) -----------------------------------------------

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
