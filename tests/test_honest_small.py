"""Issue 23, item 8: the smaller honest answers (assert_safe's cause and traceback, a misspelled
keyword, epoch labels, --graph that draws nothing, zoo URLs, history words)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

import syncverify
from syncverify.cli import main
from syncverify.errors import ScenarioError

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
SB = str(Path(syncverify.__file__).parent / "litmus" / "examples" / "sb.litmus")


def test_assert_safe_failure_has_the_cause_and_hides_the_library(pytester):
    pytester.makepyfile(textwrap.dedent("""
        import syncverify

        def test_lock():
            syncverify.assert_safe("iris-465-hardcoded-lock-value", epochs=2)
    """))
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "cause: " in text and "epoch 1:" in text
    assert "check_protocol(protocol, scenario=scenario" not in text  # assert_safe's own source is hidden


def test_a_misspelled_keyword_is_one_line_with_did_you_mean():
    with pytest.raises(ScenarioError, match=r"unknown keyword epoch=2 \(did you mean 'epochs'\?\)"):
        syncverify.assert_safe("epoch-flag", epoch=2)


def test_text_traces_label_epochs(capsys):
    assert main(["check", "iris-465-hardcoded-lock-value", "--epochs", "2"]) == 1
    out = capsys.readouterr().out
    assert re.search(r"rank 0 consumer of tile 0 t0 epoch 1: R", out)
    assert re.search(r"t0 epoch 0: W", out)


def test_one_epoch_traces_have_no_epoch_label(capsys):
    assert main(["check", "xchg-flag"]) == 1
    assert " epoch 0:" not in capsys.readouterr().out


def test_litmus_graph_says_when_nothing_is_drawn(tmp_path, capsys):
    never = Path(SB).read_text().replace("exists (P0:r1 == 0 /\\ P1:r2 == 0)", "exists (P0:r1 == 5)")
    path = tmp_path / "never.litmus"
    path.write_text(never)
    assert main(["litmus", str(path), "--graph", str(tmp_path / "graphs")]) == 0
    assert "nothing drawn for SB" in capsys.readouterr().err


def test_list_zoo_does_not_cut_urls(capsys):
    from syncverify.protocols.registry import zoo_protocols

    assert main(["list", "--zoo"]) == 0
    out = capsys.readouterr().out
    for protocol in zoo_protocols():
        assert protocol.zoo.source in out


def test_no_history_words_in_messages_and_protocol_data():
    """'seed 001's fix' means nothing to a user: protocol files, the protocol guide, the README
    and the messages say what the kernel was (iris example 10), not where it sat in our history."""
    files = [*ROOT.glob("protocols/*.toml"), ROOT / "docs" / "protocols.md", ROOT / "README.md",
             ROOT / "kernels" / "plan.py"]
    found = [f"{path.name}: {match}" for path in files
             for match in re.findall(r"seed 00\d|the seed's|both seeds", path.read_text())]
    assert found == []
