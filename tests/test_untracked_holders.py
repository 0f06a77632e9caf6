"""What asserts untracked (:class:`~feds.actor.HoldsUntracked`): a fragment's
:class:`~feds.protocols.Deliveries` (``x`` at ``t`` once however many rules ask, withdrawn when
the last asker goes or the askers' facet stops) and copy-up's offers to the parent (withdrawn
when the uplink goes, offered again with the next), assertion relays and a dataspace's
captures for observers of other actors (withdrawn when their facet stops); all withdrawn when
their actor crashes, which the actor's own withdrawal of what it tracks does not cover."""

from __future__ import annotations

import gc
from collections.abc import Callable

from feds.actor import Entity, Facet, Handle, Ref, Scheduler, Turn, TurnAction
from feds.dataspace import Dataspace, observe
from feds.pattern_forms import bind, rec_group
from feds.protocols import Deliveries, deliver
from feds.protocols.copy_up import _Offers
from feds.reactive import pattern_value, relay
from feds.values import Symbol, Value, record

A = Symbol("a")
B = Symbol("b")
C = Symbol("c")


class _Recorder(Entity):
    """The target, in an actor of its own: notes what it is shown."""

    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.live: dict[Handle, Value] = {}

    def on_publish(self, turn: Turn, value: Value, handle: Handle) -> None:
        self.events.append(("+", value))
        self.live[handle] = value

    def on_retract(self, turn: Turn, handle: Handle) -> None:
        self.events.append(("-", self.live.pop(handle)))


class _World:
    """A scheduler with a recorder in an actor of its own (the target of what a node asserts
    elsewhere), and a node actor booted by ``boot``."""

    def __init__(self, boot: TurnAction) -> None:
        self.sched = Scheduler()
        self.target = _Recorder()
        elsewhere = self.sched.spawn(lambda _t: None, name="elsewhere")
        self.sched.run_until_idle()
        self.target_ref = Ref(elsewhere.root, self.target)
        self.actor = self.sched.spawn(boot, name="node")
        self.sched.run_until_idle()

    def act(self, action: Callable[[Turn], Value]) -> Value:
        """Run ``action`` in a turn of the node's root facet; what it returned (None if the
        turn failed)."""
        out: list[Value] = []
        self.sched.enqueue(self.actor, self.actor.root, lambda t: out.append(action(t)))
        self.sched.run_until_idle()
        return out[0] if out else None

    def crash(self) -> None:
        def fail(turn: Turn) -> None:
            raise RuntimeError("broken invariant")

        self.act(fail)
        assert self.sched.crashes


class _Node(_World):
    """A node actor: a dataspace in its root facet, one Deliveries made in ``facet`` (a child
    of the root), and relays delivering each ``<a $x>`` and ``<b $x>`` as ``x`` at the target,
    made in that same facet."""

    def __init__(self) -> None:
        self.ds: Ref | None = None
        self.facet: Facet | None = None

        def boot(t: Turn) -> None:
            self.ds = t.ref(Dataspace())

            def askers(t2: Turn) -> None:
                sink = Deliveries(t2)
                for label in (A, B):
                    deliver(t2, self.ds, rec_group(label, [bind()]), sink, self._route)

            self.facet = t.new_facet(askers)

        super().__init__(boot)

    def _route(self, captures: tuple) -> tuple[Ref, Value]:
        return (self.target_ref, captures[0])

    def publish(self, value: Value) -> Handle:
        return self.act(lambda t: t.publish(self.ds, value))  # type: ignore[return-value]

    def retract(self, handle: Handle) -> None:
        self.act(lambda t: t.retract(handle))


def test_two_askers_deliver_once_and_the_delivery_goes_with_the_last() -> None:
    node = _Node()
    first = node.publish(record(A, 1))
    second = node.publish(record(B, 1))
    assert node.target.events == [("+", 1)]
    node.retract(first)
    assert node.target.events == [("+", 1)]
    node.retract(second)
    assert node.target.events == [("+", 1), ("-", 1)]
    assert not node.sched.crashes


def test_the_askers_facet_stopping_withdraws_the_deliveries() -> None:
    node = _Node()
    node.publish(record(A, 1))
    node.publish(record(B, 2))
    node.act(lambda t: t.stop(node.facet))
    assert sorted(node.target.events) == [("+", 1), ("+", 2), ("-", 1), ("-", 2)]
    assert node.target.live == {}


def test_a_crash_of_the_node_actor_withdraws_what_its_deliveries_hold() -> None:
    node = _Node()
    node.publish(record(A, 1))
    node.publish(record(B, 1))
    node.publish(record(B, 2))

    node.crash()
    assert node.target.live == {}
    assert sorted(node.target.events) == [("+", 1), ("+", 2), ("-", 1), ("-", 2)]


def test_a_crash_after_the_askers_stopped_withdraws_nothing_twice() -> None:
    node = _Node()
    node.publish(record(A, 1))
    node.act(lambda t: t.stop(node.facet))
    gc.collect()  # the stopped facet's sink is gone, or holds nothing

    node.crash()
    assert node.target.events == [("+", 1), ("-", 1)]


class _Uplink(_World):
    """copy-up's offers of one node (in a node actor) to a parent's inbox (the recorder, in an
    actor of its own), offered through an uplink facet that can go and come back."""

    def __init__(self) -> None:
        self.offers: _Offers | None = None
        self.link: Facet | None = None

        def boot(t: Turn) -> None:
            self.offers = _Offers(t)

        super().__init__(boot)

    def up(self) -> None:
        def link(t: Turn) -> None:
            self.link = t.new_facet(lambda t2: self.offers.link_up(t2, self.target_ref))

        self.act(link)


def test_offers_go_with_the_uplink_and_come_back_with_the_next() -> None:
    node = _Uplink()
    one = node.act(lambda t: node.offers.add(t, 1))
    node.up()
    node.act(lambda t: node.offers.add(t, 2))
    assert node.target.events == [("+", 1), ("+", 2)]
    node.act(lambda t: t.stop(node.link))
    assert node.target.live == {}
    node.act(lambda t: node.offers.remove(t, one))  # gone while the uplink was down
    node.up()
    assert node.target.events[-1] == ("+", 2)
    assert sorted(node.target.live.values()) == [2]
    assert not node.sched.crashes


def test_a_crash_of_the_node_actor_withdraws_its_offers_at_the_parent() -> None:
    node = _Uplink()
    node.up()
    node.act(lambda t: node.offers.add(t, 1))

    node.crash()
    assert node.target.events == [("+", 1), ("-", 1)]


def test_a_crash_withdraws_what_a_relay_asserted_at_another_actor() -> None:
    """An assertion relay (:func:`~feds.reactive.relay`) asserts untracked at any target."""
    node = _Node()
    node.act(lambda t: relay(t, node.ds, rec_group(C, [bind()]), lambda c: (node.target_ref, c[0])))
    kept = node.publish(record(C, 7))
    node.retract(kept)
    node.publish(record(C, 8))

    node.crash()
    assert node.target.events == [
        ("+", 7),
        ("-", 7),
        ("+", 8),
        ("-", 8),
    ]
    assert node.target.live == {}


def test_a_crash_withdraws_the_captures_a_dataspace_showed_another_actor() -> None:
    """A dataspace publishes captures to an observer of another actor untracked."""
    node = _Node()
    pattern = pattern_value(rec_group(C, [bind()]))
    node.act(lambda t: t.publish(node.ds, observe(pattern, node.target_ref)))
    node.publish(record(C, 5))
    assert node.target.events == [("+", (5,))]

    node.crash()
    assert node.target.events == [("+", (5,)), ("-", (5,))]


class _Showing(_World):
    """A node actor holding, in a child facet, a dataspace that shows ``<c $x>`` to the
    target, and one ``<c 5>``."""

    def __init__(self) -> None:
        self.facet: Facet | None = None
        pattern = pattern_value(rec_group(C, [bind()]))

        def hold(t: Turn) -> None:
            ds = t.ref(Dataspace())
            t.publish(ds, observe(pattern, self.target_ref))
            t.publish(ds, record(C, 5))

        def boot(t: Turn) -> None:
            self.facet = t.new_facet(hold)

        super().__init__(boot)


def test_a_dataspace_whose_facet_stops_withdraws_what_it_showed_another_actor() -> None:
    world = _Showing()
    assert world.target.events == [("+", (5,))]
    world.act(lambda t: t.stop(world.facet))
    assert world.target.events == [("+", (5,)), ("-", (5,))]
    assert not world.sched.crashes


def test_a_relay_whose_facet_stops_withdraws_what_it_asserted_at_another_actor() -> None:
    node = _Node()
    facets: list[Facet] = []

    def install(t: Turn) -> None:
        route = lambda c: (node.target_ref, c[0])  # noqa: E731
        facets.append(t.new_facet(lambda t2: relay(t2, node.ds, rec_group(C, [bind()]), route)))

    node.act(install)
    node.publish(record(C, 3))
    node.act(lambda t: t.stop(facets[0]))
    assert node.target.events == [("+", 3), ("-", 3)]
    assert not node.sched.crashes
