"""The explorer: every execution the PTX model allows for a :class:`syncverify.program.Program`.

The driver is :mod:`.driver`; each step it strings together lives in a module of its own, one job
each: the thread-path search (:mod:`.thread_paths`) with what an instruction computes
(:mod:`.instructions`), register liveness (:mod:`.liveness`) and the paths' data
(:mod:`.path_types`); the value domain (:mod:`.value_domain`) and value classes
(:mod:`.value_classes`); combinations (:mod:`.combinations`) and symmetry (:mod:`.symmetry`); CTA
barriers (:mod:`.barriers`); the execution skeleton (:mod:`.skeleton`); the PTX model's
per-location reads-from and coherence choices and the consistency filter
(:mod:`.location_choices`); bounds and the one clock (:mod:`.bounds`). The driver's docstring
says how it stays exhaustive while pruning.
"""
