"""The lower bound: Steiner subtree sizes against brute force on small random trees."""

from __future__ import annotations

import itertools

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from feds.sim.bound import TopicBound, TreeMetric, steiner_edges_brute

trees = st.integers(1, 14).flatmap(
    lambda n: st.tuples(*[st.integers(0, i) for i in range(n - 1)]).map(list)
)


def parents_of(shape: list[int]) -> dict[str, str | None]:
    """``shape[i]`` is the parent of node ``i + 1`` (node 0 is the root)."""
    out: dict[str, str | None] = {"n0": None}
    for child, parent in enumerate(shape, start=1):
        out[f"n{child}"] = f"n{parent}"
    return out


def union_of_paths(parents: dict[str, str | None], terminals: set[str]) -> int:
    """Independent brute force: edges on the union of tree paths between the terminals."""
    tree = nx.Graph([(c, p) for c, p in parents.items() if p is not None])
    tree.add_nodes_from(parents)
    edges: set[frozenset] = set()
    ordered = sorted(terminals)
    for a in ordered:
        for b in ordered:
            path = nx.shortest_path(tree, a, b)
            edges.update(frozenset(e) for e in itertools.pairwise(path))
    return len(edges)


@settings(max_examples=150, deadline=None)
@given(shape=trees, data=st.data())
def test_steiner_edges_agree_with_brute_force(shape: list[int], data: st.DataObject) -> None:
    parents = parents_of(shape)
    names = list(parents)
    terminals = set(data.draw(st.lists(st.sampled_from(names), max_size=len(names))))
    metric = TreeMetric(parents)
    fast = metric.steiner_edges(metric.index[t] for t in terminals)
    assert fast == steiner_edges_brute(parents, terminals) == union_of_paths(parents, terminals)


@settings(max_examples=150, deadline=None)
@given(shape=trees, data=st.data())
def test_adding_a_source_to_a_subscriber_set(shape: list[int], data: st.DataObject) -> None:
    parents = parents_of(shape)
    names = list(parents)
    subscribers = set(data.draw(st.lists(st.sampled_from(names), max_size=len(names))))
    source = data.draw(st.sampled_from(names))
    metric = TreeMetric(parents)
    bound = TopicBound(metric, [metric.index[s] for s in subscribers])
    expected = 0 if not subscribers else union_of_paths(parents, subscribers | {source})
    assert bound.with_source(metric.index[source]) == expected


@settings(max_examples=100, deadline=None)
@given(shape=trees, data=st.data())
def test_distances_agree_with_networkx(shape: list[int], data: st.DataObject) -> None:
    parents = parents_of(shape)
    names = list(parents)
    a, b = data.draw(st.sampled_from(names)), data.draw(st.sampled_from(names))
    tree = nx.Graph([(c, p) for c, p in parents.items() if p is not None])
    tree.add_nodes_from(parents)
    metric = TreeMetric(parents)
    assert metric.distance(metric.index[a], metric.index[b]) == nx.shortest_path_length(tree, a, b)


def test_a_hand_computed_example() -> None:
    #        n0
    #       /  \
    #     n1    n2
    #    /  \     \
    #  n3    n4    n5
    parents = {"n0": None, "n1": "n0", "n2": "n0", "n3": "n1", "n4": "n1", "n5": "n2"}
    metric = TreeMetric(parents)
    idx = metric.index
    # n3 → n4 and n5: n3-n1, n1-n4, n1-n0, n0-n2, n2-n5.
    assert TopicBound(metric, [idx["n4"], idx["n5"]]).with_source(idx["n3"]) == 5
    # A subscriber at the source itself costs nothing.
    assert TopicBound(metric, [idx["n3"]]).with_source(idx["n3"]) == 0
    assert TopicBound(metric, []).with_source(idx["n3"]) == 0
