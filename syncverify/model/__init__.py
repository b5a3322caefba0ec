"""The PTX memory model, read like Dartagnan's ``cat/ptx-v6.0.cat``: events (:mod:`.events`), the
relation algebra (:mod:`.relations`), the model's relations and axioms (:mod:`.ptx`) and 32-bit
values (:mod:`.values`). Nothing here knows about programs, protocols or kernels."""
