"""The model's program and the Triton kernel, brought to one shape so that they can be compared.

Both sides become, for each ``(role, rank, tile, epoch)``, the ordered list of :class:`Op`:
``(kind, op, sem, scope, where, threads, operands)``, where ``where`` names a lock (name, stage,
whose copy, tile) or a data buffer (name, whose copy, whose column block, tile) and ``threads``
says whether one thread or every thread of the CTA executes it.

* model side (:func:`model_ops`): the scenario's threads with their origins (role, rank, tile,
  epoch, thread: :class:`~syncverify.program.ThreadOrigin`) and locations
  (:class:`~syncverify.scenarios.build.Location`); thread 0
  and thread 1 of a CTA give ``one``/``all`` (an operation thread 1 also executes is ``all``);
  labels and branches are dropped, the branch's exit condition kept as a note on its poll.
* kernel side (:func:`kernel_ops`): a :class:`syncverify.kernels.trace.Recorder` log, grouped
  by program id (-> role and rank, :class:`KernelSide`) and by the tile each access names
  (a barrier or fence goes with the next access's tile). Triton's lowering facts
  (``syncverify.protocols.lowering``) turn primitives into what the model executes: a block access runs on
  every thread, a scalar store or atomic on one, a scalar load on every thread; a volatile load
  is relaxed at sys scope; ``atomic_add`` of a literal 0 with sem relaxed/acquire is a load; an
  atomic whose result is used is followed by a ``bar.sync``; a fence helper's ``sem`` becomes
  the PTX fence kind (:func:`syncverify.protocols.lowering.fence_kind`).
* on both sides a poll loop becomes one poll: consecutive repeats of a read (with its
  ``bar.sync``) are collapsed (:func:`collapse_polls`). The kernel's last value read must satisfy
  the model's exit condition (checked by :func:`compare`).

Not compared: tile data *values* (only which buffer, copy, block and tile), the value a weak
tile store writes, the host's lock resets (model host threads; the kernel runner's memsets), the
kernel's accesses to memory the model does not have (inputs A/B, run-time operands, status rows).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from syncverify.protocols import rules
from syncverify.protocols.lowering import DOT_LABEL, DOT_MARK, barrier_split, fence_kind
from syncverify.program import Atomic, Barrier, Branch, Fence, Label, Load, Store
from syncverify.kernels.build import build
from syncverify.kernels.config import KernelConfig
from syncverify.kernels.registry import allocate, launch_function
from syncverify.protocols.registry import load_protocol

Key = tuple  # (role, rank, tile, epoch)


@dataclass(frozen=True)
class Where:
    """A lock copy (``lock=True``) or a tile of a data buffer's copy."""

    lock: bool
    name: str
    stage: str
    copy: int
    block: int | None
    tile: int

    def __str__(self) -> str:
        if self.lock:
            return f"lock {self.name}{'@' + self.stage if self.stage else ''} of rank {self.copy}"
        block = "" if self.block is None else f" block {self.block}"
        return f"{self.name} of rank {self.copy}{block}"


@dataclass(frozen=True)
class Op:
    """One normalized operation of a role (what is compared) and notes (what is not)."""

    kind: str  # ld st atom fence bar
    op: str = ""  # atom: add exch cas
    sem: str = ""
    scope: str | None = None
    where: Where | None = None
    threads: str = "all"  # one | all
    operands: tuple = ()
    until: tuple | None = field(default=None, compare=False)  # model poll: loop back while (cond, value)
    seen: int | None = field(default=None, compare=False)  # kernel: last value a read returned
    label: str = field(default="", compare=False)  # model barrier: its step (to find every thread's part)

    @property
    def tile(self) -> int | None:
        return None if self.where is None else self.where.tile

    def __str__(self) -> str:
        if self.kind == "bar":  # bar.sync ID cta, and what each warp does at a warp-selected barrier
            text = f"bar.sync {self.op} {self.scope}" + (f" [{self.sem}]" if self.sem else "")
        else:
            head = self.kind + (f".{self.op}" if self.op else "")
            sem = ".".join(s for s in (self.sem, self.scope) if s)
            text = f"{head} {sem}".rstrip()
        if self.where is not None:
            text += f" {self.where}"
        if self.operands:
            text += f" {list(self.operands)}"
        return f"{text} ({self.threads} thread{'s' if self.threads == 'all' else ''})"


def _reads(op: Op) -> bool:
    return op.kind == "ld" or (op.kind == "atom" and op.op in ("add", "cas"))


def collapse_polls(ops: list[Op]) -> list[Op]:
    """A poll loop's repetitions as one poll: consecutive repeats of a read, or of a read and the
    ``bar.sync`` after it, are kept once (the last repetition's ``seen``)."""
    out: list[Op] = []
    for op in ops:
        if out and _reads(op) and out[-1] == op:
            out[-1] = op
            continue
        if (op.kind == "bar" and len(out) >= 3 and out[-1] == out[-3] and _reads(out[-1])
                and out[-2] == op):
            out[-2] = out.pop()  # [read, bar, read] + bar -> [read (last seen), bar]
            continue
        out.append(op)
    return out


# ----- model side ----------------------------------------------------------------------------

def _where(locations: dict, loc: str, lock: bool) -> Where:
    """The model location ``loc`` (:attr:`syncverify.scenarios.build.Scenario.locations`) as a :class:`Where`."""
    if loc not in locations:
        raise ValueError(f"model location {loc!r} is neither a lock_loc nor a tile_loc")
    at = locations[loc]
    return Where(lock, at.slotted_name, at.stage, at.copy, at.block, at.tile)


def _model_seq(instructions, locations: dict) -> list[Op]:
    out: list[Op] = []
    for ins in instructions:
        if isinstance(ins, Label):
            continue
        if isinstance(ins, Branch):
            out[-1] = Op(**{**out[-1].__dict__, "until": (ins.cond, ins.rhs)})
        elif isinstance(ins, Load):
            out.append(Op("ld", "", ins.sem, ins.scope, _where(locations, ins.loc, not ins.ghost)))
        elif isinstance(ins, Store):
            operands = () if ins.ghost else (ins.value,)
            out.append(Op("st", "", ins.sem, ins.scope, _where(locations, ins.loc, not ins.ghost), operands=operands))
        elif isinstance(ins, Atomic):
            out.append(Op("atom", ins.op, ins.sem, ins.scope, _where(locations, ins.loc, True),
                          operands=tuple(ins.operands)))
        elif isinstance(ins, Fence):
            out.append(Op("fence", "", ins.kind, ins.scope))
        elif isinstance(ins, Barrier):
            # The barrier's id; its count is in the model's threads, checked by the PTX audit. Which
            # threads sync or arrive is filled in from every thread of the CTA (_warp_parts).
            out.append(Op("bar", str(ins.barrier_id), "", "cta", label=ins.label))
        else:
            raise ValueError(f"no normal form for model instruction {ins!r}")
    return out


def model_ops(scenario) -> dict[Key, list[Op]]:
    """``(role, rank, tile, epoch) -> ops`` of a scenario built with ``symmetry=False``."""
    threads: dict[Key, dict[int, list[Op]]] = {}
    raw: dict[Key, dict[int, tuple]] = {}
    for thread in scenario.program.threads:
        origin = thread.role  # a ThreadOrigin: the scenario builder made it
        if origin.is_host_reset:
            continue  # not compared
        key = (origin.role, origin.rank, origin.tile, origin.epoch)
        threads.setdefault(key, {})[origin.thread] = _model_seq(thread.instructions, scenario.locations)
        raw.setdefault(key, {})[origin.thread] = thread.instructions
    out: dict[Key, list[Op]] = {}
    per_cta = scenario.options.threads_per_cta
    for key, by_thread in threads.items():
        first, second = by_thread[0], by_thread.get(1)
        ops, j = [], 0
        for op in first:
            both = second is None or (j < len(second) and second[j] == op)
            j += both and second is not None
            if op.kind == "bar":  # a barrier runs on every thread of the warps it selects; a dot's is marked
                parts = DOT_MARK if op.label == DOT_LABEL else _warp_parts(raw[key], op.label, per_cta)
                op = Op(**{**op.__dict__, "sem": parts})
            ops.append(Op(**{**op.__dict__, "threads": "all" if both or op.kind == "bar" else "one"}))
        if second is not None and j != len(second):
            raise ValueError(f"{key}: thread 1 runs {second[j]} that thread 0 does not")
        out[key] = collapse_polls(ops)
    return out


def _warp_parts(instructions: dict[int, tuple], label: str, threads_per_cta: int) -> str:
    """What the warps do at the barrier step ``label``, from every model thread of the CTA
    (``syncverify.protocols.lowering.barrier_split``): each model thread stands for its warps
    (``syncverify.protocols.rules.model_warps``) and syncs, arrives, or skips the step."""
    parts: dict[str, list[int]] = {"sync": [], "arrive": []}
    for thread, code in instructions.items():
        kind = next((ins.kind for ins in code if isinstance(ins, Barrier) and ins.label == label), None)
        if kind is not None:
            parts[kind] += rules.model_warps(thread, threads_per_cta)
    return barrier_split(tuple(parts["sync"]), tuple(parts["arrive"]))


# ----- kernel side ---------------------------------------------------------------------------

@dataclass(frozen=True)
class KernelSide:
    """How to read a kernel's trace: its program-id layout and its buffers.

    ``roles``: ``(role, programs per rank)`` in program-id order, rank-major within a role
    (``producers-first``); ``locks``: lock buffer -> (lock stage, lock names in index order);
    ``data``: data buffer -> the model's buffer name; ``wide``: data buffers whose rows hold one
    column block per rank (all-scatter's ``out``).
    """

    roles: tuple[tuple[str, int], ...]
    locks: dict
    data: dict
    block_m: int
    block_n: int
    columns: dict  # data buffer -> row length (elements)
    block_columns: int  # columns of one rank's block (wide buffers)
    wide: frozenset = frozenset()
    tiles: int = 1
    slots: int = 1  # protocol slots: lock array slot * len(names) + lock, data rows slot * rows ..
    rows: int = 0  # rows of one slot of a slotted data buffer (``slotted``)
    slotted: frozenset = frozenset()
    #: data buffer -> rows of one shard: its tile is numbered within the shard (all-gather-gemm's
    #: ``out``: the GEMM's tile ``t`` stores row tile ``t`` of every shard)
    shard_rows: dict = field(default_factory=dict)
    #: data buffers whose tile is a band of ``block_m`` rows over all its columns (all-gather-gemm:
    #: tile ``t`` is all of K in ``gathered`` and all of N in ``out``, whatever the chunks)
    row_tiles: frozenset = frozenset()
    #: wide row-tile buffers one access of which may span several column blocks (all-gather-gemm's
    #: ``gathered``: its GEMM reads the shards of a tile as one operand of interleaved rows,
    #: ``syncverify.kernels.tile.gathered_gemm``): such an access is the model's one load per
    #: block, in block order. One ``tl.load`` is many PTX loads per thread in an order the
    #: compiler picks, so the model's order among those blocks was never the kernel's to keep.
    split_blocks: frozenset = frozenset()
    #: data buffers whose stores say which column tiles of C a visit of a tile writes
    #: (all-gather-gemm's ``out``: with ``UNITS`` > 1 each GEMM program writes some of them)
    column_tiles: frozenset = frozenset()

    def role_of(self, pid: int, world: int) -> tuple[str, int]:
        first = 0
        for role, per_rank in self.roles:
            if pid < first + per_rank * world:
                return role, (pid - first) // per_rank
            first += per_rank * world
        raise ValueError(f"program {pid} is beyond the layout {self.roles}")

    def wheres(self, buffer: str, copy: int, index) -> list[Where]:
        """:meth:`where` of one access; an access of a :attr:`split_blocks` buffer spanning several
        column blocks is one per block, in block order."""
        if buffer not in self.split_blocks:
            return [self.where(buffer, copy, index)]
        cols = self.columns[buffer]
        blocks: dict[int, list] = {}
        for i in index:
            blocks.setdefault((int(i) % cols) // self.block_columns, []).append(i)
        return [self.where(buffer, copy, blocks[b]) for b in sorted(blocks)]

    def where(self, buffer: str, copy: int, index) -> Where:
        if buffer in self.locks:
            stage, names = self.locks[buffer]
            places = {(int(i) // self.tiles, int(i) % self.tiles) for i in index}
            (lock, tile), = places
            name = names[lock % len(names)] + (f"#{lock // len(names)}" if self.slots > 1 else "")
            return Where(True, name, stage, copy, None, tile)
        cols = self.columns[buffer]
        places = set()
        slots = set()
        for i in index:
            row, col = divmod(int(i), cols)
            if buffer in self.slotted and self.slots > 1:
                slots.add(row // self.rows)
                row %= self.rows
            if buffer in self.shard_rows:
                row %= self.shard_rows[buffer]
            block = col // self.block_columns if buffer in self.wide else None
            col = col % self.block_columns if buffer in self.wide else col
            if buffer in self.row_tiles:
                places.add((block, row // self.block_m))
                continue
            per_row = (self.block_columns if buffer in self.wide else cols) // self.block_n
            places.add((block, (row // self.block_m) * per_row + col // self.block_n))
        if len(places) != 1:
            raise ValueError(f"one access to {buffer} spans tiles/blocks {sorted(places, key=str)}")
        (block, tile), = places
        name = self.data[buffer] + (f"#{slots.pop()}" if len(slots) == 1 else "")
        return Where(False, name, "", copy, block, tile)


def _kernel_op(a, side: KernelSide) -> list[Op]:
    if a.kind == "bar":
        return [Op("bar", a.op.split(",")[0] or "0", a.sem, "cta")]
    if a.kind == "fence":
        return [Op("fence", "", fence_kind(a.sem), a.scope)]
    wheres = side.wheres(a.buffer, a.copy, a.index)
    if len(wheres) > 1:  # one load of several column blocks: one per block (KernelSide.split_blocks)
        return [op for w in wheres for op in _kernel_op_at(a, w)]
    return _kernel_op_at(a, wheres[0])


def _kernel_op_at(a, where: Where) -> list[Op]:
    """The normalized op(s) of memory access ``a`` of ``where``."""
    if not a.scalar:
        threads = "all"
    else:
        threads = "all" if a.kind == "ld" else "one"
    sem, scope = a.sem, a.scope
    if sem == "volatile":
        sem, scope = "relaxed", "sys"
    elif sem == "weak":
        scope = None
    if a.proxy == "async":  # a TMA copy of a watched buffer: the model's program has no such access
        op = Op(f"tma-{a.kind}", "", sem, scope, where, threads)
    elif a.kind == "atom" and a.op == "add" and a.constant and a.operands == (0,) and sem in ("relaxed", "acquire"):
        op = Op("ld", "", sem, scope, where, threads, seen=a.seen)  # Triton: ld.acquire on one thread
    elif a.kind == "atom":
        op = Op("atom", a.op, sem, scope, where, threads, a.operands, seen=a.seen)
    elif a.kind == "st":
        op = Op("st", "", sem, scope, where, threads, a.operands if where.lock else ())
    else:
        op = Op("ld", "", sem, scope, where, threads, seen=a.seen)
    return [op, Op("bar", "0", "", "cta")] if a.kind == "atom" and a.used else [op]


def merge_tile_chunks(ops: list[Op]) -> list[Op]:
    """A tile accessed in pieces (K chunks, column tiles) as one access, as the model has it:
    within a run of tile accesses and ``tl.dot`` barriers (a K-loop: a chunk's loads, then its
    dot) with no lock access, fence or other barrier between them, a repeat of an access or dot
    already in the run is dropped. The order of the run's first accesses is kept, so a tile store
    moved before a load, or after the ``after_load`` steps, still differs; so does a dot moved."""
    out: list[Op] = []
    run: set[Op] = set()
    for op in ops:
        tile_access = (op.kind in ("ld", "st") and op.where is not None and not op.where.lock) or (
            op.kind == "bar" and op.sem == DOT_MARK)
        if not tile_access:
            run = set()
        elif op in run:
            continue
        else:
            run.add(op)
        out.append(op)
    return out


def kernel_ops(log, side: KernelSide, *, world: int, epoch: int, per_program: bool = False) -> dict[Key, list[Op]]:
    """``(role, rank, tile, epoch) -> ops`` of one launch's :class:`~syncverify.kernels.trace.Access` log;
    ``per_program``: keyed ``(role, rank, tile, epoch, program id)``, each program's own accesses of a
    tile (all-gather-gemm's GEMM programs share a tile's column tiles, each after a wait of its own)."""
    per_pid: dict[int, list] = {}
    for a in log:
        if a.kind in ("bar", "fence") or a.buffer in side.locks or a.buffer in side.data:
            per_pid.setdefault(a.pid, []).append(a)
    out: dict[Key, list[Op]] = {}
    for pid, accesses in per_pid.items():
        role, rank = side.role_of(pid, world)
        pending: list[Op] = []
        tile = None
        for a in accesses:
            ops = _kernel_op(a, side)
            if ops[0].where is None:
                pending += ops
                continue
            tile = ops[0].tile
            out.setdefault((role, rank, tile, epoch) + ((pid,) if per_program else ()), []).extend(pending + ops)
            pending = []
        if pending:
            out.setdefault((role, rank, tile, epoch) + ((pid,) if per_program else ()), []).extend(pending)
    return {key: collapse_polls(merge_tile_chunks(ops)) for key, ops in out.items()}


def program_visits(log, side: KernelSide, *, world: int) -> dict[tuple[str, int], list[tuple]]:
    """``(role, rank) -> [the visits of each program, in order]`` (programs in program-id order)
    of one launch's log, a visit ``(tile, column tiles)``: a tile its lock and data accesses name,
    counted again only when the program comes back to it after another, and the column tiles of C
    its stores of a :attr:`KernelSide.column_tiles` buffer write during the visit (sorted; ``()``
    for none). The kernels' side of the layout the model builds
    (:func:`syncverify.scenarios.build.cta_visits`)."""
    visits: dict[int, list[tuple[int, set]]] = {}
    for a in log:
        if a.kind in ("bar", "fence") or not (a.buffer in side.locks or a.buffer in side.data):
            continue
        for where in side.wheres(a.buffer, a.copy, a.index):
            seen = visits.setdefault(a.pid, [])
            if not seen or seen[-1][0] != where.tile:
                seen.append((where.tile, set()))
            if a.kind == "st" and a.buffer in side.column_tiles:
                seen[-1][1].update((int(i) % side.columns[a.buffer]) // side.block_n for i in a.index)
    out: dict[tuple[str, int], list[tuple]] = {}
    for pid in sorted(visits):
        out.setdefault(side.role_of(pid, world), []).append(tuple((t, tuple(sorted(c))) for t, c in visits[pid]))
    return out


def program_tiles(log, side: KernelSide, *, world: int) -> dict[tuple[str, int], list[tuple[int, ...]]]:
    """:func:`program_visits` without the column tiles: the tiles each program visits, in order
    (the model's :func:`syncverify.scenarios.build.cta_tiles`)."""
    return {key: [tuple(t for t, _columns in visits) for visits in programs]
            for key, programs in program_visits(log, side, world=world).items()}


# ----- comparing -----------------------------------------------------------------------------

def _name(key: Key) -> str:
    role, rank, tile, epoch = key
    return f"rank {rank} {role}, tile {tile}, epoch {epoch}"


def _exits(until: tuple, seen: int) -> bool:
    cond, value = until
    loops = {"eq": seen == value, "ne": seen != value, "lt": seen < value, "ge": seen >= value}[cond]
    return not loops


def compare(model: dict[Key, list[Op]], kernel: dict[Key, list[Op]], *, timed_out=frozenset()) -> list[str]:
    """Readable differences (empty: the two sides agree), one entry per role instance.

    ``timed_out``: role instances whose wait the kernel gave up (a protocol that hangs): their
    kernel ops are compared with the model's ops up to the same length (the rest never ran).
    """
    problems = []
    model = {key: ops[:len(kernel.get(key, ops))] if key in timed_out else ops for key, ops in model.items()}
    for key in sorted(set(model) | set(kernel), key=lambda k: (k[3], k[2], k[0], k[1])):
        if key not in kernel:
            problems.append(f"{_name(key)}: in the model only ({len(model[key])} steps; the kernel has no such role instance)")
            continue
        if key not in model:
            problems.append(f"{_name(key)}: in the kernel only ({len(kernel[key])} steps)")
            continue
        m, k = model[key], kernel[key]
        if m != k:
            step = next((i for i, (a, b) in enumerate(zip(m, k)) if a != b), min(len(m), len(k)))
            left = f"model:  {m[step]}" if step < len(m) else "model:  (ends)"
            right = f"kernel: {k[step]}" if step < len(k) else "kernel: (ends)"
            diff = "\n".join(difflib.unified_diff([str(o) for o in m], [str(o) for o in k], "model", "kernel",
                                                  lineterm="", n=len(m) + len(k)))
            problems.append(f"{_name(key)}, step {step + 1}:\n  {left}\n  {right}\n{diff}")
            continue
        for i, (a, b) in enumerate(zip(m, k)):
            if key not in timed_out and a.until is not None and b.seen is not None and not _exits(a.until, b.seen):
                problems.append(f"{_name(key)}, step {i + 1}: the kernel's poll ({b}) left its loop on "
                                f"{b.seen}; the model loops while {a.until[0]} {a.until[1]}")
    return problems



# ----- running the kernel --------------------------------------------------------------------

def kernel_side(built) -> KernelSide:
    """The trace layout of the built kernels (``producers-first`` program order)."""
    c, plan = built.config, built.plan
    if c.kernel == "all-reduce":
        return KernelSide(roles=(("producer", c.gemm_sms), ("consumer", c.comm_sms)),
                          locks={"locks": ("", plan.locks)}, data={"partial": "partial", "out": "out"},
                          block_m=c.block_m, block_n=c.block_n, columns={"partial": c.n, "out": c.n},
                          block_columns=c.n, tiles=c.tiles, slots=plan.slots, rows=c.m,
                          slotted=frozenset({"partial"}))
    if c.kernel == "gemm-reduce-scatter":
        return KernelSide(roles=(("producer", c.gemm_sms), ("consumer", c.comm_sms)),
                          locks={"locks": ("", plan.locks)}, data={"inbox": "inbox", "out": "out"},
                          block_m=c.block_m, block_n=c.block_n, columns={"inbox": c.world_size * c.n, "out": c.n},
                          block_columns=c.n, wide=frozenset({"inbox"}), tiles=c.tiles, slots=plan.slots, rows=c.m,
                          slotted=frozenset({"inbox"}))
    if c.kernel == "all-gather-gemm":  # tile t: BLOCK_M rows of a shard (all of K, all of N)
        return KernelSide(roles=(("sender", c.gemm_sms), ("gemm", c.comm_sms)),
                          locks={"locks": ("", plan.locks)}, data={"gathered": "gathered", "out": "out"},
                          block_m=c.block_m, block_n=c.block_n, columns={"gathered": c.world_size * c.k, "out": c.n},
                          block_columns=c.k, wide=frozenset({"gathered"}), tiles=c.tiles, slots=plan.slots,
                          rows=c.m_per_rank, slotted=frozenset({"gathered"}), shard_rows={"out": c.m_per_rank},
                          row_tiles=frozenset({"gathered", "out"}), split_blocks=frozenset({"gathered"}),
                          column_tiles=frozenset({"out"}))
    return KernelSide(roles=(("producer", c.gemm_sms), ("comm", c.comm_sms), ("receiver", c.recv_sms)),
                      locks={"locks": ("pub", plan.locks), "push_locks": ("push", plan.push_locks)},
                      data={"local": "local", "out": "out", "received": "received"},
                      block_m=c.block_m, block_n=c.block_n,
                      columns={"local": c.n_per_rank, "out": c.n, "received": c.n}, block_columns=c.n_per_rank,
                      wide=frozenset({"out", "received"}), tiles=c.tiles)


def push_protocol(built):
    """The push protocol a built all-scatter kernel runs (by name, as the plan records it)."""
    return load_protocol(built.plan.push_protocol)


def small_config(kernel: str, world_size: int):
    """One 16x16 tile per rank, one producer and one consumer program per rank, fp32."""
    W = world_size
    return KernelConfig(kernel=kernel, world_size=W, m=16 * (W if kernel == "all-gather-gemm" else 1),
                        n=16 * (W if kernel == "all-scatter" else 1),
                        k=16 * (1 if kernel == "all-gather-gemm" else W), block_m=16, block_n=16, block_k=16, gemm_sms=1, comm_sms=1, recv_sms=1,
                        dtype="fp32", num_warps=1, interpret=True)


def trace_kernel(protocol, kernel: str, world_size: int, *, epochs: int = 1, max_polls: int = 64,
                 config=None, per_program: bool = False, tma: list | None = None,
                 layout: dict | None = None, visits: dict | None = None) -> tuple[dict[Key, list[Op]], set[Key]]:
    """Run ``kernel`` with ``protocol`` in the interpreter for ``epochs`` launches and return its
    normalized ops and the role instances whose wait timed out (``max_polls`` polls).

    ``tma``, when given, receives ``(buffer, kind)`` of every tensor-descriptor access the kernel
    made (``buffer`` None for unwatched memory: the inputs A and B). A descriptor access of a
    watched buffer is also an op of its own (``tma-ld``/``tma-st``), which no model op matches.
    ``layout``, when given, receives the first launch's :func:`program_tiles`; ``visits`` its
    :func:`program_visits`.

    Between launches the locks are zeroed when the protocol's own reset policy resets them
    (``host-between-barriers``/``host-racing``, done before the next launch), and left as they
    are when it is ``none``: the launches run the way the protocol is meant to be used.
    """
    # torch/triton: these modules import them at module level; only the GPU path needs them
    from syncverify.kernels._deps import torch
    from syncverify.kernels.gemm_all_reduce import launch_all_reduce
    from syncverify.kernels.gemm_all_scatter import launch_all_scatter
    from syncverify.kernels.heap import VirtualHeap
    from syncverify.kernels.trace import Recorder, recording

    built = build(protocol, config or small_config(kernel, world_size))
    c = built.config
    W = c.world_size
    heap = VirtualHeap(W, "cpu")
    resets = {"locks": rules.reset_policy(protocol.reset)}
    if kernel in ("all-gather-gemm", "gemm-reduce-scatter"):
        allocate(built, heap, torch.float32, torch.int32)
    else:
        heap.allocate("partial" if kernel == "all-reduce" else "local", (built.data_rows, c.n_per_rank), torch.float32)
        heap.allocate("out", (c.m, c.n), torch.float32)
        heap.allocate("locks", (built.lock_count, c.tiles), torch.int32)
    if kernel == "all-scatter":
        heap.allocate("received", (c.m, c.n), torch.float32)
        heap.allocate("push_locks", (built.push_lock_count, c.tiles), torch.int32)
        resets["push_locks"] = rules.reset_policy(push_protocol(built).reset)
    k = c.k_per_rank
    A = torch.ones(W, c.m_per_rank, k)
    B = torch.ones(W, k, c.n_per_rank)
    launch = {"all-reduce": launch_all_reduce, "all-scatter": launch_all_scatter}.get(kernel) or launch_function(kernel)
    side = kernel_side(built)
    ops: dict[Key, list[Op]] = {}
    timed_out: set[Key] = set()
    # rows 0..T-1, then T..2T-1 (all-scatter's receivers; all-reduce's producers' before_store waits)
    waiters = [role for role, _n in side.roles[1:]] + (
        [side.roles[0][0]] if kernel in ("all-reduce", "gemm-reduce-scatter", "all-gather-gemm") else [])
    for epoch in range(epochs):
        for name, policy in resets.items():
            if epoch and policy != "none":
                heap[name].local.zero_()
        recorder = Recorder()
        for name, buffer in heap.buffers.items():
            recorder.watch(name, buffer.local, rank_stride=buffer.rank_stride)
        status = torch.zeros(W, 2 * c.tiles, 4, dtype=torch.int32)
        with recording(recorder):
            launch(built, heap, A, B, status, epoch=epoch, max_polls=max_polls)
        timed_out |= {(waiter, r, t, epoch) for n, waiter in enumerate(waiters) for r in range(W)
                      for t in range(c.tiles) if status[r, n * c.tiles + t, 0]}
        ops.update(kernel_ops(recorder.log, side, world=W, epoch=epoch, per_program=per_program))
        if tma is not None:
            tma.extend((a.buffer, a.kind) for a in recorder.log if a.proxy == "async")
        if layout is not None and not epoch:
            layout.update(program_tiles(recorder.log, side, world=W))
        if visits is not None and not epoch:
            visits.update(program_visits(recorder.log, side, world=W))
    return ops, timed_out
