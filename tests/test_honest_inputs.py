"""Issue 23, items 5 and 6: every input bounded, nothing silently accepted.

Each test drives the real entry point (:func:`syncverify.cli.main`) and asserts on the exit code
and the one line a user sees."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import syncverify
import syncverify.litmus.runner
from syncverify.cli import main
from syncverify.inputs import MAX_INPUT_BYTES

EXAMPLES = Path(syncverify.__file__).parent / "litmus" / "examples"
PROTOCOLS = Path(syncverify.__file__).parent / "protocols"


# Four threads, two locations: about 3,000 executions, under a second, long enough for progress.
SLOW_LITMUS = """PTX slow
"four threads, two locations each way: enough executions to take a moment"
{
x=0; y=0;
}
 P0@cta 0,gpu 0        | P1@cta 1,gpu 0        | P2@cta 2,gpu 0        | P3@cta 3,gpu 0        ;
 st.relaxed.gpu x, 1   | st.relaxed.gpu y, 1   | ld.relaxed.gpu r0, x  | ld.relaxed.gpu r0, y  ;
 st.relaxed.gpu y, 2   | st.relaxed.gpu x, 2   | ld.relaxed.gpu r1, y  | ld.relaxed.gpu r1, x  ;
 ld.relaxed.gpu r2, x  | ld.relaxed.gpu r2, y  | ld.relaxed.gpu r2, x  | ld.relaxed.gpu r2, y  ;
exists (P2:r0 == 1 /\\ P3:r0 == 1)
"""


@pytest.fixture
def slow_litmus(tmp_path) -> str:
    path = tmp_path / "slow.litmus"
    path.write_text(SLOW_LITMUS)
    return str(path)


def _one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err
    return lines[0]


def _not_regular(tmp_path: Path, kind: str) -> Path:
    if kind == "device":
        return Path("/dev/zero")
    if kind == "fifo":
        fifo = tmp_path / "pipe.toml"
        os.mkfifo(fifo)
        return fifo
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    return folder


@pytest.mark.timeout(20)  # a FIFO read would block forever: the guard makes that a failure
@pytest.mark.parametrize("command", ["check", "litmus"])
@pytest.mark.parametrize("kind", ["device", "fifo", "directory"])
def test_only_regular_files_are_read(tmp_path, capsys, command, kind):
    path = _not_regular(tmp_path, kind)
    code = main([command, str(path)])
    line = _one_error_line(capsys)
    assert code == 2
    assert "not a regular file" in line and str(path) in line


@pytest.mark.parametrize("command, suffix", [("check", ".toml"), ("litmus", ".litmus")])
def test_input_files_have_a_size_limit(tmp_path, capsys, command, suffix):
    big = tmp_path / f"big{suffix}"
    big.write_bytes(b"#" * (MAX_INPUT_BYTES + 1))
    code = main([command, str(big)])
    line = _one_error_line(capsys)
    assert code == 2 and "over the limit" in line


def test_a_toml_file_with_another_extension_is_read_as_a_protocol(tmp_path, capsys, monkeypatch):
    text = (PROTOCOLS / "barrier-fenced-release-acquire.toml").read_text()
    (tmp_path / "proto.txt").write_text(text)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "proto.txt"]) == 0
    assert "SAFE" in capsys.readouterr().out


def test_litmus_has_the_default_timeout_of_check(monkeypatch, capsys):
    seen = {}
    real = syncverify.litmus.runner.run_litmus

    def spy(program, **options):
        seen.update(options)
        return real(program, **options)

    monkeypatch.setattr("syncverify.cli.litmus.run_litmus", spy)
    assert main(["litmus", str(EXAMPLES / "sb.litmus")]) == 0
    assert seen["timeout"] == 600.0


def test_litmus_shows_progress(capsys, slow_litmus):
    code = main(["litmus", slow_litmus, "--progress-every", "0.05"])
    captured = capsys.readouterr()
    assert code == 0
    assert "executions" in captured.err and "elapsed" in captured.err
    assert "violations" not in captured.err  # a litmus test has observations, not violations


@pytest.mark.parametrize("command", ["check", "litmus"])
def test_a_memory_cap_answers_unknown(capsys, slow_litmus, command):
    argv = {"check": ["check", "barrier-fenced-release-acquire", "--scenario", "all-scatter", "--world-size", "3"],
            "litmus": ["litmus", slow_litmus]}[command]
    code = main(argv + ["--max-memory", "1", "--progress-every", "0.01"])
    captured = capsys.readouterr()
    assert code == 3, captured.out + captured.err
    assert "'memory'" in captured.out and "--max-memory" in captured.out


# ----- item 6: silently accepted input --------------------------------------------------------

@pytest.mark.parametrize("argv, phrase", [
    (["check", "epoch-flag", "--push", "xchg-flag"], "no push stage"),
    (["check", "epoch-flag", "--scenario", "gemm-reduce-scatter", "--push", "epoch-flag"], "no push stage"),
    (["check", "epoch-flag", "--scenario", "all-scatter", "--push", "no-such-push"], "unknown protocol 'no-such-push'"),
    (["stress", "--kernel", "all-reduce", "--protocol", "epoch-flag", "--push", "xchg-flag", "--interpret"], "no push stage"),
])
def test_push_is_refused_where_it_changes_nothing(capsys, argv, phrase):
    code = main(argv)
    line = _one_error_line(capsys)
    assert code == 2 and phrase in line


def test_push_still_works_in_all_scatter(capsys):
    assert main(["check", "epoch-flag", "--scenario", "all-scatter", "--push", "epoch-flag"]) == 0


def test_a_literal_the_lock_cannot_hold_is_refused(tmp_path, capsys):
    text = (PROTOCOLS / "epoch-flag.toml").read_text()
    assert "until" in text
    big = tmp_path / "big.toml"
    big.write_text(text.replace('name = "epoch-flag"', 'name = "big"').replace(
        'until = ">= world_size * (epoch + 1)"', 'until = ">= 12345678901234567890123"'))
    assert "12345678901234567890123" in big.read_text()
    code = main(["check", str(big)])
    line = _one_error_line(capsys)
    assert code == 2 and "32-bit lock cannot hold" in line and "wrap" in line


def _litmus(tmp_path: Path, body: str) -> str:
    path = tmp_path / "t.litmus"
    path.write_text(body)
    return str(path)


MP = """PTX mp-typo
"message passing"
{{
x=0; flag=0;
}}
 P0@cta 0,gpu 0          | P1@cta 1,gpu 0            ;
 st.relaxed.gpu x, 1     | ld.acquire.gpu r0, {flag}  ;
 st.release.gpu flag, 1  | ld.relaxed.gpu r1, x      ;
{condition}
"""


def test_litmus_warns_on_a_location_used_once(tmp_path, capsys):
    path = _litmus(tmp_path, MP.format(flag="flga", condition="exists (P1:r0 == 1 /\\ P1:r1 == 0)"))
    assert main(["litmus", path]) == 0
    err = capsys.readouterr().err
    assert "'flga' is used only once" in err and ":7:" in err


def test_litmus_warns_on_a_test_without_a_final_condition(tmp_path, capsys):
    path = _litmus(tmp_path, MP.format(flag="flag", condition=""))
    assert main(["litmus", path]) == 0
    err = capsys.readouterr().err
    assert "no final condition" in err and "exists (true)" in err


def test_litmus_without_typos_has_no_warning(tmp_path, capsys):
    path = _litmus(tmp_path, MP.format(flag="flag", condition="exists (P1:r0 == 1 /\\ P1:r1 == 0)"))
    assert main(["litmus", path]) == 0
    assert "warning" not in capsys.readouterr().err


# ----- item 7: compare covers the four scenarios ----------------------------------------------

def test_compare_all_means_the_four_scenarios(capsys):
    import json

    assert main(["compare", "barrier-fenced-release-acquire", "--no-gpu", "--json", "--jobs", "1"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert sorted(row["scenario"] for row in rows) == sorted(
        ["all-reduce", "all-scatter", "all-gather-gemm", "gemm-reduce-scatter"])


def test_compare_takes_each_scenario_by_name(capsys):
    assert main(["compare", "barrier-fenced-release-acquire", "--no-gpu", "--scenario", "all-gather-gemm",
                 "--jobs", "1"]) == 0
    assert "all-gather-gemm" in capsys.readouterr().out


# ----- stress and bench: their own defaults valid, bad options before the missing GPU ----------

def _has_cuda() -> bool:
    from syncverify.compare import cuda_available

    return cuda_available()


@pytest.mark.parametrize("kernel", ["all-reduce", "all-scatter", "all-gather-gemm", "gemm-reduce-scatter"])
def test_stress_defaults_are_valid_at_every_world_size(kernel):
    from syncverify.kernels.config import MAX_WORLD, check_config
    from syncverify.stress.campaign import campaign_options, kernel_config

    for world_size in range(1, MAX_WORLD + 1):
        check_config(kernel_config(campaign_options(protocol="epoch-flag", kernel=kernel, world_size=world_size,
                                                    virtual_ranks=True)))


@pytest.mark.skipif(_has_cuda(), reason="without a GPU the one line is the missing GPU")
@pytest.mark.parametrize("kernel", ["all-reduce", "all-scatter", "all-gather-gemm", "gemm-reduce-scatter"])
def test_stress_at_three_ranks_says_only_that_the_gpu_is_missing(capsys, kernel):
    code = main(["stress", "--kernel", kernel, "--protocol", "epoch-flag", "--world-size", "3", "--iterations", "1"])
    line = _one_error_line(capsys)  # one line: no progress line before it
    assert code == 2 and "needs a CUDA GPU" in line


@pytest.mark.parametrize("argv, phrase", [
    (["stress", "--kernel", "all-reduce", "--protocol", "epoch-flag", "--interpret", "--iterations", "1",
      "--replay", "99"], "--replay=99 is past the run's --iterations=1"),
    (["stress", "--kernel", "all-reduce", "--protocol", "epoch-flag", "--interpret", "--replay", "-1"],
     "--replay=-1 must be"),
    (["stress", "--kernel", "all-reduce", "--protocol", "epoch-flag", "--world-size", "0"], "--world-size=0 must be in 1..8"),
    (["bench", "--kernel", "bogus"], "--kernel='bogus' is not one of"),
    (["bench", "--kernel", "all-reduce", "--world-size", "0"], "--world-size=0 must be in 1..8"),
])
def test_bad_stress_and_bench_options_come_first(capsys, argv, phrase):
    code = main(argv)
    line = _one_error_line(capsys)
    assert code == 2 and phrase in line


@pytest.mark.parametrize("argv, phrase", [
    (["check", "epoch-flag", "--world-size", "65"], "--world-size=65 must be in 1..64"),
    (["check", "epoch-flag", "--threads-per-cta", "9"], "--threads-per-cta=9 must be in 1..8"),
    (["check", "epoch-flag", "--epochs", "0"], "--epochs=0 must be at least 1"),
])
def test_one_wording_for_a_range(capsys, argv, phrase):
    assert main(argv) == 2
    assert phrase in _one_error_line(capsys)


def test_help_gives_the_ranges(capsys):
    assert main(["check", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "Threads modeled per CTA, 1..8" in text and "at least 1" in text and "Ranks, 1..64" in text


def test_sample_answers_exactly_where_the_exhaustive_check_is_cheap(capsys):
    """all-scatter at W = 3: the sampler alone ran to --timeout (it must see every candidate of
    the whole program, which the exhaustive check splits into stages)."""
    code = main(["check", "barrier-fenced-release-acquire", "--scenario", "all-scatter", "--world-size", "3",
                 "--sample", "10", "--timeout", "8"])
    out = capsys.readouterr().out
    assert code == 0 and "SAFE" in out and "answer is exact, not sampled" in out


@pytest.mark.parametrize("option", ["--sweep", "--check"])
def test_bench_input_files_are_bounded_too(tmp_path, capsys, option):
    code = main(["bench", option, "/dev/zero"])
    line = _one_error_line(capsys)
    assert code == 2 and "not a regular file" in line


@pytest.mark.parametrize("scenario, push, phrase", [
    ("all-reduce", "xchg-flag", "no push stage"),
    ("all-scatter", "no-such-push", "unknown protocol 'no-such-push'"),
])
def test_the_python_api_refuses_a_push_that_changes_nothing(scenario, push, phrase):
    from syncverify.errors import SyncVerifyError

    with pytest.raises(SyncVerifyError, match=phrase):
        syncverify.check_protocol("epoch-flag", scenario=scenario, push=push)
