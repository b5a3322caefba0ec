"""``syncverify compare``: the model's verdicts beside the hardware's, and how they agree.

CPU only: the hardware half is replaced by synthetic campaign results (``monkeypatch`` on
``syncverify.compare.cuda_available`` and ``.stress_pair``); everything else is the real thing at
W = 2 with two or three protocols (epoch-flag is safe, xchg-flag is not).
"""

from __future__ import annotations

import doctest
import json

import pytest

import syncverify.compare as comparison
from syncverify.cli import main
from syncverify.compare import HardwareColumns, ModelColumns, Row, agreement, compare

SAFE, UNSAFE = "epoch-flag", "xchg-flag"
FAST = ["--scenario", "all-reduce", "--jobs", "1"]


def clean(iterations: int = 500) -> HardwareColumns:
    return HardwareColumns(iterations=iterations, seconds=1.0, device="fake")


def failed(iterations: int = 500, unwritten: int = 7) -> HardwareColumns:
    counts = {name: 0 for name in comparison.CLASS_NAMES}
    counts["unwritten"] = unwritten
    return HardwareColumns(iterations=iterations, bad_iterations=3, counts=counts, time_to_first_failure=0.25,
                           seconds=1.0, device="fake")


@pytest.fixture
def fake_gpu(monkeypatch):
    """A GPU whose campaigns fail for the protocols in ``failing`` and are clean otherwise."""
    failing: set[str] = set()
    calls: list[tuple] = []

    def stress_pair(protocol, scenario, world_size, *, seconds, progress=None, interpret=False):
        calls.append((protocol, scenario, world_size, seconds))
        if progress is not None:
            progress(100, seconds / 2)
        return failed() if protocol in failing else clean()

    monkeypatch.setattr(comparison, "cuda_available", lambda: True)
    monkeypatch.setattr(comparison, "stress_pair", stress_pair)
    return failing, calls


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(comparison, "cuda_available", lambda: False)


# --- the model columns --------------------------------------------------------------------------

def test_model_columns_of_a_safe_and_an_unsafe_protocol_in_all_four_scenarios():
    rows = compare([SAFE, UNSAFE], ["all"], [2], gpu=False, jobs=2)  # jobs=2: through worker processes
    four = ("all-reduce", "all-scatter", "all-gather-gemm", "gemm-reduce-scatter")
    assert [(r.protocol, r.scenario, r.world_size) for r in rows] == [
        (p, s, 2) for p in (SAFE, UNSAFE) for s in four]
    safe, unsafe = rows[0].model, rows[4].model
    assert safe.verdict == "safe" and safe.kinds == () and safe.executions > 0 and safe.seconds >= 0
    assert unsafe.verdict == "unsafe" and {"unwritten-read", "race"} <= set(unsafe.kinds)
    assert all(w.explanation and w.execution is not None for w in unsafe.witnesses.values())
    assert all(r.hardware is None and r.agreement is None for r in rows)


def test_no_protocol_named_means_every_builtin(no_gpu):
    from syncverify.protocols import builtin_names

    rows = compare([], ["all-reduce"], [2], gpu=False, jobs=1)
    assert [r.protocol for r in rows] == builtin_names()


def test_a_check_that_hits_its_timeout_is_unknown():
    model = comparison.model_columns(UNSAFE, "all-scatter", 2, 1e-9)
    assert model.verdict == "unknown" and model.limit == "timeout"


# --- agreement ----------------------------------------------------------------------------------

@pytest.mark.parametrize("verdict, hardware, expected", [
    ("safe", clean(), "agree"),
    ("unsafe", failed(), "agree"),
    ("unsafe", clean(1234), "latent (1,234 iterations)"),
    ("safe", failed(), "MODEL UNSOUND"),
    ("unknown", clean(), "unknown"),
    ("unknown", failed(), "unknown"),
    ("safe", None, None),
])
def test_agreement_of_each_verdict_and_hardware_result(verdict, hardware, expected):
    assert agreement(ModelColumns(verdict), hardware) == expected


def test_a_run_stopped_by_the_watchdog_counts_as_a_hardware_failure():
    stopped = HardwareColumns(iterations=10, stopped="watchdog: no report")
    assert agreement(ModelColumns("safe"), stopped) == "MODEL UNSOUND"


def test_hardware_runs_once_per_pair_sequentially_with_the_given_seconds(fake_gpu):
    _failing, calls = fake_gpu
    rows = compare([SAFE, UNSAFE], ["all-reduce"], [2], seconds=0.5, jobs=1)
    assert calls == [(SAFE, "all-reduce", 2, 0.5), (UNSAFE, "all-reduce", 2, 0.5)]
    assert [r.agreement for r in rows] == ["agree", "latent (500 iterations)"]


def test_hardware_failing_where_the_model_says_safe_is_model_unsound_and_exit_1(fake_gpu, capsys, tmp_path):
    fake_gpu[0].add(SAFE)
    code = main(["compare", SAFE, UNSAFE, *FAST, "--seconds", "0.5", "--out", str(tmp_path / "r")])
    captured = capsys.readouterr()
    assert code == 1
    assert "MODEL UNSOUND: epoch-flag / all-reduce / W=2" in captured.out
    assert "agreement" in captured.out and "latent (500 iterations)" in captured.out
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["hardware"] is True and report["unsound"] == ["epoch-flag / all-reduce / W=2"]
    assert report["rows"][0]["hardware"]["counts"]["unwritten"] == 7
    assert "**MODEL UNSOUND" in (tmp_path / "r" / "report.md").read_text()
    assert (tmp_path / "r" / "bad-tiles.png").stat().st_size > 0


def test_nothing_unsound_exits_0_with_hardware_columns(fake_gpu, capsys):
    assert main(["compare", SAFE, *FAST]) == 0
    out = capsys.readouterr().out
    assert "agree" in out and "UNSOUND" not in out and "model columns only" not in out


def test_a_world_size_the_kernels_refuse_is_bad_input_on_a_gpu(fake_gpu, capsys):
    assert main(["compare", SAFE, *FAST, "--world-size", "9"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "syncverify: error: --world-size=9 must be in 1..8"
    assert fake_gpu[1] == []  # refused before anything ran


# --- the command line ---------------------------------------------------------------------------

def test_without_a_gpu_one_line_says_so_and_only_the_model_columns_show(no_gpu, capsys):
    assert main(["compare", SAFE, UNSAFE, *FAST]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "no GPU: model columns only"
    assert "SAFE" in out and "UNSAFE" in out and "unwritten-read" in out
    assert "agreement" not in out and "iterations" not in out


def test_no_gpu_flag_says_so(capsys):
    assert main(["compare", SAFE, *FAST, "--no-gpu"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "--no-gpu: model columns only"


def test_json_prints_report_json(no_gpu, capsys, tmp_path):
    assert main(["compare", SAFE, UNSAFE, *FAST, "--json", "--world-size", "2", "--world-size", "3"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["hardware"] is False and report["note"] == "no GPU: model columns only"
    assert [(r["protocol"], r["world_size"]) for r in report["rows"]] == [(SAFE, 2), (SAFE, 3), (UNSAFE, 2), (UNSAFE, 3)]
    unsafe = report["rows"][2]["model"]
    assert unsafe["verdict"] == "unsafe" and unsafe["safe"] is False
    assert {v["kind"] for v in unsafe["violations"]} == set(unsafe["kinds"])
    assert all(v["explanation"] for v in unsafe["violations"])


def test_out_writes_the_report_the_chart_and_one_graph_per_violation(capsys, tmp_path):
    out_dir = tmp_path / "report"
    assert main(["compare", SAFE, UNSAFE, "--scenario", "all-reduce", "--no-gpu", "--out", str(out_dir)]) == 0
    names = {p.name for p in out_dir.iterdir()}
    assert names == {"report.md", "report.json", "bad-tiles.png", "graphs"}
    report = json.loads((out_dir / "report.json").read_text())
    kinds = report["rows"][1]["model"]["kinds"]
    graphs = sorted(p.name for p in (out_dir / "graphs").iterdir())
    assert graphs == sorted(f"{UNSAFE}-all-reduce-2-{kind}.{ext}" for kind in kinds for ext in ("dot", "png"))
    assert all((out_dir / "graphs" / g).stat().st_size > 0 for g in graphs)
    assert report["rows"][1]["model"]["violations"][0]["graph"].startswith("graphs/")
    md = (out_dir / "report.md").read_text()
    assert "| protocol | scenario, W |" in md and "No hardware data" in md
    assert all(f"**{kind}**" in md for kind in kinds)
    assert (out_dir / "bad-tiles.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("args, phrase", [
    (["no-such-protocol"], "unknown protocol 'no-such-protocol'"),
    ([SAFE, "--seconds", "0"], "--seconds=0 must be positive"),
    ([SAFE, "--seconds", "-2"], "--seconds=-2 must be positive"),
    ([SAFE, "--world-size", "0"], "--world-size=0 must be in 1..64"),
    ([SAFE, "--scenario", "all-gather"], "--scenario='all-gather' is not one of"),
    ([SAFE, "--jobs", "0"], "--jobs=0 must be at least 1"),
])
def test_bad_input_is_one_line_and_exit_2(args, phrase, capsys):
    assert main(["compare", "--no-gpu", *args]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("syncverify: error: ") and phrase in lines[0]
    assert "Traceback" not in captured.err and captured.out == ""


def test_an_unwritable_out_is_refused_before_the_run(capsys, tmp_path, monkeypatch):
    ran = []
    monkeypatch.setattr(comparison, "compare", lambda *a, **k: ran.append(1) or [])
    (tmp_path / "a-file").write_text("x")
    for bad, phrase in [(tmp_path / "nope" / "r", "does not exist"), (tmp_path / "a-file", "is a file")]:
        assert main(["compare", SAFE, "--no-gpu", "--out", str(bad)]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"syncverify: error: --out {bad}: ") and phrase in lines[0]
    assert ran == []


def test_progress_shows_plain_lines_on_stderr_when_not_a_terminal(fake_gpu, capsys, monkeypatch):
    import time

    slow = comparison.stress_pair

    def slower(*args, **kwargs):
        time.sleep(0.2)
        return slow(*args, **kwargs)

    monkeypatch.setattr(comparison, "stress_pair", slower)
    assert main(["compare", SAFE, *FAST, "--progress-every", "0.05"]) == 0
    err = capsys.readouterr().err
    assert "compare: stress campaigns 0/1" in err


def test_the_module_examples_run():
    failures, _tried = doctest.testmod(comparison)
    assert failures == 0


def test_the_model_half_imports_no_torch():
    import subprocess
    import sys

    code = ("import sys, syncverify.compare as c, syncverify.cli.compare; "
            "c.compare(['epoch-flag'], ['all-reduce'], [2], gpu=False, jobs=1); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'triton')))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"


def test_rows_carry_their_labels_and_json():
    row = Row(SAFE, "all-scatter", 4, ModelColumns("safe", executions=3, seconds=0.1), clean())
    assert row.label == "epoch-flag / all-scatter / W=4"
    assert row.to_json()["hardware"]["clean"] is True and row.to_json()["agreement"] == "agree"


def test_the_campaign_options_run_for_real_in_the_interpreter():
    """stress_pair's options are the campaign's own (names, virtual ranks, random delays), and a
    real CampaignResult maps onto the hardware columns; the Triton interpreter stands in for the GPU."""
    pytest.importorskip("triton")
    from syncverify.stress.campaign import run_campaign

    options = comparison._campaign_options(UNSAFE, "all-reduce", 2, 1.0)
    assert options["virtual_ranks"] is True and options["delays"] == "random"
    comparison.check_stress_pair(UNSAFE, "all-reduce", 2, seconds=1.0)
    result = run_campaign(**{**options, "interpret": True, "iterations": 1, "seconds": None})
    hardware = HardwareColumns.from_campaign(result)
    assert hardware.iterations == 1 and set(hardware.counts) == set(comparison.CLASS_NAMES)
    assert agreement(ModelColumns("unsafe", ("race",)), hardware) in ("agree", "latent (1 iteration)")


# --- the model column covers the calls a campaign makes (issue 23, item 2) ----------------------

def test_the_model_column_checks_two_calls_as_the_campaign_beside_it_makes(fake_gpu, capsys, tmp_path):
    # A never-reset flag with a constant target: one call is safe, the second reads the first's 1.
    from tests.test_stress_cli import GENERATION_FLAG

    path = tmp_path / "generation-flag.toml"
    path.write_text(GENERATION_FLAG)
    fake_gpu[0].add(str(path))
    assert main(["compare", str(path), *FAST, "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["rows"][0]
    assert row["model"]["verdict"] == "unsafe" and row["model"]["calls"] == 2
    assert "stale-read" in row["model"]["kinds"] and row["agreement"] == "agree"


def test_model_unsound_names_the_calls_the_model_checked(fake_gpu, capsys):
    fake_gpu[0].add(SAFE)
    assert main(["compare", SAFE, *FAST]) == 1
    out = capsys.readouterr().out
    assert "SAFE (2 calls)" in out and "the model says safe (2 calls)" in out
