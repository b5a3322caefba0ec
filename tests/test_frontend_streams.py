"""Stream memory operations in the kernel front end's harness (docs/nvshmem.md, "Stream memory
operations"): ``sv.write_value`` (``cuStreamWriteValue32``), ``sv.wait_value``
(``cuStreamWaitValue32``) and ``sv.copy_`` (a copy-engine peer copy) are threads ordered by their
stream, not by any SM thread.

A flag written on the producer's stream publishes its tile (SAFE); on a stream that does not
follow the producer it does not (UNSAFE). A copy on a side stream that waits for the producer's
flag copies the finished tile (SAFE); without the wait it may copy too early (UNSAFE).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("triton")

import syncverify  # noqa: E402
from syncverify.frontend.harness import Harness, HarnessError  # noqa: E402

KERNELS = Path(__file__).parent / "frontend_kernels" / "streams.py"


def _safe(name: str) -> bool:
    return syncverify.check_kernel(f"{KERNELS}::{name}", world_size=2, timeout=120).safe


@pytest.mark.parametrize("name, safe", [
    ("write_value_after_producer", True), ("write_value_on_another_stream", False),
    ("copy_after_wait_value", True), ("copy_without_wait", False),
])
def test_stream_memory_operations_are_ordered_by_their_stream_only(name, safe):
    assert _safe(name) is safe


def test_stream_words_are_one_32_bit_element_and_copies_match_in_size():
    import torch  # torch: the harness's buffers are torch tensors

    sv = Harness(2)
    flag = sv.heap.zeros((2,), torch.int32)
    with pytest.raises(HarnessError, match="one 32-bit element"):
        sv.write_value(flag.on(0), 1, rank=0)
    with pytest.raises(HarnessError, match="cmp='lt'"):
        sv.wait_value(flag.on(0)[0], 1, rank=0, cmp="lt")
    with pytest.raises(HarnessError, match="4 elements from 2"):
        sv.copy_(sv.heap.zeros((4,), torch.int32).on(1), flag.on(0), rank=0)
