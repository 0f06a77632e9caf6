"""A blocking RemoteSpace.get cancelled from outside never loses a tuple (against a feds gate)."""

from __future__ import annotations

import socket
from functools import partial

import pytest
import trio

from feds.spaces import Formal, RemoteSpace, SequentialSpace, SpaceRepository, remote, wire

ROUNDS = 15
TUPLES = 30


async def one_round(mode: str) -> tuple[list[tuple], list[tuple]]:
    """Getters cancelled after 0..4 ms while a producer puts; returns (received, left)."""
    async with SpaceRepository() as repo:
        space = repo.add("seq", SequentialSpace())
        gate = await repo.add_gate(f"tcp://127.0.0.1:0/?{mode}")
        received: list[tuple] = []
        done = trio.Event()

        scopes: list[trio.CancelScope] = []

        async def getter(k: int) -> None:
            async with RemoteSpace(gate.space_uri("seq")) as remote:
                while not done.is_set():
                    with trio.move_on_after(0.001 * (k % 5)) as scope:
                        scopes.append(scope)
                        received.append(await remote.get("job", Formal(int)))
                    scopes.remove(scope)
                    k += 1

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for k in range(6):
                    nursery.start_soon(getter, k)
                async with RemoteSpace(gate.space_uri("seq")) as producer:
                    for n in range(TUPLES):
                        await producer.put("job", n)
                        if n % 3:  # cancel the getters as the put wakes one of them
                            for scope in scopes:
                                scope.cancel()
                        await trio.sleep(0.002)
                    with trio.move_on_after(5):  # let the getters take what they can
                        while len(received) + len(space.queryAll("job", Formal(int))) < TUPLES:
                            await trio.sleep(0.01)
                done.set()
                nursery.cancel_scope.cancel()  # getters still blocked withdraw their gets
            async with RemoteSpace(gate.space_uri("seq")) as drain:
                left = await drain.getAll("job", Formal(int))
        return received, left


@pytest.mark.parametrize("mode", ["keep", "conn"])
async def test_cancelled_remote_gets_never_lose_or_duplicate_a_tuple(mode) -> None:
    for _ in range(ROUNDS):
        received, left = await one_round(mode)
        assert sorted(received + left) == [("job", n) for n in range(TUPLES)]


async def test_a_server_answering_after_the_withdraw_grace_fails_to_write_it(monkeypatch) -> None:
    """A server that answers a withdrawn get too late must see its write fail (so that it puts
    the tuple back), not succeed into a socket nobody reads."""
    monkeypatch.setattr(remote, "WITHDRAW_GRACE", 0.1)
    client_gone = trio.Event()
    write_failed: list[bool] = []

    async def late_server(stream: trio.SocketStream) -> None:
        lines = wire.LineBuffer()
        request: list[bytes] = []
        while not request:
            request = lines.feed(await stream.receive_some(65536))
        assert await stream.receive_some(65536) == b""  # the client withdrew (half-close)
        await client_gone.wait()
        answer = wire.get_response([("job", 1)], wire.parse_request(request[0]).session)
        try:
            await stream.send_all(wire.encode_line(answer))  # the gate writes an answer once
            write_failed.append(False)
        except trio.BrokenResourceError:
            write_failed.append(True)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(
                partial(trio.serve_tcp, late_server, 0, host="127.0.0.1")
            )
            port = listeners[0].socket.getsockname()[1]
            async with RemoteSpace(f"tcp://127.0.0.1:{port}/seq?conn") as space:
                with trio.move_on_after(0.1):
                    await space.get("job", Formal(int))
            client_gone.set()
            while not write_failed:
                await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
    assert write_failed == [True]


async def test_a_gate_closed_while_writing_an_answer_puts_its_tuple_back() -> None:
    """An answer cut off half-written (the gate closes while a client reads slowly) was never
    received, so its tuple goes back into the space."""
    big = ("big", "x" * (12 * 1024 * 1024))  # more than the socket buffers hold
    async with SpaceRepository() as repo:
        space = repo.add("seq", SequentialSpace())
        space.put(*big)
        gate = await repo.add_gate(gate_uri := "tcp://127.0.0.1:0/?keep")
        sock = trio.socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a client reading slowly
        await sock.connect(("127.0.0.1", gate.port))
        stream = trio.SocketStream(sock)
        getp = wire.Request("get", "seq", ("big", Formal(str)), False, False, "0")
        await stream.send_all(wire.encode_line(getp.message()))
        with trio.fail_after(10):
            while space.queryp("big", Formal(str)) is not None:  # taken, being written
                await trio.sleep(0.01)
            repo.close_gate(gate_uri)
            while space.queryp("big", Formal(str)) is None:
                await trio.sleep(0.01)
        await stream.aclose()
    assert space.getAll("big", Formal(str)) == [big]
