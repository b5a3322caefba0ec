"""The fused kernels' meta-parameters and host launch, written once for the four kernels.

:func:`meta_parameters` builds every ``tl.constexpr`` argument a fused kernel may take from a
:class:`~syncverify.kernels.build.BuiltKernel` (one table, :data:`META`); a kernel module's
``meta_parameters`` (:func:`meta_parameters_for`) keeps the ones its kernel declares, once per
build. :func:`launcher` makes a module's launch function: check (the build did) -> allocate the
per-launch tensors -> grid -> launch, each kernel argument found by its parameter's name
(:func:`heap_fields`, once per kernel), so a kernel's parameter list is its only description of
its launch.
"""

from __future__ import annotations

from typing import Any, Callable

from syncverify.kernels.build import (
    BuiltKernel,
    delay_table_tensor,
    launch_values,
    once_per_build,
    ownership_tensor,
)
from syncverify.kernels._deps import torch
from syncverify.kernels.steps import PARTS, PDL_MODES, wrap_plan
from syncverify.kernels.tile import use_scratch_allocator

#: Every meta-parameter of the fused kernels: name -> its value for (config, plan).
META: dict[str, Callable[[Any, Any], Any]] = {
    "WORLD": lambda c, p: c.world_size, "VIRTUAL": lambda c, p: c.virtual, "TABLE": lambda c, p: c.table,
    "BLOCK_M": lambda c, p: c.block_m, "BLOCK_N": lambda c, p: c.block_n, "BLOCK_K": lambda c, p: c.block_k,
    "GEMM_SMS": lambda c, p: c.gemm_sms, "COMM_SMS": lambda c, p: c.comm_sms, "RECV_SMS": lambda c, p: c.recv_sms,
    "LOADS": lambda c, p: c.loads, "GROUP_M": lambda c, p: c.group_m, "PRODUCTION": lambda c, p: c.production,
    "SIGNAL": lambda c, p: wrap_plan(p.signal), "WAIT": lambda c, p: wrap_plan(p.wait),
    "PUSH_SIGNAL": lambda c, p: wrap_plan(p.push_signal), "PUSH_WAIT": lambda c, p: wrap_plan(p.push_wait),
    "TILE_STORE_CACHE": lambda c, p: p.tile_store_cache, "TILE_LOAD_VOLATILE": lambda c, p: p.tile_load_volatile,
    "DELAYS": lambda c, p: c.delays, "NUM_WARPS": lambda c, p: c.num_warps, "ORDER": lambda c, p: c.order,
    "INTERPRET": lambda c, p: c.interpret,
    "BEFORE_STORE": lambda c, p: wrap_plan(p.before_store), "AFTER_LOAD": lambda c, p: wrap_plan(p.after_load),
    "HAS_BEFORE": lambda c, p: bool(p.before_store), "HAS_AFTER": lambda c, p: bool(p.after_load),
    "SLOTS": lambda c, p: p.slots, "NLOCKS": lambda c, p: len(p.locks), "GEMM_ONLY": lambda c, p: c.gemm_only,
    "STAMPS": lambda c, p: c.stamps, "PDL": lambda c, p: PDL_MODES.get(c.launches, 0),
    "PART": lambda c, p: PARTS["fused"],  # a split launch passes its own (split_launches)
}


def meta_parameters(built: BuiltKernel, names, extra: Callable[[BuiltKernel], dict] | None = None) -> dict:
    """The meta-parameters ``names`` of a kernel for ``built`` (:data:`META`), then ``extra(built)``'s
    (a scenario's own, or a value of its own for a shared name)."""
    c, plan = built.config, built.plan
    meta = {name: META[name](c, plan) for name in names if name in META}
    return meta | (extra(built) if extra else {})


def meta_parameters_for(fn, extra: Callable[[BuiltKernel], dict] | None = None):
    """A kernel module's ``meta_parameters(built)``: the ``tl.constexpr`` arguments of kernel ``fn``
    (:func:`meta_parameters`), built once per build (``syncverify.kernels.build.once_per_build``)."""
    names = [p.name for p in fn.params if p.is_constexpr]

    def meta(built: BuiltKernel) -> dict:
        return meta_parameters(built, names, extra)

    meta.__name__ = "meta_parameters"
    meta.__doc__ = f"The ``tl.constexpr`` arguments of :func:`{fn.__name__}` for a built kernel."
    return once_per_build(meta)


#: Kernel parameters that are not heap buffers (:func:`kernel_arguments`).
NOT_HEAP = frozenset({"A", "B", "status", "M", "N", "K", "stride_ar", "stride_am", "stride_ak", "stride_br",
                      "stride_bk", "stride_bn", "ownership", "rank", "vals", "max_polls", "delay_seed", "delay_pct",
                      "delay_max_ns", "delay_sites", "delay_table"})


def heap_fields(fn) -> list[tuple[str, str | None]]:
    """Where each run-time argument of kernel ``fn`` comes from, in its parameter order: ``(name,
    None)`` for :data:`NOT_HEAP`, else ``(buffer, field)``: ``X`` is heap buffer ``X``'s ``local``,
    ``X_table`` its ``table``, ``X_rank_stride`` its ``rank_stride``."""
    fields = []
    for name in (p.name for p in fn.params if not p.is_constexpr):
        if name == "stamps":  # after the meta-parameters, with a default: a keyword (launch_arguments)
            continue
        if name in NOT_HEAP:
            fields.append((name, None))
        elif name.endswith("_rank_stride"):
            fields.append((name.removesuffix("_rank_stride"), "rank_stride"))
        elif name.endswith("_table"):
            fields.append((name.removesuffix("_table"), "table"))
        else:
            fields.append((name, "local"))
    return fields


def kernel_arguments(fields, built: BuiltKernel, heap, A, B, status, run: dict) -> list:
    """The run-time arguments of a kernel whose :func:`heap_fields` are ``fields``: ``A``, ``B``,
    ``status``, the sizes ``M, N, K`` (one rank's block of N, slice of K), the input strides
    (``stride_ar``/``stride_br``: between virtual ranks' inputs, 0 for one rank's), ``ownership``
    (``syncverify.protocols.rules.ownership_table``), the heap's buffers, and ``run``'s values."""
    c = built.config
    virtual_inputs = A.shape[0] > 1
    values = dict(A=A, B=B, status=status, M=c.m, N=c.n_per_rank, K=c.k_per_rank,
                  stride_ar=A.stride(0) if virtual_inputs else 0, stride_am=A.stride(1), stride_ak=A.stride(2),
                  stride_br=B.stride(0) if virtual_inputs else 0, stride_bk=B.stride(1), stride_bn=B.stride(2),
                  **run)
    if ("ownership", None) in fields:
        values["ownership"] = ownership_tensor(c, A.device)
    return [values[name] if field is None else getattr(heap[name], field) for name, field in fields]


def launch_arguments(fn, meta: Callable[[BuiltKernel], dict], built: BuiltKernel, heap, A, B, status, *,
                     rank: int = 0, epoch: int = 0, max_polls: int = 1 << 20, delay_seed: int = 0,
                     delay_pct: int = 0, delay_max_ns: int = 1, delay_sites: int = -1, delay_table=None,
                     vals=None, stamps=None, fields: list | None = None) -> tuple[list, dict]:
    """The positional arguments and keyword meta-parameters of one launch of kernel ``fn``: what
    :func:`launcher`'s launch passes, for a caller that launches the kernel itself (the front
    end's cross-check harness). ``fields``: ``heap_fields(fn)``, when the caller keeps it; ``stamps``:
    the int64 ``[grid, 2 + 4 * config.stamps]`` timestamp rows of a build with ``stamps`` (else None)."""
    c = built.config
    run = dict(rank=rank, vals=launch_values(built, epoch, vals, A.device), max_polls=max_polls,
               delay_seed=delay_seed, delay_pct=delay_pct, delay_max_ns=max(delay_max_ns, 1),
               delay_sites=delay_sites, delay_table=delay_table_tensor(delay_table, A.device))
    return (kernel_arguments(fields if fields is not None else heap_fields(fn), built, heap, A, B, status, run),
            dict(num_warps=c.num_warps, num_stages=c.num_stages, **meta(built),
                 **({} if stamps is None else {"stamps": stamps})))


def split_launches(config) -> list[tuple[int, int, str, bool]]:
    """The launches of one call, in the order the host issues them: ``(grid, PART, stream,
    pdl)``. ``fused``: the whole grid (``PART`` 0) on the current stream. The split modes (the
    model's ``--launches``, ``syncverify.scenarios.build.role_kernel``): the first role's
    programs (``PART`` 1) and the others' (``PART`` 2); ``two-stream`` on streams ``first`` and
    ``rest`` (``consumers-first``: the others issued first), ``pdl``/``pdl-no-wait`` on the
    current stream, the others launched as the programmatic dependent of the first.

    >>> from syncverify.kernels.config import KernelConfig
    >>> split_launches(KernelConfig(gemm_sms=2, comm_sms=1, world_size=2, launches="two-stream", order="consumers-first"))
    [(2, 2, 'rest', False), (4, 1, 'first', False)]
    >>> split_launches(KernelConfig(gemm_sms=2, comm_sms=1, world_size=2, launches="pdl"))
    [(4, 1, 'current', False), (2, 2, 'current', True)]
    """
    if config.launches == "fused":
        return [(config.grid, PARTS["fused"], "current", False)]
    first, rest = config.grids
    if config.launches == "two-stream":
        out = [(first, PARTS["first"], "first", False), (rest, PARTS["rest"], "rest", False)]
        return out[::-1] if config.order == "consumers-first" else out
    return [(first, PARTS["first"], "current", False), (rest, PARTS["rest"], "current", True)]


#: The two streams of ``two-stream`` per device (created once: a new stream per launch would cost
#: the stress loop host time); the caller's current stream waits for both after a call.
_STREAMS: dict = {}


def _launch_split(fn, config, args: list, kwargs: dict, compile_only: bool):
    """Issue :func:`split_launches`' launches of ``fn`` (interpreter: one after another, in that
    order). Returns the last launch's result (the compiled kernel on the GPU)."""
    out = None
    current = None if config.interpret or compile_only else torch.cuda.current_stream()
    streams = {}
    if current is not None and config.launches == "two-stream":
        pair = _STREAMS.setdefault(current.device, (torch.cuda.Stream(current.device), torch.cuda.Stream(current.device)))
        streams = {"first": pair[0], "rest": pair[1]}
        for s in pair:
            s.wait_stream(current)  # what the caller issued before (resets, inputs) comes first
    for grid, part, stream, pdl in split_launches(config):
        meta = kwargs | {"PART": part} | ({"launch_pdl": True} if pdl and not config.interpret else {})
        run = fn.launcher((grid,), interpret=config.interpret, compile_only=compile_only)
        if stream in streams:
            with torch.cuda.stream(streams[stream]):
                out = run(*args, **meta)
        else:
            out = run(*args, **meta)
    for s in streams.values():
        current.wait_stream(s)  # the call ends when both have: the caller synchronizes on its own stream
    return out


def launcher(fn, meta: Callable[[BuiltKernel], dict], doc: str):
    """A kernel module's launch function for kernel ``fn`` (``doc``: what its heap holds)."""
    fields = heap_fields(fn)  # once per kernel: the launch path is the stress loop's host cost

    def launch(built: BuiltKernel, heap, A, B, status, *, compile_only: bool = False, **run):
        c = built.config
        if not c.interpret:
            use_scratch_allocator()
        args, kwargs = launch_arguments(fn, meta, built, heap, A, B, status, fields=fields, **run)
        if c.launches != "fused":
            return _launch_split(fn, c, args, kwargs, compile_only)
        return fn.launcher((c.grid,), interpret=c.interpret, compile_only=compile_only)(*args, **kwargs)

    launch.__doc__ = doc + """

    ``A``/``B`` are the inputs of every virtual rank (``[world, ...]``) or this rank's
    (``[1, ...]``); ``status`` is ``[world, 2 * tiles, 4]`` int32, zeroed by the caller. Returns what
    the launcher returns (the compiled kernel, on the GPU)."""
    return launch
