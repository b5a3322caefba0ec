"""Decision trees and host operations lifted into the program IR the explorer checks.

* Each model thread's decision tree (:class:`~syncverify.frontend.programs.Node`) becomes one
  :class:`~syncverify.program.Thread`: the operations before a choice, then the read (``ld`` or
  ``atom`` into a register of its own), then ``beq`` on each value the read can return (none when
  the value reached no sink), a cut run a ``goto`` back to the read of the repeated state. Every
  instruction's ``label`` is the user's ``file:line (kernel) source``. Nodes with equal futures
  are emitted once, later ones a branch to it (exact: :func:`~syncverify.frontend.programs.equal_futures`).
* A scalar atomic of thread 0 whose result is used is followed by ``bar.sync`` (Triton 3.6); when
  another model thread branches on that result, the value travels as the compiled code sends it:
  thread 0 stores it to a shared-memory location between two ``bar.sync``s and the other threads
  load it between the same two.
* GHOST data: locations only plain loads and stores touch and whose values reach no sink
  (detected by the taint of :mod:`~syncverify.frontend.runner`) are ghost accesses
  (``syncverify.program``); elements accessed by exactly the same operations are one location.
* Phases and ``host_order`` come from the streams, events and synchronizations of the harness
  (:mod:`~syncverify.frontend.harness` states the rules); an ``expect_*`` is a host thread that
  reads the expected elements after every operation of its call.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from syncverify.errors import UnsupportedConstruct
from syncverify.frontend.programs import equal_futures
from syncverify.frontend.runner import Item, Loc
from syncverify.program import Atomic, Barrier, Branch, Fence, Label, Load, Program, Store, Thread
from syncverify.delivery import DeliveryFence, Put, Quiet  # NVSHMEM calls
from syncverify.program import GDC_PLACEHOLDER, GLOBAL, SHARED_CTA, BulkCommit, BulkCopy, BulkWait, MbarWait  # tensor descriptors


@dataclass
class ThreadInfo:
    """What a verdict says about one model thread."""

    kind: str  # "program", "host-write" or "check"
    role: str
    call: int
    rank: int | None = None
    kernel: str | None = None  # a program's kernel name, program (linear id) and model thread
    program: int | None = None
    thread: int | None = None


@dataclass
class Lifted:
    """The program and what the verdicts need to speak in the user's terms."""

    program: Program
    threads: list[ThreadInfo]
    ghost_names: dict[str, tuple[str, int | None]] = field(default_factory=dict)  # group -> (buffer, rank)
    oob: set = field(default_factory=set)  # out-of-bounds location names
    files: set = field(default_factory=set)  # the source files the kernels' operations come from
    constants: dict = field(default_factory=dict)  # never-written location polled forever -> its value as stored


class _Namer:
    """Model location names: one per non-ghost element, one per ghost group."""

    def __init__(self, ghost: frozenset, groups: dict[Loc, str]) -> None:
        self.ghost = ghost
        self.groups = groups

    def ghost_locs(self, locs) -> list[str]:
        seen: dict[str, None] = {}
        for loc in locs:
            if loc in self.ghost:
                seen.setdefault(self.groups[loc], None)
        return list(seen)


def ghost_groups(accesses: list[tuple[Loc, ...]], ghost: frozenset) -> tuple[dict[Loc, str], dict[str, tuple]]:
    """Ghost elements grouped by the set of accesses that touch them (exactly the same accesses:
    one location), each group named after its buffer, rank and index range."""
    ids: dict[tuple, int] = {}
    signature: dict[Loc, set[int]] = {}
    for locs in accesses:
        key = tuple(sorted((l for l in locs if l in ghost), key=lambda l: (l.buffer, l.rank or 0, l.index)))
        if not key:
            continue
        n = ids.setdefault(key, len(ids))
        for loc in key:
            signature.setdefault(loc, set()).add(n)
    by_sig: dict[tuple, list[Loc]] = {}
    for loc, sig in signature.items():
        by_sig.setdefault((loc.buffer, loc.rank, tuple(sorted(sig))), []).append(loc)
    names: dict[Loc, str] = {}
    owners: dict[str, tuple] = {}
    for (buffer, rank, _sig), locs in by_sig.items():
        idx = sorted(l.index for l in locs)
        where = "" if rank is None else f"@{rank}"
        span = f"{idx[0]}" if len(idx) == 1 else f"{idx[0]}..{idx[-1]}"
        name = f"{buffer}{where}[{span}]"
        base, k = name, 1
        while name in owners:
            k += 1
            name = f"{base}#{k}"
        owners[name] = (buffer, rank)
        for loc in locs:
            names[loc] = name
    return names, owners


def _footprint(loc: str, part: tuple[int, int] | None) -> tuple[str, int, int] | None:
    """A mixed-size access's footprint (``syncverify.program``, MIXED-SIZE): ``part`` (byte, size)
    of the element ``loc``; None for an access of the whole element (its footprint is given in
    :func:`byte_addressed`, once the program's byte-addressed elements are known)."""
    return None if part is None else (loc, part[0], part[1])


def byte_addressed(threads: list[Thread], widths: dict[str, int]) -> list[Thread]:
    """Threads whose accesses of a byte-addressed element (one the kernels access in part
    somewhere: ``widths``, element -> its size in bytes) all carry a footprint: a whole access
    gets ``(loc, 0, size)`` and a store's value its low ``size`` bytes, as the model's byte split
    (``syncverify.program.split_mixed_sizes``) reads them. Any other instruction on such an
    element is refused naming its ``file:line`` (the model splits only loads and stores)."""
    out = []
    for thread in threads:
        code = []
        for ins in thread.instructions:
            loc = getattr(ins, "loc", None)
            if loc not in widths:
                code.append(ins)
            elif not isinstance(ins, (Load, Store)):
                raise UnsupportedConstruct(
                    f"{(ins.label or '?').split(' (')[0]}: {type(ins).__name__.lower()} on {loc}, which the kernels also "
                    f"access in part (mixed sizes): only loads and stores of a byte-addressed element are modeled "
                    f"(docs/async.md)")
            elif ins.footprint is not None:
                code.append(ins)
            elif isinstance(ins, Store):
                if not isinstance(ins.value, int):
                    raise UnsupportedConstruct(
                        f"{(ins.label or '?').split(' (')[0]}: a store of a register to {loc}, which the kernels also "
                        f"access in part (mixed sizes), is not modeled")
                code.append(replace(ins, value=ins.value & ((1 << (8 * widths[loc])) - 1),
                                    footprint=(loc, 0, widths[loc])))
            else:
                code.append(replace(ins, footprint=(loc, 0, widths[loc])))
        out.append(replace(thread, instructions=tuple(code)))
    return out


def _label(item: Item) -> str:
    return f"{item.site} ({item.site.kernel}) {item.site.text}".rstrip()


class ThreadEmitter:
    """The instructions of one model thread from its decision tree."""

    def __init__(self, namer: _Namer, thread: int, threads: int, cta: int, used: set, needed: set,
                 smem: dict, call: int) -> None:
        self.namer = namer
        self.thread = thread
        self.threads = threads
        self.cta = cta
        self.used = used
        self.needed = needed
        self.smem = smem  # site key -> shared-memory location name (per CTA)
        self.call = call
        self.code: list = []
        self.counter = 0
        self.oob: set = set()
        self.spins: dict[str, int] = {}  # never-written locations a spin polls -> their model value
        self.shown: dict[str, Any] = {}  # ... -> their value as stored (64-bit addresses, floats)

    def _fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def emit(self, root, *, merge: bool = True) -> tuple:
        """The thread's instructions. ``merge``: one copy of the code of each class of nodes with
        equal futures (:func:`~syncverify.frontend.programs.equal_futures`: the same instruction
        sequences, with one loop where dead locals made several); False emits every node."""
        futures = equal_futures(root, edge=self._failed)
        if merge:
            self.entry_class, self.read_class = futures.entry, futures.read
        else:
            self.entry_class = {key: key for key in futures.entry}
            self.read_class = {key: key for key in futures.read}
        self.entry_label: dict[int, str] = {}
        self.read_label: dict[int, str] = {}
        self._node(root)
        self.code.append(Label("END"))
        return tuple(self.code)

    def _smem(self, item: Item) -> str:
        return self.smem.setdefault(item.site_key, f"smem.cta{self.cta}.{len(self.smem)}")

    @staticmethod
    def _failed(node, child) -> bool:
        """A failed poll iteration: the child polls the same location again (or loops back) with
        nothing in between. Its ``bar.sync`` is left out, as ``syncverify.protocols.lowering`` does
        for protocol polls: the barriers of failed iterations order nothing the final one does
        not, and a loop whose body arrives at a barrier is never a pure spin for the explorer.

        The same location matters: a poll of every rank's copy in turn runs one helper, so the
        next copy's first read is at the same line with nothing in between; it is the next poll,
        after this one *succeeded*, and this one's ``bar.sync`` is what orders the CTA's other
        threads after its acquire (``tests/test_frontend_lift.py``)."""
        if child.pre:
            return False
        if child.kind == "goto":
            return True
        return (child.kind == "choice" and child.read.site.line == node.read.site.line
                and child.read.op == node.read.op and child.read.locs == node.read.locs
                and child.read.parts == node.read.parts)  # byte 1 after byte 0 of one word: the next poll

    def _node(self, node) -> None:
        entry = self.entry_class[id(node)]
        if entry in self.entry_label:  # a node of the same future is emitted already: go there
            self.code.append(Branch(self.entry_label[entry]))
            return
        self.entry_label[entry] = self._fresh("N")
        self.code.append(Label(self.entry_label[entry]))
        for item in node.pre:
            self._item(item)
        if node.kind == "end" or node.kind == "open":
            self.code.append(Branch("END"))
            return
        if node.kind == "goto":  # back to the read of the state the run came back to
            self.code.append(Branch(self.read_label[self.read_class[id(node.target)]]))
            return
        if node.kind == "spin":  # polls memory no one writes: a read of its value, forever
            loc, value, site, shown = node.spin
            label = self._fresh("S")
            self.spins[str(loc)] = value
            self.shown[str(loc)] = shown
            self.code += [Label(label), Load(self._fresh("r"), str(loc), line=site.line,
                                             label=f"{site} ({site.kernel}) {site.text}"), Branch(label)]
            return
        read = self.read_class[id(node)]
        if read in self.read_label:  # other operations before, the same read and future after
            self.code.append(Branch(self.read_label[read]))
            return
        self.read_label[read] = self._fresh("R")
        self.code.append(Label(self.read_label[read]))
        item = node.read
        reg = self._fresh("r")
        children = list(node.children.items())
        line, text = item.site.line, _label(item)
        if item.op == "bcast":
            if item.site_key not in self.used:
                self._node(children[0][1])
                return
            self.code.append(Barrier("sync", 0, line=line, label=text + "  [bar.sync: result broadcast]"))
            if item.site_key not in self.needed:
                self._node(children[0][1])
                return
            # thread 0 sends the value whenever some thread needs it: every thread takes both barriers
            self.code.append(Load(reg, self._smem(item), line=line, label=text + "  [result from thread 0]"))
            self.code.append(Barrier("sync", 0, line=line, label=text + "  [bar.sync]"))
            if not node.matters:
                self._node(children[0][1])
                return
            valid = [(v, c) for v, c in children if not self._failed(node, c)]
            if not valid:  # thread 0 never leaves its poll: this thread waits at the barrier above
                self.code.append(Branch("END"))
                return
            self._branch(node, reg, valid, lambda child: None)
            return
        self._read(item, reg)
        post = item.scalar_one and item.site_key in self.used and self.threads > 1

        def before(child) -> None:
            if post and not self._failed(node, child):
                self._broadcast(item, reg)

        if not node.matters or len(children) == 1:
            before(children[0][1])
            self._node(children[0][1])
            return
        self._branch(node, reg, children, before)

    def _branch(self, node, reg: str, children: list, before) -> None:
        labels = []
        for value, child in children[1:]:
            label = self._fresh("V")
            labels.append((label, child))
            self.code.append(Branch(label, "eq", reg, value, line=node.read.site.line, label=_label(node.read)))
        before(children[0][1])
        self._node(children[0][1])
        for label, child in labels:
            self.code.append(Label(label))
            before(child)
            self._node(child)

    def _read(self, item: Item, reg: str) -> None:
        loc = str(item.locs[0])
        line, text = item.site.line, _label(item)
        if item.op == "ld":
            if item.descriptor:
                raise UnsupportedConstruct(f"{item.site}: a tensor-descriptor load of a synchronization location is "
                                           "not modeled by the kernel front end")
            self.code.append(Load(reg, loc, item.sem, item.scope if item.sem != "weak" else None, line=line, label=text,
                                  footprint=_footprint(loc, item.parts[0] if item.parts else None)))
        else:
            self.code.append(Atomic(item.fence_kind, reg, loc, item.operands, item.sem, item.scope, line=line,
                                    label=text, unsigned=item.unsigned))

    def _descriptor_load(self, item: Item) -> None:
        """A tensor-descriptor load as Triton 3.6 compiles it for sm_90 (docs/async.md, "The kernel
        front end"): a TMA load of the tile (``cp.async.bulk.tensor.shared::cluster.global.mbarrier``,
        one async-proxy read per ghost location, by an agent thread; the only proxy fence before it
        covers shared memory), then ``mbarrier.try_wait``, which completes it."""
        line, text = item.site.line, _label(item)
        barrier = f"tma-load {item.site} #{len(self.code)}"  # one mbarrier phase per load
        for name in self.namer.ghost_locs(item.locs):
            self.code.append(BulkCopy("", name, SHARED_CTA, GLOBAL, "mbarrier", barrier, line=line,
                                      label=text + "  [TMA load]", ghost=True))
        self.code.append(MbarWait(None, barrier, line=line, label=text + "  [mbarrier.try_wait]"))

    def _descriptor_store(self, item: Item) -> None:
        """A tensor-descriptor store as Triton 3.6 compiles it for sm_90 (docs/async.md, "The kernel
        front end"): a TMA store of the tile (``cp.async.bulk.tensor.global.shared::cta.bulk_group``,
        one async-proxy write per ghost location, by an agent thread), ``commit_group``, then
        ``cp.async.bulk.wait_group.read 0``, which waits for the source reads only."""
        line, text = item.site.line, _label(item)
        if any(loc not in self.namer.ghost for loc in item.locs):
            raise UnsupportedConstruct(f"{item.site}: a tensor-descriptor store to a synchronization location "
                                       "is not modeled by the kernel front end")
        for name in self.namer.ghost_locs(item.locs):
            self.code.append(BulkCopy(name, "", GLOBAL, SHARED_CTA, "bulk_group", line=line, label=text + "  [TMA store]",
                                      value=self.call + 1, ghost=True))
        self.code.append(BulkCommit(line=line, label=text + "  [cp.async.bulk.commit_group]"))
        self.code.append(BulkWait(0, read=True, line=line, label=text + "  [cp.async.bulk.wait_group.read 0]"))

    def _nvshmem(self, item: Item) -> None:
        """An NVSHMEM call (syncverify.delivery): a put's data is its destination's ghost
        locations, written with the call's number as a tile store is (the read of its source is
        not modelled); its signal an update of a synchronization location."""
        line, text = item.site.line, _label(item)
        if item.kind != "put":
            call = Quiet if item.kind == "quiet" else DeliveryFence
            self.code.append(call(line=line, label=text))
            return
        d = item.delivery
        if any(loc not in self.namer.ghost for loc in d.dst):
            raise UnsupportedConstruct(f"{item.site}: a put into a synchronization location is not modeled by the "
                                       "kernel front end: update it with a signal")
        chunks = tuple((name, self.call + 1) for name in self.namer.ghost_locs(d.dst))
        signal = None if d.signal is None else str(d.signal)
        self.code.append(Put(d.pe, chunks, blocking=d.blocking, signal=signal, signal_op=d.signal_op,
                             signal_value=d.signal_value, line=line, label=text, ghost=True))

    def _broadcast(self, item: Item, reg: str) -> None:
        """Thread 0 after a used scalar read: ``bar.sync``; the value to the others when they need it."""
        line, text = item.site.line, _label(item)
        if item.site_key in self.needed:
            self.code.append(Store(self._smem(item), reg, line=line, label=text + "  [result to other threads]"))
            self.code.append(Barrier("sync", 0, line=line, label=text + "  [bar.sync: result broadcast]"))
            self.code.append(Barrier("sync", 0, line=line, label=text + "  [bar.sync]"))
        else:
            self.code.append(Barrier("sync", 0, line=line, label=text + "  [bar.sync: result broadcast]"))

    def _item(self, item: Item) -> None:
        line, text = item.site.line, _label(item)
        if item.kind == "ld" and item.descriptor:
            self._descriptor_load(item)
        elif item.kind == "ld":
            for name in self.namer.ghost_locs(item.locs):
                self.code.append(Load("g", name, line=line, label=text, ghost=True))
        elif item.kind == "st" and item.descriptor:
            self._descriptor_store(item)
        elif item.kind == "st":
            ghost = set(self.namer.ghost_locs(item.locs))
            for name in ghost:
                self.code.append(Store(name, self.call + 1, line=line, label=text, ghost=True))
            for loc, value, part in zip(item.locs, item.values, item.parts or (None,) * len(item.locs)):
                if loc not in self.namer.ghost:
                    self.code.append(Store(str(loc), value, item.sem, item.scope if item.sem != "weak" else None,
                                           line=line, label=text, footprint=_footprint(str(loc), part)))
        elif item.kind == "fence":
            self.code.append(Fence(item.fence_kind, item.scope, line=line, label=text))
        elif item.kind in ("put", "quiet", "nvfence"):
            self._nvshmem(item)
        elif item.kind == "bar":  # count: model threads (frontend.asm scales the PTX count)
            self.code.append(Barrier("arrive" if item.op == "arrive" else "sync", item.barrier_id, item.count,
                                     line=line, label=text))
        elif item.kind == "gdc":  # its meaning depends on how the kernel is launched: frontend.check
            self.code.append(Store(GDC_PLACEHOLDER[item.op], 1, line=line, label=f"{text}  [griddepcontrol.{item.op}]"))
        elif item.kind == "oob":
            name = f"out-of-bounds {item.site}"
            self.oob.add(name)
            if item.op == "ld":
                self.code.append(Load("g", name, line=line, label=text, ghost=True))
            else:
                self.code.append(Store(name, 1, line=line, label=text, ghost=True))
        else:
            raise UnsupportedConstruct(f"{item.site}: {item.kind} has no lowering in the kernel front end")


def host_order(ops, phase_of: dict[int, str]) -> list[tuple[str, str]]:
    """``host_order`` pairs from the harness's operations (rules: :mod:`~syncverify.frontend.harness`)."""
    pairs: list[tuple[str, str]] = []
    last: dict[tuple, str] = {}  # (rank, stream) -> its last work phase
    pending: dict[tuple, set] = {}  # (rank, stream) -> phases its next work waits for
    floor: dict[int, set] = {}  # rank -> phases every later work of that rank follows
    floor_all: set = set()
    issued: dict[int, list[str]] = {}  # rank -> work phases so far
    recorded: dict[int, str | None] = {}  # record op index -> the work it follows
    for op in ops:
        if op.kind in ("launch", "write", "write_value", "wait_value", "copy"):  # work on a stream
            phase = phase_of[op.index]
            key = (op.rank, op.stream)
            preds = set(pending.pop(key, set())) | floor.get(op.rank, set()) | floor_all
            if key in last:
                preds.add(last[key])
            pairs.extend((p, phase) for p in sorted(preds))
            last[key] = phase
            issued.setdefault(op.rank, []).append(phase)
        elif op.kind == "record":
            recorded[op.index] = last.get((op.rank, op.stream))
        elif op.kind == "wait":
            before = recorded.get(op.event.position)
            if before is not None:
                pending.setdefault((op.rank, op.stream), set()).add(before)
        elif op.kind == "synchronize":
            floor.setdefault(op.rank, set()).update(issued.get(op.rank, []))
        elif op.kind == "host_barrier":
            floor_all.update(p for phases in issued.values() for p in phases)
    return pairs
