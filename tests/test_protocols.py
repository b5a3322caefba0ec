"""The protocols package: built-ins, expressions, one-line errors, and no other exception type."""

from __future__ import annotations

import copy
import doctest
import json
import re
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import syncverify.validation
import syncverify.protocols.expressions
import syncverify.protocols.loader
import syncverify.protocols.model
import syncverify.protocols.registry
from syncverify.protocols import (
    Protocol,
    builtin_names,
    builtin_protocols,
    load_protocol,
    parse_expr,
    parse_protocol,
    parse_until,
    protocol_from_dict,
)
from syncverify.protocols.loader import SIGNAL_OPS, WAIT_OPS
from syncverify.errors import ProtocolError, SyncVerifyError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

BUILTINS = [
    "add-counter",
    "add-counter-cas-reset",
    "add-counter-skip-self",
    "barrier-fenced-release-acquire",
    "barrier-release-xchg-cas-acquire",
    "epoch-flag",
    "fenced-release-acquire",
    "release-xchg-cas-acquire",
    "wt-cv-flag",
    "xchg-flag",
]

# The example of the brief, verbatim: the field names are a contract.
EXAMPLE = '''\
name = "barrier-fenced-release-acquire"
summary = "CTA barrier and release fence after the tile store; atomic_add on every rank's counter; consumers wait for world_size with acquire"
origin = "seed 000 final fix, plus the CTA barrier it removed"
tile_store = { cache = ".wt" }                # tl.store cache modifier of the tile data ("" | ".wt" | ".cg" | ".cs")
tile_load = { volatile = false }              # how consumers read tile data

[[signal]]
op = "barrier"                                # tl.debug_barrier()
[[signal]]
op = "fence"                                  # inline PTX fence, executed by every thread
sem = "release"                               # release | acquire | acq_rel | sc
scope = "sys"                                 # cta | gpu | sys
[[signal]]
op = "atomic_add"                             # store | atomic_xchg | atomic_add
value = 1
sem = "release"
scope = "sys"
to = "all"                                    # all | others | self | owner

[[wait]]
op = "await"
read = "atomic_cas"                           # load | volatile_load | atomic_cas | atomic_add
compare = 0
value = 0
sem = "acquire"
scope = "sys"
until = ">= world_size"                       # an expression in world_size and epoch (iterations count from 0)
[[wait]]
op = "fence"
sem = "acquire"
scope = "gpu"
'''
PATH = "protocols/my.toml"


def error_of(text: str) -> str:
    with pytest.raises(ProtocolError) as info:
        parse_protocol(text, path=PATH)
    message = str(info.value)
    assert "\n" not in message
    return message


def edit(old: str, new: str, text: str = EXAMPLE) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


# ----- built-ins ---------------------------------------------------------------------------------

def test_the_builtins_are_exactly_the_ten_named_ones():
    assert builtin_names() == BUILTINS
    assert [p.name for p in builtin_protocols()] == BUILTINS


@pytest.mark.parametrize("name", BUILTINS)
def test_every_builtin_loads_and_round_trips_through_to_dict(name):
    protocol = load_protocol(name)
    assert isinstance(protocol, Protocol)
    assert protocol.name == name and protocol.path == f"protocols/{name}.toml"
    assert protocol.origin and protocol.believed and protocol.summary
    data = protocol.to_dict()
    assert json.loads(json.dumps(data)) == data  # plain data only
    again = protocol_from_dict(data)
    assert again == protocol and hash(again) == hash(protocol)
    assert again.to_dict() == data


@pytest.mark.parametrize("name", BUILTINS)
def test_builtins_store_no_verdict(name):
    text = json.dumps(load_protocol(name).to_dict()).lower()
    assert "verdict" not in text and '"safe' not in text and '"unsafe' not in text
    raw = tomllib.loads(_builtin_text(name))
    assert not {"safe", "unsafe", "verdict", "expected"} & set(raw)


def _builtin_text(name: str) -> str:
    from importlib import resources

    return resources.files("protocols").joinpath(f"{name}.toml").read_text(encoding="utf-8")


def test_protocols_are_hashable_compile_time_descriptions():
    table = {p: p.name for p in builtin_protocols()}
    assert len(table) == len(BUILTINS)
    assert load_protocol("epoch-flag") is load_protocol("epoch-flag")  # cached


def test_the_brief_example_parses_as_the_builtin_of_that_name():
    parsed = parse_protocol(EXAMPLE, path="example.toml")
    builtin = load_protocol("barrier-fenced-release-acquire")
    assert [s.to_dict() for s in parsed.signal] == [s.to_dict() for s in builtin.signal]
    assert [s.to_dict() for s in parsed.wait] == [s.to_dict() for s in builtin.wait]
    assert parsed.tile_store == builtin.tile_store and parsed.tile_load == builtin.tile_load
    fence, add = parsed.signal[1], parsed.signal[2]
    assert (fence.op, fence.sem, fence.scope) == ("fence", "release", "sys")
    assert (add.op, add.to, add.value.evaluate(world_size=8, epoch=0)) == ("atomic_add", "all", 1)
    assert [s.line for s in parsed.signal] == [7, 9, 13]


def test_seed_000_original_has_a_local_flag_and_a_remote_flag():
    p = load_protocol("xchg-flag")
    assert p.locks == ("local", "ready")
    store, xchg = p.signal[1], p.signal[2]
    assert (store.op, store.cache, store.sem, store.to, store.lock) == ("store", ".wt", "weak", "self", "local")
    assert (xchg.op, xchg.sem, xchg.scope, xchg.to) == ("atomic_xchg", "release", "sys", "others")
    local, remote = p.wait
    assert (local.read, local.cache, str(local.until)) == ("volatile_load", ".cv", "== 1")
    assert (remote.read, remote.sem, remote.scope, str(remote.until)) == ("atomic_cas", "acquire", "sys", "== 1")


def test_the_cas_reset_writes_zero_when_it_reads_world_size_minus_one():
    p = load_protocol("add-counter-cas-reset")
    cas = p.wait[-1]
    assert p.reset == "consumer" and cas.changes_lock
    assert cas.compare.evaluate(world_size=8, epoch=0) == 7
    assert cas.value.evaluate(world_size=8, epoch=0) == 0
    assert cas.until.holds(7, world_size=8, epoch=0) and not cas.until.holds(6, world_size=8, epoch=0)
    assert p.signal[-1].to == "others"


def test_the_read_only_cas_idioms_do_not_count_as_resets():
    assert not load_protocol("add-counter").wait[0].changes_lock  # CAS(0, 0)
    assert not load_protocol("release-xchg-cas-acquire").wait[1].changes_lock  # CAS(1, 1)
    assert not load_protocol("epoch-flag").wait[0].changes_lock  # atomic_add(0)


def test_seed_001_fix_polls_then_acquires_once():
    p = load_protocol("release-xchg-cas-acquire")
    (xchg,) = p.signal
    assert (xchg.op, xchg.sem, xchg.scope, xchg.to) == ("atomic_xchg", "release", "gpu", "self")
    poll, cas = p.wait
    assert (poll.op, poll.read, poll.cache) == ("await", "volatile_load", ".cv")
    assert (cas.op, cas.sem, cas.scope, cas.from_) == ("atomic_cas", "acquire", "gpu", "self")
    assert (cas.compare.literal, cas.value.literal) == (1, 1)
    assert load_protocol("barrier-release-xchg-cas-acquire").signal[0].op == "barrier"


def test_epoch_flag_target_grows_with_the_epoch_and_is_never_reset():
    p = load_protocol("epoch-flag")
    assert p.reset == "none"
    until = p.wait[0].until
    assert [until.target(world_size=4, epoch=e) for e in range(3)] == [4, 8, 12]
    assert p.wait[0].read == "atomic_add" and p.wait[0].value.literal == 0


def test_load_protocol_takes_a_path(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(EXAMPLE.replace('"barrier-fenced-release-acquire"', '"mine"'))
    for arg in (path, str(path)):
        protocol = load_protocol(arg)
        assert protocol.name == "mine" and protocol.path == str(path)


# ----- expressions -------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "text, world_size, epoch, expected",
    [
        ("world_size * (epoch + 1)", 4, 2, 12),
        ("world_size - 1", 8, 0, 7),
        ("(world_size + 1) // 2", 5, 0, 3),
        ("-epoch + 3 * world_size", 2, 1, 5),
        ("7 // -2", 1, 0, -4),  # floors, as Python does
        (3, 4, 2, 3),
    ],
)
def test_expressions_evaluate(text, world_size, epoch, expected):
    assert parse_expr(text).evaluate(world_size=world_size, epoch=epoch) == expected


def test_until_at_world_size_4_epoch_2_is_12():
    until = parse_until(">= world_size * (epoch + 1)")
    assert until.op == ">=" and until.target(world_size=4, epoch=2) == 12
    assert until.holds(12, world_size=4, epoch=2) and not until.holds(11, world_size=4, epoch=2)
    assert str(until) == ">= world_size * (epoch + 1)"


@pytest.mark.parametrize(
    "op, hits",
    [("==", [5]), ("!=", [4, 6]), (">=", [5, 6]), (">", [6]), ("<=", [4, 5]), ("<", [4])],
)
def test_every_comparison(op, hits):
    until = parse_until(f"{op} world_size + 1")
    assert [v for v in (4, 5, 6) if until.holds(v, world_size=4, epoch=0)] == hits


def test_expressions_keep_their_source_and_compare_by_meaning():
    assert str(parse_expr(" world_size  -1 ")) == "world_size  -1"
    assert parse_expr("world_size-1") == parse_expr("world_size - 1")
    assert parse_expr("(epoch)").variables == {"epoch"}
    assert parse_expr(2).literal == 2 and parse_expr("1 + 1").literal is None


@pytest.mark.parametrize(
    "text, phrase",
    [
        ("__import__('os')", "contains \"'\""),
        ("world_size ** 2", "uses '**', which is not allowed"),
        ("world_size / 2", "use '//' for integer division"),
        ("wrld_size + 1", "unknown name 'wrld_size' (did you mean 'world_size'?)"),
        ("1.5", "contains '.'"),
        ("1e3", "uses 1000.0, which is not an integer"),
        ("True", "uses True, which is not an integer"),
        ("epoch(1)", "uses call, which is not allowed"),
        ("1 +", "is not an expression"),
        ("", "is empty"),
        ("1" * 201, "longer than 200 characters"),
    ],
)
def test_bad_expressions_are_refused_with_the_reason(text, phrase):
    with pytest.raises(ProtocolError, match=re.escape(phrase)):
        parse_expr(text)


def test_division_by_zero_is_a_protocol_error():
    with pytest.raises(ProtocolError, match=r"divides by zero at world_size=1, epoch=0"):
        parse_expr("4 // (world_size - 1)").evaluate(world_size=1, epoch=0)


# ----- one-line errors with their place ----------------------------------------------------------

def test_unknown_name_lists_the_builtins_and_suggests_the_closest():
    with pytest.raises(ProtocolError) as info:
        load_protocol("epoch-flg")
    message = str(info.value)
    assert message.startswith("unknown protocol 'epoch-flg' (did you mean 'epoch-flag'?)")
    assert all(name in message for name in BUILTINS) and "\n" not in message
    with pytest.raises(ProtocolError, match=r"did you mean 'xchg-flag'"):
        load_protocol("xchg_flag")


def test_a_missing_file_is_named():
    with pytest.raises(ProtocolError, match=r"^nope/my\.toml: cannot read protocol file"):
        load_protocol("nope/my.toml")


def test_malformed_toml_gives_file_and_line():
    message = error_of(edit('op = "fence"', 'op "fence"'))
    assert message.startswith(f"{PATH}:10: malformed TOML: expected '='")
    assert "(column 4)" in message
    assert error_of(EXAMPLE + 'x = "abc').startswith(f"{PATH}: malformed TOML: unterminated string")


def test_unknown_field_names_step_line_and_suggestion():
    message = error_of(edit('value = 1\nsem = "release"', 'value = 1\nsemm = "release"'))
    assert message.startswith(f"{PATH}:16: signal step 3: unknown field 'semm' (did you mean 'sem'?)")


def test_field_of_another_op_is_refused_as_not_applying():
    message = error_of(edit("# cta | gpu | sys\n", '# cta | gpu | sys\nto = "all"\n'))
    assert message == f"{PATH}:13: signal step 2: field 'to' does not apply to fence (fence takes 'sem', 'scope')"


def test_unknown_op_suggests_the_closest():
    message = error_of(edit('op = "fence"', 'op = "fense"'))
    assert message.startswith(f"{PATH}:10: signal step 2: unknown op 'fense' (did you mean 'fence'?)")
    message = error_of(edit('op = "barrier"', 'op = "await"'))  # a producer may wait: it needs a read
    assert "signal step 1: missing field 'read'" in message


def test_bad_enum_value_lists_the_allowed_ones():
    message = error_of(edit('scope = "sys"\nto', 'scope = "cluster"\nto'))
    assert message == f"{PATH}:17: signal step 3: scope='cluster' is not one of 'cta', 'gpu', 'sys'"
    message = error_of(edit('read = "atomic_cas"', 'read = "atomic_load"'))
    assert "wait step 1: read='atomic_load' is not one of 'load', 'volatile_load', 'atomic_cas', 'atomic_add'" in message
    message = error_of(edit("tile_store = { cache = \".wt\" }", "tile_store = { cache = \".xx\" }"))
    assert message.startswith(f"{PATH}:4: tile_store.cache='.xx' is not one of '', '.wt', '.cg', '.cs'")


def test_bad_enum_value_in_a_file_keeps_file_and_line_and_suggests_the_closest():
    message = error_of(edit('scope = "sys"\nto', 'scope = "gpuu"\nto'))
    assert message == (
        f"{PATH}:17: signal step 3: scope='gpuu' is not one of 'cta', 'gpu', 'sys' (did you mean 'gpu'?)"
    )
    message = error_of(edit("tile_store = { cache = \".wt\" }", "tile_store = { cache = \".wtt\" }"))
    assert message == (
        f"{PATH}:4: tile_store.cache='.wtt' is not one of '', '.wt', '.cg', '.cs' (did you mean '.wt'?)"
    )
    message = error_of(edit("tile_store", 'reset = "hostt"\ntile_store'))
    assert message == f"{PATH}:4: reset='hostt' is not one of 'host', 'consumer', 'owner', 'none' (did you mean 'host'?) (host gives --reset host-between-barriers, consumer/owner/none give none)"


def test_enum_value_that_is_not_a_string_is_told_so():
    message = error_of(edit('scope = "sys"\nto', "scope = 3\nto"))
    assert message == f"{PATH}:17: signal step 3: scope=3 must be a string, one of 'cta', 'gpu', 'sys'"


# ----- syncverify.validation: the one allowed-value check -------------------------------------------

RESET_NAMES = ("host", "consumer", "none")


def _choice_error(value: object, **where: str) -> str:
    with pytest.raises(ValueError) as caught:
        syncverify.validation.one_of("reset", value, RESET_NAMES, error=ValueError, **where)
    return str(caught.value)


def test_one_of_returns_an_allowed_value():
    assert syncverify.validation.one_of("reset", "none", RESET_NAMES, error=ValueError) == "none"


def test_one_of_suggests_the_closest_name_when_one_is_close():
    assert _choice_error("hostt") == (
        "reset='hostt' is not one of 'host', 'consumer', 'none' (did you mean 'host'?)"
    )


def test_one_of_suggests_nothing_when_no_name_is_close():
    assert _choice_error("sometimes") == "reset='sometimes' is not one of 'host', 'consumer', 'none'"


def test_one_of_refuses_a_non_string_saying_it_must_be_a_string():
    assert _choice_error(None) == "reset=None must be a string, one of 'host', 'consumer', 'none'"
    assert _choice_error(["host"]) == "reset=['host'] must be a string, one of 'host', 'consumer', 'none'"


def test_one_of_appends_where_the_value_came_from():
    assert _choice_error("hostt", where="my.toml, step 3") == (
        "reset='hostt' is not one of 'host', 'consumer', 'none' (did you mean 'host'?) (my.toml, step 3)"
    )


def test_one_of_raises_the_callers_exception():
    with pytest.raises(ProtocolError, match=r"^--reset='nne' is not one of .* \(did you mean 'none'\?\)$"):
        syncverify.validation.one_of("--reset", "nne", RESET_NAMES, error=ProtocolError)


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.text(max_size=12), st.integers(), st.none(), st.lists(st.text(max_size=3))))
def test_one_of_accepts_exactly_the_allowed_names_and_refuses_in_one_line(value):
    try:
        syncverify.validation.one_of("reset", value, RESET_NAMES, error=ValueError)
    except ValueError as error:
        assert value not in RESET_NAMES
        assert str(error).startswith(f"reset={value!r} ")
        suggestion = re.search(r" \(did you mean '([^']*)'\?\)$", str(error))
        assert suggestion is None or suggestion.group(1) in RESET_NAMES
    else:
        assert value in RESET_NAMES


def test_until_that_does_not_parse():
    message = error_of(edit('">= world_size"', '"=> world_size"'))
    assert message.startswith(f"{PATH}:27: wait step 1: until='=> world_size' must start with one of")
    message = error_of(edit('">= world_size"', '">= world_size ** 2"'))
    assert message.startswith(f"{PATH}:27: wait step 1: until='>= world_size ** 2' uses '**'")


def test_missing_required_fields():
    assert error_of(edit("summary = ", "# summary = ")) == f"{PATH}: missing field 'summary'"
    message = error_of(edit("value = 1\n", ""))
    assert message == f"{PATH}:13: signal step 3: missing field 'value' (atomic_add needs it)"
    message = error_of(edit('until = ">= world_size"', "# no until"))
    assert message.startswith(f"{PATH}:20: wait step 1: missing field 'until'")
    message = error_of(edit('sem = "release"                               # release', "# release"))
    assert "signal step 2: missing field 'sem' (fence needs it)" in message


def test_empty_step_lists():
    text = 'name = "e"\nsummary = "s"\norigin = "o"\nsignal = []\nwait = []\n'
    expected = f"{PATH}:4: 'signal' is empty; a protocol needs at least one signal step"
    assert error_of(text) == expected
    head, signal = EXAMPLE.index("[[signal]]"), EXAMPLE.index("[[wait]]")
    text = EXAMPLE[:head].replace("origin", "wait = []\norigin") + EXAMPLE[head:signal]
    assert "'wait' is empty; a protocol needs at least one wait step" in error_of(text)


def test_unknown_top_level_field():
    message = error_of("sumary = 'x'\n" + EXAMPLE)
    assert message.startswith(f"{PATH}:1: unknown field 'sumary' (did you mean 'summary'?)")


def test_lock_typo_on_the_wait_side_is_caught():
    message = error_of(edit('until = ">= world_size"', 'lock = "redy"\nuntil = ">= world_size"'))
    assert message.startswith(f"{PATH}:27: wait step 1: lock='redy' is never written by a signal step (did you mean 'ready'?)")


def test_consumer_reset_needs_a_writing_wait_step():
    message = error_of("reset = 'consumer'\n" + EXAMPLE)
    assert message.startswith(f"{PATH}:1: reset='consumer' but no wait step can change its lock")
    ok = "reset = 'consumer'\n" + edit("compare = 0", 'compare = "world_size"')
    assert parse_protocol(ok, path=PATH).reset == "consumer"


def test_weak_stores_take_no_scope_and_strong_ones_no_cache():
    store = '[[signal]]\nop = "store"\nvalue = 1\n'
    base = EXAMPLE.replace("[[signal]]\nop = \"barrier\"", store.rstrip("\n") + "\nSTORE_EXTRA", 1)
    assert "a weak store takes no scope" in error_of(base.replace("STORE_EXTRA", 'scope = "gpu"'))
    message = error_of(base.replace("STORE_EXTRA", 'sem = "release"\nscope = "gpu"\ncache = ".wt"'))
    assert "cache='.wt' applies to weak stores only" in message
    assert "missing field 'scope'" in error_of(base.replace("STORE_EXTRA", 'sem = "release"'))
    release = parse_protocol(base.replace("STORE_EXTRA", 'sem = "release"\nscope = "gpu"'), path=PATH)
    assert (release.signal[0].sem, release.signal[0].scope, release.signal[0].cache) == ("release", "gpu", "")


def test_defaults_follow_triton():
    text = edit('sem = "release"\nscope = "sys"\nto = "all"', "")
    add = parse_protocol(text, path=PATH).signal[2]
    assert (add.sem, add.scope, add.to, add.lock) == ("acq_rel", "gpu", "self", "ready")


def test_bool_is_not_an_integer():
    message = error_of(edit("value = 1\n", "value = true\n"))
    assert "signal step 3: value=True must be an integer or an expression string" in message


def test_every_error_is_a_syncverify_error():
    assert issubclass(ProtocolError, SyncVerifyError)


def test_doctests_pass():
    for module in (
        syncverify.protocols.expressions,
        syncverify.protocols.model,
        syncverify.protocols.loader,
        syncverify.protocols.registry,
        syncverify.validation,
    ):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0 and result.attempted > 0, module.__name__


# ----- nothing but ProtocolError escapes ---------------------------------------------------------

FIELD_NAMES = [
    "op", "read", "sem", "scope", "value", "compare", "cache", "to", "from", "lock", "until",
    "name", "summary", "origin", "believed", "notes", "reset", "tile_store", "tile_load",
    "signal", "wait", "volatile",
]
VALUES = [
    *SIGNAL_OPS, *WAIT_OPS, "load", "volatile_load", "atomic_cas", "release", "acquire",
    "acq_rel", "sc", "weak", "relaxed", "cta", "gpu", "sys", "cluster", ".wt", ".cv", "all",
    "others", "self", "owner", "each", "host", "consumer", "none", ">= world_size", "== 1",
    "world_size - 1", "epoch // 0", "x", "",
]
scalars = st.one_of(
    st.sampled_from(VALUES), st.integers(), st.booleans(), st.floats(), st.text(max_size=20),
    st.none(),
)
plain = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(FIELD_NAMES) | st.text(max_size=8), inner, max_size=6),
    max_leaves=25,
)


def _only_protocol_errors(call) -> None:
    try:
        result = call()
    except ProtocolError as error:
        assert "\n" not in str(error)
    else:
        assert isinstance(result, Protocol)
        protocol_from_dict(result.to_dict())  # whatever parses also round-trips


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_random_text_raises_only_protocol_error(text):
    _only_protocol_errors(lambda: parse_protocol(text, path=PATH))


@settings(max_examples=300, deadline=None)
@given(plain)
def test_random_dicts_raise_only_protocol_error(data):
    _only_protocol_errors(lambda: protocol_from_dict(data))


@st.composite
def mutated_builtins(draw):
    """A built-in's dict with one field of one step (or the top level) replaced or dropped."""
    data = copy.deepcopy(draw(st.sampled_from(builtin_protocols())).to_dict())
    where = draw(st.sampled_from(["top", "signal", "wait"]))
    table = data if where == "top" else draw(st.sampled_from(data[where]))
    key = draw(st.sampled_from(FIELD_NAMES))
    if draw(st.booleans()):
        table.pop(key, None)
    else:
        table[key] = draw(plain)
    return data


@settings(max_examples=500, deadline=None)
@given(mutated_builtins())
def test_mutated_builtins_raise_only_protocol_error(data):
    _only_protocol_errors(lambda: protocol_from_dict(data))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(BUILTINS), st.data())
def test_mutated_builtin_text_raises_only_protocol_error(name, data):
    text = _builtin_text(name)
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, min(len(text), start + 12)))
    text = text[:start] + data.draw(st.text(max_size=12)) + text[end:]
    _only_protocol_errors(lambda: parse_protocol(text, path=PATH))


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=60), st.integers(), st.booleans(), st.none(), st.floats()))
def test_random_expressions_raise_only_protocol_error(value):
    try:
        expr = parse_expr(value)
    except ProtocolError:
        return
    try:
        assert isinstance(expr.evaluate(world_size=3, epoch=1), int)
    except ProtocolError:
        pass  # division by zero


def test_every_field_and_allowed_value_of_the_schema_is_in_the_format_doc():
    """docs/protocols.md is the one description of the format: every field and every value the
    schema accepts appears in it, in backticks."""
    from pathlib import Path

    s = syncverify.protocols.loader
    e = syncverify.protocols.expressions
    doc = (Path(__file__).resolve().parent.parent / "docs" / "protocols.md").read_text(encoding="utf-8")
    spans = re.findall(r"`([^`\n]+)`", doc.replace("```", ""))  # code spans; fences dropped
    words = {w for span in spans for w in re.findall(r"[A-Za-z_.][A-Za-z0-9_.]*|[=!<>]=?", span)}
    words |= {w.lstrip(".") for w in words} | {w.strip('"') for w in spans}
    vocabulary = {
        "top-level fields": s.TOP_FIELDS, "step fields": s._ALL_STEP_FIELDS,
        "tile_store fields": s.TILE_STORE_FIELDS, "tile_load fields": s.TILE_LOAD_FIELDS,
        "signal ops": s.SIGNAL_OPS, "wait ops": s.WAIT_OPS, "reads": s.READS, "resets": s.RESETS,
        "scopes": s.SCOPES, "fence sems": s.FENCE_SEMS, "store sems": s.STORE_SEMS,
        "atomic sems": s.ATOMIC_SEMS, "read sems": s.READ_SEMS, "targets": s.TARGETS,
        "sources": s.SOURCES, "comparisons": e.COMPARISONS, "variables": e.VARIABLES,
        "store caches": tuple(c for c in s.STORE_CACHES if c),
        "load caches": tuple(c for c in s.LOAD_CACHES if c),
    }
    missing = {group: [v for v in values if v not in words] for group, values in vocabulary.items()}
    assert not {g: v for g, v in missing.items() if v}, missing
