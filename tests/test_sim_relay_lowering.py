"""The relay's reference lowering, sped up for the simulator, still finds every reference.

``_Membrane.lower_value`` stops walking once the packet's references are all lowered and
rebuilds only containers that hold one; these values put references first, last, deep inside
sets and dicts, and spread over several events of one packet.
"""

from __future__ import annotations

from feds.actor import Actor, Entity, Handle, Ref, Scheduler, Turn
from feds.relay import MINE, PEER, Relay, WireRef, exchange
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
    if isinstance(v, Ref | WireRef):
        return [v]
    if v.__class__ is Record:
        return [r for f in (v.label, *v.fields) for r in refs_in(f)]
    if v.__class__ in (tuple, frozenset):
        return [r for x in sorted(v, key=repr) for r in refs_in(x)]
    if v.__class__ is FrozenDict:
        return [r for k, x in sorted(v.items(), key=repr) for r in refs_in(k) + refs_in(x)]
    return []


def test_every_reference_is_lowered_wherever_it_is() -> None:
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


def test_lowering_copies_only_the_path_to_each_reference() -> None:
    membrane = Relay(Scheduler(), "r", PEER)._membrane
    big = Record(Symbol("pattern"), (FrozenDict({1: Record(Symbol("x"), (1,))}),))
    v = Record(Symbol("pub"), (big, (1, WireRef(MINE, 3)), b"payload"))
    membrane.unlowered = 1
    entries: list = []
    got = membrane.lower_value(v, entries)
    assert got.fields[0] is big and got.fields[2] is v.fields[2]
    assert got.fields[1][0] == 1 and got.fields[1][1].__class__ is Ref
    assert membrane.unlowered == 0 and len(entries) == 1
    for holder in (frozenset({(1, WireRef(MINE, 4))}), FrozenDict({"k": big, WireRef(MINE, 5): 2})):
        membrane.unlowered = 1
        lowered = membrane.lower_value(holder, entries)
        assert lowered.__class__ is holder.__class__ and len(lowered) == len(holder)
        assert refs_in(lowered)[0].__class__ is Ref
    assert lowered["k"] is big
    membrane.unlowered = 1
    labelled = membrane.lower_value(Record(WireRef(MINE, 6), (big,)), entries)  # a generic record
    assert labelled.label.__class__ is Ref and labelled.fields[0] is big


def test_lowering_returns_values_without_references_unchanged() -> None:
    membrane = Relay(Scheduler(), "r", PEER)._membrane
    big = Record(Symbol("pattern"), (FrozenDict({1: Record(Symbol("x"), (1,))}),))
    for v in (big, (big, b"x"), frozenset({(1, big)}), FrozenDict({"k": (big,)})):
        membrane.unlowered = 1  # a reference elsewhere in the packet: the whole value is walked
        assert membrane.lower_value(v, []) is v
