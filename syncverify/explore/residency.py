"""Forward progress as the hardware gives it: CTAs run only while resident, and residency is limited.

The explorer alone assumes every CTA of every launch runs, fairly. A GPU promises less
(docs/residency.md has the sources):

* **Capacity.** At most ``capacity`` CTAs are resident on one GPU at a time (SMs times the
  kernel's occupancy); kernels on different streams share it.
* **Never preempted.** A resident CTA keeps its slot until it exits; a CTA that spins forever holds
  it forever (CUDA programming guide: a block runs to completion on the SM it is dispatched to).
* **Order.** ``any``: CTAs become resident in any order (what the CUDA programming guide
  guarantees: "thread blocks are required to execute independently ... in any order");
  ``index``: within one launch in ``blockIdx`` order (what the hardware's block dispatcher does in
  practice, *not* a documented guarantee); launches that neither stream nor host orders, in any
  order against each other in both.
* A launch the host (or its stream) orders after another starts only once that one has finished
  (``Program.host_order``): its CTAs are admitted after every CTA of the earlier one exited.
* **Per SM** (``Residency(sms=S)``): the capacity is ``S`` SMs, each holding CTAs up to its own
  limits, each kernel's CTA taking its own footprint (:mod:`syncverify.explore.placement`). A CTA
  becomes resident on an SM with room for its footprint, beside CTAs of any kernel; which SM is
  unspecified and every choice is explored. A deadlock there is a placement of the CTAs that wait
  forever such that no SM has room for any CTA still waiting for a slot.
* **Lazy loading** (``Residency(lazy_loading=True)``): a binary's first launch on a GPU (in issue
  order, ``Program.kernels``; a kernel compiled for other meta-parameters, specializations or
  launch options is another binary, ``Program.binaries``; those in ``loaded`` excepted) loads its
  module, which may need
  the GPU idle (CUDA C++ Programming Guide, *Lazy Loading*: "loading kernels might require
  context synchronization ... if program assumes that two kernels will be able to execute
  concurrently, and one of the kernels will not return without the other kernel executing, there
  is a possibility of a deadlock"): its CTAs are admitted only after every CTA of the launches
  issued before it on that GPU exited. It gates admissions only: the fair check's executions
  are unchanged (a load that does synchronize orders more, never less).

**A residency deadlock** is a state no CTA can leave: on some GPU, CTAs that never became resident
(``not resident``) while all ``capacity`` slots are held by resident CTAs that wait forever. Such a
state is a consistent execution of the program *without* the never-resident CTAs (their writes
never happen, so the waits on them read the last value written and spin), in which exactly
``capacity`` CTAs of that GPU hang, and which a schedule of admissions and steps can reach
(:func:`reachable`). :func:`find_deadlock` enumerates the sets of CTAs that become resident (every
subset for ``any``, prefixes of each launch for ``index``), explores each restricted program with
the ordinary explorer (:func:`syncverify.explore.driver.explore`) and returns the first deadlock.

Reachability is decided at CTA granularity on the execution's events: an event runs once its
thread's CTA is resident and the write it reads from (``rf``) has run; a CTA's slot frees when all
its threads end. CTA barriers inside one CTA are not scheduled (the CTA is resident as a whole,
so they order nothing residency can change). The search over admission orders is exhaustive
(memoized on the admitted set: the events that can run given the admitted CTAs are a least
fixpoint, so the state depends on the set alone).
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from syncverify.errors import ScenarioError
from syncverify.explore.bounds import Clock, LimitHit
from syncverify.explore.driver import explore
from syncverify.explore.placement import Costs, blocked, may_place
from syncverify.model.events import Execution
from syncverify.program import HOST_RESET, PDL_TRIGGER, Atomic, Program, Store, Thread, ThreadOrigin
from syncverify.validation import did_you_mean, one_of

#: How CTAs become resident: ``any`` (guaranteed), ``index`` (observed, blockIdx order per launch).
ORDERS: tuple[str, ...] = ("any", "index")


@dataclass(frozen=True)
class Residency:
    """At most ``capacity`` CTAs resident per GPU, admitted in ``order`` (:data:`ORDERS`).

    ``sms``: 0 for one pool of ``capacity`` slots shared by every kernel (optimistic across
    different kernels: docs/residency.md, GPU runs 1 and 2); else ``capacity`` spread over ``sms``
    SMs, each holding ``capacity // sms`` CTAs of one kernel alone, or ``occupancy[kernel]`` for
    the kernels named there (:mod:`syncverify.explore.placement`)."""

    capacity: int
    order: str = "any"
    sms: int = 0
    occupancy: tuple[tuple[str, int], ...] = ()
    lazy_loading: bool = False  # a binary's first launch waits for the launches issued before it
    loaded: tuple[str, ...] = ()  # under lazy loading: kernels (every binary) or binaries whose modules are loaded

    def __post_init__(self) -> None:
        if not isinstance(self.capacity, int) or self.capacity < 1:
            raise ScenarioError(f"--resident={self.capacity!r} must be a positive number of CTAs per GPU")
        one_of("--resident-order", self.order, ORDERS, error=ScenarioError)
        if not isinstance(self.sms, int) or self.sms < 0:
            raise ScenarioError(f"--sms={self.sms!r} must be a positive number of SMs per GPU")
        if self.sms and self.capacity % self.sms:
            raise ScenarioError(f"--resident {self.capacity} does not spread evenly over --sms {self.sms} "
                                f"(give a multiple of {self.sms})")
        if self.occupancy and not self.sms:
            raise ScenarioError("an occupancy per kernel needs --sms (per-SM placement)")
        self.costs()  # validates the occupancies (one line each)

    @property
    def least_blocking(self) -> int:
        """The fewest resident CTAs that can leave a CTA waiting for a slot: every slot (one pool),
        or one CTA per SM (per SM: an empty SM takes any CTA); one under lazy loading (a first
        launch can wait on a single CTA that never exits)."""
        return 1 if self.lazy_loading else (self.sms or self.capacity)

    @property
    def per_sm(self) -> int:
        """CTAs of one kernel alone per SM, unless ``occupancy`` names the kernel (per-SM mode)."""
        return self.capacity // self.sms if self.sms else self.capacity

    def costs(self) -> Costs | None:
        """Each kernel's share of an SM (None: one pool, no SMs)."""
        return Costs.from_occupancy(self.sms, dict(self.occupancy), self.per_sm) if self.sms else None

    def words(self) -> str:
        """``2 CTAs per GPU, resident in any order``: what a verdict assumes."""
        where = ""
        if self.sms:
            named = "".join(f", {n} of {k}" for k, n in self.occupancy)
            where = (f" on {self.sms} SM{'' if self.sms == 1 else 's'} ({self.per_sm} CTAs of one kernel per SM{named}; "
                     "a CTA needs an SM with room for its footprint)")
        lazy = ""
        if self.lazy_loading:
            lazy = ("; a binary's first launch waits for the GPU to be idle (lazy loading"
                    + (f"; loaded: {', '.join(self.loaded)})" if self.loaded else ")"))
        return (f"{self.capacity} CTA{'' if self.capacity == 1 else 's'} resident per GPU{where}, "
                + ("admitted in any order" if self.order == "any" else "admitted in blockIdx order per launch") + lazy)


@dataclass(frozen=True)
class Cta:
    """One CTA of the program: its GPU, launch (phase), number, and thread indices."""

    gpu: int
    phase: object
    cta: int
    threads: tuple[int, ...]
    name: str
    kernel: str = "kernel"  # the compiled kernel it runs (per-SM placement: CTAs of one kernel share room)

    def __str__(self) -> str:
        return self.name


def cta_name(thread: Thread) -> str:
    """A CTA as a reader knows it: ``rank 0 consumer of tile 0 (epoch 0)``, or ``GPU 0 CTA 3 (e0)``."""
    role = thread.role
    if isinstance(role, ThreadOrigin):
        return f"rank {role.rank} {role.cta} (epoch {role.epoch})"
    if isinstance(role, str) and role:  # the front end's "rank 0 kernel[1] thread 0 (call 0, stream s)"
        return re.sub(r" thread \d+", "", role)
    where = f" ({thread.phase})" if str(thread.phase) else ""
    return f"GPU {thread.gpu} CTA {thread.cta}{where}"


def parse_occupancy(texts: list[str] | tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    """``--occupancy KERNEL=N`` (repeatable) as ``Residency.occupancy``; one line for bad input.

    >>> parse_occupancy(["gemm=1", "comm=4"])
    (('comm', 4), ('gemm', 1))
    """
    out = {}
    for text in texts:
        name, _, number = str(text).partition("=")
        if not name.strip() or not number.strip().isdigit() or int(number) < 1:
            raise ScenarioError(f"--occupancy {text!r}: give KERNEL=N, N CTAs of that kernel alone per SM")
        out[name.strip()] = int(number)
    return tuple(sorted(out.items()))


def kernel_of(program: Program, phase: object) -> str:
    """The compiled kernel a launch ``phase`` runs: ``program.kernels`` names it, else the
    scenario phase's kernel (``gemm``, ``comm``), else ``kernel`` (one fused kernel)."""
    named = {str(ph): k for ph, k in program.kernels}
    return named.get(str(phase)) or getattr(phase, "kernel", "") or "kernel"


def binary_of(program: Program, phase) -> str:
    """The compiled binary a launch ``phase`` loads: ``program.binaries`` names it, else its
    kernel's one binary (:func:`kernel_of`)."""
    named = {str(ph): b for ph, b in program.binaries}
    return named.get(str(phase)) or kernel_of(program, phase)


def first_launches(program: Program, units: list[Cta], loaded: tuple[str, ...] = ()) -> dict[str, frozenset[str]]:
    """Under lazy loading, each launch that is its binary's first on its GPU (in issue order,
    ``program.kernels``; binaries by ``program.binaries``; not of a kernel or binary in
    ``loaded``: modules loaded before) -> the launches issued before it on that GPU, whose CTAs
    must all exit before it starts; and each launch issued after such a load -> the same (the
    host thread is blocked in the load until then: GPU run 5 saw the load call itself return
    only when the spinning consumers gave up). A binary, not a kernel: run 5 saw a kernel warmed
    up without ``num_warps`` deadlock when launched with ``num_warps=4`` spelled out (another
    Triton cache key, another module), and not once that binary's module was loaded; a module
    loaded but never launched did not stall (the load is the step, not the first launch)."""
    gpu_of = {str(c.phase): c.gpu for c in units}
    seen: dict[int, list[str]] = {}
    loaded_on: dict[int, set[str]] = {}
    held: dict[int, frozenset[str]] = {}  # launches a load before waited for: the host, blocked in it, issues later
    out: dict[str, frozenset[str]] = {}
    for phase, kernel in program.kernels:
        gpu = gpu_of.get(str(phase))
        if gpu is None:
            continue
        binary = binary_of(program, phase)
        waits = held.get(gpu, frozenset())
        if kernel not in loaded and binary not in loaded and binary not in loaded_on.setdefault(gpu, set()):
            loaded_on[gpu].add(binary)
            waits |= frozenset(seen.get(gpu, ()))
            held[gpu] = waits
        if waits:
            out[str(phase)] = waits
        seen.setdefault(gpu, []).append(str(phase))
    return out


def is_host(thread: Thread) -> bool:
    """Host work (a memset between launches) takes no CTA slot."""
    return isinstance(thread.role, ThreadOrigin) and thread.role.role == HOST_RESET


def ctas(program: Program, host: frozenset[int] | None = None) -> list[Cta]:
    """The program's CTAs, in (GPU, launch, CTA number) order; host threads (``host``, default
    :func:`is_host`) excluded."""
    grouped: dict[tuple, list[int]] = {}
    for t, thread in enumerate(program.threads):
        if not (is_host(thread) if host is None else t in host):
            grouped.setdefault((thread.gpu, str(thread.phase), thread.cta), []).append(t)
    out = [Cta(gpu, program.threads[ts[0]].phase, cta, tuple(ts), cta_name(program.threads[ts[0]]),
               kernel_of(program, program.threads[ts[0]].phase))
           for (gpu, _phase, cta), ts in grouped.items()]
    return sorted(out, key=lambda c: (c.gpu, str(c.phase), c.cta))


def needs_residency(program: Program, residency: Residency, host: frozenset[int] | None = None) -> bool:
    """Whether some GPU has more CTAs than fit at once (else residency changes nothing)."""
    per_gpu: dict[int, int] = {}
    for c in ctas(program, host):
        per_gpu[c.gpu] = per_gpu.get(c.gpu, 0) + 1
    return any(n > residency.least_blocking for n in per_gpu.values())


def started_sets(units: list[Cta], residency: Residency) -> Iterator[frozenset[Cta]]:
    """Each set of CTAs that may have become resident in a deadlock, smallest first.

    On a GPU where some CTA never becomes resident, at least ``capacity`` became resident (all
    slots are held; per SM, at least one CTA per SM: :attr:`Residency.least_blocking`); a GPU with
    no more CTAs than that has them all resident. ``index``: per launch, a prefix in CTA-number
    order."""
    R = residency.least_blocking
    per_gpu: dict[int, list[frozenset[Cta]]] = {}
    for gpu in sorted({c.gpu for c in units}):
        mine = [c for c in units if c.gpu == gpu]
        everything = frozenset(mine)
        options = [everything]
        if len(mine) > R:
            if residency.order == "any":
                subsets = (frozenset(s) for n in range(R, len(mine)) for s in itertools.combinations(mine, n))
            else:
                launches: dict[str, list[Cta]] = {}
                for c in mine:
                    launches.setdefault(str(c.phase), []).append(c)
                prefixes = [[tuple(l[:k]) for k in range(len(l) + 1)] for l in launches.values()]
                subsets = (frozenset(itertools.chain.from_iterable(pick)) for pick in itertools.product(*prefixes))
                subsets = (s for s in subsets if R <= len(s) < len(mine))
            options = sorted(set(subsets), key=len) + options
        per_gpu[gpu] = options
    for pick in itertools.product(*per_gpu.values()):
        chosen = frozenset().union(*pick)
        if len(chosen) < len(units):
            yield chosen


def restricted(program: Program, kept: list[int]) -> Program:
    """``program`` with only the threads ``kept`` (in order): the others never start.

    Symmetry groups name thread indices of the whole program: they are dropped (exact, slower)."""
    return replace(program, threads=tuple(program.threads[t] for t in kept), symmetry=(),
                   name=f"{program.name} (resident subset)")


@dataclass
class Deadlock:
    """A residency deadlock: who holds the slots, what each waits on, who would release it."""

    residency: Residency
    resident: list[Cta]  # the CTAs that hold slots and wait forever
    not_resident: list[Cta]  # the CTAs that never become resident for want of a slot (not those of
    # launches that wait for one that hangs: they never start for that reason)
    waits: dict[str, str]  # resident CTA name -> what it waits on
    releasers: dict[str, list[str]]  # resident CTA name -> non-resident CTAs that write what it waits on
    execution: Execution  # the deadlock, thread indices of the whole program (never-resident: no events)
    program: Program  # the restricted program (only the CTAs that became resident, and host work)
    kept: list[int]  # the restricted program's thread i is the whole program's thread kept[i]
    layout: tuple = ()  # per SM: ((gpu, ((CTA names on SM 0), (on SM 1), ...)), ...): where the waiting CTAs sit
    loading: tuple[str, ...] = ()  # binaries whose first launch waits for its module load (lazy loading)

    def words(self) -> str:
        """One paragraph: the verdict a user reads."""
        parts = []
        for c in self.resident:
            who = ", ".join(self.releasers.get(c.name, [])) or "no CTA that never became resident"
            parts.append(f"{c.name} is resident and waits on {self.waits[c.name]}, which {who} would release")
        absent = ", ".join(c.name for c in self.not_resident)
        if self.loading:
            absent += (f" ({', '.join(self.loading)}: its first launch loads its module, which waits for the GPU to be "
                       "idle: lazy loading)")
        if not self.layout:
            held = ("every CTA resident waits forever and the others wait for a module load" if self.loading
                    else "every slot is held by a CTA that waits forever")
            return (f"with {self.residency.words()}, {held}: "
                    + "; ".join(parts) + f"; never resident: {absent} (a resident CTA is never preempted)")
        placed = "; ".join(f"GPU {gpu} SM {i}: " + (", ".join(sm) or "empty")
                           for gpu, sms in self.layout for i, sm in enumerate(sms))
        return (f"with {self.residency.words()}, no CTA still waiting can become resident: "
                + "; ".join(parts) + f"; placed: {placed}; never resident: {absent} (no SM has room for its "
                "footprint; a resident CTA is never preempted)")


def writers(program: Program, thread_ids: tuple[int, ...], loc: str) -> bool:
    """Whether one of ``thread_ids`` has an instruction that writes ``loc``."""
    return any(isinstance(ins, (Store, Atomic)) and ins.loc == loc
               for t in thread_ids for ins in program.threads[t].instructions)


def reachable(x: Execution, units: list[Cta], hung: set[Cta], capacity: int, order: str,
              after: dict[str, frozenset[str]], free: tuple[int, ...] = (),
              pdl: tuple[tuple[object, object], ...] = (), *, costs: Costs | None = None,
              waiting: tuple[tuple[int, str], ...] = (), layout_out: list | None = None) -> bool:
    """Whether some admission schedule under ``capacity`` runs every event of ``x`` and leaves the
    ``hung`` CTAs resident (see the module's docstring). Thread indices are ``x``'s; ``free``
    threads (host work) need no slot; ``pdl``: (primary, dependent) launches, a dependent CTA
    admitted only once every primary CTA of its GPU has triggered (written its
    :data:`~syncverify.program.PDL_TRIGGER`) or exited (PTX ISA, ``griddepcontrol``).

    Per SM (``costs``): each admission also picks an SM the CTA fits on (every choice), and the
    schedule must end with the ``hung`` CTAs placed so that no SM is sure to take a CTA of any of
    the ``waiting`` (GPU, kernel) pairs (:func:`syncverify.explore.placement.blocked`); that
    placement is appended to ``layout_out``."""
    by_thread: dict[int, list] = {}
    for e in x.events:
        if not e.is_init:
            by_thread.setdefault(e.thread, []).append(e)
    for events in by_thread.values():
        events.sort(key=lambda e: e.index)
    before: dict[str, set[str]] = {}  # launch -> launches the host orders before it
    for a, bs in after.items():
        for b in bs:
            before.setdefault(str(b), set()).add(str(a))
    seen: set = set()  # admitted sets (per SM: with where the live CTAs sit)
    primaries: dict[str, set[str]] = {}
    for primary, dependent in pdl:
        primaries.setdefault(str(dependent), set()).add(str(primary))
    triggers = {e.eid: e.thread for e in x.events if e.loc is not None and e.loc.startswith(PDL_TRIGGER)}

    def run(admitted: frozenset[Cta]) -> tuple[set[int], set[Cta]]:
        done: set[int] = set()
        pos = {t: 0 for t in free} | {t: 0 for c in admitted for t in c.threads}
        progress = True
        while progress:
            progress = False
            for t in pos:
                events = by_thread.get(t, [])
                while pos[t] < len(events):
                    e = events[pos[t]]
                    source = x.rf.get(e.eid)
                    if source is not None and not x.events[source].is_init and source not in done:
                        break
                    done.add(e.eid)
                    pos[t] += 1
                    progress = True
        exited = {c for c in admitted if c not in hung and all(pos[t] == len(by_thread.get(t, [])) for t in c.threads)}
        return done, exited

    gpus = sorted({c.gpu for c in units} | {gpu for gpu, _k in waiting})
    total = sum(1 for e in x.events if not e.is_init)

    def admissible(c: Cta, admitted: frozenset[Cta], exited: set[Cta], done: set[int]) -> bool:
        """Stream, host, blockIdx and PDL order allow ``c`` now (slots aside)."""
        finished_launches = {str(u.phase) for u in units} - {str(u.phase) for u in units if u not in exited}
        if not before.get(str(c.phase), set()) <= finished_launches:
            return False
        if order == "index" and any(o.gpu == c.gpu and str(o.phase) == str(c.phase) and o.cta < c.cta
                                    and o not in admitted for o in units):
            return False
        triggered = {triggers[e] for e in done if e in triggers}
        return not any(p.gpu == c.gpu and str(p.phase) in primaries.get(str(c.phase), ())
                       and p not in exited and not triggered & set(p.threads) for p in units)

    def kernels_on(sms: tuple[tuple[Cta, ...], ...]) -> list[tuple[str, ...]]:
        return [tuple(c.kernel for c in sm) for sm in sms]

    def search_sm(admitted: frozenset[Cta], live: tuple[tuple[tuple[Cta, ...], ...], ...]) -> tuple | None:
        done, exited = run(admitted)
        live = tuple(tuple(tuple(c for c in sm if c not in exited) for sm in sms) for sms in live)
        key = (admitted, tuple(tuple(sorted(tuple(sorted(c.name for c in sm)) for sm in sms)) for sms in live))
        if key in seen:
            return None
        seen.add(key)
        if len(admitted) == len(units):
            if exited | hung != set(units) or len(done) != total:
                return None
            if all(blocked(costs, kernels_on(live[gpus.index(gpu)]), kernel) for gpu, kernel in waiting):
                return live
            return None
        for c in units:
            if c in admitted or not admissible(c, admitted, exited, done):
                continue
            g = gpus.index(c.gpu)
            tried: set = set()
            for i, sm in enumerate(live[g]):
                shape = tuple(sorted(a.name for a in sm))
                if shape in tried or not may_place(costs, tuple(a.kernel for a in sm), c.kernel):
                    continue  # SMs alike in what they hold are one choice
                tried.add(shape)
                sms = live[g][:i] + (sm + (c,),) + live[g][i + 1:]
                found = search_sm(admitted | {c}, live[:g] + (sms,) + live[g + 1:])
                if found is not None:
                    return found
        return None

    if costs is not None:
        found = search_sm(frozenset(), tuple(tuple(() for _ in range(costs.sms)) for _ in gpus))
        if found is not None and layout_out is not None:
            layout_out.append(tuple((gpu, tuple(tuple(c.name for c in sm) for sm in found[g]))
                                    for g, gpu in enumerate(gpus)))
        return found is not None

    def search(admitted: frozenset[Cta]) -> bool:
        if admitted in seen:
            return False
        seen.add(admitted)
        done, exited = run(admitted)
        if len(admitted) == len(units):
            return exited | hung == set(units) and len(done) == total
        for c in units:
            if c in admitted:
                continue
            if sum(1 for a in admitted - exited if a.gpu == c.gpu) >= capacity:
                continue
            if not admissible(c, admitted, exited, done):
                continue
            if search(admitted | {c}):
                return True
        return False

    return search(frozenset())


def find_deadlock(program: Program, residency: Residency, *, clock: Clock | None = None,
                  explore_options: dict | None = None, host: frozenset[int] | None = None,
                  on_subset: Callable[[], None] | None = None) -> Deadlock | None:
    """The first residency deadlock of ``program`` (None: none exists under ``residency``).

    Raises :class:`~syncverify.explore.bounds.LimitHit` when a bound is hit (the caller answers
    unknown). ``explore_options``: bounds passed to each exploration of a restricted program;
    ``host``: the threads that are host work, taking no CTA slot (default :func:`is_host`)."""
    clock = clock if clock is not None else Clock()
    units = ctas(program, host)
    hosts = [t for t in range(len(program.threads)) if t not in {u for c in units for u in c.threads}]
    R = residency.capacity
    costs = residency.costs()
    launched = sorted({c.kernel for c in units})
    for kernel, _n in residency.occupancy:
        if kernel not in launched:
            raise ScenarioError(f"occupancy names kernel {kernel!r}, which no launch runs; launched: "
                                + ", ".join(launched) + did_you_mean(kernel, launched))
    after = {str(a): frozenset(str(b) for b in bs) for a, bs in program.phases_after().items()}
    first = first_launches(program, units, residency.loaded) if residency.lazy_loading else {}
    gated = {a: set(bs) for a, bs in after.items()}  # admission order: the host's, and each load's wait
    for launch, before in first.items():
        for b in before:
            gated.setdefault(b, set()).add(launch)
    gated = {a: frozenset(bs) for a, bs in gated.items()}
    for started in started_sets(units, residency):
        clock.tick("while choosing which CTAs are resident")
        if on_subset is not None:
            on_subset()
        kept = sorted([t for c in started for t in c.threads] + hosts)
        index = {t: i for i, t in enumerate(kept)}
        local = [replace(c, threads=tuple(index[t] for t in c.threads)) for c in started]
        absent = [c for c in units if c not in started]
        if any(not_before_primary(c, absent, program.pdl) for c in started):
            continue  # a dependent CTA resident while a primary CTA never was: PDL forbids it
        sub = restricted(program, kept)
        found: list[Deadlock] = []

        def judge(x: Execution) -> bool:
            hung = {c for c in local if any(t in x.stuck for t in c.threads)}
            # Launches the host orders after one that never finishes never start: their CTAs are
            # absent for that reason, not for want of a slot (and take none).
            unfinished = {str(c.phase) for c in hung} | {str(c.phase) for c in absent}
            blocked = set().union(*(after.get(p, frozenset()) for p in unfinished)) if unfinished else set()
            waiting = [c for c in absent if str(c.phase) not in blocked]
            if not waiting:
                return False  # every absent CTA waits for a launch that hangs anyway: not residency
            # A first launch whose module load waits for a launch that never finishes (lazy
            # loading) never starts: its CTAs wait for the load, not for a slot.
            loading = {launch for launch, before in first.items() if before & unfinished}
            # The absent CTAs that could take a slot (not those a load or a PDL primary that never
            # became resident holds back) must find none: every slot held (one pool), or no SM
            # with room for them (per SM).
            asking = [c for c in waiting if str(c.phase) not in loading and not not_before_primary(c, absent, program.pdl)]
            for gpu in {c.gpu for c in units}:
                n = sum(1 for c in hung if c.gpu == gpu)
                if n > R or (any(c.gpu == gpu for c in asking) and (n != R if costs is None else n < residency.sms)):
                    return False
            never = {c for c in local if str(c.phase) in blocked}
            layout: list = []
            if not reachable(x, [c for c in local if c not in never], hung, R, residency.order, gated,
                             tuple(index[t] for t in hosts), program.pdl, costs=costs,
                             waiting=tuple(sorted({(c.gpu, c.kernel) for c in asking})), layout_out=layout):
                return False
            found.append(describe(program, sub, x, kept, sorted(hung, key=lambda c: (c.gpu, c.cta)), waiting,
                                  residency, layout[0] if layout else (), absent,
                                  sorted({binary_of(program, c.phase) for c in waiting if str(c.phase) in loading})))
            return True

        options = dict(explore_options or {})
        if clock.deadline is not None:  # each exploration gets what is left of the one time bound
            options["timeout"] = max(clock.deadline - time.monotonic(), 0.001)
        result = explore(sub, on_execution=judge, keep=False, **options)
        if found:
            return found[0]
        if result.limit_hit:
            raise LimitHit(result.limit_hit, f"{result.limit_detail} (a resident subset of the CTAs)")
    return None


def not_before_primary(cta: Cta, absent: list[Cta], pdl: tuple) -> bool:
    """Whether ``cta`` is a PDL dependent whose primary has a CTA on its GPU that never becomes
    resident: that CTA never triggers nor exits, so ``cta`` is never scheduled."""
    primaries = {str(p) for p, d in pdl if str(d) == str(cta.phase)}
    return any(a.gpu == cta.gpu and str(a.phase) in primaries for a in absent)


def describe(program: Program, sub: Program, x: Execution, kept: list[int], hung: list[Cta],
             absent: list[Cta], residency: Residency, layout: tuple = (),
             releasing: list[Cta] | None = None, loading: list[str] | None = None) -> Deadlock:
    """The :class:`Deadlock` of execution ``x`` of ``sub``: waits and releasers in the whole program's
    terms. ``releasing``: the CTAs that never ran, whatever held them back (default ``absent``: the
    ones kept out for want of a slot; a launch ordered behind one of them never starts either)."""
    releasing = absent if releasing is None else releasing
    waits: dict[str, str] = {}
    releasers: dict[str, list[str]] = {}
    resident = []
    for c in hung:
        whole = tuple(kept[t] for t in c.threads)
        resident.append(replace(c, threads=whole))
        reasons = [x.stuck[t] for t in c.threads if t in x.stuck]
        spins = [r for r in reasons if r[0] == "spin"]
        if spins:
            locs = sorted({loc for r in spins for loc, _v in r[1]})
            waits[c.name] = "a poll of " + ", ".join(
                f"{loc} (reads {v})" for loc, v in sorted({pair for r in spins for pair in r[1]}))
            releasers[c.name] = [a.name for a in releasing if any(writers(program, a.threads, loc) for loc in locs)]
        else:
            waits[c.name] = "a CTA barrier that another of its threads never reaches"
            releasers[c.name] = []
    return Deadlock(residency, resident, absent, waits, releasers, in_whole_program(program, x, kept), sub, kept,
                    layout, tuple(loading or ()))


def in_whole_program(program: Program, x: Execution, kept: list[int]) -> Execution:
    """Execution ``x`` of a restricted program, its threads numbered as in the whole ``program``
    (the never-resident threads have no events), so traces and pictures name them as usual."""
    events = tuple(e if e.is_init else replace(e, thread=kept[e.thread]) for e in x.events)
    return replace(x, events=events, stuck={kept[t]: why for t, why in x.stuck.items()},
                   thread_names=tuple(t.name for t in program.threads),
                   roles=tuple(t.role for t in program.threads) if x.roles else (), _memo={})


@dataclass
class Sweep:
    """Each capacity's answer, and the two numbers a user acts on."""

    answers: dict[int, bool | None] = field(default_factory=dict)  # capacity -> deadlocks? (None: unknown)

    @property
    def largest_deadlocking(self) -> int | None:
        """The largest capacity at which the program can deadlock (None: at none checked)."""
        bad = [r for r, d in self.answers.items() if d]
        return max(bad) if bad else None

    @property
    def smallest_safe(self) -> int | None:
        """The smallest capacity from which no larger one deadlocks (None: unknown)."""
        if any(d is None for d in self.answers.values()):
            return None
        top = self.largest_deadlocking
        return 1 if top is None else top + 1


def sweep(program: Program, order: str = "any", *, clock: Clock | None = None,
          explore_options: dict | None = None, host: frozenset[int] | None = None) -> Sweep:
    """Whether ``program`` can deadlock at each capacity from 1 to one below its largest GPU's CTA
    count (at that count every CTA is resident and residency changes nothing)."""
    clock = clock if clock is not None else Clock()
    per_gpu: dict[int, int] = {}
    for c in ctas(program, host):
        per_gpu[c.gpu] = per_gpu.get(c.gpu, 0) + 1
    out = Sweep()
    for capacity in range(1, max(per_gpu.values(), default=1)):
        try:
            out.answers[capacity] = find_deadlock(program, Residency(capacity, order), clock=clock,
                                                  explore_options=explore_options, host=host) is not None
        except LimitHit:
            out.answers[capacity] = None
    return out
