"""The exhaustive exactness runner (``benchmarks/exact_full.py``): its plan and its refusals."""

from __future__ import annotations

from benchmarks import exact_full


def test_every_property_of_the_file_is_planned_including_the_cas_reset_split():
    names = exact_full.properties()
    assert "builder:calls" in names and "builder:cas-reset" in names and "tiles" in names
    assert "builder:resetting-polls" in names and "looped-tiles" in names
    shards = exact_full.plan(names, 20, 4)
    for name in names:
        assert sum(s["examples"] for s in shards if s["property"] == name) == 20


def test_shards_sized_by_measured_cost_run_costliest_first_and_keep_the_count():
    names = ["tiles", "pruning:barrier-orders", "builder:cas-reset"]
    shards = exact_full.plan(names, 20, 4, shard_s=120)
    costs = [s["cost"] for s in shards]
    assert costs == sorted(costs, reverse=True)
    tiles = [s for s in shards if s["property"] == "tiles"]
    assert {s["examples"] for s in tiles} == {1}  # one tiles comparison is about 117 s
    assert {s["examples"] for s in shards if s["property"] == "pruning:barrier-orders"} == {13, 7}
    for name in names:
        assert sum(s["examples"] for s in shards if s["property"] == name) == 20
    assert len({s["seed"] for s in shards}) == len(shards)


def test_bad_sizes_are_refused_in_one_line(capsys):
    assert exact_full.main(["--check-s", "30", "--bound", "60"]) == 2
    assert exact_full.main(["--shard-s", "-1"]) == 2
    assert exact_full.main(["--only", "builder:nope", "--out", "/tmp/exact-full-test", "--wheels", ""]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3 and all(line.startswith("exact_full: ") for line in lines)
