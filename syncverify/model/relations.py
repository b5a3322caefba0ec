"""Relations as immutable sets of event pairs, and the handful of operators the model combines.

The operators are named after herd's ``.cat`` language so that ``syncverify.model.ptx`` reads like
``ptx.cat``: ``seq`` is ``;``, ``union`` is ``|``, ``inter`` is ``&``, ``minus`` is ``\\``,
``inverse`` is ``^-1``, ``plus`` is ``+``, ``identity(S)`` is ``[S]``, ``optional`` is ``?``.

>>> r = frozenset({(1, 2), (2, 3)})
>>> sorted(plus(r))
[(1, 2), (1, 3), (2, 3)]
>>> sorted(find_cycle(union(r, frozenset({(3, 1)}))))
[(1, 2), (2, 3), (3, 1)]
"""

from __future__ import annotations

from collections import defaultdict
from typing import Callable, Iterable

EMPTY: frozenset = frozenset()


def union(*relations: frozenset) -> frozenset:
    """``r1 | r2 | ...``."""
    out: set = set()
    for r in relations:
        out |= r
    return frozenset(out)


def inter(r1: frozenset, r2: frozenset) -> frozenset:
    """``r1 & r2``."""
    return r1 & r2


def minus(r1: frozenset, r2: frozenset) -> frozenset:
    """``r1 \\ r2``."""
    return r1 - r2


def inverse(r: frozenset) -> frozenset:
    """``r^-1``."""
    return frozenset((b, a) for a, b in r)


def successors(r: Iterable[tuple]) -> dict:
    """Adjacency map of a relation."""
    out: dict = defaultdict(set)
    for a, b in r:
        out[a].add(b)
    return out


def seq(*relations: frozenset) -> frozenset:
    """``r1 ; r2 ; ...`` (relational composition)."""
    result = relations[0]
    for r in relations[1:]:
        if not result:
            return EMPTY
        # Successors only of the nodes the left side reaches (often few, against a large right side).
        middle = {b for _a, b in result}
        nxt: dict = {}
        for b, c in r:
            if b in middle:
                nxt.setdefault(b, []).append(c)
        result = frozenset((a, c) for a, b in result for c in nxt.get(b, ()))
    return result


def identity(events: Iterable) -> frozenset:
    """``[S]``: the identity relation on a set of events."""
    return frozenset((e, e) for e in events)


def restrict(r: frozenset, domain: Callable | None = None, codomain: Callable | None = None) -> frozenset:
    """``[D] ; r ; [C]`` with ``D``/``C`` given as predicates (cheaper than two ``seq``)."""
    return frozenset(
        (a, b) for a, b in r if (domain is None or domain(a)) and (codomain is None or codomain(b))
    )


def optional(r: frozenset, events: Iterable) -> frozenset:
    """``r?``: ``r`` or the identity on ``events``."""
    return r | identity(events)


def reach_masks(successor_lists: list[list[int]]) -> list[int]:
    """The transitive closure of a relation over the nodes ``0 .. n-1`` as bit masks: bit ``j`` of
    ``masks[i]`` is set when ``j`` is reachable from ``i`` in one or more steps.

    ``successor_lists[i]`` lists the direct successors of ``i``; cycles are allowed (a node on a
    cycle reaches itself). Each node's mask is the union of its successors' masks and bits, taken
    in depth-first postorder (successors first), repeated until nothing changes: one pass and a
    check for an acyclic relation, a few more around cycles. It costs one integer ``|`` per edge
    and pass, where a search from every node costs one step per reachable pair.

    >>> [bin(m) for m in reach_masks([[1], [2], []])]
    ['0b110', '0b100', '0b0']
    """
    n = len(successor_lists)
    order: list[int] = []
    visited = [False] * n
    for root in range(n):
        if visited[root]:
            continue
        visited[root] = True
        stack = [(root, iter(successor_lists[root]))]
        while stack:
            node, it = stack[-1]
            for child in it:
                if not visited[child]:
                    visited[child] = True
                    stack.append((child, iter(successor_lists[child])))
                    break
            else:
                stack.pop()
                order.append(node)
    direct = [0] * n
    for i, succ in enumerate(successor_lists):
        m = 0
        for j in succ:
            m |= 1 << j
        direct[i] = m
    masks = [0] * n
    changed = True
    while changed:
        changed = False
        for i in order:
            m = direct[i]
            for j in successor_lists[i]:
                m |= masks[j]
            if m != masks[i]:
                masks[i] = m
                changed = True
    return masks


def mask_members(mask: int) -> list[int]:
    """The positions of the set bits of ``mask``, lowest first.

    >>> mask_members(0b10110)
    [1, 2, 4]
    """
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def plus(r: frozenset) -> frozenset:
    """``r+``: transitive closure (computed with :func:`reach_masks`)."""
    if not r:
        return EMPTY
    nodes = list({n for pair in r for n in pair})
    index = {n: i for i, n in enumerate(nodes)}
    successor_lists: list[list[int]] = [[] for _ in nodes]
    for a, b in r:
        successor_lists[index[a]].append(index[b])
    out = []
    for i, mask in enumerate(reach_masks(successor_lists)):
        a = nodes[i]
        out.extend((a, nodes[j]) for j in mask_members(mask))
    return frozenset(out)


def find_cycle(r: Iterable[tuple]) -> list[tuple] | None:
    """One cycle of ``r`` as a list of edges (``networkx.find_cycle`` style), or None if acyclic."""
    nxt = successors(r)
    colour: dict = {}
    for root in list(nxt):
        if root in colour:
            continue
        stack = [(root, iter(sorted(nxt[root], key=repr)))]
        path = [root]
        colour[root] = 1
        while stack:
            node, it = stack[-1]
            child = next(it, None)
            if child is None:
                colour[node] = 2
                stack.pop()
                path.pop()
                continue
            state = colour.get(child)
            if state == 1:
                cyc = path[path.index(child):] + [child]
                return list(zip(cyc, cyc[1:]))
            if state is None:
                colour[child] = 1
                path.append(child)
                stack.append((child, iter(sorted(nxt.get(child, ()), key=repr))))
    return None


def is_acyclic(r: Iterable[tuple]) -> bool:
    """``acyclic r`` (Kahn's algorithm: what :func:`find_cycle` answers, without building the cycle).

    >>> is_acyclic({(1, 2), (2, 3)}), is_acyclic({(1, 2), (2, 1)})
    (True, False)
    """
    nxt = successors(r)
    indegree: dict = {}
    for a, targets in nxt.items():
        indegree.setdefault(a, 0)
        for b in targets:
            indegree[b] = indegree.get(b, 0) + 1
    ready = [a for a, d in indegree.items() if d == 0]
    removed = 0
    while ready:
        a = ready.pop()
        removed += 1
        for b in nxt.get(a, ()):
            indegree[b] -= 1
            if indegree[b] == 0:
                ready.append(b)
    return removed == len(indegree)


def reflexive_pairs(r: Iterable[tuple]) -> list[tuple]:
    """The pairs ``(a, a)`` of ``r``: the evidence against ``irreflexive r``."""
    return [(a, b) for a, b in r if a == b]
