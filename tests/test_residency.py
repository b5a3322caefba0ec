"""Residency (issue 27): CTAs run only while resident, capacity is limited, a resident CTA is
never preempted. Known answers on hand-written programs, the scenarios and the examples'
harnesses; the examples' rule (``spin_grid.deadlocks``) against the model; the kernels' CPU path
(Triton's interpreter runs one program at a time in blockIdx order: capacity 1, ``index`` order)."""

from __future__ import annotations

import pytest
import torch

import syncverify
from syncverify.errors import ScenarioError
from syncverify.explore.residency import ORDERS, Residency, find_deadlock, started_sets, ctas, sweep
from syncverify.program import Atomic, Branch, Label, Load, Program, Store, Thread
from syncverify.verdicts.check import check_protocol
from syncverify.kernels._jit import _interpreted, _interpreting_calls
from tests.sequential_harness import EXAMPLES, example_module


def _poll(flag: str) -> tuple:
    return (Label("L"), Load("r", flag, sem="acquire", scope="gpu"), Branch("L", "eq", "r", 0))


def _program(order: list[str], phases: list[str] | None = None) -> Program:
    """Consumers ("c") wait for the producer ("p") with the same number, CTAs in the order given."""
    threads = []
    for i, who in enumerate(order):
        kind, n = who[0], who[1:]
        code = _poll(f"f{n}") if kind == "c" else (Store(f"f{n}", 1, sem="release", scope="gpu"),)
        threads.append(Thread(f"P{i}", 0, i, code, phase=(phases[i] if phases else "e0")))
    return Program("residency", tuple(threads), observed_registers=frozenset())


# ----- the model on hand-written programs ---------------------------------------------------------

def test_a_consumer_holding_the_only_slot_deadlocks_in_any_order_not_in_index_order():
    p = _program(["c0", "p0"])
    found = find_deadlock(p, Residency(1, "any"))
    assert found is not None and [c.cta for c in found.resident] == [0] and [c.cta for c in found.not_resident] == [1]
    assert "waits on a poll of f0 (reads 0)" in found.words() and "GPU 0 CTA 1 (e0) would release" in found.words()
    assert find_deadlock(p, Residency(1, "index")) is not None  # blockIdx order admits the consumer first
    assert find_deadlock(_program(["p0", "c0"]), Residency(1, "index")) is None
    assert find_deadlock(_program(["p0", "c0"]), Residency(1, "any")) is not None
    assert all(find_deadlock(p, Residency(2, order)) is None for order in ORDERS)


@pytest.mark.parametrize("consumers", [1, 2, 3])
def test_consumers_deadlock_exactly_when_they_can_fill_every_slot(consumers):
    p = _program([f"c{i}" for i in range(consumers)] + [f"p{i}" for i in range(consumers)])
    result = sweep(p)
    assert result.largest_deadlocking == consumers and result.smallest_safe == consumers + 1


def test_launches_on_two_streams_share_the_slots():
    """Consumers in one launch, producers in another, unordered: either may take the slots first."""
    p = _program(["p0", "c0"], phases=["gemm", "comm"])
    assert find_deadlock(p, Residency(1, "index")) is not None
    ordered = Program(p.name, p.threads, observed_registers=frozenset(), host_order=(("gemm", "comm"),))
    assert find_deadlock(ordered, Residency(1, "index")) is None  # the stream orders comm after gemm


def test_index_order_only_admits_prefixes_of_each_launch():
    p = _program(["c0", "c1", "p0", "p1"])
    assert all(s == frozenset(ctas(p)[:len(s)]) for s in started_sets(ctas(p), Residency(2, "index")))
    assert len(list(started_sets(ctas(p), Residency(2, "any")))) == 6 + 4  # subsets of 2 and of 3


def test_bad_residency_is_one_line():
    for bad in (0, -1):
        with pytest.raises(ScenarioError, match="--resident"):
            Residency(bad)
    with pytest.raises(ScenarioError, match="resident-order"):
        Residency(1, "fifo")


# ----- the scenarios ------------------------------------------------------------------------------

def test_all_reduce_hangs_with_one_slot_in_any_order_and_is_safe_with_two():
    result = check_protocol("barrier-fenced-release-acquire", world_size=2, resident=1, timeout=60)
    assert result.safe is False and list(result.violations) == ["hang"]
    words = result.violations["hang"].explanation
    assert "rank 0 consumer of tile 0 (epoch 0) is resident" in words and "producer of tile 0" in words
    assert result.to_json()["resident"] == 1
    assert check_protocol("barrier-fenced-release-acquire", world_size=2, resident=2, timeout=60).safe is True
    # the kernels put the GEMM (producer) CTAs at the low blockIdx: safe if that order held
    assert check_protocol("barrier-fenced-release-acquire", world_size=2, resident=1, resident_order="index",
                          timeout=60).safe is True


def test_a_residency_hang_has_a_trace_in_the_whole_programs_terms():
    result = check_protocol("epoch-flag", world_size=2, resident=1, timeout=60)
    violation = result.violations["hang"]
    rows = violation.trace(result.scenario)
    assert rows and all("consumer" in str(r) or "producer" in str(r) for r in rows)


# ----- the examples: harnesses with sv.resident ---------------------------------------------------

with example_module("residency") as _h:
    HARNESS_CASES = [(name, R, order, safe) for name, table in _h.EXPECTED.items()
                     for R, (order, safe) in table.items()]
    HARNESS_KINDS = dict(_h.KINDS)
    PER_SM_CASES = dict(_h.EXPECTED_PER_SM)
ONE_THREAD = {"grid_barrier", "pdl_copy", "pdl_copy_no_wait"}  # one model thread per CTA: the same verdicts, faster


@pytest.mark.parametrize(("name", "resident", "order", "safe"), HARNESS_CASES,
                         ids=[f"{c[0]}-R{c[1]}" for c in HARNESS_CASES])
def test_each_residency_example_gets_the_verdict_its_table_states(name, resident, order, safe):
    result = syncverify.check_kernel(f"{EXAMPLES / 'residency' / 'harness.py'}::{name}", world_size=1,
                                     resident=resident, resident_order=order, timeout=120,
                                     threads_per_cta=1 if name in ONE_THREAD else 2)
    assert result.safe is safe, result.text()
    if not safe and name in HARNESS_KINDS:
        assert sorted(result.violations) == sorted(HARNESS_KINDS[name])
    elif not safe:
        assert list(result.violations) == ["hang"] and "never resident" in result.violations["hang"].explanation
    assert any("residency" in a for a in result.assumptions)


@pytest.mark.parametrize(("name", "safe"), sorted(PER_SM_CASES.items()))
def test_each_residency_example_gets_its_per_sm_verdict(name, safe):
    """Per SM, with each harness's own ``sv.resident(..., sms=..., lazy_loading=...)``."""
    result = syncverify.check_kernel(f"{EXAMPLES / 'residency' / 'harness.py'}::{name}", world_size=1, timeout=120,
                                     threads_per_cta=1)
    assert result.safe is safe, result.text()
    if not safe:
        words = result.violations["hang"].explanation
        assert "no CTA still waiting can become resident" in words and "placed: GPU 0 SM 0" in words
    if name == "other_kernel_first":
        assert "marker_kernel: its first launch loads its module" in words
    if name == "warmed_up_other_options":  # the binary launched with num_warps=4 is the second
        assert "producers_elsewhere_kernel@2: its first launch loads its module" in words


def test_the_examples_rule_is_the_models_answer():
    """``spin_grid.deadlocks`` (what the GPU script predicts at 132 x occupancy) against the model."""
    with example_module("residency", "spin_grid") as spin_grid:
        deadlocks = spin_grid.deadlocks
    for n in (1, 2, 3):
        consumers = _program([f"c{i}" for i in range(n)] + [f"p{i}" for i in range(n)])
        for R in range(1, 2 * n):
            assert deadlocks("consumers_first", n, R) == (find_deadlock(consumers, Residency(R)) is not None)
    for name, table in (("consumers_first", HARNESS_CASES), ("grid_barrier", HARNESS_CASES)):
        for case, R, order, safe in table:
            if case == name:
                assert deadlocks(name, 2, R) == (not safe)


# ----- the kernels' CPU path: the interpreter is capacity 1 in blockIdx order ----------------------

def _run(kernel, grid, *args, **meta):
    with _interpreting_calls():
        _interpreted(kernel)[grid](*args, **meta)


@pytest.mark.parametrize("n", [1, 2])
def test_in_the_interpreter_consumers_first_time_out_and_producers_first_do_not(n):
    with example_module("residency", "spin_grid") as spin_grid:
        kernel, deadlocks = spin_grid.consumers_first_kernel, spin_grid.deadlocks
    budget = dict(MAX_SPINS=20, TIMEOUT_NS=0, USE_TIMER=False)
    for offset, expect_deadlock in ((0, True), (n, False)):
        flags, data, out, timed_out = (torch.zeros(n, dtype=torch.int32) for _ in range(4))
        _run(kernel, (2 * n,), flags, data, out, timed_out, n, offset, **budget)
        assert bool(timed_out.sum()) is expect_deadlock
        assert expect_deadlock == deadlocks("consumers_first", n, 1) or offset  # index order, capacity 1
        if not expect_deadlock:
            assert out.tolist() == list(range(1, n + 1))


def test_in_the_interpreter_a_grid_barrier_completes_only_for_one_program():
    with example_module("residency", "spin_grid") as spin_grid:
        kernel, deadlocks = spin_grid.grid_barrier_kernel, spin_grid.deadlocks
    for grid in (1, 2):
        count, timed_out = torch.zeros(1, dtype=torch.int32), torch.zeros(grid, dtype=torch.int32)
        _run(kernel, (grid,), count, timed_out, grid, MAX_SPINS=20, TIMEOUT_NS=0, USE_TIMER=False)
        assert bool(timed_out.sum()) == deadlocks("grid_barrier", grid, 1)


def test_in_the_interpreter_the_stamped_kernels_read_their_values_and_record_placeholder_stamps():
    """The CPU path of ``benchmarks/residency_first_launch.py``'s kernels: producers first (the
    interpreter's order makes them safe), every consumer reads its value; no inline PTX, so the
    start times and SMs are 0, and the sleep measured in ns does not spin."""
    with example_module("residency", "spin_grid") as spin_grid:
        stamped, spin_for = spin_grid.stamped_consumers_kernel, spin_grid.spin_for_kernel
    n = 2
    flags, data, out, timed_out = (torch.zeros(n, dtype=torch.int32) for _ in range(4))
    sm, start = torch.full((2 * n,), -1, dtype=torch.int32), torch.full((2 * n,), -1, dtype=torch.int64)
    _run(stamped, (2 * n,), flags, data, out, timed_out, sm, start, n, n, MAX_SPINS=20, TIMEOUT_NS=0, USE_TIMER=False)
    assert out.tolist() == [1, 2] and timed_out.tolist() == [0, 0]
    assert sm.tolist() == [0] * (2 * n) and start.tolist() == [0] * (2 * n)
    stamps = torch.full((3,), -1, dtype=torch.int64)
    _run(spin_for, (1,), stamps, 10**9, USE_TIMER=False)
    assert stamps.tolist() == [0, 0, 0]


def test_a_binary_is_keyed_as_triton_keys_it_launch_options_as_passed_and_int_specialization():
    """``binary_key``: ``num_warps=4`` spelled out is another binary than the default (GPU run 5);
    an int argument equal to 1 is specialized unless ``do_not_specialize`` names it."""
    from syncverify.frontend.check import binary_key
    with example_module("residency", "spin_grid") as spin_grid:
        kernel, barrier = spin_grid.consumers_first_kernel, spin_grid.grid_barrier_kernel
    bufs = tuple(torch.zeros(4, dtype=torch.int32) for _ in range(4))
    plain = binary_key(kernel, bufs + (1, 0), dict(MAX_SPINS=0, TIMEOUT_NS=0, USE_TIMER=False))
    assert plain == binary_key(kernel, bufs + (2111, 2111), dict(MAX_SPINS=0, TIMEOUT_NS=0, USE_TIMER=False))
    assert plain != binary_key(kernel, bufs + (1, 0), dict(MAX_SPINS=0, TIMEOUT_NS=0, USE_TIMER=False, num_warps=4))
    assert plain != binary_key(kernel, bufs + (1, 0), dict(MAX_SPINS=5, TIMEOUT_NS=0, USE_TIMER=False))
    grid = lambda n: binary_key(barrier, bufs[:2] + (n,), dict(MAX_SPINS=0, TIMEOUT_NS=0, USE_TIMER=False))  # noqa: E731
    assert grid(1) != grid(2) == grid(3) != grid(32)  # GRID is specialized: 1, and divisible by 16


def test_a_module_load_blocks_the_host_so_a_loaded_kernel_issued_after_it_waits_too():
    """GPU run 5: the load call itself returned only once the spinning consumers gave up. A
    consumer (kernel K1), then the first launch of K2 (its module not loaded), then the producer
    (K1, loaded) on a third stream: the producer is issued by a host blocked in K2's load, so it
    too waits for the consumer: a hang, though three slots leave room for all. K2 loaded before:
    SAFE."""
    threads = (Thread("P0", 0, 0, _poll("f0"), phase="a"), Thread("P1", 0, 1, (Store("g", 1),), phase="b"),
               Thread("P2", 0, 2, (Store("f0", 1, sem="release", scope="gpu"),), phase="c"))
    program = Program("load", threads, observed_registers=frozenset(), kernels=(("a", "K1"), ("b", "K2"), ("c", "K1")))
    assert find_deadlock(program, Residency(3)) is None
    assert find_deadlock(program, Residency(3, lazy_loading=True)) is not None
    assert find_deadlock(program, Residency(3, lazy_loading=True, loaded=("K2",))) is None


# ----- the command line ---------------------------------------------------------------------------

def test_check_resident_answers_hang_with_the_resident_ctas_and_exit_1(capsys):
    from syncverify.cli import main

    assert main(["check", "epoch-flag", "--resident", "1"]) == 1
    text = capsys.readouterr().out
    assert "UNSAFE" in text and "1 CTA resident per GPU, admitted in any order (--resident)" in text
    assert "cause: with 1 CTA resident per GPU" in text and "never resident: rank 0 producer" in text
    assert main(["check", "epoch-flag", "--resident", "2"]) == 0


def test_check_resident_sweep_gives_the_two_numbers(capsys):
    from syncverify.cli import main

    assert main(["check", "epoch-flag", "--resident-sweep", "--json"]) == 1
    import json
    whole = json.loads(capsys.readouterr().out)
    from syncverify.json_schema import problems
    assert problems(whole, "check") == []
    doc = whole["residency_sweep"]
    assert doc["largest_deadlocking"] == 1 and doc["smallest_safe"] == 2 and doc["answers"] == {"1": True}
    assert main(["check", "epoch-flag", "--resident", "1", "--json"]) == 1
    plain = json.loads(capsys.readouterr().out)
    assert problems(plain, "check") == [] and plain["resident"] == 1
    assert plain["assumptions"]["residency"].startswith("1 CTA resident per GPU")
    assert main(["check", "epoch-flag", "--resident-sweep", "--resident-order", "index"]) == 0
    assert "largest capacity at which it can deadlock: none" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["--resident", "0"], ["--resident", "1", "--resident-order", "fifo"],
                                  ["--resident-sweep", "--resident-order", "fifo"]])
def test_bad_residency_options_exit_2_with_one_line(argv, capsys):
    from syncverify.cli import main

    assert main(["check", "epoch-flag", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "resident" in err[0]


def test_harness_resident_sweep_from_the_command_line(capsys):
    from syncverify.cli import main

    target = f"{EXAMPLES / 'residency' / 'harness.py'}::consumers_first"
    assert main(["check", target, "--world-size", "1", "--resident-sweep"]) == 1
    assert "largest capacity at which it can deadlock: 2; smallest at which it cannot (nor at any larger): 3" \
        in capsys.readouterr().out


# ----- launch modes: two streams, programmatic dependent launch ------------------------------------

def test_two_streams_lose_the_blockidx_order_that_makes_one_fused_launch_safe():
    """The seeds' one-shot all-reduce: GEMM and communication kernels on two streams share the SMs."""
    fused = check_protocol("epoch-flag", world_size=2, resident=1, resident_order="index", timeout=60)
    streams = check_protocol("epoch-flag", world_size=2, resident=1, resident_order="index",
                             launches="two-stream", timeout=60)
    assert fused.safe is True and streams.safe is False and list(streams.violations) == ["hang"]
    assert "consumer" in streams.violations["hang"].explanation
    assert check_protocol("epoch-flag", world_size=2, launches="two-stream", timeout=60).safe is True


def test_pdl_dependents_are_scheduled_only_after_every_primary_cta_triggered():
    """With PDL the consumer kernel cannot take the slot before the producer's CTA has run: no
    residency hang at one slot, where two unordered streams hang."""
    result = check_protocol("epoch-flag", world_size=2, resident=1, launches="pdl", timeout=60)
    assert result.safe is True


# The zoo's residency and launch bugs and their fixes (TensorRT-LLM #18834, aiter #4977, TensorRT-LLM
# #14537, tokenspeed #351) are pinned with the rest of the zoo: tests/test_zoo.py checks each file's
# recorded verdict (each bug UNSAFE, each fix SAFE) with its resident and launches settings.


def _pdl_chain(trigger_first: bool) -> Program:
    """sglang #34789's state as a program: GEMM CTAs (PDL primary) wait for a flag from a kernel on
    another stream; the finalize kernel (PDL dependent) polls the GEMM's completion count
    (``griddepcontrol.wait``). ``trigger_first``: ``launch_dependents`` before the GEMM's wait."""
    trigger = lambda n: Store(f"pdl.trigger.g{n}", 1)  # noqa: E731
    done = Atomic("add", None, "gemm_done", (1,), sem="release", scope="sys")
    threads = [Thread("X", 0, 0, (Store("x", 1, sem="release", scope="gpu"),), phase="other-stream")]
    for n in (1, 2):
        wait_x = _poll("x")
        code = (trigger(n),) + wait_x + (done,) if trigger_first else wait_x + (trigger(n), done)
        threads.append(Thread(f"G{n}", 0, n, code, phase="gemm"))
    for n in (3, 4):
        code = (Label("W"), Load("d", "gemm_done", sem="acquire", scope="sys"), Branch("W", "lt", "d", 2))
        threads.append(Thread(f"F{n}", 0, n, code, phase="finalize"))
    return Program("pdl-chain", tuple(threads), observed_registers=frozenset(), pdl=(("gemm", "finalize"),))


def test_sglang_34789_finalize_ctas_at_the_pdl_wait_hold_the_slots_a_kernel_the_gemm_waits_for_needs():
    """With 3 slots, the GEMM's two CTAs trigger and wait for a kernel on another stream; the
    finalize kernel, now schedulable, takes the last slot at its griddepcontrol.wait: a hang. The
    GEMM triggering after its own wait (or no PDL) leaves the slot to that kernel."""
    found = find_deadlock(_pdl_chain(trigger_first=True), Residency(3))
    assert found is not None and "GPU 0 CTA 0 (other-stream)" in {c.name for c in found.not_resident}
    assert any("finalize" in c.name for c in found.resident)
    assert find_deadlock(_pdl_chain(trigger_first=False), Residency(3)) is None


def test_later_calls_that_never_start_behind_a_hang_are_not_counted_as_waiting_for_a_slot():
    """Two calls: call 0's consumer holds the slot, so call 1 never starts (host order); its CTAs
    are absent because call 0 never finishes, not for want of a slot (a bug fixed: they once
    hid the deadlock)."""
    result = check_protocol("iris-465-call-number", world_size=2, epochs=2, resident=1, timeout=60)
    assert result.safe is False and result.deadlock is not None
    never = {c.name for c in result.deadlock.not_resident}
    assert never == {"rank 0 producer of tile 0 (epoch 0)"}
    assert check_protocol("iris-465-call-number", world_size=2, epochs=2, resident=2, timeout=60).safe is True


def test_the_seeds_two_stream_all_reduce_hangs_when_one_cta_is_resident_per_gpu():
    """examples/one_shot_all_reduce (seed 000's kernels, GEMM on stream gemm, all-reduce on comm):
    the fixed protocol is SAFE with every CTA resident (tests/test_examples.py) and hangs with one
    slot per GPU: the comm kernel's CTA can take it and spin on tile_ready."""
    with example_module("one_shot_all_reduce") as harnesses:
        table = harnesses.RESIDENT
    result = syncverify.check_kernel(f"{EXAMPLES / 'one_shot_all_reduce' / 'harness.py'}::fix_with_barrier_one_slot",
                                     world_size=2, threads_per_cta=1, timeout=120)
    assert result.safe is table["fix_with_barrier_one_slot"][1] is False and list(result.violations) == ["hang"]
    words = result.violations["hang"].explanation
    assert "persistent_all_reduce[0] (call 0, stream comm) is resident" in words
    assert "persistent_gemm[0] (call 0, stream gemm)" in words.split("never resident:")[1]


# ----- properties on generated programs -----------------------------------------------------------

from hypothesis import given, settings, strategies as st  # noqa: E402


@st.composite
def flag_programs(draw) -> Program:
    """1 to 4 CTAs on one GPU, each a producer of flag k or a consumer of it, in one or two launches."""
    n = draw(st.integers(1, 4))
    roles = [draw(st.sampled_from(["c", "p"])) + str(draw(st.integers(0, 1))) for _ in range(n)]
    phases = [draw(st.sampled_from(["e0", "e1"])) for _ in range(n)]
    return _program(roles, phases)


@settings(max_examples=25, deadline=None)
@given(flag_programs(), st.integers(1, 4))
def test_a_deadlock_in_blockidx_order_is_one_in_any_order_and_none_once_every_cta_fits(program, capacity):
    index = find_deadlock(program, Residency(capacity, "index"))
    anyway = find_deadlock(program, Residency(capacity, "any"))
    assert index is None or anyway is not None  # blockIdx order is one of the orders "any" allows
    if capacity >= len(program.threads):
        assert anyway is None  # every CTA resident: residency changes nothing
    for found in (index, anyway):
        if found is not None:
            assert len(found.resident) == capacity and found.not_resident
            assert all(c not in found.resident for c in found.not_resident)


def test_check_sms_finds_the_two_stream_hang_the_pool_misses(capsys):
    """``--launches two-stream``: the GEMM and communication roles are two kernels. One SM of 2
    slots, a GEMM CTA taking the whole SM (``--occupancy gemm=1``): a waiting consumer leaves a
    slot too small for it (the pool of 2 says SAFE)."""
    from syncverify.cli import main

    argv = ["check", "barrier-fenced-release-acquire", "--launches", "two-stream", "--resident", "2"]
    assert main(argv) == 0
    assert main([*argv, "--sms", "1"]) == 0  # one footprint for every kernel: the pool's answer
    capsys.readouterr()
    assert main([*argv, "--sms", "1", "--occupancy", "gemm=1"]) == 1
    text = capsys.readouterr().out
    assert "on 1 SM (2 CTAs of one kernel per SM, 1 of gemm" in text and "never resident: rank 0 producer" in text


@pytest.mark.parametrize("argv", [["--resident", "3", "--sms", "2"], ["--sms", "2"],
                                  ["--resident-sweep", "--sms", "1"], ["--resident", "2", "--sms", "1", "--occupancy", "gemm"]])
def test_bad_sms_options_exit_2_with_one_line(argv, capsys):
    from syncverify.cli import main

    assert main(["check", "epoch-flag", *argv]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_an_occupancy_for_a_kernel_no_launch_runs_exits_2_naming_the_launched_ones(capsys):
    from syncverify.cli import main

    assert main(["check", "epoch-flag", "--resident", "2", "--sms", "1", "--occupancy", "gem=1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("occupancy names kernel 'gem', which no launch runs; launched: kernel")
