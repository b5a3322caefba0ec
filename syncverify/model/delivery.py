"""NVSHMEM deliveries in the model (modeling choice 13 of :mod:`syncverify.model.ptx`).

An NVSHMEM put, put-with-signal or signal operation called on the GPU is performed by a
*delivery agent*: one agent thread per chunk of data and one per signal update
(:mod:`syncverify.delivery` builds them on the agent threads of bulk copies, choice 11 a). The
rules, each with the specification's sentence (NVSHMEM API, "Remote Memory Access", "Memory
Ordering", "Signaling Operations"; where NVSHMEM's text is the OpenSHMEM one, the OpenSHMEM
man page); docs/nvshmem.md holds them at length, with their known-answer litmus tests:

a. *Chunks complete in any order until quiet.* "The routines return after initiating the
   operation. The operation is considered complete after a subsequent call to nvshmem_quiet"
   (``nvshmem_put_nbi``). Each chunk is an agent thread of its own: no order among chunks, and
   their writes are weak (data, not synchronization) [nvshmem-put-nbi-chunks-any-order].
b. *Issue.* What precedes a call in base causality precedes its delivery's accesses (a put
   reads the source its thread just wrote), and nothing continues through them: choice 11 c's
   ``issued``, unchanged. NVSHMEM orders a thread's memory stores before its later deliveries
   only through ``nvshmem_fence`` and ``nvshmem_quiet`` (its table "Operations affected by
   NVSHMEM Memory Ordering routines" lists "Memory Store" under both), so a store followed by a
   signal operation without either is not published by the signal [nvshmem-store-then-signal-*].
c. *Ordering points.* ``nvshmem_quiet`` and ``nvshmem_fence`` are ``order`` events: what
   precedes one in base causality precedes the accesses of the deliveries its thread issues
   after it (``ordered`` below, in base causality).
   *Differs on purpose: stronger than the specification for memory stores and fence.* The
   specification orders an operation "issued to a particular PE" only before later operations
   "to the same PE": "All operations on symmetric data objects issued to a particular PE prior
   to the call to nvshmem_fence are guaranteed to be delivered before any subsequent operations
   on symmetric data objects to the same PE", and "nvshmem_fence only provides per-PE ordering
   guarantees and does not guarantee completion of delivery" (NVSHMEM API, Memory Ordering,
   ``nvshmem_fence``; its table lists "Memory Store" under Fence). A memory store goes to the PE
   whose memory it writes, and the model's locations have no home PE (a litmus location, a
   protocol's lock or tile are not placed on one), so the model cannot split a thread's earlier
   stores by PE: the fence orders all of them before every later delivery. So a store to PE 2,
   ``nvshmem_fence``, then a signal to PE 1 is judged ordered here, which the specification does
   not promise (pinned by ``tests/test_delivery.py::test_the_fence_orders_a_store_to_another_pe_than_its_delivery``,
   so the day locations get a home PE the test shows the change). Deliveries (puts, signals)
   are split by PE exactly as specified (f below), and ``nvshmem_quiet``, which completes every
   earlier operation whatever its PE, is exact.
d. *Completion.* ``nvshmem_quiet`` is also a wait that every earlier delivery of its thread
   precedes: "All put operations issued to any processing element (PE) prior to the call to
   shmem_quiet are guaranteed to be visible to all other PEs no later than any subsequent memory
   load or store, remote put or get, or synchronization operations that follow the call to
   shmem_quiet" (OpenSHMEM ``shmem_quiet``). A blocking put "returns after the data has been
   copied out of the source array on the local PE": its chunks' source reads precede its return
   (a ``.read`` wait). Both are ``complete`` edges of choice 11 d [nvshmem-quiet-then-*,
   nvshmem-put-blocking-source-reuse].
e. *Signal after data.* "The put-with-signal routines provide a method for copying data from a
   contiguous local data object to a data object on a specified PE and subsequently updating a
   remote flag to signal completion" (NVSHMEM, "Signaling Operations"): the signal's agent first
   waits for its put's chunks, then updates the signal with a release atomic at system scope
   (``SIGNAL_SET``: exch, ``SIGNAL_ADD``: add; "All signaling operations complete as if
   performed atomically"), so an acquire that observes it synchronizes with it
   [nvshmem-put-signal-data-before-signal, nvshmem-signal-add-*].
f. *Fence orders deliveries to one PE.* "All operations on symmetric data objects issued to a
   particular PE prior to the call to nvshmem_fence are guaranteed to be delivered before any
   subsequent operations on symmetric data objects to the same PE" (``nvshmem_fence``): every
   agent of a later delivery to that PE first waits for the earlier ones; deliveries to other
   PEs stay unordered ("nvshmem_fence only provides per-PE ordering guarantees")
   [nvshmem-fence-orders-same-pe, nvshmem-fence-other-pe-unordered].
g. ``nvshmem_signal_wait_until(sig, CMP, v)`` is a spin of acquire loads at system scope until
   the comparison holds (a bounded spin, reported as a hang when it cannot exit).

*Differs on purpose: kernel boundaries complete deliveries.* The agents run in their issuer's
launch (its host phase, choice 7), so the host order that puts a launch before the next one puts
its deliveries there too. The specification says no such thing: it completes operations by
``nvshmem_quiet`` ("All put operations issued to any processing element (PE) prior to the call to
shmem_quiet are guaranteed to be visible to all other PEs no later than any subsequent memory
load or store, remote put or get, or synchronization operations that follow the call",
OpenSHMEM ``shmem_quiet``, the contract ``nvshmem_quiet`` states) and by host-side
synchronization the model does not have (``nvshmemx_quiet_on_stream``,
``nvshmemx_barrier_all_on_stream``, which complete the earlier operations before the stream's
later work). A
maintainer's answer on NVIDIA/nvshmem #66 relies on kernel exit ("make sure the copy happens after
the NVSHMEM kernel exits (data operations are visible)"), while deepseek-ai/DeepEP #310 is an
IBGDA update landing after the next round started. The model keeps the boundary complete
because a harness or protocol states the host's synchronization between launches only as that
boundary: dropping it would report every multi-launch NVSHMEM program that synchronizes on the
host as racing. The cost: a protocol whose deliveries cross a launch boundary with no quiet is
judged safe (``tests/test_frontend_nvshmem.py::test_a_kernel_boundary_completes_deliveries_on_purpose``
pins it); the litmus zoo entry ``deepep-310-inflight-head-update`` states that bug within one
launch instead.

Deliveries are generic-proxy accesses: NVSHMEM's NVLink path performs them with the SM's own
stores, and its specification names no proxy. The agents sit in the issuing thread's CTA.
"""

from __future__ import annotations

from syncverify.model.events import ASYNC, ORDER, Execution


def ordered(x: Execution) -> frozenset:
    """``ordered``: an NVSHMEM ordering point (``nvshmem_quiet``, ``nvshmem_fence``) -> the accesses
    of the deliveries its thread issues after it (c above)."""
    points = [e for e in x.events if e.kind == ASYNC and e.sem == ORDER and e.copies]
    if not points:
        return frozenset()
    accesses = [e for e in x.events if e.is_memory and e.copies]
    return frozenset((p.eid, a.eid) for p in points for a in accesses if a.copies[0] in p.copies)
