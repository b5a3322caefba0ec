"""Warp-specialized barrier steps (``warps``, ``arrive``) end to end: the language and its refusals,
the model's threads per warp and its verdicts on the FlashAttention-3 epilogue handoff and its two
broken siblings, and the kernels' predicated inline PTX (plan, PTX audit, ptxas, interpreter).

The verdicts at W = 2 are also pinned by ``tests/test_zoo.py`` (every zoo file), the drift between
the model and the interpreted kernels by ``tests/test_drift.py`` (every zoo file), the compiled PTX
against the lowering by ``tests/test_ptx_audit.py`` (every zoo file); the GPU runs are
``tests/gpu/test_gpu_warp_barriers.py``.
"""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncverify.protocols import lowering

from syncverify.protocols import rules
from syncverify.errors import ProtocolError, ScenarioError
from syncverify.protocols.lowering import LoweredOp, barrier_ptx, lower_step
from syncverify.program import Barrier
from syncverify.protocols import load_protocol, protocol_from_dict
from syncverify.scenarios.build import ScenarioOptions, build

SAFE = "fa3-epilogue-named-barrier"
SWAPPED = "fa3-epilogue-signal-warp-arrives"
ONE_WARPGROUP = "fa3-epilogue-one-warpgroup-barrier"


def with_barrier(**fields) -> dict:
    """The safe handoff with its barrier step given ``fields`` instead."""
    data = json.loads(json.dumps(load_protocol(SAFE).to_dict()))
    data["name"] = "warp-barrier-variant"
    data.pop("zoo")
    data["signal"][0] = {"op": "barrier", **fields}
    return data


# ----- the language ----------------------------------------------------------------------------

def test_a_warp_selection_reads_back_as_written():
    step = load_protocol(SAFE).signal[0]
    assert (step.barrier_id, step.count, step.warps, step.arrive) == (1, 256, None, (1, 2, 3, 4, 5, 6, 7))
    assert step.to_dict() == {"op": "barrier", "id": 1, "count": 256, "arrive": "1-7"}
    group = protocol_from_dict(with_barrier(id=2, warps="3,0-2", arrive=2)).signal[0]
    assert (group.warps, group.arrive, group.count) == ((0, 1, 2, 3), (2,), None)
    assert group.to_dict() == {"op": "barrier", "id": 2, "warps": "0-3", "arrive": "2"}
    assert protocol_from_dict(with_barrier(id=1, warps="0-7")).signal[0].warps is None  # every warp: the plain form


@pytest.mark.parametrize(("fields", "phrase"), [
    ({"id": 1, "arrive": "1-7", "count": 100}, "count=100 must be a positive multiple of 32"),
    ({"id": 1, "warps": "0-3", "count": 64},
     "count=64 is smaller than the 128 threads that execute the step (warps 0-3)"),
    ({"id": 1, "arrive": "1-7", "count": 128},
     "count=128 is smaller than the 256 threads that execute the step (every warp of the CTA)"),
    ({"id": 1, "warps": "0-3", "count": 256}, "count=256 is larger than the 128 threads"),
    ({"id": 1, "arrive": "0-7"}, "every warp that executes the step only arrives"),
    ({"id": 1, "warps": "0-3", "arrive": "0-3"}, "every warp that executes the step only arrives"),
    ({"id": 1, "warps": "0-3", "arrive": "5"}, "arrive='5' names warp 5, which does not execute the step (warps 0-3)"),
    ({"id": 16, "arrive": "1-7"}, "id=16 must be a named barrier, an integer 0 to 15"),
    ({"arrive": "1-7"}, "needs an id from 1 to 15: barrier 0 is Triton's own bar.sync 0"),
    ({"id": 0, "warps": "0-3"}, "needs an id from 1 to 15"),
    ({"id": 1, "warps": "4-7"}, "warps='4-7' leaves out warp 0"),
    ({"id": 1, "warps": "0-8"}, "warps='0-8' names warp 8; the kernels' CTA has 8 warps, 0 to 7"),
    ({"id": 1, "warps": "3-1"}, "the range 3-1 runs backwards"),
    ({"id": 1, "arrive": [1, 2]}, "arrive=[1, 2] must be a warp (0 to 7) or a string of warps and ranges"),
    ({"id": 1, "arrive": "1-"}, "must be a warp (0 to 7) or a string of warps and ranges"),
])
def test_a_bad_warp_selection_is_one_line_naming_the_step(fields, phrase):
    with pytest.raises(ProtocolError) as info:
        protocol_from_dict(with_barrier(**fields))
    message = str(info.value)
    assert message.startswith("<dict>: signal step 1: ") and phrase in message and "\n" not in message


def test_a_bad_warp_selection_in_a_file_exits_2_with_one_line_naming_its_line(tmp_path, capsys):
    from syncverify.cli import main

    text = Path(load_protocol(SAFE).path).read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("count = 256", "count = 128", 1))
    line = next(n for n, row in enumerate(bad.read_text().splitlines(), 1) if row.startswith("count = 128"))
    assert main(["check", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"bad.toml:{line}: signal step 1: count=128 is smaller" in err[0]
    assert "Traceback" not in err[0]


def test_two_barrier_steps_sharing_a_selected_barriers_id_are_refused_naming_both():
    data = with_barrier(id=1, arrive="1-7")
    data["signal"].insert(1, {"op": "barrier", "id": 1})
    with pytest.raises(ProtocolError, match=r"signal step 2: barrier id 1 is also used by signal step 1; a barrier "
                                            r"step that selects warps"):
        protocol_from_dict(data)
    data["signal"][1] = {"op": "barrier", "id": 2}  # another id: fine
    assert protocol_from_dict(data).signal[1].barrier_id == 2


def test_the_comm_cta_of_all_scatter_refuses_one_selected_barrier_id_in_two_protocols():
    # the comm CTA runs the protocol's wait (here with a warp-selected barrier 1) and the push
    # protocol's signal (the safe handoff: barrier 1 too); each file alone is fine
    data = with_barrier(id=1)
    data["signal"] = data["signal"][1:]
    data["wait"].append({"op": "barrier", "id": 1, "warps": "0-3"})
    protocol = protocol_from_dict(data)
    with pytest.raises(ScenarioError, match="all-scatter's comm CTA runs warp-barrier-variant wait step 2 and "
                                            "fa3-epilogue-named-barrier signal step 1, both on barrier 1"):
        build(protocol, ScenarioOptions(scenario="all-scatter", push=SAFE))
    pytest.importorskip("triton")
    from syncverify.kernels.build import build as build_kernel
    from syncverify.kernels.config import KernelConfig
    from syncverify.kernels.errors import UnsupportedStep

    with pytest.raises(UnsupportedStep, match="comm CTA runs .* both on barrier 1"):
        build_kernel(protocol, KernelConfig(kernel="all-scatter", world_size=2, m=256, n=512, k=256),
                     push=load_protocol(SAFE))


# ----- the model -------------------------------------------------------------------------------

warp_sets = st.sets(st.integers(0, rules.KERNEL_WARPS - 1), min_size=1).map(lambda s: tuple(sorted(s)))


@settings(max_examples=200, deadline=None)
@given(asked=st.integers(1, rules.KERNEL_WARPS), selections=st.lists(warp_sets, max_size=3))
def test_model_threads_per_cta_are_the_fewest_from_those_asked_that_give_each_selection_whole_threads(asked,
                                                                                                      selections):
    threads = rules.model_threads_per_cta(asked, selections)

    def whole(t: int) -> bool:
        shares = [set(rules.model_warps(i, t)) for i in range(t)]
        return all(share <= set(s) or not share & set(s) for s in selections for share in shares)

    if not selections:
        assert threads == asked
        return
    assert threads >= asked and rules.KERNEL_WARPS % threads == 0 and whole(threads)
    assert not any(whole(t) for t in rules.WARP_GROUPINGS if asked <= t < threads)
    assert sorted(w for i in range(threads) for w in rules.model_warps(i, threads)) == list(rules.ALL_WARPS)


def test_in_the_handoff_warp_0_waits_and_every_other_warp_arrives_once():
    scenario = build(load_protocol(SAFE), ScenarioOptions(world_size=2))
    assert scenario.options.threads_per_cta == 8  # warps 1-7 need one model thread per warp
    assert any(note.startswith("threads: 8 model threads per CTA (2 asked)") for note in scenario.notes)
    parts = {}
    for thread in scenario.program.threads:
        if thread.role.role == "producer":
            bars = [(i.kind, i.barrier_id, i.count) for i in thread.instructions
                    if isinstance(i, Barrier) and i.label != lowering.DOT_LABEL]  # not the GEMM's bar.sync 0
            parts[thread.role.thread] = bars
    assert parts[0] == [("sync", 1, 8)]
    assert all(parts[t] == [("arrive", 1, 8)] for t in range(1, 8))


def test_one_warpgroups_barrier_keeps_two_model_threads_and_the_second_skips_it():
    scenario = build(load_protocol(ONE_WARPGROUP), ScenarioOptions(world_size=2))
    assert scenario.options.threads_per_cta == 2 and not any(n.startswith("threads:") for n in scenario.notes)
    by_thread = {t.role.thread: [(i.kind, i.count) for i in t.instructions if isinstance(i, Barrier)
                                 and "signal" in i.label]
                 for t in scenario.program.threads if t.role.role == "producer"}
    assert by_thread == {0: [("sync", 1)], 1: []}


@pytest.mark.parametrize("world_size", [2, 4])
@pytest.mark.parametrize(("name", "expected"), [
    (SAFE, "safe"), (SWAPPED, "race, unwritten-read"), (ONE_WARPGROUP, "race, unwritten-read"),
])
def test_the_model_proves_the_handoff_and_refutes_its_broken_siblings(name, expected, world_size):
    from syncverify.verdicts.check import check

    result = check(build(load_protocol(name), ScenarioOptions(world_size=world_size)), timeout=120)
    assert result.safe is not None
    assert ("safe" if result.safe else ", ".join(sorted(result.violations))) == expected


@pytest.mark.parametrize(("name", "phrase"), [
    (SWAPPED, "at signal step 1 (barrier 1) the signalling thread only arrives: bar.arrive waits for nothing"),
    (ONE_WARPGROUP, "that thread's warps do not take part in signal step 1 (barrier 1, which the signalling thread "
                    "waits at)"),
])
def test_each_counterexample_names_the_barrier_step_that_fails_the_tile(name, phrase):
    from syncverify.verdicts.causes import cause
    from syncverify.verdicts.check import check_protocol

    result = check_protocol(name, world_size=2)
    for violation in result.violations.values():
        found = cause(violation, result.scenario)
        assert found.kind == "no-cta-barrier" and phrase in found.text
        # the signal the barrier fails to order, and the barrier step, with its line in the file
        assert [ref.name for ref in found.steps] == ["signal step 2", "signal step 1"]
        assert found.steps[1].where.endswith(f"{name}.toml:{load_protocol(name).signal[0].line}")


def test_the_safe_handoff_is_safe_in_every_scenario():
    import syncverify

    for scenario in ("all-scatter", "all-gather-gemm", "gemm-reduce-scatter"):
        assert syncverify.check_protocol(SAFE, scenario=scenario, world_size=2).safe is True, scenario
        assert syncverify.check_protocol(SWAPPED, scenario=scenario, world_size=2).safe is False, scenario


def test_the_rules_and_lowering_examples_hold():
    for module in (rules, lowering):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, module.__name__


# ----- the kernels -----------------------------------------------------------------------------

def test_the_handoff_lowers_to_an_arrive_on_warps_1_7_then_a_sync_on_warp_0():
    lowered = lower_step(load_protocol(SAFE).signal[0])
    assert lowered == (LoweredOp("bar", "all", op="arrive", barrier_id=1, count=256, warps=(1, 2, 3, 4, 5, 6, 7)),
                       LoweredOp("bar", "all", barrier_id=1, count=256, warps=(0,)))
    assert [low.bar_operands for low in lowered] == ["arrive 1,256 warps 1-7", "1,256 warps 0"]
    ptx = barrier_ptx(lowered)
    assert "and.b32 w, m, 254; setp.ne.u32 p, w, 0; @p bar.arrive 1, 256;" in ptx
    assert "and.b32 w, m, 1; setp.ne.u32 p, w, 0; @p bar.sync 1, 256;" in ptx
    assert lowering.read_barrier_ptx(ptx) == ("1,256", "sync 0 arrive 1-7")


def test_the_kernel_plan_carries_the_steps_predicated_ptx():
    from syncverify.kernels.plan import FIELDS, build_plan

    plan = build_plan(load_protocol(ONE_WARPGROUP), world_size=2)
    ptx = plan.signal[0][FIELDS.index("barrier")]
    assert ptx == barrier_ptx(lower_step(load_protocol(ONE_WARPGROUP).signal[0]))
    assert "and.b32 w, m, 15; setp.ne.u32 p, w, 0; @p bar.sync 1, 128;" in ptx and "bar.arrive" not in ptx


def test_the_ptx_reader_reads_each_barriers_warps_from_its_predicate():
    from syncverify.kernels.ptx_reader import parse_ptx, sync_ops

    body = barrier_ptx(lower_step(load_protocol(SWAPPED).signal[0]))
    ptx = f".visible .entry k(.param .u64 .ptr .global .align 1 k_param_0)\n.reqntid 256\n{{\n{body}\n}}"
    assert [op.op for op in sync_ops(parse_ptx(ptx), params=["locks"])] == ["arrive 1,256 warps 0", "1,256 warps 1-7"]


def test_the_audit_catches_arrive_and_sync_on_the_wrong_warps():
    pytest.importorskip("triton")
    from syncverify.kernels.audit import audit

    protocol = load_protocol(SAFE)
    assert audit(protocol, "signal") == [] and audit(protocol, "wait") == []

    def swapped(step):
        low = lower_step(step)
        if step.op != "barrier":
            return low
        arrive, sync = low
        return (LoweredOp("bar", "all", op="arrive", barrier_id=1, count=256, warps=sync.warps),
                LoweredOp("bar", "all", barrier_id=1, count=256, warps=arrive.warps))

    problems = audit(protocol, "signal", lower=swapped)
    assert problems and problems[0].startswith("signal step 1 (barrier): the model assumes")
    assert "bar arrive 1,256 warps 1-7" in problems[0]


def test_the_drift_test_sees_warps_that_do_the_other_part():
    pytest.importorskip("triton")
    import dataclasses

    from syncverify.kernels import drift

    protocol = load_protocol(SAFE)
    ops, timed_out = drift.trace_kernel(protocol, "all-reduce", 2, epochs=1)
    model = drift.model_ops(build(protocol, ScenarioOptions(world_size=2, symmetry=False)))
    assert drift.compare(model, ops, timed_out=timed_out) == []
    assert "bar.sync 1 cta [sync 0 arrive 1-7] (all threads)" in [str(op) for op in ops[("producer", 0, 0, 0)]]
    wrong = {key: [dataclasses.replace(op, sem="sync 1-7 arrive 0") if op.kind == "bar" and op.op == "1" else op
                   for op in seq] for key, seq in ops.items()}
    found = drift.compare(model, wrong)
    assert found and "model:  bar.sync 1 cta [sync 0 arrive 1-7] (all threads)" in found[0]
    assert "kernel: bar.sync 1 cta [sync 1-7 arrive 0] (all threads)" in found[0]


@pytest.mark.parametrize("kernel", ["all-reduce", "all-scatter"])
def test_the_fused_kernel_with_a_warp_selected_barrier_compiles_through_ptxas_for_sm90(kernel):
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from syncverify.kernels.compile import compile_like_launch
    from tests.test_kernels_compile import _kernel_and_heap, _launch_args

    c, built, heap, inputs, module, fn = _kernel_and_heap(kernel, SAFE, 2, False, "bf16")
    assert c.num_warps == rules.KERNEL_WARPS
    status = torch.zeros(2, 2 * c.tiles, 4, dtype=torch.int32)
    compiled = compile_like_launch(fn, *_launch_args(built, heap, inputs, status), num_warps=c.num_warps,
                                   num_stages=c.num_stages, **module.meta_parameters(built))
    assert compiled.asm["cubin"]
    ptx = compiled.asm["ptx"]
    assert "@p bar.arrive 1, 256;" in ptx and "@p bar.sync 1, 256;" in ptx


def test_a_gpu_build_of_fewer_warps_than_the_selection_names_is_refused():
    pytest.importorskip("triton")
    from syncverify.kernels.build import build as build_kernel
    from syncverify.kernels.config import KernelConfig
    from syncverify.kernels.errors import UnsupportedStep

    config = dict(kernel="all-reduce", world_size=2, m=256, n=512, k=256)
    with pytest.raises(UnsupportedStep, match="select warps of a 8-warp CTA; build the kernel with num_warps=8"):
        build_kernel(load_protocol(SAFE), KernelConfig(num_warps=4, **config))
    assert build_kernel(load_protocol(SAFE), KernelConfig(num_warps=4, interpret=True, **config)).plan.signal


@pytest.mark.parametrize("kernel", ["all-reduce", "all-scatter"])
def test_the_interpreter_runs_the_handoff_and_every_tile_is_right(kernel):
    # The CPU path: the interpreter runs no barrier (one program at a time), so it shows that the
    # kernels run the steps and validate the tiles, not that the barrier orders anything.
    pytest.importorskip("triton")
    from syncverify.stress.campaign import run_campaign

    result = run_campaign(protocol=SAFE, kernel=kernel, world_size=2, interpret=True, iterations=2, delays="none")
    assert result.clean and result.iterations == 2


SMALL = dict(m=256, n=256, k=256, block_m=64, block_n=64, block_k=64, gemm_sms=4, comm_sms=2, recv_sms=2)


@pytest.mark.parametrize(("kernel", "sizes"), [
    ("all-reduce", SMALL), ("all-reduce", {}), ("all-scatter", SMALL), ("all-scatter", {}),
    ("gemm-reduce-scatter", SMALL), ("gemm-reduce-scatter", {}),
])
def test_no_arriving_warp_can_lap_the_waiting_warp_in_a_persistent_kernel(kernel, sizes):
    # the arriving warps go on at once; every path from one tile's bar.arrive to the next
    # tile's passes a bar.sync 0 of the whole CTA (the GEMM's), which warp 0 reaches only after
    # its phase. The compiled launch refuses a kernel where that fails (refuse_arrive_laps).
    pytest.importorskip("triton")
    from syncverify.kernels.audit import kernel_ptx
    from syncverify.kernels.ptx_reader import arrive_laps
    from syncverify.kernels.build import build as build_kernel
    from syncverify.kernels.config import KernelConfig

    push = load_protocol(SAFE) if kernel == "all-scatter" else None  # the comm CTA's push signal arrives too
    built = build_kernel(load_protocol(SAFE), KernelConfig(kernel=kernel, world_size=2, delays=True, **sizes),
                         push=push)
    ptx = kernel_ptx(built)
    assert ptx.count("@p bar.arrive 1, 256;") == (2 if push else 1)
    assert arrive_laps(ptx) == []


def test_a_loop_that_arrives_twice_without_a_full_barrier_is_found():
    from syncverify.kernels.ptx_reader import arrive_laps

    arrive = barrier_ptx(lower_step(load_protocol(SAFE).signal[0]))
    loop = f"$L__BB0_1:\n\t{arrive}\n\t@%p1 bra \t$L__BB0_1;\n\tret;\n"
    assert arrive_laps(loop) and arrive_laps(loop)[0].startswith("bar.arrive 1 ")
    assert arrive_laps(loop.replace("$L__BB0_1:\n", "$L__BB0_1:\n\tbar.sync \t0;\n")) == []
    assert arrive_laps(loop.replace("@%p1 bra", "// no loop:")) == []


def test_all_gather_gemms_sender_could_lap_and_its_compiled_launch_is_refused():
    # all-gather-gemm's sender copies shards of A, no GEMM: nothing makes the whole CTA meet
    # between two tiles, so a warp that only arrives could arrive for the next tile first
    pytest.importorskip("triton")
    from syncverify.kernels._jit import refuse_arrive_laps
    from syncverify.kernels.audit import kernel_ptx
    from syncverify.kernels.build import build as build_kernel
    from syncverify.kernels.config import KernelConfig
    from syncverify.kernels.errors import UnsupportedStep
    from syncverify.kernels.ptx_reader import arrive_laps

    ptx = kernel_ptx(build_kernel(load_protocol(SAFE), KernelConfig(kernel="all-gather-gemm", world_size=2)))
    assert arrive_laps(ptx)
    with pytest.raises(UnsupportedStep, match="all_gather_gemm_kernel: bar.arrive 1 .* can be reached again without "
                                              "a bar.sync 0 of the whole CTA in between, so a warp that only arrives"):
        refuse_arrive_laps("all_gather_gemm_kernel", ptx)
    refuse_arrive_laps("k", ptx.replace("bar.arrive", "bar.sync"))  # no arrive: nothing to refuse
