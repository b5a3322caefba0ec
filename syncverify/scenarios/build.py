"""The kernel scenarios: each defined once, as roles and the order of their steps.

A scenario is a fused kernel with the protocol plugged in. :data:`ROLES` defines each one as the
roles its CTAs play (producer, consumer, comm, receiver), and for each role the ordered steps it
runs for one tile: tile stores and loads (which buffer, whose copy) and protocol stages (signal or
wait, which lock stage, which protocol). :func:`build` interprets those steps into the model's
:class:`~syncverify.program.Program`; the Triton kernels (``syncverify.kernels``) run the same
roles in the same order, and ``tests/test_drift.py`` compares what each role accesses on both
sides, so a stage cannot exist on one side only.

``all-reduce`` (seed 000, one-shot all-reduce GEMM): every rank's *producer* stores its partial of
the tile into its ``partial`` buffer and signals; the *consumer* on the tile's owner waits, reads
every rank's partial and stores the sum into every rank's ``out``. ``production = owner-only``
(seed 000's distribution bug): only the owner produces.

``all-scatter`` (seed 001, GEMM + all-scatter with workgroup specialization): each rank's
*producer* (GEMM CTA) stores the tile of its column block into ``local`` and signals (stage
``pub``: the protocol under test); the rank's *comm* CTA waits, reads the tile, pushes it into
every rank's ``out`` and signals (stage ``push``); each rank's *receiver* waits on its ``push``
lock and reads every rank's pushed block of the tile (and keeps it in ``received``). The push
stage runs the *push protocol* (``ScenarioOptions.push``, by default the built-in
:data:`DEFAULT_PUSH`): a cross-rank handshake is a protocol like any other, checked with it.

Each protocol's locks are reset between epochs by that protocol's own policy
(:func:`syncverify.protocols.rules.reset_policy`); ``reset`` overrides the policy of the protocol under test.

Reductions (``symmetry=False`` turns them off, to measure what they buy):

* *tiles*: tiles use disjoint locks and data and one CTA each, so every tile is a renaming of
  tile 0 (``owner(t)`` maps to rank 0): only tile 0 is built;
* *slicing*: a lock copy that no waiter of the built program polls is never read; the signal
  writes to it are left out;
* *ranks*: ranks other than the one whose reads are checked are the same code up to their rank
  id; they form one symmetry group (``Program.symmetry``). In all-scatter only rank 0's receiver
  is built (every receiver is a renaming of it), in all-gather-gemm only rank 0's GEMM CTA, as
  long as nothing kept reads what the others write and the host orders every launch after the
  previous one (``_Program._other_ranks_removable`` gives the argument).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from syncverify.delivery import DeliveryFence, Put, Quiet, lower_delivery
from syncverify.streams import StreamOp, stream_threads
from syncverify.errors import ScenarioError, UnsupportedConstruct
from syncverify.explore.instructions import BRANCHES
from syncverify.explore.residency import Residency
from syncverify.program import (HOST_RESET, Atomic, Barrier, Branch, Fence, Label, Load, Phase, Program, RegOp,
                                Store, Thread, ThreadOrigin, byte_location, mixed_size_locations, pdl_dependent,
                                pdl_primary, split_mixed_sizes)
from syncverify.protocols import rules
from syncverify.protocols.expressions import evaluate_at, step_place
from syncverify.protocols import lowering
from syncverify.protocols.lowering import DOT_LABEL, executes, lower_step, lower_tile_load, lower_tile_store
from syncverify.protocols.loader import STREAM_UNTIL
from syncverify.protocols.registry import load_protocol
from syncverify.validation import one_of

SCENARIOS = ("all-reduce", "all-scatter", "all-gather-gemm", "gemm-reduce-scatter")
#: Scenarios the Triton kernels run (``syncverify stress``, the drift test): all of them.
KERNEL_SCENARIOS = ("all-reduce", "all-scatter", "all-gather-gemm", "gemm-reduce-scatter")
PRODUCTIONS = ("every-rank", "owner-only")
DISTRIBUTIONS = rules.DISTRIBUTIONS
RESETS = rules.RESET_POLICIES
MAX_WORLD_SIZE = rules.MODEL_MAX_WORLD
#: The protocol of all-scatter's cross-rank push stage unless ``ScenarioOptions.push`` names another:
#: a counter whose target grows with the epoch, so it needs no reset that could race the kernel.
DEFAULT_PUSH = "epoch-flag"


# ----- the scenarios as data -----------------------------------------------------------------

@dataclass(frozen=True)
class TileAccess:
    """A role's store or load of tile data.

    ``buffer`` names the kernel's buffer; ``copies`` says whose copy: ``self`` (the role's rank),
    ``each`` (every rank's, in rank order); ``block`` (all-scatter's ``out``) says whose column
    block: ``self`` or ``each``.
    """

    kind: str  # "store" | "load" | "copy" (per copy and block: load ``buffer``, store it into ``into``)
    buffer: str
    copies: str = "self"  # "self" | "each" | "owner" (the copy of the rank that consumes the tile)
    block: str = ""
    stage: str = ""  # the lock stage that orders this buffer's stores before its loads
    into: str = ""  # a copy's destination buffer (the role's own copy, same block)


@dataclass(frozen=True)
class Stage:
    """A role's run of one protocol section's steps on the locks of ``stage``: the producer's
    ``before_store`` (before its tile store) and ``signal``, the consumer's ``wait`` and
    ``after_load`` (after its tile loads: the back-signal). An empty section runs nothing."""

    kind: str  # a section: "before_store" | "signal" | "wait" | "after_load"
    stage: str  # lock stage: "" (all-reduce) | "pub" | "push"
    protocol: str = "protocol"  # "protocol" (the one under test) | "push"


@dataclass(frozen=True)
class Dot:
    """A role's GEMM on its tile (the K-loop's ``tl.dot`` calls): what it orders is one
    ``bar.sync 0`` of the whole CTA (:func:`syncverify.protocols.lowering.lower_dot`, read in the
    kernels' PTX); its reads of A and B are inputs the model has no events for. ``stage``: the
    lock stage of the steps it goes with (a stage split keeps it with them)."""

    stage: str = ""


@dataclass(frozen=True)
class Role:
    """What the CTAs of one role do for one tile, in order, and on which ranks they run."""

    name: str
    runs_on: str  # "producers" (every rank, or the owner with owner-only) | "owner" | "every rank"
    steps: tuple[TileAccess | Stage | Dot, ...]


ROLES: dict[str, tuple[Role, ...]] = {
    "all-reduce": (
        Role("producer", "producers", (Dot(), Stage("before_store", ""), TileAccess("store", "partial"),
                                       Stage("signal", ""))),
        Role("consumer", "owner", (Stage("wait", ""), TileAccess("load", "partial", copies="each"),
                                   Stage("after_load", ""), TileAccess("store", "out", copies="each"))),
    ),
    "all-scatter": (
        Role("producer", "every rank", (Dot("pub"), Stage("before_store", "pub"), TileAccess("store", "local", stage="pub"),
                                        Stage("signal", "pub"))),
        Role("comm", "every rank", (Stage("wait", "pub"), TileAccess("load", "local", stage="pub"),
                                    Stage("after_load", "pub"), Stage("before_store", "push", "push"),
                                    TileAccess("store", "out", copies="each", block="self", stage="push"),
                                    Stage("signal", "push", "push"))),
        Role("receiver", "every rank", (Stage("wait", "push", "push"),
                                        TileAccess("copy", "out", block="each", stage="push", into="received"),
                                        Stage("after_load", "push", "push"))),
    ),
    # AllGather + GEMM: every rank's sender pushes its shard of A into every rank's `gathered` (its
    # own block) and signals; every rank's GEMM CTA waits for each remote shard before its K-loop,
    # reads every block and stores its C tile.
    "all-gather-gemm": (
        Role("sender", "every rank", (Stage("before_store", ""),
                                      TileAccess("store", "gathered", copies="each", block="self"),
                                      Stage("signal", ""))),
        Role("gemm", "every rank", (Stage("wait", ""), TileAccess("load", "gathered", block="each"), Dot(),
                                    Stage("after_load", ""), TileAccess("store", "out"))),
    ),
    # GEMM + ReduceScatter: every rank's producer pushes its partial of the tile into the owner's
    # `inbox` (its own block) and signals; the owner's consumer waits until all have arrived, reads
    # every block and stores the reduced tile into its `out`.
    "gemm-reduce-scatter": (
        Role("producer", "producers", (Dot(), Stage("before_store", ""),
                                       TileAccess("store", "inbox", copies="owner", block="self"),
                                       Stage("signal", ""))),
        Role("consumer", "owner", (Stage("wait", ""), TileAccess("load", "inbox", block="each"),
                                   Stage("after_load", ""), TileAccess("store", "out"))),
    ),
}


def published_buffers(scenario: str) -> frozenset[str]:
    """The buffers a role stores and then publishes with a ``signal`` of its own: the ones that
    rotate with a protocol's ``slots`` (the staging buffers; a scenario's output does not).

    >>> sorted(published_buffers("all-reduce"))
    ['partial']
    """
    out = set()
    for role in ROLES[scenario]:
        for n, step in enumerate(role.steps):
            if isinstance(step, TileAccess) and step.kind in ("store", "copy") and any(
                    isinstance(s, Stage) and s.kind == "signal" for s in role.steps[n + 1:]):
                out.add(step.into or step.buffer)
    return frozenset(out)


def stages(scenario: str) -> dict[str, str]:
    """Lock stage -> which protocol runs it (``protocol`` or ``push``), in first-use order."""
    out: dict[str, str] = {}
    for role in ROLES[scenario]:
        for step in role.steps:
            if isinstance(step, Stage):
                out.setdefault(step.stage, step.protocol)
    return out


def push_option(scenario: str, push: str | None) -> str:
    """The push protocol a command runs for ``--push`` (None: not given): :data:`DEFAULT_PUSH` when
    not given; given, the scenario must have a push stage and the protocol must load, else one
    line (a flag that changes nothing is refused, never ignored)."""
    if push is None:
        return DEFAULT_PUSH

    with_push = [name for name in SCENARIOS if "push" in stages(name).values()]
    if scenario in SCENARIOS and scenario not in with_push:
        raise ScenarioError(f"--push {push}: the {scenario} scenario has no push stage (--push applies to "
                            f"{', '.join(with_push)})")
    load_protocol(push)
    return push


# ----- options --------------------------------------------------------------------------------

@dataclass(frozen=True)
class ScenarioOptions:
    """Sizes and policies of a scenario. ``reset=None`` derives it from the protocol's ``reset``."""

    scenario: str = "all-reduce"
    world_size: int = 2
    tiles: int = 1
    epochs: int = 1
    threads_per_cta: int = 2
    production: str = "every-rank"
    distribution: str = "striding"
    reset: str | None = None
    symmetry: bool = True
    push: str = DEFAULT_PUSH  # all-scatter's push protocol: a built-in name or a .toml path
    launches: str = "host-barrier"  # rules.LAUNCH_ORDERS: how epochs are ordered across ranks
    resident: int | None = None  # CTAs resident per GPU at once (None: all; explore.residency)
    resident_order: str = "any"  # explore.residency.ORDERS: the order CTAs become resident in
    resident_sms: int = 0  # per-SM placement: the resident CTAs spread over this many SMs (0: one pool)
    resident_occupancy: tuple[tuple[str, int], ...] = ()  # per SM: CTAs of each kernel named alone per SM
    #: Programs per role and rank, as the kernels are launched with (``--gemm-sms``/``--comm-sms``/
    #: ``--recv-sms``, one number for every role): a CTA handles several tiles in its loop when there
    #: are fewer than tiles (:func:`cta_tiles`). None: one CTA per tile.
    ctas: int | None = None
    #: all-gather-gemm: column tiles of C per tile, and the grouped order (``group_m`` tile rows at
    #: a time) in which its GEMM programs take them when each is a unit of work of its own
    #: (:func:`syncverify.protocols.rules.gemm_units`: no ``after_load`` steps), laid out over
    #: ``ctas`` programs (:func:`cta_visits`). 1: whole tiles.
    columns: int = 1
    group_m: int = 1

    def validated(self, protocol) -> "ScenarioOptions":
        """Check every option (one-line :class:`ScenarioError`) and fill in the reset policy."""
        one_of("scenario", self.scenario, SCENARIOS, error=ScenarioError)
        one_of("production", self.production, PRODUCTIONS, error=ScenarioError)
        one_of("distribution", self.distribution, DISTRIBUTIONS, error=ScenarioError)
        if not 1 <= self.world_size <= MAX_WORLD_SIZE:  # rules.MODEL_MAX_WORLD says why
            raise ScenarioError(f"--world-size={self.world_size} must be in 1..{MAX_WORLD_SIZE}")
        if self.tiles < 1:
            raise ScenarioError(f"--tiles={self.tiles} must be at least 1")
        if self.ctas is not None and self.ctas < 1:
            raise ScenarioError(f"--ctas={self.ctas} must be at least 1 (programs per role and rank)")
        for name, value in (("columns", self.columns), ("group-m", self.group_m)):
            if value < 1:
                raise ScenarioError(f"--{name}={value} must be at least 1")
            if value > 1 and self.scenario != "all-gather-gemm":
                raise ScenarioError(f"--{name}={value}: column tiles as units of work are all-gather-gemm's GEMM "
                                    f"programs' (the {self.scenario} kernel's roles take whole tiles)")
        if self.columns > 1 and self.ctas is None:
            raise ScenarioError(f"--columns={self.columns} spreads column tiles over the GEMM programs: give "
                                f"--ctas, the programs per role and rank")
        if self.epochs < 1:
            raise ScenarioError(f"--epochs={self.epochs} must be at least 1 (one call of the kernel)")
        if not 1 <= self.threads_per_cta <= 8:
            raise ScenarioError(f"--threads-per-cta={self.threads_per_cta} must be in 1..8 (2 shows barrier bugs)")
        if self.production == "owner-only" and self.scenario != "all-reduce":
            raise ScenarioError("production='owner-only' applies to the all-reduce scenario only")
        if self.reset is not None:
            one_of("--reset", self.reset, RESETS, error=ScenarioError, where=f"default: from {rules.RESET_MAPPING}")
        one_of("--launches", self.launches, rules.LAUNCH_ORDERS, error=ScenarioError)
        reset = rules.reset_policy(protocol.reset, self.reset)
        if self.launches == "per-rank-stream" and reset != "none" and self.epochs > 1:
            raise ScenarioError(f"--launches per-rank-stream has no host barrier between launches, so the host "
                                f"cannot reset locks ({reset}); use --reset none or a protocol whose reset is "
                                f"consumer, owner or none")
        if self.resident is not None:
            Residency(self.resident, self.resident_order, self.resident_sms,
                      self.resident_occupancy)  # validates them (one line each)
        if self.resident is not None or self.launches in rules.SPLIT_LAUNCHES:
            # Residency counts CTAs: every tile and rank must be there, not renamings of one; the
            # PDL counters are per rank, which the rank renaming does not know.
            return replace(self, reset=reset, symmetry=False)
        return replace(self, reset=reset)


# ----- identity: what a location and a step of the program are ---------------------------------

@dataclass(frozen=True)
class Location:
    """A location of a scenario's program: ``copy``'s copy of a lock (``slice`` None) or one
    thread's ``slice`` of a tile of a data buffer. ``name`` is the lock or the buffer; ``stage``
    the lock stage (locks only); ``slot`` the protocol slot (``slots`` > 1); ``block`` whose
    column block (all-scatter's ``out``, the shards of all-gather-gemm and reduce-scatter).

    Made once by the builder (:func:`lock_loc`, :func:`tile_loc`); the program's instructions
    name a location by its text, and :attr:`Scenario.locations` maps the text back to this.

    >>> str(lock_loc("ready", "pub", 1, 0, 1)), str(tile_loc("out", 0, 0, 1, block=1))
    ('ready#1@pub.r1.t0', 'out.r0.b1.t0.s1')
    """

    name: str
    copy: int
    tile: int
    stage: str = ""
    slot: int | None = None
    block: int | None = None
    slice: int | None = None

    @property
    def is_lock(self) -> bool:
        return self.slice is None

    @property
    def slotted_name(self) -> str:
        """The name with its slot: ``ready#1``."""
        return self.name + ("" if self.slot is None else f"#{self.slot}")

    def __str__(self) -> str:
        if self.is_lock:
            return f"{self.slotted_name}{'@' + self.stage if self.stage else ''}.r{self.copy}.t{self.tile}"
        block = "" if self.block is None else f".b{self.block}"
        return f"{self.slotted_name}.r{self.copy}{block}.t{self.tile}.s{self.slice}"


@dataclass(frozen=True)
class StepOrigin:
    """The protocol step an instruction comes from: step ``index`` (from 1) of ``section`` of
    ``protocol`` running lock ``stage``, its ``op``, and where it is written (``path``, ``line``).
    ``broadcast``: the ``bar.sync`` after a one-thread poll (its result's broadcast), not the step's
    own access. Made once by the builder; :attr:`Scenario.steps` maps each label to it."""

    protocol: str
    stage: str
    section: str
    index: int
    op: str
    path: str | None = None
    line: int | None = None
    broadcast: bool = False
    step: object = field(default=None, compare=False)  # the protocol's Step (syncverify.protocols.model)

    @property
    def name(self) -> str:
        """``signal step 2``, ``push stage: wait step 1``: as traces name it."""
        return f"{_stage_name(self.stage)}{self.section} step {self.index}"

    @property
    def where(self) -> str | None:
        """``path:line`` for a protocol read from a file, else None."""
        if self.line is None or not self.path or self.path.startswith("<"):
            return None
        return f"{self.path}:{self.line}"


@dataclass
class Scenario:
    """A built scenario: the program, who each thread is, and what each location and step label is."""

    program: Program
    options: ScenarioOptions
    protocol: object
    notes: list[str] = field(default_factory=list)
    push_protocol: object = None  # all-scatter's push protocol
    #: One program per lock stage, checked in its place (see :func:`stage_parts`); empty: check
    #: ``program`` itself.
    parts: list["Scenario"] = field(default_factory=list)
    #: A stage program's lock stage (:func:`stage_parts`), or ``call k`` (:func:`call_parts`); "" for
    #: the whole scenario.
    stage: str = ""
    #: A call program's call (:func:`call_parts`); None for the whole scenario or a stage program.
    call: int | None = None
    #: Each location's text (as instructions and events name it) -> what it is.
    locations: dict[str, Location] = field(default_factory=dict)
    #: Each protocol step's instruction label (as events carry it) -> the step.
    steps: dict[str, StepOrigin] = field(default_factory=dict)
    #: With ``parts`` a stage split: the whole program's call programs (:func:`call_parts`), which
    #: the check uses instead of the whole program where a stage can hang across calls; empty:
    #: the whole ``program``.
    whole_parts: list["Scenario"] = field(default_factory=list)

    @property
    def threads(self) -> tuple[ThreadOrigin, ...]:
        """Who each thread of the program is, by thread index (each thread's ``role``)."""
        return tuple(thread.role for thread in self.program.threads)

    def step_of(self, label: str) -> StepOrigin | None:
        """The protocol step an event's ``label`` comes from (None: a tile access or a host reset)."""
        return self.steps.get(label)


def owner(tile: int, opts: ScenarioOptions) -> int:
    """The rank that consumes (reduces) a tile of all-reduce (:func:`syncverify.protocols.rules.tile_owner`)."""
    return rules.tile_owner(tile, opts.tiles, opts.world_size, opts.distribution)


def signal_owner(rank: int, tile: int, opts: ScenarioOptions) -> int:
    """The rank a signal ``to = "owner"`` goes to: in all-reduce and gemm-reduce-scatter the tile's
    owner; in all-scatter (and all-gather-gemm) the signalling rank itself, whose column block the
    tile is (its own comm CTA, its own GEMM, consumes it)."""
    return owner(tile, opts) if opts.scenario in ("all-reduce", "gemm-reduce-scatter") else rank


def handles(role: Role, rank: int, tile: int, opts: ScenarioOptions) -> bool:
    """Whether ``rank``'s CTAs of ``role`` handle ``tile``: the tile's owner only for a consumer on the
    owner (and for producers with ``owner-only`` production), every rank otherwise."""
    if role.runs_on == "owner" or (role.runs_on == "producers" and opts.production == "owner-only"):
        return rank == owner(tile, opts)
    return True


def cta_tiles(role: Role, rank: int, opts: ScenarioOptions) -> list[tuple[int, ...]]:
    """The tiles each CTA of ``role`` on ``rank`` handles, in the order its loop visits them, as the
    kernels lay them out (:func:`syncverify.protocols.rules.loop_tiles` over ``opts.ctas``
    programs): a consumer on the owner (``OWNED``) loops over the positions of the tiles its rank
    owns, in order (``ownership_table``'s row); every other role over every tile, skipping those
    it does not handle (an ``owner-only`` producer). ``tests/test_drift.py`` traces which tiles each
    program of the kernels visits and compares. With one column of tiles (or ``group_m`` 1) the
    kernels' grouped order (``tile_of``) is the tiles' order; all-gather-gemm's GEMM programs do
    this with whole tiles (``UNITS`` 1: ``after_load`` steps, or one column tile of C).

    >>> opts = ScenarioOptions(scenario="gemm-reduce-scatter", tiles=4, ctas=1)
    >>> [cta_tiles(role, 1, opts) for role in ROLES["gemm-reduce-scatter"]]
    [[(0, 1, 2, 3)], [(1, 3)]]
    """
    if role.runs_on == "owner":
        return rules.loop_tiles(rules.owned_tiles(rank, opts.tiles, opts.world_size, opts.distribution), opts.ctas)
    return rules.loop_tiles([t if handles(role, rank, t, opts) else None for t in range(opts.tiles)], opts.ctas)


def gemm_units(opts: ScenarioOptions, protocol) -> int:
    """Units of work per tile of all-gather-gemm's GEMM CTAs: its column tiles without
    ``after_load`` steps, else 1 (:func:`syncverify.protocols.rules.gemm_units`, the kernel's rule);
    1 in the other scenarios."""
    if opts.scenario != "all-gather-gemm":
        return 1
    return rules.gemm_units(opts.columns, bool(rules.section_steps(protocol, "after_load")))


def cta_visits(role: Role, rank: int, opts: ScenarioOptions, units: int = 1) -> list[tuple[tuple[int, tuple[int, ...]], ...]]:
    """:func:`cta_tiles` with what each visit of a tile does to C: ``(tile, column tiles)`` per
    visit, the column tiles all-gather-gemm's GEMM CTA stores then (all of them for a whole
    tile; with ``units`` > 1 the units of :func:`syncverify.protocols.rules.unit_visits`, several
    CTAs visiting one tile for different column tiles, each after a wait of its own, as
    ``syncverify.kernels.roles.consumer`` does), ``()`` for the other roles.
    ``tests/test_drift.py`` traces the kernels' visits and compares.

    >>> opts = ScenarioOptions(scenario="all-gather-gemm", tiles=2, ctas=2, columns=3)
    >>> cta_visits(ROLES["all-gather-gemm"][1], 0, opts, units=3)
    [((0, (0, 2)), (1, (1,))), ((0, (1,)), (1, (0, 2)))]
    >>> cta_visits(ROLES["all-gather-gemm"][1], 0, opts)
    [((0, (0, 1, 2)),), ((1, (0, 1, 2)),)]
    """
    gemm = opts.scenario == "all-gather-gemm" and role.name == "gemm"
    if gemm and units > 1:
        return rules.unit_visits(opts.tiles, units, opts.ctas, opts.group_m)
    columns = tuple(range(opts.columns)) if gemm else ()
    return [tuple((t, columns) for t in tiles) for tiles in cta_tiles(role, rank, opts)]


def looped(opts: ScenarioOptions) -> bool:
    """Whether a CTA handles several tiles in its loop (fewer programs per role than tiles), or
    CTAs may share a tile's column tiles (all-gather-gemm's ``columns``, whatever the protocol).

    Then the *tiles* reduction is not made: tile 1 is not a renaming of tile 0 when both run
    in one CTA, one after the other, on the same named barriers (FA3's epilogue: warps that only
    ``bar.arrive`` can arrive for tile 1 before warp 0's ``bar.sync`` of tile 0, complete its phase
    without warp 0 and leave warp 0 waiting forever, ``tests/litmus/known/bar-arrive-twice-before-sync-can-hang.litmus``);
    nor the *stages* and *calls* splits, whose arguments assume one CTA per tile (the comm CTA's
    ``push`` part of tile 0 is program-ordered before its ``pub`` part of tile 1). With column
    tiles several CTAs may visit one tile: not one CTA per tile either.
    """
    return opts.ctas is not None and (opts.ctas < opts.tiles or opts.columns > 1)


def lock_loc(lock: str | None, stage: str, rank: int, tile: int, slot: int | None = None) -> Location:
    """The model location of ``rank``'s copy of a lock of ``stage`` for ``tile`` (``ready#1``: slot 1
    of a protocol with ``slots`` > 1)."""
    return Location(lock or "ready", rank, tile, stage=stage, slot=slot)


def tile_loc(buffer: str, copy: int, tile: int, thread: int, block: int | None = None,
             slot: int | None = None) -> Location:
    """The model location of one thread's slice of a tile in ``copy``'s ``buffer`` (ghost data)."""
    return Location(buffer, copy, tile, slot=slot, block=block, slice=thread)


# ----- turning protocol steps into instructions ------------------------------------------------

class _Builder:
    """Turns a role's steps into instructions for one CTA thread."""

    def __init__(self, protocols: dict[str, object], opts: ScenarioOptions, needed_locks: set[str] | None) -> None:
        self.protocols = protocols
        self.opts = opts
        self.needed = needed_locks  # None: every lock copy is kept (no slicing)
        self.labels = 0
        self.epoch = 0
        self.locations: dict[str, Location] = {}  # Scenario.locations
        self.step_labels: dict[str, StepOrigin] = {}  # Scenario.steps

    def place(self, location: Location) -> str:
        """The text instructions name ``location`` by, remembered for :attr:`Scenario.locations`."""
        text = str(location)
        self.locations[text] = location
        return text

    def labelled(self, label: str, origin: StepOrigin) -> str:
        """``label``, remembered as an instruction label of ``origin`` (:attr:`Scenario.steps`)."""
        self.step_labels[label] = origin
        return label

    def step_counts(self, code) -> tuple[tuple[str, int], ...]:
        """How many steps of each section ``code`` holds: the highest step number of the section
        its labels name (:attr:`Thread.steps`)."""
        counts: dict[str, int] = {}
        for ins in code:
            origin = self.step_labels.get(getattr(ins, "label", ""))
            if origin is not None:
                counts[origin.section] = max(counts.get(origin.section, 0), origin.index)
        return tuple(counts.items())

    def fresh(self, stem: str) -> str:
        self.labels += 1
        return f"{stem}{self.labels}"

    def env(self) -> dict:
        return dict(world_size=self.opts.world_size, epoch=self.epoch)

    def slot(self, protocol) -> int | None:
        """The slot this epoch uses (``rules.slot``), or None for a protocol with one slot."""
        return rules.slot(self.epoch, protocol.slots) if protocol.slots > 1 else None

    def role_code(self, role: Role, rank: int, tile: int, thread: int, columns: tuple[int, ...] | None = None) -> list:
        """One thread's instructions for ``role`` on ``rank`` and ``tile``, in the role's order.

        ``columns``: the column tiles of C this visit of the tile stores, each a unit of work
        (all-gather-gemm's GEMM CTA, :func:`cta_visits`): one store of each (the block of the
        ``out`` location is the column tile), after one load of the tile. The kernel loads the
        tile again for each unit, with nothing but its own C stores between the loads; such a
        later load can show nothing the first does not (every write that happens before the first
        happens before it, and a write ordered after the first by causality is ordered after it
        too: no release, fence or barrier lies between them), as ``kernels/drift.py`` merges them."""
        code: list = []
        W = self.opts.world_size
        for step in role.steps:
            if isinstance(step, Stage):
                code += self.steps(self.protocols[step.protocol], step.kind, rank, tile, thread, step.stage)
                continue
            if isinstance(step, Dot):
                code += [Barrier("sync", low.barrier_id, low.count, label=DOT_LABEL) for low in lowering.lower_dot()
                         if executes(low, thread, self.opts.threads_per_cta)]
                continue
            published = (step.into or step.buffer) in published_buffers(self.opts.scenario)
            slot = self.slot(self.protocols[_data_protocol(step)]) if published else None
            copies = ([rank] if step.copies == "self" else [owner(tile, self.opts)] if step.copies == "owner"
                      else list(range(W)))
            blocks = [None] if not step.block else [rank] if step.block == "self" else list(range(W))
            if columns is not None and step.kind == "store":
                blocks = list(columns)  # a unit's C: column tile c of the tile's rows
            for q in copies:
                for b in blocks:
                    if step.kind in ("load", "copy"):
                        code.append(self.tile_load(step.buffer, q, tile, thread, b, slot))
                    if step.kind in ("store", "copy"):
                        code.append(self.tile_store(step.into or step.buffer, q, tile, thread, b, slot))
        return code

    def tile_store(self, buffer: str, copy: int, tile: int, thread: int, block: int | None,
                   slot: int | None = None) -> Store:
        """One thread's slice of a tile store: weak, every thread (:func:`lower_tile_store`)."""
        lower_tile_store(self.protocols["protocol"])
        whose = f"rank {copy}'s {buffer}" + ("" if block is None else f", rank {block}'s block") + _slot_words(slot)
        return Store(self.place(tile_loc(buffer, copy, tile, thread, block, slot)), self.epoch + 1, ghost=True,
                     label=f"tile store: {whose}")

    def tile_load(self, buffer: str, copy: int, tile: int, thread: int, block: int | None,
                  slot: int | None = None) -> Load:
        """One thread's slice of a tile load: weak, or volatile (relaxed.sys) with ``tile_load.volatile``."""
        low = lower_tile_load(self.protocols["protocol"])
        sem = "relaxed" if low.sem == "volatile" else "weak"
        whose = f"rank {copy}'s {buffer}" + ("" if block is None else f", rank {block}'s block") + _slot_words(slot)
        return Load(f"r{buffer}{copy}{'' if block is None else f'b{block}'}",
                    self.place(tile_loc(buffer, copy, tile, thread, block, slot)),
                    sem, low.scope if sem != "weak" else None, ghost=True, label=f"tile load: {whose}")

    def operand(self, protocol, section: str, n: int, step, name: str) -> int:
        """Step ``n``'s ``name`` field (value, compare, until) at this world size and epoch; a
        division by zero is a one-line ``PATH:LINE: section step N: field=...`` error."""
        expr = step.until.rhs if name == "until" else getattr(step, name)
        shown = repr(step.until.source) if name == "until" else None
        return evaluate_at(expr, place=step_place(protocol.path, section, n, step.line), name=name, shown=shown,
                           **self.env())

    def steps(self, protocol, section: str, rank: int, tile: int, thread: int, stage: str) -> list:
        """One thread's instructions for ``section``'s steps (``rules.section_steps``), in order.

        Any op may be in any section: a write goes to the copies ``to`` names, a poll (an
        ``await``, or an ``atomic_cas`` with ``until``) loops on the copies ``from`` (or ``to``)
        names until its ``until`` holds, a one-off CAS reads ``from`` or writes ``to``.
        """
        out: list = []
        slot = self.slot(protocol)
        owner = signal_owner(rank, tile, self.opts)
        W = self.opts.world_size
        for n, step in enumerate(rules.section_steps(protocol, section), 1):
            origin = StepOrigin(protocol.name, stage, section, n, step.op, getattr(protocol, "path", None),
                                step.line, step=step)
            where = f"{origin.name} ({step.op})"
            lowered = lower_step(step)
            first = lowered[0]
            if first.kind == "bar":
                out += self.barrier(lowered, thread, self.labelled(where, origin))
                continue
            if first.kind == "fence":
                out.append(Fence(first.sem, first.scope, label=self.labelled(where, origin)))
                continue
            if first.kind == "nvshmem" and first.op in ("fence", "quiet"):
                if executes(first, thread, self.opts.threads_per_cta):
                    call = Quiet if first.op == "quiet" else DeliveryFence
                    out.append(call(label=self.labelled(where, origin)))
                continue
            if step.to is not None:
                copies = rules.signal_targets(step.to, rank, owner, W)
            else:
                copies = rules.wait_sources(step.from_, rank, W)
            if first.kind == "stream":  # the role's stream, before or after its kernel (finish places it)
                if executes(first, thread, self.opts.threads_per_cta):
                    out += [self.stream_op(protocol, section, n, step, first,
                                           self.place(lock_loc(step.lock, stage, q, tile, slot)), q, where, origin)
                            for q in copies]
                continue
            for q in copies:
                loc = self.place(lock_loc(step.lock, stage, q, tile, slot))
                polls = first.poll
                if not polls and step.to is not None and self.needed is not None and loc not in self.needed:
                    continue  # sliced: no poll of the built program reads that copy
                if executes(first, thread, self.opts.threads_per_cta):
                    out += self.access(protocol, section, n, step, first, loc, q, where, origin, rank=rank)
                for _low in lowered[1:]:  # the bar.sync after each copy's one-thread poll (its broadcast)
                    out.append(Barrier("sync", 0, label=self.labelled(f"{where}: broadcast",
                                                                       replace(origin, broadcast=True))))
        return out

    def stream_op(self, protocol, section: str, n: int, step, first, loc: str, q: int, where: str,
                  origin: StepOrigin) -> StreamOp:
        """A stream step's operation on rank ``q``'s copy ``loc`` (syncverify.streams)."""
        if first.op == "write_value":
            text = self.labelled(f"{where} -> rank {q}", origin)
            return StreamOp("write_value", loc, self.operand(protocol, section, n, step, "value"), label=text)
        text = self.labelled(f"{where}: wait until {loc} {step.until}", origin)
        return StreamOp("wait_value", loc, self.operand(protocol, section, n, step, "until"),
                        STREAM_UNTIL[step.until.op], label=text)

    def barrier(self, lowered: tuple, thread: int, where: str) -> list:
        """One thread's part of a ``barrier`` step: ``bar.sync`` (or, for a warp-selected step,
        ``bar.arrive``/``bar.sync``/nothing, as its warps do: :func:`syncverify.protocols.lowering.executes`).
        A step that selects warps counts the model threads that execute it; one for the whole
        CTA has no count (every thread of the CTA that uses the barrier takes part)."""
        threads = self.opts.threads_per_cta
        count = None
        if any(low.warps is not None for low in lowered):
            count = sum(1 for t in range(threads) if any(executes(low, t, threads) for low in lowered))
        return [Barrier("arrive" if low.op == "arrive" else "sync", low.barrier_id, count, label=where)
                for low in lowered if executes(low, thread, threads)]

    def access(self, protocol, section: str, n: int, step, first, loc: str, q: int, where: str,
               origin: StepOrigin, *, rank: int = 0) -> list:
        """One lock copy's access of step ``n``: a write, a one-off CAS, or a poll loop
        (``Label``, the read, a ``Branch`` back while ``until`` fails). A step with a byte range
        (``Step.bytes``) accesses those bytes of the word (``footprint``; :meth:`_Scenario.finish`
        splits the word into bytes)."""
        out: list = []
        footprint = None
        if step.bytes is not None:
            offset, size = step.bytes
            at = rank if offset == "rank" else offset
            if at + size > 4:
                raise UnsupportedConstruct(f"{step_place(getattr(protocol, 'path', None), section, n, step.line)}: "
                                           f"bytes = {{ offset = {offset!r}, size = {size} }} is bytes {at}..{at + size - 1} "
                                           f"of the 4-byte lock word at rank {rank}: outside it (fewer ranks, or a "
                                           f"smaller size)")
            footprint = (loc, at, size)
        text = f"{where} -> rank {q}" if step.to is not None else where
        label = None
        if first.poll:
            label = self.fresh("L")
            out.append(Label(label))
            text = f"{where}: poll {loc} until {step.until}"
        self.labelled(text, origin)
        if first.kind == "ld":
            sem = "relaxed" if first.sem == "volatile" else first.sem
            out.append(Load("rw", loc, sem, first.scope if sem != "weak" else None, label=text, footprint=footprint))
        elif first.kind == "st":
            sem = first.sem if first.sem in ("relaxed", "release") else "weak"
            value = self.operand(protocol, section, n, step, "value")
            out.append(Store(loc, value, sem, first.scope if sem != "weak" else None, label=text, footprint=footprint))
        elif first.kind == "nvshmem":  # nvshmemx_signal_op to rank q's copy (syncverify.delivery)
            value = self.operand(protocol, section, n, step, "value")
            out.append(Put(q, (), signal=loc, signal_op=first.op.removeprefix("signal_"), signal_value=value,
                           label=text))
        elif first.kind == "atom":
            if first.op == "cas":
                operands = (self.operand(protocol, section, n, step, "compare"),
                            self.operand(protocol, section, n, step, "value"))
            else:
                operands = (self.operand(protocol, section, n, step, "value"),)
            reg = "rw" if first.poll else ("rc" if step.op == "atomic_cas" and step.to is None else "rs")
            out.append(Atomic(first.op, reg, loc, operands, first.sem, first.scope, label=text))
        else:
            raise UnsupportedConstruct(f"{where}: the model cannot place a '{first.kind}' here")
        if first.poll:
            cond, value = rules.loop_back(step.until.op, self.operand(protocol, section, n, step, "until"))
            out.append(Branch(label, cond, "rw", value))
        return out


def _data_protocol(access: TileAccess) -> str:
    """Which protocol's ``slots`` a tile buffer rotates with: the one that runs its lock stage."""
    return "push" if access.stage == "push" else "protocol"


def _slot_words(slot: int | None) -> str:
    return "" if slot is None else f", slot {slot}"


def _stage_name(stage: str) -> str:
    return f"{stage} stage: " if stage else ""


# ----- building a scenario --------------------------------------------------------------------

#: The builder's reductions, each argued where it is made; ``ScenarioOptions.symmetry=False``
#: turns them all off, ``build(..., without=...)`` some of them (the exactness tests compare each).
REDUCTIONS: tuple[str, ...] = ("tiles", "slicing", "ranks", "read-only-polls", "stages", "symmetry", "calls",
                                "cas-reset", "resetting-polls")


def build(protocol, opts: ScenarioOptions, *, push=None, without: frozenset[str] = frozenset()) -> Scenario:
    """The program of ``protocol`` in the scenario ``opts`` (validated first).

    ``push``: all-scatter's push protocol object; by default loaded from ``opts.push``.
    ``without``: reductions of :data:`REDUCTIONS` not to make (for tests that check each is exact).
    """
    unknown = set(without) - set(REDUCTIONS)
    if unknown:
        raise ValueError(f"unknown reductions {sorted(unknown)}; known: {', '.join(REDUCTIONS)}")
    opts = opts.validated(protocol)
    protocols = {"protocol": protocol}
    if "push" in stages(opts.scenario).values():
        if push is None:
            push = load_protocol(opts.push)
        protocols["push"] = push
    if any(step.op.startswith("stream_") for p in protocols.values() for section in rules.SECTIONS
           for step in rules.section_steps(p, section)):
        # A stream step runs after (or before) a whole launch, so every CTA of it counts: a reduction
        # that leaves out a rank's or a stage's roles would let that launch complete without them.
        without = frozenset(REDUCTIONS)
    asked = opts.threads_per_cta
    opts = replace(opts, threads_per_cta=warp_threads(protocols, opts))
    scenario = _Program(protocols, opts, without=without).build()
    if opts.threads_per_cta != asked:
        share = rules.KERNEL_WARPS // opts.threads_per_cta
        scenario.notes.append(f"threads: {opts.threads_per_cta} model threads per CTA ({asked} asked), each standing "
                              f"for {share} of the kernels' {rules.KERNEL_WARPS} warps: the barrier steps select "
                              f"warps")
    scenario.parts = stage_parts(protocols, opts, without)
    calls = call_parts(protocols, opts, without)
    if scenario.parts:
        scenario.whole_parts = staged_calls(calls, scenario.parts)  # where a stage can hang across calls (verdicts.check)
    else:
        scenario.parts = calls
    return scenario


def warp_threads(protocols: dict[str, object], opts: ScenarioOptions) -> int:
    """The model threads per CTA for ``protocols`` (:func:`syncverify.protocols.rules.model_threads_per_cta`:
    ``--threads-per-cta``, raised until every warp selection of a barrier step is whole model
    threads). Refuses a CTA that runs two steps sharing the id of a warp-selected barrier
    (:func:`syncverify.protocols.rules.barrier_id_clash`), which the loader cannot see when the two come
    from two protocols (all-scatter's comm CTA)."""
    selections = [chosen for p in protocols.values() for section in rules.SECTIONS
                  for s in rules.section_steps(p, section) if s.op == "barrier" for chosen in (s.warps, s.arrive)]
    clash = barrier_id_clash(protocols, opts.scenario)
    if clash:
        raise ScenarioError(clash)
    return rules.model_threads_per_cta(opts.threads_per_cta, selections)


def barrier_id_clash(protocols: dict[str, object], scenario: str) -> str:
    """Why a CTA of ``scenario`` cannot run ``protocols``' barrier steps (``""``: it can): two
    steps on one barrier id, one of them warp-selected (:func:`syncverify.protocols.rules.barrier_id_clash`),
    in the steps a role runs, in order, across the protocols of its stages. The model and the
    kernel build both refuse it."""
    for role in ROLES[scenario]:
        steps = [(f"{protocols[st.protocol].name} {st.kind} step {n}", s) for st in role.steps
                 if isinstance(st, Stage) and st.protocol in protocols
                 for n, s in enumerate(rules.section_steps(protocols[st.protocol], st.kind), 1)]
        clash = rules.barrier_id_clash(steps)
        if clash is not None:
            first, second, barrier_id = clash
            return (f"{scenario}'s {role.name} CTA runs {first} and {second}, both on barrier {barrier_id}; "
                    f"{rules.BARRIER_ID_CLASH}")
    return ""


def stage_parts(protocols: dict[str, object], opts: ScenarioOptions,
                without: frozenset[str] = frozenset()) -> list[Scenario]:
    """The scenario split into one program per lock stage, when that split is exact.

    all-scatter's two stages share no location (``pub`` locks and ``local`` data, ``push`` locks
    and ``out``/``received`` data), and the only order from one to the other is the comm CTA's
    program order from its ``pub`` part to its ``push`` part. So, with one epoch:

    * a consistent execution of the whole program, restricted to one stage's events, is a
      consistent execution of that stage's program (PTX's axioms forbid patterns; removing events
      removes none), and its happens-before is no larger, so every violation of the whole program
      is a violation of a stage program;
    * conversely, a stage execution extends to the whole program by appending any execution of
      the other stage after it (Fence-SC order: this stage's fences first), which adds no order
      between this stage's events; a ``push`` violation needs a ``pub`` execution in which every
      comm CTA gets through its wait, so :func:`syncverify.verdicts.check.check` reports ``push``
      violations only when the ``pub`` stage has an execution without a hang.

    With several epochs the launches are host-ordered, so an order from one stage's events in one
    epoch to the other stage's in a later epoch is already there without the other stage; the
    argument holds as long as no launch hangs. A hang in one stage keeps the next launch of
    *both* stages from starting, which the split cannot see: when a stage program of a
    multi-epoch scenario can hang, :func:`syncverify.verdicts.check.check` checks the whole program
    instead. ``symmetry=False`` checks it whole too.

    With launches ordered per rank only (``--launches per-rank-stream``) and several epochs, the
    order from one stage to the other in a later epoch goes through the other stage's events on
    another rank (rank 1's push signal, rank 0's receiver, rank 0's next launch), which the
    split loses: the scenario is then checked whole.
    """
    if len(set(stages(opts.scenario))) < 2 or not opts.symmetry or "stages" in without or looped(opts):
        return []
    if opts.epochs > 1 and opts.launches != "host-barrier":
        return []
    parts = [_Program(protocols, opts, part=stage, without=without).build() for stage in stages(opts.scenario)]
    for part in parts:  # each stage's calls, one by one where that is exact too (call_parts)
        part.parts = call_parts(protocols, opts, without, stage=part.stage)
    return parts


def staged_calls(calls: list[Scenario], stage_programs: list[Scenario]) -> list[Scenario]:
    """The whole program's call programs (:func:`call_parts`), each split into its stage programs:
    the stage programs' own call programs of that call (:func:`stage_parts` nests the other way).

    A call program is a program of one call (from the one state the calls before leave), and the
    stage split of one call is exact (:func:`stage_parts`: the stages share no location, a push
    violation counts only if the pub stage has an execution without a hang); call ``k``'s state
    threads of each stage's locations are those of its stage program, built from the same state.
    Nested this way, a stage that hangs in call ``k`` keeps calls ``k + 1 ..`` from counting
    (:func:`syncverify.verdicts.check.check`: a call program has an execution without a hang only
    if each of its stage programs has one), which is what the stage-first nesting cannot see and
    why :func:`syncverify.verdicts.check.check` falls back to these. Left whole where a stage
    program is not split by call."""
    for k, call in enumerate(calls):
        leaves = [leaf for stage in stage_programs for leaf in stage.parts if leaf.call == k]
        if len(leaves) != len(stage_programs):
            return calls
    for k, call in enumerate(calls):
        call.parts = [leaf for stage in stage_programs for leaf in stage.parts if leaf.call == k]
    return calls


class _NotSplittable(Exception):
    """What calls before a call leave in memory is not one state (:func:`call_parts`)."""


class _CallAlwaysHangs(Exception):
    """A call hangs in every execution (:func:`_cas_reset_effect`): no later call runs, so the
    state it would start from is never used (``call_parts``: a later call's violations count only
    if every earlier call program has an execution without a hang, which the check decides)."""

    def __init__(self, effect: tuple[int, list]) -> None:
        super().__init__(effect)
        self.effect = effect  # the state it leaves in the location if it did stop


def call_parts(protocols: dict[str, object], opts: ScenarioOptions,
               without: frozenset[str] = frozenset(), stage: str | None = None) -> list[Scenario]:
    """The scenario (``stage``: that stage's program, :func:`stage_parts`) split into one program
    per call, when that split is exact.

    Program ``k`` is call ``k``'s threads, the host's reset after call ``k - 1``, and for call
    ``k >= 1`` the *state* calls ``0 .. k-1`` leave in each location the reset does not zero,
    written once, in launch ``k - 1``, by a *state thread* with the identity of the CTA thread
    that set it last (its other events left out: stale and unwritten reads, and causes, are
    judged by who wrote what a read returns); a lock also starts at that value (its initial
    value in program ``k``, which no read can return: the state write hides it). Each call
    program has one call's threads only, so its symmetric units are one call of each rank: the
    non-decreasing order among them fixes the order of that call's increments, which units holding
    every call's threads cannot (``W!`` orders per call once the first call's are fixed).

    Made with launches ordered by a host barrier (every event of launch ``k - 1``, and of the
    reset after it, happens before every event of launch ``k``), no reset racing the next launch
    and no residency bound, and only when the state calls ``0 .. k-1`` leave is *one* state, the
    same in every execution in which they all terminate (:func:`_call_effect`: stores or
    exchanges of one constant, or a counter's system-scoped adds of constants, each made once on
    every path, maybe beside a consumer's CAS poll that resets the full count,
    :func:`_cas_reset_effect`, switch ``cas-reset``); any other CAS that can change a value, a
    narrower-scoped add or a value from a register leaves a state that depends on the
    execution, and the scenario is checked whole (:class:`_NotSplittable`). The argument, in two
    directions (P: the whole program; P_k: call ``k``'s program):

    * P to P_k. Let X be an execution of P in which calls ``0 .. k-1`` terminate. Each read of
      call ``k`` reads a write of call ``k``, of the reset, or of an earlier call; the last
      kind is hb-before the read (host barrier), and so is every later write of that location
      of an earlier call or the reset, so by Coherence it reads the coherence-last write of the
      last call writing it: the state's value, which P_k's state thread writes hb-before the
      read. Mapping those reads to the state
      writes gives an execution of P_k (PTX's axioms forbid patterns; the events of call ``k``
      keep their order, and happens-before between them gains no path through earlier calls,
      which receive no order from call ``k``). Races, stale and unwritten reads and hangs of
      call ``k`` are kept with their kinds: a race needs two accesses unordered by
      happens-before (a call-``k`` access and an earlier one are ordered), a data read's epoch
      and the writer's value are kept, and a data location's initial value is hidden in both
      by a write that happens before the read. Violations of calls before ``k`` are those of
      ``P_0 .. P_{k-1}``.
    * P_k to P. An execution of P_k, with every state write replaced by the real last writes,
      is preceded by any execution of calls ``0 .. k-1`` that terminates (which exists exactly
      when each of ``P_0 .. P_{k-1}`` has an execution without a hang: each call's executions
      depend only on the state before it, which is the one state): again no new order among
      call ``k``'s events, and the same values read.

    So the verdict of P is the join of the call programs' verdicts, call ``k``'s counted only if
    every earlier call program has an execution without a hang, which is what
    :func:`syncverify.verdicts.check.check` does with ``parts`` (a hang does not send a call
    split back to the whole program as it does a stage split). ``tests/test_reductions_exact.py``
    compares the verdicts with the split and without it.
    """
    if opts.epochs < 2 or not opts.symmetry or "calls" in without or looped(opts):
        return []
    if opts.launches != "host-barrier" or opts.resident is not None:
        return []
    policies = _policies(protocols, opts)
    if "host-racing" in policies.values():
        return []
    try:
        return [_Program(protocols, opts, part=stage, without=without, call=k).build() for k in range(opts.epochs)]
    except _NotSplittable:
        return []


def _policies(protocols: dict[str, object], opts: ScenarioOptions) -> dict[str, str]:
    """Each lock stage's reset policy (``reset`` overrides the protocol under test's)."""
    return {stage: (opts.reset if which == "protocol" else rules.reset_policy(protocols[which].reset))
            for stage, which in stages(opts.scenario).items()}


@dataclass(frozen=True)
class _Write:
    """One write instruction of a thread's code, as :func:`_call_effect` weighs it."""

    ins: object  # a Store or an Atomic
    value: int | None  # the value it writes or adds, if a constant
    sure: bool  # every path through the code makes it (no forward branch jumps around it)
    looped: bool  # inside a loop: a path may make it more than once
    # A CAS that is the only instruction of its loop (``L: cas r, [x], c, n; b<cond> r, k, L``,
    # an ``await`` read with ``atomic_cas``): the branch's ``(cond, k)``, which repeats it while true.
    repeat: tuple[str, int] | None = None


def _writes(code: list) -> list[_Write]:
    """The writes of ``code`` (:class:`_Write`). Refuses code with bulk copies or mbarriers,
    whose writes this does not follow."""
    at = {ins.name: n for n, ins in enumerate(code) if isinstance(ins, Label)}
    skipped: set[int] = set()
    looped: set[int] = set()
    for n, ins in enumerate(code):
        if isinstance(ins, Branch) and ins.target in at:
            (skipped if at[ins.target] > n else looped).update(range(min(n, at[ins.target]) + 1,
                                                                    max(n, at[ins.target])))
    out = []
    for n, ins in enumerate(code):
        if isinstance(ins, Store):
            out.append(_Write(ins, ins.value if isinstance(ins.value, int) else None, n not in skipped, n in looped))
        elif isinstance(ins, Atomic):
            constant = all(isinstance(v, int) for v in ins.operands)
            out.append(_Write(ins, ins.operands[-1] if constant else None, n not in skipped, n in looped,
                              _repeat(code, n)))
        elif not isinstance(ins, (Load, Fence, Barrier, Branch, Label, RegOp)):
            raise _NotSplittable(type(ins).__name__)
    return out


def _repeat(code: list, n: int) -> tuple[str, int] | None:
    """For a CAS at ``code[n]`` that is the whole body of its loop (``L: cas r, ...; b<cond> r, k, L``),
    the branch's ``(cond, k)``; None otherwise."""
    ins = code[n]
    if ins.op != "cas" or ins.dst is None or not 0 < n < len(code) - 1:
        return None
    label, branch = code[n - 1], code[n + 1]
    if not (isinstance(label, Label) and isinstance(branch, Branch) and branch.target == label.name
            and branch.cond is not None and branch.lhs == ins.dst and isinstance(branch.rhs, int)):
        return None
    return branch.cond, branch.rhs


def _is_int(expr, value: int) -> bool:
    """Whether the protocol expression ``expr`` is the constant ``value`` as written."""
    return expr is not None and expr.tree == ("int", value)


def _leaves_value(ins: object) -> bool:
    """Whether the atomic ``ins`` never changes its location's value: a CAS whose compare and
    new value are one constant (a read-only poll), or an add, or, xor of the constant 0."""
    if not isinstance(ins, Atomic) or not all(isinstance(v, int) for v in ins.operands):
        return False
    return (ins.op == "cas" and ins.operands[0] == ins.operands[1]) or (
        ins.op in ("add", "sub", "or", "xor") and ins.operands[0] == 0)


def _call_effect(writes: list[_Write], before: int, cas_reset: bool = True) -> tuple[int, list[_Write]] | None:
    """What one call's ``writes`` of a location leave in it, the same in every execution in which
    the call terminates, and the writes that may stand for it (None: they leave ``before``).

    * stores and exchanges of one constant ``v``, one of them on every path: ``v`` (whichever is
      coherence-last);
    * adds of constants at system scope, each on every path exactly once (no branch around it,
      no loop): ``before`` plus their sum. They are morally strong with each other (strong,
      system scope), so by Atomicity each reads the one coherence-before it: none is lost.

    * with ``cas_reset``, adds as above beside a consumer's CAS poll loop
      (:func:`_cas_reset_effect`): the CAS's new value, or the sum where no CAS can succeed.

    Anything else (a CAS that can change the value outside those, adds at a narrower scope, a
    store mixed with adds, a value from a register) raises :class:`_NotSplittable`."""
    changing = [w for w in writes if not _leaves_value(w.ins)]
    if not changing:
        return None
    sets = [w for w in changing if isinstance(w.ins, Store) or w.ins.op == "exch"]
    adds = [w for w in changing if isinstance(w.ins, Atomic) and w.ins.op == "add"]
    if len(sets) == len(changing) and len({w.value for w in sets}) == 1 and sets[0].value is not None and any(
            w.sure for w in sets):
        return sets[0].value, [w for w in sets if w.sure]
    if adds and len(adds) == len(changing) and all(
            w.value is not None and w.sure and not w.looped and w.ins.scope == "sys" for w in adds):
        return before + sum(w.value for w in adds), adds
    polls = [w for w in changing if isinstance(w.ins, Atomic) and w.ins.op == "cas"]
    if cas_reset and polls and len(adds) + len(polls) == len(changing):
        return _cas_reset_effect(adds, polls, before)
    raise _NotSplittable(str(writes[0].ins.loc))


#: At most this many distinct partial sums of a call's adds are weighed (_cas_reset_effect).
MAX_PARTIAL_SUMS = 4096


def _cas_reset_effect(adds: list[_Write], polls: list[_Write], before: int) -> tuple[int, list[_Write]] | None:
    """What one call leaves in a counter that producers increment (``adds``) and a consumer polls
    with a CAS that resets it (``polls``: ``L: cas r, [x], c, n; b<cond> r, k, L``, the ``await``
    of ``add-counter-cas-reset``), when that is one value in every execution in which the call
    terminates; None where the location keeps ``before``. Raises :class:`_NotSplittable` otherwise.

    Made only where every write of the location in the call is an add of a positive constant
    made once on every path, or a CAS poll loop on every path, each at system scope. The
    argument rests on three sentences of the PTX ISA's memory consistency model:

    * "Two operations are said to be morally strong relative to each other if ... each
      operation is strong and specifies a scope that includes the thread executing the other
      operation" ("Morally strong operations"): ``.sys`` atomics are, pairwise, so
    * "Two overlapping write operations are related in coherence order if they are morally
      strong or if they are related in causality order" ("Coherence"): the call's writes of
      the location form one sequence in coherence order, after every write of the calls before
      (the host barrier orders those before, in causality order), the last of which leaves
      ``before``;
    * "When an atomic operation A and a write W overlap and are morally strong, then the
      following two communications cannot both exist in the same execution: A reads any byte
      from a write W' that precedes W in coherence order; A follows W in coherence order"
      ("Atomicity"): each add, and each CAS that writes, reads the write just before it in that
      sequence, so the value after each write is determined by the sequence: ``before`` plus
      the adds so far, reset to ``n`` by a CAS that read ``c`` (a CAS whose compare fails
      writes nothing: "atom.cas ... stores ... only if the comparison succeeds").

    So, with ``R`` the values ``before`` plus a sum of some of the adds (every value the
    location holds before a CAS writes; positive adds make ``before + total`` the largest, held
    only once every add is in), exactly:

    1. no compare in ``R``: no CAS ever writes, the location holds values of ``R`` only, and
       once the call terminates every add is in: ``before + total``. A poll that leaves on no
       value of ``R`` hangs in every execution (:class:`_CallAlwaysHangs`: the state of later
       calls is then never used, and their programs are built from whatever it is).
    2. one poll loop, compare ``c == before + total``, leaving the loop when it reads ``c``
       and for no other value of ``R`` nor for ``n``: the loop leaves only at a CAS that read
       ``c``, i.e. after every add (a read of ``n`` or of another value of ``R`` repeats the
       poll), and that CAS wrote ``n``, after which no add is left to come: ``n``. The CAS
       stands for it (its thread names the state).

    Anything else (a compare the count passes on its way, two poll loops that could both
    reset, an exit on a value short of the total, a narrower scope) can leave two values and
    is checked whole. ``tests/test_reductions_exact.py`` compares the verdicts with and without
    this (the ``cas-reset`` switch) and has the known answer where the exit condition matters.
    """
    if not all(w.value is not None and w.value > 0 and w.sure and not w.looped and w.ins.scope == "sys"
               for w in adds) or not all(p.repeat is not None and p.sure and p.ins.scope == "sys" for p in polls):
        raise _NotSplittable(str(polls[0].ins.loc))
    sums = {0}
    for w in adds:
        sums |= {x + w.value for x in sums}
        if len(sums) > MAX_PARTIAL_SUMS:
            raise _NotSplittable(str(polls[0].ins.loc))
    held = {before + x for x in sums}
    total = before + sum(w.value for w in adds)
    if max(held) >= 2 ** 31 or min(held) < -(2 ** 31):  # int32 wrap: the values are not the sums
        raise _NotSplittable(str(polls[0].ins.loc))
    if not {p.ins.operands[0] for p in polls} & held:  # 1: no CAS ever writes
        if not any(not BRANCHES[cond](v, bound) for p in polls for cond, bound in [p.repeat] for v in held):
            raise _CallAlwaysHangs((total, adds or polls))  # no value it can read lets a poll out
        return (total, adds) if adds else None
    if len(polls) == 1:  # 2: one poll loop, which leaves only after resetting the full count
        (poll,) = polls
        compare, new = poll.ins.operands
        cond, bound = poll.repeat
        leaves = {v for v in held | {new} if not BRANCHES[cond](v, bound)}
        if compare == total and leaves == {compare}:
            return new, polls
    raise _NotSplittable(str(polls[0].ins.loc))


class _Program:
    """Instantiates a scenario's roles for every epoch, tile and rank the reductions keep."""

    def __init__(self, protocols: dict[str, object], opts: ScenarioOptions, part: str | None = None,
                 without: frozenset[str] = frozenset(), call: int | None = None) -> None:
        self.protocols, self.opts, self.part, self.without = protocols, opts, part, without
        self.call = call  # call_parts: only this call's threads, and the state the calls before leave
        self.init: dict[str, int] = {}  # call_parts: the locks' values the calls before leave
        self.roles = ROLES[opts.scenario]
        if part is not None:  # one stage's steps of each role (stage_parts)
            kept = (replace(r, steps=tuple(s for s in r.steps if s.stage == part)) for r in self.roles)
            self.roles = tuple(r for r in kept if r.steps)
        self.stage_protocol = stages(opts.scenario)
        self.tiles = [0] if self.reduces("tiles") and not looped(opts) else list(range(opts.tiles))
        self.work_units = gemm_units(opts, protocols["protocol"])
        self.threads: list[Thread] = []
        self.units: dict[int, list[int]] = {}
        self.ctas: dict[tuple[int, str], int] = {}
        self.resets_last: dict[tuple[str, str, int], bool] = {}  # _reset_writes_last, per role, stage and step

    def reduces(self, name: str) -> bool:
        """Whether the reduction ``name`` (:data:`REDUCTIONS`) is made."""
        return self.opts.symmetry and name not in self.without

    def ranks_of(self, role: Role, tile: int) -> list[int]:
        """The ranks whose CTA of ``role`` handles ``tile`` in the built program."""
        every = self.every_rank(role, tile)
        if len(every) == 1:
            return every
        if role.name in ("receiver", "gemm") and self.reduces("ranks") and self._other_ranks_removable(role, tile):
            return [0]  # every receiver (all-gather-gemm: every GEMM CTA) is a renaming of rank 0's
        if (self.part == "pub" and role.name == "comm" and self.reduces("ranks")
                and self._waits_touch_own_copy_only("pub")):
            return [0]  # the other comm CTAs touch only their own rank's pub locks: renamings of rank 0's
        return every

    def every_rank(self, role: Role, tile: int) -> list[int]:
        """The ranks whose CTA of ``role`` handles ``tile`` with no rank left out."""
        opts = self.opts
        if role.runs_on == "owner" or (role.runs_on == "producers" and opts.production == "owner-only"):
            return [owner(tile, opts)]
        return list(range(opts.world_size))

    def _other_ranks_removable(self, role: Role, tile: int) -> bool:
        """Whether ``role``'s CTAs on ranks other than 0 can be left out of the program: the
        verdict (its violation kinds) is the same with them and without them.

        The argument, in two directions (P: every rank's CTA; P': rank 0's only):

        * P to P'. Every violation of P that involves one of the left-out CTAs is, renamed, one
          of rank 0's CTA: the scenario's roles, targets (``self``, ``others``, ``all``, and
          ``owner``, which is the signalling rank here) and sources (``self``, ``each``) are the
          same up to a permutation of the ranks. Every other violation is among events P' keeps,
          and an execution of P restricted to them is an execution of P' as long as no kept event
          reads from a left-out one (PTX's axioms forbid patterns; removing events removes none,
          and happens-before only shrinks). The left-out CTAs write their own rank's tile copies,
          which nobody reads, and lock copies: so none of the locks they write may be read by
          another role (:meth:`_writes_read_by_its_role_only`), nor by another rank's copy of
          this one (:meth:`_writes_own_copies_only`).
        * P' to P. An execution of P' extends to one of P that adds no happens-before between
          the events P' has: a left-out CTA reads, and nothing kept reads what it writes, so the
          only order leaving it is its launch's end before the launches the host orders after
          it. With a host barrier between launches (or with one launch) that order is already
          there: every event of launch k is before every event of launch k + 1. With launches
          ordered per rank only (``--launches per-rank-stream``) it is not: rank 1's GEMM wait in
          call k (acquiring rank 0's call-k signal, which follows rank 0's call k - 1) is what
          orders rank 1's stores of call k + 1 after rank 0's loads of call k - 1 (the two-slot
          staging protocol of tokenspeed PR #1356 is SAFE only with that order). So the
          reduction is made only with one launch or a host barrier between launches. The
          left-out CTA's polls must still find values that let it through: it polls every
          rank's copies as rank 0's does (``each``), or its own rank's copy, written by its own
          rank as rank 0's is by rank 0 (``self``); where it cannot get through, it hangs, and P'
          shows that hang renamed at rank 0's CTA. This last step is argued, not proved;
          ``tests/test_reductions_exact.py`` compares the verdicts with and without the reduction.
        """
        if self.opts.epochs > 1 and self.opts.launches != "host-barrier":
            return False
        return self._writes_own_copies_only(role, tile) and self._writes_read_by_its_role_only(role)

    def _writes_read_by_its_role_only(self, role: Role) -> bool:
        """Whether no lock that ``role``'s protocol steps write is accessed by another role's
        steps, or by ``role``'s own steps on another rank's copy (``from = "each"``): then the
        role's CTAs on other ranks write nothing a kept thread reads (rank 1's GEMM writing
        ``done`` into its own copy, which rank 1's sender polls, is read)."""
        def steps(r: Role):
            for step in r.steps:
                if isinstance(step, Stage):
                    for s in rules.section_steps(self.protocols[step.protocol], step.kind):
                        if s.op not in ("barrier", "fence"):
                            yield step.stage, s
        # As the kernels run it: an acquire or relaxed atomic_add(0) poll is a load (lower_step).
        written = {(stage, s.lock) for stage, s in steps(role) if any(op.kind in ("st", "atom") for op in lower_step(s))
                   and not self._poll_carries_no_order(role, stage, s) and not self._reset_writes_last(role, stage, s)}
        for other in self.roles:
            for stage, s in steps(other):
                if (stage, s.lock) not in written:
                    continue
                if other.name != role.name or (s.to is None and (s.from_ or "self") != "self") or (
                        s.to is not None and s.to != "self"):
                    return False
        return True

    def _poll_carries_no_order(self, role: Role, stage: str, step) -> bool:
        """Whether ``step`` of ``role`` is a read-only CAS poll whose writes order nothing kept
        (switch ``read-only-polls``): then the role's CTAs on other ranks may be left out although
        the other roles' adds read what their polls write (all-gather-gemm's GEMM CTAs, whose
        ``CAS(0 -> 0)`` poll of their own counter every sender increments: each rank's GEMM was
        built, and one call at W = 4 found no execution in 60 s).

        Made where the poll is the role's first step, reads its own rank's copy, compares with 0
        and writes 0 (as written), the lock's reset (if any) is ordered by host barriers, and every
        other write of the lock, by any role, is an add of a positive constant (or such a poll).
        The argument: a CAS "stores ... only if the comparison succeeds" (PTX ISA, ``atom``), i.e.
        only when it read 0. Positive adds only raise the count, so 0 is read only from the
        initial write or a host reset, both ordered before every event of the launch (host
        barrier). The left-out CTA's events up to its last write are its earlier polls, which
        also read 0 from those writes: no kept event of the launch happens before any of them
        (the poll is the CTA's first step: no fence or barrier before it). So a path of
        happens-before through the left-out CTA (a kept add reading its write: observation)
        starts at a write already ordered before the whole launch, and adds no order between
        kept events; a kept read of its write (of 0) can read that write's source instead (same
        value; atomicity puts the CAS just after its source in coherence). With the writes
        removed, the other ranks' copies of the lock are polled by nothing kept and sliced, and
        the rest of :meth:`_other_ranks_removable`'s argument holds unchanged.
        ``tests/test_reductions_exact.py`` compares the verdicts with and without this switch."""
        if not self.reduces("read-only-polls"):
            return False
        first = next((st for st in role.steps if isinstance(st, Stage)), None)
        if first is None or first.stage != stage or role.steps[0] is not first:
            return False
        section = rules.section_steps(self.protocols[first.protocol], first.kind)
        if not section or section[0] is not step:
            return False
        if not (step.op == "await" and step.read == "atomic_cas" and (step.from_ or "self") == "self"
                and _is_int(step.compare, 0) and _is_int(step.value, 0)):
            return False
        if _policies(self.protocols, self.opts).get(stage) not in ("host-between-barriers", "none"):
            return False
        for other in self.roles:
            for st in other.steps:
                if not isinstance(st, Stage) or st.stage != stage:
                    continue
                for s in rules.section_steps(self.protocols[st.protocol], st.kind):
                    if s.lock != step.lock or s is step or s.op in ("barrier", "fence"):
                        continue
                    if not any(op.kind in ("st", "atom") for op in lower_step(s)):
                        continue  # a load
                    positive_add = s.op == "atomic_add" and s.value is not None and s.value.tree[0] == "int" \
                        and s.value.tree[1] > 0
                    if not positive_add:
                        return False
        return True

    def _reset_writes_last(self, role: Role, stage: str, step) -> bool:
        """Whether ``step`` of ``role`` is a consumer's CAS poll that resets its own rank's counter
        and writes, if at all, after every other write of the counter in its call (switch
        ``resetting-polls``): then nothing of the call reads what it writes, and the role's CTAs
        on other ranks may be left out although the other roles' adds write the lock it polls
        (all-gather-gemm's GEMM CTAs of ``add-counter-cas-reset`` and ``add-counter-skip-self``,
        whose CAS writes 0 over the full count: every rank's GEMM was built, and a call program
        at W = 4 found no execution in 60 s).

        Made in a program of one call, or in a call program of :func:`call_parts` (whose state
        carries the reset's value to the next call), where the step is an ``await`` that reads
        its own rank's copy with a CAS whose new value differs from its compare, and where, on
        every rank's copy and every tile, the call's writes of the copy are the adds and the one
        poll :func:`_cas_reset_effect` weighs (nothing else writes it: a ``CAS(c -> c)`` or an
        add of 0 could come after the reset and read it), with ``before`` what the calls before
        leave (:func:`_call_effect`, as :meth:`add_state` takes it; 0 after a host reset).
        The argument: :func:`_cas_reset_effect`'s two cases are the only ones it accepts. In
        case 1 no CAS of the call ever writes. In case 2 the poll's CAS writes only on reading
        the full count, i.e. (Atomicity over the counter's system-scoped atomics, which form one
        sequence in coherence order) just after the last add of the call, and its loop leaves
        at once, so it is the last write of the copy in the call: no event of the call reads it,
        and no read of it by an atomic puts it inside an observation chain to a kept event. The
        left-out CTA then has no write a kept event reads, which is what
        :meth:`_other_ranks_removable`'s argument needs (its other writes are weighed there as
        before); the next call reads the reset's value through the state (a host barrier orders
        the calls, so that read adds no order). Where an earlier call hangs in every execution
        (:class:`_CallAlwaysHangs`), this call's violations never count
        (:func:`syncverify.verdicts.check.check`) and any program of it will do.

        With slicing turned off the adds into a left-out rank's copy stay, and :meth:`add_state`
        takes their state from the adds alone (no reset there): a value only the left-out poll
        would read. ``tests/test_reductions_exact.py`` compares the verdicts with and without this
        switch."""
        if not self.reduces("resetting-polls") or (self.call is None and self.opts.epochs > 1):
            return False
        if not (step.op == "await" and step.read == "atomic_cas" and (step.from_ or "self") == "self"
                and step.to is None):
            return False
        key = (role.name, stage, id(step))
        if key not in self.resets_last:
            try:
                self.resets_last[key] = self._resets_after_every_add(role, stage, step)
            except _NotSplittable:  # a write _call_effect cannot weigh (_writes: bulk copies, mbarriers)
                self.resets_last[key] = False
        return self.resets_last[key]

    def _resets_after_every_add(self, role: Role, stage: str, step) -> bool:
        """:meth:`_reset_writes_last`'s test over the writes of every rank's copy of ``step``'s
        lock (every rank's CTAs built, no copy sliced), call by call up to this one."""
        protocol = next(self.protocols[st.protocol] for st in role.steps if isinstance(st, Stage) and st.stage == stage)
        builder = _Builder(self.protocols, self.opts, None)
        host_reset = _policies(self.protocols, self.opts).get(stage) == "host-between-barriers"
        call = self.call or 0
        for t in self.tiles:
            for r in range(1, self.opts.world_size):  # the ranks whose CTA of role is left out
                before = 0
                for epoch in range(call + 1):
                    builder.epoch = epoch
                    loc = str(lock_loc(step.lock, stage, r, t, builder.slot(protocol)))
                    made = [w for other in self.roles for q in self.every_rank(other, t)
                            for i in range(self.opts.threads_per_cta)
                            for w in _writes(builder.role_code(other, q, t, i)) if w.ins.loc == loc]
                    if host_reset:
                        before = 0
                    try:
                        if epoch < call:
                            effect = _call_effect(made, before)
                            before = before if effect is None else effect[0]
                            continue
                        adds = [w for w in made if isinstance(w.ins, Atomic) and w.ins.op == "add"]
                        polls = [w for w in made if isinstance(w.ins, Atomic) and w.ins.op == "cas"
                                 and not _leaves_value(w.ins)]
                        if not polls or len(adds) + len(polls) != len(made) or any(_leaves_value(w.ins) for w in adds):
                            return False
                        _cas_reset_effect(adds, polls, before)
                    except _CallAlwaysHangs:
                        if epoch < call:
                            return True  # no later call runs: its violations never count
        return True

    def _writes_own_copies_only(self, role: Role, tile: int) -> bool:
        """Whether ``role``'s protocol steps write no lock copy but its own rank's. Only then are
        the role's CTAs on other ranks renamings of rank 0's that change nothing rank 0's reads:
        a wait that consumes each rank's signal (PyTorch's CAS 1 -> 0 with ``from = "each"``)
        takes it from under every other rank's waiter, which only the whole program shows."""
        W = self.opts.world_size
        for step in role.steps:
            if not isinstance(step, Stage):
                continue
            for s in rules.section_steps(self.protocols[step.protocol], step.kind):
                if s.op not in ("store", "atomic_xchg", "atomic_add", "atomic_cas") and not (s.read or "").startswith("atomic"):
                    continue  # plain reads, fences and barriers write nothing (an atomic read may)
                copies = (rules.signal_targets(s.to, 0, signal_owner(0, tile, self.opts), W)
                          if s.to is not None else rules.wait_sources(s.from_, 0, W))
                if copies != [0]:
                    return False
        return True

    def _waits_touch_own_copy_only(self, stage: str) -> bool:
        protocol = self.protocols[self.stage_protocol[stage]]
        return (all((s.from_ or "self") == "self" for s in protocol.wait)
                and not protocol.before_store and not rules.section_steps(protocol, "after_load"))

    def ctas_of(self) -> list[tuple[Role, int, tuple[tuple[int, tuple[int, ...] | None], ...], int | None]]:
        """Every CTA of the built program, in build order: ``(role, rank, its visits in loop
        order, program)``, a visit ``(tile, column tiles)`` (None: the whole tile, as the role
        stores it), ``program`` the CTA's index among its role's on the rank when CTAs share
        tiles' column tiles (else None). One CTA per tile (tile by tile, then role, then rank), or
        with :func:`looped` the kernels' layout (:func:`cta_visits`), role by role, rank by rank."""
        if not looped(self.opts):
            return [(role, r, ((t, None),), None) for t in self.tiles for role in self.roles
                    for r in self.ranks_of(role, t)]
        out = []
        for role in self.roles:
            ranks = sorted({r for t in self.tiles for r in self.ranks_of(role, t)})
            for r in ranks:
                loops = cta_visits(role, r, self.opts, self.work_units)
                shared = self.work_units > 1 and role.name == "gemm"
                out += [(role, r, tuple((t, columns if shared else None) for t, columns in visits),
                         c if shared else None) for c, visits in enumerate(loops)]
        return out

    def checked_rank(self, tile: int) -> int | None:
        """The rank whose reads the other ranks are symmetric around (None: no symmetry group)."""
        if not self.reduces("symmetry") or len(self.tiles) != 1:
            return None
        if self.opts.scenario in ("all-reduce", "gemm-reduce-scatter"):
            return owner(tile, self.opts) if self.opts.production == "every-rank" else None
        return 0

    def polled(self) -> set[str] | None:
        """Every lock copy some poll of the built program reads (an ``await``, a CAS reading
        ``from``, a CAS repeated ``until``), in every slot: writes to other copies are sliced."""
        if not self.reduces("slicing"):
            return None
        out: set[str] = set()
        W = self.opts.world_size
        for role in self.roles:
            for step in role.steps:
                if not isinstance(step, Stage):
                    continue
                protocol = self.protocols[step.protocol]
                slots = [None] if protocol.slots == 1 else list(range(protocol.slots))
                for s in rules.section_steps(protocol, step.kind):
                    if not (s.op == "await" or (s.op == "atomic_cas" and (s.from_ is not None or s.until is not None))):
                        continue
                    for t in self.tiles:
                        for r in self.ranks_of(role, t):
                            copies = (rules.signal_targets(s.to, r, signal_owner(r, t, self.opts), W)
                                      if s.to is not None else rules.wait_sources(s.from_, r, W))
                            out.update(str(lock_loc(s.lock, step.stage, q, t, k)) for q in copies for k in slots)
        return out

    def cta(self, rank: int, name: str, epoch: int) -> int:
        """One number per CTA of the program, in order of first use. Each epoch is a launch of its
        own, so its CTAs are new ones (a CTA barrier never spans two launches)."""
        return self.ctas.setdefault((rank, f"{name} epoch {epoch}"), len(self.ctas))

    def build(self) -> Scenario:
        opts = self.opts
        builder = self.builder = _Builder(self.protocols, opts, self.polled())
        if self.call:
            self.add_state(self.call)
        for epoch in range(opts.epochs) if self.call is None else [self.call]:
            builder.epoch = epoch
            for role, r, visits, program in self.ctas_of():
                tiles = tuple(t for t, _columns in visits)
                checked = self.checked_rank(tiles[0])
                for i in range(opts.threads_per_cta):
                    # a CTA's tiles one after another, in its loop (looped): the same CTA's barriers
                    code = [ins for t, columns in visits for ins in builder.role_code(role, r, t, i, columns)]
                    origin = ThreadOrigin(r, role.name, thread=i, tile=tiles[0], epoch=epoch,
                                          tiles=tiles if len(tiles) > 1 else (), program=program)
                    phase = rules.launch_phase(epoch, r, opts.launches, role_kernel(opts.scenario, role.name))
                    self.add_thread(tuple(code), origin, phase, self._unit(role, r, checked),
                                    builder.step_counts(code))
        return self.finish()

    def _unit(self, role: Role, rank: int, checked: int | None) -> int | None:
        """The symmetry unit ``rank``'s CTA of ``role`` belongs to (None: none)."""
        return rank if checked is not None and rank != checked and role.runs_on != "owner" else None

    def add_thread(self, code: tuple, origin: ThreadOrigin, phase: Phase, unit: int | None, steps=()) -> None:
        cta = self.cta(origin.rank, origin.cta, origin.epoch)
        self.threads.append(Thread(f"P{len(self.threads)}", origin.rank, cta, code, origin, phase, steps))
        if unit is not None:
            self.units.setdefault(unit, []).append(len(self.threads) - 1)

    def add_state(self, call: int) -> None:
        """The state of :func:`call_parts`: what calls ``0 .. call-1`` leave in each location the
        host's reset after call ``call - 1`` does not zero (:func:`_call_effect`), written once,
        in launch ``call - 1``, by (a thread named as) the CTA thread that set it last; a lock
        also starts at that value (``Program.init``). Raises :class:`_NotSplittable` where that
        is not one value."""
        opts, builder = self.opts, self.builder
        reset = {stage for stage, policy in _policies(self.protocols, opts).items()
                 if policy == "host-between-barriers"}
        value: dict[str, int] = {}  # location -> what the calls so far leave in it
        setter: dict[str, tuple] = {}  # location -> (instruction, origin) of the write that set it last
        writers: list[tuple[ThreadOrigin, int | None]] = []
        for epoch in range(call):
            builder.epoch = epoch
            writes: dict[str, list] = {}
            for t in self.tiles:
                checked = self.checked_rank(t)
                for role in self.roles:
                    for r in self.ranks_of(role, t):
                        for i in range(opts.threads_per_cta):
                            origin = ThreadOrigin(r, role.name, thread=i, tile=t, epoch=epoch)
                            unit = self._unit(role, r, checked)
                            writers.append((origin, unit))
                            for write in _writes(builder.role_code(role, r, t, i)):
                                where = builder.locations.get(write.ins.loc)
                                if isinstance(write.ins, Store) and write.ins.ghost:
                                    where = None  # tile data: never reset
                                if where is not None and where.stage in reset:
                                    continue  # a lock the reset after call - 1 zeroes: this program has it
                                writes.setdefault(write.ins.loc, []).append((write, origin, unit))
            hangs = False
            for loc, made in writes.items():
                try:
                    effect = _call_effect([w for w, _o, _u in made], value.get(loc, 0), self.reduces("cas-reset"))
                except _CallAlwaysHangs as hang:
                    effect, hangs = hang.effect, True
                if effect is not None:
                    value[loc], could = effect
                    # A write no symmetric unit makes stands for a location several ranks write
                    # (a counter at its owner): its state thread stays out of the units, which
                    # then stay renamings of each other.
                    ins, origin, _unit = min(((w.ins, o, u) for w, o, u in made if w in could),
                                             key=lambda m: m[2] is not None)
                    setter[loc] = (ins, origin)
            if hangs:  # calls epoch + 1 .. call never run: what they would add is never read
                break
        state: dict[ThreadOrigin, list[Store]] = {}
        for loc, (ins, origin) in setter.items():
            if isinstance(ins, Store) and ins.ghost:
                state.setdefault(origin, []).append(replace(ins, value=value[loc]))
                continue
            # A lock's state is written as a strong write of the step that set it (causes name
            # it: "call 0's value satisfies call 1's wait"), and is also its initial value here,
            # so that the explorer's values start from it (a counter at 8 after a call at W = 8
            # is not grown again from 0; the initial write is coherence-before the state write,
            # which happens before every read of this call, so no read can return it).
            state.setdefault(origin, []).append(Store(loc, value[loc], sem="relaxed", scope="sys", label=ins.label))
            self.init[loc] = value[loc]
        phase = rules.launch_phase(call - 1, 0, opts.launches)
        for origin, unit in writers:  # in build order, so that units stay aligned thread by thread
            if origin in state:
                self.add_thread(tuple(state[origin]), origin, phase, unit)

    def finish(self) -> Scenario:
        """Add the host's lock resets between epochs and the rank symmetry group; build the Scenario."""
        opts = self.opts
        # NVSHMEM calls: their delivery agents, appended after every thread (syncverify.delivery)
        delivering = any(isinstance(ins, (Put, Quiet, DeliveryFence)) for th in self.threads for ins in th.instructions)
        self.threads = list(lower_delivery(tuple(self.threads)))
        streaming = self.streams()  # stream steps: threads of their rank's stream (syncverify.streams)
        policies = _policies(self.protocols, opts)
        lock_locs = sorted({ins.loc for th in self.threads for ins in th.instructions
                            if not getattr(ins, "ghost", False) and getattr(ins, "loc", None)})
        host_order, resets = _resets(opts.epochs, [self.builder.locations[loc] for loc in lock_locs], policies)
        if opts.launches == "per-rank-stream":  # only each rank's stream orders its launches
            ranks = sorted({th.gpu for th in self.threads})
            host_order = tuple((rules.launch_phase(e, r, opts.launches), rules.launch_phase(e + 1, r, opts.launches))
                               for e in range(opts.epochs - 1) for r in ranks)
        if self.call is not None:  # a call program (call_parts): the reset just before its call only
            resets = [reset for reset in resets if reset[3] == self.call - 1]
        for rank, locs, phase, epoch in resets:
            code = tuple(Store(str(loc), 0, label=f"{HOST_RESET} (memset)") for loc in locs)
            self.threads.append(Thread(f"P{len(self.threads)}", rank, self.cta(rank, f"reset-{phase}", epoch), code,
                                       ThreadOrigin(rank, HOST_RESET, after_epoch=epoch), phase))
        if self.call is not None:
            present = {th.phase for th in self.threads}
            host_order = tuple((a, b) for a, b in host_order if a in present and b in present)
        pdl: tuple = ()
        if opts.launches in rules.SPLIT_LAUNCHES:  # two kernels per call: the host barrier orders both
            host_order = split_kernels(host_order, opts.scenario)
            if opts.launches != "two-stream":
                pdl = programmatic_dependent_launch(self.threads, opts)
        if streaming:
            if pdl:
                raise UnsupportedConstruct(f"{streaming[0][5]}: stream steps with --launches {opts.launches} are not "
                                           f"modelled (use host-barrier, per-rank-stream or two-stream)")
            host_order = self.per_rank_launches(host_order)
            host_order = _around(host_order, [(w, _rank_phase(p, r), own, a, b) for w, p, own, a, b, _label, r
                                              in streaming])
        symmetry = ()
        # Per-rank phases and their host order rename with the ranks too. Units of unequal size
        # (a call program whose state threads differ by rank) are not renamings: no group; nor are
        # units with delivery agents or stream threads (they are not renamed with their unit).
        if len(self.units) > 1 and not delivering and not streaming and len({len(u) for u in self.units.values()}) == 1:
            symmetry = (tuple(tuple(u) for _q, u in sorted(self.units.items())),)
        protocol = self.protocols["protocol"]
        part = " ".join(p for p in (self.part, None if self.call is None else f"call {self.call}") if p)
        name = f"{protocol.name}/{opts.scenario}/W{opts.world_size}" + (f"/{part}" if part else "")
        threads, init = self.byte_addressed(tuple(self.threads))
        program = Program(name, threads, init=init,
                          host_order=host_order, symmetry=symmetry, observed_registers=frozenset(), pdl=pdl)
        if symmetry:
            program = replace(program, unit_renamings=self.unit_renamings(program))
        return Scenario(program, opts, protocol, _notes(opts, symmetry, self.protocols), self.protocols.get("push"),
                        stage=part, call=self.call, locations=self.builder.locations, steps=self.builder.step_labels)


    def streams(self) -> list[tuple[str, tuple[tuple, ...], list[tuple]]]:
        """Move each thread's stream steps (:class:`~syncverify.streams.StreamOp`) to threads of
        its rank's stream: those before its first other instruction run before its launch, those
        after its last one after it (:func:`~syncverify.streams.stream_threads`: one thread and
        phase per operation, chained). Returns, per group, ``("before" | "after", the launch
        phase, the stream's own pairs, its first phase, its last phase)`` for :func:`_around`. A stream step between two kernel
        steps is refused by name: the stream runs before or after the whole kernel."""
        groups = []
        for index, th in enumerate(list(self.threads)):
            code = th.instructions
            if not any(isinstance(ins, StreamOp) for ins in code):
                continue
            kernel = [k for k, ins in enumerate(code) if not isinstance(ins, (StreamOp, Label))]
            first, last = (kernel[0], kernel[-1]) if kernel else (len(code), len(code) - 1)  # no kernel step: all before
            stray = next((ins for ins in code[first:last] if isinstance(ins, StreamOp)), None)
            if stray is not None:
                raise UnsupportedConstruct(f"{stray.label}: a stream step runs on the role's stream before or after "
                                           f"its whole kernel, so it comes before the role's first kernel step "
                                           f"(stream_wait_value in wait) or after its last (stream_write_value in "
                                           f"signal), not between them")
            for where, ops in (("before", code[:first]), ("after", code[last + 1:])):
                ops = tuple(ins for ins in ops if isinstance(ins, StreamOp))
                if not ops:
                    continue
                epoch = getattr(th.phase, "epoch", 0)
                made, pairs = stream_threads(
                    f"{th.name}.{where}", th.gpu, self.cta(th.gpu, f"stream {th.name}", epoch), ops, th.role,
                    phase=lambda k, th=th, where=where, epoch=epoch: Phase("stream", epoch, th.gpu,
                                                                           f"{th.name}.{where}{k}"))
                self.threads += made
                groups.append((where, th.phase, pairs, made[0].phase, made[-1].phase, ops[0].label, th.gpu))
            self.threads[index] = replace(th, instructions=code[first:last + 1])
        return groups

    def per_rank_launches(self, host_order: tuple) -> tuple:
        """Launch phases made per rank (``e0`` -> ``e0.r0``, ``e0.r1``, ...; the threads moved to
        their rank's) with the same order: a pair of launch phases orders every rank's launch of
        the one before every rank's of the other (a host barrier). A stream operation follows or
        precedes its own rank's launch only (:meth:`streams`), which a phase shared by the ranks
        cannot say."""
        ranks = sorted({th.gpu for th in self.threads})

        def each(phase) -> list:
            shared = isinstance(phase, Phase) and phase.kind == "launch" and phase.rank is None
            return [replace(phase, rank=r) for r in ranks] if shared else [phase]

        self.threads = [replace(th, phase=_rank_phase(th.phase, th.gpu)) for th in self.threads]
        return tuple((a2, b2) for a, b in host_order for a2 in each(a) for b2 in each(b))

    def unit_renamings(self, program: Program) -> tuple:
        """:attr:`Program.unit_renamings`: for each two units (ranks ``qa``, ``qb``) of the symmetry
        group, the program's locations that renaming ``qa`` and ``qb`` into each other swaps: a
        location's copy and column block are the ranks it is renamed with (:class:`Location`).
        Two units are left out where a location renames to one the program does not have, and
        every pair where a location's text is not its :class:`Location`'s (a lock split into bytes)."""
        locations = self.builder.locations
        used = set(program.locations())
        if any(text not in locations or str(locations[text]) != text for text in used):
            return ()
        out = []
        ranks = sorted(self.units)
        for i, qa in enumerate(ranks):
            for qb in ranks[i + 1:]:
                def swap(rank: int | None) -> int | None:
                    return qb if rank == qa else qa if rank == qb else rank

                pairs = {(text, str(replace(loc, copy=swap(loc.copy), block=swap(loc.block))))
                         for text in used for loc in [locations[text]]}
                pairs = {(a, b) for a, b in pairs if a != b}
                if all(b in used for _a, b in pairs):
                    out.append((tuple(self.units[qa]), tuple(self.units[qb]),
                                tuple(sorted((a, b) for a, b in pairs if a < b))))
        return tuple(out)

    def byte_addressed(self, threads: tuple[Thread, ...]) -> tuple[tuple[Thread, ...], dict[str, int]]:
        """The threads with every lock some step accesses by a byte range split into bytes
        (:func:`syncverify.program.split_mixed_sizes`), and the initial memory: the values the
        calls before leave (``call_parts``), a split lock's as its bytes, little-endian; each byte
        is placed where its word is (pictures, causes)."""
        code = [list(th.instructions) for th in threads]
        split = mixed_size_locations(code)
        init: dict[str, int] = dict(self.init)
        if not split:
            return threads, init
        code = split_mixed_sizes(code, init)
        locations = self.builder.locations
        for loc in split:
            for byte in range(4):
                locations.setdefault(byte_location(loc, byte), locations[loc])
        return tuple(replace(th, instructions=tuple(c)) for th, c in zip(threads, code)), init


def _rank_phase(phase, rank: int):
    """``phase`` as rank ``rank``'s own when it is a launch of every rank (:meth:`_Scenario.per_rank_launches`)."""
    if isinstance(phase, Phase) and phase.kind == "launch" and phase.rank is None:
        return replace(phase, rank=rank)
    return phase


def _around(host_order: tuple, groups: list) -> tuple:
    """``host_order`` with each stream group of :meth:`_Scenario.streams` in place: its own chain;
    ``after`` a launch phase: after it, and before every phase that follows it; ``before`` one:
    before it, and after every phase it follows (the stream is the launch's stream)."""
    pairs = list(host_order)
    for where, launch, own, first, last in groups:
        pairs += own
        if where == "after":
            pairs += [(launch, first)] + [(last, b) for a, b in host_order if a == launch]
        else:
            pairs += [(last, launch)] + [(a, first) for a, b in host_order if b == launch]
    return tuple(dict.fromkeys(pairs))


# ----- launch modes with two kernels per call: two streams, programmatic dependent launch ------

def role_kernel(scenario: str, role: str) -> str:
    """The kernel a role runs in when a call launches two (:data:`~syncverify.protocols.rules.SPLIT_LAUNCHES`):
    ``gemm`` (the GEMM's CTAs: producers, and all-gather-gemm's consumers) or ``comm``.

    >>> role_kernel("all-reduce", "producer"), role_kernel("all-reduce", "consumer"), role_kernel("all-gather-gemm", "sender")
    ('gemm', 'comm', 'comm')
    """
    return "gemm" if role in ("producer", "gemm") else "comm"


def primary_kernel(scenario: str) -> str:
    """The kernel that produces (its roles signal first): the PDL primary; the other is dependent."""
    return role_kernel(scenario, ROLES[scenario][0].name)


def split_kernels(host_order: tuple, scenario: str) -> tuple:
    """``host_order`` with each launch phase ``e{k}`` replaced by both kernels' phases: a host barrier
    (or reset) between calls orders every kernel of one call before every kernel of the next."""
    def kernels(phase) -> list:
        if isinstance(phase, Phase) and phase.kind == "launch":
            return [replace(phase, kernel=k) for k in ("gemm", "comm")]
        return [phase]

    return tuple((a, b) for before, after in host_order for a in kernels(before) for b in kernels(after))


#: The counter each rank's PDL primary threads add 1 to as they finish, with a release at system
#: scope: "griddepcontrol.wait ... waits until all prerequisite grids in flight have completed and
#: all the memory operations from the prerequisite grids are performed and made visible to the
#: current grid" (PTX ISA, griddepcontrol) is an acquire poll of it until every thread has.
PDL_DONE = "pdl.done"


def programmatic_dependent_launch(threads: list[Thread], opts: ScenarioOptions) -> tuple:
    """Give the two kernels of each call their PDL meaning (in place): every primary thread as
    :func:`~syncverify.program.pdl_primary` makes it (its trigger first, then 1 added to
    :data:`PDL_DONE` of its rank last), and with ``--launches pdl`` every dependent thread behind
    :func:`~syncverify.program.pdl_dependent` (``griddepcontrol.wait``).
    Returns the program's ``pdl`` pairs (primary phase, dependent phase)."""
    primary = primary_kernel(opts.scenario)
    expected: dict[tuple[int, int], int] = {}
    for th in threads:
        if isinstance(th.phase, Phase) and th.phase.kernel == primary:
            key = (th.gpu, th.phase.epoch)
            expected[key] = expected.get(key, 0) + 1
    for i, th in enumerate(threads):
        if not isinstance(th.phase, Phase) or th.phase.kind != "launch":
            continue
        done = f"{PDL_DONE}.r{th.gpu}.e{th.phase.epoch}"
        if th.phase.kernel == primary:
            code = pdl_primary(th.instructions, th.name, done)
        elif opts.launches == "pdl" and expected.get((th.gpu, th.phase.epoch)):
            code = pdl_dependent(th.instructions, done, expected[(th.gpu, th.phase.epoch)])
        else:
            continue
        threads[i] = replace(th, instructions=code)
    dependent = "comm" if primary == "gemm" else "gemm"
    epochs = sorted({th.phase.epoch for th in threads if isinstance(th.phase, Phase) and th.phase.kind == "launch"})
    return tuple((Phase("launch", e, None, primary), Phase("launch", e, None, dependent)) for e in epochs)


def _resets(epochs: int, lock_locs: list[Location], policies: dict[str, str]) -> tuple[tuple, list]:
    """Host order between epochs and the host reset threads each stage's policy adds.

    Launches are always host-ordered (``e{k}`` before ``e{k+1}``); a ``host-between-barriers``
    reset runs between them (phase ``reset{k}``), a ``host-racing`` one after launch ``k`` but
    unordered with launch ``k+1`` (phase ``racing{k}``, or ``reset{k}`` when it is the only one).
    """
    order: list[tuple[Phase, Phase]] = []
    resets = []
    used = {policies.get(loc.stage, "none") for loc in lock_locs} - {"none"}
    for e in range(epochs - 1):
        launch, next_launch = Phase("launch", e), Phase("launch", e + 1)
        order.append((launch, next_launch))
        for policy in ("host-between-barriers", "host-racing"):
            if policy not in used:
                continue
            phase = Phase("reset" if policy == "host-between-barriers" or len(used) == 1 else "racing", e)
            by_rank: dict[int, list[Location]] = {}
            for loc in lock_locs:
                if policies.get(loc.stage, "none") == policy:
                    by_rank.setdefault(loc.copy, []).append(loc)
            for rank, locs in sorted(by_rank.items()):
                resets.append((rank, locs, phase, e))
            order.append((launch, phase))
            if policy == "host-between-barriers":
                order.append((phase, next_launch))
    return tuple(order), resets


def _notes(opts: ScenarioOptions, symmetry: tuple, protocols: dict[str, object]) -> list[str]:
    notes = []
    if "push" in protocols:
        notes.append(f"push stage: protocol {protocols['push'].name} (each rank's comm CTA pushes to every rank's "
                     f"receiver); --push chooses another")
    if looped(opts):
        notes.append(f"tiles: {opts.ctas} CTA(s) per role and rank loop over the {opts.tiles} tiles as the kernels do "
                     f"(the same CTA's barriers for each of its tiles): every tile is checked")
        if gemm_units(opts, protocols["protocol"]) > 1:
            notes.append(f"column tiles: each tile's {opts.columns} column tiles of C are units of work spread over "
                         f"the {opts.ctas} GEMM CTA(s) per rank (group_m {opts.group_m}), as the kernel does without "
                         f"after_load steps: a CTA waits for a tile before its first unit of it")
    elif opts.symmetry and opts.tiles > 1:
        notes.append(f"tiles: {opts.tiles} tiles are renamings of tile 0 (disjoint locks and data); tile 0 is checked")
    if opts.symmetry and opts.tiles > 1 and opts.production == "owner-only" and not looped(opts):
        notes.append(f"distribution={opts.distribution} changes which rank owns a tile, not what happens to it")
    if symmetry:
        notes.append(f"ranks: {len(symmetry[0])} interchangeable ranks explored as one symmetry group")
    return notes
