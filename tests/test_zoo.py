"""The zoo of reported bugs (``protocols/zoo/``): each file cites its source, says what users saw
and what the model shows, and the model's verdict in the file's scenario is pinned here (W = 2).
The new constructs the zoo needs (loads with sem/scope, CAS signals, producer-side waits,
consumer back-signals, slots, per-rank-stream launches) are checked with known answers."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from syncverify.verdicts.check import check
from syncverify.cli import app, listing, main  # noqa: F401  (listing registers 'list')
from syncverify.protocols.lowering import lower_step
from syncverify.protocols import load_protocol
from syncverify.protocols.registry import zoo_names, zoo_protocols
from syncverify.scenarios.build import ScenarioOptions, build

REQUIRED = {  # the reported bugs the zoo must hold (issue 15), with their fixes
    "iris-462-gpu-scope-release", "iris-462-sys-scope-release", "iris-465-hardcoded-lock-value",
    "iris-465-call-number", "pytorch-signal-pad", "pytorch-signal-pad-relaxed-wait", "done-flag",
    "ready-flag-no-done", "two-slot-early-reuse",
    # issue 27: residency, programmatic dependent launch, graph replays
    "trtllm-18834-blockidx-paired-barrier", "trtllm-18834-grid-within-residency",
    "aiter-4977-persistent-grid-over-occupancy", "aiter-4977-grid-clamped-to-occupancy",
    "trtllm-14537-launch-dependents-no-visibility", "trtllm-14537-griddepcontrol-wait",
    "tokenspeed-351-graph-replay-shared-counter", "tokenspeed-351-counter-per-replay",
}


def verdict(protocol, world_size: int = 2, **overrides) -> str:
    z = protocol.zoo
    opts = z.check_options() | dict(world_size=world_size) | overrides
    result = check(build(protocol, ScenarioOptions(**opts)), timeout=120)
    assert result.safe is not None, f"{protocol.name}: the check did not finish"
    return "safe" if result.safe else ", ".join(sorted(result.violations))


def test_the_zoo_holds_every_reported_bug_of_the_issue():
    assert REQUIRED <= set(zoo_names())


@pytest.mark.parametrize("protocol", zoo_protocols(), ids=lambda p: p.name)
def test_each_zoo_file_cites_its_source_and_says_what_users_saw(protocol):
    z = protocol.zoo
    assert z.source.startswith("https://github.com/") and z.source.split("/")[-1] in protocol.origin + z.source
    assert z.users_saw and z.model_shows
    assert protocol.path == f"protocols/zoo/{protocol.name}.toml"


@pytest.mark.parametrize("protocol", zoo_protocols(), ids=lambda p: p.name)
def test_the_model_gives_the_verdict_each_zoo_file_records(protocol):
    assert verdict(protocol) == protocol.zoo.expected


def test_each_bug_and_its_fix_get_opposite_verdicts():
    pairs = [("iris-462-gpu-scope-release", "iris-462-sys-scope-release"),
             ("iris-465-hardcoded-lock-value", "iris-465-call-number"),
             ("pytorch-signal-pad-relaxed-wait", "pytorch-signal-pad"),
             ("ready-flag-no-done", "done-flag"),
             ("trtllm-18834-blockidx-paired-barrier", "trtllm-18834-grid-within-residency"),
             ("aiter-4977-persistent-grid-over-occupancy", "aiter-4977-grid-clamped-to-occupancy"),
             ("tokenspeed-351-graph-replay-shared-counter", "tokenspeed-351-counter-per-replay")]
    for bug, fix in pairs:
        assert verdict(load_protocol(bug)) != "safe" and verdict(load_protocol(fix)) == "safe", (bug, fix)


def test_buffer_reuse_needs_launches_ordered_per_rank_only():
    """With a host barrier between calls, reuse cannot race: ready-flag-no-done is safe there."""
    protocol = load_protocol("ready-flag-no-done")
    assert verdict(protocol, launches="host-barrier") == "safe"
    assert "race" in verdict(protocol)


def test_two_slots_move_the_reuse_race_to_the_third_call():
    protocol = load_protocol("two-slot-early-reuse")
    assert verdict(protocol, epochs=2) == "safe"  # calls 0 and 1 use different slots
    assert verdict(protocol, epochs=3) == "race"


def test_list_zoo_names_every_zoo_protocol_with_its_verdict():
    result = CliRunner().invoke(app, ["list", "--zoo", "--json"])
    assert result.exit_code == 0
    listed = {item["name"]: item["expected"] for item in json.loads(result.output)["zoo"]}
    assert listed == {p.name: p.zoo.expected for p in zoo_protocols()}


def test_a_load_with_sem_and_scope_is_a_one_thread_acquire_load_then_a_barrier():
    step = load_protocol("iris-465-call-number").wait[0]
    assert (step.read, step.sem, step.scope) == ("load", "acquire", "sys")
    ld, bar = lower_step(step)
    assert (ld.kind, ld.threads, ld.sem, ld.scope, ld.poll, bar.kind) == ("ld", "one", "acquire", "sys", True, "bar")


def test_a_cas_signal_with_until_is_a_spin_and_without_it_a_one_off_write():
    spin = load_protocol("pytorch-signal-pad").signal[1]
    assert (spin.op, spin.to, spin.until.source) == ("atomic_cas", "self", "== 0")
    assert [(o.kind, o.op, o.sem, o.poll) for o in lower_step(spin)] == [("atom", "cas", "release", True), ("bar", "", "weak", False)]
    once = spin.__class__(**{**spin.__dict__, "until": None})
    assert [(o.kind, o.op, o.poll) for o in lower_step(once)] == [("atom", "cas", False)]


def test_slots_rotate_lock_and_staging_locations_with_the_epoch():
    scenario = build(load_protocol("two-slot-early-reuse"),
                     ScenarioOptions(world_size=2, epochs=3, launches="per-rank-stream", symmetry=False))
    locs = {(str(t.phase), i.loc) for t in scenario.program.threads for i in t.instructions if getattr(i, "loc", "")}
    assert ("e0.r1", "ready#0.r1.t0") in locs and ("e1.r1", "ready#1.r1.t0") in locs
    assert ("e2.r1", "ready#0.r1.t0") in locs and ("e2.r1", "partial#0.r1.t0.s0") in locs
    assert not any(loc.startswith("out#") for _phase, loc in locs)  # the output does not rotate


def test_an_owner_reset_makes_a_counter_safe_across_calls_without_the_host():
    from syncverify.protocols import rules
    from syncverify.protocols import protocol_from_dict

    def counter(reset):
        return protocol_from_dict({
            "name": f"counter-{reset}", "summary": "s", "origin": "test", "reset": reset,
            "signal": [{"op": "barrier"}, {"op": "atomic_add", "value": 1, "sem": "release", "scope": "sys", "to": "owner"}],
            "wait": [{"op": "await", "read": "load", "sem": "acquire", "scope": "sys", "until": ">= world_size"}],
        })

    (reset,) = rules.owner_resets(counter("owner"))
    assert (reset.op, reset.sem, reset.scope, reset.to, reset.lock) == ("store", "relaxed", "sys", "self", "ready")
    opts = ScenarioOptions(world_size=2, epochs=2)
    assert "stale-read" in check(build(counter("none"), opts), timeout=60).violations
    assert check(build(counter("owner"), opts), timeout=60).safe


BASE = """
name = "bad"
summary = "s"
origin = "test"
reset = "none"
[[signal]]
op = "atomic_add"
value = 1
sem = "release"
scope = "sys"
to = "all"
[[wait]]
op = "await"
read = "load"
sem = "acquire"
scope = "sys"
until = ">= world_size * (epoch + 1)"
"""


@pytest.mark.parametrize("extra, message", [
    ('[[after_load]]\nop = "atomic_add"\nlock = "done"\nvalue = 1\nsem = "release"\nscope = "sys"\nto = "all"\n',
     "bad.toml:20: after_load step 1: back-signal to lock='done' that no step waits for"),
    ('[[before_store]]\nop = "await"\nlock = "done"\nread = "load"\nsem = "acquire"\nscope = "sys"\nuntil = ">= epoch"\n',
     "bad.toml:20: before_store step 1: lock='done' is never written by a consumer step (wait or after_load)"),
    ('slots = 0\n', "bad.toml:20: slots=0 must be an integer from 1 to 8"),
])
def test_bad_constructs_are_one_line_naming_the_step_exit_2(tmp_path, capsys, extra, message):
    path = tmp_path / "bad.toml"
    head, _, rest = BASE.partition("[[signal]]")
    text = head + (extra if extra.startswith("slots") else "") + "[[signal]]" + rest + ("" if extra.startswith("slots") else extra)
    path.write_text(text)
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message.split(": ", 1)[1] in err and err.startswith("syncverify: error: ")


def test_a_wait_on_a_lock_no_one_signals_names_the_step(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text(BASE.replace('until = ">= world_size', 'lock = "redy"\nuntil = ">= world_size'))
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "wait step 1: lock='redy' is never written by a signal step (did you mean 'ready'?)" in err


def test_a_load_with_a_scope_but_no_sem_gets_a_hint(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text(BASE.replace('sem = "acquire"\nscope = "sys"\nuntil', 'scope = "sys"\nuntil'))
    assert main(["check", str(path)]) == 2
    assert "a weak load takes no scope; give sem = 'acquire' or 'relaxed'" in capsys.readouterr().err
