"""Routing by the relay (:mod:`feds.routing`): a message crosses an idle node in the turn of the
relay it came from, by the node's own message steps, and only when no earlier event from that
link could still be behind it in the node's queue.
"""

from __future__ import annotations

import pytest

from feds.actor import Ref, Scheduler, Turn
from feds.dataspace import Dataspace
from feds.pattern_forms import bind, rec_group
from feds.protocols import protocol_names
from feds.reactive import RelayEntity, during, on_message, relay
from feds.routing import Router
from feds.sim.reference import Watcher, Workload
from feds.values import Symbol, Value, record
from tests.recording import Recorder
from tests.test_federation import Overlay

A = Symbol("a")
B = Symbol("b")


def _node_with_rules(sched: Scheduler, rules) -> tuple[Ref, Recorder]:  # type: ignore[no-untyped-def]
    """A dataspace in an actor of its own, with ``rules(t, ds, out)`` installed in it; ``out``
    is an observer in another actor."""
    seen = Recorder()
    refs: list[Ref] = []

    def boot(t: Turn) -> None:
        ds = t.ref(Dataspace())
        out = Ref(sched.spawn(lambda _t: None, name="observer").root, seen)
        rules(t, ds, out)
        refs.append(ds)

    sched.spawn(boot, name="node")
    sched.run_until_idle()
    return refs[0], seen


def _two_relays(t: Turn, ds: Ref, out: Ref) -> None:
    # <a x> becomes <b x> in the same dataspace (a message to a dataspace waits for the step
    # that sent it), and every <b x> goes to out; a during without a message handler hears
    # nothing of messages.
    relay(t, ds, rec_group(A, [bind()]), lambda c: (ds, record("b", c[0])))
    relay(t, ds, rec_group(B, [bind()]), lambda c: (out, record("got", c[0])))
    during(t, ds, rec_group(A, [bind()]), lambda t, x: None)


def test_route_sends_what_the_nodes_turns_would_send() -> None:
    sched = Scheduler()
    ds, seen = _node_with_rules(sched, _two_relays)
    sent = Router().route(ds, record("a", 1))
    assert sent is not None
    assert [(ref.entity, value) for ref, value in sent] == [(seen, record("got", 1))]
    assert seen.events == []  # routing only computes: the caller sends
    sched.enqueue(ds.actor, ds.actor.root, lambda t: t.message(ds, record("a", 1)))
    sched.run_until_idle()
    assert seen.events == [("!", record("got", 1))]


def test_route_leaves_a_step_that_is_not_a_message_step_to_the_node() -> None:
    calls: list[Value] = []

    def rules(t: Turn, ds: Ref, out: Ref) -> None:
        on_message(t, ds, rec_group(A, [bind()]), lambda t, x: calls.append(x))

    sched = Scheduler()
    ds, _seen = _node_with_rules(sched, rules)
    assert Router().route(ds, record("a", 1)) is None
    assert calls == []


def test_route_leaves_a_failing_step_to_fail_in_the_nodes_turn() -> None:
    def rules(t: Turn, ds: Ref, out: Ref) -> None:
        relay(t, ds, rec_group(A, [bind()]), lambda c: (out, record("got", 1 // c[0])))

    sched = Scheduler()
    ds, seen = _node_with_rules(sched, rules)
    assert Router().route(ds, record("a", 0)) is None
    sent = Router().route(ds, record("a", 1))
    assert sent is not None and [(r.entity, v) for r, v in sent] == [(seen, record("got", 1))]


@pytest.mark.parametrize("protocol", protocol_names())
def test_a_message_crosses_an_idle_node_without_its_turns(protocol: str) -> None:
    overlay = Overlay(protocol, [0, 1], wire=True)  # n0 ← n1 ← n2
    work = Workload(overlay.scheduler)
    subscriber, publisher = work.attach(overlay.nodes[0]), work.attach(overlay.nodes[2])
    key = work.observe(subscriber, rec_group(A, [bind()]))
    overlay.settle()
    middle = overlay.nodes[1].actor
    before = middle.work
    work.send(publisher, record("a", 1))
    overlay.settle()
    assert subscriber.observers[key][1].messages == [(1,)]
    assert middle.work == before


@pytest.mark.parametrize("protocol", protocol_names())
def test_a_message_behind_an_assertion_queued_at_the_node_keeps_its_place(protocol: str) -> None:
    """The assertion and the message cross n2 → n1 as two packets that n1's relay applies
    before n1's actor runs: the assertion waits in n1's queue, so the message must too."""
    overlay = Overlay(protocol, [0, 1], wire=True)
    work = Workload(overlay.scheduler)
    subscriber, publisher = work.attach(overlay.nodes[0]), work.attach(overlay.nodes[2])
    arrivals: list[str] = []
    watcher = Watcher(lambda kind, _captures: arrivals.append(kind))
    work.observe(subscriber, rec_group(A, [bind()]), watcher)
    overlay.settle()
    work.assert_(publisher, record("a", 1))
    work.send(publisher, record("a", 2))
    overlay.settle()
    assert arrivals == ["+", "!"]


def test_route_skips_a_step_whose_facet_has_stopped() -> None:
    """As a turn skips an event for a stopped facet: a late message for a withdrawn relay (an
    aggregate-subs inbox whose subscription went) reaches no one."""
    facets = []

    def rules(t: Turn, ds: Ref, out: Ref) -> None:
        def inner(t: Turn) -> None:
            relay(t, ds, rec_group(A, [bind()]), lambda c: (out, record("got", c[0])))
            facets.append(t.ref(RelayEntity(lambda x: (out, x))))

        t.new_facet(inner)

    sched = Scheduler()
    ds, seen = _node_with_rules(sched, rules)
    inbox = facets[0]
    sent = Router().route(inbox, record("x"))
    assert sent is not None and [(r.entity, v) for r, v in sent] == [(seen, record("x"))]
    sched.enqueue(ds.actor, ds.actor.root, lambda t: t.stop(inbox.facet))
    sched.run_until_idle()
    assert Router().route(inbox, record("x")) == []
    assert Router().route(ds, record("a", 1)) == []
