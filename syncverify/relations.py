"""Relations as immutable sets of event pairs, and the handful of operators the model combines.

The operators are named after herd's ``.cat`` language so that ``syncverify.ptx`` reads like
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
from typing import Callable, Iterable, TypeVar

E = TypeVar("E")
Relation = frozenset  # frozenset[tuple[E, E]]

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
        nxt = successors(r)
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


def plus(r: frozenset) -> frozenset:
    """``r+``: transitive closure."""
    nxt = successors(r)
    out: set = set()
    for start in list(nxt):
        stack = list(nxt[start])
        seen: set = set()
        while stack:
            b = stack.pop()
            if b in seen:
                continue
            seen.add(b)
            out.add((start, b))
            stack.extend(nxt.get(b, ()))
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
    """``acyclic r``."""
    return find_cycle(r) is None


def reflexive_pairs(r: Iterable[tuple]) -> list[tuple]:
    """The pairs ``(a, a)`` of ``r``: the evidence against ``irreflexive r``."""
    return [(a, b) for a, b in r if a == b]
