"""Delay schedules for a user's kernels: seeded random draws, or a guided schedule aimed at a
counterexample that the model check of the same harness found.

Random (``ctl`` mode 0): at every site of every rewritten kernel (``syncverify.frontend.rewrite``),
``pct`` % of (site, rank, program, iteration) keys sleep ``[0, max_ns)`` in a hashed subset of
warps; :func:`random_delay` is the kernels' draw on the host (the same hash,
``syncverify.stress.delays.delay_hash``), so a failure's delays can be printed and replayed.

Guided (mode 1): :func:`guided_schedules` reads each violation's witness execution, as
``syncverify.stress.guided`` does for the built-in protocols, in the user's terms:

* the **reader**: the program thread whose read is offending (it reads a location too early);
* the **late writer**: the kernel store of that location in the reader's call that the reader
  should have seen. A model thread other than 0 stands for the warps that do not run a one-thread
  signal (Triton predicates scalar atomics and stores to one thread, in warp 0), so a writer
  thread 1 is delayed as *warps 1..N-1 of its program, holding their store* (the store site's
  ``hold``): the signal of warp 0 goes first; a writer thread 0 makes its whole program late
  (its ``start`` site, every warp);
* a late store followed, in its thread, by a CTA barrier before the signal cannot be reordered by
  delays (the barrier waits for it): such a witness is not *realizable* (only the memory system
  could show it) and the schedule says so;
* where no delay can show the witness, an action of the memory system: a *touch* (the reader
  loads the data before its wait, so a poll without acquire may be served that old line), the data
  buffer *placed* in host-mapped memory with the signal on the GPU (a reader that acquires after
  its poll: the data's stores cross the host link, the signal's does not), or L2 congestion beside
  the launches (``_stale_line_schedule``);
* host writes (``sv.zero_``/``sv.fill_`` on a stream) in the witness: delayed on their stream
  (``torch.cuda._sleep``), and the program that polls what they reset waits before its wait so
  that the reset lands between a signal and its poll (a hang) or after a poll of the previous
  call's flag (a stale read).

Pure host code: no torch, no triton.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace

from syncverify.stress.delays import delay_hash
from syncverify.stress.guided import CTA_LATE_NS as FUSED_CTA_LATE_NS
from syncverify.stress.guided import WARPS_LATE_NS as FUSED_WARPS_LATE_NS

#: How much longer a user kernel's guided delays are than the fused kernels' (``syncverify.stress.guided``).
#: Measured on one H200 (docs/RESULTS.md, 2026-12-02, issue 25 runs 2 and 3, the shipped examples at
#: 1024^3, two virtual ranks): at 1x (holds 2-4 us, host writes 50 us late, pollers 100-120 us) no guided
#: schedule failed in 100 iterations (run 2: a 128 x 128 fp32 tile read back through ``iris.put`` after a
#: ``.cv`` poll outlasts a 4 us window); at 20x every realizable one failed within 2 iterations (run 3,
#: ``benchmarks/user_stress_gpu.py --guided-ns-scale 20``). The fused kernels keep their own, measured
#: durations: their tiles are bf16 and read right after the wait.
USER_NS_SCALE = 20
#: Warps 1.. of a producer hold their data store this long behind warp 0's one-thread signal (ns):
#: 40-80 us, run 3's holds.
WARPS_LATE_NS = tuple(USER_NS_SCALE * ns for ns in FUSED_WARPS_LATE_NS)
#: A whole program starts this late (ns): 60-120 us.
CTA_LATE_NS = tuple(USER_NS_SCALE * ns for ns in FUSED_CTA_LATE_NS)
#: A placement's writer programs start this late, every one by the same time (ns), so the reader's
#: kernel already polls when the signal comes (with the writers' kernel first and 20 us late, a probe
#: of two kernels on two streams saw 0 of 9,600 stale tiles; 500 us late, a third). Measured on one
#: H200 (docs/RESULTS.md, 2026-12-02 fifth session), ``one_shot_all_reduce::original`` in CUDA-graph
#: blocks: 60 us, clean 100; 500 us, 5 of 256 iterations bad; 2 ms, 105 of 256.
CTA_LATE_TOGETHER_NS = (2_000_000, 2_000_000)
#: How late a guided host write lands on its stream, and how long the program that polls what it
#: resets then waits before its wait (ns): 1 ms and 2-2.4 ms, run 3's (at 50 us and 100-120 us, run 2,
#: ``all_scatter::reset_on_gemm_stream`` ran 100 guided iterations clean; at these it hung at iteration 0).
HOST_LATE_NS = (USER_NS_SCALE * 50_000, USER_NS_SCALE * 50_000)
#: A touch is on or off, not long: a draw of 1 touches once before the wait (``sv_touching``). A touch
#: repeated before each poll was tried and removed: it put a ``bar.sync`` inside a poll loop whose warps
#: leave at different polls, and on the H200 it made the model-safe ``all_scatter::fix_with_barriers``
#: and ``reset_between_barriers`` fail (docs/RESULTS.md, 2026-12-02 fourth session, call 2).
TOUCH_ONCE_NS = (1, 1)
TOUCH_NS = TOUCH_ONCE_NS
POLLER_LATE_NS = (USER_NS_SCALE * 100_000, USER_NS_SCALE * 120_000)
#: How long the L2-congesting kernel (``syncverify.kernels.congest``) runs beside each iteration's
#: launches (ns, from its start): longer than the shipped examples' iterations at their stress sizes
#: (155 and 295 us, docs/RESULTS.md run 4), so the consumers' reads fall inside it; the probe that
#: showed the witness under congestion ran it 300 us beside each launch.
CONGEST_NS = (500_000, 500_000)
#: L2 loads of one buffer's own lines beside the launches (``where="aim"``,
#: ``syncverify.kernels.congest.sv_aim``): measured, not planned (docs/stress.md, "Placement and aimed
#: traffic"); a run can still be given it (``benchmarks/user_stress_fast_gpu.py --sections actions``).
AIM_NS = CONGEST_NS
#: A placement is on or off (``where="place"``): the named buffer in host-mapped memory, the rest of the
#: heap on the GPU (``syncverify.kernels.placement``); no buffer named: the whole heap (measured, not planned).
PLACE_NS = (1, 1)


@dataclass(frozen=True)
class GuidedEntry:
    """One delay of a guided schedule: at the sites ``where`` of ``kernel``'s line ``line``
    (``where="host"``: a host write of the harness at ``file:line``), on ``rank``, in ``program``
    (-1: every program of the kernel on that rank), ``warps`` (bit w: warp w; 0: a hashed subset),
    ``[ns_lo, ns_hi]`` in ``pct`` % of iterations, and why."""

    kernel: str
    line: int
    where: str
    rank: int
    program: int
    warps: int
    ns_lo: int
    ns_hi: int
    reason: str
    pct: int = 100
    file: str = ""
    buffer: str = ""  # where="aim": the heap buffer the traffic reads; "place": the one placed ("": the whole heap)

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        who = f"program {self.program}" if self.program >= 0 else "every program"
        warps = f", warps {self.warps:#b}" if self.warps else ""
        where = f"{os.path.basename(self.file)}:{self.line}" if self.file else f"line {self.line}"
        if self.where == "congest":
            return (f"congest L2 beside rank {self.rank}'s launches: a kernel of relaxed atomics over a buffer larger "
                    f"than L2 on its own stream, {self.ns_lo}-{self.ns_hi} ns from each iteration's start, "
                    f"{self.pct} % of iterations: {self.reason}")
        if self.where == "place" and self.buffer:
            return (f"place {self.buffer} in host-mapped memory (every rank's copy; its stores cross the host link), "
                    f"the rest of the heap, flags included, on the GPU: {self.reason}")
        if self.where == "place":
            return (f"place the symmetric heap in host-mapped memory (every rank's buffers; stores to it cross the "
                    f"host link), {self.pct} % of iterations: {self.reason}")
        if self.where == "aim":
            return (f"aim L2 traffic at {self.buffer} beside the launches: a kernel of L2 loads of every rank's "
                    f"{self.buffer} on its own stream, values unused, {self.ns_lo}-{self.ns_hi} ns from each "
                    f"iteration's start, {self.pct} % of iterations: {self.reason}")
        what = "host write" if self.where == "host" else f"{self.kernel} {self.where}"
        return (f"delay rank {self.rank} {what} at {where}, {who}{warps}: {self.ns_lo}-{self.ns_hi} ns, "
                f"{self.pct} % of iterations: {self.reason}")


@dataclass
class GuidedSchedule:
    """The delays that aim at one counterexample of the model check."""

    kind: str
    explanation: str
    entries: tuple[GuidedEntry, ...] = ()
    realizable: bool = True
    note: str = ""

    def describe(self) -> list[str]:
        lines = [f"{self.kind}: {self.explanation}"]
        lines += [f"  {e.describe()}" for e in self.entries]
        if not self.entries:
            lines.append("  no delay")
        if self.note:
            lines.append(f"  note: {self.note}")
        return lines

    def to_dict(self) -> dict:
        return {"kind": self.kind, "explanation": self.explanation, "realizable": self.realizable,
                "note": self.note, "entries": [e.to_dict() for e in self.entries]}

    @classmethod
    def from_dict(cls, data: dict) -> "GuidedSchedule":
        return cls(data["kind"], data["explanation"], tuple(GuidedEntry(**e) for e in data["entries"]),
                   data["realizable"], data.get("note", ""))


def random_delay(*, seed: int, site: int, rank: int, program: int, iteration: int, pct: int, max_ns: int,
                 num_warps: int) -> tuple[int, int]:
    """``(ns, warp_mask)`` the rewritten kernels draw at ``site`` in random mode
    (``syncverify.kernels.user_delays.sv_draw``)."""
    h = delay_hash(seed, site, rank, program, iteration)
    ns = (h >> 8) % max(max_ns, 1) if h % 100 < pct else 0
    warps = delay_hash(seed, site + 4096, rank, program, iteration) & ((1 << num_warps) - 1)
    return ns, warps


# ----- from a witness to a schedule ----------------------------------------------------------------

@dataclass(frozen=True)
class _Actor:
    rank: int
    kernel: str
    program: int
    thread: int
    call: int

    def __str__(self) -> str:
        return f"rank {self.rank} {self.kernel}[{self.program}] thread {self.thread} (call {self.call})"

    def same_program(self, other: "_Actor") -> bool:
        return (self.rank, self.kernel, self.program, self.call) == (other.rank, other.kernel, other.program,
                                                                     other.call)


def _actor(info) -> _Actor | None:
    if info.kind != "program" or info.kernel is None:
        return None
    return _Actor(info.rank, info.kernel, info.program, info.thread, info.call)


def _line_of(label: str) -> tuple[str, int] | None:
    """``(file basename, line)`` of an event label ``file:line (kernel) text``."""
    head = label.split(" ", 1)[0]
    name, _, line = head.rpartition(":")
    return (os.path.basename(name), int(line)) if line.isdigit() else None


@dataclass
class _Witness:
    """One violation's execution, read in the user's terms."""

    x: object
    infos: list
    evidence: list = field(default_factory=list)
    #: a data location's group name -> (heap buffer, rank) (``Lifted.ghost_names``): where a read's data lives
    buffers: dict = field(default_factory=dict)

    def actor(self, eid: int) -> _Actor | None:
        e = self.x.events[eid]
        return None if e.is_init else _actor(self.infos[e.thread])

    def kind_of(self, eid: int) -> str:
        e = self.x.events[eid]
        return "init" if e.is_init else self.infos[e.thread].kind

    def thread_events(self, thread: int) -> list:
        return sorted((e for e in self.x.events if e.thread == thread and not e.is_init), key=lambda e: e.index)


def guided_schedules(result, *, num_warps: int) -> list[GuidedSchedule]:
    """One schedule per violation kind of a :class:`~syncverify.frontend.verdicts.KernelCheckResult`."""
    out = []
    for kind, violation in result.violations.items():
        w = _Witness(violation.execution, result.lifted.threads, violation.evidence, result.lifted.ghost_names)
        out.append(schedule_for(kind, violation.explanation, w, num_warps=num_warps))
    return out


def every_program(entries) -> list[GuidedEntry]:
    """``entries`` at other sizes than the model's: a program the model names is each program of its
    kernel and rank (the model checks a few programs; a GPU run launches many)."""
    return [replace(e, program=-1) for e in entries]


def schedule_for(kind: str, explanation: str, w: _Witness, *, num_warps: int) -> GuidedSchedule:
    """The delays that make the witness ``w`` likely on the GPU (module docstring)."""
    every = (1 << num_warps) - 1
    if kind == "hang":
        return _hang_schedule(explanation, w)
    if kind == "out-of-bounds":
        return GuidedSchedule(kind, explanation, (), False, "an out-of-bounds access needs no timing")
    reads = [b if w.x.events[b].is_read else a for a, b in w.evidence]
    reads = [r for r in reads if w.actor(r) is not None]
    if not reads:
        return GuidedSchedule(kind, explanation, (), False, "the offending read is the host's check, not a "
                              "kernel's: no program to run ahead")
    read = w.x.events[reads[0]]
    reader = w.actor(read.eid)
    if not read.ghost and kind == "race":
        return GuidedSchedule(kind, explanation, tuple(_host_entries(w, read.thread)), False,
                              f"the race is on {read.loc}, a flag, not data: the wrong value it may read shows no "
                              "wrong output by itself (the data kinds' schedules aim at what it lets through)")
    writes = [e for e in w.x.events if e.is_write and not e.is_init and e.loc == read.loc
              and w.actor(e.eid) is not None and w.actor(e.eid).call == reader.call
              and not w.actor(e.eid).same_program(reader)]
    entries: list[GuidedEntry] = []
    entries += _host_entries(w, read.thread)
    if not writes:
        note = "no kernel store of the location in the reader's call: nothing to make late"
        return GuidedSchedule(kind, explanation, tuple(entries), bool(entries), note if not entries else "")
    write = writes[0]
    writer = w.actor(write.eid)
    where = _line_of(write.label)
    line = where[1] if where else 0
    after = [e for e in w.thread_events(write.thread) if e.index > write.index]
    barrier = next((e for e in after if e.is_barrier), None)
    signal = next((e for e in after if e.is_write and not e.ghost and e.sem != "weak"
                   or e.is_write and e.loc != write.loc and not e.ghost), None)
    if barrier is not None and signal is None:
        barrier = _barrier_before_program_signal(w, write, barrier)
    if barrier is not None and (signal is None or barrier.index < signal.index):
        return _stale_line_schedule(kind, explanation, w, entries, read, reader, writer, signal, line, every)
    if writer.thread >= 1:
        entries.append(GuidedEntry(writer.kernel, line, "hold", writer.rank, writer.program, every & ~1,
                                   *WARPS_LATE_NS, f"{writer} must store after its program's one-thread signal "
                                   "(warp 0) that the reader waits for: warps 1.. hold their store, warp 0 does not",
                                   file=where[0] if where else ""))
    else:
        entries.append(GuidedEntry(writer.kernel, 0, "start", writer.rank, writer.program, every, *CTA_LATE_NS,
                                   f"{writer}'s program must store after {reader} passed its wait: the whole "
                                   "program starts late", file=""))
    return GuidedSchedule(kind, explanation, tuple(entries), True,
                          f"aimed order: {reader} passes its wait, reads {read.loc}; then {writer} stores it")


def _barrier_before_program_signal(w: _Witness, write, barrier):
    """``barrier`` (the first CTA barrier after ``write`` in its thread, which signals nothing itself:
    warps 1.. of a program whose warp 0 runs the one-thread signal) if it orders the store before the
    program's signal, else None. ``bar.sync`` pairs the threads' barriers in order, so the writer's
    k-th barrier is the signalling thread's k-th: it bars a delay of the store only if the signal
    comes after it (in ``one_shot_all_reduce::seed_fix`` the next tile's ``tl.dot`` barrier follows
    the store, and warp 0 signals before it: warps 1.. can still hold their store)."""
    k = sum(1 for e in w.thread_events(write.thread) if e.is_barrier and e.index <= barrier.index)
    writer = w.actor(write.eid)
    for thread, info in enumerate(w.infos):
        other = _actor(info)
        if thread == write.thread or other is None or not other.same_program(writer):
            continue
        events = w.thread_events(thread)
        barriers = [e for e in events if e.is_barrier]
        since = barriers[k - 2].index if 2 <= k <= len(barriers) + 1 else -1  # the phase of the store
        signal = next((e for e in events if e.index > since and e.is_write and not e.ghost), None)
        if signal is not None:
            return barrier if len(barriers) >= k and barriers[k - 1].index < signal.index else None
    return barrier


def _stale_line_schedule(kind: str, explanation: str, w: _Witness, entries: list[GuidedEntry], read, reader: _Actor,
                         writer: _Actor, signal, line: int, every: int) -> GuidedSchedule:
    """A store, then a CTA barrier, then the signal: no delay of the writer reorders them (the barrier
    waits for the store). The reader's side can: a *touch* (the reads after its wait, made before
    it, their values unused) loads the old value into its SM's L1 while the writer's program starts
    late; a weak or volatile poll does not invalidate that line, so the read after the wait is
    served the old value: the witness's read of the value before the store. A touch adds only
    reads whose values nobody uses, so every outcome it shows is one the kernel as written allows
    (more reads only constrain an execution). It cannot help a reader that acquires (or fences)
    between its poll and the read: an acquire invalidates the SM's L1 (the probe that measured
    this: ``benchmarks/user_stress_latent_gpu.py``, docs/RESULTS.md)."""
    barred = (f"{writer} reaches a CTA barrier after its store (line {line}) and before its signal: "
              "a delay before the store delays the signal too")
    mine = w.thread_events(read.thread)
    polls = [e for e in mine if e.is_read and e.index < read.index and signal is not None and e.loc == signal.loc]
    if not polls:
        return GuidedSchedule(kind, explanation, (*entries, _congest(reader, read, "it reads with no poll")), True,
                              f"{barred}; {reader} reads it with no poll of the signal before: only the memory "
                              "system can make the store visible late; aimed: L2 congestion beside the launches")
    poll = polls[-1]
    acquires = [e for e in mine if poll.index <= e.index < read.index
                and (e.is_fence or e.is_read and e.sem == "acquire")]
    if acquires:
        where = _line_of(acquires[0].label)
        at = f"{where[0]}:{where[1]}" if where else "?"
        buffer = w.buffers.get(read.loc, ("", None))[0]
        if buffer and signal is not None and w.buffers.get(signal.loc, ("", None))[0] != buffer:
            # the reader must already poll when the signal comes: its read then follows the signal at
            # once, while the data's stores are still on the host link (CTA_LATE_TOGETHER_NS says why so late)
            late = GuidedEntry(writer.kernel, 0, "start", writer.rank, writer.program, every, *CTA_LATE_TOGETHER_NS,
                               f"{writer}'s program starts late, every program of its kernel on rank {writer.rank} "
                               f"by the same time and later than the host launches {reader}'s kernel, so {reader} "
                               "polls when the signal comes and reads at once, while the data's stores still cross "
                               "the host link", file="")
            return GuidedSchedule(kind, explanation, (*entries, late, _place(reader, read, buffer, at)), True,
                                  f"{barred}; {reader} acquires after its poll (at {at}), which invalidates its SM's "
                                  f"L1, so no stale line can serve the read either: only the memory system can make "
                                  f"the store visible late; aimed: {buffer} in host-mapped memory, the signal on the GPU")
        late = GuidedEntry(writer.kernel, 0, "start", writer.rank, writer.program, every, *CTA_LATE_NS,
                           f"{writer}'s program starts late, so {reader} waits and reads while the congestion runs",
                           file="")
        return GuidedSchedule(kind, explanation,
                              (*entries, late, _congest(reader, read, f"it acquires after its poll (at {at})")), True,
                              f"{barred}; {reader} acquires after its poll (at {at}), which "
                              "invalidates its SM's L1, so no stale line can serve the read either: only the memory "
                              "system can make the store visible late; aimed: L2 congestion beside the launches")
    where = _line_of(poll.label)
    entries = [*entries,
               GuidedEntry(writer.kernel, 0, "start", writer.rank, writer.program, every, *CTA_LATE_NS,
                           f"{writer}'s program must store after {reader} touched {read.loc}: the whole program "
                           "starts late", file=""),
               GuidedEntry(reader.kernel, where[1] if where else 0, "touch", reader.rank, reader.program, 0,
                           *TOUCH_NS, f"{reader} reads {read.loc} before its wait (a touch, the value unused), so its "
                           "SM's L1 holds the value before the store; its poll at this line has no acquire, which "
                           "would invalidate that line, so the read after the wait may be served it",
                           file=where[0] if where else ""),
               _congest(reader, read, "the touched line may be evicted before the read (in the shipped all-scatter "
                        "at 1024^3 the touch alone stayed clean)")]
    return GuidedSchedule(kind, explanation, tuple(entries), True,
                          f"{barred}; aimed instead: {reader} touches {read.loc}, then {writer} stores it, barriers "
                          "and signals; the poll sees the signal and the read is served the touched (old) line; L2 "
                          "congestion beside the launches makes the store's way longer")


def _congest(reader: _Actor, read, why: str) -> GuidedEntry:
    """The planned action for a witness no delay can force (``syncverify.kernels.congest``)."""
    return GuidedEntry("", 0, "congest", reader.rank, -1, 0, *CONGEST_NS,
                       f"{reader} must read {read.loc} before the store reaches it, and {why}: no delay of a "
                       "program orders that, only the memory system can; under L2 congestion it did on one H200 "
                       "(a store, a CTA barrier, a weak flag, an acquire CAS: 5 of 9,600 tiles stale with a congesting "
                       "kernel, 0 without; docs/RESULTS.md)")


def _place(reader: _Actor, read, buffer: str, at: str) -> GuidedEntry:
    """The planned placement for a store, a CTA barrier, then a signal in another buffer, read by a
    reader that acquires after its poll (``syncverify.kernels.placement``)."""
    return GuidedEntry("", 0, "place", reader.rank, -1, 0, *PLACE_NS,
                       f"{reader} must read {read.loc} before the store reaches it, and it acquires after its poll (at "
                       f"{at}): no delay of a program orders that, only the memory system can; with the data in "
                       "host-mapped memory its stores cross the host link while the signal's reaches L2 at once, and "
                       "the CTA barrier waits for neither (a store, a CTA barrier, a weak flag, an acquire CAS: 2,123 "
                       "and 3,536 of 9,600 tiles stale on one H200, 0 with a release flag; docs/RESULTS.md)",
                       buffer=buffer)


def _host_entries(w: _Witness, poller_thread: int | None) -> list[GuidedEntry]:
    """Host writes of the witness that write a location ``poller_thread`` (the reader, or the
    thread that hangs) polls: delayed on their stream; the poller then waits longer before its wait."""
    entries = []
    hosts = [e for e in w.x.events if e.is_write and not e.is_init and w.kind_of(e.eid) == "host-write"
             and not e.ghost]
    for e in hosts:
        info = w.infos[e.thread]
        where = _line_of(e.label)
        if where is None:
            continue
        entries.append(GuidedEntry("", where[1], "host", info.rank or 0, -1, 0, *HOST_LATE_NS,
                                   f"{info.role} must land late, after the signal it resets",
                                   file=where[0]))
        polls = [r for r in w.x.events if r.is_read and r.loc == e.loc and r.thread == poller_thread]
        if not polls:
            continue
        for r in polls[:1]:
            poller = w.actor(r.eid)
            rline = _line_of(r.label)
            entries.append(GuidedEntry(poller.kernel, rline[1] if rline else 0, "before", poller.rank,
                                       poller.program, 0, *POLLER_LATE_NS,
                                       f"{poller} must poll {r.loc} after the late host write has landed"))
    return _unique(entries)


def _hang_schedule(explanation: str, w: _Witness) -> GuidedSchedule:
    entries = [e for t in sorted(w.x.stuck) for e in _host_entries(w, t)]
    if entries:
        return GuidedSchedule("hang", explanation, tuple(entries), True,
                              "aimed order: the signal, then the late reset, then the poll that never sees it")
    return GuidedSchedule("hang", explanation, (), True, "no timing is needed: the wait's target is reached in no "
                          "schedule")


def _unique(entries: list[GuidedEntry]) -> list[GuidedEntry]:
    seen, out = set(), []
    for e in entries:
        key = (e.kernel, e.line, e.where, e.rank, e.program)
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out
