"""The four built-in kernels launched as two kernels (issue 27): ``two-stream``, ``pdl`` and
``pdl-no-wait``, the model's ``--launches`` modes of the same names, from one table
(``syncverify.kernels.launch.split_launches``) that the stress runner issues on the GPU and the
cross-check harness gives the kernel front end.

* the table and the configuration's checks (one line each);
* the CPU path: each kernel in a split mode through Triton's interpreter leaves every tile right;
  two streams with the consumers issued first is a hang there (the interpreter runs a launch to
  its end before the next: capacity one, the residency hazard of the mode);
* the same definition checked by the model: the kernel through the front end and
  ``syncverify check --launches MODE`` agree, with every CTA resident and at one slot per GPU
  (two streams hang, PDL does not: a dependent is scheduled only once its primary triggered).

Default suite: a slice (about 40 s). With ``SYNCVERIFY_CROSSCHECK_FULL=1`` (``slow``): every
scenario in every split mode for the cross-check's slice of protocols.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

import syncverify  # noqa: E402
from syncverify.kernels.config import KernelConfig, check_config  # noqa: E402
from syncverify.kernels.errors import StressConfigError  # noqa: E402
from syncverify.kernels.launch import split_launches  # noqa: E402
from syncverify.kernels.steps import unbounded_waits  # noqa: E402
from syncverify.protocols.rules import SPLIT_LAUNCHES  # noqa: E402
from syncverify.stress.campaign import run_campaign  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent / "frontend_kernels"))
from crosscheck_scenarios import ALL_SCENARIOS, both_ways, scenario_harness  # noqa: E402

SAFE = "barrier-fenced-release-acquire"


# ----- the table and the checks --------------------------------------------------------------------

def test_each_split_mode_launches_the_producers_and_the_others_as_the_model_names_them():
    c = dict(kernel="all-scatter", world_size=2, gemm_sms=2, comm_sms=3, recv_sms=1)
    assert split_launches(KernelConfig(**c)) == [(12, 0, "current", False)]
    assert split_launches(KernelConfig(**c, launches="two-stream")) == [(4, 1, "first", False), (8, 2, "rest", False)]
    assert split_launches(KernelConfig(**c, launches="two-stream", order="consumers-first"))[0] == (8, 2, "rest", False)
    for mode in ("pdl", "pdl-no-wait"):  # the dependent after its primary, on one stream
        assert split_launches(KernelConfig(**c, launches=mode)) == [(4, 1, "current", False), (8, 2, "current", True)]
    assert KernelConfig(**c, launches="pdl").grids == (4, 8) and KernelConfig(**c).grids == (12,)


@pytest.mark.parametrize(("options", "words"), [
    (dict(launches="two-streams"), "--launches"),
    (dict(launches="pdl", order="consumers-first", interpret=True), "a PDL dependent comes after its primary"),
    (dict(launches="two-stream", order="last-rank-late", interpret=True), "--order=last-rank-late"),
    (dict(launches="two-stream", gemm_only=True), "--gemm-only has none"),
])
def test_a_split_mode_the_kernels_cannot_launch_is_one_line(options, words):
    with pytest.raises(StressConfigError, match=words) as caught:
        check_config(KernelConfig(m=256, n=256, k=256, **options))
    assert "\n" not in str(caught.value)


def test_two_streams_may_issue_the_consumers_first_on_the_gpu_too():
    """On the GPU ``order`` is otherwise an interpreter schedule; with two streams it is the host's
    issue order, a real choice (the seeds' all-reduce issues the communication kernel first)."""
    config = KernelConfig(m=256, n=256, k=256, launches="two-stream", order="consumers-first")
    assert check_config(config) is config
    with pytest.raises(StressConfigError, match="interpreter schedule"):
        check_config(KernelConfig(m=256, n=256, k=256, order="consumers-first"))


# ----- the CPU path ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("kernel", "launches"), [
    ("all-reduce", "two-stream"), ("all-scatter", "pdl"), ("all-gather-gemm", "pdl-no-wait"),
    ("gemm-reduce-scatter", "two-stream"),
])
def test_in_the_interpreter_each_kernel_split_in_two_leaves_every_tile_right(kernel, launches):
    result = run_campaign(interpret=True, kernel=kernel, protocol=SAFE, iterations=2, launches=launches,
                          delays="none", seed=0)
    assert result.clean and result.iterations == 2, result.first_failure


def test_in_the_interpreter_consumers_issued_first_on_their_own_stream_time_out():
    """The interpreter runs each launch to its end before the next (one slot): the consumers'
    launch, issued first, spins out its poll budget before any producer runs. Fused, the same
    layout is an interpreter schedule of one launch; split, it is the host's order."""
    result = run_campaign(interpret=True, kernel="all-reduce", protocol=SAFE, iterations=1, launches="two-stream",
                          order="consumers-first", delays="none", seed=0)
    assert result.counts["hang"] == 8 and result.bad_iterations == 1  # 2 ranks x 4 tiles


def test_stress_checks_the_model_in_the_launch_mode_it_runs(monkeypatch):
    """The verdict ``syncverify stress`` prints beside a campaign is the model's for the same
    launch mode (``fused``: ``host-barrier``)."""
    from syncverify.stress import report

    seen = []
    monkeypatch.setattr(report, "check_calls", lambda protocol, **kw: seen.append(kw["launches"]))
    for launches in ("fused", "two-stream", "pdl", "pdl-no-wait"):
        report.campaign_verdict(dict(protocol=SAFE, kernel="all-reduce", world_size=2, launches=launches))
    assert seen == ["host-barrier", "two-stream", "pdl", "pdl-no-wait"]


def test_stress_with_an_unknown_launch_mode_is_one_line_and_exit_2(capsys):
    from syncverify.cli import main

    assert main(["stress", "--protocol", SAFE, "--interpret", "--launches", "pdls"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--launches='pdls' is not one of" in err and "did you mean 'pdl'" in err and "\n" not in err


# ----- the same definition, checked by the model ----------------------------------------------------

@pytest.mark.parametrize(("launches", "resident", "safe"), [
    ("two-stream", None, True), ("two-stream", 1, False), ("two-stream", 2, True), ("pdl", 1, True),
])
def test_the_split_kernel_through_the_front_end_gets_the_models_verdict(launches, resident, safe):
    """All-reduce split in two at W = 2: with one slot per GPU, two streams can hang (a consumer
    holds the slot its producer needs); PDL cannot (a dependent is scheduled only once every
    primary program triggered). The kernel's launches come from ``split_launches``, the model's
    from ``--launches``."""
    with unbounded_waits():
        kernel = syncverify.check_kernel(scenario_harness("all-reduce", SAFE, tiles=1, launches=launches),
                                         world_size=2, timeout=300, resident=resident)
    model = syncverify.check_protocol(SAFE, scenario="all-reduce", world_size=2, launches=launches, resident=resident)
    assert kernel.safe is model.safe is safe, kernel.text()
    assert sorted(kernel.violations) == sorted(model.violations) == ([] if safe else ["hang"])


FULL = os.environ.get("SYNCVERIFY_CROSSCHECK_FULL") == "1"
FULL_PROTOCOLS = (SAFE, "fenced-release-acquire", "epoch-flag", "xchg-flag")


@pytest.mark.slow
@pytest.mark.skipif(not FULL, reason="every scenario in every split mode: SYNCVERIFY_CROSSCHECK_FULL=1")
@pytest.mark.parametrize("launches", SPLIT_LAUNCHES)
@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
@pytest.mark.parametrize("protocol", FULL_PROTOCOLS)
def test_every_scenario_split_in_two_gets_the_models_verdict(scenario, launches, protocol):
    case = both_ways(scenario, protocol, launches=launches, timeout=600)
    if case.skipped:
        pytest.skip(case.skipped)
    assert case.agree, (case.kernel, case.model, case.limit)
