"""vLLM #2760's flags through the kernel front end (tests/frontend_kernels/byte_flags.py).

The front end does not lift mixed-size accesses: a producer storing its own byte of a wider flag
word through an ``int8`` pointer is refused, naming its ``file:line`` (exit 2), rather than read as
a store of the whole word (which would change what the kernel does). The same protocol as TOML with
byte ranges is UNSAFE (tests/test_protocol_bytes.py). The fix, one 32-bit flag per producer
written and read whole, is SAFE."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

import syncverify  # noqa: E402
from syncverify.errors import UnsupportedConstruct  # noqa: E402

KERNELS = Path(__file__).parent / "frontend_kernels" / "byte_flags.py"


def test_one_word_flag_per_producer_is_safe():
    result = syncverify.check_kernel(f"{KERNELS}::word_flags", world_size=1, timeout=120)
    assert result.safe is True, result.text()


def test_a_byte_stored_into_a_wider_flag_word_is_refused_naming_its_line():
    line = next(n for n, text in enumerate(KERNELS.read_text().splitlines(), 1) if "BUG (vLLM #2760)" in text)
    with pytest.raises(UnsupportedConstruct, match=rf"byte_flags.py:{line}: a 1-byte store at byte 0 of flag@0\[0\], "
                                                   r"an element of 8 bytes"):
        syncverify.check_kernel(f"{KERNELS}::byte_flags", world_size=1, timeout=120)


def test_the_command_line_says_so_in_one_line_with_exit_2():
    done = subprocess.run([sys.executable, "-m", "syncverify", "check", f"{KERNELS}::byte_flags", "--world-size", "1"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("syncverify: error:")]
    assert len(errors) == 1 and "mixed sizes" in errors[0] and "Traceback" not in done.stderr
