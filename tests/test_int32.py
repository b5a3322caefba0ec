"""Values are the GPU's 32-bit integers (``syncverify.model.int32``; ``syncverify.model.ptx`` modeling choice 9).

A counter that overflows int32 wraps as the GPU's does: a protocol whose target lies past
2^31 - 1 is no longer called safe.
"""

from __future__ import annotations

from importlib import resources

import pytest
from hypothesis import given
from hypothesis import strategies as st

from syncverify.verdicts.check import check
from syncverify.litmus.parser import parse_litmus
from syncverify.litmus.runner import run_litmus
from syncverify.protocols.loader import parse_protocol
from syncverify.scenarios.build import ScenarioOptions, build
from syncverify.model.int32 import INT32_MAX, INT32_MIN, wrap_int32

BIG = 2**31 - 1


def _overflowing(value: int) -> str:
    """barrier-fenced-release-acquire (safe) with every rank adding ``value``, waiting for world_size * value."""
    text = resources.files("protocols").joinpath("barrier-fenced-release-acquire.toml").read_text(encoding="utf-8")
    text = text.replace('name = "barrier-fenced-release-acquire"', f'name = "add-{value}"')
    text = text.replace("value = 1\n", f"value = {value}\n")
    text = text.replace('until = ">= world_size"', f'until = ">= world_size * {value}"')
    assert f"world_size * {value}" in text
    return text


def test_a_counter_that_does_not_overflow_is_still_safe():
    protocol = parse_protocol(_overflowing(1000), path="add-1000.toml")
    assert check(build(protocol, ScenarioOptions(world_size=2))).safe is True


def test_a_counter_that_overflows_int32_is_unsafe():
    # 2 * (2^31 - 1) wraps to -2 in the counter and in the int32 target: the wait exits at once
    # (0 >= -2) and the consumer reads tiles nobody has written yet.
    protocol = parse_protocol(_overflowing(BIG), path="add-big.toml")
    result = check(build(protocol, ScenarioOptions(world_size=2)))
    assert result.safe is False
    assert "unwritten-read" in result.violations


def test_two_atomic_adds_wrap_the_counter_in_a_litmus_test():
    test = parse_litmus(
        "PTX wrap\n\"two adds of 2^31-1\"\n{ x=0; }\n"
        " P0@cta 0,gpu 0 | P1@cta 1,gpu 0 ;\n"
        f" red.relaxed.gpu.add x, {BIG} | red.relaxed.gpu.add x, {BIG} ;\n"
        "exists (x == 4294967294)\n")
    verdict = run_litmus(test)
    # 4294967294 in the condition is the same 32 bits as -2, the value the counter holds.
    assert verdict.observation == "Always"


@given(st.integers(-2**40, 2**40))
def test_wrap_int32_is_the_value_modulo_2_to_the_32_in_the_signed_range(value):
    wrapped = wrap_int32(value)
    assert INT32_MIN <= wrapped <= INT32_MAX
    assert (wrapped - value) % 2**32 == 0


@pytest.mark.parametrize("value, expected", [(2**31, -2**31), (2**32 - 1, -1), (-2**31 - 1, 2**31 - 1)])
def test_wrap_int32_known_answers(value, expected):
    assert wrap_int32(value) == expected
