"""The GPU half: fused GEMM kernels with a lock protocol plugged in (``kernels.plan`` turns the
protocol into compile-time parameters), the synchronization helpers they are built from
(``kernels.signals``), and a PTX reader for the audit (``kernels.ptx``, ``kernels.audit``).

Modules that need torch/triton import them through ``kernels._deps``, which raises a
``SyncVerifyError`` naming the fix when they are missing; ``plan``, ``config`` and ``errors`` need
neither. See docs/stress.md.
"""
