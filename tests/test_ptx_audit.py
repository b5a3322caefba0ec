"""The PTX audit: each built-in protocol's signal and wait code, compiled for sm_90 on the CPU,
executes what the model assumes (``syncverify.protocols.lowering``): the same ld/st/atom/fence/bar.sync,
with the same semantics and scopes, on one thread or on every thread, in the same order; and its
tile store and tile load are the weak (or volatile) every-thread accesses the model has, on the
right side of the lock operations. The fused kernels' tile accesses are audited the same way.

This binds the model's verdicts to the instructions the hardware runs. A disagreement fails.
"""

from __future__ import annotations

import inspect

import pytest
import torch

from syncverify.kernels.audit import audit, audit_kernel, kernel_ops, protocol_ops, tile_problems
from syncverify.kernels.build import build
from syncverify.kernels.compile import compile_like_launch, compile_ptx, sleep_counts
from syncverify.kernels.heap import VirtualHeap
from syncverify.kernels.launch import launch_arguments
from syncverify.kernels.registry import allocate, kernel_function
from syncverify.kernels.config import KernelConfig
from syncverify.kernels.ptx_reader import SyncOp, parse_ptx, sync_ops
from syncverify.protocols.lowering import LoweredOp, lower_tile_load, lower_tile_store
from syncverify.protocols import builtin_names, load_protocol, protocol_from_dict

# Triton 3.6 lowers tl.atomic_add(p, 0, sem="acquire") (a constant 0) to an acquire *load* on one
# thread (PLATFORM.md); syncverify.protocols.lowering models the step as an atom.add. The audit reports it;
# the fix belongs in syncverify.protocols.lowering (an `await` with read="atomic_add", value 0 -> ld.acquire).
# The audit found that Triton lowers atomic_add(p, 0, sem="acquire") to an acquire load on one thread;
# syncverify.protocols.lowering now says so, and no known disagreement remains.
KNOWN: dict = {}


@pytest.mark.parametrize("side", ["signal", "wait"])
@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_compiles_to_what_the_model_assumes(name, side):
    if (name, side) in KNOWN:
        pytest.xfail(KNOWN[(name, side)])
    assert audit(load_protocol(name), side) == []


def test_an_acquire_add_of_zero_is_audited_as_the_acquire_load_it_compiles_to():
    assert audit(load_protocol("epoch-flag"), "wait") == []


@pytest.mark.parametrize("sem", ["relaxed", "acquire", "acq_rel"])
def test_an_add_of_zero_poll_is_modeled_as_what_each_sem_compiles_to(sem):
    """relaxed/acquire compile to a one-thread ld + bar.sync; acq_rel (Triton's default sem) stays
    an atom.add.acq_rel, which the model must keep as a read-modify-write (it was once modeled as
    an ld with sem acq_rel, which the model reads as a weak load)."""
    from syncverify.protocols import protocol_from_dict
    from syncverify.protocols.lowering import lower_step

    protocol = protocol_from_dict({
        "name": "add-zero-poll", "summary": "s", "origin": "test",
        "signal": [{"op": "atomic_add", "value": 1, "sem": "release", "scope": "sys", "to": "all"}],
        "wait": [{"op": "await", "read": "atomic_add", "value": 0, "sem": sem, "scope": "gpu",
                  "until": ">= world_size"}],
    })
    assert audit(protocol, "wait") == []
    assert lower_step(protocol.wait[0])[0].kind == ("atom" if sem == "acq_rel" else "ld")


def test_a_different_lowering_is_caught():
    from syncverify.protocols.lowering import LoweredOp, lower_step

    def wrong(step):  # pretend the model thought the release add ran on every thread
        ops = lower_step(step)
        return tuple(LoweredOp(o.kind, "all", o.sem, o.scope, o.op, o.poll) if o.kind == "atom" else o
                     for o in ops)

    problems = audit(load_protocol("barrier-fenced-release-acquire"), "signal", lower=wrong)
    assert problems and "atomic_add" in problems[0]


def test_probe_shapes_seen_in_the_ptx():
    # what the audit relies on, spelled out once: a scalar atomic and a flag store are
    # predicated to one thread; fences, barriers and volatile polls run on every thread.
    xchg = [str(o) for o in protocol_ops(load_protocol("xchg-flag"), "signal") if o.buffer != "tile"]
    assert xchg == ["bar all", "st.weak one locks", "atom.exch.release.sys one locks",
                    "atom.exch.release.sys one locks"]
    poll = [str(o) for o in protocol_ops(load_protocol("release-xchg-cas-acquire"), "wait")
            if o.buffer == "locks"]
    assert poll == ["ld.volatile.sys all locks", "ld.volatile.sys all locks",
                    "atom.cas.acquire.gpu one locks"]


HAND_WRITTEN = """
.visible .entry k(
\t.param .u64 .ptr .global .align 1 k_param_0,
\t.param .u64 .ptr .global .align 1 k_param_1,
\t.param .u32 k_param_2
)
.reqntid 128
{
\tld.param.b64 %rd1, [k_param_0];
\tld.param.b64 %rd2, [k_param_1];
\tld.param.b32 %r9, [k_param_2];
\tmov.u32 %r1, %tid.x;
\tand.b32 %r2, %r1, 64;
\tsetp.eq.b32 %p1, %r2, 0;
\t@%p1 st.global.wt.b32 [ %rd2 + 0 ], { %r1 };
\tbar.sync 0;
\tfence.acq_rel.sys; mov.u32 %r3, 0;
\tbfe.u32 %r4, %r1, 5, 2;
\tand.b32 %r5, %r1, 31;
\tor.b32 %r6, %r4, %r5;
\tsetp.eq.b32 %p2, %r6, 0;
\tmad.wide.s32 %rd3, %r9, 4, %rd1;
\t@%p2 red.global.gpu.release.add.u32 [ %rd3 + 0 ], %r7;
\tld.volatile.global.b32 { %r8 }, [ %rd1 + 0 ];
\t{ .reg .pred p; .reg .u32 t; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; @p st.release.sys.global.b32 [%rd1], %r8; mov.u32 %r10, 0; }
\tfence.proxy.async.shared::cta;
\tst.shared.b32 [%r3], %r8;
}
"""


def test_the_ptx_reader_on_a_hand_written_kernel():
    ops = sync_ops(parse_ptx(HAND_WRITTEN), params=["locks", "tile", "rank"])
    assert [str(o) for o in ops] == [
        "st.weak all tile",  # half the lanes (a tile's duplicates): not one thread
        "bar all",
        "fence.acq_rel.sys all",
        "atom.add.release.gpu one locks",  # (tid>>5 & 3) | (tid & 31) == 0: thread 0 only
        "ld.volatile.sys all locks",
        "st.release.sys one locks",  # inline asm predicated on %tid.x == 0
    ]
    assert ops[0].cache == ".wt" and ops[3].returns is False
    assert ops[3] == SyncOp("atom", "one", "release", "gpu", "add", "locks", returns=False)


@pytest.mark.parametrize("kernel", ["all-reduce", "all-scatter", "all-gather-gemm", "gemm-reduce-scatter"])
def test_delays_do_not_change_the_protocols_instructions(kernel):
    from syncverify.kernels.registry import kernel_function

    module, fn = kernel_function(kernel)
    params = list(inspect.signature(fn.fn).parameters)
    sequences, counts = [], []
    for delays in (False, True):
        built = build(load_protocol("xchg-flag"),
                      KernelConfig(kernel=kernel, delays=delays, m=256, n=256, k=256))
        ptx = compile_ptx(fn, built, module.meta_parameters(built))
        at = params.index("vals")
        n_vals = len(built.plan.runtime_values(epoch=0))
        flat = params[:at] + [f"vals[{i}]" for i in range(n_vals)] + params[at + 1:]
        sequences.append([str(o) for o in sync_ops(parse_ptx(ptx), params=flat)
                          if o.buffer in (None, "locks")])
        counts.append(sleep_counts(ptx))
    assert sequences[0] == sequences[1]
    assert counts[0] == {} and set(counts[1]) == {"before-store", "cta", "wait-read"}


# ----- tile stores and loads ------------------------------------------------------------------

def volatile_tiles(name: str = "xchg-flag"):
    """A built-in with ``tile_load = {volatile = true}`` (no built-in reads its tiles volatile)."""
    data = load_protocol(name).to_dict()
    data.update(name=f"{name}-volatile-tiles", tile_load={"volatile": True})
    return protocol_from_dict(data)


def _locks(ops) -> list[int]:
    return [i for i, op in enumerate(ops) if op.buffer in (None, "locks")]


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtins_tile_store_is_weak_on_every_thread_before_the_first_signal_op(name):
    protocol = load_protocol(name)
    ops = protocol_ops(protocol, "signal")
    stores = [i for i, op in enumerate(ops) if op.buffer == "tile"]
    assert stores and tile_problems(protocol, "signal", ops) == []
    assert lower_tile_store(protocol) == LoweredOp("st", "all", "weak", None)
    assert {(op.kind, op.sem, op.scope, op.threads, op.cache, op.width) for op in (ops[i] for i in stores)} \
        == {("st", "weak", None, "all", protocol.tile_store.cache, 4)}  # st.global[.wt].v4.b32
    assert max(stores) < min(_locks(ops))


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtins_tile_load_is_as_volatile_as_the_protocol_says_after_the_last_wait_op(name):
    protocol = load_protocol(name)
    ops = protocol_ops(protocol, "wait")
    loads = [i for i, op in enumerate(ops) if op.buffer == "tile"]
    assert loads and tile_problems(protocol, "wait", ops) == []
    sem = "volatile" if protocol.tile_load.volatile else "weak"
    assert {(op.kind, op.sem, op.threads) for op in (ops[i] for i in loads)} == {("ld", sem, "all")}
    assert min(loads) > max(_locks(ops))


def test_a_volatile_tile_load_compiles_to_ld_volatile_on_every_thread_after_the_wait():
    protocol = volatile_tiles()
    assert lower_tile_load(protocol) == LoweredOp("ld", "all", "volatile", "sys")
    ops = protocol_ops(protocol, "wait")
    assert [str(op) for op in ops if op.buffer == "tile"] == ["ld.volatile.sys.v4 all tile"] * 2
    assert audit(protocol, "wait") == [] and audit(protocol, "signal") == []


def test_a_tile_load_lowered_differently_is_caught(monkeypatch):
    import syncverify.protocols.lowering as lowering

    monkeypatch.setattr(lowering, "lower_tile_load", lambda protocol: LoweredOp("ld", "all", "volatile", "sys"))
    problems = audit(load_protocol("xchg-flag"), "wait")
    assert problems == ["wait: the model assumes the tile load of 'tile' is [ld volatile sys on all], "
                        "the PTX has [ld.weak.v4 all tile]"]
    built = build(load_protocol("xchg-flag"), KernelConfig(kernel="all-reduce", m=256, n=256, k=256))
    assert any("tile load of 'partial'" in p for p in audit_kernel(built))


def test_a_tile_store_on_one_thread_or_without_the_protocols_cache_is_caught(monkeypatch):
    import syncverify.protocols.lowering as lowering

    monkeypatch.setattr(lowering, "lower_tile_store", lambda protocol: LoweredOp("st", "one", "weak", None))
    assert "[st weak None on one]" in audit(load_protocol("epoch-flag"), "signal")[0]
    monkeypatch.undo()
    protocol = load_protocol("epoch-flag")  # its tile store has no cache modifier; claim .wt
    data = protocol.to_dict()
    data["tile_store"] = {"cache": ".wt"}
    ops = protocol_ops(protocol, "signal")
    assert tile_problems(protocol_from_dict(data), "signal", ops) == [
        "signal: the tile store of 'tile' carries no cache modifier; the protocol's tile_store.cache says .wt"]


def test_a_tile_store_after_the_signal_is_caught():
    protocol = load_protocol("xchg-flag")
    ops = protocol_ops(protocol, "signal")
    late = ops[1:] + ops[:1]  # move one tile store behind the signal's atomics
    assert any("comes after the first signal operation" in p for p in tile_problems(protocol, "signal", late))


ALL_KERNELS = ("all-reduce", "all-scatter", "all-gather-gemm", "gemm-reduce-scatter")
KERNEL_CASES = [(kernel, name, False) for kernel in ALL_KERNELS for name in builtin_names()]
KERNEL_CASES += [("all-reduce", "xchg-flag", True), ("all-scatter", "epoch-flag", True),
                 ("all-gather-gemm", "epoch-flag", True), ("gemm-reduce-scatter", "xchg-flag", True)]


@pytest.mark.parametrize("kernel, name, table", KERNEL_CASES)
def test_the_fused_kernels_tile_accesses_are_weak_and_add_no_synchronization(kernel, name, table):
    built = build(load_protocol(name), KernelConfig(kernel=kernel, m=256, n=256, k=256, table=table))
    assert audit_kernel(built) == []


@pytest.mark.parametrize("loads", ["descriptor", "pointer"])
@pytest.mark.parametrize("kernel", ["all-reduce", "all-scatter", "gemm-reduce-scatter"])
def test_the_fused_kernels_read_tiles_volatile_when_the_protocol_says_so(kernel, loads):
    built = build(volatile_tiles(), KernelConfig(kernel=kernel, m=256, n=256, k=256, loads=loads))
    assert audit_kernel(built) == []
    loads_seen = {(op.buffer, op.sem) for op in kernel_ops(built) if op.kind == "ld"}
    tiles = {"all-reduce": {"partial"}, "gemm-reduce-scatter": {"inbox"}}.get(kernel, {"local", "out"})
    assert {(b, "volatile") for b in tiles} <= loads_seen and not {(b, "weak") for b in tiles} & loads_seen
    assert ("A", "volatile") not in loads_seen  # GEMM inputs are never volatile
    if loads == "pointer":
        assert ("A", "weak") in loads_seen  # plain weak ld.global
    else:  # TMA (async proxy) reads of inputs nothing writes during the launch: no ld.global of A
        assert not {b for b, _ in loads_seen} & {"A", "B"}


@pytest.mark.parametrize("kernel, buffers", [("all-reduce", {"partial"}), ("all-scatter", {"local", "out"}),
                                             ("all-gather-gemm", {"gathered"}), ("gemm-reduce-scatter", {"inbox"})])
def test_a_wt_protocols_published_tile_stores_carry_wt(kernel, buffers):
    built = build(load_protocol("xchg-flag"), KernelConfig(kernel=kernel, m=256, n=256, k=256))
    stores = [op for op in kernel_ops(built) if op.kind == "st" and op.buffer in buffers]
    assert {op.buffer for op in stores} == buffers and {op.cache for op in stores} == {".wt"}


HAND_WRITTEN_TILES = """
.visible .entry k(
\t.param .u64 .ptr .global .align 1 k_param_0,
\t.param .u64 .ptr .global .align 1 k_param_1
)
.reqntid 128
{
\tld.param.b64 %rd1, [k_param_0];
\tld.param.b64 %rd2, [k_param_1];
\tld.global.b64 %rd3, [ %rd2 + 8 ];
\tadd.s64 %rd4, %rd3, 64;
\t@%p1 st.global.wt.v4.b32 [ %rd4 + 0 ], { %r1, %r2, %r3, %r4 };
\tld.volatile.global.v4.b32 { %r5, %r6, %r7, %r8 }, [ %rd1 + 0 ];
\tld.global.v2.b32 { %r9, %r10 }, [ %rd1 + 16 ];
}
"""


def test_the_ptx_reader_on_vector_tile_accesses_through_an_address_table():
    ops = sync_ops(parse_ptx(HAND_WRITTEN_TILES), params=["out", "out_table"])
    assert [str(o) for o in ops] == [
        "ld.weak all out_table",  # the table read: a pointer into out
        "st.weak.v4 all out",  # through that pointer: a tile store of out, write-through
        "ld.volatile.sys.v4 all out",
        "ld.weak.v2 all out",
    ]
    assert ops[1].cache == ".wt" and ops[1] == SyncOp("st", "all", buffer="out", cache=".wt")


@pytest.mark.parametrize("side", ["signal", "wait"])
@pytest.mark.parametrize("name", __import__("syncverify.protocols.registry", fromlist=["zoo_names"]).zoo_names())
def test_every_zoo_protocol_compiles_to_what_the_model_assumes(name, side):
    """Loads with sem and scope (ld.acquire.sys on one thread, bar.sync), CAS signals repeated
    until they succeed (atom.cas.release.sys, bar.sync), polls of each rank's copy."""
    assert audit(load_protocol(name), side) == []


def test_a_load_with_sem_compiles_to_ld_acquire_sys_on_one_thread():
    ops = [op for op in protocol_ops(load_protocol("iris-465-call-number"), "wait") if op.buffer == "locks"]
    assert ops and all((op.kind, op.sem, op.scope, op.threads) == ("ld", "acquire", "sys", "one") for op in ops)


def test_the_all_gather_gemms_tile_loads_are_volatile_when_the_protocol_says_so():
    """The GEMM reads the gathered shards with plain pointer loads (no tensor descriptor): each
    one ld.volatile with tile_load.volatile; the senders' A loads stay weak and B, an input
    nothing writes during the launch, is read through its tensor descriptor (no ld.global)."""
    built = build(volatile_tiles(), KernelConfig(kernel="all-gather-gemm", m=256, n=256, k=256))
    assert audit_kernel(built) == []
    loads_seen = {(op.buffer, op.sem) for op in kernel_ops(built) if op.kind == "ld"}
    assert ("gathered", "volatile") in loads_seen and ("gathered", "weak") not in loads_seen
    assert ("A", "weak") in loads_seen and "B" not in {b for b, _ in loads_seen}


def launch_like_ptx(built) -> tuple[str, list[str]]:
    """PTX of ``built`` compiled as its GPU launch compiles it (argument specialization: integers
    divisible by 16, pointers 16-byte aligned, which is what lets Triton vectorize and pipeline
    pointer loads), with CPU tensors standing in; and the names of its PTX parameters (a launch
    drops the integers it specialized to constants, so they are not the kernel's parameter list)."""
    c = built.config
    heap = VirtualHeap(c.world_size, "cpu")
    allocate(built, heap, torch.bfloat16, torch.int32)
    A = torch.empty(c.world_size, c.m_per_rank, c.k, dtype=torch.bfloat16)
    B = torch.empty(c.world_size, c.k, c.n, dtype=torch.bfloat16)
    status = torch.zeros(c.world_size, 2 * c.tiles, 4, dtype=torch.int32)
    module, fn = kernel_function(c.kernel)
    args, kwargs = launch_arguments(fn, module.meta_parameters, built, heap, A, B, status)
    compiled = compile_like_launch(fn, *args, **kwargs)
    return compiled.asm["ptx"], [n for n, t in compiled.src.signature.items() if t != "constexpr"]


def test_the_all_gather_gemms_pipelined_tile_loads_are_weak_cp_async():
    """Without tile_load.volatile, compiled as the GPU launch compiles it, the gathered operand's
    pointer loads are pipelined into 16-byte ``cp.async`` (a weak generic-proxy read, what the
    model's tile load is; never the TMA's async proxy, which B, an input, is read through), each
    after the wait in program order; the GEMM is wgmma and nothing spills to local memory."""
    built = build(load_protocol("epoch-flag"), KernelConfig(kernel="all-gather-gemm", m=512, n=512, k=512,
                                                            block_m=64, block_n=256))
    ptx, params = launch_like_ptx(built)
    assert "cp.async.cg.shared.global" in ptx and "wgmma.mma_async" in ptx and "ld.local" not in ptx
    ops = sync_ops(parse_ptx(ptx), params=params)
    gathered = [op for op in ops if op.kind == "ld" and op.buffer == "gathered"]
    assert gathered and {(op.sem, op.threads) for op in gathered} == {("weak", "all")}
    assert {op.buffer for op in ops if op.kind == "ld"} <= {"A", "gathered", "locks", "vals"}  # no ld.global of B
    last_wait = max(i for i, op in enumerate(ops) if op.buffer == "locks" and op.kind == "ld")
    assert min(i for i, op in enumerate(ops) if op in gathered) > last_wait
