"""Named barriers end to end: protocol ``barrier`` steps with ``id``/``count`` (loader, model,
kernels, PTX audit, drift), and the litmus language's barrier forms, warnings and hang reports.

Known answers for the barrier semantics themselves are litmus files in ``tests/litmus/known/``
(``bar-*.litmus``), each with the ISA sentence it comes from.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from syncverify.errors import ProtocolError
from syncverify.protocols.lowering import LoweredOp, barrier_ptx, lower_step
from syncverify.litmus.parser import parse_litmus
from syncverify.litmus.runner import run_litmus
from syncverify.program import Barrier
from syncverify.protocols import load_protocol, protocol_from_dict

BASE = load_protocol("barrier-fenced-release-acquire").to_dict()


def with_barrier(**fields) -> dict:
    """barrier-fenced-release-acquire with its signal barrier given ``fields`` (id, count)."""
    data = json.loads(json.dumps(BASE))
    data["name"] = "named-barrier-variant"
    data["signal"][0] = {"op": "barrier", **fields}
    return data


# ----- protocols: loading ----------------------------------------------------------------------

def test_a_barrier_step_takes_an_id_and_a_count():
    step = protocol_from_dict(with_barrier(id=3, count=256)).signal[0]
    assert (step.op, step.barrier_id, step.count) == ("barrier", 3, 256)
    assert step.to_dict() == {"op": "barrier", "id": 3, "count": 256}
    plain = protocol_from_dict(with_barrier()).signal[0]
    assert (plain.barrier_id, plain.count) == (None, None) and plain.to_dict() == {"op": "barrier"}


@pytest.mark.parametrize(("fields", "phrase"), [
    ({"id": 16}, "id=16 must be a named barrier, an integer 0 to 15"),
    ({"id": "one"}, "id='one' must be a named barrier"),
    ({"count": 100}, "count=100 must be a positive multiple of 32"),
    ({"count": 0}, "count=0 must be a positive multiple of 32"),
    ({"count": True}, "count=True must be a positive multiple of 32"),
    ({"id": 1, "count": 128}, "count=128 is smaller than the 256 threads that execute the step (every warp of the CTA)"),
])
def test_a_bad_barrier_id_or_count_is_one_line_naming_it(fields, phrase):
    with pytest.raises(ProtocolError) as info:
        protocol_from_dict(with_barrier(**fields))
    assert phrase in str(info.value) and "\n" not in str(info.value)


def test_a_bad_barrier_count_in_a_file_exits_2_with_one_line(tmp_path, capsys):
    from syncverify.cli import main

    text = Path(load_protocol("barrier-fenced-release-acquire").path).read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace('op = "barrier"', 'op = "barrier"\ncount = 48', 1))
    assert main(["check", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.toml:12: signal step 1: " in err[0] and "count=48" in err[0] and "Traceback" not in err[0]


# ----- protocols: lowering and the model ---------------------------------------------------------

def test_a_named_barrier_lowers_to_bar_sync_id_count_on_every_thread():
    step = protocol_from_dict(with_barrier(id=1, count=256)).signal[0]
    assert lower_step(step) == (LoweredOp("bar", "all", barrier_id=1, count=256),)
    assert barrier_ptx(lower_step(step)) == "bar.sync 1, 256;"
    assert barrier_ptx(lower_step(protocol_from_dict(with_barrier()).signal[0])) == ""


def test_a_barrier_for_the_whole_cta_keeps_the_protocol_safe():
    import syncverify

    for fields in ({}, {"id": 2}, {"id": 2, "count": 256}):
        assert syncverify.check_protocol(protocol_from_dict(with_barrier(**fields)), world_size=2).safe is True


def test_a_barrier_for_half_the_cta_does_not_order_the_other_half_and_is_unsafe():
    # ISA: "Operand b specifies the number of threads participating in the barrier": warps 0-3
    # (128 threads) synchronize, so warps 4-7's tile stores are not ordered before the release
    # fence and signal of thread 0.
    import syncverify

    result = syncverify.check_protocol(protocol_from_dict(with_barrier(id=1, count=128, warps="0-3")), world_size=2)
    assert result.safe is False and "unwritten-read" in result.violations


def test_the_model_program_carries_the_id_and_the_count_in_model_threads():
    from syncverify.scenarios.build import ScenarioOptions, build

    program = build(protocol_from_dict(with_barrier(id=1, count=128, warps="0-3")), ScenarioOptions(world_size=2)).program
    bars = {(str(t.role.thread), i.barrier_id, i.count) for t in program.threads for i in t.instructions
            if isinstance(i, Barrier) and "signal" in i.label}
    assert bars == {("0", 1, 1)}  # 2 model threads per CTA, 4 warps each: thread 0 alone takes part


def test_model_threads_are_raised_until_a_warp_selection_is_whole_threads():
    from syncverify.scenarios.build import ScenarioOptions, build

    scenario = build(protocol_from_dict(with_barrier(id=1, warps="0-1", count=64)), ScenarioOptions(world_size=2))
    assert scenario.options.threads_per_cta == 4
    assert any("4 model threads per CTA (2 asked), each standing for 2 of the kernels' 8 warps" in n
               for n in scenario.notes)


# ----- protocols: the kernels --------------------------------------------------------------------

def test_the_compiled_kernel_runs_the_named_barrier_the_model_assumes():
    pytest.importorskip("triton")
    from syncverify.kernels.audit import audit, protocol_ops

    protocol = protocol_from_dict(with_barrier(id=1, count=256))
    assert audit(protocol, "signal") == []
    bars = [op.op for op in protocol_ops(protocol, "signal") if op.kind == "bar"]
    assert "1,256" in bars


def test_the_audit_catches_a_barrier_compiled_with_another_id():
    pytest.importorskip("triton")
    from syncverify.kernels.audit import audit

    protocol = protocol_from_dict(with_barrier(id=1, count=256))

    def wrong(step):
        low = lower_step(step)
        return (LoweredOp("bar", "all", barrier_id=2, count=256),) if step.op == "barrier" else low

    problems = audit(protocol, "signal", lower=wrong)
    assert problems and "signal step 1 (barrier)" in problems[0]


def test_the_interpreted_kernel_traces_the_named_barrier_as_the_model_has_it():
    pytest.importorskip("triton")
    from syncverify.kernels import drift
    from syncverify.scenarios.build import ScenarioOptions, build

    protocol = protocol_from_dict(with_barrier(id=3, count=256))
    ops, timed_out = drift.trace_kernel(protocol, "all-reduce", 2, epochs=1)
    model = drift.model_ops(build(protocol, ScenarioOptions(world_size=2, symmetry=False)))
    assert drift.compare(model, ops, timed_out=timed_out) == []
    assert any(op.kind == "bar" and op.op == "3" for seq in ops.values() for op in seq)


# ----- litmus: forms, warnings, hang reports -----------------------------------------------------

def litmus(body: str, threads: int = 2, init: str = "x=0;") -> str:
    head = " | ".join(f"P{i}@cta 0,gpu 0" for i in range(threads)) + " ;"
    return f"PTX t\n{{ {init} }}\n {head}\n{body}\nexists (x == 0)\n"


def test_dartagnan_barrier_forms_read_with_dartagnans_meaning_and_warn_once():
    program = parse_litmus(litmus(" bar.cta.sync 1, 4, 2 | bar.cta.sync 1, 4, 2 ;\n bar.cta.arrive 7 | bar.cta.sync 1, r2 ;"))
    p0, p1 = (t.instructions for t in program.threads)
    assert p0 == (Barrier("sync", 4, 2), Barrier("arrive", 7))
    assert p1 == (Barrier("sync", 4, 2), Barrier("sync", "r2"))
    rules = [w.split("(PTX ISA: ")[1] for w in program.warnings]
    assert len(rules) == len(set(rules)) == 4  # operand order, arrive count, warp multiple, all threads
    assert all(w.startswith("<string>:") and ": warning: " in w for w in program.warnings)


def test_isa_barrier_forms_keep_the_isa_meaning():
    program = parse_litmus(litmus(" bar.sync 1, 64 | barrier.cta.sync.aligned 1, 64 ;\n"
                                  " bar.red.popc.u32 r0, 2, !r1 | barrier.red.and.pred r0, 2, 64, 1 ;"))
    p0, p1 = (t.instructions for t in program.threads)
    assert p0 == (Barrier("sync", 1, 64), Barrier("red", 2, None, op="popc", dst="r0", predicate="r1", negate=True))
    assert p1 == (Barrier("sync", 1, 64), Barrier("red", 2, 64, op="and", dst="r0", predicate=1))
    assert program.warnings == ()


def test_red_acq_rel_is_accepted_with_one_warning_naming_the_isa_rule():
    program = parse_litmus(litmus(" red.acq_rel.gpu.add x, 1 | red.acquire.gpu.add x, 1 ;"))
    assert len(program.warnings) == 1 and "red{.sem}: .sem = { .relaxed, .release }" in program.warnings[0]


def test_a_register_barrier_id_out_of_range_names_the_thread(capsys, tmp_path):
    from syncverify.cli import main

    path = tmp_path / "bad.litmus"
    path.write_text(litmus(" bar.sync r1 | bar.sync 0 ;", init="x=0; P0:r1=20;"))
    assert main(["litmus", str(path)]) == 2
    err = capsys.readouterr().err
    assert "thread P0" in err and "barrier id r1 is 20" in err and "Traceback" not in err


def test_json_says_which_thread_hangs_on_which_barrier(tmp_path, capsys):
    from syncverify.cli import main

    path = tmp_path / "hang.litmus"
    path.write_text(litmus(" st.weak x, 1 | bar.sync 0, 3 ;\n bar.sync 0, 3 | ld.weak r0, x ;"))
    assert main(["litmus", "--json", str(path)]) == 0
    (verdict,) = json.loads(capsys.readouterr().out)
    assert verdict["can_hang"] is True
    assert {(h["thread"], h["on"], h["barrier"], h["count"], h["arrived"]) for h in verdict["hangs"]} == {
        ("P0", "barrier", 0, 3, 2), ("P1", "barrier", 0, 3, 2)}


def test_json_says_which_thread_spins_forever_and_on_what(tmp_path, capsys):
    from syncverify.cli import main

    path = tmp_path / "spin.litmus"
    path.write_text("PTX s\n{ f=0; }\n P0@cta 0,gpu 0 ;\n L0: ;\n ld.relaxed.gpu r0, f ;\n beq r0, 0, L0 ;\n"
                    "exists (f == 0)\n")
    assert main(["litmus", "--json", str(path)]) == 0
    (verdict,) = json.loads(capsys.readouterr().out)
    assert verdict["hangs"] == [{"thread": "P0", "on": "spin", "reads": [{"location": "f", "value": 0}]}]


def test_a_filter_drops_executions_before_counting():
    text = ("PTX f\n{ x=0; }\n P0@cta 0,gpu 0 | P1@cta 1,gpu 0 ;\n st.relaxed.gpu x, 1 | ld.relaxed.gpu r0, x ;\n"
            "locations [x; P1:r0;]\nfilter (P1:r0 == 1)\nexists (P1:r0 == 0)\n")
    verdict = run_litmus(parse_litmus(text))
    assert (verdict.positive, verdict.negative) == (0, 1)


def test_dartagnan_register_moves_and_comparisons():
    text = ("PTX m\n{ x=0; }\n P0@cta 0,gpu 0 ;\n ld r1, 6 ;\n mul r2, r1, 7 ;\n div r3, r2, -4 ;\n"
            " bgt r3, -9, LC01 ;\n st.weak x, r3 ;\n LC01: ;\nforall (P0:r3 == -10 /\\ x <= -10 /\\ not (x > 0))\n")
    verdict = run_litmus(parse_litmus(text))
    assert verdict.observation == "Always"
