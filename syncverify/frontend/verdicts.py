"""Verdicts on a harness, in the user's terms: race, unwritten-read, stale-read, hang, out-of-bounds.

For each consistent execution of the lifted program (:mod:`syncverify.frontend.lift`):

* ``hang``: a model thread never terminates: a poll that keeps reading its location's final value
  (named with the poll's ``file:line`` and the location), or a CTA barrier another thread of the
  CTA never reaches;
* ``race``: PTX's data race (:func:`syncverify.model.ptx.data_races`) between two of the kernels' or
  host writes' accesses (the expectation checks only observe, so they never race);
* ``unwritten-read`` / ``stale-read``: a data read (a ghost read, or an expectation's read) that
  can see the initial contents although a write of the location is not ordered after it
  (unwritten), or a write of an earlier call although a write of its own call exists
  (stale); for an expectation, any visible initial value or earlier call's write;
* ``out-of-bounds``: an access outside every allocation, on a path some execution takes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from syncverify.model import ptx
from syncverify.model.events import Execution

KINDS = ("race", "unwritten-read", "stale-read", "hang", "out-of-bounds")

#: What every verdict of the kernel front end assumes (listed in each report, SAFE included).
MODEL_NOTE = ("model: PTX memory model (sm_90); kernels written for AMD GPUs are checked as if compiled "
              "for NVIDIA")


@dataclass
class KernelViolation:
    """One kind of violation with its witness execution, offending events and words."""

    kind: str
    explanation: str
    execution: Execution
    evidence: list[tuple[int, int]]
    lines: list[str] = field(default_factory=list)  # the user's file:line of the offending events

    def trace(self, lifted) -> list[dict]:
        """The witness's events (init writes left out) in thread order, as plain dicts."""
        x = self.execution
        hot = {e for pair in self.evidence for e in pair}
        rows = []
        for e in x.events:
            if e.is_init:
                continue
            info = lifted.threads[e.thread]
            event = e.describe() if not e.ghost else f"{e.kind} {e.loc}"  # a ghost write's value is a marker
            rows.append({"who": info.role, "event": event, "where": e.label, "offending": e.eid in hot})
        return rows


def _who(lifted, x: Execution, eid: int) -> str:
    e = x.events[eid]
    return "the initial state" if e.is_init else lifted.threads[e.thread].role


def _where(x: Execution, eid: int) -> str:
    label = x.events[eid].label
    return label.split("  [")[0] if label else "?"


def classify(x: Execution, lifted) -> list[tuple[str, str, list[tuple[int, int]]]]:
    """Every violation kind ``x`` shows, each with a sentence and its evidence pairs."""
    found: list[tuple[str, str, list[tuple[int, int]]]] = []
    events = x.events
    infos = lifted.threads
    for t, reason in sorted(x.stuck.items(), key=lambda item: item[1][0] != "spin"):
        role = infos[t].role
        if reason[0] == "spin":
            waits = []
            for loc, value in reason[1]:
                polls = [ins for ins in lifted.program.threads[t].instructions
                         if getattr(ins, "loc", None) == loc and getattr(ins, "label", "")]
                where = polls[-1].label.split("  [")[0] if polls else "?"
                waits.append(f"{loc} (at {where}) keeps reading {lifted.constants.get(loc, value)}")
            found.append(("hang", f"{role} waits forever: " + "; ".join(waits) +
                          ", the final value, which never lets it leave its loop", []))
        else:
            index = reason[1] if len(reason) > 1 else None
            bars = [e for e in events if e.thread == t and e.is_barrier]
            where = _where(x, bars[-1].eid) if bars else "?"
            found.append(("hang", f"{role} waits forever at a CTA barrier ({where}) that another thread of its CTA "
                          f"never reaches{'' if index is None else ''}", []))
    cause = ptx.causality(x)
    for e in events:
        if e.loc in lifted.oob and not e.is_init:
            found.append(("out-of-bounds", f"{infos[e.thread].role} accesses memory outside every allocation at "
                          f"{_where(x, e.eid)}", [(e.eid, e.eid)]))
    writes_by_loc: dict[str, list[int]] = {}
    for e in events:
        if e.is_write:
            writes_by_loc.setdefault(e.loc, []).append(e.eid)  # type: ignore[arg-type]
    for r in events:
        if not r.is_read or r.is_init or r.loc in lifted.oob:
            continue
        check = infos[r.thread].kind == "check"
        if not (r.ghost or check):
            continue
        call = infos[r.thread].call
        candidates = writes_by_loc.get(r.loc, [])  # type: ignore[arg-type]
        if r.ghost:
            visible = [w for w in candidates if (r.eid, w) not in cause and not any(
                w2 != w and (events[w].is_init or (w, w2) in cause) and (w2, r.eid) in cause
                for w2 in candidates if not events[w2].is_init)]
        else:
            visible = [x.rf[r.eid]] if r.eid in x.rf else []
        pending = [w for w in candidates if not events[w].is_init and (r.eid, w) not in cause
                   and infos[events[w].thread].call == call]
        for w in visible:
            we = events[w]
            if we.is_init:
                if check or any(not events[p].is_init and p != w for p in pending):
                    what = (f"after call {call}, {r.loc} may still hold its initial contents: no write of it by call "
                            f"{call} is ordered before the host reads it" if check else
                            f"{_who(lifted, x, r.eid)} reads {r.loc} at {_where(x, r.eid)} before any write of it is "
                            "ordered before the read: it can read its initial contents")
                    found.append(("unwritten-read", what, [(w, r.eid)]))
            else:
                wcall = infos[we.thread].call
                if wcall < call and (check or pending):
                    what = (f"after call {call}, {r.loc} may hold the value call {wcall} wrote "
                            f"({_who(lifted, x, w)} at {_where(x, w)})" if check else
                            f"{_who(lifted, x, r.eid)} reads {r.loc} at {_where(x, r.eid)} in call {call}, but can "
                            f"read what call {wcall} wrote ({_who(lifted, x, w)} at {_where(x, w)})")
                    found.append(("stale-read", what, [(w, r.eid)]))
    for a, b in ptx.data_races(x):
        ea, eb = events[a], events[b]
        if infos[ea.thread].kind == "check" or infos[eb.thread].kind == "check" or ea.loc in lifted.oob:
            continue
        found.append(("race", f"{_who(lifted, x, a)} ({ea.describe()} at {_where(x, a)}) and {_who(lifted, x, b)} "
                      f"({eb.describe()} at {_where(x, b)}) conflict on {ea.loc}, are not morally strong"
                      f"{_mixed_size(ea, eb)}, and neither happens before the other", [(a, b)]))
    return found


def _bytes(e) -> str:
    loc, byte, size = e.footprint
    return f"{size} byte{'s' if size != 1 else ''} at byte {byte} of {loc}"


def _mixed_size(a, b) -> str:
    """Why two accesses of one byte are not morally strong when their accesses overlap only
    partly (mixed sizes, choice 12; the cause ``mixed-size`` of :func:`race_causes`), else ''."""
    if ptx.overlap_completely(a, b) or a.footprint is None or b.footprint is None:
        return ""
    return (f" (mixed sizes: {_bytes(a)} and {_bytes(b)} overlap only partly, and PTX's moral strength "
            f"asks \"If both are memory operations, then they overlap completely\"; give the write and the read "
            f"the same bytes)")


def race_causes(x: Execution, evidence: list[tuple[int, int]]) -> set[str]:
    """The causes of a race's evidence pairs the front end names: ``mixed-size`` (the two
    accesses' footprints overlap only partly), as ``syncverify.verdicts.causes`` names it."""
    return {"mixed-size" for a, b in evidence if _mixed_size(x.events[a], x.events[b])}


@dataclass
class KernelCheckResult:
    """The verdict on a harness: ``safe`` True, False or None (unknown: a bound was hit)."""

    harness: str
    world_size: int
    calls: int
    threads_per_cta: int
    violations: dict[str, KernelViolation] = field(default_factory=dict)
    executions: int = 0
    seconds: float = 0.0
    #: of ``seconds``, the front end's own part: the harness and every program's paths in the
    #: interpreter, lifted (the rest is the explorer's)
    lift_seconds: float = 0.0
    limit_hit: str | None = None
    limit_detail: str = ""
    assumptions: list[str] = field(default_factory=list)
    size: dict = field(default_factory=dict)  # programs, model threads, paths, locations
    lifted: object = None
    deadlock: object = None  # with a residency: the residency deadlock found (explore.residency.Deadlock)
    causes: dict = field(default_factory=dict)  # cause (``mixed-size``) -> the first race sentence that shows it

    @property
    def safe(self) -> bool | None:
        if self.violations:
            return False
        if self.limit_hit:
            return None
        return True

    @property
    def verdict(self) -> str:
        return {True: "SAFE", False: "UNSAFE", None: "UNKNOWN"}[self.safe]

    def bounds_text(self) -> str:
        s = self.size
        return (f"bounds: world size {self.world_size}, {self.calls} call(s), {self.threads_per_cta} model thread(s) "
                f"per CTA; {s.get('programs', 0)} programs, {s.get('threads', 0)} model threads, "
                f"{s.get('paths', 0)} program paths, {self.executions} executions in {self.seconds:.1f} s")

    def text(self) -> str:
        """The verdict as ``syncverify check`` prints it."""
        kinds = ", ".join(self.violations) if self.violations else ""
        head = f"{self.verdict}" + (f": {kinds}" if kinds else "") + f"  ({self.harness})"
        lines = [head]
        if self.limit_hit:
            lines.append(f"  bound hit: {self.limit_hit}: {self.limit_detail}")
        for kind, v in self.violations.items():
            lines.append(f"{kind}: {v.explanation}")
            if kind == "race":
                lines += [f"  cause: {cause}: {sentence}" for cause, sentence in sorted(self.causes.items())]
            for row in v.trace(self.lifted):
                mark = ">>" if row["offending"] else "  "
                lines.append(f"  {mark} {row['who']}: {row['event']}  {row['where']}")
        lines.append(MODEL_NOTE)
        lines.append(self.bounds_text())
        for note in self.assumptions:
            lines.append(f"assumption: {note}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {
            "harness": self.harness, "safe": self.safe, "world_size": self.world_size, "calls": self.calls,
            "threads_per_cta": self.threads_per_cta,
            "violations": [{"kind": v.kind, "explanation": v.explanation, "lines": v.lines,
                            "trace": v.trace(self.lifted)} for v in self.violations.values()],
            "causes": dict(sorted(self.causes.items())),
            "executions": self.executions, "seconds": round(self.seconds, 3), "limit": self.limit_hit,
            "limit_detail": self.limit_detail, "model": MODEL_NOTE, "assumptions": self.assumptions,
            "size": self.size,
        }
