"""Pictures of counterexamples (syncverify.verdicts.graphs): legend in words, thread/epoch labels, host
order, the cause's "needed" edge, uninvolved threads left out, a capped width."""

from __future__ import annotations

import re

import pytest

from syncverify.verdicts.check import check_protocol
from syncverify.verdicts.graphs import MAX_WIDTH_PX, draw, focus, happens_before_graph, to_dot, write_graph


@pytest.fixture(scope="module")
def two_epochs():
    # The stale read is in call 1: checked call by call (call_parts), its witness is an execution
    # of call 1's program, with call 0's last tile writes host-ordered before it.
    result = check_protocol("fenced-release-acquire", world_size=2, epochs=2)
    witness = result.violations["stale-read"]
    return result, witness, witness.cause(result.scenario)


def _program(two_epochs):
    """The program the witness is an execution of (a call program when checked call by call)."""
    result, witness, _cause = two_epochs
    return (witness.part or result.scenario).program


def _dot(two_epochs, needed=True) -> str:
    _result, witness, cause = two_epochs
    graph, _note = focus(happens_before_graph(witness.execution), witness.evidence,
                         cause.evidence if needed else ())
    return to_dot(graph, title="t", highlight=witness.evidence, needed=cause.evidence if needed else ())


def test_dot_has_a_legend_in_words(two_epochs):
    dot = _dot(two_epochs)
    for words in ("po: program order", "rf: reads from", "co: coherence (write order",
                  "sw: synchronizes with (release -> acquire)", "bar: CTA barrier",
                  "host: host order between launches", "needed:"):
        assert words in dot, words


def test_dot_labels_threads_with_rank_gpu_cta_and_epoch(two_epochs):
    dot = _dot(two_epochs)
    # call 1's stale read: the producer's epoch-0 tile write it reads, its consumer in epoch 1
    assert re.search(r'label="P\d+: rank \d producer \(GPU \d, CTA \d+\) epoch 0', dot)
    assert re.search(r'label="P\d+: rank 0 consumer \(GPU 0, CTA \d+\) epoch 1', dot)


def test_dot_draws_host_order_between_phases(two_epochs):
    dot = _dot(two_epochs)
    program = _program(two_epochs)
    assert program.host_order
    for a, b in program.host_order:  # one edge per ordered pair of phases
        assert re.search(rf'phase_{a} -> phase_{b} \[label="host".*style=dashed', dot), (a, b)


def test_dot_draws_the_needed_edge_dashed_red(two_epochs):
    _result, _witness, cause = two_epochs
    assert cause.evidence
    a, b = cause.evidence[0]
    dot = _dot(two_epochs)
    assert re.search(rf'e{a} -> e{b} \[label="needed", color="red".*style=dashed', dot)
    assert 'label="needed"' not in _dot(two_epochs, needed=False)


def test_uninvolved_threads_are_left_out_with_a_note(two_epochs):
    dot = _dot(two_epochs)
    drawn = re.findall(r'subgraph cluster_\d+ \{ label="P\d+', dot)
    assert 0 < len(drawn) < len(_program(two_epochs).threads)
    left = len(_program(two_epochs).threads) - len(drawn)
    assert f"{left} threads not involved, not drawn" in dot


def test_without_evidence_everything_is_drawn(two_epochs):
    _result, witness, _cause = two_epochs
    graph, note = focus(happens_before_graph(witness.execution))
    assert note == ""
    dot = to_dot(graph)
    assert len(re.findall(r'subgraph cluster_\d+ \{ label="P\d+', dot)) == len(_program(two_epochs).threads)


def test_check_png_of_two_epochs_is_capped_in_width(tmp_path):
    from syncverify.cli import main

    png = tmp_path / "x.png"
    assert main(["check", "fenced-release-acquire", "--epochs", "2", "--graph", str(png)]) == 1
    assert png.exists()
    import matplotlib.image

    height, width = matplotlib.image.imread(str(png)).shape[:2]
    assert width <= MAX_WIDTH_PX
    assert height <= 2400


def test_check_dot_carries_the_cause_needed_edge(tmp_path, two_epochs):
    from syncverify.cli import main

    dot = tmp_path / "x.dot"
    # W = 3: its first witness (call 0's race, the calls checked one by one) leaves threads out.
    assert main(["check", "fenced-release-acquire", "--epochs", "2", "--world-size", "3", "--graph", str(dot)]) == 1
    text = dot.read_text()
    assert 'label="needed"' in text and "threads not involved, not drawn" in text


def test_write_graph_without_evidence_still_draws_both(tmp_path, two_epochs):
    _result, witness, _cause = two_epochs
    files = write_graph(witness.execution, tmp_path / "all")
    assert {f.suffix for f in files} == {".dot", ".png"} and all(f.stat().st_size for f in files)


@pytest.fixture(scope="module")
def all_scatter_figure():
    """The all-scatter counterexample whose long poll labels used to overlap the next column."""
    result = check_protocol("fenced-release-acquire", scenario="all-scatter", world_size=2)
    witness = next(iter(result.violations.values()))
    cause = witness.cause(result.scenario)
    graph, _note = focus(happens_before_graph(witness.execution), witness.evidence, cause.evidence)
    fig, boxes = draw(graph, title="t", highlight=witness.evidence, needed=cause.evidence)
    yield fig, boxes
    # matplotlib: only for measuring the drawn picture
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_event_boxes_do_not_overlap(all_scatter_figure):
    fig, boxes = all_scatter_figure
    fig.canvas.draw()  # box patches take their size when drawn
    renderer = fig.canvas.get_renderer()
    extents = {n: t.get_bbox_patch().get_window_extent(renderer) for n, t in boxes.items()}
    assert len(extents) > 6
    nodes = sorted(extents)
    for i, a in enumerate(nodes):
        for b in nodes[i + 1:]:
            assert not extents[a].overlaps(extents[b]), (boxes[a].get_text(), boxes[b].get_text())


def test_text_is_drawn_above_every_curve(all_scatter_figure):
    fig, _boxes = all_scatter_figure
    ax = fig.axes[0]
    arrows = [t for t in ax.texts if getattr(t, "arrow_patch", None) is not None]
    labels = [t for t in ax.texts if t.get_text() and getattr(t, "arrow_patch", None) is None]
    assert arrows and labels
    assert min(t.get_zorder() for t in labels) > max(a.get_zorder() for a in arrows)
