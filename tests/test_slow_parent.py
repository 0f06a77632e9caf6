"""A node that publishes a large batch in one turn (a Spark commit) to a parent that takes it
slowly but steadily keeps its link (real sockets): the parent, busy reading, still proves it is
alive, and a link that keeps draining is not a stalled one."""

from __future__ import annotations

import socket
from functools import partial

import pytest
import trio

from feds.actor import Actor, Ref, Turn
from feds.dataspace import observe
from feds.driver import Driver
from feds.limits import NetLimits
from feds.runtime import NodeRuntime
from feds.syntax import parse_pattern
from feds.transport import Backpressure, pump
from feds.values import Record, Symbol
from tests.recording import Recorder
from tests.test_backpressure import SlowStream

ROWS = 1500
PAYLOAD = b"x" * 500
"""About 0.8 MB in one turn: at the slow reader's pace (below) the parent needs about 4 s."""


class TricklingStream(SlowStream):
    """A socket stream read 4 KiB at a time with a longer pause before each read (a busy
    parent)."""

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.sleep(0.02)
        return await self.inner.receive_some(4096)


def node(nursery: trio.Nursery, name: str, limits: NetLimits) -> NodeRuntime:
    driver = Driver()
    nursery.start_soon(driver.run)
    runtime = NodeRuntime(driver.scheduler, name, "copy-up", limits=limits)
    runtime.backpressure = Backpressure(high_water=64 * 1024, low_water=16 * 1024)
    return runtime


def small_socket_pair() -> tuple[trio.SocketStream, trio.SocketStream]:
    ends = trio.socket.socketpair()
    for end in ends:
        end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
        end.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    return trio.SocketStream(ends[0]), trio.SocketStream(ends[1])


@pytest.mark.parametrize(
    "limits",
    [
        # the keep-alive alone: the child hears nothing unless the busy parent pings it
        NetLimits(keepalive_interval=0.2, keepalive_timeout=1.5, stall_timeout=100.0),
        # the stall bound alone: the child's link stays above its low water mark for ~4 s
        NetLimits(keepalive_interval=0.2, keepalive_timeout=100.0, stall_timeout=1.5),
    ],
    ids=["keepalive", "stall"],
)
async def test_a_big_turn_to_a_slow_but_steady_parent_keeps_the_link(
    nursery: trio.Nursery, limits: NetLimits
) -> None:
    parent, child = node(nursery, "parent", limits), node(nursery, "child", limits)
    child_end, parent_end = small_socket_pair()
    up, down = child.uplink_relay(), parent.accept_relay()
    nursery.start_soon(partial(pump, backpressure=child.backpressure, limits=limits), child_end, up)
    nursery.start_soon(
        partial(pump, backpressure=parent.backpressure, limits=limits),
        TricklingStream(parent_end),
        down,
    )
    seen = Recorder()

    def watch(turn: Turn) -> None:
        watcher = Ref(Actor(parent.scheduler, "watch").root, seen)
        turn.publish(parent.node.access, observe(parse_pattern("<row $i $p>")[0], watcher))

    Driver.of(parent.scheduler).act(Actor(parent.scheduler, "w").root, watch)  # type: ignore[union-attr]
    with trio.fail_after(10):
        while child.node.parent_service is None:
            await trio.sleep(0.01)

    def publish_all(turn: Turn) -> None:
        for i in range(ROWS):
            turn.publish(child.node.access, Record(Symbol("row"), (i, PAYLOAD)))

    Driver.of(child.scheduler).act(Actor(child.scheduler, "publisher").root, publish_all)  # type: ignore[union-attr]
    with trio.fail_after(60):
        while len(seen.live) < ROWS and not up.closed:
            await trio.sleep(0.05)
    assert not up.closed, up.close_reason
    assert not down.closed, down.close_reason
    assert sorted(v[0] for v in seen.live.values()) == list(range(ROWS))


class CrawlingStream(SlowStream):
    """A socket stream read 1 KiB at a time, 50 ms apart: about 20 KB/s (a very busy parent)."""

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.sleep(0.05)
        return await self.inner.receive_some(1024)


async def test_a_link_paced_by_backpressure_further_up_is_not_cut_as_stalled(
    nursery: trio.Nursery,
) -> None:
    """leaf -> mid -> top, top taking mid's bytes at a crawl: mid's uplink congests, so mid
    stops reading the leaf for longer than ``stall_timeout``. The leaf's uplink then takes
    nothing for that long, but mid is alive and only passing on its parent's pace (it pings the
    leaf while paused): the leaf's link is slow, not stalled, and must be kept."""
    limits = NetLimits(keepalive_interval=0.2, keepalive_timeout=100.0, stall_timeout=1.0)
    top, mid, leaf = (node(nursery, name, limits) for name in ("top", "mid", "leaf"))
    links = []
    for child, parent, stream in ((mid, top, CrawlingStream), (leaf, mid, None)):
        child_end, parent_end = small_socket_pair()
        up, down = child.uplink_relay(), parent.accept_relay()
        links += [up, down]
        for end, relay, runtime in ((child_end, up, child), (parent_end, down, parent)):
            wrapped = stream(end) if stream is not None and runtime is parent else end
            nursery.start_soon(
                partial(pump, backpressure=runtime.backpressure, limits=limits), wrapped, relay
            )
    seen = Recorder()

    def watch(turn: Turn) -> None:
        watcher = Ref(Actor(top.scheduler, "watch").root, seen)
        turn.publish(top.node.access, observe(parse_pattern("<row $i $p>")[0], watcher))

    Driver.of(top.scheduler).act(Actor(top.scheduler, "w").root, watch)  # type: ignore[union-attr]
    with trio.fail_after(10):
        while leaf.node.parent_service is None or mid.node.parent_service is None:
            await trio.sleep(0.01)
    rows = 300  # about 150 KB: some 8 s at top's pace

    def publish_all(turn: Turn) -> None:
        for i in range(rows):
            turn.publish(leaf.node.access, Record(Symbol("row"), (i, PAYLOAD)))

    Driver.of(leaf.scheduler).act(Actor(leaf.scheduler, "publisher").root, publish_all)  # type: ignore[union-attr]
    with trio.fail_after(60):
        while len(seen.live) < rows and not any(relay.closed for relay in links):
            await trio.sleep(0.05)
    assert [relay.close_reason for relay in links if relay.closed] == []
    assert sorted(v[0] for v in seen.live.values()) == list(range(rows))
