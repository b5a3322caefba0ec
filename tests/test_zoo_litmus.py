"""The zoo's litmus entries (``protocols/zoo/*.litmus``): reported bugs the protocol language cannot
state yet, each pinned with its source and the verdict its source describes."""

from __future__ import annotations

from syncverify.explore.driver import explore
from syncverify.litmus.parser import parse_litmus
from syncverify.model import ptx
from syncverify.protocols.registry import zoo_litmus

EXPECTED = {"vllm-2760-byte-flags": "race", "vllm-2760-uint32-flags": "safe",
            # NVSHMEM deliveries (syncverify.model.ptx, choice 13; docs/nvshmem.md)
            "nvshmem-84-cumulative-signal": "race", "nvshmem-84-per-chunk-signal": "safe",
            "deepep-310-inflight-head-update": "race", "deepep-310-quiet-before-next-round": "safe",
            # TMA epilogues: a TMA store, wait_group.read, then a signal (syncverify.model.ptx, choice 11)
            "triton-10415-tma-store-read-wait-release": "race", "triton-10415-tma-store-wait-group": "safe",
            "thunderkittens-194-gemm-ar-read-wait-signal": "race", "thunderkittens-194-store-async-wait": "safe"}


def _verdict(text: str) -> str:
    result = explore(parse_litmus(text))
    assert result.limit_hit is None and not result.can_hang
    return "race" if any(ptx.data_races(x) for x in result.executions) else "safe"


def test_each_litmus_entry_cites_its_source_and_says_what_users_saw_and_the_model_shows():
    entries = zoo_litmus()
    assert set(EXPECTED) <= set(entries)
    for name, fields in entries.items():
        assert fields["source"].startswith("https://github.com/"), name
        assert fields["users_saw"] and fields["model_shows"] and fields["origin"], name


def test_each_bug_races_and_its_fix_does_not():
    """vllm #2760 (byte flags / uint32 flags), nvshmem #84 (cumulative SIGNAL_ADD counter / a
    signal per chunk), DeepEP #310 (in-flight head update / quiet before the next round), Triton
    #10415 and ThunderKittens #194 (a TMA store's wait_group.read before the signal / wait_group)."""
    entries = zoo_litmus()
    for name, want in EXPECTED.items():
        assert _verdict(entries[name]["text"]) == want, name
        assert entries[name]["model_shows"].startswith(want), name
