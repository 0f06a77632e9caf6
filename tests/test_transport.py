"""trio transports: real TCP on 127.0.0.1 and in-process memory links, driven by feds.driver."""

from __future__ import annotations

import os
import select
from collections.abc import Callable

import pytest
import trio

from feds import transport
from feds.actor import Actor, Entity, Handle, Ref, Scheduler, Turn
from feds.codec import encode_frame
from feds.driver import Driver
from feds.relay import CLIENT, PEER, Hello, Relay
from feds.transport import connect_tcp, listener_port, memory_pair, serve_tcp
from feds.values import Symbol, record
from tests.net_helpers import packets_to_the_end
from tests.recording import Recorder


async def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    with trio.fail_after(timeout):
        while not condition():
            await trio.sleep(0.002)


class Side:
    """A scheduler with its driver running in ``nursery``."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self.sched = Scheduler()
        self.driver = Driver(self.sched)
        nursery.start_soon(self.driver.run)

    def exposing(self, entity: Entity) -> Ref:
        return Ref(Actor(self.sched, "app").root, entity)

    def client_relay(self, name: str = "client") -> tuple[Relay, list[Ref]]:
        proxies: list[Ref] = []

        def ready(turn: Turn, hello: Hello, initial: Ref) -> None:
            proxies.append(initial)

        return Relay(self.sched, name, CLIENT, on_ready=ready), proxies

    def act(self, action: Callable[[Turn], None], actor: Actor | None = None) -> Actor:
        if actor is None:
            return self.sched.spawn(action)
        self.sched.enqueue(actor, actor.root, action)
        return actor


async def recording_server(nursery: trio.Nursery) -> tuple[Recorder, list[Relay], int]:
    """A TCP server exposing a Recorder: the recorder, its accepted relays, its port."""
    server = Side(nursery)
    rec = Recorder()
    target = server.exposing(rec)
    accepted: list[Relay] = []

    def make_relay() -> Relay:
        accepted.append(Relay(server.sched, "server", PEER, target))
        return accepted[-1]

    port = listener_port(await nursery.start(serve_tcp, "127.0.0.1", 0, make_relay))
    return rec, accepted, port


async def test_tcp_assert_retract_and_loss_of_the_client(nursery: trio.Nursery) -> None:
    client = Side(nursery)
    rec, accepted, port = await recording_server(nursery)

    relay, proxies = client.client_relay()
    connection = trio.CancelScope()

    async def dial() -> None:
        with connection:
            await connect_tcp("127.0.0.1", port, relay)

    nursery.start_soon(dial)
    await eventually(lambda: bool(proxies))
    held: list[Handle] = []
    actor = client.act(lambda t: held.append(t.publish(proxies[0], record("x", 1))))
    await eventually(lambda: list(rec.live.values()) == [record("x", 1)])
    client.act(lambda t: t.retract(held[0]), actor)
    await eventually(lambda: rec.live == {})
    client.act(lambda t: (t.publish(proxies[0], "kept"), t.message(proxies[0], "m")), actor)
    await eventually(lambda: list(rec.live.values()) == ["kept"])
    assert rec.events[-1] == ("!", "m")
    connection.cancel()  # kill the client's connection
    await eventually(lambda: rec.live == {} and accepted[0].closed)
    assert relay.closed and accepted[0].close_reason is not None
    assert not accepted[0].actor.alive


async def test_tcp_protocol_error_closes_only_that_connection(nursery: trio.Nursery) -> None:
    client = Side(nursery)
    rec, accepted, port = await recording_server(nursery)

    # A raw client that speaks nonsense gets an error packet, then EOF.
    raw = await trio.open_tcp_stream("127.0.0.1", port)
    await raw.send_all(encode_frame(record("nonsense")))
    packets = await packets_to_the_end(raw)
    await raw.aclose()
    assert packets[0].label == Symbol("hello")
    assert packets[-1] == record("error", "packet before hello: nonsense", None)

    # The server still serves everyone else.
    relay, proxies = client.client_relay()
    nursery.start_soon(connect_tcp, "127.0.0.1", port, relay)
    await eventually(lambda: bool(proxies))
    client.act(lambda t: t.publish(proxies[0], "fine"))
    await eventually(lambda: list(rec.live.values()) == ["fine"])
    relay.close("done")
    await eventually(lambda: rec.live == {} and accepted[-1].closed)
    assert accepted[-1].close_reason == "peer error: done"


async def test_a_connection_cut_with_bytes_unread_still_hears_why(nursery: trio.Nursery) -> None:
    """A node that closes a connection while bytes from the far side wait unread (a keep-alive
    behind the packet that failed, the rest of a flood) must not reset it: the reset would
    throw away what the node wrote last, the reason, before the far side reads it."""
    _, accepted, port = await recording_server(nursery)
    raw = await trio.open_tcp_stream("127.0.0.1", port)
    await raw.send_all(encode_frame(record("nonsense")) + encode_frame(b"x" * 100) * 2000)
    await eventually(lambda: bool(accepted) and accepted[0].closed)
    await trio.sleep(0.2)  # the node's close has reached this side (a reset would have, too)
    packets = await packets_to_the_end(raw)  # a reset raises here
    await raw.aclose()
    assert packets[-1] == record("error", "packet before hello: nonsense", None)


async def test_a_far_side_that_never_closes_is_let_go(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a close the node reads away what the far side still sends, but only for
    CLOSE_TIMEOUT: a far side that keeps sending and never closes finds the socket closed."""
    monkeypatch.setattr(transport, "CLOSE_TIMEOUT", 0.3)
    _, accepted, port = await recording_server(nursery)
    raw = await trio.open_tcp_stream("127.0.0.1", port)
    await raw.send_all(encode_frame(record("nonsense")))
    await eventually(lambda: bool(accepted) and accepted[0].closed)
    with trio.fail_after(5), pytest.raises(trio.BrokenResourceError):
        while True:  # read away by the node until it lets go, then refused
            await raw.send_all(b"x" * 100)
            await trio.sleep(0.02)
    await raw.aclose()


async def test_connect_to_nothing_closes_the_relay() -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens there now
    relay = Relay(Scheduler(), "client", CLIENT)
    try:
        await connect_tcp("127.0.0.1", port, relay)
    except OSError:
        pass
    else:
        raise AssertionError("expected the connection to fail")
    assert relay.closed and "cannot connect" in (relay.close_reason or "")


async def test_memory_pair_links_two_relays_in_one_process(nursery: trio.Nursery) -> None:
    side = Side(nursery)
    rec = Recorder()
    server = Relay(side.sched, "server", PEER, side.exposing(rec))
    client, proxies = side.client_relay()
    nursery.start_soon(memory_pair, server, client)
    await eventually(lambda: bool(proxies))
    held: list[Handle] = []
    synced: list[bool] = []

    def boot(t: Turn) -> None:
        held.append(t.publish(proxies[0], "a"))
        t.sync(proxies[0], lambda t2: synced.append(True))

    side.act(boot)
    await eventually(lambda: synced == [True])
    assert list(rec.live.values()) == ["a"]
    server.close("shutting down")
    await eventually(lambda: client.closed and rec.live == {})
    assert client.close_reason == "peer error: shutting down"


async def test_a_socket_is_read_only_once_it_is_readable(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between packets the reader waits for the socket before reading it. (Trying first, as
    ``SocketStream.receive_some`` does, costs a failing read and an exception per packet,
    a large part of a node's cost per packet when packets come one at a time.)"""
    empty_reads: list[int] = []

    def count_if_empty(fd: int) -> None:
        if not select.select([fd], [], [], 0)[0]:
            empty_reads.append(fd)

    receive_some = trio.SocketStream.receive_some

    async def counting_receive_some(self: trio.SocketStream, max_bytes: int | None = None) -> bytes:
        count_if_empty(self.socket.fileno())
        return await receive_some(self, max_bytes)

    read = os.read

    def counting_read(fd: int, size: int) -> bytes:
        count_if_empty(fd)
        return read(fd, size)

    monkeypatch.setattr(trio.SocketStream, "receive_some", counting_receive_some)
    monkeypatch.setattr(transport.os, "read", counting_read)
    client = Side(nursery)
    rec, _accepted, port = await recording_server(nursery)
    relay, proxies = client.client_relay()
    nursery.start_soon(connect_tcp, "127.0.0.1", port, relay)
    await eventually(lambda: bool(proxies))
    for i in range(20):  # one packet at a time, each after the last has arrived
        client.act(lambda t, i=i: t.message(proxies[0], record("x", i)))
        await eventually(lambda i=i: len(rec.events) == i + 1)
    assert rec.events == [("!", record("x", i)) for i in range(20)]
    assert empty_reads == []
