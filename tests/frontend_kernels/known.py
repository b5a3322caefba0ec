"""Known-answer kernels and harnesses for the kernel front end (tests/test_frontend.py).

Each harness is a user's view: a kernel as a user writes it, and what must hold after each call.
"""

import torch
import triton
import triton.language as tl

import syncverify


# ----- message passing between two programs ---------------------------------------------------

@triton.jit
def message_pass(data_ptr, flag_ptr, out_ptr, BLOCK: tl.constexpr, SEM: tl.constexpr, BARRIER: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    if pid == 1:  # producer
        tl.store(data_ptr + offs, offs + 1)
        if BARRIER:
            tl.debug_barrier()
        tl.atomic_xchg(flag_ptr, 1, sem=SEM, scope="gpu")
    else:  # consumer (a lower program id: the plain interpreter runs it first)
        while tl.atomic_add(flag_ptr, 0, sem="acquire" if SEM == "release" else "relaxed", scope="gpu") == 0:
            pass
        tl.store(out_ptr + offs, tl.load(data_ptr + offs))


def _message_pass(sv, sem, barrier, kernel=None):
    data = sv.heap.zeros((8,), torch.int32)
    flag = sv.heap.zeros((1,), torch.int32)
    out = sv.heap.zeros((8,), torch.int32)

    def call(k):
        sv.launch(kernel or message_pass, (2,), data.on(0), flag.on(0), out.on(0), BLOCK=8, SEM=sem, BARRIER=barrier, rank=0)
        sv.expect_written(out.on(0))
    return call


@syncverify.harness
def release_acquire(sv):
    return _message_pass(sv, "release", True)


def relaxed(sv):
    return _message_pass(sv, "relaxed", True)


def missing_barrier(sv):
    return _message_pass(sv, "release", False)


# ----- a shortcut the program-id-order interpreter never leaves ---------------------------------

@triton.jit
def shortcut(data_ptr, late_ptr, flag_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    if pid == 0:  # consumer, first in grid order: it always finds the flag unset there
        if tl.atomic_add(flag_ptr, 0, sem="acquire", scope="gpu") == 1:
            tl.store(out_ptr + offs, tl.load(data_ptr + offs) + tl.load(late_ptr + offs))
        # else: nothing ready yet, take the shortcut (skip)
    else:  # producer
        tl.store(data_ptr + offs, offs + 1)
        tl.debug_barrier()
        tl.atomic_xchg(flag_ptr, 1, sem="release", scope="gpu")
        tl.store(late_ptr + offs, offs)  # BUG: written after the flag


def shortcut_harness(sv):
    data = sv.heap.zeros((4,), torch.int32)
    late = sv.heap.zeros((4,), torch.int32)
    flag = sv.heap.zeros((1,), torch.int32)
    out = sv.heap.zeros((4,), torch.int32)
    sv.launch(shortcut, (2,), data.on(0), late.on(0), flag.on(0), out.on(0), BLOCK=4, rank=0)


# ----- an exchange that overwrites a signal ------------------------------------------------------

@triton.jit
def count_arrivals(counter_ptr, XCHG: tl.constexpr):
    pid = tl.program_id(0)
    if pid == 0:  # waits for the two others
        while tl.atomic_add(counter_ptr, 0, sem="acquire", scope="gpu") < 2:
            pass
    else:
        if XCHG:
            tl.atomic_xchg(counter_ptr, 1, sem="release", scope="gpu")  # BUG: both write 1
        else:
            tl.atomic_add(counter_ptr, 1, sem="release", scope="gpu")


def xchg_overwrite(sv):
    counter = sv.heap.zeros((1,), torch.int32)
    sv.launch(count_arrivals, (3,), counter.on(0), XCHG=True, rank=0)


def add_arrivals(sv):
    counter = sv.heap.zeros((1,), torch.int32)
    sv.launch(count_arrivals, (3,), counter.on(0), XCHG=False, rank=0)


# ----- a reset on the wrong stream across two calls ---------------------------------------------

@triton.jit
def signal_wait(data_ptr, flag_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    if pid == 1:
        tl.store(data_ptr + offs, offs + 1)
        tl.debug_barrier()
        tl.atomic_xchg(flag_ptr, 1, sem="release", scope="gpu")
    else:
        while tl.atomic_add(flag_ptr, 0, sem="acquire", scope="gpu") == 0:
            pass
        tl.store(out_ptr + offs, tl.load(data_ptr + offs))


def _reset(sv, stream):
    data = sv.heap.zeros((4,), torch.int32)
    flag = sv.heap.zeros((1,), torch.int32)
    out = sv.heap.zeros((4,), torch.int32)

    def call(k):
        sv.zero_(flag.on(0), rank=0, stream=stream)  # reset the lock before each call
        sv.wait_event(sv.record_event(rank=0, stream=stream), rank=0, stream="main")  # the kernel after the reset
        sv.launch(signal_wait, (2,), data.on(0), flag.on(0), out.on(0), BLOCK=4, rank=0, stream="main")
        sv.expect_written(out.on(0))
    return call


def reset_same_stream(sv):
    return _reset(sv, "main")


def reset_wrong_stream(sv):
    return _reset(sv, "gemm")


# ----- a relaxed signal, for --suggest ------------------------------------------------------------

@triton.jit
def relaxed_signal(data_ptr, flag_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    if pid == 1:
        tl.store(data_ptr + offs, offs + 1)
        tl.debug_barrier()
        tl.atomic_xchg(flag_ptr, 1, sem="relaxed", scope="gpu")  # BUG: a relaxed signal publishes nothing
    else:
        while tl.atomic_add(flag_ptr, 0, sem="acquire", scope="gpu") == 0:
            pass
        tl.store(out_ptr + offs, tl.load(data_ptr + offs))


def relaxed_signal_harness(sv):
    data = sv.heap.zeros((4,), torch.int32)
    flag = sv.heap.zeros((1,), torch.int32)
    out = sv.heap.zeros((4,), torch.int32)
    sv.launch(relaxed_signal, (2,), data.on(0), flag.on(0), out.on(0), BLOCK=4, rank=0)


# ----- inline PTX memory instructions (st.release on thread 0, ld.acquire on every thread) ----------

@triton.jit
def st_release(ptr, value):
    tl.inline_asm_elementwise(
        "{ .reg .pred p; .reg .u32 t; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; "
        "@p st.release.gpu.global.b32 [$1], $2; mov.u32 $0, 0; }",
        "=r,l,r", [ptr, value], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def ld_acquire(ptr):
    return tl.inline_asm_elementwise("ld.acquire.gpu.global.b32 $0, [$1];", "=r,l", [ptr],
                                     dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def asm_message_pass(data_ptr, flag_ptr, out_ptr, BLOCK: tl.constexpr, BARRIER: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    if pid == 1:
        tl.store(data_ptr + offs, offs + 1)
        if BARRIER:
            tl.debug_barrier()
        st_release(flag_ptr, 1)
    else:
        while ld_acquire(flag_ptr) == 0:
            pass
        tl.store(out_ptr + offs, tl.load(data_ptr + offs))


def _asm_message_pass(sv, barrier):
    data = sv.heap.zeros((8,), torch.int32)
    flag = sv.heap.zeros((1,), torch.int32)
    out = sv.heap.zeros((8,), torch.int32)
    sv.launch(asm_message_pass, (2,), data.on(0), flag.on(0), out.on(0), BLOCK=8, BARRIER=barrier, rank=0)
    sv.expect_written(out.on(0))


def asm_release_acquire(sv):
    _asm_message_pass(sv, True)


def asm_missing_barrier(sv):
    _asm_message_pass(sv, False)


# ----- data whose value reaches a branch or an address is not ghost --------------------------------

@triton.jit
def data_decides(data_ptr, index_ptr, table_ptr, out_ptr):
    pid = tl.program_id(0)
    if pid == 1:
        tl.store(data_ptr, 1)  # plain stores, no synchronization at all
        tl.store(index_ptr, 2)
    else:
        if tl.load(data_ptr) == 1:  # a plain load whose value decides a branch
            tl.store(out_ptr, 1)
        tl.store(out_ptr + 1, tl.load(table_ptr + tl.load(index_ptr)))  # ... and an address


def data_decides_harness(sv):
    data = sv.heap.zeros((1,), torch.int32)
    index = sv.heap.zeros((1,), torch.int32)
    table = sv.heap.zeros((4,), torch.int32)
    out = sv.heap.zeros((2,), torch.int32)
    sv.launch(data_decides, (2,), data.on(0), index.on(0), table.on(0), out.on(0), rank=0)


# ----- a flag left set by the previous call (stale data in the next one) ---------------------------

@triton.jit
def epoch_wait(data_ptr, flag_ptr, out_ptr, epoch, BLOCK: tl.constexpr, BY_EPOCH: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    if pid == 1:
        tl.store(data_ptr + offs, offs + epoch)
        tl.debug_barrier()
        tl.atomic_xchg(flag_ptr, epoch + 1, sem="release", scope="gpu")
    else:
        if BY_EPOCH:
            while tl.atomic_add(flag_ptr, 0, sem="acquire", scope="gpu") != epoch + 1:
                pass
        else:  # BUG: any non-zero flag will do, and nobody resets it between calls
            while tl.atomic_add(flag_ptr, 0, sem="acquire", scope="gpu") == 0:
                pass
        tl.store(out_ptr + offs, tl.load(data_ptr + offs))


def _epochs(sv, by_epoch):
    data = sv.heap.zeros((4,), torch.int32)
    flag = sv.heap.zeros((1,), torch.int32)
    out = sv.heap.zeros((4,), torch.int32)

    def call(k):
        sv.launch(epoch_wait, (2,), data.on(0), flag.on(0), out.on(0), k, BLOCK=4, BY_EPOCH=by_epoch, rank=0)
        sv.expect_written(out.on(0))
    return call


def flag_left_set(sv):
    return _epochs(sv, False)


def flag_by_epoch(sv):
    return _epochs(sv, True)


# ----- both sides relaxed: one change is not enough (--suggest pairs) -------------------------------

@triton.jit
def relaxed_both(data_ptr, flag_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    if pid == 1:
        tl.store(data_ptr + offs, offs + 1)
        tl.debug_barrier()
        tl.atomic_xchg(flag_ptr, 1, sem="relaxed", scope="gpu")
    else:
        while tl.atomic_add(flag_ptr, 0, sem="relaxed", scope="gpu") == 0:
            pass
        tl.store(out_ptr + offs, tl.load(data_ptr + offs))


def relaxed_both_harness(sv):
    data = sv.heap.zeros((4,), torch.int32)
    flag = sv.heap.zeros((1,), torch.int32)
    out = sv.heap.zeros((4,), torch.int32)
    sv.launch(relaxed_both, (2,), data.on(0), flag.on(0), out.on(0), BLOCK=4, rank=0)


# ----- a poll that translates its pointer through heap_bases on every iteration -----------------

@triton.jit
def through_bases(ptr, heap_bases):
    """``ptr`` moved from heap 0 to heap 0 through ``heap_bases``, as ``iris.translate`` does."""
    base = tl.load(heap_bases)
    return (base.to(tl.pointer_type(tl.int8)) + (ptr.to(tl.uint64) - base)).to(ptr.dtype)


@triton.jit
def translated_poll(data_ptr, flag_ptr, out_ptr, heap_bases):
    """iris's pattern: the flag's address is recomputed from ``heap_bases`` (memory no one writes)
    inside the wait loop, so every iteration reads ``heap_bases`` again, in the same state, before
    the flag: only the flag's value, chosen in between, differs."""
    if tl.program_id(0) == 1:  # producer: scalar store and signal, both on thread 0
        tl.store(data_ptr, 7)
        tl.atomic_xchg(flag_ptr, 1, sem="release", scope="gpu")
    else:
        while tl.atomic_add(through_bases(flag_ptr, heap_bases), 0, sem="acquire", scope="gpu") == 0:
            pass
        tl.store(out_ptr, tl.load(data_ptr))


def translated_poll_harness(sv):
    data, flag, out = (sv.heap.zeros((1,), torch.int32) for _ in range(3))
    sv.launch(translated_poll, (2,), data.on(0), flag.on(0), out.on(0), sv.heap.bases, rank=0)
    sv.expect_written(out.on(0))


# ----- a counter polled with the read-only cas idiom --------------------------------------------

@triton.jit
def cas_poll_count(data_ptr, counter_ptr, out_ptr):
    """Two producers each store their element and count themselves (release add); the consumer
    polls the counter with ``atomic_cas(p, 0, 0)`` (iris's read-only idiom) until both arrived. A
    failed-or-equal cas writes back what it read: the poll loop makes no new counter values."""
    pid = tl.program_id(0)
    if pid > 0:
        tl.store(data_ptr + pid - 1, pid)
        tl.atomic_add(counter_ptr, 1, sem="release", scope="gpu")
    else:
        while tl.atomic_cas(counter_ptr, 0, 0, sem="acquire", scope="gpu") < 2:
            pass
        offs = tl.arange(0, 2)
        tl.store(out_ptr + offs, tl.load(data_ptr + offs))


def cas_poll_count_harness(sv):
    data = sv.heap.zeros((2,), torch.int32)
    counter = sv.heap.zeros((1,), torch.int32)
    out = sv.heap.zeros((2,), torch.int32)
    sv.launch(cas_poll_count, (3,), data.on(0), counter.on(0), out.on(0), rank=0)
    sv.expect_written(out.on(0))


# ----- a tl.dot between the store and the signal: its CTA barrier (protocols.lowering.lower_dot) -----

@triton.jit
def dot_message_pass(data_ptr, flag_ptr, out_ptr, BLOCK: tl.constexpr, SEM: tl.constexpr, BARRIER: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    if pid == 1:  # producer: every thread stores its part, then (BARRIER) a GEMM, then thread 0 signals
        tl.store(data_ptr + offs, offs + 1)
        if BARRIER:
            a = tl.zeros((16, 16), dtype=tl.float32)
            a = tl.dot(a, a)
        tl.atomic_xchg(flag_ptr, 1, sem=SEM, scope="gpu")
    else:  # consumer
        while tl.atomic_add(flag_ptr, 0, sem="acquire", scope="gpu") == 0:
            pass
        tl.store(out_ptr + offs, tl.load(data_ptr + offs))


def dot_before_signal(sv):
    return _message_pass(sv, "release", True, kernel=dot_message_pass)


def no_dot_before_signal(sv):
    return _message_pass(sv, "release", False, kernel=dot_message_pass)
