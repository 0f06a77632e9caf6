"""Test helpers for real-TCP node tests: a node serving on 127.0.0.1, and a raw client relay
that observes a pattern over a stream the test controls (to stop reading, or stall it)."""

from __future__ import annotations

from functools import partial

import trio

from feds.actor import Actor, Ref, Turn
from feds.codec import FrameDecoder
from feds.dataspace import observe
from feds.driver import Driver
from feds.limits import NetLimits
from feds.relay import CLIENT, Hello, Relay
from feds.runtime import NodeRuntime
from feds.syntax import parse_pattern
from feds.transport import pump
from feds.values import Value
from tests.recording import Recorder

ALIVE = NetLimits(keepalive_interval=0.1, keepalive_timeout=100)
"""A client side that sends keep-alives and never gives up on a silent node."""


async def start_node(
    nursery: trio.Nursery, limits: NetLimits, name: str = "n"
) -> tuple[NodeRuntime, int]:
    """An observer-flood node serving on 127.0.0.1, and its port."""
    driver = Driver()
    nursery.start_soon(driver.run)
    runtime = NodeRuntime(driver.scheduler, name, "observer-flood", limits=limits)
    return runtime, await nursery.start(runtime.serve, "127.0.0.1", 0)


async def watch_over(
    nursery: trio.Nursery, runtime: NodeRuntime, stream: trio.abc.Stream, pattern: str, name: str
) -> tuple[Relay, Relay]:
    """A client named ``name`` observes ``pattern`` at ``runtime``'s node over ``stream``;
    returns once the node has the subscription: (the client's relay, the node's for it)."""
    driver = Driver()
    nursery.start_soon(driver.run)
    subscribed = trio.Event()

    def ready(turn: Turn, hello: Hello, access: Ref) -> None:
        watcher = Ref(Actor(driver.scheduler, "watch").root, Recorder())
        turn.publish(access, observe(parse_pattern(pattern)[0], watcher))
        turn.sync(access, lambda t: subscribed.set())

    relay = Relay(driver.scheduler, name, CLIENT, on_ready=ready)
    nursery.start_soon(partial(pump, stream, relay, limits=ALIVE))
    with trio.fail_after(10):
        await subscribed.wait()
    (to_it,) = [r for r in runtime.relays if r.remote_hello and r.remote_hello.name == name]
    return relay, to_it


async def packets_to_the_end(stream: trio.abc.ReceiveStream, timeout: float = 5.0) -> list[Value]:
    """Every packet ``stream`` brings until its clean end; a reset raises (BrokenResourceError)."""
    received = bytearray()
    with trio.fail_after(timeout):
        while chunk := await stream.receive_some(65536):
            received += chunk
    frames = FrameDecoder()
    frames.feed(received)
    return list(frames)
