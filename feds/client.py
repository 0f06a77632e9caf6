"""The async client: an application's view of the overlay, which looks like one plain dataspace.

::

    async with feds.connect("127.0.0.1:7401") as ds:
        handle = ds.assert_(parse("<present \\"Alice\\">"))
        async with ds.observe("<present $who>") as events:
            async for event in events:
                print(event.kind, event.captures)      # "+", ("Alice",)
        ds.send(parse("<speak \\"Alice\\" \\"hi\\">"))
        await ds.sync()                                 # everything above reached every node
        handle = ds.replace(handle, parse("<present \\"Bob\\">"))  # one turn: no gap
        await ds.sync_local()                           # ... reached this client's node only
        ds.retract(handle)

``observation.take()`` returns the events received so far without waiting.

``sync`` is federated: it returns once every earlier action of this client has had its effect on
every node of the overlay and every answer has come back (see :mod:`feds.node`).
:func:`query` builds on it: the matches asserted anywhere before the query began.

**Flow control.** Sending never waits: a producer that sends many values should ``await
ds.drain()`` now and then (say every hundred values), which waits while the connection holds
more than the transport's low-water mark of bytes that the socket has not taken::

    for i, value in enumerate(values):
        ds.send(value)
        if i % 100 == 99:
            await ds.drain()

or, cheaper per value, hands over a hundred at a time (``send_many``, ``publish_many`` and
``retract_many`` act as one call per value would, in order, and check every value first)::

    for start in range(0, len(values), 100):
        ds.send_many(values[start : start + 100])
        await ds.drain()

A node never cuts off a client for sending fast: while the node cannot forward what arrives
(one of its links is congested) it stops reading the client, TCP fills, and ``drain`` waits.
Only a client that does not read what the node sends it is closed, as a slow consumer, once
8 MiB wait for it (``CLIENT_MAX_BACKLOG``, :mod:`feds.transport`); that includes one reading
more slowly than its own sending makes the node send it (observing what it publishes over a
slow downlink), as the node cannot tell slow reading from none.
"""

from __future__ import annotations

import math
import ssl
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Final, NamedTuple

import trio

from feds.actor import MESSAGE, Entity, Facet, Handle, Ref, Turn
from feds.auth import Secrets
from feds.dataspace import observe as observe_record
from feds.driver import Driver
from feds.limits import DEFAULT_NET_LIMITS, NetLimits
from feds.node import LOCAL_SYNC
from feds.patterns import validate
from feds.reactive import PatternLike
from feds.relay import ADMIN, CLIENT, Hello, Relay
from feds.runtime import RETRY_MAX, RETRY_MIN, STATUS
from feds.syntax import parse_pattern
from feds.transport import LOW_WATER, backlog, connect_tcp, wait_backlog
from feds.values import Record, Value, check_value

DEFAULT_TIMEOUT = 10.0
CHECKPOINT_EVERY: Final = 64
"""Events an :class:`Observation` hands out from what has arrived before it yields to other
trio tasks once (a checkpoint)."""


# What a session queues for its next turn: (kind, argument), applied in order by Session._flush.
# Sending and asserting, the bulk of what applications queue, get a kind of their own, so that
# queueing them builds no closure.
_CALL, _SEND, _SEND_MANY, _ASSERT, _ASSERT_MANY, _RETRACT, _RETRACT_MANY = range(7)


class FedsError(Exception):
    """A client-side failure with a message meant for people (connection, timeout, …)."""


def parse_address(address: str) -> tuple[str, int]:
    """``"host:port"`` → ``(host, port)``, with a clear error for anything else."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise FedsError(f"bad address {address!r}: expected HOST:PORT, e.g. 127.0.0.1:7400")
    return host.strip("[]") or "127.0.0.1", int(port)


class Event(NamedTuple):
    """One observation: ``kind`` is ``+`` (now matches), ``-`` (no longer), ``!`` (a message)."""

    kind: str
    captures: tuple
    names: tuple[str, ...] = ()

    def bindings(self) -> dict[str, Value]:
        """The captures by variable name (``$who`` → ``{"who": …}``)."""
        return dict(zip(self.names, self.captures, strict=False))


_new_event = tuple.__new__  # builds an Event without the Python-level __new__ (hot path)


class _Watch(Entity):
    """Collects the events an observer receives until the application takes them.

    Events wait in ``pending``; a task waiting for them is woken once per batch (the first event
    that arrives while it waits), not once per event.
    """

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        self.current: dict[Handle, tuple] = {}
        self.pending: deque[Event] = deque()  # received, not taken yet
        self.waiter: trio.Event | None = None  # set when events arrive or the watch closes
        self.closed = False  # no more events will be added

    def _put(self, kind: str, captures: tuple) -> None:
        if not self.closed:
            self.pending.append(_new_event(Event, (kind, captures, self.names)))
            if self.waiter is not None:
                self.wake()

    def wake(self) -> None:
        """Wake the tasks waiting for events."""
        waiter, self.waiter = self.waiter, None
        if waiter is not None:
            waiter.set()

    def close(self) -> None:
        """No more events: once ``pending`` is taken, the observation ends."""
        self.closed = True
        self.wake()

    def on_publish(self, turn: Turn, value: Value, handle: Handle) -> None:
        self.current[handle] = value
        self._put("+", value)

    def on_retract(self, turn: Turn, handle: Handle) -> None:
        captures = self.current.pop(handle, None)
        if captures is not None:
            self._put("-", captures)

    def on_message(self, turn: Turn, value: Value) -> None:
        self._put("!", value)


def _take_messages(batch: list[tuple]) -> bool:
    """A session actor's :attr:`~feds.actor.Actor.sink`: a batch of messages for observations
    only (a message that reaches the application) is put in them at once, at the commit that
    sent it, as the turn that would run for it would put it and do nothing else; one turn
    fewer for each. Any other batch (an assertion, a retraction, an answer, a sync) is left to
    a turn (False). The scheduler offers a batch only when no earlier one for the actor waits,
    so events reach each observation in the order they would have."""
    for kind, ref, _payload, _handle in batch:
        if kind != MESSAGE or ref.entity.__class__ is not _Watch:
            return False
    batch[0][1].actor.work += len(batch)  # as the turn would count them
    for _kind, ref, payload, _handle in batch:
        if ref.facet.alive:  # as a turn skips an event for a stopped facet
            ref.entity._put("!", payload)
    return True


class _Answer(Entity):
    """Sets a trio event (and keeps the value) when a message arrives."""

    def __init__(self) -> None:
        self.done = trio.Event()
        self.value: Value = None

    def on_message(self, turn: Turn, value: Value) -> None:
        self.value = value
        self.done.set()


class Observation:
    """The events of one observer; iterate it (``async for``) or read ``current``.

    If the connection to the node is lost, iterating (and :meth:`next`) raises
    :class:`FedsError` with the reason once the events received before are consumed.

    Events arrive in batches (what one packet from the node caused). Taking an event that has
    already arrived does not wait: it is a trio checkpoint only every :data:`CHECKPOINT_EVERY`
    events, so a consumer costs one task switch per batch rather than per event, and other
    tasks still run while it works through a large batch. Waiting for the next batch is a
    checkpoint as usual.
    """

    def __init__(self, watch: _Watch, session: Session | None = None) -> None:
        self._watch = watch
        self._pending = watch.pending
        self._session = session
        self._taken = 0  # events taken without a checkpoint

    @property
    def current(self) -> list[tuple]:
        """The captures vectors that match right now."""
        return list(self._watch.current.values())

    def __aiter__(self) -> AsyncIterator[Event]:
        return self

    async def __anext__(self) -> Event:
        if self._pending and self._taken < CHECKPOINT_EVERY:
            self._taken += 1
            return self._pending.popleft()
        return await self._wait()

    async def _wait(self) -> Event:
        """The next event, after a checkpoint: waits for one unless some are pending."""
        self._taken = 0
        if self._pending:  # (a wait is a checkpoint already)
            await trio.lowlevel.checkpoint()
        watch = self._watch
        while not self._pending:
            if watch.closed:
                if self._session is not None:
                    self._session.raise_if_lost()
                raise StopAsyncIteration
            if watch.waiter is None:
                watch.waiter = trio.Event()
            await watch.waiter.wait()
        return self._pending.popleft()

    async def next(self, timeout: float | None = None) -> Event:
        """The next event; raises :class:`FedsError` after ``timeout`` seconds, or when the
        connection is lost."""
        if self._pending and self._taken < CHECKPOINT_EVERY:
            self._taken += 1
            return self._pending.popleft()
        with trio.move_on_after(math.inf if timeout is None else timeout):
            return await self._wait()
        raise FedsError(f"no event within {timeout} s")

    def take(self) -> list[Event]:
        """Every event received so far and not read yet, in order; never waits (``[]`` if none).

        Events arrive as the session's driver runs: after ``await ds.sync()`` (or
        :meth:`Session.sync_local`), every event caused by the session's earlier actions is here.
        """
        events = list(self._pending)
        self._pending.clear()
        return events


class Session:
    """A connection to one node. Methods that change the dataspace return at once; the changes
    are applied in order. Use :meth:`sync` to wait until they have reached every node.

    Actions queued before the driver next runs are applied in one turn, so they cross the
    network as one packet. Nothing bounds what a session queues but :meth:`drain`.
    """

    def __init__(self, driver: Driver, facet: Facet, target: Ref, relay: Relay) -> None:
        self._driver = driver
        self._facet = facet
        self._target = target
        self.relay = relay
        self._handles: dict[int, Handle] = {}
        self._next = 0
        self._pending: list[tuple[int, Any]] = []  # (kind, argument): see _flush
        self._lost = trio.Event()  # set when the connection to the node is lost
        self._wakeups: set[trio.Event] = set()  # what waits for an answer from the node
        self._watches: set[_Watch] = set()  # of open observations
        self._dropped: list[str] = []  # events the relay could not send, since the last sync
        self._done = False  # the application closed the session (not a lost connection)
        # With reconnect: what to assert again at the next connection, by key / by watch.
        self._held: dict[int, Value] | None = None
        self._observing: dict[_Watch, tuple[Value, list[Handle]]] | None = None
        facet.actor.sink = _take_messages

    def _check_open(self) -> None:
        if self.relay.closed and self._held is None:  # (a reconnecting session keeps going)
            raise FedsError(f"the connection is closed: {self.relay.close_reason}")

    def _connection_lost(self) -> None:
        """The relay closed: wake everything that waits for the node, end observations (unless
        the session reconnects)."""
        self._lost.set()
        for event in self._wakeups:
            event.set()
        if self._observing is None:
            for watch in self._watches:
                watch.close()

    def _reattach(self, relay: Relay, target: Ref) -> None:
        """Connected again: assert what the session holds and observe again, in one turn."""
        assert self._held is not None and self._observing is not None
        held, observing = self._held, self._observing
        self.relay = relay
        self._lost = trio.Event()

        def replay(t: Turn) -> None:
            self._target = target
            for key, value in held.items():
                t.retract(self._handles.pop(key, -1))  # (at the old, closed connection)
                self._handles[key] = t.publish(target, value)
            for watch, (pattern, handle) in observing.items():
                t.retract(handle.pop())
                handle.append(t.publish(target, observe_record(pattern, t.ref(watch))))

        self._driver.act(self._facet, replay)

    def _event_dropped(self, why: str) -> None:
        self._dropped.append(why)

    def raise_if_lost(self) -> None:
        """Raise :class:`FedsError` with the reason if the connection to the node is lost."""
        if self._lost.is_set() and not self._done:
            raise FedsError(f"connection to the node lost: {self.relay.close_reason}")

    async def wait_lost(self) -> None:
        """Wait until the connection to the node is lost, then raise :class:`FedsError`."""
        await self._lost.wait()
        self.raise_if_lost()

    async def _answer(self, event: trio.Event, timeout: float | None, what: str) -> None:
        """Wait for ``event`` (an answer from the node); raise if the connection is lost."""
        self._wakeups.add(event)
        try:
            if not self._lost.is_set():
                await _wait(event, timeout, what)
        finally:
            self._wakeups.discard(event)
        self.raise_if_lost()

    def _act(self, kind: int, argument: Any) -> None:
        """Queue an action (:data:`_CALL` and a function of the turn, or a cheaper kind) for the
        session's next turn; the first one queued asks the driver for that turn."""
        self._check_open()
        pending = self._pending
        pending.append((kind, argument))
        if len(pending) == 1:
            self._driver.act(self._facet, self._flush)

    def _call(self, action: Callable[[Turn], None]) -> None:
        self._act(_CALL, action)

    def _flush(self, turn: Turn) -> None:
        """Apply the queued actions in one turn, in order."""
        actions, self._pending = self._pending, []
        target, handles = self._target, self._handles
        for kind, argument in actions:
            if kind == _SEND:
                turn.message(target, argument)
            elif kind == _SEND_MANY:
                message = turn.message
                for value in argument:
                    message(target, value)
            elif kind == _ASSERT:
                key, value = argument
                handles[key] = turn.publish(target, value)
            elif kind == _ASSERT_MANY:
                first, values = argument
                publish = turn.publish
                for key, value in enumerate(values, first):
                    handles[key] = publish(target, value)
            elif kind == _RETRACT:
                turn.retract(handles.pop(argument, -1))
            elif kind == _RETRACT_MANY:
                retract, pop = turn.retract, handles.pop
                for key in argument:
                    retract(pop(key, -1))
            else:
                argument(turn)

    def assert_(self, value: Value) -> int:
        """Assert ``value``; returns a key for :meth:`retract`."""
        check_value(value)
        self._next += 1
        key = self._next
        if self._held is not None:
            self._held[key] = value
        self._act(_ASSERT, (key, value))
        return key

    def publish_many(self, values: Iterable[Value]) -> list[int]:
        """Assert every value of ``values``, in order, as :meth:`assert_` would one by one;
        returns their keys. If one of them is not a value, raises ``TypeError`` and asserts
        none of them."""
        values = _checked(values)
        self._check_open()
        first = self._next + 1
        self._next += len(values)
        keys = list(range(first, first + len(values)))
        if self._held is not None:
            self._held.update(zip(keys, values, strict=True))
        if values:
            self._act(_ASSERT_MANY, (first, values))
        return keys

    def retract(self, key: int) -> None:
        """Withdraw the assertion made under ``key`` (unknown keys are ignored)."""
        if self._held is not None:
            self._held.pop(key, None)
        self._act(_RETRACT, key)

    def retract_many(self, keys: Iterable[int]) -> None:
        """Withdraw the assertions made under ``keys``, in order (unknown keys are ignored)."""
        keys = tuple(keys)
        if self._held is not None:
            for key in keys:
                self._held.pop(key, None)
        if keys:
            self._act(_RETRACT_MANY, keys)
        else:
            self._check_open()

    def replace(self, key: int, value: Value) -> int:
        """Assert ``value`` and withdraw the assertion made under ``key``, in one turn: no
        observer anywhere sees neither (the new value arrives before the old one goes). ``key``
        then stands for ``value`` and is returned; an unknown key just asserts ``value``."""
        check_value(value)
        if self._held is not None:
            self._held[key] = value

        def swap(t: Turn) -> None:
            self._handles[key] = t.replace(self._target, self._handles.pop(key, None), value)  # type: ignore[assignment]

        self._call(swap)
        return key

    def send(self, value: Value) -> None:
        """Send ``value`` as a message to every matching observer in the overlay."""
        check_value(value)
        self._act(_SEND, value)

    def send_many(self, values: Iterable[Value]) -> None:
        """Send every value of ``values`` as a message, in order, as :meth:`send` would one by
        one. If one of them is not a value, raises ``TypeError`` and sends none of them.

        Like :meth:`send` it never waits: hand over a few hundred values at a time and
        :meth:`drain` in between, or the connection's buffer grows by all of them."""
        values = _checked(values)
        if values:
            self._act(_SEND_MANY, values)
        else:
            self._check_open()

    @property
    def backlogged(self) -> bool:
        """Whether the bytes this session produced that its socket has not taken yet are above
        the transport's low-water mark (then :meth:`drain` would wait)."""
        return backlog(self.relay)[0] > LOW_WATER

    async def drain(self, timeout: float | None = DEFAULT_TIMEOUT) -> None:
        """Wait until this session's connection has room: until the bytes it produced that the
        socket has not taken yet are at most the transport's low-water mark.

        The actions queued since the driver last ran are turned into bytes first (one packet),
        so a loop that sends and drains now and then holds at most the low-water mark plus what
        it queued since its last drain. Returns at once (after a trio checkpoint) when there is
        room; raises :class:`FedsError` if there is none within ``timeout`` seconds or the
        connection closes.
        """
        self._check_open()
        if self._pending:
            self._driver.run_now()
        with trio.move_on_after(math.inf if timeout is None else timeout):
            await wait_backlog(self.relay, LOW_WATER)
            self._check_open()
            return
        raise FedsError(f"timed out after {timeout} s waiting for the connection to drain")

    async def sync(self, timeout: float | None = DEFAULT_TIMEOUT) -> None:
        """Wait until every earlier action of this session has reached every node and back."""
        done = trio.Event()
        self._call(lambda t: t.sync(self._target, lambda t2: done.set()))
        await self._answer(done, timeout, "sync")
        if self._dropped:  # reported once, by the sync that follows them
            dropped, self._dropped = self._dropped, []
            raise FedsError(f"{len(dropped)} event(s) were not sent: {dropped[0]}")

    async def sync_local(self, timeout: float | None = DEFAULT_TIMEOUT) -> None:
        """Wait until the node this session is connected to has applied every earlier action of
        the session, and sent back what that caused there (matches at observers of this node).

        Cheap: one round trip to the node, which does not wait for the rest of the overlay
        (``<local-sync reply>``, ``protocols/node.md``). Use :meth:`sync` to wait for every node.
        """
        await self.request(lambda reply: Record(LOCAL_SYNC, (reply,)), timeout)

    @asynccontextmanager
    async def observe(self, pattern: PatternLike) -> AsyncIterator[Observation]:
        """Observe ``pattern`` (text or record form) for the duration of the ``async with``."""
        value, names = _pattern(pattern)
        watch = _Watch(names)
        handle: list[Handle] = []
        self._call(
            lambda t: handle.append(t.publish(self._target, observe_record(value, t.ref(watch))))
        )
        self._watches.add(watch)
        if self._observing is not None:
            self._observing[watch] = (value, handle)
        try:
            yield Observation(watch, self)
        finally:
            if self._observing is not None:
                self._observing.pop(watch, None)
            self._watches.discard(watch)
            watch.close()
            if not self.relay.closed:
                self._call(lambda t: t.retract(handle[-1]))

    async def query(
        self, pattern: PatternLike, timeout: float | None = DEFAULT_TIMEOUT
    ) -> list[tuple]:
        """Every distinct match of ``pattern`` asserted anywhere before the query began."""
        async with self.observe(pattern) as observation:
            await self.sync(timeout)
            return sorted(observation.current, key=repr)

    async def request(
        self, make: Callable[[Ref], Value], timeout: float | None = DEFAULT_TIMEOUT
    ) -> Value:
        """Assert ``make(reply)`` at the node's object until the one answer arrives at ``reply``."""
        answer = _Answer()
        handle: list[Handle] = []
        self._call(lambda t: handle.append(t.publish(self._target, make(t.ref(answer)))))
        try:
            await self._answer(answer.done, timeout, "the answer")
        finally:
            if not self.relay.closed:
                self._call(lambda t: t.retract(handle[0]))
        return answer.value


def _checked(values: Iterable[Value]) -> tuple[Value, ...]:
    """``values`` as a tuple, each checked (``TypeError`` for the first that is not a value)."""
    values = tuple(values)
    for value in values:
        check_value(value)
    return values


def _pattern(pattern: PatternLike) -> tuple[Value, tuple[str, ...]]:
    if isinstance(pattern, str):
        return parse_pattern(pattern)
    validate(pattern)
    return pattern, ()


async def _wait(event: trio.Event, timeout: float | None, what: str) -> None:
    with trio.move_on_after(math.inf if timeout is None else timeout):
        await event.wait()
        return
    raise FedsError(f"timed out after {timeout} s waiting for {what}")


@asynccontextmanager
async def connect(
    address: str,
    *,
    name: str = "client",
    role: str = CLIENT,
    timeout: float | None = DEFAULT_TIMEOUT,
    limits: NetLimits = DEFAULT_NET_LIMITS,
    secrets: Secrets | None = None,
    reconnect: bool = False,
    tls: ssl.SSLContext | None = None,
) -> AsyncIterator[Session]:
    """Connect to the node at ``address`` (``host:port``) as a local application.

    ``limits`` give the keep-alive (a hung node is noticed within ``keepalive_timeout``).
    ``secrets`` (:class:`feds.auth.Secrets`, holding the secret of ``role``) authenticate the
    connection to a node that requires it. ``tls`` (:func:`feds.tls.client_context`) makes the
    connection TLS, checking the node's certificate.

    If the connection is lost, the session's waits and observations raise :class:`FedsError`;
    with ``reconnect`` it re-dials instead (with backoff, forever) and, once connected again,
    re-asserts everything the session holds and re-observes every open observation. Across the
    gap an observer sees ``-`` for each match when the connection goes (what the node asserted
    here is retracted) and ``+`` for each match once it is back; messages sent during the gap
    are lost (the overlay never retains them), and a ``sync`` waiting when it goes raises.
    """
    host, port = parse_address(address)
    driver = Driver()
    ready = trio.Event()
    target: list[Ref] = []
    sessions: list[Session] = []
    relays: list[Relay] = []  # the current connection's relay (a new one per re-dial)

    def on_ready(turn: Turn, hello: Hello, remote: Ref) -> None:
        if sessions:
            sessions[0]._reattach(relays[-1], remote)
        else:
            target.append(remote)
            ready.set()

    def on_close(relay: Relay) -> None:
        ready.set()
        for session in sessions:
            session._connection_lost()

    def on_drop(why: str) -> None:
        for session in sessions:
            session._event_dropped(why)

    def new_relay() -> Relay:
        relays[:] = [
            Relay(
                driver.scheduler,
                name,
                role,
                secrets=secrets,
                on_ready=on_ready,
                on_close=on_close,
                on_drop=on_drop,
            )
        ]
        return relays[0]

    relay = new_relay()
    facet_box: list[Facet] = []
    driver.scheduler.spawn(lambda t: facet_box.append(t.facet), name=name)

    async def link() -> None:
        delay = RETRY_MIN
        while True:
            try:
                await connect_tcp(host, port, relays[-1], limits=limits, ssl_context=tls)
                delay = RETRY_MIN
            except OSError:
                ready.set()
            if not (reconnect and sessions) or sessions[0]._done:
                return
            await trio.sleep(delay)
            delay = min(2 * delay, RETRY_MAX)
            new_relay()

    with single_errors():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(driver.run)
            nursery.start_soon(link)
            await _wait(ready, timeout, f"the node at {address}")
            if relay.closed or not target:
                raise FedsError(relay.close_reason or f"cannot connect to {address}")
            session = Session(driver, facet_box[0], target[0], relay)
            if reconnect:
                session._held = {}
                session._observing = {}
            sessions.append(session)
            try:
                yield session
            finally:
                session._done = True
                relays[-1].close("client done")
                nursery.cancel_scope.cancel()


@contextmanager
def single_errors() -> Iterator[None]:
    """Re-raise a lone exception out of trio's exception groups (nested ones too), so callers
    catch it plainly."""
    try:
        yield
    except BaseExceptionGroup as group:
        lone: BaseException = group
        while isinstance(lone, BaseExceptionGroup) and len(lone.exceptions) == 1:
            lone = lone.exceptions[0]
        if lone is group:
            raise
        raise lone from None


async def status(
    address: str,
    timeout: float | None = DEFAULT_TIMEOUT,
    secrets: Secrets | None = None,
    tls: ssl.SSLContext | None = None,
) -> Value:
    """The ``<status {…}>`` figures of the node at ``address``."""
    async with connect(
        address, name="feds status", role=ADMIN, timeout=timeout, secrets=secrets, tls=tls
    ) as session:
        return await session.request(lambda reply: Record(STATUS, (reply,)), timeout)
