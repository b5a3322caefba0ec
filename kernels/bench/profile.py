"""Where a fused launch's time goes: the timestamps of a build with ``stamps`` read back (issue 28).

A build with ``KernelConfig.stamps = S`` writes, per program, its start and end and, per iteration
of its role's loop (``S`` at most), the tile it visited and three ``%globaltimer`` times
(``syncverify.kernels.delays.stamp``; :data:`EVENTS` says what they are per role). This module
turns one launch's rows into a timeline (:func:`timeline`): when each role's programs start and
end, how long the waiting roles waited and worked, and, for the program that ends last, what its
last tile waited for. Times are µs from the launch's first program start. Pure Python: the CPU
tests feed it synthetic rows, the GPU script (``benchmarks/profile_tail.py``) real ones.

A waiting iteration's tile is *ready* when the last program of its source role that visited the
same tile (any rank) signalled it; then

* ``backlog`` = wait start - ready, when positive: the tile was ready while the program was still
  busy with earlier tiles (the consumers are behind);
* ``wake`` = flag seen - max(wait start, ready): the signal's latency, from the release (or the
  wait start, if later) to the poll that saw it;
* ``work`` = written - flag seen: the epilogue (tile reads, sum, stores).
"""

from __future__ import annotations

import statistics
from typing import Sequence

from syncverify.kernels.errors import StressConfigError

#: What a role's three per-iteration times are (slot 1, 2, 3 after the tile in slot 0).
EVENTS: dict[str, tuple[str, str, str]] = {
    "producer": ("tile start", "GEMM done", "stored and signalled"),
    "consumer": ("wait start", "flag seen", "written"),
    "comm": ("wait start", "flag seen", "pushed and signalled"),
    "receiver": ("wait start", "flag seen", "copied"),
    "sender": ("tile start", "copies issued", "signalled"),
    "gemm": ("wait start", "flag seen", "written"),
}
#: The role whose signal a waiting role waits for.
SOURCE: dict[str, str] = {"consumer": "producer", "comm": "producer", "receiver": "comm", "gemm": "sender"}


def roles(config) -> list[tuple[str, int, int, int]]:
    """``(role, first program id, programs, programs per rank)`` of a virtual-rank launch of
    ``config`` (``syncverify.kernels.config.KernelConfig``, the ``producers-first`` layout of
    ``syncverify.kernels.steps.program_role``)."""
    if config.order != "producers-first":  # the other layouts interleave roles: not read here
        raise StressConfigError(f"stamps are read for order='producers-first' only, not {config.order!r}")
    W = config.world_size if config.virtual else 1
    g, c = config.gemm_sms, config.comm_sms
    if config.kernel == "all-gather-gemm":
        return [("sender", 0, g * W, g), ("gemm", g * W, c * W, c)]
    if config.kernel == "all-scatter":
        r = config.recv_sms
        return [("producer", 0, g * W, g), ("comm", g * W, c * W, c), ("receiver", (g + c) * W, r * W, r)]
    return [("producer", 0, g * W, g), ("consumer", g * W, c * W, c)]


def iterations_needed(config) -> int:
    """The most iterations any program of ``config``'s launch runs (the ``stamps`` that records
    them all)."""
    W = config.world_size
    tiles = config.tiles
    if config.kernel == "all-gather-gemm":
        units = tiles * (config.n // config.block_n)
        return max(-(-tiles // config.gemm_sms), -(-units // config.comm_sms))
    owned = -(-tiles // W) if config.kernel in ("all-reduce", "gemm-reduce-scatter") else tiles
    most = max(-(-tiles // config.gemm_sms), -(-owned // config.comm_sms))
    if config.kernel == "all-scatter":
        most = max(most, -(-tiles // config.recv_sms))
    return most


def records(config, rows: Sequence[Sequence[int]]) -> tuple[list[dict], list[dict]]:
    """``(programs, iterations)`` of one launch's stamp rows (``[grid][2 + 4 * stamps]`` ints):
    a program ``{role, pid, rank, start, end}``, an iteration ``{role, pid, rank, k, tile, t1, t2,
    t3}`` (ns, raw); iterations whose slots were not written are left out."""
    programs, its = [], []
    for role, first, count, per_rank in roles(config):
        for pid in range(first, first + count):
            row = rows[pid]
            rank = (pid - first) // per_rank
            programs.append(dict(role=role, pid=pid, rank=rank, start=row[0], end=row[1]))
            for k in range((len(row) - 2) // 4):
                tile, t1, t2, t3 = row[2 + 4 * k: 6 + 4 * k]
                if t1:
                    its.append(dict(role=role, pid=pid, rank=rank, k=k, tile=tile, t1=t1, t2=t2, t3=t3))
    return programs, its


def _us(ns: float) -> float:
    return round(ns / 1000.0, 3)


def timeline(config, rows: Sequence[Sequence[int]]) -> dict:
    """One launch's timeline (µs from its first program start): per role ``{first_start,
    last_start, median_end, last_end, wait, work, iterations}`` (``wait``/``work``: per program,
    the mean over programs of its summed wait, flag seen - wait start, and work, end - flag seen),
    ``span`` (first start to last end), ``tail`` (the last end of every role after the first
    role's last end), and for the waiting roles ``backlog``/``wake``/``work`` medians over their
    iterations and ``critical``: the iteration that ended last, with its ready time, backlog,
    wake, work and how many of its program's iterations started after the source role's last end."""
    programs, its = records(config, rows)
    t0 = min(p["start"] for p in programs)
    out: dict = {"roles": {}}
    by_role: dict[str, list[dict]] = {}
    for it in its:
        by_role.setdefault(it["role"], []).append(it)
    role_names = [r[0] for r in roles(config)]
    for role in role_names:
        ps = [p for p in programs if p["role"] == role]
        mine = by_role.get(role, [])
        waits: dict[int, float] = {}
        works: dict[int, float] = {}
        for it in mine:
            waits[it["pid"]] = waits.get(it["pid"], 0) + it["t2"] - it["t1"]
            works[it["pid"]] = works.get(it["pid"], 0) + it["t3"] - it["t2"]
        out["roles"][role] = dict(
            first_start=_us(min(p["start"] for p in ps) - t0), last_start=_us(max(p["start"] for p in ps) - t0),
            median_end=_us(statistics.median(p["end"] for p in ps) - t0), last_end=_us(max(p["end"] for p in ps) - t0),
            wait=_us(statistics.fmean(waits.values())) if waits else 0.0,
            work=_us(statistics.fmean(works.values())) if works else 0.0, iterations=len(mine))
    out["span"] = _us(max(p["end"] for p in programs) - t0)
    first_end = out["roles"][role_names[0]]["last_end"]
    out["tail"] = round(out["span"] - first_end, 3)
    for role, source in SOURCE.items():
        if role not in by_role or source not in by_role:
            continue
        ready: dict[int, int] = {}
        for it in by_role[source]:
            ready[it["tile"]] = max(ready.get(it["tile"], 0), it["t3"])
        source_end = max(p["end"] for p in programs if p["role"] == source)
        backlog, wake, work = [], [], []
        for it in by_role[role]:
            r = ready.get(it["tile"], it["t1"])
            backlog.append(max(0, it["t1"] - r))
            wake.append(it["t2"] - max(it["t1"], r))
            work.append(it["t3"] - it["t2"])
        crit = max(by_role[role], key=lambda it: it["t3"])
        r = ready.get(crit["tile"], crit["t1"])
        pending = sum(1 for it in by_role[role] if it["pid"] == crit["pid"] and it["t3"] > source_end)
        out[role] = dict(backlog=_us(statistics.median(backlog)), wake=_us(statistics.median(wake)),
                         work=_us(statistics.median(work)), behind=sum(1 for b in backlog if b > 0),
                         critical=dict(tile=crit["tile"], pid=crit["pid"], ready=_us(r - t0),
                                       wait_start=_us(crit["t1"] - t0), flag=_us(crit["t2"] - t0),
                                       done=_us(crit["t3"] - t0), backlog=_us(max(0, crit["t1"] - r)),
                                       wake=_us(crit["t2"] - max(crit["t1"], r)), work=_us(crit["t3"] - crit["t2"]),
                                       after_source_end=pending))
    return out


def median_timeline(timelines: list[dict]) -> dict:
    """The element-wise median of several launches' :func:`timeline` dicts (every number, the
    critical tile's id and program too: read those from one launch's own timeline)."""
    first = timelines[0]
    if isinstance(first, dict):
        return {key: median_timeline([t[key] for t in timelines if key in t]) for key in first}
    if isinstance(first, (int, float)) and not isinstance(first, bool):
        return round(statistics.median(timelines), 3)
    return first
