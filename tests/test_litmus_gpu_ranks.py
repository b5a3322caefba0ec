"""``syncverify litmus --gpu`` with threads on two GPUs, without a GPU: placement and its tables
(properties), the one-line refusals, the cross-GPU shapes' mutants, the PTX a cross-GPU kernel
compiles to for sm_90, and one end-to-end run of two processes (gloo, the interpreter) through
the command line.

The interpreter shows only sequentially consistent outcomes per process, so an outcome outside
the model's SC set through it is a runner bug (a wrong home, offset or merge), which is what the
end-to-end test catches: CoWW's final ``x`` is read at its home GPU, CoRR2's registers come from
two processes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncverify.cli import main
from syncverify.errors import SyncVerifyError
from syncverify.litmus.gpu.codegen import NotOnGpu, generate
from syncverify.litmus.gpu.layout import make_layout
from syncverify.litmus.gpu.mutants import CROSS_MUTATION_BASES, default_mutants
from syncverify.litmus.gpu.outcomes import is_target, model_outcomes
from syncverify.litmus.gpu.ranks import placement_refusal, prepare, split_layout
from syncverify.litmus.gpu.shapes import CROSS_SHAPES, cross_gpu_tests, shape_test
from syncverify.litmus.gpu.stress import StressParams
from syncverify.litmus.gpu.suite import check_across_gpus
from syncverify.litmus.parser import parse_litmus

KNOWN = Path(__file__).parent / "litmus" / "known"


def shape(name: str, flavour: str = "relacq", scope: str = "sys", gpus: int = 2):
    return parse_litmus(shape_test(name, flavour, scope, same_cta=False, gpus=gpus).text)


# ----- the shapes and their known answers -------------------------------------------------------

def test_every_cross_gpu_shape_puts_communicating_threads_on_two_gpus():
    tests = cross_gpu_tests()
    assert len(tests) == len(CROSS_SHAPES) * 5
    for t in tests:
        program = parse_litmus(t.text)
        assert {th.gpu for th in program.threads} == {0, 1}, t.name
        assert len({(th.gpu, th.cta) for th in program.threads}) == len(program.threads), t.name


def test_the_known_suite_holds_each_issue_shape_across_gpus_at_both_scopes():
    names = {p.stem for p in KNOWN.glob("*-diff-gpu.litmus")}
    for stem in ("mp", "sb", "lb", "iriw", "corr", "corr2", "coww", "2p2w"):
        assert any(n.startswith(stem + "-") for n in names), stem
    assert any("-gpu-diff-gpu" in n for n in names) and any("-sys-diff-gpu" in n for n in names)


def test_sys_scope_forbids_what_gpu_scope_allows_across_gpus():
    for name, flavour in (("MP", "relacq"), ("CoRR", "relaxed"), ("CoRR2", "relaxed")):
        sys_model, gpu_model = (model_outcomes(shape(name, flavour, s)) for s in ("sys", "gpu"))
        program = shape(name, flavour, "sys")
        assert not any(is_target(program, sys_model.items, o) for o in sys_model.allowed), name
        assert any(is_target(program, gpu_model.items, o) for o in gpu_model.allowed), name


def test_the_cross_gpu_mutants_narrow_sys_to_gpu_and_each_allows_its_target():
    mutants = default_mutants(cross_gpu=True)
    assert {m.original for m in mutants} == set(CROSS_MUTATION_BASES)
    assert len({m.name for m in mutants}) == len(mutants)
    for m in mutants:
        assert m.change.endswith(".sys -> .gpu")
        assert any(is_target(m.program, m.model.items, o) for o in m.model.allowed)


# ----- placement: the tables each rank launches with ---------------------------------------------

@settings(max_examples=25, deadline=None)
@given(shape_name=st.sampled_from(CROSS_SHAPES), programs=st.integers(4, 40), lanes=st.sampled_from([1, 3, 32]),
       warps=st.booleans(), seed=st.integers(0, 2**16))
def test_each_instance_thread_is_played_once_by_the_rank_of_its_gpu(shape_name, programs, lanes, warps, seed):
    program = shape(shape_name)
    plan = generate(program, "interpret", cross_gpu=True)
    params = StressParams(test_programs=programs, lanes=lanes, permute_warps=warps, stress_programs=3)
    rng = np.random.default_rng(seed)
    layout = make_layout(plan.ctas, plan.num_warps, len(plan.locations), params, rng)
    launch = split_layout(layout, plan, 2, params, rng)
    assert sum(t.test_programs for t in launch.ranks) == layout.test_programs
    played = {}
    for rank, tables in enumerate(launch.ranks):
        assert len(tables.line) == tables.test_programs + params.stress_programs
        assert all(plan.cta_gpus[c] == rank for c in tables.cta)  # a rank hosts its own GPU's CTAs only
        for role, inst in zip(tables.role, tables.instance):
            if inst >= 0:
                key = (int(inst), int(role))
                assert key not in played, key
                played[key] = rank
    assert set(played) == {(i, t) for i in range(layout.instances) for t in range(len(program.threads))}
    assert all(program.threads[t].gpu == rank for (_, t), rank in played.items())
    assert set(np.unique(launch.home)) <= {0, 1}


# ----- bad input: one line each ---------------------------------------------------------------------

def test_a_test_on_more_gpus_than_the_machine_has_is_refused_in_one_line():
    why = placement_refusal(shape("MP"), 1)
    assert "on 2 GPUs (0, 1) and 1 is available" in why and "\n" not in why
    assert "TRITON_INTERPRET=1" in placement_refusal(shape("MP"), 0)  # no GPU at all: say how to run without


def test_a_thread_on_a_gpu_that_does_not_exist_is_refused_in_one_line():
    program = parse_litmus(shape_test("MP", "relacq", "sys", same_cta=False, gpus=2).text.replace("gpu 1", "gpu 5"))
    why = placement_refusal(program, 2)
    assert "thread P1 is placed on gpu 5, which does not exist (GPUs 0..1" in why


def test_stress_with_fewer_test_programs_than_test_ctas_cannot_place_the_test():
    with pytest.raises(SyncVerifyError, match=r"test_programs=2 cannot place the test's 4 CTAs on 2 GPUs"):
        prepare(shape("IRIW"), StressParams(test_programs=2), iterations=1, seconds=1, interpret=True)


def test_refused_tests_come_back_as_reports_without_starting_a_process():
    reports = check_across_gpus([shape("MP"), shape("SB")], StressParams(), iterations=1, seconds=1,
                                interpret=True, gpus=1)
    assert [r.status for r in reports] == ["refused", "refused"]
    assert all(r.exit_code == 2 for r in reports)


def test_without_cross_gpu_the_compiler_still_refuses_two_gpus():
    with pytest.raises(NotOnGpu, match="needs 2 GPUs"):
        generate(shape("MP"), "ptx")


# ----- the kernel across GPUs compiles for sm_90 ---------------------------------------------------

def test_the_cross_gpu_kernel_compiles_with_sys_scope_start_and_64_bit_offsets():
    from syncverify.litmus.gpu.launch import ptx_of

    plan = generate(shape("MP"), "ptx", cross_gpu=True)
    assert plan.cta_gpus == (0, 1)
    assert "global_barrier(sync_ptr, NALIGN, BARRIER_SPINS, 'sys')" in plan.source
    ptx = ptx_of(plan)
    found = set(re.findall(r"\b(?:ld|st|atom)\.[a-z0-9.]+", ptx))
    assert {"st.release.sys.global.b32", "ld.acquire.sys.global.b32", "st.relaxed.sys.global.b32"} <= found
    assert any(a.startswith("atom.global.sys.release.add") for a in found)  # the aligned start's arrival
    assert "ld.global.b64" in found  # the address table: 64-bit word offsets into a peer's heap


# ----- two processes end to end: gloo and the interpreter ------------------------------------------

def test_two_processes_run_tests_across_gpus_and_the_model_explains_every_outcome(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    files = []
    for name, flavour in (("MP", "relacq"), ("CoWW", "relaxed"), ("CoRR2", "relaxed")):
        path = tmp_path / f"{name}.litmus"
        path.write_text(shape_test(name, flavour, "sys", same_cta=False, gpus=2).text)
        files.append(path)
    bad = tmp_path / "bad.litmus"
    bad.write_text(files[0].read_text().replace("gpu 1", "gpu 7"))
    code = main(["litmus", "--gpu", "--json", "--iterations", "2", *map(str, files), str(bad)])
    captured = capsys.readouterr()
    reports = json.loads(captured.out)
    assert code == 2  # the bad file; the others ran
    assert "thread P1 is placed on gpu 7, which does not exist" in captured.err
    ran = {r["name"].split("+")[0]: r for r in reports if r["status"] == "ran"}
    assert set(ran) == {"MP", "CoWW", "CoRR2"}
    for name, r in ran.items():
        assert r["gpus"] == 2 and r["launches"] == 2 and r["exit_code"] == 0, name
        assert r["instances"] > 0 and r["unsound"] == [] and r["weak_seen"] == [], name
        assert all(o["allowed"] for o in r["outcomes"]), name
    assert [o["values"] for o in ran["CoWW"]["outcomes"]] == [[2]]  # x read at its home: always 2


def test_ranks_as_threads_of_one_process_run_the_same_tables_and_the_model_explains_every_outcome():
    """``run_on_one_device`` (the one-GPU check of the PTX form): the ranks are threads, their heaps
    rows of one tensor; the same jobs, offsets and merge as the processes above, without starting any."""
    from syncverify.litmus.gpu.ranks import run_on_one_device
    from syncverify.litmus.gpu.report import judge

    programs = [shape(name, flavour) for name, flavour in
                (("MP", "relacq"), ("CoWW", "relaxed"), ("CoRR2", "relaxed"), ("2+2W", "relacq"), ("IRIW", "relaxed"))]
    jobs = [prepare(p, StressParams(), iterations=2, seconds=30, seed=n, interpret=True) for n, p in enumerate(programs)]
    finished = []
    runs, why = run_on_one_device(jobs, interpret=True, on_result=lambda index, run: finished.append(index))
    assert why is None and finished == list(range(len(jobs)))
    for program, job, run in zip(programs, jobs, runs):
        report = judge(program, model_outcomes(program), dict(run.counts))
        assert run.launches == 2 and report.instances == 2 * job.launches[0].layout.instances, program.name
        assert report.unsound == [] and report.weak_seen == [], program.name
    assert set(runs[1].counts) == {(2,)}  # CoWW: x read at its home is always 2


def test_a_spent_budget_starts_no_further_test_and_says_so():
    from syncverify.litmus.gpu.ranks import run_on_one_device

    jobs = [prepare(shape(name), StressParams(), iterations=1, seconds=30, interpret=True) for name in ("MP", "SB")]
    runs, why = run_on_one_device(jobs, interpret=True, budget=0.0)
    assert runs == [None, None] and why == "the budget of 0 s was spent before this test started"
