"""Causes: each unsafe built-in's violations are explained by the first missing link of its chain."""

from __future__ import annotations

import json

import pytest

from syncverify.verdicts.causes import CAUSE_KINDS, cause
from syncverify.verdicts.check import check_protocol
from syncverify.protocols import builtin_names, load_protocol, protocol_from_dict

GENERIC = {"unexplained"}


def _causes(protocol, scenario="all-reduce", **options):
    result = check_protocol(protocol, scenario=scenario, world_size=2, **options)
    assert result.safe is False
    return result, {kind: cause(v, result.scenario) for kind, v in result.violations.items()}


def _names(c):
    return [s.name for s in c.steps]


@pytest.mark.parametrize("scenario", ["all-reduce", "all-scatter"])
def test_fenced_release_acquire_lacks_the_cta_barrier_before_its_signal(scenario):
    _result, causes = _causes("fenced-release-acquire", scenario)
    for c in causes.values():
        assert c.kind == "no-cta-barrier"
        assert any(name.endswith("signal step 2") for name in _names(c))
        assert "thread 0 only" in c.text and "barrier" in c.text
        assert c.steps[0].where.endswith("fenced-release-acquire.toml:17")


def test_barrier_release_xchg_cas_acquire_acquires_on_one_thread_only():
    for scenario in ("all-reduce", "all-scatter"):
        _result, causes = _causes("barrier-release-xchg-cas-acquire", scenario)
        assert causes["race"].kind == "consumer-not-ordered"
        assert any(name.endswith("wait step 2") for name in _names(causes["race"]))
        assert causes["race"].details == {"acquire_thread": 0, "load_thread": 1}
    # all-scatter's unwritten read is the same cause; all-reduce's reads a rank the wait never polls
    assert _causes("barrier-release-xchg-cas-acquire", "all-scatter")[1]["unwritten-read"].kind == "consumer-not-ordered"
    assert _causes("barrier-release-xchg-cas-acquire")[1]["unwritten-read"].kind == "wait-without-signal"


def test_release_xchg_cas_acquire_without_a_barrier_fails_first_at_the_producer():
    _result, causes = _causes("release-xchg-cas-acquire", "all-scatter")
    assert {c.kind for c in causes.values()} == {"no-cta-barrier"}


@pytest.mark.parametrize("scenario", ["all-reduce", "all-scatter"])
def test_wt_cv_flag_weak_flag_store_is_not_morally_strong_with_the_volatile_poll(scenario):
    _result, causes = _causes("wt-cv-flag", scenario)
    for c in causes.values():
        assert c.kind == "not-morally-strong"
        assert c.details == {"weak_step": _names(c)[0], "sem": "weak"}
        assert _names(c)[0].endswith("signal step 2")
        assert "weak store" in c.text and "volatile" in c.text


def _gpu_scoped(name="epoch-flag"):
    data = load_protocol(name).to_dict()
    for step in data["signal"] + data["wait"]:
        if "scope" in step:
            step["scope"] = "gpu"
    data["name"] = f"{name}-gpu"
    return protocol_from_dict(data)


def test_release_acquire_at_gpu_scope_across_ranks_is_a_scope_cause():
    _result, causes = _causes(_gpu_scoped())
    for kind in ("race", "unwritten-read"):
        c = causes[kind]
        assert c.kind == "scope"
        assert c.details["scope"] == "gpu" and c.details["needed"] == "sys"
        assert c.steps[0].name == "signal step 2" and c.steps[0].where is None  # not from a file
    hang = causes["hang"]
    assert hang.kind == "unreachable-target" and hang.details["lost_update"]
    assert "scope sys is needed" in hang.text


def test_add_counter_skip_self_hangs_on_an_unreachable_target():
    for scenario in ("all-reduce", "all-scatter"):
        _result, causes = _causes("add-counter-skip-self", scenario)
        c = causes["hang"]
        assert c.kind == "unreachable-target"
        assert c.details["needed"] == ">= 2" and c.details["last_value"] == 1
        assert c.details["missing_ranks"] == [0]
        assert _names(c)[0].endswith("wait step 2")
        assert "needs" in c.text and "last value it reads is 1" in c.text


@pytest.mark.parametrize("protocol", ["epoch-flag", "barrier-fenced-release-acquire"])
def test_a_racing_host_reset_is_named_as_the_cause(protocol):
    _result, causes = _causes(protocol, epochs=2, reset="host-racing")
    assert causes["race"].kind == "reset-race"
    assert causes["hang"].kind == "reset-race"
    assert causes["hang"].details["reset_policy"] == "host-racing"
    if "stale-read" in causes:
        assert causes["stale-read"].kind == "reset-race"


@pytest.mark.parametrize("scenario", ["all-reduce", "all-scatter"])
def test_every_unsafe_builtin_violation_gets_a_specific_cause(scenario):
    for name in builtin_names():
        result = check_protocol(name, scenario=scenario, world_size=2)
        for kind, v in result.violations.items():
            c = v.cause(result.scenario)
            assert c.kind in CAUSE_KINDS and c.kind not in GENERIC, (name, kind, c.text)
            assert c.steps, (name, kind)
            assert c.text


def test_the_json_verdict_and_the_text_output_carry_the_cause(capsys):
    from syncverify.cli import main

    assert main(["check", "wt-cv-flag", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    for v in data["violations"]:
        assert v["explanation"] and v["cause"]["kind"] == "not-morally-strong"
        assert v["cause"]["steps"][0]["where"].endswith("wt-cv-flag.toml:16")
    assert main(["check", "fenced-release-acquire"]) == 1
    out = capsys.readouterr().out
    assert out.count("cause: only the signalling thread is ordered") == 2


# ----- causes that match their traces (issue 23, item 3) ----------------------------------------

from tests.test_stress_cli import GENERATION_FLAG as COUNTING_FLAG  # noqa: E402 -- one text of it

GENERATION_FLAG = COUNTING_FLAG.replace('until = ">= 1"', 'until = "== 1"')  # a generation flag: == 1


@pytest.mark.parametrize("protocol, scenario", [("iris-465-hardcoded-lock-value", "all-reduce"),
                                                ("generation-flag", "gemm-reduce-scatter")])
def test_a_flag_left_by_the_previous_call_is_the_cause_and_the_needed_edge(protocol, scenario, tmp_path, capsys):
    from syncverify.cli import main

    if protocol == "generation-flag":
        protocol = str(tmp_path / "generation-flag.toml")
        (tmp_path / "generation-flag.toml").write_text(GENERATION_FLAG)
    assert main(["check", protocol, "--scenario", scenario, "--epochs", "2"]) == 1
    out = capsys.readouterr().out
    assert "no poll reads a signal" not in out
    assert out.count("cause: call 0's value satisfies call 1's wait: wait step 1 of rank 0's consumer") == 2
    result, causes = _causes(protocol, scenario, epochs=2)
    for kind, c in causes.items():
        x = result.violations[kind].execution
        assert c.kind == "stale-signal"
        poll, source = x.events[c.details["poll"]], x.events[c.details["reads_from"]]
        assert x.rf[poll.eid] == source.eid and poll.value == source.value == c.details["read"] == 1
        (signal, polled), = c.evidence  # the needed edge: this call's signal to the poll that missed it
        assert polled == poll.eid and x.events[signal].loc == poll.loc and "signal step" in x.events[signal].label
        assert result.scenario.threads[x.events[signal].thread].epoch == 1


def test_suggest_finds_a_reset_and_a_target_that_grows_with_the_call(capsys):
    from syncverify.cli import main

    assert main(["check", "iris-465-hardcoded-lock-value", "--epochs", "2", "--suggest"]) == 1
    out = capsys.readouterr().out
    assert 'fix 1: reset the locks between calls: reset = "host" (was "none")' in out
    assert "fix 2: make the target grow with the call: wait step 1's until = '== epoch + 1'" in out
    assert '+until = "== epoch + 1"' in out and '+value = "epoch + 1"' in out


def test_a_hang_of_a_per_rank_copy_blames_the_target_not_the_to_that_from_each_implies(capsys):
    from syncverify.cli import main

    data = load_protocol("iris-465-hardcoded-lock-value").to_dict()
    data["wait"][0]["until"] = "== 2"  # each copy is written once, by its own rank, with 1
    result, causes = _causes(protocol_from_dict({**data, "reset": "host"}))
    hang = causes["hang"]
    assert hang.kind == "unreachable-target" and hang.details["missing_ranks"] == []
    assert "look at the signal step's `to`" not in hang.text
    assert 'with from = "each"' in hang.text and "look at the wait's `until`" in hang.text
