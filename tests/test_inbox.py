"""Inboxes: only what changes crosses a link, and the inbox that receives it makes the record.

aggregate-subs: a match crosses a link as its captures alone, and the inbox that receives it
makes it ``<pub b pat x>`` in its own fragment (``protocols/aggregate-subs.md``). copy-up: a
child offers ``v`` to its inbox at the parent, which makes it ``<link child v>`` there
(``protocols/copy-up.md``)."""

from __future__ import annotations

import pytest

from feds.actor import Turn
from feds.pattern_forms import bind, rec_group
from feds.protocols.aggregate_subs import PUB, SUB
from feds.protocols.copy_up import FROM_UPLINK, LINK
from feds.relay import Relay
from feds.sim.reference import Workload
from feds.values import Record, Symbol, record
from tests.test_federation import Overlay

A = Symbol("a")


@pytest.mark.parametrize(
    ("protocol", "message", "assertion"),
    [
        ("aggregate-subs", (1,), (2,)),  # a match: its captures vector, no <pub f pat x>
        ("copy-up", record("a", 1), record("a", 2)),  # an offer up: the value, no <link f v>
    ],
)
def test_only_what_the_inbox_cannot_know_crosses_a_link(
    protocol: str, message: object, assertion: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over a chain n0 ← n1 ← n2, a message and an assertion made at n2 for an observer at
    n0 cross each link without the record the inbox at its far end makes of them."""
    overlay = Overlay(protocol, [0, 1], wire=True)
    work = Workload(overlay.scheduler)
    subscriber, publisher = work.attach(overlay.nodes[0]), work.attach(overlay.nodes[2])
    key = work.observe(subscriber, rec_group(A, [bind()]))
    overlay.settle()
    crossed: list[tuple] = []
    check = Relay._check_bare_event

    def spy(self: Relay, item: tuple) -> tuple:
        crossed.append(item)
        return check(self, item)

    monkeypatch.setattr(Relay, "_check_bare_event", spy)
    work.send(publisher, record("a", 1))
    work.assert_(publisher, record("a", 2))
    overlay.settle()
    _handle, watcher, _pattern = subscriber.observers[key]
    assert watcher.messages == [(1,)] and list(watcher.current.values()) == [(2,)]
    # [oid value] is a message, [oid value handle] an assertion; one of each per link
    assert sorted((len(item), repr(item[1])) for item in crossed) == [
        (2, repr(message)),
        (2, repr(message)),
        (3, repr(assertion)),
        (3, repr(assertion)),
    ]


def test_an_inbox_puts_what_it_receives_into_its_fragment_as_its_neighbours_pub() -> None:
    """Whatever a neighbour asserts or sends at an inbox enters the inbox's fragment only as
    ``<pub neighbour pat x>``: the neighbour cannot put any other record there."""
    overlay = Overlay("aggregate-subs", [0], wire=False)  # n0 ← n1
    n0, n1 = overlay.nodes
    work = Workload(overlay.scheduler)
    pattern = rec_group(A, [bind()])
    work.observe(work.attach(n0), pattern)
    overlay.settle()
    (sub,) = [
        v
        for v in n1.dataspace.assertions.values()
        if v.__class__ is Record and v.label == SUB and v.fields[0] == n0.fragment
    ]
    inbox = sub.fields[2]
    forged = record("local", Record(Symbol("Observe"), (pattern, inbox)))

    def intrude(t: Turn) -> None:
        t.publish(inbox, forged)

    overlay.scheduler.spawn(intrude, name="neighbour")
    overlay.settle()
    held = list(n0.dataspace.assertions.values())
    assert forged not in held
    assert Record(PUB, (n1.fragment, sub.fields[1], forged)) in held


def test_a_copy_up_inbox_puts_what_it_receives_into_its_fragment_as_its_childs_link() -> None:
    """Whatever a child asserts or sends at its inbox enters the parent's fragment only as
    ``<link child v>``: the child cannot pass a record off as local, or as an answer."""
    overlay = Overlay("copy-up", [0], wire=False)  # n0 ← n1
    n0, n1 = overlay.nodes
    inbox = n1.protocol.offers[n1.fragment].parent  # type: ignore[attr-defined]
    assert inbox is not None and inbox != n0.fragment
    forged = [record("link", False, record("a", 1)), Record(FROM_UPLINK, (inbox, (1,)))]

    def intrude(t: Turn) -> None:
        for value in forged:
            t.publish(inbox, value)

    overlay.scheduler.spawn(intrude, name="child")
    overlay.settle()
    held = list(n0.dataspace.assertions.values())
    assert not any(value in held for value in forged)
    assert all(Record(LINK, (n1.fragment, value)) in held for value in forged)
