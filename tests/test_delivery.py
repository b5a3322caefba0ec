"""NVSHMEM deliveries (syncverify.delivery; syncverify.model.ptx, choice 13): the agents a call
lowers to, the explorer's pruning against brute force on every NVSHMEM litmus test, and bad input
as one line naming its file and line. The known answers are tests/litmus/known/nvshmem-*.litmus."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncverify.delivery import DeliveryFence, DeliveryOrder, Put, Quiet, lower_delivery
from syncverify.errors import UnsupportedConstruct
from syncverify.explore.driver import brute_force, explore
from syncverify.litmus.parser import parse_litmus, parse_litmus_file
from syncverify.litmus.runner import run_litmus
from syncverify.model import ptx
from syncverify.program import Atomic, BulkCopy, BulkWait, Load, Store, Thread
from tests.test_async import bad_litmus_message

ROOT = Path(__file__).resolve().parent.parent
NVSHMEM_TESTS = sorted((ROOT / "tests" / "litmus" / "known").glob("nvshmem-*.litmus")) + sorted(
    p for p in (ROOT / "protocols" / "zoo").glob("*.litmus") if p.stem.startswith(("nvshmem-", "deepep-")))


def test_a_put_signal_is_one_agent_per_chunk_and_one_for_the_signal_that_waits_for_them():
    put = Put(1, (("x", 1), ("y", "s")), signal="sig", signal_op="add", signal_value=1)
    issuer, *agents = lower_delivery((Thread("P0", 0, 0, (put, Quiet())),))
    issues = [ins for ins in issuer.instructions if isinstance(ins, BulkCopy)]
    assert [i.copy for i in issues] == [0, 1, 2] and all(i.completion == "delivery" for i in issues)
    quiet, order = issuer.instructions[3:]
    assert isinstance(quiet, BulkWait) and quiet.copies == (0, 1, 2) and not quiet.read
    assert isinstance(order, DeliveryOrder) and order.copies == ()  # nothing is issued after it
    chunk_x, chunk_y, signal = agents
    assert [type(i) for i in chunk_x.instructions] == [Store]  # a constant: no source read
    assert [type(i) for i in chunk_y.instructions] == [Load, Store]
    assert isinstance(signal.instructions[0], BulkWait) and signal.instructions[0].copies == (0, 1)
    update = signal.instructions[1]
    assert isinstance(update, Atomic) and (update.op, update.sem, update.scope, update.copy) == ("add", "release", "sys", 2)


def test_quiet_and_fence_order_what_precedes_them_before_later_deliveries():
    code = (Put(1, (("x", 1),)), Put(2, (("z", 1),)), Quiet(), Put(1, (("y", 1),)))
    lowered = lower_delivery((Thread("P0", 0, 0, code),))
    order = next(i for i in lowered[0].instructions if isinstance(i, DeliveryOrder))
    assert order.copies == (2,)  # the put of y, issued after the quiet


def test_after_a_fence_a_delivery_waits_for_the_earlier_ones_to_its_pe_only():
    code = (Put(1, (("x", 1),)), Put(2, (("z", 1),)), DeliveryFence(), Put(1, (("y", 1),)), Put(2, (("w", 1),)))
    issuer, *agents = lower_delivery((Thread("P0", 0, 0, code),))
    waits = {a.name: a.instructions[0].copies for a in agents if isinstance(a.instructions[0], BulkWait)}
    assert waits == {"P0.put2": (0,), "P0.put3": (1,)}


@pytest.mark.parametrize("path", NVSHMEM_TESTS, ids=lambda p: p.stem)
def test_pruned_exploration_of_nvshmem_tests_finds_what_brute_force_finds(path):
    program = parse_litmus_file(path)

    def outcomes(result) -> set:
        return {(tuple(sorted(x.final_registers.items())), tuple(sorted(x.final_memory.items())))
                for x in result.executions}

    assert outcomes(explore(program)) == outcomes(brute_force(program))


def test_a_delivery_is_a_generic_access_and_its_race_with_an_unsynchronized_reader_is_reported():
    program = parse_litmus_file(ROOT / "tests" / "litmus" / "known" / "nvshmem-put-nbi-flag-without-quiet.litmus")
    races = [pair for x in explore(program).executions for pair in ptx.data_races(x)]
    assert races
    x = explore(program).executions[0]
    assert all(e.proxy == "generic" for e in x.events if e.is_memory)


def test_a_put_source_that_is_a_register_is_refused():
    with pytest.raises(UnsupportedConstruct, match="not the register"):
        Put(1, (("x", "%r0"),))


BAD = [
    ("nvshmem.put_nbi 1, [x]", "a.litmus:4: ", "takes pairs [DST], SRC"),
    ("nvshmem.puts 1, [x], 1", "a.litmus:4: ", "unknown instruction 'nvshmem.puts'"),
    ("nvshmem.put_signal_nbi.xor 1, [s], 1, [x], 1", "a.litmus:4: ", "unknown instruction"),
    ("nvshmem.signal_op.set 1, [s]", "a.litmus:4: ", "takes PE, [SIG], VALUE first"),
    ("nvshmem.signal_op.set 1, [s], 1, [x], 1", "a.litmus:4: ", "takes PE, [SIG], VALUE only"),
    ("nvshmem.signal_wait_until.between r0, [s], 1", "a.litmus:4: ", "unknown instruction"),
    ("nvshmem.quiet 1", "a.litmus:4: ", "takes 0 operand"),
    ("L: ; nvshmem.put_nbi 1, [x], 1 ; goto L", "a.litmus:5: ", "inside a loop"),
]


@pytest.mark.parametrize("cells, where, what", BAD, ids=[b[2] for b in BAD])
def test_bad_nvshmem_input_is_one_line_naming_file_and_line(cells, where, what):
    message = bad_litmus_message(cells)
    assert "\n" not in message and message.startswith(where) and what in message, message


FENCE_OTHER_PE = """PTX nvshmem-fence-store-to-another-pe
"a store to PE 2's buffer y, nvshmem_fence, a signal to PE 1: does PE 1, seeing the signal, see y?"
{
y=0; sig=0; P1:r0=0; P1:r1=0;
}
 P0@cta 0,gpu 0                    | P1@cta 0,gpu 1          ;
 st.weak y, 1                      | ld.acquire.sys r0, sig  ;
 nvshmem.fence                     | ld.weak r1, y           ;
 nvshmem.signal_op.set 1, [sig], 1 |                         ;
exists (P1:r0 == 1 /\\ P1:r1 != 1)
"""


def test_the_fence_orders_a_store_to_another_pe_than_its_delivery():
    """syncverify.model.delivery c, "Differs on purpose": the specification orders a store before a
    later delivery only when both go to the same PE ("All operations on symmetric data objects
    issued to a particular PE prior to the call to nvshmem_fence are guaranteed to be delivered
    before any subsequent operations on symmetric data objects to the same PE"), so if ``y`` is
    PE 2's memory it allows PE 1 to see the signal and not ``y`` (Sometimes). The model's
    locations have no home PE and its fence orders every earlier store: Never. Pinned, not a
    known answer: the day locations get a home PE this becomes Sometimes."""
    assert run_litmus(parse_litmus(FENCE_OTHER_PE)).observation == "Never"


def test_the_fence_leaves_deliveries_to_other_pes_unordered_as_specified():
    """The deliveries themselves are split by PE exactly (f): a put to PE 2 before the fence does
    not delay a signal to PE 1 after it (known answer nvshmem-fence-other-pe-unordered)."""
    program = parse_litmus_file(ROOT / "tests" / "litmus" / "known" / "nvshmem-fence-other-pe-unordered.litmus")
    assert run_litmus(program).observation == "Sometimes"
