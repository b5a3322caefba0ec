"""The known-answer suite: litmus tests whose verdict comes from the PTX model's sources.

Each file in ``tests/litmus/known/`` states, before its ``PTX`` header::

    // expect: Never | Sometimes | Always     (herd7's observation of the condition's proposition)
    // hang: true | false                     (can some execution spin or wait forever?)
    // source: "<sentence of the source>" (where it comes from)

The expected answers come from the PTX ISA 8.x "Memory Consistency Model" chapter, Lustig,
Sahasrabuddhe, Giroux, "A Formal Analysis of the NVIDIA PTX Memory Consistency Model" (ASPLOS 2019)
and its artifact, the Dartagnan (Dat3M) PTX litmus tests and ``cat/ptx-v6.0.cat``, and NVIDIA's
mixedproxy tests. They are never edited to match the engine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from syncverify.litmus.parser import parse_litmus_file
from syncverify.litmus.runner import run_litmus

KNOWN = Path(__file__).parent / "litmus" / "known"
FILES = sorted(KNOWN.glob("*.litmus"))

_FIELD = re.compile(r"//\s*(expect|hang|source):\s*(.*\S)\s*\Z")


@dataclass(frozen=True)
class Expected:
    observation: str
    can_hang: bool
    source: str


def expected(path: Path) -> Expected:
    """The ``// expect:``, ``// hang:`` and ``// source:`` lines above the ``PTX`` header."""
    fields: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.startswith("PTX"):
            break
        match = _FIELD.match(line.strip())
        if match:
            assert match.group(1) not in fields, f"{path.name}: '// {match.group(1)}:' given twice"
            fields[match.group(1)] = match.group(2)
    assert set(fields) == {"expect", "hang", "source"}, f"{path.name}: needs expect, hang and source lines"
    assert fields["expect"] in ("Never", "Sometimes", "Always"), f"{path.name}: expect={fields['expect']!r}"
    assert fields["hang"] in ("true", "false"), f"{path.name}: hang={fields['hang']!r}"
    return Expected(fields["expect"], fields["hang"] == "true", fields["source"])


def test_the_suite_covers_at_least_thirty_tests():
    assert len(FILES) >= 30


def test_the_suite_covers_every_verdict_and_both_hang_answers():
    answers = [expected(path) for path in FILES]
    assert {a.observation for a in answers} == {"Never", "Sometimes", "Always"}
    assert {a.can_hang for a in answers} == {True, False}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_known_litmus_verdict_matches_its_source(path):
    want = expected(path)
    verdict = run_litmus(parse_litmus_file(path))
    assert verdict.unknown is None, f"{path.name}: exploration hit the limit {verdict.unknown!r}"
    got = (verdict.observation, verdict.can_hang)
    assert got == (want.observation, want.can_hang), (
        f"{path.name}: expected {want.observation}, hang={want.can_hang}; "
        f"got {got[0]}, hang={got[1]}; source: {want.source}"
    )
