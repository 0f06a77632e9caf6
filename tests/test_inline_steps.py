"""Rule steps run inline: an event an actor sends to one of its own relays, deliveries or
``during`` entities is handled inside the sending turn, not in a turn of its own.

This is what takes a turn per rule per event per hop out of the node's message path; the order
of events is unchanged (``tests/test_event_order.py`` and the history property check that).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from feds.actor import Actor, Entity, Facet, Handle, Ref, Scheduler, Turn, TurnAction
from feds.dataspace import Dataspace
from feds.pattern_forms import bind, rec_group
from feds.protocols import protocol_names
from feds.reactive import RelayEntity, during, relay
from feds.sim.reference import Workload
from feds.values import Symbol, Value, record
from tests.recording import Recorder
from tests.test_federation import Overlay

A = Symbol("a")


class _Step(Entity):
    """Passes every event on to ``out`` (an inline rule step when ``inline`` is set)."""

    def __init__(self, out: Ref, inline: bool) -> None:
        self.out = out
        self.inline = inline
        self.handles: dict[Handle, Handle] = {}

    def on_publish(self, turn: Turn, value: Value, handle: Handle) -> None:
        self.handles[handle] = turn.publish(self.out, value)

    def on_retract(self, turn: Turn, handle: Handle) -> None:
        turn.retract(self.handles.pop(handle))

    def on_message(self, turn: Turn, value: Value) -> None:
        turn.message(self.out, value)


@pytest.mark.parametrize("inline", [True, False], ids=["inline", "queued"])
def test_an_inline_step_runs_in_the_sending_turn_in_order(inline: bool) -> None:
    sched = Scheduler()
    seen = Recorder()
    refs: dict[str, Ref] = {}

    def boot(t: Turn) -> None:
        out = Ref(sched.spawn(lambda _t: None, name="observer").root, seen)
        refs["step"] = t.ref(_Step(out, inline))

    sched.spawn(boot)
    sched.run_until_idle()
    step = refs["step"]
    before = sched.turns_run

    def act(t: Turn) -> None:
        h = t.publish(step, record("a", 1))
        t.message(step, record("a", 2))
        t.retract(h)

    sched.enqueue(step.actor, step.facet, act)
    sched.run_until_idle()
    # the step's own turn, then the observer's; a queued step costs one turn more
    assert sched.turns_run - before == (2 if inline else 3)
    assert seen.events == [("+", record("a", 1)), ("!", record("a", 2)), ("-", record("a", 1))]


def test_events_from_another_actor_still_take_a_turn() -> None:
    sched = Scheduler()
    seen = Recorder()
    refs: dict[str, Ref] = {}

    def boot(t: Turn) -> None:
        target = t.ref(seen)
        refs["step"] = t.ref(RelayEntity(lambda v: (target, v)))

    sched.spawn(boot)
    sched.run_until_idle()
    before = sched.turns_run
    sched.spawn(lambda t: t.message(refs["step"], record("a", 1)))
    sched.run_until_idle()
    assert sched.turns_run - before == 3  # the sender's, the relay's, the recorder's
    assert seen.events == [("!", record("a", 1))]


Setup = Callable[[Turn, Ref, TurnAction], None]


def _dataspace_with(setup: Setup) -> tuple[Scheduler, Actor, Ref, Recorder]:
    """An actor holding a dataspace; ``setup(turn, ds, forward)`` installs the rules under test,
    where ``forward`` (run in a turn) relays each ``<a x>`` to a recorder as ``<got x>``."""
    sched = Scheduler()
    seen = Recorder()
    refs: dict[str, Ref] = {}

    def boot(t: Turn) -> None:
        ds = refs["ds"] = t.ref(Dataspace())
        target = t.ref(seen)

        def forward(t: Turn) -> None:
            relay(t, ds, rec_group(A, [bind()]), lambda c: (target, record("got", c[0])))

        setup(t, ds, forward)

    actor = sched.spawn(boot)
    sched.run_until_idle()
    return sched, actor, refs["ds"], seen


@pytest.mark.parametrize("kind", ["message", "assertion"])
def test_an_inline_step_in_a_stopped_facet_hears_nothing(kind: str) -> None:
    """The dataspace hears the event before the retraction of the step's Observe (adds come
    first in a turn), so the index still names the step: it must not hear it."""
    facets: list[Facet] = []
    sched, actor, ds, seen = _dataspace_with(
        lambda t, _ds, forward: facets.append(t.new_facet(forward))
    )

    def act(t: Turn) -> None:
        t.stop(facets[0])
        (t.message if kind == "message" else t.publish)(ds, record("a", 1))

    sched.enqueue(actor, actor.root, act)
    sched.run_until_idle()
    assert seen.events == [] and not seen.live


def test_a_rule_stops_in_the_turn_its_match_goes() -> None:
    """``during`` is a rule step too: its facet (and the relays in it) stop as the match goes,
    so a message arriving in the next turn no longer reaches them, as with one dataspace."""
    sched, actor, ds, seen = _dataspace_with(
        lambda t, ds, forward: during(t, ds, rec_group(Symbol("on"), []), forward)
    )
    handle: list[Handle] = []
    sched.enqueue(actor, actor.root, lambda t: handle.append(t.publish(ds, record("on"))))
    sched.run_until_idle()
    sched.enqueue(actor, actor.root, lambda t: t.message(ds, record("a", 1)))
    sched.enqueue(actor, actor.root, lambda t: t.retract(handle[0]))
    sched.enqueue(actor, actor.root, lambda t: t.message(ds, record("a", 2)))
    sched.run_until_idle()
    assert seen.events == [("!", record("got", 1))]


TURNS = {"copy-up": 4, "observer-flood": 5, "aggregate-subs": 4}
"""Turns per message from a client at n2 to an observer at n0 (over relays carrying real
frames; clients' turns included). With every rule step in a turn of its own: 13, 15, 17; with
a turn of each relay actor sending to the far side (before :meth:`feds.relay.Relay.take`):
10, 13, 13; with a turn of each relay actor applying what arrives (before it applied a packet
as it arrives, :meth:`feds.relay.Relay._apply_now`): 8, 11, 11. copy-up's 6 became 8 when a
child's offers went to its inbox at the parent (one turn of the inbox per hop up), as
aggregate-subs' answers go to theirs. aggregate-subs' 9 became 8 when its next-hop rule took the
publisher's node's local matches from ``<local …>`` (no ``<pub n2 pat vs>`` turn at n2).
copy-up's 8, observer-flood's 9 and aggregate-subs' 8 became 4, 5 and 4 when a message crossing
n1 and arriving at n0 followed its route there (:mod:`feds.routes`): no turn of those nodes at
all, only the client's, n2's (the client reaches n2 by refs here, not over a relay, so it takes
the turns: local access and the fragment, and for observer-flood the fragment again for the
``<at e x>`` its answer makes) and the watcher's."""


@pytest.mark.parametrize("protocol", protocol_names())
def test_turns_per_message_over_a_chain(protocol: str) -> None:
    overlay = Overlay(protocol, [0, 1], wire=True)  # n0 ← n1 ← n2
    work = Workload(overlay.scheduler)
    subscriber, publisher = work.attach(overlay.nodes[0]), work.attach(overlay.nodes[2])
    key = work.observe(subscriber, rec_group(A, [bind()]))
    overlay.settle()
    before = overlay.scheduler.turns_run
    work.send(publisher, record("a", 1))
    overlay.settle()
    _handle, watcher, _pattern = subscriber.observers[key]
    assert watcher.messages == [(1,)]
    assert overlay.scheduler.turns_run - before == TURNS[protocol]


def test_a_stopped_dataspace_withdraws_what_its_inline_rule_steps_were_shown() -> None:
    """A dataspace shows the relays of its own actor their captures without handles the actor
    tracks (``Turn.publish_untracked``); when the facet holding the dataspace stops, the relays
    must still see them go, and so must whatever the relays asserted elsewhere."""
    sched = Scheduler()
    seen = Recorder()
    facets: dict[str, Facet] = {}

    def boot(t: Turn) -> None:
        out = Ref(sched.spawn(lambda _t: None, name="observer").root, seen)
        box: list[Ref] = []
        facets["ds"] = t.new_facet(lambda f: box.append(f.ref(Dataspace())))
        (ds,) = box
        relay(t, ds, rec_group(A, [bind()]), lambda c: (out, record("seen", c[0])))
        t.publish(ds, record("a", 1))
        t.publish(ds, record("a", 2))

    sched.spawn(boot)
    sched.run_until_idle()
    assert set(seen.live.values()) == {record("seen", 1), record("seen", 2)}

    def stop(t: Turn) -> None:
        t.stop(facets["ds"])

    actor = facets["ds"].actor
    sched.enqueue(actor, actor.root, stop)
    sched.run_until_idle()
    assert seen.live == {}
    gone = [value for kind, value in seen.events if kind == "-"]
    assert len(gone) == 2 and set(gone) == {record("seen", 1), record("seen", 2)}


def test_a_relay_withdraws_what_it_asserted_in_its_own_actor_when_its_facet_stops() -> None:
    """A relay re-asserts into a dataspace of its own actor without a handle the actor tracks
    (``Turn.publish_untracked``); when the relay's facet stops, what it asserted there must go
    all the same, in that turn, and the actor holds no handle for it at any time."""
    sched = Scheduler()
    seen = Recorder()
    facets: dict[str, Facet] = {}

    def boot(t: Turn) -> None:
        ds = t.ref(Dataspace())
        relay(t, ds, rec_group(Symbol("b"), [bind()]), lambda c: (t.ref(seen), c[0]))

        def forward(f: Turn) -> None:
            relay(f, ds, rec_group(A, [bind()]), lambda c: (ds, record("b", c[0])))

        facets["relay"] = t.new_facet(forward)
        t.publish(ds, record("a", 1))
        t.publish(ds, record("a", 2))

    actor = sched.spawn(boot)
    sched.run_until_idle()
    assert set(seen.live.values()) == {1, 2}
    assert len(facets["relay"].outbound) == 1  # its Observe, not what it relayed
    sched.enqueue(actor, actor.root, lambda t: t.stop(facets["relay"]))
    sched.run_until_idle()
    assert seen.live == {}
    assert sorted(value for kind, value in seen.events if kind == "-") == [1, 2]
