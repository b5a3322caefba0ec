"""vLLM #2760's flags through the kernel front end (tests/frontend_kernels/byte_flags.py).

A store of part of an element (a byte through an ``int8`` pointer into a 32-bit flag word) is a
mixed-size access: the front end makes that element byte-addressed (``syncverify.program``'s
split, the litmus and protocol languages' own) and the verdict names the ``mixed-size`` cause.
Known answers: the bytes set by two producers and polled whole race (UNSAFE, unwritten-read and
race, cause mixed-size); each byte polled with its own footprint is SAFE. The same shape as a
protocol file (``tests/protocols/vllm-2760-*.toml``) drives an all-reduce kernel whose flag steps
are read from that file: the kernel through the front end and the file through the protocol check
get the same verdict, kinds and cause (one source; a step the kernel cannot follow is refused)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

import syncverify  # noqa: E402
from syncverify.errors import UnsupportedConstruct  # noqa: E402
from syncverify.protocols import load_protocol  # noqa: E402
from syncverify.scenarios.build import ScenarioOptions, build  # noqa: E402
from syncverify.verdicts.check import check  # noqa: E402

KERNELS = Path(__file__).parent / "frontend_kernels" / "byte_flags.py"
PROTOCOLS = Path(__file__).parent / "protocols"
sys.path.insert(0, str(KERNELS.parent))
from byte_flags import flag_steps, protocol_harness  # noqa: E402


def _line(marker: str) -> int:
    return next(n for n, text in enumerate(KERNELS.read_text().splitlines(), 1) if marker in text)


def test_bytes_of_one_word_set_by_two_producers_and_polled_whole_race_with_the_mixed_size_cause():
    result = syncverify.check_kernel(f"{KERNELS}::byte_flags", world_size=1, timeout=120)
    assert result.safe is False and sorted(result.violations) == ["race", "unwritten-read"], result.text()
    assert "mixed-size" in result.causes, result.text()
    assert "overlap only partly" in result.causes["mixed-size"]
    assert "cause: mixed-size" in result.text() and result.to_json()["causes"].keys() == {"mixed-size"}


def test_each_byte_polled_with_the_footprint_it_was_written_with_is_safe():
    result = syncverify.check_kernel(f"{KERNELS}::matching_reads", world_size=1, timeout=120)
    assert result.safe is True, result.text()
    assert result.causes == {}


def test_one_word_flag_per_producer_is_safe():
    result = syncverify.check_kernel(f"{KERNELS}::word_flags", world_size=1, timeout=120)
    assert result.safe is True, result.text()


def _protocol_causes(path: Path) -> set[str]:
    scenario = build(load_protocol(path), ScenarioOptions(world_size=2))
    return {v.cause(scenario).kind for v in check(scenario).violations.values()}


@pytest.mark.parametrize("name", ["vllm-2760-byte-flags", "vllm-2760-byte-flags-matching-reads"])
def test_the_protocol_file_and_the_kernel_built_from_it_get_the_same_verdict_kinds_and_cause(name):
    path = PROTOCOLS / f"{name}.toml"
    kernel = syncverify.check_kernel(protocol_harness(path), world_size=2, timeout=300)
    model = syncverify.check_protocol(str(path), scenario="all-reduce", world_size=2)
    assert kernel.limit_hit is None, kernel.limit_detail
    assert (kernel.safe, sorted(kernel.violations)) == (model.safe, sorted(model.violations)), kernel.text()
    assert ("mixed-size" in kernel.causes) == ("mixed-size" in _protocol_causes(path))
    assert (kernel.safe, "mixed-size" in kernel.causes) == {"vllm-2760-byte-flags": (False, True),
                                                            "vllm-2760-byte-flags-matching-reads": (True, False)}[name]


def test_the_kernel_reads_its_flag_steps_from_the_protocol_file():
    store, waits = flag_steps(PROTOCOLS / "vllm-2760-byte-flags.toml", 2)
    assert store == ("release", "sys", 1, 0, 1, True) and waits == (("acquire", "sys", 0, 4, 257),)
    _, waits = flag_steps(PROTOCOLS / "vllm-2760-byte-flags-matching-reads.toml", 2)
    assert waits == (("acquire", "sys", 0, 1, 1), ("acquire", "sys", 1, 1, 1))


def test_a_protocol_step_the_kernel_cannot_follow_is_refused_naming_it(tmp_path):
    text = (PROTOCOLS / "vllm-2760-byte-flags.toml").read_text().replace("size = 1 }", "size = 2 }", 1)
    changed = tmp_path / "vllm-2760-two-byte-store.toml"
    changed.write_text(text)
    with pytest.raises(UnsupportedConstruct, match=r"vllm-2760-two-byte-store.toml: signal step 2: not a 1-byte store"):
        flag_steps(changed, 2)


def test_a_byte_of_an_8_byte_word_is_refused_naming_its_line():
    line = _line("def store_byte") + 3  # the helper's inline asm call
    with pytest.raises(UnsupportedConstruct, match=rf"byte_flags.py:{line}: a 1-byte store at byte 0 of flag@0\[0\], "
                                                   r"an element of 8 bytes"):
        syncverify.check_kernel(f"{KERNELS}::wide_word", world_size=1, timeout=120)


def test_an_asm_width_other_than_its_pointers_is_refused_naming_its_line():
    with pytest.raises(UnsupportedConstruct, match=r"byte_flags.py:\d+: inline asm store of 1 byte\(s\) through a "
                                                   r"pointer to 4-byte elements"):
        syncverify.check_kernel(f"{KERNELS}::wrong_width", world_size=1, timeout=120)


def test_an_atomic_on_a_word_also_written_in_part_is_refused_naming_its_line():
    line = _line("an atomic of the word others write in part")
    with pytest.raises(UnsupportedConstruct, match=rf"byte_flags.py:{line}: atomic on flag@0\[0\], which the kernels "
                                                   r"also access in part"):
        syncverify.check_kernel(f"{KERNELS}::atomic_on_byte_word", world_size=1, timeout=120)


def test_the_command_line_refuses_the_8_byte_word_in_one_line_with_exit_2():
    done = subprocess.run([sys.executable, "-m", "syncverify", "check", f"{KERNELS}::wide_word", "--world-size", "1"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("syncverify: error:")]
    assert len(errors) == 1 and "mixed sizes" in errors[0] and "Traceback" not in done.stderr
