"""The GPU half: fused GEMM kernels with a lock protocol plugged in (``syncverify.kernels.plan`` turns the
protocol into compile-time parameters), the synchronization helpers they are built from
(``syncverify.kernels.primitives``: fences, flag writes, atomics, polls; ``.delays``; ``.steps``: the
protocol runners; ``.tile``: the producer's GEMM tile), and a PTX text reader for the audit
(``syncverify.kernels.ptx_reader``, ``syncverify.kernels.audit``).

Modules that need torch/triton import them through ``syncverify.kernels._deps``, which raises a
``SyncVerifyError`` naming the fix when they are missing; ``plan``, ``config`` and ``errors`` need
neither. See docs/stress.md.
"""
