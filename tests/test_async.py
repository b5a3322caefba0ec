"""The async proxy (syncverify.model.ptx, choice 11): its litmus syntax, its refusals, and the
model's races and pruning on it.

The known answers themselves are ``tests/litmus/known/async-*.litmus`` (run by
``tests/test_litmus_known.py``); these tests check what a known answer cannot: which pairs race,
that the explorer's pruning loses no execution of an async program, and that bad input is one line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from syncverify.errors import LitmusSyntaxError
from syncverify.explore.driver import brute_force, explore
from syncverify.litmus.parser import parse_litmus, parse_litmus_file
from syncverify.model import ptx
from syncverify.program import AGENT_REGISTER, BulkWait, MbarWait

KNOWN = Path(__file__).parent / "litmus" / "known"
ASYNC_TESTS = sorted(KNOWN.glob("async-*.litmus"))

TMA_STORE = """PTX tma-store
{{ s=0; x=0; }}
 P0@cta 0,gpu 0 ;
 st.shared s, 1 ;
 {fence}
 cp.async.bulk.global.shared::cta.bulk_group [x], [s], 4 ;
 cp.async.bulk.commit_group ;
 cp.async.bulk.wait_group 0 ;
 ld.weak r0, x ;
exists (P0:r0 == 1)
"""


def _program(fence: str):
    return parse_litmus(TMA_STORE.format(fence=fence + " ;" if fence else ""), path="tma.litmus")


def _race_kinds(program) -> set[tuple[str, str]]:
    """Each racing pair of one execution as (describe, describe), over every execution."""
    out = set()
    for x in explore(program).executions:
        for a, b in ptx.data_races(x):
            out.add(tuple(sorted((x.events[a].describe().split("=")[0], x.events[b].describe().split("=")[0]))))
    return out


def test_a_copy_is_an_agent_thread_of_two_async_accesses_and_waits_name_their_copies():
    program = _program("fence.proxy.async.shared::cta")
    names = [t.name for t in program.threads]
    assert names == ["P0", "P0.copy0"]
    agent = program.threads[1]
    read, write = agent.instructions
    assert (read.loc, read.proxy, read.space, read.dst) == ("s", "async", "shared::cta", AGENT_REGISTER)
    assert (write.loc, write.proxy, write.space, write.value) == ("x", "async", "global", AGENT_REGISTER)
    wait = next(ins for ins in program.threads[0].instructions if isinstance(ins, BulkWait))
    assert wait.copies == (0,)
    store = program.threads[0].instructions[0]
    assert store.space == "shared::cta"  # placed in the space the copy names for s


def test_a_generic_write_read_by_a_copy_without_a_proxy_fence_races_and_with_one_does_not():
    racing = _race_kinds(_program(""))
    assert ("R.async s", "W s") in racing
    assert _race_kinds(_program("fence.proxy.async.shared::cta")) == set()


def test_cross_proxy_pairs_are_never_morally_strong():
    program = _program("fence.proxy.async")
    x = explore(program).executions[0]
    generic = next(e for e in x.events if e.is_write and e.loc == "s" and not e.is_init)
    copy_read = next(e for e in x.events if e.is_read and e.is_async_access)
    assert (generic.eid, copy_read.eid) not in ptx.morally_strong(x)
    assert ptx.has_async(x)


def test_a_program_without_async_operations_keeps_causality_as_before():
    program = parse_litmus("""PTX mp
{ x=0; y=0; }
 P0@cta 0,gpu 0 | P1@cta 0,gpu 1 ;
 st.weak x, 1 | ld.acquire.gpu r0, y ;
 st.release.gpu y, 1 | ld.weak r1, x ;
exists (P1:r0 == 1 /\\ P1:r1 == 0)
""")
    for x in explore(program).executions:
        assert not ptx.has_async(x)
        assert ptx.proxy_preserved_base_causality(x) is ptx.base_causality(x)


@pytest.mark.parametrize("path", ASYNC_TESTS, ids=lambda p: p.stem)
def test_pruned_exploration_of_async_tests_finds_what_brute_force_finds(path):
    program = parse_litmus_file(path)

    def outcomes(result) -> set:
        return {(tuple(sorted(x.final_registers.items())), tuple(sorted(x.final_memory.items())))
                for x in result.executions}

    assert outcomes(explore(program)) == outcomes(brute_force(program))


def test_a_try_wait_returns_true_and_names_the_copies_of_its_mbarrier():
    program = parse_litmus_file(KNOWN / "async-tma-load-mbarrier-consumer-warp.litmus")
    wait = next(ins for ins in program.threads[1].instructions if isinstance(ins, MbarWait))
    assert wait.copies == (0,)
    x = explore(program).executions[0]
    assert x.final_registers[("P1", "r0")] == 1


BAD = [
    ("L: ; cp.async.bulk.global.shared::cta.bulk_group [x], [s], 4 ; goto L", "a.litmus:5: ", "inside a loop"),
    ("cp.async.bulk.global.shared::cta.bulk_group [x], [s], 4 ; L: ; cp.async.bulk.wait_group 1", "a.litmus:6: ",
     "wait_group 1 after a label"),
    ("mbarrier.try_wait.relaxed.cta.shared::cta.b64 r0, [bar], 0", "a.litmus:4: ", ".relaxed and .cluster"),
    ("mbarrier.test_wait.shared::cta.b64 r0, [bar], 0", "a.litmus:4: ", "test_wait, inval and pending_count"),
    ("mbarrier.try_wait.parity.shared::cta.b64 r0, [bar], 2", "a.litmus:4: ", "phaseParity"),
    ("mbarrier.try_wait.parity.shared::cta.b64 r0, [bar]", "a.litmus:4: ", "takes 3 operand"),
    ("mbarrier.arrive.shared::cta.b64 _, [bar], 2", "a.litmus:4: ", "a count other than 1"),
    ("mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar]", "a.litmus:4: ", "takes 3 operand"),
    ("mbarrier.expect_tx.release.cta.shared::cta.b64 [bar], 4", "a.litmus:4: ", "unknown instruction"),
    ("mbarrier.init.shared::cta.b64 [bar], 0", "a.litmus", "count >= 1"),
    ("cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes [s], [x], 0, [bar]", "a.litmus:4: ", "positive integer"),
    ("mbarrier.init.shared::cta.b64 [bar], 1; mbarrier.init.shared::cta.b64 [bar], 1; "
     "mbarrier.try_wait.shared::cta.b64 r0, [bar], 0", "a.litmus:5: ", "initialised twice"),
    ("mbarrier.init.shared::cta.b64 [bar], 1; mbarrier.arrive.shared::cta.b64 _, [bar]; "
     "mbarrier.arrive.shared::cta.b64 _, [bar]; mbarrier.try_wait.shared::cta.b64 r0, [bar], 0", "a.litmus",
     "phases after the first"),
    ("L: ; mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [bar], 4; mbarrier.try_wait.shared::cta.b64 r0, [bar], 0",
     "a.litmus:5: ", "would depend on the path"),
    ("cp.async.ca.shared.global [s], [x], 4", "a.litmus:4: ", "unsupported instruction 'cp.async.ca.shared.global'"),
    ("cp.async.bulk.global.global.bulk_group [x], [s], 4", "a.litmus:4: ", "unsupported instruction"),
    ("cp.async.bulk.global.shared::cta.bulk_group [x], 4", "a.litmus:4: ", "takes [dst], [src], size"),
    ("mbarrier.try_wait.shared::cta.b64 r0, [bar], 0", "a.litmus", "mbarrier bar is waited on"),
    ("fence.proxy.async.local", "a.litmus:4: ", "fence.proxy.async"),
    ("ld.global r0, s ; st.shared s, 1", "a.litmus:", "location s is .shared::cta here but .global"),
]


def bad_litmus_message(cells: str) -> str:
    """The error of a one-thread litmus test ``a.litmus`` whose rows are ``cells`` (split on ``;``)."""
    rows = "\n".join(f" {cell.strip()} ;" for cell in cells.split(";") if cell.strip())
    text = f"PTX bad\n{{ x=0; s=0; }}\n P0@cta 0,gpu 0 ;\n{rows}\nexists (x == 0)\n"
    with pytest.raises(LitmusSyntaxError) as info:
        parse_litmus(text, path="a.litmus")
    return str(info.value)


@pytest.mark.parametrize("cells, where, what", BAD, ids=[b[2] for b in BAD])
def test_bad_async_input_is_one_line_naming_file_and_line(cells, where, what):
    message = bad_litmus_message(cells)
    assert "\n" not in message and message.startswith(where) and what in message, message


def test_the_picture_draws_issue_and_completion_edges_and_no_completion_of_a_write_after_wait_read():
    from syncverify.verdicts.graphs import happens_before_graph

    program = parse_litmus_file(KNOWN / "async-tma-store-mp-wait-group-read.litmus")
    x = explore(program).executions[0]
    graph = happens_before_graph(x)
    edges = {(x.events[a].describe().split("=")[0], key) for a, _b, key in graph.edges(keys=True)}
    assert ("A.issue copies 0", "issue") in edges
    assert ("R.async s", "complete") in edges
    assert ("W.async x", "complete") not in edges
