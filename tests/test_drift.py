"""The model's program and the Triton kernel run the same steps (``syncverify.kernels.drift``).

For every built-in protocol, every kernel scenario (``KERNEL_SCENARIOS``: all four), W = 2 and 3
and every reset policy: for each
(role, rank, tile, epoch), the ordered operations of the model's threads equal those the kernel
executes in Triton's interpreter (kind, atomic op, sem, scope, lock or buffer, whose copy, whose
block, tile, one thread or all, the values written), and every kernel poll left its loop on a
value that the model's loop exits on. Two epochs: the model's second epoch follows the reset
policy (host threads, not compared), the kernel's second launch uses the protocol's own reset.
"""

from __future__ import annotations

import functools

import pytest

pytest.importorskip("triton", reason="the kernel side runs in Triton's interpreter (pip install triton numpy)")

from syncverify.kernels import drift  # noqa: E402
from syncverify.protocols import builtin_names, load_protocol  # noqa: E402
from syncverify.protocols.rules import RESET_POLICIES  # noqa: E402
from syncverify.scenarios.build import KERNEL_SCENARIOS, ScenarioOptions, build  # noqa: E402

EPOCHS = 2


@functools.lru_cache(maxsize=None)
def kernel(protocol: str, scenario: str, world_size: int):
    """One trace per protocol, scenario and world size (the reset policy changes only the model)."""
    return drift.trace_kernel(load_protocol(protocol), scenario, world_size, epochs=EPOCHS)


def model(protocol: str, scenario: str, world_size: int, reset: str):
    opts = ScenarioOptions(scenario=scenario, world_size=world_size, symmetry=False, reset=reset, epochs=EPOCHS)
    return drift.model_ops(build(load_protocol(protocol), opts))


def problems(protocol, scenario, world_size, reset):
    ops, timed_out = kernel(protocol, scenario, world_size)
    return drift.compare(model(protocol, scenario, world_size, reset), ops, timed_out=timed_out)


@pytest.mark.parametrize("reset", RESET_POLICIES)
@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("scenario", KERNEL_SCENARIOS)
@pytest.mark.parametrize("protocol", builtin_names())
def test_the_kernel_runs_the_steps_of_the_models_program(protocol, scenario, world_size, reset):
    found = problems(protocol, scenario, world_size, reset)
    assert not found, f"{protocol} / {scenario} / W={world_size} / reset={reset}:\n" + "\n\n".join(found)


def test_a_signal_sem_changed_in_the_kernel_plan_is_a_drift(monkeypatch):
    from syncverify.kernels import plan

    original = plan.build_plan

    def relaxed_signal(protocol, **kw):
        p = original(protocol, **kw)
        step = list(p.signal[-1])
        step[plan.FIELDS.index("sem")] = "relaxed"
        return p.__class__(**{**p.__dict__, "signal": p.signal[:-1] + (tuple(step),)})

    monkeypatch.setattr("syncverify.kernels.build.build_plan", relaxed_signal)
    ops, timed_out = drift.trace_kernel(load_protocol("epoch-flag"), "all-reduce", 2)
    found = drift.compare(model("epoch-flag", "all-reduce", 2, None), ops, timed_out=timed_out)
    # step 1 is the GEMM's tl.dot barrier (protocols.lowering.lower_dot), 2 the tile store
    assert found and "rank 0 producer, tile 0, epoch 0, step 4:" in found[0]
    assert "model:  atom.add release.sys lock ready of rank 0 [1] (one thread)" in found[0]
    assert "kernel: atom.add relaxed.sys lock ready of rank 0 [1] (one thread)" in found[0]


def test_a_barrier_dropped_from_the_model_is_a_drift():
    from syncverify.program import Barrier, Program

    scenario = build(load_protocol("epoch-flag"), ScenarioOptions(world_size=2, symmetry=False))
    threads = tuple(t.__class__(**{**t.__dict__, "instructions": tuple(
        i for i in t.instructions if not (isinstance(i, Barrier) and "signal" in i.label))})
        for t in scenario.program.threads)
    scenario.program = Program(scenario.program.name, threads)
    ops, timed_out = kernel("epoch-flag", "all-reduce", 2)
    found = drift.compare(drift.model_ops(scenario), {k: v for k, v in ops.items() if k[3] == 0})
    assert found[0].startswith("rank 0 producer, tile 0, epoch 0, step 3:")  # after the dot's barrier and the store
    assert "kernel: bar.sync 0 cta (all threads)" in found[0]


def test_polls_collapse_to_one_read_with_its_barrier():
    read = drift.Op("atom", "cas", "acquire", "sys", None, "one", (1, 1))
    bar = drift.Op("bar", "0", "", "cta")
    assert drift.collapse_polls([read, bar, read, bar, read, bar]) == [read, bar]
    assert drift.collapse_polls([read, read, bar]) == [read, bar]


@pytest.mark.parametrize("protocol", __import__("syncverify.protocols.registry", fromlist=["zoo_names"]).zoo_names())
def test_the_kernel_runs_the_steps_of_each_zoo_protocol(protocol):
    """The zoo's constructs on both sides: loads with sem/scope, CAS signals with until, the
    producer's before_store wait, the consumer's after_load back-signal, slots (three epochs for
    two slots, so that a slot comes back)."""
    p = load_protocol(protocol)
    epochs = max(EPOCHS, p.zoo.epochs)
    ops, timed_out = drift.trace_kernel(p, p.zoo.scenario, 2, epochs=epochs)
    opts = ScenarioOptions(scenario=p.zoo.scenario, world_size=2, symmetry=False, epochs=epochs)
    found = drift.compare(drift.model_ops(build(p, opts)), ops, timed_out=timed_out)
    assert not found, f"{protocol}:\n" + "\n\n".join(found)
    assert not timed_out  # the interpreter's producers-first order satisfies every wait


def test_a_dropped_back_signal_is_a_drift(monkeypatch):
    from syncverify.kernels import plan

    original = plan.build_plan

    def no_done(protocol, **kw):
        p = original(protocol, **kw)
        return p.__class__(**{**p.__dict__, "after_load": p.after_load[:1]})

    monkeypatch.setattr("syncverify.kernels.build.build_plan", no_done)
    p = load_protocol("done-flag")
    ops, timed_out = drift.trace_kernel(p, "all-reduce", 2, epochs=1)
    opts = ScenarioOptions(world_size=2, symmetry=False)
    found = drift.compare(drift.model_ops(build(p, opts)), ops, timed_out=timed_out)
    assert found and "model:  atom.exch release.sys lock done of rank 0 [1] (one thread)" in found[0]


def test_slots_hold_with_delays_on():
    """With delays compiled in, the consumer's wait still polls this launch's slot (a delay once
    replaced the slot's lock offset with the bare tile: slot 1's consumer polled slot 0's flag,
    passed early and read poisoned tiles on the GPU)."""
    import dataclasses

    p = load_protocol("two-slot-early-reuse")
    config = dataclasses.replace(drift.small_config("all-reduce", 2), delays=True)
    ops, timed_out = drift.trace_kernel(p, "all-reduce", 2, epochs=2, config=config)
    opts = ScenarioOptions(world_size=2, symmetry=False, epochs=2)
    assert not drift.compare(drift.model_ops(build(p, opts)), ops, timed_out=timed_out)


@pytest.mark.parametrize("scenario", ["all-gather-gemm", "gemm-reduce-scatter"])
def test_a_tile_load_moved_before_the_wait_is_a_drift(scenario, monkeypatch):
    """The new scenarios' kernels are held to the model's step order: a model whose consumer
    reads its buffer before waiting (the order swapped in ROLES) no longer matches the kernel."""
    from syncverify.scenarios import build as scenarios

    roles = list(scenarios.ROLES[scenario])
    consumer = roles[1]
    swapped = (consumer.steps[1], consumer.steps[0]) + consumer.steps[2:]
    roles[1] = scenarios.Role(consumer.name, consumer.runs_on, swapped)
    monkeypatch.setitem(scenarios.ROLES, scenario, tuple(roles))
    found = problems("epoch-flag", scenario, 2, None)
    assert found and f"rank 0 {consumer.name}, tile 0, epoch 0, step 1:" in found[0]


@pytest.mark.parametrize("scenario", ["all-gather-gemm", "gemm-reduce-scatter"])
@pytest.mark.parametrize("protocol", __import__("syncverify.protocols.registry", fromlist=["zoo_names"]).zoo_names())
def test_the_newer_kernels_run_the_steps_of_each_zoo_protocol(protocol, scenario):
    """before_store waits, after_load back-signals, slots and CAS signals in all-gather-gemm and
    gemm-reduce-scatter (the zoo's own scenario is all-reduce; the steps are the same)."""
    p = load_protocol(protocol)
    epochs = max(EPOCHS, p.zoo.epochs)
    ops, timed_out = drift.trace_kernel(p, scenario, 2, epochs=epochs)
    opts = ScenarioOptions(scenario=scenario, world_size=2, symmetry=False, epochs=epochs)
    found = drift.compare(drift.model_ops(build(p, opts)), ops, timed_out=timed_out)
    assert not found, f"{protocol} / {scenario}:\n" + "\n\n".join(found)


def several_chunks_config(scenario: str, world_size: int):
    """Two row tiles per shard, three column tiles and two K chunks per tile: what the one-tile
    sizes of ``drift.small_config`` cannot show (a C store of an earlier column tile before
    ``after_load``, a tile read in pieces)."""
    import dataclasses

    small = drift.small_config(scenario, world_size)
    return dataclasses.replace(small, m=2 * small.m, n=48, k=32 * (1 if scenario == "all-gather-gemm" else world_size))


@pytest.mark.parametrize("protocol", ["done-flag", "epoch-flag", "two-slot-early-reuse", "pytorch-signal-pad"])
@pytest.mark.parametrize("scenario", ["all-gather-gemm", "gemm-reduce-scatter"])
def test_several_column_tiles_and_k_chunks_keep_the_models_order(protocol, scenario):
    """With several column tiles every C store still follows ``after_load`` (the done flag's
    back-signal) and every tile load precedes it, for each tile of each epoch. (The kernel of
    before this test stored the earlier column tiles' C before ``after_load``: done-flag failed
    here at step 7, a C store where the model has the back-signal's barrier.)"""
    p = load_protocol(protocol)
    W = 2
    config = several_chunks_config(scenario, W)
    epochs = max(EPOCHS, p.zoo.epochs if p.zoo else 1)
    ops, timed_out = drift.trace_kernel(p, scenario, W, epochs=epochs, config=config)
    tiles = {key[2] for key in ops}
    assert len(tiles) > 1  # every tile of the rank's shard (or of C) was compared
    opts = ScenarioOptions(scenario=scenario, world_size=W, symmetry=False, epochs=epochs, tiles=len(tiles))
    found = drift.compare(drift.model_ops(build(p, opts)), ops, timed_out=timed_out)
    assert not found, f"{protocol} / {scenario}:\n" + "\n\n".join(found)



@pytest.mark.parametrize("protocol", ["epoch-flag", "barrier-fenced-release-acquire"])
def test_each_gemm_program_of_all_gather_gemm_runs_the_models_steps_for_every_tile_it_reads(protocol):
    """all-gather-gemm spreads each tile's column tiles over its GEMM programs (issue 28): with two
    GEMM programs per rank and three column tiles, every program that reads a tile waits for it
    first and runs exactly the model's steps for it (wait, each shard's block, C), and between
    them the programs cover every tile of every rank."""
    import dataclasses

    p = load_protocol(protocol)
    W = 2
    config = dataclasses.replace(several_chunks_config("all-gather-gemm", W), comm_sms=2)
    ops, timed_out = drift.trace_kernel(p, "all-gather-gemm", W, config=config, per_program=True)
    assert not timed_out
    gemm = {key: found for key, found in ops.items() if key[0] == "gemm"}
    # programs 2..5 (after the 2 senders) are 2 GEMM programs per rank; six units per rank in
    # row-major order (GROUP_M 1), taken alternately: each program reads both tiles of its rank
    assert sorted(key[1:] for key in gemm) == sorted((r, t, 0, 2 + 2 * r + p) for r in range(W) for t in range(2)
                                                      for p in range(2))
    opts = ScenarioOptions(scenario="all-gather-gemm", world_size=W, symmetry=False, tiles=2)
    model = drift.model_ops(build(p, opts))
    for key, found in gemm.items():
        problems = drift.compare({key[:4]: model[key[:4]]}, {key[:4]: found})
        assert not problems, f"program {key[4]}:\n" + "\n".join(problems)


@pytest.mark.parametrize("scenario", KERNEL_SCENARIOS)
def test_the_kernels_descriptor_loads_read_only_inputs_the_model_has_no_events_for(scenario):
    """The role layer loads A and B through tensor descriptors (TMA); the model's program has no
    access of them (inputs, ordered by the kernel boundary: docs/async.md). The trace shows the
    descriptor loads, and none of them touches a buffer the model follows."""
    tma: list = []
    ops, _timed_out = drift.trace_kernel(load_protocol("epoch-flag"), scenario, 2, tma=tma)
    assert ops and tma
    assert {buffer for buffer, _kind in tma} == {None} and {kind for _buffer, kind in tma} == {"ld"}


def test_a_tile_read_through_a_descriptor_is_a_drift(monkeypatch):
    """A consumer that read its tile through a tensor descriptor would make an async-proxy read
    the model's generic tile load does not stand for: the comparison names it."""
    from syncverify.kernels import trace

    original = trace.Recorder.memory

    def async_tile_loads(self, kind, ptrs, **kw):
        access = original(self, kind, ptrs, **kw)
        if kind == "ld" and access.buffer == "partial":
            access.proxy = "async"
        return access

    monkeypatch.setattr(trace.Recorder, "memory", async_tile_loads)
    ops, timed_out = drift.trace_kernel(load_protocol("epoch-flag"), "all-reduce", 2)
    found = drift.compare(model("epoch-flag", "all-reduce", 2, None), ops, timed_out=timed_out)
    assert found and any("tma-ld" in f for f in found)


def _looping_config(scenario: str, world_size: int, tiles: int, programs: int, distribution: str):
    """``tiles`` 16 x 16 tiles per rank (one column of them: the grouped order is the tiles'
    order), ``programs`` programs per role and rank: fewer than tiles, so each loops."""
    import dataclasses

    small = drift.small_config(scenario, world_size)
    rows = 16 * tiles * (world_size if scenario == "all-gather-gemm" else 1)
    return dataclasses.replace(small, m=rows, gemm_sms=programs, comm_sms=programs, recv_sms=programs,
                               distribution=distribution)


@pytest.mark.parametrize("programs, distribution", [(1, "block"), (2, "striding")])
@pytest.mark.parametrize("scenario", KERNEL_SCENARIOS)
def test_the_model_lays_tiles_out_over_a_roles_programs_as_the_kernels_loops_do(scenario, programs, distribution):
    """The tile layout is a fact both sides share (``KernelConfig.model_layout`` -> ``cta_tiles``):
    with fewer programs per role than tiles, each program of the kernel visits, in order, the
    tiles the model gives its CTA (a consumer on the owner its rank's owned tiles, every other
    role every tile, ``programs`` apart), and the model builds one CTA per program, its tiles
    in its code one after another."""
    from syncverify.scenarios.build import ROLES, cta_tiles, looped

    W, T = 2, 4
    config = _looping_config(scenario, W, T, programs, distribution)
    layout: dict = {}
    drift.trace_kernel(load_protocol("epoch-flag"), scenario, W, config=config, layout=layout)
    opts = ScenarioOptions(scenario=scenario, world_size=W, symmetry=False, **config.model_layout())
    assert opts.tiles == T and looped(opts)
    model = {(role.name, r): cta_tiles(role, r, opts) for role in ROLES[scenario] for r in range(W)}
    assert layout == {key: ctas for key, ctas in model.items() if ctas}, (layout, model)
    built = build(load_protocol("epoch-flag"), opts)
    ctas = {(th.role.role, th.role.rank, th.role.tiles or (th.role.tile,)) for th in built.program.threads
            if not th.role.is_host_reset}
    assert ctas == {(role, r, tiles) for (role, r), loops in layout.items() for tiles in loops}


@pytest.mark.parametrize("protocol", ["epoch-flag", "done-flag"])
@pytest.mark.parametrize("tiles, columns, programs, group_m", [(2, 3, 2, 1), (3, 2, 2, 2), (1, 2, 3, 1)])
def test_all_gather_gemms_programs_take_column_tiles_as_units_where_the_model_lays_them_out(
        protocol, tiles, columns, programs, group_m):
    """all-gather-gemm without ``after_load`` steps spreads each tile's column tiles over its GEMM
    programs (``UNITS``, grouped order): each program of the kernel visits, in order, the tiles the
    model gives its CTA, and stores the column tiles of C the model's CTA stores in that visit
    (``KernelConfig.model_layout`` -> ``cta_visits``, one rule for the units: ``rules.gemm_units``).
    With ``after_load`` (done-flag) a program takes whole tiles, every column tile. The model
    builds one CTA per program (two programs may visit the same tiles: told apart by ``program``),
    each storing exactly its visits' column tiles."""
    import dataclasses

    from syncverify.scenarios.build import ROLES, cta_visits, gemm_units, looped

    W = 2
    p = load_protocol(protocol)
    config = dataclasses.replace(_looping_config("all-gather-gemm", W, tiles, programs, "striding"),
                                 n=16 * columns, group_m=group_m)
    visits: dict = {}
    drift.trace_kernel(p, "all-gather-gemm", W, config=config, visits=visits)
    opts = ScenarioOptions(scenario="all-gather-gemm", world_size=W, symmetry=False, **config.model_layout())
    units = gemm_units(opts, p)
    assert units == (1 if protocol == "done-flag" else columns) and looped(opts)
    model = {(role.name, r): [tuple((t, tuple(sorted(c))) for t, c in loop) for loop in cta_visits(role, r, opts, units)]
             for role in ROLES["all-gather-gemm"] for r in range(W)}
    assert visits == {key: loops for key, loops in model.items() if loops}, (visits, model)
    built = build(p, opts)
    stored: dict = {}
    for th in built.program.threads:
        if th.role.role == "gemm" and th.role.thread == 0:
            at = [built.locations[ins.loc] for ins in th.instructions
                  if type(ins).__name__ == "Store" and ins.ghost]
            key = (th.role.rank, th.role.program, th.role.tiles or (th.role.tile,))
            stored[key] = sorted({(a.tile, a.block) for a in at if a.name == "out"})
    expected = {(r, c if units > 1 else None, tuple(t for t, _ in loop)):
                sorted({(t, col if units > 1 else None) for t, cols in loop for col in cols})
                for (role, r), loops in model.items() if role == "gemm" for c, loop in enumerate(loops)}
    assert stored == expected


def test_a_consumers_cas_reset_hangs_the_second_gemm_program_of_a_tile_in_the_kernel_and_in_the_model():
    """A known answer of the column-tile layout: ``add-counter-cas-reset``'s consumer resets the
    counter in its wait (no ``after_load`` steps, so the kernel spreads column tiles over its GEMM
    programs). With two column tiles on two programs both wait for tile 0; the first resets the
    counter and the second polls it forever. The kernel's second wait times out in the
    interpreter, and the model says hang with the kernel's layout and not with one CTA per tile."""
    import dataclasses

    from syncverify.verdicts.check import check_protocol

    p = load_protocol("add-counter-cas-reset")
    config = dataclasses.replace(_looping_config("all-gather-gemm", 2, 1, 2, "striding"), n=32)
    _ops, timed_out = drift.trace_kernel(p, "all-gather-gemm", 2, config=config)
    assert {(role, tile) for role, _rank, tile, _epoch in timed_out} == {("gemm", 0)}
    layout = config.model_layout()
    assert layout["columns"] == 2 and layout["ctas"] == 2
    assert "hang" in check_protocol(p, scenario="all-gather-gemm", timeout=60, **layout).violations
    assert "hang" not in check_protocol(p, scenario="all-gather-gemm", timeout=60).violations


def test_a_kernel_layout_with_different_programs_per_role_is_refused_by_the_model():
    import dataclasses

    from syncverify.kernels.errors import StressConfigError

    config = dataclasses.replace(drift.small_config("all-reduce", 2), comm_sms=2)
    with pytest.raises(StressConfigError, match="one number of programs per role"):
        config.model_layout()
