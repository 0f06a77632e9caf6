"""Frames that would cost a node seconds of decoding are refused before (or while) they are
decoded, closing only the connection that sent them: a turn packet of more events than a
sender may put in one, and a value of too many arrays and maps (issue 11: no input breaks a
node)."""

from __future__ import annotations

import pytest

from feds.actor import Ref, Scheduler
from feds.codec import CodecError, Decoder, Encoder, Limits, decode, encode_frame
from feds.relay import (
    _TURN_PREFIX,
    CLIENT,
    PEER,
    TURN,
    TURN_PACKET_EVENTS,
    Relay,
    exchange,
)
from feds.values import FrozenDict, Record, Symbol
from tests.recording import Recorder


def connected() -> tuple[Scheduler, Relay, Recorder]:
    """A node-side relay (exposing a recorder) with a client that completed its handshake."""
    sched = Scheduler()
    rec = Recorder()
    refs: list[Ref] = []
    sched.spawn(lambda t: refs.append(t.ref(rec)))
    sched.run_until_idle()
    server = Relay(sched, "server", PEER, refs[0])
    client = Relay(sched, "client", CLIENT)
    for _ in range(20):
        sched.run_until_idle()
        exchange(client, server)
    assert server.ready and client.ready
    return sched, server, rec


def turn_frame(events: tuple) -> bytes:
    return encode_frame(Record(TURN, (events,)))


def test_a_turn_of_too_many_events_is_refused_before_it_is_decoded() -> None:
    _, server, _ = connected()
    count = 5_000_000  # announced; what follows is not even valid
    body = _TURN_PREFIX + b"\xdd" + count.to_bytes(4, "big") + b"\xc1" * 64
    server.receive(len(body).to_bytes(4, "big") + body)
    assert server.closed
    assert server.close_reason == (
        f"turn of {count} events: at most {TURN_PACKET_EVENTS} per packet "
        "(split a bigger turn over several packets)"
    )


def test_a_turn_of_as_many_events_as_allowed_is_applied() -> None:
    sched, server, rec = connected()
    server.receive(turn_frame(tuple((0, i) for i in range(TURN_PACKET_EVENTS))))
    sched.run_until_idle()
    assert not server.closed and [v for _, v in rec.events] == list(range(TURN_PACKET_EVENTS))
    one_more = tuple((0, i) for i in range(TURN_PACKET_EVENTS + 1))
    server.receive(turn_frame(one_more))
    assert server.closed and server.close_reason.startswith(f"turn of {TURN_PACKET_EVENTS + 1} ")


def test_a_turn_of_too_many_events_encoded_otherwise_is_refused_once_decoded() -> None:
    _, server, _ = connected()
    events = tuple((0, i) for i in range(TURN_PACKET_EVENTS + 1))
    # the same packet with its outer array as an array16: valid, but not how feds encodes it
    body = b"\xdc\x00\x02" + _TURN_PREFIX[1:] + Encoder().encode(events)
    assert decode(body) == Record(TURN, (events,))
    server.receive(len(body).to_bytes(4, "big") + body)
    assert server.closed and server.close_reason.startswith(f"turn of {TURN_PACKET_EVENTS + 1} ")


def test_a_value_of_too_many_records_is_refused() -> None:
    _, server, _ = connected()
    limit = Limits().max_containers
    value = tuple(Record(Symbol("a"), (i,)) for i in range(limit))  # plus the tuple: one too many
    big = Encoder(None, Limits(max_frame_size=2**31 - 1))
    server.receive(big.encode_frame(Record(TURN, (((0, value, 1),),))))
    assert server.closed
    assert server.close_reason == (
        f"bad frame: more than max_containers ({limit}) arrays and maps in one value"
    )


def nested(depth: int) -> tuple:
    value: tuple = ()
    for _ in range(depth - 1):
        value = (value,)
    return value


@pytest.mark.parametrize(
    "too_many, fits",
    [
        (tuple(Record(Symbol("a"), ()) for _ in range(10)), (Record(Symbol("a"), ()),) * 9),
        (tuple(FrozenDict({i: i}) for i in range(10)), tuple(FrozenDict({i: i}) for i in range(9))),
        (nested(11), nested(10)),
    ],
    ids=["records", "maps", "nested"],
)
def test_the_container_bound_counts_every_array_and_map(too_many: tuple, fits: tuple) -> None:
    decoder = Decoder(limits=Limits(max_containers=10))
    with pytest.raises(CodecError, match=r"more than max_containers \(10\)"):
        decoder.decode(Encoder().encode(too_many))
    assert decoder.decode(Encoder().encode(fits)) == fits


def test_the_container_bound_holds_at_the_frame_size_where_counting_starts() -> None:
    """Up to ``max_containers`` bytes a frame is decoded without counting its containers (each
    takes a byte, so there cannot be too many); one byte more and they are counted."""
    decoder = Decoder(limits=Limits(max_containers=10))
    fits = ((),) * 9  # ten containers in ten bytes: the bound, not over it
    assert len(Encoder().encode(fits)) == 10
    assert decoder.decode(Encoder().encode(fits)) == fits
    too_many = ((),) * 10  # eleven in eleven bytes
    with pytest.raises(CodecError, match=r"more than max_containers \(10\)"):
        decoder.decode(Encoder().encode(too_many))
