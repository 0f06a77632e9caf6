"""Many handles at once: retracting them costs linear work, and node links carry them.

**Retraction.** Retracting many handles at once costs work linear in their number (counted,
not timed).

A client that leaves, a publication replaced in one turn and a link that goes down each retract
every handle involved in one turn, at every node of a 3-node chain (over real relays). The work
is counted as the Python and C calls made while the overlay settles, with handles that count
their own comparisons as calls (so a scan of a list of handles shows up): ten times the handles
must cost about ten times the work, never about a hundred times.

**Limits by role.** A connection bounds its far side's live assertions by the far side's role: a
client's bound is far below a node link's, which carries a whole subtree's publications.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable

import pytest

from feds.actor import Handle, Ref, Scheduler, Turn
from feds.relay import CLIENT, DEFAULT_MAX_HANDLES, PEER, Relay, exchange
from feds.runtime import NodeRuntime
from feds.values import record

SMALL, LARGE = 100, 1000
LINEAR = 20
"""The most that ten times the handles may multiply the work by (linear: ~10; quadratic: ~100)."""


class CountedHandle(int):
    """A handle whose comparisons are calls, so the profiler counts them."""

    __hash__ = int.__hash__

    def __eq__(self, other: object) -> bool:
        return int(self) == other

    def __ne__(self, other: object) -> bool:
        return int(self) != other


class Chain:
    """Nodes n0 <- n1 <- n2 on one scheduler, linked by relays; a client at n2 publishes."""

    def __init__(self, counted: bool = True) -> None:
        self.scheduler = Scheduler()
        if counted:
            self.scheduler._handles = map(CountedHandle, itertools.count(1))  # type: ignore[assignment]
        self.runtimes = [NodeRuntime(self.scheduler, f"n{i}", "copy-up") for i in range(3)]
        r = self.runtimes
        self.links = [(r[1].uplink_relay(), r[0].accept_relay())]
        self.links.append((r[2].uplink_relay(), r[1].accept_relay()))
        target: list[Ref] = []
        self.client = Relay(
            self.scheduler, "c", CLIENT, on_ready=lambda t, h, ref: target.append(ref)
        )
        self.links.append((self.client, r[2].accept_relay()))
        self.settle()
        self.target = target[0]
        self.handles: list[Handle] = []
        self.actor = self.scheduler.spawn(lambda t: None, name="publisher")

    def settle(self) -> None:
        while True:
            self.scheduler.run_until_idle()
            if not sum(exchange(a, b) for a, b in self.links) and self.scheduler.idle():
                return

    def act(self, action: Callable[[Turn], None]) -> None:
        self.scheduler.enqueue(self.actor, self.actor.root, action)
        self.settle()

    def publish(self, n: int, tag: str) -> None:
        def run(t: Turn) -> None:
            self.handles = [t.publish(self.target, record(tag, i)) for i in range(n)]

        self.act(run)

    def at_root(self) -> int:
        return len(self.runtimes[0].node.dataspace)


def calls_to(settle: Callable[[], None]) -> int:
    """The Python and C calls made by ``settle()``."""
    count = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        settle()
    finally:
        sys.setprofile(None)
    return count


def leave(chain: Chain) -> None:
    chain.client.close("leaving")
    chain.settle()


def replace(chain: Chain) -> None:
    old = chain.handles
    n = len(old)

    def run(t: Turn) -> None:
        chain.handles = [t.publish(chain.target, record("y", i)) for i in range(n)]
        for handle in old:
            t.retract(handle)

    chain.act(run)


def link_down(chain: Chain) -> None:
    up, down = chain.links.pop(0)
    up.close("link lost")
    down.close("link lost")
    chain.settle()


@pytest.mark.parametrize("change", [leave, replace, link_down], ids=lambda f: f.__name__)
def test_retracting_many_handles_costs_linear_work(change: Callable[[Chain], None]) -> None:
    work = []
    for n in (SMALL, LARGE):
        chain = Chain()
        empty = chain.at_root()
        chain.publish(n, "x")
        full = chain.at_root()
        assert full >= empty + n
        work.append(calls_to(lambda chain=chain: change(chain)))
        after = chain.at_root()
        assert after == full if change is replace else after <= empty
    assert work[1] < LINEAR * work[0], f"10x the handles cost {work[1] / work[0]:.0f}x the work"


def test_a_publication_of_more_rows_than_a_client_may_hold_crosses_a_3_node_chain() -> None:
    """Published at the leaf node itself (as a Spark leaf does), copy-up carries every row over
    both node links to the root: more than a client connection may hold, within a link's bound."""
    n = DEFAULT_MAX_HANDLES[CLIENT] + 20_000
    chain = Chain(counted=False)
    empty = chain.at_root()
    leaf = chain.runtimes[2].node
    chain.act(lambda t: [t.publish(leaf.access, record("row", i)) for i in range(n)])
    assert not any(a.closed or b.closed for a, b in chain.links)
    assert chain.at_root() >= empty + n
    up, down = chain.links[0]
    assert up.live_handles()[0] + down.live_handles()[0] >= n > DEFAULT_MAX_HANDLES[CLIENT]


def bounded_server(far_role: str, limits: dict[str, int]) -> tuple[Relay, Callable[[int], None]]:
    """A server relay with ``limits`` and a far side of ``far_role``; ``publish(k)`` makes the
    far side assert ``k`` more values at the server and settles."""
    scheduler = Scheduler()
    server = Relay(scheduler, "server", PEER, max_handles=limits)
    target: list[Ref] = []
    far = Relay(scheduler, "far", far_role, on_ready=lambda t, h, ref: target.append(ref))
    actor = scheduler.spawn(lambda t: None)

    def publish(k: int) -> None:
        scheduler.enqueue(actor, actor.root, lambda t: [t.publish(target[0], i) for i in range(k)])
        while True:
            scheduler.run_until_idle()
            if not exchange(far, server) and scheduler.idle():
                return

    publish(0)
    return server, publish


@pytest.mark.parametrize("role", [CLIENT, PEER])
def test_the_handle_bound_follows_the_far_sides_role(role: str) -> None:
    limits = {CLIENT: 2, PEER: 5}
    server, publish = bounded_server(role, limits)
    assert server.max_handles == limits[role]
    publish(limits[role])
    assert not server.closed and server.live_handles()[0] == limits[role]
    publish(1)
    assert server.closed and server.close_reason == f"too many live handles (max {limits[role]})"
