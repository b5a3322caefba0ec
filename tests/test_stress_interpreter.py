"""Both kernels through Triton's CPU interpreter (what CI runs): a safe protocol leaves no bad
tile; an unsafe one gives the classified result a sequential schedule makes certain.

The interpreter runs programs one at a time by program id (``syncverify.kernels.steps.program_role``
lays them out), and is sequentially consistent: what it can show is lost or missing signals
(a bounded wait times out: ``hang``), locks that were not reset (a consumer passes early:
``unwritten``/``stale``), and overwritten signals (``missing-ranks``). Each test says which.

The first tests use the ``syncverify_stress`` fixture, as a user's own tests would (the pytest
plugin, ``syncverify.pytest_plugin``); the module's marker runs them in the interpreter with or
without ``--syncverify-interpret``. The rest call ``run_campaign`` for the details they check.
"""

from __future__ import annotations

import json

import pytest

from syncverify.stress.campaign import run_campaign


pytestmark = pytest.mark.syncverify(interpret=True, delays="none", seed=0)


def campaign(**options):
    return run_campaign(interpret=True, **options)


def kinds_by_iteration(result):
    out: dict[int, set] = {}
    for tile in result.failures:
        out.setdefault(tile["iteration"], set()).add(tile["kind"])
    return out


@pytest.mark.parametrize("kernel, protocol", [
    ("all-reduce", "barrier-fenced-release-acquire"),
    # barrier-release-xchg-cas-acquire ran here once, clean in the interpreter, though the model
    # finds it unsafe in all-scatter (its acquire runs on one thread): assert_clean now refuses it
    ("all-scatter", "barrier-fenced-release-acquire"),
])
def test_a_safe_protocol_leaves_every_tile_right(syncverify_stress, kernel, protocol):
    result = syncverify_stress(kernel=kernel, protocol=protocol, iterations=2).assert_clean()
    assert result.iterations == 2 and result.counts == {k: 0 for k in result.counts}


def test_block_distribution_and_three_ranks_are_right_too():
    result = campaign(protocol="epoch-flag", world_size=3, distribution="block", iterations=2)
    assert result.clean, result.first_failure


@pytest.mark.syncverify(protocol="add-counter-skip-self", iterations=1)
def test_skip_self_is_a_hang_reported_with_the_count_it_saw(syncverify_stress):
    # Producers never add to their own rank's counter: it reaches world_size - 1 and stays there.
    result = syncverify_stress()
    assert result.counts["hang"] == 8 and result.bad_iterations == 1  # 2 ranks x 4 tiles
    assert {(t["hang"]["seen"], t["hang"]["step"]) for t in result.failures} == {(1, 1)}
    assert not result.clean
    with pytest.raises(AssertionError, match="tile 0: hang"):
        result.assert_clean()


def test_an_overwriting_xchg_loses_a_rank_missing_ranks_names_it():
    # Three ranks, the last rank's producers scheduled after every consumer: the flag already
    # reads 1 (rank 1's exchange overwrote rank 0's), so owner 0 sums without rank 2.
    result = campaign(protocol="xchg-flag", world_size=3, order="last-rank-late", iterations=1)
    missing = [t for t in result.failures if t["kind"] == "missing-ranks"]
    assert missing and {tuple(t["missing_ranks"]) for t in missing} == {(2,)}
    assert all(t["counts"]["missing-ranks"] == 256 for t in missing)


def test_owner_only_production_never_completes_a_count():
    result = campaign(protocol="barrier-fenced-release-acquire", production="owner-only", iterations=1)
    assert result.counts["hang"] == 8
    assert {t["hang"]["seen"] for t in result.failures} == {1}


def test_a_flag_left_set_lets_consumers_read_unwritten_partials():
    # reset none: epoch 1's consumers (scheduled first) see epoch 0's flags and read the zeroed
    # workspace: every element is the seed's C = 0.0.
    result = campaign(protocol="xchg-flag", reset="none", order="consumers-first", iterations=2)
    assert kinds_by_iteration(result) == {0: {"hang"}, 1: {"unwritten"}}
    unwritten = [t for t in result.failures if t["kind"] == "unwritten"]
    assert {t["first_bad"]["got"] for t in unwritten} == {0.0}


@pytest.mark.syncverify(protocol="add-counter", reset="host-racing", order="consumers-first",
                        poison="outputs", iterations=3)
def test_a_racing_host_reset_gives_stale_tiles_and_hangs(syncverify_stress):
    # The clear meant before epoch 1 lands after its kernel: epoch 1's consumers pass on epoch
    # 0's counts and read epoch 0's partials (kept: poison=outputs); epoch 2 starts cleared.
    result = syncverify_stress()
    assert kinds_by_iteration(result) == {0: {"hang"}, 1: {"stale"}, 2: {"hang"}}
    assert result.replay_command.endswith("--interpret --seed 0 --iterations 1 --delays none "
                                          "--reset host-racing --order consumers-first --poison outputs")


def test_all_scatter_stale_lock_pushes_the_previous_tile():
    # Epoch 1's comm programs pass on epoch 0's flags (never reset) and push epoch 0's tiles
    # (kept: poison=outputs). The push protocol zeroes its own counters between launches (its
    # own reset policy), so the receivers of epoch 1 wait for epoch 1's pushes only and copy the
    # stale tiles. (With the default push protocol, epoch-flag, epoch 0's missing pushes leave its
    # counters one epoch short: the receivers of epoch 1 would time out instead.)
    result = campaign(kernel="all-scatter", protocol="release-xchg-cas-acquire", reset="none",
                      order="consumers-first", poison="outputs", iterations=2,
                      push="barrier-fenced-release-acquire")
    assert kinds_by_iteration(result) == {0: {"hang"}, 1: {"stale"}}
    assert result.counts["stale"] == 16  # every tile of both ranks' received C: 2 x (2 blocks x 4 tiles)


def test_all_scatter_with_the_default_push_protocol_hangs_a_launch_after_a_missing_push():
    result = campaign(kernel="all-scatter", protocol="release-xchg-cas-acquire", reset="none",
                      order="consumers-first", poison="outputs", iterations=2)
    assert kinds_by_iteration(result) == {0: {"hang"}, 1: {"hang"}}


def test_partial_results_are_written_as_json_lines(tmp_path):
    path = tmp_path / "run.jsonl"
    # skip-self's counters are reset only by a consumer that saw world_size: after epoch 0 left
    # them at world_size - 1, epoch 1's single add completes them (a hang every other launch).
    result = campaign(protocol="add-counter-skip-self", iterations=2, output=str(path),
                      max_records=3)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    types = [r["type"] for r in records]
    assert types[0] == "start" and types[-1] == "result"
    assert types.count("progress") == 2 and types.count("bad-tile") == 3
    assert records[-1]["counts"]["hang"] == result.counts["hang"] == 8
    assert records[-1]["bad_iterations"] == 1
    assert records[-1]["first_failure"]["replay"] == "--seed 0 --iterations 1"


def test_a_racing_reset_goes_to_the_side_stream_before_the_launch_and_is_never_waited_for():
    # On a GPU the runner queues the clear on a SideStream (its own CUDA stream, after a delay)
    # and launches the kernel without waiting for it. A stand-in side stream that records and
    # never runs the clear shows the order, the delay drawn, and that nothing else clears.
    from syncverify.kernels.build import build
    from syncverify.kernels.heap import VirtualHeap
    from syncverify.protocols import load_protocol
    from syncverify.stress.campaign import campaign_options, delay_config, kernel_config
    from syncverify.stress.runner import Runner

    o = campaign_options(protocol="xchg-flag", interpret=True, reset="host-racing", delays="random",
                         delay_sites="before-reset", delay_pct=100, delay_max_ns=100_000, seed=3,
                         order="consumers-first")
    built = build(load_protocol("xchg-flag"), kernel_config(o))
    heap = VirtualHeap(o.world_size, "cpu")
    runner = Runner(built, heap, device="cpu", delays=delay_config(o), reset="host-racing",
                    poison="all", max_polls=o.max_polls, seed=o.seed, chunk=3)
    log = []

    class Side:
        def run(self, reset, sleep_ns):
            log.append(("reset", sleep_ns))

    launch = runner.launch
    runner.side = Side()
    runner.launch = lambda *a, **k: (log.append(("launch", k["epoch"])), launch(*a, **k))[1]
    for i in range(3):
        runner.iteration(i)
    d = delay_config(o)
    assert log == [("launch", 0), ("reset", d.ns("before-reset", 0, 0, 1)), ("launch", 1),
                   ("reset", d.ns("before-reset", 0, 0, 2)), ("launch", 2)]
    assert all(ns > 0 for kind, ns in log if kind == "reset")
    assert int(heap["locks"].local.sum()) > 0  # epoch 2's flags: nobody cleared them
    tiles, bad = runner.drain()
    kinds = {i: {t.kind for t in tiles if t.iteration == i} for i in bad}
    assert kinds == {0: {"hang"}, 1: {"unwritten"}, 2: {"unwritten"}}  # flags left set: C = 0.0


def test_failure_records_are_capped_per_class():
    # Iteration 0 hangs on every tile, iteration 1 pushes stale tiles: with a cap of 2 records,
    # a cap over all classes kept only hangs; the stale tiles must still have examples.
    result = campaign(kernel="all-scatter", protocol="release-xchg-cas-acquire", reset="none",
                      order="consumers-first", poison="outputs", iterations=2, max_records=2,
                      push="barrier-fenced-release-acquire")
    assert result.counts["hang"] > 2 and result.counts["stale"] == 16
    assert [f["kind"] for f in result.failures] == ["hang", "hang", "stale", "stale"]
