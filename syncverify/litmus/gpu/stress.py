"""The stress parameters of a GPU litmus run (MC-Mutants style) and the tuned values per machine.

MC Mutants (Levine et al., ASPLOS '23) found that the parameters below, chosen per device by a
search that maximises the mutation score, show up to three orders of magnitude more weak
behaviours than untuned stress. Ours, with what each does in the kernel
(:mod:`syncverify.litmus.gpu.codegen`, :mod:`syncverify.litmus.gpu.layout`):

``test_programs``        CTAs that run test threads (rounded down to a multiple of the test's CTAs)
``lanes``                instances per CTA: each warp plays one test thread for ``lanes`` instances
``permute_lanes``        which lane of a warp plays which instance is random (else lane = instance)
``permute_warps``        which warp of a CTA plays which test thread is random
``location_stride``      words between two location slots (1 = packed, 32 = one 128-byte line each)
``shuffle_locations``    each (instance, location) gets a random slot (else instance-major order)
``stress_programs``      extra CTAs that hammer scratch lines for the whole launch
``stress_lines``         scratch lines the stress CTAs and pre-stress pick from (one 128-byte line each)
``stress_iterations``    accesses per stress CTA thread
``stress_pattern``       0 store-store, 1 store-load, 2 load-store, 3 load-load (MC Mutants' four)
``pre_stress_iterations``  accesses each test thread makes on a scratch line before the start barrier
``aligned_start``        test CTAs meet at a global-memory spin barrier before the test
``barrier_spins``        polls of that barrier before a CTA gives up (counted as a misaligned start)
``max_iterations``       bound on a spinning test thread's loop (then the instance is a timeout)
``start_jitter_ns``      each test warp sleeps a random 0..N ns (``nanosleep``) after the start barrier
                         (our H200 probes: weak behaviour that delays can force shows, without them not)
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from syncverify.errors import SyncVerifyError

TUNED_FILE = Path(__file__).with_name("tuned.json")
LINE_WORDS = 32  # one 128-byte cache line of int32 words


@dataclass(frozen=True)
class StressParams:
    """One point of the stress space (see the module doc for what each field does)."""

    test_programs: int = 64
    lanes: int = 32
    permute_lanes: bool = True
    permute_warps: bool = True
    location_stride: int = 32
    shuffle_locations: bool = True
    stress_programs: int = 32
    stress_lines: int = 64
    stress_iterations: int = 256
    stress_pattern: int = 0
    pre_stress_iterations: int = 16
    aligned_start: bool = True
    barrier_spins: int = 20000
    max_iterations: int = 256
    start_jitter_ns: int = 0

    def __post_init__(self) -> None:
        bounds = {"test_programs": (1, 4096), "lanes": (1, 32), "location_stride": (1, 4096),
                  "stress_programs": (0, 4096), "stress_lines": (1, 1 << 16), "stress_iterations": (0, 1 << 20),
                  "stress_pattern": (0, 3), "pre_stress_iterations": (0, 1 << 16), "barrier_spins": (1, 1 << 24),
                  "max_iterations": (1, 1 << 16), "start_jitter_ns": (0, 1_000_000)}
        for name, (lo, hi) in bounds.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
                raise SyncVerifyError(f"stress parameter {name}={value!r} is not an integer in [{lo}, {hi}]")

    def to_json(self) -> dict:
        """The parameters as a JSON object."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict, *, where: str = "stress parameters") -> "StressParams":
        """Parameters from a JSON object; unknown keys are bad input (named with ``where``)."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise SyncVerifyError(f"unknown stress parameter(s) {', '.join(unknown)} in {where}; "
                                  f"known: {', '.join(sorted(names))}")
        return cls(**data)


#: The search space of :func:`sample` (MC Mutants' ranges, scaled to one H200's 132 SMs).
SPACE = {
    "test_programs": (8, 16, 32, 64, 128),
    "lanes": (1, 4, 8, 32),
    "permute_lanes": (False, True),
    "permute_warps": (False, True),
    "location_stride": (1, 2, 8, 32, 64),
    "shuffle_locations": (False, True),
    "stress_programs": (0, 16, 64, 128),
    "stress_lines": (1, 4, 64, 512),
    "stress_iterations": (0, 64, 512, 2048),
    "stress_pattern": (0, 1, 2, 3),
    "pre_stress_iterations": (0, 8, 64, 256),
    "aligned_start": (False, True),
    "start_jitter_ns": (0, 0, 200, 2000),
}


def sample(rng: random.Random) -> StressParams:
    """A random point of :data:`SPACE` (the rest at their defaults)."""
    return StressParams(**{name: rng.choice(values) for name, values in SPACE.items()})


def interpreter_sized(params: StressParams) -> StressParams:
    """``params`` cut to sizes the CPU interpreter runs in well under a second per launch.

    The interpreter runs programs one after another, so a start barrier can only time out and
    stress cannot overlap the test: both are kept (their code paths run) but made tiny."""
    return replace(params, test_programs=min(params.test_programs, 4), lanes=min(params.lanes, 4),
                   stress_programs=min(params.stress_programs, 1), stress_iterations=min(params.stress_iterations, 2),
                   pre_stress_iterations=min(params.pre_stress_iterations, 1), barrier_spins=min(params.barrier_spins, 2),
                   max_iterations=min(params.max_iterations, 8), stress_lines=min(params.stress_lines, 4))


def machine_kind() -> str:
    """The tuned-parameter key of this machine: ``nvidia-h200`` on an H200, else ``default``."""
    import torch  # torch: only a GPU run asks which GPU it is on

    if torch.cuda.is_available() and "H200" in torch.cuda.get_device_name(0):
        return "nvidia-h200"
    return "default"


def load_tuned(kind: str, *, path: Path = TUNED_FILE) -> StressParams:
    """The shipped tuned parameters for ``kind`` (the defaults when none are stored for it)."""
    if not path.exists():
        return StressParams()
    data = json.loads(path.read_text())
    entry = data.get(kind) or data.get("default")
    if entry is None:
        return StressParams()
    return StressParams.from_json(entry["params"], where=f"{path} [{kind}]")


def tuned_kinds(*, path: Path = TUNED_FILE) -> set[str]:
    """The machine kinds ``path`` stores tuned parameters for."""
    return set(json.loads(path.read_text())) if path.exists() else set()


def store_tuned(kind: str, params: StressParams, score: dict, *, path: Path = TUNED_FILE) -> None:
    """Record ``params`` (and the mutation score that chose them) as the tuned values for ``kind``."""
    data = json.loads(path.read_text()) if path.exists() else {}
    data[kind] = {"params": params.to_json(), "score": score}
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
