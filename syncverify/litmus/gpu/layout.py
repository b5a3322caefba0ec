"""Where each instance runs and where its memory lies: the random tables one launch reads.

Plain numpy, seeded: the same seed gives the same placement. For a test with ``C`` CTAs, the
``test_programs`` CTAs of a launch are split evenly among the test CTAs (which program hosts which
test CTA is shuffled), each program hosts ``lanes`` instances, and each of its warps plays one of
the test CTA's threads (shuffled with ``permute_warps``) for those instances, one lane each
(shuffled with ``permute_lanes``). Instance ``i``'s location ``j`` is slot ``s`` of test memory,
at word ``s * location_stride``; slots are dealt at random with ``shuffle_locations``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from syncverify.litmus.gpu.stress import LINE_WORDS, StressParams


@dataclass(frozen=True)
class Layout:
    """One launch's tables (all int32) and sizes."""

    instances: int
    test_programs: int
    cta_of_program: np.ndarray  # [test_programs]
    role: np.ndarray  # [test_programs * block]: the test thread a lane's warp plays, -1 idle
    instance: np.ndarray  # [test_programs * block]: the instance a lane plays, -1 idle
    address: np.ndarray  # [instances * locations]: word offset of each location
    memory_words: int
    line_of_program: np.ndarray  # [all programs]: the scratch line each program stresses
    delay: np.ndarray  # [test_programs * block]: ns each lane sleeps after the start (one value per warp)


def make_layout(ctas: tuple[tuple[int, ...], ...], num_warps: int, n_locations: int, params: StressParams,
                rng: np.random.Generator, *, single_lane: bool = False) -> Layout:
    """The tables for one launch of a kernel with these CTAs (see the module doc)."""
    n_ctas = len(ctas)
    per_cta = max(1, params.test_programs // n_ctas)
    programs = per_cta * n_ctas
    lanes = 1 if single_lane else params.lanes
    block = 32 * num_warps
    instances = per_cta * lanes

    cta_of_program = np.repeat(np.arange(n_ctas, dtype=np.int32), per_cta)
    rng.shuffle(cta_of_program)
    role = np.full((programs, num_warps, 32), -1, dtype=np.int32)
    instance = np.full((programs, num_warps, 32), -1, dtype=np.int32)
    # Each test CTA deals its instances to its programs, ``lanes`` apiece.
    hosted = {c: rng.permutation(instances).reshape(per_cta, lanes) for c in range(n_ctas)}
    seen = dict.fromkeys(range(n_ctas), 0)
    for p, c in enumerate(cta_of_program):
        mine = hosted[c][seen[c]]
        seen[c] += 1
        warps = rng.permutation(num_warps) if params.permute_warps else np.arange(num_warps)
        for w_index, thread in enumerate(ctas[c]):
            w = warps[w_index]
            role[p, w, :] = thread
            lane_ids = rng.permutation(32)[:lanes] if params.permute_lanes else np.arange(lanes)
            order = rng.permutation(lanes) if params.permute_lanes else np.arange(lanes)
            instance[p, w, lane_ids] = mine[order]
    slots = instances * n_locations
    slot_of = rng.permutation(slots) if params.shuffle_locations else np.arange(slots)
    address = (slot_of * params.location_stride).astype(np.int32)
    n_programs = programs + params.stress_programs
    line_of_program = rng.integers(0, params.stress_lines, size=n_programs, dtype=np.int32)
    warp_delay = rng.integers(0, params.start_jitter_ns + 1, size=(programs, num_warps, 1), dtype=np.int32)
    delay = np.broadcast_to(warp_delay, (programs, num_warps, 32)).reshape(-1).copy()
    return Layout(instances=instances, test_programs=programs, cta_of_program=cta_of_program,
                  role=role.reshape(-1), instance=instance.reshape(-1), address=address,
                  memory_words=max(1, slots * params.location_stride), line_of_program=line_of_program,
                  delay=delay)


def scratch_words(params: StressParams) -> int:
    """Words of stress scratch: one line per ``stress_lines``."""
    return params.stress_lines * LINE_WORDS
