"""Warp-specialized barrier steps on a real GPU (skipped without one): the FlashAttention-3
epilogue handoff (warps 1-7 ``bar.arrive``, warp 0 ``bar.sync``, then a release) leaves no bad tile
under random delays, and its two broken siblings, which the model refutes, leave bad tiles under
the same delays. Run on the GPU machine with ``python -m pytest -q tests/gpu``; the CPU side of
the same protocols is ``tests/test_warp_barriers.py``.

The delays are what make the broken ones fail: ``before-store`` holds back a random set of warps
before their tile stores (``syncverify.kernels.delays.delay_warp_mask``), so a signal that does
not wait for those warps is seen before their part of the tile is written (on the H200 a missing
CTA barrier shows that way in every tile, ``../shared/PLATFORM.md``).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="needs torch (in the checkout: python -m pip install -e '.[gpu]')")
pytest.importorskip("triton", reason="needs triton (in the checkout: python -m pip install -e '.[gpu]')")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(),
                       reason="needs a CUDA GPU (none visible); the CPU path is tests/test_warp_barriers.py"),
]

from syncverify.stress.campaign import run_campaign  # noqa: E402

SAFE = "fa3-epilogue-named-barrier"
BROKEN = ("fa3-epilogue-signal-warp-arrives", "fa3-epilogue-one-warpgroup-barrier")
# 4 producer programs per rank over 16 tiles: each program hands off 4 tiles in a row, so the
# barrier is reused while its arriving warps run ahead
SMALL = dict(m=256, n=256, k=256, block_m=64, block_n=64, block_k=64, gemm_sms=4, comm_sms=2, recv_sms=2)


def campaign(protocol: str, kernel: str, delays: str = "random", **options):
    return run_campaign(protocol=protocol, kernel=kernel, world_size=2, virtual_ranks=True, iterations=256,
                        delays=delays, seed=3, **dict(SMALL, **options))


@pytest.mark.parametrize("kernel", ["all-reduce", "all-scatter", "gemm-reduce-scatter"])
@pytest.mark.parametrize("delays", ["none", "random"])
def test_the_warp_specialized_handoff_leaves_no_bad_tile(kernel, delays):
    result = campaign(SAFE, kernel, delays)
    assert result.iterations == 256
    assert result.clean, result.first_failure


def test_the_handoff_as_all_scatters_push_protocol_too():
    # the comm CTA's push signal hands off as well: both CTAs of the kernel reuse barrier 1
    result = campaign(SAFE, "all-scatter", push=SAFE)
    assert result.clean, result.first_failure


@pytest.mark.parametrize("protocol", BROKEN)
def test_each_broken_sibling_leaves_bad_tiles_under_the_same_delays(protocol):
    result = campaign(protocol, "all-reduce")
    assert result.bad_iterations > 0, (f"{protocol}: no bad tile in {result.iterations} iterations; the model "
                                       f"refutes it (tests/test_warp_barriers.py), so the delays missed it")
    assert campaign(SAFE, "all-reduce").clean  # same seed, same delays: the handoff itself is clean


def test_all_gather_gemms_sender_refuses_a_handoff_it_could_not_keep_from_lapping():
    from syncverify.kernels.errors import UnsupportedStep

    with pytest.raises(UnsupportedStep, match="bar.arrive 1 .* can be reached again"):
        run_campaign(protocol=SAFE, kernel="all-gather-gemm", world_size=2, virtual_ranks=True, iterations=1)
