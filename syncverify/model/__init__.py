"""The PTX memory model, read like Dartagnan's ``cat/ptx-v6.0.cat``: events (:mod:`.events`), the
relation algebra (:mod:`.relations`), the model's relations and axioms (:mod:`.ptx`) and the 32-bit
integers it computes with (:mod:`.int32`; the explorer's value domain and value classes are
``syncverify.explore.value_domain`` and ``value_classes``). Nothing here knows about programs,
protocols or kernels."""
