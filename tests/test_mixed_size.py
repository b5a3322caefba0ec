"""Mixed-size accesses (syncverify.model.ptx, choice 12): byte-addressed locations, their litmus
syntax and refusals, races of partly overlapping accesses, and the explorer's pruning on them.

The known answers are ``tests/litmus/known/mixed-*.litmus`` (``tests/test_litmus_known.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from syncverify.errors import LitmusSyntaxError
from syncverify.explore.driver import brute_force, explore
from syncverify.litmus.parser import parse_litmus, parse_litmus_file
from syncverify.model import ptx
from syncverify.program import Load, RegOp, Store

KNOWN = Path(__file__).parent / "litmus" / "known"
MIXED_TESTS = sorted(KNOWN.glob("mixed-*.litmus"))

# vllm-project/vllm #2760's shape: two GPUs each set their own byte of one flag word, a third
# reads the whole word (volatile: relaxed at system scope).
FLAG_BYTES = """PTX flag-bytes
{{ flag=0; }}
 P0@cta 0,gpu 0 | P1@cta 0,gpu 1 | P2@cta 0,gpu 2 ;
 st.volatile.u8 [flag+0], 1 | st.volatile.u8 [flag+1], 1 | ld.volatile.{read} r0, [flag] ;
exists (P2:r0 == 257)
"""


def _races(program) -> set[tuple[str, str]]:
    out = set()
    for x in explore(program).executions:
        for a, b in ptx.data_races(x):
            out.add((x.thread_names[x.events[a].thread], x.thread_names[x.events[b].thread]))
    return out


def test_a_byte_addressed_location_is_one_location_per_byte_and_a_load_combines_them():
    program = parse_litmus("""PTX split
{ x=258; }
 P0@cta 0,gpu 0 ;
 st.relaxed.gpu.u8 [x+1], 3 ;
 ld.relaxed.gpu.u16 r0, [x] ;
exists (P0:r0 == 770)
""")
    assert program.init == {"x[0]": 2, "x[1]": 1}  # 258, little-endian
    code = program.threads[0].instructions
    store, loads = code[0], [i for i in code if isinstance(i, Load)]
    assert isinstance(store, Store) and (store.loc, store.value, store.footprint) == ("x[1]", 3, ("x", 1, 1))
    assert [(ld.loc, ld.byte, ld.footprint) for ld in loads] == [("x[0]", 0, ("x", 0, 2)), ("x[1]", 1, ("x", 0, 2))]
    assert any(isinstance(i, RegOp) and i.op == "mul" and i.rhs == 256 for i in code)
    assert {x.final_registers[("P0", "r0")] for x in explore(program).executions} == {770}


def test_a_location_accessed_whole_keeps_one_location_and_ignores_its_type_suffix():
    program = parse_litmus("PTX whole\n{ x=0; }\n P0@cta 0,gpu 0 ;\n st.relaxed.gpu.u32 [x], 1 ;\n"
                           " ld.relaxed.gpu.b32 r0, [x] ;\nexists (x == 1)\n")
    assert program.locations() == ("x",)
    assert all(getattr(i, "footprint", None) is None for i in program.threads[0].instructions)


def test_bytes_of_one_word_written_by_different_gpus_race_with_a_whole_word_read():
    # Not morally strong ("overlap completely" fails), not ordered: a mixed-size data race.
    assert ("P0", "P2") in _races(parse_litmus(FLAG_BYTES.format(read="u16")))


def test_the_same_bytes_read_at_their_own_size_do_not_race():
    program = parse_litmus(FLAG_BYTES.format(read="u8").replace("exists (P2:r0 == 257)", "exists (P2:r0 == 1)"))
    assert _races(program) == set()


@pytest.mark.parametrize("path", MIXED_TESTS, ids=lambda p: p.stem)
def test_pruned_exploration_of_mixed_tests_finds_what_brute_force_finds(path):
    program = parse_litmus_file(path)

    def outcomes(result) -> set:
        return {tuple(sorted(x.final_registers.items())) for x in result.executions}

    assert outcomes(explore(program)) == outcomes(brute_force(program))


BAD = [
    ("st.relaxed.gpu.u8 [x+0], r1", "store of a register"),
    ("atom.add r0, [x], 1 ; st.u8 [x+1], 1", "only ld and st of it"),
    ("ld.u64 r0, [x] ; st.u8 [x+1], 1", "at most 4 bytes"),
    ("st.u16 [x], 70000", "does not fit"),
]


@pytest.mark.parametrize("cells, what", BAD, ids=[b[1] for b in BAD])
def test_bad_mixed_size_input_is_one_line(cells, what):
    rows = "\n".join(f" {cell.strip()} ;" for cell in cells.split(";"))
    text = f"PTX bad\n{{ x=0; P0:r1=0; }}\n P0@cta 0,gpu 0 ;\n{rows}\nexists (P0:r1 == 0)\n"
    with pytest.raises(LitmusSyntaxError) as info:
        parse_litmus(text, path="m.litmus")
    message = str(info.value)
    assert "\n" not in message and message.startswith("m.litmus") and what in message, message


def test_a_condition_on_a_byte_addressed_location_is_refused():
    with pytest.raises(LitmusSyntaxError, match="load it into a register"):
        parse_litmus("PTX c\n{ x=0; }\n P0@cta 0,gpu 0 ;\n st.u8 [x+1], 1 ;\nexists (x == 256)\n")
