"""The litmus parser: exact IR for a known test, exact ``FILE:LINE:`` errors, and no crash on noise."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from syncverify.errors import LitmusSyntaxError, SyncVerifyError
from syncverify.litmus.parser import parse_litmus, parse_litmus_file
from syncverify.program import (
    And,
    Atomic,
    Barrier,
    Branch,
    Compare,
    Condition,
    Fence,
    Label,
    Load,
    LocRef,
    Not,
    Or,
    Program,
    RegOp,
    RegRef,
    Store,
    Thread,
    TrueProp,
)

MP_SYS = """\
PTX MP-sys
"message passing between GPUs through a release/acquire pair at system scope"
{
x=0; y=0;
P1:r1=0; P1:r2=0;
}
 P0@cta 0,gpu 0          | P1@cta 0,gpu 1          ;
 st.weak x, 1            | LC00:                   ;
 st.release.sys y, 1     | ld.acquire.sys r1, y    ;
                         | beq r1, 0, LC00         ;
                         | ld.weak r2, x           ;
~exists (P1:r1 == 1 /\\ P1:r2 != 1)
"""

EXAMPLES = sorted((Path(__file__).parents[1] / "syncverify" / "litmus" / "examples").glob("*.litmus"))
KNOWN = sorted((Path(__file__).parent / "litmus" / "known").glob("*.litmus"))


def lines_of(program: Program) -> list[list[int | None]]:
    return [[ins.line for ins in thread.instructions] for thread in program.threads]


# ----- the documented example, exactly ---------------------------------------------------------


def test_message_passing_example_parses_to_the_exact_program():
    program = parse_litmus(MP_SYS, path="mp.litmus")
    assert program == Program(
        name="MP-sys",
        threads=(
            Thread("P0", gpu=0, cta=0, instructions=(
                Store("x", 1, sem="weak"),
                Store("y", 1, sem="release", scope="sys"),
            )),
            Thread("P1", gpu=1, cta=0, instructions=(
                Label("LC00"),
                Load("r1", "y", sem="acquire", scope="sys"),
                Branch("LC00", "eq", "r1", 0),
                Load("r2", "x", sem="weak"),
            )),
        ),
        init={"x": 0, "y": 0},
        registers={("P1", "r1"): 0, ("P1", "r2"): 0},
        condition=Condition("~exists", And((
            Compare(RegRef("P1", "r1"), "==", 1),
            Compare(RegRef("P1", "r2"), "!=", 1),
        ))),
        comment="message passing between GPUs through a release/acquire pair at system scope",
    )  # fmt: skip
    # Program equality ignores lines (compare=False): check them on their own.
    assert lines_of(program) == [[8, 9], [8, 9, 10, 11]]
    assert program.init == {"x": 0, "y": 0}
    assert program.registers == {("P1", "r1"): 0, ("P1", "r2"): 0}


def test_every_instruction_form_maps_onto_the_program_ir():
    text = """\
PTX forms
{ x=0; }
 P0@cta 1, gpu 2 ;
 ld r0, [x] ;
 ld.weak r0, x ;
 ld.relaxed.cta r0, x ;
 ld.acquire.gpu.u32 r0, x ;
 ld.volatile r0, x ;
 st x, 1 ;
 st.relaxed.gpu [x], r0 ;
 st.release.sys.b32 x, -2 ;
 st.volatile x, 0x10 ;
 atom.add r1, x, 1 ;
 atom.acq_rel.sys.exch.b32 r1, x, r0 ;
 atom.acquire.cta.cas.u32 r1, [x], 0, 1 ;
 red.release.gpu.min.s32 x, 3 ;
 red.or x, r1 ;
 fence.sc.cta ;
 fence.acq_rel.sys ;
 membar.cta ;
 membar.gl ;
 membar.sys ;
 bar.sync 0 ;
 bar.sync 1, 2 ;
 barrier.sync.aligned 2 ;
 bar.arrive 3, 2 ;
 bar.cta.arrive 4, 2 ;
 add r2, r1, 1 ;
 sub.s32 r2, 5, r1 ;
 mov r3, r2 ;
 L0: ;
 bne r3, 1, L0 ;
 bge r3, r2, L0 ;
 blt 0, r2, L0 ;
 goto L0 ;
"""
    (thread,) = parse_litmus(text).threads
    assert (thread.gpu, thread.cta) == (2, 1)
    assert thread.instructions == (
        Load("r0", "x"),
        Load("r0", "x"),
        Load("r0", "x", sem="relaxed", scope="cta"),
        Load("r0", "x", sem="acquire", scope="gpu"),
        Load("r0", "x", sem="relaxed", scope="sys"),
        Store("x", 1),
        Store("x", "r0", sem="relaxed", scope="gpu"),
        Store("x", -2, sem="release", scope="sys"),
        Store("x", 16, sem="relaxed", scope="sys"),
        Atomic("add", "r1", "x", (1,)),
        Atomic("exch", "r1", "x", ("r0",), sem="acq_rel", scope="sys"),
        Atomic("cas", "r1", "x", (0, 1), sem="acquire", scope="cta"),
        Atomic("min", None, "x", (3,), sem="release", scope="gpu"),
        Atomic("or", None, "x", ("r1",)),
        Fence("sc", "cta"),
        Fence("acq_rel", "sys"),
        Fence("sc", "cta"),
        Fence("sc", "gpu"),
        Fence("sc", "sys"),
        Barrier("sync", 0),
        Barrier("sync", 1, 2),
        Barrier("sync", 2),
        Barrier("arrive", 3, 2),
        Barrier("arrive", 2),  # Dartagnan's bar.cta.arrive A, ID: barrier 2, no count
        RegOp("add", "r2", "r1", 1),
        RegOp("sub", "r2", 5, "r1"),
        RegOp("mov", "r3", "r2"),
        Label("L0"),
        Branch("L0", "ne", "r3", 1),
        Branch("L0", "ge", "r3", "r2"),
        Branch("L0", "lt", 0, "r2"),
        Branch("L0", None),
    )
    assert [ins.line for ins in thread.instructions] == list(range(4, 36))


def test_condition_precedence_is_not_then_and_then_or():
    text = "PTX c\n{}\n P0@cta 0,gpu 0 ;\nforall ~x == 1 /\\ (P0:r0 != y \\/ true) \\/ 2 = 2"
    condition = parse_litmus(text).condition
    assert condition == Condition("forall", Or((
        And((
            Not(Compare(LocRef("x"), "==", 1)),
            Or((Compare(RegRef("P0", "r0"), "!=", LocRef("y")), TrueProp())),
        )),
        Compare(2, "==", 2),
    )))  # fmt: skip


def test_a_location_only_the_condition_names_starts_at_zero():
    program = parse_litmus("PTX c\n{ x=1; }\n P0@cta 0,gpu 0 ;\n st.weak y, 1 ;\nexists (z == 0)")
    assert program.init == {"x": 1, "z": 0}


def test_a_missing_condition_is_allowed():
    program = parse_litmus("PTX c\n{ x=0; }\n P0@cta 0,gpu 0 ;\n st.weak x, 1 ;\n")
    assert program.condition is None


def test_comment_lines_and_herd_extras_are_skipped():
    text = """\
// expect: Never
// hang: false
PTX extras "first comment"
"second comment,
on two lines"
Cycle=Rfe PodRR Fre PodWW
{
int x = 0; uint32_t y=0;
// a comment inside the init block
0:r0 = 7;
}
// between the init block and the threads
 P0@cta 0,gpu 0 ;
// between rows
 ld.weak r0, x ;
// before the condition
exists
// inside the condition
(0:r0 == 7)
"""
    program = parse_litmus(text)
    assert program.comment == "first comment\nsecond comment,\non two lines"
    assert program.init == {"x": 0, "y": 0}
    assert program.registers == {("P0", "r0"): 7}
    assert program.threads[0].instructions[0].line == 15
    assert program.condition == Condition("exists", Compare(RegRef("P0", "r0"), "==", 7))


@pytest.mark.parametrize("path", EXAMPLES + KNOWN, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shipped_litmus_files_parse(path):
    program = parse_litmus_file(path)
    assert program.threads and program.condition is not None and program.comment


# ----- errors: exact FILE:LINE prefix and a key phrase ------------------------------------------

BASE = """\
PTX bad
{{ x=0; y=0; }}
 P0@cta 0,gpu 0  | P1@cta 0,gpu 1 ;
 {p0:<16}| {p1} ;
exists ({cond})
"""


def base(p0="st.weak x, 1", p1="ld.weak r1, x", cond="P1:r1 == 1"):
    """A two-thread test whose thread row is line 4 and whose condition is line 5."""
    return BASE.format(p0=p0, p1=p1, cond=cond)


def error_of(text: str) -> str:
    with pytest.raises(LitmusSyntaxError) as info:
        parse_litmus(text, path="mp.litmus")
    return str(info.value)


@pytest.mark.parametrize(
    ("text", "prefix", "phrase"),
    [
        (base(p1="ld.bogus r1, x"), "mp.litmus:4: ", "unknown instruction 'ld.bogus' (P1)"),
        (base(p0="wgmma.mma_async x"), "mp.litmus:4: ", "unsupported instruction 'wgmma.mma_async' (P0)"),
        (base(p0="st.release y, 1"), "mp.litmus:4: ", "st.release needs a scope (.cta, .gpu or .sys)"),
        (base(p1="ld.acquire r1, y"), "mp.litmus:4: ", "ld.acquire needs a scope (.cta, .gpu or .sys)"),
        (base(p0="st.weak.gpu x, 1"), "mp.litmus:4: ", "st.weak takes no scope"),
        (base(p0="st.volatile.sys x, 1"), "mp.litmus:4: ", "st.volatile takes no scope"),
        (base(p1="ld.release.gpu r1, x"), "mp.litmus:4: ", "ld cannot be .release"),
        (base(p0="ld.local.weak r1, x"), "mp.litmus:4: ", "only .global and .shared memory are modelled"),
        (base(p0="st.relaxed.cluster x, 1"), "mp.litmus:4: ", "scope .cluster is not supported"),
        (base(p0="red.exch x, 1"), "mp.litmus:4: ", "red.exch does not exist"),
        (base(p0="atom.cas r0, x, 1"), "mp.litmus:4: ", "atom.cas takes 4 operand(s), got 3"),
        (base(p0="atom.gpu r0, x, 1"), "mp.litmus:4: ", "names no operation"),
        (base(p0="atom.cas2 r0, x, 1"), "mp.litmus:4: ", "unsupported instruction 'atom.cas2'"),
        (base(p0="fence.gpu"), "mp.litmus:4: ", "names no semantics"),
        (base(p0="fence.sc"), "mp.litmus:4: ", "fence.sc needs a scope"),
        (base(p0="fence.proxy.alias"), "mp.litmus:4: ", "only fence.proxy.async"),
        (base(p0="membar.gpu"), "mp.litmus:4: ", "unknown instruction 'membar.gpu'"),
        (base(p0="bar.sync 0, 1, 4, 5"), "mp.litmus:4: ", "bar.sync takes 1 or 2 or 3 operand(s), got 4"),
        (base(p0="bar.sync 0, 0"), "mp.litmus:4: ", "barrier thread count 0 must be positive"),
        (base(p0="bar.red.xor.pred r0, 0, r1"), "mp.litmus:4: ", "unknown instruction 'bar.red.xor.pred'"),
        (base(p0="bar.cluster.sync 0"), "mp.litmus:4: ", "cluster barriers are not modelled"),
        (base(p0="tld r0, x"), "mp.litmus:4: ", "unsupported instruction 'tld'"),
        (base(p0="bar.sync 16"), "mp.litmus:4: ", "barrier id 16 is out of range"),
        (base(p0="goto L9"), "mp.litmus:4: ", "branch to unknown label 'L9' (P0)"),
        (base(p0="beq r0, 0, 1x"), "mp.litmus:4: ", "branch target of beq must be a label"),
        (base(p0="lx.weak r1, x"), "mp.litmus:4: ", "unknown instruction 'lx.weak' (P0): did you mean 'ld'?"),
        (base(p0="bra L0"), "mp.litmus:4: ", "unsupported instruction 'bra' (P0): write goto L"),
        (base(p0="st.weak x,"), "mp.litmus:4: ", "empty operand"),
        (base(p0="st.weak [x, 1"), "mp.litmus:4: ", "operand 1 of st.weak must be a location"),
        (base(p0="ld.weak 3, x"), "mp.litmus:4: ", "operand 1 of ld.weak must be a register"),
        (base(p0="mov r0, x+1"), "mp.litmus:4: ", "must be a register or an integer"),
        (base(cond="P2:r1 == 1"), "mp.litmus:5: ", "names thread P2, but the test has P0, P1"),
        (base(cond="(P1:r1 == 1"), "mp.litmus:5: ", "unbalanced parentheses"),
        (base(cond="P1:r1 == 1))"), "mp.litmus:5: ", "unbalanced parentheses"),
        (base(cond="P1:r1 1"), "mp.litmus:5: ", "expected a comparison (==, !=, <, <=, >, >=)"),
        (base(cond="P1:r1 == 1 @"), "mp.litmus:5: ", "unexpected '@'"),
        (base(cond="(" * 500 + "true" + ")" * 500), "mp.litmus:5: ", "nests deeper than"),
        (base(cond="~" * 5000 + "true"), "mp.litmus:5: ", "nests deeper than"),
        (base().replace("exists (", "exists\n("), "mp.litmus:6: ", "unexpected"),
    ],
)
def test_instruction_and_condition_errors_name_file_and_line(text, prefix, phrase):
    if phrase == "unexpected":  # the condition continued over a line: parses fine
        assert parse_litmus(text).condition is not None
        return
    message = error_of(text)
    assert message.startswith(prefix), message
    assert phrase in message, message


@pytest.mark.parametrize(
    ("text", "prefix", "phrase"),
    [
        ("", "mp.litmus:1: ", "empty litmus file"),
        ("\n\n// only comments\n", "mp.litmus:1: ", "empty litmus file"),
        ("\x00\x01\x02garbage", "mp.litmus:1: ", "expected a 'PTX NAME' header line"),
        ("PTX\n{}", "mp.litmus:1: ", "names no test"),
        ("PTX a b\n{}", "mp.litmus:1: ", "a test name is one word"),
        ("X86 SB\n{}", "mp.litmus:1: ", "architecture 'X86' is not supported"),
        ("PTX a\n\"never closed\n{}\n", "mp.litmus:2: ", "quoted comment is never closed"),
        ("PTX a\n", "mp.litmus:2: ", "missing init block"),
        ("PTX a\n x=0;\n", "mp.litmus:2: ", "expected the init block '{'"),
        ("PTX a\n{ x=0;\n P0@cta 0,gpu 0 ;\n", "mp.litmus:2: ", "init block is never closed with '}'"),
        ("PTX a\n{ x=0; } junk\n", "mp.litmus:2: ", "unexpected text after the init block"),
        ("PTX a\n{ x=y; }\n", "mp.litmus:2: ", "pointer initial value 'x=y' is not supported"),
        ("PTX a\n{ P0:r0=&x; }\n", "mp.litmus:2: ", "pointer initial value 'P0:r0=&x' is not supported"),
        ("PTX a\n{ x@texture aliases y; }\n", "mp.litmus:2: ", "proxies are out of scope"),
        ("PTX a\n{ x=0; x=1; }\n", "mp.litmus:2: ", "location 'x' is initialised twice"),
        ("PTX a\n{ *x=0; }\n", "mp.litmus:2: ", "is not 'loc=int' or 'Pn:reg=int'"),
        ("PTX a\n{\nP3:r0=1;\n}\n P0@cta 0,gpu 0 ;\n", "mp.litmus:3: ", "the test has no thread P3"),
        ("PTX a\n{}\n", "mp.litmus:3: ", "no thread columns"),
        ("PTX a\n{}\nexists (x == 0)", "mp.litmus:3: ", "no thread columns"),
        ("PTX a\n{}\n P0 | P1@cta 0,gpu 0 ;\n", "mp.litmus:3: ", "thread P0 has no placement"),
        ("PTX a\n{}\n P0@cta 0,gpu 0 | P1 ;\n", "mp.litmus:3: ", "thread P1 has no placement"),
        ("PTX a\n{}\n P1@cta 0,gpu 0 ;\n", "mp.litmus:3: ", "named P0, P1, ... in order"),
        ("PTX a\n{}\n P0@cta 0 ;\n", "mp.litmus:3: ", "must name both cta and gpu"),
        ("PTX a\n{}\n P0@cta x,gpu 0 ;\n", "mp.litmus:3: ", "must read 'cta A,gpu B'"),
        ("PTX a\n{}\n P0@cta 0,gpu 0\n", "mp.litmus:3: ", "ending in ';'"),
        ("PTX a\n{}\n P0@cta 0,gpu 0 | P1@cta 0,gpu 0 ;\n st.weak x, 1 ;\n", "mp.litmus:4: ",
         "row has 1 column(s) but the header declares 2 thread(s)"),
        ("PTX a\n{}\n P0@cta 0,gpu 0 ;\n st.weak x, 1 | ld.weak r0, x ;\n", "mp.litmus:4: ",
         "row has 2 column(s)"),
        ("PTX a\n{}\n P0@cta 0,gpu 0 ;\n L: ;\n L: ;\n", "mp.litmus:5: ", "label 'L' is defined twice"),
        ("PTX a\n{}\n P0@cta 0,gpu 0 ;\n(x == 1)\n", "mp.litmus:4: ", "or a final condition"),
        ("PTX a\n{}\n P0@cta 0,gpu 0 ;\nfinal (x == 0) with default: exists;\n", "mp.litmus:4: ",
         "'final ... with' condition is not supported"),
        ("PTX a\n{}\n P0@cta 0,gpu 0 ;\nexists\n", "mp.litmus:4: ", "ends too early"),
        ("PTX a\n{}\n P0@cta 0,gpu 0 ;\n~exists\n\n(x == 1 /\\\n", "mp.litmus:6: ", "ends too early"),
        ("PTX a\n{}\n P0@cta 0,gpu 0 ;\n~ forall (true)\n", "mp.litmus:4: ", "expected 'exists' after '~'"),
    ],
)
def test_structural_errors_name_file_and_line(text, prefix, phrase):
    message = error_of(text)
    assert message.startswith(prefix), message
    assert phrase in message, message


def test_an_error_is_one_line():
    message = error_of(base(p0="st.weak " + "x" * 500 + "\x00, 1"))
    assert "\n" not in message and len(message) < 300


def test_an_unreadable_file_raises_one_clear_line(tmp_path):
    missing = tmp_path / "missing.litmus"
    with pytest.raises(SyncVerifyError) as info:
        parse_litmus_file(missing)
    assert str(info.value).startswith(f"{missing}: cannot read litmus file")
    with pytest.raises(SyncVerifyError, match="cannot read litmus file"):
        parse_litmus_file(tmp_path)  # a directory


def test_a_file_that_is_not_utf8_names_its_line(tmp_path):
    path = tmp_path / "binary.litmus"
    path.write_bytes(b"PTX a\n{}\n\xff\xfe\n")
    with pytest.raises(LitmusSyntaxError) as info:
        parse_litmus_file(path)
    assert str(info.value) == f"{path}:3: the file is not UTF-8 text"


def test_a_file_parses_with_its_path_in_errors(tmp_path):
    path = tmp_path / "mp.litmus"
    path.write_text(base(p1="ld.bogus r1, x"))
    with pytest.raises(LitmusSyntaxError) as info:
        parse_litmus_file(path)
    assert str(info.value).startswith(f"{path}:4: unknown instruction 'ld.bogus' (P1)")
    assert info.value.path == str(path) and info.value.line == 4


# ----- no input raises anything but LitmusSyntaxError -------------------------------------------

# Pieces of the format, so that mutations reach deep into the parser and not only its first line.
_PIECES = [
    "PTX", " T", "\n", "{", "}", ";", "|", "x=0", "P0:r0=1", "P0@cta 0,gpu 0", "P1@cta 1, gpu 0",
    "st.weak x, 1", "ld.acquire.gpu r0, [y]", "atom.cas r0, x, 0, 1", "red.add x, 1", "bar.sync 0",
    "fence.sc.sys", "membar.gl", "L0:", "beq r0, 0, L0", "goto L0", "exists", "~exists", "forall",
    "(", ")", "/\\", "\\/", "~", "==", "!=", "P0:r0", "P9:r0", "true", "1", "-7", "0x", "//", '"',
    "int ", ",", ".", "[", "]", "@", "\x00", "\t", " ",
]


@st.composite
def litmus_like_text(draw) -> str:
    """Either raw text, the MP example with characters dropped/inserted, or glued format pieces."""
    kind = draw(st.sampled_from(["raw", "mutated", "pieces"]))
    if kind == "raw":
        return draw(st.text())
    if kind == "pieces":
        return "".join(draw(st.lists(st.sampled_from(_PIECES), max_size=60)))
    text = MP_SYS
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(text)))
        if draw(st.booleans()):
            text = text[:at] + text[at + draw(st.integers(1, 8)) :]
        else:
            text = text[:at] + draw(st.sampled_from(_PIECES) | st.text(max_size=3)) + text[at:]
    return text


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(litmus_like_text())
def test_random_text_raises_nothing_but_litmus_syntax_error(text):
    try:
        program = parse_litmus(text, path="fuzz.litmus")
    except LitmusSyntaxError as error:
        assert str(error).startswith("fuzz.litmus")
        assert "\n" not in str(error)
    else:
        assert isinstance(program, Program)
