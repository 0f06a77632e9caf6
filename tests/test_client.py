"""Clients over real TCP: the async and blocking clients against overlays in this process.

The links between nodes are real loopback TCP here (``tcp_links``), as between `feds node`
processes; `tests/test_cli.py` runs the nodes as separate processes.
"""

from __future__ import annotations

from functools import partial

import pytest
import trio

from feds import client, topology
from feds.blocking import BlockingClient
from feds.protocols import protocol_names
from feds.runtime import Overlay, figures, run_overlay
from feds.values import record
from tests.threaded import served_in_thread

BINARY7 = topology.load("topology/binary7.toml")


async def start(nursery: trio.Nursery, protocol: str, tcp_links: bool = True) -> Overlay:
    return await nursery.start(
        lambda task_status: run_overlay(
            BINARY7, protocol=protocol, any_port=True, tcp_links=tcp_links, task_status=task_status
        )
    )


@pytest.mark.parametrize("protocol", protocol_names())
async def test_observers_at_every_node_see_everything_once_over_tcp(protocol: str) -> None:
    async with trio.open_nursery() as nursery:
        overlay = await start(nursery, protocol)
        names = BINARY7.order()
        sessions = []
        observations = []
        for name in names:
            ds = await nursery.start(_session, overlay.address(name))
            sessions.append(ds)
        for ds in sessions:
            observations.append(await nursery.start(_observe, ds, "<a $x>"))
        for ds in sessions:
            await ds.sync()
        for i, ds in enumerate(sessions):
            ds.assert_(record("a", i))
            ds.send(record("a", 100 + i))
        for ds in sessions:
            await ds.sync()
        expected = {(i,) for i in range(len(names))}
        for obs in observations:
            assert set(obs.state) == expected
            assert sorted(obs.messages) == sorted((100 + i,) for i in range(len(names)))
        nursery.cancel_scope.cancel()


class _Tracker:
    """Collects an observation's current matches and messages in a background task."""

    def __init__(self) -> None:
        self.state: dict[tuple, int] = {}
        self.messages: list[tuple] = []


async def _session(address: str, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
    async with client.connect(address) as ds:
        task_status.started(ds)
        await trio.sleep_forever()


async def _observe(
    ds: client.Session, pattern: str, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED
) -> None:
    tracker = _Tracker()
    async with ds.observe(pattern) as events:
        task_status.started(tracker)
        async for event in events:
            if event.kind == "+":
                tracker.state[event.captures] = tracker.state.get(event.captures, 0) + 1
            elif event.kind == "-":
                tracker.state.pop(event.captures)
            else:
                tracker.messages.append(event.captures)


async def test_a_client_that_leaves_takes_its_assertions_with_it() -> None:
    async with trio.open_nursery() as nursery:
        overlay = await start(nursery, "aggregate-subs")
        async with client.connect(overlay.address("a1")) as watcher:
            async with client.connect(overlay.address("b2")) as sensor:
                sensor.assert_(record("present", "sensor"))
                await sensor.sync()
                assert await watcher.query("<present $who>") == [("sensor",)]
            await trio.sleep(0.2)
            assert await watcher.query("<present $who>") == []
        nursery.cancel_scope.cancel()


async def test_a_lost_uplink_retracts_the_subtree_and_comes_back() -> None:
    async with trio.open_nursery() as nursery:
        overlay = await start(nursery, "observer-flood")
        async with (
            client.connect(overlay.address("a1")) as watcher,
            client.connect(overlay.address("b1")) as sensor,
        ):
            sensor.assert_(record("present", "b1"))
            await sensor.sync()
            assert await watcher.query("<present $who>") == [("b1",)]
            # Cut node b off from its parent: its uplink connection is closed.
            for relay in list(overlay.runtimes["b"].relays):
                if relay.remote_hello and relay.remote_hello.name == "top":
                    relay.close("test: link cut")
            with trio.fail_after(5):
                while await watcher.query("<present $who>"):
                    await trio.sleep(0.05)
            # The uplink re-dials with backoff and the assertion comes back.
            with trio.fail_after(10):
                while not await watcher.query("<present $who>"):
                    await trio.sleep(0.1)
        nursery.cancel_scope.cancel()


async def test_status_reports_fragment_and_link_figures() -> None:
    async with trio.open_nursery() as nursery:
        overlay = await start(nursery, "copy-up", tcp_links=False)
        data = figures(await client.status(overlay.address("a")))
        assert data["name"] == "a" and data["protocol"] == "copy-up"
        peers = sorted(link["peer"] for link in data["links"] if link["role"] == "peer")
        assert peers == ["a1", "a2", "top"]
        assert all(link["bytes_in"] > 0 for link in data["links"] if link["role"] == "peer")
        nursery.cancel_scope.cancel()


async def test_connecting_to_nothing_fails_with_a_clear_error() -> None:
    with pytest.raises(client.FedsError, match=r"cannot connect|failed"):
        async with client.connect("127.0.0.1:1", timeout=5):
            pass
    with pytest.raises(client.FedsError, match="bad address"):
        async with client.connect("nowhere"):
            pass


def test_blocking_client_asserts_queries_watches_and_closes() -> None:
    with served_in_thread(partial(start, protocol="aggregate-subs", tcp_links=False)) as overlay:
        with (
            BlockingClient(overlay.address("a1")) as sensor,
            BlockingClient(overlay.address("b2")) as watcher,
        ):
            keys = sensor.publish_many([record("temp", "kitchen", 21), record("temp", "hall", 19)])
            sensor.sync()
            assert watcher.query("<temp $room _>") == [("hall",), ("kitchen",)]
            sensor.retract(keys[0])
            sensor.sync()
            assert watcher.query("<temp $room _>") == [("hall",)]
            events = watcher.watch("<temp $room $v>", timeout=2)
            first = next(events)
            assert (first.kind, first.captures) == ("+", ("hall", 19))
            sensor.send(record("temp", "porch", 8))
            assert next(events).captures == ("porch", 8)
            events.close()
            with pytest.raises(TypeError):
                sensor.assert_([1, 2])  # a list is not a value
        with pytest.raises(client.FedsError):
            sensor.sync()


async def test_a_round_trips_messages_cross_the_overlay_passed_on_as_their_bytes() -> None:
    """Over TCP, aggregate-subs: a message sent and awaited one at a time crosses the nodes
    that only pass it on as its bytes (``RelayStats.passed_on``, in the status), and each
    arrives once, in order."""
    async with trio.open_nursery() as nursery:
        overlay = await start(nursery, "aggregate-subs")
        async with (
            client.connect(overlay.address("a1")) as watcher,
            client.connect(overlay.address("b1")) as sender,
        ):
            async with watcher.observe("<ping $i>") as pings:
                await watcher.sync()
                await sender.sync()
                for i in range(20):
                    sender.send(record("ping", i))
                    assert (await pings.next(10)).captures == (i,)
            links = figures(await client.status(overlay.address("top")))["links"]
        assert sum(link["passed_on"] for link in links) >= 19  # the first worked out the route
        nursery.cancel_scope.cancel()


async def test_messages_reach_an_observation_without_a_turn_in_order_with_its_assertions() -> None:
    """A session's observations take the messages that reach them at once, with no turn of the
    session's actor for them (its sink), and in the order the sender's events had with the
    assertions and retractions around them (which take turns); the sender's node passes the
    messages, records entering the overlay, on as their fields' bytes."""
    async with trio.open_nursery() as nursery:
        overlay = await start(nursery, "aggregate-subs")
        async with (
            client.connect(overlay.address("a1")) as watcher,
            client.connect(overlay.address("b1")) as sender,
        ):
            async with watcher.observe("<a $x>") as seen:
                await watcher.sync()
                await sender.sync()
                key = sender.assert_(record("a", 1))
                for action in (  # one turn each (a turn's retractions come last in it)
                    lambda: sender.send(record("a", 100)),
                    lambda: sender.retract(key),
                    lambda: sender.send(record("a", 101)),
                    lambda: sender.assert_(record("a", 2)),
                ):
                    await trio.sleep(0)
                    action()
                events = [await seen.next(10) for _ in range(5)]
                assert [(e.kind, e.captures) for e in events] == [
                    ("+", (1,)),
                    ("!", (100,)),
                    ("-", (1,)),
                    ("!", (101,)),
                    ("+", (2,)),
                ]
                scheduler = watcher._driver.scheduler
                turns = scheduler.turns_run
                for i in range(20):
                    sender.send(record("a", 200 + i))
                    assert (await seen.next(10)).captures == (200 + i,)
                assert scheduler.turns_run == turns
            status = figures(await client.status(overlay.address("b1")))
        # A record that reaches b1 while it has other work queued (a keep-alive's turn, the
        # assertions' turns when their packet and a message's share a read) takes the general
        # path, as it must (test_routes.py says which records pass on, exactly): not all 22.
        entry = [link for link in status["links"] if link["passed_on"]]
        assert entry and sum(link["passed_on"] for link in entry) >= 11
        nursery.cancel_scope.cancel()
