"""Verdicts on a checked program: the violations of each execution (:mod:`.check`), why each
happens (:mod:`.causes`), the weakest fixes (:mod:`.suggest`) and happens-before pictures
(:mod:`.graphs`)."""
