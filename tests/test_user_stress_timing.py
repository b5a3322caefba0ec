"""Issue 25's remaining parts on the CPU: the timing split of an iteration (the user's kernels apart from
the harness), the planned L2 congestion (launched by the engine, compiled for sm_90) and the time
bound of an iterations run. The GPU figures: ``benchmarks/user_stress_fast_gpu.py``, docs/RESULTS.md."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from syncverify.frontend import schedule as sch
from syncverify.frontend.schedule import GuidedEntry
from syncverify.frontend.stress_timing import describe, split_timing
from syncverify.frontend.user_stress import StressInputError, StressOptions, run_stress, start_engine
from tests.compiled import run_compiled

ROOT = Path(__file__).resolve().parents[1]
CLEAN = str(ROOT / "tests" / "user_kernels" / "harness.py") + "::clean"
CONGEST = GuidedEntry("", 0, "congest", 0, -1, 0, *sch.CONGEST_NS, "a test")


def test_the_split_separates_the_users_kernels_from_the_harness():
    split = split_timing(StressOptions(CLEAN, world_size=2, interpret=True), iterations=1)
    us = split["us"]
    assert set(us) == {"iteration", "launches", "restore", "as_written"}
    assert us["as_written"] is None  # the interpreter does not run the kernels as written
    assert us["iteration"] > 0 and us["launches"] > 0 and us["restore"] >= 0
    # kernels = launches - restore; harness = iteration - kernels; the rate the harness alone allows
    assert split["kernels_us"] == pytest.approx(max(us["launches"] - us["restore"], 0), abs=0.02)
    assert split["harness_us"] == pytest.approx(max(us["iteration"] - split["kernels_us"], 0), abs=0.02)
    assert split["harness_rate"] == round(1e6 / split["harness_us"])
    assert "the harness alone would allow" in describe(split) and "host (the interpreter)" in describe(split)


def test_a_split_iteration_leaves_out_what_it_does_not_time():
    _plan, engine, _block = start_engine(StressOptions(CLEAN, world_size=2, interpret=True, iterations=1))
    engine.use_ring(0)
    engine.reset_ring()
    engine.iteration(0)
    done = int(engine.ctl[engine.ud.CTL_INDEX["iteration"]])
    engine.ring.zero_()
    engine.parts = frozenset({"restore", "launches"})
    engine.iteration(0)
    # no validation (its ring row untouched) and no epilogue (the iteration counter did not move)
    assert not engine.ring.any()
    assert int(engine.ctl[engine.ud.CTL_INDEX["iteration"]]) == done


def test_a_congest_entry_launches_the_congesting_kernel_each_iteration():
    from syncverify.kernels import congest

    options = StressOptions(CLEAN, world_size=2, interpret=True, iterations=1, delays="guided", guided=(CONGEST,))
    _plan, engine, _block = start_engine(options)
    assert engine.congest_ns == sch.CONGEST_NS[1]
    engine.use_ring(0)
    engine.reset_ring()
    engine.iteration(0)
    # one CTA in the interpreter, INTERPRET_ROUNDS lines of BLOCK relaxed adds of 1
    assert int(engine.congest_buf.sum()) == congest.INTERPRET_ROUNDS * congest.BLOCK
    # the rest of the iteration is the plain one: clean
    assert run_stress(options).clean
    # random delays (or no congest entry) launch none
    plain = start_engine(StressOptions(CLEAN, world_size=2, interpret=True, iterations=1))[1]
    assert plain.congest_ns == 0 and plain.congest_buf is None


def test_an_aim_entry_reads_the_named_buffer_on_every_rank_each_iteration_and_names_a_missing_one():
    aim = GuidedEntry("", 0, "aim", 0, -1, 0, *sch.AIM_NS, "a test", buffer="out")
    options = StressOptions(CLEAN, world_size=2, interpret=True, iterations=1, delays="guided", guided=(aim,))
    _plan, engine, _block = start_engine(options)
    assert engine.aims == [("out", sch.AIM_NS[1])]
    engine.use_ring(0)
    engine.reset_ring()
    engine.iteration(0)
    # the loads' sink: allocated, and never written (its mask word is 0)
    assert engine.aim_sink is not None and not engine.aim_sink.any()
    assert run_stress(options).clean  # the rest of the iteration is the plain one
    wrong = dataclasses.replace(aim, buffer="no_such_buffer")
    with pytest.raises(StressInputError, match="aims traffic at 'no_such_buffer', which the harness does not"):
        run_stress(dataclasses.replace(options, guided=(wrong,)))


def test_a_place_entry_is_a_gpu_action_the_interpreter_names():
    place = GuidedEntry("", 0, "place", 0, -1, 0, 1, 1, "a test")
    result = run_stress(StressOptions(CLEAN, world_size=2, interpret=True, iterations=1, delays="guided",
                                      guided=(place,)))
    assert result.clean and any("placement of the heap in host-mapped memory is a GPU action" in n
                                for n in result.notes)
    assert "place the symmetric heap in host-mapped memory" in place.describe()


def test_a_place_entry_naming_a_buffer_is_a_gpu_action_and_a_buffer_the_harness_lacks_is_one_line():
    place = GuidedEntry("", 0, "place", 0, -1, 0, 1, 1, "a test", buffer="out")
    options = StressOptions(CLEAN, world_size=2, interpret=True, iterations=1, delays="guided", guided=(place,))
    result = run_stress(options)
    assert result.clean and any("placement of the heap in host-mapped memory is a GPU action" in n
                                for n in result.notes)
    assert place.describe().startswith("place out in host-mapped memory (every rank's copy; its stores cross the "
                                       "host link), the rest of the heap, flags included, on the GPU")
    wrong = dataclasses.replace(place, buffer="no_such_buffer")
    with pytest.raises(StressInputError, match=r"^the guided placement names no_such_buffer, which harness \S+::clean "
                                               r"does not allocate \(its heap buffers: "):
        run_stress(dataclasses.replace(options, guided=(wrong,)))


def test_a_placed_heap_maps_each_allocation_in_whole_granules_from_a_granule_boundary():
    """The heap's allocation hook as ``syncverify.kernels.placement.backing_for`` uses it, with a
    stand-in for the CUDA mapping: every allocation starts on a granule, the hook gets its position,
    offset and bytes, and the heap's top covers what was mapped (restores copy up to it)."""
    from syncverify.frontend.harness import Heap
    from syncverify.kernels.placement import round_up

    torch = pytest.importorskip("torch")
    granule, calls = 4096, []

    def backing(index, offset, nbytes):
        calls.append((index, offset, nbytes))
        return round_up(nbytes, granule)

    heap = Heap(2, 8 * granule, block=torch.zeros((2, 8 * granule), dtype=torch.uint8), backing=backing, align=granule)
    a = heap.zeros((10,), torch.float32)
    b = heap.zeros((1500,), torch.float32)  # 6,000 bytes: two granules
    c = heap.zeros((1,), torch.int32)
    assert [x.allocation.offset for x in (a, b, c)] == [0, granule, 3 * granule]
    assert calls == [(0, 0, 40), (1, granule, 6000), (2, 3 * granule, 4)]
    assert heap._top == 4 * granule
    with pytest.raises(Exception, match="too small"):
        heap.zeros((5 * granule,), torch.uint8)


def test_a_mixed_heap_without_the_cuda_bindings_is_one_line(monkeypatch):
    import sys

    from syncverify.kernels.errors import PlacementError
    from syncverify.kernels.placement import MixedHeap

    monkeypatch.setitem(sys.modules, "cuda.bindings", None)  # as on a machine without cuda-python
    with pytest.raises(PlacementError, match=r"^placing a buffer in host-mapped memory needs NVIDIA's cuda-python "
                                             r"bindings \(pip install cuda-bindings\)"):
        MixedHeap(2, 1 << 21)


def test_a_placement_is_refused_on_real_ranks():
    from syncverify.frontend.real_ranks import check_real_ranks

    place = GuidedEntry("", 0, "place", 0, -1, 0, 1, 1, "a test", buffer="out")
    with pytest.raises(StressInputError, match="places the virtual ranks' heap; real ranks each have their own"):
        check_real_ranks(StressOptions(CLEAN, world_size=2, interpret=True, iterations=1, delays="guided",
                                       guided=(place,)), gpus=None)


def test_the_aimed_kernel_compiles_to_a_clock_bounded_loop_of_l2_loads_that_never_stores():
    """sm_90 PTX without a GPU, in its own process (a compile needs TRITON_INTERPRET unset)."""
    code = ("import torch; from syncverify.kernels.compile import compile_like_launch; "
            "from syncverify.kernels import congest as c; b = torch.zeros(4096, dtype=torch.int32); "
            "s = torch.zeros(2 * c.BLOCK, dtype=torch.int32); "
            "k = compile_like_launch(c.sv_aim, b, 4096, s, 500000, BLOCK=c.BLOCK, ROUNDS=2, INTERPRET=False); "
            "print(k.asm['ptx'])")
    ptx = run_compiled(code, timeout=300).stdout
    assert ptx.count("%globaltimer") >= 2  # the start and the loop's test
    assert "ld.global.cg" in ptx  # L2, not L1
    assert "atom" not in ptx and "fence" not in ptx and "bar.sync" not in ptx
    # its only stores are the sink's, predicated on the sink's first word
    assert all(line.strip().startswith("@") for line in ptx.splitlines() if "st.global" in line)


def test_a_time_bound_stops_an_iterations_run_and_says_so():
    result = run_stress(StressOptions(CLEAN, world_size=2, interpret=True, iterations=1000, bound_seconds=0.0))
    assert result.iterations < 1000 and not result.clean
    assert result.stopped.startswith("the time bound of 0 s")


def test_the_congesting_kernel_compiles_to_a_clock_bounded_loop_of_relaxed_atomics():
    """sm_90 PTX without a GPU, in its own process (a compile needs TRITON_INTERPRET unset)."""
    code = ("import torch; from syncverify.kernels.compile import compile_like_launch; "
            "from syncverify.kernels import congest as c; b = torch.zeros(4096, dtype=torch.int32); "
            "k = compile_like_launch(c.sv_congest, b, 4096, 500000, BLOCK=c.BLOCK, ROUNDS=2, INTERPRET=False); "
            "print(k.asm['ptx'])")
    ptx = run_compiled(code, timeout=300).stdout
    assert ptx.count("%globaltimer") >= 2  # the start and the loop's test
    assert "atom.global.gpu.relaxed.add" in ptx
    assert "fence" not in ptx and "bar.sync" not in ptx  # it orders nothing and waits for nobody


def test_the_gpu_scripts_cpu_path_splits_the_time_and_runs_the_congested_schedules(tmp_path, capsys):
    """benchmarks/user_stress_fast_gpu.py through the interpreter (the model's sizes, two iterations a row):
    the sizes row carries the split, the latent examples run with and without their congestion."""
    from benchmarks import user_stress_fast_gpu as script

    assert script.main(["--interpret", "--sections", "sizes,congest", "--only-sizes", "all_scatter:128/32/16",
                        "--out", str(tmp_path)]) == 0
    raw = __import__("json").loads((tmp_path / "user_stress_fast.json").read_text())
    (sizes,) = [r for r in raw["rows"] if r["section"] == "sizes"]
    assert sizes["split"]["clock"] == "host (the interpreter)" and sizes["run"]["bad"] == 0
    congest = [r for r in raw["rows"] if r["section"] == "congest"]
    # each latent example: its schedule with the congestion, then the same delays without it
    assert len(congest) == 6 and all("error" not in r and r["bad"] == 0 for r in congest)
    assert sum("with congestion" in r["label"] for r in congest) == 3
    out = capsys.readouterr().out
    assert "| all_scatter::original | 128/32/16 | with congestion | congest, start, touch | clean 2 | 0/2 |" in out


def test_the_gpu_scripts_actions_rows_run_a_harness_under_another_harness_plans_actions(tmp_path, capsys):
    """benchmarks/user_stress_fast_gpu.py's actions section through the interpreter: a fixed example
    under its buggy sibling's planned actions (it must stay clean on the GPU), a placement added."""
    from benchmarks import user_stress_fast_gpu as script

    rows = ("one_shot_all_reduce::fix_with_barrier<-one_shot_all_reduce::original:start+aim+place:128/32/16:9; "
            "all_scatter::original:start+touch:64/64/64k:9")
    assert script.main(["--interpret", "--sections", "actions", "--action-rows", rows, "--out", str(tmp_path)]) == 0
    raw = __import__("json").loads((tmp_path / "user_stress_fast.json").read_text())
    assert [r["label"] for r in raw["rows"]] == [
        "one_shot_all_reduce::fix_with_barrier under one_shot_all_reduce::original's start+aim+place 128/32/16",
        "all_scatter::original under all_scatter::original's start+touch 64/64/64k"]
    assert all(r["bad"] == 0 and r["iterations"] == 2 for r in raw["rows"])
    out = capsys.readouterr().out
    assert "| one_shot_all_reduce::fix_with_barrier | one_shot_all_reduce::original | start+aim+place | 128/32/16 | " \
           "clean 2 | clean |" in out
    with pytest.raises(SystemExit):
        script.main(["--interpret", "--sections", "actions", "--action-rows", "nope", "--out", str(tmp_path)])
    assert "bad --action-rows entry 'nope'" in capsys.readouterr().out


def test_the_command_prints_the_split_after_a_clean_run_and_refuses_it_with_real_ranks(capsys):
    from syncverify.cli import main

    code = main(["stress", CLEAN, "--interpret", "--iterations", "1", "--in-process", "--json", "--timing-split"])
    report = __import__("json").loads(capsys.readouterr().out)
    assert code == 0 and set(report["timing"]["us"]) == {"iteration", "launches", "restore", "as_written"}
    assert main(["stress", CLEAN, "--interpret", "--iterations", "1", "--real-ranks", "--timing-split"]) == 2
    assert "--timing-split times virtual ranks" in capsys.readouterr().err


def test_a_k_major_b_is_copied_with_16_byte_copies_only():
    """The examples' ``B_K_MAJOR`` stress define (the harness's input layout, the kernel the same): in sm_90
    PTX the all-scatter GEMM copies an N-major B into shared memory with 4-byte ``cp.async.ca`` copies (tf32
    wgmma takes B K-major), a K-major one with 16-byte ``cp.async.cg`` copies only."""
    done = run_compiled("import test_user_stress_timing as t; t.copies_by_layout()", timeout=300)
    n_major, k_major = (dict(eval(line.split(" ", 1)[1])) for line in done.stdout.splitlines() if line.startswith("B"))
    assert n_major.get("cp.async.ca.shared.global", 0) > 0
    assert k_major.get("cp.async.ca.shared.global", 0) == 0 and k_major["cp.async.cg.shared.global"] > 0


def copies_by_layout() -> None:
    """The body of the test above: the example's first launch at 1024^3 (128 x 128 tiles, K step 32)."""
    import collections
    import re

    from syncverify.frontend.check import load_harness
    from syncverify.frontend.harness import run_harness
    from syncverify.frontend.user_stress import _define
    from syncverify.kernels.compile import compile_like_launch

    for k_major in (0, 1):
        fn, _name = load_harness(str(ROOT / "examples" / "all_scatter" / "harness.py") + "::fix_with_barriers")
        _define(fn, {"SIZE": 1024, "BLOCK": 128, "BLOCK_K": 32, "PROGRAMS": 16, "B_K_MAJOR": k_major})
        op = next(op for op in run_harness(fn, 2, 1, heap_bytes=1 << 26).ops if op.kind == "launch")
        ptx = compile_like_launch(op.kernel, *op.args, **op.kwargs).asm["ptx"]
        copies = collections.Counter(re.findall(r"\bcp\.async\.c[ag]\.shared\.global", ptx))
        print(f"B{'K' if k_major else 'N'} {sorted(copies.items())!r}")


def test_real_ranks_run_a_guided_schedule_without_its_placement_and_say_so():
    from syncverify.cli.user_stress import for_real_ranks

    late = GuidedEntry("persistent_gemm", 0, "start", 0, -1, 15, 1, 1, "a test")
    place = GuidedEntry("", 0, "place", 0, -1, 0, 1, 1, "a test", buffer="local_C")
    kept, line = for_real_ranks([late, place])
    assert kept == [late]
    assert line == ("the placement of local_C in host memory is left out (it places buffers of the virtual ranks' "
                    "one heap; each real rank's heap is its own symmetric memory)")
    assert for_real_ranks([late]) == ([late], "")
