"""``syncverify compare --real-ranks`` (issue 30) on the CPU: every pair of a world size in one
launch of the real-rank stress path (:func:`syncverify.stress.campaign.run_campaigns_on_ranks`),
its checks before any launch, and its results joined to the model's rows.

The launch itself (``run_processes_batch``: one process per GPU, NCCL, symmetric memory) needs
GPUs; here a scripted launcher stands in for it, fed the very ``(CampaignOptions, protocol)``
pairs the real one would get. On two GPUs: ``benchmarks/x2_session.py``'s ``compare`` run."""

from __future__ import annotations

import pytest

import syncverify.compare as comparison
from syncverify.cli import main
from syncverify.errors import SyncVerifyError
from syncverify.stress import campaign
from syncverify.stress.campaign import CampaignResult

SAFE, UNSAFE = "epoch-flag", "xchg-flag"


@pytest.fixture
def ranks(monkeypatch):
    """A GPU host whose real-rank launches are scripted: UNSAFE fails, everything else is clean.
    Returns the launches: for each, the (protocol, kernel, world size, virtual) of its campaigns."""
    launches: list[list[tuple]] = []

    def launcher(campaigns, *, on_result=None):
        launches.append([(p.name, o.kernel, o.world_size, o.virtual_ranks) for o, p in campaigns])
        results = []
        for index, (o, protocol) in enumerate(campaigns):
            result = CampaignResult(protocol.name, o.kernel, o.world_size, "processes", "fake", iterations=640,
                                    seconds=o.seconds, options=o.to_dict())
            if protocol.name == UNSAFE:
                result.bad_iterations, result.counts = 3, {**result.counts, "unwritten": 5}
            if on_result is not None:
                on_result(index, result.to_dict())
            results.append(result)
        return results

    def on_ranks(campaigns, **kwargs):
        return campaign.run_campaigns_on_ranks(campaigns, runner=launcher, **kwargs)

    monkeypatch.setattr(comparison, "cuda_available", lambda: True)
    monkeypatch.setattr(comparison, "run_campaigns_on_ranks", on_ranks)
    monkeypatch.setattr(comparison, "stress_pair", lambda *a, **k: pytest.fail("virtual ranks used"))
    return launches


def test_every_pair_of_a_world_size_runs_in_one_launch_of_real_ranks(ranks):
    seen = []
    rows = comparison.compare([SAFE, UNSAFE], ["all-reduce", "all-scatter"], [2, 4], seconds=0.5, jobs=1,
                              real_ranks=True, progress=lambda *a: seen.append(a))
    assert [len(launch) for launch in ranks] == [4, 4]  # W = 2, then W = 4: one launch each
    assert [{world for _p, _k, world, _v in launch} for launch in ranks] == [{2}, {4}]
    assert all(not virtual for launch in ranks for *_x, virtual in launch)
    assert sorted(ranks[0]) == sorted((p, s, 2, False) for p in (SAFE, UNSAFE) for s in ("all-reduce", "all-scatter"))
    by_label = {r.label: r for r in rows}
    assert by_label["epoch-flag / all-scatter / W=4"].agreement == "agree"
    assert by_label["xchg-flag / all-reduce / W=2"].hardware.counts["unwritten"] == 5
    assert all(r.hardware.iterations == 640 and r.hardware.device == "fake" for r in rows)
    assert ("hardware", 8, 8, "done") == seen[-1]
    assert sum(1 for a in seen if a[0] == "hardware" and "on real ranks:" in a[3]) == 8


def test_the_cli_flag_reaches_the_real_ranks(ranks, capsys):
    assert main(["compare", SAFE, UNSAFE, "--scenario", "all-reduce", "--jobs", "1", "--real-ranks",
                 "--seconds", "0.5"]) == 0
    assert len(ranks) == 1 and "agree" in capsys.readouterr().out


def test_real_ranks_without_a_gpu_are_refused_in_one_line(monkeypatch, capsys):
    monkeypatch.setattr(comparison, "cuda_available", lambda: False)
    assert main(["compare", SAFE, "--scenario", "all-reduce", "--jobs", "1", "--real-ranks"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["syncverify: error: --real-ranks stresses on one process per GPU: no CUDA GPU is visible "
                   "to torch (or --no-gpu was given)"]


def test_a_bad_campaign_is_refused_before_any_launch():
    launched = []
    good = comparison._campaign_options(SAFE, "all-reduce", 2, 1.0, real_ranks=True)
    bad = comparison._campaign_options(SAFE, "all-reduce", 9, 1.0, real_ranks=True)
    with pytest.raises(SyncVerifyError):
        campaign.run_campaigns_on_ranks([good, bad], runner=lambda *a, **k: launched.append(a))
    assert launched == []


def test_without_a_runner_the_gpu_is_asked_for_before_any_process_starts():
    pytest.importorskip("torch")
    from syncverify.kernels._deps import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the refusal is for hosts without one")
    with pytest.raises(SyncVerifyError, match="needs a CUDA GPU and none is visible"):
        campaign.run_campaigns_on_ranks([comparison._campaign_options(SAFE, "all-reduce", 2, 1.0, real_ranks=True)])
