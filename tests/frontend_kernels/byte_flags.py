"""vLLM #2760's flags for the kernel front end (tests/test_frontend_bytes.py).

vllm-project/vllm#2760: in vLLM's custom all-reduce, GPUs wrote different bytes of one 8-byte
signal word that a GPU read whole; under the PTX model those accesses overlap partly and are not
morally strong, so the flag synchronizes nothing (a data race). Here at the size the model holds
(values are 32-bit): each rank's byte of a 32-bit flag word.

* ``byte_flags`` / ``matching_reads``: one rank, two producer programs each setting their byte
  (``st.release.gpu.b8`` through an ``int8`` pointer into the ``int32`` word) and a consumer that
  polls the whole word (the bug) or each byte with a 1-byte acquire load (the fix).
* :func:`protocol_harness`: the all-reduce shape of a protocol file with byte ranges
  (``tests/protocols/vllm-2760-*.toml``), its steps read from that file, so the kernel and the
  protocol check have one source (tests/test_frontend_bytes.py compares their verdicts); a step
  this kernel cannot run is refused by name.
* ``wide_word``: a byte of an 8-byte word (vLLM's own size), which the front end refuses by name.
* ``word_flags``: the vLLM fix, one 32-bit flag per producer, released and acquired whole.
"""

from pathlib import Path

import torch
import triton
import triton.language as tl

from syncverify.errors import UnsupportedConstruct
from syncverify.protocols import load_protocol


@triton.jit
def store_byte(ptr, value, SEM: tl.constexpr, SCOPE: tl.constexpr):
    """``st.SEM.SCOPE.global.b8`` of ``value`` at the byte ``ptr`` (an ``int8`` pointer), thread 0
    only (as Triton predicates its scalar stores). Triton has no store with a memory order."""
    tl.inline_asm_elementwise("{ .reg .pred p; .reg .u32 t; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; "
                              "@p st." + SEM + "." + SCOPE + ".global.b8 [$1], $2; mov.u32 $0, 0; }", "=r,l,h",
                              [ptr, tl.full((), value, tl.int16)], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def load_bytes(ptr, SIZE: tl.constexpr, SEM: tl.constexpr, SCOPE: tl.constexpr):
    """``ld.SEM.SCOPE.global`` of ``SIZE`` bytes (1, 2 or 4) at ``ptr``, as int32, every thread."""
    if SIZE == 1:
        v = tl.inline_asm_elementwise("ld." + SEM + "." + SCOPE + ".global.u8 $0, [$1];", "=h,l",
                                      [ptr.to(tl.pointer_type(tl.int8))], dtype=tl.int16, is_pure=False, pack=1)
    elif SIZE == 2:
        v = tl.inline_asm_elementwise("ld." + SEM + "." + SCOPE + ".global.u16 $0, [$1];", "=h,l",
                                      [ptr.to(tl.pointer_type(tl.int16))], dtype=tl.int16, is_pure=False, pack=1)
    else:
        v = tl.inline_asm_elementwise("ld." + SEM + "." + SCOPE + ".global.u32 $0, [$1];", "=r,l",
                                      [ptr.to(tl.pointer_type(tl.int32))], dtype=tl.int32, is_pure=False, pack=1)
    if SIZE < 4:  # unsigned, as the model combines bytes
        v = v.to(tl.int32) & ((1 << (8 * SIZE)) - 1)
    return v.to(tl.int32)


# ----- one rank: two producers, one consumer ----------------------------------------------------

@triton.jit
def byte_flags_kernel(flag_ptr, data_ptr, out_ptr, MATCHING: tl.constexpr):
    pid = tl.program_id(0)
    if pid < 2:  # producers: the data, then this producer's byte of the flag word
        tl.store(data_ptr + pid, pid + 1)
        tl.debug_barrier()
        store_byte(flag_ptr.to(tl.pointer_type(tl.int8)) + pid, 1, "release", "gpu")  # BUG (vLLM #2760) unless MATCHING
    else:  # consumer: both bytes set, then the data
        if MATCHING:  # each byte read with the footprint it was written with
            for k in tl.static_range(2):
                while load_bytes(flag_ptr.to(tl.pointer_type(tl.int8)) + k, 1, "acquire", "gpu") != 1:
                    pass
        else:  # the whole word: 4 bytes against the producers' 1
            while tl.atomic_add(flag_ptr, 0, sem="acquire", scope="gpu") != 0x0101:
                pass
        tl.store(out_ptr + tl.arange(0, 2), tl.load(data_ptr + tl.arange(0, 2)))


def _one_rank(sv, matching: bool, dtype=torch.int32):
    flag = sv.heap.zeros((1,), dtype)
    data = sv.heap.zeros((2,), torch.int32)
    out = sv.heap.zeros((2,), torch.int32)
    sv.launch(byte_flags_kernel, (3,), flag.on(0), data.on(0), out.on(0), MATCHING=matching, rank=0)
    sv.expect_written(out.on(0))


def byte_flags(sv):
    _one_rank(sv, False)


def matching_reads(sv):
    _one_rank(sv, True)


def wide_word(sv):
    """vLLM's own 8-byte word: a byte of it is refused (the model's values are 32-bit)."""
    _one_rank(sv, False, torch.int64)


# ----- a protocol file's all-reduce, its flag steps read from the file --------------------------

@triton.jit
def translate(ptr, heap_bases, FROM, TO):
    """``ptr`` in rank ``FROM``'s heap moved to rank ``TO``'s (``iris.translate``)."""
    base = tl.load(heap_bases + FROM)
    return (tl.load(heap_bases + TO).to(tl.pointer_type(tl.int8)) + (ptr.to(tl.uint64) - base)).to(ptr.dtype)


@triton.jit
def all_reduce_kernel(partial_ptr, flag_ptr, out_ptr, heap_bases, rank, WORLD: tl.constexpr, BLOCK: tl.constexpr,
                      STORE: tl.constexpr, WAITS: tl.constexpr):
    """Program 0 produces: its partial tile into its own heap, a CTA barrier, then its byte of every
    rank's flag word (``STORE``: sem, scope, value, byte, size). Program 1 consumes: each wait of
    ``WAITS`` (sem, scope, byte, size, value to wait for) polls its own flag word, then it sums every
    rank's partial into its output."""
    offs = tl.arange(0, BLOCK)
    if tl.program_id(0) == 0:
        tl.store(partial_ptr + offs, offs + rank + 1)
        tl.debug_barrier()
        for p in tl.static_range(WORLD):
            word = translate(flag_ptr, heap_bases, rank, p).to(tl.pointer_type(tl.int8))
            store_byte(word + STORE[3] + (rank if STORE[5] else 0), STORE[2], STORE[0], STORE[1])
    else:
        for w in tl.static_range(len(WAITS)):
            byte = flag_ptr.to(tl.pointer_type(tl.int8)) + WAITS[w][2]
            while load_bytes(byte, WAITS[w][3], WAITS[w][0], WAITS[w][1]) != WAITS[w][4]:
                pass
        total = tl.zeros((BLOCK,), tl.int32)
        for p in tl.static_range(WORLD):
            total += tl.load(translate(partial_ptr, heap_bases, rank, p) + offs)
        tl.store(out_ptr + offs, total)


def flag_steps(path: Path, world_size: int) -> tuple[tuple, tuple]:
    """``(STORE, WAITS)`` of :func:`all_reduce_kernel` from a protocol file whose signal is a
    ``barrier`` then one byte ``store`` to every rank (``to = "all"``) and whose waits are
    ``await``s of a ``load`` until ``==`` a value; any other step is refused naming it, so a
    change of the file the kernel cannot follow fails instead of checking something else."""
    protocol = load_protocol(path)
    signal, wait = protocol.signal, protocol.wait

    def refuse(section: str, number: int, why: str):
        raise UnsupportedConstruct(f"{path.name}: {section} step {number}: {why}; this kernel "
                                   f"(tests/frontend_kernels/byte_flags.py) runs a barrier, one byte store to all "
                                   f"ranks and awaits of loads")

    if len(signal) != 2 or signal[0].op != "barrier" or signal[0].barrier_id is not None:
        refuse("signal", 1, "not a plain barrier followed by one store")
    store = signal[1]
    if store.op != "store" or store.to != "all" or store.bytes is None or store.bytes[1] != 1:
        refuse("signal", 2, "not a 1-byte store to all ranks")
    offset = store.bytes[0]
    rank_relative = offset == "rank"
    STORE = (store.sem, store.scope, store.value.evaluate(world_size=world_size, epoch=0),
             0 if rank_relative else int(offset), 1, rank_relative)
    waits = []
    for number, step in enumerate(wait, start=1):
        if step.op != "await" or step.read != "load" or step.sem is None or step.until.op != "==" or \
                step.from_ not in (None, "self"):
            refuse("wait", number, "not an await of a load of this rank's word until == a value")
        byte, size = step.bytes if step.bytes is not None else (0, 4)
        waits.append((step.sem, step.scope, int(byte), size,
                      step.until.rhs.evaluate(world_size=world_size, epoch=0)))
    return STORE, tuple(waits)


def protocol_harness(path: Path, world_size: int = 2):
    """The all-reduce of :func:`all_reduce_kernel` with the flag steps of protocol file ``path``."""
    store, waits = flag_steps(path, world_size)

    def harness(sv):
        partial = sv.heap.zeros((4,), torch.int32)
        flag = sv.heap.zeros((1,), torch.int32)
        out = sv.heap.zeros((4,), torch.int32)
        for r in range(sv.world_size):
            sv.launch(all_reduce_kernel, (2,), partial.on(r), flag.on(r), out.on(r), sv.heap.bases, r,
                      WORLD=sv.world_size, BLOCK=4, STORE=store, WAITS=waits, rank=r)
        sv.host_barrier()
        sv.expect_written(out)

    harness.__name__ = f"all_reduce[{path.stem}]"
    return harness


# ----- the fix vLLM shipped: a whole 32-bit flag per producer ------------------------------------

@triton.jit
def word_flags_kernel(flags_ptr, data_ptr, out_ptr):
    pid = tl.program_id(0)
    if pid < 2:  # producers: the data, then this producer's own 32-bit flag
        tl.store(data_ptr + pid, pid + 1)
        tl.debug_barrier()
        tl.atomic_xchg(flags_ptr + pid, 1, sem="release", scope="gpu")
    else:  # consumer: each flag, read whole with the size it was written with
        while tl.atomic_add(flags_ptr, 0, sem="acquire", scope="gpu") == 0:
            pass
        while tl.atomic_add(flags_ptr + 1, 0, sem="acquire", scope="gpu") == 0:
            pass
        tl.store(out_ptr + tl.arange(0, 2), tl.load(data_ptr + tl.arange(0, 2)))


def word_flags(sv):
    flags = sv.heap.zeros((2,), torch.int32)
    data = sv.heap.zeros((2,), torch.int32)
    out = sv.heap.zeros((2,), torch.int32)
    sv.launch(word_flags_kernel, (3,), flags.on(0), data.on(0), out.on(0), rank=0)
    sv.expect_written(out.on(0))


# ----- what the front end refuses about byte-addressed words ------------------------------------

@triton.jit
def wrong_width_kernel(flag_ptr):
    store_byte(flag_ptr, 1, "release", "gpu")  # BUG: a .b8 store through a pointer to int32


def wrong_width(sv):
    flag = sv.heap.zeros((1,), torch.int32)
    sv.launch(wrong_width_kernel, (1,), flag.on(0), rank=0)


@triton.jit
def atomic_on_byte_word_kernel(flag_ptr):
    if tl.program_id(0) == 0:
        store_byte(flag_ptr.to(tl.pointer_type(tl.int8)) + 1, 1, "release", "gpu")
    else:
        tl.atomic_xchg(flag_ptr, 1, sem="release", scope="gpu")  # an atomic of the word others write in part


def atomic_on_byte_word(sv):
    flag = sv.heap.zeros((1,), torch.int32)
    sv.launch(atomic_on_byte_word_kernel, (2,), flag.on(0), rank=0)
