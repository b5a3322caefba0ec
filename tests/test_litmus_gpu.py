"""``syncverify litmus --gpu`` without a GPU: the compiler (both forms, and the PTX it emits for
sm_90, compiled here), the interpreter end to end, the report's statistics and MODEL UNSOUND logic
on made-up outcome tables, placement, mutants and the tuning search with a fake runner.

The interpreter runs programs one after another, so it only shows sequentially consistent
outcomes: a MODEL UNSOUND through it is a compiler bug, which is what the end-to-end tests catch.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncverify.cli import main
from syncverify.litmus.gpu import codegen
from syncverify.litmus.gpu.codegen import NotOnGpu, generate
from syncverify.litmus.gpu.layout import make_layout
from syncverify.litmus.gpu.mutants import Mutant, mutants_of, mutation_score
from syncverify.litmus.gpu.outcomes import ModelOutcomes, model_outcomes
from syncverify.litmus.gpu.report import INTERPRETER_NOTE, judge, text, wilson
from syncverify.litmus.gpu.shapes import classic_tests, shape_test
from syncverify.litmus.gpu.stress import StressParams, load_tuned
from syncverify.litmus.gpu.tune import search
from syncverify.litmus.parser import parse_litmus, parse_litmus_file
from syncverify.errors import SyncVerifyError

EXAMPLES = Path(__file__).parent.parent / "syncverify" / "litmus" / "examples"
SHIPPED = sorted(EXAMPLES.glob("*.litmus"))


def example(name: str):
    return parse_litmus_file(EXAMPLES / f"{name}.litmus")


# ----- statistics -----------------------------------------------------------------------------

def test_wilson_matches_published_intervals():
    # Newcombe (1998), Table I: 0/10, 1/10 (method 3, Wilson without correction); 50/100 by hand.
    assert [round(v, 4) for v in wilson(0, 10)] == [0.0, 0.2775]
    assert [round(v, 4) for v in wilson(1, 10)] == [0.0179, 0.4042]
    assert [round(v, 4) for v in wilson(50, 100)] == [0.4038, 0.5962]


@given(st.integers(0, 10_000), st.integers(1, 10_000))
def test_wilson_interval_holds_the_rate_and_stays_in_0_1(count, total):
    count = min(count, total)
    low, high = wilson(count, total)
    assert 0.0 <= low <= count / total <= high <= 1.0


# ----- the report against made-up outcome tables ----------------------------------------------

def test_an_outcome_the_model_forbids_is_model_unsound_exit_1():
    program = example("mp-gpu")
    model = model_outcomes(program)
    report = judge(program, model, {(1, 1): 90, (1, 0): 10}, form="ptx")
    assert [r.outcome for r in report.unsound] == [(1, 0)]
    assert report.exit_code == 1
    assert any("MODEL UNSOUND: P1:r1=1 P1:r2=0 seen 10 times" in line for line in text(report))
    row = next(r for r in report.rows if r.outcome == (1, 0))
    assert row.rate == 0.1 and (round(row.low, 4), round(row.high, 4)) == (0.0552, 0.1744)


def test_an_allowed_target_is_a_weak_outcome_seen_and_exit_0():
    program = example("sb")
    report = judge(program, model_outcomes(program), {(0, 0): 3, (1, 1): 7}, form="ptx")
    assert [r.outcome for r in report.weak_seen] == [(0, 0)]
    assert report.weak_allowed == ((0, 0),)
    assert report.exit_code == 0 and not report.unsound
    assert any("weak outcomes allowed (not SC): P0:r1=0 P1:r2=0; seen: P0:r1=0 P1:r2=0" in line for line in text(report))


def test_an_outcome_missing_from_an_incomplete_model_listing_is_unknown_exit_3():
    program = example("sb")
    model = ModelOutcomes(items=model_outcomes(program).items, allowed=frozenset({(1, 1)}), can_hang=False,
                          barrier_hang=False, limit="max_executions")
    report = judge(program, model, {(0, 1): 1, (1, 1): 1}, form="ptx")
    assert report.exit_code == 3 and not report.unsound and report.unexplained


def test_the_interpreter_report_says_it_cannot_show_weak_outcomes():
    program = example("sb")
    report = judge(program, model_outcomes(program), {(1, 1): 1}, form="interpret")
    assert INTERPRETER_NOTE in text(report)[-1]
    assert report.to_json()["note"] == INTERPRETER_NOTE


def test_sc_outcomes_come_from_the_strengthened_test_and_are_allowed_by_the_model_everywhere():
    """The SC outcomes (the same model on the test with every access strong and fenced) are a
    subset of the allowed ones for every shipped and known test; SB's two zeros are the weak one."""
    from syncverify.litmus.gpu.outcomes import strengthened

    sb = model_outcomes(example("sb"))
    assert sb.allowed - sb.sequential == {(0, 0)}
    assert "fence.sc" not in repr(strengthened(example("sb")).threads[0].instructions[0])  # none before the first
    for path in SHIPPED + sorted((Path(__file__).parent / "litmus" / "known").glob("*.litmus")):
        model = model_outcomes(parse_litmus_file(path), timeout=20)
        if model.sequential is not None and model.limit is None:
            assert model.sequential <= model.allowed, path.name


def test_unknown_sc_outcomes_make_weak_unknown_not_guessed():
    program = example("sb")
    model = model_outcomes(program)
    blind = ModelOutcomes(model.items, model.allowed, False, False, None, sequential=None)
    report = judge(program, blind, {(0, 0): 1}, form="ptx")
    assert report.weak_seen == [] and not report.weak_known
    assert any("weak outcomes: unknown" in line for line in text(report))


# ----- the compiler ---------------------------------------------------------------------------

@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_shipped_example_compiles_in_both_forms_or_is_refused_in_one_line(path):
    program = parse_litmus_file(path)
    two_gpus = len({t.gpu for t in program.threads}) > 1
    for form in codegen.FORMS:
        if two_gpus:  # refused on one GPU, one kernel for every GPU's process across GPUs
            with pytest.raises(NotOnGpu, match="needs 2 GPUs"):
                generate(program, form)
        plan = generate(program, form, cross_gpu=two_gpus)
        compile(plan.source, f"<{path.stem}>", "exec")  # valid Python
        assert ("inline_asm_elementwise" in plan.source) == (form == "ptx")


def test_a_stream_memory_operation_is_refused_naming_the_line():
    program = parse_litmus_file(Path(__file__).parent / "litmus" / "known" / "stream-copy-without-wait.litmus")
    with pytest.raises(NotOnGpu, match=r"stream-copy-without-wait:\d+: stream memory operations \(stream\.\*\) are "
                                       r"not compiled for --gpu"):
        generate(program, "ptx")


def test_a_barrier_id_in_a_register_is_refused_naming_the_line():
    program = parse_litmus_file(Path(__file__).parent / "litmus" / "known" / "bar-register-id-sync.litmus")
    with pytest.raises(NotOnGpu, match=r"bar-register-id-sync:\d+: a barrier id or count in a register"):
        generate(program, "ptx")


def _instructions(ptx: str) -> list[str]:
    """The test's own instructions in ``ptx``: the predicated ones the compiler emitted."""
    return re.findall(r"@%p ((?:ld|st|atom|red|fence|barrier)\.[\w.]+)", ptx)


PTX_CASES = {
    "mp-gpu": ["st.weak.global.b32", "st.release.gpu.global.b32", "ld.acquire.gpu.global.b32", "ld.weak.global.b32"],
    "sb-fence-sc": ["st.relaxed.gpu.global.b32", "fence.sc.gpu", "ld.relaxed.gpu.global.b32"] * 2,
    "warp-specialized-handoff": ["st.weak.global.b32", "st.weak.global.b32", "barrier.arrive", "barrier.arrive",
                                 "barrier.sync", "ld.weak.global.b32", "ld.weak.global.b32"],
    "bar-red-popc": ["barrier.red.popc.u32"] * 3,
}


@pytest.mark.parametrize("name", sorted(PTX_CASES))
def test_the_emitted_ptx_for_sm90_has_each_instruction_with_its_sem_and_scope(name):
    from syncverify.litmus.gpu.launch import ptx_of

    ptx = ptx_of(generate(example(name), "ptx"))
    assert Counter(_instructions(ptx)) >= Counter(PTX_CASES[name])
    assert re.search(r"@%p nanosleep\.u32 %r\d+;", ptx)  # the start jitter, a register per warp
    if name == "warp-specialized-handoff":  # barrier 1 for 3 threads: hardware barrier 1 for 3 warps
        assert "barrier.sync 1, 96;" in ptx and "barrier.arrive 1, 96;" in ptx


def test_atomics_compile_to_atom_and_red_with_their_sem_and_scope():
    from syncverify.litmus.gpu.launch import ptx_of

    program = parse_litmus("""PTX atomics
{ x=0; y=0; }
 P0@cta 0,gpu 0                 | P1@cta 1,gpu 0                   ;
 atom.acq_rel.gpu.add r0, x, 1  | atom.acquire.sys.cas r1, x, 1, 2 ;
 red.release.gpu.add y, 3       | atom.relaxed.cta.exch r2, y, 5   ;
exists (P1:r1 == 1)
""")
    found = _instructions(ptx_of(generate(program, "ptx")))
    for want in ("atom.acq_rel.gpu.global.add.u32", "atom.acquire.sys.global.cas.b32", "red.release.gpu.global.add.u32",
                 "atom.relaxed.cta.global.exch.b32"):
        assert want in found


# ----- the interpreter end to end ---------------------------------------------------------------

TINY = StressParams(test_programs=4, lanes=4, stress_programs=1, stress_iterations=2, pre_stress_iterations=1)


def run_interpreted(name: str, iterations: int = 2):
    from syncverify.litmus.gpu.suite import check_on_device

    return check_on_device(example(name), TINY, iterations=iterations, seconds=30, interpret=True)


@pytest.mark.parametrize("name, only", [
    ("barrier-handshake", {(1, 1)}),
    ("warp-specialized-handoff", {(1, 1)}),
    ("bar-red-popc", {(2, 2, 2)}),
    ("mp-gpu", None),
    ("sb-fence-sc", None),
])
def test_the_interpreter_runs_a_test_end_to_end_and_the_model_explains_every_outcome(name, only):
    report = run_interpreted(name)
    assert report.status == "ran" and report.form == "interpret"
    assert report.exit_code == 0 and not report.unsound
    assert report.instances > 0 and report.launches == 2
    if only is not None:
        assert {r.outcome for r in report.rows} == only


def test_a_spin_that_is_never_released_is_a_timeout_not_a_hang():
    report = run_interpreted("spin-hang")
    assert report.timeouts > 0 and report.exit_code == 0


def test_a_test_the_model_says_can_hang_at_a_barrier_is_refused():
    report = run_interpreted("named-barrier-count-hang")
    assert report.status == "refused" and "waits forever at a CTA barrier" in report.reason
    assert report.exit_code == 2


# ----- the command line -------------------------------------------------------------------------

def test_cli_gpu_json_reports_each_file_and_refuses_a_thread_on_a_gpu_that_does_not_exist(monkeypatch, capsys,
                                                                                           tmp_path):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    stress = tmp_path / "stress.json"
    stress.write_text(json.dumps(TINY.to_json()))
    plot = tmp_path / "rates.png"
    three = tmp_path / "on-gpu-2.litmus"  # the interpreter stands in for two GPUs
    three.write_text((EXAMPLES / "mp-gpu-cross-gpu.litmus").read_text().replace("gpu 1", "gpu 2"))
    code = main(["litmus", "--gpu", "--json", "--iterations", "1", "--stress", str(stress), "--plot", str(plot),
                 str(EXAMPLES / "mp-gpu.litmus"), str(three)])
    captured = capsys.readouterr()
    reports = json.loads(captured.out)
    assert code == 2
    assert [r["status"] for r in reports] == ["ran", "refused"]
    assert reports[0]["exit_code"] == 0 and reports[0]["note"] == INTERPRETER_NOTE
    assert "thread P1 is placed on gpu 2, which does not exist" in reports[1]["reason"]
    assert plot.stat().st_size > 0


def test_cli_gpu_exits_1_on_model_unsound(monkeypatch, capsys):
    from syncverify.litmus.gpu import launch

    def fake_run(program, params, **_):
        run = launch.DeviceRun(name=program.name, form="ptx", items=(), params=params)
        run.counts = Counter({(1, 0): 5, (1, 1): 5})
        run.launches = 1
        return run

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr("syncverify.litmus.gpu.suite.run_on_device", fake_run)
    code = main(["litmus", "--gpu", str(EXAMPLES / "mp-gpu.litmus")])
    captured = capsys.readouterr()
    assert code == 1
    assert "MODEL UNSOUND: P1:r1=1 P1:r2=0 seen 5 times" in captured.out
    assert "MODEL UNSOUND in 1 test(s): MP-gpu" in captured.err


def test_cli_gpu_bad_stress_file_is_one_line_exit_2(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    bad = tmp_path / "bad.json"
    bad.write_text('{"lanes": 64}')
    code = main(["litmus", "--gpu", "--stress", str(bad), str(EXAMPLES / "mp-gpu.litmus")])
    assert code == 2
    assert "lanes=64 is not an integer in [1, 32]" in capsys.readouterr().err


# ----- placement ------------------------------------------------------------------------------

@settings(max_examples=30, deadline=None)
@given(ctas=st.lists(st.integers(1, 4), min_size=1, max_size=3), programs=st.integers(1, 12),
       lanes=st.integers(1, 32), stride=st.integers(1, 40), flags=st.tuples(st.booleans(), st.booleans(), st.booleans()),
       seed=st.integers(0, 1000))
def test_placement_puts_each_instance_thread_once_keeping_ctas_together_and_memory_apart(
        ctas, programs, lanes, stride, flags, seed):
    members, start = [], 0
    for size in ctas:
        members.append(tuple(range(start, start + size)))
        start += size
    warps = 1 << (max(ctas) - 1).bit_length()
    params = StressParams(test_programs=programs, lanes=lanes, location_stride=stride, permute_lanes=flags[0],
                          permute_warps=flags[1], shuffle_locations=flags[2])
    layout = make_layout(tuple(members), warps, 2, params, np.random.default_rng(seed))
    role = layout.role.reshape(layout.test_programs, -1)
    inst = layout.instance.reshape(layout.test_programs, -1)
    where: dict[tuple[int, int], int] = {}
    for p in range(layout.test_programs):
        for lane in np.flatnonzero(inst[p] >= 0):
            key = (int(inst[p, lane]), int(role[p, lane]))
            assert key not in where, "an instance's thread placed twice"
            where[key] = p
            assert role[p, lane] in members[layout.cta_of_program[p]]
    assert len(where) == layout.instances * start  # every thread of every instance, once
    for i in range(layout.instances):
        for c, threads in enumerate(members):
            assert len({where[(i, t)] for t in threads}) == 1  # one CTA of the test: one program
        hosts = [where[(i, threads[0])] for threads in members]
        assert len(set(hosts)) == len(members)  # different CTAs of the test: different programs
    assert len(set(layout.address.tolist())) == layout.address.size
    assert all(a % stride == 0 for a in layout.address.tolist())


# ----- shapes, mutants, tuning ------------------------------------------------------------------

def test_classic_shapes_parse_and_the_model_gives_their_textbook_answers():
    tests = {t.name: parse_litmus(t.text) for t in classic_tests()}
    assert len(tests) == 86

    def target_allowed(name):
        program = tests[name]
        model = model_outcomes(program)
        from syncverify.litmus.gpu.outcomes import is_target

        return any(is_target(program, model.items, o) for o in model.allowed)

    assert target_allowed("MP+relaxed-gpu+diff-cta") and not target_allowed("MP+relacq-gpu+diff-cta")
    assert target_allowed("MP+relacq-cta+diff-cta")  # scope too narrow across CTAs
    assert target_allowed("SB+relacq-gpu+diff-cta") and not target_allowed("SB+fence-gpu+diff-cta")
    assert not target_allowed("MP+bar.sync+same-cta")


def test_mutants_weaken_one_instruction_and_let_the_model_allow_the_target():
    program = parse_litmus(shape_test("MP", "relacq", "gpu", same_cta=False).text)
    changes = sorted(m.change.split(": ", 1)[1] for m in mutants_of(program))
    assert changes == [".gpu -> .cta", ".gpu -> .cta", "acquire.gpu -> relaxed.gpu", "release.gpu -> relaxed.gpu"]
    assert mutants_of(parse_litmus(shape_test("MP", "relaxed", "gpu", same_cta=False).text)) == []


def _fake_runner(seen_when):
    """A check_on_device stand-in: the target is seen when ``seen_when(params, program)``."""
    from syncverify.litmus.gpu.report import judge as judge_table

    def run(program, params, *, model, **_):
        target = next(o for o in model.allowed if __import__("syncverify.litmus.gpu.outcomes", fromlist=["x"])
                      .is_target(program, model.items, o))
        other = next(iter(model.allowed - {target}))
        table = {other: 10, target: 1} if seen_when(params, program) else {other: 10}
        return judge_table(program, model, table, form="ptx")
    return run


def test_mutation_score_counts_the_mutants_whose_target_was_seen():
    program = parse_litmus(shape_test("MP", "relacq", "gpu", same_cta=False).text)
    mutants = mutants_of(program)
    score = mutation_score(mutants, StressParams(), seconds_each=0.0,
                           run=_fake_runner(lambda params, p: "acquire" in p.name))
    assert (score.killed, score.total) == (1, 4) and score.score == 0.25
    assert score.weak_instances == 1 and score.instances == 4 * 10 + 1


def test_the_search_keeps_the_parameters_with_the_best_mutation_score():
    program = parse_litmus(shape_test("SB", "fence", "gpu", same_cta=False).text)
    mutants: list[Mutant] = mutants_of(program)
    good = StressParams(stress_programs=128)
    result = search(mutants, budget_seconds=0.0, seconds_each=0.0, start=[StressParams(), good],
                    run=_fake_runner(lambda params, p: params.stress_programs == 128))
    assert result.best == good and result.best_score.score == 1.0
    assert len(result.tried) == 2


def test_shipped_tuned_parameters_load_and_unknown_keys_are_refused():
    assert isinstance(load_tuned("nvidia-h200"), StressParams)
    with pytest.raises(SyncVerifyError, match="unknown stress parameter"):
        StressParams.from_json({"stride": 3})


KNOWN = sorted((Path(__file__).parent / "litmus" / "known").glob("*.litmus"))


@pytest.mark.slow
def test_every_known_and_classic_test_through_the_interpreter_is_explained_by_the_model():
    """Differential: the interpreter only shows SC outcomes, which the model must all allow, so any
    MODEL UNSOUND here is a compiler bug. CI runs every 6th single-GPU test (about 15 s); with
    SYNCVERIFY_LITMUS_GPU_FULL=1 all 246, those across GPUs in one start of two processes (about
    190 s on a loaded 2-core machine; last run in docs/litmus-gpu.md)."""
    import os

    from syncverify.litmus.gpu.codegen import gpus_needed
    from syncverify.litmus.gpu.suite import check_across_gpus, check_on_device

    programs = [parse_litmus_file(p) for p in KNOWN] + [parse_litmus(t.text) for t in classic_tests()]
    full = os.environ.get("SYNCVERIFY_LITMUS_GPU_FULL") == "1"
    # Tests across GPUs start two processes: all of them in one start with the full run; the
    # default run's slice is tests/test_litmus_gpu_ranks.py's end-to-end test.
    across = [p for p in programs if gpus_needed(p) is not None]
    programs = [p for p in programs if gpus_needed(p) is None]
    programs = programs if full else programs[::6]
    ran = 0
    reports = check_across_gpus(across, TINY, iterations=3, seconds=30, interpret=True) if full else []
    reports += (check_on_device(program, TINY, iterations=3, seconds=30, interpret=True) for program in programs)
    for report in reports:
        if report.status != "ran":
            assert re.search(r"waits forever at a CTA barrier|in a register|the async proxy|NVSHMEM calls|"
                             r"stream memory operations",
                             report.reason), report.reason
            continue
        ran += 1
        assert not report.unsound, report.to_json()
        assert report.exit_code == 0
    assert ran >= (175 if full else 24)


def test_the_wheel_ships_the_gpu_package_and_its_tuned_parameters(tmp_path):
    import subprocess
    import sys
    import zipfile

    pytest.importorskip("setuptools")
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(root)], check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("syncverify-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"syncverify/litmus/gpu/codegen.py", "syncverify/litmus/gpu/tuned.json"} <= names


@pytest.mark.parametrize("args, message", [
    (["--iterations", "3"], "--iterations needs --gpu"),
    (["--gpu", "--graph", "out"], "--graph draws the model's executions; it does not apply to --gpu"),
])
def test_cli_options_of_the_other_mode_are_refused_not_ignored(args, message, capsys):
    code = main(["litmus", *args, str(EXAMPLES / "mp-gpu.litmus")])
    assert code == 2 and message in capsys.readouterr().err
