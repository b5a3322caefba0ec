"""The kernel front end (issue 22): the user's own Triton kernels, through a harness, under the model.

Known answers on small kernels (tests/frontend_kernels/known.py), the required test (a race only
reachable through a branch the program-id-order interpreter never takes), bad input, the CLI.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

import syncverify  # noqa: E402
from syncverify.cli import main  # noqa: E402

KNOWN = Path(__file__).parent / "frontend_kernels" / "known.py"
BAD = Path(__file__).parent / "frontend_kernels" / "bad.py"


def check(name: str, **options):
    options.setdefault("world_size", 1)
    options.setdefault("timeout", 120)
    return syncverify.check_kernel(f"{KNOWN}::{name}", **options)


def test_release_acquire_message_pass_with_a_cta_barrier_is_safe():
    result = check("release_acquire")
    assert result.safe is True, result.text()
    assert result.executions > 0


def test_relaxed_message_pass_races_and_reads_unwritten_data():
    result = check("relaxed")
    assert result.safe is False
    assert {"race", "unwritten-read"} <= set(result.violations)
    race = result.violations["race"]
    assert "known.py:27" in race.explanation and "known.py:20" in race.explanation  # the user's lines


def test_missing_cta_barrier_before_the_release_races_on_the_other_threads_share():
    result = check("missing_barrier")
    assert "race" in result.violations
    # thread 0 stored its share before its own release; the race is on thread 1's share
    assert "thread 1" in result.violations["race"].explanation
    one_thread = check("missing_barrier", threads_per_cta=1)
    assert one_thread.safe is True, "with one model thread per CTA the missing barrier is invisible"


def test_a_race_reachable_only_through_a_branch_the_sequential_interpreter_never_takes():
    """The consumer has the lower program id: Triton's interpreter runs it first, it always reads
    the flag unset and takes the shortcut, so a sequential run never reads ``late``. The model
    explores the value 1 too, and finds the race on ``late`` (written after the flag)."""
    import torch
    from triton.runtime.interpreter import InterpretedFunction

    from syncverify.kernels import _jit

    from tests.frontend_kernels import known

    data, late, flag, out = (torch.zeros(4, dtype=torch.int32) for _ in range(4))
    with _jit._interpreting_calls():
        InterpretedFunction(known.shortcut.fn)[(2,)](data, late, flag, out, BLOCK=4)
    assert out.tolist() == [0, 0, 0, 0] and flag.tolist()[0] == 1, "the sequential run took the shortcut"

    result = check("shortcut_harness")
    assert "race" in result.violations, result.text()
    race = result.violations["race"]
    assert "late" in race.explanation and "known.py:68" in race.explanation
    assert "shortcut[0]" in race.explanation  # the consumer, on the branch the interpreter never took


def test_an_exchange_that_overwrites_a_signal_hangs_and_an_add_does_not():
    result = check("xchg_overwrite")
    assert set(result.violations) == {"hang"}, result.text()
    assert "count_arrivals[0]" in result.violations["hang"].explanation
    assert "known.py:85" in result.violations["hang"].explanation  # the poll's line
    assert check("add_arrivals").safe is True


def test_a_reset_on_the_wrong_stream_races_with_the_previous_call():
    assert check("reset_same_stream", calls=2).safe is True
    wrong = check("reset_wrong_stream", calls=2)
    assert wrong.safe is False
    assert "race" in wrong.violations, wrong.text()
    assert "fill_" in wrong.violations["race"].explanation
    assert check("reset_wrong_stream", calls=1).safe is True, "one call alone has nothing to race with"


def test_every_verdict_states_its_model_and_bounds():
    text = check("release_acquire").text()
    assert "PTX memory model" in text and "as if compiled for NVIDIA" in text
    assert "world size 1, 1 call(s)" in text


# ----- bad input -------------------------------------------------------------------------------

@pytest.mark.parametrize("name, words", [
    ("raises", "harness raises raised ValueError: this harness needs a GPU named Bob"),
    ("refuses_world_size", "needs world size 2, got 1"),
    ("cannot_run", "kernel divides_by_zero (program 0) cannot run in the interpreter"),
    ("asm_unknown", "bad.py:18: inline asm 's_waitcnt vmcnt(0)'"),
])
def test_bad_input_is_one_line_naming_the_problem_and_exit_2(name, words, capsys):
    code = main(["check", f"{BAD}::{name}", "--world-size", "1"])
    captured = capsys.readouterr()
    assert code == 2
    assert words in captured.err
    assert "Traceback" not in captured.err + captured.out


def test_declared_inline_asm_is_accepted_and_listed_as_an_assumption():
    result = syncverify.check_kernel(f"{BAD}::asm_unknown", world_size=1,
                                     declare_asm={"s_waitcnt vmcnt(0)": "no-op"})
    assert result.safe is True
    assert any("s_waitcnt vmcnt(0)" in note and "no-op" in note for note in result.assumptions)


def test_an_inline_asm_fence_is_read_with_the_litmus_parser():
    result = syncverify.check_kernel(f"{BAD}::asm_fence", world_size=1)
    fences = [ins for t in result.lifted.program.threads for ins in t.instructions
              if type(ins).__name__ == "Fence"]
    assert fences and fences[0].kind == "acq_rel" and fences[0].scope == "sys"


def test_an_untested_triton_version_is_refused_in_one_line(monkeypatch, capsys):
    import triton

    monkeypatch.setattr(triton, "__version__", "9.9.9")
    assert main(["check", f"{KNOWN}::release_acquire", "--world-size", "1"]) == 2
    assert "tested with triton 3.6.0" in capsys.readouterr().err


# ----- the command line and the pytest assertion ------------------------------------------------

def test_check_cli_exit_codes_for_a_harness(capsys):
    assert main(["check", f"{KNOWN}", "--world-size", "1"]) == 0  # the file's one marked harness
    assert "SAFE" in capsys.readouterr().out
    assert main(["check", f"{KNOWN}::relaxed", "--world-size", "1"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("UNSAFE") and "race" in out
    assert main(["check", f"{KNOWN}::relaxed", "--world-size", "1", "--max-executions", "1"]) in (1, 3)
    assert main(["check", f"{KNOWN}::nope", "--world-size", "1"]) == 2
    assert "has no function 'nope'" in capsys.readouterr().err


def test_a_bound_answers_unknown_exit_3(capsys):
    assert main(["check", f"{KNOWN}::release_acquire", "--world-size", "1", "--timeout", "0.001"]) == 3


def test_assert_kernel_safe():
    syncverify.assert_kernel_safe(f"{KNOWN}::release_acquire", world_size=1)
    with pytest.raises(AssertionError, match="race"):
        syncverify.assert_kernel_safe(f"{KNOWN}::relaxed", world_size=1)


# ----- suggestions, re-checked on the mutated source ----------------------------------------------

def test_suggest_strengthens_the_relaxed_signal_and_rechecks_it(capsys):
    assert main(["check", f"{KNOWN}::relaxed_signal_harness", "--world-size", "1", "--suggest"]) == 1
    out = capsys.readouterr().out
    assert 'line 150 (known.py:150): `sem="relaxed"` → `sem="release"`; re-checked: SAFE' in out
    assert "acq_rel" not in out.split("suggested fixes")[1], "only the weakest strengthening that works"


def test_suggest_inserts_the_missing_cta_barrier_and_replaces_the_overwriting_exchange(capsys):
    from syncverify.frontend.suggest import suggest_fixes

    result = check("missing_barrier")
    fixes = suggest_fixes(f"{KNOWN}::missing_barrier", result, world_size=1, calls=1, threads_per_cta=2)
    assert [f.text() for f in fixes] == ["insert `tl.debug_barrier()` before line 23 (known.py:23); re-checked: SAFE"]
    result = check("xchg_overwrite")
    fixes = suggest_fixes(f"{KNOWN}::xchg_overwrite", result, world_size=1, calls=1, threads_per_cta=2)
    assert any("`tl.atomic_xchg` → `tl.atomic_add`" in f.text() for f in fixes)


# ----- hangs on nothing the model can change, out-of-bounds, descriptors --------------------------

def test_a_kernel_spinning_on_memory_no_one_writes_is_a_hang_not_a_hung_checker():
    result = syncverify.check_kernel(f"{BAD}::spin_forever", world_size=1, timeout=60)
    assert set(result.violations) == {"hang"}
    assert "bad.py:56" in result.violations["hang"].explanation and "keeps reading 0" in result.violations["hang"].explanation


def test_a_spin_on_heap_bases_reports_the_64_bit_address_it_keeps_reading():
    result = syncverify.check_kernel(f"{BAD}::spin_on_heap_bases", world_size=1, timeout=60)
    assert set(result.violations) == {"hang"}
    text = result.violations["hang"].explanation
    read = int(text.split("keeps reading ")[1].split(",")[0])
    assert read >= 2**31, "a heap base address as stored (64 bits), not its 32-bit model value"


def test_a_poll_that_rereads_heap_bases_every_iteration_is_not_a_spin_on_heap_bases():
    """iris's ``translate`` reads ``heap_bases`` (never written) before every poll of the flag; the
    flag's value, chosen in between, is what changes. It was once a false hang on ``heap_bases``."""
    result = check("translated_poll_harness")
    assert result.safe is True, result.text()


def test_a_counter_polled_with_the_read_only_cas_idiom_settles_its_value_domain():
    """``atomic_cas(p, 0, 0)`` in a poll loop writes back what it read: it must not count as an
    unbounded chain of writes (the domain would grow with every round and never settle)."""
    result = check("cas_poll_count_harness", threads_per_cta=1)
    assert result.safe is True, result.text()


def test_an_access_outside_every_allocation_is_out_of_bounds_and_a_masked_one_is_not():
    result = syncverify.check_kernel(f"{BAD}::out_of_bounds", world_size=1, timeout=60)
    assert set(result.violations) == {"out-of-bounds"}
    assert "bad.py:69" in result.violations["out-of-bounds"].explanation


def test_tensor_descriptors_are_tma_accesses_listed_as_an_assumption_even_when_safe():
    result = syncverify.check_kernel(f"{BAD}::descriptors", world_size=1, timeout=60)
    assert result.safe is True  # the kernel boundary orders the TMA store before the host's check
    assert "tensor-descriptor stores are TMA stores" in result.text()
    assert "tensor-descriptor loads are TMA loads" in result.text()


def test_check_json_graph_and_progress(tmp_path, capsys):
    import json

    graph = tmp_path / "race.dot"
    code = main(["check", f"{KNOWN}::reset_wrong_stream", "--world-size", "1", "--calls", "2", "--json",
                 "--graph", str(graph), "--progress-every", "0.01"])
    captured = capsys.readouterr()
    assert code == 1
    doc = json.loads(captured.out)
    assert doc["safe"] is False and "race" in {v["kind"] for v in doc["violations"]}
    assert doc["calls"] == 2 and "PTX memory model" in doc["model"]
    assert graph.exists() and "digraph" in graph.read_text()
    assert "interpreting:" in captured.err or "exploring:" in captured.err


def test_inline_ptx_memory_instructions_are_read_with_the_litmus_parser():
    result = check("asm_release_acquire")
    assert result.safe is True, result.text()
    producer0, producer1 = result.lifted.program.threads[2:4]
    stores = [i for i in producer0.instructions if type(i).__name__ == "Store" and i.sem == "release"]
    assert [(s.loc, s.scope) for s in stores] == [("flag@0[0]", "gpu")]  # @p st.release: thread 0 only
    assert not any(type(i).__name__ == "Store" and i.sem == "release" for i in producer1.instructions)
    consumer1 = result.lifted.program.threads[1]
    assert any(type(i).__name__ == "Load" and i.sem == "acquire" for i in consumer1.instructions)  # every thread
    assert "race" in check("asm_missing_barrier").violations


def test_data_whose_value_reaches_a_branch_or_an_address_is_detected_and_not_ghost():
    result = check("data_decides_harness", threads_per_cta=1)
    program = result.lifted.program
    loads = {i.loc: i for t in program.threads for i in t.instructions if type(i).__name__ == "Load"}
    assert not loads["data@0[0]"].ghost and not loads["index@0[0]"].ghost  # taint reached a sink
    consumer = program.threads[0]
    assert any(type(i).__name__ == "Branch" and i.lhs for i in consumer.instructions)  # both values explored
    table = [i.loc for i in consumer.instructions if getattr(i, "loc", "").startswith("table")]
    assert "table@0[0]" not in table  # table is never written: read as its contents, no event
    assert {"race"} <= set(result.violations)


def test_a_flag_left_set_by_the_previous_call_gives_stale_data_and_an_epoch_flag_does_not():
    stale = check("flag_left_set", calls=2)
    assert {"stale-read", "race"} <= set(stale.violations), stale.text()
    assert "in call 1, but can read what call 0 wrote" in stale.violations["stale-read"].explanation
    assert check("flag_left_set", calls=1).safe is True
    assert check("flag_by_epoch", calls=2).safe is True


def test_a_kernel_looping_without_memory_operations_answers_unknown_instead_of_hanging(monkeypatch):
    from syncverify.frontend import runner

    monkeypatch.setattr(runner, "RUN_SILENCE_LIMIT", 1.0)
    result = syncverify.check_kernel(f"{BAD}::silent_loop", world_size=1, timeout=60)
    assert result.safe is None and result.limit_hit == "timeout"
    assert "without any memory operation" in result.limit_detail


def test_suggest_pairs_a_release_with_its_acquire_when_no_single_change_is_enough(capsys):
    assert main(["check", f"{KNOWN}::relaxed_both_harness", "--world-size", "1", "--suggest"]) == 1
    out = [line.strip() for line in capsys.readouterr().out.split("suggested fixes (each re-checked):")[1].splitlines()
           if line.strip()]
    assert out == ['line 283 (known.py:283): `sem="relaxed"` → `sem="acquire"` and line 281 (known.py:281): '
                   '`sem="relaxed"` → `sem="release"`; re-checked together: SAFE'], out


def test_the_suggest_search_shows_progress_and_answers_unknown_at_its_time_bound():
    """Each re-check reports a line; a spent budget stops the search, which then says unknown
    rather than "no fix" (the pair search re-checks up to MAX_PAIRS mutated sources)."""
    from syncverify.frontend.suggest import search_fixes

    result = check("missing_barrier")
    lines: list[str] = []
    found = search_fixes(f"{KNOWN}::missing_barrier", result, world_size=1, calls=1, threads_per_cta=2,
                         budget=600, progress=lines.append)
    assert found.fixes and not found.bound and found.rechecked == len(lines) >= 1
    assert lines[0].startswith(f"suggest: 1 re-checked (single change 1 of {found.singles}), ")
    spent = search_fixes(f"{KNOWN}::relaxed_both_harness", check("relaxed_both_harness"), world_size=1, calls=1,
                         threads_per_cta=2, budget=0)
    assert spent.fixes == [] and spent.bound == "0 s" and spent.rechecked == 0
    assert spent.summary().endswith("): unknown"), spent.summary()


def test_options_of_the_other_kind_of_check_are_refused_not_ignored(capsys):
    assert main(["check", f"{KNOWN}", "--scenario", "all-scatter"]) == 2
    assert "--scenario applies to protocols, not to a harness" in capsys.readouterr().err
    assert main(["check", "epoch-flag", "--calls", "2"]) == 2
    assert "--calls applies to a harness" in capsys.readouterr().err
