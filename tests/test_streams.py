"""Stream memory operations (syncverify.streams): one meaning for the litmus language, the
protocol language and the kernel front end's harness. Known answers: tests/litmus/known/stream-*.litmus
(run by tests/test_litmus_known.py); here the lowering, bad input, and the protocol steps."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncverify import check_kernel, check_protocol
from syncverify.errors import LitmusSyntaxError, ProtocolError, UnsupportedConstruct
from syncverify.kernels.plan import UnsupportedStep, build_plan
from syncverify.litmus.parser import parse_litmus, parse_litmus_file
from syncverify.litmus.runner import run_litmus
from syncverify.protocols import load_protocol, protocol_from_dict
from syncverify.scenarios.build import ScenarioOptions, build
from syncverify.verdicts.causes import cause
from syncverify.verdicts.check import check
from syncverify.program import Branch, Load, Store
from syncverify.streams import StreamOp, stream_code, stream_threads

KNOWN_LITMUS = Path(__file__).parent / "litmus" / "known"

TEST = """PTX t
{{ x=0; f=0; y=0; }}
 P0@cta 0,gpu 0        | P1@cta 1,gpu 0 ;
 st.weak x, 1          | {first} ;
 st.release.sys f, 1   | {second} ;
exists (y == 0)
"""


def _test(first: str, second: str) -> str:
    return TEST.format(first=first, second=second)


def test_each_operation_means_what_the_module_states():
    write, = stream_code(StreamOp("write_value", "f", 1))
    assert isinstance(write, Store) and (write.sem, write.scope, write.value) == ("release", "sys", 1)
    _label, poll, spin = stream_code(StreamOp("wait_value", "f", 2, "eq"))
    assert isinstance(poll, Load) and (poll.sem, poll.scope) == ("acquire", "sys")
    assert isinstance(spin, Branch) and (spin.cond, spin.rhs) == ("ne", 2)
    assert stream_code(StreamOp("wait_value", "f", 2))[2].cond == "lt"
    read, copy = stream_code(StreamOp("copy", dst=("y",), src=("x",)))
    assert (read.loc, copy.loc, copy.value, copy.sem) == ("x", "y", read.dst, "weak")


def test_a_stream_is_one_thread_per_operation_chained_in_host_order():
    ops = (StreamOp("wait_value", "f", 1), StreamOp("copy", dst=("y",), src=("x",)), StreamOp("write_value", "g", 1))
    threads, pairs = stream_threads("S", 0, 3, ops, after="kernel", before="next")
    assert [t.phase for t in threads] == ["S.s0", "S.s1", "S.s2"]
    assert pairs == [("S.s0", "S.s1"), ("S.s1", "S.s2"), ("kernel", "S.s0"), ("S.s2", "next")]


def test_the_litmus_language_lowers_a_stream_thread_and_its_order():
    program = parse_litmus(_test("stream.wait_value.geq [f], 1", "stream.copy [y], [x]"))
    assert [t.name for t in program.threads] == ["P0", "P1.s0", "P1.s1"]
    assert program.host_order == (("P1.s0", "P1.s1"),)
    assert run_litmus(program).observation == "Never"


BAD = [
    (_test("stream.wait_value.geq [f], 1", "ld.weak r0, x"), r":5: P1 is a stream .* not Load"),
    (_test("stream.wait_value.gt [f], 1", "stream.copy [y], [x]"), r":4: .*stream.wait_value.gt"),
    (_test("stream.copy [y]", "stream.copy [y], [x]"), r":4: stream.copy takes pairs \[DST\], \[SRC\]"),
    (_test("stream.write_value [f], r0", "stream.copy [y], [x]"), r":4: the value of stream.write_value must be an integer"),
    (_test("stream.flush", "stream.copy [y], [x]"), r":4: .*stream.flush"),
]


@pytest.mark.parametrize("text, message", BAD, ids=[b[1] for b in BAD])
def test_bad_stream_syntax_is_one_error_naming_the_line(text, message):
    with pytest.raises(LitmusSyntaxError, match=message) as info:
        parse_litmus(text)
    assert "\n" not in str(info.value)


# ----- the protocol language -----------------------------------------------------------------

PROTOCOLS = Path(__file__).parent / "protocols"

#: protocol file -> (launches -> (safe, kinds)). In one fused kernel (host-barrier) a stream step
#: after the kernel cannot signal that kernel's own consumer, nor a wait before it see its producer:
#: a hang; as two kernels on two streams (two-stream) the streams order them.
KNOWN = {
    "stream-write-value-flag": {"host-barrier": (False, ["hang"]), "two-stream": (True, [])},
    "stream-write-value-relaxed-poll": {"two-stream": (False, ["race", "unwritten-read"])},
    "stream-write-value-one-flag-for-all": {"two-stream": (False, ["race", "unwritten-read"])},
    "stream-wait-value": {"host-barrier": (False, ["hang"]), "two-stream": (True, [])},
    "stream-write-then-wait-value": {"host-barrier": (False, ["hang"]), "two-stream": (True, [])},
}


def _check(name: str, launches: str, **options):
    result = check_protocol(str(PROTOCOLS / f"{name}.toml"), scenario="all-reduce", world_size=2, launches=launches,
                            **options)
    return result.safe, sorted(result.violations)


@pytest.mark.parametrize("name, launches", [(n, l) for n, by in KNOWN.items() for l in by])
def test_stream_steps_of_a_protocol_get_their_known_answer(name, launches):
    assert _check(name, launches) == KNOWN[name][launches]


def test_a_stream_write_after_rank_1s_kernel_waits_for_that_kernel_only():
    """Two tiles: rank 1's kernel also consumes (tile 1), so the fused kernel deadlocks on both ranks."""
    assert _check("stream-write-value-flag", "host-barrier", tiles=2) == (False, ["hang"])


#: One rule, every side: the litmus test, the protocol (two streams) and the kernel front end's
#: harness (tests/frontend_kernels/streams.py) that state it get the same answer.
SIDES = [
    ("a flag written on the producer's stream publishes what the stream did before",
     "stream-copy-then-write-value", ("stream-write-value-flag", "two-stream"), "write_value_after_producer", True),
    ("work after a wait_value of the producer's flag sees what the flag publishes",
     "stream-wait-value-then-copy", ("stream-wait-value", "two-stream"), "copy_after_wait_value", True),
    ("a copy with no wait may run before the producer", "stream-copy-without-wait", None, "copy_without_wait", False),
    ("a relaxed read of the stream's flag orders nothing", "stream-write-value-relaxed-reader",
     ("stream-write-value-relaxed-poll", "two-stream"), None, False),
]


@pytest.mark.parametrize("rule, litmus, protocol, harness, safe", SIDES, ids=[s[0] for s in SIDES])
def test_every_side_gives_a_stream_rule_the_same_answer(rule, litmus, protocol, harness, safe):
    observation = run_litmus(parse_litmus_file(KNOWN_LITMUS / f"{litmus}.litmus")).observation
    assert (observation == "Never") is safe
    if protocol is not None:
        assert _check(*protocol)[0] is safe
    if harness is not None:
        pytest.importorskip("triton")
        kernels = Path(__file__).parent / "frontend_kernels" / "streams.py"
        assert check_kernel(f"{kernels}::{harness}", world_size=2, timeout=120).safe is safe


def test_the_fused_kernels_refuse_a_stream_step_by_name():
    with pytest.raises(UnsupportedStep, match=r"signal step 1: op='stream_write_value' has no Triton lowering"):
        build_plan(load_protocol(PROTOCOLS / "stream-write-value-flag.toml"), world_size=2)


def _with(name: str, section: str, steps: list) -> dict:
    data = load_protocol(PROTOCOLS / f"{name}.toml").to_dict()
    data[section] = steps
    return data


def test_a_wait_value_other_than_geq_or_eq_is_one_error_naming_the_step():
    data = _with("stream-wait-value", "wait", [{"op": "stream_wait_value", "until": "> 0", "from": "each"}])
    with pytest.raises(ProtocolError, match=r"wait step 1: .*until='> 0': cuStreamWaitValue32 waits for >= or =="):
        protocol_from_dict(data)


def test_a_stream_step_between_kernel_steps_is_refused_naming_it():
    data = _with("stream-write-value-flag", "signal", [{"op": "stream_write_value", "value": 1, "to": "self"},
                                                        {"op": "barrier"}])
    with pytest.raises(UnsupportedConstruct, match=r"signal step 1 \(stream_write_value\).*not between them"):
        build(protocol_from_dict(data), ScenarioOptions(world_size=2))


def test_stream_steps_with_programmatic_launches_are_refused_naming_the_step():
    with pytest.raises(UnsupportedConstruct, match=r"signal step 1 \(stream_write_value\).* --launches pdl"):
        build(load_protocol(PROTOCOLS / "stream-write-value-flag.toml"), ScenarioOptions(world_size=2, launches="pdl"))


@pytest.mark.parametrize("name", ["stream-write-value-flag", "stream-wait-value"])
def test_a_fused_kernel_that_waits_for_its_own_stream_names_the_stream_order_cause(name):
    scenario = build(load_protocol(PROTOCOLS / f"{name}.toml"), ScenarioOptions(world_size=2))
    result = check(scenario)
    found = cause(result.violations["hang"], scenario)
    assert found.kind == "stream-order" and "the two wait for each other" in found.text, found.text
