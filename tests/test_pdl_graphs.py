"""Programmatic dependent launch read from the user's kernel, and CUDA-graph capture in the harness
(issue 27). ``griddepcontrol.launch_dependents`` / ``griddepcontrol.wait`` (Triton's
``tl.extra.cuda.gdc_launch_dependents()`` / ``gdc_wait()``, inline PTX) are read where the kernel
runs them and given their ISA meaning; ``sv.graph()`` captures launches and ``g.replay()`` issues
them again as calls with memory carried over. Known answers on the examples (NVIDIA/TensorRT-LLM
#14537, lightseekorg/tokenspeed #351), the no-op outside PDL, and one-line refusals."""

from __future__ import annotations

import pytest
import torch

import syncverify
from syncverify.frontend.asm import read_inline_asm
from syncverify.frontend.harness import HarnessError, run_harness
from syncverify.program import GDC_PLACEHOLDER, PDL_TRIGGER, Store
from tests.sequential_harness import EXAMPLES, example_module

HARNESSES = EXAMPLES / "residency" / "harness.py"
with example_module("residency") as _h:
    FAIR = dict(_h.EXPECTED_FAIR)
with example_module("residency", "spin_grid") as spin_grid:
    KERNELS = spin_grid


def _check(target, **options):
    return syncverify.check_kernel(target, world_size=1, threads_per_cta=1, timeout=120, **options)


def _locations(result) -> set[str]:
    return {ins.loc for th in result.lifted.program.threads for ins in th.instructions if isinstance(ins, Store)}


def test_tritons_gdc_asm_is_read_as_grid_dependency_items():
    """Triton 3.6's strings (``// dummy $0`` included) and the bare PTX give one ``gdc`` item each."""
    for asm, op in (("griddepcontrol.wait; // dummy $0", "wait"),
                    ("griddepcontrol.launch_dependents; // dummy $0", "launch_dependents"),
                    ("griddepcontrol.wait;", "wait")):
        items = read_inline_asm(asm, "k.py:1", ("k.py", 1))
        assert [(i.kind, i.op) for i in items] == [("gdc", op)]


def test_trtllm_14537_visibility_from_launch_dependents_is_unsafe_and_gdc_wait_is_safe():
    """The copy launched with ``launch_pdl=True`` after a primary that writes then triggers: without
    ``gdc_wait()`` it reads what the primary may not have written (race, unwritten-read); with it,
    SAFE, even with one CTA slot."""
    bad = _check(f"{HARNESSES}::pdl_copy_no_wait", fair=True)
    assert bad.safe is False and sorted(bad.violations) == ["race", "unwritten-read"]
    good = _check(f"{HARNESSES}::pdl_copy", fair=True)
    assert good.safe is True
    assert _check(f"{HARNESSES}::pdl_copy", resident=1).safe is True
    # read from the kernels, where they stand: the primary's trigger after its store, the wait first
    primary = next(th for th in good.lifted.program.threads if "write_then_trigger" in str(th.role))
    kinds = [type(ins).__name__ for ins in primary.instructions]
    trigger = next(i for i, ins in enumerate(primary.instructions)
                   if isinstance(ins, Store) and ins.loc.startswith(PDL_TRIGGER))
    assert "Store" in kinds[:trigger] and trigger < len(kinds) - 1  # data stored first, completion add last
    assert not set(GDC_PLACEHOLDER.values()) & _locations(good)


def _stream_ordered_gdc(sv):
    """The same two kernels in stream order (no PDL): the kernels' griddepcontrol means nothing."""
    data, out = sv.heap.zeros((1,), torch.int32), sv.heap.zeros((1,), torch.int32)
    sv.launch(KERNELS.write_then_trigger_kernel, (1,), data.on(0), rank=0)
    sv.launch(KERNELS.dependent_copy_kernel, (1,), data.on(0), out.on(0), rank=0, WAIT=True)
    sv.synchronize(rank=0)
    sv.expect_written(out.on(0))


def test_griddepcontrol_outside_a_programmatic_launch_is_a_no_op():
    result = _check(_stream_ordered_gdc)
    assert result.safe is True and result.lifted.program.pdl == ()
    assert not {loc for loc in _locations(result) if loc.startswith(("pdl.", PDL_TRIGGER))}


def _declared_wait(sv):
    data, out = sv.heap.zeros((1,), torch.int32), sv.heap.zeros((1,), torch.int32)
    sv.launch(KERNELS.write_then_trigger_kernel, (1,), data.on(0), rank=0)
    sv.launch(KERNELS.dependent_copy_kernel, (1,), data.on(0), out.on(0), rank=0, WAIT=False, pdl=True, pdl_wait=True)
    sv.synchronize(rank=0)
    sv.expect_written(out.on(0))


def test_a_declared_pdl_wait_still_works_and_is_listed():
    result = _check(_declared_wait)
    assert result.safe is True
    assert any("declared pdl_wait=True" in a for a in result.assumptions)


@pytest.mark.parametrize("name", sorted(FAIR))
def test_graph_replays_carry_the_counter_over(name):
    """tokenspeed #351: the counter nothing resets satisfies replay 1's wait with replay 0's count."""
    safe, kinds = FAIR[name]
    result = _check(f"{HARNESSES}::{name}")
    assert result.safe is safe, result.text()
    assert sorted(result.violations) == sorted(kinds)
    if not safe:
        assert "in call 1, but can read what call 0 wrote" in result.violations["stale-read"].explanation


def _replay_twice_then(action):
    def harness(sv):
        data = sv.heap.zeros((1,), torch.int32)
        with sv.graph() as g:
            sv.launch(KERNELS.write_then_trigger_kernel, (1,), data.on(0), rank=0)
        g.replay(2)
        action(sv, g, data)
    return harness


def test_each_replay_is_one_more_call_of_the_captured_launches():
    sv = run_harness(_replay_twice_then(lambda sv, g, data: None), 1, 1)
    assert [(op.kind, op.call) for op in sv.ops] == [("launch", 0), ("launch", 1)]


@pytest.mark.parametrize(("action", "message"), [
    (lambda sv, g, data: g.replay(0), "give a positive number"),
    (lambda sv, g, data: g.__enter__(), "captured once"),
])
def test_graph_misuse_is_one_line(action, message):
    with pytest.raises(HarnessError, match=message):
        run_harness(_replay_twice_then(action), 1, 1)


def test_a_synchronize_inside_a_capture_and_a_replay_before_it_ends_are_refused():
    def sync_inside(sv):
        with sv.graph():
            sv.synchronize(rank=0)

    def replay_inside(sv):
        with sv.graph() as g:
            g.replay()

    with pytest.raises(HarnessError, match="synchronize inside the graph capture"):
        run_harness(sync_inside, 1, 1)
    with pytest.raises(HarnessError, match="not captured yet"):
        run_harness(replay_inside, 1, 1)


def test_pdl_wait_without_pdl_is_refused():
    def harness(sv):
        data, out = sv.heap.zeros((1,), torch.int32), sv.heap.zeros((1,), torch.int32)
        sv.launch(KERNELS.dependent_copy_kernel, (1,), data.on(0), out.on(0), rank=0, WAIT=False, pdl_wait=True)

    with pytest.raises(HarnessError, match="pdl_wait=True needs pdl=True"):
        run_harness(harness, 1, 1)


@pytest.mark.parametrize("name", ["graph_counter_reset", "pdl_copy"])
def test_the_stress_engine_runs_graphs_pdl_and_residency_harnesses(name):
    """``syncverify stress FILE.py`` takes the same harness API: ``sv.resident`` (the device has its
    own residency), ``sv.graph()`` replays, ``launch_pdl`` (Triton's option on the GPU; the
    interpreter runs launches one after another) and ``gdc_*`` (no-ops in the interpreter)."""
    from syncverify.frontend.user_stress import StressOptions, run_stress

    result = run_stress(StressOptions(f"{HARNESSES}::{name}", world_size=1, interpret=True, iterations=1,
                                      delays="none"))
    assert result.clean, result.failures[:1]
