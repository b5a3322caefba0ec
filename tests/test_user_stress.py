"""``syncverify stress FILE.py``: the user's own kernels under stress (issue 25), on the CPU.

The rewrite is checked without a GPU (the delay-free rewrite is the original kernel, AST and sm_90
PTX), the run through Triton's interpreter (validation, hangs as reports, bad input), the guided
schedule and the positive control against the model check of the shipped examples. What only the
GPU can show (delays that expose a bug, throughput) is benchmarks/user_stress_gpu.py's.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
import torch

from syncverify.cli import main
from syncverify.frontend import rewrite as rw
from syncverify.frontend.check import check_kernel, load_harness
from syncverify.frontend.harness import run_harness
from syncverify.frontend.mutants import positive_control
from syncverify.frontend.schedule import guided_schedules, random_delay
from syncverify.frontend.user_stress import StressOptions, replay_first, run_in_worker, run_stress
from syncverify.kernels import user_delays
from syncverify.kernels._jit import jit
from syncverify.kernels.compile import compile_like_launch
from syncverify.testing import stress_kernel
from tests.compiled import run_compiled

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent / "user_kernels" / "harness.py"
SCATTER = "examples/all_scatter/harness.py"
ONE_SHOT = "examples/one_shot_all_reduce/harness.py"


def launches(target: str, block: int | None = None) -> list:
    """The recorded launches of a harness (``block``: its BLOCK, 16 for a ``tl.dot`` that compiles)."""
    fn, _name = load_harness(str(ROOT / target))
    if block is not None:
        fn.__globals__["BLOCK"] = block
    return [op for op in run_harness(fn, 2, 1).ops if op.kind == "launch"]


def example_kernels() -> list:
    seen, out = set(), []
    for target in (f"{SCATTER}::fix_with_barriers", f"{ONE_SHOT}::seed_fix"):
        for op in launches(target):
            if id(op.kernel) not in seen:
                seen.add(id(op.kernel))
                out.append(op.kernel)
    return out


# ----- the rewrite ------------------------------------------------------------------------------

def test_the_rewrite_with_every_switch_off_is_the_kernel_as_written():
    kernels = example_kernels()
    assert len(kernels) == 3
    for kernel in kernels:
        rewritten = rw.rewrite_kernel(kernel)
        assert rw.same_kernel(rw.strip_inserted(rewritten.tree), rewritten.original_tree), rewritten.name
        assert "sv_delay" in rewritten.source and "SV_BOUND" in rewritten.source


def test_a_stripped_rewrite_that_changed_a_statement_is_told_apart():
    kernel = example_kernels()[0]
    rewritten = rw.rewrite_kernel(kernel)
    tampered = rw.strip_inserted(rewritten.tree)
    tampered.body.append(tampered.body[-1])
    assert not rw.same_kernel(tampered, rewritten.original_tree)


def test_the_rewrite_finds_the_synchronization_sites_of_the_all_scatter_kernel():
    kernel = launches(f"{SCATTER}::fix_with_barriers")[0].kernel
    lines = (ROOT / "examples/all_scatter/gemm_all_scatter_wg_specialization.py").read_text().splitlines()
    line_of = lambda text: lines.index(text) + 1  # noqa: E731 -- the first line with this text
    sites = {(s.where, s.kind, s.line) for s in rw.rewrite_kernel(kernel).sites}
    store = line_of('            tl.store(c_global + global_offset, c, cache_modifier=".wt")')
    barrier = line_of("                tl.debug_barrier()")  # the first: VERSION "wt"
    wait = line_of('            while tl.load(locks + tile_id, cache_modifier=".cv", volatile=True) != 1:')
    assert ("hold", "store", store) in sites
    assert ("before", "barrier", barrier) in sites and ("after", "barrier", barrier) in sites
    assert ("wait", "wait (volatile-load)", wait) in sites
    assert ("before", "flag-store", barrier + 1) in sites
    assert any(kind == "atomic" and where == "before" for where, kind, _line in sites)
    assert ("start", "program", line_of("def persistent_gemm_all_scatter_wg_specialization(")) in sites


def test_the_delay_free_rewrite_compiles_to_the_same_ptx():
    """sm_90 PTX without a GPU: equal but for the added parameters' declarations and debug lines.
    In a fresh process: an earlier test of the suite may have imported the examples' kernels under
    ``TRITON_INTERPRET=1``, which makes them interpreter functions that cannot be compiled."""
    run_compiled("import test_user_stress as t; t.delay_free_rewrite_ptx_is_equal()", timeout=500)


def delay_free_rewrite_ptx_is_equal() -> None:
    """The body of the test above (run in its own process)."""
    for op in launches(f"{ONE_SHOT}::seed_fix", block=16)[::2] + launches(f"{SCATTER}::seed_fix", block=16)[:1]:
        rewritten = rw.rewrite_kernel(op.kernel)
        scratch = torch.zeros(64, dtype=torch.int32)
        extra = dict(sv_ctl=scratch, sv_table=scratch, sv_mirror=scratch, sv_rank=op.rank, sv_slot=0, SV_WARPS=4,
                     SV_WORLD=2, SV_INTERPRET=False)
        original = compile_like_launch(op.kernel, *op.args, **op.kwargs).asm["ptx"]
        off = compile_like_launch(rewritten.kernel, *op.args, **op.kwargs, **extra, SV_DELAYS=0, SV_BOUND=False,
                                  SV_MIRROR=False).asm["ptx"]
        assert _code(off) == _code(original), rewritten.name
        on = compile_like_launch(rewritten.kernel, *op.args, **op.kwargs, **extra, SV_DELAYS=-1, SV_BOUND=True,
                                 SV_MIRROR=True).asm["ptx"]
        assert "syncverify-delay" in on and _code(on) != _code(original)
        # a guided run compiles in only the sites its schedule delays: here the program start alone
        start = next(s.id for s in rewritten.sites if s.where == "start")
        one = compile_like_launch(rewritten.kernel, *op.args, **op.kwargs, **extra, SV_DELAYS=1 << start,
                                  SV_BOUND=False, SV_MIRROR=False).asm["ptx"]
        assert 0 < one.count("syncverify-delay") < on.count("syncverify-delay"), rewritten.name


def _code(ptx: str) -> list[str]:
    """PTX instructions: no parameter declarations, ``.loc``/``.file`` lines, comments or debug sections."""
    out = []
    for line in ptx.split(".section\t.debug")[0].splitlines():
        line = line.split("//")[0].rstrip()
        if line.strip() and not re.match(r"\s*\.param\s", line) and not line.strip().startswith((".loc", ".file")):
            out.append(line)
    return out


def test_the_rewrite_reads_the_poll_cap_where_the_kernels_keep_it():
    assert rw.CAP_INDEX == user_delays.CTL_INDEX["cap"]


def test_the_host_mirror_of_the_random_draw_is_the_kernels_draw():
    import triton.language as tl

    @jit
    def draw(ctl, table, out, rank, SITE: tl.constexpr, NUM_WARPS: tl.constexpr, WORLD: tl.constexpr):
        ns, warps = user_delays.sv_draw(ctl, table, SITE, rank, NUM_WARPS, WORLD)
        tl.store(out, ns)
        tl.store(out + 1, warps)

    table = torch.zeros((4, 2, 5), dtype=torch.int32)
    out = torch.zeros(2, dtype=torch.int32)
    for seed, site, rank, iteration in itertools.product((0, 7), (0, 3), (0, 1), (0, 5)):
        ctl = torch.zeros(16, dtype=torch.int32)
        for name, value in dict(iteration=iteration, seed=seed, mode=0, pct=50, max_ns=4000).items():
            ctl[user_delays.CTL_INDEX[name]] = value
        draw.launcher((1,), interpret=True)(ctl, table, out, rank, SITE=site, NUM_WARPS=4, WORLD=2)
        assert tuple(out.tolist()) == random_delay(seed=seed, site=site, rank=rank, program=0, iteration=iteration,
                                                   pct=50, max_ns=4000, num_warps=4)


# ----- a run in the interpreter -------------------------------------------------------------------

def test_validation_finds_what_a_kernel_did_not_write_and_replays_it():
    options = StressOptions(f"{HERE}::half_written", interpret=True, iterations=2, delays="none")
    result = run_stress(options)
    assert result.bad_iterations == 2 and len(result.failures) == 4
    first = result.first_failure
    assert (first.iteration, first.expectation, first.kind, first.n_bad, first.element) == (0, "out on rank 0",
                                                                                           "unwritten", 32, (32,))
    assert first.expected == 33.0
    assert result.failures[2].got != result.failures[2].got  # iteration 1 reads the poison (NaN)
    replay = replay_first(options, first, times=1)
    assert (replay["reproduced"], replay["runs"]) == (1, 1)


def test_a_clean_harness_is_clean_and_the_interpreter_says_it_is_no_evidence():
    result = run_stress(StressOptions(f"{HERE}::clean", interpret=True, iterations=2))
    assert result.clean and result.iterations == 2
    assert any("no evidence" in note for note in result.notes)


def test_a_hang_is_a_report_with_its_site_and_last_value():
    result = run_stress(StressOptions(f"{HERE}::hangs", interpret=True, iterations=1, delays="none"))
    hang = result.first_failure
    assert hang.kind == "hang" and hang.expectation == "out@0"
    assert hang.hang["site"] == "kernels.py:19" and hang.hang["value"] == 0


def test_the_watchdog_kills_only_the_worker_and_reports_from_the_mirror():
    options = StressOptions(f"{HERE}::hangs", interpret=True, iterations=1, delays="none", cap=2_000_000_000)
    result = run_in_worker(options, watchdog=5.0)
    assert result.stopped and "killed" in result.stopped
    assert any("waiter[0]" in line and "kernels.py:19" in line and "last polled value 0" in line
               for line in result.hang_report), result.hang_report


@pytest.mark.parametrize("name, words", [
    ("no_expectation", "has no expectation"),
    ("does_not_compile", "no_such_value"),
    ("unsupported", "while ... else"),
])
def test_bad_input_is_one_line_and_exit_2(name, words, capsys):
    code = main(["stress", f"{HERE}::{name}", "--interpret", "--iterations", "1", "--in-process"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert words in err[-1] and err[-1].startswith("syncverify: error:") and "Traceback" not in "\n".join(err)


def test_protocol_options_are_refused_for_a_harness(capsys):
    assert main(["stress", f"{HERE}::clean", "--interpret", "--kernel", "all-scatter"]) == 2
    assert "--kernel applies to a protocol" in capsys.readouterr().err


def test_the_command_runs_a_harness_and_prints_json(capsys):
    code = main(["stress", f"{HERE}::half_written", "--interpret", "--iterations", "1", "--in-process", "--json",
                 "--replay-times", "1"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert report["model"]["verdict"] == "UNSAFE" and report["result"]["bad_iterations"] == 1
    assert report["replay"]["summary"].startswith("reproduced 1/1")


# ----- the examples: guided schedules and positive controls from the model -----------------------------

def test_the_guided_schedule_of_the_all_scatter_fix_holds_warps_1_to_3_at_the_tile_store():
    model = check_kernel(str(ROOT / f"{SCATTER}::seed_fix"), world_size=2)
    schedules = {s.kind: s for s in guided_schedules(model, num_warps=4)}
    entry = schedules["unwritten-read"].entries[0]
    assert schedules["unwritten-read"].realizable
    assert (entry.where, entry.line, entry.warps, entry.program) == ("hold", 63, 0b1110, 0)
    assert "warp 0" in entry.reason
    result = run_stress(StressOptions(str(ROOT / f"{SCATTER}::seed_fix"), interpret=True, iterations=1,
                                      delays="guided", guided=schedules["unwritten-read"].entries))
    assert result.clean  # the interpreter is sequential: the GPU run is the evidence (RESULTS.md)


def test_a_barrier_followed_by_a_weak_flag_is_latent_for_delays_and_planned_with_a_placement():
    # the reader acquires after its poll: no touch either (tests/test_user_schedule.py has the one that can);
    # only the memory system can show it, so the plan places the data in host-mapped memory
    model = check_kernel(str(ROOT / f"{ONE_SHOT}::original"), world_size=2)
    schedule = next(s for s in guided_schedules(model, num_warps=4) if s.kind == "unwritten-read")
    assert "CTA barrier after its store" in schedule.note
    assert "place" in [e.where for e in schedule.entries] and "touch" not in [e.where for e in schedule.entries]


def test_the_positive_control_of_the_fixed_all_scatter_is_its_barrier_removed():
    control = positive_control(str(ROOT / f"{SCATTER}::fix_with_barriers"), world_size=2, calls=1)
    assert control.change == "its tl.debug_barrier() at gemm_all_scatter_wg_specialization.py:72 removed"
    assert "unwritten-read" in control.violations or "race" in control.violations
    result = run_stress(StressOptions(str(ROOT / f"{SCATTER}::fix_with_barriers"), interpret=True, iterations=1,
                                      mutant=control.change))
    assert result.iterations == 1


def test_the_fixture_stresses_a_harness_beside_the_test(syncverify_stress):
    result = syncverify_stress(harness="user_kernels/harness.py::clean", interpret=True, iterations=1)
    assert result.assert_clean().iterations == 1


def test_stress_kernel_fails_with_the_first_bad_element():
    result = stress_kernel(str(HERE) + "::half_written", interpret=True, iterations=1, delays="none")
    with pytest.raises(AssertionError, match=r"element \(32,\) expected 33"):
        result.assert_clean()
