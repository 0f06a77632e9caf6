"""Space repositories and their TCP gates (the trio edge of the pSpaces protocol).

::

    async with SpaceRepository() as repo:
        repo.add("seq", SequentialSpace())
        gate = await repo.add_gate("tcp://127.0.0.1:31415/?keep")
        ...  # jSpace or feds clients use tcp://127.0.0.1:31415/seq?keep

A KEEP connection carries many requests; each is served as it arrives, so a get that blocks does
not hold up a put behind it on the same connection. Answers to waiters that a put wakes are queued
before the put's own answer (as jSpace sends them). A CONN connection carries one request: it is
answered and closed. When a client goes away its blocked requests are dropped, and a tuple taken
for an answer that cannot be written is put back into its space.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable

import trio

from feds.spaces import wire
from feds.spaces.hosting import MemberStore
from feds.spaces.space import Space
from feds.spaces.store import TupleStore, Waiter
from feds.spaces.uri import Mode, UriError, parse_uri

log = logging.getLogger(__name__)

OUTBOX_HIGH = 1024
"""Answers queued on a connection before it stops reading requests (backpressure)."""


class SpaceRepository:
    """Named spaces and the gates that serve them; use as ``async with SpaceRepository() as r``."""

    def __init__(self) -> None:
        self.spaces: dict[str, Space] = {}
        self.gates: dict[str, Gate] = {}
        self._nursery: trio.Nursery | None = None

    def add(self, name: str, space: Space) -> Space:
        if name in self.spaces:
            raise ValueError(f"the repository already has a space named {name!r}")
        if not name or "/" in name or "?" in name:
            raise ValueError(f"{name!r} cannot be a space name")
        self.spaces[name] = space
        return space

    def remove(self, name: str) -> Space | None:
        """Forget ``name`` (no effect if unknown); the space itself lives on."""
        return self.spaces.pop(name, None)

    def get(self, name: str) -> Space | None:
        return self.spaces.get(name)

    addSpace = add  # the guideline's names
    delSpace = remove

    async def __aenter__(self) -> SpaceRepository:
        self._cm = trio.open_nursery()
        self._nursery = await self._cm.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> bool | None:
        for uri in list(self.gates):
            self.close_gate(uri)
        self._nursery = None
        return await self._cm.__aexit__(*exc)

    async def add_gate(self, uri: str) -> Gate:
        """Listen at a gate URI (``tcp://host[:port]/?keep|conn``; port 0 picks a free one)."""
        if self._nursery is None:
            raise RuntimeError("add_gate needs the repository open: async with SpaceRepository()")
        parsed = parse_uri(uri)
        if parsed.space:
            raise UriError(f"{uri}: a gate URI names no space (tcp://host:port/?keep)")
        if uri in self.gates:
            return self.gates[uri]
        gate = Gate(self, parsed.host, parsed.port, parsed.mode)
        await self._nursery.start(gate.run)
        self.gates[uri] = gate
        return gate

    def close_gate(self, uri: str) -> None:
        """Stop listening at ``uri`` and close its connections (no effect if it is not open).

        ``uri`` is the URI given to :meth:`add_gate` or the gate's bound ``Gate.uri`` (which
        has the port the OS chose for port 0), in any spelling of the same host, port and mode.
        """
        if uri not in self.gates:
            wanted = parse_uri(uri).gate()
            uri = next(
                (k for k, g in self.gates.items() if wanted in (g.uri, parse_uri(k).gate())), uri
            )
        gate = self.gates.pop(uri, None)
        if gate is not None:
            gate.close()

    addGate = add_gate
    closeGate = close_gate


class Gate:
    """One listening address of a repository, in one mode."""

    def __init__(self, repo: SpaceRepository, host: str, port: int, mode: Mode) -> None:
        self.repo = repo
        self.host = host
        self.port = port
        self.mode = mode
        self._scope = trio.CancelScope()

    @property
    def uri(self) -> str:
        return f"tcp://{self.host}:{self.port}/?{self.mode.value}"

    def space_uri(self, space: str) -> str:
        return f"tcp://{self.host}:{self.port}/{space}?{self.mode.value}"

    def close(self) -> None:
        self._scope.cancel()

    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        with self._scope:
            listeners = await trio.open_tcp_listeners(self.port, host=self.host)
            self.port = listeners[0].socket.getsockname()[1]
            async with trio.open_nursery() as nursery:
                await nursery.start(trio.serve_listeners, self._serve, listeners)
                task_status.started(self)

    async def _serve(self, stream: trio.SocketStream) -> None:
        try:
            await _Connection(self.repo, stream, self.mode).run()
        except Exception:  # one connection's failure must never stop the gate
            log.exception("pSpaces connection failed")


class _Connection:
    """One client connection: reads requests, answers them in order of completion."""

    def __init__(self, repo: SpaceRepository, stream: trio.SocketStream, mode: Mode) -> None:
        self.repo = repo
        self.stream = stream
        self.mode = mode
        self.outbox: deque[tuple[bytes, Callable[[], None] | None]] = deque()
        self.pending: list[tuple[TupleStore, Waiter]] = []
        self.requests = 0
        self.reading = True
        self._to_writer = trio.lowlevel.ParkingLot()
        self._to_reader = trio.lowlevel.ParkingLot()

    async def run(self) -> None:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write_loop, nursery.cancel_scope)
                await self._read_loop()
                for store, waiter in self.pending:  # the client is gone: drop its waits
                    store.cancel(waiter)
                self.pending.clear()
                self.reading = False
                self._to_writer.unpark_all()
        finally:
            for store, waiter in self.pending:
                store.cancel(waiter)
            for _line, restore in self.outbox:
                if restore is not None:
                    restore()
            self.outbox.clear()
            with trio.CancelScope(shield=True):
                await self.stream.aclose()

    def _send(self, msg: dict, restore: Callable[[], None] | None = None) -> None:
        self.outbox.append((wire.encode_line(msg), restore))
        self._to_writer.unpark_all()

    async def _write_loop(self, scope: trio.CancelScope) -> None:
        while True:
            while self.outbox:
                line, restore = self.outbox.popleft()
                try:
                    await self.stream.send_all(line)
                except BaseException as exc:  # not (wholly) written: the client never got it
                    if restore is not None:
                        restore()
                    if not isinstance(exc, trio.BrokenResourceError | trio.ClosedResourceError):
                        raise
                    scope.cancel()
                    return
                self._to_reader.unpark_all()
                if self.mode is Mode.CONN:
                    scope.cancel()  # one answer per connection
                    return
            if not self.reading and not self.pending:
                scope.cancel()
                return
            await self._to_writer.park()

    async def _read_loop(self) -> None:
        lines = wire.LineBuffer()
        while True:
            try:
                data = await self.stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return  # the client reset the connection: as good as gone
            if not data:
                return
            try:
                batch = lines.feed(data)
            except wire.BadRequest as exc:
                self._send(wire.failure(None, exc.reason))
                return
            for line in batch:
                if self.mode is Mode.CONN and self.requests:
                    continue  # CONN: one request per connection
                self.requests += 1
                try:
                    self._handle(line)
                except Exception:
                    log.exception("pSpaces request failed: %r", line[:200])
                    self._send(wire.internal_error())
                while len(self.outbox) > OUTBOX_HIGH:
                    await self._to_reader.park()

    def _handle(self, line: bytes) -> None:
        try:
            req = wire.parse_request(line)
        except wire.BadRequest as exc:
            self._send(wire.failure(exc.session, exc.reason))
            return
        session = req.session
        space = self.repo.get(req.target)
        if space is None:
            self._send(
                wire.put_response(False, session) if req.op == "put" else wire.failure(session)
            )
            return
        if req.op == "put":
            space.store.put(req.fields)
            self._send(wire.put_response(True, session))
            return
        store = space.store
        if isinstance(store, MemberStore):
            self._federated(store, req)
            return
        if req.all:
            found = store.find_all(req.fields, req.removes)
            self._send(wire.get_response(found, session), _restorer(store, found, req.removes))
            return
        one = store.find(req.fields, req.removes)
        if one is not None or not req.blocking:
            found = [] if one is None else [one]
            self._send(wire.get_response(found, session), _restorer(store, found, req.removes))
            return
        entry: list = []

        def deliver(fields: tuple) -> None:
            self.pending.remove(entry[0])
            self._send(
                wire.get_response([fields], session), _restorer(store, [fields], req.removes)
            )

        entry.append((store, store.wait(req.fields, req.removes, deliver)))
        self.pending.append(entry[0])

    def _federated(self, store: MemberStore, req: wire.Request) -> None:
        """A federated space answers every retrieval later, as a blocked get is answered."""
        entry: list = []

        def deliver(found: list[tuple]) -> None:
            self.pending.remove(entry[0])
            self._send(wire.get_response(found, req.session), _restorer(store, found, req.removes))

        if req.blocking and not req.all:
            call = store.wait(req.fields, req.removes, lambda fields: deliver([fields]))
        else:
            call = store.lookup(req.fields, req.removes, req.all, deliver)
        entry.append((store, call))
        self.pending.append(entry[0])


def _restorer(
    store: TupleStore | MemberStore, taken: list[tuple], removed: bool
) -> Callable[[], None] | None:
    """Puts ``taken`` back if their answer cannot be written (only for gets that took some)."""
    if not removed or not taken:
        return None

    def restore() -> None:
        for fields in taken:
            store.put(fields)

    return restore
