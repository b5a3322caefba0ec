"""The kernel scenarios: roles and the order of their steps, and the builder that interprets a
protocol in a scenario into a :class:`syncverify.program.Program` (:mod:`.build`)."""
