"""Compile a litmus kernel, launch it for a budget, and tally the outcomes of its instances.

Host wrapper in the usual order: check -> allocate -> grid -> launch. The form (inline PTX or the
interpreter's) follows ``TRITON_INTERPRET``: with it set, tensors live on the CPU and the kernel
runs in Triton's interpreter.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from syncverify.errors import SyncVerifyError
from syncverify.litmus.gpu.codegen import KernelPlan, generate
from syncverify.litmus.gpu.layout import make_layout, scratch_words
from syncverify.litmus.gpu.outcomes import Item, observed_items
from syncverify.litmus.gpu.stress import LINE_WORDS, StressParams, interpreter_sized
from syncverify.program import Program

KERNEL_DIR = Path(tempfile.gettempdir()) / "syncverify-litmus-gpu"


def interpreting() -> bool:
    """Whether kernels run in Triton's CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def load_kernel(plan: KernelPlan):
    """The ``@triton.jit`` kernel of ``plan``: its source written to a file (Triton reads a
    kernel's source with ``inspect``) and imported once per distinct source."""
    digest = hashlib.sha1(plan.source.encode()).hexdigest()[:16]
    name = f"syncverify_litmus_{digest}"
    if name in sys.modules:
        return sys.modules[name].litmus_kernel
    KERNEL_DIR.mkdir(parents=True, exist_ok=True)
    path = KERNEL_DIR / f"{name}.py"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(plan.source)
        tmp.replace(path)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.litmus_kernel


@dataclass
class DeviceRun:
    """What one test's launches showed."""

    name: str
    form: str
    items: tuple[Item, ...]
    counts: Counter = field(default_factory=Counter)  # outcome -> instances
    instances: int = 0  # instances that finished (counted in ``counts``)
    timeouts: int = 0  # instances with a thread that hit ``max_iterations``
    launches: int = 0
    misaligned: int = 0  # programs whose start barrier timed out
    seconds: float = 0.0  # wall time of the launches, host work included
    kernel_seconds: float = 0.0  # device time (CUDA events); wall time under the interpreter
    params: StressParams = field(default_factory=StressParams)
    stopped_by: str = ""  # "iterations" or "seconds"

    @property
    def instances_per_second(self) -> float:
        """Finished instances per second of wall time."""
        return self.instances / self.seconds if self.seconds > 0 else 0.0


#: The kernel's runtime stress arguments, in order (see :func:`runtime_args`).
RUNTIME_ARGS = ("NTEST", "STRESS_ITERS", "STRESS_PATTERN", "PRE_STRESS_ITERS", "ALIGNED", "BARRIER_SPINS", "MAX_ITERS",
                "NALIGN")


def runtime_args(params: StressParams, test_programs: int, align: int | None = None) -> tuple[int, ...]:
    """The values of :data:`RUNTIME_ARGS` for one launch; ``align``: the test programs the
    aligned start waits for (default ``test_programs``; across GPUs, every GPU's)."""
    return (test_programs, params.stress_iterations, params.stress_pattern, params.pre_stress_iterations,
            int(params.aligned_start), params.barrier_spins, params.max_iterations,
            test_programs if align is None else align)


def plan_for(program: Program, *, interpret: bool | None = None) -> KernelPlan:
    """The kernel plan of ``program`` in the interpreter's form or the PTX one (default: as
    :func:`interpreting` says)."""
    return generate(program, "interpret" if (interpreting() if interpret is None else interpret) else "ptx")


LAYOUT_POOL = 16  # layouts drawn per run; launches cycle through them, one round = one of each
INTERPRETER_POOL = 2  # the interpreter takes a second or so per launch: short rounds keep budgets


def run_on_device(program: Program, params: StressParams, *, iterations: int, seconds: float,
                  seed: int = 0, progress: Callable[[DeviceRun], None] | None = None,
                  plan: KernelPlan | None = None, interpret: bool | None = None) -> DeviceRun:
    """Launch ``program``'s kernel until ``iterations`` launches or ``seconds`` have passed.

    :data:`LAYOUT_POOL` random layouts are drawn from ``seed`` and uploaded once; each *round*
    launches the kernel once per layout back to back, each launch on its own fresh memory and
    result buffers, then synchronizes once and tallies the round on the host, so the host's work
    per launch is a few tensor operations, not a round trip. Under the interpreter the stress
    sizes are cut (:func:`~syncverify.litmus.gpu.stress.interpreter_sized`).
    """
    import torch  # lazily: the model and the report run without torch

    interpret = interpreting() if interpret is None else interpret
    if not interpret and not torch.cuda.is_available():
        raise SyncVerifyError("--gpu needs a CUDA device; set TRITON_INTERPRET=1 to run through "
                              "Triton's CPU interpreter (which cannot show weak outcomes)")
    if interpret:
        params = interpreter_sized(params)
    plan = plan or plan_for(program, interpret=interpret)
    if (plan.form == "interpret") != interpret:
        raise SyncVerifyError(f"{program.name}: a {plan.form}-form kernel cannot run "
                              f"{'in' if interpret else 'out of'} the interpreter")
    kernel = load_kernel(plan)
    device = "cpu" if interpret else "cuda"
    items = observed_items(program)
    n_loc, n_out, n_threads = len(plan.locations), max(1, len(plan.outputs)), len(program.threads)
    init = np.array([program.init.get(loc, 0) for loc in plan.locations], dtype=np.int32)
    columns = columns_of(items, plan, program)
    rng = np.random.default_rng(seed)
    pool = [_upload(make_layout(plan.ctas, plan.num_warps, n_loc, params, rng, single_lane=plan.single_lane),
                    init, n_loc, torch, device)
            for _ in range(min(INTERPRETER_POOL if interpret else LAYOUT_POOL, iterations))]
    run = DeviceRun(name=program.name, form=plan.form, items=items, params=params)
    scratch = torch.zeros(scratch_words(params), dtype=torch.int32, device=device)
    block = 32 * plan.num_warps
    start = time.perf_counter()
    last_report = start
    while True:
        round_ = pool[: iterations - run.launches]
        begin = end = None
        if not interpret:
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
        k0 = time.perf_counter()
        results = []
        for up in round_:
            lay = up["layout"]
            mem = up["mem_init"].clone()
            out = torch.zeros(lay.instances * n_out, dtype=torch.int32, device=device)
            status = torch.zeros(lay.instances * n_threads, dtype=torch.int32, device=device)
            sync = torch.zeros(2, dtype=torch.int32, device=device)
            grid = (lay.test_programs + params.stress_programs,)
            kernel.launcher(grid, interpret=interpret)(
                mem, up["addr"], up["cta"], up["role"], up["inst"], out, status, scratch, up["line"], sync, up["delay"],
                *runtime_args(params, lay.test_programs),
                BLOCK=block, NLOC=n_loc, NOUT=n_out, NTHREADS=n_threads, LINE_WORDS=LINE_WORDS,
                num_warps=plan.num_warps)
            results.append(_observe(up, mem, out, status, sync, columns, n_loc, n_out, n_threads, torch))
        if interpret:
            run.kernel_seconds += time.perf_counter() - k0
        else:
            end.record()
            end.synchronize()
            run.kernel_seconds += begin.elapsed_time(end) / 1000
        for values, finished, timeouts, misaligned in results:
            tally(run, values.cpu().numpy(), finished.cpu().numpy(), int(timeouts), int(misaligned))
        run.launches += len(round_)
        now = time.perf_counter()
        run.seconds = now - start
        if progress is not None and now - last_report >= 2.0:
            progress(run)
            last_report = now
        if run.launches >= iterations:
            run.stopped_by = "iterations"
            break
        if run.seconds >= seconds:
            run.stopped_by = "seconds"
            break
    return run


def _upload(layout, init: np.ndarray, n_loc: int, torch, device: str) -> dict:
    """One layout's tables and initial memory on the device."""
    memory = np.zeros(layout.memory_words, dtype=np.int32)
    memory[layout.address] = np.tile(init, layout.instances)
    up = {name: torch.from_numpy(np.ascontiguousarray(a)).to(device) for name, a in (
        ("mem_init", memory), ("addr", layout.address), ("cta", layout.cta_of_program), ("role", layout.role),
        ("inst", layout.instance), ("line", layout.line_of_program), ("delay", layout.delay))}
    up["addr_long"] = up["addr"].long().view(layout.instances, n_loc)
    up["layout"] = layout
    return up


def _observe(up: dict, mem, out, status, sync, columns: list[tuple[str, int]], n_loc: int, n_out: int,
             n_threads: int, torch):
    """A launch's outcomes as device tensors (no synchronization): values per instance, which
    instances finished, how many timed out, how many programs started misaligned."""
    instances = up["layout"].instances
    out = out.view(instances, n_out)
    status = status.view(instances, n_threads)
    cols = [out[:, c] if kind == "out" else mem[up["addr_long"][:, c]] for kind, c in columns]
    values = torch.stack(cols, dim=1) if cols else torch.zeros((instances, 0), dtype=torch.int32, device=out.device)
    finished = (status == 1).all(dim=1)
    return values, finished, (status == 2).any(dim=1).sum(), sync[1]


def columns_of(items: tuple[Item, ...], plan: KernelPlan, program: Program) -> list[tuple[str, int]]:
    """Where each observed item's value comes from: ("out", column) or ("loc", location index)."""
    names = {th.name: i for i, th in enumerate(program.threads)}
    cols = []
    for kind, name, reg in items:
        if kind == "reg":
            if name not in names:
                raise SyncVerifyError(f"{program.name}: the condition names thread {name}, which the test lacks")
            cols.append(("out", plan.outputs.index((names[name], reg))))
        else:
            cols.append(("loc", plan.locations.index(name)))
    return cols


def tally(run: DeviceRun, values: np.ndarray, finished: np.ndarray, timeouts: int, misaligned: int) -> None:
    """Count one launch's finished instances by outcome (instances with a timed-out thread are timeouts)."""
    run.timeouts += timeouts
    run.misaligned += misaligned
    rows, counts = np.unique(values[finished], axis=0, return_counts=True)
    for row, n in zip(rows, counts):
        run.counts[tuple(int(v) for v in row)] += int(n)
    run.instances += int(finished.sum())


def ptx_of(plan: KernelPlan, *, arch: int = 90) -> str:
    """The PTX Triton emits for ``plan`` on ``sm_<arch>``, compiled on the CPU (no GPU needed).

    ``plan`` must be in the ``"ptx"`` form and this process must not interpret (an interpreted
    kernel cannot be compiled)."""
    from triton.backends.compiler import GPUTarget  # lazily: needs triton
    from triton.compiler import ASTSource, compile as triton_compile

    kernel = load_kernel(plan)
    pointers = ("mem_ptr", "addr_ptr", "cta_ptr", "role_ptr", "inst_ptr", "out_ptr", "status_ptr",
                "scratch_ptr", "line_ptr", "sync_ptr", "delay_ptr")
    constants = dict(BLOCK=32 * plan.num_warps, NLOC=len(plan.locations), NOUT=max(1, len(plan.outputs)),
                     NTHREADS=len({t for c in plan.ctas for t in c}), LINE_WORDS=LINE_WORDS)
    signature = {name: "*i32" for name in pointers}
    if len(set(plan.cta_gpus)) > 1:  # across GPUs: 64-bit word offsets reach a peer's heap (ranks.py)
        signature["addr_ptr"] = "*i64"
    signature.update({name: "i32" for name in RUNTIME_ARGS})
    signature.update({name: "constexpr" for name in constants})
    source = ASTSource(kernel, signature, constants)
    compiled = triton_compile(source, target=GPUTarget("cuda", arch, 32), options={"num_warps": plan.num_warps})
    return compiled.asm["ptx"]
