"""Check the user's own Triton kernel, as written: the real ``@triton.jit`` code under the PTX model.

A user writes a *harness* (:mod:`~syncverify.frontend.harness`): W virtual ranks on one symmetric
heap, launches of their kernels on named streams, host operations between them, and what must
hold afterwards. ``syncverify check FILE.py --world-size W [--calls N]``,
:func:`check_kernel` and :func:`syncverify.testing.assert_kernel_safe` check it. The same harness
drives the GPU: ``syncverify stress FILE.py`` (:mod:`~syncverify.frontend.user_stress`; the kernels
rewritten in memory with delays and bounded waits, :mod:`~syncverify.frontend.rewrite`; guided
schedules from this check's counterexamples, :mod:`~syncverify.frontend.schedule`; positive-control
mutants, :mod:`~syncverify.frontend.mutants`).

Design, and why
---------------
**Re-execution, not translation.** Each program (CTA) of each launch is run in Triton 3.6's own
interpreter with its memory primitives hooked (:mod:`~syncverify.frontend.runner`): the kernel's
Python code, helpers and all, is what is checked, and every event keeps the user's ``file:line``.
The interpreter runs programs one after another and reads real memory; we use neither. Reads of
synchronization locations are *choice points* answered by an oracle, and a stateless DFS
(GenMC's and loom's driver, :mod:`~syncverify.frontend.programs`) re-runs the program once per
combination of answers. So control flow that depends on a read value (a branch, a loop exit, an
address) is explored for every value the model allows, not only the one a sequential run sees:
a consumer with a lower program id that takes a shortcut when it reads a flag unset is explored,
and its race found (``tests/test_frontend.py``).

**What is a choice, and what is not.** Answers are values from each location's *value domain*
(its initial contents and every value some write can produce, grown to a fixpoint over all
programs, as ``syncverify.explore.value_domain`` does for protocols). A read whose value reaches no *sink* (a
branch, a loop bound, an address, a mask, an atomic operand, a value stored to a synchronization
location) is answered once: taint propagated through every interpreter operation proves the rest
of the run does not depend on it. Data read and written only by plain loads and stores, whose
values reach no sink, is GHOST data (``syncverify.program``): no value choice at all; the verdict
computes which writes each read could see. Whether a value reaches a sink is *detected*, not
assumed: a ghost value that reaches one makes its location a synchronization location and the
fixpoint runs again. Memory no operation writes (inputs, ``heap_bases``) is read as its contents
and leaves no event (a read of never-written memory can neither race nor order anything).

**Spin loops.** A run that reaches a choice point in the same state as an earlier one of the same
run (source positions and every local of every kernel frame equal) is cut: the rest is the subtree
already explored from that point, so the paths form a finite decision tree with ``goto``s back.
Lifted into the program IR (:mod:`~syncverify.frontend.lift`), the explorer's own spin cut
(``syncverify.explore.driver``, step 2) decides which loops can spin forever (a hang naming who waits on
what) and drops failed iterations, exactly as for protocols. Lifting rather than a new hook into
the explorer keeps one explorer, one set of reductions and one set of bounds for both front ends.
Program points with equal futures are lifted once (a state holds dead locals too, so one poll
loop can come out as one loop per value read; the reduction is exact, argued in
:mod:`~syncverify.frontend.programs`).

**CTA facts** (``syncverify.protocols.lowering``, checked against compiled PTX in
``tests/test_frontend_ptx.py``): a block access is split over the model threads of the CTA; a
scalar store or atomic runs on thread 0, followed by ``bar.sync`` when its result is used, other
threads receiving it through shared memory between two barriers; ``atomic_add(p, 0)`` with a
literal 0 and sem relaxed/acquire is a load; a volatile load is relaxed at sys scope;
``tl.debug_barrier()`` is ``bar.sync 0``; inline asm fences and barriers are read with the litmus
parser (:mod:`~syncverify.frontend.asm`); tensor descriptors are TMA loads and stores through the
async proxy, as Triton 3.6 compiles them for sm_90 (listed as assumptions; docs/async.md).

**Verdicts** (:mod:`~syncverify.frontend.verdicts`): race, unwritten-read, stale-read, hang and
out-of-bounds, each with the execution that shows it in the user's terms; every verdict states
its model (PTX; AMD kernels checked as if compiled for NVIDIA), bounds and assumptions. Bounds
(program runs, steps, executions, time) answer unknown, never hang.

What is exact and what is not: block reads of synchronization locations whose values decide
control flow are refused with several model threads per CTA (each thread owns part of the block);
the split of a block over model threads is row-major contiguous (Triton's layouts may assign
elements differently); ``expect_equal`` is checked as ``expect_written``.
"""

from __future__ import annotations

from syncverify.frontend.check import check_kernel
from syncverify.frontend.harness import Harness, harness
from syncverify.frontend.verdicts import KernelCheckResult

__all__ = ["Harness", "KernelCheckResult", "check_kernel", "harness"]
