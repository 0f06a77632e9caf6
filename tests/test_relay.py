"""The sans-IO relay: two connection ends wired back to back by copying bytes by hand."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from feds import codec
from feds.actor import SCAN_IN_C, Actor, Entity, Handle, Ref, Scheduler, Turn
from feds.codec import DEFAULT_LIMITS, CodecError, Encoder, FrameDecoder, Limits, decode
from feds.limits import HandleBudget
from feds.relay import (
    _DROPPED,
    BARE_EVENTS_VERSION,
    CLIENT,
    PEER,
    PROTOCOL_VERSION,
    TURN_PACKET_EVENTS,
    VALUE_CACHE_SLOTS,
    Hello,
    Relay,
    exchange,
    negotiate_version,
)
from feds.values import Embedded, FrozenDict, Record, Symbol, Value, record
from tests.raw_frames import WireRef
from tests.recording import Recorder


def settle(schedulers: list[Scheduler], *pairs: tuple[Relay, Relay]) -> None:
    """Run turns and copy bytes until nothing moves any more."""
    for _ in range(1000):
        ran = sum(s.run_until_idle() for s in schedulers)
        moved = sum(exchange(a, b) for a, b in pairs)
        if not ran and not moved:
            return
    raise AssertionError("relays never went quiet")


def entity_ref(sched: Scheduler, entity: Entity, name: str = "owner") -> tuple[Actor, Ref]:
    actor = Actor(sched, name)
    return actor, Ref(actor.root, entity)


def act(sched: Scheduler, action: Callable[[Turn], None], actor: Actor | None = None) -> Actor:
    """Run ``action`` as a turn of ``actor`` (a new one if None)."""
    if actor is None:
        return sched.spawn(action)
    sched.enqueue(actor, actor.root, action)
    return actor


class Link:
    """A server relay exposing a Recorder and a client relay exposing nothing, wired up."""

    def __init__(
        self,
        sched: Scheduler | None = None,
        client_sched: Scheduler | None = None,
        limits: Limits = DEFAULT_LIMITS,
    ):
        self.sched = sched or Scheduler()
        self.client_sched = client_sched or self.sched
        self.schedulers = (
            [self.sched]
            if self.client_sched is self.sched
            else [
                self.sched,
                self.client_sched,
            ]
        )
        self.recorder = Recorder()
        _, self.target = entity_ref(self.sched, self.recorder, "server-app")
        self.ready: dict[str, tuple[Hello, Ref]] = {}
        self.server = Relay(
            self.sched, "server", PEER, self.target, limits=limits, on_ready=self._ready("server")
        )
        self.client = Relay(
            self.client_sched, "client", CLIENT, limits=limits, on_ready=self._ready("client")
        )
        self.settle()
        self.proxy = self.ready["client"][1]  # the client's proxy for the server's Recorder

    def _ready(self, side: str) -> Callable[[Turn, Hello, Ref], None]:
        def ready(turn: Turn, hello: Hello, initial: Ref) -> None:
            self.ready[side] = (hello, initial)

        return ready

    def settle(self) -> None:
        settle(self.schedulers, (self.server, self.client))

    def client_act(self, action: Callable[[Turn], None], actor: Actor | None = None) -> Actor:
        actor = act(self.client_sched, action, actor)
        self.settle()
        return actor

    def clean(self) -> bool:
        """No handles and no membrane entries but the pinned initial ones."""
        return (
            self.server.live_handles() == (0, 0)
            and self.client.live_handles() == (0, 0)
            and self.server.exported_oids() == {0}
            and self.server.imported_oids() == {0}
            and self.client.exported_oids() == set()
            and self.client.imported_oids() == {0}
        )


# -- handshake and round trips ------------------------------------------------------------------


def test_handshake_reports_the_far_hello_and_initial_object() -> None:
    link = Link()
    hello, _ = link.ready["server"]
    assert (hello.role, hello.name, hello.version) == (CLIENT, "client", PROTOCOL_VERSION)
    assert link.ready["client"][0].role == PEER
    assert link.server.version == link.client.version == PROTOCOL_VERSION
    assert isinstance(link.proxy, Ref) and link.proxy != link.target


def test_version_negotiation_picks_the_highest_common_version() -> None:
    assert negotiate_version(1) == 1
    assert negotiate_version(2) == 2
    assert negotiate_version(3) == 3
    assert negotiate_version(4) == 4
    assert negotiate_version(7) == 4
    assert negotiate_version(0) is None


def test_assert_retract_and_message_round_trip() -> None:
    link = Link()
    held: list[Handle] = []
    actor = link.client_act(lambda t: held.append(t.publish(link.proxy, record("x", 1))))
    assert link.recorder.events == [("+", record("x", 1))]
    link.client_act(lambda t: t.message(link.proxy, "hi"), actor)
    link.client_act(lambda t: t.retract(held[0]), actor)
    assert link.recorder.events == [("+", record("x", 1)), ("!", "hi"), ("-", record("x", 1))]
    assert link.clean()


def test_sync_answers_after_earlier_events_and_leaves_nothing_behind() -> None:
    link = Link()
    seen: list[list] = []

    def boot(t: Turn) -> None:
        for i in range(3):
            t.message(link.proxy, i)
        t.sync(link.proxy, lambda t2: seen.append(list(link.recorder.events)))

    link.client_act(boot)
    assert seen == [[("!", 0), ("!", 1), ("!", 2)]]
    assert link.clean()


def test_works_across_two_schedulers() -> None:
    link = Link(Scheduler(), Scheduler())
    held: list[Handle] = []
    actor = link.client_act(lambda t: held.append(t.publish(link.proxy, "across")))
    assert link.recorder.live and list(link.recorder.live.values()) == ["across"]
    link.client_act(lambda t: t.retract(held[0]), actor)
    assert link.recorder.live == {} and link.clean()


def test_several_events_of_one_turn_cross_as_one_packet() -> None:
    link = Link()
    before_out, before_in = link.client.stats.packets_out, link.server.stats.packets_in

    def boot(t: Turn) -> None:
        t.publish(link.proxy, 1)
        t.publish(link.proxy, 2)
        t.message(link.proxy, 3)

    link.client_act(boot)
    assert link.client.stats.packets_out - before_out == 1
    assert link.server.stats.packets_in - before_in == 1
    assert link.server.stats.events_in == 3 and link.client.stats.events_out == 3
    assert [v for _, v in link.recorder.events] == [1, 2, 3]


def run_turns(link: Link, actor: Actor, *actions: Callable[[Turn], None]) -> int:
    """Run ``actions`` as turns of ``actor`` with no byte moving between them, deliver what
    they sent and settle; return how many packets that was."""
    for action in actions:
        act(link.client_sched, action, actor)
    link.client_sched.run_until_idle()
    data = link.client.data_to_send()
    link.server.receive(data)
    link.settle()
    frames = FrameDecoder(embedded=RawHooks())
    frames.feed(data)
    return len(list(frames))


def test_the_turns_of_one_run_cross_as_one_packet_in_order() -> None:
    link = Link()
    held: list[Handle] = []
    actor = link.client_act(lambda t: None)
    before_in = link.server.stats.packets_in
    packets = run_turns(
        link,
        actor,
        lambda t: held.append(t.publish(link.proxy, 1)),
        lambda t: t.message(link.proxy, 2),
        lambda t: t.retract(held[0]),
        lambda t: t.message(link.proxy, 3),  # after a retraction: a packet of its own
    )
    assert packets == 2 and link.server.stats.packets_in - before_in == 2
    assert link.recorder.events == [("+", 1), ("!", 2), ("-", 1), ("!", 3)]


def test_a_retraction_and_reassertion_in_two_turns_stay_visible() -> None:
    """Joined, the far side would apply the retraction after the new assertion (adds before
    removes) and its observers would see nothing change: the turns cross as two packets."""
    link = Link()
    held: list[Handle] = []
    actor = link.client_act(lambda t: held.append(t.publish(link.proxy, "x")))
    packets = run_turns(
        link,
        actor,
        lambda t: t.retract(held[0]),
        lambda t: held.append(t.publish(link.proxy, "x")),
    )
    assert packets == 2
    assert link.recorder.events == [("+", "x"), ("-", "x"), ("+", "x")]


def test_retractions_after_retractions_join_one_packet() -> None:
    link = Link()
    held: list[Handle] = []
    actor = link.client_act(lambda t: held.extend(t.publish(link.proxy, v) for v in "ab"))
    packets = run_turns(
        link,
        actor,
        lambda t: t.retract(held[0]),
        lambda t: t.retract(held[1]),
        lambda t: t.publish(link.proxy, "c"),
    )
    assert packets == 2
    assert link.recorder.events[2:] == [("-", "a"), ("-", "b"), ("+", "c")]


def test_a_turn_still_running_is_not_sent_in_part() -> None:
    """A turn of the relay actor left open by ``max_events`` (a driver serving I/O in the
    middle of a big turn) may yet fail: only what was sent before it is. A batch of more
    events than a packet holds is what takes such a turn (:meth:`Relay.take`)."""
    link = Link()
    sched = link.client_sched
    big = list(range(TURN_PACKET_EVENTS + 1))
    act(sched, lambda t: t.message(link.proxy, "first"))
    act(sched, lambda t: [t.message(link.proxy, i) for i in big])
    sched.run_until_idle(max_events=2 + 4)  # both actions, then 4 of the big batch
    assert not sched.idle()
    frames = FrameDecoder(embedded=RawHooks())
    frames.feed(link.client.data_to_send())
    assert [[value for _, value in p.fields[0]] for p in frames] == [["first"]]
    sched.run_until_idle()
    frames.feed(link.client.data_to_send())
    sent = [value for p in frames for _, value in p.fields[0]]
    assert sent == big


def test_a_batch_for_proxies_is_sent_at_its_senders_commit_without_a_relay_turn() -> None:
    link = Link()
    sched = link.client_sched
    before = sched.turns_run
    act(sched, lambda t: [t.message(link.proxy, i) for i in range(3)])
    sched.run_until_idle()
    assert sched.turns_run - before == 1  # the sender's turn only
    link.server.receive(link.client.data_to_send())
    link.settle()
    assert link.recorder.events == [("!", 0), ("!", 1), ("!", 2)]


def test_a_batch_left_to_a_relay_turn_is_not_overtaken() -> None:
    """A batch bigger than a packet takes a turn of the relay actor (run in slices if need
    be); a later batch from the same sender waits behind it instead of being sent at once."""
    link = Link()
    sched = link.client_sched
    big = list(range(TURN_PACKET_EVENTS + 1))
    actor = act(sched, lambda t: [t.message(link.proxy, i) for i in big])
    act(sched, lambda t: t.message(link.proxy, "after"), actor)
    link.settle()
    assert [v for _, v in link.recorder.events] == [*big, "after"]


def test_a_failure_while_sending_a_batch_crashes_the_relay_actor_and_sends_none_of_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    link = Link()
    relay, sched = link.client, link.client_sched
    original = relay._send_messages

    def failing(run: list[tuple[int, Value]]) -> None:
        if any(value == "boom" for _oid, value in run):
            raise RuntimeError("a bug")
        original(run)

    monkeypatch.setattr(relay, "_send_messages", failing)
    actor = act(sched, lambda t: t.message(link.proxy, "first"))
    act(sched, lambda t: [t.message(link.proxy, v) for v in ("a", "boom", "b")], actor)
    sched.run_until_idle()
    assert relay.closed and "relay actor stopped" in (relay.close_reason or "")
    frames = FrameDecoder(embedded=RawHooks())
    frames.feed(relay.data_to_send())
    packets = list(frames)
    assert [p.label.name for p in packets] == ["turn", "error"]
    assert [value for _, value in packets[0].fields[0]] == ["first"]


def test_closing_sends_what_committed_turns_sent_before_the_error() -> None:
    link = Link()
    act(link.client_sched, lambda t: t.message(link.proxy, "last words"))
    link.client_sched.run_until_idle()
    link.client.close("done")
    frames = FrameDecoder(embedded=RawHooks())
    frames.feed(link.client.data_to_send())
    packets = list(frames)
    assert [p.label.name for p in packets] == ["turn", "error"]
    assert packets[0].fields[0] == ((0, "last words"),)


def test_adds_before_removes_across_the_wire() -> None:
    link = Link()
    held: list[Handle] = []
    actor = link.client_act(lambda t: held.append(t.publish(link.proxy, "old")))
    link.client_act(lambda t: held.append(t.replace(link.proxy, held[0], "new")), actor)
    assert link.recorder.events == [("+", "old"), ("+", "new"), ("-", "old")]
    assert list(link.recorder.live.values()) == ["new"]


def test_the_hand_built_turn_packet_is_an_ordinary_record() -> None:
    link = Link()
    start = link.client.stats.bytes_out
    act(link.client_sched, lambda t: t.message(link.proxy, ("x", 1)))
    link.client_sched.run_until_idle()
    data = link.client.data_to_send()
    assert len(data) == link.client.stats.bytes_out - start
    frames = FrameDecoder()
    frames.feed(data)
    expected = Record(Symbol("turn"), (((0, ("x", 1)),),))
    assert list(frames) == [expected]
    link.server.receive(data)
    link.settle()
    assert link.recorder.events == [("!", ("x", 1))]


# -- membranes --------------------------------------------------------------------------------


def test_capability_passing_and_membranes_freed_afterwards() -> None:
    link = Link()
    back = Recorder()
    _, back_ref = entity_ref(link.client_sched, back, "client-app")
    held: list[Handle] = []
    actor = link.client_act(
        lambda t: held.append(t.publish(link.proxy, record("reply-to", back_ref)))
    )

    (value,) = link.recorder.live.values()
    far_back = value.fields[0]
    assert isinstance(far_back, Ref) and far_back != back_ref
    assert link.client.exported_oids() == {1} and link.server.imported_oids() == {0, 1}

    # The server uses the capability: asserts at it, and also sends it back to its owner.
    server_held: list[Handle] = []

    def server_side(t: Turn) -> None:
        server_held.append(t.publish(far_back, "pong"))
        server_held.append(t.publish(far_back, record("echo", far_back)))

    server_actor = act(link.sched, server_side)
    link.settle()
    assert back.live and set(back.live.values()) == {"pong", record("echo", back_ref)}
    echoed = next(v for v in back.live.values() if v != "pong").fields[0]
    assert echoed == back_ref  # a proxy of this connection goes back as the original object

    act(link.sched, lambda t: [t.retract(h) for h in server_held], server_actor)
    link.settle()
    assert back.live == {}
    assert link.client.exported_oids() == {1}  # the client's assertion still mentions it
    link.client_act(lambda t: t.retract(held[0]), actor)
    assert link.recorder.live == {} and link.clean()


def test_a_batch_of_assertions_holds_each_ones_references_until_it_is_retracted() -> None:
    """A batch is encoded a run at a time (``Relay.take``): each assertion of the run still
    holds exactly the references it mentions, released when it is retracted."""
    link = Link()
    a, b = (entity_ref(link.client_sched, Recorder(), f"client-app-{i}")[1] for i in range(2))
    held: list[Handle] = []
    actor = link.client_act(
        lambda t: held.extend(
            [t.publish(link.proxy, (1, a)), t.publish(link.proxy, 2), t.publish(link.proxy, (b, a))]
        )
    )
    assert link.client.exported_oids() == {1, 2}
    link.client_act(lambda t: t.retract(held[2]), actor)
    assert link.client.exported_oids() == {1}  # a: the first assertion still mentions it
    link.client_act(lambda t: [t.retract(held[0]), t.retract(held[1])], actor)
    assert link.recorder.live == {} and link.clean()


def test_a_run_of_assertions_that_lift_no_reference_is_encoded_with_one_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Data assertions (the stream's case) are encoded together; a run that lifts a reference
    is encoded again one assertion at a time, so that each keeps its own references."""
    link = Link()
    a = entity_ref(link.client_sched, Recorder(), "client-app")[1]
    encoder = link.client._encoder
    calls = {"encode": 0, "encode_all": 0}

    def counting(name: str) -> Callable:
        method = getattr(encoder, name)

        def counted(*args: object, **kwargs: object) -> object:
            calls[name] += 1
            return method(*args, **kwargs)

        return counted

    for name in calls:
        monkeypatch.setattr(encoder, name, counting(name))
    held: list[Handle] = []
    actor = link.client_act(lambda t: held.extend(t.publish(link.proxy, i) for i in range(5)))
    assert calls == {"encode": 0, "encode_all": 1}
    assert sorted(link.recorder.live.values()) == list(range(5))
    link.client_act(
        lambda t: held.extend([t.publish(link.proxy, 5), t.publish(link.proxy, a)]), actor
    )
    assert calls == {"encode": 2, "encode_all": 2}
    assert link.client.exported_oids() == {1}
    link.client_act(lambda t: [t.retract(h) for h in held], actor)
    assert link.recorder.live == {} and link.clean()


def test_a_batch_keeps_its_order_across_runs_of_messages_and_assertions() -> None:
    link = Link()

    def mixed(t: Turn) -> None:
        t.message(link.proxy, "m1")
        t.publish(link.proxy, "a1")
        t.message(link.proxy, "m2")
        t.message(link.proxy, "m3")
        t.publish(link.proxy, "a2")
        t.publish(link.proxy, "a3")
        t.message(link.proxy, "m4")

    link.client_act(mixed)
    assert link.recorder.events == [
        ("!", "m1"),
        ("+", "a1"),
        ("!", "m2"),
        ("!", "m3"),
        ("+", "a2"),
        ("+", "a3"),
        ("!", "m4"),
    ]


def test_a_sync_after_a_run_of_assertions_reaches_the_far_side_after_them() -> None:
    link = Link()
    recorder = link.recorder

    def on_sync(turn: Turn, peer: Ref) -> None:
        recorder.events.append(("sync", None))
        Entity.on_sync(recorder, turn, peer)

    recorder.on_sync = on_sync  # type: ignore[method-assign]
    answered: list[bool] = []

    def mixed(t: Turn) -> None:
        t.publish(link.proxy, "a1")
        t.publish(link.proxy, "a2")
        t.sync(link.proxy, lambda _t: answered.append(True))
        t.publish(link.proxy, "a3")

    link.client_act(mixed)
    assert recorder.events == [("+", "a1"), ("+", "a2"), ("sync", None), ("+", "a3")]
    assert answered == [True]


def test_an_event_that_cannot_be_sent_is_dropped_alone_from_its_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    link = Link(limits=Limits(max_frame_size=300))
    held: list[Handle] = []

    def boot(t: Turn) -> None:
        for i in range(3):
            t.message(link.proxy, i)
        t.message(link.proxy, "y" * 1000)
        t.message(link.proxy, 3)
        held.extend(t.publish(link.proxy, v) for v in ("p", "q" * 1000, "r"))

    actor = link.client_act(boot)
    assert link.recorder.events == [("!", 0), ("!", 1), ("!", 2), ("!", 3), ("+", "p"), ("+", "r")]
    assert caplog.text.count("dropped an outgoing") == 2
    link.client_act(lambda t: [t.retract(h) for h in held], actor)
    assert link.recorder.live == {} and link.clean() and not link.server.closed


def test_a_run_that_cannot_be_encoded_together_is_sent_event_by_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    link = Link()
    monkeypatch.setattr(link.client._encoder, "encode_all", lambda *args: None)
    held: list[Handle] = []

    def boot(t: Turn) -> None:
        t.message(link.proxy, 1)
        held.append(t.publish(link.proxy, "p"))
        t.message(link.proxy, 2)
        held.append(t.publish(link.proxy, "q"))

    actor = link.client_act(boot)
    link.client_act(lambda t: [t.retract(h) for h in held], actor)
    assert link.recorder.events == [
        ("!", 1),
        ("+", "p"),
        ("!", 2),
        ("+", "q"),
        ("-", "p"),
        ("-", "q"),
    ]
    assert link.clean()


def test_the_same_object_arrives_as_equal_refs() -> None:
    link = Link()
    _, mine = entity_ref(link.client_sched, Recorder(), "client-app")
    link.client_act(lambda t: (t.publish(link.proxy, (1, mine)), t.publish(link.proxy, (2, mine))))
    first, second = (v[1] for v in link.recorder.live.values())
    assert first == second and hash(first) == hash(second)
    assert link.client.exported_oids() == {1}


def test_refs_in_messages_are_counted_transiently() -> None:
    link = Link()
    _, mine = entity_ref(link.client_sched, Recorder(), "client-app")
    link.client_act(lambda t: t.message(link.proxy, record("req", mine)))
    assert link.recorder.events[0][1].fields[0].__class__ is Ref
    assert link.clean()


def test_refs_are_lowered_wherever_they_are_in_a_value() -> None:
    link = Link()
    apps = [entity_ref(link.client_sched, Recorder(), f"client-app-{i}")[1] for i in range(3)]
    a, b, c = apps

    def shapes() -> list[Value]:  # several per container, before and after other items
        return [
            record("x", (a, b), 1, (2, c)),
            record("y", frozenset({a, 3}), FrozenDict({b: (c,), 4: a})),
            Record(a, (b, "label is a ref")),
            (1, (2, (3, c)), a),
        ]

    actor = link.client_act(lambda t: [t.publish(link.proxy, v) for v in shapes()])
    link.client_act(lambda t: [t.message(link.proxy, v) for v in shapes()], actor)
    far: dict[Ref, Ref] = {}  # each client ref as the server sees it: one proxy per object
    for v in link.recorder.live.values():
        for x in walk(v):
            if isinstance(x, Ref):
                far.setdefault(x, x)
    assert len(far) == 3  # exported in the order first met: a, b, c
    by_client = dict(zip(apps, sorted(far, key=lambda r: r.entity.oid), strict=True))
    expected = [substitute(v, by_client) for v in shapes()]
    assert sorted(map(repr, link.recorder.live.values())) == sorted(map(repr, expected))
    assert [v for kind, v in link.recorder.events if kind == "!"] == expected
    assert link.server.imported_oids() == {0, 1, 2, 3}  # held by the assertions only
    link.client_act(lambda t: t.stop_actor(), actor)
    assert link.recorder.live == {} and link.clean()


def walk(v: Value) -> list[Value]:
    """Every value inside ``v`` (``v`` included), records' labels too."""
    if isinstance(v, Record):
        return [v, *walk(v.label), *(x for f in v.fields for x in walk(f))]
    if isinstance(v, tuple | frozenset):
        return [v, *(x for i in v for x in walk(i))]
    if isinstance(v, FrozenDict):
        return [v, *(x for kv in v.items() for i in kv for x in walk(i))]
    return [v]


def substitute(v: Value, refs: dict[Ref, Ref]) -> Value:
    """``v`` with each reference in ``refs`` replaced."""
    if isinstance(v, Ref):
        return refs.get(v, v)
    if isinstance(v, Record):
        return Record(substitute(v.label, refs), tuple(substitute(f, refs) for f in v.fields))
    if isinstance(v, tuple):
        return tuple(substitute(i, refs) for i in v)
    if isinstance(v, frozenset):
        return frozenset(substitute(i, refs) for i in v)
    if isinstance(v, FrozenDict):
        return FrozenDict({substitute(k, refs): substitute(i, refs) for k, i in v.items()})
    return v


def test_a_late_event_to_a_freed_oid_is_dropped_quietly() -> None:
    link = Link()
    back = Recorder()
    _, back_ref = entity_ref(link.client_sched, back, "client-app")
    link.client_act(lambda t: t.message(link.proxy, back_ref))
    far_back = link.recorder.events[0][1]
    assert link.clean()  # freed on both sides: the reference only travelled in a message
    act(link.sched, lambda t: t.message(far_back, "too late"))
    link.settle()
    assert back.events == [] and not link.client.closed and not link.server.closed


def test_a_ref_from_another_connection_is_exported_as_a_local_object() -> None:
    sched = Scheduler()
    first, second = Link(sched), Link(sched)
    # The first link's client passes the proxy of the second link's server to its own server.
    link_actor = first.client_act(lambda t: t.publish(first.proxy, record("via", second.proxy)))
    settle([sched], (first.server, first.client), (second.server, second.client))
    (value,) = first.recorder.live.values()
    act(sched, lambda t: t.message(value.fields[0], "hop"))
    settle([sched], (first.server, first.client), (second.server, second.client))
    assert second.recorder.events == [("!", "hop")]
    assert link_actor is not None and first.client.exported_oids() == {1}


# -- connection loss ----------------------------------------------------------------------------


def test_connection_loss_retracts_the_far_sides_assertions() -> None:
    link = Link()
    _, mine = entity_ref(link.client_sched, Recorder(), "client-app")
    actor = link.client_act(
        lambda t: (t.publish(link.proxy, "a"), t.publish(link.proxy, record("cap", mine)))
    )
    assert len(link.recorder.live) == 2
    closes: list[Relay] = []
    link.server.on_close = closes.append
    link.server.close("connection lost")
    link.sched.run_until_idle()
    assert link.recorder.live == {}
    assert closes == [link.server] and link.server.close_reason == "connection lost"
    assert link.server.exported_oids() == set() and link.server.imported_oids() == set()
    assert link.server.live_handles() == (0, 0) and not link.server.actor.alive
    # The client learns of it from the error packet; its proxies then drop everything.
    link.settle()
    assert link.client.closed and link.client.close_reason == "peer error: connection lost"
    link.client_act(lambda t: t.publish(link.proxy, "after"), actor)
    assert link.client.data_to_send() == b"" and link.client.exported_oids() == set()


def test_a_crash_of_the_relay_actor_closes_the_connection() -> None:
    sched = Scheduler()
    rec = Recorder()
    _, target = entity_ref(sched, rec)

    def boom(turn: Turn, hello: Hello, initial: Ref) -> None:
        raise RuntimeError("boom")

    server = Relay(sched, "server", PEER, target, on_ready=boom)
    client = Relay(sched, "client", CLIENT)
    settle([sched], (server, client))
    assert server.closed and "relay actor stopped" in (server.close_reason or "")
    assert client.closed


@pytest.mark.parametrize("with_sync", [False, True], ids=["applied-at-once", "in-a-turn"])
def test_a_crash_of_the_relay_actor_retracts_what_the_far_side_asserted(
    monkeypatch: pytest.MonkeyPatch, with_sync: bool
) -> None:
    """The relay applies the far side's assertions without its actor tracking them: when that
    actor crashes, the relay withdraws them itself, as the crash would have. A packet is
    applied as it arrives, or in a turn of the relay actor if it holds a sync: a failure
    crashes the actor either way, and none of the failing packet is delivered."""
    link = Link()
    actor = link.client_act(lambda t: t.publish(link.proxy, "held"))
    assert list(link.recorder.live.values()) == ["held"]
    membrane = link.server._membrane
    original = membrane.hold

    def failing(value: Value) -> list:
        if value.__class__ is tuple and value[0] == "boom":
            raise RuntimeError("a bug")
        return original(value)

    monkeypatch.setattr(membrane, "hold", failing)

    def boom(t: Turn) -> None:
        t.message(link.proxy, "before")
        t.publish(link.proxy, ("boom", t.ref(Entity())))
        if with_sync:
            t.sync(link.proxy, lambda t: None)

    link.client_act(boom, actor)
    assert link.server.closed and "relay actor stopped" in (link.server.close_reason or "")
    assert link.recorder.live == {} and link.recorder.events[-1] == ("-", "held")
    assert ("!", "before") not in link.recorder.events


def test_a_packet_is_not_applied_before_an_earlier_one_left_to_a_turn() -> None:
    """A packet holding a sync is applied in a turn of the relay actor; one that arrives while
    that turn waits is applied after it, not at once."""
    link = Link()

    def first(t: Turn) -> None:
        t.message(link.proxy, 1)
        t.sync(link.proxy, lambda t: None)

    act(link.client_sched, first)
    link.client_sched.run_until_idle()
    packets = link.client.data_to_send()
    act(link.client_sched, lambda t: t.message(link.proxy, 2))
    link.client_sched.run_until_idle()
    link.server.receive(packets + link.client.data_to_send())  # both packets in one read
    link.settle()
    assert link.recorder.events == [("!", 1), ("!", 2)]


def test_a_packet_that_comes_with_the_hello_is_applied_after_on_ready() -> None:
    """What ``on_ready`` does comes before the events of packets that arrived with the hello,
    as when each packet took a turn of the relay actor."""
    sched = Scheduler()
    recorder = Recorder()
    _, target = entity_ref(sched, recorder)

    def ready(turn: Turn, hello: Hello, initial: Ref) -> None:
        turn.message(target, "ready")

    server = Relay(sched, "server", PEER, target, on_ready=ready)
    client = Relay(sched, "client", CLIENT)
    client.receive(server.data_to_send())  # the client accepts the server: its proxy exists
    sched.run_until_idle()
    assert client.remote_initial is not None
    proxy = client.remote_initial
    act(sched, lambda t: t.message(proxy, "first"))
    sched.run_until_idle()
    server.receive(client.data_to_send())  # the hello and the first packet in one read
    sched.run_until_idle()
    assert recorder.events == [("!", "ready"), ("!", "first")]


# -- bad input --------------------------------------------------------------------------------


class RawHooks:
    """Lets a test put WireRefs on the wire directly."""

    def encode_embedded(self, obj: Embedded) -> Value:
        assert isinstance(obj, WireRef)
        return (obj.kind, obj.oid)

    def decode_embedded(self, v: Value) -> Embedded:
        return WireRef(*v)


RAW = Encoder(RawHooks())
HELLO = record("hello", 1, Symbol("peer"), "raw", FrozenDict())


def frames(*packets: Value) -> bytes:
    return b"".join(RAW.encode_frame(p) for p in packets)


def turn(*events: tuple[int, Record]) -> Record:
    return record("turn", tuple(events))


def victim(**kwargs: object) -> tuple[Scheduler, Relay, Recorder, Link]:
    """A server relay talking to a raw far side, plus a healthy link on the same scheduler."""
    sched = Scheduler()
    rec = Recorder()
    _, target = entity_ref(sched, rec)
    relay = Relay(sched, "victim", PEER, target, **kwargs)  # type: ignore[arg-type]
    relay.data_to_send()
    return sched, relay, rec, Link(sched)


def error_packet(relay: Relay) -> Record:
    decoder = FrameDecoder(embedded=RawHooks())
    decoder.feed(relay.data_to_send())
    *_, last = list(decoder)
    return last


BAD_INPUTS = [
    ("garbage frame", b"\x00\x00\x00\x02\xc1\xc1", "bad frame"),
    ("not a record", frames(HELLO, 42), "unknown packet"),
    ("unknown packet", frames(HELLO, record("bogus", 1)), "unknown packet bogus"),
    ("before hello", frames(turn()), "packet before hello: turn"),
    ("hello twice", frames(HELLO, HELLO), "duplicate hello"),
    ("hello shape", frames(record("hello", 1, Symbol("peer"))), "malformed hello"),
    ("hello role", frames(record("hello", 1, Symbol("boss"), "x", FrozenDict())), "role"),
    ("old version", frames(record("hello", 0, Symbol("peer"), "x", FrozenDict())), "version 0"),
    ("malformed turn", frames(HELLO, record("turn", 1, 2)), "malformed turn"),
    ("unknown event", frames(HELLO, turn((0, record("frob", 1)))), "unknown event frob"),
    ("event arity", frames(HELLO, turn((0, record("message", 1, 2)))), "unknown event message"),
    ("event shape", frames(HELLO, turn((0,))), "malformed event"),
    ("unknown oid", frames(HELLO, turn((99, record("message", 1)))), "unknown oid 99"),
    ("assert at unknown oid", frames(HELLO, turn((99, record("assert", 1, 5)))), "unknown oid 99"),
    (
        "sync at unknown oid",
        frames(HELLO, turn((9, record("sync", WireRef(0, 3))))),
        "unknown oid 9",
    ),
    ("bad oid", frames(HELLO, turn((-1, record("message", 1)))), "the oid is not"),
    ("retract arity", frames(HELLO, turn((0, record("retract", 1, 2)))), "unknown event retract/2"),
    ("assert arity", frames(HELLO, turn((0, record("assert", 1)))), "unknown event assert/1"),
    (
        "retract at another oid",
        frames(HELLO, turn((0, record("assert", 1, 5)), (1, record("retract", 5)))),
        "handle 5 retracted at oid 1, asserted at oid 0",
    ),
    (
        "unknown yours oid",
        frames(HELLO, turn((0, record("message", WireRef(1, 42))))),
        "unknown oid 42",
    ),
    (
        "handle reused",
        frames(HELLO, turn((0, record("assert", 1, 5)), (0, record("assert", 2, 5)))),
        "handle 5 reused",
    ),
    ("unknown handle", frames(HELLO, turn((0, record("retract", 7)))), "unknown handle 7"),
    (
        "retracted twice",
        frames(HELLO, turn((0, record("assert", 1, 5))), turn((0, record("retract", 5))))
        + frames(turn((0, record("retract", 5)))),
        "unknown handle 5",
    ),
    ("bad handle", frames(HELLO, turn((0, record("assert", 1, -1)))), "handle"),
    ("sync peer", frames(HELLO, turn((0, record("sync", 3)))), "peer of a sync"),
    (
        "embedded in hello",
        frames(record("hello", 1, Symbol("peer"), WireRef(0, 1), FrozenDict())),
        "embedded reference outside",
    ),
    ("bad embedded", b"", "malformed embedded reference"),  # built below
]
HELLO4 = record("hello", BARE_EVENTS_VERSION, Symbol("peer"), "raw", FrozenDict())
_BARE_SHAPE = "malformed event: expected an array of 1 to 3 items"
BAD_INPUTS += [  # version 4: bare events
    ("bare empty event", frames(HELLO4, turn(())), _BARE_SHAPE),
    ("bare event too long", frames(HELLO4, turn((0, 1, 2, 3))), _BARE_SHAPE),
    ("bare event not an array", frames(HELLO4, turn(5)), _BARE_SHAPE),
    ("bare unknown oid", frames(HELLO4, turn((99, 1))), "unknown oid 99"),
    ("bare assert at unknown oid", frames(HELLO4, turn((99, 1, 5))), "unknown oid 99"),
    ("bare sync at unknown oid", frames(HELLO4, turn((9, WireRef(0, 3), True))), "unknown oid 9"),
    ("bare bad oid", frames(HELLO4, turn((-1, 1))), "the oid is not"),
    ("bare oid not an integer", frames(HELLO4, turn(("x", 1))), "the oid is not"),
    ("bare bad handle", frames(HELLO4, turn((0, 1, -1))), "the handle is not"),
    ("bare handle false", frames(HELLO4, turn((0, 1, False))), "the handle is not"),
    ("bare sync peer", frames(HELLO4, turn((0, 3, True))), "peer of a sync"),
    ("bare unknown yours oid", frames(HELLO4, turn((0, WireRef(1, 42)))), "unknown oid 42"),
    ("bare handle reused", frames(HELLO4, turn((0, 1, 5), (0, 2, 5))), "handle 5 reused"),
    ("bare unknown handle", frames(HELLO4, turn((7,))), "unknown handle 7"),
    ("bare retract not a handle", frames(HELLO4, turn(("x",))), "the handle is not"),
    (
        "bare retracted twice",
        frames(HELLO4, turn((0, 1, 5)), turn((5,))) + frames(turn((5,))),
        "unknown handle 5",
    ),
]


def _bad_embedded() -> bytes:
    class Liar(RawHooks):
        def encode_embedded(self, obj: Embedded) -> Value:
            return "not a wire ref"

    return frames(HELLO) + Encoder(Liar()).encode_frame(turn((0, record("message", WireRef(0, 1)))))


BAD_INPUTS[BAD_INPUTS.index(("bad embedded", b"", "malformed embedded reference"))] = (
    "bad embedded",
    _bad_embedded(),
    "malformed embedded reference",
)


@pytest.mark.parametrize(
    ("data", "reason"), [c[1:] for c in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS]
)
def test_bad_input_closes_only_that_connection(data: bytes, reason: str) -> None:
    sched, relay, rec, healthy = victim()
    relay.receive(data)
    sched.run_until_idle()
    assert relay.closed and reason in (relay.close_reason or ""), relay.close_reason
    err = error_packet(relay)
    assert err.label == Symbol("error") and err.fields[0] == relay.close_reason
    assert rec.live == {} and not relay.actor.alive
    relay.receive(frames(HELLO))  # ignored once closed
    healthy.client_act(lambda t: t.publish(healthy.proxy, "still fine"))
    assert list(healthy.recorder.live.values()) == ["still fine"]
    assert not healthy.server.closed and sched.crashes == []


@pytest.mark.parametrize(
    "data",
    [
        frames(HELLO, turn((0, record("assert", "x", 1)), (0, record("retract", 9)))),
        frames(HELLO4, turn((0, "x", 1), (9,))),
    ],
    ids=["records", "bare"],
)
def test_a_bad_packet_has_no_effect_at_all(data: bytes) -> None:
    sched, relay, rec, _ = victim()
    relay.receive(data)
    sched.run_until_idle()
    assert relay.closed and rec.events == []


def test_limits_close_the_connection() -> None:
    cases = [
        (Limits(max_frame_size=64), frames(HELLO, turn((0, record("message", "x" * 100)))), "max"),
        (
            Limits(max_depth=8),
            frames(HELLO, turn((0, record("message", ((((((1,),),),),),))))),
            "dep",
        ),
        (
            Limits(max_collection_length=20),
            frames(HELLO, turn((0, record("message", tuple(range(30)))))),
            "too long",
        ),
    ]
    for limits, data, reason in cases:
        _, relay, _, healthy = victim(limits=limits)
        relay.receive(data)
        assert relay.closed and reason in (relay.close_reason or ""), relay.close_reason
        healthy.client_act(lambda t, h=healthy: t.message(h.proxy, "ok"))
        assert healthy.recorder.events == [("!", "ok")]


def test_too_many_live_handles_closes_the_connection() -> None:
    sched, relay, rec, _ = victim(max_handles=2)
    relay.receive(frames(HELLO, turn(*[(0, record("assert", i, i)) for i in range(2)])))
    sched.run_until_idle()
    assert not relay.closed and len(rec.live) == 2
    relay.receive(frames(turn((0, record("assert", 3, 3)))))
    sched.run_until_idle()
    assert relay.closed and "too many live handles" in (relay.close_reason or "")
    assert rec.live == {}


def test_authentication_can_reject_a_hello() -> None:
    def check(hello: Hello) -> str | None:
        return None if hello.auth.get("key") == "s3cret" else "bad key"

    sched, relay, _, _ = victim(authenticate=check)
    relay.receive(frames(HELLO))
    assert relay.closed and relay.close_reason == "authentication failed: bad key"

    sched = Scheduler()
    server = Relay(sched, "server", PEER, authenticate=check)
    client = Relay(sched, "client", CLIENT, auth={"key": "s3cret"})
    settle([sched], (server, client))
    assert not server.closed and server.remote_hello is not None
    assert server.remote_hello.auth == FrozenDict({"key": "s3cret"})


def test_a_peer_error_packet_closes_without_answering() -> None:
    _, relay, _, _ = victim()
    relay.receive(frames(HELLO, record("error", "going away", None)))
    assert relay.closed and relay.close_reason == "peer error: going away"
    assert relay.data_to_send() == b""


def test_events_to_a_missing_initial_object_are_dropped() -> None:
    sched = Scheduler()
    a = Relay(sched, "a", PEER)
    b = Relay(sched, "b", PEER)
    proxies: list[Ref] = []
    a.on_ready = lambda t, h, r: proxies.append(r)
    settle([sched], (a, b))
    act(sched, lambda t: (t.publish(proxies[0], 1), t.message(proxies[0], 2)))
    synced: list[bool] = []
    act(sched, lambda t: t.sync(proxies[0], lambda t2: synced.append(True)))
    settle([sched], (a, b))
    assert not a.closed and not b.closed and synced == [True]


# -- hypothesis: garbage never escapes receive ----------------------------------------------------


def valid_stream() -> bytes:
    return frames(
        HELLO,
        turn((0, record("assert", record("x", 1, "two", 3.0), 1)), (0, record("message", b"b"))),
        turn((0, record("assert", (WireRef(0, 5), WireRef(1, 0)), 2))),
        turn((0, record("sync", WireRef(0, 6))), (0, record("retract", 1))),
    )


def feed_and_run(data: bytes, chunk: int) -> None:
    sched, relay, _, _ = victim()
    for i in range(0, len(data), chunk):
        relay.receive(data[i : i + chunk])  # must not raise
    sched.run_until_idle()
    assert sched.crashes == []
    assert relay.closed == (relay.close_reason is not None)


@given(st.binary(max_size=300), st.integers(1, 64))
def test_random_bytes_never_escape_receive(data: bytes, chunk: int) -> None:
    feed_and_run(data, chunk)


@given(
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=8),
    st.integers(0, 2),
    st.integers(1, 64),
)
def test_mutated_valid_packets_never_escape_receive(
    edits: list[tuple[int, int]], mode: int, chunk: int
) -> None:
    data = bytearray(valid_stream())
    for pos, byte in edits:
        pos %= len(data)
        if mode == 0:
            data[pos] = byte
        elif mode == 1:
            data.insert(pos, byte)
        else:
            del data[pos]
    feed_and_run(bytes(data), chunk)


def test_the_valid_stream_is_accepted() -> None:
    sched, relay, rec, _ = victim()
    relay.receive(valid_stream())
    sched.run_until_idle()
    assert not relay.closed, relay.close_reason
    assert len(rec.live) == 1


# -- the on_commit hook of the actor engine ------------------------------------------------------


def test_on_commit_runs_after_the_turn_commits_and_never_for_a_failed_turn() -> None:
    sched = Scheduler()
    rec = Recorder()
    _, target = entity_ref(sched, rec)
    calls: list[str] = []

    def good(t: Turn) -> None:
        t.on_commit(lambda: calls.append("first"))
        t.message(target, "m")
        t.on_commit(lambda: calls.append("second"))

    def bad(t: Turn) -> None:
        t.on_commit(lambda: calls.append("never"))
        raise RuntimeError("fails")

    sched.spawn(good)
    sched.spawn(bad)
    sched.run_until_idle()
    assert calls == ["first", "second"] and rec.events == [("!", "m")]


def test_codec_errors_in_outgoing_values_drop_only_that_event() -> None:
    link = Link()

    class NotAValue(Embedded):
        pass

    held: list[Handle] = []

    def boot(t: Turn) -> None:
        held.append(t.publish(link.proxy, NotAValue()))
        t.publish(link.proxy, "fine")

    actor = link.client_act(boot)
    assert list(link.recorder.live.values()) == ["fine"]
    link.client_act(lambda t: t.retract(held[0]), actor)
    assert not link.client.closed and not link.server.closed
    with pytest.raises(CodecError):
        decode(b"\xc1")


# -- protocols/wire.md is checked against the code ----------------------------------------------

WIRE_MD = Path(__file__).resolve().parent.parent / "protocols" / "wire.md"
SAMPLE_FIELDS: dict[str, Value] = {
    "version": PROTOCOL_VERSION,
    "role": Symbol("peer"),
    "name": "doc",
    "auth": FrozenDict(),
    "value": record("v", 1),
    "handle": 3,
    "peer": WireRef(0, 1),
    "reason": "why",
    "detail": None,
}


def doc_table(heading: str) -> list[list[str]]:
    """The rows (cells stripped) of the first table after ``## heading`` in wire.md."""
    text = WIRE_MD.read_text(encoding="utf-8").split(f"\n## {heading}\n", 1)[1]
    rows = [line for line in text.split("\n## ", 1)[0].splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows[2:]]


def doc_forms(heading: str) -> dict[str, list[str]]:
    """``{label: [field names]}`` of the record forms in the first column of a table."""
    forms = {}
    for cells in doc_table(heading):
        label, *fields = cells[0].strip("`<>").split()
        forms[label] = fields
    return forms


def sample(label: str, fields: list[str], **given: Value) -> Record:
    return record(label, *(given.get(f, SAMPLE_FIELDS.get(f)) for f in fields))


def documented_event(version: int, label: str, **given: Value) -> tuple:
    """The event ``label`` addressed to oid 0 as wire.md's Events table writes it in
    ``version``, its fields sampled or ``given``."""
    if version < BARE_EVENTS_VERSION:
        return (0, sample(label, doc_forms("Events")[label], **given))
    (cells,) = [c for c in doc_table("Events") if c[0].strip("`<").startswith(f"{label} ")]
    names = cells[2].strip("`[]").split()  # the version 4 form, such as [oid value handle]
    fields = {"oid": 0, "#t": True, **SAMPLE_FIELDS, **given}
    return tuple(fields[name] for name in names)


@pytest.mark.parametrize("version", [3, BARE_EVENTS_VERSION])
def test_the_documented_packets_and_events_are_what_the_relay_speaks(version: int) -> None:
    packets, events = doc_forms("Packets"), doc_forms("Events")
    assert set(packets) == {"hello", "turn", "error", "auth", "ping", "pong"}  # auth: test_auth
    assert set(events) == {"assert", "retract", "message", "sync"}
    assert BARE_EVENTS_VERSION == PROTOCOL_VERSION  # the newest version is the one documented
    hello = sample("hello", packets["hello"], version=version)
    stream = [hello, turn(documented_event(version, "assert"))]
    stream += [turn(documented_event(version, label)) for label in events]
    sched, relay, rec, _ = victim()
    relay.receive(frames(*stream[:2]))
    sched.run_until_idle()
    assert not relay.closed and list(rec.live.values()) == [record("v", 1)]
    assert relay.version == version
    relay.receive(frames(turn(documented_event(version, "retract"))))
    for label in ("message", "sync"):
        relay.receive(frames(turn(documented_event(version, label))))
    sched.run_until_idle()
    assert not relay.closed, relay.close_reason
    assert rec.events == [("+", record("v", 1)), ("-", record("v", 1)), ("!", record("v", 1))]
    # ... and what it sends is in the same forms
    relay.data_to_send()
    far = relay.remote_initial
    held: list[Handle] = []
    actor = act(sched, lambda t: held.append(t.publish(far, record("v", 1))))
    act(sched, lambda t: t.message(far, record("v", 1)), actor)
    act(sched, lambda t: t.retract(held[0]), actor)
    sched.run_until_idle()
    decoder = FrameDecoder(embedded=RawHooks())
    decoder.feed(relay.data_to_send())
    sent = [event for packet in decoder for event in packet.fields[0]]
    handle = sent[0][-1] if version >= BARE_EVENTS_VERSION else sent[0][1].fields[1]
    assert sent == [
        documented_event(version, label, handle=handle)
        for label in ("assert", "message", "retract")
    ]
    relay.receive(frames(sample("ping", packets["ping"]), sample("pong", packets["pong"])))
    assert relay.data_to_send() == frames(sample("pong", packets["pong"]))  # one answer
    relay.receive(frames(sample("error", packets["error"])))
    assert relay.close_reason == "peer error: why"


def test_the_documented_value_cache_is_what_the_codec_and_relay_use() -> None:
    rows = {cells[1].strip("`"): cells for cells in doc_table("Value cache")}
    assert set(rows) == {"DEFINE", "CACHED"}
    assert int(rows["DEFINE"][0]) == codec.DEFINE and int(rows["CACHED"][0]) == codec.CACHED
    text = " ".join(WIRE_MD.read_text(encoding="utf-8").split("\n## Value cache\n")[1].split())
    assert f"**{VALUE_CACHE_SLOTS} slots** (numbered 0 to {VALUE_CACHE_SLOTS - 1})" in text
    assert f"of at most {codec.CACHE_MAX_TEXT} characters" in text
    assert f"at most {codec.CACHE_MAX_WEIGHT} of them all told" in text
    assert VALUE_CACHE_SLOTS <= codec.CACHE_MAX_SLOTS


def test_the_documented_error_reasons_exist_in_the_code() -> None:
    source = (Path(__file__).resolve().parent.parent / "feds" / "relay.py").read_text()
    reasons = [cells[1] for cells in doc_table("Protocol errors")]
    assert len(reasons) >= 15
    for cell in reasons:
        reason = cell.split("`")[1]
        for stop in (" N", " A", " LABEL", ": ", "..."):
            reason = reason.split(stop)[0]
        assert reason in source, reason


# -- larger scenarios -------------------------------------------------------------------------


def test_a_turn_too_big_for_one_frame_is_split_and_a_huge_event_dropped() -> None:
    sched = Scheduler()
    rec = Recorder()
    _, target = entity_ref(sched, rec)
    limits = Limits(max_frame_size=300)
    server = Relay(sched, "server", PEER, target, limits=limits)
    proxies: list[Ref] = []
    client = Relay(
        sched, "client", CLIENT, limits=limits, on_ready=lambda t, h, r: proxies.append(r)
    )
    settle([sched], (server, client))
    before = client.stats.packets_out

    def boot(t: Turn) -> None:
        for i in range(10):
            t.message(proxies[0], (i, "x" * 50))
        t.message(proxies[0], "y" * 1000)

    act(sched, boot)
    settle([sched], (server, client))
    assert [v[0] for _, v in rec.events] == list(range(10))
    assert client.stats.packets_out - before > 1 and not server.closed


def test_a_turn_of_many_events_is_split_into_packets_of_bounded_length() -> None:
    """The far side decodes and applies a big turn (a Spark commit) in parts of bounded time."""
    link = Link()
    before = link.client.stats.packets_out
    count = 2 * TURN_PACKET_EVENTS + 10
    link.client_act(lambda t: [t.message(link.proxy, i) for i in range(count)])
    assert [v for _, v in link.recorder.events] == list(range(count))
    assert link.client.stats.packets_out - before == 3 and not link.server.closed


def test_a_split_replacement_never_shows_the_far_side_a_gap() -> None:
    """A turn that retracts many assertions and then makes their replacements crosses the wire
    in several packets with its retractions last, as the far side applies one packet."""
    link = Link()
    count = TURN_PACKET_EVENTS + 500
    held: list[int] = []
    holder = link.client_act(
        lambda t: held.extend(t.publish(link.proxy, ("old", i)) for i in range(count))
    )
    link.recorder.events.clear()

    def replace_all(t: Turn) -> None:
        for handle in held:
            t.retract(handle)
        for i in range(count):
            t.publish(link.proxy, ("new", i))

    link.client_act(replace_all, holder)
    kinds = [kind for kind, _ in link.recorder.events]
    assert kinds == ["+"] * count + ["-"] * count and not link.server.closed


def test_an_observer_across_the_wire_sees_a_remote_dataspace() -> None:
    from feds.dataspace import Dataspace, observe
    from feds.pattern_forms import bind, rec_group

    sched = Scheduler()
    ds = Dataspace()
    _, ds_ref = entity_ref(sched, ds, "dataspace")
    server = Relay(sched, "server", PEER, ds_ref)
    proxies: list[Ref] = []
    client = Relay(sched, "client", CLIENT, on_ready=lambda t, h, r: proxies.append(r))
    settle([sched], (server, client))
    rec = Recorder()
    _, observer = entity_ref(sched, rec, "observer")
    held: list[Handle] = []
    pattern = rec_group(Symbol("present"), [bind()])
    app = act(sched, lambda t: held.append(t.publish(proxies[0], observe(pattern, observer))))
    local = act(sched, lambda t: held.append(t.publish(ds_ref, record("present", "alice"))))
    settle([sched], (server, client))
    assert rec.events == [("+", ("alice",))]
    act(sched, lambda t: t.retract(held[1]), local)
    act(sched, lambda t: t.publish(proxies[0], record("present", "bob")), app)
    settle([sched], (server, client))
    assert rec.events[1:] == [("-", ("alice",)), ("+", ("bob",))]
    client.close("bye")
    settle([sched], (server, client))
    assert len(ds) == 0 and server.exported_oids() == set()


_BARE_MESSAGE = st.builds(lambda o, v: (o, v), st.sampled_from([0, 0, 1, 2]), st.integers(0, 3))
_BARE_ODD = st.one_of(
    st.builds(lambda o: (o, None), st.sampled_from([9, -1, 2**70, True, False, 0.0, "x"])),
    st.builds(lambda v, h: (0, v, h), st.integers(0, 3), st.integers(0, 2)),  # an assertion
    st.builds(lambda h: (h,), st.integers(0, 2)),  # a retraction
    st.sampled_from([(), (0, 1, 2, 3), 5]),  # malformed
)
_BARE_ITEMS = st.one_of(*[_BARE_MESSAGE] * 12, _BARE_ODD)  # many packets of messages only


_LONG = SCAN_IN_C  # a packet of messages is worked out in C from this many


@given(st.booleans(), st.lists(st.lists(_BARE_ITEMS, max_size=2 * _LONG), min_size=1, max_size=4))
@example(False, [[(0, 1), (1, 2), (0, 3)] * _LONG])  # two actors: one batch each, in order
@example(False, [[(0, 1)] * _LONG + [(False, 2)]])  # False is no oid, though a dict takes it for 0
@example(False, [[(0, 1)] * _LONG + [(9, 2)]])  # an unknown oid
@example(False, [[(0, 1)] * _LONG + [(0, 1, 5)], [(0, 2)] * _LONG + [(5,)]])  # not only messages
@example(True, [[(0, 1)] * _LONG, [(2, True)] * _LONG])  # a sync's answer awaited, then given
def test_a_packet_of_messages_is_applied_as_the_general_path_would(
    sync: bool, packets: list
) -> None:
    """The relay works a packet of bare messages out in C (``Relay._message_batches``); every
    packet, valid or not, must have exactly the effect the event-by-event path gives it: oid 0
    and 1 are entities of two actors (their events in one log), oid 2 the answer to a sync this
    end may have sent (which pins it until answered)."""

    def run(fast: bool) -> tuple:
        sched, relay, rec, _ = victim()
        if not fast:
            relay._message_batches = lambda items: None  # type: ignore[method-assign]
        relay.receive(frames(HELLO4))
        sched.run_until_idle()  # the handshake's turn: packets are then applied as they come
        other = Recorder()
        other.events = rec.events
        relay._membrane.export(entity_ref(sched, other, "other")[1])  # oid 1
        if sync:  # its answer's peer is oid 2
            act(
                sched, lambda t: t.sync(relay.remote_initial, lambda t: rec.events.append("synced"))
            )
            sched.run_until_idle()
        for events in packets:
            relay.receive(frames(turn(*events)))
            sched.run_until_idle()
        return rec.events, relay.close_reason, relay._sync_pins, relay.exported_oids()

    assert run(fast=True) == run(fast=False)


_HANDLE = st.one_of(*[st.integers(0, 50)] * 8, st.sampled_from([-1, 2**70, True, False, "x"]))
_CHANGE_VALUE = st.one_of(
    *[st.integers(0, 3)] * 12, st.builds(WireRef, st.just(0), st.integers(1, 3))
)
_CHANGE_OID = st.sampled_from([0, 0, 0, 0, 1, 2, 9, -1, True])
_CHANGE_ADD = st.builds(lambda o, v, h: (o, v, h), _CHANGE_OID, _CHANGE_VALUE, _HANDLE)


@st.composite
def _change_run(draw: st.DrawFn) -> list[tuple]:
    """Assertions of consecutive handles from a drawn one, then retractions (adds before
    removes, as a sender's commit encodes them), now and then with an odd item among them."""
    first = draw(st.integers(0, 40))
    oid = draw(st.sampled_from([0, 0, 0, 0, 0, 1, 2, 9]))
    values = draw(st.lists(_CHANGE_VALUE, max_size=2 * _LONG))
    adds = [(oid, v, first + i) for i, v in enumerate(values)]
    removes = [(h,) for h in draw(st.lists(st.integers(0, 60), unique=True, max_size=2 * _LONG))]
    items = adds + removes
    if draw(st.integers(0, 4)) == 0:
        odd = draw(st.one_of(_CHANGE_ADD, st.builds(lambda h: (h,), _HANDLE), _BARE_ODD))
        items.insert(draw(st.integers(0, len(items))), odd)
    return items


_CHANGE_PACKET = st.one_of(
    *[_change_run()] * 6,
    st.lists(st.one_of(_CHANGE_ADD, st.builds(lambda h: (h,), _HANDLE), _BARE_ODD), max_size=_LONG),
)


def _changes(adds: range, removes: range = range(0)) -> list[tuple]:
    return [(0, h, h) for h in adds] + [(h,) for h in removes]


@given(st.lists(_CHANGE_PACKET, min_size=1, max_size=5))
@example([_changes(range(_LONG)), _changes(range(_LONG, 2 * _LONG), range(_LONG))])
@example([_changes(range(8), range(8)) + _changes(range(8, 16))])  # not adds before removes
@example([_changes(range(_LONG), [3, 3])])  # retracted twice in one packet
@example([_changes(range(_LONG), [_LONG])])  # a handle never asserted
@example([_changes(range(_LONG)), _changes(range(5, 5 + _LONG))])  # a handle reused while live
@example([_changes([1] * _LONG)])  # a handle reused within the packet
@example([_changes(range(30)), _changes(range(30, 30 + _LONG))])  # more than max_handles
@example([_changes(range(30)), _changes(range(30, 40)), _changes(range(40, 56))])  # budget
@example([[*_changes(range(_LONG)), (1, 0, 99)]])  # two actors
@example([[*_changes(range(8)), (1, 0, 99), *_changes(range(8, 16))]])  # their events between
@example([[(0, WireRef(0, 1), 20), *_changes(range(_LONG))]])  # a reference
@example([[(0, WireRef(0, 1), 20)], _changes(range(_LONG), [20])])  # one retracted
@example([[*_changes(range(2, _LONG + 1)), (0, 1, True)]])  # a sync's #t, not a handle
@example([[(0, 0, -1), *_changes(range(1, _LONG))]])  # a negative handle
@example([[(0, 0, 2**70), *_changes(range(1, _LONG))]])  # a handle too large
@example([[(0, 0, 1.0), *_changes(range(2, _LONG + 1))]])  # a handle not an integer
@example([[(9, 0, h) for h in range(_LONG)]])  # an oid never given
@example([[(2, 0, 1)], _changes(range(2, 2 + _LONG), [1])])  # a late assertion's retraction
@example([[(1, 0, 40)], _changes(range(_LONG), [40])])  # a retraction at another actor
def test_a_packet_of_changes_is_applied_as_the_general_path_would(packets: list) -> None:
    """The relay works a packet of bare assertions and retractions out in C
    (``Relay._change_batches``); every packet, valid or not, must have exactly the effect the
    event-by-event path gives it, in the events seen, the tables kept, the local handles
    given and the node's budget: oid 0 and 1 are entities of two actors (their events in one
    log), oid 2 one freed here (what it is sent is late); at most 45 live handles and a
    node's budget of 100, or at most 100 and a budget of 44 shared with another connection
    that holds 4."""
    for max_handles, limit in ((45, 100), (100, 44)):
        _changes_as_the_general_path_would(packets, max_handles, limit)


class _Where(Recorder):
    """A recorder that also notes which actor's turn showed it each change."""

    def on_publish(self, turn: Turn, value: Value, handle: Handle) -> None:
        super().on_publish(turn, value, handle)
        self.events.append(("in", turn.actor.name))

    def on_retract(self, turn: Turn, handle: Handle) -> None:
        super().on_retract(turn, handle)
        self.events.append(("in", turn.actor.name))


def _changes_as_the_general_path_would(packets: list, max_handles: int, limit: int) -> None:
    def run(fast: bool) -> tuple:
        budget = HandleBudget(limit)
        budget.take_many(4)
        sched, relay, rec, _ = victim(max_handles=max_handles, budget=budget)
        if not fast:
            relay._change_batches = lambda items: None  # type: ignore[method-assign]
        relay.receive(frames(HELLO4))
        sched.run_until_idle()
        other = _Where()
        other.events = rec.events
        membrane = relay._membrane
        membrane.export(entity_ref(sched, other, "other")[1])  # oid 1
        membrane.dirty.append(membrane.export(entity_ref(sched, Recorder(), "gone")[1]))
        membrane.collect()  # oid 2, freed: what the far side sends it is dropped, as late
        for events in packets:
            relay.receive(frames(turn(*events)))
            sched.run_until_idle()
        inbound = {
            h: held if held is _DROPPED else (held[0], len(held[1]))
            for h, held in relay._inbound.items()
        }
        events = [(k, ("ref", v.entity.oid) if isinstance(v, Ref) else v) for k, v in rec.events]
        return (
            events,
            relay.close_reason,
            relay._far_handles,
            inbound,
            next(sched.handles),
            budget.used,
            relay.exported_oids(),
            relay.imported_oids(),
        )

    assert run(fast=True) == run(fast=False)
