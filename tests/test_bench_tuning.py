"""Issue 28's CPU half: the per-shape tile tables (``bench --tiles``) and the model's fixes ranked by
measured cost (``check --suggest --cost``), on synthetic timings; the shipped tables are valid
configurations of the kernels they name."""

from __future__ import annotations

import json

import pytest
from syncverify.cli import cost as cost_module
from syncverify.cli import main
from syncverify.kernels.bench.report import BenchInputError, Case, Ceilings, Measurement
from syncverify.kernels.bench.tuning import (TILE_FORMAT, TILES_DIR, choose_tiles, load_tile_table, rank_fixes,
                                             ranking_lines, shipped_table, tuned_case)
from syncverify.kernels.build import build
from syncverify.kernels.config import check_config


def _row(block, what, protocol, us, validated="ok", kernel="all-reduce"):
    return dict(kernel=kernel, m=1024, n=1024, k=1024, block=block, stages=3, warps=8, group_m=8, split=(60, 6),
                what=what, protocol=protocol, time_us=us, validated=validated)


def test_the_chosen_tiles_are_the_fastest_safe_validated_configuration():
    big, small = (128, 256, 64), (64, 128, 64)
    rows = [_row(big, "cublas", "", 9.0), _row(big, "gemm-part", "", 12.0), _row(big, "fused", "none", 14.0),
            _row(big, "fused", "a", 16.0), _row(big, "fused", "b", 15.0),
            # faster, but one safe protocol computed a wrong result: not a candidate
            _row(small, "fused", "none", 10.0), _row(small, "fused", "a", 11.0),
            _row(small, "fused", "b", 10.5, validated="relative error 1e0")]
    table = choose_tiles(rows, machine="m", safe=("a", "b"))
    entry, = table["entries"]
    assert table["format"] == TILE_FORMAT and entry["block"] == list(big) and entry["cheapest_safe"] == "b"
    assert entry["gemm_part_of_cublas_pct"] == 75.0 and entry["overhead_pct"] == pytest.approx(7.14, abs=0.01)


def test_a_tile_table_configures_a_case_and_refuses_a_shape_it_does_not_have(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(choose_tiles([_row((64, 128, 64), "fused", p, 10.0) for p in ("none", "a")],
                                            machine="m", safe=("a",))))
    table = load_tile_table(path)
    assert tuned_case(Case(m=1024, n=1024, k=1024), table).block == (64, 128, 64)
    with pytest.raises(BenchInputError, match="no entry for all-reduce 2048x1024x1024 .*has 1024x1024x1024"):
        tuned_case(Case(m=2048, n=1024, k=1024), table)
    path.write_text('{"format": "x"}')
    with pytest.raises(BenchInputError, match="not a syncverify tile table"):
        load_tile_table(path)
    with pytest.raises(BenchInputError, match="no tile table is shipped for 'no-such-gpu'"):
        shipped_table("no-such-gpu")


@pytest.mark.parametrize("path", sorted(TILES_DIR.glob("*.json")), ids=lambda p: p.stem)
def test_every_shipped_tile_table_entry_builds(path):
    """A shipped entry is a configuration the kernel accepts on that machine (sizes divide the
    tiles, the grid fits 132 SMs, descriptor boxes within bounds), with a safe built-in named."""
    table = load_tile_table(path)
    assert table["machine"] == path.stem and table["entries"]
    for entry in table["entries"]:
        m, n, k = (int(x) for x in entry["shape"].split("x"))
        case = tuned_case(Case(kernel=entry["kernel"], m=m, n=n, k=k), table)
        check_config(case.kernel_config(world_size=2), sms=132)
        assert entry["cheapest_safe"] in entry["safe_us"]


def test_fixes_rank_by_measured_time_and_a_wrong_result_goes_last():
    rows = [dict(what="fused", protocol="none", time_us=100.0, overhead_pct=None, validated="not validated"),
            dict(what="fused", protocol="fix1", time_us=101.0, overhead_pct=1.0, validated="relative error 1e0"),
            dict(what="fused", protocol="fix2", time_us=109.0, overhead_pct=9.0, validated="ok"),
            dict(what="fused", protocol="fix3", time_us=104.0, overhead_pct=4.0, validated="ok"),
            dict(what="fused", protocol="epoch-flag", time_us=106.0, overhead_pct=6.0, validated="ok")]
    ranked = rank_fixes(rows, {"fix1": "x", "fix2": "y", "fix3": "z"}, references=("epoch-flag",))
    assert [f.label for f in ranked] == ["fix3", "epoch-flag", "fix2", "fix1"]
    assert [f.model_order for f in ranked] == [3, None, 2, 1]
    lines = ranking_lines(ranked, none_us=100.0)
    assert lines[1] == "  1. fix3: 104.0 µs (+4.0% over none; model's #3): z" and "WRONG RESULT" in lines[4]
    with pytest.raises(BenchInputError, match="fix9 .* was not timed"):
        rank_fixes(rows, {"fix9": "?"})


def _fake_measure(times):
    """A stand-in for the GPU: each protocol label's time from ``times`` (the rest 100 µs)."""
    def measure(sweep, loaded):
        case = sweep.cases[0]
        rows = [Measurement(case, "cublas", 90e-6)]
        rows += [Measurement(case, "fused", times.get(label, 100.0) * 1e-6, protocol=label,
                             validated="not validated" if label == "none" else "ok") for label in loaded]
        return Ceilings("fake-gpu", 800.0, 4.0), rows
    return measure


def test_check_suggest_cost_ranks_the_models_fixes_by_the_measured_time(monkeypatch, capsys):
    """fenced-release-acquire's two fixes (a CTA barrier before signal step 1 or 2), timed on a
    fake GPU where the second is cheaper: the ranking puts it first, beside the safe built-ins."""
    monkeypatch.setattr(cost_module, "require_gpu", lambda: None)
    monkeypatch.setattr(cost_module, "measure_on_gpu", _fake_measure({"fix1": 130.0, "fix2": 103.0,
                                                                      "barrier-fenced-release-acquire": 107.0,
                                                                      "epoch-flag": 105.0}))
    assert main(["check", "fenced-release-acquire", "--suggest", "--cost", "--cost-shape", "1024x1024x1024"]) == 1
    lines = capsys.readouterr().out.splitlines()  # exit 1: the protocol is still unsafe
    start = next(i for i, line in enumerate(lines) if line.startswith("cost: timed on fake-gpu"))
    assert "all-reduce 1024x1024x1024" in lines[start]
    assert lines[start + 2].startswith("  1. fix2: 103.0 µs (+3.0% over none; model's #2): add a CTA barrier")
    assert lines[start + 3].startswith("  2. epoch-flag: 105.0 µs")
    assert lines[start + 5].startswith("  4. fix1: 130.0 µs")


@pytest.mark.parametrize("argv, message", [
    (["--cost"], "give --suggest --cost"),
    (["--suggest", "--cost", "--cost-shape", "8192x4608"], "--cost-shape '8192x4608': give MxNxK"),
    (["--suggest", "--cost"], "--cost times the fixes on a CUDA GPU and none is visible"),
])
def test_cost_options_that_cannot_be_used_are_one_line_and_exit_2(argv, message, capsys):
    assert main(["check", "fenced-release-acquire", *argv]) == 2
    captured = capsys.readouterr()
    assert message in captured.err + captured.out and "Traceback" not in captured.err


def _tiny_table(tmp_path, kernel="all-gather-gemm"):
    entry = {"kernel": kernel, "shape": "64x32x32", "block": [16, 16, 16], "stages": 1, "warps": 1,
             "group_m": 2, "split": [1, 3], "safe_us": {}, "cheapest_safe": ""}
    path = tmp_path / "tiles.json"
    path.write_text(json.dumps({"format": TILE_FORMAT, "machine": "nvidia-h200", "entries": [entry]}))
    return path


def test_bench_tiles_runs_each_case_at_the_tables_configuration(tmp_path, capsys):
    """In the interpreter (which runs a GPU's table at its own tiny sizes), the case takes the
    table's tile, stages, warps, order and split, and every synchronized build validates."""
    path = _tiny_table(tmp_path)
    assert main(["bench", "--interpret", "--kernel", "all-gather-gemm", "--m", "64", "--n", "32", "--k", "32",
                 "--protocol", "epoch-flag", "--tiles", str(path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    fused = [r for r in rows if r["what"] == "fused"]
    assert {(r["tile"], r["stages"], r["warps"], r["split"], r["group_m"]) for r in fused} == {("16x16x16", 1, 1, "1+3", 2)}
    assert [r["validated"] for r in fused if r["protocol"] == "epoch-flag"] == ["ok"]


def test_bench_tiles_refuses_a_shape_the_table_lacks_in_one_line(tmp_path, capsys):
    assert main(["bench", "--interpret", "--kernel", "all-gather-gemm", "--m", "128", "--n", "32", "--k", "32",
                 "--tiles", str(_tiny_table(tmp_path))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no entry for all-gather-gemm 128x32x32" in err[0]
