"""The kernels on a real GPU (skipped without one): virtual ranks on one GPU, address tables,
delays; one process per GPU when there are two. CI has no GPU: run these on the GPU machine with
``python -m pytest -q tests/gpu``."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="needs torch (in the checkout: python -m pip install -e '.[gpu]')")
pytest.importorskip("triton", reason="needs triton (in the checkout: python -m pip install -e '.[gpu]')")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(),
                       reason="needs a CUDA GPU (none visible); the CPU path is tests/test_stress_interpreter.py"),
]

from syncverify.stress.campaign import run_campaign  # noqa: E402

SMALL = dict(m=256, n=256, k=256, block_m=64, block_n=64, block_k=64, gemm_sms=4, comm_sms=2, recv_sms=2)


# The protocols the model calls safe, in both kernels (all-scatter with its default push protocol),
# stressed through the pytest plugin's fixture, as a user's project would.
@pytest.mark.parametrize("kernel, protocol", [
    ("all-reduce", "barrier-fenced-release-acquire"),
    ("all-reduce", "epoch-flag"),
    ("all-scatter", "barrier-fenced-release-acquire"),
    ("all-scatter", "epoch-flag"),
])
@pytest.mark.parametrize("delays", ["none", "random"])
def test_safe_protocols_leave_no_bad_tile_on_the_gpu(syncverify_stress, kernel, protocol, delays):
    syncverify_stress(protocol=protocol, kernel=kernel, world_size=2, iterations=64, delays=delays,
                      **SMALL).assert_clean()


@pytest.mark.parametrize("kernel, protocol", [
    ("all-reduce", "barrier-fenced-release-acquire"),
    ("all-reduce", "epoch-flag"),
    ("all-scatter", "barrier-fenced-release-acquire"),
    ("all-scatter", "epoch-flag"),
])
def test_the_positive_control_of_each_safe_protocol_fails_under_the_same_delays(kernel, protocol):
    # without it, the clean runs above would also pass if the delays had silently stopped working
    from syncverify.stress.controls import control_verdict, positive_control

    control = positive_control(protocol, kernel=kernel, world_size=2)
    common = dict(kernel=kernel, world_size=2, virtual_ranks=True, iterations=64, delays="random", seed=3, **SMALL)
    assert run_campaign(protocol=protocol, **common).clean
    sibling = run_campaign(protocol=control.protocol, **common)
    effective, sentence = control_verdict(control, sibling)
    assert effective, sentence


@pytest.mark.parametrize("kernel", ["all-reduce", "all-scatter"])
def test_cuda_graph_blocks_validate_like_the_eager_path(kernel):
    # the same seeded run, block by block as CUDA graphs or launch by launch: the same bad tiles
    common = dict(protocol="fenced-release-acquire", kernel=kernel, world_size=2, virtual_ranks=True,
                  iterations=96, chunk=32, delays="random", seed=5, **SMALL)
    graphs = run_campaign(graphs=True, **common)
    eager = run_campaign(graphs=False, **common)
    assert graphs.iterations == eager.iterations == 96
    safe = run_campaign(**dict(common, protocol="barrier-fenced-release-acquire", graphs=True))
    assert safe.clean, safe.first_failure
    assert graphs.bad_iterations > 0 and eager.bad_iterations > 0  # hardware timing differs; both must fail


@pytest.mark.syncverify(world_size=2, iterations=2, delays="none", max_polls=4096, **SMALL)
def test_an_unsafe_protocol_fails_with_its_replay_command(syncverify_stress):
    result = syncverify_stress(protocol="add-counter-skip-self")
    with pytest.raises(AssertionError, match="hang") as failure:
        result.assert_clean()
    assert "syncverify stress --protocol add-counter-skip-self" in str(failure.value)


def test_all_scatter_runs_the_push_protocol_it_is_given():
    # barrier-fenced-release-acquire as the push protocol: its counters are zeroed between
    # launches by its own reset policy while epoch-flag's pub counters carry over
    result = run_campaign(kernel="all-scatter", protocol="epoch-flag", push="barrier-fenced-release-acquire",
                          world_size=2, virtual_ranks=True, iterations=64, delays="random", **SMALL)
    assert result.clean, result.first_failure
    assert result.options["push"] == "barrier-fenced-release-acquire"


def test_address_tables_take_the_same_path_as_real_ranks():
    result = run_campaign(protocol="barrier-fenced-release-acquire", world_size=2,
                          virtual_ranks=True, table=True, iterations=32, **SMALL)
    assert result.clean, result.first_failure


def test_skip_self_hangs_are_reported_not_hung():
    result = run_campaign(protocol="add-counter-skip-self", world_size=2, virtual_ranks=True,
                          iterations=2, max_polls=4096, **SMALL)
    assert result.counts["hang"] > 0
    assert {t["hang"]["seen"] for t in result.failures if t["kind"] == "hang"} == {1}


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs (nvidia-h200-x2)")
def test_one_process_per_gpu_with_symmetric_memory():
    result = run_campaign(protocol="barrier-fenced-release-acquire", world_size=2, iterations=32,
                          watchdog_seconds=120, **SMALL)
    assert result.clean, (result.stopped, result.first_failure)


def test_a_racing_lock_reset_breaks_a_protocol_that_is_clean_between_barriers():
    # The clear runs on a side stream after up to 1 ms: kernels start with the previous launch's
    # counts (consumers pass at once: unwritten) or lose them mid-launch (hang).
    common = dict(protocol="barrier-fenced-release-acquire", world_size=2, virtual_ranks=True,
                  iterations=128, delays="random", delay_sites="before-reset", delay_pct=100,
                  delay_max_ns=1_000_000, **SMALL)
    between = run_campaign(reset="host-between-barriers", **common)
    assert between.clean, between.first_failure
    racing = run_campaign(reset="host-racing", **common)
    assert racing.bad_iterations > 0
    assert racing.counts["unwritten"] + racing.counts["hang"] > 0, racing.counts


@pytest.mark.skipif(torch.cuda.device_count() > 1, reason="needs exactly one GPU")
def test_more_ranks_than_gpus_is_refused_before_anything_runs():
    from syncverify.kernels.errors import StressConfigError

    with pytest.raises(StressConfigError, match="--world-size=2 needs 2 GPUs and 1 are visible"):
        run_campaign(protocol="epoch-flag", world_size=2, iterations=1, **SMALL)


@pytest.mark.parametrize("kernel", ["all-reduce", "all-scatter"])
def test_the_fused_kernel_is_compiled_before_the_first_launch(kernel):
    # Real ranks compile at their own speed; a compile inside launch 0 let one rank's kernel start
    # seconds before its peer's and time out (spurious hangs at iteration 0 on nvidia-h200-x2).
    from syncverify.kernels.build import build
    from syncverify.kernels.gemm_all_reduce import gemm_all_reduce_kernel
    from syncverify.kernels.gemm_all_scatter import gemm_all_scatter_kernel
    from syncverify.kernels.heap import VirtualHeap
    from syncverify.protocols import load_protocol
    from syncverify.stress.campaign import campaign_options, delay_config, kernel_config
    from syncverify.stress.runner import Runner

    fn = gemm_all_reduce_kernel if kernel == "all-reduce" else gemm_all_scatter_kernel
    o = campaign_options(kernel=kernel, protocol="barrier-fenced-release-acquire", world_size=2,
                         virtual_ranks=True, delays="random", **dict(SMALL, block_m=32))
    built = build(load_protocol(o.protocol), kernel_config(o))
    runner = Runner(built, VirtualHeap(2, "cuda:0"), device="cuda:0", delays=delay_config(o),
                    reset="host-between-barriers", poison="all", max_polls=1 << 16, seed=1, chunk=4)

    def compiled() -> int:
        device = torch.cuda.current_device()
        return len(fn.device_caches[device][0]) if device in fn.device_caches else 0

    before = compiled()
    runner.compile()
    assert compiled() == before + 1
    kernels = fn.device_caches[torch.cuda.current_device()][0].values()
    assert all(k.module is not None for k in kernels)  # loaded too: launch 0 only launches
    for i in range(8):
        runner.iteration(i)
        if len(runner.pending) == runner.chunk:
            tiles, _ = runner.drain()
            assert not tiles
    assert compiled() == before + 1  # every launch found the kernel compiled above


def _runner(kernel: str, protocol: str, *, chunk: int, graphs: bool, **options):
    from syncverify.kernels.build import build
    from syncverify.kernels.heap import VirtualHeap
    from syncverify.protocols import load_protocol
    from syncverify.stress.campaign import _reset_policy, campaign_options, delay_config, kernel_config
    from syncverify.stress.runner import Runner

    o = campaign_options(kernel=kernel, protocol=protocol, world_size=2, virtual_ranks=True, **SMALL, **options)
    p = load_protocol(protocol)
    return Runner(build(p, kernel_config(o)), VirtualHeap(2, "cuda:0"), device="cuda:0", delays=delay_config(o),
                  reset=_reset_policy(o, p), poison=o.poison, max_polls=1 << 16, seed=1, chunk=chunk, graphs=graphs)


def test_both_block_graphs_are_captured_before_iteration_0_and_drain_leaves_the_newest_block_running():
    runner = _runner("all-reduce", "barrier-fenced-release-acquire", chunk=8, graphs=True)
    runner.compile()
    assert runner.pipelined and all(g is not None for g in runner.graph_by_half)
    runner.run_block(0)  # replays only: no iteration is queued launch by launch
    assert runner.drain(keep=1) == ([], []) and len(runner.pending) == 8  # block 0 still running
    runner.run_block(8)
    assert runner.drain(keep=1) == ([], []) and [i for i, _ in runner.pending] == list(range(8, 16))
    assert runner.t0_ns  # iteration 0's validation clock, from block 0
    with pytest.raises(RuntimeError, match="ring half 1 still holds"):
        runner.run_block(24)  # block 3 would overwrite block 1's rows before they were read
    runner.run_block(16)
    assert runner.drain(keep=1) == ([], []) and [slot for _, slot in runner.pending] == list(range(0, 8))
    assert runner.drain() == ([], []) and not runner.pending


@pytest.mark.parametrize("kernel", ["all-reduce", "all-scatter"])
def test_a_pipelined_run_reports_every_bad_iteration_once_in_order(kernel):
    # 5 blocks of 32 as graph replays (the host reads one while the next runs), then 7 eagerly
    result = run_campaign(protocol="fenced-release-acquire", kernel=kernel, world_size=2, virtual_ranks=True,
                          iterations=5 * 32 + 7, chunk=32, delays="random", seed=5, max_records=1 << 30,
                          graphs=True, **SMALL)
    assert result.graphs and result.iterations == 167 and result.bad_iterations > 0
    seen = [t["iteration"] for t in result.failures]
    assert seen == sorted(seen) and max(seen) < 167
    timed = run_campaign(protocol="barrier-fenced-release-acquire", kernel=kernel, world_size=2, virtual_ranks=True,
                         seconds=0.3, chunk=32, graphs=True, **SMALL)
    assert timed.clean and timed.iterations % 32 == 0 and timed.iterations >= 64, timed.first_failure
