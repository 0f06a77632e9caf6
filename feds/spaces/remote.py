"""``RemoteSpace``: a space served by a pSpaces gate (feds's or jSpace's), used over TCP.

::

    async with RemoteSpace("tcp://127.0.0.1:31415/seq?keep") as seq:
        await seq.put("job", 1)
        print(await seq.get("job", Formal(int), timeout=5))

The same seven operations as a local :class:`~feds.spaces.space.Space`, all coroutines. In KEEP
mode the non-blocking ones share one connection (opened on first use, one request at a time);
in CONN mode each opens its own. A blocking get or query always has a connection of its own, so
that a timeout or a cancellation can withdraw it (the protocol has no cancel message): the client
half-closes it and reads on, and the server either answers — a tuple taken in that instant is
returned (timeout) or put back (cancellation) — or drops the request and closes, as a feds gate
does. A failure answer (an unknown space, a refused request) or a lost connection raises
:class:`~feds.spaces.space.SpaceError`.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

import trio

from feds.spaces import wire
from feds.spaces.space import SpaceError, SpaceTimeout
from feds.spaces.templates import check_template
from feds.spaces.uri import Mode, parse_uri

OP_TIMEOUT = 30.0
"""Seconds a non-blocking operation may take before the link is declared broken."""


class RemoteSpace:
    """A remote space at ``tcp://host[:port]/space[?keep|conn]``."""

    def __init__(self, uri: str, *, op_timeout: float = OP_TIMEOUT) -> None:
        self.uri = parse_uri(uri)
        if not self.uri.space:
            raise SpaceError(f"{uri}: a space URI names its space (tcp://host:port/space?keep)")
        self.op_timeout = op_timeout
        self._stream: trio.SocketStream | None = None
        self._lines = wire.LineBuffer()
        self._session = 0
        self._lock = trio.Lock()

    def __repr__(self) -> str:
        return f"RemoteSpace({str(self.uri)!r})"

    async def __aenter__(self) -> RemoteSpace:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._stream is not None:
            stream, self._stream = self._stream, None
            await stream.aclose()

    # -- the API -----------------------------------------------------------------------------

    async def put(self, *fields: Any) -> bool:
        answer = await self._call("put", tuple(fields), False, False)
        if not answer.ok:
            raise SpaceError(f"{self.uri}: put refused ({answer.code} {answer.message})")
        return True

    async def getp(self, *template: Any) -> tuple | None:
        return _one(await self._tuples("get", template, False, False))

    async def queryp(self, *template: Any) -> tuple | None:
        return _one(await self._tuples("query", template, False, False))

    async def get_all(self, *template: Any) -> list[tuple]:
        return await self._tuples("get", template, False, True)

    async def query_all(self, *template: Any) -> list[tuple]:
        return await self._tuples("query", template, False, True)

    getAll = get_all  # the pSpaces names
    queryAll = query_all

    async def get(self, *template: Any, timeout: float | None = None) -> tuple:
        return await self._blocking("get", template, timeout)

    async def query(self, *template: Any, timeout: float | None = None) -> tuple:
        return await self._blocking("query", template, timeout)

    # -- plumbing ----------------------------------------------------------------------------

    def _request(self, op: str, fields: tuple, blocking: bool, all_: bool, session: str | None):
        return wire.Request(op, self.uri.space, fields, blocking, all_, session)

    async def _tuples(self, op: str, template: tuple, blocking: bool, all_: bool) -> list[tuple]:
        answer = await self._call(op, check_template(template), blocking, all_)
        return self._check(answer)

    def _check(self, answer: wire.Response) -> list[tuple]:
        if not answer.ok or answer.kind == "FAILURE":
            why = f": {answer.reason}" if answer.reason else ""
            raise SpaceError(
                f"{self.uri}: the server refused ({answer.code} {answer.message}{why}); "
                f"is there a space named {self.uri.space!r}?"
            )
        return answer.tuples

    async def _call(self, op: str, fields: tuple, blocking: bool, all_: bool) -> wire.Response:
        """A non-blocking request; shielded so that its answer is never dropped half-way."""
        with trio.CancelScope(shield=True):
            try:
                with trio.fail_after(self.op_timeout):
                    if self.uri.mode is Mode.CONN:
                        return await self._exchange_once(
                            self._request(op, fields, blocking, all_, None)
                        )
                    return await self._exchange_shared(op, fields, blocking, all_)
            except trio.TooSlowError:
                await self.aclose()
                raise SpaceError(f"{self.uri}: no answer within {self.op_timeout} s") from None

    async def _exchange_shared(self, op: str, fields: tuple, blocking: bool, all_: bool):
        async with self._lock:
            try:
                if self._stream is None:
                    self._stream = await _connect(self.uri.host, self.uri.port)
                    self._lines = wire.LineBuffer()
                    self._session = 0
                session = str(self._session)
                self._session += 1
                req = self._request(op, fields, blocking, all_, session)
                answer = await _send_and_read(self._stream, req, self._lines)
            except BaseException:
                await self.aclose()  # the next call reconnects
                raise
            if answer.session != session:
                await self.aclose()
                raise SpaceError(
                    f"{self.uri}: answer for session {answer.session}, expected {session}"
                )
            return answer

    async def _exchange_once(self, req: wire.Request) -> wire.Response:
        stream = await _connect(self.uri.host, self.uri.port)
        try:
            return await _send_and_read(stream, req, wire.LineBuffer())
        finally:
            await stream.aclose()

    async def _blocking(self, op: str, template: tuple, timeout: float | None) -> tuple:
        session = "0" if self.uri.mode is Mode.KEEP else None
        req = self._request(op, check_template(template), True, False, session)
        stream = await _connect(self.uri.host, self.uri.port)
        lines = wire.LineBuffer()
        try:
            answer: wire.Response | None = None
            with trio.move_on_after(float("inf") if timeout is None else timeout):
                answer = await _send_and_read(stream, req, lines)
            if answer is None:  # timed out: withdraw, but take an answer already on its way
                answer = await _withdraw(stream, lines)
            if answer is None:
                raise SpaceTimeout(f"{self.uri}: no tuple matched {template!r} within {timeout} s")
        except trio.Cancelled:
            with trio.CancelScope(shield=True):
                late = await _withdraw(stream, lines)
                if late is not None and op == "get" and late.ok and late.tuples:
                    await self.put(*late.tuples[0])  # taken for us as we left: give it back
            raise
        finally:
            with trio.CancelScope(shield=True):  # a Cancelled here would drop a taken tuple
                await stream.aclose()
        tuples = self._check(answer)
        if len(tuples) != 1:
            raise SpaceError(f"{self.uri}: a blocking {op} answered {len(tuples)} tuples")
        return tuples[0]


WITHDRAW_GRACE = 5.0
"""Seconds a withdrawn blocking request waits for the server to answer or close."""


async def _withdraw(stream: trio.SocketStream, lines: wire.LineBuffer) -> wire.Response | None:
    """Half-close after a blocking request: the server either answers (it had already taken a
    tuple) or drops the request and closes. None if it closed (or said nothing in time)."""
    with trio.move_on_after(WITHDRAW_GRACE):
        try:
            await stream.send_eof()
            return await _read_answer(stream, lines)
        except (SpaceError, trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            return None
    # Silent too long: close abortively (RST), so that an answer the server writes later fails
    # on its side and the server puts its tuple back, instead of the write succeeding unread.
    stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return None


def _one(tuples: list[tuple]) -> tuple | None:
    return tuples[0] if tuples else None


async def _connect(host: str, port: int) -> trio.SocketStream:
    try:
        return await trio.open_tcp_stream(host, port)
    except OSError as exc:
        raise SpaceError(f"cannot connect to tcp://{host}:{port}: {exc}") from exc


async def _send_and_read(
    stream: trio.SocketStream, req: wire.Request, lines: wire.LineBuffer
) -> wire.Response:
    try:
        await stream.send_all(wire.encode_line(req.message()))
        return await _read_answer(stream, lines)
    except (trio.BrokenResourceError, OSError) as exc:
        raise SpaceError(f"the connection to the server failed: {exc}") from exc


async def _read_answer(stream: trio.SocketStream, lines: wire.LineBuffer) -> wire.Response:
    while True:
        data = await stream.receive_some(65536)
        if not data:
            raise SpaceError("the server closed the connection without answering")
        got = lines.feed(data)
        if got:
            break
    if len(got) > 1:
        raise SpaceError(f"the server sent {len(got)} answers to one request")
    try:
        return wire.parse_response(got[0])
    except wire.BadRequest as exc:
        raise SpaceError(f"unreadable answer: {exc}") from None
