"""Kernel launch configurations, checked on the host with messages that name the fix.

Pure Python (no torch, no triton), so the CLI can refuse bad sizes before importing either.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from syncverify.protocols import rules
from syncverify.validation import one_of
from syncverify.kernels.errors import StressConfigError

KERNELS: tuple[str, ...] = ("all-reduce", "all-scatter", "all-gather-gemm", "gemm-reduce-scatter")
#: Kernels whose ranks each hold a K-slice of A and B (the partial products are summed).
K_SLICED: tuple[str, ...] = ("all-reduce", "gemm-reduce-scatter")
DTYPES: tuple[str, ...] = ("bf16", "fp16", "fp32")
DISTRIBUTIONS: tuple[str, ...] = rules.DISTRIBUTIONS
PRODUCTIONS: tuple[str, ...] = ("every-rank", "owner-only")
ORDERS: tuple[str, ...] = ("producers-first", "consumers-first", "last-rank-late")
LOADS: tuple[str, ...] = ("descriptor", "pointer")  # syncverify.kernels.tile.operand_descriptors
#: How a call is launched: one ``fused`` kernel, or the model's split modes
#: (``syncverify.protocols.rules.SPLIT_LAUNCHES``): the producers' part and the others' as two
#: launches of the kernel (``syncverify.kernels.launch.split_launches``).
LAUNCHES: tuple[str, ...] = ("fused",) + rules.SPLIT_LAUNCHES


def model_launches(launches: str) -> str:
    """The model's ``--launches`` for a kernel's: ``fused`` is one kernel per call with a host
    barrier between calls (``host-barrier``); the split modes have the same names.

    >>> model_launches("fused"), model_launches("pdl")
    ('host-barrier', 'pdl')
    """
    return "host-barrier" if launches == "fused" else launches
TMA_BOX_MAX = 256  # elements per dimension of a tensor-descriptor box (sm_90)
MAX_WORLD = rules.KERNEL_MAX_WORLD


@dataclass(frozen=True)
class KernelConfig:
    """One fused GEMM + communication launch.

    Sizes (``m``, ``n``, ``k``) are the whole problem:

    * ``all-reduce``: C is ``m x n``; each rank owns a ``k / world_size`` slice of K, computes the
      partial product of its slice for (every, or its own) tile, and the owner of each tile sums
      the partials of all ranks and writes the sum into every rank's C.
    * ``all-scatter``: C is ``m x n``; each rank computes the column block ``n / world_size`` of C
      (its slice of B) and pushes each finished tile into every rank's copy of C.
    * ``all-gather-gemm``: C is ``m x n``; each rank owns ``m / world_size`` rows of A, sends them
      to every rank, and every rank computes all of C once each shard's tile has arrived.
    * ``gemm-reduce-scatter``: C is ``m x n``; each rank owns a ``k / world_size`` slice of K and
      pushes its partial of each tile to the tile's owner, which sums them into its own C.

    ``gemm_sms``/``comm_sms``/``recv_sms`` are programs per rank (producers / consumers or comm
    programs / all-scatter's receivers); with ``virtual``
    all ranks' programs share one launch on one GPU, each rank with its own heap region.

    ``loads``: how producers read A and B (``descriptor``: ``tl.make_tensor_descriptor``, TMA;
    ``pointer``: plain loads); ``group_m``: tile rows per group of the producers' visiting order
    (``syncverify.kernels.tile.tile_of``; 1 is row-major); ``gemm_only``: launch the producers
    alone (the grid has no consumer programs: the GEMM part of the kernel, timed by ``bench``);
    ``stamps``: iterations per program whose timestamps the launch records (0: none, the shipped
    kernels; ``benchmarks/profile_tail.py`` profiles with it, ``syncverify.kernels.delays.stamp``).

    ``launches``: ``fused`` (one launch of the whole grid), or, as the model's ``--launches`` of
    the same names, the first role's programs (producers; all-gather-gemm's senders) and the
    others as two launches: ``two-stream`` (two streams, concurrent; ``order`` is then the order
    the host issues them: ``consumers-first`` issues the others' launch first, on the GPU too),
    ``pdl`` (one stream, the others a programmatic dependent launch: the producers trigger
    ``griddepcontrol.launch_dependents`` first thing, the others run ``griddepcontrol.wait``
    first thing) and ``pdl-no-wait`` (the same without the wait).
    """

    kernel: str = "all-reduce"
    world_size: int = 2
    m: int = 1024
    n: int = 1024
    k: int = 1024
    block_m: int = 128
    block_n: int = 128
    block_k: int = 64
    gemm_sms: int = 16
    comm_sms: int = 8
    recv_sms: int = 8  # all-scatter's receiver programs per rank
    dtype: str = "bf16"
    distribution: str = "striding"
    production: str = "every-rank"
    lock_dtype: str = "int32"
    num_warps: int = 8
    num_stages: int = 3
    delays: bool = False
    virtual: bool = True
    table: bool = False  # address tables instead of one strided tensor (always with real ranks)
    interpret: bool = False
    order: str = "producers-first"  # program-id layout (syncverify.kernels.steps.program_role)
    loads: str = "descriptor"
    group_m: int = 1
    gemm_only: bool = False
    stamps: int = 0
    launches: str = "fused"

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def k_per_rank(self) -> int:
        return self.k // self.world_size if self.kernel in K_SLICED else self.k

    @property
    def n_per_rank(self) -> int:
        return self.n // self.world_size if self.kernel == "all-scatter" else self.n

    @property
    def m_per_rank(self) -> int:
        """Rows of A one rank owns (all-gather-gemm's shard; the others: all of ``m``)."""
        return self.m // self.world_size if self.kernel == "all-gather-gemm" else self.m

    @property
    def tiles(self) -> int:
        """Tiles each rank produces (all-reduce, gemm-reduce-scatter: tiles of C; all-scatter: of
        its column block; all-gather-gemm: ``block_m``-row tiles of its shard of A)."""
        if self.kernel == "all-gather-gemm":
            return self.m_per_rank // self.block_m
        return (self.m // self.block_m) * (self.n_per_rank // self.block_n)

    def model_layout(self) -> dict:
        """The protocol check's tile layout of this configuration, as
        :class:`syncverify.scenarios.build.ScenarioOptions` fields: its ``tiles``, its
        ``distribution``, and ``ctas``, the programs of each role per rank, among which the roles'
        persistent loops share the tiles (:func:`syncverify.scenarios.build.cta_tiles`;
        ``tests/test_drift.py`` traces it); for all-gather-gemm also ``columns`` (column tiles of C
        per tile) and ``group_m``, the order its GEMM programs take them in when each column tile
        is a unit of work (:func:`syncverify.protocols.rules.unit_visits`). The model takes one number for every role: a
        configuration whose roles have different numbers of programs is refused."""
        programs = {self.gemm_sms, self.comm_sms} | ({self.recv_sms} if self.kernel == "all-scatter" else set())
        if len(programs) != 1:
            raise StressConfigError(f"--gemm-sms {self.gemm_sms}, --comm-sms {self.comm_sms}"
                                    + (f", --recv-sms {self.recv_sms}" if self.kernel == "all-scatter" else "")
                                    + ": the protocol check lays tiles out over one number of programs per role")
        layout = dict(tiles=self.tiles, ctas=programs.pop(), distribution=self.distribution, production=self.production)
        if self.kernel == "all-gather-gemm":  # its GEMM programs' units of work (rules.unit_visits)
            layout |= dict(columns=self.n // self.block_n, group_m=self.group_m)
        return layout

    @property
    def programs_per_rank(self) -> int:
        if self.gemm_only:
            return self.gemm_sms
        return self.gemm_sms + self.comm_sms + (self.recv_sms if self.kernel == "all-scatter" else 0)

    @property
    def grid(self) -> int:
        return self.programs_per_rank * (self.world_size if self.virtual else 1)

    @property
    def grids(self) -> tuple[int, ...]:
        """The grid of each launch of a call: ``(grid,)`` fused; split, the first role's programs
        and the others'."""
        if self.launches == "fused":
            return (self.grid,)
        first = self.gemm_sms * (self.world_size if self.virtual else 1)
        return first, self.grid - first


def _one_of(name: str, value: object, allowed: tuple[str, ...]) -> None:
    one_of(f"--{name}", value, allowed, error=StressConfigError)


def _power_of_two(name: str, value: int, low: int) -> None:
    if value < low or value & (value - 1):
        raise StressConfigError(f"--{name}={value} must be a power of two >= {low}")


def check_config(config: KernelConfig, *, sms: int | None = None, gpus: int | None = None) -> KernelConfig:
    """Refuse a configuration that cannot run, with a message naming the option and the fix.

    Parameters
    ----------
    config : KernelConfig
    sms : int, optional
        Multiprocessors of the GPU: every program must be resident at once (a spinning consumer
        must not hold the SM its producer needs), so the grid may not exceed it.
    gpus : int, optional
        Visible GPUs, for real (non-virtual) ranks.

    Returns
    -------
    KernelConfig
        The same configuration.
    """
    c = config
    _one_of("kernel", c.kernel, KERNELS)
    _one_of("dtype", c.dtype, DTYPES)
    _one_of("distribution", c.distribution, DISTRIBUTIONS)
    _one_of("production", c.production, PRODUCTIONS)
    _one_of("lock-dtype", c.lock_dtype, ("int32", "int8"))
    _one_of("order", c.order, ORDERS)
    _one_of("loads", c.loads, LOADS)
    _one_of("launches", c.launches, LAUNCHES)
    if c.launches != "fused":
        if c.gemm_only:
            raise StressConfigError(f"--launches={c.launches} splits producers from consumers; --gemm-only has none")
        if c.order not in ("producers-first", "consumers-first") or (c.launches != "two-stream"
                                                                     and c.order != "producers-first"):
            raise StressConfigError(f"--order={c.order} with --launches={c.launches}: the order is which launch the "
                                    "host issues first (producers-first; consumers-first with two-stream only: a "
                                    "PDL dependent comes after its primary)")
    if c.stamps < 0:
        raise StressConfigError(f"stamps={c.stamps} must be 0 (off) or the iterations to record per program")
    if c.group_m < 1:
        raise StressConfigError(f"--group-m={c.group_m} must be at least 1")
    if c.order != "producers-first" and not c.interpret and c.launches == "fused":
        raise StressConfigError(
            f"--order={c.order} is an interpreter schedule (the GPU runs programs concurrently); "
            "add --interpret"
        )
    if not 1 <= c.world_size <= MAX_WORLD:
        raise StressConfigError(f"--world-size={c.world_size} must be in 1..{MAX_WORLD}")
    for name in ("m", "n", "k"):
        if getattr(c, name) < 1:
            raise StressConfigError(f"--{name}={getattr(c, name)} must be positive")
    for name in ("block-m", "block-n", "block-k"):
        _power_of_two(name, getattr(c, name.replace("-", "_")), 16)
    _power_of_two("num-warps", c.num_warps, 1)
    for name in ("gemm-sms", "comm-sms", "recv-sms"):
        if getattr(c, name.replace("-", "_")) < 1:
            raise StressConfigError(f"--{name} must be at least 1")
    W = c.world_size
    if c.kernel != "all-reduce" and c.production != "every-rank":
        raise StressConfigError("--production applies to --kernel all-reduce only")
    if c.kernel in K_SLICED:
        if c.k % W:
            raise StressConfigError(f"--k={c.k} does not divide into --world-size={W} slices")
        if c.k_per_rank % c.block_k:
            raise StressConfigError(
                f"each rank's K slice ({c.k} / {W} = {c.k_per_rank}) is not a multiple of "
                f"--block-k={c.block_k}"
            )
    elif c.kernel == "all-gather-gemm":
        if c.m % W:
            raise StressConfigError(f"--m={c.m} does not divide into --world-size={W} row shards of A")
        if c.m_per_rank % c.block_m:
            raise StressConfigError(f"each rank's shard of A ({c.m} / {W} = {c.m_per_rank} rows) is not a "
                                    f"multiple of --block-m={c.block_m}")
        if c.k % c.block_k:
            raise StressConfigError(f"--k={c.k} is not a multiple of --block-k={c.block_k}")
    else:
        if c.n % W:
            raise StressConfigError(f"--n={c.n} does not divide into --world-size={W} column blocks")
        if c.k % c.block_k:
            raise StressConfigError(f"--k={c.k} is not a multiple of --block-k={c.block_k}")
    if c.m % c.block_m:
        raise StressConfigError(f"--m={c.m} is not a multiple of --block-m={c.block_m}")
    if c.n_per_rank % c.block_n:
        what = f"each rank's column block ({c.n} / {W} = {c.n_per_rank})" if c.kernel == "all-scatter" else f"--n={c.n}"
        raise StressConfigError(f"{what} is not a multiple of --block-n={c.block_n}")
    if c.loads == "descriptor":
        _check_descriptor_boxes(c)
    if c.virtual and c.table and c.interpret:
        raise StressConfigError("address tables do not run in the interpreter; drop --table")
    if not c.virtual and c.interpret and not c.table:
        # real ranks in the interpreter (one process each) reach a peer's copy through the table alone
        raise StressConfigError("real ranks in the interpreter address each other's copies through tables: "
                                "add --table, or run virtual ranks")
    if not c.virtual and gpus is not None and W > gpus:
        raise StressConfigError(
            f"--world-size={W} needs {W} GPUs and {gpus} are visible; use --virtual-ranks to run "
            f"all ranks on one GPU"
        )
    if sms is not None and not c.interpret and c.grid > sms:
        if c.gemm_only:
            raise StressConfigError(f"{c.gemm_sms} producer programs per rank x {W} = {c.grid} exceeds "
                                    f"the {sms} SMs; lower --gemm-sms")
        per = f" x {W} virtual ranks" if c.virtual else ""
        recv = f" + {c.recv_sms}" if c.kernel == "all-scatter" else ""
        raise StressConfigError(
            f"{c.gemm_sms} + {c.comm_sms}{recv} programs per rank{per} = {c.grid} programs exceeds the "
            f"{sms} SMs: every program must be resident at once (a spinning consumer could hold "
            f"the SM its producer needs); lower --gemm-sms/--comm-sms/--recv-sms"
        )
    return c


def _check_descriptor_boxes(c: KernelConfig) -> None:
    """Tensor-descriptor (TMA) limits: a box dimension is at most 256 elements. (Rows of A and B
    also start 16-byte aligned: each rank's K and N are multiples of a power-of-two tile of at
    least 16 elements, so that always holds here.)"""
    for name in ("block-m", "block-n", "block-k"):
        value = getattr(c, name.replace("-", "_"))
        if value > TMA_BOX_MAX:
            raise StressConfigError(f"--{name}={value} exceeds the {TMA_BOX_MAX} elements a tensor-descriptor "
                                    f"box may span; use a smaller tile or --loads pointer")
