"""Issue 11 defects 4, 5, 6 and 9: a node's connections are bounded in memory, time and number,
closed connections leave nothing behind, and a hung far side is noticed (real TCP, 127.0.0.1)."""

from __future__ import annotations

import contextlib
import gc
import logging
import socket
import time
import weakref
from collections.abc import Callable

import pytest
import trio

from feds import client, transport
from feds.codec import encode_frame
from feds.limits import NetLimits
from feds.relay import CLIENT, PROTOCOL_VERSION, Hello
from feds.values import FrozenDict, record
from tests.net_helpers import start_node, watch_over
from tests.test_backpressure import DeafStream, slow_tcp

FAST = NetLimits(
    handshake_timeout=1.5,
    frame_timeout=1.0,
    keepalive_interval=0.2,
    keepalive_timeout=1.5,
    stall_timeout=1.0,
    max_connections=8,
)
"""Short timeouts, so that each test waits a second or so for them (long enough for a loaded
CI machine to complete a legitimate handshake)."""


async def eventually(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    with trio.fail_after(timeout):
        while not condition():
            await trio.sleep(0.005)


def hello_frame(name: str = "raw") -> bytes:
    return encode_frame(Hello(PROTOCOL_VERSION, CLIENT, name, FrozenDict()).to_value())


async def raw(port: int) -> trio.SocketStream:
    return await trio.open_tcp_stream("127.0.0.1", port)


async def read_until_closed(stream: trio.SocketStream) -> bytes:
    """Everything the node sends until it closes the connection."""
    data = b""
    with trio.fail_after(10):
        while chunk := await stream.receive_some(65536):
            data += chunk
    return data


async def collected(ref: weakref.ref, timeout: float = 10.0) -> None:
    """Wait until ``ref``'s object is garbage: collect, and between collections let the node's
    tasks finish with the connection (its pump ends only once the last bytes are out or
    ``CLOSE_TIMEOUT`` has passed), for ``timeout`` seconds in all.

    The time spent collecting does not count: the node's tasks cannot run meanwhile, and a full
    collection of a large heap (a whole suite's) takes seconds on a loaded machine. Counting it,
    a few collections used up the timeout while the node's pump had been given a few
    milliseconds, and the relay was reported still reachable from its own pump's coroutines.
    """
    given = 0.0
    while given < timeout:
        gc.collect()
        if ref() is None:
            return
        before = trio.current_time()
        await trio.sleep(0.2)  # (at most timeout / 0.2 collections, even for a real leak)
        given += trio.current_time() - before
    pytest.fail(f"{ref()!r} is still reachable:\n{holders(ref())}")


def holders(obj: object, depth: int = 4) -> str:
    """Who holds ``obj``: its referrers, theirs, ... (a leak test's failure says where to look)."""
    lines: list[str] = []
    level = [obj]
    seen = {id(obj)}
    for d in range(depth):
        following = []
        for held in level:
            for referrer in gc.get_referrers(held):
                if id(referrer) in seen or referrer is level or isinstance(referrer, type(gc)):
                    continue
                seen.add(id(referrer))
                following.append(referrer)
                lines.append("  " * d + f"{type(referrer).__name__}: {repr(referrer)[:160]}")
        level = following[:20]
    return "\n".join(lines[:80])


# -- defect 5: nothing of a closed connection stays reachable -----------------------------------


@pytest.fixture
def no_log_records():
    """No log records while a leak test runs: a record keeps its arguments (``%r`` of a relay),
    and pytest keeps the records of a test, so wherever an earlier test left a logger at INFO
    or DEBUG, the log itself would hold the connection the test watches being released."""
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


async def test_a_closed_client_connection_leaves_no_relay_actor_or_buffer_behind(
    nursery: trio.Nursery, no_log_records: None
) -> None:
    runtime, port = await start_node(nursery, FAST)
    async with client.connect(f"127.0.0.1:{port}", name="leaver") as ds:
        ds.assert_(record("present", "leaver"))
        await ds.sync()
        (relay,) = runtime.relays
        refs = [weakref.ref(relay), weakref.ref(relay.actor)]
        del relay
    await eventually(lambda: not runtime.relays)
    for ref in refs:
        await collected(ref)


async def test_a_connection_that_sent_part_of_a_big_frame_releases_its_buffer(
    nursery: trio.Nursery, no_log_records: None
) -> None:
    runtime, port = await start_node(nursery, FAST)
    stream = await raw(port)
    await stream.send_all(hello_frame() + (4 * 2**20).to_bytes(4, "big") + b"\x00" * 2**20)
    await eventually(lambda: len(runtime.relays) == 1)
    ref = weakref.ref(next(iter(runtime.relays)))
    await eventually(lambda: ref().partial_input >= 2**20)
    await stream.aclose()
    await eventually(lambda: not runtime.relays)
    await collected(ref)


async def test_a_far_side_that_says_goodbye_is_let_go_at_once(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A far side that closes with an ``<error ...>`` packet (a client does, when it is done)
    is let go at once: the node closes the socket and drops the relay, its actor and buffers.
    They were kept until ``CLOSE_TIMEOUT`` had passed, as nothing woke the writer task when
    the relay closed with nothing left to send."""
    monkeypatch.setattr(transport, "CLOSE_TIMEOUT", 3600.0)  # so that only this can end it
    runtime, port = await start_node(nursery, FAST)
    stream = await raw(port)
    await stream.send_all(hello_frame())
    await eventually(lambda: len(runtime.relays) == 1)
    await stream.send_all(encode_frame(record("error", "done", None)))
    await read_until_closed(stream)


# -- defect 6: timeouts and caps ----------------------------------------------------------------


async def test_a_connection_that_never_says_hello_is_closed(nursery: trio.Nursery) -> None:
    _, port = await start_node(nursery, FAST)
    stream = await raw(port)
    assert b"no handshake within 1.5 s" in await read_until_closed(stream)


async def test_a_frame_sent_one_byte_at_a_time_is_closed(nursery: trio.Nursery) -> None:
    _, port = await start_node(nursery, FAST)
    stream = await raw(port)
    await stream.send_all(hello_frame() + (100).to_bytes(4, "big"))
    received = b""
    with trio.fail_after(10), contextlib.suppress(trio.BrokenResourceError):
        while True:  # a byte now and then keeps the connection alive, never the frame
            with trio.move_on_after(0.05):
                chunk = await stream.receive_some(65536)
                if not chunk:
                    break
                received += chunk
            await stream.send_all(b"\x00")
    assert b"frame not completed within 1 s" in received


async def test_a_steady_stream_whose_reads_all_end_mid_frame_is_not_cut(
    nursery: trio.Nursery,
) -> None:
    """The frame timeout bounds one frame, not a stream: a far side that streams frames for
    longer than ``frame_timeout`` is kept, although every read the node makes ends in the
    middle of a frame (each frame completes in the read after the one it began in).

    A publisher streaming large turn packets looks like this; it was cut with "frame not
    completed" once it had streamed for ``frame_timeout``, as soon as a loaded machine made
    ``test_a_watcher_that_stops_reading_...`` last that long.
    """
    runtime, port = await start_node(nursery, FAST)
    stream = await raw(port)
    frame = encode_frame(record("ping"))  # a node answers each with a pong (never read here)
    half = len(frame) // 2
    await stream.send_all(hello_frame() + frame[:half])
    await eventually(lambda: len(runtime.relays) == 1)
    (relay,) = runtime.relays
    sent = 0
    with trio.move_on_after(2 * FAST.frame_timeout), contextlib.suppress(trio.BrokenResourceError):
        while True:  # the rest of one frame and the beginning of the next
            await stream.send_all(frame[half:] + frame[:half])
            sent += 1
            await trio.sleep(0.02)
    assert not relay.closed, relay.close_reason
    await eventually(lambda: relay.stats.packets_in == 1 + sent)  # the hello, then each ping
    assert relay.partial_input == half


async def test_connections_beyond_the_maximum_are_refused_with_the_reason(
    nursery: trio.Nursery,
) -> None:
    runtime, port = await start_node(nursery, NetLimits(max_connections=3))
    held = [await raw(port) for _ in range(3)]
    for stream in held:
        await stream.send_all(hello_frame())
    await eventually(lambda: len(runtime.relays) == 3)
    extra = await raw(port)
    assert b"too many connections (max 3)" in await read_until_closed(extra)
    await held[0].aclose()
    await eventually(lambda: len(runtime.relays) == 2)
    async with client.connect(f"127.0.0.1:{port}") as ds:  # room again
        await ds.sync()


async def test_assertions_per_node_are_bounded_over_all_connections(
    nursery: trio.Nursery,
) -> None:
    runtime, port = await start_node(nursery, NetLimits(max_node_assertions=10))
    async with client.connect(f"127.0.0.1:{port}", name="first") as first:
        for i in range(6):
            first.assert_(record("x", i))
        await first.sync()
        async with client.connect(f"127.0.0.1:{port}", name="second") as second:
            for i in range(6):
                second.assert_(record("y", i))
            with pytest.raises(client.FedsError, match="too many assertions"):
                await second.sync(5)
        await first.sync()  # the first connection is not affected
        assert runtime.budget.used == 6
    await eventually(lambda: runtime.budget.used == 0)


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="must be a positive"):
        NetLimits(max_connections=0)
    with pytest.raises(ValueError, match="unknown limit 'max-conections'"):
        NetLimits.from_mapping({"max-conections": 3})
    assert NetLimits.from_mapping({"keepalive-timeout": 9}).keepalive_timeout == 9


# -- defect 9: a hung far side is noticed -------------------------------------------------------


async def test_a_silent_far_side_is_cut_by_the_keepalive(nursery: trio.Nursery) -> None:
    """A peer that completed its handshake, then fell silent (SIGSTOP looks like this)."""
    _, port = await start_node(nursery, FAST)
    stream = await raw(port)
    await stream.send_all(hello_frame())
    data = await read_until_closed(stream)
    assert b"nothing received for 1.5 s (keep-alive timeout)" in data


async def test_an_idle_but_live_client_is_kept(nursery: trio.Nursery) -> None:
    runtime, port = await start_node(nursery, FAST)
    async with client.connect(f"127.0.0.1:{port}", limits=FAST) as ds:
        await trio.sleep(4 * FAST.keepalive_timeout)  # idle for longer than the timeout
        await ds.sync()
    assert runtime.relays == set() or all(not r.closed for r in runtime.relays)


async def test_a_starved_node_does_not_cut_a_link_whose_pings_wait_unread(
    nursery: trio.Nursery,
) -> None:
    """A node that got no CPU for longer than the keep-alive timeout (a loaded machine) may run
    its watchdog before its reader when it wakes: the far side's ping is in the socket, unread.
    Here the node's loop is not let run (no checkpoint) between the ping and the check."""
    runtime, port = await start_node(nursery, FAST)
    with socket.create_connection(("127.0.0.1", port)) as far_side:
        far_side.sendall(hello_frame())
        await eventually(lambda: any(r.ready for r in runtime.relays))
        (relay,) = runtime.relays
        link = transport._links[relay]
        later = link.last_read + 10 * FAST.keepalive_timeout
        assert "keep-alive timeout" in (link.overdue(FAST, 0.0, later) or "")
        far_side.sendall(encode_frame(record("ping")))
        deadline = time.monotonic() + 10
        while not transport._unread_bytes(link.stream) and time.monotonic() < deadline:
            time.sleep(0.001)  # loopback delivery, without letting the node read
        assert link.overdue(FAST, 0.0, later) is None
        assert not relay.closed


async def test_links_that_stalled_with_their_process_are_pinged_not_cut(
    nursery: trio.Nursery,
) -> None:
    """A process that ran none of its tasks for longer than the keep-alive timeout (no CPU on a
    loaded machine, a GIL held by another thread, a suspended host): its far sides in the same
    process were silent because they stalled too. Each end pings when the process runs again,
    rather than cutting the link at once (the Spark leaf tests' overlays lost every link so)."""
    runtime, port = await start_node(nursery, FAST)
    async with client.connect(f"127.0.0.1:{port}", limits=FAST) as ds:
        await ds.sync()
        time.sleep(2 * FAST.keepalive_timeout)  # the whole trio run stalls: no task runs
        await trio.sleep(2 * FAST.keepalive_interval)
        await ds.sync()
        assert runtime.relays and not any(r.closed for r in runtime.relays)


# -- defect 4: a watcher that stops reading does not freeze the node ----------------------------


async def test_a_watcher_that_stops_reading_is_cut_and_the_node_serves_the_others(
    nursery: trio.Nursery,
) -> None:
    """``feds watch TAIL '<msg $i>' | sleep 1000`` with a publisher: the node keeps reading the
    publisher and cuts the watcher at ``client_max_backlog`` (``tests/test_slow_client.py``
    shows the other clients are served meanwhile)."""
    runtime, port = await start_node(nursery, FAST)
    stream = DeafStream(await slow_tcp(port))
    _, to_deaf = await watch_over(nursery, runtime, stream, "<msg $p>", "deaf")
    stream.deaf = True

    async with client.connect(f"127.0.0.1:{port}", name="publisher") as pub:
        payload = b"x" * 8192
        for i in range(2000):
            pub.send(record("msg", payload))
            if i % 50 == 49:
                await pub.drain(30)
        await pub.sync(30)
    assert to_deaf.closed and to_deaf.close_reason.startswith("slow consumer: ")
    assert "(client-max-backlog 8388608)" in to_deaf.close_reason
    async with client.connect(f"127.0.0.1:{port}", name="other") as other:
        await other.sync(5)
