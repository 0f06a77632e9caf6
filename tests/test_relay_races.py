"""Issue 9 item 8: relay rules under races. A message in flight towards an oid its receiver has
just released is dropped (the link does not flap); a reference the receiver never gave is a
protocol error with a specific reason."""

from __future__ import annotations

import trio

from feds import client
from feds.codec import encode_frame
from feds.driver import Driver
from feds.relay import CLIENT, PROTOCOL_VERSION, TURN, YOURS, Hello, Relay
from feds.runtime import NodeRuntime
from feds.values import FrozenDict, Record, record
from tests.raw_frames import WireRef, raw_frame


async def test_observer_churn_under_a_message_flood_never_closes_the_link(
    nursery: trio.Nursery,
) -> None:
    driver = Driver()
    nursery.start_soon(driver.run)
    runtime = NodeRuntime(driver.scheduler, "n", "observer-flood")
    port = await nursery.start(runtime.serve, "127.0.0.1", 0)
    address = f"127.0.0.1:{port}"
    async with client.connect(address, name="churner") as churner:
        stop = trio.Event()

        async def flood() -> None:
            async with client.connect(address, name="flooder") as flooder:
                i = 0
                while not stop.is_set():
                    flooder.send(record("tick", i))
                    i += 1
                    if i % 20 == 0:
                        await flooder.drain()
                        await trio.sleep(0)

        nursery.start_soon(flood)
        with trio.fail_after(60):
            # Observe, see a tick, leave at once: ticks already on their way to the observer's
            # oid arrive after the churner released it. Repeat until that race has happened.
            while churner.relay.stats.late_events_in < 20:
                async with churner.observe("<tick $i>") as events:
                    await events.next(10)
        stop.set()
        await churner.sync()
        assert not churner.relay.closed
    assert all(not r.closed for r in runtime.relays)


def test_a_reference_the_receiver_never_gave_is_refused_with_a_specific_reason() -> None:
    from feds.actor import Scheduler

    relay = Relay(Scheduler(), "n", CLIENT)
    forged = Record(TURN, (((0, WireRef(YOURS, 99)),),))
    hello = Hello(PROTOCOL_VERSION, CLIENT, "c", FrozenDict())
    relay.receive(encode_frame(hello.to_value()))
    relay.receive(raw_frame(forged))
    assert relay.closed
    assert relay.close_reason.startswith("unknown oid 99 in an embedded reference")
    assert "never gave" in relay.close_reason
