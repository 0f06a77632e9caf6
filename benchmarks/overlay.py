"""End-to-end overlay benchmark: feds against Zenoh and NATS on a 3-node chain over loopback.

For each feds protocol (copy-up, observer-flood, aggregate-subs) and for each peer system, three
server processes are chained on 127.0.0.1 and two clients attach at the two ends:

* **feds** — three node processes (``NodeRuntime`` over TCP), ``a`` the root, ``b`` uplinked to
  ``a``, ``c`` uplinked to ``b``; the publisher is a client of ``c``, the subscriber of ``a``.
* **Zenoh** — three Python sessions in ``mode: "router"`` (the PyPI package has no ``zenohd``),
  each in its own process: ``a`` listens, ``b`` connects to ``a``, ``c`` to ``b``; scouting is
  off so the chain is the only path. Clients are sessions in ``mode: "client"``.
* **NATS** — three ``nats-server`` processes linked as leaf nodes: ``a`` is the hub, ``b`` a leaf
  of ``a`` that accepts leaf nodes itself, ``c`` a leaf of ``b``.

Measured per system, with 64-byte payloads (the subscriber captures the payload, so it crosses
every hop — a feds pattern that captured nothing would leave the payload at the first node):

* **msgs/s** — N messages sent by the publisher, counted by the subscriber; rate = N / (time of
  the last arrival - time of the first send). The feds publisher calls ``Session.drain()``
  every 100 messages (or, with ``--window N``, keeps at most N in flight, the method used
  before ``drain`` existed; ``--window 0``: no flow control); the peers use their own.
* **changes/s** (feds only) — N assert+retract pairs at the publisher, the subscriber observing
  them; rate = 2N observed changes / (last observed change - first assert).
* **round trip** — the publisher's end sends a ping, the subscriber's end answers with a pong;
  median and p99 over R sequential round trips, measured at the pinging client.

Before each phase the subscription is given time to propagate (``sync`` for feds) and a warm-up
burst is sent until it is seen end to end. All clients run in this process, the servers in 3
processes each, and every system is measured in the same run, interleaved per repetition; the
figures are medians over the repetitions. Peers are found or installed (``pip install`` into this
interpreter, ``apt-get install -y nats-server``); a peer that cannot be had is skipped and the
output says so.

Run::

    .venv/bin/python benchmarks/overlay.py              # full run (3 repetitions)
    .venv/bin/python benchmarks/overlay.py --quick      # smoke run, peers only if present
    .venv/bin/python benchmarks/overlay.py --feds-only --protocols aggregate-subs --reps 5
    .venv/bin/python benchmarks/overlay.py --profile-dir /tmp/prof   # cProfile nodes + client
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import importlib
import importlib.metadata
import json
import math
import os
import queue
import select
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import trio

from feds.client import Session, connect
from feds.client import status as feds_status
from feds.runtime import figures
from feds.values import Record, Symbol

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
PROTOCOLS = ("copy-up", "observer-flood", "aggregate-subs")
PAYLOAD_SIZE = 64
WARM, MARK, DATA = b"w", b"m", b"d"
"""First byte of a payload: warm-up, end-of-warm-up marker, measured message."""
WARM_BURST = 300
READY_TIMEOUT = 30.0

BENCH, CHANGE, PING, PONG = Symbol("bench"), Symbol("change"), Symbol("ping"), Symbol("pong")


def payload(kind: bytes) -> bytes:
    """A 64-byte payload whose first byte says which phase it belongs to."""
    return kind + b"x" * (PAYLOAD_SIZE - 1)


@dataclass
class Params:
    """Sizes of one measurement."""

    messages: int
    peer_messages: int
    changes: int
    round_trips: int
    window: int | None  # feds: None = drain(), else most in flight (0 = no limit)
    timeout: float


@dataclass
class Sample:
    """One repetition's figures for one system (rates per second, round trips in ms)."""

    msgs: float
    changes: float | None
    rt_median: float
    rt_p99: float
    note: str = ""


@dataclass
class Row:
    """A system and its samples over the repetitions."""

    system: str
    version: str
    kind: str  # "feds", "nats" or "zenoh"
    samples: list[Sample] = field(default_factory=list)
    error: str = ""

    def median(self, attribute: str) -> float | None:
        values = [getattr(s, attribute) for s in self.samples]
        values = [v for v in values if v is not None and not math.isnan(v)]
        return statistics.median(values) if values else None


def p99(values: list[float]) -> float:
    """Nearest-rank 99th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = READY_TIMEOUT) -> None:
    """Block until something accepts TCP connections on ``port``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((HOST, port), timeout=1.0):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on {HOST}:{port}") from None
            time.sleep(0.05)


# -------------------------------------------------------------------------------------------------
# Server processes


class Cluster:
    """Server processes of one system; stopped (stdin closed, then terminated) on exit."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.procs: list[subprocess.Popen[bytes]] = []
        self.graceful: set[int] = set()  # pids that exit by themselves once stdin closes
        self.logdir = Path(tempfile.mkdtemp(prefix=f"feds-bench-{name}-"))

    def start(self, label: str, argv: list[str], *, ready_line: bool) -> int | None:
        """Start ``argv``. With ``ready_line``, wait for ``READY <port>`` on its stdout (such a
        worker exits once its stdin closes); other processes are terminated by :meth:`stop`."""
        log = open(self.logdir / f"{label}.log", "wb")  # noqa: SIM115 - closed with the process
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env
        )
        log.close()
        self.procs.append(proc)
        if not ready_line:
            return None
        self.graceful.add(proc.pid)
        assert proc.stdout is not None
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            ready, _, _ = select.select([proc.stdout], [], [], 0.2)
            if ready:
                line = proc.stdout.readline().decode().strip()
                if line.startswith("READY "):
                    return int(line.split()[1])
        raise RuntimeError(f"{self.name} {label} did not start:\n{self.log_tail(label)}")

    def log_tail(self, label: str, lines: int = 15) -> str:
        path = self.logdir / f"{label}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(OSError):
                if proc.stdin is not None:
                    proc.stdin.close()
                if proc.pid not in self.graceful:
                    proc.terminate()
        deadline = time.monotonic() + 5.0
        for proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(3.0)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.procs.clear()
        shutil.rmtree(self.logdir, ignore_errors=True)


def worker_argv(*args: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "_worker", *args]


def start_feds_chain(
    protocol: str, profile_dir: Path | None, names: str = "abc"
) -> tuple[Cluster, list[str]]:
    """Nodes a (root) ← b ← c (one per letter of ``names``), each in its own process; returns
    the cluster and addresses."""
    cluster = Cluster(f"feds-{protocol}")
    ports: list[int] = []
    try:
        for name in names:
            argv = worker_argv("feds-node", "--name", name, "--protocol", protocol)
            if ports:
                argv += ["--parent", str(ports[-1])]
            if profile_dir is not None:
                argv += ["--profile", str(profile_dir / f"node-{name}-{protocol}.prof")]
            port = cluster.start(name, argv, ready_line=True)
            assert port is not None
            ports.append(port)
        addresses = [f"{HOST}:{p}" for p in ports]
        try:
            trio.run(wait_feds_chain, addresses)
        except Exception as exc:
            logs = "\n".join(f"[node {n}] {cluster.log_tail(n, 6)}" for n in names)
            raise RuntimeError(f"the chain did not form ({exc}); node logs:\n{logs}") from exc
    except BaseException:
        cluster.stop()
        raise
    return cluster, addresses


async def wait_feds_chain(addresses: list[str]) -> None:
    """Wait until every node reports its neighbours (1, 2, 1 on the chain; 0 for one node)."""
    expected = [1] + [2] * (len(addresses) - 2) + [1] if len(addresses) > 1 else [0]
    with trio.fail_after(READY_TIMEOUT):
        for address, want in zip(addresses, expected, strict=True):
            while figures(await feds_status(address)).get("neighbours", 0) < want:
                await trio.sleep(0.05)


def start_zenoh_chain() -> tuple[Cluster, list[str]]:
    cluster = Cluster("zenoh")
    endpoints = [f"tcp/{HOST}:{free_port()}" for _ in range(3)]
    try:
        for i, name in enumerate("abc"):
            argv = worker_argv("zenoh-router", "--listen", endpoints[i])
            if i:
                argv += ["--connect", endpoints[i - 1]]
            cluster.start(name, argv, ready_line=True)
    except BaseException:
        cluster.stop()
        raise
    return cluster, endpoints


NATS_CONF = """\
server_name: {name}
listen: {host}:{port}
leafnodes {{
  listen: {host}:{leaf_port}
{remotes}}}
"""


def start_nats_chain(binary: str) -> tuple[Cluster, list[str]]:
    """Hub a; b is a leaf of a and accepts leaf nodes; c is a leaf of b."""
    cluster = Cluster("nats")
    ports = [(free_port(), free_port()) for _ in range(3)]
    try:
        for i, name in enumerate("abc"):
            remotes = ""
            if i:
                remotes = f'  remotes = [ {{ url: "nats-leaf://{HOST}:{ports[i - 1][1]}" }} ]\n'
            conf = cluster.logdir / f"{name}.conf"
            conf.write_text(
                NATS_CONF.format(
                    name=f"bench-{name}",
                    host=HOST,
                    port=ports[i][0],
                    leaf_port=ports[i][1],
                    remotes=remotes,
                )
            )
            cluster.start(name, [binary, "-c", str(conf)], ready_line=False)
            wait_port(ports[i][0])
    except BaseException:
        cluster.stop()
        raise
    return cluster, [f"nats://{HOST}:{client}" for client, _leaf in ports]


# -------------------------------------------------------------------------------------------------
# Workers (the server processes run this file with `_worker ...`)


def _stdin_closed_then(callback: Callable[[], None]) -> None:
    """Call ``callback`` (in a daemon thread) once stdin reaches EOF: the parent is done."""

    def watch() -> None:
        with contextlib.suppress(Exception):
            while sys.stdin.buffer.read(4096):
                pass
        callback()

    threading.Thread(target=watch, daemon=True).start()


def worker_feds_node(
    name: str,
    protocol: str,
    parent: int | None,
    profile: str | None,
    instruments: Sequence[trio.abc.Instrument] = (),
) -> None:
    """A feds node until stdin closes, profiled into ``profile`` if given, under a trio run
    with ``instruments``."""
    from feds.driver import Driver
    from feds.runtime import NodeRuntime

    async def main() -> None:
        driver = Driver(at_step_end=False)  # as `feds node` runs one
        runtime = NodeRuntime(driver.scheduler, name, protocol)
        token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            _stdin_closed_then(
                lambda: trio.from_thread.run_sync(nursery.cancel_scope.cancel, trio_token=token)
            )
            nursery.start_soon(driver.run)
            port = await nursery.start(runtime.serve, HOST, 0)
            if parent is not None:
                nursery.start_soon(runtime.uplink_tcp, HOST, parent)
            print(f"READY {port}", flush=True)

    if profile is None:
        trio.run(main, instruments=instruments)
        return
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        trio.run(main, instruments=instruments)
    finally:
        profiler.disable()
        profiler.dump_stats(profile)


def zenoh_config(mode: str, listen: str | None, connect_to: str | None) -> Any:
    import zenoh

    conf = zenoh.Config()
    conf.insert_json5("mode", json.dumps(mode))
    conf.insert_json5("scouting/multicast/enabled", "false")
    conf.insert_json5("scouting/gossip/enabled", "false")
    conf.insert_json5("listen/endpoints", json.dumps([listen] if listen else []))
    conf.insert_json5("connect/endpoints", json.dumps([connect_to] if connect_to else []))
    return conf


def worker_zenoh_router(listen: str, connect_to: str | None) -> None:
    import zenoh

    done = threading.Event()
    session = zenoh.open(zenoh_config("router", listen, connect_to))
    _stdin_closed_then(done.set)
    print(f"READY {listen.rsplit(':', 1)[1]}", flush=True)
    done.wait()
    session.close()


def run_worker(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="overlay.py _worker")
    sub = parser.add_subparsers(dest="kind", required=True)
    node = sub.add_parser("feds-node")
    node.add_argument("--name", required=True)
    node.add_argument("--protocol", required=True)
    node.add_argument("--parent", type=int)
    node.add_argument("--profile")
    router = sub.add_parser("zenoh-router")
    router.add_argument("--listen", required=True)
    router.add_argument("--connect")
    args = parser.parse_args(argv)
    if args.kind == "feds-node":
        worker_feds_node(args.name, args.protocol, args.parent, args.profile)
    else:
        worker_zenoh_router(args.listen, args.connect)


# -------------------------------------------------------------------------------------------------
# feds clients


class Counter:
    """Counts arrivals; ``done`` is set (and ``last`` stamped) once ``target`` is reached."""

    def __init__(self) -> None:
        self.count = 0
        self.target = -1
        self.last = 0.0
        self.done = threading.Event()
        self.waiter: trio.Event | None = None
        self.wake_at = 0

    def expect(self, target: int) -> None:
        self.count, self.target, self.last = 0, target, 0.0
        self.waiter = None
        self.done.clear()

    def hit(self) -> None:
        self.count += 1
        if self.count == self.target:
            self.last = time.perf_counter()
            self.done.set()
        if self.waiter is not None and self.count >= self.wake_at:
            self.waiter.set()
            self.waiter = None

    async def below(self, sent: int, window: int) -> None:
        """Wait (trio) until fewer than ``window`` of ``sent`` are still on their way."""
        if window and sent - self.count >= window:
            self.wake_at = sent - window // 2
            self.waiter = trio.Event()
            await self.waiter.wait()


async def feds_wait(counter: Counter, timeout: float) -> None:
    with trio.move_on_after(timeout):
        while not counter.done.is_set():
            await trio.sleep(0.002)


async def _consume(
    events: AsyncIterator, counter: Counter, warm: trio.Event, mark: trio.Event, marks: Callable
) -> None:
    """Count DATA events; flag the first WARM event, and the MARK event when ``marks(event)``."""
    async for event in events:
        kind = event.captures[0][:1]
        if kind == DATA:
            counter.hit()
        elif kind == WARM:
            warm.set()
        elif marks(event):
            mark.set()


async def feds_phase_messages(
    pub: Session, sub: Session, n: int, window: int | None, timeout: float
) -> float:
    counter = Counter()
    seen_warm = trio.Event()
    seen_mark = trio.Event()
    async with sub.observe("<bench $payload>") as events, trio.open_nursery() as nursery:
        nursery.start_soon(_consume, events, counter, seen_warm, seen_mark, lambda e: True)
        await sub.sync()
        await _feds_prime(lambda p: pub.send(Record(BENCH, (p,))), seen_warm, seen_mark, timeout)
        counter.expect(n)
        data = Record(BENCH, (payload(DATA),))
        start = time.perf_counter()
        with trio.fail_after(timeout):
            for i in range(n):
                pub.send(data)
                if i % 100 == 99:
                    await _pace(pub, counter, i + 1, window)
        await feds_wait(counter, timeout)
        nursery.cancel_scope.cancel()
    return _rate(counter, start, "messages")


async def _pace(pub: Session, counter: Counter, sent: int, window: int | None) -> None:
    """Let the publisher go on once its connection has room (``window`` None), or once fewer
    than ``window`` of the ``sent`` items are still on their way (0: at once)."""
    if window is None:
        await pub.drain()
    else:
        await trio.sleep(0)
        await counter.below(sent, window)


async def _feds_prime(
    send: Callable[[bytes], None], warm: trio.Event, mark: trio.Event, timeout: float
) -> None:
    with trio.fail_after(timeout):
        while not warm.is_set():
            send(payload(WARM))
            await trio.sleep(0.01)
        for i in range(WARM_BURST):
            send(payload(WARM))
            if i % 100 == 99:
                await trio.sleep(0)
        send(payload(MARK))
        await mark.wait()


def _rate(counter: Counter, start: float, what: str) -> float:
    if not counter.done.is_set():
        raise TimeoutError(f"only {counter.count} of {counter.target} {what} arrived")
    return counter.target / (counter.last - start)


async def feds_phase_changes(
    pub: Session, sub: Session, n: int, window: int | None, timeout: float
) -> float:
    """Assert+retract pairs at ``pub``; 2n changes observed at ``sub``."""
    counter = Counter()
    seen_warm = trio.Event()
    seen_mark = trio.Event()
    async with sub.observe("<change $payload>") as events, trio.open_nursery() as nursery:
        marks = lambda e: e.kind == "+"  # noqa: E731  (a retracted mark is not the mark)
        nursery.start_soon(_consume, events, counter, seen_warm, seen_mark, marks)
        await sub.sync()

        def change(p: bytes) -> None:
            pub.retract(pub.assert_(Record(CHANGE, (p,))))

        await _feds_prime(change, seen_warm, seen_mark, timeout)
        counter.expect(2 * n)
        start = time.perf_counter()
        with trio.fail_after(timeout):
            for i in range(n):
                # Distinct values, so no two pairs can be mistaken for one another on the way.
                key = pub.assert_(Record(CHANGE, (DATA + i.to_bytes(8, "big") + b"x" * 55,)))
                pub.retract(key)
                if i % 50 == 49:
                    await _pace(pub, counter, 2 * (i + 1), window)
        await feds_wait(counter, timeout)
        nursery.cancel_scope.cancel()
    return _rate(counter, start, "changes")


async def feds_phase_latency(pub: Session, sub: Session, n: int, timeout: float) -> list[float]:
    """``pub`` pings, ``sub`` answers; round trips in seconds."""
    async with (
        sub.observe("<ping $i $payload>") as pings,
        pub.observe("<pong $i $payload>") as pongs,
        trio.open_nursery() as nursery,
    ):

        async def answer() -> None:
            async for event in pings:
                sub.send(Record(PONG, event.captures))

        nursery.start_soon(answer)
        await sub.sync()
        await pub.sync()
        body = payload(DATA)
        with trio.fail_after(timeout):  # warm-up: until a pong comes back
            while True:
                pub.send(Record(PING, (-1, body)))
                with trio.move_on_after(0.05):
                    await pongs.next()
                    break
        await trio.sleep(0.1)
        while True:  # drain stray pongs of the warm-up
            with trio.move_on_after(0.05):
                await pongs.next()
                continue
            break
        times: list[float] = []
        for i in range(n):
            start = time.perf_counter()
            pub.send(Record(PING, (i, body)))
            while True:
                event = await pongs.next(timeout)
                if event.captures[0] == i:
                    break
            times.append(time.perf_counter() - start)
        nursery.cancel_scope.cancel()
    return times


def measure_feds(addresses: list[str], params: Params, profile: Path | None) -> Sample:
    async def main() -> Sample:
        async with (
            connect(addresses[0], name="bench-sub") as sub,
            connect(addresses[-1], name="bench-pub") as pub,
        ):
            msgs = await feds_phase_messages(
                pub, sub, params.messages, params.window, params.timeout
            )
            changes = await feds_phase_changes(
                pub, sub, params.changes, params.window, params.timeout
            )
            times = await feds_phase_latency(pub, sub, params.round_trips, params.timeout)
        return Sample(msgs, changes, statistics.median(times) * 1e3, p99(times) * 1e3)

    if profile is None:
        return trio.run(main)
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        return trio.run(main)
    finally:
        profiler.disable()
        profiler.dump_stats(profile)


# -------------------------------------------------------------------------------------------------
# NATS clients (nats-py, asyncio)


async def _nats_measure(urls: list[str], params: Params) -> Sample:
    import nats

    sub_nc = await nats.connect(urls[0], allow_reconnect=False)
    pub_nc = await nats.connect(urls[-1], allow_reconnect=False)
    try:
        msgs = await _nats_messages(pub_nc, sub_nc, params)
        times = await _nats_latency(pub_nc, sub_nc, params)
    finally:
        await pub_nc.close()
        await sub_nc.close()
    return Sample(msgs, None, statistics.median(times) * 1e3, p99(times) * 1e3)


async def _nats_messages(pub_nc: Any, sub_nc: Any, params: Params) -> float:
    counter = Counter()
    warm, mark = asyncio.Event(), asyncio.Event()
    done = asyncio.Event()

    async def on_msg(msg: Any) -> None:
        kind = msg.data[:1]
        if kind == DATA:
            counter.hit()
            if counter.done.is_set():
                done.set()
        elif kind == WARM:
            warm.set()
        else:
            mark.set()

    subscription = await sub_nc.subscribe("bench.data", cb=on_msg)
    await sub_nc.flush()
    async with asyncio.timeout(params.timeout):
        while not warm.is_set():
            await pub_nc.publish("bench.data", payload(WARM))
            await pub_nc.flush()
            await asyncio.sleep(0.01)
        for _ in range(WARM_BURST):
            await pub_nc.publish("bench.data", payload(WARM))
        await pub_nc.publish("bench.data", payload(MARK))
        await mark.wait()
    n = params.peer_messages
    counter.expect(n)
    data = payload(DATA)
    start = time.perf_counter()
    for _ in range(n):
        await pub_nc.publish("bench.data", data)
    await pub_nc.flush()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), params.timeout)
    await subscription.unsubscribe()
    return _rate(counter, start, "messages")


async def _nats_latency(pub_nc: Any, sub_nc: Any, params: Params) -> list[float]:
    pongs: asyncio.Queue[bytes] = asyncio.Queue()

    async def answer(msg: Any) -> None:
        await sub_nc.publish("bench.pong", msg.data)

    async def on_pong(msg: Any) -> None:
        pongs.put_nowait(msg.data)

    s1 = await sub_nc.subscribe("bench.ping", cb=answer)
    s2 = await pub_nc.subscribe("bench.pong", cb=on_pong)
    await sub_nc.flush()
    await pub_nc.flush()
    async with asyncio.timeout(params.timeout):  # warm-up: until a pong comes back
        while True:
            await pub_nc.publish("bench.ping", payload(WARM))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(pongs.get(), 0.05)
                break
    await asyncio.sleep(0.1)
    while not pongs.empty():  # drain stray pongs of the warm-up
        pongs.get_nowait()
    body = payload(DATA)
    times = []
    async with asyncio.timeout(params.timeout * 10):
        for i in range(params.round_trips):
            data = i.to_bytes(4, "big") + body[4:]
            start = time.perf_counter()
            await pub_nc.publish("bench.ping", data)
            while await pongs.get() != data:
                pass
            times.append(time.perf_counter() - start)
    await s1.unsubscribe()
    await s2.unsubscribe()
    return times


def measure_nats(urls: list[str], params: Params) -> Sample:
    return asyncio.run(_nats_measure(urls, params))


# -------------------------------------------------------------------------------------------------
# Zenoh clients (callbacks on zenoh's threads)


def measure_zenoh(endpoints: list[str], params: Params) -> Sample:
    import zenoh

    sub_s = zenoh.open(zenoh_config("client", None, endpoints[0]))
    pub_s = zenoh.open(zenoh_config("client", None, endpoints[-1]))
    try:
        msgs = _zenoh_messages(zenoh, pub_s, sub_s, params)
        times = _zenoh_latency(zenoh, pub_s, sub_s, params)
    finally:
        pub_s.close()
        sub_s.close()
    return Sample(msgs, None, statistics.median(times) * 1e3, p99(times) * 1e3)


def _zenoh_messages(zenoh: Any, pub_s: Any, sub_s: Any, params: Params) -> float:
    counter = Counter()
    warm, mark = threading.Event(), threading.Event()

    def on_sample(sample: Any) -> None:
        kind = sample.payload.to_bytes()[:1]
        if kind == DATA:
            counter.hit()
        elif kind == WARM:
            warm.set()
        else:
            mark.set()

    subscriber = sub_s.declare_subscriber("bench/data", on_sample)
    publisher = pub_s.declare_publisher(
        "bench/data", congestion_control=zenoh.CongestionControl.BLOCK
    )
    deadline = time.monotonic() + params.timeout
    while not warm.is_set():
        if time.monotonic() > deadline:
            raise TimeoutError("zenoh: the subscription never became visible")
        publisher.put(payload(WARM))
        time.sleep(0.01)
    for _ in range(WARM_BURST):
        publisher.put(payload(WARM))
    publisher.put(payload(MARK))
    if not mark.wait(params.timeout):
        raise TimeoutError("zenoh: the warm-up marker was lost")
    n = params.peer_messages
    counter.expect(n)
    data = payload(DATA)
    put = publisher.put
    start = time.perf_counter()
    for _ in range(n):
        put(data)
    counter.done.wait(params.timeout)
    publisher.undeclare()
    subscriber.undeclare()
    return _rate(counter, start, "messages")


def _zenoh_latency(zenoh: Any, pub_s: Any, sub_s: Any, params: Params) -> list[float]:
    pongs: queue.SimpleQueue[bytes] = queue.SimpleQueue()
    block = zenoh.CongestionControl.BLOCK
    ping_pub = pub_s.declare_publisher("bench/ping", congestion_control=block, express=True)
    pong_pub = sub_s.declare_publisher("bench/pong", congestion_control=block, express=True)
    answer = sub_s.declare_subscriber("bench/ping", lambda s: pong_pub.put(s.payload))
    listen = pub_s.declare_subscriber("bench/pong", lambda s: pongs.put(s.payload.to_bytes()))
    deadline = time.monotonic() + params.timeout
    while True:
        ping_pub.put(payload(WARM))
        try:
            pongs.get(timeout=0.05)
            break
        except queue.Empty:
            if time.monotonic() > deadline:
                raise TimeoutError("zenoh: no pong") from None
    time.sleep(0.1)
    with contextlib.suppress(queue.Empty):
        while True:
            pongs.get_nowait()
    body = payload(DATA)
    times = []
    for i in range(params.round_trips):
        data = i.to_bytes(4, "big") + body[4:]
        start = time.perf_counter()
        ping_pub.put(data)
        while pongs.get(timeout=params.timeout) != data:
            pass
        times.append(time.perf_counter() - start)
    for entity in (answer, listen, ping_pub, pong_pub):
        entity.undeclare()
    return times


# -------------------------------------------------------------------------------------------------
# Finding or installing the peers


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def ensure_python_package(dist: str, module: str, install: bool, notes: list[str]) -> str | None:
    """The installed version of ``dist`` (pip-installing it if allowed), or None."""
    version = _version(dist)
    if version is None and install:
        print(f"installing {dist} with pip ...", file=sys.stderr, flush=True)
        result = subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", dist], capture_output=True, text=True
        )
        if result.returncode != 0:
            notes.append(f"{dist}: pip install failed ({result.stderr.strip()[-200:]})")
        importlib.invalidate_caches()
        version = _version(dist)
    if version is None:
        return None
    try:
        importlib.import_module(module)
    except ImportError as exc:
        notes.append(f"{dist} {version} does not import: {exc}")
        return None
    return version


def ensure_nats_server(install: bool, notes: list[str]) -> tuple[str, str] | None:
    """``(path, version)`` of nats-server (apt-installing it if allowed and root), or None."""
    binary = shutil.which("nats-server") or next(
        (p for p in ("/usr/sbin/nats-server", "/usr/bin/nats-server") if os.path.exists(p)), None
    )
    if binary is None and install:
        if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
            print("installing nats-server with apt-get ...", file=sys.stderr, flush=True)
            apt = ["apt-get", "install", "-y", "-q", "nats-server"]
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            if subprocess.run(apt, capture_output=True, env=env).returncode != 0:
                subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env)
                result = subprocess.run(apt, capture_output=True, text=True, env=env)
                if result.returncode != 0:
                    notes.append(f"nats-server: apt-get failed ({result.stderr.strip()[-200:]})")
            binary = shutil.which("nats-server") or (
                "/usr/sbin/nats-server" if os.path.exists("/usr/sbin/nats-server") else None
            )
        else:
            notes.append("nats-server: not found, and apt-get needs root")
    if binary is None:
        return None
    out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()
    return binary, out.split()[-1].lstrip("v") if out else "?"


# -------------------------------------------------------------------------------------------------
# Output


def fmt_rate(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def fmt_ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def fmt_ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or b == 0 else f"{a / b:.3g}"


def render(rows: list[Row], baselines: list[tuple[str, Row | None]] | None = None) -> str:
    """A plain (Markdown) table: medians over repetitions, and the ratios of every row but the
    peers' to each other baseline (by default the NATS and Zenoh rows)."""
    if baselines is None:
        baselines = [
            (label, next((r for r in rows if r.kind == kind and r.samples), None))
            for label, kind in (("NATS", "nats"), ("Zenoh", "zenoh"))
        ]
    metrics = (("msgs/s", "msgs"), ("med RT", "rt_median"))
    header = ["system", "version", "msgs/s", "changes/s", "median RT ms", "p99 RT ms"]
    header += [f"{metric} ÷{label}" for metric, _ in metrics for label, _ in baselines]
    lines = [header]
    for row in rows:
        if not row.samples:
            reason = (row.error.splitlines() or ["?"])[0][:90]
            lines.append([row.system, row.version, f"failed: {reason}"] + [""] * (len(header) - 3))
            continue
        ratios = [
            ""
            if row.kind in ("nats", "zenoh") or row is base
            else fmt_ratio(row.median(attribute), base.median(attribute) if base else None)
            for _, attribute in metrics
            for _, base in baselines
        ]
        lines.append(
            [
                row.system,
                row.version,
                fmt_rate(row.median("msgs")),
                fmt_rate(row.median("changes")),
                fmt_ms(row.median("rt_median")),
                fmt_ms(row.median("rt_p99")),
                *ratios,
            ]
        )
    return markdown_table(lines)


def markdown_table(lines: list[list[str]]) -> str:
    """``lines`` (the first one the header) as a plain Markdown table, columns padded."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = []
    for n, line in enumerate(lines):
        out.append("| " + " | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) + " |")
        if n == 0:
            out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(out)


# -------------------------------------------------------------------------------------------------
# Main


@dataclass
class Target:
    """One system under test: its row, how to start its servers and how to measure it."""

    row: Row
    start: Callable[[], tuple[Cluster, list[str]]]
    measure: Callable[[list[str]], Sample]
    cluster: Cluster | None = None
    addresses: list[str] = field(default_factory=list)


@contextlib.contextmanager
def running(targets: list[Target]) -> Iterator[None]:
    try:
        for target in targets:
            try:
                target.cluster, target.addresses = target.start()
            except Exception as exc:
                target.row.error = f"could not start: {exc}"
                print(f"{target.row.system}: {target.row.error}", file=sys.stderr, flush=True)
        yield
    finally:
        for target in targets:
            if target.cluster is not None:
                target.cluster.stop()


def peer_targets(params: Params, install: bool, notes: list[str]) -> list[Target]:
    """NATS and Zenoh as targets, each if it can be had (installing it if ``install``); what
    is skipped is said in ``notes``."""
    targets: list[Target] = []
    nats_py = ensure_python_package("nats-py", "nats", install, notes)
    server = ensure_nats_server(install, notes)
    if nats_py and server:
        binary, server_version = server

        def start_nats() -> Any:
            return start_nats_chain(binary)

        version = f"server {server_version}, nats-py {nats_py}"
        row = Row("NATS leaf chain", version, "nats")
        targets.append(Target(row, start_nats, lambda a: measure_nats(a, params)))
    else:
        missing = [n for n, ok in (("nats-py", nats_py), ("nats-server", server)) if not ok]
        notes.append(f"NATS skipped: {' and '.join(missing)} not available")
    zenoh_version = ensure_python_package("eclipse-zenoh", "zenoh", install, notes)
    if zenoh_version:
        row = Row("Zenoh router chain", f"eclipse-zenoh {zenoh_version}", "zenoh")
        targets.append(Target(row, start_zenoh_chain, lambda a: measure_zenoh(a, params)))
    else:
        notes.append("Zenoh skipped: eclipse-zenoh not available")
    return targets


def run_reps(targets: list[Target], reps: int) -> None:
    """Start every target's servers, then measure the targets in turn ``reps`` times (a failed
    measurement is noted in the target's row); print each sample as it comes."""
    with running(targets):
        for rep in range(reps):
            for target in targets:
                if target.cluster is None:
                    continue
                try:
                    sample = target.measure(target.addresses)
                except Exception as exc:
                    target.row.error = f"{type(exc).__name__}: {exc}"
                    print(f"{target.row.system}: {target.row.error}", file=sys.stderr, flush=True)
                    continue
                target.row.samples.append(sample)
                print(
                    f"  rep {rep + 1}/{reps} {target.row.system:<22} "
                    f"msgs/s {fmt_rate(sample.msgs):>9}  changes/s {fmt_rate(sample.changes):>7}"
                    f"  RT median {fmt_ms(sample.rt_median)} ms  p99 {fmt_ms(sample.rt_p99)} ms",
                    flush=True,
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="feds overlay throughput and latency against Zenoh and NATS (3-node chain)."
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny N, 1 repetition")
    parser.add_argument("--reps", type=int, help="repetitions (default 3, or 1 with --quick)")
    parser.add_argument("--feds-only", action="store_true", help="do not run Zenoh or NATS")
    parser.add_argument("--no-install", action="store_true", help="use peers only if present")
    parser.add_argument("--protocols", nargs="+", choices=PROTOCOLS, default=list(PROTOCOLS))
    parser.add_argument("--messages", type=int, help="messages per feds throughput run (20000)")
    parser.add_argument("--peer-messages", type=int, help="messages per peer run (100000)")
    parser.add_argument("--changes", type=int, help="assert+retract pairs per run (5000)")
    parser.add_argument("--round-trips", type=int, help="ping-pongs per run (1000)")
    parser.add_argument(
        "--window",
        type=int,
        help="feds: keep at most this many messages (changes) in flight instead of using "
        "Session.drain(); 0 = no flow control",
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds allowed per phase")
    parser.add_argument("--json", type=Path, help="also write every sample to this file")
    parser.add_argument(
        "--profile-dir", type=Path, help="run nodes and the feds clients under cProfile"
    )
    args = parser.parse_args(argv)

    quick = args.quick
    params = Params(
        messages=args.messages or (300 if quick else 20_000),
        peer_messages=args.peer_messages or (1_000 if quick else 100_000),
        changes=args.changes or (100 if quick else 5_000),
        round_trips=args.round_trips or (30 if quick else 1_000),
        window=args.window,
        timeout=args.timeout,
    )
    reps = args.reps or (1 if quick else 3)
    if args.profile_dir is not None:
        args.profile_dir.mkdir(parents=True, exist_ok=True)

    notes: list[str] = []
    feds_version = _version("feds") or "?"
    targets: list[Target] = []
    for protocol in args.protocols:
        profile = args.profile_dir

        def start(protocol: str = protocol, profile: Path | None = profile) -> Any:
            return start_feds_chain(protocol, profile)

        def measure(addresses: list[str], protocol: str = protocol) -> Sample:
            prof = args.profile_dir / f"client-{protocol}.prof" if args.profile_dir else None
            return measure_feds(addresses, params, prof)

        targets.append(Target(Row(f"feds {protocol}", feds_version, "feds"), start, measure))

    if not args.feds_only:
        targets += peer_targets(params, not (quick or args.no_install), notes)

    print(
        f"3-node chain on {HOST}, {PAYLOAD_SIZE}-byte payloads, {reps} repetition(s); "
        f"feds: {params.messages} msgs, {params.changes} assert+retract pairs, "
        f"{'drain()' if params.window is None else f'window {params.window}'}; "
        f"peers: {params.peer_messages} msgs; {params.round_trips} round trips each",
        flush=True,
    )
    started = time.perf_counter()
    run_reps(targets, reps)
    rows = [t.row for t in targets]
    print()
    print(render(rows))
    print(
        f"\nmedians over {reps} repetition(s); RT = round trip; ratios are feds ÷ peer "
        f"(msgs/s: higher is better for feds; RT: lower is better). "
        f"Took {time.perf_counter() - started:.0f} s."
    )
    ran = [f"{r.system} ({r.version})" for r in rows if r.samples]
    print("ran: " + "; ".join(ran))
    for note in notes:
        print("note: " + note)
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2))
    feds_ok = all(r.samples for r in rows if r.kind == "feds")
    return 0 if feds_ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_worker":
        run_worker(sys.argv[2:])
    else:
        sys.exit(main())
