"""A relay maps every reference as it decodes it, and an assertion holds each one it mentions.

The decoder's embedded hook (``_Membrane.decode_embedded``) turns each ``[kind oid]`` into the
local Ref and counts its entry for the packet; ``_Membrane.hold`` then counts, for an
assertion, every reference it mentions, and stops walking once the packet's references are all
found. These values put references first, last, deep inside sets and dicts, and spread over
several events of one packet.
"""

from __future__ import annotations

from feds.actor import Actor, Entity, Handle, Ref, Scheduler, Turn
from feds.relay import PEER, Relay, exchange
from feds.values import FrozenDict, Record, Symbol, Value


class Recorder(Entity):
    def __init__(self) -> None:
        self.values: list[Value] = []

    def on_publish(self, turn: Turn, value: Value, handle: Handle) -> None:
        self.values.append(value)

    def on_message(self, turn: Turn, value: Value) -> None:
        self.values.append(value)


def refs_in(v: Value) -> list[Value]:
    """Every embedded reference inside ``v``, in a stable order."""
    if isinstance(v, Ref):
        return [v]
    if v.__class__ is Record:
        return [r for f in (v.label, *v.fields) for r in refs_in(f)]
    if v.__class__ in (tuple, frozenset):
        return [r for x in sorted(v, key=repr) for r in refs_in(x)]
    if v.__class__ is FrozenDict:
        return [r for k, x in sorted(v.items(), key=repr) for r in refs_in(k) + refs_in(x)]
    return []


def test_every_reference_is_mapped_wherever_it_is() -> None:
    sched = Scheduler()
    far = Actor(sched, "far")
    recorder = Recorder()
    target = Ref(far.root, recorder)
    server = Relay(sched, "server", PEER, initial=target)
    client = Relay(sched, "client", PEER)
    mine = Actor(sched, "mine")
    a, b = Ref(mine.root, Recorder()), Ref(mine.root, Recorder())
    big = Record(Symbol("pattern"), (FrozenDict({i: Record(Symbol("x"), (i,)) for i in range(5)}),))
    values = [
        Record(Symbol("pub"), (a, big, (1, 2))),  # the reference first
        Record(Symbol("pub"), (big, (1, 2), b)),  # last
        frozenset({1, (2, a)}),  # inside a set
        FrozenDict({"k": (big, FrozenDict({b: a}))}),  # a dict key and value, deep
        (big, "no references here"),
    ]

    def send(turn: Turn) -> None:
        remote = client.remote_initial
        assert remote is not None
        for v in values:  # one turn: one packet with every event
            turn.publish(remote, v)
        turn.message(remote, Record(Symbol("m"), (big, a)))

    for _ in range(50):
        sched.run_until_idle()
        exchange(client, server)
    sched.enqueue(mine, mine.root, send)
    for _ in range(50):
        sched.run_until_idle()
        exchange(client, server)
    got = recorder.values
    assert len(got) == len(values) + 1
    for sent, arrived in zip([*values, Record(Symbol("m"), (big, a))], got, strict=True):
        found = refs_in(arrived)
        assert len(found) == len(refs_in(sent))
        assert all(r.__class__ is Ref for r in found), arrived
    # Values without references arrive equal (and whole).
    assert got[4] == values[4]


def linked() -> tuple[Scheduler, Relay, Relay, Recorder, Actor]:
    sched = Scheduler()
    recorder = Recorder()
    server = Relay(sched, "server", PEER, initial=Ref(Actor(sched, "far").root, recorder))
    client = Relay(sched, "client", PEER)
    settle(sched, client, server)
    return sched, server, client, recorder, Actor(sched, "mine")


def settle(sched: Scheduler, client: Relay, server: Relay) -> None:
    for _ in range(50):
        sched.run_until_idle()
        exchange(client, server)


def test_an_assertion_holds_each_reference_it_mentions_and_a_message_none() -> None:
    sched, server, client, recorder, mine = linked()
    a, b = Ref(mine.root, Recorder()), Ref(mine.root, Recorder())
    handles = []

    def send(turn: Turn) -> None:
        remote = client.remote_initial
        assert remote is not None
        handles.append(turn.publish(remote, Record(Symbol("x"), (a, (1, a), frozenset({a})))))
        handles.append(turn.publish(remote, FrozenDict({a: 1})))
        turn.message(remote, Record(Symbol("m"), (a, b)))

    sched.enqueue(mine, mine.root, send)
    settle(sched, client, server)
    assert len(recorder.values) == 3
    membrane = server._membrane
    counts = {oid: entry.count for oid, entry in membrane.imports.items() if oid}
    assert list(counts.values()) == [4]  # a, four times in what is asserted; b only in a message

    def retract(turn: Turn) -> None:
        for handle in handles:
            turn.retract(handle)

    sched.enqueue(mine, mine.root, retract)
    settle(sched, client, server)
    assert server.imported_oids() == {0} and client.exported_oids() == set()


def test_hold_stops_once_every_reference_of_the_packet_is_found() -> None:
    sched, server, client, recorder, mine = linked()
    a = Ref(mine.root, Recorder())
    big = Record(Symbol("pattern"), (FrozenDict({1: Record(Symbol("x"), (1,))}),))
    sched.enqueue(mine, mine.root, lambda t: t.publish(client.remote_initial, (a,)))
    settle(sched, client, server)
    (far_a,) = recorder.values[0]
    membrane = server._membrane
    looked_at: list[Value] = []
    membrane.known_ref_free = lambda v: looked_at.append(v) or False  # type: ignore[method-assign]
    pub = Record(Symbol("pub"), (far_a, big))
    membrane.unheld = 1
    assert [e.ref for e in membrane.hold(pub)] == [far_a]
    assert looked_at == [pub]  # the pattern after the packet's only reference is not walked
    membrane.unheld = 2  # another reference elsewhere in the packet: the whole value is walked
    assert [e.ref for e in membrane.hold(pub)] == [far_a]
    assert looked_at[1:] == [pub, big, big.fields[0], big.fields[0][1]]
