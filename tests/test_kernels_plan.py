"""syncverify.kernels.plan and syncverify.kernels.config: the one protocol object becomes the kernels' constexprs;
what the kernels cannot run is refused on the host with one line."""

from __future__ import annotations

import pytest

from syncverify.kernels.config import KernelConfig, check_config
from syncverify.kernels.errors import StressConfigError, UnsupportedStep
from syncverify.kernels.plan import FIELDS, STEP_DEFAULTS, build_plan, make_step, signal_plan, step_dict, wait_plan
from syncverify.protocols import builtin_names, load_protocol
from syncverify.errors import SyncVerifyError


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_has_one_plan_step_per_protocol_step(name):
    protocol = load_protocol(name)
    plan = build_plan(protocol, world_size=4)
    assert [s[0] for s in plan.signal] == [s.op for s in protocol.signal]
    assert [s[0] for s in plan.wait] == [s.op for s in protocol.wait]
    assert plan.signal == signal_plan(protocol, world_size=4)
    assert plan.wait == wait_plan(protocol, world_size=4)
    assert all(len(step) == len(FIELDS) for step in plan.signal + plan.wait)
    assert plan.locks == protocol.locks


def test_a_step_is_built_by_field_name_and_unknown_fields_are_refused():
    poll = make_step(op="await", read="atomic_add", sem="acquire", scope="sys", source="self", until=">=")
    assert step_dict(poll) == dict(STEP_DEFAULTS, op="await", read="atomic_add", sem="acquire",
                                   scope="sys", source="self", until=">=")
    assert tuple(step_dict(poll)) == FIELDS
    with pytest.raises(TypeError, match="'from_' is not a step field"):
        make_step(op="await", from_="each")
    plan = build_plan(load_protocol("epoch-flag"), world_size=2)
    assert all(make_step(**step_dict(s)) == s for s in plan.signal + plan.wait)


def test_expressions_without_epoch_become_constants_at_the_world_size():
    skip_self = build_plan(load_protocol("add-counter-skip-self"), world_size=4)
    cas = step_dict(skip_self.wait[1])
    assert (cas["read"], cas["compare"], cas["value"], cas["until"], cas["target"]) == (
        "atomic_cas", ("c", 4), ("c", 0), ">=", ("c", 4))
    assert skip_self.runtime_values(epoch=7) == (7,)


def test_epoch_expressions_are_runtime_slots_evaluated_per_launch():
    plan = build_plan(load_protocol("epoch-flag"), world_size=3)
    assert step_dict(plan.wait[0])["target"] == ("r", 1)
    assert [plan.runtime_values(epoch=e) for e in range(3)] == [(0, 3), (1, 6), (2, 9)]


def test_locks_are_indexed_in_first_seen_order():
    plan = build_plan(load_protocol("xchg-flag"), world_size=2)
    assert plan.locks == ("local", "ready")
    assert [step_dict(s)["lock"] for s in plan.signal[1:]] == [0, 1]


@pytest.mark.parametrize("name", ["xchg-flag", "epoch-flag", "release-xchg-cas-acquire"])
def test_int8_locks_with_atomics_are_refused_at_build_time(name):
    with pytest.raises(UnsupportedStep, match="needs 32-bit locks.*--lock-dtype int32"):
        build_plan(load_protocol(name), world_size=2, lock_dtype="int8")


def test_int8_locks_without_atomics_are_accepted():
    assert not build_plan(load_protocol("wt-cv-flag"), world_size=2, lock_dtype="int8").uses_atomics


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(k=1000, world_size=3), "does not divide into --world-size=3"),
        (dict(k=1024, world_size=2, block_k=48), "power of two"),
        (dict(m=1000), "--m=1000 is not a multiple of --block-m=128"),
        (dict(kernel="all-scatter", n=1000, world_size=3), "does not divide into --world-size=3 column blocks"),
        (dict(world_size=9), "1..8"),
        (dict(kernel="all-gather"), "--kernel='all-gather' is not one of 'all-reduce', 'all-scatter'"),
        (dict(order="consumers-first"), "interpreter schedule"),
    ],
)
def test_bad_configurations_get_one_line_naming_the_option(changes, message):
    with pytest.raises(StressConfigError, match=message) as info:
        check_config(KernelConfig(**changes))
    assert "\n" not in str(info.value)
    assert isinstance(info.value, SyncVerifyError)


def test_more_ranks_than_gpus_and_a_grid_that_cannot_be_resident_are_refused():
    with pytest.raises(StressConfigError, match="needs 4 GPUs and 2 are visible"):
        check_config(KernelConfig(world_size=4, virtual=False, table=True), gpus=2)
    with pytest.raises(StressConfigError, match="exceeds the 132 SMs"):
        check_config(KernelConfig(world_size=8, gemm_sms=16, comm_sms=8), sms=132)
    assert check_config(KernelConfig(world_size=4, gemm_sms=16, comm_sms=8), sms=132)


@pytest.mark.parametrize("module_name", ["gemm_all_reduce", "gemm_all_scatter", "all_gather_gemm",
                                         "gemm_reduce_scatter"])
def test_meta_parameters_are_built_once_per_build_and_handed_out_as_copies(module_name):
    # an eager launch rebuilt every plan step as constexprs and hashed the new objects (host time)
    import importlib

    from syncverify.kernels.build import build

    module = importlib.import_module(f"syncverify.kernels.{module_name}")
    kernel = module_name.replace("gemm_", "").replace("_gemm", "").replace("_", "-")
    kernel = {"all-gather": "all-gather-gemm", "reduce-scatter": "gemm-reduce-scatter"}.get(kernel, kernel)
    config = KernelConfig(kernel=kernel, world_size=2, m=256, n=256, k=256)
    built = build(load_protocol("epoch-flag"), config)
    first, second = module.meta_parameters(built), module.meta_parameters(built)
    assert first == second and first is not second
    assert all(first[name] is second[name] for name in first)  # the same objects: no rebuild
    first["WAIT"] = None  # a caller's copy: the next launch still gets the plan
    assert module.meta_parameters(built)["WAIT"] is second["WAIT"]
    again = build(load_protocol("barrier-fenced-release-acquire"), config)
    assert module.meta_parameters(again)["SIGNAL"] != second["SIGNAL"]
