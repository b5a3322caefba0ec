"""Positive controls: a safe protocol's run is evidence only if the same delays break its sibling.

A protocol the model calls safe leaves no bad tile on the GPU; so would any protocol if the delays
had silently stopped working. So every GPU run of a safe protocol also runs, under the same
delays and options, a *sibling*: the same protocol with one ordering step taken away, which the
model calls unsafe. If the sibling leaves no bad tile either, the delays were ineffective and the
run says so (exit non-zero).

The sibling is derived from the protocol's own data (:func:`sibling_candidates`): each CTA
barrier removed, each fence removed, each release/acquire weakened to relaxed, in that order
(a missing CTA barrier is what per-warp delays expose fastest on an H200); the first candidate the
model calls unsafe at the run's world size is the control (:func:`positive_control`). Pure host
code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from syncverify.protocols import load_protocol, protocol_from_dict
from syncverify.verdicts.check import check_protocol

#: What taking a step away is called, by op (barriers first: see the module docstring).
_WEAKER = {"release": "relaxed", "acquire": "relaxed", "acq_rel": "relaxed"}


@dataclass(frozen=True)
class Control:
    """A sibling the model calls unsafe, and why it is the safe protocol's control."""

    protocol: Any  # the sibling Protocol
    change: str  # what was taken away ("without its CTA barrier (signal step 1)")
    safe_name: str
    violations: tuple[str, ...]  # the model's violation kinds of the sibling
    cause: str  # the model's cause of its first violation

    def describe(self) -> str:
        return (f"positive control: {self.protocol.name} = {self.safe_name} {self.change}; the model calls it "
                f"unsafe ({', '.join(self.violations)}: {self.cause})")


def _with_step(protocol: Any, section: str, index: int, step: dict | None, suffix: str) -> Any:
    data = protocol.to_dict()
    steps = list(data[section])
    if step is None:
        del steps[index]
    else:
        steps[index] = step
    data[section] = steps
    data["name"] = f"{protocol.name}-{suffix}"
    data["summary"] = f"{protocol.name} {suffix.replace('-', ' ')} (a positive control)"
    return protocol_from_dict(data, path=f"<control of {protocol.name}>")


def sibling_candidates(protocol: Any) -> Iterator[tuple[str, Any]]:
    """``(change, sibling)`` for each ordering step of ``protocol`` taken away: barriers removed,
    then fences removed, then release/acquire semantics weakened to relaxed."""
    for wanted in ("barrier", "fence", "sem"):
        for section in ("signal", "wait"):
            for index, step in enumerate(getattr(protocol, section)):
                name = f"{section} step {index + 1}"
                if wanted == "barrier" and step.op == "barrier":
                    yield (f"without its CTA barrier ({name})",
                           _with_step(protocol, section, index, None, f"no-barrier-{section}-{index + 1}"))
                elif wanted == "fence" and step.op == "fence":
                    yield (f"without its fence ({name})",
                           _with_step(protocol, section, index, None, f"no-fence-{section}-{index + 1}"))
                elif wanted == "sem" and step.op != "fence" and step.sem in _WEAKER:
                    weaker = dict(step.to_dict(), sem=_WEAKER[step.sem])
                    yield (f"with {name}'s {step.sem} weakened to relaxed",
                           _with_step(protocol, section, index, weaker, f"relaxed-{section}-{index + 1}"))


def positive_control(protocol: Any, *, kernel: str, world_size: int, timeout: float = 120.0,
                     **scenario_options: Any) -> Control | None:
    """The first sibling of ``protocol`` (:func:`sibling_candidates`) that the model calls unsafe
    in ``kernel``'s scenario at ``world_size``; None when every sibling is safe too.

    >>> control = positive_control("barrier-fenced-release-acquire", kernel="all-reduce", world_size=2)
    >>> control.change, control.violations[0]
    ('without its CTA barrier (signal step 1)', 'unwritten-read')
    """
    if not hasattr(protocol, "signal"):
        protocol = load_protocol(protocol)
    for change, sibling in sibling_candidates(protocol):
        try:
            model = check_protocol(sibling, scenario=kernel, world_size=world_size, timeout=timeout,
                                   **scenario_options)
        except Exception:  # noqa: BLE001 -- a sibling the scenario refuses is no control
            continue
        if model.safe is False:
            first = next(iter(model.violations.values()))
            return Control(sibling, change, protocol.name, tuple(model.violations),
                           first.cause(first.part or model.scenario).kind)
    return None


def control_verdict(control: Control | None, result: Any) -> tuple[bool, str]:
    """``(effective, sentence)``: whether the control's campaign ``result`` failed, i.e. the
    delays can expose the bug the safe protocol's ordering step prevents."""
    if control is None:
        return False, ("no positive control: every sibling with one ordering step taken away is safe too, so a "
                       "clean run is no evidence that the delays work")
    if result.bad_iterations:
        return True, (f"positive control failed as it must: {control.protocol.name} ({control.change}) had "
                      f"{result.bad_iterations} bad iterations of {result.iterations}: the delays are effective")
    return False, (f"DELAYS INEFFECTIVE: the positive control {control.protocol.name} ({control.change}), which the "
                   f"model calls unsafe, showed no bad tile in {result.iterations} iterations under the same delays; "
                   "the clean run of the safe protocol is no evidence")
