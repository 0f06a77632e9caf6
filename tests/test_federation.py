"""The transparency property: a federation behaves like one dataspace, for every protocol.

Random trees, random workloads of clients attaching at random nodes. After every step the overlay
is run until quiet; then every observer's current matches must equal what one dataspace gives,
every message must have reached each matching observer exactly once, and when every client has
left, every fragment must be back to its empty state.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from feds.actor import Scheduler
from feds.node import Node, connect_in_process
from feds.pattern_forms import DISCARD, bind, lit, rec_group
from feds.protocols import protocol_names
from feds.sim.reference import Reference, Workload
from feds.values import Symbol, record

A, B = Symbol("a"), Symbol("b")
VALUES = [record("a", 0), record("a", 1), record("b", 0, 1), record("b", 1, 1)]
PATTERNS = [
    rec_group(A, [bind()]),
    rec_group(A, [lit(1)]),
    rec_group(B, [bind(), DISCARD]),
    rec_group(B, [lit(1), bind()]),
]
QUIET = 500_000
"""Turns an overlay may take to become quiet after one step; more means a routing loop."""


def build(protocol: str, parents: list[int]) -> tuple[Scheduler, list[Node]]:
    scheduler = Scheduler()
    nodes = [Node(scheduler, f"n{i}", protocol) for i in range(len(parents) + 1)]
    scheduler.run_until_idle()
    for child, parent in enumerate(parents, start=1):
        connect_in_process(scheduler, nodes[child], nodes[parent])
    scheduler.run_until_idle()
    return scheduler, nodes


trees = st.integers(0, 11).flatmap(
    lambda n: st.tuples(*[st.integers(0, i) for i in range(n)]).map(list)
)
KINDS = ["attach"] * 3 + ["assert"] * 4 + ["retract"] * 2 + ["observe"] * 3 + ["unobserve"]
KINDS += ["send"] * 4 + ["leave"]
ops = st.lists(
    st.tuples(st.sampled_from(KINDS), st.integers(0, 1000), st.integers(0, 1000)),
    min_size=5,
    max_size=50,
)


def settle(scheduler: Scheduler) -> None:
    scheduler.run_until_idle(max_turns=QUIET)
    assert scheduler.idle(), "the overlay never became quiet (a routing loop?)"
    assert not scheduler.crashes


def snapshot(nodes: list[Node]) -> list[Counter]:
    return [Counter(node.dataspace.assertions.values()) for node in nodes]


def run_workload(protocol: str, parents: list[int], steps: list) -> None:
    scheduler, nodes = build(protocol, parents)
    empty = snapshot(nodes)
    work = Workload(scheduler)
    ref = Reference()
    expected: dict[int, list] = {}

    def check() -> None:
        settle(scheduler)
        for client in work.clients:
            for key, (_h, watcher, pattern) in client.observers.items():
                assert watcher.view() == ref.view(pattern), (protocol, parents, pattern)
                assert watcher.messages == expected[key], (protocol, parents, pattern)

    for kind, x, y in steps:
        if kind == "attach" or not work.clients:
            work.attach(nodes[x % len(nodes)])
        else:
            client = work.clients[x % len(work.clients)]
            if kind == "assert":
                value = VALUES[y % len(VALUES)]
                work.assert_(client, value)
                ref.bag[value] += 1
            elif kind == "retract" and client.assertions:
                ref.remove(
                    work.retract(client, sorted(client.assertions)[y % len(client.assertions)])
                )
            elif kind == "observe":
                expected[work.observe(client, PATTERNS[y % len(PATTERNS)])] = []
            elif kind == "unobserve" and client.observers:
                work.unobserve(client, sorted(client.observers)[y % len(client.observers)])
            elif kind == "send":
                message = VALUES[y % len(VALUES)]
                work.send(client, message)
                for c in work.clients:
                    for key, (_h, _w, pattern) in c.observers.items():
                        expected[key] += ref.deliveries(pattern, message)
            elif kind == "leave":
                ref.remove(*work.disconnect(client))
        check()
    for client in list(work.clients):
        ref.remove(*work.disconnect(client))
    settle(scheduler)
    assert not ref.bag
    assert snapshot(nodes) == empty, "a fragment kept state after every client left"


@pytest.mark.parametrize("protocol", protocol_names())
@given(parents=trees, steps=ops)
def test_federation_is_transparent(protocol: str, parents: list[int], steps: list) -> None:
    run_workload(protocol, parents, steps)


CHAIN, STAR, BINARY = [0, 1], [0, 0, 0, 0], [0, 0, 1, 1, 2, 2]


@pytest.mark.parametrize("protocol", protocol_names())
@pytest.mark.parametrize("parents", [CHAIN, STAR, BINARY])
def test_observers_everywhere_see_every_assertion_and_message_once(
    protocol: str, parents: list[int]
) -> None:
    scheduler, nodes = build(protocol, parents)
    work = Workload(scheduler)
    clients = [work.attach(node) for node in nodes]
    keys = [work.observe(c, PATTERNS[0]) for c in clients]
    settle(scheduler)
    for i, c in enumerate(clients):
        work.send(c, record("a", i))
        work.assert_(c, record("a", i))
    settle(scheduler)
    everything = {(i,) for i in range(len(nodes))}
    for c, key in zip(clients, keys, strict=True):
        watcher = c.observers[key][1]
        assert set(watcher.view()) == everything and max(watcher.view().values()) == 1
        assert sorted(watcher.messages) == sorted(everything)


@pytest.mark.parametrize("protocol", protocol_names())
def test_a_subtree_that_disconnects_takes_its_assertions_with_it(protocol: str) -> None:
    scheduler, nodes = build(protocol, BINARY)
    work = Workload(scheduler)
    watcher_client = work.attach(nodes[6])
    key = work.observe(watcher_client, PATTERNS[0])
    for i in (3, 4, 5):
        work.assert_(work.attach(nodes[i]), record("a", i))
    settle(scheduler)
    watcher = watcher_client.observers[key][1]
    assert set(watcher.view()) == {(3,), (4,), (5,)}
    # Node 1 (parent of 3 and 4) stops: the subtree under it is cut off from the rest.
    scheduler.enqueue(nodes[1].actor, nodes[1].facet, lambda t: t.stop_actor())
    settle(scheduler)
    assert set(watcher.view()) == {(5,)}
