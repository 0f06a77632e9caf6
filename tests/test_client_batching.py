"""The client's bulk paths: ``send_many`` / ``publish_many`` / ``retract_many`` (one queued
action for many values, same order and checks as one call per value), and observations that
hand out a packet's events without a task switch per event, yet let other tasks run."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio

from feds import client
from feds.blocking import BlockingClient
from feds.driver import Driver
from feds.runtime import NodeRuntime
from feds.values import record
from tests.threaded import served_in_thread


async def start_node(nursery: trio.Nursery) -> int:
    """One aggregate-subs node on 127.0.0.1, run in ``nursery``; returns its port."""
    driver = Driver()
    runtime = NodeRuntime(driver.scheduler, "n", "aggregate-subs")
    nursery.start_soon(driver.run)
    return await nursery.start(runtime.serve, "127.0.0.1", 0)


@pytest.fixture
async def address(nursery: trio.Nursery) -> AsyncIterator[str]:
    yield f"127.0.0.1:{await start_node(nursery)}"


def seen(events: list[client.Event]) -> list[tuple[str, tuple]]:
    return [(e.kind, e.captures) for e in events]


async def test_bulk_calls_keep_the_order_of_single_calls(address: str) -> None:
    with trio.fail_after(20):
        async with client.connect(address) as ds, ds.observe("<n $i>") as events:
            await ds.sync()
            ds.send(record("n", 0))
            ds.send_many(record("n", i) for i in (1, 2, 3))
            ds.send(record("n", 4))
            ds.send_many([])
            await ds.sync()
            assert seen(events.take()) == [("!", (i,)) for i in range(5)]

            first = ds.assert_(record("n", 10))
            keys = ds.publish_many([record("n", 11), record("n", 12)])
            assert len({first, *keys}) == 3  # distinct keys, as assert_ gives
            await ds.sync()
            assert seen(events.take()) == [("+", (10,)), ("+", (11,)), ("+", (12,))]
            ds.retract_many(reversed(keys))
            ds.retract_many([])
            ds.retract(first)
            await ds.sync()
            assert seen(events.take()) == [("-", (12,)), ("-", (11,)), ("-", (10,))]
            assert ds.publish_many([]) == []


async def test_a_bulk_call_with_a_non_value_raises_and_sends_none_of_it(address: str) -> None:
    with trio.fail_after(20):
        async with client.connect(address) as ds, ds.observe("<n $i>") as events:
            await ds.sync()
            with pytest.raises(TypeError, match="not a feds value"):
                ds.send_many([record("n", 1), record("n", [2])])
            with pytest.raises(TypeError, match="not a feds value"):
                ds.publish_many([record("n", 3), object()])  # type: ignore[list-item]
            ds.send(record("n", 4))
            await ds.sync()
            assert seen(events.take()) == [("!", (4,))]
            assert ds.assert_(record("n", 5)) == ds.publish_many([record("n", 6)])[0] - 1


async def test_bulk_calls_on_a_closed_connection_raise(address: str) -> None:
    async with client.connect(address) as ds:
        ds.relay.close("test: closed")
        for call in (ds.send_many, ds.publish_many, ds.retract_many):
            with pytest.raises(client.FedsError, match="closed"):
                call([])


async def test_an_observation_takes_a_batch_without_a_task_switch_per_event(address: str) -> None:
    """A packet's events are handed out without yielding for each (one checkpoint every
    CHECKPOINT_EVERY events), so other tasks still run while a consumer works through them."""
    count = 5 * client.CHECKPOINT_EVERY
    steps = 0

    async def other_task() -> None:
        nonlocal steps
        while True:
            steps += 1
            await trio.sleep(0)

    with trio.fail_after(20):
        async with (
            client.connect(address) as ds,
            ds.observe("<n $i>") as events,
            trio.open_nursery() as nursery,
        ):
            await ds.sync()
            for i in range(count):
                ds.send(record("n", i))
            await ds.sync()  # every event is here now
            nursery.start_soon(other_task)
            await trio.sleep(0)
            steps = 0
            got = [(await events.__anext__()).captures[0] for _ in range(count // 2)]
            got += [(await events.next()).captures[0] for _ in range(count - count // 2)]
            assert got == list(range(count))
            # The other task ran about count / CHECKPOINT_EVERY (5) times, not count times
            # (one step per round of trio's scheduler, whose order within a round is random).
            assert 2 <= steps <= 2 * count // client.CHECKPOINT_EVERY
            nursery.cancel_scope.cancel()


async def test_leaving_an_observation_ends_a_task_waiting_on_it(address: str) -> None:
    """Two tasks wait on one observation; when the ``async with`` ends, both stop iterating
    (nobody hangs), after the events that had arrived."""
    ended: list[list[int]] = []

    async def consume(events: client.Observation) -> None:
        ended.append([event.captures[0] async for event in events])

    with trio.fail_after(20):
        async with client.connect(address) as ds, trio.open_nursery() as nursery:  # noqa: SIM117
            async with ds.observe("<n $i>") as events:  # (ends before the nursery does)
                await ds.sync()
                nursery.start_soon(consume, events)
                nursery.start_soon(consume, events)
                await trio.sleep(0.05)  # both wait now
                ds.send(record("n", 1))
                await ds.sync()
                await trio.sleep(0.05)
            # (the nursery waits for both consumers here)
    assert sorted(ended) == [[], [1]]


def test_the_blocking_clients_retract_many_withdraws_in_batches() -> None:
    with (
        served_in_thread(start_node) as port,
        BlockingClient(f"127.0.0.1:{port}") as ds,
        ds.observe("<n $i>") as events,
    ):
        keys = ds.publish_many(record("n", i) for i in range(600))  # three batches
        ds.sync()
        assert len(events.take()) == 600
        ds.retract_many(keys)
        ds.sync()
        assert seen(events.take()) == [("-", (i,)) for i in range(600)]
        with pytest.raises(TypeError, match="not a feds value"):
            ds.send_many([record("n", 1), {1, 2}])  # type: ignore[list-item]
        ds.sync()
        assert events.take() == []


def test_a_blocking_observer_reads_a_batch_in_one_hop_to_the_background_thread() -> None:
    with (
        served_in_thread(start_node) as port,
        BlockingClient(f"127.0.0.1:{port}") as ds,
        ds.observe("<n $i>") as events,
    ):
        ds.send_many(record("n", i) for i in range(100))
        ds.sync()
        hops = 0
        run = ds._run

        def counted(*args: object) -> object:
            nonlocal hops
            hops += 1
            return run(*args)

        ds._run = counted  # type: ignore[method-assign]
        assert [events.next(5).captures for _ in range(60)] == [(i,) for i in range(60)]
        assert hops == 1
        ds.send(record("n", 100))
        ds.sync()
        assert seen(events.take()) == [("!", (i,)) for i in range(60, 101)]  # in order
        assert events.next(0.05) is None  # nothing more: a timeout
        events.close()
        assert events.next(1) is None and events.take() == []
