"""Reading-friendly ways to react to a dataspace: ``during``, ``on_message``, assertion relays.

Applications and the federation protocols alike are written with these::

    @during(turn, ds, "<present $who>")
    def present(turn, who):
        print(who, "arrived")
        turn.on_stop(lambda turn: print(who, "left"))

    @on_message(turn, ds, "<speak $who $text>")
    def speak(turn, who, text):
        print(who, "says", text)

A pattern is given in text syntax (``"<present $who>"``) or in record form (a value, see
``protocols/patterns.md``). Each helper asserts ``<Observe pattern ref>`` at the dataspace in the
current facet, so stopping that facet withdraws the interest and everything it caused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from feds.actor import Entity, Facet, Handle, HoldsUntracked, Ref, Turn, hold_untracked
from feds.dataspace import observe
from feds.syntax import parse_pattern
from feds.values import Value

PatternLike = str | Value
OnCaptures = Callable[..., None]
Relayed = tuple[Ref, Value] | None


def pattern_value(pattern: PatternLike) -> Value:
    """The record form of ``pattern`` (text is parsed; a value is taken as a record form)."""
    return parse_pattern(pattern)[0] if isinstance(pattern, str) else pattern


class _During(Entity):
    """Runs ``on_add`` in a fresh facet per captures vector; stops it when the match goes.

    A rule step: events from its own actor run inline (:attr:`feds.actor.Entity.inline`), so
    a rule goes in the turn its match goes, as the relays it set up would see it.
    """

    inline = True

    def __init__(self, on_add: OnCaptures | None, on_msg: OnCaptures | None) -> None:
        self.on_add = on_add
        self.on_msg = on_msg
        self.pure_messages = on_msg is None  # a ``during`` ignores messages; a handler may not
        self.facets: dict[Handle, Facet] = {}

    def on_publish(self, turn: Turn, captures: Value, handle: Handle) -> None:
        if self.on_add is not None:
            on_add = self.on_add
            self.facets[handle] = turn.new_facet(lambda t: on_add(t, *captures))

    def on_retract(self, turn: Turn, handle: Handle) -> None:
        facet = self.facets.pop(handle, None)
        if facet is not None:
            turn.stop(facet)

    def on_message(self, turn: Turn, captures: Value) -> None:
        if self.on_msg is not None:
            self.on_msg(turn, *captures)


def _install(turn: Turn, ds: Ref, pattern: PatternLike, entity: Entity) -> Handle:
    return turn.publish(ds, observe(pattern_value(pattern), turn.ref(entity)))


def during(turn: Turn, ds: Ref, pattern: PatternLike, on_add: OnCaptures | None = None) -> Any:
    """For each distinct match of ``pattern``, run ``on_add(turn, *captures)`` in a new facet.

    The facet stops (running its ``on_stop`` actions and retracting what it asserted) when the
    match disappears. Without ``on_add``, returns a decorator.
    """
    if on_add is None:
        return lambda fn: (_install(turn, ds, pattern, _During(fn, None)), fn)[1]
    return _install(turn, ds, pattern, _During(on_add, None))


def on_message(turn: Turn, ds: Ref, pattern: PatternLike, fn: OnCaptures | None = None) -> Any:
    """Call ``fn(turn, *captures)`` for each message matching ``pattern``; decorator without fn."""
    if fn is None:
        return lambda f: (_install(turn, ds, pattern, _During(None, f)), f)[1]
    return _install(turn, ds, pattern, _During(None, fn))


class RelayEntity(Entity, HoldsUntracked):
    """An assertion relay's observer: maps each captures vector to an assertion elsewhere.

    Messages go through ``message_transform`` (by default the same ``transform``). A rule
    step: events from its own actor run inline (:attr:`feds.actor.Entity.inline`).

    Made by :func:`relay` or :func:`relay_object`, it publishes untracked
    (:class:`~feds.actor.HoldsUntracked`): it keeps each handle anyway, and withdraws what it
    holds when its facet stops (:meth:`withdraw`, a stop action those register), or what it
    holds at other actors when its actor crashes, as the actor would have. One made
    otherwise has no such stop action, and lets the actor track everything.
    """

    inline = True
    pure_messages = True
    """A relay sends each message on as its transform says, and keeps nothing of it: the
    transforms must be functions of the captures alone (those of the protocols are)."""

    def __init__(
        self,
        transform: Callable[[tuple], Relayed],
        message_transform: Callable[[tuple], Relayed] | None = None,
    ) -> None:
        self.transform = transform
        self.message_transform = transform if message_transform is None else message_transform
        self.handles: dict[Handle, Handle] = {}
        """Tracked: each captures handle → the handle of what it became."""
        self.local: dict[Handle, tuple[Ref, Handle]] = {}
        """Untracked: each captures handle → the entity it became an assertion at, and the
        handle there."""
        self.withdraws = False
        """Whether it asserts untracked: its facet's stop action withdraws what it holds."""

    def on_publish(self, turn: Turn, captures: Value, handle: Handle) -> None:
        out = self.transform(captures)
        if out is not None:
            target = out[0]
            if self.withdraws:
                self.local[handle] = (target, turn.publish_untracked(target, out[1]))
            else:
                self.handles[handle] = turn.publish(target, out[1])

    def on_retract(self, turn: Turn, handle: Handle) -> None:
        mine = self.handles.pop(handle, None)
        if mine is not None:
            turn.retract(mine)
            return
        local = self.local.pop(handle, None)
        if local is not None:
            turn.retract_untracked(*local)

    def on_message(self, turn: Turn, captures: Value) -> None:
        out = self.message_transform(captures)
        if out is not None:
            turn.message(out[0], out[1])

    def withdraw(self, turn: Turn) -> None:
        """Its facet stopped: retract what it asserted untracked (the actor retracts the rest)."""
        for target, mine in self.local.values():
            turn.retract_untracked(target, mine)
        self.local.clear()

    def held_elsewhere(self) -> list[tuple[Handle, Ref]]:
        return [(mine, target) for target, mine in self.local.values()]


def _relay_entity(turn: Turn, entity: RelayEntity) -> Ref:
    """A ref to ``entity`` in the current facet, which withdraws it when the facet stops."""
    turn.on_stop(entity.withdraw)
    hold_untracked(turn.actor, entity)
    entity.withdraws = True
    return turn.ref(entity)


def relay(
    turn: Turn,
    ds: Ref,
    pattern: PatternLike,
    transform: Callable[[tuple], Relayed],
    messages: Callable[[tuple], Relayed] | None = None,
) -> Handle:
    """An *assertion relay*: each match of ``pattern`` at ``ds`` becomes an assertion elsewhere.

    ``transform(captures)`` returns ``(target, value)`` — assert ``value`` at ``target`` while the
    match lasts, or send it as a message if the match was a message — or ``None`` to skip it.
    ``messages``, if given, replaces ``transform`` for matches that are messages (e.g.
    :func:`feds.protocols.ignore` for a rule about assertions only). Both must be functions of
    the captures, with no effects of their own: a message's route may be worked out from them
    once and followed for later messages (:mod:`feds.routes`).
    """
    entity = RelayEntity(transform, messages)
    return turn.publish(ds, observe(pattern_value(pattern), _relay_entity(turn, entity)))


def relay_object(turn: Turn, transform: Callable[[Value], Relayed]) -> Ref:
    """A *relay object*: an entity that re-asserts each value it receives, transformed.

    Whatever is asserted at (or sent to) the returned ref becomes ``transform(value)`` — a
    ``(target, value)`` pair, or ``None`` to drop it — for as long as the original lasts.
    ``transform`` must be a function of the value, as for :func:`relay`.
    """
    return _relay_entity(turn, RelayEntity(transform))
