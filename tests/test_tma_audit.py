"""The PTX audit of the fused kernels' TMA loads (``syncverify.kernels.audit_tma``): compiled for
sm_90 on the CPU, each kernel's tensor-descriptor copies are loads of input operands completed
through an mbarrier whose expected transaction count is one stage's operand boxes (the model's
choice 14: the wait sees every copy); a PTX changed to break each of those is caught."""

from __future__ import annotations

import inspect
import re

import pytest

pytest.importorskip("triton")
pytest.importorskip("torch")

from syncverify.kernels.audit import _kernel_module, kernel_ptx  # noqa: E402
from syncverify.kernels.audit_tma import tma_instructions, tma_problems  # noqa: E402
from syncverify.kernels.build import build  # noqa: E402
from syncverify.kernels.config import KernelConfig  # noqa: E402
from syncverify.protocols import load_protocol  # noqa: E402

KERNELS = ("all-reduce", "all-scatter", "all-gather-gemm", "gemm-reduce-scatter")
LOADED = {"all-reduce": {"A", "B"}, "all-scatter": {"A", "B"}, "all-gather-gemm": {"B"},
          "gemm-reduce-scatter": {"A", "B"}}


def _built(kernel: str):
    return build(load_protocol("epoch-flag"), KernelConfig(kernel=kernel, m=256, n=256, k=256))


def _params(kernel: str) -> list[str]:
    return list(inspect.signature(_kernel_module(kernel)[1].fn).parameters)


@pytest.fixture(scope="module")
def all_reduce():
    built = _built("all-reduce")
    return built, kernel_ptx(built)


@pytest.mark.parametrize("kernel", KERNELS)
def test_each_fused_kernels_tma_loads_are_what_the_model_assumes(kernel):
    built = _built(kernel)
    ptx = kernel_ptx(built)
    found = tma_instructions(ptx, _params(kernel))
    assert found["copies"] and all(direction == "load" for direction, _mbar, _line in found["copies"])
    assert set().union(*(buffers for buffers, _line in found["maps"])) == LOADED[kernel]
    assert found["expects"] and found["waits"]
    assert tma_problems(built, ptx=ptx) == []


def _expects(ptx: str, count: int) -> str:
    return re.sub(r"(mbarrier\.arrive\.expect_tx\.shared\.b64 _, \[%r\d+\]), \d+;", rf"\1, {count};", ptx)


def test_an_expected_count_short_of_the_operand_boxes_is_caught(all_reduce):
    built, ptx = all_reduce
    problems = tma_problems(built, ptx=_expects(ptx, 16384))
    assert problems and all("not see every copy complete" in p for p in problems)


def test_an_expected_count_beyond_the_operand_boxes_is_a_hang(all_reduce):
    built, ptx = all_reduce
    problems = tma_problems(built, ptx=_expects(ptx, 65536))
    assert problems and all("would hang" in p for p in problems)


def test_a_tma_store_is_caught(all_reduce):
    built, ptx = all_reduce
    load = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
    assert load in ptx
    mutated = ptx.replace(load, "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group", 1)
    assert any("a TMA store" in p for p in tma_problems(built, ptx=mutated))


def test_a_tensor_map_over_a_lock_buffer_is_caught(all_reduce):
    built, _ptx = all_reduce
    params = _params("all-reduce")
    decls = ", ".join(f".param .u64 .ptr .global .align 1 k_param_{i}" for i in range(len(params)))
    ptx = f"""
.visible .entry k({decls})
.reqntid 128
{{
    ld.param.b64 %rd1, [k_param_{params.index("locks")}];
    tensormap.replace.tile.global_address.shared::cta.b1024.b64 [ %rd9 + 0 ], %rd1;
    mbarrier.arrive.expect_tx.shared.b64 _, [%r1], 32768;
    cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r2], [%rd5, {{%r3, %r4}}], [%r1];
    mbarrier.try_wait.parity.shared.b64 complete, [%r1], %r5;
}}"""
    problems = tma_problems(built, ptx=ptx)
    assert any("tensor map over 'locks'" in p for p in problems)
