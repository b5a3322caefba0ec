"""Messages a new user found misleading: each test drives the real entry point and fails on the old text."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from syncverify.cli import app, main


EXAMPLES = Path(__file__).parents[1] / "syncverify" / "litmus" / "examples"

PROTOCOL = '''name = "{name}"
summary = "a message test"
origin = "tests/test_messages.py"
reset = "none"

{signal}
[[wait]]
op = "await"
read = "atomic_add"
value = 0
sem = "acquire"
scope = "sys"
until = "{until}"
'''

SIGNAL = '''[[signal]]
op = "atomic_add"
value = {value}
sem = "release"
scope = "sys"
to = "all"
'''


def protocol_file(tmp_path: Path, *, name: str = "msg", value: str = "1", until: str = ">= world_size",
                  signals: int = 1) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(PROTOCOL.format(name=name, signal="\n".join([SIGNAL.format(value=value)] * signals),
                                    until=until))
    return path


def unwrapped(text: str) -> str:
    """Help text as one line: click wraps at spaces and after hyphens."""
    return re.sub(r"-\s+", "-", " ".join(text.split()))


def test_max_polls_0_names_only_real_options(capsys):
    code = main(["stress", "--protocol", "xchg-flag", "--interpret", "--iterations", "1", "--max-polls", "0"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip() == "syncverify: error: --max-polls=0 must be at least 1"
    assert "--chunk" not in err


def test_a_division_by_zero_in_a_value_names_file_line_step_and_field(tmp_path, capsys):
    path = protocol_file(tmp_path, value='"1 // (world_size - 2)"')
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"syncverify: error: {path}:6: signal step 1: value='1 // (world_size - 2)' "
                           "divides by zero at world_size=2, epoch=0")


def test_a_division_by_zero_in_until_at_epoch_0_names_file_line_step_and_field(tmp_path, capsys):
    path = protocol_file(tmp_path, until=">= 4 // (epoch)")
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"syncverify: error: {path}:13: wait step 1: until='>= 4 // (epoch)' "
                           "divides by zero at world_size=2, epoch=0")
    assert err.count("\n") == 1


def test_max_steps_says_how_many_steps_of_which_role_and_the_option_that_raises_it(tmp_path, capsys):
    path = protocol_file(tmp_path, signals=600)
    assert main(["check", str(path)]) == 3
    out = capsys.readouterr().out
    assert "limit 'max-steps' hit (rank 0 producer" in out
    # 600 signal steps, the tile store and the GEMM's tl.dot barrier (protocols.lowering.lower_dot)
    assert "has 600 signal steps, 602 instructions in all, more than the bound of 500" in out
    assert "raise it with --max-steps N, N above 602" in out
    assert "a loop that writes every iteration" not in out


def test_an_unknown_litmus_result_says_unknown_not_fails(capsys):
    assert main(["litmus", str(EXAMPLES / "mp-cta.litmus"), "--max-executions", "1"]) == 3
    out = capsys.readouterr().out
    assert "Condition exists (unknown)" in out
    assert "(fails)" not in out


def test_check_of_a_litmus_file_says_to_use_syncverify_litmus(capsys):
    path = str(EXAMPLES / "mp-cta.litmus")
    assert main(["check", path]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"syncverify: error: {path} is a litmus test, not a protocol: "
                           f"run it with 'syncverify litmus {path}'")


def test_sample_without_seed_prints_seed_0_and_how_to_change_it(capsys, monkeypatch):
    import syncverify.cli.check

    monkeypatch.setattr(syncverify.cli.check, "EXACT_FIRST", 0.0)  # sample even where the exact check is cheap
    main(["check", "epoch-flag", "--sample", "1"])
    out = capsys.readouterr().out
    assert "sampled 1 candidate execution (seed 0; --seed N draws others)" in out
    assert "seed given" not in out
    assert "none in 1 sample:" in out


def test_unsafe_with_a_limit_hit_says_unsafe_not_unknown(capsys):
    assert main(["check", "xchg-flag", "--max-executions", "1"]) == 1
    out = capsys.readouterr().out
    assert ("unsafe: the violations below are real; the search stopped early (limit 'max-executions' hit: "
            "1 consistent execution), so other kinds may exist") in out
    assert "unknown:" not in out


def test_counts_of_one_are_singular(capsys):
    main(["check", "xchg-flag", "--max-executions", "1"])
    out = capsys.readouterr().out
    assert "1 consistent execution (1 candidate) in" in out
    assert "executions (1 candidates)" not in out


def test_reset_option_and_reset_field_name_each_other(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    mapping = "default: from the protocol's reset field: host -> host-between-barriers, consumer/owner/none -> none"
    for command in ("check", "stress"):
        result = CliRunner().invoke(app, [command, "--help"])
        assert mapping in unwrapped(result.output), command
    assert main(["check", "xchg-flag"]) == 1
    assert 'reset host-between-barriers (the protocol\'s reset = "host")' in capsys.readouterr().out
    assert main(["check", "xchg-flag", "--reset", "sometimes"]) == 2
    assert f"({mapping})" in capsys.readouterr().err


def test_stress_help_lists_its_exit_codes(monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    result = CliRunner().invoke(app, ["stress", "--help"])
    assert result.exit_code == 0
    assert "Exit codes: 0 clean (no bad tile), 1 bad tiles found (or a stopped run), 2 bad input." in unwrapped(
        result.output)


def test_graph_of_a_safe_result_says_there_is_nothing_to_draw(tmp_path, capsys):
    from syncverify.cli import main

    png = tmp_path / "safe.png"
    assert main(["check", "epoch-flag", "--graph", str(png)]) == 0
    err = capsys.readouterr().err
    assert "nothing drawn: no violation was found" in err
    assert not png.exists()
