"""Happens-before graphs of executions, and their pictures (DOT and PNG).

A graph is a ``networkx.MultiDiGraph``: one node per event (attributes ``thread``, ``index``,
``text``), one edge per related pair, keyed by the relation's name: ``po`` (immediate program
order), ``rf``, ``co`` (immediate coherence), ``fr``, ``rmw``, ``sync`` (synchronizes-with),
``barrier``, ``fence_sc`` and ``dep``. Happens-before (PTX *base causality*) is the transitive
closure of ``po | sync | barrier | fence_sc``.

Pictures put each thread in a column, program order downwards (herd's layout); the initial
writes sit in a row on top. ``highlight`` edges (a race, a stale read) are drawn thick and red;
``needed`` pairs (the happens-before link a violation's cause says is missing) are drawn as dashed
red "needed" arrows. Each column is labelled with its rank (GPU), role, CTA and epoch; the host's
order between launches and resets is drawn as a row of phases joined by "host" edges; a legend in
words explains every relation drawn. When there is evidence, threads the violation does not
involve (no event on a path between the evidence's events) are left out and counted in a note,
and the figure is capped at :data:`MAX_WIDTH_PX` wide. With Graphviz's ``dot`` on the PATH the
PNG is laid out by it; otherwise by matplotlib.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
from collections.abc import Iterable
from pathlib import Path

import networkx as nx

from syncverify.model import ptx
from syncverify.model.events import Execution
from syncverify.program import Phase, ThreadOrigin

EDGE_STYLE = {  # relation -> (colour, dot style, label)
    "po": ("#555555", "solid", "po"),
    "rf": ("#d62728", "solid", "rf"),
    "co": ("#1f77b4", "solid", "co"),
    "fr": ("#ff7f0e", "dashed", "fr"),
    "rmw": ("#7f7f7f", "dotted", "rmw"),
    "sync": ("#2ca02c", "bold", "sw"),
    "barrier": ("#9467bd", "bold", "bar"),
    "fence_sc": ("#8c564b", "bold", "sc"),
    "dep": ("#bcbd22", "dotted", "dep"),
    "issue": ("#17becf", "dashed", "issue"),
    "complete": ("#e377c2", "bold", "done"),
    "mbarrier_sync": ("#2ca02c", "bold", "mbar"),
}

#: The legend's words for each drawn relation (and the extra edges: host order, needed, race).
EDGE_WORDS = {
    "po": "po: program order (one thread, top to bottom)",
    "rf": "rf: reads from (write -> the read that sees it)",
    "co": "co: coherence (write order of one location)",
    "fr": "fr: from-read (read -> a write coherence-after the one it saw)",
    "rmw": "rmw: the two halves of one atomic",
    "sync": "sw: synchronizes with (release -> acquire)",
    "barrier": "bar: CTA barrier (bar.sync instance)",
    "fence_sc": "sc: fence.sc order",
    "dep": "dep: address/data/control dependency",
    "issue": "issue: a bulk copy's issue point -> the copy's own accesses (docs/async.md)",
    "complete": "done: a copy's access -> the wait that sees it complete",
    "mbarrier_sync": "mbar: mbarrier arrive (release) -> try_wait (acquire)",
    "host": "host: host order between launches / resets",
    "needed": "needed: the happens-before link the cause says is missing",
    "race": "race / offending pair (red, thick)",
}
HOST_STYLE = ("#000000", "dashed", "host")
NEEDED_COLOUR = "red"
MAX_WIDTH_PX = 2000  #: the widest PNG drawn (at :data:`DPI`)
MAX_HEIGHT_PX = 2400
DPI = 110
MIN_COLUMN_WIDTH = 3.0  #: data units (about inches before any shrinking) between column centres
MONO_CHAR_WIDTH = 0.6 * 8 / 72  #: one monospace character at the base 8 pt, in the same units
COLUMN_GAP = 0.6  #: white space between the widest boxes of neighbouring columns
TEXT_Z = 5  #: text above every curve: a label under an edge cannot be read
#: Edges followed when deciding which events lie on a path between the violation's events.
_PATH_RELATIONS = ("po", "rf", "sync", "barrier", "fence_sc", "rmw", "issue", "complete", "mbarrier_sync")


def _immediate(pairs: Iterable[tuple[int, int]]) -> set[tuple[int, int]]:
    """The covering pairs of a strict order (drop pairs implied by transitivity)."""
    pairs = set(pairs)
    succ: dict[int, set[int]] = {}
    for a, b in pairs:
        succ.setdefault(a, set()).add(b)
    return {(a, b) for a, b in pairs if not any((c, b) in pairs for c in succ.get(a, ()) if c != b)}


def happens_before_graph(x: Execution) -> nx.MultiDiGraph:
    """The execution as a typed multigraph (see the module docstring).

    Examples
    --------
    >>> from syncverify.program import Program, Thread, Store, Load
    >>> from syncverify.explore.driver import explore
    >>> p = Program("W+R", (Thread("P0", 0, 0, (Store("x", 1),)), Thread("P1", 0, 1, (Load("r0", "x"),))))
    >>> g = happens_before_graph(explore(p).executions[0])
    >>> sorted({k for _, _, k in g.edges(keys=True)})
    ['co', 'fr', 'rf']
    """
    g = nx.MultiDiGraph(name="happens-before")
    for e in x.events:
        thread = "init" if e.is_init else x.thread_names[e.thread]
        role = x.roles[e.thread] if x.roles and not e.is_init else ""
        g.add_node(e.eid, thread=thread, index=e.index, text=e.describe(), label=e.label, role=str(role),
                   phase=e.phase, gpu=e.gpu, cta=e.cta,
                   column=("initial values" if e.is_init else column_label(thread, role, e)))
    g.graph["phases"] = _phase_order(x)
    g.graph["threads"] = len(x.thread_names)
    real_po = {(a, b) for a, b in x.po}  # within threads only, not the init edges
    relations = {
        "po": _immediate(real_po),
        "rf": {(w, r) for r, w in x.rf.items()},
        "co": _immediate(ptx.co(x)),
        "fr": set(ptx.fr(x)),
        "rmw": set(x.rmw),
        "sync": set(ptx.synchronizes_with(x)),
        "barrier": set(x.barrier_sync),
        "fence_sc": _immediate(ptx.fence_sc_order(x)),
        "dep": set(x.dep),
        "issue": set(ptx.issue(x)),
        "complete": set(ptx.complete(x)),
        "mbarrier_sync": set(ptx.mbarrier_sync(x)),
    }
    for name, pairs in relations.items():
        for a, b in sorted(pairs):
            g.add_edge(a, b, key=name, relation=name)
    return g


def column_label(name: str, role: ThreadOrigin | str, e) -> str:
    """A thread's header: ``P2: rank 1 producer (GPU 1, CTA 1) epoch 0, tile 0, thread 0``."""
    where = f"GPU {e.gpu}, CTA {e.cta}"
    if isinstance(role, ThreadOrigin) and not role.is_host_reset:
        return (f"{name}: rank {role.rank} {role.role} ({where}) epoch {role.epoch}, {role.tile_words}, "
                f"thread {role.thread}")
    if role:
        return f"{name}: {role} ({where})"
    return f"{name} ({where})" + (f" {_phase_words(e.phase)}" if e.phase else "")


def _phase_words(phase: Phase | str) -> str:
    """``e0`` -> ``kernel launch, epoch 0``; ``reset0`` -> ``host reset after epoch 0``
    (:meth:`~syncverify.program.Phase.words`); a hand-written program's phase name as it is."""
    return phase.words() if isinstance(phase, Phase) else (phase or "launch")


def _phase_order(x: Execution) -> list[tuple[str, str]]:
    """The ordered pairs of phases (launches / resets) the host orders, from ``x.host_order``."""
    pairs = {(x.events[a].phase, x.events[b].phase) for a, b in x.host_order}
    return sorted((a, b) for a, b in pairs if a != b)


def _phases_in_order(pairs: list[tuple[str, str]]) -> list[str]:
    g = nx.DiGraph(pairs)
    try:
        return list(nx.lexicographical_topological_sort(g))
    except nx.NetworkXUnfeasible:  # a cycle cannot come from a host order; draw them anyway
        return sorted(g.nodes)


def focus(graph: nx.MultiDiGraph, highlight: Iterable[tuple[int, int]] = (),
          needed: Iterable[tuple[int, int]] = ()) -> tuple[nx.MultiDiGraph, str]:
    """The part of ``graph`` a violation involves, and a note on what was left out.

    Kept: the events of ``highlight`` and ``needed`` pairs, every event on a path between two of
    them (over po, rf, sw, bar, sc, rmw and the needed edges), the whole of every thread holding
    such an event, and the initial writes those threads read from. Without evidence, everything.
    """
    marked = [tuple(p) for p in highlight] + [tuple(p) for p in needed]
    keys = {n for p in marked for n in p if n in graph}
    if not keys:
        return graph, ""
    paths = nx.DiGraph()
    paths.add_nodes_from(graph.nodes)
    paths.add_edges_from((a, b) for a, b, k in graph.edges(keys=True) if k in _PATH_RELATIONS)
    paths.add_edges_from(p for p in marked if p[0] in graph and p[1] in graph)
    after = set(keys).union(*(nx.descendants(paths, k) for k in keys))
    before = set(keys).union(*(nx.ancestors(paths, k) for k in keys))
    involved = keys | (after & before)
    threads = {graph.nodes[n]["thread"] for n in involved} - {"init"}
    keep = {n for n, d in graph.nodes(data=True) if d["thread"] in threads}
    keep |= {a for a, b, k in graph.edges(keys=True) if graph.nodes[a]["thread"] == "init" and b in keep and k == "rf"}
    keep |= keys
    all_threads = {d["thread"] for _n, d in graph.nodes(data=True)} - {"init"}
    left = sorted(all_threads - threads, key=lambda t: (len(t), t))
    sub = graph.subgraph(keep).copy()
    if not left:
        return sub, ""
    phases = sorted({graph.nodes[n]["phase"] for n, d in graph.nodes(data=True) if d["thread"] in left} - {""})
    where = f" ({'; '.join(_phase_words(p) for p in phases)})" if phases else ""
    note = (f"{len(left)} threads not involved, not drawn: {', '.join(left)}{where}" if len(left) > 1
            else f"1 thread not involved, not drawn: {left[0]}{where}")
    sub.graph["note"] = note
    return sub, note


def _legend_keys(graph: nx.MultiDiGraph, marked: set, needed: list) -> list[str]:
    drawn = [k for k in EDGE_STYLE if any(key == k and (k not in ("fr", "dep") or (a, b) in marked)
                                         for a, b, key in graph.edges(keys=True))]
    if graph.graph.get("phases"):
        drawn.append("host")
    if needed:
        drawn.append("needed")
    if marked:
        drawn.append("race")
    return drawn


def _node_text(data: dict) -> str:
    text = data["text"]
    if data.get("label") and data["label"] not in ("init", text):
        text = f"{text}\n{data['label']}"
    return text


def to_dot(graph: nx.MultiDiGraph, *, title: str = "", highlight: Iterable[tuple[int, int]] = (),
           needed: Iterable[tuple[int, int]] = ()) -> str:
    """DOT text: one cluster per thread (labelled with rank, GPU, CTA, epoch), edges coloured by
    relation, ``highlight`` in red, ``needed`` as dashed red arrows, the host's phases joined by
    ``host`` edges, and a legend in words."""
    marked = {tuple(p) for p in highlight}
    needed = [tuple(p) for p in needed if p[0] in graph and p[1] in graph]
    lines = ["digraph execution {", '  rankdir=TB; newrank=true; node [shape=box, fontname="monospace", fontsize=10];']
    note = graph.graph.get("note", "")
    heading = title + (f"\n{note}" if note else "")
    if heading:
        lines.append(f'  label="{_escape(heading)}"; labelloc=t;')
    threads: dict[str, list[int]] = {}
    for n, d in graph.nodes(data=True):
        threads.setdefault(d["thread"], []).append(n)
    for i, (thread, nodes) in enumerate(threads.items()):
        column = graph.nodes[nodes[0]].get("column") or thread
        lines.append(f'  subgraph cluster_{i} {{ label="{_escape(column)}";')
        for n in sorted(nodes, key=lambda n: graph.nodes[n]["index"]):
            colour = ', color="red", penwidth=2' if any(n in p for p in marked | set(needed)) else ""
            lines.append(f'    e{n} [label="{_escape(_node_text(graph.nodes[n]))}"{colour}];')
        lines.append("  }")
    for a, b, key in graph.edges(keys=True):
        if key not in EDGE_STYLE or (key in ("fr", "dep") and (a, b) not in marked):
            continue  # fr and dep are derivable; drawn only when they are the evidence
        colour, style, label = EDGE_STYLE[key]
        extra = ""
        if (a, b) in marked or (b, a) in marked:
            colour, extra = "red", ", penwidth=3"
        lines.append(f'  e{a} -> e{b} [label="{label}", color="{colour}", fontcolor="{colour}", style={style}{extra}];')
    for a, b in marked:
        if not graph.has_edge(a, b):
            lines.append(f'  e{a} -> e{b} [label="race", color="red", fontcolor="red", style=dashed, penwidth=3, dir=none];')
    for a, b in needed:
        lines.append(f'  e{a} -> e{b} [label="needed", color="{NEEDED_COLOUR}", fontcolor="{NEEDED_COLOUR}", '
                     'style=dashed, penwidth=3, constraint=false];')
    pairs = graph.graph.get("phases") or []
    if pairs:
        colour, style, label = HOST_STYLE
        lines.append('  subgraph cluster_host { label="host (CPU) order"; style=dashed;')
        for ph in _phases_in_order(pairs):
            lines.append(f'    phase_{_ident(str(ph))} [label="{_escape(f"{ph}: {_phase_words(ph)}")}", shape=cds];')
        lines.append("  }")
        for a, b in pairs:
            lines.append(f'  phase_{_ident(str(a))} -> phase_{_ident(str(b))} [label="{label}", color="{colour}", '
                         f'fontcolor="{colour}", style={style}, penwidth=2];')
    words = "\\l".join(_escape(EDGE_WORDS[k]) for k in _legend_keys(graph, marked, needed))
    if words:
        lines.append(f'  legend [shape=note, fontsize=9, label="legend\\l{words}\\l"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _ident(text: str) -> str:
    return re.sub(r"\W", "_", text) or "_"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _dot_png(dot_text: str, path: str | Path) -> bool:
    """Render with Graphviz's ``dot`` when installed (capped in size); False when not there."""
    exe = shutil.which("dot")
    if not exe:
        return False
    size = f"{MAX_WIDTH_PX / DPI:.2f},{MAX_HEIGHT_PX / DPI:.2f}"
    run = subprocess.run([exe, "-Tpng", f"-Gdpi={DPI}", f"-Gsize={size}", "-o", str(path)],
                         input=dot_text, text=True, capture_output=True, timeout=120)
    return run.returncode == 0


def to_png(graph: nx.MultiDiGraph, path: str | Path, *, title: str = "",
           highlight: Iterable[tuple[int, int]] = (), needed: Iterable[tuple[int, int]] = ()) -> None:
    """Draw the graph with matplotlib (no Graphviz needed): threads as columns, po downwards,
    at most :data:`MAX_WIDTH_PX` wide."""
    fig, _boxes = draw(graph, title=title, highlight=highlight, needed=needed)
    fig.savefig(str(path), dpi=DPI)
    # matplotlib: about a second to import, only for drawing a picture
    import matplotlib.pyplot as plt

    plt.close(fig)


def _column_widths(graph: nx.MultiDiGraph, threads: list[str]) -> list[float]:
    """Each column as wide as its widest event box (monospace at the base font size), at least
    :data:`MIN_COLUMN_WIDTH`: fixed-width columns let long labels overlap their neighbours."""
    widths = []
    for thread in threads:
        longest = max((max(len(line) for line in _node_text(d).split("\n"))
                       for _n, d in graph.nodes(data=True) if d["thread"] == thread), default=0)
        widths.append(max(MIN_COLUMN_WIDTH, longest * MONO_CHAR_WIDTH + COLUMN_GAP))
    return widths


def draw(graph: nx.MultiDiGraph, *, title: str = "", highlight: Iterable[tuple[int, int]] = (),
         needed: Iterable[tuple[int, int]] = ()):
    """The matplotlib figure of :func:`to_png` and the text artist of each event box (by node),
    so that tests can measure what was drawn."""
    # matplotlib: about a second to import, only for drawing a picture
    import matplotlib

    matplotlib.use("Agg")
    # matplotlib: about a second to import, only for drawing a picture
    import matplotlib.pyplot as plt

    marked = {tuple(p) for p in highlight}
    needed = [tuple(p) for p in needed if p[0] in graph and p[1] in graph]
    threads: list[str] = []
    for _n, d in graph.nodes(data=True):
        if d["thread"] != "init" and d["thread"] not in threads:
            threads.append(d["thread"])
    inits = [n for n, d in graph.nodes(data=True) if d["thread"] == "init"]
    pairs = graph.graph.get("phases") or []
    phases = _phases_in_order(pairs) if pairs else []
    widths = _column_widths(graph, threads)
    centres = [sum(widths[:i]) + w / 2 - widths[0] / 2 for i, w in enumerate(widths)]
    colw = sum(widths) / len(widths) if widths else MIN_COLUMN_WIDTH  # for the bends: a typical column
    middle = (centres[-1] + centres[0]) / 2 if centres else 0.0
    pos: dict[int, tuple[float, float]] = {}
    top = 1.9 if inits else 0.9  # the init row sits above the headers
    init_step = max([MIN_COLUMN_WIDTH * 0.6] + [len(_node_text(graph.nodes[n])) * MONO_CHAR_WIDTH + 0.4
                                                for n in inits])
    for i, n in enumerate(inits):
        pos[n] = ((i - (len(inits) - 1) / 2) * init_step + middle, top)
    for col, thread in enumerate(threads):
        nodes = sorted((n for n, d in graph.nodes(data=True) if d["thread"] == thread),
                       key=lambda n: graph.nodes[n]["index"])
        for row, n in enumerate(nodes):
            pos[n] = (centres[col], -row * 1.0)
    depth = max((-y for _x, y in pos.values()), default=0)
    host_y = top + 0.9
    upper = host_y + 0.5 if phases else top + 0.5
    xs = [p[0] for p in pos.values()] or [0.0]
    half = max(widths, default=MIN_COLUMN_WIDTH) / 2
    xmin, xmax = min(xs) - max(1.8, half), max(xs) + max(1.8, half)
    span_x, span_y = xmax - xmin, upper + depth + 3.2  # room below for the legend
    width = min(MAX_WIDTH_PX / DPI, max(7.0, 1.05 * span_x))
    height = min(MAX_HEIGHT_PX / DPI, max(4.5, 1.0 * span_y))
    scale = min(1.0, width / (1.05 * span_x), height / span_y)  # shrink text when the figure is capped
    fs = max(5.0, 8 * scale)
    fig, ax = plt.subplots(figsize=(width, height))
    ax.set_axis_off()
    for col, thread in enumerate(threads):
        column = next((d.get("column") for _n, d in graph.nodes(data=True) if d["thread"] == thread), thread)
        name, _, rest = column.partition(": ")
        text = name + ("\n" + textwrap.fill(rest, max(20, int(widths[col] / MONO_CHAR_WIDTH) - 4)) if rest else "")
        ax.text(centres[col], 0.5, text, ha="center", va="bottom", fontsize=fs + 0.5, fontweight="bold",
                zorder=TEXT_Z, bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.85))
    # Host order: one box per phase (launch or reset), in order, joined by "host" arrows.
    phase_pos: dict[str, tuple[float, float]] = {}
    for i, ph in enumerate(phases):
        x0 = (i - (len(phases) - 1) / 2) * 3.4 + middle
        phase_pos[ph] = (x0, host_y)
    for a, b in pairs:
        adjacent = abs(phases.index(a) - phases.index(b)) == 1
        ax.annotate("", xy=phase_pos[b], xytext=phase_pos[a],
                    arrowprops=dict(arrowstyle="-|>", color=HOST_STYLE[0], lw=1.6, linestyle="--",
                                    shrinkA=40, shrinkB=40,
                                    connectionstyle=f"arc3,rad={0 if adjacent else -0.25}"))
        mid = ((phase_pos[a][0] + phase_pos[b][0]) / 2, host_y + (0 if adjacent else 0.45))
        ax.text(*mid, "host", fontsize=fs - 1, ha="center", va="bottom", color=HOST_STYLE[0], zorder=TEXT_Z)
    for ph, xy in phase_pos.items():
        ax.text(*xy, f"{ph}: {_phase_words(ph)}", ha="center", va="center", fontsize=fs, style="italic", zorder=TEXT_Z,
                bbox=dict(boxstyle="rarrow,pad=0.3", fc="#f0f0f0", ec="black", lw=1))
    for a, b, key in graph.edges(keys=True):
        if key not in EDGE_STYLE or (key in ("fr", "dep") and (a, b) not in marked):
            continue
        colour, _style, _label = EDGE_STYLE[key]
        width_ = 1.2
        if (a, b) in marked or (b, a) in marked:
            colour, width_ = "red", 3.0
        ax.annotate("", xy=pos[b], xytext=pos[a],
                    arrowprops=dict(arrowstyle="-|>", color=colour, lw=width_, shrinkA=14, shrinkB=14,
                                    linestyle="--" if key in ("fr", "rmw", "dep") else "-",
                                    connectionstyle=f"arc3,rad={_bend(pos[a], pos[b], key, colw)}"))
    for a, b in marked:
        if not graph.has_edge(a, b) and not graph.has_edge(b, a):
            ax.annotate("", xy=pos[b], xytext=pos[a], arrowprops=dict(arrowstyle="<|-|>", color="red", lw=3.0,
                        linestyle="--", shrinkA=14, shrinkB=14,
                        connectionstyle=f"arc3,rad={_bend(pos[a], pos[b], 'race', colw)}"))
    for a, b in needed:
        ax.annotate("", xy=pos[b], xytext=pos[a],
                    arrowprops=dict(arrowstyle="-|>", color=NEEDED_COLOUR, lw=2.6, linestyle=(0, (4, 2)),
                                    shrinkA=14, shrinkB=14,
                                    connectionstyle=f"arc3,rad={_bend(pos[a], pos[b], 'needed', colw)}"))
        mid = ((pos[a][0] + pos[b][0]) / 2, (pos[a][1] + pos[b][1]) / 2)
        ax.text(*mid, "needed", color=NEEDED_COLOUR, fontsize=fs + 1, fontweight="bold", ha="center",
                va="center", zorder=TEXT_Z + 1, bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.8))
    hot_nodes = {n for p in marked | set(needed) for n in p}
    boxes = {}
    for n, d in graph.nodes(data=True):
        hot = n in hot_nodes
        boxes[n] = ax.text(*pos[n], _node_text(d), ha="center", va="center", fontsize=fs, family="monospace",
                           zorder=TEXT_Z, bbox=dict(boxstyle="round,pad=0.3", fc="#fff2f2" if hot else "white",
                          ec="red" if hot else "#333333", lw=2 if hot else 1))
    words = [EDGE_WORDS[k] for k in _legend_keys(graph, marked, needed)]
    footer = "legend:  " + "   |   ".join(words) if words else ""
    if words and len(footer) * fs * 0.62 / 72 > width:  # two columns of words when one line is too wide
        half = (len(words) + 1) // 2
        footer = "legend:\n" + "\n".join("   |   ".join(words[i::half]) for i in range(half))
    note = graph.graph.get("note", "")
    if note:
        footer = (footer + "\n" if footer else "") + textwrap.fill(note, int(width * 72 / (fs * 0.62)))
    if footer:
        fig.text(0.01, 0.01, footer, ha="left", va="bottom", fontsize=fs, family="monospace",
                 bbox=dict(boxstyle="round,pad=0.4", fc="#fbfbf0", ec="#999999"))
    ax.set_xlim(xmin, xmax)
    ax.set_ylim(-depth - 0.8, upper + (0.4 if len(phases) > 2 else 0))
    if title:
        ax.set_title(title, fontsize=fs + 2)
    legend_lines = footer.count("\n") + 1 if footer else 0
    fig.tight_layout(rect=(0, min(0.45, (legend_lines * fs * 1.5 + 12) / 72 / height), 1, 1))
    return fig, boxes


def _bend(a: tuple[float, float], b: tuple[float, float], key: str, colw: float) -> float:
    """How much an edge curves so that it does not run through the nodes between its ends: edges
    within a column (other than po to the next event) bow out sideways, more for longer ones;
    edges that skip columns arc above or below the columns they pass."""
    dx, dy = b[0] - a[0], b[1] - a[1]
    if abs(dx) < 1e-6:
        if key == "po" and abs(dy) <= 1.0 + 1e-6:
            return 0.0
        return 0.45 if key != "needed" else -0.45
    cols = abs(dx) / colw
    if a[1] > 0.5 and cols > 0.5:  # from the initial values above the headers: bow upwards, over the columns
        return -0.25 if dx > 0 else 0.25
    if cols <= 1.0 + 1e-6 and abs(dy) < 1e-6:
        return 0.12
    if abs(dy) < 1e-6 or cols > 1.0 + 1e-6:
        return 0.25 if key != "needed" else -0.25
    return 0.1


def write_graph(x: Execution, path: str | Path, *, title: str = "",
                highlight: Iterable[tuple[int, int]] = (),
                needed: Iterable[tuple[int, int]] | None = None) -> list[Path]:
    """Write ``x``'s graph to ``path``: ``.dot``, ``.png``, or (no suffix) both. Returns the files.

    ``needed``: event pairs the violation's cause says must be ordered (drawn as dashed red
    "needed" arrows). With evidence (``highlight`` or ``needed``) the threads not involved are
    left out, and a note says how many.
    """
    path = Path(path)
    highlight = [tuple(p) for p in highlight]
    needed = [tuple(p) for p in (needed or ())]
    graph, _note = focus(happens_before_graph(x), highlight, needed)
    written = []
    suffixes = [path.suffix] if path.suffix in (".dot", ".png") else [".dot", ".png"]
    base = path.with_suffix("") if path.suffix in (".dot", ".png") else path
    for suffix in suffixes:
        target = base.with_suffix(suffix) if path.suffix != suffix else path
        target.parent.mkdir(parents=True, exist_ok=True)
        if suffix == ".dot":
            target.write_text(to_dot(graph, title=title, highlight=highlight, needed=needed))
        elif not _dot_png(to_dot(graph, title=title, highlight=highlight, needed=needed), target):
            to_png(graph, target, title=title, highlight=highlight, needed=needed)
        written.append(target)
    return written
