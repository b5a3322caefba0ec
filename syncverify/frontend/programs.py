"""Every path of one program (CTA) for one model thread: a stateless DFS over the reads' values.

The driver (GenMC's and loom's, without their execution graph): run the program's Python code
from the start with a list of choices (:class:`~syncverify.frontend.runner.Oracle`); each read of
a synchronization location is a choice point answered from its location's value domain; new
choice points get their first value. After each run, back up to the deepest choice that has
values left *and whose value reached a sink* in some run below it (:mod:`~syncverify.frontend.runner`
says what a sink is): a read whose value reached no sink leaves every run below it unchanged
whatever it returns, so one subtree serves all its values (exact, and what keeps counters whose
old value is unused from multiplying the paths).

A run that reaches a choice point in the state of an earlier choice point of the same run (the
same source positions and the same locals in every kernel frame) is cut there: from equal states
the Python code does the same thing, so the rest of the run is the subtree already being explored
from the earlier point. The paths form a decision tree (:class:`Node`) whose cut runs are
``goto``s back to that point. Lifted into the program IR (:mod:`syncverify.frontend.lift`), the
explorer's own spin-loop cut (``syncverify.explore.driver``, step 2) then decides which loops can spin
forever (a hang) and drops failed iterations, exactly as for protocols.

Equal futures (:func:`equal_futures`), an exact reduction of what is lifted. A state holds every
local, dead ones too, so one loop can be cut into several: ``v = poll(); while v < n: v = poll()``
reaches its read with the previous value of ``v`` in a local, and each value read is a loop head
of its own, all with the same future. The lifting emits one copy of the code of each class of
nodes with equal futures. Soundness and exactness: nodes of one class perform the same items
(the same operations on the same locations, with the same sems, scopes and sites) and make the
same choices, whose values lead to children of one class again (and a ``goto`` leads to its
target's read), so by induction on the length of a path, the sequences of instructions a thread
can execute from two nodes of a class are the same. Replacing a node by another of its class
therefore leaves each model thread's set of instruction sequences, and hence every execution the
explorer builds from them, unchanged; what shrinks is the code (one loop instead of one per value)
and the explorer's work on it (its spin cut sees one loop head, not a cycle through several). The
signature also holds what the lifting itself makes of each step (a failed poll iteration drops its
``bar.sync``), so nodes of one class are lifted alike. ``check_kernel(..., merge_equal_futures=False)``
lifts every node; ``tests/test_frontend_lift.py`` compares the verdicts of both.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from syncverify.explore.bounds import LimitHit
from syncverify.errors import UnsupportedConstruct
from syncverify.explore.instructions import atomic_result
from syncverify.frontend.runner import Item, Memory, Oracle, RunResult, run_program, watch_deadline
from syncverify.model.int32 import wrap_int32

#: Runs of one program for one model thread before the answer is unknown.
DEFAULT_MAX_RUNS = 20_000


@dataclass(eq=False)
class Node:
    """A point of the decision tree: the operations before the next choice, then the choice.

    ``kind``: ``choice`` (``read`` and ``children`` by value; ``matters`` False: one child
    serves every value), ``end`` (the program returned), ``goto`` (back to ``target``'s choice)
    or ``spin`` (it polls memory no one writes, forever: ``spin`` is (Loc, model value, Site, value as stored)).
    """

    pre: list[Item] = field(default_factory=list)
    kind: str = "open"
    read: Item | None = None
    children: dict[int, "Node"] = field(default_factory=dict)
    matters: bool = False
    target: "Node | None" = None
    spin: tuple | None = None


@dataclass
class ThreadTree:
    """One model thread's decision tree and what its runs found."""

    root: Node
    runs: int = 0
    written: dict = field(default_factory=dict)  # Loc -> set of model values
    transitions: dict = field(default_factory=dict)  # Loc -> {(old or None, new)}
    accessed: dict = field(default_factory=dict)  # Loc -> {"weak", "sync"}; ("oob", site) for outside accesses
    ghost_sinks: set = field(default_factory=set)  # ghost Locs whose value reached a sink
    parts: dict = field(default_factory=dict)  # Loc -> {(byte, size)}: accesses of part of it (mixed sizes)
    byte_writes: dict = field(default_factory=dict)  # Loc -> {byte: values} its part stores write
    used_sites: set = field(default_factory=set)  # site keys of scalar reads whose result was used
    needed_sites: set = field(default_factory=set)  # site keys of broadcasts whose value mattered
    assumptions: set = field(default_factory=set)


def _segments(result: RunResult) -> tuple[list[list[Item]], list[Item]]:
    """The run's items split at its choice items: ``segments[k]`` precedes choice ``k``."""
    segments: list[list[Item]] = [[]]
    choices: list[Item] = []
    for item in result.items:
        if item.kind == "read":
            choices.append(item)
            segments.append([])
        else:
            segments[-1].append(item)
    return segments, choices


def _insert(root: Node, result: RunResult) -> None:
    segments, choices = _segments(result)
    path = [root]
    node = root
    for k, value in enumerate(result.chosen):
        if node.kind == "open":
            node.pre = segments[k]
            node.kind, node.read = "choice", choices[k]
        if k in result.sinks:
            node.matters = True
        child = node.children.get(value)
        if child is None:
            child = node.children[value] = Node()
        node = child
        path.append(node)
    if node.kind == "open":
        node.pre = segments[len(result.chosen)]
        if result.cut is not None:
            node.kind, node.target = "goto", path[result.cut]
        elif result.spin is not None:
            node.kind, node.spin = "spin", result.spin
        else:
            node.kind = "end"


def explore_thread(launch, pid: tuple[int, int, int], thread: int, threads: int, memory: Memory, *,
                   nonghost: frozenset, written: frozenset, domains: dict, max_items: int,
                   max_runs: int = DEFAULT_MAX_RUNS, deadline: float | None = None) -> ThreadTree:
    """The decision tree of program ``pid`` of ``launch`` as model thread ``thread`` sees it."""
    tree = ThreadTree(Node())
    watch_deadline(deadline)
    stack: list[list] = []  # per choice on the current prefix: [domain, index of its value, matters]
    while True:
        if deadline is not None and time.monotonic() > deadline:
            raise LimitHit("timeout", f"while running program {pid[0]} of {launch.kernel_name}")
        oracle = Oracle(nonghost=nonghost, written=written, domains=domains, prefix=[e[1] for e in stack],
                        thread=thread, threads=threads, max_items=max_items)
        result = run_program(launch, pid, memory, oracle)
        tree.runs += 1
        if tree.runs > max_runs:
            raise LimitHit("max-steps", f"program {pid[0]} of {launch.kernel_name} has more than {max_runs} paths; "
                           "raise max_runs or make the harness smaller")
        _collect(tree, result)
        for i in range(len(stack), len(result.chosen)):
            stack.append([result.domains[i], 0, False])
        for i in range(len(result.chosen)):
            if i in result.sinks:
                stack[i][2] = True
        _insert(tree.root, result)
        while stack:
            entry = stack[-1]
            if entry[2] and entry[1] + 1 < len(entry[0]):
                entry[1] += 1
                break
            stack.pop()
        if not stack:
            return tree


def _collect(tree: ThreadTree, result: RunResult) -> None:
    for loc, values in result.written.items():
        tree.written.setdefault(loc, set()).update(values)
    for loc, pairs in result.transitions.items():
        tree.transitions.setdefault(loc, set()).update(pairs)
    for loc, kinds in result.accessed.items():
        tree.accessed.setdefault(loc, set()).update(kinds)
    for loc, parts in result.parts.items():
        tree.parts.setdefault(loc, set()).update(parts)
    for loc, by_byte in result.byte_writes.items():
        for byte, values in by_byte.items():
            tree.byte_writes.setdefault(loc, {}).setdefault(byte, set()).update(values)
    for taint in result.sinks:
        if isinstance(taint, tuple) and taint[0] == "ghost":
            tree.ghost_sinks.add(taint[1])
        elif isinstance(taint, tuple) and taint[0] == "foreign":
            raise UnsupportedConstruct(
                f"{taint[1]}: the values of a block read of a synchronization location decide control flow or an "
                "address; with several model threads per CTA each owns part of the block and the model cannot "
                "tell what the others read (check with threads_per_cta=1, or read the flag as a scalar)")
    for item in result.items:
        if item.kind == "read" and item.choice in result.used and (item.scalar_one or item.op == "bcast"):
            tree.used_sites.add(item.site_key)
        if item.kind == "read" and item.op == "bcast" and item.choice in result.sinks:
            tree.needed_sites.add(item.site_key)
    tree.assumptions |= result.assumptions


INFINITE = float("inf")


def _writes(item: Item, value: int | None = None) -> list:
    """The locations an item writes (a store's synchronization locations, an atomic's) when its
    read returned ``value`` (None: any value). An atomic that writes back what it read makes no
    new value, and neither does a failed CAS: with the value known (the read decided the path),
    a failed poll of ``atomic_cas(p, 1, 0)`` writes nothing."""
    if item.kind == "st":
        return list(item.locs)
    if item.kind == "put":  # an NVSHMEM put: its signal, delivered later (syncverify.delivery)
        return [] if item.delivery.signal is None else [item.delivery.signal]
    if item.kind != "read" or item.op != "atom" or _identity(item):
        return []
    if value is not None:
        new = atomic_result(item.fence_kind, value, item.operands, item.unsigned)
        if new is None or wrap_int32(new) == value:
            return []
    return list(item.locs)


def _identity(item: Item) -> bool:
    """An atomic that writes back the value it read whatever it is (``cas(p, v, v)``, the
    read-only idiom; an add, or, xor of 0; an and of -1): it makes no new value, so a poll loop of
    it does not make its location's chain of writes unbounded."""
    op, ops = item.fence_kind, item.operands
    if op == "cas":
        return len(ops) == 2 and ops[0] == ops[1]
    if op in ("add", "or", "xor"):
        return ops[:1] == (0,)
    if op == "and":
        return ops[:1] == (-1,)
    return False


def _edge_writes(node: Node, value: int) -> Counter:
    """What the choice of ``node`` writes on its way to the child for ``value``: the read's
    own write, if it makes one for that value (any value, when one child serves every value)."""
    return Counter(_writes(node.read, value if node.matters else None))


def max_writes(root: Node) -> dict:
    """Per location, the most writes one path of the tree makes to it (``INFINITE`` when a loop
    that writes it can repeat): the longest chain of writes a value of it can come from.

    A loop is a ``goto`` back to an ancestor: its writes are those of the nodes and edges from
    that ancestor down to the ``goto`` (the tree has one path to each node)."""

    def visit(node: Node, on_path: list) -> Counter:  # on_path: (ancestor, value taken) pairs
        here = Counter()
        for item in node.pre:
            here.update(_writes(item))
        best: Counter = Counter()
        if node.kind == "goto":
            start = next(i for i, (n, _v) in enumerate(on_path) if n is node.target)
            loop: Counter = Counter(here)
            for n, value in on_path[start:]:
                for item in n.pre:
                    loop.update(_writes(item))
                loop.update(_edge_writes(n, value))
            best = Counter({loc: INFINITE for loc in loop})
        for value, child in node.children.items():
            sub = visit(child, on_path + [(node, value)])
            edge = _edge_writes(node, value)
            for loc in set(sub) | set(edge):
                best[loc] = max(best[loc], sub[loc] + edge[loc])
        return Counter({loc: here[loc] + best[loc] for loc in set(here) | set(best)})

    return dict(visit(root, []))


# ----- equal futures: the decision tree's bisimulation classes ----------------------------------

def _item_signature(item: Item) -> tuple:
    """What an item does (its choice index and state key, which only name where a run was, left out)."""
    return (item.kind, item.site, item.site_key, item.locs, item.sem, item.scope, item.op, item.operands,
            item.values, item.unsigned, item.scalar_one, item.descriptor, item.barrier_id, item.count,
            item.fence_kind, item.parts)


@dataclass(frozen=True)
class Futures:
    """Bisimulation classes of a decision tree: ``entry[id(node)]`` (the node's operations, then
    what follows), ``read[id(node)]`` for choice nodes (its read, then its children). Two nodes of
    one class do the same operations and the same choices, forever."""

    entry: dict
    read: dict


def equal_futures(root: Node, edge=lambda node, child: None) -> Futures:
    """Which nodes of the tree have the same future (:class:`Futures`), by partition refinement.

    A node's future is its ``pre`` items, then: its read and, for each value, its child's future
    (a choice); the future of its target's read (a ``goto``); the end; a spin. Starting from every
    node in one class, a class is split while its members' signatures (their items, and the
    classes of what follows) differ: the fixpoint is the coarsest partition in which nodes of a
    class have equal signatures, i.e. equal futures (Kanellakis and Smolka's naive refinement).

    Why it matters: the runner's state at a choice point holds every local of every kernel frame,
    dead ones included: ``v = read(); while v < n: v = read()`` reaches its read with the previous
    value of ``v`` in a local, so each value is a loop head of its own, with the same future. The
    lifted thread of one class per future is the same program (the same instruction sequences,
    path for path), with one loop where there were as many as values. ``edge(node, child)``: what
    else the lifting makes of the step from a node to a child (a failed poll iteration drops its
    barrier), part of the signature so that nodes of one class are lifted alike.
    """
    nodes = list(tree_nodes(root))
    pre = {id(n): tuple(_item_signature(i) for i in n.pre) for n in nodes}
    reads = {id(n): _item_signature(n.read) for n in nodes if n.kind == "choice"}
    entry = {id(n): 0 for n in nodes}
    read = {id(n): 0 for n in nodes if n.kind == "choice"}
    while True:
        read_sig = {i: (read[i], reads[i], n.matters, tuple((v, entry[id(c)], edge(n, c)) for v, c in n.children.items()))
                    for n in nodes if n.kind == "choice" for i in (id(n),)}
        new_read = _intern(read_sig)
        entry_sig = {}
        for n in nodes:
            if n.kind == "choice":
                then = ("read", new_read[id(n)])
            elif n.kind == "goto":
                then = ("read", new_read[id(n.target)])
            elif n.kind == "spin":
                then = ("spin", n.spin)
            else:
                then = (n.kind,)
            entry_sig[id(n)] = (entry[id(n)], pre[id(n)], then)
        new_entry = _intern(entry_sig)
        if len(set(new_entry.values())) == len(set(entry.values())) and \
                len(set(new_read.values())) == len(set(read.values())):
            return Futures(new_entry, new_read)
        entry, read = new_entry, new_read


def _intern(signatures: dict) -> dict:
    ids: dict = {}
    return {key: ids.setdefault(sig, len(ids)) for key, sig in signatures.items()}


def tree_nodes(root: Node):
    """Every node of a decision tree (each once)."""
    seen, stack = set(), [root]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        yield n
        stack.extend(n.children.values())
