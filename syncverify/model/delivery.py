"""NVSHMEM deliveries in the model (modeling choice 13 of :mod:`syncverify.model.ptx`).

An NVSHMEM put, put-with-signal or signal operation called on the GPU is performed by a
*delivery agent*: one agent thread per chunk of data and one per signal update
(:mod:`syncverify.delivery` builds them on the agent threads of bulk copies, choice 11 a). The
rules, each with the specification's sentence (NVSHMEM API, "Remote Memory Access", "Memory
Ordering", "Signaling Operations"; where NVSHMEM defers to OpenSHMEM 1.5, the OpenSHMEM text);
docs/nvshmem.md holds them at length, with their known-answer litmus tests:

a. *Chunks complete in any order until quiet.* "The routines return after initiating the
   operation. The operation is considered complete after a subsequent call to nvshmem_quiet"
   (``nvshmem_put_nbi``). Each chunk is an agent thread of its own: no order among chunks, and
   their writes are weak (data, not synchronization) [nvshmem-put-nbi-chunks-any-order].
b. *Issue.* Reading: a delivery starts at its call, so what precedes the call in base causality
   precedes the delivery's accesses, and base causality continues through them (``deliver``
   below enters base causality). This differs from a TMA copy (choice 11 c), where the ISA says
   the copy "does not transitively establish ordering"; NVSHMEM says nothing of the kind, and
   its canonical pattern (put, quiet, signal) needs the chain [nvshmem-quiet-then-signal].
c. *Completion.* ``nvshmem_quiet`` is a wait that every earlier delivery of its thread precedes:
   "All put operations issued to any processing element (PE) prior to the call to shmem_quiet
   are guaranteed to be visible to all other PEs no later than any subsequent memory load or
   store, remote put or get, or synchronization operations that follow the call" (OpenSHMEM
   ``shmem_quiet``). A blocking put "returns after the data has been copied out of the source
   array on the local PE": its chunks' source reads precede its return (a ``.read`` wait). Both
   are ``complete`` edges of choice 11 d (a wait's copies), here generic-proxy accesses.
d. *Signal after data.* "The put-with-signal routines provide a method for copying data from a
   contiguous local data object to a data object on a specified PE and subsequently updating a
   remote flag to signal completion" (NVSHMEM, "Signaling Operations"): the signal's agent first
   waits for its put's chunks, then updates the signal with a release atomic at system scope
   (``SIGNAL_SET``: exch, ``SIGNAL_ADD``: add), so an acquire that observes it synchronizes
   with it ("All signaling operations complete as if performed atomically")
   [nvshmem-put-signal-data-before-signal, nvshmem-signal-add-counts-not-which].
e. *Fence orders deliveries to one PE.* "All operations on symmetric data objects issued to a
   particular PE prior to the call to nvshmem_fence are guaranteed to be delivered before any
   subsequent operations on symmetric data objects to the same PE" (``nvshmem_fence``): every
   agent of a later delivery to that PE first waits for the earlier ones; deliveries to other
   PEs stay unordered ("nvshmem_fence only provides per-PE ordering guarantees")
   [nvshmem-fence-orders-same-pe, nvshmem-fence-other-pe-unordered].
f. ``nvshmem_signal_wait_until(sig, CMP, v)`` is a spin of acquire loads at system scope until
   the comparison holds (a bounded spin, reported as a hang when it cannot exit).

Deliveries are generic-proxy accesses: NVSHMEM's NVLink path performs them with the SM's own
stores, and its specification names no proxy. The agents sit in the issuing thread's CTA.
"""

from __future__ import annotations

from syncverify.model.events import ASYNC, GENERIC, ISSUE, Execution


def deliver(x: Execution) -> frozenset:
    """``deliver``: an NVSHMEM call's issue point -> the accesses of its delivery agents (a, b
    above). A bulk copy's issue point (choice 11 c) has async-proxy accesses and is not here."""
    points = {e.copies[0]: e.eid for e in x.events if e.kind == ASYNC and e.sem == ISSUE}
    if not points:
        return frozenset()
    return frozenset((points[e.copies[0]], e.eid) for e in x.events
                     if e.is_memory and e.copies and e.proxy == GENERIC and e.copies[0] in points)
