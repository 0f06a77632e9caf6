"""Issue 11 defects 7 and 10: a client notices that its node went, and an event it could not
send fails the caller instead of vanishing."""

from __future__ import annotations

import pytest
import trio

from feds import client
from feds.blocking import BlockingClient
from feds.driver import Driver
from feds.runtime import NodeRuntime
from feds.values import record
from tests.threaded import served_in_thread

WHO = ("who",)


class Served:
    """A node on 127.0.0.1 that a test can take away (its sockets close, as on kill -9)."""

    def __init__(self) -> None:
        self.scope = trio.CancelScope()
        self.port = 0
        self.token: trio.lowlevel.TrioToken | None = None

    async def start(self, nursery: trio.Nursery) -> Served:
        return await self.start_on(nursery, 0)

    async def start_on(self, nursery: trio.Nursery, port: int) -> Served:
        driver = Driver()
        runtime = NodeRuntime(driver.scheduler, "n", "copy-up")

        async def run(task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
            with self.scope:
                async with trio.open_nursery() as inner:
                    inner.start_soon(driver.run)
                    task_status.started(await inner.start(runtime.serve, "127.0.0.1", port))

        self.port = await nursery.start(run)
        self.token = trio.lowlevel.current_trio_token()
        return self

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


async def test_observing_and_syncing_raise_when_the_node_goes(nursery: trio.Nursery) -> None:
    node = await Served().start(nursery)
    async with client.connect(node.address) as ds:
        ds.assert_(record("present", "me"))
        async with ds.observe("<present $who>") as events:
            assert (await events.next(5)).kind == "+"
            node.scope.cancel()
            with trio.fail_after(10), pytest.raises(client.FedsError, match="node lost"):
                async for _ in events:
                    pass
        with pytest.raises(client.FedsError, match="closed"):
            await ds.sync(5)


async def test_a_sync_waiting_when_the_node_goes_fails_at_once(nursery: trio.Nursery) -> None:
    node = await Served().start(nursery)
    async with client.connect(node.address) as ds:
        done = trio.Event()
        outcome: list[BaseException] = []

        async def syncing() -> None:
            try:
                await ds.request(lambda reply: record("never-answered", reply), timeout=60)
            except client.FedsError as exc:
                outcome.append(exc)
            done.set()

        nursery.start_soon(syncing)
        await trio.sleep(0.1)
        node.scope.cancel()
        with trio.fail_after(10):
            await done.wait()
        assert "lost" in str(outcome[0])


async def test_an_assertion_too_big_to_send_fails_the_next_sync(nursery: trio.Nursery) -> None:
    node = await Served().start(nursery)
    async with client.connect(node.address) as ds:
        ds.assert_(record("big", b"x" * (17 * 2**20)))
        with pytest.raises(client.FedsError, match=r"1 event\(s\) were not sent: assert"):
            await ds.sync()
        await ds.sync()  # reported once; the connection goes on
        assert await ds.query("<big _>") == []


def test_the_blocking_client_raises_when_the_node_goes() -> None:
    with served_in_thread(Served().start) as node:
        ds = BlockingClient(node.address)
        ds.assert_(record("present", "me"))
        events = ds.watch("<present $who>", timeout=10)
        assert next(events).kind == "+"
        trio.from_thread.run_sync(node.scope.cancel, trio_token=node.token)
        with pytest.raises(client.FedsError, match="lost"):
            next(events)
        ds.close()


async def test_a_reconnecting_client_reasserts_and_reobserves_after_a_restart(
    nursery: trio.Nursery,
) -> None:
    node = await Served().start(nursery)
    address = node.address
    async with client.connect(address, reconnect=True) as ds:
        ds.assert_(record("present", "me"))
        async with ds.observe("<present $who>") as events:
            assert await events.next(5) == client.Event("+", ("me",), WHO)
            node.scope.cancel()
            assert await events.next(10) == client.Event("-", ("me",), WHO)  # the gap begins
            with pytest.raises(client.FedsError, match="lost"):
                await ds.sync()
            ds.assert_(record("present", "later"))  # made during the gap: held for later
            await Served().start_on(nursery, node.port)
            seen = {await events.next(20), await events.next(20)}
            assert seen == {client.Event("+", ("me",), WHO), client.Event("+", ("later",), WHO)}
        await ds.sync()
    async with client.connect(address) as other:
        assert await other.query("<present $who>") == []  # all retracted when it left


async def test_a_reconnecting_client_reasserts_what_replace_put_in_place(
    nursery: trio.Nursery,
) -> None:
    """After a reconnection, a key that ``replace`` moved to a new value asserts the new value,
    not the one it was first asserted with (it did: ``replace`` left the held value behind)."""
    node = await Served().start(nursery)
    async with client.connect(node.address, reconnect=True) as ds:
        key = ds.assert_(record("present", "Alice"))
        assert ds.replace(key, record("present", "Bob")) == key
        async with ds.observe("<present $who>") as events:
            assert await events.next(5) == client.Event("+", ("Bob",), WHO)
            node.scope.cancel()
            assert await events.next(10) == client.Event("-", ("Bob",), WHO)  # the gap begins
            await Served().start_on(nursery, node.port)
            assert await events.next(20) == client.Event("+", ("Bob",), WHO)
            ds.retract(key)
            assert await events.next(10) == client.Event("-", ("Bob",), WHO)
