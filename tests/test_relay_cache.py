"""The relay's value cache (wire protocol version 2): patterns cross once, then as a slot."""

from __future__ import annotations

import pytest

from feds.actor import Handle, Ref, Scheduler, Turn
from feds.codec import CACHED, DEFINE, EMBEDDED, CodecError, FrameDecoder, Limits, encode
from feds.relay import VALUE_CACHE_SLOTS
from feds.syntax import parse
from feds.values import Record, Symbol, Value, record
from tests.recording import Recorder
from tests.test_codec import array, ext
from tests.test_codec_cache import interned
from tests.test_relay import (
    HELLO,
    Link,
    RawHooks,
    act,
    entity_ref,
    error_packet,
    frames,
    turn,
    victim,
)


def fresh_pattern() -> Value:
    """A subscription pattern, freshly interned (other tests may have churned the table)."""
    return interned("<group <rec bench> {0: <bind <_>> 1: <bind <_>>}>")


HELLO_2 = record("hello", 2, Symbol("peer"), "raw", HELLO.fields[3])


def sent_bytes(link: Link, action: object) -> int:
    """Bytes the client sends for one turn doing ``action``."""
    before = link.client.stats.bytes_out
    link.client_act(action)  # type: ignore[arg-type]
    return link.client.stats.bytes_out - before


def test_a_repeated_pattern_crosses_once_then_as_a_slot() -> None:
    pat = fresh_pattern()
    link = Link()
    assert link.client.version == link.server.version >= 2
    sizes = [
        sent_bytes(link, lambda t, i=i: t.message(link.proxy, record("pub", i, pat)))
        for i in range(5)
    ]
    assert sizes[0] > sizes[1] + 30 and len(set(sizes[1:])) == 1
    got = [v for _, v in link.recorder.events]
    assert got == [record("pub", i, pat) for i in range(5)]
    assert all(v.fields[1] is pat for v in got)  # the one interned object, every time


def test_one_turn_defines_and_then_refers_to_a_pattern() -> None:
    link = Link()
    text = "<group <rec fresh> {0: <bind <_>>}>"
    local = parse(text)  # not interned: sent in full each time
    plain = sent_bytes(
        link, lambda t: [t.message(link.proxy, record("pub", i, local)) for i in range(200)]
    )
    fresh = interned(text)
    size = sent_bytes(
        link, lambda t: [t.message(link.proxy, record("pub", i, fresh)) for i in range(200)]
    )
    assert size * 2 < plain
    del link.recorder.events[:200]
    assert [v for _, v in link.recorder.events] == [record("pub", i, fresh) for i in range(200)]
    assert all(v.fields[1] is fresh for _, v in link.recorder.events)


def test_assertions_with_patterns_are_cached_too_and_retract_cleanly() -> None:
    pat = fresh_pattern()
    link = Link()
    held: list[Handle] = []
    actor = link.client_act(
        lambda t: held.extend(t.publish(link.proxy, record("sub", i, pat)) for i in range(3))
    )
    assert [v.fields[1] for v in link.recorder.live.values()] == [pat] * 3
    link.client_act(lambda t: [t.retract(h) for h in held], actor)
    assert link.recorder.live == {} and link.clean()


def test_slots_are_reused_when_more_values_than_slots_cross() -> None:
    link = Link()
    values = [interned(f'<item "{i}">') for i in range(VALUE_CACHE_SLOTS + 100)]
    for _ in range(2):
        link.client_act(lambda t: [t.message(link.proxy, v) for v in values])
    assert [v for _, v in link.recorder.events] == values * 2
    assert not link.server.closed and not link.client.closed


def test_a_dropped_event_leaves_no_definition_behind(caplog: pytest.LogCaptureFixture) -> None:
    link = Link(limits=Limits(max_frame_size=300))
    fresh = interned('<group <rec dropped> {0: <lit "x">}>')

    def boot(t: Turn) -> None:
        t.message(link.proxy, (fresh, "y" * 1000))  # encoded (defining fresh), then dropped
        t.message(link.proxy, (fresh, object()))  # type: ignore[arg-type]  # fails half-way
        t.message(link.proxy, record("pub", fresh))  # must define it again

    link.client_act(boot)
    link.client_act(lambda t: t.message(link.proxy, record("pub", 2, fresh)))
    assert not link.server.closed, link.server.close_reason
    assert [v for _, v in link.recorder.events] == [record("pub", fresh), record("pub", 2, fresh)]
    assert link.recorder.events[1][1].fields[1] is fresh
    assert caplog.text.count("dropped an outgoing message event") == 2


def test_a_run_encoded_again_for_its_reference_leaves_no_definition_behind() -> None:
    """A run of assertions that lifts a reference is encoded again one by one (each keeps its
    own references): the definitions its first encoding made are forgotten, not kept twice."""
    link = Link()
    fresh = interned('<group <rec rerun> {0: <lit "x">}>')
    a = entity_ref(link.client_sched, Recorder(), "client-app")[1]
    held: list[Handle] = []
    actor = link.client_act(
        lambda t: held.extend([t.publish(link.proxy, (1, fresh)), t.publish(link.proxy, (2, a))])
    )
    link.client_act(lambda t: t.message(link.proxy, record("pub", fresh)))
    assert not link.server.closed, link.server.close_reason
    assert [v[0] for v in link.recorder.live.values()] == [1, 2]
    assert link.recorder.events[-1][1] == record("pub", fresh)
    assert link.recorder.events[-1][1].fields[0] is fresh
    link.client_act(lambda t: [t.retract(h) for h in held], actor)
    assert link.recorder.live == {} and link.clean()


def test_a_version_1_peer_gets_no_cache() -> None:
    pattern = interned("<group <rec v1> {0: <bind <_>>}>")
    outputs = {}
    for hello in (HELLO, HELLO_2):
        sched, relay, _, _ = victim()
        relay.receive(frames(hello))
        sched.run_until_idle()
        assert relay.version == hello.fields[0] and relay.remote_initial is not None
        for _ in range(2):
            act(sched, lambda t, r=relay: t.message(r.remote_initial, record("pub", pattern)))
            sched.run_until_idle()
        outputs[relay.version] = data = relay.data_to_send()
        decoder = FrameDecoder(embedded=RawHooks(), cache_slots=VALUE_CACHE_SLOTS)
        decoder.feed(data)
        events = [event for p in decoder for _, event in p.fields[0]]
        assert events == [record("message", record("pub", pattern))] * 2
    plain = FrameDecoder(embedded=RawHooks())  # no cache
    plain.feed(outputs[1])
    assert sum(len(p.fields[0]) for p in plain) == 2
    plain.feed(outputs[2])
    with pytest.raises(CodecError, match="out of range"):
        list(plain)
    assert len(outputs[2]) < len(outputs[1])


def cached_ref(slot: int) -> bytes:
    return ext(CACHED, slot.to_bytes(2, "big"))


def defining(slot: int, label: bytes, *fields: bytes) -> bytes:
    return array(ext(DEFINE, slot.to_bytes(2, "big") + label), *fields)


def turn_frame(item: bytes) -> bytes:
    """A frame of ``<turn [[0 <message X>]]>`` where ``item`` is the bytes of X."""
    body = frames(turn((0, record("message", "@"))))[4:].replace(b"\xa1@", item)
    return len(body).to_bytes(4, "big") + body


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        (cached_ref(5), "bad frame: cache slot 5 is not defined"),
        (cached_ref(VALUE_CACHE_SLOTS), f"cache slot {VALUE_CACHE_SLOTS} is not defined"),
        (
            defining(VALUE_CACHE_SLOTS, b"x", b"\x01"),
            f"bad frame: cache slot {VALUE_CACHE_SLOTS} out of range",
        ),
        (
            defining(0, b"x", encode(0.5)),
            "bad frame: cache slot 0 defined as a value that may not be cached",
        ),
        (
            defining(0, b"x", array(ext(EMBEDDED), b"\x92\x00\x01")),  # a reference: [0 1]
            "bad frame: cache slot 0 defined as a value that may not be cached",
        ),
    ],
)
def test_bad_cache_input_closes_only_that_connection(item: bytes, reason: str) -> None:
    sched, relay, _, healthy = victim()
    relay.receive(frames(HELLO_2) + turn_frame(item))
    sched.run_until_idle()
    assert relay.closed and reason in (relay.close_reason or ""), relay.close_reason
    assert error_packet(relay).fields[0] == relay.close_reason
    healthy.client_act(lambda t: t.publish(healthy.proxy, "still fine"))
    assert list(healthy.recorder.live.values()) == ["still fine"]


def test_a_slot_defined_by_the_far_side_is_used_in_later_packets() -> None:
    sched, relay, rec, _ = victim()
    relay.receive(frames(HELLO_2) + turn_frame(defining(7, b"pub", b"\xa1x")))
    relay.receive(turn_frame(cached_ref(7)))
    sched.run_until_idle()
    assert not relay.closed, relay.close_reason
    first, second = (v for _, v in rec.events)
    assert first == record("pub", "x") and second is first


def test_references_are_counted_without_walking_the_cached_pattern() -> None:
    """A message is not walked at all (its references were mapped as it was decoded); an
    assertion is walked to count what it holds, but not into a pattern the decoder knows holds
    no reference."""
    pat = fresh_pattern()
    link = Link()
    back = Recorder()
    _, back_ref = entity_ref(link.client_sched, back, "client-app")
    membrane = link.server._membrane
    walked: list[Value] = []
    hold = membrane.hold

    def spy(v: Value) -> list:
        walked.append(v)
        return hold(v)

    checked: list[Value] = []
    known_ref_free = membrane.known_ref_free

    def known_spy(v: Value) -> bool:
        checked.append(v)
        return known_ref_free(v)

    membrane.hold = spy  # type: ignore[method-assign]
    membrane.known_ref_free = known_spy
    link.client_act(
        lambda t: [t.message(link.proxy, record("pub", back_ref, pat, i)) for i in range(2)]
    )
    got = [v for _, v in link.recorder.events]
    assert [v.fields[1:] for v in got] == [(pat, 0), (pat, 1)]
    assert all(isinstance(v.fields[0], Ref) for v in got)
    assert walked == [] and checked == []
    link.client_act(
        lambda t: [t.publish(link.proxy, record("pub", back_ref, pat, i)) for i in range(2)]
    )
    assert len(walked) == 2 and all(isinstance(v.fields[0], Ref) for v in walked)
    assert pat in checked  # known to hold no reference: not walked into
    assert pat.fields[0] not in checked and pat.fields[1] not in checked


def test_a_link_between_two_schedulers_keeps_both_caches_in_step() -> None:
    pat = fresh_pattern()
    link = Link(Scheduler(), Scheduler())
    for i in range(50):
        link.client_act(lambda t, i=i: t.message(link.proxy, record("pub", i % 7, pat)))
    assert [v for _, v in link.recorder.events] == [record("pub", i % 7, pat) for i in range(50)]


def test_records_that_are_not_interned_still_cross() -> None:
    link = Link()
    local = Record(Symbol("local"), ("not", "interned", 1.5))
    link.client_act(lambda t: [t.message(link.proxy, local) for _ in range(3)])
    assert [v for _, v in link.recorder.events] == [local] * 3
