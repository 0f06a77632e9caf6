"""The lower bound on link traffic: Steiner subtrees of the spanning tree.

For an event published at node ``s`` and matched by subscribers at nodes ``M``, any protocol that
delivers it must carry it across every edge of the smallest subtree of the spanning tree that
joins ``s`` to every node of ``M`` (in a tree that subtree is unique: the union of the paths from
``s`` to each node of ``M``). Its edge count is the event's bound.

Counting uses a classic identity: list the terminals in depth-first (preorder) order
``k1 .. km``; walking ``k1 → k2 → … → km → k1`` along tree paths crosses every edge of their
Steiner subtree exactly twice, so the subtree has ``(d(k1,k2) + … + d(km,k1)) / 2`` edges.
Distances come from lowest common ancestors, found in O(1) with a sparse table over the Euler
tour. :class:`TopicBound` keeps that cyclic sum per subscriber set, so adding the source of an
event costs one binary search and three distance look-ups.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping

__all__ = ["TopicBound", "TreeMetric", "steiner_edges_brute"]


class TreeMetric:
    """Distances and Steiner subtree sizes in a rooted tree given by ``{node: parent}``."""

    def __init__(self, parents: Mapping[str, str | None]) -> None:
        names = list(parents)
        self.index = {name: i for i, name in enumerate(names)}
        self.names = names
        children: list[list[int]] = [[] for _ in names]
        root = -1
        for name, parent in parents.items():
            if parent is None:
                root = self.index[name]
            else:
                children[self.index[parent]].append(self.index[name])
        if root < 0:
            raise ValueError("the tree has no root")
        n = len(names)
        self.parent = [-1] * n
        self.depth = [0] * n
        self.tin = [0] * n
        """Preorder position of each node."""
        self._first = [0] * n
        euler: list[int] = []
        order = 0
        stack: list[tuple[int, int]] = [(root, 0)]
        while stack:
            node, i = stack.pop()
            if i == 0:
                self.tin[node] = order
                order += 1
                self._first[node] = len(euler)
            euler.append(node)
            if i < len(children[node]):
                child = children[node][i]
                stack.append((node, i + 1))
                self.parent[child] = node
                self.depth[child] = self.depth[node] + 1
                stack.append((child, 0))
        if order != n:
            raise ValueError("the parent map is not one tree")
        self._sparse = self._build_sparse(euler)

    def _build_sparse(self, euler: list[int]) -> list[list[int]]:
        """``table[j][i]``: the shallowest node of ``euler[i : i + 2**j]``."""
        depth = self.depth
        table = [euler]
        span = 1
        while 2 * span <= len(euler):
            prev = table[-1]
            row = []
            for i in range(len(euler) - 2 * span + 1):
                a, b = prev[i], prev[i + span]
                row.append(a if depth[a] <= depth[b] else b)
            table.append(row)
            span *= 2
        return table

    def lca(self, a: int, b: int) -> int:
        """The lowest common ancestor of nodes ``a`` and ``b`` (indexes)."""
        i, j = self._first[a], self._first[b]
        if i > j:
            i, j = j, i
        level = (j - i + 1).bit_length() - 1
        row = self._sparse[level]
        x, y = row[i], row[j - (1 << level) + 1]
        return x if self.depth[x] <= self.depth[y] else y

    def distance(self, a: int, b: int) -> int:
        """Edges on the tree path between nodes ``a`` and ``b`` (indexes)."""
        if a == b:
            return 0
        depth = self.depth
        return depth[a] + depth[b] - 2 * depth[self.lca(a, b)]

    def steiner_edges(self, nodes: Iterable[int]) -> int:
        """Edges of the smallest subtree joining ``nodes`` (indexes); 0 for fewer than two."""
        order = sorted(set(nodes), key=self.tin.__getitem__)
        if len(order) < 2:
            return 0
        total = sum(self.distance(order[i - 1], order[i]) for i in range(len(order)))
        return total // 2


class TopicBound:
    """The Steiner bound for one set of subscriber nodes, joined by one more node at a time.

    Holds the subscriber nodes sorted by preorder position and the cyclic sum of distances
    between neighbours in that order; :meth:`with_source` inserts the source virtually.
    """

    __slots__ = ("cycle", "metric", "nodes", "tins")

    def __init__(self, metric: TreeMetric, nodes: Iterable[int]) -> None:
        self.metric = metric
        self.nodes = sorted(set(nodes), key=metric.tin.__getitem__)
        self.tins = [metric.tin[n] for n in self.nodes]
        ring = self.nodes
        self.cycle = sum(metric.distance(ring[i - 1], ring[i]) for i in range(len(ring)))

    def with_source(self, source: int) -> int:
        """Edges of the smallest subtree joining ``source`` to every subscriber node."""
        nodes = self.nodes
        if not nodes:
            return 0
        metric = self.metric
        tin = metric.tin[source]
        i = bisect.bisect_left(self.tins, tin)
        if i < len(nodes) and nodes[i] == source:
            return self.cycle // 2
        before, after = nodes[i - 1], nodes[i % len(nodes)]
        d = metric.distance
        return (self.cycle - d(before, after) + d(before, source) + d(source, after)) // 2


def steiner_edges_brute(parents: Mapping[str, str | None], terminals: Iterable[str]) -> int:
    """Slow reference: edges whose removal leaves terminals on both sides (for tests)."""
    wanted = set(terminals)
    below: dict[str, set[str]] = {name: set() for name in parents}
    for name in parents:
        if name in wanted:
            node: str | None = name
            while node is not None:
                below[node].add(name)
                node = parents[node]
    return sum(
        1
        for name, parent in parents.items()
        if parent is not None and 0 < len(below[name]) < len(wanted)
    )
