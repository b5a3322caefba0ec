"""Inputs whose products are known exactly, different every iteration, with each rank's share visible.

Every product the kernels compute is ``2**r * U`` with ``U[i, j] = 2**(a[i] + b[j])``:

* all-reduce: rank ``r``'s partial of C is ``2**r * U``, so C is ``(2**W - 1) * U``, and a sum
  that missed some ranks' partials is ``q * U`` with ``q`` the bitmask of the ranks it did add;
* all-scatter: rank ``s``'s column block of C is ``2**s * U``, so a tile tells which rank's
  block it came from;
* gemm-reduce-scatter: as all-reduce (each rank holds a K-slice), C is ``(2**W - 1) * U`` on the
  tile's owner;
* all-gather-gemm: the rows of rank ``s``'s shard of A carry ``2**s``, so C's rows of shard ``s``
  are ``2**s * U`` on every rank (a row tells whose shard it was computed from).

``a[i]`` is drawn from ``{p, p + 2}`` and ``b[j]`` from ``{0, 2}``, with ``p`` the parity of the
input set: consecutive iterations use sets of opposite parity, so no element of an iteration's
result equals the previous iteration's (a stale tile is recognised as stale).

The matrices are dense, not mostly zero: in each rank's K range one *signal* column carries
``2**a[i]`` (times ``2**r``) against a row carrying ``2**b[j]``, and every other column pairs with
a twin that cancels it exactly (``z * w - z * w``), with ``z, w`` drawn from ``{1, 2}``. All values
are small powers of two times 1 or 2: exact in bf16, fp16 and tf32, and every partial sum of the
fp32 accumulation is an integer below ``2**24``, so the products are exact in any order.
"""

from __future__ import annotations

from dataclasses import dataclass

from syncverify.kernels._deps import torch
from syncverify.kernels.build import torch_dtype
from syncverify.kernels.config import KernelConfig


@dataclass
class InputSet:
    """One iteration's inputs and the exponents that define its expected outputs."""

    A: "torch.Tensor"  # [W, M, K_r] (all-reduce) or [W, M, K] (all-scatter, equal for every rank)
    B: "torch.Tensor"  # [W, K_r, N] (all-reduce) or [W, K, N / W] (all-scatter)
    row_exp: "torch.Tensor"  # int32 [M]
    col_exp: "torch.Tensor"  # int32 [N] (global columns)
    parity: int


def _cancelling(rows: int, cols: int, *, m: int, n: int, generator, device, dtype):
    """``(A [m x cols], B [cols x n])`` whose product is zero, with dense {±1, ±2} entries,
    except column/row ``signal`` which is left zero for the caller to fill. Returns
    ``(A, B, signal)``."""
    perm = torch.randperm(cols, generator=generator, device=device)
    signal = perm[0]
    pairs = perm[1: 1 + 2 * ((cols - 1) // 2)].view(-1, 2)
    A = torch.zeros(m, cols, dtype=torch.float32, device=device)
    B = torch.zeros(cols, n, dtype=torch.float32, device=device)
    z = torch.randint(1, 3, (m, pairs.shape[0]), generator=generator, device=device).float()
    w = torch.randint(1, 3, (pairs.shape[0], n), generator=generator, device=device).float()
    A[:, pairs[:, 0]] = z
    A[:, pairs[:, 1]] = z
    B[pairs[:, 0]] = w
    B[pairs[:, 1]] = -w
    if cols % 2 == 0:  # one column left unpaired: zero in A, anything in B
        B[perm[-1]] = 1.0
    return A, B, signal


def make_inputs(config: KernelConfig, *, parity: int, generator, device, ranks=None) -> InputSet:
    """Draw one input set for ``config`` (``ranks``: which ranks' inputs, default all)."""
    c = config
    W = c.world_size
    ranks = list(range(W)) if ranks is None else list(ranks)
    dtype = torch_dtype(c.dtype)
    row_exp = (parity + 2 * torch.randint(0, 2, (c.m,), generator=generator, device=device)).to(torch.int32)
    col_exp = (2 * torch.randint(0, 2, (c.n,), generator=generator, device=device)).to(torch.int32)
    row_scale = torch.exp2(row_exp.float())
    As, Bs = [], []
    if c.kernel == "all-gather-gemm":
        A, B, s = _cancelling(c.m, c.k, m=c.m, n=c.n, generator=generator, device=device, dtype=dtype)
        shard = torch.arange(c.m, device=device) // c.m_per_rank
        A = A * torch.exp2(shard.float())[:, None]
        A[:, s] = row_scale * torch.exp2(shard.float())
        B[s] = torch.exp2(col_exp.float())
        mr = c.m_per_rank
        for r in ranks:
            As.append(A[r * mr:(r + 1) * mr].to(dtype).contiguous())
            Bs.append(B.to(dtype))
    elif c.kernel in ("all-reduce", "gemm-reduce-scatter"):
        col_scale = torch.exp2(col_exp.float())
        for r in ranks:
            A, B, s = _cancelling(c.m, c.k_per_rank, m=c.m, n=c.n, generator=generator,
                                  device=device, dtype=dtype)
            A[:, s] = row_scale
            B[s] = col_scale
            As.append((A * 2.0**r).to(dtype))
            Bs.append(B.to(dtype))
    else:
        A, B, s = _cancelling(c.m, c.k, m=c.m, n=c.n, generator=generator, device=device, dtype=dtype)
        A[:, s] = row_scale
        B[s] = torch.exp2(col_exp.float())
        nr = c.n_per_rank
        for r in ranks:
            As.append(A.to(dtype))
            Bs.append((B[:, r * nr:(r + 1) * nr] * 2.0**r).to(dtype).contiguous())
    return InputSet(torch.stack(As), torch.stack(Bs), row_exp, col_exp, parity)


def expected_output(config: KernelConfig, inputs: InputSet) -> "torch.Tensor":
    """The exact C (fp32, ``M x N``) every rank must hold after the launch."""
    c = config
    U = torch.exp2((inputs.row_exp[:, None] + inputs.col_exp[None, :]).float())
    if c.kernel in ("all-reduce", "gemm-reduce-scatter"):
        return U * float(2**c.world_size - 1)
    if c.kernel == "all-gather-gemm":
        shard = torch.arange(c.m, device=U.device) // c.m_per_rank
        return U * torch.exp2(shard.float())[:, None]
    owner = torch.arange(c.n, device=U.device) // c.n_per_rank
    return U * torch.exp2(owner.float())[None, :]
