"""Byte ranges in the protocol language (issue 26, part 4/5): a ``store`` or a load ``await``
accesses ``bytes = { offset, size }`` of its lock word; the model holds such a lock one location
per byte (choice 12: partial overlap is not morally strong, a read combines the bytes of several
writes); the fused kernels refuse it by name (exit 2). Known answers: vLLM #2760's shape (ranks
set their own byte of a flag word another reads whole) races; the same bytes read with the
writes' footprint do not."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncverify.errors import ProtocolError, UnsupportedConstruct
from syncverify.kernels.plan import UnsupportedStep, build_plan
from syncverify.protocols import load_protocol, protocol_from_dict
from syncverify.scenarios.build import ScenarioOptions, build
from syncverify.verdicts.check import check

HERE = Path(__file__).parent / "protocols"
BYTE_FLAGS = HERE / "vllm-2760-byte-flags.toml"
MATCHING = HERE / "vllm-2760-byte-flags-matching-reads.toml"


def _verdict(path: Path, **opts):
    scenario = build(load_protocol(path), ScenarioOptions(world_size=2, **opts))
    return check(scenario), scenario


def test_vllm_2760_byte_flags_read_whole_race():
    result, scenario = _verdict(BYTE_FLAGS)
    assert result.safe is False and "race" in result.violations
    causes = {v.cause(scenario).kind for v in result.violations.values()}
    assert "mixed-size" in causes, causes


def test_reading_each_byte_with_its_writes_footprint_is_safe():
    assert _verdict(MATCHING)[0].safe is True


def test_two_calls_with_host_resets_of_a_byte_addressed_lock_split_the_memset_too():
    protocol = protocol_from_dict({**load_protocol(MATCHING).to_dict(), "reset": "host"})
    scenario = build(protocol, ScenarioOptions(world_size=2, epochs=2, reset="host-between-barriers"))
    resets = [ins for th in scenario.program.threads for ins in th.instructions if "memset" in getattr(ins, "label", "")]
    assert resets and all(ins.loc.endswith(("[0]", "[1]", "[2]", "[3]")) for ins in resets)
    assert check(scenario).safe is True


def test_the_byte_range_round_trips_through_to_dict():
    protocol = load_protocol(BYTE_FLAGS)
    signal = protocol.signal[-1]
    assert signal.bytes == ("rank", 1)
    assert signal.to_dict()["bytes"] == {"offset": "rank", "size": 1}
    assert protocol_from_dict(protocol.to_dict()) == protocol


BAD = [
    ({"op": "store", "value": 1, "bytes": {"offset": 0, "size": 3}}, "bytes.size=3"),
    ({"op": "store", "value": 1, "bytes": {"offset": 3, "size": 2}}, "bytes.offset=3"),
    ({"op": "store", "value": 1, "bytes": {"offset": "me", "size": 1}}, "bytes.offset='me'"),
    ({"op": "store", "value": 1, "bytes": {"offset": 0}}, "must be a table"),
    ({"op": "atomic_add", "value": 1, "bytes": {"offset": 0, "size": 1}}, "does not apply to atomic_add"),
    ({"op": "await", "read": "atomic_add", "value": 0, "until": "== 1", "bytes": {"offset": 0, "size": 1}},
     "does not apply to await"),
]


@pytest.mark.parametrize("step, message", BAD, ids=[b[1] for b in BAD])
def test_a_malformed_byte_range_is_one_error_naming_the_step(step, message):
    data = load_protocol(BYTE_FLAGS).to_dict()
    data["signal"] = [data["signal"][0], step]
    with pytest.raises(ProtocolError) as info:
        protocol_from_dict(data)
    assert message in str(info.value) and "signal step 2" in str(info.value)
    assert "\n" not in str(info.value)


def test_a_rank_offset_outside_the_word_is_refused_naming_the_step():
    with pytest.raises(UnsupportedConstruct, match=r"signal step 2: bytes = .* outside it"):
        build(load_protocol(BYTE_FLAGS), ScenarioOptions(world_size=5))


def test_the_fused_kernels_refuse_a_byte_range_by_name():
    with pytest.raises(UnsupportedStep, match=r"signal step 2: bytes = .* not executed by the fused kernels"):
        build_plan(load_protocol(BYTE_FLAGS), world_size=2)
