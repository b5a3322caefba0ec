"""A campaign result for humans: a short table, then the first failure and how to replay it."""

from __future__ import annotations

from syncverify.stress.campaign import CLASS_NAMES, CampaignResult


def summary_rows(result: CampaignResult) -> list[tuple[str, str]]:
    """``(label, value)`` rows of the result table."""
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
    rows.append(("verdict", "clean" if r.clean else "FAILURES FOUND"))
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
    if f.get("delays"):
        busy = {site: d for site, d in f["delays"].items() if d["ns"]}
        lines.append(f"  delays at its consumer: {busy if busy else 'none'}")
    lines.append(f"replay: {replay}" if replay else f"  replay: {f['replay']} (same options)")
    return lines


def render_text(result: CampaignResult) -> str:
    """The whole report as plain text."""
    rows = summary_rows(result)
    width = max(len(label) for label, _ in rows)
    out = [f"{label:<{width}}  {value}" for label, value in rows]
    out += first_failure_lines(result)
    return "\n".join(out)
