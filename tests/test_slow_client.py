"""A client that stops reading never stalls its node's other clients (issue 11, defect 4).

Real TCP on 127.0.0.1: a watcher stops reading while a publisher floods the node. The node
keeps serving everyone else promptly, loses nothing for them, and cuts the watcher at its own
bound (``client_max_backlog``) with a reason the watcher receives once it reads again.
"""

from __future__ import annotations

import pytest
import trio

from feds import client, transport
from feds.limits import NetLimits
from feds.values import record
from tests.net_helpers import start_node, watch_over
from tests.test_backpressure import SlowStream, slow_tcp

LIMITS = NetLimits(stall_timeout=30.0, client_max_backlog=1024 * 1024)
"""A stall of the node would last 30 s, far beyond :data:`PROMPT`, so it cannot hide."""
PROMPT = 2.0
"""Seconds within which a round trip of another client completes: "not stalled" (a
correctness bound, far below ``stall_timeout``; no performance claim)."""
MESSAGES = 1500
PAYLOAD = 8192
WINDOW = 32
"""Messages the publisher lets the reading observer fall behind (far below the bound, so only
the watcher that stops reading is a slow consumer)."""


class GatedStream(SlowStream):
    """A TCP stream that stops being read from while ``reading`` is clear."""

    def __init__(self, inner: trio.SocketStream) -> None:
        super().__init__(inner)
        self.reading = trio.Event()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await self.reading.wait()
        return await self.inner.receive_some(max_bytes)


async def test_a_watcher_that_stops_reading_is_cut_alone_and_the_other_clients_are_served(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cut watcher must read about 1.3 MB before the reason; on a loaded machine that can
    # take longer than the 2 s a node gives a closed link's last bytes.
    monkeypatch.setattr(transport, "CLOSE_TIMEOUT", 60.0)
    runtime, port = await start_node(nursery, LIMITS)
    # The watcher subscribes, then stops reading (``feds watch n '<msg $i $p>' | sleep 1000``).
    stream = GatedStream((await slow_tcp(port)).inner)
    stream.reading.set()
    watcher, to_watcher = await watch_over(nursery, runtime, stream, "<msg $i $p>", "watcher")
    stream.reading = trio.Event()

    payloads = [i.to_bytes(4, "big") * (PAYLOAD // 4) for i in range(MESSAGES)]
    flooding = True
    round_trips = 0

    async def hear_when_cut() -> None:
        """Read again as soon as the node has cut the watcher: the reason follows what is
        already on its way, for as long as the node lets the last bytes go (CLOSE_TIMEOUT)."""
        with trio.fail_after(60):
            while not to_watcher.closed:
                await trio.sleep(0.005)
        stream.reading.set()

    got: list[tuple[object, ...]] = []

    async def read(seen: client.Observation) -> None:
        with trio.fail_after(60):
            while len(got) < MESSAGES:
                got.append((await seen.next()).captures)

    async def probe(other: client.Session) -> None:
        nonlocal round_trips
        while flooding:
            with trio.fail_after(PROMPT):  # a stalled node fails here
                await other.sync(None)
            round_trips += 1
            await trio.sleep(0.01)

    async with (
        client.connect(f"127.0.0.1:{port}", name="publisher") as pub,
        client.connect(f"127.0.0.1:{port}", name="observer") as obs,
        client.connect(f"127.0.0.1:{port}", name="other") as other,
        obs.observe("<msg $i $p>") as seen,
    ):
        await obs.sync()
        async with trio.open_nursery() as probing:
            probing.start_soon(probe, other)
            probing.start_soon(hear_when_cut)
            probing.start_soon(read, seen)
            for i, p in enumerate(payloads):
                pub.send(record("msg", i, p))
                if i % WINDOW == WINDOW - 1:
                    with trio.fail_after(PROMPT):  # the observer is served promptly too
                        await pub.drain(None)
                        while len(got) < i + 1 - WINDOW:
                            await trio.sleep(0.001)
            with trio.fail_after(60):
                while len(got) < MESSAGES:
                    await trio.sleep(0.01)
                await pub.sync(None)
            flooding = False

    assert got == [(i, p) for i, p in enumerate(payloads)]  # everything, in order
    assert round_trips > 0
    assert to_watcher.closed
    reason = to_watcher.close_reason or ""
    assert reason.startswith("slow consumer") and "client-max-backlog 1048576" in reason
    # The watcher, reading again, hears why.
    with trio.fail_after(10):
        while not watcher.closed:
            await trio.sleep(0.01)
    assert watcher.close_reason == f"peer error: {reason}"
