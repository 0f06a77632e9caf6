"""The federation protocols: one module per protocol, each close to the prose of the seed.

A protocol decides three things for a node (see :class:`Protocol`): the rules every fragment
runs, the envelope local access puts around an application's assertions, and what a link to a
neighbouring fragment does. Everything else (fragments, links, local access, sync) is
:mod:`feds.node`'s and is the same for every protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from feds.actor import Handle, HoldsUntracked, Ref, Turn, hold_untracked
from feds.dataspace import MatchTaker, observe
from feds.reactive import PatternLike, Relayed, RelayEntity, pattern_value
from feds.values import Record, Symbol, Value, exact_key

if TYPE_CHECKING:
    from feds.node import Node

AT = Symbol("at")
"""``<at t x>``: every protocol's record for "``x``, to be delivered at ``t``"."""

Route = Callable[[tuple], tuple[Ref, Value] | None]


def ignore(captures: tuple) -> Relayed:
    """Drop a matching message (for a relay whose rule is about assertions only)."""
    return None


def via_at(fragment: Ref, route: Route) -> Callable[[tuple], Relayed]:
    """A relay transform: each match whose ``route(captures)`` is ``(t, x)`` becomes ``<at t x>``
    in ``fragment`` (``None`` skips the match), whose bag deduplicates it before the fragment's
    own ``<at …>`` rules deliver it.

    Messages take the same step. Skipping it for them (a message is never retained, so there is
    nothing to deduplicate) saved a turn per hop but let a message overtake an assertion made
    before it; see "Guarantees" in ``docs/protocols.md``.
    """

    def at(captures: tuple) -> Relayed:
        out = route(captures)
        return None if out is None else (fragment, Record(AT, out))

    return at


class Sink:
    """Where a delivering relay (:func:`deliver`) puts its matches; ``out`` is what the relay's
    ``route(captures)`` gave. :meth:`add` holds it and returns the key it is held by, which
    the relay keeps for the match and gives :meth:`remove` when the match goes: a sink keyed
    by ``exact_key(out)`` works the key out once per match, not on each side."""

    def add(self, turn: Turn, out: Value) -> Value:
        """A match is asserted: hold ``out`` (once, however many times it is added); return
        the key it is held by."""
        raise NotImplementedError

    def remove(self, turn: Turn, key: Value) -> None:
        """One match whose :meth:`add` returned ``key`` is retracted."""
        raise NotImplementedError

    def send(self, turn: Turn, out: Value) -> None:
        """A match is a message: send it on, keeping nothing of it (a delivery's messages may
        follow a route, :mod:`feds.routes`), as state only assertions change says."""
        raise NotImplementedError


class Deliveries(Sink, HoldsUntracked):
    """A fragment's deduplicated delivery: ``x`` at ``t`` once, however many rules ask for it.

    This is the seed's ``<at t x>`` ("every fragment delivers ``<at t x>`` as ``x`` at ``t``")
    without putting the record into the fragment's bag and taking it out again: the count per
    ``(t, x)`` is kept here, so an assertion is delivered in the turn of the rule that made it,
    not two turns later. A message has nothing to count and goes out in that same turn too, so
    messages and assertions take the same steps and keep their order. Used by the protocols in
    which nothing but the fragment's own delivery rule observes ``<at …>`` (copy-up and
    aggregate-subs; observer-flood's half-links mirror ``<at …>`` records, so it keeps them).
    The final target is :func:`observer_of` ``t``.

    A delivery goes when its last asker goes, and only then: the sink retracts it itself, so
    it asserts untracked (:class:`~feds.actor.HoldsUntracked`). Every asker is a delivering relay
    (:func:`deliver`) that gives up its matches when its facet stops, so a stop leaves nothing
    held.
    """

    def __init__(self, turn: Turn) -> None:
        self.held: dict[tuple[Ref, Value], list] = {}
        """``(t, exact_key(x))`` → ``[askers, handle, target]`` (``[1]`` and ``[#t]`` are two)."""
        hold_untracked(turn.actor, self)

    def add(self, turn: Turn, out: tuple[Ref, Value]) -> tuple[Ref, Value]:  # type: ignore[override]
        key = (out[0], exact_key(out[1]))
        entry = self.held.get(key)
        if entry is not None:
            entry[0] += 1
        else:
            target = observer_of(out[0])
            self.held[key] = [1, turn.publish_untracked(target, out[1]), target]
        return key

    def remove(self, turn: Turn, key: tuple[Ref, Value]) -> None:  # type: ignore[override]
        entry = self.held[key]
        if entry[0] > 1:
            entry[0] -= 1
        else:
            del self.held[key]
            turn.retract_untracked(entry[2], entry[1])

    def send(self, turn: Turn, out: tuple[Ref, Value]) -> None:  # type: ignore[override]
        turn.message(observer_of(out[0]), out[1])

    def held_elsewhere(self) -> list[tuple[Handle, Ref]]:
        return [(entry[1], entry[2]) for entry in self.held.values()]


class _Delivering(MatchTaker):
    """A relay whose matches go to a :class:`Sink` (see :func:`deliver`); a rule step that runs
    inline (:attr:`feds.actor.Entity.inline`), shown its matches by key
    (:class:`~feds.dataspace.MatchTaker`)."""

    pure_messages = True  # a sink sends a message on, as its route says (Sink.send)

    def __init__(self, sink: Sink, route: Callable[[tuple], Value | None]) -> None:
        self.sink = sink
        self.route = route
        self.taken: dict[Value, Value] = {}
        """The captures' key of each match → the key the sink holds what it made by."""

    def matched(self, turn: Turn, captures: tuple, key: Value) -> None:
        out = self.route(captures)
        if out is not None:
            self.taken[key] = self.sink.add(turn, out)

    def unmatched(self, turn: Turn, key: Value) -> None:
        held = self.taken.pop(key, None)
        if held is not None:
            self.sink.remove(turn, held)

    def unmatch_all(self, turn: Turn) -> None:
        """Its Observe went, or its facet stopped: give up everything it put into the sink."""
        for held in self.taken.values():
            self.sink.remove(turn, held)
        self.taken.clear()

    def on_message(self, turn: Turn, captures: Value) -> None:
        out = self.route(captures)  # type: ignore[arg-type]
        if out is not None:
            self.sink.send(turn, out)


def deliver(
    turn: Turn,
    ds: Ref,
    pattern: PatternLike,
    sink: Sink,
    route: Callable[[tuple], Value | None],
) -> Handle:
    """A relay from ``ds`` whose matches go to ``sink`` as ``route(captures)`` (``None`` skips a
    match): held while the match lasts, sent if it is a message, in the relay's own turn. With
    :class:`Deliveries`, the seed's ``<at t x>`` step for ``route`` giving ``(t, x)``."""
    entity = _Delivering(sink, route)
    turn.on_stop(entity.unmatch_all)
    return turn.publish(ds, observe(pattern_value(pattern), turn.ref(entity)))


class Observation(RelayEntity):
    """Stands for one distinct ``<Observe pattern observer>`` of an application at this node.

    With a protocol whose ``per_observation`` is set, local access puts an observation token in
    place of the observer (see :class:`feds.node.LocalAccess`). The protocol's ``<at t x>``
    records then name an observation, not an entity: one dataspace gives an entity that
    observes two patterns one assertion per (observation, captures), and ``<at e x>`` would
    merge two observations with equal captures into one. The final delivery goes straight to
    :func:`observer_of` the token; anything else sent or asserted to a token (by a meta-observer
    that found it in an Observe) is forwarded to the observer.
    """

    def __init__(self, observer: Ref) -> None:
        super().__init__(lambda value: (observer, value))
        self.observer = observer


def observer_of(target: Ref) -> Ref:
    """The application's observer if ``target`` is an observation token, else ``target``."""
    entity = target.entity
    return entity.observer if entity.__class__ is Observation else target  # type: ignore[attr-defined]


class Protocol:
    """How one node takes part in a federation."""

    name: ClassVar[str]
    revision: ClassVar[int] = 1
    """Raised whenever what one node of this protocol sends another changes meaning: nodes of
    two revisions cannot work together, so a parent refuses a child of another (:attr:`ident`)."""
    per_observation: ClassVar[bool] = False
    """Whether local access gives each distinct Observe its own :class:`Observation` token."""

    @property
    def ident(self) -> str:
        """``name/revision``: what a child names in its uplink request, and its parent checks."""
        return f"{self.name}/{self.revision}"

    def setup(self, turn: Turn, node: Node) -> None:
        """Install the rules every fragment runs (in the node's root facet)."""
        raise NotImplementedError

    def wrap(self, node: Node, value: Value) -> Value:
        """The envelope local access puts around ``value`` before it enters the fragment."""
        raise NotImplementedError

    def link(self, turn: Turn, node: Node, peer: Ref, peer_is_parent: bool) -> None:
        """This node's half of a link to ``peer``: a child's fragment, or what the parent
        handed this node (:meth:`accept`).

        Runs in a facet that stops when the link goes, taking everything it set up with it.
        """
        raise NotImplementedError

    def accept(self, turn: Turn, node: Node, child: Ref) -> Ref:
        """What a parent hands a child (whose fragment is ``child``) when it accepts its link:
        the ``peer`` of the child's half-link. The parent's fragment, unless the protocol
        makes something in its place (in the link's facet, so it goes with the link)."""
        return node.fragment


def protocol_names() -> tuple[str, ...]:
    return tuple(PROTOCOLS)


def make_protocol(name: str) -> Protocol:
    """A new instance of the protocol called ``name`` (``copy-up``, ``observer-flood``, …)."""
    try:
        return PROTOCOLS[name]()
    except KeyError:
        raise ValueError(
            f"unknown protocol {name!r}; choose one of {', '.join(PROTOCOLS)}"
        ) from None


from feds.protocols.aggregate_subs import AggregateSubs  # noqa: E402
from feds.protocols.copy_up import CopyUp  # noqa: E402
from feds.protocols.observer_flood import ObserverFlood  # noqa: E402

PROTOCOLS: dict[str, type[Protocol]] = {p.name: p for p in (CopyUp, ObserverFlood, AggregateSubs)}
