"""The two kernel scenarios: a protocol plugged into an abstract fused kernel, as a :class:`Program`.

``all-reduce`` (seed 000, one-shot all-reduce GEMM): for each tile, every rank's producer CTA
stores its partial into its ``local_C`` (ghost data, one location per thread's slice) and runs the
protocol's ``signal`` steps; the consumer CTA on the tile's owner rank runs the ``wait`` steps and
reads the partials of all ranks. ``production = owner-only`` (the seed's distribution bug): only
the owner produces, the consumer still reads every rank's partial.

``all-scatter`` (seed 001, GEMM + all-scatter with workgroup specialization): for each tile, each
rank's GEMM CTA stores its tile of C and signals (stage ``pub``); that rank's communication CTA
waits, reads the tile and pushes it into every peer's copy of C, then signals again (stage
``push``); a receiving CTA on each rank waits on the ``push`` lock and reads the pushed copies.

Both use the protocol data directly: the steps are lowered by :mod:`syncverify.lowering` and
nothing here describes a protocol a second time. Epochs (kernel iterations, from 0) are separated
by host barriers; ``reset`` says what the host does to the locks between them.

Reductions (each can be turned off with ``symmetry=False``, to measure what it buys):

* *tiles*: tiles use disjoint locks and data and one CTA each, so every tile is a renaming of
  tile 0 (``owner(t)`` maps to rank 0): only tile 0 is built;
* *slicing*: a lock copy that no consumer of the built program polls is never read; the signal
  writes to it are left out;
* *ranks*: with ``production = every-rank``, the ranks other than the consumer's are the same code
  up to their rank id; they form one symmetry group (``Program.symmetry``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from syncverify.errors import ScenarioError, UnsupportedConstruct
from syncverify.lowering import ONE, lower_step
from syncverify.program import Atomic, Barrier, Branch, Fence, Label, Load, Program, Store, Thread

SCENARIOS = ("all-reduce", "all-scatter")
PRODUCTIONS = ("every-rank", "owner-only")
DISTRIBUTIONS = ("striding", "block")
RESETS = ("none", "host-between-barriers", "host-racing")
MAX_WORLD_SIZE = 64


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

    def validated(self, protocol) -> "ScenarioOptions":
        """Check every option (one-line :class:`ScenarioError`) and fill in the reset policy."""
        def one_of(name: str, value: str, allowed: tuple[str, ...]) -> None:
            if value not in allowed:
                raise ScenarioError(f"{name}={value!r} is not one of {', '.join(map(repr, allowed))}")

        one_of("scenario", self.scenario, SCENARIOS)
        one_of("production", self.production, PRODUCTIONS)
        one_of("distribution", self.distribution, DISTRIBUTIONS)
        if not 1 <= self.world_size <= MAX_WORLD_SIZE:
            raise ScenarioError(f"world size {self.world_size} is out of range: use 1 to {MAX_WORLD_SIZE}")
        if self.tiles < 1:
            raise ScenarioError(f"tiles={self.tiles}: a scenario needs at least 1 tile")
        if self.epochs < 1:
            raise ScenarioError(f"epochs={self.epochs}: a scenario needs at least 1 epoch")
        if not 1 <= self.threads_per_cta <= 8:
            raise ScenarioError(f"threads per CTA {self.threads_per_cta} is out of range: use 1 to 8 (2 shows barrier bugs)")
        if self.production == "owner-only" and self.scenario != "all-reduce":
            raise ScenarioError("production='owner-only' applies to the all-reduce scenario only")
        reset = self.reset
        if reset is None:
            reset = "host-between-barriers" if protocol.reset == "host" else "none"
        one_of("reset", reset, RESETS)
        return replace(self, reset=reset)


@dataclass
class ThreadInfo:
    """Who a thread of the program is, for counterexamples."""

    rank: int
    cta: str
    thread: int
    role: str
    epoch: int | None


@dataclass
class Scenario:
    """A built scenario: the program and what each thread is."""

    program: Program
    options: ScenarioOptions
    protocol: object
    threads: list[ThreadInfo] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def owner(tile: int, opts: ScenarioOptions) -> int:
    """The rank that consumes (reduces) a tile: round-robin (striding) or contiguous blocks."""
    if opts.distribution == "striding":
        return tile % opts.world_size
    return tile // math.ceil(opts.tiles / opts.world_size)


def targets(to: str | None, rank: int, tile: int, opts: ScenarioOptions) -> list[int]:
    """The ranks whose copy of a lock a signal step writes (``to``)."""
    ranks = range(opts.world_size)
    if to in (None, "self"):
        return [rank]
    if to == "all":
        return list(ranks)
    if to == "others":
        return [q for q in ranks if q != rank]
    if to == "owner":
        return [owner(tile, opts)]
    raise UnsupportedConstruct(f"to={to!r} cannot be modeled")


def lock_loc(lock: str | None, stage: str, rank: int, tile: int) -> str:
    return f"{lock or 'ready'}{stage}.r{rank}.t{tile}"


class _Builder:
    """Turns protocol steps into instructions for one CTA thread."""

    def __init__(self, protocol, opts: ScenarioOptions, needed_locks: set[str] | None) -> None:
        self.protocol = protocol
        self.opts = opts
        self.needed = needed_locks  # None: every lock copy is kept (no slicing)
        self.labels = 0

    def fresh(self, stem: str) -> str:
        self.labels += 1
        return f"{stem}{self.labels}"

    def signal(self, rank: int, tile: int, thread: int, stage: str) -> list:
        out: list = []
        for n, step in enumerate(self.protocol.signal, 1):
            where = f"signal step {n} ({step.op})"
            for low in lower_step(step):
                if low.threads == ONE and thread != 0:
                    continue
                if low.kind == "bar":
                    out.append(Barrier("sync", 0, label=where))
                elif low.kind == "fence":
                    out.append(Fence(low.sem, low.scope, label=where))
                elif low.kind in ("st", "atom"):
                    value = step.value.evaluate(world_size=self.opts.world_size, epoch=self._epoch)
                    for q in targets(step.to, rank, tile, self.opts):
                        loc = lock_loc(step.lock, stage, q, tile)
                        if self.needed is not None and loc not in self.needed:
                            continue  # sliced: no consumer in this program polls that copy
                        text = f"{where} -> rank {q}"
                        if low.kind == "st":
                            sem = low.sem if low.sem in ("relaxed", "release") else "weak"
                            out.append(Store(loc, value, sem, low.scope if sem != "weak" else None, label=text))
                        else:
                            out.append(Atomic(low.op, "rs", loc, (value,), low.sem, low.scope, label=text))
                else:
                    raise UnsupportedConstruct(f"{where}: the model cannot place a '{low.kind}' in a signal")
        return out

    def wait(self, rank: int, tile: int, thread: int, stage: str) -> list:
        out: list = []
        for n, step in enumerate(self.protocol.wait, 1):
            where = f"wait step {n} ({step.op})"
            lowered = lower_step(step)
            sources = [rank] if step.from_ in (None, "self") else list(range(self.opts.world_size))
            if step.op == "await":
                poll = lowered[0]
                for src in sources:
                    loc = lock_loc(step.lock, stage, src, tile)
                    if poll.threads == ONE and thread != 0:
                        continue
                    label = self.fresh("L")
                    reg = "rw"
                    out.append(Label(label))
                    text = f"{where}: poll {loc} until {step.until}"
                    if poll.kind == "ld":
                        sem = "relaxed" if poll.sem == "volatile" else poll.sem
                        out.append(Load(reg, loc, sem, poll.scope if sem != "weak" else None, label=text))
                    else:
                        env = dict(world_size=self.opts.world_size, epoch=self._epoch)
                        operands = ((step.compare.evaluate(**env), step.value.evaluate(**env)) if poll.op == "cas"
                                    else (step.value.evaluate(**env),))
                        out.append(Atomic(poll.op, reg, loc, operands, poll.sem, poll.scope, label=text))
                    out.extend(self._loop_back(step.until, reg, label))
                for low in lowered[1:]:  # the bar.sync that broadcasts a one-thread poll
                    out.append(Barrier("sync", 0, label=f"{where}: broadcast"))
                continue
            for low in lowered:
                if low.threads == ONE and thread != 0:
                    continue
                if low.kind == "bar":
                    out.append(Barrier("sync", 0, label=where))
                elif low.kind == "fence":
                    out.append(Fence(low.sem, low.scope, label=where))
                elif low.kind == "atom" and step.op == "atomic_cas":
                    env = dict(world_size=self.opts.world_size, epoch=self._epoch)
                    for src in sources:
                        out.append(Atomic("cas", "rc", lock_loc(step.lock, stage, src, tile),
                                          (step.compare.evaluate(**env), step.value.evaluate(**env)),
                                          low.sem, low.scope, label=where))
                else:
                    raise UnsupportedConstruct(f"{where}: the model cannot place a '{low.kind}' in a wait")
        return out

    def _loop_back(self, until, reg: str, label: str) -> list:
        target = until.target(world_size=self.opts.world_size, epoch=self._epoch)
        # Loop back while the exit condition does not hold.
        back = {"==": ("ne", target), "!=": ("eq", target), ">=": ("lt", target), ">": ("lt", target + 1),
                "<=": ("ge", target + 1), "<": ("ge", target)}
        if until.op not in back:
            raise UnsupportedConstruct(f"until operator {until.op!r}")
        cond, value = back[until.op]
        return [Branch(label, cond, reg, value)]

    _epoch = 0


def build(protocol, opts: ScenarioOptions) -> Scenario:
    """The program of ``protocol`` in the scenario ``opts`` (validated first)."""
    opts = opts.validated(protocol)
    if opts.scenario == "all-reduce":
        return _all_reduce(protocol, opts)
    return _all_scatter(protocol, opts)


def _tiles(opts: ScenarioOptions) -> list[int]:
    return [0] if opts.symmetry else list(range(opts.tiles))


def _cta_numbering(builder: "_Builder"):
    """``cta(rank, name)``: one number per CTA of the program, in order of first use. Each epoch is
    a launch of its own, so its CTAs are new ones (a CTA barrier never spans two launches)."""
    ids: dict[tuple[int, str], int] = {}

    def cta(rank: int, name: str) -> int:
        return ids.setdefault((rank, f"{name} epoch {builder._epoch}"), len(ids))

    return cta


def _all_reduce(protocol, opts: ScenarioOptions) -> Scenario:
    W, n = opts.world_size, opts.threads_per_cta
    tiles = _tiles(opts)
    consumers = {t: owner(t, opts) for t in tiles}
    polled = {lock_loc(s.lock, "", src, t) for t, c in consumers.items() for s in protocol.wait
              if s.op in ("await", "atomic_cas")
              for src in ([c] if s.from_ in (None, "self") else range(W))}
    builder = _Builder(protocol, opts, polled if opts.symmetry else None)
    threads: list[Thread] = []
    info: list[ThreadInfo] = []
    units: dict[int, list[int]] = {}
    cta = _cta_numbering(builder)

    for epoch in range(opts.epochs):
        builder._epoch = epoch
        for t in tiles:
            producers = range(W) if opts.production == "every-rank" else [owner(t, opts)]
            for q in producers:
                for i in range(n):
                    code = [Store(f"data.r{q}.t{t}.s{i}", epoch + 1, ghost=True, label="tile store")]
                    code += builder.signal(q, t, i, "")
                    role = f"rank {q} producer tile {t} epoch {epoch} thread {i}"
                    threads.append(Thread(f"P{len(threads)}", q, cta(q, f"prod{t}"), tuple(code), role, f"e{epoch}"))
                    info.append(ThreadInfo(q, f"producer of tile {t}", i, role, epoch))
                    if q != consumers[t] and len(tiles) == 1:
                        units.setdefault(q, []).append(len(threads) - 1)
            c = consumers[t]
            for i in range(n):
                code = builder.wait(c, t, i, "")
                for q in range(W):
                    code.append(Load(f"rd{q}", f"data.r{q}.t{t}.s{i}", "relaxed" if protocol.tile_load.volatile else "weak",
                                     "sys" if protocol.tile_load.volatile else None, ghost=True,
                                     label=f"tile load: rank {q}'s partial"))
                role = f"rank {c} consumer tile {t} epoch {epoch} thread {i}"
                threads.append(Thread(f"P{len(threads)}", c, cta(c, f"cons{t}"), tuple(code), role, f"e{epoch}"))
                info.append(ThreadInfo(c, f"consumer of tile {t}", i, role, epoch))
    return _finish(protocol, opts, threads, info, cta, units if opts.production == "every-rank" else {})


def _all_scatter(protocol, opts: ScenarioOptions) -> Scenario:
    W, n = opts.world_size, opts.threads_per_cta
    tiles = _tiles(opts)
    receivers = [0] if opts.symmetry else list(range(W))
    polled: set[str] = set()
    for t in tiles:
        for s in (s for s in protocol.wait if s.op in ("await", "atomic_cas")):
            for r in range(W):
                for src in ([r] if s.from_ in (None, "self") else range(W)):
                    polled.add(lock_loc(s.lock, "@pub", src, t))
            for c in receivers:
                for src in ([c] if s.from_ in (None, "self") else range(W)):
                    polled.add(lock_loc(s.lock, "@push", src, t))
    builder = _Builder(protocol, opts, polled if opts.symmetry else None)
    threads: list[Thread] = []
    info: list[ThreadInfo] = []
    units: dict[int, list[int]] = {}
    cta = _cta_numbering(builder)

    def add(rank: int, cta_name: str, i: int, code: list, role: str, epoch: int, unit: int | None) -> None:
        threads.append(Thread(f"P{len(threads)}", rank, cta(rank, cta_name), tuple(code), role, f"e{epoch}"))
        info.append(ThreadInfo(rank, cta_name, i, role, epoch))
        if unit is not None:
            units.setdefault(unit, []).append(len(threads) - 1)

    for epoch in range(opts.epochs):
        builder._epoch = epoch
        for t in tiles:
            for r in range(W):
                unit = r if (len(tiles) == 1 and len(receivers) == 1 and r != receivers[0]) else None
                for i in range(n):
                    code = [Store(f"C.r{r}.t{t}.s{i}", epoch + 1, ghost=True, label="tile store (GEMM)")]
                    code += builder.signal(r, t, i, "@pub")
                    add(r, f"gemm{t}", i, code, f"rank {r} GEMM CTA tile {t} epoch {epoch} thread {i}", epoch, unit)
                for i in range(n):
                    code = builder.wait(r, t, i, "@pub")
                    code.append(Load("rt", f"C.r{r}.t{t}.s{i}", "relaxed" if protocol.tile_load.volatile else "weak",
                                     "sys" if protocol.tile_load.volatile else None, ghost=True,
                                     label="tile load (comm CTA)"))
                    for p in range(W):
                        if p != r:
                            code.append(Store(f"C.r{p}.from{r}.t{t}.s{i}", epoch + 1, ghost=True,
                                              label=f"push tile to rank {p}"))
                    code += builder.signal(r, t, i, "@push")
                    add(r, f"comm{t}", i, code, f"rank {r} comm CTA tile {t} epoch {epoch} thread {i}", epoch, unit)
            for c in receivers:
                for i in range(n):
                    code = builder.wait(c, t, i, "@push")
                    for q in range(W):
                        if q != c:
                            code.append(Load(f"rp{q}", f"C.r{c}.from{q}.t{t}.s{i}", "weak", None, ghost=True,
                                             label=f"read tile pushed by rank {q}"))
                    add(c, f"recv{t}", i, code, f"rank {c} receiver tile {t} epoch {epoch} thread {i}", epoch, None)
    return _finish(protocol, opts, threads, info, cta, units)


def _finish(protocol, opts: ScenarioOptions, threads: list[Thread], info: list[ThreadInfo], cta,
            units: dict[int, list[int]]) -> Scenario:
    """Add the host's lock resets between epochs and the rank symmetry group; build the Scenario."""
    lock_locs = sorted({ins.loc for th in threads for ins in th.instructions
                        if not getattr(ins, "ghost", False) and getattr(ins, "loc", None)})
    host_order, resets = _resets(opts, lock_locs)
    for rank, locs, phase, epoch in resets:
        code = tuple(Store(loc, 0, label="host reset (memset)") for loc in locs)
        threads.append(Thread(f"P{len(threads)}", rank, cta(rank, f"reset{epoch}"), code,
                              f"host reset of rank {rank}'s locks after epoch {epoch}", phase))
        info.append(ThreadInfo(rank, "host reset", 0, f"host reset after epoch {epoch}", None))
    symmetry = ()
    if opts.symmetry and len(units) > 1:
        symmetry = (tuple(tuple(u) for _q, u in sorted(units.items())),)
    program = Program(f"{protocol.name}/{opts.scenario}/W{opts.world_size}", tuple(threads),
                      host_order=host_order, symmetry=symmetry, observed_registers=frozenset())
    return Scenario(program, opts, protocol, info, _notes(opts, symmetry))


def _resets(opts: ScenarioOptions, lock_locs: list[str]) -> tuple[tuple, list]:
    """Host order between epochs and the host reset threads the policy adds."""
    order: list[tuple[str, str]] = []
    resets = []
    for e in range(opts.epochs - 1):
        if opts.reset == "none":
            order.append((f"e{e}", f"e{e + 1}"))
            continue
        by_rank: dict[int, list[str]] = {}
        for loc in lock_locs:
            rank = int(loc.split(".r")[1].split(".")[0])
            by_rank.setdefault(rank, []).append(loc)
        for rank, locs in sorted(by_rank.items()):
            resets.append((rank, locs, f"reset{e}", e))
        order.append((f"e{e}", f"reset{e}"))
        if opts.reset == "host-between-barriers":
            order.append((f"reset{e}", f"e{e + 1}"))
        else:  # host-racing: the clear is on another stream, unordered with the next launch
            order.append((f"e{e}", f"e{e + 1}"))
    return tuple(order), resets


def _notes(opts: ScenarioOptions, symmetry: tuple) -> list[str]:
    notes = []
    if opts.symmetry and opts.tiles > 1:
        notes.append(f"tiles: {opts.tiles} tiles are renamings of tile 0 (disjoint locks and data); tile 0 is checked")
    if opts.symmetry and opts.tiles > 1 and opts.production == "owner-only":
        notes.append(f"distribution={opts.distribution} changes which rank owns a tile, not what happens to it")
    if symmetry:
        notes.append(f"ranks: {len(symmetry[0])} interchangeable ranks explored as one symmetry group")
    return notes
