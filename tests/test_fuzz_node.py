"""A live node over TCP against random and mutated input (issue 11): every frame, handshake,
pattern and assertion is refused or served, the node keeps serving a legitimate client, and
nothing that client holds is lost."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feds.blocking import BlockingClient
from feds.dataspace import OBSERVE
from feds.driver import Driver
from feds.relay import (
    ASSERT,
    BARE_EVENTS_VERSION,
    CLIENT,
    MESSAGE,
    PEER,
    PROTOCOL_VERSION,
    RETRACT,
    TURN,
)
from feds.runtime import NodeRuntime
from feds.values import FrozenDict, Record, Symbol, record
from tests.raw_frames import WireRef, raw_frame
from tests.strategies import patterns, values
from tests.threaded import served_in_thread

FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def hello(role: str = CLIENT, version: int = PROTOCOL_VERSION) -> bytes:
    return raw_frame(Record(Symbol("hello"), (version, Symbol(role), "fuzz", FrozenDict())))


wire_refs = st.builds(WireRef, st.integers(0, 1), st.integers(0, 5))
observers = st.one_of(values(), wire_refs, st.tuples(st.integers(0, 1), st.integers(0, 9)))
events = st.one_of(  # (kind, fields), or (None, anything) for an event that is no event
    st.builds(lambda v, h: (ASSERT, (v, h)), values(), st.integers(0, 5)),
    st.builds(lambda h: (RETRACT, (h,)), st.integers(0, 5)),
    st.builds(lambda v: (MESSAGE, (v,)), values()),
    st.builds(
        lambda p, h: (ASSERT, (Record(OBSERVE, (p, WireRef(0, 1))), h)),
        patterns(),
        st.integers(0, 5),
    ),
    st.tuples(st.none(), values()),
)


def wire_event(version: int, oid: int, event: tuple) -> object:
    """``event`` addressed to ``oid`` as ``version`` writes it (a record, or a bare array)."""
    kind, fields = event
    if version < BARE_EVENTS_VERSION:
        return (oid, fields if kind is None else Record(kind, fields))
    if kind is None or kind is RETRACT:
        return fields
    return (oid, *fields)


def turn(items: list) -> bytes:
    return raw_frame(Record(TURN, (tuple(items),)))


@st.composite
def sessions(
    draw: st.DrawFn, events: st.SearchStrategy = events, clients_only: bool = False
) -> bytes:
    """A plausible session, then maybe mutated: hellos of any role and version, turns of
    events at oids near the real ones, garbage (``clients_only``: a client's hello, events at
    its node's local access, no garbage)."""
    version = draw(
        st.sampled_from([PROTOCOL_VERSION, 3] if clients_only else [PROTOCOL_VERSION, 3, 1])
    )
    roles = [CLIENT] if clients_only else [CLIENT, PEER, "admin"]
    parts = [hello(draw(st.sampled_from(roles)), version)]
    oids = st.just(0) if clients_only else st.integers(0, 3)
    for _ in range(draw(st.integers(1 if clients_only else 0, 3))):
        items = draw(st.lists(st.tuples(oids, events), max_size=4))
        parts.append(turn([wire_event(version, oid, event) for oid, event in items]))
    data = bytearray(b"".join(parts))
    for _ in range(0 if clients_only else draw(st.integers(0, 3))):
        action = draw(st.sampled_from(["flip", "cut", "garbage", "none"]))
        if action == "flip" and data:
            at = draw(st.integers(0, len(data) - 1))
            data[at] ^= draw(st.integers(1, 255))
        elif action == "cut" and data:
            del data[draw(st.integers(0, len(data) - 1)) :]
        elif action == "garbage":
            data += draw(st.binary(max_size=64))
    return bytes(data)


@pytest.fixture(scope="module")
def node() -> Iterator[tuple[NodeRuntime, int]]:
    async def start(nursery: trio.Nursery) -> tuple[NodeRuntime, int]:
        driver = Driver()
        nursery.start_soon(driver.run)
        runtime = NodeRuntime(driver.scheduler, "n", "observer-flood")
        return runtime, await nursery.start(runtime.serve, "127.0.0.1", 0)

    with served_in_thread(start) as served:
        yield served


@pytest.fixture(scope="module")
def legit(node: tuple[NodeRuntime, int]) -> Iterator[BlockingClient]:
    with BlockingClient(f"127.0.0.1:{node[1]}", name="legit") as ds:
        ds.assert_(record("held", "by legit"))
        yield ds


def attack(port: int, data: bytes) -> None:
    """Send ``data`` on a fresh connection, read what comes back for a moment, leave."""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        sock.sendall(data)
        sock.settimeout(0.05)
        try:
            while sock.recv(65536):
                pass
        except (TimeoutError, ConnectionError):
            pass


def still_serving(legit: BlockingClient) -> None:
    legit.sync(10)
    assert legit.query("<held $who>", 10) == [("by legit",)]


@FUZZ
@given(data=sessions())
def test_random_and_mutated_input_is_refused_or_served(
    node: tuple[NodeRuntime, int], legit: BlockingClient, data: bytes
) -> None:
    attack(node[1], data)
    still_serving(legit)
    assert node[0].node.actor.alive


@FUZZ
@given(data=st.binary(max_size=256))
def test_random_bytes_are_refused(
    node: tuple[NodeRuntime, int], legit: BlockingClient, data: bytes
) -> None:
    attack(node[1], data)
    still_serving(legit)


observe_events = st.builds(
    lambda p, o, h: (ASSERT, (Record(OBSERVE, (p, o)), h)),
    patterns(),
    observers,
    st.integers(0, 5),
)


@FUZZ
@given(data=sessions(observe_events, clients_only=True))
def test_observe_records_with_every_kind_of_observer_field(
    node: tuple[NodeRuntime, int], legit: BlockingClient, data: bytes
) -> None:
    attack(node[1], data)
    still_serving(legit)
    assert node[0].node.actor.alive
