"""Transports: move bytes between a :class:`~feds.relay.Relay` and the world (trio, thin).

* :func:`serve_tcp` listens and gives every accepted connection a fresh relay;
* :func:`connect_tcp` dials out for one relay;
* :func:`pump` runs one relay over any trio byte stream (TCP now, TLS later);
* :func:`memory_pair` links two relays of one process without sockets (``feds up``, tests).

A pump has a reader task (read → ``relay.receive``, then the turns the bytes caused run right
there, see :class:`_Link`) and a writer task for whatever the socket does not take at
once. When either side ends — the socket
fails or reaches EOF, or the relay closes (protocol error, :meth:`Relay.close`) — the relay is
closed with the reason, its last bytes (the ``<error ...>`` packet) are sent if possible and the
stream is closed. Closing the relay retracts everything the far side asserted here.

**Backpressure.** Each connection's *backlog* is what its relay produced that the stream has
not accepted yet (:func:`backlog`). A node's TCP links share a :class:`Backpressure`: while one
of its *node links* (to its parent or a child node) is congested (backlog above a high-water
mark, until it falls to a low-water mark), the node reads none of its other links; a link is
never paused for its own backlog, which is why a tree of nodes cannot deadlock (the argument is
in :class:`Backpressure`). A *client* link (an application's connection) never pauses anything:
one client that stops reading must not stall the node's other clients, so its backlog just
grows, up to its own bound, where it is closed as a slow consumer with the reason in an
``<error ...>`` packet. The scheduler's queue is bounded too: a reader reads again only once the
turns of its last read have run. A far side that keeps sending on a link but does not read what
that causes is closed as a slow consumer. An application bounds its own side with
:func:`wait_backlog` (``Session.drain``): a client's link is not paused, so without it a client
that produces faster than the node reads would only grow its own output buffer.

In-process links (:func:`memory_pair`) hand bytes straight to the other relay, so they have no
backlog and take no part in this: a node behind one is not paused by its neighbour's congestion
(bounding them would need each end's :class:`Backpressure`, which the runtime does not pass).

The transports only move bytes: the relay's turns run on its scheduler, so a
:class:`feds.driver.Driver` for that scheduler must be running. The simulator does not use this
module; it moves bytes between relays itself (:func:`feds.relay.exchange`) on a virtual clock.
"""

from __future__ import annotations

import contextlib
import logging
import os
import ssl
import sys
import weakref
from collections.abc import Callable
from typing import Any, Final

import trio

from feds.driver import Driver
from feds.limits import DEFAULT_NET_LIMITS, NetLimits
from feds.relay import PEER, Relay

__all__ = [
    "Backpressure",
    "backlog",
    "connect_tcp",
    "listener_port",
    "memory_pair",
    "pump",
    "serve_tcp",
    "wait_backlog",
]

try:
    from fcntl import ioctl
    from termios import FIONREAD
except ImportError:  # not a POSIX system: unread bytes are not looked for
    ioctl = None

log = logging.getLogger("feds.transport")

RECEIVE_SIZE: Final = 65536
"""Most bytes read from a stream at once."""
CLOSE_TIMEOUT: Final = 2.0
"""Seconds allowed for the last bytes (the error packet) once a relay has closed."""
HIGH_WATER: Final = 512 * 1024
"""Bytes of backlog above which a link is congested (its node stops reading its other links)."""
LOW_WATER: Final = 128 * 1024
"""Bytes of backlog at or below which a congested link is no longer congested."""
MAX_BACKLOG: Final = 64 * 1024 * 1024
"""Bytes of backlog at which a node closes a node link as a slow consumer."""
CLIENT_MAX_BACKLOG: Final = 8 * 1024 * 1024
"""Bytes of backlog at which a node closes a client link as a slow consumer."""

_STREAM_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


class _Signal:
    """A level-triggered wakeup: ``set`` from sync code, ``wait`` in a task (one waiter)."""

    def __init__(self) -> None:
        self._event = trio.Event()

    def set(self) -> None:
        self._event.set()

    async def wait(self) -> None:
        await self._event.wait()
        self._event = trio.Event()


class Backpressure:
    """Flow control among the links of one node: while one of its node links is *congested*
    (its backlog, the bytes taken from its relay that the far side has not yet accepted, went
    above ``high_water`` and has not yet fallen to ``low_water``), the node reads none of its
    other links. Bytes stop arriving where they would have to leave through the congested link, and
    the far sides' own flow control (TCP's window, then theirs) slows them down.

    A link is never paused for its own congestion. That is what keeps a tree of nodes free of
    deadlock: a reader waits only for a *different* link of its node to drain, which needs the
    node at that link's far end to read it, which waits (if at all) only for a link other than
    that one; such a chain of waits never turns back along a link, so in a tree it ends at a node
    (or client) with no other link to wait for, which reads, and every link on the chain
    drains in turn. Clients have one link and never pause.

    Client links (the far side said it is a client or admin tool) never congest: a node does not
    stop serving its other clients for one that stops reading. A client link's backlog is
    bounded by ``client_max_backlog`` instead, where it is closed as a slow consumer (its
    unsent output dropped, the reason sent after what is already on its way). This only removes
    waits, so the argument above still holds: every wait is still for a node link.

    What a node link's backlog can still gain while its node is paused is bounded by the reads
    under way (one read's worth of turns each), except for the output a link causes on itself:
    a far side that keeps sending but does not read. Such a link is closed as a slow consumer
    when its backlog reaches ``max_backlog``.
    """

    def __init__(
        self,
        high_water: int = HIGH_WATER,
        low_water: int = LOW_WATER,
        max_backlog: int = MAX_BACKLOG,
        client_max_backlog: int = CLIENT_MAX_BACKLOG,
    ) -> None:
        if not 0 <= low_water < high_water < max_backlog or client_max_backlog <= 0:
            raise ValueError(
                "expected 0 <= low_water < high_water < max_backlog and 0 < client_max_backlog"
            )
        self.high_water = high_water
        self.low_water = low_water
        self.max_backlog = max_backlog
        self.client_max_backlog = client_max_backlog
        self._congested: dict[_Link, float] = {}  # link -> when it became congested
        self._drained = trio.Event()

    def update(self, link: _Link) -> None:
        """Note a change of ``link``'s backlog."""
        size = link.backlog
        client = link.client
        limit = self.client_max_backlog if client else self.max_backlog
        if size >= limit and not link.relay.closed:
            link.unsent.clear()
            self.discard(link)
            bound = "client-max-backlog" if client else "max-backlog"
            link.relay.close(f"slow consumer: {size} bytes not taken ({bound} {limit})")
        elif client:
            self.discard(link)  # in case it congested before its hello said it is a client
        elif link in self._congested:
            if size <= self.low_water:
                self.discard(link)
        elif size > self.high_water:
            self._congested[link] = trio.current_time()

    def discard(self, link: _Link) -> None:
        """Forget ``link`` (it drained or ended) and let the readers waiting for it go on."""
        if link in self._congested:
            del self._congested[link]
            self._drained.set()
            self._drained = trio.Event()

    def holds(self, link: _Link) -> bool:
        """Whether a link other than ``link`` is congested: ``link``'s reader must wait
        (:meth:`wait_turn`) before it reads again."""
        congested = self._congested
        return bool(congested) and (len(congested) > 1 or link not in congested)

    async def wait_turn(self, link: _Link) -> None:
        """Wait until no link other than ``link`` is congested."""
        while self.holds(link):
            await self._drained.wait()

    def progressed(self, link: _Link) -> None:
        """The far side of ``link`` took bytes, or sent some: a congested link is slow, not
        stalled, so its stall clock starts again.

        A far side that sends (at least its keep-alive pings: a node pings while it is paused)
        but does not read is paced by a congested link of its own, further on: that is
        backpressure doing its job. Cutting the link would drop everything it carried and send
        it again once re-linked, into the same congestion.
        """
        if link in self._congested:
            self._congested[link] = trio.current_time()

    def postpone(self, link: _Link, seconds: float) -> None:
        """Move ``link``'s stall clock on by ``seconds`` (its node was stalled that long)."""
        if link in self._congested:
            self._congested[link] += seconds

    def congested_since(self, link: _Link) -> float | None:
        """When ``link`` became congested or last made progress (trio's clock), or None if it
        is not congested."""
        return self._congested.get(link)


def backlog(relay: Relay) -> tuple[int, int]:
    """The bytes taken from ``relay`` not yet accepted by its stream, now and at most so far
    (``(0, 0)`` for a relay no pump runs)."""
    link = _links.get(relay)
    return (link.backlog, link.peak) if link is not None else (0, 0)


async def wait_backlog(relay: Relay, level: int = LOW_WATER) -> None:
    """Wait until ``relay``'s backlog (:func:`backlog`) is at most ``level`` bytes or the relay
    is closed. A trio checkpoint even when there is nothing to wait for; returns at once for a
    relay no pump runs (in-process links have no backlog)."""
    await trio.lowlevel.checkpoint()
    link = _links.get(relay)
    while link is not None and link.backlog > level and not relay.closed:
        await link.progressed.wait()


def _watch(relay: Relay) -> _Signal:
    """Install a wakeup as the relay's ``on_output`` (replacing any earlier one)."""
    signal = _Signal()
    relay.on_output = signal.set
    return signal


async def pump(
    stream: trio.abc.Stream,
    relay: Relay,
    *,
    receive_size: int = RECEIVE_SIZE,
    backpressure: Backpressure | None = None,
    limits: NetLimits | None = DEFAULT_NET_LIMITS,
) -> None:
    """Move bytes between ``stream`` and ``relay`` until either ends; then close both.

    The pump takes over ``relay.on_output``. Cancelling it closes the relay too. Links pumped
    with the same ``backpressure`` (those of one node) pause each other's reading while one is
    congested (:class:`Backpressure`). With ``limits`` (None: none), the link also proves it
    is alive and closes itself when a timeout of :class:`~feds.limits.NetLimits` expires
    (:meth:`_Link.watchdog`). Once the relay has closed, its last bytes get
    :data:`CLOSE_TIMEOUT` seconds to leave, then the stream is closed whatever the far side does.
    """
    link = _Link(stream, relay, backpressure)
    sent_all = False  # the relay closed and the stream took everything it had to send
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(link.read_loop, receive_size)
            nursery.start_soon(link.end_when_closed, nursery.cancel_scope)
            if limits is not None:
                nursery.start_soon(link.watchdog, limits)
            sent_all = await link.write_loop()
            nursery.cancel_scope.cancel()
    finally:
        if not relay.closed:
            relay.close("transport stopped")
        if backpressure is not None:
            backpressure.discard(link)
        link.progress()
        # Nothing of the link may outlive it: the relay (with its actor and receive buffer)
        # would stay reachable from the link table otherwise.
        _links.pop(relay, None)
        relay.on_output = None
        try:
            if sent_all:
                await _linger(stream)
        finally:
            await trio.aclose_forcefully(stream)


async def _linger(stream: trio.abc.Stream) -> None:
    """Let the far side read what was written before the close (the error packet that says
    why): end the sending direction, then discard what the far side still sends until it closes
    too, for at most :data:`CLOSE_TIMEOUT` seconds. Closing a TCP socket that holds bytes not
    read yet (a keep-alive the far side sent after the node stopped reading) resets the
    connection, and the reset throws away what the kernel had not delivered yet: a slow
    consumer cut at 1 MB of backlog would lose the reason and the rest of its data. Over TLS the
    same is done to the stream under it. Cancelled (the process stops), it gives up at once."""
    raw = stream.transport_stream if isinstance(stream, trio.SSLStream) else stream
    if not isinstance(raw, trio.SocketStream):
        return
    with trio.move_on_after(CLOSE_TIMEOUT), contextlib.suppress(*_STREAM_ERRORS):
        await raw.send_eof()
        while await raw.receive_some(RECEIVE_SIZE):
            pass


class _Link:
    """One relay over one stream: the state shared by its reader and writer tasks.

    With a :class:`~feds.driver.Driver` for the relay's scheduler, the reader task runs the turns
    each read causes itself (:meth:`Driver.run_now`), and the relay's output is written by
    whichever task ran the turns that produced it, once per run of turns
    (:meth:`Driver.after_turns`): straight into a socket's kernel buffer with a non-blocking
    ``write`` when the stream is a :class:`trio.SocketStream` and nothing is waiting to be sent
    before it. Only what the kernel does not take is left to the writer task, so at most one
    task writes to the stream at a time: the writer, while it is sending or ``unsent`` holds
    bytes. Without a driver, or on other streams, the writer task sends everything.
    """

    def __init__(
        self, stream: trio.abc.Stream, relay: Relay, backpressure: Backpressure | None
    ) -> None:
        self.stream = stream
        self.relay = relay
        self.backpressure = backpressure
        self.driver = Driver.of(relay.scheduler)
        self.fd = _socket_fd(stream)
        self.unsent = bytearray()  # taken from the relay, not yet given to the stream
        self.sending = 0  # bytes the writer task is sending now
        self.peak = 0  # the largest backlog so far
        self.signal = _Signal()  # wakes the writer task
        self.progressed = trio.Event()  # set (and replaced) when the backlog shrinks or ends
        self.closed = trio.Event()  # set once the relay has closed
        self.last_read = trio.current_time()  # when bytes last arrived (or reading resumed)
        self.reading = True  # False while the reader is paused for another link's congestion
        self.partial_since: float | None = None  # when the frame being received began
        self._flush_queued = False
        relay.on_output = self._on_output
        _links[relay] = self
        if relay.closed:
            self.closed.set()

    @property
    def client(self) -> bool:
        """Whether the far side dialed us as an application (client or admin tool), not a node."""
        hello = self.relay.remote_hello
        return self.relay.listener and hello is not None and hello.role != PEER

    @property
    def backlog(self) -> int:
        """Bytes taken from the relay that the stream has not accepted yet."""
        return len(self.unsent) + self.sending

    def progress(self) -> None:
        """Wake the tasks waiting in :func:`wait_backlog`."""
        self.progressed.set()
        self.progressed = trio.Event()

    def _queue(self, data: bytes | memoryview) -> None:
        """Leave ``data`` to the writer task."""
        self.unsent += data
        self.signal.set()
        self.peak = max(self.peak, self.backlog)
        if self.backpressure is not None:
            self.backpressure.update(self)

    def _on_output(self) -> None:
        if self.relay.closed:
            self.closed.set()
            self.signal.set()  # the writer ends once the last bytes are out, even if none are
        if self.driver is None:
            self.flush()
        elif not self._flush_queued:
            self._flush_queued = True
            self.driver.after_turns(self.flush)

    def flush(self) -> None:
        """Write the relay's output now if the kernel takes it; leave the rest to the writer."""
        self._flush_queued = False
        data = self.relay.data_to_send()
        if not data:
            return
        if self.unsent or self.sending or self.fd is None or self.relay.closed:
            self._queue(data)
            return
        try:
            sent = os.write(self.fd, data)
        except BlockingIOError:
            sent = 0
        except OSError as e:
            self.relay.close(f"connection lost: {e or type(e).__name__}")
            return
        if sent < len(data):
            self._queue(memoryview(data)[sent:])

    async def read_loop(self, receive_size: int) -> None:
        stream, relay, driver = self.stream, self.relay, self.driver
        backpressure = self.backpressure
        data = b""
        try:
            while not relay.closed:
                if backpressure is not None and backpressure.holds(self):
                    self.reading = False
                    paused = trio.current_time()
                    await backpressure.wait_turn(self)
                    self._resume(paused)
                    self.reading = True
                if self.fd is None:
                    data = await stream.receive_some(receive_size)
                else:
                    data = await self._read_socket(receive_size, len(data) == receive_size)
                if not data:
                    relay.close("connection closed by the far side")
                    return
                frames = relay.stats.packets_in
                if driver is None:
                    relay.receive(data)
                    idle = True
                else:
                    # Run what the bytes caused here, and read again only once it has all run,
                    # so the scheduler's queue holds at most one read's worth of turns per
                    # connection (see below).
                    idle = driver.run_now(lambda data=data: relay.receive(data))
                # Noted once the bytes' first turns have run and their output is written: the
                # same task step, and the write is not kept waiting.
                self.last_read = trio.current_time()
                if backpressure is not None:
                    backpressure.progressed(self)  # the far side is alive: slow, not stalled
                if not idle:
                    # The rest of the turns, in slices. Meanwhile (a big turn takes seconds)
                    # the far side's silence is not its fault: the link counts as paused, so
                    # the watchdog pings the far side instead of timing it out.
                    self.reading = False
                    paused = self.last_read
                    while not idle:
                        await trio.lowlevel.checkpoint()
                        idle = driver.run_now()  # type: ignore[union-attr]
                    self._resume(paused)
                    self.reading = True
                if not relay.partial_input:
                    self.partial_since = None
                elif self.partial_since is None or relay.stats.packets_in != frames:
                    # a frame begun by this read (a stream of frames, each read ending in one,
                    # is not a frame that never ends), counted since the read or since reading
                    # resumed after the node's busy spell
                    self.partial_since = self.last_read
        except _STREAM_ERRORS as e:
            relay.close(f"connection lost: {e or type(e).__name__}")

    def _resume(self, paused: float) -> None:
        """Reading resumes after a pause that began at ``paused``: the time paused counts
        neither as the far side's silence nor towards the frame being received."""
        self.last_read = now = trio.current_time()
        if self.partial_since is not None:
            self.partial_since += now - paused

    def _stalled(self, seconds: float) -> None:
        """This process ran none of its tasks for ``seconds`` (no CPU for it on a loaded
        machine, a long collection, a suspended host): that time counts neither as the far
        side's silence, nor towards the frame being received or the link's congestion.

        The far side may have shared the stall (a node or client in this process, the same
        host), so nothing arrived meanwhile, and its next ping is due only after it has run
        again. Without this, every link of a process that stalled for longer than the
        keep-alive timeout was cut the moment it ran again. A far side that died is still
        found, the stall's length later."""
        self.last_read += seconds
        if self.partial_since is not None:
            self.partial_since += seconds
        if self.backpressure is not None:
            self.backpressure.postpone(self, seconds)

    async def end_when_closed(self, scope: trio.CancelScope) -> None:
        """Once the relay has closed, give its last bytes :data:`CLOSE_TIMEOUT` seconds, then
        end the link even if a send is stuck (a far side that reads nothing)."""
        await self.closed.wait()
        await trio.sleep(CLOSE_TIMEOUT)
        scope.cancel()

    async def watchdog(self, limits: NetLimits) -> None:
        """Every ``keepalive_interval``: close the relay if a timeout has expired, else ping the
        far side if nothing arrived from it for an interval (its ``<pong>`` proves it alive).
        Waking more than an interval late means this process stalled: see :meth:`_stalled`."""
        relay = self.relay
        started = trio.current_time()
        sent = relay.stats.bytes_out
        while not relay.closed:
            asleep = trio.current_time()
            await trio.sleep(limits.keepalive_interval)
            if relay.closed:  # closed meanwhile: its handshake or silence no longer matter
                return
            now = trio.current_time()
            stalled = now - asleep - limits.keepalive_interval
            if stalled > limits.keepalive_interval:
                started += stalled
                self._stalled(stalled)
            reason = self.overdue(limits, started, now)
            if reason is not None:
                log.warning("%r: %s", relay, reason)
                relay.close(reason)
                return
            # A paused reader pings too: the far side hears from us although we do not read it.
            # So does a side that sent nothing for an interval while busy reading a flood: the
            # far side's own pings wait behind that flood, so our pongs would come too late.
            quiet = relay.stats.bytes_out == sent
            if quiet or not self.reading or now - self.last_read >= limits.keepalive_interval:
                relay.ping()
            sent = relay.stats.bytes_out

    def overdue(self, limits: NetLimits, started: float, now: float) -> str | None:
        """Why the link must end now (a timeout of ``limits`` expired), or None."""
        relay = self.relay
        if not relay.ready and now - started > limits.handshake_timeout:
            return f"no handshake within {limits.handshake_timeout:g} s"
        partial_since = self.partial_since if self.reading else None
        if partial_since is not None and now - partial_since > limits.frame_timeout:
            return (
                f"frame not completed within {limits.frame_timeout:g} s "
                f"({relay.partial_input} bytes received)"
            )
        if (
            self.reading
            and relay.can_ping
            and now - self.last_read > limits.keepalive_timeout
            and not _unread_bytes(self.stream)
        ):
            return f"nothing received for {limits.keepalive_timeout:g} s (keep-alive timeout)"
        since = None if self.backpressure is None else self.backpressure.congested_since(self)
        if since is not None and now - since > limits.stall_timeout:
            return (
                f"slow consumer: congested for {limits.stall_timeout:g} s "
                f"({self.backlog} bytes not taken)"
            )
        return None

    async def _read_socket(self, size: int, eager: bool) -> bytes:
        """Read up to ``size`` bytes from the socket (``b""`` at its end): wait until it is
        readable, then read; or, when ``eager`` (the last read filled the buffer, so more is
        likely waiting), read after a mere checkpoint.

        ``SocketStream.receive_some`` does it the other way round: it tries to read and waits
        only if that fails. When packets come one at a time (a round trip), that is a failing
        ``recv``, an exception and trio's layers of error translation for every packet: about
        40 % of a minimal trio router's CPU per packet on the benchmark chain, and a quarter of
        a feds node's (``benchmarks/floor.py``). OS errors are left to the read loop.
        """
        fd = self.fd
        assert fd is not None
        if eager:
            await trio.lowlevel.checkpoint()
        else:
            await trio.lowlevel.wait_readable(fd)
        while True:
            try:
                return os.read(fd, size)
            except BlockingIOError:  # a spurious wakeup
                await trio.lowlevel.wait_readable(fd)

    async def _send_socket(self, data: bytes) -> None:
        """Send ``data`` as the kernel takes it, noting each part the far side took, so that a
        far side taking a large backlog slowly but steadily is seen making progress (it is
        slow, not stalled: :meth:`Backpressure.progressed`)."""
        fd = self.fd
        assert fd is not None
        view = memoryview(data)
        while view:
            await trio.lowlevel.wait_writable(fd)
            try:
                sent = os.write(fd, view)
            except BlockingIOError:  # a spurious wakeup
                continue
            view = view[sent:]
            self.sending = len(view)
            if self.backpressure is not None:
                self.backpressure.progressed(self)

    async def write_loop(self) -> bool:
        """Send what the kernel did not take at once; return once the relay is closed and
        drained: True if the stream took everything (False: a send failed or timed out)."""
        stream, relay = self.stream, self.relay
        while True:
            self.unsent += relay.data_to_send()
            data = bytes(self.unsent)
            self.unsent.clear()
            if data and relay.closed:
                with trio.move_on_after(CLOSE_TIMEOUT), contextlib.suppress(*_STREAM_ERRORS):
                    await stream.send_all(data)
                    return True
                return False
            if data:
                self.sending = len(data)
                try:
                    if self.fd is None:
                        await stream.send_all(data)
                    else:
                        await self._send_socket(data)
                except _STREAM_ERRORS as e:
                    relay.close(f"connection lost: {e or type(e).__name__}")
                    return False
                finally:
                    self.sending = 0
                    if self.backpressure is not None:
                        self.backpressure.update(self)
                    self.progress()
            elif relay.closed:
                return True
            else:
                await self.signal.wait()


_links: weakref.WeakKeyDictionary[Relay, _Link] = weakref.WeakKeyDictionary()


def _cause(exc: BaseException) -> str:
    """The innermost reason of a stream error (trio wraps the ``ssl.SSLError``)."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return str(exc) or type(exc).__name__


def _socket_fd(stream: trio.abc.Stream) -> int | None:
    """The file descriptor to write to directly, for a socket stream on a POSIX system.

    (``os.write`` on a socket is ``send`` without flags; a broken connection raises
    ``BrokenPipeError`` as Python ignores ``SIGPIPE``.)
    """
    if isinstance(stream, trio.SocketStream) and os.name == "posix":
        return stream.socket.fileno()
    return None


def _unread_bytes(stream: trio.abc.Stream) -> int:
    """How many bytes wait unread in the kernel's buffer of ``stream``'s socket (0 if unknown).

    A process starved of CPU for longer than the keep-alive timeout (a busy machine, a long
    garbage collection) may run its watchdog before its reader when it wakes: the far side's
    pings are there, only not read yet, and the link must not be cut for silence.
    """
    while isinstance(stream, trio.SSLStream):
        stream = stream.transport_stream
    if ioctl is None or not isinstance(stream, trio.SocketStream):
        return 0
    try:
        answer = ioctl(stream.socket.fileno(), FIONREAD, b"\0\0\0\0")
    except OSError:
        return 0
    return int.from_bytes(answer, sys.byteorder)


def listener_port(listeners: list[Any]) -> int:
    """The port the first of ``serve_tcp``'s listeners is bound to (useful after port 0)."""
    return listeners[0].socket.getsockname()[1]


async def serve_tcp(
    host: str | None,
    port: int,
    make_relay: Callable[[], Relay],
    *,
    backpressure: Backpressure | None = None,
    limits: NetLimits = DEFAULT_NET_LIMITS,
    ssl_context: ssl.SSLContext | None = None,
    task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on ``host``:``port`` and run a fresh relay over every accepted connection.

    ``task_status.started`` receives the listeners (see :func:`listener_port`). One failing
    connection never stops the server. ``backpressure`` is shared by every connection (see
    :func:`pump`). A connection beyond ``limits.max_connections`` is told why and closed.
    With ``ssl_context`` every connection is TLS (a failed TLS handshake is logged and closed).
    """
    listeners = await trio.open_tcp_listeners(port, host=host)
    for listener in listeners:
        log.info("listening on %s", listener.socket.getsockname()[:2])
    active: set[Relay] = set()  # the connections being served (closed ones as they end)

    async def handle(socket_stream: trio.SocketStream) -> None:
        try:
            peer = socket_stream.socket.getpeername()
        except OSError:
            peer = "?"
        stream: trio.abc.Stream = socket_stream
        if ssl_context is not None:
            stream = trio.SSLStream(socket_stream, ssl_context, server_side=True)
            try:
                with trio.fail_after(limits.handshake_timeout):
                    await stream.do_handshake()
            except (trio.TooSlowError, *_STREAM_ERRORS) as exc:
                log.warning("TLS handshake with %s failed: %s", peer, _cause(exc))
                await trio.aclose_forcefully(stream)
                return
        try:
            relay = make_relay()
        except Exception:
            log.exception("cannot make a relay for the connection from %s", peer)
            await trio.aclose_forcefully(stream)
            return
        open_count = sum(not r.closed for r in active)
        if open_count >= limits.max_connections:
            log.warning("refused a connection from %s: %d connections already", peer, open_count)
            relay.close(f"too many connections (max {limits.max_connections})")
        else:
            log.info("accepted a connection from %s", peer)
        active.add(relay)
        try:
            await pump(stream, relay, backpressure=backpressure, limits=limits)
        except Exception:
            log.exception("connection from %s failed", peer)
        finally:
            active.discard(relay)
        log.info("connection from %s ended: %s", peer, relay.close_reason)

    await trio.serve_listeners(handle, listeners, task_status=task_status)


async def connect_tcp(
    host: str,
    port: int,
    relay: Relay,
    *,
    backpressure: Backpressure | None = None,
    limits: NetLimits | None = DEFAULT_NET_LIMITS,
    ssl_context: ssl.SSLContext | None = None,
) -> None:
    """Dial ``host``:``port`` and run ``relay`` over the connection until it ends (``pump``).

    If the connection cannot be made (nor, with ``ssl_context``, the TLS handshake, which checks
    the node's certificate for ``host``), the relay is closed with the reason and an ``OSError``
    propagates (so the caller may retry with a new relay).
    """
    try:
        stream: trio.abc.Stream = await trio.open_tcp_stream(host, port)
    except OSError as e:
        relay.close(f"cannot connect to {host}:{port}: {e}")
        raise
    if ssl_context is not None:
        stream = trio.SSLStream(stream, ssl_context, server_hostname=host)
        try:
            with trio.fail_after(CLOSE_TIMEOUT if limits is None else limits.handshake_timeout):
                await stream.do_handshake()
        except (trio.TooSlowError, *_STREAM_ERRORS) as e:
            await trio.aclose_forcefully(stream)
            reason = f"TLS handshake with {host}:{port} failed: {_cause(e)}"
            relay.close(reason)
            raise OSError(reason) from e
    log.info("connected to %s:%d", host, port)
    await pump(stream, relay, backpressure=backpressure, limits=limits)
    log.info("connection to %s:%d ended: %s", host, port, relay.close_reason)


async def memory_pair(relay_a: Relay, relay_b: Relay) -> None:
    """Link two relays of this process until either closes (then the other closes too).

    Bytes written by one are handed to the other's ``receive`` from a trio task, never from
    inside a turn, so the relays stay independent of each other's turns. Takes over both relays'
    ``on_output``. Without trio, move the bytes with :func:`feds.relay.exchange` instead.
    """
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_shuttle, relay_a, relay_b, _watch(relay_a))
        nursery.start_soon(_shuttle, relay_b, relay_a, _watch(relay_b))


async def _shuttle(source: Relay, sink: Relay, signal: _Signal) -> None:
    try:
        while True:
            data = source.data_to_send()
            if data:
                sink.receive(data)
            elif source.closed:
                sink.close(f"link closed: {source.close_reason}")
                return
            else:
                await signal.wait()
    finally:
        if not source.closed:
            source.close("link stopped")
