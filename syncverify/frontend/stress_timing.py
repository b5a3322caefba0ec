"""Where a stress iteration's time goes: the user's kernels apart from the harness around them.

A validated iteration of ``syncverify stress FILE.py`` (``syncverify.frontend.user_stress``) is the
heap's restore, the harness's launches (the user's kernels, rewritten), one validation per
expectation and an epilogue. Its rate is bounded by the user's kernels however fast the rest is,
so a rate alone cannot say what the harness costs. :func:`split_timing` times, on the device, one
CUDA graph of ``iterations`` iterations for each of:

* ``iteration``: everything (what a stress run replays, without the host's read-back);
* ``launches``: the restore and the rewritten launches (delays off), no validation, no epilogue;
* ``restore``: the restore alone;
* ``as_written``: the restore and the user's kernels as written (not rewritten: no delay code,
  no bounded waits, no mirror), on the same streams.

From them: the user's kernels per iteration as written (``as_written - restore``), what the rewrite
adds to them with delays off (``launches - as_written``: bounded waits, the mirror), the harness's
own cost per iteration (``iteration - kernels as written``: restore, validation, epilogue, the
rewrite's additions, the gaps between them) and the rate the harness alone would allow
(``1 / harness``). In the interpreter (a CPU run, which shows nothing
about the GPU) the same parts are timed on the host's clock, one iteration each, and the kernels
as written are not run (an interpreted wait on a later launch would not return).
"""

from __future__ import annotations

import dataclasses
import time

from syncverify.frontend.user_stress import GRAPH_BLOCK, PARTS, StressOptions, _capture, start_engine

#: name -> (parts of an iteration, the kernels as written?)
VARIANTS = {
    "iteration": (PARTS, False),
    "launches": (frozenset({"restore", "launches"}), False),
    "restore": (frozenset({"restore"}), False),
    "as_written": (frozenset({"restore", "launches"}), True),
}


def split_timing(options: StressOptions, *, iterations: int = GRAPH_BLOCK, repeats: int = 3) -> dict:
    """Microseconds per iteration of each of :data:`VARIANTS` and what follows from them (module
    docstring): ``{"us": {variant: us}, "kernels_us", "as_written_us", "harness_us",
    "harness_rate", "rate", "clock"}``. Delays are off (the split is of the harness's own cost)."""
    options = dataclasses.replace(options, delays="none", guided=(), graphs=True, iterations=iterations,
                                  seconds=None)
    _plan, engine, _block = start_engine(options)
    torch = engine.torch
    # the first iteration as a stress run issues it: it compiles, and shows the expectations
    engine.use_ring(0)
    engine.reset_ring()
    engine.iteration(0)
    engine.poison_snapshot()
    engine.plan_restore()
    us: dict = {}
    for name, (parts, as_written) in VARIANTS.items():
        if as_written and engine.interpret:
            us[name] = None
            continue
        engine.parts, engine.as_written = parts, as_written
        try:
            engine.iteration(0)  # compiles what this variant launches first (the kernels as written)
            if engine.interpret:
                start = time.perf_counter()
                engine.iteration(0)
                us[name] = (time.perf_counter() - start) * 1e6
                continue
            torch.cuda.synchronize()
            graph = _capture(engine, iterations, 0)
            graph.replay()
            torch.cuda.synchronize()
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            for _ in range(repeats):
                graph.replay()
            end.record()
            end.synchronize()
            us[name] = begin.elapsed_time(end) * 1e3 / (iterations * repeats)
        finally:
            engine.parts, engine.as_written = PARTS, False
    rewritten = max(us["launches"] - us["restore"], 0.0)
    written = None if us["as_written"] is None else max(us["as_written"] - us["restore"], 0.0)
    kernels = rewritten if written is None else written
    harness = max(us["iteration"] - kernels, 0.0)
    return {"us": {k: None if v is None else round(v, 2) for k, v in us.items()},
            "kernels_us": round(kernels, 2), "rewritten_us": round(rewritten, 2),
            "as_written_us": None if written is None else round(written, 2),
            "harness_us": round(harness, 2),
            "harness_rate": round(1e6 / harness) if harness else None,
            "rate": round(1e6 / us["iteration"]) if us["iteration"] else None,
            "clock": "host (the interpreter)" if engine.interpret else "device (CUDA events)"}


def describe(split: dict) -> str:
    """One line: the iteration, the user's kernels in it, the harness's cost and the rate it allows."""
    if split.get("as_written_us") is not None:
        kernels = f"{split['kernels_us']:.1f} us as written (rewritten, delays off: {split['rewritten_us']:.1f} us)"
        harness = "restore, validation, epilogue, the rewrite's bounds and mirror, gaps"
    else:
        kernels = f"{split['kernels_us']:.1f} us rewritten, delays off (not run as written here)"
        harness = "restore, validation, epilogue, gaps"
    return (f"iteration {split['us']['iteration']:.1f} us = the user's kernels {kernels} + the harness "
            f"{split['harness_us']:.1f} us ({harness}); "
            f"the harness alone would allow {split['harness_rate'] or 0:,} validated it/s ({split['clock']})")
