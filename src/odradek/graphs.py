"""Strongly connected components of a directed graph (Tarjan's algorithm, iterative so that a deep
graph does not meet Python's recursion limit).

Two users: the import-layering check (odradek.layers: modules importing each other in a circle) and
the history checker (odradek.verify.checker: write/read dependency cycles, Adya's G0 and G1c).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol, TypeVar


class _Sortable(Protocol):
    def __lt__(self, other: Any, /) -> bool: ...


N = TypeVar("N", bound=_Sortable)

__all__ = ["strongly_connected_components"]


def strongly_connected_components(graph: Mapping[N, Iterable[N]]) -> list[set[N]]:
    """Every strongly connected component of ``graph`` (node -> successors; a successor need not be
    a key), single nodes included, in the order Tarjan's algorithm closes them. Nodes and successors
    are visited in sorted order, so the result is the same from run to run."""
    succ: dict[N, list[N]] = {}
    for node, targets in graph.items():
        succ.setdefault(node, []).extend(targets)
        for t in targets:
            succ.setdefault(t, [])
    index: dict[N, int] = {}
    low: dict[N, int] = {}
    stack: list[N] = []
    on_stack: set[N] = set()
    out: list[set[N]] = []
    for root in sorted(succ):
        if root in index:
            continue
        work: list[tuple[N, Iterator[N]]] = [(root, iter(sorted(set(succ[root]))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(set(succ[nxt])))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    comp: set[N] = set()
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        comp.add(top)
                        if top == node:
                            break
                    out.append(comp)
    return out
