"""The explorer: every execution the PTX model allows for a :class:`syncverify.program.Program`.

The driver is :mod:`.driver`; each step it strings together lives in a module of its own (thread
paths, the value domain, value classes, combinations and symmetry, CTA barriers, the execution
skeleton, the per-location reads-from and coherence choices, bounds). The driver's docstring
says how it stays exhaustive while pruning.
"""
