"""Build a kernel for a protocol: check the configuration, derive the plan, fix the meta-parameters.

``build(protocol, config)`` is where everything that can be refused is refused, before any
launch: a step the kernels cannot express (:class:`syncverify.kernels.errors.UnsupportedStep`), a size that
does not divide, a grid that cannot be resident (:class:`syncverify.kernels.errors.StressConfigError`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from syncverify.kernels.config import KernelConfig, check_config
from syncverify.kernels.plan import KernelPlan, build_plan


@dataclass(frozen=True)
class BuiltKernel:
    """A checked configuration and the compile-time plan of one protocol."""

    config: KernelConfig
    plan: KernelPlan
    protocol: Any = field(compare=False)

    @property
    def lock_count(self) -> int:
        return len(self.plan.locks)

    @property
    def push_lock_count(self) -> int:
        return len(self.plan.push_locks)


def build(protocol: Any, config: KernelConfig, *, sms: int | None = None,
          gpus: int | None = None, push: Any = None) -> BuiltKernel:
    """Check ``config`` and turn ``protocol`` into the plan the kernel is specialized on.

    Parameters
    ----------
    protocol : syncverify.protocols.model.Protocol
    config : KernelConfig
    sms, gpus : int, optional
        Limits of the machine (see :func:`syncverify.kernels.config.check_config`).
    push : syncverify.protocols.model.Protocol, optional
        all-scatter's push protocol (default: ``syncverify.scenarios.DEFAULT_PUSH``, as the model).

    Raises
    ------
    StressConfigError, UnsupportedStep
        With one line naming what to change.
    """
    check_config(config, sms=sms, gpus=gpus)
    if config.kernel == "all-scatter" and push is None:
        from syncverify.protocols.registry import load_protocol
        from syncverify.scenarios import DEFAULT_PUSH

        push = load_protocol(DEFAULT_PUSH)
    plan = build_plan(protocol, world_size=config.world_size, lock_dtype=config.lock_dtype,
                      push=push if config.kernel == "all-scatter" else None)
    return BuiltKernel(config, plan, protocol)


def torch_dtype(name: str):
    """The torch dtype of a ``--dtype`` name."""
    from syncverify.kernels._deps import torch

    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[name]


def lock_torch_dtype(name: str):
    from syncverify.kernels._deps import torch

    return {"int32": torch.int32, "int8": torch.int8}[name]


def ownership_tensor(config: KernelConfig, device):
    """:func:`syncverify.rules.ownership_table` of a configuration's tiles as an int32 tensor on
    ``device`` (made once per size and device)."""
    return _ownership(config.tiles, config.world_size, config.distribution, str(device))


@functools.lru_cache(maxsize=32)
def _ownership(tiles: int, world_size: int, distribution: str, device: str):
    from syncverify import rules
    from syncverify.kernels._deps import torch

    table = rules.ownership_table(tiles, world_size, distribution)
    return torch.tensor(table, dtype=torch.int32).to(device)


VALUES_ROW = 4  # int32 per row of the run-time operand ring: 16 bytes


def runtime_values_tensor(built: BuiltKernel, epochs, device):
    """``[len(epochs), slots]`` int32, ``slots`` rounded up to a multiple of 4: each launch's
    run-time operands (``syncverify.kernels.plan``), zero-padded.

    The padding keeps every row 16-byte aligned. Triton specializes a pointer argument on
    16-byte alignment, so with rows of one or two int32 the launch that reads row 1 compiled
    the kernel a second time, in the middle of a timed run."""
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
    from syncverify.kernels._deps import torch
    from syncverify.kernels.delays import TABLE_SHAPE

    return torch.zeros(TABLE_SHAPE, dtype=torch.int32).to(device)


def launch_values(built: BuiltKernel, epoch: int, vals, device):
    """One launch's run-time operands: ``vals`` if the caller prepared them, else built now."""
    return vals if vals is not None else runtime_values_tensor(built, [epoch], device)[0]
