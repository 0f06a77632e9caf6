"""Message routes (:mod:`feds.routes`): a message a node only passes on follows a route worked
out from the node's own steps, and that changes nothing anyone can see.

The backbone is a differential property: the same random workload on the same overlay, once
with routes and once with every message taking the nodes' turns, must give every observer the
very same history and every relay the very same bytes to send. With one scheduler and each
chunk of bytes followed by a run of the scheduler until it is idle, both runs take the same
steps but for the turns a route stands for, so they must agree exactly, not only up to the
freedom the history check of ``tests/test_federation.py`` allows.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from feds import relay as relay_module
from feds.actor import MESSAGE, PUBLISH, RETRACT, Actor, Entity, Facet, Handle, Ref, Scheduler, Turn
from feds.codec import encode, record_prefix
from feds.dataspace import Dataspace, observe
from feds.pattern_forms import DISCARD, bind, lit, rec_group
from feds.protocols import protocol_names
from feds.reactive import during, on_message, relay, relay_object
from feds.relay import CLIENT, Relay
from feds.routes import MAX_VARIANTS, derive, follow
from feds.runtime import NodeRuntime
from feds.sim.reference import Client, Workload
from feds.sim.runner import simulate
from feds.sim.workload import WorkloadSpec
from feds.topology import generate
from feds.values import Record, Symbol, Value, record
from tests.recording import Recorder
from tests.strategies import floats, ints, tagged, values

A, B = Symbol("a"), Symbol("b")
EXAMPLES = int(os.environ.get("FEDS_PROPERTY_EXAMPLES", "0"))
"""Examples per protocol and shape of the differential property for a long run (random ones),
as for ``tests/test_federation.py``; 0 (the default): the fast suite's fixed examples."""
if EXAMPLES:  # a long run takes as long as it takes
    pytestmark = pytest.mark.timeout(0)


# -- deriving a route ------------------------------------------------------------------------------


class _Actor:
    """An actor holding a dataspace and whatever the test sets up, and a recorder elsewhere."""

    def __init__(self) -> None:
        self.sched = Scheduler()
        self.seen = Recorder()
        holder: list[Facet] = []
        self.out = Ref(
            self.sched.spawn(lambda t: holder.append(t.facet), name="out").root, self.seen
        )
        self.sched.run_until_idle()
        self.refs: dict[str, Ref] = {}
        self.actor = self.sched.spawn(self._boot, name="node")
        self.sched.run_until_idle()
        self.sender = Actor(self.sched, "sender")  # stands for a relay applying a packet

    def _boot(self, turn: Turn) -> None:
        self.facet = turn.facet
        self.ds = turn.ref(Dataspace())

    def act(self, action) -> None:  # type: ignore[no-untyped-def]
        self.sched.enqueue(self.actor, self.facet, action)
        self.sched.run_until_idle()

    def entry(self, transform) -> Ref:  # type: ignore[no-untyped-def]
        """A relay object of the node's actor, made in a turn."""
        box: list[Ref] = []
        self.act(lambda t: box.append(relay_object(t, transform)))
        return box[0]

    def forward(self, pattern: Value, make=lambda c: c) -> None:  # type: ignore[no-untyped-def]
        """A rule relaying each match of ``pattern`` to the recorder as ``make(captures)``."""
        out = self.out
        self.act(lambda t: relay(t, self.ds, pattern, lambda c: (out, make(c))))

    def deliver(self, entry: Ref, *values: Value) -> bool:
        """Hand ``values`` to ``entry`` as a relay's packet would; True if a route took them."""
        batch = [(MESSAGE, entry, v, None) for v in values]
        routed = follow(self.sched, self.sender, {self.actor: batch})
        if not routed:
            self.sched.send(self.sender, {self.actor: batch})
        self.sched.run_until_idle()
        return routed


def test_a_step_that_passes_its_message_on_has_a_route_to_where_it_goes() -> None:
    node = _Actor()
    out = node.out
    entry = node.entry(lambda x: (out, x))
    route = derive(entry, 1)
    assert route.select is None  # it looked at nothing: any payload, sent as it came
    assert route.stages == (((out.actor, ((out, 0),)),),)
    assert node.deliver(entry, 1, "two", (3,))
    assert node.seen.events == [("!", 1), ("!", "two"), ("!", (3,))]


def test_a_route_passes_through_the_dataspace_and_its_rules() -> None:
    node = _Actor()
    out, ds = node.out, node.ds
    node.act(lambda t: relay(t, ds, rec_group(B, [bind()]), lambda c: (out, c[0])))
    entry = node.entry(lambda x: (ds, Record(B, (x,))))  # <b x> into the dataspace, x out
    route = derive(entry, "x")
    assert route.select is None and len(route.stages) == 1  # the dataspace's turn sends it
    turns = node.sched.turns_run
    assert node.deliver(entry, "x", 5)
    assert node.sched.turns_run - turns == 1  # the recorder's only
    assert node.seen.events == [("!", "x"), ("!", 5)]


def test_a_route_holds_for_the_payloads_the_steps_would_look_at_alike() -> None:
    """The step takes item 0 of a tuple: the route holds for tuples of the same length, with
    any items; another length gets a route of its own."""
    node = _Actor()
    out = node.out
    entry = node.entry(lambda c: (out, c[0]))
    route = derive(entry, ("x",))
    assert route.select is not None and route.stages == (((out.actor, ((out, 0),)),),)
    assert route.select(("y",)) == ("y",) and route.select((1, 2)) is None
    assert route.select("not a tuple") is None
    assert node.deliver(entry, ("x",), (2,), (3, 4))
    assert node.seen.events == [("!", "x"), ("!", 2), ("!", 3)]
    assert len(node.actor.routes[entry]) == 2  # type: ignore[index]


def test_a_route_sends_the_very_item_it_was_derived_with() -> None:
    node = _Actor()
    out = node.out
    second = node.entry(lambda c: (out, c[1]))
    swapped = node.entry(lambda c: (out, (c[1], c[0])))  # the same items, not as they came
    assert node.deliver(second, (1, 2))
    assert node.deliver(swapped, (1, 2), ("a", "b"))
    assert node.seen.events == [("!", 2), ("!", (2, 1)), ("!", ("b", "a"))]


class _CountingDataspace(Dataspace):
    """A dataspace that counts the messages it dispatches: not a pure step any more."""

    pure_messages = False

    def __init__(self) -> None:
        super().__init__()
        self.messages = 0

    def on_message(self, turn: Turn, value: Value) -> None:
        self.messages += 1
        super().on_message(turn, value)


def test_no_route_through_a_dataspace_whose_messages_are_not_pure() -> None:
    node = _Actor()
    out = node.out
    box: list[Ref] = []
    node.act(lambda t: box.append(t.ref(_CountingDataspace())))
    (ds,) = box
    node.act(lambda t: relay(t, ds, rec_group(B, [bind()]), lambda c: (out, c[0])))
    entry = node.entry(lambda x: (ds, Record(B, (x,))))
    assert derive(entry, 1).stages is None
    assert not node.deliver(entry, 1, 2)
    assert ds.entity.messages == 2  # type: ignore[attr-defined]
    assert node.seen.events == [("!", 1), ("!", 2)]


def test_a_rule_that_looks_inside_the_payload_makes_a_route_for_what_it_saw() -> None:
    node = _Actor()
    ds = node.ds
    node.forward(rec_group(B, [lit(1)]))  # the index compares the field with 1
    entry = node.entry(lambda x: (ds, Record(B, (x,))))
    one, two = derive(entry, 1), derive(entry, 2)
    assert one.select is not None and one.select(1) == ((),) and one.select(2) is None
    assert one.select(True) is None and one.select(1.0) is None  # type-exact, as the index
    assert len(one.stages) == 1 and two.stages == ()  # <b 2> goes nowhere
    assert node.deliver(entry, 1, 2, 1, True)
    assert node.seen.events == [("!", ()), ("!", ())]


def test_a_route_rebuilds_what_the_steps_built_around_the_payload() -> None:
    node = _Actor()
    ds = node.ds
    node.forward(rec_group(B, [bind()]), lambda c: record("got", c[0], "!"))
    entry = node.entry(lambda x: (ds, Record(B, (x,))))
    assert node.deliver(entry, 1, (2, 3))
    assert node.seen.events == [("!", record("got", 1, "!")), ("!", record("got", (2, 3), "!"))]


def test_a_payload_that_fits_none_of_the_entrys_many_routes_takes_the_turns() -> None:
    node = _Actor()
    ds = node.ds
    for value in range(MAX_VARIANTS + 1):  # a rule per constant: a route per constant
        node.forward(rec_group(B, [lit(value)]), lambda c, v=value: v)
    entry = node.entry(lambda x: (ds, Record(B, (x,))))
    assert node.deliver(entry, *range(MAX_VARIANTS))
    assert len(node.actor.routes[entry]) == MAX_VARIANTS  # type: ignore[index]
    assert not node.deliver(entry, MAX_VARIANTS)
    assert node.seen.events == [("!", v) for v in range(MAX_VARIANTS + 1)]


def test_no_route_through_a_step_that_is_not_pure() -> None:
    node = _Actor()
    ds, out = node.ds, node.out
    node.act(lambda t: on_message(t, ds, rec_group(B, [bind()]), lambda t, x: t.message(out, x)))
    entry = node.entry(lambda x: (ds, Record(B, (x,))))
    assert derive(entry, 7).stages is None
    assert not node.deliver(entry, 7)
    assert node.seen.events == [("!", 7)]


class _Publisher(Entity):
    """Asserts what it is sent: a step that does more than send messages."""

    pure_messages = True  # claimed; the route's turn refuses the publish all the same

    def __init__(self, target: Ref) -> None:
        self.target = target

    def on_message(self, turn: Turn, value: Value) -> None:
        turn.publish(self.target, value)


class _Failing(Entity):
    pure_messages = True

    def on_message(self, turn: Turn, value: Value) -> None:
        raise RuntimeError("this step always fails")


def test_no_route_through_a_step_that_asserts_or_fails_and_the_turns_do_what_they_do() -> None:
    node = _Actor()
    box: list[Ref] = []
    node.act(lambda t: box.extend([t.ref(_Publisher(node.out)), t.ref(_Failing())]))
    publisher, failing = box
    assert derive(publisher, 1).stages is None and derive(failing, 1).stages is None
    assert not node.deliver(publisher, 1)
    assert list(node.seen.live.values()) == [1]
    assert not node.deliver(failing, 1)
    assert node.sched.crashes and node.sched.crashes[0][0] is node.actor


class _InlineShower(Entity):
    """Shows an inline step of its own actor what it is sent, past the dispatch (as a
    dataspace shows its rule steps their captures): an assertion all the same."""

    pure_messages = True  # claimed, as _Publisher's

    def __init__(self, step: Ref) -> None:
        self.step = step

    def on_message(self, turn: Turn, value: Value) -> None:
        turn.publish_inline(self.step, value, next(turn.scheduler.handles))


class _Held(Entity):
    """An inline step keeping what it is shown."""

    inline = True
    pure_messages = True

    def __init__(self) -> None:
        self.held: dict[Handle, Value] = {}

    def on_publish(self, turn: Turn, value: Value, handle: Handle) -> None:
        self.held[handle] = value


def test_no_route_through_a_step_that_shows_an_inline_step_an_assertion() -> None:
    node = _Actor()
    held = _Held()
    box: list[Ref] = []
    node.act(lambda t: box.append(t.ref(_InlineShower(t.ref(held)))))
    assert derive(box[0], 1).stages is None
    assert not node.deliver(box[0], 1) and not node.deliver(box[0], 2)
    assert sorted(held.held.values()) == [1, 2]


class _Log(Entity):
    """Appends ``(name, value)`` for each message to a log shared with others."""

    def __init__(self, name: str, log: list, forward: Ref | None = None) -> None:
        self.name, self.log, self.forward = name, log, forward

    def on_message(self, turn: Turn, value: Value) -> None:
        self.log.append((self.name, value))
        if self.forward is not None:
            turn.message(self.forward, value)


class _Tee(Entity):
    """A pure step sending each message to each of ``targets`` in turn."""

    pure_messages = True

    def __init__(self, *targets: Ref) -> None:
        self.targets = targets

    def on_message(self, turn: Turn, value: Value) -> None:
        for target in self.targets:
            turn.message(target, value)


def test_a_route_sends_its_stages_in_the_order_the_turns_commit() -> None:
    """The entry hands the message to a relay into its dataspace (inline), whose rule sends it
    to ``second`` in the dataspace's turn, and to ``first`` itself: the turns deliver to
    ``first`` before ``second``, and so must the route."""
    node = _Actor()
    ds = node.ds
    log: list = []
    first, second = (Ref(node.out.facet, _Log(name, log)) for name in ("first", "second"))
    node.act(lambda t: relay(t, ds, rec_group(B, [bind()]), lambda c: (second, c[0])))
    into = node.entry(lambda x: (ds, Record(B, (x,))))
    box: list[Ref] = []
    node.act(lambda t: box.append(t.ref(_Tee(into, first))))
    route = derive(box[0], 1)
    assert route.stages is not None and len(route.stages) == 2
    assert node.deliver(box[0], 1)
    assert log == [("first", 1), ("second", 1)]


def test_a_step_sending_to_its_own_actor_behind_other_work_makes_no_route() -> None:
    """A batch to an entity of its own actor that is not a dataspace is queued behind what the
    turn sent elsewhere: a route, sending everything at once, would change the order."""
    node = _Actor()
    log: list = []
    box: list[Ref] = []
    sched = node.sched
    far = sched.spawn(lambda t: None, name="far")
    near = sched.spawn(lambda t: None, name="near")
    sched.run_until_idle()
    last = Ref(far.root, _Log("last", log))
    box.append(Ref(near.root, _Log("near", log, forward=last)))  # forwards in a turn of its own
    node.act(lambda t: box.append(t.ref(_Tee(last))))  # pure, but neither inline nor prompt
    node.act(lambda t: box.append(t.ref(_Tee(box[0], box[1]))))
    entry = box[2]
    assert derive(entry, 1).stages is None
    assert not node.deliver(entry, 1)
    assert log == [("near", 1), ("last", 1), ("last", 1)]


def test_a_route_has_no_effect_while_it_is_worked_out() -> None:
    """A step that claims to be pure but asserts is refused before anything happens."""
    node = _Actor()
    log: list = []
    box: list[Ref] = []

    class _Inline(Entity):
        inline = True
        pure_messages = True

        def on_publish(self, turn: Turn, value: Value, handle: Handle) -> None:
            log.append(value)

    node.act(lambda t: box.append(t.ref(_Inline())))
    node.act(lambda t: box.append(t.ref(_Publisher(box[0]))))
    assert derive(box[1], 1).stages is None
    assert log == []


def test_no_route_into_an_actor_that_crashed() -> None:
    node = _Actor()
    out = node.out
    entry = node.entry(lambda x: (out, x))
    assert node.deliver(entry, 1)
    box: list[Ref] = []
    node.act(lambda t: box.append(t.ref(_Failing())))
    node.sched.send(node.sender, {node.actor: [(MESSAGE, box[0], 0, None)]})
    node.sched.run_until_idle()
    assert not node.actor.alive
    assert not node.deliver(entry, 2)
    assert node.seen.events == [("!", 1)]


def test_steps_that_keep_sending_to_their_own_actor_make_no_route() -> None:
    """Two dataspaces of the node hand ``<echo x>`` to each other forever: the turns would
    never end, and the route is refused rather than worked out forever."""
    node = _Actor()
    ds = node.ds
    box: list[Ref] = []
    node.act(lambda t: box.append(t.ref(Dataspace())))
    (other,) = box
    echo = rec_group(Symbol("echo"), [bind()])
    for here, there in ((ds, other), (other, ds)):
        node.act(
            lambda t, here=here, there=there: relay(
                t, here, echo, lambda c, there=there: (there, record("echo", c[0]))
            )
        )
    entry = node.entry(lambda x: (ds, record("echo", x)))
    assert derive(entry, 1).stages is None


def test_constants_a_route_sends_stay_type_exact() -> None:
    """``1`` and ``#t`` are two values: a route sending both sends both."""
    node = _Actor()
    out = node.out
    box: list[Ref] = []
    node.act(lambda t: box.append(t.ref(_Tee(*(t.ref(_Constant(out, c)) for c in (1, True))))))
    assert node.deliver(box[0], "x")
    assert node.seen.events == [("!", (1, "x")), ("!", (True, "x"))]
    assert [type(v[0]) for _k, v in node.seen.events] == [int, bool]


class _Constant(Entity):
    """Sends ``(constant, message)`` on: a route's template with a constant in it."""

    inline = True
    pure_messages = True

    def __init__(self, target: Ref, constant: Value) -> None:
        self.target, self.constant = target, constant

    def on_message(self, turn: Turn, value: Value) -> None:
        turn.message(self.target, (self.constant, value))


# -- when a route stops holding ------------------------------------------------------------------


def _forwarding_entry(node: _Actor) -> Ref:
    """An entry of ``node`` putting ``<b x>`` into its dataspace, whose rule sends ``x`` out."""
    node.forward(rec_group(B, [bind()]), lambda c: c[0])
    return node.entry(lambda x: (node.ds, Record(B, (x,))))


def test_a_new_observer_ends_the_route_that_did_not_know_it() -> None:
    node = _Actor()
    entry = _forwarding_entry(node)
    assert node.deliver(entry, 1)
    node.forward(rec_group(B, [lit(1)]))  # an assertion at the dataspace
    assert node.actor.routes is None
    assert node.deliver(entry, 1)  # a new route, which knows the new rule
    assert node.seen.events == [("!", 1), ("!", 1), ("!", ())]


def test_a_route_through_a_stopped_facet_is_dropped() -> None:
    node = _Actor()
    ds, out = node.ds, node.out
    facets: list[Facet] = []
    node.act(
        lambda t: facets.append(
            t.new_facet(lambda f: relay(f, ds, rec_group(B, [bind()]), lambda c: (out, c[0])))
        )
    )
    entry = node.entry(lambda x: (ds, Record(B, (x,))))
    assert node.deliver(entry, 1)
    node.act(lambda t: t.stop(facets[0]))
    assert node.actor.routes is None
    assert node.deliver(entry, 2)  # a new route, which goes nowhere
    assert node.seen.events == [("!", 1)]


class _Switch(Entity):
    """Sends each message to its current target: a pure step whose state only an action or a
    handler that is not pure changes."""

    pure_messages = True

    def __init__(self, target: Ref) -> None:
        self.target = target

    def on_message(self, turn: Turn, value: Value) -> None:
        turn.message(self.target, value)


def _switch(node: _Actor) -> tuple[_Switch, Ref, Recorder]:
    """A switch in the node's actor sending to the recorder, and a second recorder."""
    box: list[Ref] = []
    node.act(lambda t: box.append(t.ref(_Switch(node.out))))
    return box[0].entity, box[0], Recorder()  # type: ignore[return-value]


def test_an_action_of_the_actor_ends_its_routes() -> None:
    node = _Actor()
    switch, entry, other = _switch(node)
    assert node.deliver(entry, 1)
    elsewhere = Ref(node.out.facet, other)
    node.act(lambda t: setattr(switch, "target", elsewhere))  # sends nothing to the actor
    assert node.deliver(entry, 2)
    assert node.seen.events == [("!", 1)] and other.events == [("!", 2)]


def test_a_message_to_a_step_that_is_not_pure_ends_the_routes_of_its_actor() -> None:
    node = _Actor()
    ds = node.ds
    switch, entry, other = _switch(node)
    elsewhere = Ref(node.out.facet, other)

    def handler(t: Turn) -> None:
        switch.target = elsewhere

    node.act(lambda t: on_message(t, ds, rec_group(A, []), handler))
    assert node.deliver(entry, 1)
    node.sched.send(node.sender, {node.actor: [(MESSAGE, ds, record("a"), None)]})  # no action
    node.sched.run_until_idle()
    assert node.deliver(entry, 2)
    assert node.seen.events == [("!", 1)] and other.events == [("!", 2)]


def _publish_from_elsewhere(node: _Actor, target: Ref, value: Value) -> int:
    """Assert ``value`` at ``target`` as a relay's packet would (no action of the node)."""
    handle = next(node.sched.handles)
    node.sched.send(node.sender, {node.actor: [(PUBLISH, target, value, handle)]})
    node.sched.run_until_idle()
    return handle


def _retract_from_elsewhere(node: _Actor, target: Ref, handle: int) -> None:
    node.sched.send(node.sender, {node.actor: [(RETRACT, target, None, handle)]})
    node.sched.run_until_idle()


def test_a_new_observer_ends_the_routes_that_did_not_know_it() -> None:
    node = _Actor()
    ds, out = node.ds, node.out
    entry = _forwarding_entry(node)
    assert node.deliver(entry, 1)
    other = Recorder()
    watching = observe(rec_group(B, [bind()]), Ref(out.facet, other))
    handle = _publish_from_elsewhere(node, ds, watching)
    assert node.actor.routes is None
    assert node.deliver(entry, 2)
    _retract_from_elsewhere(node, ds, handle)  # and a withdrawn one
    assert node.actor.routes is None
    assert node.deliver(entry, 3)
    assert node.seen.events == [("!", 1), ("!", 2), ("!", 3)]
    assert other.events == [("!", (2,))]


def test_data_entering_the_dataspace_leaves_the_routes_standing() -> None:
    """Assertions that are not Observes change no handler: a message's route is the same."""
    node = _Actor()
    ds = node.ds
    entry = _forwarding_entry(node)
    assert node.deliver(entry, 1)
    routes = node.actor.routes
    handle = _publish_from_elsewhere(node, ds, record("b", "held"))
    _retract_from_elsewhere(node, ds, handle)
    assert node.actor.routes is routes and node.deliver(entry, 2)
    assert node.seen.events == [("!", 1), ("+", "held"), ("-", "held"), ("!", 2)]


def test_a_rule_that_comes_or_goes_with_a_match_ends_the_routes() -> None:
    """``during`` makes a facet per match and stops it when the match goes: both end the routes,
    though neither is an action of the node nor an Observe from elsewhere."""
    node = _Actor()
    ds, out = node.ds, node.out
    on = rec_group(Symbol("on"), [])

    def forward(t: Turn) -> None:
        relay(t, ds, rec_group(B, [bind()]), lambda c: (out, c[0]))

    node.act(lambda t: during(t, ds, on, forward))
    entry = node.entry(lambda x: (ds, Record(B, (x,))))
    assert node.deliver(entry, 1)  # no rule yet: a route to nowhere
    handle = _publish_from_elsewhere(node, ds, record("on"))
    assert node.actor.routes is None
    assert node.deliver(entry, 2)
    assert node.actor.routes
    _retract_from_elsewhere(node, ds, handle)
    assert node.actor.routes is None
    assert node.deliver(entry, 3)
    assert node.seen.events == [("!", 2)]


def test_a_step_set_up_in_a_new_facet_ends_the_routes() -> None:
    """State a pure step reads may change as a facet is made (copy-up's uplink gives its offers
    a parent so): the routes go, though nothing asserted is an Observe."""
    node = _Actor()
    ds = node.ds
    switch, entry, other = _switch(node)
    elsewhere = Ref(node.out.facet, other)
    node.act(
        lambda t: during(t, ds, rec_group(Symbol("on"), []), lambda f: _aim(switch, elsewhere))
    )
    assert node.deliver(entry, 1)
    _publish_from_elsewhere(node, ds, record("on"))
    assert node.deliver(entry, 2)
    assert node.seen.events == [("!", 1)] and other.events == [("!", 2)]


def _aim(switch: _Switch, target: Ref) -> None:
    switch.target = target


def test_an_entry_whose_facet_stopped_follows_no_route() -> None:
    """An inbox goes with its facet; a message to it is dropped, as its turn would drop it."""
    node = _Actor()
    ds, out = node.ds, node.out
    box: list[Ref] = []

    def inbox(t: Turn) -> None:
        box.append(relay_object(t, lambda x: (out, x)))

    node.act(lambda t: during(t, ds, rec_group(Symbol("on"), []), inbox))
    handle = _publish_from_elsewhere(node, ds, record("on"))
    assert node.deliver(box[0], 1)
    _retract_from_elsewhere(node, ds, handle)  # the inbox's facet stops
    node.deliver(box[0], 2)  # (a new route, to nowhere: a stopped facet hears nothing)
    assert node.seen.events == [("!", 1)]


class _Aimer(Entity):
    """Points a switch at whatever is asserted to it: an entity that is not pure, whose events
    may change what a pure step does."""

    def __init__(self, switch: _Switch) -> None:
        self.switch = switch

    def on_publish(self, turn: Turn, value: Value, handle: Handle) -> None:
        self.switch.target = value  # type: ignore[assignment]


def test_an_event_for_an_entity_that_is_not_pure_ends_the_routes() -> None:
    node = _Actor()
    switch, entry, other = _switch(node)
    box: list[Ref] = []
    node.act(lambda t: box.append(t.ref(_Aimer(switch))))
    assert node.deliver(entry, 1)
    _publish_from_elsewhere(node, box[0], Ref(node.out.facet, other))
    assert node.deliver(entry, 2)
    assert node.seen.events == [("!", 1)] and other.events == [("!", 2)]


class _InlineAimer(_Aimer):
    inline = True  # a rule step of the node's own actor, which the dataspace shows its matches


def test_an_inline_step_that_is_not_pure_ends_the_routes_as_it_hears_an_assertion() -> None:
    node = _Actor()
    ds = node.ds
    switch, entry, other = _switch(node)
    box: list[Ref] = []
    node.act(lambda t: box.append(t.ref(_InlineAimer(switch))))
    aim = rec_group(Symbol("aim"), [bind()])
    node.act(lambda t: relay(t, ds, aim, lambda c: (box[0], c[0])))
    assert node.deliver(entry, 1)
    _publish_from_elsewhere(node, ds, record("aim", Ref(node.out.facet, other)))  # data only
    assert node.deliver(entry, 2)
    assert node.seen.events == [("!", 1)] and other.events == [("!", 2)]


def test_no_route_is_followed_while_anything_is_queued() -> None:
    node = _Actor()
    out = node.out
    entry = node.entry(lambda x: (out, x))
    batch = [(MESSAGE, entry, "second", None)]
    node.sched.enqueue(node.actor, node.facet, lambda t: t.message(out, "first"))
    assert not follow(node.sched, node.sender, {node.actor: batch})
    node.sched.run_until_idle()
    assert node.seen.events == [("!", "first")]
    inside: list[bool] = []  # nor from inside a turn, whose effects are not committed yet
    node.sched.spawn(lambda t: inside.append(follow(node.sched, node.sender, {node.actor: batch})))
    node.sched.run_until_idle()
    assert inside == [False]


# -- whole overlays: the same histories and bytes with and without routes -----------------------


VALUES = [record("a", 0), record("a", 1), record("b", 0, 1), record("b", 1, (2, "x"))]
PATTERNS = [
    rec_group(A, [bind()]),
    rec_group(A, [lit(1)]),
    rec_group(B, [bind(), DISCARD]),
    rec_group(B, [bind(), bind()]),
    rec_group(B, [DISCARD, bind()]),
]
SHAPES = {"chain": [0, 1, 2], "star": [0, 0, 0], "binary": [0, 0, 1, 1, 2, 2]}
OPS = ["assert", "retract", "observe", "unobserve", "send", "send", "send", "leave", "settle"]


class _Run:
    """One overlay on one scheduler; each chunk of bytes a link carries is followed by a run of
    the scheduler until it is idle, so that the nodes' queues are empty when a packet comes."""

    def __init__(self, protocol: str, parents: list[int]) -> None:
        self.scheduler = Scheduler()
        runtimes = [NodeRuntime(self.scheduler, f"n{i}", protocol) for i in range(len(parents) + 1)]
        self.runtimes = runtimes
        self.nodes = [r.node for r in runtimes]
        self.links = [
            (runtimes[child].uplink_relay(), runtimes[parent].accept_relay())
            for child, parent in enumerate(parents, start=1)
        ]
        self.sent: list[bytes] = []
        self.work = Workload(self.scheduler)
        self.settle()

    def client(self, node: int) -> tuple[Relay, Callable[[Value], None]]:
        """An application connected to ``node`` over a relay, as a client dials in: the node's
        end of the link, and a function that sends a message to the node's local access."""
        entry: list[Ref] = []

        def ready(turn: Turn, hello: object, initial: Ref) -> None:
            entry.append(initial)

        client = Relay(self.scheduler, "client", CLIENT, on_ready=ready)
        accepted = self.runtimes[node].accept_relay()
        self.links.append((client, accepted))
        self.settle()
        app = Actor(self.scheduler, "app")

        def send(value: Value) -> None:
            self.scheduler.enqueue(app, app.root, lambda t: t.message(entry[0], value))

        return accepted, send

    def settle(self, check: bool = True) -> None:
        for _ in range(100_000):
            self.scheduler.run_until_idle()
            moved = False
            for a, b in self.links:
                for source, sink in ((a, b), (b, a)):
                    data = source.data_to_send()
                    if data:
                        self.sent.append(data)
                        sink.receive(data)
                        self.scheduler.run_until_idle()
                        moved = True
            if not moved:
                break
        if not check:
            return
        assert not self.scheduler.crashes
        assert not any(a.closed or b.closed for a, b in self.links)


def _run(protocol: str, parents: list[int], ops: list[tuple[str, int, int]]) -> tuple:
    run = _Run(protocol, parents)
    work = run.work
    clients = [work.attach(node) for node in run.nodes]
    watchers = [Recorder() for _ in run.nodes]
    observing: list[tuple[int, int]] = []
    held: list[tuple[int, int]] = []
    for i, c in enumerate(clients):
        observing.append((i, work.observe(c, PATTERNS[i % len(PATTERNS)], watchers[i])))  # type: ignore[arg-type]
    run.settle()
    for kind, x, y in ops:
        i = x % len(clients)
        c = clients[i]
        if kind == "assert":
            held.append((i, work.assert_(c, VALUES[y % len(VALUES)])))
        elif kind == "retract" and held:
            j, key = held.pop(y % len(held))
            work.retract(clients[j], key)
        elif kind == "observe":
            observing.append((i, work.observe(c, PATTERNS[y % len(PATTERNS)], watchers[i])))  # type: ignore[arg-type]
        elif kind == "unobserve" and observing:
            j, key = observing.pop(y % len(observing))
            work.unobserve(clients[j], key)
        elif kind == "send":
            work.send(c, VALUES[y % len(VALUES)])
        elif kind == "leave" and len(clients) > 1:
            work.disconnect(c)
            clients.pop(i)
            held = [(j - (j > i), k) for j, k in held if j != i]
            observing = [(j - (j > i), k) for j, k in observing if j != i]
            watchers.append(watchers.pop(i))  # its history stays compared
        elif kind == "settle":
            run.settle()
        run.scheduler.run_until_idle()
    run.settle()
    histories = [w.events for w in watchers]
    fragments = [sorted(map(repr, n.dataspace.assertions.values())) for n in run.nodes]
    return histories, run.sent, fragments, run.scheduler.routed


SWITCHES = {
    "routes": (relay_module, "follow"),
    "lone packets": (relay_module.Relay, "_lone_message"),
}
"""What the property switches off in its second run: the routes (every message takes the
turns), or the relay's way with a packet of one message (``Relay._lone_message``: passed on
as bytes, or only its value decoded; every packet is then decoded whole and dispatched)."""


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("protocol", protocol_names())
@pytest.mark.parametrize("off", list(SWITCHES))
@settings(max_examples=EXAMPLES or 15, derandomize=not EXAMPLES, deadline=None, database=None)
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(OPS), st.integers(0, 100), st.integers(0, 100)),
        min_size=5,
        max_size=25,
    )
)
def test_routes_and_lone_packets_change_no_history_and_no_byte(
    off: str, protocol: str, shape: str, ops: list[tuple[str, int, int]]
) -> None:
    fast = _run(protocol, SHAPES[shape], ops)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(*SWITCHES[off], lambda *args: False)
        slow = _run(protocol, SHAPES[shape], ops)
    assert fast[:3] == slow[:3]
    if off == "lone packets":
        assert fast[3] == slow[3]
    else:
        assert slow[3] == 0
        if fast[3]:
            event("messages followed routes")


@pytest.mark.parametrize("protocol", protocol_names())
def test_the_simulator_measures_the_same_with_and_without_routes(protocol: str) -> None:
    """``feds simulate`` runs the real nodes: routes change its turns, not one link event,
    byte, latency or state figure."""
    topology = generate("random-tree:n=12", seed=3, base_port=0)
    spec = WorkloadSpec(events=150, churn=20.0, wildcards=0.2, selectivity=0.6, rate=300.0)
    routed = simulate(topology, protocol, spec, seed=11).to_json()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(relay_module, "follow", lambda *args: False)
        turns_only = simulate(topology, protocol, spec, seed=11).to_json()
    for run in (routed, turns_only):
        del run["summary"]["wall_seconds"]
    fewer = routed["summary"].pop("turns"), turns_only["summary"].pop("turns")
    assert routed == turns_only
    assert fewer[0] < fewer[1]


def _watched_chain(protocol: str) -> tuple[_Run, Client, Recorder]:
    """n0 ← n1 ← n2, a watcher of ``<a $x>`` at n0, and a client at n2 to publish."""
    run = _Run(protocol, [0, 1])
    work = run.work
    subscriber, publisher = work.attach(run.nodes[0]), work.attach(run.nodes[2])
    watcher = Recorder()
    work.observe(subscriber, rec_group(A, [bind()]), watcher)  # type: ignore[arg-type]
    run.settle()
    return run, publisher, watcher


@pytest.mark.parametrize("protocol", ["aggregate-subs", "observer-flood"])
def test_messages_crossing_a_chain_follow_routes_at_the_nodes_they_only_pass(protocol: str) -> None:
    run, publisher, watcher = _watched_chain(protocol)
    work = run.work
    for i in range(10):
        work.send(publisher, record("a", i))
    run.settle()
    assert watcher.events == [("!", (i,)) for i in range(10)]
    assert run.scheduler.routed == 20  # at n1 and at n0, each message


def test_a_subscriber_that_joins_later_is_not_missed_by_a_route() -> None:
    """n0 ← n1 ← n2 and n3 ← n1: messages from n2 to n0 follow a route at n1; when n3 subscribes
    too, its subscription reaches n1 as an assertion on a link, and the route makes way."""
    run = _Run("aggregate-subs", [0, 1, 1])
    work = run.work
    first, publisher, second = (work.attach(run.nodes[i]) for i in (0, 2, 3))
    seen = [Recorder(), Recorder()]
    work.observe(first, rec_group(A, [bind()]), seen[0])  # type: ignore[arg-type]
    run.settle()
    work.send(publisher, record("a", 1))
    run.settle()
    routed = run.scheduler.routed
    assert routed
    work.observe(second, rec_group(A, [bind()]), seen[1])  # type: ignore[arg-type]
    run.settle()
    work.send(publisher, record("a", 2))
    run.settle()
    assert run.scheduler.routed > routed
    assert seen[0].events == [("!", (1,)), ("!", (2,))] and seen[1].events == [("!", (2,))]


def test_copy_up_messages_follow_routes_that_check_they_are_not_observes() -> None:
    run, publisher, watcher = _watched_chain("copy-up")
    work = run.work
    work.send(publisher, record("a", 1))
    run.settle()
    assert watcher.events == [("!", (1,))]
    assert run.scheduler.routed == 2  # up at n1 (to n0's inbox), and down at n0


def test_a_route_is_followed_for_a_packet_only_if_every_event_of_it_has_one() -> None:
    """A packet mixing a message with a route and an assertion takes the turns, in order."""
    run, publisher, watcher = _watched_chain("aggregate-subs")
    work = run.work
    work.send(publisher, record("a", 1))
    work.assert_(publisher, record("a", 2))
    work.send(publisher, record("a", 3))
    run.settle()
    assert watcher.events == [("!", (1,)), ("+", (2,)), ("!", (3,))]


# -- lone messages passed on as their bytes (Relay._pass_on) -----------------------------------


PLAIN_VALUES = st.recursive(
    st.one_of(
        st.none(), st.booleans(), ints(), floats(), st.text(max_size=6), st.binary(max_size=6)
    ),
    lambda children: st.lists(children, max_size=3).map(tuple),
    max_leaves=8,
)
"""Values mostly of what msgpack encodes natively (a few of its integers are too big)."""
SOME_VALUES = st.one_of(PLAIN_VALUES, values())


def _sends(protocol: str, items: list[tuple[str, Value]], pass_on: bool = True) -> tuple:
    """The watcher's history, the bytes the links carried, and the messages n1 passed on as
    their bytes, when n2's client sends (or asserts and retracts, or n1's client observes
    ``<a $x>``) each of ``items`` along n0 ← n1 ← n2, settling after each (so each crosses
    each link in a packet of its own, as a round trip's message does)."""
    with pytest.MonkeyPatch.context() as patch:
        if not pass_on:
            patch.setattr(relay_module.Relay, "_pass_on", lambda *args: False)
        run, publisher, watcher = _watched_chain(protocol)
        work = run.work
        local = work.attach(run.nodes[1])
        for kind, value in items:
            if kind == "send":
                work.send(publisher, record("a", value))
            elif kind == "change":
                work.retract(publisher, work.assert_(publisher, record("a", value)))
            else:
                work.observe(local, rec_group(A, [bind()]), Recorder())  # type: ignore[arg-type]
            run.settle()
        passed = run.links[1][1].stats.passed_on  # n1's end of the link from n2
    history = [(kind, tagged(v)) for kind, v in watcher.events]  # a NaN equal to a NaN
    return history, run.sent, passed


@pytest.mark.parametrize("protocol", protocol_names())
@settings(max_examples=EXAMPLES or 40, derandomize=not EXAMPLES, deadline=None, database=None)
@given(
    items=st.lists(
        st.tuples(st.sampled_from(["send", "send", "send", "change", "observe"]), SOME_VALUES),
        min_size=1,
        max_size=12,
    )
)
def test_messages_passed_on_as_their_bytes_change_no_history_and_no_byte(
    protocol: str, items: list[tuple[str, Value]]
) -> None:
    """Against the same sends with every packet decoded, routed and encoded again: the very
    same history (values of every kind: the plain ones pass on as bytes, the others not) and
    the very same bytes on every link."""
    passed = _sends(protocol, items)
    decoded = _sends(protocol, items, pass_on=False)
    assert decoded[2] == 0
    assert passed[:2] == decoded[:2]
    if passed[2]:
        event("messages passed on as their bytes")


def _client_sends(
    protocol: str, values: list[tuple[str, Value]], pass_on: bool = True
) -> tuple[list, list[bytes], int]:
    """The watcher's history, the bytes every link carried, and the messages n2 passed on as
    their bytes, when a client of n2 dialled in over a relay sends each ``<label value>`` of
    ``values`` along n0 ← n1 ← n2 to a watcher of ``<a $x>`` at n0, settling after each."""
    with pytest.MonkeyPatch.context() as patch:
        if not pass_on:
            patch.setattr(relay_module.Relay, "_pass_on", lambda *args: False)
        run = _Run(protocol, [0, 1])
        watcher = Recorder()
        run.work.observe(run.work.attach(run.nodes[0]), rec_group(A, [bind()]), watcher)  # type: ignore[arg-type]
        entry, send = run.client(2)
        run.settle()
        for label, value in values:
            send(record(label, value))
            run.settle()
        passed = entry.stats.passed_on
    history = [(kind, tagged(v)) for kind, v in watcher.events]
    return history, run.sent, passed


@pytest.mark.parametrize("protocol", protocol_names())
@settings(max_examples=EXAMPLES or 40, derandomize=not EXAMPLES, deadline=None, database=None)
@given(
    values=st.lists(
        st.tuples(st.sampled_from(["a", "a", "a", "b"]), SOME_VALUES), min_size=1, max_size=10
    )
)
def test_a_clients_records_passed_on_as_their_fields_bytes_change_no_history_and_no_byte(
    protocol: str, values: list[tuple[str, Value]]
) -> None:
    """A client's ``<a x>`` enters at n2, whose route hands the record's fields to the
    captures of ``<a $x>`` (aggregate-subs): against the same sends with every packet
    decoded, the very same history and the very same bytes on every link, whatever the
    values (plain or not, repeated, so some are a slot of the client's cache)."""
    passed = _client_sends(protocol, values)
    decoded = _client_sends(protocol, values, pass_on=False)
    assert decoded[2] == 0
    assert passed[:2] == decoded[:2]
    if passed[2]:
        event("records passed on as their fields' bytes")


@settings(max_examples=60, derandomize=True, deadline=None, database=None)
@given(value=SOME_VALUES)
def test_the_entry_node_passes_on_as_bytes_exactly_the_records_with_plain_fields(
    value: Value,
) -> None:
    """aggregate-subs: at the client's node, ``<a x>`` with plain ``x`` goes on as the bytes of
    its field; any other takes the route's general path (the first worked the route out)."""
    history, _sent, passed = _client_sends("aggregate-subs", [("a", 0), ("a", value)])
    assert history == [("!", tagged((0,))), ("!", tagged((value,)))]
    assert passed == _plain(value)


def test_a_route_of_a_records_fields_knows_its_label_and_arity() -> None:
    """Local access and a rule binding each field look at the class, label and arity only
    and send the fields: such a route is marked (and only such a route)."""
    run = _Run("aggregate-subs", [0])
    watch = run.work.attach(run.nodes[0])
    run.work.observe(watch, rec_group(A, [bind(), bind()]), Recorder())  # type: ignore[arg-type]
    run.work.observe(watch, rec_group(B, [lit(1), bind()]), Recorder())  # type: ignore[arg-type]
    run.work.observe(watch, rec_group(B, [bind(), bind()]), Recorder())  # type: ignore[arg-type]
    run.settle()
    entry = run.nodes[1].access
    assert derive(entry, record("a", 1, 2)).fields_of == (A, 2)
    assert derive(entry, record("b", 1, 2)).fields_of is None  # a constant was looked at
    # <b 2 3> goes on as its fields, to <b $ $> only, after a look at 2 for <b 1 $>: that
    # route holds for <b 2 …> only, not for every <b _ _>
    assert derive(entry, record("b", 2, 3)).fields_of is None
    assert derive(entry, record("a", 1)).fields_of is None  # no rule: the route sends nothing
    assert record_prefix(A, 2) + encode(1) + encode(2) == encode(record("a", 1, 2))


def _plain(v: Value) -> bool:
    """Naively: whether ``v`` is made only of what msgpack encodes natively without a map."""
    if v.__class__ is tuple:
        return all(map(_plain, v))
    return (
        v is None
        or v.__class__ in (bool, float, str, bytes)
        or (v.__class__ is int and -(2**63) <= v < 2**64)
    )


@settings(max_examples=60, derandomize=True, deadline=None, database=None)
@given(value=SOME_VALUES)
def test_a_middle_node_passes_on_as_bytes_exactly_the_plain_messages(value: Value) -> None:
    """aggregate-subs' inboxes pass the captures on as they came: at n1, a message whose
    captures are plain (no ext type, no map) is passed on without being decoded, any other
    takes the route's general path; each reaches the watcher as it was sent."""
    history, _sent, passed = _sends("aggregate-subs", [("send", 0), ("send", value)])
    assert history == [("!", tagged((0,))), ("!", tagged((value,)))]
    assert passed == _plain(value)  # the first message worked out the route


def _inbox_frame(
    protocol: str = "aggregate-subs",
) -> tuple[_Run, Recorder, Callable[[bytes], bytes]]:
    """The chain of :func:`_watched_chain` with a route worked out at n1, and a function making
    the frame of a packet of one message from n2 to n1's inbox of any payload bytes."""
    run, publisher, watcher = _watched_chain(protocol)
    inbox = run.links[1][1]  # n1's end of the link from n2
    frames: list[bytes] = []
    receive = inbox.receive
    inbox.receive = lambda data: (frames.append(bytes(data)), receive(data))  # type: ignore[method-assign]
    for i in range(2):
        run.work.send(publisher, record("a", i))
        run.settle()
    del inbox.receive
    assert watcher.events == [("!", (0,)), ("!", (1,))]
    head = frames[-1][4 : 5 + len(relay_module._LONE_MESSAGE)]  # up to the oid of n1's entry
    assert head.startswith(relay_module._LONE_MESSAGE) and head[-1] < 0x80

    def frame(payload: bytes) -> bytes:
        body = head + payload
        return len(body).to_bytes(4, "big") + body

    return run, watcher, frame


def test_a_payload_encoded_otherwise_is_passed_on_and_arrives_as_what_it_encodes() -> None:
    run, watcher, frame = _inbox_frame()
    inbox = run.links[1][1]
    for payload in (
        b"\x91\xcd\x00\x05",
        b"\x91\xca\x3f\xc0\x00\x00",
    ):  # 5 in 3 bytes; 1.5 in 32 bits
        inbox.receive(frame(payload))
        run.settle()
    assert watcher.events[2:] == [("!", (5,)), ("!", (1.5,))]
    assert inbox.stats.passed_on == 3


NESTED_AT_THE_LIMIT = b"\x91" * 61 + b"\xc0"
"""Captures 61 arrays deep, 64 in the packet (its array, the events', the event's): the limit."""


def test_a_payload_as_deep_as_the_limit_allows_is_passed_on() -> None:
    run, watcher, frame = _inbox_frame()
    run.links[1][1].receive(frame(NESTED_AT_THE_LIMIT))
    run.settle()
    value: Value = None
    for _ in range(60):
        value = (value,)
    assert watcher.events[2:] == [("!", (value,))]
    assert run.links[1][1].stats.passed_on == 2


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"\x91\xa1\xff", "bad frame"),
        (b"\x91\xc1", "bad frame"),
        (b"\x91\x01\x02", "bad frame"),
        (b"\x92\x01", "bad frame"),
        (b"\x91" + NESTED_AT_THE_LIMIT, "bad frame: data nested deeper than max_depth (64)"),
    ],
    ids=["not-utf-8", "reserved-byte", "bytes-left-over", "bytes-missing", "too-deep"],
)
def test_bad_bytes_in_a_lone_message_close_the_link_they_came_on_and_go_no_further(
    payload: bytes, reason: str
) -> None:
    run, watcher, frame = _inbox_frame()
    inbox, uplink = run.links[1][1], run.links[0][0]
    sent = uplink.stats.events_out
    inbox.receive(frame(payload))
    run.scheduler.run_until_idle()
    assert inbox.closed and inbox.close_reason.startswith(reason)  # type: ignore[union-attr]
    assert not uplink.closed and uplink.stats.events_out == sent and uplink.data_to_send() == b""
    assert inbox.stats.passed_on == 1 and watcher.events == [("!", (0,)), ("!", (1,))]


@pytest.mark.parametrize("count", [1, 2, 5])
def test_lone_messages_of_one_read_leave_in_one_packet_as_their_turns_would_send_them(
    count: int,
) -> None:
    """A read of ``count`` lone messages to a routed entry: each is passed on as its bytes, the
    last one, into a link with nothing waiting, by writing its packet at once; the link to
    n0 carries one packet of all of them, byte for byte what the general path sends."""

    def out(pass_on: bool) -> bytes:
        with pytest.MonkeyPatch.context() as patch:
            if not pass_on:
                patch.setattr(relay_module.Relay, "_pass_on", lambda *args: False)
            run, watcher, frame = _inbox_frame()
            inbox, uplink = run.links[1][1], run.links[0][0]
            packets = uplink.stats.packets_out
            inbox.receive(b"".join(frame(b"\x91" + bytes([i])) for i in range(count)))
            run.scheduler.run_until_idle()
            data = uplink.data_to_send()
            assert uplink.stats.packets_out == packets + 1
            assert inbox.stats.passed_on == (1 + count if pass_on else 0)
            run.links[0][1].receive(data)
            run.settle()
            assert watcher.events[2:] == [("!", (i,)) for i in range(count)]
        return data

    assert out(True) == out(False)


def test_a_lone_message_is_not_passed_on_while_anything_is_queued() -> None:
    """Work queued at the node when the packet comes goes first: the message takes the
    general path, behind it."""
    run, watcher, frame = _inbox_frame()
    inbox = run.links[1][1]
    run.scheduler.spawn(lambda t: None, name="queued first")
    inbox.receive(frame(b"\x91\x02"))
    assert inbox.stats.passed_on == 1
    run.settle()
    assert watcher.events[2:] == [("!", (2,))]


def test_a_payload_longer_than_is_checked_in_one_call_takes_the_general_path() -> None:
    run, watcher, frame = _inbox_frame()
    big = b"x" * 4096
    run.links[1][1].receive(frame(b"\x91\xc5" + len(big).to_bytes(2, "big") + big))
    run.settle()
    assert watcher.events[2:] == [("!", (big,))]
    assert run.links[1][1].stats.passed_on == 1


def test_the_same_value_again_is_passed_on_as_it_came_not_as_the_links_cache_has_it() -> None:
    """A record in the captures is cached per link (sent again, it is a slot of n2's cache):
    the message is never passed on as bytes, and arrives whole each time."""
    run, publisher, watcher = _watched_chain("aggregate-subs")
    value = record("b", Symbol("x"), 1)
    for _ in range(3):
        run.work.send(publisher, record("a", value))
        run.settle()
    assert watcher.events == [("!", (value,))] * 3
    assert run.links[1][1].stats.passed_on == 0


def _crafted(protocol: str, payload: bytes, pass_on: bool) -> tuple:
    with pytest.MonkeyPatch.context() as patch:
        if not pass_on:
            patch.setattr(relay_module.Relay, "_pass_on", lambda *args: False)
        run, watcher, frame = _inbox_frame(protocol)
        run.links[1][1].receive(frame(payload))
        run.settle(check=False)
    closed = [(a.close_reason, b.close_reason) for a, b in run.links]
    crashes = [repr(error) for _actor, error in run.scheduler.crashes]
    return [(k, tagged(v)) for k, v in watcher.events], run.sent, closed, crashes


@pytest.mark.parametrize("protocol", protocol_names())
@pytest.mark.parametrize(
    "payload",
    [
        b"\x91\x05",
        b"\x92\x05\x06",
        b"\x90",
        b"\x05",
        b"\x91\x91\x05",
        b"\x92\x91\x05\x06",
        b"\xa1x",
    ],
    ids=["(5,)", "(5,6)", "()", "5", "((5,),)", "((5,),6)", "'x'"],
)
def test_a_packet_of_any_shape_to_a_routed_entry_does_what_its_turns_do(
    protocol: str, payload: bytes
) -> None:
    """A peer may send any payload to the entry a route was worked out for: one of another shape
    than the route's guards take does what the turns do with it, passed on or not."""
    assert _crafted(protocol, payload, True) == _crafted(protocol, payload, False)


@pytest.mark.parametrize("oid", [b"\xcc", b"\xcd\x00"], ids=["uint-8", "uint-16"])
def test_a_lone_message_whose_oid_is_encoded_wider_is_taken_as_the_same_oid(oid: bytes) -> None:
    run, watcher, frame = _inbox_frame("copy-up")  # decoded at n1: copy-up's route looks at it
    body = frame(b"")[4:]
    head, small = body[:-1], body[-1:]
    data = head + oid + small + encode(record("a", 7))
    run.links[1][1].receive(len(data).to_bytes(4, "big") + data)
    run.settle()
    assert watcher.events[2:] == [("!", (7,))]


def test_a_lone_message_to_an_oid_never_given_closes_the_link_it_came_on() -> None:
    run, watcher, frame = _inbox_frame("copy-up")
    head = frame(b"")[4:-1]
    data = head + b"\x7f" + encode(record("a", 7))
    inbox = run.links[1][1]
    inbox.receive(len(data).to_bytes(4, "big") + data)
    run.scheduler.run_until_idle()
    assert inbox.closed and inbox.close_reason == "unknown oid 127"
    assert watcher.events[2:] == []
