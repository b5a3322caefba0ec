"""GEMM + all-scatter with work-group specialization, in the style of iris example 10 (seed 001).

One persistent kernel per rank. Every rank computes a column block of C (its slice of B's
columns, all of A). Programs ``pid < GEMM_SMS`` are GEMM programs: each stores its tiles into
the rank's block of ``c_global`` (the rank's own copy) and sets the tile's lock. The other
programs are communication programs: each waits for a tile's lock, then ``iris.put`` s the tile
into every other rank's ``c_global``, so that every rank ends with the whole C.

``VERSION`` picks the lock handshake (the ``signal`` and ``wait`` sections side by side):

* ``"wt"``: the original. ``tl.debug_barrier()``, then a ``.wt`` store of the lock; the
  communication programs spin on ``.cv`` volatile loads.
* ``"xchg"``: the fix (bug 3 of the report): ``tl.atomic_xchg(locks + tile_id, 1,
  sem="release", scope="gpu")`` instead of barrier + ``.wt`` store; the ``.cv`` spin kept as a
  cheap poll, then one ``tl.atomic_cas(locks + tile_id, 1, 1, sem="acquire", scope="gpu")``.
* ``"barrier_xchg"``: the fix with a ``tl.debug_barrier()`` before the exchange (every warp's tile
  store before thread 0's release) and one after the acquire CAS (its result is unused, so
  nothing else orders the other warps' reads after thread 0's acquire).

Locks are ``int32`` (the fix needs atomics; the original had ``int8``). Resetting them between
calls is the host's job: see ``harness.py`` (bug 2 of the report).
"""

import triton
import triton.language as tl

import iris


@triton.jit()
def persistent_gemm_all_scatter_wg_specialization(
    # pointers: A (M x K), this rank's B columns (K x N), C (M x N * world_size) and locks on the heap
    A, B, c_global, locks,
    # sizes (N: this rank's columns)
    M, N, K,
    # strides
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm_global, stride_cn_global,
    # meta-parameters
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GEMM_SMS: tl.constexpr, NUM_SMS: tl.constexpr, VERSION: tl.constexpr,
    heap_bases: tl.tensor, cur_rank: tl.constexpr, world_size: tl.constexpr,
):
    """GEMM programs produce this rank's tiles of C; communication programs scatter them."""
    pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    total_tiles = tl.cdiv(M, BLOCK_SIZE_M) * num_pid_n

    if pid < GEMM_SMS:
        for tile_id in range(pid, total_tiles, GEMM_SMS):
            # ----- K loop --------------------------------------------------------------------
            rm = (tile_id // num_pid_n) * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            rn = (tile_id % num_pid_n) * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            rk = tl.arange(0, BLOCK_SIZE_K)
            acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
            for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
                a = tl.load(A + rm[:, None] * stride_am + (k * BLOCK_SIZE_K + rk[None, :]) * stride_ak)
                b = tl.load(B + (k * BLOCK_SIZE_K + rk[:, None]) * stride_bk + rn[None, :] * stride_bn)
                acc += tl.dot(a, b)
            c = acc.to(c_global.type.element_ty)

            # ----- store into this rank's column block of C (N is multiplied by the rank) ----
            global_offset = rm[:, None] * stride_cm_global + (rn[None, :] + cur_rank * N) * stride_cn_global
            tl.store(c_global + global_offset, c, cache_modifier=".wt")

            # ----- signal: tile_id is in c_global --------------------------------------------
            if VERSION == "wt":
                tl.debug_barrier()
                tl.store(locks + tile_id, 1, cache_modifier=".wt")
            elif VERSION == "xchg":
                tl.atomic_xchg(locks + tile_id, 1, sem="release", scope="gpu")
            else:  # "barrier_xchg"
                tl.debug_barrier()
                tl.atomic_xchg(locks + tile_id, 1, sem="release", scope="gpu")

    else:  # pid >= GEMM_SMS
        COMM_SMS = NUM_SMS - GEMM_SMS
        pid = pid - GEMM_SMS
        for tile_id in range(pid, total_tiles, COMM_SMS):
            rm = (tile_id // num_pid_n) * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            rn = (tile_id % num_pid_n) * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            global_offset = rm[:, None] * stride_cm_global + (rn[None, :] + cur_rank * N) * stride_cn_global

            # ----- wait: spin on a cheap volatile load, then (fixes) an acquire CAS -----------
            while tl.load(locks + tile_id, cache_modifier=".cv", volatile=True) != 1:
                pass
            if VERSION == "xchg":
                tl.atomic_cas(locks + tile_id, 1, 1, sem="acquire", scope="gpu")
            elif VERSION == "barrier_xchg":
                tl.atomic_cas(locks + tile_id, 1, 1, sem="acquire", scope="gpu")
                tl.debug_barrier()

            # ----- scatter the tile into every other rank's C -------------------------------
            for remote_rank in range(world_size):
                if remote_rank != cur_rank:
                    iris.put(c_global + global_offset, c_global + global_offset, cur_rank, remote_rank, heap_bases)
