"""Happens-before graphs of executions, and their pictures (DOT and PNG).

A graph is a ``networkx.MultiDiGraph``: one node per event (attributes ``thread``, ``index``,
``text``), one edge per related pair, keyed by the relation's name: ``po`` (immediate program
order), ``rf``, ``co`` (immediate coherence), ``fr``, ``rmw``, ``sync`` (synchronizes-with),
``barrier``, ``fence_sc`` and ``dep``. Happens-before (PTX *base causality*) is the transitive
closure of ``po | sync | barrier | fence_sc``.

Pictures put each thread in a column, program order downwards (herd's layout); the initial
writes sit in a row on top. ``highlight`` edges (a race, a stale read) are drawn thick and red.
"""

from __future__ import annotations

import textwrap

from collections.abc import Iterable
from pathlib import Path

import networkx as nx

from syncverify import ptx
from syncverify.events import Execution

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
}


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
    >>> from syncverify.explore import explore
    >>> p = Program("W+R", (Thread("P0", 0, 0, (Store("x", 1),)), Thread("P1", 0, 1, (Load("r0", "x"),))))
    >>> g = happens_before_graph(explore(p).executions[0])
    >>> sorted({k for _, _, k in g.edges(keys=True)})
    ['fr', 'rf']
    """
    g = nx.MultiDiGraph(name="happens-before")
    for e in x.events:
        thread = "init" if e.is_init else x.thread_names[e.thread]
        g.add_node(e.eid, thread=thread, index=e.index, text=e.describe(), label=e.label,
                   role=(x.roles[e.thread] if x.roles and not e.is_init else ""))
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
    }
    for name, pairs in relations.items():
        for a, b in sorted(pairs):
            g.add_edge(a, b, key=name, relation=name)
    return g


def _node_text(data: dict) -> str:
    text = data["text"]
    if data.get("label") and data["label"] not in ("init", text):
        text = f"{text}\n{data['label']}"
    return text


def to_dot(graph: nx.MultiDiGraph, *, title: str = "", highlight: Iterable[tuple[int, int]] = ()) -> str:
    """DOT text: one cluster per thread, edges coloured by relation, ``highlight`` in red."""
    marked = set(highlight)
    lines = ["digraph execution {", '  rankdir=TB; node [shape=box, fontname="monospace", fontsize=10];']
    if title:
        lines.append(f'  label="{_escape(title)}"; labelloc=t;')
    threads: dict[str, list[int]] = {}
    for n, d in graph.nodes(data=True):
        threads.setdefault(d["thread"], []).append(n)
    for i, (thread, nodes) in enumerate(threads.items()):
        role = graph.nodes[nodes[0]].get("role") or ""
        lines.append(f'  subgraph cluster_{i} {{ label="{_escape(thread + (": " + role if role else ""))}";')
        for n in sorted(nodes, key=lambda n: graph.nodes[n]["index"]):
            colour = ', color="red", penwidth=2' if any(n in p for p in marked) else ""
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
    lines.append("}")
    return "\n".join(lines) + "\n"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def to_png(graph: nx.MultiDiGraph, path: str | Path, *, title: str = "",
           highlight: Iterable[tuple[int, int]] = ()) -> None:
    """Draw the graph with matplotlib (no Graphviz needed): threads as columns, po downwards."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    marked = set(highlight)
    threads: list[str] = []
    for _n, d in graph.nodes(data=True):
        if d["thread"] != "init" and d["thread"] not in threads:
            threads.append(d["thread"])
    inits = [n for n, d in graph.nodes(data=True) if d["thread"] == "init"]
    pos: dict[int, tuple[float, float]] = {}
    for i, n in enumerate(inits):
        pos[n] = ((i - (len(inits) - 1) / 2) * 1.6 + (len(threads) - 1) * 1.5, 1.9)  # above the headers
    for col, thread in enumerate(threads):
        nodes = sorted((n for n, d in graph.nodes(data=True) if d["thread"] == thread),
                       key=lambda n: graph.nodes[n]["index"])
        for row, n in enumerate(nodes):
            pos[n] = (col * 3.0, -row * 1.0)
    depth = max((-y for _x, y in pos.values()), default=0)
    fig, ax = plt.subplots(figsize=(max(6, 3.2 * len(threads)), max(4, 1.1 * (depth + 3))))
    ax.set_axis_off()
    for col, thread in enumerate(threads):
        role = next((d.get("role") for _n, d in graph.nodes(data=True) if d["thread"] == thread), "")
        # Roles are long ("rank 0 producer tile 0 epoch 0 thread 1"): wrap them to the column width.
        role = textwrap.fill(role, 24) if role else ""
        ax.text(col * 3.0, 0.55, thread + (f"\n{role}" if role else ""), ha="center", va="bottom",
                fontsize=9, fontweight="bold")
    drawn = []
    for a, b, key in graph.edges(keys=True):
        if key not in EDGE_STYLE or (key in ("fr", "dep") and (a, b) not in marked):
            continue
        colour, _style, _label = EDGE_STYLE[key]
        width = 1.2
        if (a, b) in marked or (b, a) in marked:
            colour, width = "red", 3.0
        same_col = abs(pos[a][0] - pos[b][0]) < 1e-6
        rad = 0.0 if key == "po" else (0.35 if same_col else 0.12)
        ax.annotate("", xy=pos[b], xytext=pos[a],
                    arrowprops=dict(arrowstyle="-|>", color=colour, lw=width, shrinkA=16, shrinkB=16,
                                    linestyle="--" if key in ("fr", "rmw", "dep") else "-",
                                    connectionstyle=f"arc3,rad={rad}"))
        drawn.append(key)
    for a, b in marked:
        if not graph.has_edge(a, b) and not graph.has_edge(b, a):
            ax.annotate("", xy=pos[b], xytext=pos[a], arrowprops=dict(arrowstyle="<|-|>", color="red", lw=3.0,
                        linestyle="--", shrinkA=16, shrinkB=16, connectionstyle="arc3,rad=0.2"))
            drawn.append("race")
    for n, d in graph.nodes(data=True):
        hot = any(n in p for p in marked)
        ax.text(*pos[n], _node_text(d), ha="center", va="center", fontsize=8, family="monospace",
                bbox=dict(boxstyle="round,pad=0.3", fc="#fff2f2" if hot else "white",
                          ec="red" if hot else "#333333", lw=2 if hot else 1))
    legend = [Line2D([0], [0], color=EDGE_STYLE[k][0], lw=2, label=EDGE_STYLE[k][2])
              for k in EDGE_STYLE if k in drawn]
    if "race" in drawn or marked:
        legend.append(Line2D([0], [0], color="red", lw=3, label="offending pair"))
    if legend:
        ax.legend(handles=legend, loc="lower right", fontsize=8, frameon=True)
    xs = [p[0] for p in pos.values()] or [0]
    ax.set_xlim(min(xs) - 1.8, max(xs) + 1.8)
    ax.set_ylim(-depth - 0.8, 2.4)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(str(path), dpi=110)
    plt.close(fig)


def write_graph(x: Execution, path: str | Path, *, title: str = "",
                highlight: Iterable[tuple[int, int]] = ()) -> list[Path]:
    """Write ``x``'s graph to ``path``: ``.dot``, ``.png``, or (no suffix) both. Returns the files."""
    path = Path(path)
    graph = happens_before_graph(x)
    written = []
    suffixes = [path.suffix] if path.suffix in (".dot", ".png") else [".dot", ".png"]
    base = path.with_suffix("") if path.suffix in (".dot", ".png") else path
    for suffix in suffixes:
        target = base.with_suffix(suffix) if path.suffix != suffix else path
        target.parent.mkdir(parents=True, exist_ok=True)
        if suffix == ".dot":
            target.write_text(to_dot(graph, title=title, highlight=highlight))
        else:
            to_png(graph, target, title=title, highlight=highlight)
        written.append(target)
    return written
