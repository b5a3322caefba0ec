"""PyTorch symmetric-memory Triton helpers, as users write them, in plain Triton.

``torch.distributed._symmetric_memory`` gives a kernel two int64 tables: ``buffer_ptrs`` (each
rank's address of one symmetric buffer) and ``signal_pad_ptrs`` (each rank's signal pad, a
zeroed uint32 array). Kernels written against it (PyTorch's tests, kraken, Helion's
distributed examples) use a handful of helpers: a peer pointer taken from ``buffer_ptrs``, a
signal sent with a CAS ``0 -> 1`` on the peer's pad slot, a wait with a CAS ``1 -> 0`` on one's
own, and ``symm_mem_sync``, the block-wise barrier built from them.

The originals are inline PTX (``atom.global.{sem}.sys.cas.b32`` in a spin loop, run by the
threads ``flat_tid < world_size``, one peer each). Here each is the same CAS spin written with
``tl.atomic_cas``, so the helpers run in Triton's interpreter (the front end's hooks see one
atomic per attempt, the loop a spin it can cut) and compiled on a GPU alike. The one difference
is who runs them: a scalar ``tl.atomic_cas`` runs on one thread of the CTA, which signals and
waits for every peer in turn, where the original spreads the peers over threads 0..W-1. The
ordering argument is the same: ``hasPreviousMemAccess`` puts a ``tl.debug_barrier()`` before the
release CASes, ``hasSubsequentMemAccess`` one after the acquire CASes, so every thread's
accesses are ordered through the barrier and the one thread's release/acquire.

Raw peer pointers need no helper: ``tl.load(buffer_ptrs + peer).to(tl.pointer_type(tl.int32))``
is an ordinary load and cast, which the front end follows like any pointer.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def get_flat_bid():
    """This program's flat block id (x fastest), as PyTorch's helper computes it. No memory access."""
    return (tl.program_id(2) * tl.num_programs(1) * tl.num_programs(0)
            + tl.program_id(1) * tl.num_programs(0) + tl.program_id(0))


@triton.jit
def get_remote_ptr(buffer_ptrs, rank, DTYPE: tl.constexpr):
    """``rank``'s copy of a symmetric buffer: ``buffer_ptrs[rank]`` cast to a ``DTYPE`` pointer.

    One load of the address table (unwatched memory), no access to the buffer.
    """
    return tl.load(buffer_ptrs + rank).to(tl.pointer_type(DTYPE))


@triton.jit
def send_signal(addr, sem: tl.constexpr):
    """Set a signal-pad slot: CAS ``0 -> 1`` at system scope until it succeeds (one thread).

    Ordering: with ``sem="release"`` this thread's earlier accesses (and, after a
    ``tl.debug_barrier()``, its CTA's) happen before any acquire that reads the 1. The spin
    waits for the slot to be free again (the receiver's wait resets it to 0).
    """
    while tl.atomic_cas(addr, 0, 1, sem=sem, scope="sys") != 0:
        pass


@triton.jit
def wait_signal(addr, sem: tl.constexpr):
    """Consume a signal-pad slot: CAS ``1 -> 0`` at system scope until it succeeds (one thread).

    Ordering: with ``sem="acquire"``, the sender's accesses before its release happen before
    this thread's later ones; other threads of the CTA only after a ``tl.debug_barrier()``.
    The reset to 0 makes the pad reusable without a host reset (CUDA-graph friendly).
    """
    while tl.atomic_cas(addr, 1, 0, sem=sem, scope="sys") != 1:
        pass


@triton.jit
def symm_mem_sync(signal_pad_ptrs, block_id, rank: tl.constexpr, world_size: tl.constexpr,
                  hasPreviousMemAccess: tl.constexpr = False, hasSubsequentMemAccess: tl.constexpr = False):
    """Synchronize the blocks with this ``block_id`` on every rank, through the signal pads.

    Slot ``block_id * world_size + r`` of rank ``p``'s pad carries rank ``r``'s signal to rank
    ``p``. This block signals slot ``[block_id, rank]`` of every rank's pad (itself included),
    then waits for slot ``[block_id, r]`` of its own pad for every ``r``.

    Ordering (PyTorch's patterns): ``hasPreviousMemAccess`` makes this block's earlier writes
    visible to the matching blocks after the sync (``tl.debug_barrier()``, then release CASes);
    ``hasSubsequentMemAccess`` makes the other blocks' earlier writes visible to this block's
    later accesses (acquire CASes, then ``tl.debug_barrier()``). Without either, the signals are
    relaxed and order nothing.
    """
    if block_id is None:
        block_id = get_flat_bid()
    if hasPreviousMemAccess:
        tl.debug_barrier()
    for peer in tl.static_range(world_size):
        pad = get_remote_ptr(signal_pad_ptrs, peer, tl.uint32)
        send_signal(pad + block_id * world_size + rank, "release" if hasPreviousMemAccess else "relaxed")
    own = get_remote_ptr(signal_pad_ptrs, rank, tl.uint32)
    for peer in tl.static_range(world_size):
        wait_signal(own + block_id * world_size + peer, "acquire" if hasSubsequentMemAccess else "relaxed")
    if hasSubsequentMemAccess:
        tl.debug_barrier()


#: Every device function this module provides, in the order ``docs/kernels.md`` lists them.
DEVICE_API = ("get_flat_bid", "get_remote_ptr", "send_signal", "wait_signal", "symm_mem_sync")
