"""Floor benchmark: the least a Python + trio + msgpack router must do, in overlay.py's shape.

The question it answers: what can the mandated stack (Python, trio, msgpack) do at all on this
machine, in the shape of ``benchmarks/overlay.py`` — three node processes in a chain on loopback
TCP, a publisher client at one end and a subscriber at the other, both clients in the benchmark
process, 64-byte payloads — against feds and against NATS and Zenoh measured in the same run.

A *floor node* does only what any router of messages must:

* on the wire, a frame is a 4-byte big-endian length and a msgpack array of ``[subject,
  payload]`` items; ``[SUBSCRIBE, subject]`` asks the far side for a subject;
* every frame is decoded (msgpack's C unpacker, no hooks); every item is routed by one dict
  lookup on its subject to the links that asked for it (a subscription travels along the chain
  when it is made, once per link; there is no unsubscribe); what one read produced is encoded
  per outgoing link as one frame and written;
* as in ``feds.transport``, a link reads once its socket is readable, a write goes straight
  into the socket with a non-blocking ``write`` while nothing is queued before it, and a writer
  task sends what the kernel did not take; a reader reads again only once the links it wrote
  to are below a high-water mark.

Node implementations (``--impls``): ``trio`` (a reader task per link, the mandated stack) and
``asyncio`` (the same router under ``asyncio.Protocol`` callbacks, no tasks; for comparison).
The clients are trio in both cases: ``send`` queues an item, and what is queued is written as
one frame by ``drain`` or when the trio run next waits for I/O; what a client receives goes to
the application's task over a trio memory channel, a read's messages as one batch. They offer
the few methods of ``feds.client.Session`` that overlay.py's phases use (``observe``, ``send``,
``drain``, ``sync``; a record ``<label field ...>`` travels as subject ``label`` with its fields
as payload), so the floor runs *the same phase code* as feds: the publisher awaits ``drain()``
every 100 messages, the round trip is a ping answered by a pong from a task of the
subscriber's end.

In the same run, interleaved per repetition, it measures feds (``--protocols``, default
aggregate-subs, with overlay.py's ``measure_feds``) and NATS and Zenoh (overlay.py's peers),
and prints one table of medians with every row's ratios to NATS, to Zenoh and to the trio floor.
``--breakdown`` measures only round trips instead, and prints the CPU time each process spends
per round trip and, in feds nodes that time their own functions, how a crossing divides it.

Run::

    .venv/bin/python benchmarks/floor.py               # full run (3 repetitions)
    .venv/bin/python benchmarks/floor.py --quick --no-peers    # smoke run, a few seconds
    .venv/bin/python benchmarks/floor.py --nodes 1 --no-peers  # one node: cost per node by
                                                               # difference with --nodes 3
    .venv/bin/python benchmarks/floor.py --breakdown   # where a round trip's CPU time goes
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import importlib
import json
import math
import os
import platform
import select
import signal
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import msgpack
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.overlay import (
    HOST,
    PAYLOAD_SIZE,
    PROTOCOLS,
    Cluster,
    Params,
    Row,
    Sample,
    Target,
    _stdin_closed_then,
    _version,
    feds_phase_latency,
    feds_phase_messages,
    fmt_ms,
    markdown_table,
    measure_feds,
    p99,
    peer_targets,
    render,
    run_reps,
    start_feds_chain,
    wait_feds_chain,
    worker_feds_node,
)
from feds.client import connect
from feds.values import Record

SUBSCRIBE = 0
"""The subject of an item that asks for a subject (its payload); never a real subject."""
RECEIVE_SIZE = 65536
HIGH_WATER = 512 * 1024
"""Bytes queued on a link above which its writers stop reading (as in feds.transport)."""
LOW_WATER = 128 * 1024
"""Bytes queued on a link at or below which readers go on, and ``drain`` returns."""
IMPLS = ("trio", "asyncio")
NODE_NAMES = "abcdefgh"
unpackb = msgpack.unpackb


# -------------------------------------------------------------------------------------------------
# The router (sans-IO)


class Port:
    """One connection's sans-IO state: received bytes not yet a whole frame, the items waiting
    to be sent, and the subjects already asked for on it. Subclasses write bytes."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.outbox: list[list[Any]] = []
        self.asked: set[str] = set()
        self.packer = msgpack.Packer()

    def frames(self, data: bytes) -> list[list[list[Any]]]:
        """The decoded frames that ``data`` completes (the rest is kept for the next call)."""
        if self.buffer:
            self.buffer += data
            data = bytes(self.buffer)
            self.buffer.clear()
        view = memoryview(data)
        size = len(data)
        start = 0
        frames = []
        while start + 4 <= size:
            end = start + 4 + int.from_bytes(view[start : start + 4], "big")
            if end > size:
                break
            frames.append(unpackb(view[start + 4 : end]))
            start = end
        if start < size:
            self.buffer += view[start:]
        return frames

    def flush(self) -> None:
        """Write every queued item as one frame."""
        if self.outbox:
            body = self.packer.pack(self.outbox)
            self.outbox = []
            self.write(len(body).to_bytes(4, "big") + body)

    def write(self, data: bytes) -> None:
        raise NotImplementedError


class Router:
    """Routes items between the ports of one node by their subject."""

    def __init__(self) -> None:
        self.ports: list[Port] = []
        self.routes: dict[Any, list[Port]] = {}  # subject -> the ports that asked for it

    def attach(self, port: Port) -> None:
        """Add ``port``, asking it for every subject some other port wants (flush it next)."""
        self.ports.append(port)
        for subject, wanting in self.routes.items():
            if wanting:
                port.asked.add(subject)
                port.outbox.append([SUBSCRIBE, subject])

    def detach(self, port: Port) -> None:
        self.ports.remove(port)
        for wanting in self.routes.values():
            if port in wanting:
                wanting.remove(port)

    def route(self, source: Port, data: bytes) -> list[Port]:
        """Route the items that ``data`` completes; returns the ports that have output now."""
        routes = self.routes
        touched: list[Port] = []
        for frame in source.frames(data):
            for item in frame:
                wanting = routes.get(item[0])
                if wanting is None:
                    if item[0] == SUBSCRIBE:
                        self._subscribe(source, item[1], touched)
                    continue
                for port in wanting:
                    if port is not source:
                        if not port.outbox:
                            touched.append(port)
                        port.outbox.append(item)
        return touched

    def _subscribe(self, source: Port, subject: str, touched: list[Port]) -> None:
        wanting = self.routes.setdefault(subject, [])
        if source not in wanting:
            wanting.append(source)
        for port in self.ports:
            if port is not source and subject not in port.asked:
                port.asked.add(subject)
                if not port.outbox:
                    touched.append(port)
                port.outbox.append([SUBSCRIBE, subject])


# -------------------------------------------------------------------------------------------------
# trio: links, nodes and clients

_TRIO_ERRORS = (OSError, trio.BrokenResourceError, trio.ClosedResourceError)


class TrioLink(Port):
    """A port over a trio socket stream: direct non-blocking writes while nothing is queued, a
    writer task for what the kernel does not take."""

    def __init__(self, stream: trio.SocketStream) -> None:
        super().__init__()
        self.stream = stream
        self.fd = stream.socket.fileno()
        self.unsent = bytearray()
        self.sending = 0
        self.broken = False
        self.wake = trio.Event()
        self.progressed = trio.Event()

    @property
    def backlog(self) -> int:
        return len(self.unsent) + self.sending

    def write(self, data: bytes) -> None:
        if self.broken:
            return
        if not (self.unsent or self.sending):
            try:
                sent = os.write(self.fd, data)
            except BlockingIOError:
                sent = 0
            except OSError:
                self.broken = True  # its own reader sees the connection end
                return
            if sent == len(data):
                return
            data = data[sent:]
        self.unsent += data
        self.wake.set()

    async def wait_backlog(self, level: int) -> None:
        while self.backlog > level and not self.broken:
            await self.progressed.wait()

    async def _write_loop(self) -> None:
        while True:
            if not self.unsent:
                await self.wake.wait()
                self.wake = trio.Event()
                continue
            data = bytes(self.unsent)
            self.unsent.clear()
            self.sending = len(data)
            try:
                await self.stream.send_all(data)
            finally:
                self.sending = 0
                self.progressed.set()
                self.progressed = trio.Event()

    async def receive(self, last: bytes) -> bytes:
        """The next bytes from the socket (empty at its end). Unless the ``last`` read filled
        the buffer, wait for the socket to be readable before reading: after a small read the
        socket is usually empty, and a read that fails costs a syscall and an exception more
        (``SocketStream.receive_some`` tries first)."""
        if len(last) == RECEIVE_SIZE:
            await trio.lowlevel.checkpoint()
        else:
            await trio.lowlevel.wait_readable(self.fd)
        while True:
            try:
                return os.read(self.fd, RECEIVE_SIZE)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(self.fd)

    async def run(self, on_data: Callable[[bytes], list[Port]]) -> None:
        """Read until the far side closes: ``on_data`` takes what arrives and returns the links
        that have output, which are flushed (and waited for while above the high-water mark)."""
        data = b""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._write_loop)
            try:
                while data := await self.receive(data):
                    touched = on_data(data)
                    for link in touched:
                        link.flush()
                    for link in touched:
                        if link.backlog > HIGH_WATER:
                            await link.wait_backlog(LOW_WATER)
            finally:
                self.broken = True
                self.progressed.set()
                nursery.cancel_scope.cancel()


async def trio_node(parent: int | None) -> None:
    """A floor node under trio until stdin closes: listens, and links to ``parent`` if given."""
    router = Router()

    async def serve(stream: trio.SocketStream) -> None:
        link = TrioLink(stream)
        router.attach(link)
        link.flush()
        try:
            await link.run(lambda data: router.route(link, data))
        except* _TRIO_ERRORS:
            pass
        finally:
            router.detach(link)
            await trio.aclose_forcefully(stream)

    token = trio.lowlevel.current_trio_token()
    async with trio.open_nursery() as nursery:
        _stdin_closed_then(
            lambda: trio.from_thread.run_sync(nursery.cancel_scope.cancel, trio_token=token)
        )
        if parent is not None:
            nursery.start_soon(serve, await trio.open_tcp_stream(HOST, parent))
        listeners = await trio.open_tcp_listeners(0, host=HOST)
        await nursery.start(trio.serve_listeners, serve, listeners)
        print(f"READY {listeners[0].socket.getsockname()[1]}", flush=True)


class FloorEvent(NamedTuple):
    """What a floor client's observer receives: a message's fields."""

    captures: list[Any]


class FloorObservation:
    """The events of one subject (the part of feds's Observation that the phases use). They
    arrive as one list per read, so taking an event costs a trio checkpoint only when the
    list is used up (feds's observations take one per event)."""

    def __init__(self, receive: trio.MemoryReceiveChannel[list[FloorEvent]]) -> None:
        self._receive = receive
        self._pending: collections.deque[FloorEvent] = collections.deque()

    def __aiter__(self) -> FloorObservation:
        return self

    async def next(self, timeout: float | None = None) -> FloorEvent:
        if not self._pending:
            with trio.fail_after(math.inf if timeout is None else timeout):
                self._pending.extend(await self._receive.receive())
        return self._pending.popleft()

    __anext__ = next


class FloorSession(trio.abc.Instrument):
    """A floor client over trio, offering the part of ``feds.client.Session`` that overlay.py's
    phases use. ``send`` only queues; what is queued is written as one frame by ``drain`` or,
    at the latest, when the trio run next waits for I/O (this session is a trio instrument:
    ``before_io_wait``), so a burst of sends between two waits crosses as one frame and a lone
    send costs no task switch."""

    def __init__(self, link: TrioLink) -> None:
        self.link = link
        self.channels: dict[str, trio.MemorySendChannel[list[FloorEvent]]] = {}

    def before_io_wait(self, timeout: float) -> None:
        self.link.flush()

    def deliver(self, data: bytes) -> list[Port]:
        """Hand the messages that ``data`` completes to their subjects' observers."""
        channels = self.channels
        batches: dict[str, list[FloorEvent]] = {}
        for frame in self.link.frames(data):
            for subject, fields in frame:
                if subject in channels:
                    batches.setdefault(subject, []).append(FloorEvent(fields))
        for subject, batch in batches.items():
            channels[subject].send_nowait(batch)
        return []

    def send(self, record: Record) -> None:
        """Queue ``<label field ...>`` as a message on subject ``label``."""
        self.link.outbox.append([record.label.name, record.fields])

    async def drain(self) -> None:
        """Write what is queued, then wait until at most the low-water mark is unsent."""
        self.link.flush()
        await trio.lowlevel.checkpoint()
        await self.link.wait_backlog(LOW_WATER)

    async def sync(self) -> None:
        """Nothing to wait for: the phases warm up until messages arrive end to end."""
        await trio.lowlevel.checkpoint()

    @contextlib.asynccontextmanager
    async def observe(self, pattern: str) -> AsyncIterator[FloorObservation]:
        """Receive the messages whose subject is the label of ``pattern`` (``<label ...>``)."""
        subject = pattern[1:].split()[0]
        send, receive = trio.open_memory_channel[list[FloorEvent]](math.inf)
        self.channels[subject] = send
        self.link.outbox.append([SUBSCRIBE, subject])
        try:
            yield FloorObservation(receive)
        finally:
            del self.channels[subject]


@contextlib.asynccontextmanager
async def floor_connect(port: int) -> AsyncIterator[FloorSession]:
    """A session with the floor node listening on ``port``, for the ``async with``."""
    stream = await trio.open_tcp_stream(HOST, port)
    session = FloorSession(TrioLink(stream))
    trio.lowlevel.add_instrument(session)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.link.run, session.deliver)
            yield session
            nursery.cancel_scope.cancel()
    finally:
        trio.lowlevel.remove_instrument(session)
        await trio.aclose_forcefully(stream)


# -------------------------------------------------------------------------------------------------
# asyncio: the same router under protocol callbacks


class AsyncioLink(Port, asyncio.Protocol):
    """A port of an asyncio floor node. While some link cannot take more (asyncio's transport
    paused its writing), the node reads none of its other links."""

    def __init__(self, router: Router, congested: set[AsyncioLink]) -> None:
        super().__init__()
        self.router = router
        self.congested = congested
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.router.attach(self)
        self.flush()

    def data_received(self, data: bytes) -> None:
        for port in self.router.route(self, data):
            port.flush()

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def pause_writing(self) -> None:
        self.congested.add(self)
        self._update_reading()

    def resume_writing(self) -> None:
        self.congested.discard(self)
        self._update_reading()

    def _update_reading(self) -> None:
        for port in self.router.ports:
            assert isinstance(port, AsyncioLink) and port.transport is not None
            if self.congested - {port}:
                port.transport.pause_reading()
            else:
                port.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.router.detach(self)
        self.resume_writing()


async def asyncio_node(parent: int | None) -> None:
    """A floor node under asyncio until stdin closes: listens, and links to ``parent``."""
    loop = asyncio.get_running_loop()
    router = Router()
    congested: set[AsyncioLink] = set()
    server = await loop.create_server(lambda: AsyncioLink(router, congested), HOST, 0)
    if parent is not None:
        await loop.create_connection(lambda: AsyncioLink(router, congested), HOST, parent)
    done = asyncio.Event()
    _stdin_closed_then(lambda: loop.call_soon_threadsafe(done.set))
    print(f"READY {server.sockets[0].getsockname()[1]}", flush=True)
    await done.wait()
    server.close()


def run_worker(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="floor.py _worker")
    parser.add_argument("kind", choices=[*IMPLS, "traced-feds"])
    parser.add_argument("--name", required=True)
    parser.add_argument("--parent", type=int)
    parser.add_argument("--protocol", choices=PROTOCOLS, help="traced-feds: the node's protocol")
    args = parser.parse_args(argv)
    if args.kind == "trio":
        trio.run(trio_node, args.parent)
    elif args.kind == "asyncio":
        asyncio.run(asyncio_node(args.parent))
    else:
        totals, _ = trace_feds()
        signal.signal(signal.SIGUSR1, lambda *_: print(json.dumps(totals), flush=True))
        worker_feds_node(args.name, args.protocol, args.parent, None)


# -------------------------------------------------------------------------------------------------
# Measuring


def start_chain(
    label: str, length: int, *worker: str, script: Path = Path(__file__)
) -> tuple[Cluster, list[str]]:
    """Nodes a ← b ← c ... (``length`` of them), each a process running ``script``'s (this
    file's) ``_worker`` with the arguments ``worker``; returns the cluster and the ports."""
    cluster = Cluster(label)
    ports: list[str] = []
    try:
        for name in NODE_NAMES[:length]:
            argv = [sys.executable, str(script.resolve()), "_worker", *worker]
            argv += ["--name", name] + (["--parent", ports[-1]] if ports else [])
            ports.append(str(cluster.start(name, argv, ready_line=True)))
    except BaseException:
        cluster.stop()
        raise
    return cluster, ports


def start_floor_chain(impl: str, length: int) -> tuple[Cluster, list[str]]:
    """Floor nodes a ← b ← c ... (``length`` of them), each in its own process."""
    return start_chain(f"floor-{impl}", length, impl)


def measure_floor(ports: list[str], params: Params) -> Sample:
    """overlay.py's message and round-trip phases, with floor sessions at both ends."""

    async def main() -> Sample:
        async with floor_connect(int(ports[0])) as sub, floor_connect(int(ports[-1])) as pub:
            msgs = await feds_phase_messages(pub, sub, params.messages, None, params.timeout)
            times = await feds_phase_latency(pub, sub, params.round_trips, params.timeout)
        return Sample(msgs, None, statistics.median(times) * 1e3, p99(times) * 1e3)

    return trio.run(main)


# -------------------------------------------------------------------------------------------------
# Round-trip breakdown (--breakdown): where the CPU of a round trip goes

TRACED = (
    ("decode", "feds.codec", "Decoder", "decode", time.perf_counter),
    ("relay.receive", "feds.relay", "Relay", "receive", time.perf_counter),
    ("run_until_idle", "feds.actor", "Scheduler", "run_until_idle", time.perf_counter),
    ("encode", "feds.codec", "Encoder", "encode", time.perf_counter),
    ("os.write", "os", "", "write", time.thread_time),
)
"""feds functions timed in a traced run: (name, module, class or "", function, clock). Code
that only computes is timed by the wall clock, which costs next to nothing to read; a write,
which wakes the receiving process and may be preempted by it, by the thread's CPU clock
(a system call, about a microsecond more per write)."""
PARTS = ("decode", "relay dispatch", "turns", "encode", "write syscall", "rest")


def trace_feds() -> tuple[dict[str, float], Callable[[], None]]:
    """Wrap the functions of :data:`TRACED` so that each adds the time it takes (by its clock)
    to the returned totals; the callable undoes it."""
    totals = {name: 0.0 for name, *_ in TRACED}
    undo: list[tuple[object, str, Any]] = []
    for name, module, cls, attr, clock in TRACED:
        owner = importlib.import_module(module)
        if cls:
            owner = getattr(owner, cls)
        original = getattr(owner, attr)

        def timed(
            *args: Any, _f: Any = original, _name: str = name, _clock: Any = clock, **kwargs: Any
        ) -> Any:
            start = _clock()
            try:
                return _f(*args, **kwargs)
            finally:
                totals[_name] += _clock() - start

        undo.append((owner, attr, original))
        setattr(owner, attr, timed)

    def untrace() -> None:
        for owner, attr, original in undo:
            setattr(owner, attr, original)

    return totals, untrace


def split(cpu: float, totals: dict[str, float]) -> dict[str, float]:
    """The parts (:data:`PARTS`) of a process's ``cpu`` time, from :func:`trace_feds`'s totals
    (decode runs inside relay.receive, encode inside the turns); ``rest`` is everything else:
    trio's loop and task switches, reading the socket, the transport, the timers themselves."""
    return {
        "decode": totals["decode"],
        "relay dispatch": totals["relay.receive"] - totals["decode"],
        "turns": totals["run_until_idle"] - totals["encode"],
        "encode": totals["encode"],
        "write syscall": totals["os.write"],
        "rest": cpu - totals["relay.receive"] - totals["run_until_idle"] - totals["os.write"],
    }


def process_cpu(pid: int) -> float:
    """Seconds on a CPU so far of every thread of process ``pid`` (Linux schedstat)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def node_totals(cluster: Cluster) -> list[dict[str, float]]:
    """The trace totals of each traced node so far (asked for with SIGUSR1, answered as a line
    of JSON on its stdout)."""
    for proc in cluster.procs:
        os.kill(proc.pid, signal.SIGUSR1)
    totals = []
    for proc in cluster.procs:
        assert proc.stdout is not None
        if not select.select([proc.stdout], [], [], 10.0)[0]:
            raise TimeoutError("a traced node did not answer with its totals")
        totals.append(json.loads(proc.stdout.readline()))
    return totals


def start_traced_feds(protocol: str, nodes: int) -> tuple[Cluster, list[str]]:
    """A chain of feds nodes that time :data:`TRACED` (``_worker traced-feds``)."""
    cluster, ports = start_chain(
        f"feds-{protocol}-traced", nodes, "traced-feds", "--protocol", protocol
    )
    addresses = [f"{HOST}:{port}" for port in ports]
    try:
        trio.run(wait_feds_chain, addresses)
    except BaseException:
        cluster.stop()
        raise
    return cluster, addresses


def breakdown_probes(impls: list[str], protocols: list[str], nodes: int) -> list[Probe]:
    """The floor nodes, and feds nodes plain and traced, for the breakdown."""
    probes = [
        Probe(
            f"floor {impl}",
            lambda impl=impl: start_floor_chain(impl, nodes),
            lambda port: floor_connect(int(port)),
        )
        for impl in impls
    ]
    for protocol in protocols:
        probes.append(
            Probe(
                f"feds {protocol}",
                lambda protocol=protocol: start_feds_chain(protocol, None, NODE_NAMES[:nodes]),
                lambda address: connect(address, name="bench"),
            )
        )
        probes.append(
            Probe(
                f"feds {protocol}, traced",
                lambda protocol=protocol: start_traced_feds(protocol, nodes),
                lambda address: connect(address, name="bench"),
                traced=True,
            )
        )
    return probes


@dataclass
class Probe:
    """One system of the breakdown: how to start it and connect to it, and its samples (per
    repetition: the median round trip in ms, CPU µs per round trip of each node and of the
    client process, and for a traced run the parts (:func:`split`) of each of those)."""

    label: str
    start: Callable[[], tuple[Cluster, list[str]]]
    connect: Callable[[str], contextlib.AbstractAsyncContextManager[Any]]
    traced: bool = False
    rts: list[float] = field(default_factory=list)
    cpus: list[list[float]] = field(default_factory=list)
    parts: list[list[dict[str, float]]] = field(default_factory=list)
    steps: list[tuple[float, float]] = field(default_factory=list)
    """Per repetition: the client process's trio task steps and waits for I/O per round trip."""


class StepCounter(trio.abc.Instrument):
    """Counts a trio run's task steps and waits for I/O (each pass of trio's loop waits once)."""

    def __init__(self) -> None:
        self.steps = 0
        self.waits = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps += 1

    def before_io_wait(self, timeout: float) -> None:
        self.waits += 1


def sample_breakdown(probe: Probe, cluster: Cluster, addresses: list[str], params: Params) -> None:
    """One repetition of ``probe``'s round-trip phase, noting CPU per round trip."""
    pids = [proc.pid for proc in cluster.procs] + [os.getpid()]
    totals, untrace = trace_feds() if probe.traced else ({}, lambda: None)

    def traces() -> list[dict[str, float]]:
        return [*node_totals(cluster), dict(totals)] if probe.traced else []

    async def main() -> None:
        async with probe.connect(addresses[0]) as sub, probe.connect(addresses[-1]) as pub:
            await feds_phase_latency(pub, sub, 100, params.timeout)  # warm up
            traced = traces()
            counter = StepCounter()
            trio.lowlevel.add_instrument(counter)
            cpu = [process_cpu(pid) for pid in pids]
            times = await feds_phase_latency(pub, sub, params.round_trips, params.timeout)
            cpu = [
                (process_cpu(pid) - c) * 1e6 / len(times) for pid, c in zip(pids, cpu, strict=True)
            ]
            trio.lowlevel.remove_instrument(counter)
            per_rt = [
                {k: (v - before[k]) * 1e6 / len(times) for k, v in after.items()}
                for after, before in zip(traces(), traced, strict=True)
            ]
        probe.rts.append(statistics.median(times) * 1e3)
        probe.cpus.append(cpu)
        probe.steps.append((counter.steps / len(times), counter.waits / len(times)))
        if probe.traced:
            probe.parts.append([split(c, t) for c, t in zip(cpu, per_rt, strict=True)])

    try:
        trio.run(main)
    finally:
        untrace()


def run_breakdown(probes: list[Probe], params: Params, reps: int) -> None:
    """Measure every probe ``reps`` times (interleaved) and print where the CPU goes."""
    clusters: list[tuple[Cluster, list[str]]] = []
    try:
        for probe in probes:
            clusters.append(probe.start())
        for rep in range(reps):
            for probe, (cluster, addresses) in zip(probes, clusters, strict=True):
                sample_breakdown(probe, cluster, addresses, params)
                print(
                    f"  rep {rep + 1}/{reps} {probe.label:<30} RT median {probe.rts[-1]:.3f} ms; "
                    "CPU µs per RT: " + ", ".join(f"{c:.0f}" for c in probe.cpus[-1]),
                    flush=True,
                )
    finally:
        for cluster, _ in clusters:
            cluster.stop()
    print(breakdown_tables(probes, reps))


def breakdown_tables(probes: list[Probe], reps: int) -> str:
    """The per-process table and, for traced probes, the per-part table (medians)."""
    nodes = len(probes[0].cpus[0]) - 1
    header = ["system", "median RT ms", *(f"node {n}" for n in NODE_NAMES[:nodes])]
    header += ["clients", "all", "per node crossing", "client task steps", "client I/O waits"]
    lines = [header]
    for probe in probes:
        cpus = [statistics.median(c) for c in zip(*probe.cpus, strict=True)]
        per_crossing = statistics.mean(cpus[:-1]) / 2
        steps, waits = (statistics.median(x) for x in zip(*probe.steps, strict=True))
        lines.append(
            [probe.label, fmt_ms(statistics.median(probe.rts))]
            + [f"{c:.0f}" for c in cpus]
            + [f"{sum(cpus):.0f}", f"{per_crossing:.0f}", f"{steps:.2f}", f"{waits:.2f}"]
        )
    out = [
        f"\nCPU µs per round trip in each process (schedstat, every thread), medians over {reps} "
        "repetition(s); a node is crossed twice per round trip (ping and pong), and the client "
        "process sends two messages and receives two; its trio task steps and waits for I/O "
        "per round trip are counted by an instrument (which costs it about 1.4 µs per step):",
        markdown_table(lines),
    ]
    for probe in (p for p in probes if p.parts):
        rows = [["part", "node, per crossing", "client process, per round trip"]]
        for part in PARTS:
            node = [statistics.mean(p[part] for p in parts[:-1]) / 2 for parts in probe.parts]
            clients = [parts[-1][part] for parts in probe.parts]
            rows.append(
                [part, f"{statistics.median(node):.1f}", f"{statistics.median(clients):.1f}"]
            )
        out += [f"\n{probe.label}: CPU µs by part (medians; nodes averaged)", markdown_table(rows)]
    return "\n".join(out)


def describe(nodes: int, reps: int, floor: Params, feds: Params) -> str:
    """The first line of the output: the shape and the sizes of the run."""
    return (
        f"{nodes}-node chain on {HOST}, {PAYLOAD_SIZE}-byte payloads, {reps} repetition(s); "
        f"floor: {floor.messages} msgs; feds: {feds.messages} msgs, {feds.changes} "
        f"assert+retract pairs; peers: {feds.peer_messages} msgs; {floor.round_trips} round trips"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="The floor of a Python trio + msgpack router against feds, NATS and Zenoh."
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny N, 1 repetition")
    parser.add_argument("--reps", type=int, help="repetitions (default 3, or 1 with --quick)")
    parser.add_argument("--impls", nargs="*", choices=IMPLS, default=list(IMPLS))
    parser.add_argument(
        "--protocols", nargs="*", choices=PROTOCOLS, default=["aggregate-subs"], help="feds rows"
    )
    parser.add_argument("--no-peers", action="store_true", help="do not run NATS or Zenoh")
    parser.add_argument("--no-install", action="store_true", help="use peers only if present")
    parser.add_argument(
        "--nodes", type=int, default=3, help="chain length for the floor and feds (peers: 3)"
    )
    parser.add_argument("--messages", type=int, help="messages per floor run (100000)")
    parser.add_argument("--feds-messages", type=int, help="messages per feds run (20000)")
    parser.add_argument("--peer-messages", type=int, help="messages per peer run (100000)")
    parser.add_argument("--changes", type=int, help="assert+retract pairs per feds run (5000)")
    parser.add_argument("--round-trips", type=int, help="ping-pongs per run (1000)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds allowed per phase")
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="instead: CPU per round trip in each process, and by part in traced feds nodes",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.nodes <= len(NODE_NAMES):
        parser.error(f"--nodes takes 1 to {len(NODE_NAMES)}")

    quick = args.quick
    round_trips = args.round_trips or (30 if quick else 1_000)
    feds_params = Params(
        messages=args.feds_messages or (300 if quick else 20_000),
        peer_messages=args.peer_messages or (1_000 if quick else 100_000),
        changes=args.changes or (100 if quick else 5_000),
        round_trips=round_trips,
        window=None,
        timeout=args.timeout,
    )
    floor_params = Params(
        messages=args.messages or (1_000 if quick else 100_000),
        peer_messages=0,
        changes=0,
        round_trips=round_trips,
        window=None,
        timeout=args.timeout,
    )
    reps = args.reps or (1 if quick else 3)
    if args.breakdown:
        print(
            f"round-trip breakdown: {args.nodes}-node chain on {HOST}, {round_trips} round trips, "
            f"{reps} repetition(s); {time.strftime('%Y-%m-%d %H:%M')}",
            flush=True,
        )
        run_breakdown(breakdown_probes(args.impls, args.protocols, args.nodes), floor_params, reps)
        return 0

    notes: list[str] = []
    targets: list[Target] = []
    for impl in args.impls:
        version = (
            f"trio {trio.__version__}, msgpack {_version('msgpack')}"
            if impl == "trio"
            else f"asyncio (Python {platform.python_version()}), msgpack {_version('msgpack')}"
        )

        def start_floor(impl: str = impl) -> tuple[Cluster, list[str]]:
            return start_floor_chain(impl, args.nodes)

        targets.append(
            Target(
                Row(f"floor {impl}", version, "floor"),
                start_floor,
                lambda ports: measure_floor(ports, floor_params),
            )
        )
    for protocol in args.protocols:

        def start_feds(protocol: str = protocol) -> tuple[Cluster, list[str]]:
            return start_feds_chain(protocol, None, NODE_NAMES[: args.nodes])

        targets.append(
            Target(
                Row(f"feds {protocol}", _version("feds") or "?", "feds"),
                start_feds,
                lambda addresses: measure_feds(addresses, feds_params, None),
            )
        )
    if args.no_peers:
        pass
    elif args.nodes != 3:
        notes.append("NATS and Zenoh skipped: their chains have 3 nodes")
    else:
        targets += peer_targets(feds_params, not (quick or args.no_install), notes)

    print(describe(args.nodes, reps, floor_params, feds_params), flush=True)
    started = time.perf_counter()
    run_reps(targets, reps)
    rows = [t.row for t in targets]
    nats = next((r for r in rows if r.kind == "nats" and r.samples), None)
    zenoh = next((r for r in rows if r.kind == "zenoh" and r.samples), None)
    floor = next((r for r in rows if r.kind == "floor" and r.samples), None)
    print()
    print(
        render(
            rows, [("NATS", nats), ("Zenoh", zenoh), (floor.system if floor else "floor", floor)]
        )
    )
    print(
        f"\nmedians over {reps} repetition(s); RT = round trip; ratios are row ÷ baseline "
        f"(msgs/s: higher is better; RT: lower is better). "
        f"Took {time.perf_counter() - started:.0f} s. {time.strftime('%Y-%m-%d %H:%M')}, "
        f"load average {os.getloadavg()[0]:.2f}."
    )
    print("ran: " + "; ".join(f"{r.system} ({r.version})" for r in rows if r.samples))
    for note in notes:
        print("note: " + note)
    return 0 if all(r.samples for r in rows if r.kind in ("floor", "feds")) else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_worker":
        run_worker(sys.argv[2:])
    else:
        sys.exit(main())
