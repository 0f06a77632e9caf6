"""Backpressure over real TCP on 127.0.0.1: a slow reader bounds what a node holds for it."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from functools import partial

import pytest
import trio

from feds import client
from feds.actor import Actor, Ref, Scheduler, Turn
from feds.blocking import BATCH, BlockingClient
from feds.dataspace import observe
from feds.driver import Driver
from feds.relay import CLIENT, Hello, Relay
from feds.runtime import NodeRuntime
from feds.syntax import parse_pattern
from feds.transport import LOW_WATER, RECEIVE_SIZE, Backpressure, backlog, pump
from feds.values import Record, Symbol
from tests.recording import Recorder
from tests.threaded import served_in_thread

BENCH = Symbol("bench")
HIGH, LOW = 64 * 1024, 16 * 1024
MESSAGES = 400
PAYLOAD = 8192


class SlowStream(trio.abc.HalfCloseableStream):
    """A TCP stream whose reader takes a little at a time, with a pause before each read."""

    def __init__(self, inner: trio.SocketStream) -> None:
        self.inner = inner

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.sleep(0.001)
        return await self.inner.receive_some(4096)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        await self.inner.send_eof()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def slow_tcp(port: int, send_buffer: int | None = None) -> SlowStream:
    """A connection to ``port`` with a small receive buffer, so the kernel holds little."""
    sock = trio.socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    if send_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
    await sock.connect(("127.0.0.1", port))
    return SlowStream(trio.SocketStream(sock))


async def slow_subscriber(nursery: trio.Nursery, port: int, name: str, pattern: str) -> Recorder:
    """A client of its own over a :class:`SlowStream`, observing ``pattern`` at the node."""
    driver = Driver(Scheduler())
    nursery.start_soon(driver.run)
    seen = Recorder()
    synced = trio.Event()

    def ready(turn: Turn, hello: Hello, access: Ref) -> None:
        watcher = Ref(Actor(driver.scheduler, "watch").root, seen)
        turn.publish(access, observe(parse_pattern(pattern)[0], watcher))
        turn.sync(access, lambda t: synced.set())

    relay = Relay(driver.scheduler, name, CLIENT, on_ready=ready)
    nursery.start_soon(pump, await slow_tcp(port), relay)
    with trio.fail_after(10):
        await synced.wait()
    return seen


async def node_with_slow_subscriber(nursery: trio.Nursery) -> tuple[NodeRuntime, int, Recorder]:
    """A node with small water marks, its port, and a slow subscriber to ``<bench $p>`` there."""
    node_driver = Driver()
    nursery.start_soon(node_driver.run)
    runtime = NodeRuntime(node_driver.scheduler, "n", "observer-flood")
    runtime.backpressure = Backpressure(high_water=HIGH, low_water=LOW)
    port = await nursery.start(runtime.serve, "127.0.0.1", 0)
    return runtime, port, await slow_subscriber(nursery, port, "slow", "<bench $p>")


async def slowly_linked_nodes(
    nursery: trio.Nursery, names: tuple[str, str]
) -> tuple[list[NodeRuntime], list[int]]:
    """Two nodes with small water marks (and their ports), the second a child of the first over
    a link with small kernel buffers that it reads slowly, so the link's backlog shows."""
    runtimes, ports = [], []
    for name in names:
        driver = Driver()
        nursery.start_soon(driver.run)
        runtime = NodeRuntime(driver.scheduler, name, "observer-flood")
        runtime.backpressure = Backpressure(high_water=HIGH, low_water=LOW)
        ports.append(await nursery.start(runtime.serve, "127.0.0.1", 0))
        runtimes.append(runtime)
    child = runtimes[1]
    nursery.start_soon(
        partial(pump, backpressure=child.backpressure),
        await slow_tcp(ports[0], 4096),
        child.uplink_relay(),
    )
    with trio.fail_after(10):
        while child.node.parent_service is None:
            await trio.sleep(0.01)
    return runtimes, ports


async def test_a_slow_child_node_pauses_the_node_instead_of_filling_its_memory(
    nursery: trio.Nursery,
) -> None:
    """A node link is lossless: a child that reads slowly makes its parent stop reading the
    publisher instead of growing the backlog (a slow *client* is cut instead, see
    ``tests/test_slow_client.py``)."""
    (parent, _), ports = await slowly_linked_nodes(nursery, ("parent", "child"))
    seen = await slow_subscriber(nursery, ports[1], "slow", "<bench $p>")
    (to_child,) = [r for r in parent.relays if r.remote_hello and r.remote_hello.name == "child"]

    async with client.connect(f"127.0.0.1:{ports[0]}", name="fast") as pub:
        await pub.sync()
        payloads = [i.to_bytes(4, "big") * (PAYLOAD // 4) for i in range(MESSAGES)]
        for p in payloads:
            pub.send(Record(BENCH, (p,)))
            await trio.sleep(0)
        with trio.fail_after(60):
            while len(seen.events) < MESSAGES:
                await trio.sleep(0.01)

    assert seen.events == [("!", (p,)) for p in payloads]  # every message, in order
    peak = backlog(to_child)[1]
    assert peak > HIGH  # the child was slow enough to congest the link...
    assert peak <= HIGH + 2 * RECEIVE_SIZE  # ...and the parent stopped reading the publisher
    assert not to_child.closed


class DeafStream(SlowStream):
    """A TCP stream that stops being read from once ``deaf`` is set."""

    deaf = False

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self.deaf:
            await trio.sleep_forever()
        return await self.inner.receive_some(max_bytes)


async def test_a_far_side_that_sends_but_never_reads_is_closed_as_a_slow_consumer(
    nursery: trio.Nursery,
) -> None:
    node_driver = Driver()
    nursery.start_soon(node_driver.run)
    runtime = NodeRuntime(node_driver.scheduler, "n", "observer-flood")
    runtime.backpressure = Backpressure(high_water=HIGH, low_water=LOW, max_backlog=4 * HIGH)
    port = await nursery.start(runtime.serve, "127.0.0.1", 0)

    # A client that observes what it sends itself, so every message it sends comes back to it.
    driver = Driver(Scheduler())
    nursery.start_soon(driver.run)
    access: list[Ref] = []

    def ready(turn: Turn, hello: Hello, remote: Ref) -> None:
        watcher = Ref(Actor(driver.scheduler, "watch").root, Recorder())
        turn.publish(remote, observe(parse_pattern("<bench $p>")[0], watcher))
        access.append(remote)

    deaf = Relay(driver.scheduler, "deaf", CLIENT, on_ready=ready)
    stream = DeafStream(await slow_tcp(port))
    nursery.start_soon(pump, stream, deaf)
    with trio.fail_after(10):
        while not access:
            await trio.sleep(0.01)
    stream.deaf = True
    (to_deaf,) = [r for r in runtime.relays if r.remote_hello and r.remote_hello.name == "deaf"]

    actor = Actor(driver.scheduler, "sender")
    payload = Record(BENCH, (b"x" * PAYLOAD,))
    with trio.fail_after(60):
        while not to_deaf.closed:
            driver.act(actor.root, lambda t: t.message(access[0], payload))
            await trio.sleep(0)
    assert (to_deaf.close_reason or "").startswith("slow consumer")


async def test_two_nodes_congested_towards_each_other_do_not_deadlock(
    nursery: trio.Nursery,
) -> None:
    (a, b), ports = await slowly_linked_nodes(nursery, ("a", "b"))
    # Publishers at both ends flood the slow link between them both ways (the slow readers
    # at both nodes are clients: they no longer pause their node, only the link does).
    subscribers = [await slow_subscriber(nursery, port, "slow", "<bench $i $p>") for port in ports]
    count = MESSAGES // 2
    async with (
        client.connect(f"127.0.0.1:{ports[0]}", name="at-a") as at_a,
        client.connect(f"127.0.0.1:{ports[1]}", name="at-b") as at_b,
    ):
        await at_a.sync()
        await at_b.sync()
        for i in range(count):
            at_a.send(Record(BENCH, (i, b"a" * PAYLOAD)))
            at_b.send(Record(BENCH, (i, b"b" * PAYLOAD)))
            await trio.sleep(0)
        with trio.fail_after(60):
            while any(len(seen.events) < 2 * count for seen in subscribers):
                await trio.sleep(0.01)
    for seen in subscribers:
        for side in (b"a", b"b"):
            got = [e[1] for e in seen.events if e[1][1][:1] == side]
            assert got == [(i, side * PAYLOAD) for i in range(count)]
    peaks = {
        (n.name, r.remote_hello.name): backlog(r)[1]
        for n in (a, b)
        for r in n.relays
        if r.remote_hello
    }
    assert peaks[("a", "b")] > HIGH and peaks[("b", "a")] > HIGH  # congested both ways
    # The node links stay bounded (client links do not pause their node, so only theirs grow).
    assert max(peaks[("a", "b")], peaks[("b", "a")]) <= HIGH + 2 * RECEIVE_SIZE


@pytest.fixture
def small_client_send_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clients dial with a small kernel send buffer, so what their node does not read shows as
    the client's backlog instead of waiting in the kernel."""
    open_tcp_stream = trio.open_tcp_stream

    async def open_small(host: str, port: int, **kwargs: object) -> trio.SocketStream:
        stream = await open_tcp_stream(host, port, **kwargs)  # type: ignore[arg-type]
        stream.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        return stream

    monkeypatch.setattr(trio, "open_tcp_stream", open_small)


DRAIN_EVERY = 8
FRAME_OVERHEAD = 64
"""More than the bytes a message adds to a packet besides its payload."""


async def test_a_publisher_that_drains_is_slowed_down_keeps_its_backlog_bounded_and_loses_nothing(
    nursery: trio.Nursery, small_client_send_buffers: None
) -> None:
    _, port, seen = await node_with_slow_subscriber(nursery)
    payloads = [i.to_bytes(4, "big") * (PAYLOAD // 4) for i in range(MESSAGES)]
    async with client.connect(f"127.0.0.1:{port}", name="fast") as pub:
        # The publisher reads as well: it observes what it sends.
        async with pub.observe("<bench $p>") as own:
            await pub.sync()
            for i, p in enumerate(payloads):
                pub.send(Record(BENCH, (p,)))
                if i % DRAIN_EVERY == DRAIN_EVERY - 1:
                    await pub.drain(timeout=60)
            with trio.fail_after(60):
                echoed = [(await own.next()).captures for _ in payloads]
                while len(seen.events) < MESSAGES:
                    await trio.sleep(0.01)
        assert not pub.relay.closed  # slowed down, not cut off
        peak = backlog(pub.relay)[1]

    assert seen.events == [("!", (p,)) for p in payloads]  # every message, in order
    assert echoed == [(p,) for p in payloads]
    assert peak > LOW_WATER  # the node stopped reading the publisher, so drain had to wait...
    assert peak <= LOW_WATER + DRAIN_EVERY * (PAYLOAD + FRAME_OVERHEAD)  # ...and bounded it


async def test_drain_returns_at_once_when_the_connection_has_room(nursery: trio.Nursery) -> None:
    node_driver = Driver()
    nursery.start_soon(node_driver.run)
    runtime = NodeRuntime(node_driver.scheduler, "n", "observer-flood")
    port = await nursery.start(runtime.serve, "127.0.0.1", 0)
    async with client.connect(f"127.0.0.1:{port}") as ds:
        with trio.fail_after(10):  # against a hang only
            await ds.drain()
            ds.send(Record(BENCH, (b"x",)))
            await ds.drain()
            await ds.sync()
            await ds.drain()
        assert not ds.backlogged
        ds.relay.close("test: closed")
        with pytest.raises(client.FedsError, match="closed"):
            await ds.drain()


BULK_PAYLOAD = 1024
BULK_VALUES = 3000


@pytest.fixture
def slow_node() -> Iterator[tuple[NodeRuntime, int, Recorder]]:
    """A node with a slow subscriber, run by a trio thread of its own (for blocking clients)."""
    with served_in_thread(node_with_slow_subscriber) as node:
        yield node


def test_the_blocking_clients_bulk_publish_is_bounded_and_loses_nothing(
    slow_node: tuple[NodeRuntime, int, Recorder], small_client_send_buffers: None
) -> None:
    _, port, seen = slow_node
    values = [
        Record(BENCH, (i.to_bytes(4, "big") * (BULK_PAYLOAD // 4),)) for i in range(BULK_VALUES)
    ]
    with BlockingClient(f"127.0.0.1:{port}") as ds:
        ds.publish_many(values)
        ds.sync(timeout=60)
        deadline = time.monotonic() + 60  # against a hang only
        while len(seen.events) < BULK_VALUES and time.monotonic() < deadline:
            time.sleep(0.01)
        peak = backlog(ds.session.relay)[1]
    assert seen.events[:BULK_VALUES] == [("+", v.fields) for v in values]  # all, in order
    assert peak > LOW_WATER  # the node stopped reading the client, so publish_many waited...
    assert peak <= LOW_WATER + BATCH * (BULK_PAYLOAD + FRAME_OVERHEAD)  # ...and bounded it
