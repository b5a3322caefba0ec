"""The report of a GPU litmus run: counts, rates with 95% Wilson intervals, the model's allowed
set, weak outcomes seen, and MODEL UNSOUND for any outcome the model forbids.

Plain data in, plain data out: :func:`judge` takes the model's outcomes and an outcome table
(``{outcome: count}``, from the device or made up by a test) and returns a :class:`TestReport`;
nothing here launches a kernel.

Exit codes per test (:mod:`syncverify.exitcodes`): 1 when an outcome the model forbids was seen
(MODEL UNSOUND), 3 when an outcome was seen that an incomplete model listing lacks (the explorer
hit a bound, so the model's answer is unknown), 2 for a refused test, else 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from syncverify import exitcodes
from syncverify.litmus.gpu.outcomes import Item, ModelOutcomes, Outcome, is_target, is_weak, item_name
from syncverify.program import Program

Z95 = 1.959963984540054  # the 97.5th percentile of the standard normal

INTERPRETER_NOTE = ("ran in Triton's CPU interpreter: programs run one after another and statements in "
                    "order, so it shows only sequentially consistent outcomes and CANNOT show weak ones")


def wilson(count: int, total: int, *, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval for ``count`` successes out of ``total`` (95% by default).

    Wilson (1927); unlike the normal approximation it stays inside [0, 1] and is not empty at 0.

    >>> lo, hi = wilson(0, 100); (lo, round(hi, 4))
    (0.0, 0.037)
    >>> [round(v, 4) for v in wilson(50, 100)]
    [0.4038, 0.5962]
    """
    if total <= 0:
        return (0.0, 1.0)
    p = count / total
    denom = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    # The interval holds p exactly; min/max only undo rounding at p = 0 or 1.
    return (max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half)))


def describe(items: tuple[Item, ...], outcome: Outcome) -> str:
    """``P1:r1=1 P1:r2=0``."""
    return " ".join(f"{item_name(i)}={v}" for i, v in zip(items, outcome))


@dataclass(frozen=True)
class OutcomeRow:
    """One outcome of one test."""

    outcome: Outcome
    count: int
    rate: float
    low: float
    high: float
    allowed: bool  # the model allows it
    target: bool  # the test's condition asks about it
    weak: bool | None  # allowed but not sequentially consistent (None: SC outcomes unknown)


@dataclass
class TestReport:
    """One test's verdict against the hardware (or the interpreter)."""

    name: str
    file: str = ""
    status: str = "ran"  # ran | refused | stopped (a run across GPUs that the watchdog or a rank stopped)
    reason: str = ""  # why refused or stopped
    form: str = ""  # ptx | interpret
    items: tuple[Item, ...] = ()
    rows: list[OutcomeRow] = field(default_factory=list)
    allowed: tuple[Outcome, ...] = ()
    weak_allowed: tuple[Outcome, ...] = ()  # allowed outcomes that SC does not allow
    weak_known: bool = True  # the SC outcomes were computed (else weak is unknown)
    model_limit: str | None = None
    instances: int = 0
    timeouts: int = 0
    launches: int = 0
    misaligned: int = 0
    seconds: float = 0.0
    kernel_seconds: float = 0.0
    params: dict = field(default_factory=dict)
    gpus: int = 1  # GPUs the test's threads ran on (one process each when more than one)

    @property
    def unsound(self) -> list[OutcomeRow]:
        """Outcomes seen that the (complete) model forbids."""
        return [r for r in self.rows if not r.allowed and self.model_limit is None]

    @property
    def unexplained(self) -> list[OutcomeRow]:
        """Outcomes seen that an incomplete model listing lacks (answer unknown)."""
        return [r for r in self.rows if not r.allowed and self.model_limit is not None]

    @property
    def weak_seen(self) -> list[OutcomeRow]:
        """Outcomes seen that the model allows and SC does not (see :mod:`~syncverify.litmus.gpu.outcomes`)."""
        return [r for r in self.rows if r.allowed and r.weak]

    @property
    def target_seen(self) -> int:
        """Instances whose outcome is the test's target and allowed (a mutant is killed by one)."""
        return sum(r.count for r in self.rows if r.allowed and r.target)

    @property
    def exit_code(self) -> int:
        if self.status == "stopped":  # a bound (the watchdog) cut the run: no answer
            return exitcodes.UNKNOWN
        if self.status != "ran":
            return exitcodes.INPUT_ERROR
        if self.unsound:
            return exitcodes.FOUND
        if self.unexplained:
            return exitcodes.UNKNOWN
        return exitcodes.OK

    @property
    def instances_per_second(self) -> float:
        return self.instances / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict:
        """The ``--json`` object of this test."""
        names = [item_name(i) for i in self.items]
        return {
            "name": self.name, "file": self.file, "status": self.status, "reason": self.reason,
            "form": self.form, "items": names, "exit_code": self.exit_code,
            "model_unsound": bool(self.unsound), "model_limit": self.model_limit,
            "allowed": [list(o) for o in self.allowed], "weak_allowed": [list(o) for o in self.weak_allowed] if self.weak_known else None,
            "outcomes": [{"values": list(r.outcome), "count": r.count, "rate": r.rate, "ci95": [r.low, r.high],
                          "allowed": r.allowed, "target": r.target, "weak": r.weak} for r in self.rows],
            "weak_seen": [list(r.outcome) for r in self.weak_seen],
            "unsound": [list(r.outcome) for r in self.unsound],
            "instances": self.instances, "timeouts": self.timeouts, "launches": self.launches,
            "misaligned_starts": self.misaligned, "seconds": round(self.seconds, 4),
            "kernel_seconds": round(self.kernel_seconds, 6),
            "instances_per_second": round(self.instances_per_second, 1), "params": self.params, "gpus": self.gpus,
            "note": INTERPRETER_NOTE if self.form == "interpret" else "",
        }


def judge(program: Program, model: ModelOutcomes, counts: dict[Outcome, int], **run_facts) -> TestReport:
    """Hold an outcome table against the model's allowed set (see the module doc)."""
    total = sum(counts.values())
    rows = []
    for outcome, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        low, high = wilson(n, total)
        rows.append(OutcomeRow(outcome=outcome, count=n, rate=n / total if total else 0.0, low=low, high=high,
                               allowed=outcome in model.allowed, target=is_target(program, model.items, outcome),
                               weak=is_weak(model, outcome)))
    allowed = tuple(sorted(model.allowed))
    weak = tuple(o for o in allowed if is_weak(model, o))
    return TestReport(name=program.name, items=model.items, rows=rows, allowed=allowed, weak_allowed=weak,
                      weak_known=model.sequential is not None, model_limit=model.limit, instances=total, **run_facts)


def refused(name: str, reason: str, *, file: str = "") -> TestReport:
    """The report of a test the GPU runner cannot run."""
    return TestReport(name=name, file=file, status="refused", reason=reason)


def stopped(name: str, reason: str, *, file: str = "") -> TestReport:
    """The report of a test whose run across GPUs was stopped before it ran (exit 3: unknown)."""
    return TestReport(name=name, file=file, status="stopped", reason=reason)


def text(report: TestReport) -> list[str]:
    """The report of one test as lines of text."""
    if report.status != "ran":
        return [f"Test {report.name} {report.status}: {report.reason}"]
    where = "interpreter" if report.form == "interpret" else "GPU"
    if report.gpus > 1:
        where += f", threads on {report.gpus} GPUs, one process each"
    lines = [f"Test {report.name} ({where}): "
             f"{report.instances:,} instances in {report.launches} launches, {report.seconds:.2f} s "
             f"({report.instances_per_second:,.0f} instances/s); timeouts {report.timeouts}; "
             f"misaligned starts {report.misaligned}"]
    for r in report.rows:
        tag = "allowed" if r.allowed else ("NOT LISTED (model bound hit)" if report.model_limit else "FORBIDDEN")
        if r.weak:
            tag += ", weak"
        lines.append(f"  {describe(report.items, r.outcome):<32} {r.count:>12,}  rate {r.rate:.6f} "
                     f"[{r.low:.6f}, {r.high:.6f}]  {tag}")
    allowed = "; ".join(describe(report.items, o) for o in report.allowed) or "nothing (every execution hangs)"
    lines.append(f"  model allows: {allowed}" + (f" (explorer bound '{report.model_limit}' hit)" if report.model_limit else ""))
    weak = [describe(report.items, o) for o in report.weak_allowed]
    seen = [describe(report.items, r.outcome) for r in report.weak_seen]
    if report.weak_known:
        lines.append(f"  weak outcomes allowed (not SC): {', '.join(weak) or 'none'}; seen: {', '.join(seen) or 'none'}")
    else:
        lines.append("  weak outcomes: unknown (the SC outcomes were not computed within their bound)")
    for r in report.unsound:
        lines.append(f"  MODEL UNSOUND: {describe(report.items, r.outcome)} seen {r.count:,} times; the model forbids it")
    if report.form == "interpret":
        lines.append(f"  note: {INTERPRETER_NOTE}")
    return lines


def plot(reports: list[TestReport], path) -> None:
    """A bar chart of each test's weak-outcome rate (upper 95% bound as the error bar) to ``path``.

    Tests that showed a forbidden outcome are drawn red; refused tests are left out."""
    import matplotlib  # matplotlib: only --plot draws

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # torch/triton: loaded only where a kernel runs

    ran = [r for r in reports if r.status == "ran"]
    names = [r.name for r in ran]
    rates, errs, colours = [], [], []
    for r in ran:
        weak = sum(row.count for row in r.weak_seen)
        low, high = wilson(weak, r.instances)
        rate = weak / r.instances if r.instances else 0.0
        rates.append(rate)
        errs.append((rate - low, high - rate))
        colours.append("tab:red" if r.unsound else ("tab:orange" if r.weak_seen else "tab:blue"))
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(ran) + 1.5))
    ax.barh(names, rates, xerr=list(zip(*errs)) if errs else None, color=colours)
    ax.set_xlabel("rate of weak outcomes (allowed, not SC), 95% Wilson interval")
    ax.set_title("syncverify litmus --gpu (red: MODEL UNSOUND, orange: weak seen)")
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
