"""The GPU session script's own plumbing (``benchmarks/stress_bench.py``), on the CPU: world
lists, the budget, the log's failure sample, and a dry run (``--dry-run``: every campaign once in
the interpreter) that ends in the summary table."""

from __future__ import annotations

import json

from benchmarks import stress_bench as bench


def test_worlds_take_a_time_per_world():
    assert bench._worlds("4:6,2", 3.0) == [(4, 6.0), (2, 3.0)]
    assert bench._worlds("2,4", 1.5) == [(2, 1.5), (4, 1.5)]


def test_the_bench_log_keeps_the_first_records_of_every_class():
    records = [{"kind": k, "i": i} for i, k in enumerate(["unwritten"] * 9 + ["hang", "unwritten", "hang"])]
    assert [(r["kind"], r["i"]) for r in bench.failure_sample(records, per_class=2)] == [
        ("unwritten", 0), ("unwritten", 1), ("hang", 9), ("hang", 11)]


def test_a_dry_run_of_the_overwrite_section_ends_in_the_table(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(bench, "OVERWRITE_RUNS", (
        ("owner-only", dict(world_size=4, production="owner-only")),
        ("no-delays", dict(world_size=3, delays="none")),
    ))
    assert bench.main(["--out", str(tmp_path), "--sections", "overwrite", "--dry-run"]) == 0
    out = capsys.readouterr().out
    table = out[out.index("section   label"):].splitlines()
    assert len(table) == 3
    assert table[1].split()[:5] == ["overwrite", "owner-only", "all-reduce", "xchg-flag", "4"]
    records = [json.loads(line) for line in (tmp_path / "bench.jsonl").read_text().splitlines()]
    assert [(r["section"], r["label"], r["options"]["production"]) for r in records] == [
        ("overwrite", "owner-only", "owner-only"), ("overwrite", "no-delays", "every-rank")]
    assert records[0]["counts"]["hang"] > 0  # nobody signals the owner's flag
    assert records[0]["options"]["delay_sites"] == "all" and records[1]["options"]["delays"] == "none"


def test_no_campaign_starts_once_the_budget_is_spent(tmp_path, capsys):
    assert bench.main(["--out", str(tmp_path), "--sections", "racing", "--dry-run",
                       "--budget-seconds", "0"]) == 0
    out = capsys.readouterr().out
    assert out.count("skipped (--budget-seconds=0 spent)") == 3 * 2 * len(bench.RACING_VARIANTS)
    assert not (tmp_path / "bench.jsonl").exists()


def test_a_section_that_crashes_makes_the_bench_exit_1(tmp_path, capsys, monkeypatch):
    def crash(args, rows):
        raise RuntimeError("a broken section")

    monkeypatch.setitem(bench.SECTIONS, "overwrite", crash)
    assert bench.main(["--out", str(tmp_path), "--sections", "overwrite", "--dry-run"]) == 1
    out = capsys.readouterr().out
    assert "section overwrite FAILED" in out and "RuntimeError: a broken section" in out
    assert out.rstrip().endswith("FAILED: section overwrite (exit 1)")


def test_a_dry_run_of_the_guided_section_logs_the_model_verdict_and_the_schedule(tmp_path, capsys, monkeypatch):
    import syncverify.protocols

    monkeypatch.setattr(syncverify.protocols, "builtin_names", lambda: ["fenced-release-acquire"])
    assert bench.main(["--out", str(tmp_path), "--sections", "guided", "--dry-run", "--worlds", "2"]) == 0
    records = [json.loads(line) for line in (tmp_path / "bench.jsonl").read_text().splitlines()]
    assert [(r["kernel"], r["model_safe"]) for r in records] == [("all-reduce", False), ("all-scatter", False)]
    entries = records[0]["plan"]["schedules"][0]["entries"]
    assert entries and entries[0]["site"] == "before-store"  # the producer's warps late: no CTA barrier
    assert {row["kind"] for row in records[0]["rows"]} == {"unwritten-read", "race"}
    assert "guided W=2 all-reduce  fenced-release-acquire" in capsys.readouterr().out
