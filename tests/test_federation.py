"""The transparency property: a federation behaves like one dataspace, for every protocol.

Random trees, random workloads of clients attaching at random nodes. After every step the overlay
is run until quiet; then every observer's current matches must equal what one dataspace gives,
every message must have reached each matching observer exactly once, and when every client has
left, every fragment must be back to its empty state.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feds.actor import Scheduler
from feds.node import Node, connect_in_process
from feds.pattern_forms import DISCARD, bind, lit, rec_group
from feds.protocols import protocol_names
from feds.relay import Relay, exchange
from feds.runtime import NodeRuntime
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


class Overlay:
    """Nodes on one scheduler, linked directly by refs or by relays carrying real frames."""

    def __init__(self, protocol: str, parents: list[int], wire: bool) -> None:
        self.scheduler = Scheduler()
        runtimes = [NodeRuntime(self.scheduler, f"n{i}", protocol) for i in range(len(parents) + 1)]
        self.nodes = [r.node for r in runtimes]
        self.links: list[tuple[Relay, Relay]] = []
        for child, parent in enumerate(parents, start=1):
            if wire:
                self.links.append((runtimes[child].uplink_relay(), runtimes[parent].accept_relay()))
            else:
                connect_in_process(self.scheduler, self.nodes[child], self.nodes[parent])
        self.settle()

    def settle(self) -> None:
        """Run turns and move bytes until nothing is left to do."""
        budget = QUIET
        while True:
            budget -= self.scheduler.run_until_idle(max_turns=budget)
            moved = sum(exchange(a, b) for a, b in self.links)
            if not moved and self.scheduler.idle():
                break
            assert budget > 0, "the overlay never became quiet (a routing loop?)"
        assert not self.scheduler.crashes
        assert not any(a.closed or b.closed for a, b in self.links)


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


def snapshot(nodes: list[Node]) -> list[Counter]:
    return [Counter(node.dataspace.assertions.values()) for node in nodes]


def run_workload(protocol: str, parents: list[int], steps: list, wire: bool) -> None:
    overlay = Overlay(protocol, parents, wire)
    nodes = overlay.nodes
    empty = snapshot(nodes)
    work = Workload(overlay.scheduler)
    ref = Reference()
    expected: dict[int, list] = {}

    def check() -> None:
        overlay.settle()
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
    overlay.settle()
    assert not ref.bag
    assert snapshot(nodes) == empty, "a fragment kept state after every client left"


@pytest.mark.parametrize("protocol", protocol_names())
@given(parents=trees, steps=ops)
def test_federation_is_transparent(protocol: str, parents: list[int], steps: list) -> None:
    run_workload(protocol, parents, steps, wire=False)


@pytest.mark.parametrize("protocol", protocol_names())
@settings(max_examples=max(10, settings.default.max_examples // 4))
@given(parents=trees, steps=ops)
def test_federation_is_transparent_over_the_wire(
    protocol: str, parents: list[int], steps: list
) -> None:
    """The same, with every link a pair of relays exchanging real encoded frames."""
    run_workload(protocol, parents, steps, wire=True)


CHAIN, STAR, BINARY = [0, 1], [0, 0, 0, 0], [0, 0, 1, 1, 2, 2]


@pytest.mark.parametrize("wire", [False, True], ids=["refs", "wire"])
@pytest.mark.parametrize("protocol", protocol_names())
@pytest.mark.parametrize("parents", [CHAIN, STAR, BINARY])
def test_observers_everywhere_see_every_assertion_and_message_once(
    protocol: str, parents: list[int], wire: bool
) -> None:
    overlay = Overlay(protocol, parents, wire)
    nodes = overlay.nodes
    work = Workload(overlay.scheduler)
    clients = [work.attach(node) for node in nodes]
    keys = [work.observe(c, PATTERNS[0]) for c in clients]
    overlay.settle()
    for i, c in enumerate(clients):
        work.send(c, record("a", i))
        work.assert_(c, record("a", i))
    overlay.settle()
    everything = {(i,) for i in range(len(nodes))}
    for c, key in zip(clients, keys, strict=True):
        watcher = c.observers[key][1]
        assert set(watcher.view()) == everything and max(watcher.view().values()) == 1
        assert sorted(watcher.messages) == sorted(everything)


@pytest.mark.parametrize("protocol", protocol_names())
def test_a_subtree_that_disconnects_takes_its_assertions_with_it(protocol: str) -> None:
    overlay = Overlay(protocol, BINARY, wire=True)
    nodes = overlay.nodes
    work = Workload(overlay.scheduler)
    watcher_client = work.attach(nodes[6])
    key = work.observe(watcher_client, PATTERNS[0])
    for i in (3, 4, 5):
        work.assert_(work.attach(nodes[i]), record("a", i))
    overlay.settle()
    watcher = watcher_client.observers[key][1]
    assert set(watcher.view()) == {(3,), (4,), (5,)}
    # The link between node 1 (parent of 3 and 4) and the root is lost: that subtree is cut
    # off from the rest, and everything that crossed the link is retracted on both sides.
    up, down = overlay.links[0]
    up.close("test: link lost")
    down.close("test: link lost")
    overlay.links.pop(0)
    overlay.settle()
    assert set(watcher.view()) == {(5,)}
