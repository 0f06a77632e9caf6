"""A node that publishes a large batch in one turn (a Spark commit) to a parent that takes it
slowly but steadily keeps its link (real sockets): the parent, busy reading, still proves it is
alive, and a link that keeps draining is not a stalled one."""

from __future__ import annotations

import socket
from collections.abc import Callable
from functools import partial

import pytest
import trio

from feds.actor import Actor, Ref, Turn
from feds.dataspace import observe
from feds.driver import Driver
from feds.limits import NetLimits
from feds.relay import Relay
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


def link(
    nursery: trio.Nursery,
    child: NodeRuntime,
    parent: NodeRuntime,
    limits: NetLimits,
    parent_reads: Callable[[trio.SocketStream], trio.abc.Stream] | None = None,
) -> list[Relay]:
    """Link ``child`` to ``parent`` over small socket buffers; ``parent_reads`` wraps the
    parent's end (a slow reader). Returns the two relays."""
    child_end, parent_end = small_socket_pair()
    up, down = child.uplink_relay(), parent.accept_relay()
    parent_stream = parent_end if parent_reads is None else parent_reads(parent_end)
    for stream, relay, runtime in ((child_end, up, child), (parent_stream, down, parent)):
        nursery.start_soon(
            partial(pump, backpressure=runtime.backpressure, limits=limits), stream, relay
        )
    return [up, down]


def watch_rows(runtime: NodeRuntime) -> Recorder:
    """A recorder observing ``<row $i $p>`` at ``runtime``'s node."""
    seen = Recorder()

    def watch(turn: Turn) -> None:
        watcher = Ref(Actor(runtime.scheduler, "watch").root, seen)
        turn.publish(runtime.node.access, observe(parse_pattern("<row $i $p>")[0], watcher))

    Driver.of(runtime.scheduler).act(Actor(runtime.scheduler, "w").root, watch)  # type: ignore[union-attr]
    return seen


async def publish_in_one_turn(
    runtime: NodeRuntime, rows: int, seen: Recorder, links: list[Relay]
) -> None:
    """Publish ``rows`` rows at ``runtime``'s node in one turn, once linked; wait until ``seen``
    has them all (or a link closed) and check that no link closed."""
    with trio.fail_after(10):
        while runtime.node.parent_service is None:
            await trio.sleep(0.01)

    def publish_all(turn: Turn) -> None:
        for i in range(rows):
            turn.publish(runtime.node.access, Record(Symbol("row"), (i, PAYLOAD)))

    Driver.of(runtime.scheduler).act(Actor(runtime.scheduler, "publisher").root, publish_all)  # type: ignore[union-attr]
    with trio.fail_after(60):
        while len(seen.live) < rows and not any(relay.closed for relay in links):
            await trio.sleep(0.05)
    assert [relay.close_reason for relay in links if relay.closed] == []
    assert sorted(v[0] for v in seen.live.values()) == list(range(rows))


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
    links = link(nursery, child, parent, limits, TricklingStream)
    await publish_in_one_turn(child, ROWS, watch_rows(parent), links)


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
    links = link(nursery, mid, top, limits, CrawlingStream) + link(nursery, leaf, mid, limits)
    seen = watch_rows(top)
    with trio.fail_after(10):
        while mid.node.parent_service is None:
            await trio.sleep(0.01)
    await publish_in_one_turn(leaf, 300, seen, links)  # about 150 KB: some 8 s at top's pace
