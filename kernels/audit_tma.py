"""The PTX audit of the fused kernels' tensor-descriptor (TMA) loads (issue 26, part 5).

The role layer loads the GEMM operands A and B through tensor descriptors
(``syncverify.kernels.tile.operand_descriptors``; all-gather-gemm its B), and the model has no
event for them: they read *inputs*, which nothing writes during a launch, so the kernel boundary
orders the host's writes before them ("the CUDA API synchronization mechanisms above also
participate in proxy-preserved base causality order", syncverify.model.ptx, choice 11e), and no
``fence.proxy.async`` is needed. What makes that true is checked here on the compiled sm_90 PTX:

* every ``cp.async.bulk.tensor`` is a load (``shared <- global``), completed through an mbarrier
  (``mbarrier::complete_tx::bytes``) that the kernel waits on (``mbarrier.try_wait``); a TMA
  *store* would be a tile store the model lowers as generic ``st`` (``lower_tile_store``);
* every tensor map's global address (``tensormap.replace.tile.global_address``) comes from an
  input argument: not a lock buffer and no buffer the scenario's roles store to or read tiles of
  (``syncverify.kernels.audit.tile_accesses``), where the model's proxy rule would need a proxy
  fence the kernel does not have;
* every ``mbarrier.arrive.expect_tx`` expects the bytes of one stage's operand boxes (A's
  ``block_m x block_k`` and B's ``block_k x block_n``, each where it is a descriptor load), so by
  the model's transaction counts (choice 14, ``syncverify.model.mbarrier.phase_completions``) the
  wait sees every copy of its stage complete: one way, no hang.

:func:`tma_problems` returns the disagreements (``[]`` when the PTX is what the model assumes).
"""

from __future__ import annotations

import inspect
import re

from syncverify.kernels.audit import LOCK_BUFFERS, _kernel_module, kernel_ptx, tile_accesses
from syncverify.kernels.ptx_reader import parse_ptx, sync_ops
from syncverify.model.mbarrier import Completion, phase_completions

_IMMEDIATE = re.compile(r"^(0x[0-9a-fA-F]+|\d+)$")
ELEMENT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


def tma_instructions(ptx: str, params: list[str]) -> dict:
    """What the audit reads from ``ptx``: ``copies`` (``(direction, mbarrier completion, line)``),
    ``maps`` (each tensor map's global-address buffers and line), ``expects`` (each
    ``arrive.expect_tx`` count and line), ``waits`` (lines of ``mbarrier.try_wait``)."""
    found: dict = {"copies": [], "maps": [], "expects": [], "waits": []}

    def visit(ins, origin) -> None:
        parts = ins.parts
        if ins.opcode.startswith("cp.async.bulk.tensor"):
            dst, src = parts[5], parts[6]
            direction = "load" if dst.startswith("shared") and src == "global" else "store" if dst == "global" else \
                f"{dst} <- {src}"
            found["copies"].append((direction, "mbarrier::complete_tx::bytes" in ins.opcode, ins.line))
        elif ins.opcode.startswith("tensormap.replace.tile.global_address"):
            value = ins.operands[1] if len(ins.operands) > 1 else ""
            found["maps"].append((frozenset(origin.get(value, set())), ins.line))
        elif ins.opcode.startswith("mbarrier.arrive.expect_tx"):
            count = ins.operands[-1] if ins.operands else ""
            found["expects"].append((int(count, 0) if _IMMEDIATE.match(count) else None, ins.line))
        elif ins.opcode.startswith("mbarrier.try_wait"):
            found["waits"].append(ins.line)

    sync_ops(parse_ptx(ptx), params=params, visit=visit)
    return found


def stage_boxes(built, buffers: set[str]) -> dict[str, int]:
    """Bytes of one stage's operand box per descriptor-loaded operand (``A``, ``B``) of ``built``."""
    c = built.config
    element = ELEMENT_BYTES[c.dtype]
    boxes = {"A": c.block_m * c.block_k * element, "B": c.block_k * c.block_n * element}
    return {name: size for name, size in boxes.items() if name in buffers}


def tma_problems(built, *, ptx: str | None = None) -> list[str]:
    """Disagreements between the fused kernel ``built``'s TMA loads and what the model assumes of
    them (module docstring); ``ptx``: the compiled kernel's (default: compile it)."""
    _module, fn = _kernel_module(built.config.kernel)
    ptx = kernel_ptx(built) if ptx is None else ptx
    found = tma_instructions(ptx, list(inspect.signature(fn.fn).parameters))
    kernel = built.config.kernel
    problems: list[str] = []
    for direction, on_mbarrier, line in found["copies"]:
        if direction != "load":
            problems.append(f"{kernel}: a TMA {direction} (PTX line {line}); the model has the kernel's tile "
                            f"stores as generic weak st (lower_tile_store) and no other async copy")
        elif not on_mbarrier:
            problems.append(f"{kernel}: a TMA load (PTX line {line}) not completed through an mbarrier")
    if found["copies"] and not found["waits"]:
        problems.append(f"{kernel}: TMA loads and no mbarrier.try_wait: nothing waits for them")
    synchronized = set(LOCK_BUFFERS) | {buffer for _kind, buffer in tile_accesses(kernel)}
    loaded: set[str] = set()
    for buffers, line in found["maps"]:
        if not buffers:
            problems.append(f"{kernel}: a tensor map (PTX line {line}) whose global address the audit cannot "
                            f"trace to a kernel argument")
        for buffer in sorted(buffers & synchronized):
            problems.append(f"{kernel}: a tensor map over {buffer!r} (PTX line {line}), a buffer the kernel "
                            f"synchronizes on: its TMA load is an async-proxy read the model does not have "
                            f"(it would need fence.proxy.async after the wait, choice 11e)")
        loaded |= buffers
    boxes = stage_boxes(built, loaded)
    expected = sum(boxes.values())
    completions = tuple(Completion(size, copy) for copy, size in enumerate(boxes.values()))
    for count, line in found["expects"]:
        phase = phase_completions(count=1, arrivals=1, expected=count if count is not None else -1,
                                  completions=completions)
        if count is None or phase.ways != (tuple(range(len(completions))),) or phase.never:
            problems.append(f"{kernel}: mbarrier.arrive.expect_tx (PTX line {line}) expects {count} bytes, one "
                            f"stage's operand boxes bring {expected} ({', '.join(f'{k} {v}' for k, v in boxes.items())}):"
                            f" by the model's transaction counts (choice 14) the wait would "
                            f"{'hang' if not phase.ways else 'not see every copy complete'}")
    if found["copies"] and not found["expects"]:
        problems.append(f"{kernel}: TMA loads and no mbarrier.arrive.expect_tx: the phase completes before them")
    return problems
