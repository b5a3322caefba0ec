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
   after it (``ordered`` below, in base causality). Reading: the fence orders the thread's
   earlier memory stores before every later delivery, whatever the PE (the model does not
   know which PE a plain store goes to), a little more than "to the same PE".
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
