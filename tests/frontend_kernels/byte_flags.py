"""vLLM #2760's flags for the kernel front end (tests/test_frontend_bytes.py).

Two producer programs each write a data element and then set a flag; a consumer waits for both
flags and reads the data. ``byte_flags`` is the shape of vLLM's custom all-reduce before its fix
(vllm-project/vllm#2760): each producer stores its own *byte* of one 8-byte flag word (an
``int8`` pointer cast from the ``int64`` word) and the consumer polls the whole word; under the
PTX model those accesses overlap partially and are not morally strong. ``word_flags`` is the fix:
one 32-bit flag per producer, released and acquired whole.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def byte_flags_kernel(flag_ptr, data_ptr, out_ptr):
    pid = tl.program_id(0)
    if pid < 2:  # producers: the data, then this producer's byte of the flag word
        tl.store(data_ptr + pid, pid + 1)
        tl.debug_barrier()
        byte = flag_ptr.to(tl.pointer_type(tl.int8)) + pid
        tl.store(byte, 1)  # BUG (vLLM #2760): one byte of an 8-byte word the consumer reads whole
    else:  # consumer: both bytes set, then the data
        while tl.load(flag_ptr, volatile=True) != 0x0101:
            pass
        tl.store(out_ptr + tl.arange(0, 2), tl.load(data_ptr + tl.arange(0, 2)))


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


def byte_flags(sv):
    flag = sv.heap.zeros((1,), torch.int64)
    data = sv.heap.zeros((2,), torch.int32)
    out = sv.heap.zeros((2,), torch.int32)
    sv.launch(byte_flags_kernel, (3,), flag.on(0), data.on(0), out.on(0), rank=0)
    sv.expect_written(out.on(0))


def word_flags(sv):
    flags = sv.heap.zeros((2,), torch.int32)
    data = sv.heap.zeros((2,), torch.int32)
    out = sv.heap.zeros((2,), torch.int32)
    sv.launch(word_flags_kernel, (3,), flags.on(0), data.on(0), out.on(0), rank=0)
    sv.expect_written(out.on(0))
