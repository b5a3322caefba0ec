"""``syncverify bench``: what each protocol costs in the fused kernels. :mod:`.report` is the pure
half (sweeps, figures, tables, roofline, gates; no torch), :mod:`.timing` the device timing on one
GPU (virtual ranks), :mod:`.ranks` the real-rank run (one process per GPU)."""
