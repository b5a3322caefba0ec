"""Build a kernel for a protocol: check the configuration, derive the plan, fix the meta-parameters.

``build(protocol, config)`` is where everything that can be refused is refused, before any
launch: a step the kernels cannot express (:class:`syncverify.kernels.errors.UnsupportedStep`), a size that
does not divide, a grid that cannot be resident (:class:`syncverify.kernels.errors.StressConfigError`).
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass, field
from typing import Any

from syncverify.kernels.config import KernelConfig, check_config
from syncverify.kernels.plan import KernelPlan, build_plan
from syncverify.kernels.errors import UnsupportedStep
from syncverify.protocols import rules
from syncverify.protocols.registry import load_protocol
from syncverify.scenarios.build import DEFAULT_PUSH, barrier_id_clash

#: ``--protocol none``: signal and wait compiled out. Not a protocol (the model has nothing to
#: check and would call it unsafe): the cost baseline ``syncverify bench`` measures others against.
NO_SYNC = "none"


def no_sync_plan(*, world_size: int, lock_dtype: str = "int32", push: bool = False) -> KernelPlan:
    """The plan of :data:`NO_SYNC`: no signal or wait steps (all-scatter's push stage too), no
    cache modifier on tile stores, plain tile loads. One lock row stays allocated, never touched."""
    return KernelPlan(protocol=NO_SYNC, signal=(), wait=(), locks=("unused",), epoch_exprs=(),
                      world_size=world_size, tile_store_cache="", tile_load_volatile=False,
                      lock_dtype=lock_dtype,
                      **(dict(push_protocol=NO_SYNC, push_locks=("unused",)) if push else {}))


@dataclass(frozen=True)
class BuiltKernel:
    """A checked configuration and the compile-time plan of one protocol (``protocol`` is None
    for :data:`NO_SYNC`)."""

    config: KernelConfig
    plan: KernelPlan
    protocol: Any = field(compare=False)

    @property
    def synchronized(self) -> bool:
        """False for the :data:`NO_SYNC` build: its outputs are races, never results."""
        return self.plan.protocol != NO_SYNC

    @property
    def lock_count(self) -> int:
        """Lock arrays to allocate: one per lock and slot (``slot * len(locks) + lock``)."""
        return len(self.plan.locks) * self.plan.slots

    @property
    def data_rows(self) -> int:
        """Rows of the producer's tile buffer (``partial``/``local``): ``M`` per slot."""
        return self.config.m * self.plan.slots

    @property
    def push_lock_count(self) -> int:
        return len(self.plan.push_locks)


def build(protocol: Any, config: KernelConfig, *, sms: int | None = None,
          gpus: int | None = None, push: Any = None) -> BuiltKernel:
    """Check ``config`` and turn ``protocol`` into the plan the kernel is specialized on.

    Parameters
    ----------
    protocol : syncverify.protocols.model.Protocol, or None
        None (or :data:`NO_SYNC`) builds the unsynchronized cost baseline (:func:`no_sync_plan`).
    config : KernelConfig
    sms, gpus : int, optional
        Limits of the machine (see :func:`syncverify.kernels.config.check_config`).
    push : syncverify.protocols.model.Protocol, optional
        all-scatter's push protocol (default: ``syncverify.scenarios.build.DEFAULT_PUSH``, as the model).

    Raises
    ------
    StressConfigError, UnsupportedStep
        With one line naming what to change.
    """
    check_config(config, sms=sms, gpus=gpus)
    if protocol is None or protocol == NO_SYNC:
        plan = no_sync_plan(world_size=config.world_size, lock_dtype=config.lock_dtype,
                            push=config.kernel == "all-scatter")
        return BuiltKernel(config, plan, None)
    if config.kernel == "all-scatter" and getattr(protocol, "slots", 1) != 1:
        raise UnsupportedStep(f"protocol {protocol.name!r}: slots = {protocol.slots} is run by the all-reduce kernel "
                              "only; the all-scatter kernel keeps one slot of local tiles and locks")
    if config.kernel == "all-scatter" and push is None:
        push = load_protocol(DEFAULT_PUSH)
    _check_warp_selections(protocol, push if config.kernel == "all-scatter" else None, config)
    plan = build_plan(protocol, world_size=config.world_size, lock_dtype=config.lock_dtype,
                      push=push if config.kernel == "all-scatter" else None)
    return BuiltKernel(config, plan, protocol)


def _check_warp_selections(protocol: Any, push: Any, config: KernelConfig) -> None:
    """A barrier step that selects warps names warps of an 8-warp CTA: the kernel must run 8
    warps (the interpreter runs no barrier, so any number there). A CTA that runs two protocols
    (all-scatter's comm CTA: the protocol's wait, the push protocol's signal) must not have them
    share the id of such a barrier (``syncverify.scenarios.build.barrier_id_clash``, as the model)."""
    protocols = {"protocol": protocol} | ({"push": push} if push is not None else {})
    selecting = [(p.name, s) for p in protocols.values() for section in rules.SECTIONS
                 for s in rules.section_steps(p, section) if s.op == "barrier" and s.selects_warps]
    if selecting and config.num_warps != rules.KERNEL_WARPS and not config.interpret:  # the interpreter runs no bar
        raise UnsupportedStep(f"protocol {selecting[0][0]!r}: its barrier steps select warps of a "
                              f"{rules.KERNEL_WARPS}-warp CTA; build the kernel with num_warps={rules.KERNEL_WARPS} "
                              f"(not {config.num_warps})")
    clash = barrier_id_clash(protocols, config.kernel)
    if clash:
        raise UnsupportedStep(clash)


def torch_dtype(name: str):
    """The torch dtype of a ``--dtype`` name."""
    # torch/triton: syncverify.kernels._deps imports them; only the GPU path needs it
    from syncverify.kernels._deps import torch

    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[name]


def lock_torch_dtype(name: str):
    # torch/triton: syncverify.kernels._deps imports them; only the GPU path needs it
    from syncverify.kernels._deps import torch

    return {"int32": torch.int32, "int8": torch.int8}[name]


def once_per_build(meta_parameters):
    """Decorate a kernel module's ``meta_parameters(built)`` so that it runs once per
    :class:`BuiltKernel` (each call returns a fresh dict of the same values).

    Wrapping every plan step in ``tl.constexpr`` on each launch, and hashing the new objects
    into Triton's kernel-cache key, was the largest host cost of an eager launch (``cProfile``
    in ``benchmarks/stress_bench.py``'s profile section, docs/RESULTS.md); the same objects
    also let that key compare by identity."""
    cache: dict[int, tuple[Any, dict]] = {}

    @functools.wraps(meta_parameters)
    def cached(built: BuiltKernel) -> dict:
        hit = cache.get(id(built))
        if hit is None or hit[0]() is not built:  # a new build (or an id reused after one was freed)
            hit = (weakref.ref(built), meta_parameters(built))
            cache[id(built)] = hit
            weakref.finalize(built, cache.pop, id(built), None)
        return dict(hit[1])

    return cached


def ownership_tensor(config: KernelConfig, device):
    """:func:`syncverify.protocols.rules.ownership_table` of a configuration's tiles as an int32 tensor on
    ``device`` (made once per size and device), each rank's list of owned tiles in the order the
    producers make them (:func:`visit_order`), so a consumer waits for tiles as they arrive. Who
    owns which tile is the model's rule, unchanged; only the order of each list is the kernel's."""
    tiles_n = config.n_per_rank // config.block_n
    return _ownership(config.m // config.block_m, tiles_n, config.world_size, config.distribution,
                      config.group_m, str(device))


def visit_order(tiles_m: int, tiles_n: int, group_m: int) -> list[int]:
    """The row-major tile indices in the producers' visiting order: the host's copy of
    ``syncverify.kernels.tile.tile_of`` (a test runs both and compares).

    >>> visit_order(3, 2, 2)
    [0, 2, 1, 3, 4, 5]
    """
    order = []
    per_group = group_m * tiles_n
    for i in range(tiles_m * tiles_n):
        first_m = (i // per_group) * group_m
        rows = min(tiles_m - first_m, group_m)
        pm = first_m + (i % per_group) % rows
        pn = (i % per_group) // rows
        order.append(pm * tiles_n + pn)
    return order


@functools.lru_cache(maxsize=32)
def _ownership(tiles_m: int, tiles_n: int, world_size: int, distribution: str, group_m: int, device: str):
    # torch/triton: syncverify.kernels._deps imports them; only the GPU path needs it
    from syncverify.kernels._deps import torch

    tiles = tiles_m * tiles_n
    table = rules.ownership_table(tiles, world_size, distribution)
    position = {t: i for i, t in enumerate(visit_order(tiles_m, tiles_n, group_m))}
    per_rank = -(-tiles // world_size)
    lists = tiles + world_size
    for r in range(world_size):
        row = table[lists + r * per_rank: lists + (r + 1) * per_rank]
        owned = sorted((t for t in row if t >= 0), key=position.__getitem__)
        table[lists + r * per_rank: lists + (r + 1) * per_rank] = owned + [-1] * (per_rank - len(owned))
    return torch.tensor(table, dtype=torch.int32).to(device)


VALUES_ROW = 4  # int32 per row of the run-time operand ring: 16 bytes


def runtime_values_tensor(built: BuiltKernel, epochs, device):
    """``[len(epochs), slots]`` int32, ``slots`` rounded up to a multiple of 4: each launch's
    run-time operands (``syncverify.kernels.plan``), zero-padded.

    The padding keeps every row 16-byte aligned. Triton specializes a pointer argument on
    16-byte alignment, so with rows of one or two int32 the launch that reads row 1 compiled
    the kernel a second time, in the middle of a timed run."""
    # torch/triton: syncverify.kernels._deps imports them; only the GPU path needs it
    from syncverify.kernels._deps import torch

    rows = [built.plan.runtime_values(epoch=e) for e in epochs]
    width = -(-max(len(r) for r in rows) // VALUES_ROW) * VALUES_ROW
    return torch.tensor([r + (0,) * (width - len(r)) for r in rows], dtype=torch.int32).to(device)


def delay_table_tensor(table, device):
    """A launch's guided delay table (``syncverify.kernels.delays.TABLE_SHAPE``, int32): ``table`` if the caller prepared one, else an all-zero table (made once per
    device; the kernels read it only when ``delay_pct < 0``)."""
    return table if table is not None else _zero_delay_table(str(device))


@functools.lru_cache(maxsize=8)
def _zero_delay_table(device: str):
    # torch/triton: syncverify.kernels._deps imports them; only the GPU path needs it
    from syncverify.kernels._deps import torch
    from syncverify.kernels.delays import TABLE_SHAPE

    return torch.zeros(TABLE_SHAPE, dtype=torch.int32).to(device)


def launch_values(built: BuiltKernel, epoch: int, vals, device):
    """One launch's run-time operands: ``vals`` if the caller prepared them, else built now."""
    return vals if vals is not None else runtime_values_tensor(built, [epoch], device)[0]
