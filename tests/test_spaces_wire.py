"""The pSpaces wire protocol: feds's gate against jSpace's captured exchange, and back."""

from __future__ import annotations

import json
import socket
import struct

import pytest
import trio
import trio.testing

from feds.spaces import (
    ANY,
    Char,
    Float,
    Formal,
    Long,
    PileSpace,
    QueueSpace,
    RemoteSpace,
    SequentialSpace,
    SpaceError,
    SpaceRepository,
    SpaceTimeout,
    StackSpace,
    UriError,
    wire,
)
from feds.spaces.uri import DEFAULT_PORT, Mode, parse_uri
from tests import spaces_transcript

SECTIONS = spaces_transcript.sections()


class LineConn:
    """A raw client connection that reads whole lines."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buf = b""

    @classmethod
    async def open(cls, port: int) -> LineConn:
        return cls(await trio.open_tcp_stream("127.0.0.1", port))

    async def send(self, msg: dict | str) -> None:
        line = msg if isinstance(msg, str) else json.dumps(msg)
        await self.stream.send_all(line.encode() + b"\n")

    async def line(self) -> bytes | None:
        with trio.fail_after(5):
            while b"\n" not in self.buf:
                data = await self.stream.receive_some(65536)
                if not data:
                    return None
                self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    async def answer(self) -> dict:
        line = await self.line()
        assert line is not None, "the server closed instead of answering"
        return json.loads(line)


def reference_repository() -> SpaceRepository:
    repo = SpaceRepository()
    repo.add("seq", SequentialSpace())
    repo.add("queue", QueueSpace())
    repo.add("stack", StackSpace())
    repo.add("pile", PileSpace())
    return repo


async def replay_transcript(mode: str, port: int) -> None:
    """Replay the captured client lines of ``mode`` (KEEP or CONN) against the gate at ``port``,
    which must serve fresh spaces seq, queue, stack and pile of those kinds; every answer must
    equal the captured one as a JSON value, per connection, in order."""
    conns: dict[int, LineConn] = {}
    answers = 0
    for event in SECTIONS[mode]:
        if event.direction == "C->S":
            if event.message is None:
                await conns[event.conn].stream.aclose()
                continue
            if event.conn not in conns:
                conns[event.conn] = await LineConn.open(port)
            await conns[event.conn].send(event.message)
        elif event.message is None:
            assert await conns[event.conn].line() is None, f"[{event.conn}] should be closed"
        else:
            assert await conns[event.conn].answer() == event.message, f"at {event}"
            answers += 1
    assert answers == sum(1 for e in SECTIONS[mode] if e.direction == "S->C" and e.message)
    for conn in conns.values():
        await conn.stream.aclose()


@pytest.mark.parametrize("mode", ["KEEP", "CONN"])
async def test_replaying_the_captured_client_gives_the_captured_answers(mode) -> None:
    async with reference_repository() as repo:
        gate = await repo.add_gate(f"tcp://127.0.0.1:0/?{mode.lower()}")
        await replay_transcript(mode, gate.port)


async def test_a_blocked_get_does_not_hold_up_a_put_on_the_same_connection() -> None:
    async with reference_repository() as repo:
        gate = await repo.add_gate("tcp://127.0.0.1:0/?keep")
        c = await LineConn.open(gate.port)
        template = [{"formal": True, "value": "pspace:int"}]
        get = {"messageType": "GET_REQUEST", "target": "seq", "blocking": True}
        await c.send({**get, "template": template, "clientSession": "a"})
        await c.send({**get, "template": template, "clientSession": "b"})
        put = {"messageType": "PUT_REQUEST", "target": "seq", "clientSession": "p"}
        await c.send({**put, "tuple": [{"type": "pspace:int", "value": 5}]})
        first, second = await c.answer(), await c.answer()
        assert (first["clientSession"], first["tuples"]) == (
            "a",
            [[{"type": "pspace:int", "value": 5}]],
        )
        assert second["clientSession"] == "p"
        assert repo.get("seq").store.waiters[0].template == (Formal(int),)  # "b" still waits
        await c.stream.aclose()
        with trio.fail_after(5):
            while repo.get("seq").store.waiters:  # the client left: its wait is dropped
                await trio.sleep(0.01)


MALFORMED = [
    ("not json at all", None),
    ('{"messageType":"put_request","target":"seq","tuple":[],"clientSession":"7"}', "7"),
    ('{"action":"PUT_REQUEST","source":1,"session":3,"target":"seq","tuple":[1]}', None),
    (
        '{"messageType":"PUT_REQUEST","target":"seq","tuple":[{"type":"pspace:nope","value":1}],'
        '"clientSession":"8"}',
        "8",
    ),
    (
        '{"messageType":"GET_REQUEST","target":"seq","template":[{"formal":true,"value":"pspace:nope"}],'
        '"clientSession":9}',
        "9",
    ),
    (
        '{"messageType":"PUT_REQUEST","target":"seq","tuple":[{"type":"pspace:int","value":"x"}],'
        '"clientSession":"10"}',
        "10",
    ),
    (
        '{"messageType":"PUT_REQUEST","target":"seq","tuple":[{"type":"pspace:int","value":3000000000}],'
        '"clientSession":"11"}',
        "11",
    ),
    ("[1, 2]", None),
    ("", None),
]


@pytest.mark.parametrize(("line", "session"), MALFORMED)
async def test_malformed_input_gets_a_failure_and_the_connection_stays_usable(
    line, session
) -> None:
    async with reference_repository() as repo:
        gate = await repo.add_gate("tcp://127.0.0.1:0/?keep")
        c = await LineConn.open(gate.port)
        await c.send(line)
        answer = await c.answer()
        assert answer["messageType"] == "FAILURE"
        assert (answer["status"], answer["statusCode"]) == (False, "400")
        assert answer.get("clientSession") == session
        assert answer["reason"]
        put = {"messageType": "PUT_REQUEST", "target": "seq", "clientSession": "ok"}
        await c.send({**put, "tuple": [{"type": "pspace:int", "value": 1}]})
        assert (await c.answer())["status"] is True
        await c.stream.aclose()


async def test_a_guideline_style_request_is_told_what_protocol_we_speak() -> None:
    async with reference_repository() as repo:
        gate = await repo.add_gate("tcp://127.0.0.1:0/?keep")
        c = await LineConn.open(gate.port)
        await c.send(MALFORMED[2][0])
        assert "messageType, not action" in (await c.answer())["reason"]
        await c.stream.aclose()


# ---------------------------------------------------------------------------------------------
# URIs


@pytest.mark.parametrize(
    ("uri", "port", "space", "mode"),
    [
        ("tcp://h:9001/seq?keep", 9001, "seq", Mode.KEEP),
        ("tcp://h/seq?CONN", DEFAULT_PORT, "seq", Mode.CONN),
        ("tcp://h:1/?mode=Conn", 1, "", Mode.CONN),
        ("tcp://h:1/x", 1, "x", Mode.KEEP),
        ("h:1234/data?conn", 1234, "data", Mode.CONN),
    ],
)
def test_uris(uri, port, space, mode) -> None:
    parsed = parse_uri(uri)
    assert (parsed.host, parsed.port, parsed.space, parsed.mode) == ("h", port, space, mode)


@pytest.mark.parametrize(
    ("uri", "error"),
    [
        ("tcp://h/s?push", "PUSH is not supported"),
        ("tcp://h/s?mode=PULL", "PULL is not supported"),
        ("udp://h/s", "only tcp"),
        ("tcp://h/s?fast", "unknown mode"),
        ("tcp://h/s?keep&conn", "one mode"),
    ],
)
def test_bad_uris_are_refused_clearly(uri, error) -> None:
    with pytest.raises(UriError, match=error):
        parse_uri(uri)


# ---------------------------------------------------------------------------------------------
# RemoteSpace against a server that replays the captured answers


class ReplayServer:
    """Answers each request with the answer jSpace gave the same request in the capture, once
    every request captured before that answer has arrived (so a blocking get waits for the put
    that woke it). Requests must match the capture as JSON values (clientSession aside)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.pairs = spaces_transcript.pairs(SECTIONS[mode])
        self.client_positions = [
            e.pos for e in SECTIONS[mode] if e.direction == "C->S" and e.message is not None
        ]
        self.received: set[int] = set()
        self.used: set[int] = set()
        self.changed = trio.Event()
        self.errors: list[str] = []

    async def serve(self, stream: trio.SocketStream) -> None:
        conn = LineConn(stream)
        async with trio.open_nursery() as nursery:
            try:
                while (line := await conn.line()) is not None:
                    nursery.start_soon(self._answer, conn, json.loads(line))
            except trio.ClosedResourceError:
                pass  # CONN: closed after its answer
        await stream.aclose()

    async def _answer(self, conn: LineConn, request: dict) -> None:
        session = request.pop("clientSession", None)
        for i, pair in enumerate(self.pairs):
            expected = {k: v for k, v in pair.request.items() if k != "clientSession"}
            if i not in self.used and expected == request:
                break
        else:
            self.errors.append(f"unexpected request {request}")
            await conn.stream.aclose()
            return
        self.used.add(i)
        self.received.add(pair.request_pos)
        self.changed.set()
        self.changed = trio.Event()
        while any(p < pair.answer_pos and p not in self.received for p in self.client_positions):
            await self.changed.wait()
        answer = {k: v for k, v in pair.answer.items() if k != "clientSession"}
        if session is not None:
            answer["clientSession"] = session
        await conn.stream.send_all(json.dumps(answer).encode() + b"\n")
        if self.mode == "CONN":
            await conn.stream.aclose()


HELLO = ("hello", 42, 3.5, True, Long(7), Float(2.5), Char("c"))


async def probe(uri: str) -> None:
    """The probe steps the capture was made with, through feds's RemoteSpace."""
    async with RemoteSpace(uri("seq")) as seq, RemoteSpace(uri("seq")) as other:
        assert await seq.put(*HELLO)
        typed = ("hello", Formal(int), Formal(float), Formal(bool), Formal(Long), Formal(Float))
        assert await seq.queryp(*typed, Formal(Char)) == HELLO
        assert await seq.queryp("nope") is None
        assert await seq.get(Formal(str), 42, *[ANY] * 5) == HELLO
        assert await seq.getp(Formal(str)) is None
        for fields in (("a", 1), ("b", 2), ("a", 3)):
            assert await seq.put(*fields)
        assert await seq.queryAll("a", Formal(int)) == [("a", 1), ("a", 3)]
        assert await seq.getAll(Formal(str), Formal(int)) == [("a", 1), ("b", 2), ("a", 3)]
        assert await seq.getAll(Formal(str)) == []
        for word, other_space, value in (("wake", other, 99), ("wake2", seq, "ok")):
            got = []

            async def getter(word=word, value=value, got=got):
                got.append(await seq.get(word, Formal(type(value))))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(getter)
                await trio.testing.wait_all_tasks_blocked()
                await other_space.put(word, value)
            assert got == [(word, value)]
    async with RemoteSpace(uri("nosuch")) as nosuch:
        with pytest.raises(SpaceError, match="refused"):
            await nosuch.put(1)
        with pytest.raises(SpaceError, match="nosuch"):
            await nosuch.getp(1)
        with pytest.raises(SpaceError, match="nosuch"):
            await nosuch.get(1)
    for name, first, prefix, everything in (
        ("queue", 1, [1], [1, "x", 3]),
        ("stack", 3, [3], [3, "x", 1]),
        ("pile", 3, [3, 1], [3, "x", 1]),
    ):
        async with RemoteSpace(uri(name)) as space:
            for x in (1, "x", 3):
                await space.put(x)
            assert await space.queryp(Formal(int)) == (first,)
            assert await space.queryAll(Formal(int)) == [(x,) for x in prefix]
            assert await space.getAll(ANY) == [(x,) for x in everything]


@pytest.mark.parametrize("mode", ["KEEP", "CONN"])
async def test_remote_space_speaks_exactly_as_jspace_to_a_replayed_jspace_server(mode) -> None:
    server = ReplayServer(mode)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(trio.serve_tcp, server.serve, 0)
        port = listeners[0].socket.getsockname()[1]
        with trio.fail_after(20):
            await probe(lambda name: f"tcp://127.0.0.1:{port}/{name}?{mode.lower()}")
        nursery.cancel_scope.cancel()
    assert server.errors == []
    assert server.used == set(range(len(server.pairs)))


@pytest.mark.parametrize("mode", ["keep", "conn"])
async def test_remote_space_against_a_feds_gate(mode) -> None:
    async with reference_repository() as repo:
        gate = await repo.add_gate(f"tcp://127.0.0.1:0/?{mode}")
        with trio.fail_after(20):
            await probe(gate.space_uri)


async def test_a_remote_get_that_times_out_leaves_nothing_behind() -> None:
    async with reference_repository() as repo:
        gate = await repo.add_gate("tcp://127.0.0.1:0/?keep")
        async with RemoteSpace(gate.space_uri("seq")) as seq:
            with pytest.raises(SpaceTimeout):
                await seq.get("late", timeout=0.1)
            with trio.fail_after(5):
                while repo.get("seq").store.waiters:
                    await trio.sleep(0.01)
            await seq.put("late")
            assert await seq.getp("late") == ("late",)  # not taken by the withdrawn get


async def test_a_gate_can_be_closed_and_its_port_is_freed() -> None:
    async with reference_repository() as repo:
        gate = await repo.add_gate("tcp://127.0.0.1:0/?keep")
        async with RemoteSpace(gate.space_uri("seq")) as seq:
            await seq.put(1)
        repo.close_gate("tcp://127.0.0.1:0/?keep")
        with pytest.raises(SpaceError, match="cannot connect"):
            async with RemoteSpace(gate.space_uri("seq")) as seq:
                await seq.put(1)
        with pytest.raises(UriError, match="not supported"):
            await repo.add_gate("tcp://127.0.0.1:0/?push")


async def cannot_connect(uri: str) -> bool:
    try:
        async with RemoteSpace(uri) as space:
            await space.put(1)
    except SpaceError as exc:
        return "cannot connect" in str(exc)
    return False


@pytest.mark.parametrize(
    "spelling",
    [
        lambda gate: gate.uri,  # the bound URI: the port the OS chose
        lambda gate: f"127.0.0.1:{gate.port}/?mode=KEEP",  # another spelling of it
        lambda gate: "tcp://127.0.0.1:0/?KEEP",  # another spelling of the URI as given
    ],
    ids=["bound", "bound-respelled", "given-respelled"],
)
async def test_a_port_0_gate_is_closed_by_its_bound_uri_or_any_spelling(spelling) -> None:
    async with reference_repository() as repo:
        gate = await repo.add_gate("tcp://127.0.0.1:0/?keep")
        other = await repo.add_gate("tcp://127.0.0.1:0/?conn")
        repo.close_gate(spelling(gate))
        assert list(repo.gates.values()) == [other]
        with trio.fail_after(5):
            assert await cannot_connect(gate.space_uri("seq"))
        repo.close_gate(spelling(gate))  # no effect: it is closed already
        assert list(repo.gates.values()) == [other]


async def test_a_server_that_hangs_up_gives_a_space_error_and_the_next_call_reconnects() -> None:
    calls = 0

    async def flaky(stream: trio.SocketStream) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            await stream.aclose()  # hang up without answering
            return
        c = LineConn(stream)
        request = json.loads(await c.line())
        answer = {"messageType": "PUT_RESPONSE", "status": True, "statusCode": "200"}
        await c.send({**answer, "clientSession": request["clientSession"]})
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(trio.serve_tcp, flaky, 0)
        port = listeners[0].socket.getsockname()[1]
        async with RemoteSpace(f"tcp://127.0.0.1:{port}/seq?keep") as seq:
            with trio.fail_after(10):
                with pytest.raises(SpaceError, match=r"without answering|failed"):
                    await seq.put(1)
                assert await seq.put(2)
        nursery.cancel_scope.cancel()


async def test_crlf_lines_are_accepted() -> None:
    async with reference_repository() as repo:
        gate = await repo.add_gate("tcp://127.0.0.1:0/?keep")
        c = await LineConn.open(gate.port)
        put = {"messageType": "PUT_REQUEST", "target": "seq", "clientSession": "0"}
        line = json.dumps({**put, "tuple": [{"type": "pspace:int", "value": 1}]})
        await c.stream.send_all(line.encode() + b"\r\n")
        assert (await c.answer())["status"] is True
        await c.stream.aclose()


def test_a_line_over_the_limit_is_refused() -> None:
    lines = wire.LineBuffer(limit=10)
    assert lines.feed(b"short\nrest") == [b"short"]
    with pytest.raises(wire.BadRequest, match="longer than 10 bytes"):
        lines.feed(b"x" * 20)


@pytest.mark.parametrize("mode", ["keep", "conn"])
async def test_concurrent_remote_getters_take_every_tuple_exactly_once(mode) -> None:
    """Getters on their own connections, some giving up by timeout mid-way: every tuple put
    ends up with exactly one getter or is still in the space."""
    async with reference_repository() as repo:
        gate = await repo.add_gate(f"tcp://127.0.0.1:0/?{mode}")
        received: list[tuple] = []
        gave_up = 0
        finished = trio.Event()

        async def getter(space: RemoteSpace, patience: float) -> None:
            nonlocal gave_up
            while True:
                try:
                    received.append(await space.get("job", Formal(int), timeout=patience))
                except SpaceTimeout:
                    gave_up += 1
                    if finished.is_set():
                        return

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                spaces = [RemoteSpace(gate.space_uri("seq")) for _ in range(5)]
                for i, space in enumerate(spaces):
                    nursery.start_soon(getter, space, 0.01 if i % 2 else 0.2)
                async with RemoteSpace(gate.space_uri("seq")) as producer:
                    for n in range(60):
                        await producer.put("job", n)
                        if n % 10 == 0:
                            await trio.sleep(0.02)
                finished.set()
        left = repo.get("seq").getAll("job", Formal(int))
        assert sorted(received + left) == [("job", n) for n in range(60)]
        assert gave_up > 0
        assert repo.get("seq").store.waiters == []


async def test_a_client_resetting_its_connection_does_not_stop_the_gate() -> None:
    async with reference_repository() as repo:
        gate = await repo.add_gate("tcp://127.0.0.1:0/?keep")
        c = await LineConn.open(gate.port)
        template = [{"formal": True, "value": "pspace:int"}]
        get = {
            "messageType": "GET_REQUEST",
            "target": "seq",
            "blocking": True,
            "template": template,
        }
        await c.send({**get, "clientSession": "0"})
        with trio.fail_after(5):
            while not repo.get("seq").store.waiters:  # the server waits in receive_some now
                await trio.sleep(0.01)
        c.stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.stream.socket.close()  # an abortive close: RST
        with trio.fail_after(5):
            while repo.get("seq").store.waiters or not repo.gates:
                await trio.sleep(0.01)
        async with RemoteSpace(gate.space_uri("seq")) as seq:
            assert await seq.put(1)
            assert await seq.getp(Formal(int)) == (1,)


async def test_a_cancelled_remote_get_is_withdrawn() -> None:
    async with reference_repository() as repo:
        gate = await repo.add_gate("tcp://127.0.0.1:0/?conn")
        async with RemoteSpace(gate.space_uri("seq")) as seq:
            with trio.move_on_after(0.2) as scope:
                await seq.get("later")
            assert scope.cancelled_caught
            with trio.fail_after(5):
                while repo.get("seq").store.waiters:
                    await trio.sleep(0.01)
            await seq.put("later")
            assert await seq.queryAll("later") == [("later",)]
