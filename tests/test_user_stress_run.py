"""``syncverify stress FILE.py``, the run itself (issue 25): blocks of iterations, validation, bad
tiles classified, what a report says; on the CPU (Triton's interpreter).

What only a GPU shows (CUDA-graph blocks, their device time, delays that expose bugs) is
``benchmarks/user_stress_gpu.py``'s (docs/RESULTS.md); here the same code runs its CPU path, and
the validation kernel is compiled for sm_90 without a GPU.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from syncverify.cli import main
from syncverify.frontend.user_stress import (Expectation, StressOptions, _complement, _failures, replay_first,
                                             run_stress)
from tests.compiled import run_compiled

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent / "user_kernels" / "harness.py"
SCATTER = ROOT / "examples" / "all_scatter" / "harness.py"


# ----- bad tiles, classified ----------------------------------------------------------------------

def test_each_bad_tile_is_classified_never_written_partial_stale_or_wrong():
    """A seeded bug per class (``kernels.tiled_bugs``). Iteration 0 starts from the harness's zeros,
    so the copied tile reads 0 there (unwritten); from iteration 1 on every output holds its own
    poison, and the tile copied from ``src`` before ``src`` was written carries src's: stale."""
    result = run_stress(StressOptions(f"{HERE}::tiled", interpret=True, iterations=2, delays="none"))
    by_iteration: dict = {}
    for f in result.failures:
        by_iteration.setdefault(f.iteration, {})[f.expectation] = {tuple(t["at"]): t["class"] for t in f.tiles}
    assert by_iteration[1] == {
        "out@0": {(0, 1): "never-written", (1, 0): "partial", (1, 1): "stale"},
        "src@0": {(0, 0): "wrong-value"},
    }
    assert by_iteration[0]["out@0"][(1, 1)] == "never-written"
    assert result.tile_classes == {"never-written": 3, "partial": 2, "stale": 1, "wrong-value": 2}
    stale = next(f for f in result.failures if f.iteration == 1 and f.expectation == "out@0")
    assert (stale.n_bad, stale.n_unwritten, stale.n_stale, stale.n_corrupt) == (40, 24, 16, 0)
    assert "bad tiles: 1 never-written, 1 partial, 1 stale" in stale.describe()
    partial = next(t for t in stale.tiles if t["class"] == "partial")
    assert (partial["bad"], partial["size"]) == (8, 16)


def test_the_report_and_the_json_summarise_the_bad_tiles(capsys):
    code = main(["stress", f"{HERE}::tiled", "--interpret", "--iterations", "2", "--in-process", "--json",
                 "--delays", "none", "--replay-times", "0"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert report["result"]["tile_classes"] == {"never-written": 3, "partial": 2, "stale": 1, "wrong-value": 2}
    assert {t["class"] for f in report["result"]["failures"] for t in f["tiles"]} == {
        "never-written", "partial", "stale", "wrong-value"}


def test_a_tile_that_does_not_divide_the_tensor_is_one_line_and_exit_2(capsys):
    code = main(["stress", f"{HERE}::tile_does_not_divide", "--interpret", "--iterations", "1", "--in-process"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert "does not divide the tensor's shape (8, 8)" in err[-1] and "Traceback" not in "\n".join(err)


def test_poison_previous_keeps_the_last_calls_values_so_a_missing_write_goes_unseen():
    """``previous``: nothing is poisoned, an output keeps the previous call's values; call 1 of
    ``second_call_half`` leaves half the output as call 0 wrote it (right), so only ``all``, which
    poisons the output after call 0's validation, sees call 1's missing writes."""
    options = StressOptions(f"{HERE}::second_call_half", calls=2, interpret=True, iterations=2, delays="none")
    previous = run_stress(dataclasses.replace(options, poison="previous"))
    every = run_stress(options)
    assert previous.clean
    assert [(f.iteration, f.call, f.kind, f.n_bad) for f in every.failures] == [(0, 1, "unwritten", 32),
                                                                               (1, 1, "unwritten", 32)]
    assert every.first_failure.got != every.first_failure.got  # the poison (NaN) call 0's validation left


# ----- time to first failure, on the device clock ------------------------------------------------------

def _row(n_bad: int, ns: int) -> list[int]:
    """A summary row (syncverify.stress.expect.FIELDS) with ``n_bad`` unwritten elements, validated at ``ns``."""
    return [n_bad, n_bad, 0, 3 if n_bad else 2**31 - 1, 0, 0, ns & 0xFFFFFFFF, ns >> 32, 0]


def test_time_to_first_failure_is_read_from_the_device_clock_of_the_validations():
    """The clock is the one the validation kernel stores (``%globaltimer``), counted from the first
    validation of the run; the host's clock plays no part."""
    e = Expectation(0, 0, "out@0", 0, None, None, (8,), "h.py:1")
    engine = SimpleNamespace(sites=[], expectations=[e], tile_offsets=[0], plan=SimpleNamespace(tiles=(0,)))
    start = 5_000_000_000_123
    t0: list = []
    rows = [[_row(0, start)], [_row(0, start + 70_000)], [_row(4, start + 140_500)]]
    found = _failures(engine, rows, [[0, 0, 0, 0]] * 3, first_iteration=10, t0=t0)
    assert t0 == [start]
    assert [(f.iteration, f.device_ns, f.element) for f in found] == [(12, 140_500, (3,))]


# ----- the restore of each iteration ----------------------------------------------------------------------

def test_an_iteration_restores_everything_but_the_outputs_its_validation_poisoned():
    assert _complement([], 100) == [(0, 100)]
    assert _complement([(0, 10), (40, 60)], 100) == [(10, 40), (60, 100)]
    assert _complement([(0, 100)], 100) == []
    assert _complement([(10, 30), (20, 40)], 50) == [(0, 10), (40, 50)]


# ----- replays, and a control that does not fail --------------------------------------------------------

def test_reproduced_k_of_n_counts_the_replays_that_failed_the_same_way():
    options = StressOptions(f"{HERE}::tiled", interpret=True, iterations=2, delays="none")
    first = run_stress(options).first_failure
    replay = replay_first(options, first, times=2)
    assert (replay["reproduced"], replay["runs"], replay["iteration"]) == (2, 2, 0)
    assert replay["summary"].startswith("reproduced 2/2 (iteration 0, unwritten in out@0")


def test_a_positive_control_that_stays_clean_says_delays_ineffective_and_exits_1(capsys):
    """The interpreter runs one program at a time, so the control (the fix's CTA barrier removed,
    unsafe for the model) cannot fail there: the run must say so and exit 1, not pass."""
    code = main(["stress", f"{SCATTER}::fix_with_barriers", "--interpret", "--iterations", "1", "--in-process",
                 "--control", "--delays", "none", "--replay-times", "0"])
    printed = capsys.readouterr().out
    assert code == 1
    assert "DELAYS INEFFECTIVE" in printed and "tl.debug_barrier() at gemm_all_scatter_wg_specialization.py:72" in printed


# ----- the validation kernel on the GPU's compiler ----------------------------------------------------------

def test_the_validation_kernel_compiles_for_sm_90_for_each_poison_and_tiling():
    """sm_90 without a GPU, in a fresh process (kernels imported under ``TRITON_INTERPRET=1`` by an
    earlier test cannot be compiled): tagged float32/bfloat16/int32 poisons and an untagged int8,
    with and without tiles, no local-memory spill."""
    run_compiled("import test_user_stress_run as t; t.compile_validation()", timeout=300)


def compile_validation() -> None:
    """The body of the test above (run in its own process)."""
    import torch

    from syncverify.kernels.compile import compile_like_launch
    from syncverify.stress.expect import NTILE_FIELDS, expect_kernel, geometry, poison_base, tag_bits

    for dtype, shape, tile, has_ref in [(torch.float32, (1024, 1024), (128, 128), True),
                                        (torch.float32, (1024, 1024), (), True),
                                        (torch.bfloat16, (256, 256), (64, 64), False),
                                        (torch.int32, (64,), (16,), True), (torch.int8, (64,), (), False)]:
        out = torch.zeros(shape, dtype=dtype)
        scratch = torch.zeros(64, dtype=torch.int32)
        is_float, base = poison_base(dtype)
        g = geometry(shape, tile)
        ptx = compile_like_launch(expect_kernel, out, out, scratch, scratch, 3, g["n_cols"], TM=g["TM"], TN=g["TN"],
                                  CH=g["CH"], BN=g["BN"], POISON=True, HAS_REF=has_ref, IS_FLOAT=is_float,
                                  BITS=8 * out.element_size(), TAG_BITS=tag_bits(dtype), BASE=base, TILED=bool(tile),
                                  NTILE=NTILE_FIELDS, INTERPRET=False).asm["ptx"]
        assert ".local" not in ptx, (dtype, shape, tile)


@pytest.mark.parametrize("shape, tile, grid", [((1024, 1024), (128, 128), (64, 8, 1)), ((1 << 20,), (), (1, 1, 512)),
                                               ((8, 8), (4, 4), (4, 1, 1)), ((100,), (25,), (4, 1, 1))])
def test_the_validation_reads_each_tile_in_pieces_of_at_most_2048_elements(shape, tile, grid):
    from syncverify.stress.expect import PIECE, geometry

    g = geometry(shape, tile)
    assert g["grid"] == grid and g["CH"] * g["BN"] <= PIECE


def test_the_interpreter_path_says_it_runs_without_graphs_on_the_host_clock():
    result = run_stress(StressOptions(f"{HERE}::clean", interpret=True, iterations=2, delays="none"))
    assert not result.graphs and result.device_seconds == 0 and result.rate > 0
    assert any("no CUDA graphs there" in note and "host's clock" in note for note in result.notes)


def test_guided_runs_random_delays_under_the_same_budget_beside_it_unless_no_random(capsys):
    """``--guided`` on a harness: random delays run after the guided ones, to their first failure
    (the seeded ``tiled`` bug shows at iteration 0 without any delay); ``--no-random`` leaves them out."""
    args = ["stress", f"{HERE}::tiled", "--interpret", "--iterations", "2", "--in-process", "--guided", "--json",
            "--replay-times", "0"]
    assert main(args) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["defines"] == {}  # the interpreter keeps the model's sizes
    assert report["random"]["result"]["delays"] == "random"
    assert report["random"]["result"]["first_failure_iteration"] == 0
    assert report["random"]["line"].startswith("random delays (50 % of sites, up to 4,000 ns) under the same budget "
                                               "(2 iterations) (the interpreter has no clock")
    assert report["random"]["line"].endswith("first failure at iteration 0 (unwritten)")
    assert main([*args, "--no-random"]) == 1
    assert "random" not in json.loads(capsys.readouterr().out)


# ----- the harness file's GPU sizes ----------------------------------------------------------------

ONE_SHOT = ROOT / "examples" / "one_shot_all_reduce" / "harness.py"


def test_a_gpu_run_takes_the_files_stress_sizes_with_each_define_over_them():
    from syncverify.frontend.user_stress import with_stress_sizes

    options = StressOptions(f"{ONE_SHOT}::original", defines={"PROGRAMS": 32})
    sized, line = with_stress_sizes(options)
    assert sized.defines == {"SIZE": 1024, "BLOCK": 64, "BLOCK_K": 64, "PROGRAMS": 32}
    assert line == ("sizes: SIZE=1024 BLOCK=64 BLOCK_K=64 PROGRAMS=32 (the harness's STRESS_SIZES, --define PROGRAMS "
                    "over them; the model checks the file's own values)")
    # the interpreter keeps the model's sizes; a file without STRESS_SIZES changes nothing
    assert with_stress_sizes(dataclasses.replace(options, interpret=True)) == (
        dataclasses.replace(options, interpret=True), "")
    assert with_stress_sizes(StressOptions(f"{HERE}::tiled")) == (StressOptions(f"{HERE}::tiled"), "")


@pytest.mark.parametrize("sizes, message", [
    ('{"BLOCK": "64"}', r"STRESS_SIZES must map module constant names to integers \(or None\), as --define "),
    ('{"BLOCK": True}', r"STRESS_SIZES must map module constant names to integers"),
    ('[("BLOCK", 64)]', r"STRESS_SIZES must map module constant names to integers"),
    ('{"BLOCKS": 64}', r"STRESS_SIZES names BLOCKS, which its module does not have$"),
])
def test_a_malformed_stress_sizes_is_one_line(tmp_path, sizes, message):
    from syncverify.frontend.user_stress import StressInputError, stress_sizes

    harness = tmp_path / "sized.py"
    harness.write_text(f"BLOCK = 4\nSTRESS_SIZES = {sizes}\n\n\ndef one(sv):\n    pass\n")
    with pytest.raises(StressInputError, match=message) as caught:
        stress_sizes(f"{harness}::one")
    assert "\n" not in str(caught.value)
