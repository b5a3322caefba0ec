"""A campaign result for humans: a short table, then the first failure and how to replay it."""

from __future__ import annotations

from syncverify.kernels.config import model_launches
from syncverify.stress.campaign import CLASS_NAMES, CampaignResult
from syncverify.verdicts.check import check_calls

INTERPRETER_NOTE = ("note: the Triton interpreter runs the programs one at a time (sequentially consistent): it "
                    "cannot show weak-memory bugs (a missing barrier, fence, release or acquire), so a clean run "
                    "here is no evidence that the protocol is safe")


def summary_rows(result: CampaignResult, *, model: str | None = None) -> list[tuple[str, str]]:
    """``(label, value)`` rows of the result table (``model``: the model's verdict in words)."""
    r = result
    rows = [
        ("protocol", r.protocol),
        ("kernel", f"{r.kernel}, world size {r.world_size}, {r.mode} ({r.device})"),
        ("iterations", str(r.iterations)),
        ("bad iterations", str(r.bad_iterations)),
    ]
    rows += [(f"  {name} tiles", str(r.counts.get(name, 0))) for name in CLASS_NAMES]
    rows.append(("iterations / s", f"{r.iterations_per_second:.1f}"))
    ttf = "-" if r.time_to_first_failure is None else f"{r.time_to_first_failure:.3f} s"
    rows.append(("time to first failure", ttf))
    if r.stopped:
        rows.append(("stopped", r.stopped))
    verdict = "clean" if r.clean else "FAILURES FOUND"
    if r.mode == "interpreter":
        verdict += " (interpreter: sequential, no weak-memory behaviour)"
    rows.append(("verdict", verdict))
    if model is not None:
        rows.append(("model verdict", model))
    return rows


def first_failure_lines(result: CampaignResult, *, replay: str | None = None) -> list[str]:
    """The first bad tile in words (class, expected and seen), with what replays it: ``replay``
    (a whole command line) or else the options to add to the same command."""
    f = result.first_failure
    if not f:
        return []
    lines = [f"first bad tile: iteration {f['iteration']}, rank {f['rank']}'s C, tile {f['tile']}: {f['kind']}"]
    if f.get("hang"):
        h = f["hang"]
        lines.append(f"  its wait timed out after {h['polls']} polls; the lock read {h['seen']} "
                     f"(wait step {h['step'] + 1})")
    if f.get("missing_ranks"):
        lines.append(f"  the sum is missing the partials of rank(s) {f['missing_ranks']}")
    if f.get("element") is not None:
        lines.append(f"  element {tuple(f['element'])}: expected {f['expected']:g}, seen {f['got']:g}")
    if f.get("stale_ranks"):
        lines.append(f"  the sum holds the previous iteration's partials of rank(s) {f['stale_ranks']}")
    if f.get("delays"):
        busy = {site: d for site, d in f["delays"].items() if d["ns"]}
        lines.append(f"  delays at its consumer (rank {f.get('consumer', f['rank'])}): {busy if busy else 'none'}")
    if f.get("suspect_ranks") is not None:
        lines.append(f"  the tile points at the producer(s) of rank(s) {f['suspect_ranks']}")
    for rank, delays in (f.get("producer_delays") or {}).items():
        busy = {site: d for site, d in delays.items() if d["ns"]}
        lines.append(f"  delays at rank {rank}'s producer of the tile: {busy if busy else 'none'}")
    lines.append(f"replay: {replay}" if replay else f"  replay: {f['replay']} (same options)")
    lines.append(f"  replay honestly: add --replay {f['iteration']} --replay-rank {f['rank']} --replay-tile "
                 f"{f['tile']} --replay-kind {f['kind']} (runs it 10 times and prints reproduced k/10: the "
                 "hardware's timing does not come back with the delays)")
    return lines


def campaign_verdict(options: dict):
    """The model's verdict beside a campaign (a ``CheckResult``): its protocol in its kernel's
    scenario at its world size, with its reset, push, production, distribution and launch mode, over the calls
    the campaign makes (:func:`~syncverify.verdicts.check.check_calls`: every iteration is a new
    call on the same locks, so one call is not what runs). ``options``: the campaign's options."""
    return check_calls(options["protocol"], scenario=options["kernel"], world_size=options["world_size"],
                       timeout=120.0, push=options.get("push") or "epoch-flag", reset=options.get("reset"),
                       production=options.get("production") or "every-rank",
                       distribution=options.get("distribution") or "striding",
                       launches=model_launches(options.get("launches") or "fused"))


def interpreter_lines(result: CampaignResult, model) -> list[str]:
    """What an interpreted run can and cannot show, every time, beside the model's verdict
    (``model``: a ``CheckResult``)."""

    lines = [INTERPRETER_NOTE]
    if model.safe is False and result.clean:
        lines.append("the model finds violations (" + ", ".join(model.violations) + "): trust the model here; run on "
                     "a GPU (or --guided there) to look for them on the hardware")
    if (result.options.get("order") == "consumers-first" and result.counts.get("hang", 0)
            and "hang" not in model.violations):
        lines.append(f"the {result.counts['hang']} hang tiles are an artifact of --order consumers-first: every "
                     "consumer ran, and timed out, before any producer started (the interpreter runs programs one "
                     "at a time); on a GPU they run together. Not a failure of the protocol, which the model finds "
                     "no hang in")
    return lines


def render_text(result: CampaignResult, *, model: str | None = None) -> str:
    """The whole report as plain text."""
    rows = summary_rows(result, model=model)
    width = max(len(label) for label, _ in rows)
    out = [f"{label:<{width}}  {value}" for label, value in rows]
    out += first_failure_lines(result)
    return "\n".join(out)
