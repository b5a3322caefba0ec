"""Stream memory operations (syncverify.streams): one meaning for the litmus language, the
protocol language and the kernel front end's harness. Known answers: tests/litmus/known/stream-*.litmus
(run by tests/test_litmus_known.py); here the lowering, bad input, and the protocol steps."""

from __future__ import annotations

import pytest

from syncverify.litmus.parser import parse_litmus
from syncverify.litmus.runner import run_litmus
from syncverify.errors import LitmusSyntaxError
from syncverify.program import Branch, Load, Store
from syncverify.streams import StreamOp, stream_code, stream_threads

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
