"""Workload plans: seeded, placed where asked, selective as asked."""

from __future__ import annotations

from feds.sim.workload import (
    ASSERT,
    SEND,
    SUBSCRIBE,
    UNSUBSCRIBE,
    WorkloadSpec,
    placement_nodes,
    plan,
)
from feds.topology import generate

TREE = generate("balanced:k=2,depth=3", base_port=0)


def test_same_seed_same_plan_other_seed_other_plan() -> None:
    spec = WorkloadSpec(events=200, churn=10.0, wildcards=0.2)
    a, b, c = plan(spec, TREE, 1), plan(spec, TREE, 1), plan(spec, TREE, 2)
    assert a.clients == b.clients and a.actions == b.actions
    assert a.actions != c.actions
    times = [x.time for x in a.actions]
    assert times == sorted(times)


def test_placements() -> None:
    leaves = set(TREE.leaves())
    spec = WorkloadSpec(subscriber_placement="leaves", publisher_placement="clustered")
    p = plan(spec, TREE, 3)
    cluster = set(placement_nodes(TREE, "clustered", spec.cluster))
    assert 2 <= len(cluster) <= 7  # a subtree of about a quarter of the 15 nodes
    for client in p.clients:
        assert client.node in (leaves if client.role == "subscriber" else cluster)


def test_selectivity_zero_and_one() -> None:
    for share in (0.0, 1.0):
        spec = WorkloadSpec(events=300, selectivity=share, churn=5.0)
        subscribed: dict[int, int] = {}
        matched = 0
        for a in plan(spec, TREE, 4).actions:
            if a.kind == SUBSCRIBE:
                subscribed[a.topic] = subscribed.get(a.topic, 0) + 1
            elif a.kind == UNSUBSCRIBE:
                subscribed[a.topic] -= 1
            elif a.kind in (ASSERT, SEND):
                matched += subscribed.get(a.topic, 0) > 0
        assert matched == (0 if share == 0.0 else 300)


def test_churn_keeps_the_number_of_subscriptions() -> None:
    spec = WorkloadSpec(subscriptions=12, events=400, churn=30.0)
    live = 0
    for a in plan(spec, TREE, 5).actions:
        live += {SUBSCRIBE: 1, UNSUBSCRIBE: -1}.get(a.kind, 0)
        assert live <= 12
    assert live == 12


def test_presence_toggles_users() -> None:
    spec = WorkloadSpec(kind="presence", subscribers=5, events=50)
    p = plan(spec, TREE, 6)
    assert len(p.clients) == 5
    tags = [a.tag for a in p.actions if a.kind == ASSERT]
    assert len(tags) == len(set(tags))  # every session has its own name
