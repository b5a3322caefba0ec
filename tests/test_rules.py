"""syncverify.protocols.rules: the rules both the model and the kernels follow, each stated once."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from syncverify.protocols import rules

worlds = st.integers(1, 8)


@given(st.sampled_from(sorted(rules.TO)), worlds, st.data())
def test_signal_targets_follow_the_to_table(to, world, data):
    rank = data.draw(st.integers(0, world - 1))
    owner = data.draw(st.integers(0, world - 1))
    targets = rules.signal_targets(to, rank, owner, world)
    own, others, to_owner = rules.to_flags(to)
    if to_owner:
        assert targets == [owner]
    else:
        assert targets == sorted(targets) and len(set(targets)) == len(targets)
        assert (rank in targets) == own
        assert set(targets) - {rank} == (set(range(world)) - {rank} if others else set())


@given(st.sampled_from(sorted(rules.UNTIL_OPS)), st.integers(-4, 12), st.integers(-4, 12))
def test_the_models_loop_back_branch_repeats_exactly_while_until_fails(op, observed, target):
    cond, value = rules.loop_back(op, target)
    loops = {"eq": observed == value, "ne": observed != value, "lt": observed < value,
             "ge": observed >= value}[cond]
    assert loops == (not rules.until_holds(op, observed, target))


@given(st.integers(1, 64), worlds, st.sampled_from(rules.DISTRIBUTIONS))
def test_the_ownership_table_the_kernels_read_is_the_owner_rule(tiles, world, distribution):
    table = rules.ownership_table(tiles, world, distribution)
    per_rank = -(-tiles // world)
    owners, counts, rows = table[:tiles], table[tiles:tiles + world], table[tiles + world:]
    assert len(rows) == world * per_rank
    assert owners == [rules.tile_owner(t, tiles, world, distribution) for t in range(tiles)]
    assert sum(counts) == tiles
    for rank in range(world):
        mine = rows[rank * per_rank:(rank + 1) * per_rank]
        assert mine[:counts[rank]] == rules.owned_tiles(rank, tiles, world, distribution)
        assert all(t == -1 for t in mine[counts[rank]:])
        assert all(owners[t] == rank for t in mine[:counts[rank]])


def test_reset_policies_come_from_the_protocols_field_unless_overridden():
    assert rules.reset_policy("host") == "host-between-barriers"
    assert rules.reset_policy("consumer") == "none"
    assert rules.reset_policy("host", "host-racing") == "host-racing"
    assert set(rules.PROTOCOL_RESET.values()) <= set(rules.RESET_POLICIES)
