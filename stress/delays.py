"""Seeded, reproducible delays: where they go, and the host mirror of the kernels' delay hash.

A delay is drawn per (site, rank, tile, iteration) from ``(seed, site, rank, tile, iteration)``
by :func:`delay_hash` (the same function runs in the kernels as ``syncverify.kernels.delays.delay_hash``), so
a failure's seed and iteration replay the same delays, and :func:`delays_at` prints them.

Sites (PLATFORM.md: a missing CTA barrier shows on an H200 only when the warps that do not run the
one-thread signal are late):

==================  ========  ============================================================
site                who       what it exposes
==================  ========  ============================================================
``before-store``    per warp  warps storing their part of the tile after the signal (no barrier)
``store-signal``    CTA       the signal arriving late (consumers polling longer)
``before-wait``     CTA       consumers arriving late (locks already set, or not yet reset)
``wait-read``       per warp  warps reading the tile long after the one thread that acquired
``before-reset``    host      the racing lock reset landing late (``--reset host-racing``)
==================  ========  ============================================================

``mode="guided"``: no draw of ranks and warps; each (site, rank) of a :class:`GuidedDelay` table
(built from a model counterexample by ``syncverify.stress.guided``) says which warps sleep, how
long (a range) and how often; the kernels read the same table (``syncverify.kernels.delays``).

``sites`` restricts the delays to some of these (``--delay-sites before-store,store-signal``):
the kernels receive them as a bit mask (bit ``SITES[name]``) and skip the others' sleeps.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

SITES: dict[str, int] = {
    "before-store": 1,
    "store-signal": 2,
    "before-wait": 3,
    "wait-read": 4,
    "before-reset": 5,
}
PER_WARP_SITES = ("before-store", "wait-read")
ALL_SITES: tuple[str, ...] = tuple(SITES)
MODES = ("none", "random", "guided")
_MASK = 0xFFFFFFFF


def parse_sites(text: str) -> tuple[str, ...]:
    """``"all"`` or a comma-separated list of site names, as a tuple in :data:`SITES` order.

    Raises ``ValueError`` naming an unknown site."""
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names or names == ["all"]:
        return ALL_SITES
    unknown = [n for n in names if n not in SITES]
    if unknown:
        raise ValueError(f"unknown delay site(s) {', '.join(unknown)}; known: all, {', '.join(SITES)}")
    return tuple(n for n in SITES if n in names)


def mix32(h: int) -> int:
    """The kernels' 32-bit finalizer (``syncverify.kernels.delays.mix32``)."""
    h = ((h ^ (h >> 16)) * 73244475) & _MASK
    h = ((h ^ (h >> 16)) * 73244475) & _MASK
    return h ^ (h >> 16)


def delay_hash(seed: int, site: int, rank: int, tile: int, iteration: int) -> int:
    """``syncverify.kernels.delays.delay_hash`` on the host."""
    h = seed & _MASK
    for x in (site, rank, tile, iteration):
        h = mix32(h ^ (x & _MASK))
    return h


@dataclass(frozen=True)
class GuidedDelay:
    """One entry of a guided schedule: at ``site``, rank ``rank``'s programs sleep
    ``[ns_lo, ns_hi]`` ns in ``pct`` % of (tile, iteration) keys; at a per-warp site only the
    warps in ``warps`` (bit w = warp w; 0 = a hashed subset, as random delays)."""

    site: str
    rank: int
    ns_lo: int
    ns_hi: int
    warps: int = 0
    pct: int = 100

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class DelayConfig:
    """``pct`` % of (site, rank, tile, iteration) keys sleep a uniform ``[0, max_ns)``, at the
    sites in ``sites`` only; ``mode="guided"``: what ``table`` says per (site, rank) instead."""

    mode: str = "none"
    seed: int = 0
    pct: int = 50
    max_ns: int = 4000
    sites: tuple[str, ...] = ALL_SITES
    table: tuple[GuidedDelay, ...] = ()

    def entry(self, site: str, rank: int) -> GuidedDelay | None:
        """The guided entry of (site, rank), if the table has one."""
        return next((e for e in self.table if e.site == site and e.rank == rank), None)

    @property
    def kernel_pct(self) -> int:
        """The kernels' ``delay_pct``: -1 selects the guided table, 0 disables."""
        return -1 if self.mode == "guided" else (self.pct if self.enabled else 0)

    @property
    def site_mask(self) -> int:
        """The kernels' ``delay_sites`` argument: bit ``SITES[name]`` for each site in ``sites``."""
        return sum(1 << SITES[name] for name in self.sites)

    @property
    def enabled(self) -> bool:
        return self.mode in ("random", "guided")

    def to_dict(self) -> dict:
        return asdict(self)

    def ns(self, site: str, rank: int, tile: int, iteration: int) -> int:
        """The delay the kernels draw at ``site`` (0 when disabled)."""
        if not self.enabled or site not in self.sites:
            return 0
        h = delay_hash(self.seed, SITES[site], rank, tile, iteration)
        if self.mode == "guided":
            e = self.entry(site, rank)
            if e is None:
                return 0
            return e.ns_lo + (h >> 8) % max(e.ns_hi - e.ns_lo + 1, 1) if h % 100 < e.pct else 0
        return (h >> 8) % max(self.max_ns, 1) if h % 100 < self.pct else 0

    def warp_mask(self, site: str, rank: int, tile: int, iteration: int, num_warps: int) -> int:
        """Which warps sleep at a per-warp site (bit w = warp w)."""
        h = delay_hash(self.seed, SITES[site] + 16, rank, tile, iteration)
        e = self.entry(site, rank) if self.mode == "guided" else None
        if e is not None and e.warps:
            h = e.warps
        return h & ((1 << num_warps) - 1)

    def table_rows(self) -> list[tuple[int, int, int, int, int, int]]:
        """``(site number, rank, ns_lo, ns_hi, warps, pct)`` of every guided entry: the kernels'
        table (``syncverify.kernels.delays.TABLE_SHAPE``)."""
        return [(SITES[e.site], e.rank, e.ns_lo, e.ns_hi, e.warps, e.pct) for e in self.table]


PRODUCER_SITES = ("before-store", "store-signal")
CONSUMER_SITES = ("before-wait", "wait-read")


def delays_at(config: DelayConfig, *, rank: int, tile: int, iteration: int, num_warps: int,
              sites: tuple[str, ...] = PRODUCER_SITES + CONSUMER_SITES) -> dict:
    """Every site's delay (of ``sites``) for one (rank, tile, iteration), for a failure report."""
    out = {}
    for site in sites:
        if site == "before-reset":
            continue
        entry = {"ns": config.ns(site, rank, tile, iteration)}
        if site in PER_WARP_SITES:
            entry["warps"] = config.warp_mask(site, rank, tile, iteration, num_warps)
        out[site] = entry
    return out


def delay_table(config: DelayConfig, device):
    """The kernels' guided table for ``config`` (int32 ``syncverify.kernels.delays.TABLE_SHAPE`` on
    ``device``; all zero unless ``config`` is guided). Imports torch: GPU and interpreter only."""
    # torch/triton: syncverify.kernels._deps imports them; only the GPU path needs it
    from syncverify.kernels._deps import torch
    from syncverify.kernels.delays import TABLE_SHAPE

    table = torch.zeros(TABLE_SHAPE, dtype=torch.int32)
    TABLE_RANKS = TABLE_SHAPE[1]
    for site, rank, lo, hi, warps, pct in config.table_rows() if config.mode == "guided" else ():
        if rank >= TABLE_RANKS:
            raise ValueError(f"guided delay for rank {rank}: the kernels' table holds ranks 0..{TABLE_RANKS - 1}")
        # int32 two's complement for a full 32-warp mask
        table[site, rank] = torch.tensor([lo, hi, warps - (1 << 32) if warps >= 1 << 31 else warps, pct])
    return table.to(device)
