"""syncverify in a user's own tests: the model check as an assertion, stress results that assert.

Plain functions the pytest plugin (:mod:`syncverify.pytest_plugin`) wraps; they work without pytest
too. Nothing here imports torch or triton: the stress campaign imports them itself, inside
:func:`syncverify.stress.campaign.run_campaign`.

* :func:`assert_safe` runs :func:`syncverify.verdicts.check.check_protocol` and raises ``AssertionError``
  with the counterexample in words when the verdict is unsafe, or the bound that was hit when it
  is unknown.
* :func:`check_stress_options` refuses a campaign that cannot run (unknown protocol or kernel, a
  world size the kernels refuse, ``seconds <= 0``, ...) without torch, a GPU, or running anything.
* :class:`StressResult` is a campaign result with :attr:`~StressResult.replay_command` (the
  ``syncverify stress`` command line that replays the first failure) and
  :meth:`~StressResult.assert_clean`.
"""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass
from typing import Any
from pathlib import Path
import inspect
import os

from syncverify.cli.stress import stress_command
from syncverify.kernels.build import build
from syncverify.stress.campaign import campaign_options, kernel_config, load
from syncverify.stress.report import first_failure_lines
from syncverify.verdicts.check import check_protocol

from syncverify.verdicts.text import counterexample_lines
from syncverify.frontend.check import check_kernel
from syncverify.verdicts.check import calls_words
from syncverify.frontend.schedule import every_program, guided_schedules
from syncverify.frontend.user_stress import StressOptions, run_stress, with_stress_sizes

__all__ = ["KernelStressResult", "StressResult", "assert_kernel_safe", "stress_kernel", "assert_safe", "check_stress_options", "describe_check", "replay_command"]


# ----- the model check -------------------------------------------------------------------------

def assert_safe(protocol, *, scenario: str = "all-reduce", world_size: int = 2, **options: Any):
    """Assert that the model finds ``protocol`` safe in ``scenario``; return the ``CheckResult``.

    Runs anywhere (the model needs neither torch nor a GPU) and never skips.

    Parameters
    ----------
    protocol : str, path or Protocol
        A built-in name, a ``.toml`` path, or a loaded protocol.
    scenario, world_size, **options
        As :func:`syncverify.verdicts.check.check_protocol` (``epochs``, ``tiles``, ``reset``, ``push``,
        ``timeout``, ``max_executions``, ...).

    Raises
    ------
    AssertionError
        Unsafe: each violation's kind, its explanation and its counterexample trace (offending
        events marked ``>>``). Unknown (a bound was hit): the bound and why.
    SyncVerifyError
        Bad input (unknown protocol, scenario or option), as ``check_protocol``.

    Examples
    --------
    >>> assert_safe("epoch-flag").safe
    True
    """
    __tracebackhide__ = True  # pytest shows the caller's line and the counterexample, not this function
    result = check_protocol(protocol, scenario=scenario, world_size=world_size, **options)
    if result.safe is True:
        return result
    raise AssertionError(describe_check(result))


def assert_kernel_safe(harness, *, world_size: int = 2, calls: int = 1, **options: Any):
    """Assert that the model finds the kernels a harness launches safe; return the result.

    Runs on the CPU (Triton's interpreter; needs torch and triton, no GPU).

    Parameters
    ----------
    harness : str, path or function
        A harness function, ``"file.py"`` (its one ``@syncverify.harness``) or ``"file.py::name"``.
    world_size, calls, **options
        As :func:`syncverify.frontend.check.check_kernel` (``threads_per_cta``, ``timeout``,
        ``declare_asm``, ...).

    Raises
    ------
    AssertionError
        Unsafe: the verdict with each violation's words and counterexample (the user's
        ``file:line``); unknown: the bound hit.
    SyncVerifyError
        Bad input (a harness that raises, a kernel the interpreter cannot run, unknown inline asm).
    """

    result = check_kernel(harness, world_size=world_size, calls=calls, **options)
    if result.safe is True:
        return result
    raise AssertionError(result.text())


def describe_check(result) -> str:
    """A check that is not safe, in words: the verdict, then each counterexample."""
    opts = result.scenario.options
    verdict = "UNSAFE" if result.safe is False else "UNKNOWN"
    lines = [f"{result.scenario.protocol.name} in {opts.scenario} is {verdict} "
             f"(world size {opts.world_size}, tiles {opts.tiles}, epochs {opts.epochs}, reset {opts.reset})"]
    if result.limit_hit:
        lines.append(f"unknown: limit '{result.limit_hit}' hit ({result.limit_detail}); nothing was "
                     f"proven: raise timeout= or max_executions=, or check a smaller scenario")
    for v in result.violations.values():
        lines.append(f"{v.kind}: {v.explanation}")
        lines.append(f"  counterexample for {v.kind} (>> marks the offending events):")
        lines += [f"  {line}" for line in counterexample_lines(v, result.scenario)]
    return "\n".join(lines)


# ----- stress campaigns ------------------------------------------------------------------------

def check_stress_options(**options: Any):
    """Every check :func:`~syncverify.stress.campaign.run_campaign` makes before it needs torch or
    a GPU; returns the filled :class:`~syncverify.stress.campaign.CampaignOptions`.

    Raises
    ------
    SyncVerifyError
        With one line naming the option and the fix.
    """
    protocol = load(options.pop("protocol"))
    o = campaign_options(protocol=getattr(protocol, "name", "?"), **options)
    build(protocol, kernel_config(o), push=load(o.push))
    return o


#: Options every replay command states, whatever their value (the rest only when given).
_ALWAYS = ("protocol", "kernel", "world_size", "seed", "iterations", "delays")


def replay_command(result, given: dict | None = None) -> str | None:
    """The ``syncverify stress`` command line that replays ``result``'s first failure, or None.

    States the protocol, kernel, world size, mode (``--interpret`` or ``--virtual-ranks``), seed,
    iterations up to the failing one and delays, then every other option in ``given`` (the options
    the campaign was asked for; sizes filled by the mode's defaults are left to the replay to fill
    the same way) that ``syncverify stress`` takes.
    """
    failure = result.first_failure
    if failure is None:
        return None

    cli = set(inspect.signature(stress_command).parameters) - {"json_output", "output"}
    o = result.options
    parts = ["syncverify", "stress", "--protocol", _protocol_argument(result, given), "--kernel", o["kernel"],
             "--world-size", str(o["world_size"])]
    if o["interpret"]:
        parts.append("--interpret")
    elif o["virtual_ranks"]:
        parts.append("--virtual-ranks")
    parts += ["--seed", str(o["seed"]), "--iterations", str(failure["iteration"] + 1),
              "--delays", o["delays"]]
    for name, value in (given or {}).items():
        if name in _ALWAYS or name in ("interpret", "virtual_ranks", "seconds") or name not in cli:
            continue
        if value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        parts += [flag] if value is True else [flag, str(value)]
    return shlex.join(parts)


def _protocol_argument(result, given: dict | None) -> str:
    """A built-in name as given; a file as an absolute path (the replay may run elsewhere)."""
    asked = (given or {}).get("protocol")
    if isinstance(asked, str) and not asked.endswith(".toml") and os.sep not in asked:
        return asked
    if isinstance(asked, (str, os.PathLike)):
        return str(Path(asked).resolve())
    path = result.options["protocol"]  # a Protocol object: its file, if it has one, else its name
    return str(Path(path).resolve()) if str(path).endswith(".toml") else str(path)


@dataclass
class StressResult:
    """A stress campaign's result (:class:`~syncverify.stress.campaign.CampaignResult`, whose
    attributes it also answers) with the command that replays its first failure."""

    campaign: Any
    replay_command: str | None = None
    #: Interpreted runs: the model's ``CheckResult`` over the calls the campaign makes
    #: (:func:`syncverify.stress.report.campaign_verdict`), and what the interpreter cannot show.
    model: Any = None
    notes: tuple[str, ...] = ()

    @property
    def clean(self) -> bool:
        return self.campaign.clean

    @property
    def counts(self) -> dict:
        """Bad tiles per class: unwritten, stale, missing-ranks, corrupt, hang."""
        return self.campaign.counts

    @property
    def first_failure(self) -> dict | None:
        return self.campaign.first_failure

    @property
    def model_verdict(self) -> str | None:
        """The model's verdict in words (``safe (2 calls)``, ``unsafe (race; 1 call)``, ``unknown
        (2 calls, bound hit)``), or None when the model was not asked (a GPU run)."""
        if self.model is None:
            return None

        return calls_words(self.model)

    def __repr__(self) -> str:
        found = {kind: n for kind, n in self.counts.items() if n}
        model = f", model={self.model_verdict!r}" if self.model is not None else ""
        return (f"StressResult(clean={self.clean}, bad tiles={found}{model}, "
                f"replay_command={self.replay_command!r})")

    def __getattr__(self, name: str):
        if name == "campaign":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.campaign, name)

    def describe(self) -> str:
        """The result in words: what ran, the counts, and the first bad tile with its replay."""
        r = self.campaign
        found = ", ".join(f"{kind} {n}" for kind, n in r.counts.items() if n) or "none"
        lines = [f"stress: {r.protocol} in {r.kernel}, world size {r.world_size}, {r.mode}: "
                 f"{r.bad_iterations} of {r.iterations} iterations bad; bad tiles: {found}"]
        if r.stopped:
            lines.append(f"stopped: {r.stopped}")

        lines += first_failure_lines(r, replay=self.replay_command)
        if self.model is not None:
            lines.append(f"model: {self.model_verdict}")
            lines += self._model_lines()
        lines += list(self.notes)
        return "\n".join(lines)

    def _model_lines(self) -> list[str]:
        """Why the model is not safe: each violation's cause, or the bound it hit."""
        m = self.model
        if m.safe is None:
            return [f"  unknown: limit '{m.limit_hit}' hit ({m.limit_detail}); nothing was proven: check a "
                    "smaller world size, or run on a GPU"]
        return [f"  {v.kind}: {v.cause(v.part or m.scenario).text}" for v in m.violations.values()]

    def assert_clean(self) -> "StressResult":
        """Raise ``AssertionError`` (:meth:`describe`) unless no tile of any iteration was bad and,
        for an interpreted run, the model proves the protocol safe over the calls the campaign made.

        Why an interpreted run needs the model: Triton's interpreter runs the programs one at a
        time, sequentially consistent, so it cannot show a missing barrier, fence, release or
        acquire. Its clean run is no evidence of safety, and passing on it would turn a CI job
        running ``pytest --syncverify-interpret`` green for a racy lock. So on the CPU the
        assertion is the model's: it fails when the model finds violations (with their causes) and
        when the model's check hit its bound (nothing is proven either way); it passes when the
        run is clean and the model proves the protocol safe. A GPU run asserts what the hardware
        showed, as before (the model is not asked: ``syncverify check`` is the place for it).
        """
        __tracebackhide__ = True  # pytest: the failure is the test's line, not this one
        if not self.clean or (self.model is not None and self.model.safe is not True):
            raise AssertionError(self.describe())
        return self


# ----- the user's own kernels under stress ---------------------------------------------------------

@dataclass
class KernelStressResult:
    """A stress run of a harness (``syncverify stress FILE.py``) that asserts: the run
    (:class:`syncverify.frontend.user_stress.StressResult`), the model's verdict on the same
    harness when one was needed (guided delays, or an interpreted run), and notes."""

    run: Any
    model: Any = None
    notes: tuple = ()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["run"], name)

    def assert_clean(self) -> "KernelStressResult":
        """Raise ``AssertionError`` naming the first failure, or, for an interpreted run (no
        evidence about the GPU), unless the model proves the harness safe."""
        __tracebackhide__ = True
        run = self.run
        if not run.clean:
            lines = [f"{run.harness}: {run.bad_iterations} bad iterations of {run.iterations}"]
            lines += [f.describe() for f in run.failures[:4]]
            if run.stopped:
                lines += [run.stopped, *run.hang_report[:12]]
            raise AssertionError("\n".join(lines))
        if run.interpret and (self.model is None or self.model.safe is not True):
            verdict = "not checked" if self.model is None else self.model.verdict
            raise AssertionError(f"{run.harness}: clean in Triton's interpreter, which is no evidence, and the model "
                                 f"does not prove it safe ({verdict})")
        return self


def stress_kernel(harness, *, world_size: int = 2, calls: int = 1, delays: str = "random",
                  **options: Any) -> KernelStressResult:
    """Stress the kernels a harness launches (``syncverify stress FILE.py``, in this process).

    ``delays``: ``none``, ``random`` or ``guided`` (a schedule built from the model check of the
    same harness); ``options``: any :class:`syncverify.frontend.user_stress.StressOptions` field
    (``iterations``, ``seconds``, ``seed``, ``interpret``, ``defines``, ...). Bad input raises
    :class:`~syncverify.errors.SyncVerifyError` with one line.
    """
    model = None
    guided: tuple = ()
    # on a GPU, the harness file's STRESS_SIZES under the given defines (as the command runs it)
    sized, _line = with_stress_sizes(StressOptions(harness, world_size=world_size, calls=calls, **options))
    if delays == "guided" or options.get("interpret"):
        model = check_kernel(harness, world_size=world_size, calls=calls)
    if delays == "guided":
        found = [e for s in guided_schedules(model, num_warps=4) for e in s.entries]
        guided = tuple(dict.fromkeys(every_program(found) if sized.defines else found))
        if not guided:
            delays = "none"
    run = run_stress(dataclasses.replace(sized, delays=delays, guided=guided))
    return KernelStressResult(run, model, tuple(run.notes))
