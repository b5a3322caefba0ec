"""Lifting rules of the kernel front end found by the cross-check of our own kernels (issue 22,
item 6): each test is a small kernel (tests/frontend_kernels/polls.py) that got a wrong answer
before its rule was fixed."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

import syncverify  # noqa: E402
from syncverify.errors import UnsupportedConstruct  # noqa: E402
from syncverify.frontend.asm import ModelThread, read_inline_asm  # noqa: E402
from syncverify.frontend.items import Site  # noqa: E402
from syncverify.protocols.lowering import barrier_ptx, lower_barrier  # noqa: E402
from syncverify.protocols.model import Step  # noqa: E402

POLLS = Path(__file__).parent / "frontend_kernels" / "polls.py"


def check(name: str, **options):
    """The harness ``name`` of polls.py, one rank, bounded at 120 s."""
    return syncverify.check_kernel(f"{POLLS}::{name}", world_size=1, timeout=120, **options)


def test_a_poll_of_the_next_flag_at_the_same_line_keeps_the_previous_polls_cta_barrier():
    """The first flag's successful poll is followed by the second flag's poll at the same line,
    with nothing in between: it is not a failed iteration, and its ``bar.sync`` (thread 0's
    acquire, then the other threads' reads) stays. Dropped, thread 1 of the consumer never left
    the first barrier and its share of ``out`` was reported unwritten."""
    result = check("two_flags_harness")
    assert result.safe is True, result.text()


def test_a_failed_cas_poll_writes_nothing_so_its_value_domain_settles():
    """``atomic_cas(c, 1, 0)`` polled until it reads 1: a failed iteration reads 0 and writes
    nothing, so the loop is no unbounded chain of writes to ``c`` (counted as one, the domain grew
    every round and the check answered unknown)."""
    safe = check("cas_reset_harness", threads_per_cta=1)
    assert safe.limit_hit is None and safe.safe is True, safe.text()
    late = check("cas_reset_late_harness", threads_per_cta=1)
    assert late.limit_hit is None and "race" in late.violations, late.text()


def test_expected_memory_no_one_writes_is_one_location_not_one_read_per_element():
    """The consumer hangs and never writes its 1024 outputs: the host's check reads them as one
    never-written group (one read per element was more than the explorer's steps per thread)."""
    result = check("never_signalled_harness", threads_per_cta=1)
    assert result.limit_hit is None, result.text()
    assert "hang" in result.violations, result.text()


def test_warp_selected_barriers_in_inline_ptx_run_on_the_model_threads_of_their_warps():
    """FA3's epilogue handoff as the kernels emit it (``protocols.lowering.barrier_ptx``): warps 1-7
    ``bar.arrive 1, 256``, warp 0 ``bar.sync 1, 256``, chosen by a predicate on ``%tid.x / 32``. With
    one model thread per warp each gets its instruction, the count scaled to model threads; with two
    model threads the predicate splits thread 0's warps, which is refused, not guessed."""
    ptx = barrier_ptx(lower_barrier(Step("barrier", barrier_id=1, count=256, arrive=(1, 2, 3, 4, 5, 6, 7))))
    site = Site("k.py", 7, "k", "k")
    seen = [[(i.kind, i.op, i.barrier_id, i.count) for i in read_inline_asm(ptx, site, (), None, ModelThread(t, 8, 8))]
            for t in range(8)]
    assert seen == [[("bar", "sync", 1, 8)]] + [[("bar", "arrive", 1, 8)]] * 7
    with pytest.raises(UnsupportedConstruct, match="threads_per_cta=8"):
        read_inline_asm(ptx, site, (), None, ModelThread(0, 2, 8))


# ----- one copy of the code of equal futures: exact (verdicts with and without it) ----------------

KNOWN = Path(__file__).parent / "frontend_kernels" / "known.py"

MERGED_CASES = [
    (f"{POLLS}::two_flags_harness", {}),
    (f"{POLLS}::cas_reset_late_harness", {"threads_per_cta": 1}),
    (f"{KNOWN}::xchg_overwrite", {}),  # a hang
    (f"{KNOWN}::add_arrivals", {}),  # a counter polled until it reaches 2: a loop head per value read
    (f"{KNOWN}::relaxed", {}),
    (f"{KNOWN}::cas_poll_count_harness", {"threads_per_cta": 1}),
    (f"{KNOWN}::flag_left_set", {"calls": 2}),
    (f"{POLLS}::poll_into_local_harness", {}),
]


@pytest.mark.parametrize("target, options", MERGED_CASES, ids=[t.split("::")[1] for t, _ in MERGED_CASES])
def test_merging_program_points_with_equal_futures_changes_no_verdict(target, options):
    """The reduction of ``frontend.programs.equal_futures`` lifts one copy of equal futures; the
    verdict (and its violation kinds) is the one of the program lifted point by point."""
    def verdict(merge: bool):
        r = syncverify.check_kernel(target, world_size=1, timeout=120, merge_equal_futures=merge, **options)
        assert r.limit_hit is None, r.text()
        return r.safe, sorted(r.violations)

    assert verdict(True) == verdict(False)


def test_a_counter_poll_is_lifted_as_one_loop_not_one_per_value_read():
    """``v = poll(); while v < 2: v = poll()`` keeps the last value read in a local: the runner's
    states differ by that dead value, so the decision tree has a loop head per value. Merged, the
    loop is one again (fewer reads of the counter in the lifted code of the waiting program)."""
    merged = check("poll_into_local_harness", threads_per_cta=1)
    apart = check("poll_into_local_harness", threads_per_cta=1, merge_equal_futures=False)

    def reads(result) -> int:
        waiting = result.lifted.program.threads[0]
        return sum(type(i).__name__ in ("Load", "Atomic") for i in waiting.instructions)

    assert reads(merged) < reads(apart), (reads(merged), reads(apart))


def _frozen_anew(self, frame, callee) -> tuple:
    """``ProgramRun._frozen_locals`` without reuse: every frame's locals frozen at every choice."""
    from syncverify.frontend import runner

    return tuple(sorted((k, runner._freeze(v)) for k, v in frame.f_locals.items()))


def test_reusing_the_frozen_locals_of_waiting_frames_changes_no_run(monkeypatch):
    """The runner freezes a kernel frame's locals once while it waits for the same helper call
    (``ProgramRun._frozen_locals``): the same states, so the same cuts, decision trees and verdict
    as freezing every frame again at every choice. Our all-reduce kernel with epoch-flag: helpers
    three deep (roles, steps, primitives), polls in a loop, and a list-free kernel frame of every
    launch argument."""
    from tests.frontend_kernels.crosscheck_scenarios import scenario_harness
    from syncverify.frontend import runner
    from syncverify.kernels.steps import unbounded_waits

    def run():
        with unbounded_waits():
            r = syncverify.check_kernel(scenario_harness("all-reduce", "epoch-flag", tiles=1), world_size=2,
                                        timeout=300)
        assert r.limit_hit is None, r.text()
        return r.safe, sorted(r.violations), r.executions, r.size

    reused = run()
    monkeypatch.setattr(runner.ProgramRun, "_frozen_locals", _frozen_anew)
    assert run() == reused


def test_a_frame_holding_a_list_is_frozen_again_at_every_choice():
    """A list can change in place while its frame waits for a call: such a frame's frozen locals
    are not kept for reuse (the others are, also for the innermost frame, whose locals are then
    checked by identity: a local bound to a new object is frozen again)."""
    import sys

    from syncverify.frontend import runner

    run = runner.ProgramRun.__new__(runner.ProgramRun)
    run.suspended, run.handles = {}, {}

    def outer(held):
        return inner()

    def inner():
        frame = sys._getframe()
        return run._frozen_locals(frame.f_back, frame), run._frozen_locals(frame.f_back, frame)

    first, again = outer((1, 2))
    assert first == again and len(run.suspended) == 1
    run.suspended.clear()
    outer((1, [2]))
    assert not run.suspended

    def innermost():
        v, f = (1, 2), sys._getframe()
        pair = run._frozen_locals(f, None), run._frozen_locals(f, None)
        v = (1, 3)
        return pair, run._frozen_locals(f, None), v

    (before, same), after, _v = innermost()
    assert same is before and dict(before)["v"] == (1, 2) and dict(after)["v"] == (1, 3)


def test_the_checks_runs_build_no_overflow_checks_and_leave_triton_as_it_was():
    """Inside the hooks Triton's overflow sanitizing is off (its range tests feed only a
    ``device_assert`` that does nothing without ``debug``); after them the option is Triton's again."""
    import triton.runtime.interpreter as interp

    from syncverify.frontend import runner

    before = interp.interpreter_builder.options
    with runner.hooks():
        assert interp.interpreter_builder.options.sanitize_overflow is False
        assert not interp.interpreter_builder.options.debug
    assert interp.interpreter_builder.options is before and before.sanitize_overflow is True
