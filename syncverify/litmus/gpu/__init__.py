"""Litmus tests on the hardware: ``syncverify litmus --gpu``.

One job per module:

* :mod:`~syncverify.litmus.gpu.outcomes`: what an outcome is (the observed registers and
  locations of a test), the model's allowed set, which outcomes are the test's target.
* :mod:`~syncverify.litmus.gpu.stress`: the stress parameters (MC-Mutants style) and the tuned
  values shipped per machine kind (``tuned.json``).
* :mod:`~syncverify.litmus.gpu.layout`: host-side placement of instances on CTAs, warps, lanes and
  memory (random, seeded), as plain numpy tables.
* :mod:`~syncverify.litmus.gpu.codegen`: a parsed litmus :class:`~syncverify.program.Program` to
  the source of ONE Triton kernel (inline PTX per instruction, or the interpreter form).
* :mod:`~syncverify.litmus.gpu.launch`: compile, launch for a budget, tally outcomes.
* :mod:`~syncverify.litmus.gpu.report`: counts, Wilson intervals, MODEL UNSOUND, JSON, picture.
* :mod:`~syncverify.litmus.gpu.mutants` and :mod:`~syncverify.litmus.gpu.tune`: mutation score
  and the random search over stress parameters.
* :mod:`~syncverify.litmus.gpu.shapes`: the classic shapes (MP, SB, LB, IRIW, CoRR, 2+2W) as
  litmus text, parsed by the one litmus parser.

Nothing here imports torch or triton at import time: only :mod:`launch` does, lazily.
"""
