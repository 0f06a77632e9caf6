"""Authentication (issue 11, security): per-role secrets, an HMAC challenge-response in the
handshake, and what each role may do. Real TCP on 127.0.0.1 where it is about the network."""

from __future__ import annotations

import logging

import pytest
import trio

from feds import client
from feds.actor import Scheduler
from feds.auth import Secrets
from feds.driver import Driver
from feds.relay import CLIENT, PEER, Relay, exchange
from feds.runtime import InsecureListen, NodeRuntime
from feds.values import record
from tests.raw_frames import raw_frame

DEPLOYMENT = Secrets.generate()
CLIENT_ONLY = Secrets({"client": DEPLOYMENT.keys["client"]})


async def secured_node(
    nursery: trio.Nursery, name: str = "root", known: tuple[str, ...] = ("root", "leaf")
) -> tuple[NodeRuntime, str]:
    driver = Driver()
    nursery.start_soon(driver.run)
    runtime = NodeRuntime(driver.scheduler, name, "copy-up", secrets=DEPLOYMENT, known_nodes=known)
    port = await nursery.start(runtime.serve, "127.0.0.1", 0)
    return runtime, f"127.0.0.1:{port}"


async def test_a_client_with_the_client_secret_is_served(nursery: trio.Nursery) -> None:
    _, address = await secured_node(nursery)
    async with client.connect(address, secrets=CLIENT_ONLY) as ds:
        ds.assert_(record("present", "me"))
        assert await ds.query("<present $who>") == [("me",)]


@pytest.mark.parametrize(
    ("secrets", "role", "reason"),
    [
        (None, CLIENT, "no nonce in the hello"),  # no secret at all
        (Secrets({"client": b"a wrong secret of enough length"}), CLIENT, "wrong secret"),
        # a client that knows only the client secret, claiming the node or the admin role:
        (Secrets({"peer": DEPLOYMENT.keys["client"]}), PEER, "wrong secret for the role 'peer'"),
        (Secrets({"admin": DEPLOYMENT.keys["client"]}), "admin", "for the role 'admin'"),
    ],
)
async def test_a_far_side_without_the_right_secret_is_refused_with_the_reason(
    nursery: trio.Nursery,
    caplog: pytest.LogCaptureFixture,
    secrets: Secrets | None,
    role: str,
    reason: str,
) -> None:
    _, address = await secured_node(nursery)
    with caplog.at_level(logging.WARNING), pytest.raises(client.FedsError, match=reason):
        async with client.connect(address, role=role, secrets=secrets) as ds:
            await ds.sync()
    assert "protocol error, closing: authentication failed" in caplog.text  # the node's log


async def test_status_needs_the_admin_secret(nursery: trio.Nursery) -> None:
    _, address = await secured_node(nursery)
    with pytest.raises(client.FedsError, match="role 'admin'"):
        await client.status(address, secrets=CLIENT_ONLY)
    figures = await client.status(address, secrets=Secrets({"admin": DEPLOYMENT.keys["admin"]}))
    assert figures.fields[0]["name"] == "root"


def test_a_recorded_handshake_replayed_is_refused() -> None:
    sched = Scheduler()
    runtime = NodeRuntime(sched, "root", "copy-up", secrets=DEPLOYMENT)
    dialer = Relay(sched, "app", CLIENT, secrets=CLIENT_ONLY)
    first = runtime.accept_relay()
    recorded = bytearray()
    for _ in range(5):
        data = dialer.data_to_send()
        recorded += data
        first.receive(data)
        dialer.receive(first.data_to_send())
        sched.run_until_idle()
    assert dialer.ready and first.ready  # the original handshake succeeded
    second = runtime.accept_relay()  # a new connection, a new nonce
    second.receive(bytes(recorded))
    assert second.closed
    assert second.close_reason == "authentication failed: wrong secret for the role 'client'"


def test_a_turn_before_the_proof_is_refused_and_applies_nothing() -> None:
    """A far side that sends its hello and then a turn, without proving it knows the secret,
    is refused, whatever the turn holds: nothing of it reaches the node."""
    sched = Scheduler()
    runtime = NodeRuntime(sched, "root", "copy-up", secrets=DEPLOYMENT)
    dialer = Relay(sched, "app", CLIENT, secrets=CLIENT_ONLY)
    server = runtime.accept_relay()
    server.receive(dialer.data_to_send())  # the dialer's hello
    sched.run_until_idle()
    assert not server.closed
    server.receive(raw_frame(record("turn", ((0, record("message", 1)),))))
    sched.run_until_idle()
    assert server.closed
    assert server.close_reason == "packet before authentication: turn"
    assert server.stats.events_in == 0


def test_a_node_of_another_name_is_refused_although_it_knows_the_secret() -> None:
    sched = Scheduler()
    root = NodeRuntime(sched, "root", "copy-up", secrets=DEPLOYMENT, known_nodes=["root", "a"])
    intruder = NodeRuntime(sched, "intruder", "copy-up", secrets=DEPLOYMENT)
    up, down = intruder.uplink_relay(), root.accept_relay()
    for _ in range(5):
        exchange(up, down)
        sched.run_until_idle()
    assert (
        down.closed and down.close_reason == "authentication failed: unknown node name 'intruder'"
    )
    assert not root.node.neighbours


async def test_nodes_of_a_deployment_link_over_tcp_and_a_stranger_cannot(
    nursery: trio.Nursery,
) -> None:
    root, address = await secured_node(nursery)
    host, port = address.rsplit(":", 1)
    driver = Driver()
    nursery.start_soon(driver.run)
    leaf = NodeRuntime(driver.scheduler, "leaf", "copy-up", secrets=DEPLOYMENT)
    nursery.start_soon(leaf.uplink_tcp, host, int(port))
    stranger = NodeRuntime(driver.scheduler, "leaf", "copy-up")  # right name, no secret
    nursery.start_soon(stranger.uplink_tcp, host, int(port))
    with trio.fail_after(10):
        while leaf.node.parent_service is None:
            await trio.sleep(0.01)
    await trio.sleep(0.3)
    assert len(root.node.neighbours) == 1 and stranger.node.parent_service is None


async def test_a_node_without_secrets_refuses_to_listen_beyond_loopback() -> None:
    runtime = NodeRuntime(Scheduler(), "n", "copy-up")
    with pytest.raises(InsecureListen, match="without authentication"):
        await runtime.serve("0.0.0.0", 0)
