"""The GPU half: fused GEMM kernels with a lock protocol plugged in (``syncverify.kernels.plan`` turns the
protocol into compile-time parameters), the synchronization helpers they are built from
(``syncverify.kernels.signals``), and a PTX reader for the audit (``syncverify.kernels.ptx``, ``syncverify.kernels.audit``).

Modules that need torch/triton import them through ``syncverify.kernels._deps``, which raises a
``SyncVerifyError`` naming the fix when they are missing; ``plan``, ``config`` and ``errors`` need
neither. See docs/stress.md.
"""
