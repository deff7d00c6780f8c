"""odradek.graphs: Tarjan's strongly connected components, iteratively."""

from __future__ import annotations

from odradek.graphs import strongly_connected_components


def test_components_of_a_small_graph() -> None:
    graph = {1: [2], 2: [3], 3: [1, 4], 4: [5], 5: [4], 6: [6], 7: []}
    comps = strongly_connected_components(graph)
    assert sorted(sorted(c) for c in comps) == [[1, 2, 3], [4, 5], [6], [7]]
    # a component is closed before any component that reaches it
    order = [min(c) for c in comps]
    assert order.index(4) < order.index(1)


def test_successors_that_are_not_keys_and_repeated_edges() -> None:
    comps = strongly_connected_components({"a": ["b", "b"], "b": ["a", "c"]})
    assert sorted(sorted(c) for c in comps) == [["a", "b"], ["c"]]


def test_a_deep_chain_and_a_long_cycle_need_no_recursion() -> None:
    n = 50_000
    chain = {i: [i + 1] for i in range(n)}
    assert len(strongly_connected_components(chain)) == n + 1
    ring = {i: [(i + 1) % n] for i in range(n)}
    [comp] = strongly_connected_components(ring)
    assert len(comp) == n
