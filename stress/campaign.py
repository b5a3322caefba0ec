"""A stress campaign: run a fused kernel with one protocol many times, classify every bad tile.

``run_campaign(**options) -> CampaignResult`` is the whole job behind ``syncverify stress``:
check the options, build the kernel for the protocol (``syncverify.kernels.build``), run iterations until
``iterations`` or ``seconds`` is reached, and write partial results to a JSON-lines file as it
goes (one ``progress`` line per synchronization, one ``bad-tile`` line per recorded tile, one
``result`` line at the end), so a killed run still leaves what it found.

Three ways to run the ranks: virtual ranks (``virtual_ranks=True``: every rank's programs in one
launch on one GPU, each rank with its own heap region), the interpreter (``interpret=True``:
virtual ranks on the CPU, tiny sizes; what CI runs), or one process per GPU
(``syncverify.stress.launch``, NCCL and symmetric memory) when neither is set and ``world_size > 1``.
``interpret=True, real_ranks=True`` is the last on the CPU: one process per rank, ``gloo``, every
rank's heap in one file in shared memory (``syncverify.kernels.processes.run_ranks``, the path the
user's harnesses take with ``--real-ranks``), the same workers, watchdog and results as on GPUs.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from syncverify.protocols import load_protocol, rules
from syncverify.validation import one_of
from syncverify.kernels.config import K_SLICED, ORDERS, KernelConfig
from syncverify.kernels.errors import StressConfigError
from syncverify.kernels.processes import REAL_INTERPRET_CAP, join_ranks, run_ranks
from syncverify.stress.delays import (
    CONSUMER_SITES,
    MODES,
    PRODUCER_SITES,
    DelayConfig,
    GuidedDelay,
    delays_at,
    parse_sites,
)
from syncverify.kernels.build import NO_SYNC, build

RESETS: tuple[str, ...] = rules.RESET_POLICIES
POISONS: tuple[str, ...] = ("all", "outputs", "previous")
CLASS_NAMES: tuple[str, ...] = ("unwritten", "stale", "missing-ranks", "corrupt", "hang")
#: Bytes of each rank's heap in the shared file of real ranks in the interpreter (sparse: only the
#: pages the buffers use exist; the interpreter's sizes use well under a MiB).
INTERPRET_HEAP_BYTES = 64 << 20
#: ``--order last-rank-late`` on real ranks in the interpreter: the last rank launches its kernel this
#: long after the barrier that starts an iteration (its producers signal after every other rank's
#: consumers have run or begun waiting). Well under what the poll cap waits
#: (:data:`~syncverify.kernels.processes.REAL_INTERPRET_CAP` interpreted polls), so a protocol
#: that waits for the late rank still sees its signal.
LATE_RANK_SECONDS = 1.0



@dataclass(frozen=True)
class CampaignOptions:
    """Everything a campaign needs; :func:`campaign_options` fills sizes by mode and checks it."""

    protocol: str = "barrier-fenced-release-acquire"
    kernel: str = "all-reduce"
    world_size: int = 2
    virtual_ranks: bool = False
    interpret: bool = False
    real_ranks: bool = False  # with interpret: one process per rank (gloo); on GPUs the default without virtual_ranks
    iterations: int | None = None
    seconds: float | None = None
    delays: str = "none"
    seed: int = 0
    delay_pct: int = 50
    delay_max_ns: int = 4000
    delay_sites: str = "all"  # "all" or comma-separated syncverify.stress.delays.SITES names
    delay_table: tuple = ()  # delays="guided": GuidedDelay dicts (syncverify.stress.guided builds them)
    m: int | None = None
    n: int | None = None
    k: int | None = None
    dtype: str = "bf16"
    block_m: int | None = None
    block_n: int | None = None
    block_k: int | None = None
    gemm_sms: int | None = None
    comm_sms: int | None = None
    recv_sms: int | None = None
    push: str = "epoch-flag"  # all-scatter's push protocol (syncverify.scenarios.build.DEFAULT_PUSH)
    distribution: str = "striding"
    production: str = "every-rank"
    reset: str | None = None  # None: from the protocol's ``reset`` field
    poison: str = "all"
    lock_dtype: str = "int32"
    max_polls: int | None = None
    order: str = "producers-first"
    launches: str = "fused"  # fused | two-stream | pdl | pdl-no-wait (syncverify.kernels.config.LAUNCHES)
    table: bool = False
    num_warps: int | None = None
    num_stages: int = 3
    chunk: int | None = None
    output: str | None = None
    max_records: int = 1000
    watchdog_seconds: float | None = None
    graphs: bool | None = None  # replay each block as a CUDA graph (None: on a GPU with virtual ranks)
    stop_on_failure: bool = False  # end at the first block with a bad tile (time to first failure)

    def to_dict(self) -> dict:
        return asdict(self)


def campaign_options(*, sms: int = 132, **options: Any) -> CampaignOptions:
    """Build and check :class:`CampaignOptions`; sizes left ``None`` get the mode's defaults
    (``sms``: multiprocessors of the GPU, for the default program counts)."""
    names = set(CampaignOptions.__dataclass_fields__)
    unknown = sorted(set(options) - names)
    if unknown:
        raise StressConfigError(f"unknown campaign option(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}")
    o = CampaignOptions(**options)
    if o.iterations is None and o.seconds is None:
        o = _replace(o, iterations=4 if o.interpret else 1000)
    if o.real_ranks and o.virtual_ranks:
        raise StressConfigError("--real-ranks and --virtual-ranks exclude each other: choose one")
    if o.real_ranks and o.interpret and o.order == "consumers-first":
        raise StressConfigError("--order consumers-first on real ranks makes every rank's consumers wait for "
                                "producers that run after them (every protocol hangs): use producers-first or "
                                "last-rank-late")
    if o.iterations is not None and o.iterations < 1:
        raise StressConfigError(f"--iterations={o.iterations} must be at least 1")
    if o.seconds is not None and o.seconds <= 0:
        raise StressConfigError(f"--seconds={o.seconds} must be positive")
    for name, value, allowed in (("delays", o.delays, MODES), ("poison", o.poison, POISONS),
                                 ("order", o.order, ORDERS)):
        one_of(f"--{name}", value, allowed, error=StressConfigError)
    if o.reset is not None:
        one_of("--reset", o.reset, RESETS, error=StressConfigError, where=f"default: from {rules.RESET_MAPPING}")
    if o.delays == "guided" and not o.delay_table:
        raise StressConfigError("--delays guided needs a schedule: use --guided (built from the model's "
                                "counterexamples) or campaign option delay_table")
    if not 0 <= o.delay_pct <= 100:
        raise StressConfigError(f"--delay-pct={o.delay_pct} must be in 0..100")
    if o.delay_max_ns < 1 or o.delay_max_ns > 1_000_000:
        raise StressConfigError(f"--delay-max-ns={o.delay_max_ns} must be in 1..1000000")
    try:
        parse_sites(o.delay_sites)
    except ValueError as error:
        raise StressConfigError(f"--delay-sites={o.delay_sites!r}: {error}") from None
    tiny = o.interpret
    gemm_sms, comm_sms, recv_sms = default_programs(o, sms)
    # GPU sizes: about 1024 each, rounded down to what the kernel splits W ways into whole blocks
    # (at W = 3: K 960, N 768, ...), so the defaults are valid at every world size.
    W = max(o.world_size, 1)  # a world size out of range is refused by check_config, naming it
    blocks = dict(block_m=16 if tiny else (_power_of_two_at_most(max(16, 128 // W)) if o.kernel == "all-gather-gemm" else 128),
                  block_n=16 if tiny else 128, block_k=16 if tiny else 64)
    blocks = {k: v if getattr(o, k) is None else getattr(o, k) for k, v in blocks.items()}
    split_k, split_m, split_n = (o.kernel in K_SLICED, o.kernel == "all-gather-gemm", o.kernel == "all-scatter")
    defaults = dict(
        m=(32 * (W if split_m else 1)) if tiny else _fit(1024, blocks["block_m"] * (W if split_m else 1)),
        n=32 * (W if split_n else 1) if tiny else _fit(1024, blocks["block_n"] * (W if split_n else 1)),
        k=16 * W if tiny else _fit(1024, blocks["block_k"] * (W if split_k else 1)),
        # all-gather-gemm's GEMM holds one row tile of every shard: W * block_m rows of accumulator
        **blocks,
        gemm_sms=gemm_sms, comm_sms=comm_sms, recv_sms=recv_sms, num_warps=4 if tiny else 8,
        # Real ranks launch independently: the peer's kernel can start milliseconds late (measured
        # on nvidia-h200-x2: 16,384 polls timed out in 25 of 70,656 iterations of a safe protocol,
        # 4,194,304 in none of 100,000; docs/RESULTS.md), so their bounded waits are longer.
        # In the interpreter a peer rank is another process whose programs take seconds to interpret.
        max_polls=(REAL_INTERPRET_CAP if o.real_ranks and o.world_size > 1 else 8) if tiny
        else (1 << 16 if (o.virtual_ranks or o.world_size == 1) else 1 << 22),
        # a block: the iterations between two host synchronizations (one CUDA graph replay)
        chunk=1 if tiny else (256 if (o.virtual_ranks or o.world_size == 1) else 64),
    )
    o = _replace(o, **{k: v for k, v in defaults.items() if getattr(o, k) is None})
    if o.max_polls < 1:
        raise StressConfigError(f"--max-polls={o.max_polls} must be at least 1")
    if o.chunk < 1:  # not a command-line option: campaign_options(chunk=...) from Python only
        raise StressConfigError(f"campaign option chunk={o.chunk} must be at least 1")
    return o


def _fit(about: int, unit: int) -> int:
    """The largest multiple of ``unit`` not above ``about`` (``unit`` itself if it is larger).

    >>> _fit(1024, 3 * 64), _fit(1024, 2 * 64), _fit(1024, 3000)
    (960, 1024, 3000)
    """
    return unit * max(1, about // unit) if unit >= 1 else about  # a bad block size is refused later, by name


def _power_of_two_at_most(value: int) -> int:
    """The largest power of two not above ``value`` (``value >= 1``).

    >>> _power_of_two_at_most(42), _power_of_two_at_most(64)
    (32, 64)
    """
    return 1 << (value.bit_length() - 1)


def default_programs(o: CampaignOptions, sms: int = 132) -> tuple[int, int, int]:
    """Producer, consumer (comm) and receiver programs per rank when not given: interpreted 2, 1
    and 1; on a GPU, three quarters of the SMs one rank gets (``sms``, or ``sms / world_size``
    with virtual ranks), two thirds of them producers and the rest consumers (all-scatter: half
    comm programs, half receivers): every program resident, with room left for the validation
    kernel and a racing reset on another stream."""
    if o.interpret:
        return 2, 1, 1
    usable = sms * 3 // 4
    per_rank = usable // o.world_size if (o.virtual_ranks or o.world_size == 1) else usable
    gemm = max(1, per_rank * 2 // 3)
    rest = max(1, per_rank - gemm)
    if o.kernel != "all-scatter":
        return gemm, rest, 1
    return gemm, max(1, rest // 2), max(1, rest - rest // 2)


def _replace(o: CampaignOptions, **changes) -> CampaignOptions:
    return CampaignOptions(**{**asdict(o), **changes})


def delay_config(o: CampaignOptions) -> DelayConfig:
    """The delays a campaign draws (host and kernels alike)."""
    table = tuple(e if isinstance(e, GuidedDelay) else GuidedDelay(**e) for e in o.delay_table)
    return DelayConfig(o.delays, o.seed, o.delay_pct, o.delay_max_ns, parse_sites(o.delay_sites), table)


def kernel_config(o: CampaignOptions) -> KernelConfig:
    """The kernel configuration of a campaign."""
    virtual = o.virtual_ranks or (o.interpret and not o.real_ranks) or o.world_size == 1
    return KernelConfig(
        kernel=o.kernel, world_size=o.world_size, m=o.m, n=o.n, k=o.k, block_m=o.block_m,
        block_n=o.block_n, block_k=o.block_k, gemm_sms=o.gemm_sms, comm_sms=o.comm_sms,
        recv_sms=o.recv_sms,
        dtype=o.dtype, distribution=o.distribution, production=o.production,
        lock_dtype=o.lock_dtype, num_warps=o.num_warps, num_stages=o.num_stages,
        delays=o.delays != "none", virtual=virtual, table=o.table or not virtual,
        interpret=o.interpret,
        # real ranks in the interpreter: each kernel holds one rank's programs, so the last rank's
        # lateness is the host's (late_seconds), not a grid order (on GPUs check_config refuses any order)
        order="producers-first" if o.interpret and not virtual else o.order, launches=o.launches,
    )


def late_seconds(o: CampaignOptions, rank: int) -> float:
    """How long ``rank`` waits after an iteration's barrier before its launch: the last rank
    :data:`LATE_RANK_SECONDS` under ``--order last-rank-late`` on real ranks in the interpreter."""
    late = o.interpret and o.order == "last-rank-late" and rank == o.world_size - 1 and o.world_size > 1
    return LATE_RANK_SECONDS if late else 0.0


# ----- results ---------------------------------------------------------------------------------

@dataclass
class CampaignResult:
    """What a campaign found. ``clean`` when no tile of any iteration was bad."""

    protocol: str
    kernel: str
    world_size: int
    mode: str  # "interpreter" | "virtual-ranks" | "processes"
    device: str
    iterations: int = 0
    bad_iterations: int = 0
    counts: dict = field(default_factory=lambda: {name: 0 for name in CLASS_NAMES})
    first_failure: dict | None = None
    time_to_first_failure: float | None = None
    seconds: float = 0.0
    failures: list = field(default_factory=list)  # BadTile dicts, at most max_records per class
    options: dict = field(default_factory=dict)
    stopped: str | None = None  # why the run ended early ("watchdog: ..."), if it did
    compile_seconds: float = 0.0  # the first launch (compiling the kernels); not in ``seconds``
    graphs: bool = False  # whether blocks ran as CUDA graph replays
    graph_error: str | None = None  # why a graph capture failed (the run went on eagerly)

    @property
    def clean(self) -> bool:
        return self.bad_iterations == 0 and self.stopped is None

    @property
    def iterations_per_second(self) -> float:
        return self.iterations / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict:
        out = asdict(self)
        out["clean"] = self.clean
        out["iterations_per_second"] = round(self.iterations_per_second, 3)
        return out


class Recorder:
    """Accumulates bad tiles into a :class:`CampaignResult` and appends JSON lines as it goes."""

    def __init__(self, result: CampaignResult, options: CampaignOptions, num_warps: int) -> None:
        self.result, self.options, self.num_warps = result, options, num_warps
        self.delays = delay_config(options)
        self.kept = Counter()  # failure records kept, per class
        self.file = None
        if options.output:
            os.makedirs(os.path.dirname(os.path.abspath(options.output)), exist_ok=True)
            self.file = open(options.output, "a", encoding="utf-8")
            self._write({"type": "start", "options": options.to_dict(), "time": time.time()})

    def _write(self, record: dict) -> None:
        if self.file is not None:
            self.file.write(json.dumps(record, sort_keys=True) + "\n")
            self.file.flush()

    def add(self, tiles, bad_iterations, when: Callable[[Any], float], done: int, elapsed: float) -> None:
        """Fold one drained block in; ``when(tile)`` is the seconds from the start of the timed
        run to the tile's validation (the device clock on a GPU)."""
        r = self.result
        r.iterations = done
        r.seconds = elapsed
        r.bad_iterations += len(bad_iterations)
        for tile in tiles:
            r.counts[tile.kind] = r.counts.get(tile.kind, 0) + 1
            record = tile.to_dict()
            if r.first_failure is None:
                r.first_failure = self.first_failure(tile)
                r.time_to_first_failure = round(when(tile), 6)
            # A cap per class, so a rare class (one hang) is not crowded out by a common one.
            if self.kept[tile.kind] < self.options.max_records:
                self.kept[tile.kind] += 1
                r.failures.append(record)
                self._write({"type": "bad-tile", **record})
        self._write({"type": "progress", "iterations": done, "bad_iterations": r.bad_iterations,
                     "counts": dict(r.counts),
                     "seconds": round(elapsed, 3)})

    def first_failure(self, tile) -> dict:
        o = self.options
        out = {
            "iteration": tile.iteration, "rank": tile.rank, "tile": tile.tile, "kind": tile.kind,
            "missing_ranks": list(tile.missing_ranks), "stale_ranks": list(tile.stale_ranks), "hang": tile.hang,
            "consumer": tile.consumer, "consumer_tile": tile.consumer_tile,
            "expected": tile.first_bad["expected"] if tile.first_bad else None,
            "got": tile.first_bad["got"] if tile.first_bad else None,
            "element": [tile.first_bad["row"], tile.first_bad["col"]] if tile.first_bad else None,
            "seed": o.seed,
            "replay": f"--seed {o.seed} --iterations {tile.iteration + 1}",
            "suspect_ranks": suspect_producers(tile, o),
        }
        if self.delays.enabled:
            out["delays"] = delays_at(self.delays, rank=tile.consumer, tile=tile.consumer_tile,
                                      iteration=tile.iteration, num_warps=self.num_warps, sites=CONSUMER_SITES)
            out["producer_delays"] = {
                str(rank): delays_at(self.delays, rank=rank, tile=tile.consumer_tile, iteration=tile.iteration,
                                     num_warps=self.num_warps, sites=PRODUCER_SITES)
                for rank in out["suspect_ranks"]}
        return out

    @property
    def bad_iterations(self) -> int:
        return self.result.bad_iterations

    def close(self) -> None:
        self._write({"type": "result", **self.result.to_dict()})
        if self.file is not None:
            self.file.close()


def suspect_producers(tile, options: CampaignOptions) -> list[int]:
    """The ranks whose producers (senders) a bad tile points at.

    * all-reduce, gemm-reduce-scatter: the ranks whose partial was missing or stale (every rank
      when nothing tells them apart);
    * all-gather-gemm: the rank whose shard the tile's rows come from (C's row tile ``tm`` is row
      tile ``tm mod T`` of shard ``tm // T``, ``T`` tiles per shard): its sender stored those
      rows, wherever the GEMM that read them ran; for a hang, every rank (the GEMM waited for
      every shard's signal, and the tile does not say which one never came);
    * all-scatter: the consumer's own rank (its comm program reads only its own producers' tiles).

    >>> from syncverify.stress.classify import BadTile
    >>> o = CampaignOptions(kernel="all-gather-gemm", world_size=2, m=64, n=32, block_m=16, block_n=16)
    >>> suspect_producers(BadTile(iteration=0, rank=0, tile=5, kind="unwritten"), o)
    [1]
    """
    o = options
    if o.kernel == "all-gather-gemm":
        if tile.kind == "hang":
            return list(range(o.world_size))
        tiles_per_shard = (o.m // o.world_size) // o.block_m
        return [(tile.tile // (o.n // o.block_n)) // tiles_per_shard]
    if o.kernel not in ("all-reduce", "gemm-reduce-scatter"):
        return [tile.consumer]
    named = list(tile.missing_ranks) or list(tile.stale_ranks)
    return named or list(range(o.world_size))


# ----- the campaign ----------------------------------------------------------------------------

def refuse_unsynchronized(protocol) -> None:
    """Refuse ``--protocol none`` in one line: it is bench's cost baseline, not a protocol."""
    if protocol == NO_SYNC:  # every tile would be a race, nothing to classify
        raise StressConfigError(f"--protocol {NO_SYNC} has no synchronization (signal and wait compiled out, "
                                "UNSAFE); it is the cost baseline of 'syncverify bench', not a protocol to stress")


def load(protocol):
    """A protocol object from a name, a path, or a protocol object."""
    if hasattr(protocol, "signal"):
        return protocol
    refuse_unsynchronized(protocol)

    return load_protocol(protocol)


def run_campaign(*, progress: Callable[[int, int | None, float], None] | None = None,
                 **options: Any) -> CampaignResult:
    """Run a stress campaign; see :class:`CampaignOptions` for the options.

    Parameters
    ----------
    progress : callable, optional
        Called as ``progress(iterations_done, iterations_total_or_None, seconds)`` at every
        synchronization (the CLI's progress bar).
    **options
        :class:`CampaignOptions` fields: ``protocol`` (a name, a path or a ``Protocol``),
        ``kernel``, ``world_size``, ``virtual_ranks``, ``interpret``, ``iterations`` or
        ``seconds``, ``delays``, ``seed``, sizes, ``reset``, ``output``, ...

    Returns
    -------
    CampaignResult

    Raises
    ------
    SyncVerifyError
        Bad input (unknown protocol, sizes that do not divide, a step the kernels cannot express,
        more ranks than GPUs, no GPU without ``interpret``), before anything runs.
    """
    o, config, protocol_object = _checked(options)
    if o.interpret and config.virtual:
        return _run_local(o, config, protocol_object, "cpu", progress)
    if o.interpret:
        return run_processes(o, protocol_object, progress=progress)
    o, config = _on_this_gpu(o, config, protocol_object, options)
    if config.virtual:
        return _run_local(o, config, protocol_object, "cuda:0", progress)

    return run_processes(o, protocol_object, progress=progress)


def _checked(options: dict) -> tuple[CampaignOptions, KernelConfig, Any]:
    """The options, kernel configuration and protocol of a campaign, after every check that needs
    no GPU (``options["protocol"]`` becomes the protocol's path or name)."""
    protocol_object = load(options.pop("protocol", CampaignOptions.protocol))
    options["protocol"] = getattr(protocol_object, "path", None) or protocol_object.name
    if options["protocol"].startswith("<"):  # built in memory (a string, a dict, a positive control)
        options["protocol"] = protocol_object.name
    o = campaign_options(**options)
    config = kernel_config(o)
    build(protocol_object, config, push=load(o.push))  # every check that needs no GPU, before asking for one
    return o, config, protocol_object


def _on_this_gpu(o: CampaignOptions, config: KernelConfig, protocol, options: dict) -> tuple[CampaignOptions, KernelConfig]:
    """The options with this GPU's default program counts, checked against its SMs and GPU count."""
    # torch/triton: syncverify.kernels._deps imports them; only the GPU path needs it
    from syncverify.kernels._deps import require_cuda, torch

    require_cuda("syncverify stress without --interpret")
    gpus = torch.cuda.device_count()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if any(options.get(name) is None for name in ("gemm_sms", "comm_sms", "recv_sms")):
        o = campaign_options(sms=sms, **options)  # default program counts for this GPU
        config = kernel_config(o)
    build(protocol, config, sms=sms, gpus=gpus, push=load(o.push))
    return o, config


def run_campaigns_on_ranks(campaigns: list[dict], *, on_result=None, runner=None) -> list[CampaignResult]:
    """Several real-rank campaigns (each a :func:`run_campaign` options dict, ``virtual_ranks``
    False), one launch of processes per world size (process start and NCCL paid once per size);
    with ``interpret`` in the options, on the CPU (one process per rank, gloo).

    In the interpreter each campaign gets a launch of its own: a protocol that hangs there polls
    to its cap for minutes and is stopped by the watchdog, which must not take the campaigns after
    it along.

    Every campaign is checked (protocol, sizes, GPU count) before any process starts; a bad one
    raises :class:`~syncverify.errors.SyncVerifyError`. ``on_result(index, result)`` is called as
    each campaign reports (``index`` into ``campaigns``). ``runner`` replaces
    :func:`run_processes_batch` (tests: the launch without GPUs). Returns the results in order.
    """
    prepared = []
    for options in campaigns:
        options = dict(options, virtual_ranks=False, real_ranks=True)
        o, config, protocol = _checked(options)
        if runner is None and not o.interpret:
            o, config = _on_this_gpu(o, config, protocol, options)
        prepared.append((o, protocol))
    results: list[CampaignResult | None] = [None] * len(prepared)
    def launch_of(i: int) -> tuple:
        o = prepared[i][0]
        return o.world_size, o.interpret, i if o.interpret else None

    for launch in dict.fromkeys(launch_of(i) for i in range(len(prepared))):
        indices = [i for i in range(len(prepared)) if launch_of(i) == launch]

        def reported(position: int, payload, indices=indices) -> None:
            if on_result is not None:
                on_result(indices[position], payload)

        batch = (runner or run_processes_batch)([prepared[i] for i in indices], on_result=reported)
        for i, result in zip(indices, batch):
            results[i] = result
    return results  # type: ignore[return-value]  (every index filled: each size's batch covers its own)


#: ``CampaignResult.device`` of real ranks in the interpreter.
INTERPRETER_DEVICE = "cpu (interpreter, one process per rank)"
#: How ``CampaignResult.stopped`` begins for a campaign of a launch that ended before it began:
#: no data about it (not a failure of its protocol).
NOT_STARTED = "not started: "


def _reset_policy(o: CampaignOptions, protocol) -> str:
    return rules.reset_policy(protocol.reset, o.reset)


def _run_local(o: CampaignOptions, config: KernelConfig, protocol, device: str,
               progress) -> CampaignResult:
    # torch/triton: syncverify.kernels.heap imports them; only the GPU path needs it
    from syncverify.kernels.heap import VirtualHeap
    from syncverify.stress.runner import Runner

    push = load(o.push)
    built = build(protocol, config, push=push)
    heap = VirtualHeap(config.world_size, device, table=config.table)
    runner = Runner(built, heap, device=device, delays=delay_config(o),
                    reset=_reset_policy(o, protocol), poison=o.poison, max_polls=o.max_polls,
                    seed=o.seed, chunk=o.chunk, push_reset=push.reset,
                    graphs=o.graphs if o.graphs is not None else not o.interpret)
    mode = "interpreter" if o.interpret else "virtual-ranks"
    result = CampaignResult(protocol.name, o.kernel, o.world_size, mode,
                            device if o.interpret else _device_name(), options=o.to_dict())
    drive(runner, o, Recorder(result, o, config.num_warps), progress)
    result.graphs = runner.graphs and runner.graph is not None
    result.graph_error = runner.graph_error
    return result


def _device_name() -> str:
    # torch/triton: syncverify.kernels._deps imports them; only the GPU path needs it
    from syncverify.kernels._deps import torch

    return torch.cuda.get_device_name(0)


def drive(runner, o: CampaignOptions, recorder: Recorder | None, progress, *,
          should_stop: Callable[[bool], bool] | None = None) -> None:
    """The iteration loop: compile (not timed; with graphs, the block graphs are captured then
    too), then blocks of ``chunk`` iterations; stop on count or time. Without graphs iteration 0
    runs alone first and is not timed either (its launches load the kernels).

    A pipelined runner (:attr:`Runner.pipelined`: graphs) keeps one block running while the
    host reads the one before it, so the stop decision comes one block late and that block is
    drained too. Time to first failure is the device clock of the failing tile's validation
    minus iteration 0's (on a GPU; the host clock when the iteration was queued in the
    interpreter). ``should_stop(local_decision)`` lets a multi-process run agree on stopping
    (rank 0 decides). ``recorder`` is None on ranks other than 0.
    """
    start = time.perf_counter()
    queued: dict[int, float] = {}
    interpret = runner.config.interpret

    def when(tile) -> float:
        if tile.device_ns and runner.t0_ns:
            return max(tile.device_ns - runner.t0_ns, 0) / 1e9
        return queued.get(tile.iteration, time.perf_counter() - start)

    def timed_from_here() -> None:
        nonlocal start
        if recorder is not None:
            recorder.result.compile_seconds = round(time.perf_counter() - start, 3)
        start = time.perf_counter()
        queued.clear()

    alone = not interpret  # iteration 0 alone, not timed (eager runners)
    if not interpret:
        runner.compile(capture=o.iterations is None or o.iterations >= runner.chunk)
        if runner.graphs:
            alone = False
            timed_from_here()
    i = 0
    try:
        while True:
            if i == 0 and alone:
                n = 1
            elif o.iterations is None:
                n = runner.chunk - i % runner.chunk
            else:
                n = min(runner.chunk - i % runner.chunk, o.iterations - i)
            queued[i] = time.perf_counter() - start
            if n == runner.chunk and i % runner.chunk == 0:
                runner.run_block(i)
            else:
                for j in range(i, i + n):
                    queued[j] = time.perf_counter() - start
                    runner.iteration(j)
            i += n
            last = o.iterations is not None and i >= o.iterations
            tiles, bad = runner.drain(keep=0 if last else 1)
            if i == 1 and alone:  # it compiled the kernels: not timed
                timed_from_here()
                queued[0] = 0.0
            stop = _fold(recorder, progress, o, tiles, bad, when, i - len(runner.pending), start, queued)
            stop = last or stop
            if should_stop is not None:
                stop = should_stop(stop)
            if stop:
                if runner.pending:  # the block still running when the run decided to stop
                    tiles, bad = runner.drain()
                    _fold(recorder, progress, o, tiles, bad, when, i, start, queued)
                break
    except BaseException as error:  # the result line on disk (close, below) says why the run ended early
        if recorder is not None and recorder.result.stopped is None:
            recorder.result.stopped = f"{type(error).__name__}: {(str(error).splitlines() or [''])[0]}"
        raise
    finally:
        if recorder is not None:
            recorder.close()


def _fold(recorder: Recorder | None, progress, o: CampaignOptions, tiles, bad, when, drained: int, start: float,
          queued: dict[int, float]) -> bool:
    """Record one drain (``drained`` iterations done so far) and report progress; True when the
    run's time is up or (``stop_on_failure``) it has failed."""
    elapsed = time.perf_counter() - start
    if recorder is not None:
        recorder.add(tiles, bad, when, drained, elapsed)
    for done in [k for k in queued if k < drained]:
        del queued[done]
    if progress is not None:
        progress(drained, o.iterations, elapsed, recorder.bad_iterations if recorder is not None else 0)
    return ((o.seconds is not None and elapsed >= o.seconds)
            or (o.stop_on_failure and recorder is not None and recorder.bad_iterations > 0))


# ----- real ranks: one process per GPU (syncverify.kernels.processes) ------------------------------

def campaign_worker(rank: int, world_size: int, port: int | None, q, campaigns: list[tuple[dict, object]],
                    heap_path: str | None = None) -> None:
    """One rank of one or more multi-process campaigns, run one after another in this process
    (a :func:`~syncverify.kernels.processes.run_ranks` target): the process group and the process
    start are paid once. ``heap_path``: the interpreter's shared heap file (None on GPUs)."""
    try:
        interpret = CampaignOptions(**campaigns[0][0]).interpret  # one launch: all or none (run_processes_batch)
        # GPUs: no heap block (SymmetricHeap allocates each buffer in symmetric memory itself)
        torch, dist, device, shared = join_ranks(rank, world_size, port, interpret=interpret, heap_path=heap_path,
                                                 heap_bytes=INTERPRET_HEAP_BYTES if interpret else 0)
        # torch/triton: syncverify.kernels.heap imports them; only the stress path needs it
        from syncverify.kernels.heap import SharedFileHeap, SymmetricHeap
        from syncverify.stress.runner import Runner

        def should_stop(local: bool) -> bool:
            flag = torch.tensor([int(local)], device=device)
            dist.broadcast(flag, 0)
            return bool(flag.item())

        for index, (options, protocol) in enumerate(campaigns):
            o = CampaignOptions(**options)
            config = kernel_config(o)
            push = load(o.push)
            built = build(protocol, config, push=push)
            heap = SymmetricHeap(world_size, rank, device) if shared is None else SharedFileHeap(world_size, rank, shared)
            runner = Runner(built, heap, device=device, rank=rank, delays=delay_config(o),
                            reset=_reset_policy(o, protocol), poison=o.poison, max_polls=o.max_polls,
                            seed=o.seed, chunk=o.chunk, process_group=dist.group.WORLD,
                            push_reset=push.reset, late_seconds=late_seconds(o, rank))
            result = CampaignResult(protocol.name, o.kernel, world_size, "processes",
                                    INTERPRETER_DEVICE if interpret else torch.cuda.get_device_name(device),
                                    options=o.to_dict())
            recorder = Recorder(result, o, config.num_warps) if rank == 0 else None

            def progress(done, total, seconds, bad=0, index=index):
                if q is not None:
                    q.put((rank, "progress", (index, done, total, seconds, bad)))

            drive(runner, o, recorder, progress, should_stop=should_stop)
            if rank == 0:
                payload = result.to_dict()
                if q is not None:
                    q.put((rank, "result", (index, payload)))
                else:
                    print(json.dumps(payload, sort_keys=True))
            dist.barrier()
            del runner, heap, built
        dist.destroy_process_group()
        if q is not None:
            q.put((rank, "done", None))
    except BaseException:  # report, never hang the parent
        if q is not None:
            q.put((rank, "error", traceback.format_exc()))
        raise


def run_processes_batch(campaigns: list, *, progress=None, on_result=None, worker: Callable = None) -> list:
    """Several campaigns (``(CampaignOptions, protocol)`` pairs, one world size, all interpreted
    or none) in one launch of ``world_size`` processes; a ``CampaignResult`` for each, in order.

    A campaign that never reported its result (the run was stopped first: a rank died, the
    watchdog) is stopped, never clean, and keeps what rank 0 last reported of it: the iterations
    done and the bad ones among them (its ``output`` file, written as it went, holds the bad tiles).
    The campaigns after it never began: their ``stopped`` starts with :data:`NOT_STARTED`.
    ``worker`` replaces :func:`campaign_worker` in every process (tests: a rank that dies)."""
    world_sizes = {o.world_size for o, _p in campaigns}
    if len(world_sizes) != 1:
        raise ValueError(f"one launch runs one world size, got {sorted(world_sizes)}")
    interpreted = {o.interpret for o, _p in campaigns}
    if len(interpreted) != 1:
        raise ValueError("one launch runs on GPUs or in the interpreter, not both")
    payloads: dict[int, dict] = {}

    def on_message(rank, kind, payload):
        if kind == "progress" and rank == 0 and progress is not None:
            progress(*payload)
        if kind == "result" and rank == 0:
            payloads[payload[0]] = payload[1]
            if on_result is not None:
                on_result(*payload)

    watchdog = max(o.watchdog_seconds or 180.0 for o, _p in campaigns)
    outcome = run_ranks(worker or campaign_worker, ([(o.to_dict(), p) for o, p in campaigns],), world_size=world_sizes.pop(),
                        watchdog_seconds=watchdog, on_message=on_message,
                        heap_bytes=INTERPRET_HEAP_BYTES if interpreted.pop() else None)
    last: dict[int, tuple] = {}  # campaign index -> (done, total, seconds, bad) last reported by rank 0
    for rank, kind, payload in outcome["messages"]:  # messages seen before on_message existed
        if kind == "result" and rank == 0:
            payloads.setdefault(payload[0], payload[1])
        if kind == "progress" and rank == 0:
            last[payload[0]] = payload[1:]
    fields = set(CampaignResult.__dataclass_fields__)
    results = []
    for index, (o, protocol) in enumerate(campaigns):
        payload = payloads.get(index)
        if payload is None:
            result = CampaignResult(protocol.name, o.kernel, o.world_size, "processes",
                                    INTERPRETER_DEVICE if o.interpret else "cuda", options=o.to_dict())
            result.stopped = outcome["stopped"] or "the launch ended before this campaign reported"
            if index > min(set(range(len(campaigns))) - set(payloads)):  # campaigns run in order
                result.stopped = NOT_STARTED + result.stopped
            if index in last:  # partial: what rank 0 had reported when the launch ended
                done, _total, seconds, bad = last[index]
                result.iterations, result.seconds, result.bad_iterations = done, seconds, bad
        else:
            result = CampaignResult(**{k: v for k, v in payload.items() if k in fields})
            result.stopped = outcome["stopped"] if index == max(payloads) and outcome["stopped"] else result.stopped
        results.append(result)
    return results


def run_processes(o, protocol, *, progress=None):
    """A campaign over ``o.world_size`` GPUs, one process each; returns a ``CampaignResult``."""
    return run_processes_batch([(o, protocol)],
                               progress=None if progress is None else lambda _i, *p: progress(*p))[0]
