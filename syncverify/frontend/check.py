"""``check_kernel``: a harness's kernels, as written, explored under the PTX model.

The steps (each in its own module): run the harness to record what the host does
(:mod:`~syncverify.frontend.harness`); enumerate every path of every program for every model thread
by re-running its Python code in Triton's interpreter (:mod:`~syncverify.frontend.programs`,
:mod:`~syncverify.frontend.runner`), growing the value domains and the ghost classification to a
fixpoint; lift the paths and the host's ordering into one program (:mod:`~syncverify.frontend.lift`);
explore it with the explorer every protocol check uses (:mod:`syncverify.explore.driver`) and judge each
execution (:mod:`~syncverify.frontend.verdicts`).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from syncverify.explore.bounds import DEFAULT_MAX_DOMAIN, DEFAULT_MAX_EXECUTIONS, DEFAULT_MAX_STEPS, Clock, LimitHit
from syncverify.explore.residency import Residency, Sweep, find_deadlock, sweep
from syncverify.errors import SyncVerifyError
from syncverify.frontend.devices import provided
from syncverify.frontend.harness import DEFAULT_HEAP_BYTES, HarnessError, run_harness
from syncverify.frontend.verdicts import MODEL_NOTE, KernelCheckResult, KernelViolation, classify, race_causes
from syncverify.frontend.harness import _raise_site
import numpy as np
from syncverify.frontend.runner import Memory
from syncverify.frontend.runner import to_model
import numpy
from syncverify.frontend.runner import check_triton_version
from syncverify.frontend.lift import Lifted, ThreadEmitter, ThreadInfo, _Namer, byte_addressed, ghost_groups, host_order
from syncverify.model.int32 import wrap_int32
from syncverify.frontend.programs import explore_thread, max_writes, tree_nodes
from syncverify.frontend.runner import Loc, hooks, kernel_args, patch_lang, to_model
from syncverify.delivery import lower_delivery
from syncverify.streams import STREAM_KINDS, StreamOp, stream_code
from syncverify.program import (Branch, Label, Load, Program, Store, Thread, grid_dependency, lower_async,
                                pdl_dependent, split_mixed_sizes)
from syncverify.frontend.runner import Loc
from syncverify.explore.driver import explore

#: Fixpoint rounds (value domains, ghost classification) before the answer is unknown.
MAX_ROUNDS = 12
#: Memory operations one program may make on one path before the answer is unknown.
DEFAULT_MAX_ITEMS = 5_000


@dataclass
class LaunchSpec:
    """One launch, ready to run program by program."""

    index: int
    call: int
    rank: int
    stream: str
    kernel_name: str
    fn: Any  # the rewritten Python function the interpreter runs
    original: Any  # the user's Python function (its globals are patched while it runs)
    args: dict
    grid3: tuple[int, int, int]
    phase: str
    declared_asm: dict = field(default_factory=dict)
    num_warps: int = 4  # Triton's default; a barrier's thread count is read against it

    def pids(self) -> list[tuple[int, int, int]]:
        gx, gy, gz = self.grid3
        return [(x, y, z) for x in range(gx) for y in range(gy) for z in range(gz)]


def load_harness(target: str | Callable) -> tuple[Callable, str]:
    """The harness function ``target`` names (``file.py``, ``file.py::name``, or the function)."""
    if callable(target):
        return target, getattr(target, "__name__", "harness")
    text = str(target)
    path, _, name = text.partition("::")
    if not path.endswith(".py"):
        raise HarnessError(f"{text!r} is not a harness file: name a .py file (FILE.py or FILE.py::harness)")
    file = Path(path)
    if not file.is_file():
        raise HarnessError(f"harness file {path} does not exist")
    module = _import(file)
    if name:
        fn = getattr(module, name, None)
        if not callable(fn):
            marked = _marked(module)
            raise HarnessError(f"{path} has no function {name!r}" + (f"; its harnesses: {', '.join(marked)}" if marked else ""))
        return fn, f"{path}::{name}"
    marked = _marked(module)
    if not marked:
        raise HarnessError(f"{path} has no @syncverify.harness function; mark one or name it as {path}::NAME")
    if len(marked) > 1:
        raise HarnessError(f"{path} has several harnesses ({', '.join(marked)}): name one as {path}::NAME")
    return getattr(module, marked[0]), f"{path}::{marked[0]}"


def _marked(module) -> list[str]:
    return [n for n, v in vars(module).items() if callable(v) and getattr(v, "_syncverify_harness", False)]


def _import(file: Path):
    name = f"syncverify_harness_{abs(hash(str(file.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    folder = str(file.resolve().parent)
    sys.path.insert(0, folder)
    try:
        sys.modules[name] = module
        with provided():  # `import iris` in the user's files gets our device API, for this import only
            spec.loader.exec_module(module)  # type: ignore[union-attr]
    except SyncVerifyError:
        raise
    except Exception as error:  # noqa: BLE001 -- the user's file: one line

        raise HarnessError(f"importing {file} raised {type(error).__name__}: {error}{_raise_site(error)}") from None
    finally:
        if sys.path and sys.path[0] == folder:
            sys.path.pop(0)
    return module


def _memory(sv, launches_args: list) -> Any:
    import torch  # torch/triton: loaded only where a kernel runs


    memory = Memory()
    dtypes: dict = {}
    for r in range(sv.world_size):
        heap = sv.heap.memory[r].numpy()
        base = int(sv.heap.bases[r])
        for a in sv.heap.allocations:
            raw = heap[a.offset:a.offset + a.nbytes]
            memory.add(a.name, r, base + a.offset, a.nbytes, a.itemsize, raw)
            dtypes[(a.name, r)] = torch.empty((), dtype=a.dtype).numpy().dtype
    bases = sv.heap.bases
    memory.add("heap_bases", None, bases.data_ptr(), bases.numel() * 8, 8, bases.numpy().view(np.uint8))
    dtypes[("heap_bases", None)] = np.dtype(np.int64)
    seen = {bases.data_ptr()}
    heap_ranges = [(int(sv.heap.bases[r]), int(sv.heap.bases[r]) + sv.heap.size) for r in range(sv.world_size)]
    for name, tensor in launches_args:
        ptr = tensor.data_ptr()
        if ptr in seen or any(lo <= ptr < hi for lo, hi in heap_ranges):
            continue
        seen.add(ptr)
        flat = tensor.detach().contiguous()
        if flat.data_ptr() != ptr:
            raise HarnessError(f"argument {name} is not contiguous; pass a contiguous tensor")
        memory.add(name, None, ptr, flat.numel() * flat.element_size(), flat.element_size(),
                   flat.view(-1).numpy().view(np.uint8))
        dtypes[(name, None)] = flat.numpy().dtype
    memory.dtypes = dtypes
    return memory


#: The stream memory operations of a harness (syncverify.frontend.harness) and what CUDA calls them.
STREAM_OPS = STREAM_KINDS


def _stream_op_writes(op, locs: list, memory, written: dict, transitions: dict, chain: dict, accessed: dict) -> None:
    """What a stream memory operation writes and how it accesses its locations, for the value
    domains and the ghost classification: a written word is a synchronization location, as a
    waited-on one is; a copy's destination is data."""
    for loc in locs:
        if op.kind == "wait_value":
            accessed.setdefault(loc, set()).add("sync")
            continue
        value = to_model(op.value, memory.dtypes[(loc.buffer, loc.rank)]) if op.kind == "write_value" else 1
        written.setdefault(loc, set()).add(value)
        transitions.setdefault(loc, set()).add((None, value))
        chain[loc] = chain.get(loc, 0) + 1
        accessed.setdefault(loc, set()).add("sync" if op.kind == "write_value" else "weak")


def _stream_op_code(op, locs: list, sources, namer, memory, init: dict) -> tuple:
    """A stream memory operation's thread, ordered by its stream's host order: the meaning
    :func:`syncverify.streams.stream_code` gives it (the litmus and protocol languages' too); a
    copy's words and a write to tile data are ghost locations, written with the call's number."""
    text = f"{op.site} {STREAM_OPS[op.kind]}"
    if op.kind == "copy":
        return stream_code(StreamOp("copy", dst=tuple(namer.ghost_locs(locs)), src=tuple(namer.ghost_locs(sources)),
                                    value=op.call + 1, ghost=True, label=text))
    loc = locs[0]
    value = to_model(op.value, memory.dtypes[(loc.buffer, loc.rank)])
    if op.kind == "write_value":
        if loc in namer.ghost:
            return tuple(ins for n in namer.ghost_locs(locs)
                         for ins in stream_code(StreamOp("write_value", n, op.call + 1, ghost=True, label=text)))
        return stream_code(StreamOp("write_value", str(loc), value, label=text))
    init.setdefault(str(loc), _init_value(memory, loc))
    return stream_code(StreamOp("wait_value", str(loc), value, op.cmp, label=text))


def _tensor_locs(memory, tensor) -> list:
    """The memory elements of a torch tensor view (every element, in row-major order)."""

    size = tensor.element_size()
    index = np.indices(tuple(tensor.shape)).reshape(len(tensor.shape), -1) if tensor.dim() else np.zeros((0, 1), int)
    offsets = (np.array(tensor.stride()).reshape(-1, 1) * index).sum(axis=0) if tensor.dim() else np.zeros(1, int)
    locs = []
    for off in offsets:
        found = memory.locate(tensor.data_ptr() + int(off) * size)
        if found is None:
            raise HarnessError("an expectation or host write names memory outside the symmetric heap")
        locs.append(found[0])
    return locs


def _element(memory, loc) -> tuple[int, bytes]:
    """An element's size in bytes and its contents when the harness finished."""
    for start, end, name, rank, itemsize, raw in memory.ranges:
        if name == loc.buffer and rank == loc.rank:
            return itemsize, raw[loc.index * itemsize:(loc.index + 1) * itemsize].tobytes()
    raise AssertionError(f"{loc} is in no allocation")  # every Loc comes from Memory.locate


def _init_value(memory, loc) -> int:
    dtype = memory.dtypes[(loc.buffer, loc.rank)]
    return to_model(np.frombuffer(_element(memory, loc)[1], dtype=dtype)[0], dtype)


def _loc_named(locs, name: str):
    return next(l for l in locs if str(l) == name)


def _byte_domains(loc, memory, parts: set, transitions: set, byte_writes: dict) -> dict:
    """The value domains of a byte-addressed element (mixed sizes): each byte holds its initial
    byte or a byte some store writes to it (a part store's, or a whole store's); a read of
    ``(byte, size)`` of it may combine any of them (each byte of a read reads from some write,
    choice 12), little-endian as the model's split combines them. Keys: ``loc`` for the whole
    element, ``(loc, byte, size)`` for each part read."""
    size, raw = _element(memory, loc)
    whole = [new & 0xFFFFFFFF for old, new in transitions]
    cells = [sorted({raw[k]} | {(v >> (8 * k)) & 0xFF for v in whole} | byte_writes.get(k, set()))
             for k in range(size)]

    def combined(byte: int, width: int) -> tuple[int, ...]:
        values = {0}
        for k in range(width):
            values = {v + (b << (8 * k)) for v in values for b in cells[byte + k]}
            if len(values) > DEFAULT_MAX_DOMAIN:
                break
        return tuple(sorted(wrap_int32(v) for v in values))

    out = {loc: combined(0, size)}
    for byte, width in parts:
        out[(loc, byte, width)] = combined(byte, width)
    return out


def _require() -> None:
    """torch, numpy and a tested triton, or one line saying what to install."""
    try:
        import torch  # noqa: F401  (torch: a harness allocates torch tensors)
    except ImportError as error:
        raise HarnessError(f"checking a Triton kernel needs torch, triton and numpy ({error}); "
                           "pip install torch triton==3.6.0 numpy") from None

    check_triton_version()


def check_kernel(target, *, world_size: int = 2, calls: int = 1, threads_per_cta: int = 2,
                 timeout: float | None = 600.0, max_executions: int = DEFAULT_MAX_EXECUTIONS,
                 max_steps: int = DEFAULT_MAX_STEPS, max_items: int = DEFAULT_MAX_ITEMS,
                 declare_asm: dict[str, str] | None = None, heap_bytes: int = DEFAULT_HEAP_BYTES,
                 first: bool = False, progress: Callable[[str], None] | None = None,
                 progress_interval: float = 2.0, resident: int | None = None,
                 resident_order: str = "any", fair: bool = False, resident_sms: int = 0,
                 resident_occupancy: tuple = (),
                 merge_equal_futures: bool = True) -> KernelCheckResult:
    """Check the kernels a harness launches, as written, against the PTX memory model.

    Parameters
    ----------
    target
        A harness function, ``"file.py"`` (its one ``@syncverify.harness``) or ``"file.py::name"``.
    world_size, calls
        Virtual ranks on the symmetric heap; how many times the harness's call runs.
    threads_per_cta
        Model threads per program (2 shows missing CTA barriers).
    timeout, max_executions, max_steps, max_items
        Bounds: hitting one answers unknown (``safe is None``), never hangs.
    declare_asm
        Meanings of inline asm the model cannot read (``{"s_waitcnt vmcnt(0)": "no-op"}``).
    first
        Stop at the first execution that shows a violation.
    progress, progress_interval
        Called with a line (what the check is doing) at most every ``progress_interval`` seconds.
    resident, resident_order
        At most ``resident`` CTAs per GPU at once, admitted in ``resident_order``
        (:mod:`syncverify.explore.residency`); None: the harness's ``sv.resident(...)``, else every
        CTA runs. ``fair``: every CTA runs, whatever the harness says (``--resident-sweep``).
        ``resident_sms``, ``resident_occupancy``: with ``resident``, spread over that many SMs, with
        CTAs of each kernel named alone per SM (per-SM placement).
    merge_equal_futures
        Lift one copy of the code of program points with equal futures (exact, see
        :func:`~syncverify.frontend.programs.equal_futures`); False lifts every point of every
        path (what the differential test compares with).

    Returns a :class:`~syncverify.frontend.verdicts.KernelCheckResult`; bad input raises a
    :class:`~syncverify.errors.SyncVerifyError` whose message is one line.
    """
    start = time.monotonic()  # the bound counts from the call: importing torch and triton included
    _require()
    if not isinstance(world_size, int) or world_size < 1:
        raise HarnessError(f"world_size={world_size!r} must be a positive integer")
    if not isinstance(calls, int) or calls < 1:
        raise HarnessError(f"calls={calls!r} must be a positive integer")
    if not isinstance(threads_per_cta, int) or not 1 <= threads_per_cta <= 32:
        raise HarnessError(f"threads_per_cta={threads_per_cta!r} must be 1 to 32")
    deadline = None if timeout is None else start + timeout
    residency = None if resident is None else Residency(resident, resident_order, resident_sms, resident_occupancy)
    fn, name = load_harness(target)
    sv = run_harness(fn, world_size, calls, heap_bytes=heap_bytes)
    residency = None if fair else (residency or sv.residency)
    result = KernelCheckResult(name, world_size, calls, threads_per_cta)
    try:
        lifted, size, assumptions = _build(sv, threads_per_cta, declare_asm or {}, max_items, deadline, progress,
                                           progress_interval, merge_equal_futures)
    except LimitHit as hit:
        result.limit_hit, result.limit_detail = hit.limit, hit.detail
        result.seconds = result.lift_seconds = time.monotonic() - start
        return result
    result.lift_seconds = time.monotonic() - start
    result.lifted, result.size = lifted, size
    result.assumptions = assumptions
    _explore(result, lifted, deadline, max_executions, max_steps, first, progress, progress_interval)
    if residency is not None:
        result.assumptions.append(f"residency: {residency.words()}; a resident CTA is never preempted")
        if result.limit_hit is None and not (first and result.violations):
            _residency(result, lifted, residency, deadline, max_executions, max_steps)
    result.seconds = time.monotonic() - start
    return result


def host_threads(lifted) -> frozenset[int]:
    """The lifted program's host work (fills, the expectations' reads): it takes no CTA slot."""
    return frozenset(i for i, info in enumerate(lifted.threads) if info.kind != "program")


def residency_sweep(result: KernelCheckResult, order: str, *, timeout: float | None, max_executions: int,
                    max_steps: int) -> Sweep:
    """Each resident capacity's answer for the harness ``result`` checked (its lifted program)."""
    return sweep(result.lifted.program, order, clock=Clock(timeout), host=host_threads(result.lifted),
                 explore_options=dict(max_executions=max_executions, max_steps=max_steps))


def _residency(result: KernelCheckResult, lifted, residency: Residency, deadline, max_executions: int,
               max_steps: int) -> None:
    """The hang residency adds (:mod:`syncverify.explore.residency`); a fair hang already found stands."""
    host = host_threads(lifted)
    left = None if deadline is None else max(deadline - time.monotonic(), 0.001)
    try:
        found = find_deadlock(lifted.program, residency, clock=Clock(left), host=host,
                              explore_options=dict(max_executions=max_executions, max_steps=max_steps))
    except LimitHit as hit:
        result.limit_hit, result.limit_detail = hit.limit, f"residency: {hit.detail}"
        return
    result.deadlock = found
    if found is not None and "hang" not in result.violations:
        result.violations["hang"] = KernelViolation("hang", found.words(), found.execution, [], [])


def _build(sv, threads: int, declared: dict, max_items: int, deadline, progress, progress_interval: float = 2.0,
           merge: bool = True):
    """Paths of every program to a fixpoint, then the lifted program."""
    launches: list[LaunchSpec] = []
    arg_tensors: list = []
    phase_of: dict[int, str] = {}
    with hooks():
        for op in sv.ops:
            if op.kind == "launch":
                fn, args, bound = kernel_args(op.kernel, op.args, op.kwargs)
                for pname, value in bound.items():
                    if hasattr(value, "data_ptr"):
                        arg_tensors.append((pname, value))
                grid3 = tuple(op.grid) + (1,) * (3 - len(op.grid))
                kname = getattr(getattr(op.kernel, "fn", op.kernel), "__name__", "kernel")
                phase = f"c{op.call}.{op.index} {kname} rank {op.rank}/{op.stream}"
                phase_of[op.index] = phase
                launches.append(LaunchSpec(op.index, op.call, op.rank, op.stream, kname, fn,
                                           getattr(op.kernel, "fn", op.kernel), args, grid3, phase, declared,
                                           int(op.kwargs.get("num_warps", 4))))
            elif op.kind == "write":
                phase_of[op.index] = f"c{op.call}.{op.index} fill_ rank {op.rank}/{op.stream}"
            elif op.kind in STREAM_OPS:
                phase_of[op.index] = f"c{op.call}.{op.index} {op.kind} rank {op.rank}/{op.stream}"
        memory = _memory(sv, arg_tensors)
        host_writes = {op.index: _tensor_locs(memory, op.tensor) for op in sv.ops if op.kind == "write"}
        # stream memory operations: each one's word (or a copy's destination), and a copy's source
        stream_locs = {op.index: _tensor_locs(memory, op.tensor) for op in sv.ops if op.kind in STREAM_OPS}
        copy_sources = {op.index: _tensor_locs(memory, op.source) for op in sv.ops if op.kind == "copy"}
        expects = {op.index: _tensor_locs(memory, op.tensor) for op in sv.ops if op.kind == "expect"}
        written: frozenset = frozenset()
        nonghost: frozenset = frozenset()
        domains: dict = {}
        ghost_sinks: set = set()
        cache: dict = {}  # (launch, pid, thread) -> (what its runs read, its tree): reused across rounds
        last_report = time.monotonic()
        for _round in range(MAX_ROUNDS):
            trees: dict = {}
            all_written: dict = {}
            transitions: dict = {}
            chain: dict = {}  # Loc -> the most writes of it one execution can make
            accessed: dict = {}
            parts: dict = {}  # Loc -> {(byte, size)}: byte-addressed elements (mixed sizes)
            byte_writes: dict = {}  # Loc -> {byte: values}
            for op in sv.ops:
                if op.kind == "write":
                    for loc in host_writes[op.index]:
                        dtype = memory.dtypes[(loc.buffer, loc.rank)]
                        all_written.setdefault(loc, set()).add(to_model(op.value, dtype))
                        transitions.setdefault(loc, set()).add((None, to_model(op.value, dtype)))
                        chain[loc] = chain.get(loc, 0) + 1
                        accessed.setdefault(loc, set()).add("weak")
                elif op.kind in STREAM_OPS:
                    _stream_op_writes(op, stream_locs[op.index], memory, all_written, transitions, chain, accessed)
            runs = 0
            for launch in launches:
                scope = patch_lang(launch.original)
                try:
                    for pid in launch.pids():
                        for t in range(threads):
                            key = (launch.index, pid, t)
                            tree = _reuse(cache.get(key), written, nonghost, domains)
                            if tree is None:
                                tree = explore_thread(launch, pid, t, threads, memory, nonghost=nonghost,
                                                      written=written, domains=domains, max_items=max_items,
                                                      deadline=deadline)
                                cache[key] = (_signature(tree, written, nonghost, domains), tree)
                            trees[(launch.index, pid, t)] = tree
                            runs += tree.runs
                            for loc, values in tree.written.items():
                                all_written.setdefault(loc, set()).update(values)
                            for loc, pairs in tree.transitions.items():
                                transitions.setdefault(loc, set()).update(pairs)
                            for loc, n in max_writes(tree.root).items():
                                chain[loc] = chain.get(loc, 0) + n
                            for loc, kinds in tree.accessed.items():
                                accessed.setdefault(loc, set()).update(kinds)
                            ghost_sinks |= tree.ghost_sinks
                            for loc, found in tree.parts.items():
                                parts.setdefault(loc, set()).update(found)
                            for loc, by_byte in tree.byte_writes.items():
                                for byte, values in by_byte.items():
                                    byte_writes.setdefault(loc, {}).setdefault(byte, set()).update(values)
                            if progress is not None and time.monotonic() - last_report > progress_interval:
                                last_report = time.monotonic()
                                progress(f"interpreting: round {_round + 1}, {runs} program runs")
                finally:
                    scope.restore()
            new_written = frozenset(l for l in all_written if isinstance(l, Loc))
            sync = {l for l, kinds in accessed.items() if "sync" in kinds}
            # an element accessed in part is never ghost data: its bytes are values (a ghost write of
            # one byte and another of the next would race as if they overlapped)
            new_nonghost = frozenset(l for l in new_written if l in sync or l in ghost_sinks or l in parts)
            new_domains = {l: _domain(_init_value(memory, l), transitions.get(l, set()), chain.get(l, 0))
                           for l in new_nonghost if l not in parts}
            for l in new_nonghost & parts.keys():
                new_domains.update(_byte_domains(l, memory, parts[l], transitions.get(l, set()),
                                                 byte_writes.get(l, {})))
            too_big = [l for l, d in new_domains.items() if len(d) > DEFAULT_MAX_DOMAIN]
            if too_big:
                raise LimitHit("max-domain", f"{too_big[0]} can hold more than {DEFAULT_MAX_DOMAIN} values")
            if (new_written, new_nonghost, new_domains) == (written, nonghost, domains):
                break
            written, nonghost, domains = new_written, new_nonghost, new_domains
        else:
            raise LimitHit("max-steps", f"the value domains did not settle in {MAX_ROUNDS} rounds")

    # ----- lift -------------------------------------------------------------------------------
    ghost = frozenset(written - nonghost)
    accesses: list[tuple] = []
    assumptions: set = set()
    files: set = set()
    for tree in trees.values():
        assumptions |= tree.assumptions
        for node in tree_nodes(tree.root):
            if node.read is not None:
                files.add(node.read.site.file)
            for item in node.pre:
                files.add(item.site.file)
                if item.kind in ("ld", "st", "put"):  # a put's locs: its destination (NVSHMEM)
                    accesses.append(tuple(item.locs))
    accesses += [tuple(v) for v in host_writes.values()] + [tuple(v) for v in expects.values()]
    accesses += [tuple(stream_locs[i]) for i in copy_sources] + [tuple(v) for v in copy_sources.values()]
    # expected elements no operation writes can only hold their initial contents: ghost data too,
    # grouped like the rest (one read per group, not one per element: a tile never written is one
    # location, and a thread of one read per element would exceed the explorer's steps)
    never = frozenset(l for locs in expects.values() for l in locs if l not in written)
    groups, owners = ghost_groups(accesses, ghost | never)
    namer = _Namer(ghost | never, groups)
    threads_out: list[Thread] = []
    infos: list[ThreadInfo] = []
    init: dict[str, int] = {}
    for loc, dom in domains.items():
        if isinstance(loc, Loc):  # not a part of a byte-addressed element: (loc, byte, size)
            init[str(loc)] = _init_value(memory, loc)
    oob: set = set()
    constants: dict = {}
    cta = 0
    paths = 0
    for launch in launches:
        used = set().union(*(trees[(launch.index, pid, t)].used_sites for pid in launch.pids() for t in range(threads)))
        needed = set().union(*(trees[(launch.index, pid, t)].needed_sites for pid in launch.pids()
                               for t in range(1, threads))) if threads > 1 else set()
        for pid in launch.pids():
            cta += 1
            smem: dict = {}
            for t in range(threads):
                if deadline is not None and time.monotonic() > deadline:
                    raise LimitHit("timeout", "while lifting the programs' paths into the model")
                tree = trees[(launch.index, pid, t)]
                paths += tree.runs
                emitter = ThreadEmitter(namer, t, threads, cta, used, needed, smem, launch.call)
                code = emitter.emit(tree.root, merge=merge)
                oob |= emitter.oob
                for name, value in emitter.spins.items():
                    init.setdefault(name, value)
                constants.update(emitter.shown)
                role = (f"rank {launch.rank} {launch.kernel_name}[{pid[0]}]" + (f" thread {t}" if threads > 1 else "")
                        + f" (call {launch.call}, stream {launch.stream})")
                threads_out.append(Thread(f"T{len(threads_out)}", launch.rank, cta, code, role, launch.phase))
                gx, gy, _gz = launch.grid3
                infos.append(ThreadInfo("program", role, launch.call, launch.rank, launch.kernel_name,
                                        pid[0] + gx * (pid[1] + gy * pid[2]), t))
            for name in smem.values():
                init.setdefault(name, 0)
    for op in sv.ops:
        if op.kind == "write":
            cta += 1
            code = []
            names = namer.ghost_locs(host_writes[op.index])
            code += [Store(n, op.call + 1, label=f"{op.site} fill_", ghost=True) for n in names]
            dtype_of = memory.dtypes
            code += [Store(str(l), to_model(op.value, dtype_of[(l.buffer, l.rank)]), label=f"{op.site} fill_")
                     for l in host_writes[op.index] if l not in ghost]
            role = f"rank {op.rank} host fill_ (call {op.call}, stream {op.stream})"
            threads_out.append(Thread(f"T{len(threads_out)}", op.rank, cta, tuple(code), role, phase_of[op.index]))
            infos.append(ThreadInfo("host-write", role, op.call, op.rank))
        elif op.kind in STREAM_OPS:
            cta += 1
            code = _stream_op_code(op, stream_locs[op.index], copy_sources.get(op.index, ()), namer, memory, init)
            role = f"rank {op.rank} stream {op.stream}: {STREAM_OPS[op.kind]} (call {op.call})"
            threads_out.append(Thread(f"T{len(threads_out)}", op.rank, cta, code, role, phase_of[op.index]))
            infos.append(ThreadInfo("host-write", role, op.call, op.rank))
    pairs = host_order(sv.ops, phase_of)
    for op in sv.ops:
        if op.kind != "expect":
            continue
        cta += 1
        phase = f"c{op.call}.{op.index} expect"
        locs = expects[op.index]
        code = [Load("e", n, label=f"{op.site} expect", ghost=True) for n in namer.ghost_locs(locs)]
        code += [Load(f"e{i}", str(l), label=f"{op.site} expect") for i, l in enumerate(locs)
                 if l not in ghost and l in written]
        rank = locs[0].rank if locs else 0
        role = f"host check after call {op.call} (rank {rank})"
        threads_out.append(Thread(f"T{len(threads_out)}", rank or 0, cta, tuple(code), role, phase))
        infos.append(ThreadInfo("check", role, op.call, rank))
        for other in sv.ops:
            if other.call == op.call and other.index in phase_of:
                pairs.append((phase_of[other.index], phase))
    pdl = programmatic_launches(sv.ops, phase_of, threads_out, pairs)
    if pdl:
        assumptions.add("pdl: griddepcontrol.launch_dependents and griddepcontrol.wait where the kernels run them "
                        "(a primary that never triggers does so by exiting)"
                        + ("; a dependent declared pdl_wait=True runs griddepcontrol.wait first thing"
                           if any(op.kind == "launch" and op.pdl == "wait" for op in sv.ops) else ""))
    # mixed sizes: each element accessed in part somewhere is byte-addressed (choice 12), its accesses
    # split into one per byte by the code the litmus and protocol languages use
    widths = {str(l): _element(memory, l)[0] for l in parts if l in nonghost}
    if widths:
        threads_out = byte_addressed(threads_out, widths)
        extent = {}  # the bytes the accesses cover, from byte 0: the split holds those
        for th in threads_out:
            for ins in th.instructions:
                if isinstance(ins, (Load, Store)) and ins.loc in widths:
                    extent[ins.loc] = max(extent.get(ins.loc, 0), ins.footprint[1] + ins.footprint[2])
        for name, covered in extent.items():
            init[name] = int.from_bytes(_element(memory, _loc_named(parts, name))[1][:covered], "little")
        split = split_mixed_sizes([list(th.instructions) for th in threads_out], init)
        threads_out = [replace(th, instructions=tuple(code)) for th, code in zip(threads_out, split)]
    # tensor descriptors: one agent thread per TMA copy; NVSHMEM calls: one per chunk and signal
    threads_all = lower_delivery(lower_async(tuple(threads_out)))
    for agent in threads_all[len(threads_out):]:
        issuer = infos[next(i for i, t in enumerate(threads_out) if agent.name.startswith(t.name + "."))]
        what = "its TMA copy (async proxy)" if ".copy" in agent.name else "its NVSHMEM delivery"
        infos.append(ThreadInfo(issuer.kind, f"{issuer.role}: {what}", issuer.call, issuer.rank))
    kernels = kernel_identities(sv.ops, phase_of)
    program = Program("harness", threads_all, init=init, host_order=tuple(pairs),
                      observed_registers=frozenset(), pdl=pdl, kernels=kernels,
                      binaries=binary_identities(sv.ops, phase_of, kernels))
    if any(op.kind == "expect" and op.value == 1.0 for op in sv.ops):
        assumptions.add("expect_equal is checked as expect_written: the model tracks which write each element "
                        "holds, not data values")
    size = {"programs": sum(len(l.pids()) for l in launches), "threads": len(threads_out), "paths": paths,
            "locations": len(program.locations()), "ghost_groups": len(owners)}
    notes = sorted(assumptions)
    return Lifted(program, infos, owners, oob, files, constants), size, notes


def kernel_identities(ops, phase_of: dict[int, str]) -> tuple[tuple[str, str], ...]:
    """(launch phase, kernel) for per-SM placement: one name per @triton.jit object, its function's
    name, with ``#2``, ``#3`` added when distinct objects share a name (two compilations of one
    code are two kernels to the GPU's placement, not one)."""
    names: dict[int, str] = {}
    taken: dict[str, int] = {}
    out = []
    for op in ops:
        if op.kind != "launch":
            continue
        if id(op.kernel) not in names:
            base = getattr(getattr(op.kernel, "fn", op.kernel), "__name__", "kernel")
            taken[base] = taken.get(base, 0) + 1
            names[id(op.kernel)] = base if taken[base] == 1 else f"{base}#{taken[base]}"
        out.append((phase_of[op.index], names[id(op.kernel)]))
    return tuple(out)


def binary_key(kernel, args: tuple, kwargs: dict) -> tuple:
    """What Triton keys a kernel's compiled binaries by (``JITFunction.run``: its cache key is the
    arguments' specialization and ``str`` of the launch options exactly as passed): each
    ``tl.constexpr`` value passed, each other argument's specialization as Triton computes it
    (an int equal to 1 or divisible by 16, a pointer's alignment, unless ``do_not_specialize``
    names it), and the launch options (``num_warps``, ...) in the order passed. ``num_warps=4``
    spelled out is another key than the default 4: the same code, another module (GPU
    residency run 5). Defaults not passed are the same for every launch and left out."""
    from triton.backends.compiler import BaseBackend  # torch/triton: loaded only where a kernel runs
    from triton.runtime.jit import native_specialize_impl  # torch/triton: loaded only where a kernel runs

    params = list(getattr(kernel, "params", ()))
    names = {p.name for p in params}
    bound = dict(zip((p.name for p in params), args)) | {k: v for k, v in kwargs.items() if k in names}
    spec = []
    for p in params:
        if p.name not in bound:
            continue
        value = bound[p.name]
        if p.is_constexpr:
            spec.append((p.name, repr(value)))
            continue
        try:
            spec.append((p.name, native_specialize_impl(BaseBackend, value, False, not p.do_not_specialize,
                                                        not p.do_not_specialize_on_alignment)))
        except (TypeError, ValueError):  # a value Triton's binder would refuse: its type is the key
            spec.append((p.name, type(value).__name__))
    return tuple(spec), str({k: v for k, v in kwargs.items() if k not in names})


def binary_identities(ops, phase_of: dict[int, str], kernels: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """(launch phase, binary) for lazy loading (``Program.binaries``): a kernel (``kernels``,
    :func:`kernel_identities`) launched with one :func:`binary_key` keeps its name; with several,
    the binaries after its first in issue order are ``name@2``, ``name@3``."""
    kernel_of = dict(kernels)
    keys: dict[str, list] = {}
    out = []
    for op in ops:
        if op.kind != "launch":
            continue
        phase = phase_of[op.index]
        name = kernel_of[phase]
        seen = keys.setdefault(name, [])
        key = binary_key(op.kernel, op.args, op.kwargs)
        if key not in seen:
            seen.append(key)
        number = seen.index(key) + 1
        out.append((phase, name if number == 1 else f"{name}@{number}"))
    return tuple(out)


def programmatic_launches(ops, phase_of: dict[int, str], threads_out: list[Thread],
                          pairs: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """Give each programmatic dependent launch (``sv.launch(pdl=True)`` or Triton's
    ``launch_pdl=True``) its PDL meaning, and every ``griddepcontrol`` instruction read from a
    kernel its ISA meaning (in place; the program's ``pdl`` pairs returned), as the scenarios'
    ``--launches pdl`` does (``syncverify.scenarios.build``):

    * the stream order from the primary (the launch just before, on that stream) to the
      dependent goes: it is what PDL relaxes; what the primary was ordered after stays before
      the dependent (the primary's CTAs must start before any dependent CTA is scheduled);
    * a primary's ``griddepcontrol.launch_dependents`` (``gdc_launch_dependents()``) writes its
      trigger where it stands: scheduling only, no memory order; a primary that never runs it
      triggers by exiting. Its threads add to its completion count last (completion and flush);
    * a dependent's ``griddepcontrol.wait`` (``gdc_wait()``) polls that count with acquire loads
      at system scope where it stands: the primary's writes are visible after it; with
      ``pdl_wait=True`` one more wait is declared first thing (listed in the verdict);
    * outside a PDL launch both instructions mean nothing (PTX ISA: safe to run without PDL).
      (:func:`syncverify.program.grid_dependency`)"""
    last: dict[tuple, Any] = {}
    synced: set[int] = set()  # work a host synchronization or barrier already waited for
    found: list[tuple[str, str]] = []
    primary_done: dict[str, str] = {}  # primary phase -> its completion count
    dependent_on: dict[str, tuple[str, int, bool, str]] = {}  # dependent phase -> (count loc, threads, declared wait, site)
    for op in ops:
        if op.kind in ("synchronize", "host_barrier"):
            synced.update(o.index for o in last.values() if op.kind == "host_barrier" or o.rank == op.rank)
            continue
        if op.kind not in ("launch", "write"):
            continue
        key = (op.rank, op.stream)
        before, last[key] = last.get(key), op
        if op.kind != "launch" or not op.pdl:
            continue
        if before is None or before.kind != "launch" or before.index in synced:
            raise HarnessError(f"sv.launch(pdl=True) at {op.site}: the work just before it on rank {op.rank}'s stream "
                               f"{op.stream!r} must be a kernel launch the host has not waited for (its PDL primary)")
        primary, dependent = phase_of[before.index], phase_of[op.index]
        # The dependent starts only once the primary's CTAs started, so still after all that had
        # to finish before the primary: only the primary's own completion is relaxed.
        pairs[:] = [p for p in pairs if p != (primary, dependent)] + [
            (a, dependent) for a, b in pairs if b == primary and (a, dependent) not in pairs]
        found.append((primary, dependent))
        primary_done.setdefault(primary, f"pdl.done.{before.index}")
        count = sum(1 for th in threads_out if th.phase == primary)
        dependent_on[dependent] = (primary_done[primary], count, op.pdl == "wait", op.site)
    for i, th in enumerate(threads_out):
        code = th.instructions
        dep = dependent_on.get(th.phase)
        if dep is not None and dep[2]:
            code = pdl_dependent(code, dep[0], dep[1], f"{dep[3]} ")
        code = grid_dependency(code, th.name, primary_done=primary_done.get(th.phase),
                               dependent_on=None if dep is None else dep[:2])
        if code != th.instructions:
            threads_out[i] = replace(th, instructions=code)
    return tuple(found)


def _signature(tree, written: frozenset, nonghost: frozenset, domains: dict) -> tuple:
    """What a program's runs depend on: how each location they accessed was answered (constant,
    data, or a choice over which values). Runs are a function of the answers, so a tree whose
    signature is unchanged in the next round is the tree that round would build again."""

    return tuple(sorted(((str(loc), loc in written, loc in nonghost, domains.get(loc),
                          tuple(domains.get((loc, *part)) for part in sorted(tree.parts.get(loc, ()))))
                         for loc in tree.accessed if isinstance(loc, Loc)), key=lambda item: item[0]))


def _reuse(cached, written: frozenset, nonghost: frozenset, domains: dict):
    """The cached tree when the answers its runs got are unchanged (:func:`_signature`)."""
    if cached is None:
        return None
    signature, tree = cached
    return tree if _signature(tree, written, nonghost, domains) == signature else None


def _domain(init: int, transitions: set, writes: float) -> tuple[int, ...]:
    """The values a location can hold: reachable from its initial value by at most ``writes``
    writes (the most one execution makes to it), each write one of ``transitions``."""
    depth = {init: 0}
    frontier = [init]
    plain = {new for old, new in transitions if old is None}
    step = 0
    while frontier and step < writes:
        step += 1
        nxt = []
        for value in plain | {new for old, new in transitions if old in frontier}:
            if value not in depth:
                depth[value] = step
                nxt.append(value)
        if len(depth) > DEFAULT_MAX_DOMAIN:
            break
        frontier = nxt
    return tuple(sorted(depth))


def _explore(result: KernelCheckResult, lifted, deadline, max_executions, max_steps, first, progress,
             progress_interval: float) -> None:

    def judge(x) -> bool:
        found = classify(x, lifted)
        for kind, sentence, evidence in (found[:1] if first else found):
            if kind == "race":
                for cause in race_causes(x, evidence):
                    result.causes.setdefault(cause, sentence)
            current = result.violations.get(kind)
            if current is None or len(x.events) < len(current.execution.events):
                lines = sorted({x.events[e].label.split(" (")[0] for pair in evidence for e in pair
                                if x.events[e].label})
                result.violations[kind] = KernelViolation(kind, sentence, x, evidence, lines)
        return first and bool(found)

    def report(p) -> None:
        if progress is not None:
            progress(f"exploring: {p.executions} executions, {p.seconds:.0f} s")

    left = None if deadline is None else max(deadline - time.monotonic(), 0.001)
    explored = explore(lifted.program, max_executions=max_executions, timeout=left, max_steps=max_steps,
                       on_execution=judge, keep=False, progress=report if progress else None,
                       progress_interval=progress_interval)
    result.executions = explored.complete_count + explored.hang_count
    result.limit_hit, result.limit_detail = explored.limit_hit, explored.limit_detail
    if result.limit_hit is None and result.executions == 0:
        result.limit_hit = "no-executions"
        result.limit_detail = "the model found no consistent execution of this harness, so nothing was verified"
