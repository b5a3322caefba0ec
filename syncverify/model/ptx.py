"""The PTX memory consistency model, written in the order of a ``.cat`` file.

Sources: PTX ISA 8.x, chapter "Memory Consistency Model" (cited as *ISA*); Lustig, Sahasrabuddhe,
Giroux, "A Formal Analysis of the NVIDIA PTX Memory Consistency Model", ASPLOS 2019 (*paper*);
Dartagnan's ``cat/ptx-v6.0.cat`` and ``cat/ptx.cat`` (Dat3M), whose relation names we keep.

Base relations (from the candidate execution, :class:`syncverify.model.events.Execution`):
``po`` program order, ``rf`` reads-from, ``co`` coherence, ``rmw`` the two halves of one atomic,
``dep`` = addr | data | ctrl, ``fence_sc`` a total order of the ``fence.sc`` events, ``bar`` the
CTA-barrier instances. Scopes: a thread sits in a CTA, the CTA in a GPU, the GPUs in the system.

The reference is ``ptx-v6.0.cat`` (the ISA's model without proxies); every relation and axiom
below is one of its ``let`` lines or axioms, under the same name. Where ``ptx-v7.5.cat`` words a
relation differently without changing what it allows, the ISA's wording is followed and the
docstring says so.

Modeling choices (each one interprets or deviates from the sources; everything else is as cited;
the known-answer test that shows each one is named in brackets, under ``tests/litmus/known/``):

1. *Coherence is a partial order*, as in the ISA: "There exists a partial transitive order that
   relates overlapping write operations, determined at runtime, called the coherence order. Two
   overlapping write operations are related in coherence order if they are morally strong or if
   they are related in causality order" (ISA, "Coherence"), which ``ptx-v6.0.cat`` states as
   ``let co = co+`` with the axioms Coherence and Coherence2. Racing weak writes may stay
   unordered, and readers may then see them in different orders [coherence-weak-two-readers,
   cowr-weak-2threads; morally strong writes stay ordered: coherence-relaxed-two-readers].
   Interpretation: the ISA defines no final state; a location's final value is the value of a
   coherence-*maximal* write (herd's "coherence-last", which a partial order may give several of),
   carried by the execution's *memory order*, one linear extension of coherence
   (:attr:`syncverify.model.events.Execution.co`) [coww-weak-racing-final-value]. The explorer builds
   the least coherence the two axioms allow (:mod:`syncverify.explore.location_choices`): every other axiom only
   gets harder to pass with more coherence.
2. *Initial writes* are strong, system-scoped, and precede every event in causality (herd's
   convention: the initial state is established before the kernel starts)
   [cowr-read-init-after-own-write].
3. *CTA barriers*: the arrivals of one *phase* of a named barrier (16 per CTA; which arrivals
   form a phase: :mod:`syncverify.explore.barriers`) synchronize with the ``bar.sync`` and ``bar.red``
   of that phase (ISA, "A bar{.cta}.sync or bar{.cta}.red or bar{.cta}.arrive operation
   synchronizes with a bar{.cta}.sync or bar{.cta}.red operation executed on the same
   barrier"); a ``bar.arrive`` waits for nothing, so nothing synchronizes with it. Dartagnan's
   ``sync_barrier = syncbar & scta`` relates every pair of barriers with the same id in a CTA;
   we relate the arrivals of one phase only, since a phase completes before the barrier is
   reused. ``barrier`` enters base causality beside ``sw``
   [bar-sync-same-cta, bar-arrive-sync].
4. *Fence-SC*: "Fence-SC order is an acyclic partial order, determined at runtime, that relates
   every pair of morally strong fence.sc operations", and the axiom FenceSC: "For a pair of
   morally strong fence.sc operations F1 and F2, if F1 precedes F2 in causality order, then F1
   must precede F2 in Fence-SC order" (ISA). We check ``irreflexive (sync_fence ; cause)``, which is
   that sentence. Deliberate difference: ``ptx-v6.0.cat`` writes the axiom as
   ``empty (([F & SC]; cause; [F & SC]) \\ sync_fence)``, which, read literally, also rejects two
   fence.sc that are *not* morally strong (``.cta`` fences of two CTAs) whenever causality orders
   them; the ISA constrains morally strong pairs only [fence-sc-cta-not-morally-strong-mp]. The
   explorer enumerates the acyclic orientations of the morally strong ``fence.sc`` pairs, one total
   order each (:func:`syncverify.explore.location_choices.fence_sc_orders`).
   ``fence.sc`` is also a ``fence.acq_rel`` (ISA, ``fence``).
5. *Base causality* is ``(po | sync | sync_fence | sync_barrier | host)+``: "X precedes Y in
   program order, or X synchronizes with Y, or ..." (ISA, "Base causality order"), i.e.
   ``ptx-v7.5.cat``'s ``cause-base | po``; causality adds ``observation ; base_causality`` (ISA,
   "Causality order"). ``ptx-v6.0.cat`` leaves plain ``po`` out of ``cause-base`` and adds
   ``observation ; po-loc`` instead; the verdicts agree, since a pair ordered by program order
   alone is in one thread, and there the axioms that use ``cause`` reduce to SC-per-Location
   (``po-loc``, with same-thread accesses morally strong) [sb-fence-sc-gpu, iriw-fence-sc-gpu].
   Observation is the ISA's recursive definition ("For some atomic operation Z, W precedes Z and
   Z precedes R in observation order"), as in ``ptx-v6.0.cat`` [mp-release-sequence-rmw].
   Proxies: see choice 11 (the async proxy); no other proxy is modelled.
6. *Volatile* accesses are relaxed at system scope (ISA, "Volatile operations")
   [mp-membar-gl-volatile].
7. *Host order* (beyond the ISA, which stops at one kernel): everything before a host-side barrier
   (or earlier on the same stream) happens before everything after it: kernel boundaries order
   all memory operations of a launch before the next (CUDA programming guide, stream semantics).
   ``host`` enters base causality (protocol tests, ``tests/test_causes.py``).
8. *Ghost* data accesses (``syncverify.program``, GHOST) carry no rf/co choice, so they are left
   out of ``rf``, ``co`` and the coherence axioms; everything else treats them as memory events.
9. *Values are 32-bit*: every value a store writes or an atomic computes wraps to a two's
   complement ``int32``, as the GPU's ``.s32``/``.u32``/``.b32`` arithmetic does (ISA, "Integer
   Arithmetic Instructions": "add ... performs addition ... and writes the result", modulo 2^32);
   a counter that overflows does not reach a target above 2^31 - 1 [atom-add-wraps-int32].
10. *Morally strong pairs an axiom reads*: ``ms2``'s ``(_ * _) \\ (M * M)`` (pairs that are not
    two memory operations) is narrowed to a fence with a strong operation, so ``morally-strong``
    leaves out a fence paired with a weak access or a barrier arrival. Only ``sync`` (a release
    pattern's first event with an acquire pattern's last) and ``sync_fence`` (two fences) read
    such pairs, and both relate strong operations only: no axiom or verdict can tell.
11. *The async proxy* (``cp.async.bulk{.tensor}``, PTX ISA "Async Proxy", "Asynchronous
    Operations", "Causality Order"; docs/async.md has each reading at length). No formal model of
    it is published (``ptx-v7.5.cat`` has the texture, surface and constant proxies only); ours:

    a. A copy's read of its source and write of its destination are async-proxy accesses of an
       *agent* thread in the issuing thread's CTA (``syncverify.program.lower_async``): "The
       cp{.reduce}.async.bulk operations are performed in the asynchronous proxy", and they are
       not in the issuing thread's program order.
    b. ``morally-strong`` adds ``ptx-v7.5.cat``'s ``same-proxy``: "Both operations are performed
       via the same proxy" (ISA, "Morally strong operations"); so a generic and an async access
       that conflict and are not ordered by causality race [async-tma-store-no-proxy-fence].
    c. ``issue``: everything before a copy's issue point in base causality precedes the copy's
       own accesses, and nothing continues through them: "[the] complete-tx operation ... does not
       transitively establish ordering with respect to prior instructions from the issuing
       thread" (ISA, "Asynchronous Operations") [async-tma-load-issuer-history-not-published].
       Reading: the ISA says no more of when a copy starts; a copy reading what its issuer wrote
       before issuing it is what every TMA store relies on.
    d. ``complete`` enters base causality: a copy's read and write precede a
       ``cp.async.bulk.wait_group N`` that completes its group ("wait until only N or fewer of
       the most recent bulk async-groups are pending"), its read alone a ``wait_group.read``
       ("completed reading from their source locations"), and both an ``mbarrier.try_wait`` on
       the mbarrier it completes on ("All cp.async.bulk asynchronous operations using the same
       mbarrier object ... are performed and made visible to the executing thread")
       [async-tma-store-mp-wait-group, async-tma-store-mp-wait-group-read,
       async-wait-group-1-*]. ``mbarrier.arrive`` (release, ``.cta``) synchronizes with
       ``mbarrier.try_wait`` (acquire, ``.cta``) of the same mbarrier and CTA, one phase per
       mbarrier (a wait is the try that returns True) [async-mbarrier-arrive-publishes-arriver];
       which copies a wait sees complete, with transaction counts: choice 14.
    e. *Proxy-preserved base causality* (ISA, "Causality Order"): same-address pairs stay in
       base causality if both are generic, or of one proxy and one CTA ("performed to the same
       address, using the same proxy, and by the same thread block"), or, our reading of the
       ISA's prose (its formal bullets name only the alias fence), if a proxy fence lies on a
       base-causality path between them: a ``fence.proxy.async`` covering the location's state
       space ("The memory ordering is limited only to operations performed on objects in the
       state space specified"; ``.shared::cluster`` covers ``.shared::cta``), or the implicit
       fence after a copy's completion ("The completion of a cp{.reduce}.async.bulk operation
       is followed by an implicit generic-async proxy fence"); initial writes and the host's
       kernel boundaries precede everything ("the CUDA API synchronization mechanisms above also
       participate in proxy-preserved base causality order") [async-tma-store-with-proxy-fence,
       async-tma-store-fence-wrong-space, async-tma-load-remote-write-*]. Pairs of other events
       keep base causality as it is, so FenceSC reads fences as before; a program with nothing
       of the async proxy has exactly the causality it had.
12. *Mixed-size accesses* (docs/async.md, "Mixed-size accesses"). A location read or written at a
    byte offset or with fewer than 4 bytes is one location per byte, an access one event per byte
    carrying its access's ``footprint`` (``syncverify.program``, MIXED-SIZE), so each byte of a
    read reads from its own write: "A reads any byte from a write W'" (ISA, "Atomicity"), and a
    read may combine bytes of several writes [mixed-read-combines-two-writes]. ``ms3``: "If both
    are memory operations, then they overlap completely" (ISA, "Morally strong operations";
    ``ptx-v7.5.cat``'s ``ms3``): accesses of different footprints are never morally strong, so
    partly overlapping accesses race unless causality orders them, and SC-per-Location does not
    bind them [mixed-corr-partial-overlap, mixed-corr-same-size]. SC-per-Location's morally
    strong communication is lifted from bytes to whole accesses (``same-access``), so a morally
    strong access is read and overwritten whole, as the ISA's operations are
    [mixed-same-size-relaxed-not-torn]. The ISA adds that "The axioms in the memory consistency
    model do not apply if a PTX program contains one or more mixed-size data-races": the outcomes
    of such a program are the axioms' here, and its race is the verdict that counts.
13. *NVSHMEM deliveries* (:mod:`syncverify.model.delivery`, docs/nvshmem.md): puts, puts with
    signal and signal operations are performed by delivery agents (one agent thread per chunk
    and per signal, generic proxy) issued as in 11 c; ``nvshmem_quiet`` and a blocking put's
    return are waits of 11 d over deliveries; ``nvshmem_quiet`` and ``nvshmem_fence`` are
    ordering points whose ``ordered`` edges (to the later deliveries' accesses) enter base
    causality; a signal's agent waits for its data, and after ``nvshmem_fence`` a delivery's
    agent waits for the earlier deliveries to the same PE
    [nvshmem-put-nbi-chunks-any-order, nvshmem-quiet-then-signal, nvshmem-fence-orders-same-pe].
14. *mbarrier transaction counts* (``syncverify.model.mbarrier``, docs/async.md). "An mbarrier
    object completes the current phase when ... The count of the pending arrivals has reached
    zero. The tx-count has reached zero" (ISA, "Phase Completion of the mbarrier object"); a
    copy's complete-tx carries "completeCount argument equal to amount of data copied in bytes".
    The first phase of an mbarrier with an ``init``, ``expect_tx`` or ``complete_tx`` completes
    with a set of completions whose bytes make up the expected count: ``complete`` relates only
    those copies to the wait, the others stay in flight [async-mbarrier-tx-expect-short-one-copy,
    async-mbarrier-tx-no-expect-completes-on-arrival]; where none can, the waiter hangs
    [async-mbarrier-tx-expect-more-than-copies-hangs]. Reading: a copy bringing more bytes than
    expected may either complete the phase partly done or never let the count reach zero (the
    ISA does not say whether the hardware counts bytes as they land); both are allowed
    [async-mbarrier-tx-copy-larger-than-expected]. ``expect_tx`` and ``complete_tx`` are relaxed
    and order nothing [async-mbarrier-complete-tx-orders-nothing]; ``try_wait.parity 1`` at the
    start names the phase before the first and returns True at once, ordering nothing
    [async-mbarrier-parity-1-passes-at-once]. One phase per mbarrier is modelled.
15. *Stream memory operations* (:mod:`syncverify.streams`, docs/nvshmem.md): ``cuStreamWriteValue32``,
    ``cuStreamWaitValue32`` and copy-engine copies are threads of their own, one per operation,
    each in a host phase of its own chained in its stream's order, so choice 7's host order is
    all they add: "Operations within a stream are executed in the order they were issued" (CUDA C
    Programming Guide, Streams). A write is a release store at system scope (``CU_STREAM_WRITE_VALUE_DEFAULT``:
    "the write is preceded by a system-scope memory fence"), a wait a spin of acquire loads at
    system scope, a copy weak reads and writes [stream-*].
16. *A GEMM's ``tl.dot`` is ``bar.sync 0`` of the whole CTA* (a lowering fact, not an axiom:
    ``syncverify.protocols.lowering.lower_dot``, read in the PTX Triton 3.6 compiles for sm_90,
    where a dot's operands go through shared memory with ``bar.sync 0`` between their loads and
    the MMA). The scenarios' roles that run a GEMM (``syncverify.scenarios.build.Dot``) and the
    kernel front end (each ``tl.dot``, listed as an assumption in the verdict) execute it; one
    barrier stands for a dot's several, which no model event separates. It orders a CTA's tiles
    in its persistent loop: FA3's named-barrier handoff reused across the loop, which hangs
    without it, is SAFE with it (docs/frontend.md, "tl.dot's CTA barrier")
    [tests/test_dot_barrier.py].
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from syncverify.model.events import (
    ACQ_REL,
    ACQUIRE,
    ASYNC,
    ASYNC_PROXY,
    FENCE,
    GENERIC,
    ISSUE,
    MBAR_ARRIVE,
    MBAR_WAIT,
    PROXY,
    WAIT_GROUP,
    WAIT_GROUP_READ,
    READ,
    RED,
    RELAXED,
    RELEASE,
    SC,
    SYNC,
    WRITE,
    Event,
    Execution,
)
from syncverify.model import delivery
from syncverify.model.relations import (
    find_cycle,
    inter,
    inverse,
    is_acyclic,
    minus,
    optional,
    plus,
    reflexive_pairs,
    restrict,
    seq,
    union,
)

# ----- what a relation depends on -------------------------------------------------------------


class Depends(Enum):
    """What a relation is computed from, which is how long the explorer may keep it.

    Each level includes the ones above it. The explorer keeps ``SHAPE`` relations per skeleton
    shape (:func:`syncverify.explore.skeleton.static_relations`) and every relation but the
    ``COHERENCE`` ones across the coherence choices of one reads-from choice
    (:mod:`syncverify.explore.driver`).
    """

    SHAPE = "the events without their values (thread, kind, location, semantics, scope, placement), program and host order"
    SKELETON = "the skeleton: values, rmw pairs, dependencies and barrier phases too"
    READS_FROM = "reads-from and the Fence-SC order too"
    COHERENCE = "coherence too"


#: Each relation (``let``) by name, in definition order, and what it depends on.
RELATIONS: dict[str, Callable[[Execution], frozenset]] = {}
DEPENDS: dict[str, Depends] = {}


def relation(depends: Depends) -> Callable[[Callable[[Execution], frozenset]], Callable[[Execution], frozenset]]:
    """Declare a ``let``: the relation is computed once per execution (memoised under its name)
    and declares what it ``depends`` on (:func:`lets`)."""

    def declare(fn: Callable[[Execution], frozenset]) -> Callable[[Execution], frozenset]:
        name = fn.__name__
        if name in RELATIONS:
            raise ValueError(f"relation {name!r} is declared twice")

        @functools.wraps(fn)
        def let(x: Execution) -> frozenset:
            memo = x._memo
            if name not in memo:
                memo[name] = fn(x)
            return memo[name]

        RELATIONS[name], DEPENDS[name] = let, depends
        return let

    return declare


def lets(depends: Depends) -> tuple[str, ...]:
    """The names of the relations declared to depend on ``depends``, in definition order."""
    return tuple(name for name, d in DEPENDS.items() if d is depends)


# ----- events ---------------------------------------------------------------------------------

def strong_write(e: Event) -> bool:
    """``strong-write = W & (RLX | REL)``."""
    return e.kind == WRITE and e.sem in (RELAXED, RELEASE)


def strong_read(e: Event) -> bool:
    """``strong-read = R & (RLX | ACQ)``."""
    return e.kind == READ and e.sem in (RELAXED, ACQUIRE)


def strong_operation(e: Event) -> bool:
    """``strong-operation = strong-write | strong-read | F``."""
    return strong_write(e) or strong_read(e) or e.kind == FENCE


def release_write(e: Event) -> bool:
    """``W & REL``."""
    return e.kind == WRITE and e.sem == RELEASE


def acquire_read(e: Event) -> bool:
    """``R & ACQ``."""
    return e.kind == READ and e.sem == ACQUIRE


def acq_rel_fence(e: Event) -> bool:
    """``F & ACQ_REL``; a ``fence.sc`` is one too (modeling choice 4)."""
    return e.kind == FENCE and e.sem in (ACQ_REL, SC)


def sc_fence(e: Event) -> bool:
    """``F & SC``."""
    return e.kind == FENCE and e.sem == SC


@functools.lru_cache(maxsize=65536)
def _scope_key(scope: str | None, gpu: int, cta: int, init: bool, other_gpu: int, other_cta: int, other_init: bool) -> bool:
    """Whether an operation with ``scope`` at (``gpu``, ``cta``) includes a thread at the other
    place; initial writes are system-scoped and every scope includes them (choice 2)."""
    if init or other_init or scope == "sys":
        return True
    if scope == "gpu":
        return gpu == other_gpu
    if scope == "cta":
        return gpu == other_gpu and cta == other_cta
    return False


def sr(a: Event, b: Event) -> bool:
    """``sr`` (a base relation): each of ``a`` and ``b`` specifies a scope that includes the
    thread executing the other."""
    return (_scope_key(a.scope, a.gpu, a.cta, a.is_init, b.gpu, b.cta, b.is_init)
            and _scope_key(b.scope, b.gpu, b.cta, b.is_init, a.gpu, a.cta, a.is_init))


def ms1(a: Event, b: Event, ordered: frozenset) -> bool:
    """``ms1 = (po | po^-1) | ([strong-operation]; sr; [strong-operation])`` for one pair
    (``ordered``: program order): asked only of the pairs of :func:`ms2`."""
    return ((a.eid, b.eid) in ordered or (b.eid, a.eid) in ordered
            or (strong_operation(a) and strong_operation(b) and sr(a, b)))


def overlap_completely(a: Event, b: Event) -> bool:
    """``ms3`` for one pair: two memory operations overlap completely when they access the same
    bytes (the same footprint, choice 12); any other pair passes."""
    return a.footprint == b.footprint or not (a.is_memory and b.is_memory)


def morally_strong_pair(a: Event, b: Event, ordered: frozenset) -> bool:
    """``ms1 & same-proxy & ms3`` for one pair of ``ms2`` (``ordered``: program order): what the
    explorer's choices per location ask too (syncverify.explore.location_choices)."""
    return a.proxy == b.proxy and overlap_completely(a, b) and ms1(a, b, ordered)


# ----- relations ------------------------------------------------------------------------------

@relation(Depends.SHAPE)
def po(x: Execution) -> frozenset:
    """``po``: program order (transitive), initial writes before everything (choice 2)."""
    inits = [e.eid for e in x.events if e.is_init]
    others = [e.eid for e in x.events if not e.is_init]
    return x.po | frozenset((i, o) for i in inits for o in others)


@relation(Depends.SHAPE)
def loc(x: Execution) -> frozenset:
    """``loc``, on memory events: ``(M * M) & loc \\ id``, distinct memory events of one location."""
    by_loc: dict[str, list[int]] = {}
    for e in x.events:
        if e.is_memory:
            by_loc.setdefault(e.loc, []).append(e.eid)  # type: ignore[arg-type]
    return frozenset((a, b) for ids in by_loc.values() for a in ids for b in ids if a != b)


@relation(Depends.SHAPE)
def po_loc(x: Execution) -> frozenset:
    """``po-loc = po & loc``."""
    return inter(po(x), loc(x))


@relation(Depends.SHAPE)
def ms2(x: Execution) -> frozenset:
    """``ms2 = ((M * M) & loc) | ((_ * _) \\ (M * M))`` without ``id``, its second part narrowed to
    a fence and a strong operation, the only such pairs an axiom reads (modeling choice 10)."""
    fences = [e.eid for e in x.events if e.kind == FENCE]
    strong = [e.eid for e in x.events if strong_operation(e)]
    return loc(x) | frozenset(pair for f in fences for s in strong if s != f for pair in ((f, s), (s, f)))


@relation(Depends.SHAPE)
def morally_strong(x: Execution) -> frozenset:
    """``morally-strong = (ms1 & same-proxy & ms2 & ms3) \\ id`` (ISA, "Morally strong": "Both
    operations are performed via the same proxy", "If both are memory operations, then they
    overlap completely"; ``ptx-v7.5.cat``'s ``ms2`` and ``ms3``; choices 11 and 12); all are
    symmetric, so each pair is asked once."""
    events, ordered = x.events, po(x)
    one_way = [(a, b) for a, b in ms2(x) if a < b and morally_strong_pair(events[a], events[b], ordered)]
    return frozenset(one_way) | inverse(one_way)


@relation(Depends.SHAPE)
def morally_strong_writes(x: Execution) -> frozenset:
    """``([W]; morally-strong; [W]) & loc``: the write pairs Coherence2 requires to be ordered
    (ghost writes carry no coherence: choice 8)."""
    writes = {e.eid for e in x.events if e.is_write and not e.ghost}
    return restrict(inter(morally_strong(x), loc(x)), writes.__contains__, writes.__contains__)


@relation(Depends.SHAPE)
def release_pattern(x: Execution) -> frozenset:
    """``release-pattern = ([W & REL]; po-loc?; [strong-write]) | ([F & ACQ_REL]; po; [strong-write])``."""
    ev = x.events
    every = [e.eid for e in ev]
    return (restrict(optional(po_loc(x), every), lambda a: release_write(ev[a]), lambda b: strong_write(ev[b]))
            | restrict(po(x), lambda a: acq_rel_fence(ev[a]), lambda b: strong_write(ev[b])))


@relation(Depends.SHAPE)
def acquire_pattern(x: Execution) -> frozenset:
    """``acquire-pattern = ([strong-read]; po-loc?; [R & ACQ]) | ([strong-read]; po; [F & ACQ_REL])``."""
    ev = x.events
    every = [e.eid for e in ev]
    return (restrict(optional(po_loc(x), every), lambda a: strong_read(ev[a]), lambda b: acquire_read(ev[b]))
            | restrict(po(x), lambda a: strong_read(ev[a]), lambda b: acq_rel_fence(ev[b])))


@relation(Depends.SHAPE)
def host(x: Execution) -> frozenset:
    """Pairs ordered by the host: launches, host barriers, stream order (choice 7)."""
    return x.host_order


@relation(Depends.SHAPE)
def po_immediate(x: Execution) -> frozenset:
    """``po`` without the pairs it has by transitivity: each event to the next of its thread, each
    initial write to each thread's first event (``po = po_immediate+``)."""
    first: dict[int, int] = {}
    latest: dict[int, int] = {}
    pairs = set()
    for e in x.events:  # a thread's events are numbered in program order
        if e.is_init:
            continue
        if e.thread in latest:
            pairs.add((latest[e.thread], e.eid))
        else:
            first[e.thread] = e.eid
        latest[e.thread] = e.eid
    return frozenset(pairs) | frozenset((i.eid, f) for i in x.events if i.is_init for f in first.values())


@relation(Depends.SHAPE)
def host_immediate(x: Execution) -> frozenset:
    """``host`` between the last event of each thread of a launch and the first event of each
    thread of a later one (``(po | host)+ = (po_immediate | host_immediate)+``: every event of a
    thread is po-before its last event and po-after its first)."""
    ends = {}
    starts = {}
    for e in x.events:
        if not e.is_init:
            starts.setdefault(e.thread, e.eid)
            ends[e.thread] = e.eid
    last, first = set(ends.values()), set(starts.values())
    return frozenset((a, b) for a, b in host(x) if a in last and b in first)


@relation(Depends.SKELETON)
def rmw(x: Execution) -> frozenset:
    """``rmw``: the read and the write of one atomic."""
    return x.rmw


@relation(Depends.SKELETON)
def barrier(x: Execution) -> frozenset:
    """``sync_barrier``: arrive/sync -> sync within one CTA-barrier phase (choice 3)."""
    return x.barrier_sync


def barrier_phase_sync(phase: list[Event]) -> frozenset:
    """``sync_barrier`` within one phase: every arrival -> every other ``bar.sync``/``bar.red``
    of the phase (choice 3); ``bar.arrive`` is a source only."""
    return frozenset((a.eid, b.eid) for a in phase for b in phase
                     if a.eid != b.eid and b.sem in (SYNC, RED))


@relation(Depends.SHAPE)
def same_access(x: Execution) -> frozenset:
    """Pairs of distinct byte events of one mixed-size access (choice 12): one thread, one
    footprint, one dynamic instance (its bytes come in order, byte 0 first; a rewrite may put
    other events between them)."""
    groups: list[list[int]] = []
    current: dict[tuple, list[int]] = {}  # (thread, footprint) -> the bytes of its latest instance
    for e in x.events:  # a thread's events are numbered in program order
        if e.footprint is not None:
            key = (e.thread, e.footprint)
            if e.byte == 0 or key not in current:
                current[key] = []
                groups.append(current[key])
            current[key].append(e.eid)
    return frozenset((a, b) for ids in groups for a in ids for b in ids if a != b)


@relation(Depends.SHAPE)
def has_async(x: Execution) -> frozenset:
    """Whether anything of the async proxy is in ``x`` (a relation for its memo: the pair
    ``(0, 0)`` when it is, empty when not): without it, choice 11 changes nothing."""
    return frozenset({(0, 0)}) if any(e.kind == ASYNC or e.proxy != GENERIC or e.sem == PROXY
                                      for e in x.events) else frozenset()


@relation(Depends.SHAPE)
def issue(x: Execution) -> frozenset:
    """``issue``: a bulk copy's issue point -> the copy's own read and write (choice 11)."""
    points = {e.copies[0]: e.eid for e in x.events if e.kind == ASYNC and e.sem == ISSUE}
    return frozenset((points[e.copies[0]], e.eid) for e in x.events
                     if e.is_memory and e.copies and e.copies[0] in points)


@relation(Depends.SHAPE)
def complete(x: Execution) -> frozenset:
    """``complete``: a copy's access -> a wait that observes it done (choice 11):
    ``cp.async.bulk.wait_group`` and ``mbarrier.try_wait`` the copy's read and write,
    ``cp.async.bulk.wait_group.read`` its read only."""
    waits = [e for e in x.events if e.kind == ASYNC and e.sem in (WAIT_GROUP, WAIT_GROUP_READ, MBAR_WAIT)]
    if not waits:
        return frozenset()
    accesses = [e for e in x.events if e.is_memory and e.copies]  # a copy's, or a delivery's (choice 13)
    return frozenset((a.eid, w.eid) for w in waits for a in accesses
                     if a.copies[0] in w.copies and (w.sem != WAIT_GROUP_READ or a.is_read))


@relation(Depends.SHAPE)
def mbarrier_sync(x: Execution) -> frozenset:
    """``sync`` of an mbarrier: every ``mbarrier.arrive`` (release) -> every ``mbarrier.try_wait``
    (acquire) on the same mbarrier of the same CTA (both ``.cta``: morally strong), one phase per
    mbarrier (choice 11)."""
    arrivals = [e for e in x.events if e.kind == ASYNC and e.sem == MBAR_ARRIVE]
    waits = [e for e in x.events if e.kind == ASYNC and e.sem == MBAR_WAIT]
    return frozenset((a.eid, w.eid) for a in arrivals for w in waits
                     if a.loc == w.loc and (a.gpu, a.cta) == (w.gpu, w.cta) and a.eid != w.eid)


@relation(Depends.READS_FROM)
def rf(x: Execution) -> frozenset:
    """``rf``: write -> the reads that read from it."""
    return frozenset((w, r) for r, w in x.rf.items())


@relation(Depends.READS_FROM)
def observation(x: Execution) -> frozenset:
    """``let rec observation = (morally-strong & rf) | (observation ; rmw ; observation)``."""
    obs = inter(morally_strong(x), rf(x))
    while True:
        grown = obs | seq(obs, rmw(x), obs)
        if grown == obs:
            return obs
        obs = grown


@relation(Depends.READS_FROM)
def synchronizes_with(x: Execution) -> frozenset:
    """``sync = morally-strong & (release-pattern ; observation ; acquire-pattern)``.

    ISA: "A release pattern X synchronizes with an acquire pattern Y if a write in X is observed
    by a read in Y, and X and Y are morally strong."
    """
    return inter(morally_strong(x), seq(release_pattern(x), observation(x), acquire_pattern(x)))


@relation(Depends.READS_FROM)
def fence_sc_order(x: Execution) -> frozenset:
    """``sync_fence``: the Fence-SC order restricted to morally strong pairs (choice 4)."""
    order = x.fence_sc
    ms = morally_strong(x)
    return frozenset(
        (order[i], order[j]) for i in range(len(order)) for j in range(i + 1, len(order))
        if (order[i], order[j]) in ms
    )


#: ``ordered``: an NVSHMEM quiet or fence -> the later deliveries' accesses (choice 13, syncverify.model.delivery).
ordered = relation(Depends.SHAPE)(delivery.ordered)


@relation(Depends.READS_FROM)
def base_causality(x: Execution) -> frozenset:
    """``cause-base = (po | sync | sync_fence | sync_barrier | host)+`` (choices 5 and 7), with the
    completions of choice 11 and NVSHMEM's ordering points (``ordered``, choice 13).

    Closed over ``po_immediate`` and ``host_immediate``, which have the same closure with the
    other relations as ``po`` and ``host`` (see there) and far fewer pairs."""
    return plus(union(po_immediate(x), synchronizes_with(x), fence_sc_order(x), barrier(x), host_immediate(x),
                      complete(x), mbarrier_sync(x), ordered(x)))


@relation(Depends.READS_FROM)
def issued(x: Execution) -> frozenset:
    """``cause-base? ; issue``: what precedes a copy's issue point precedes the copy's own accesses,
    and nothing after them through it (choice 11)."""
    pairs = issue(x)
    if not pairs:
        return frozenset()
    return pairs | seq(base_causality(x), pairs)


def proxy_fenced(x: Execution, a: int, b: int, through: frozenset) -> bool:
    """Whether a proxy fence covering ``a``'s state space lies on a causality path from ``a`` to ``b``
    (``through``: ``cause-base | issued``): a ``fence.proxy.async`` (choice 11), the implicit
    generic-async proxy fence that follows a copy's completion, or the kernel boundaries of the
    host order, which the ISA's CUDA API synchronization puts in proxy-preserved order."""
    if (a, b) in host(x):
        return True
    bc, space = base_causality(x), x.events[a].space
    for f in x.events:
        if f.kind == FENCE and f.sem == PROXY and (not f.space or f.space == space or
                                                    (f.space == "shared::cluster" and space == "shared::cta")):
            if (a, f.eid) in bc and (f.eid, b) in through:
                return True
    return any((a == c or (a, c) in through) and (w == b or (w, b) in bc) for c, w in complete(x))


@relation(Depends.READS_FROM)
def proxy_preserved_base_causality(x: Execution) -> frozenset:
    """``cause-base | issued``, less the same-location pairs of memory operations the ISA leaves out
    of *proxy-preserved base causality order*: it keeps X before Y if "X and Y are performed to the
    same address, using the generic proxy, or ... using the same proxy, and by the same thread
    block", and (choice 11) if a proxy fence lies on the path; initial writes precede everything
    (choice 2). Pairs of other events stay as they are."""
    if not has_async(x):
        return base_causality(x)
    through = base_causality(x) | issued(x)
    ev = x.events
    dropped = set()
    for a, b in loc(x):
        ea, eb = ev[a], ev[b]
        if ea.is_init or eb.is_init or (a, b) not in through:
            continue
        if ea.proxy == eb.proxy and (ea.proxy == GENERIC or (ea.gpu, ea.cta) == (eb.gpu, eb.cta)):
            continue
        if not proxy_fenced(x, a, b, through):
            dropped.add((a, b))
    return through - dropped if dropped else through


@relation(Depends.READS_FROM)
def causality(x: Execution) -> frozenset:
    """``cause = ppbc | (observation ; ppbc)`` (ISA "Causality order"; ``ptx-v6.0.cat`` with
    ``ptx-v7.5.cat``'s proxy-preserved base causality, choice 11)."""
    ppbc = proxy_preserved_base_causality(x)
    return ppbc | seq(observation(x), ppbc)


def memory_order_pairs(orders: dict[str, tuple[int, ...]]) -> frozenset:
    """The pairs of each location's memory order (a total order per location)."""
    return frozenset(
        (order[i], order[j]) for order in orders.values()
        for i in range(len(order)) for j in range(i + 1, len(order))
    )


@relation(Depends.COHERENCE)
def co(x: Execution) -> frozenset:
    """``let co = co+``: coherence order, a partial order per location (choice 1).

    ``ptx-v6.0.cat``: "Explicitly add transitivity for coherence since the co in PTX is not total".
    An execution built with a total order only (``co_rel`` None) has that order as its coherence.
    """
    if x.co_rel is None:
        return memory_order_pairs(x.co)
    return x.co_rel  # transitively closed by construction (syncverify.explore.location_choices.coherence_of): co+ = co


@relation(Depends.COHERENCE)
def fr(x: Execution) -> frozenset:
    """``fr = rf^-1 ; co``: from-reads, a read before the writes that overwrite what it read."""
    return seq(inverse(rf(x)), co(x))


# ----- axioms ---------------------------------------------------------------------------------

def causal_writes(x: Execution) -> frozenset:
    """``([W]; cause; [W]) & loc``, looked up pair by pair (a location has few writes; ``cause``
    has many pairs); ghost writes carry no coherence (choice 8)."""
    by_loc: dict[str, list[int]] = {}
    for e in x.events:
        if e.is_write and not e.ghost:
            by_loc.setdefault(e.loc, []).append(e.eid)  # type: ignore[arg-type]
    cause = causality(x)
    return frozenset((a, b) for group in by_loc.values() for a in group for b in group
                     if a != b and (a, b) in cause)


def coherence(x: Execution) -> frozenset:
    """``(([W]; cause; [W]) & loc) \\ co``, empty: causally ordered writes to one location are in co order."""
    return minus(causal_writes(x), co(x))


def coherence2(x: Execution) -> frozenset:
    """``(([W]; morally-strong; [W]) & loc) \\ (co | co^-1)``, empty: morally strong writes to one
    location are coherence-ordered (one way or the other); other pairs may stay unordered."""
    ordered = co(x)
    return frozenset((a, b) for a, b in morally_strong_writes(x) if (a, b) not in ordered and (b, a) not in ordered)


def fence_sc(x: Execution) -> frozenset:
    """``sync_fence ; cause``, irreflexive: Fence-SC order cannot contradict causality (choice 4)."""
    return seq(fence_sc_order(x), causality(x))


def atomicity(x: Execution) -> frozenset:
    """``((morally-strong & fr) ; (morally-strong & co)) & rmw``, empty: no morally strong write
    between an atomic's read and write."""
    ms = morally_strong(x)
    return inter(seq(inter(ms, fr(x)), inter(ms, co(x))), rmw(x))


def no_thin_air(x: Execution) -> frozenset:
    """``rf | dep``, acyclic: values do not appear out of thin air."""
    return rf(x) | x.dep


def sc_per_location(x: Execution) -> frozenset:
    """``(morally-strong & (rf | co | fr)) | po-loc``, acyclic: morally strong accesses to one
    location are SC. With mixed-size accesses, the morally strong part is lifted from bytes to
    accesses (``same-access? ; r ; same-access?``, choice 12): a morally strong access reads and
    overwrites whole, never torn."""
    com = inter(morally_strong(x), union(rf(x), co(x), fr(x)))
    sa = same_access(x)
    if sa:  # program order binds only the morally strong pairs too: not partly overlapping ones
        return com | seq(sa, com) | seq(com, sa) | seq(sa, com, sa) | inter(po_loc(x), morally_strong(x))
    return com | po_loc(x)


def causality_axiom(x: Execution) -> frozenset:
    """``(rf | fr) ; cause``, irreflexive: communication cannot contradict causality."""
    return seq(rf(x) | fr(x), causality(x))


class AxiomKind(Enum):
    """The kind of an axiom, as the ``.cat`` language writes it before the relation."""

    ACYCLIC = "acyclic"
    IRREFLEXIVE = "irreflexive"
    EMPTY = "empty"

    def holds(self, r: frozenset) -> bool:
        """Whether ``r`` passes, decided without building the evidence."""
        if self is AxiomKind.ACYCLIC:
            return is_acyclic(r)
        if self is AxiomKind.IRREFLEXIVE:
            return not any(a == b for a, b in r)
        return not r

    def evidence(self, r: frozenset) -> list[tuple[int, int]]:
        """What breaks it: the cycle (edges), the reflexive pairs, or the pairs of ``r``; empty
        when it holds."""
        if self is AxiomKind.ACYCLIC:
            return find_cycle(r) or []
        if self is AxiomKind.IRREFLEXIVE:
            return reflexive_pairs(r)
        return sorted(r)


@dataclass(frozen=True)
class Axiom:
    """A named axiom: its ``kind`` (acyclic, irreflexive or empty) of ``relation``; ``name`` as
    in the ISA and ``ptx-v6.0.cat`` (``axiom-NAME``), so that verdicts line up."""

    name: str
    kind: AxiomKind
    relation: Callable[[Execution], frozenset]
    source: str

    def holds(self, x: Execution) -> bool:
        """Whether ``x`` passes the axiom (the explorer asks this of every candidate execution)."""
        return self.kind.holds(self.relation(x))

    def evidence(self, x: Execution) -> list[tuple[int, int]]:
        """What breaks the axiom in ``x`` (see :meth:`AxiomKind.evidence`); empty when it holds."""
        return self.kind.evidence(self.relation(x))


AXIOMS: tuple[Axiom, ...] = (
    Axiom("Coherence", AxiomKind.EMPTY, coherence,
          "ISA: if a write W precedes an overlapping write W' in causality order, then W must precede W' in coherence order"),
    Axiom("Coherence2", AxiomKind.EMPTY, coherence2,
          "ISA: coherence order ... relates every pair of morally strong overlapping writes (ptx-v6.0.cat axiom-Coherence2)"),
    Axiom("FenceSC", AxiomKind.IRREFLEXIVE, fence_sc,
          "ISA: Fence-SC order cannot contradict causality order"),
    Axiom("Atomicity", AxiomKind.EMPTY, atomicity,
          "ISA: no morally strong write intervenes in coherence order between the read and the write of a morally strong atomic"),
    Axiom("No-Thin-Air", AxiomKind.ACYCLIC, no_thin_air,
          "ISA: values may not appear out of thin air (acyclic rf | dep)"),
    Axiom("SC-per-Location", AxiomKind.ACYCLIC, sc_per_location,
          "ISA: within any set of overlapping, pairwise morally strong operations, communication order cannot contradict program order"),
    Axiom("Causality", AxiomKind.IRREFLEXIVE, causality_axiom,
          "ISA: relations in communication order cannot contradict causality order"),
)


def violated_axioms(x: Execution) -> list[tuple[Axiom, list[tuple[int, int]]]]:
    """Every axiom ``x`` breaks, with its evidence; empty when ``x`` is consistent."""
    broken = []
    for axiom in AXIOMS:
        evidence = axiom.evidence(x)
        if evidence:
            broken.append((axiom, evidence))
    return broken


def is_consistent(x: Execution) -> bool:
    """Whether the PTX model allows ``x`` (stops at the first broken axiom)."""
    return all(axiom.holds(x) for axiom in AXIOMS)


# ----- properties of consistent executions ------------------------------------------------------

def data_races(x: Execution) -> list[tuple[int, int]]:
    """Conflicting accesses, not morally strong, unordered by causality (ISA, "Data races").

    Conflicting: same location, different threads, at least one a write. Initial writes are
    ordered before everything and never race.
    """
    ms = morally_strong(x)
    cause = causality(x)
    races = []
    for (a, b) in loc(x):
        if a >= b:
            continue
        ea, eb = x.events[a], x.events[b]
        if ea.is_init or eb.is_init or ea.thread == eb.thread:
            continue
        if not (ea.is_write or eb.is_write):
            continue
        if (a, b) in ms or (a, b) in cause or (b, a) in cause:
            continue
        races.append((a, b))
    return races
