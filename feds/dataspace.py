"""The Dataspace entity: a bag of assertions with observers, built on the skeleton index.

Asserting ``<Observe pattern observer>`` into a dataspace publishes each distinct captures
vector (a tuple) of the assertions matching ``pattern`` to ``observer``, and retracts it when the
last matching assertion goes. Retracting the Observe retracts everything it published. Messages
matching an Observe reach its observer as a message carrying the captures vector.

An Observe is an assertion like any other: counted in the bag, acted on once. A second copy of
the same ``<Observe pattern observer>`` registers nothing more, and withdrawing one of two copies
withdraws nothing; only the last copy's retraction does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from feds.actor import Entity, Handle, HoldsUntracked, Ref, Turn, hold_untracked
from feds.index import Index
from feds.patterns import PatternError, compile_pattern
from feds.values import Record, Symbol, Value, exact_key

log = logging.getLogger("feds.dataspace")

OBSERVE = Symbol("Observe")


def observe(pattern: Value, observer: Ref) -> Record:
    """The assertion ``<Observe pattern observer>``."""
    return Record(OBSERVE, (pattern, observer))


def as_observe(value: Value) -> tuple[Value, Ref] | None:
    """``(pattern, observer)`` if ``value`` is an Observe assertion with a local observer."""
    if value.__class__ is Record and value.label == OBSERVE and len(value.fields) == 2:
        pattern, observer = value.fields
        if observer.__class__ is Ref:
            return pattern, observer
    return None


class MatchTaker(Entity):
    """A rule step that a dataspace of its own actor shows its matches at once, by the key of
    their captures, instead of as assertions under new handles.

    An inline observer (:attr:`~feds.actor.Entity.inline`) is shown each match as
    :meth:`Turn.publish_inline <feds.actor.Turn.publish_inline>` under a new handle, which it
    keeps to know the match again when it goes: two tables (the dataspace's captures → handle,
    the step's handle → what it made) and a dispatch for one fact. A taker is called with the
    captures' exact key (:func:`~feds.values.exact_key`) instead, as that call would have run
    it: only while its facet is alive, with the turn in its facet. It keeps what it made by
    that key, in :meth:`matched`, until :meth:`unmatched` (the match went) or
    :meth:`unmatch_all` (its Observe went, or the dataspace's facet stopped; a taker calls it
    itself when its own facet stops). A taker is observed by one Observe at a time
    (:attr:`taking`), at a dataspace of its own actor; any other Observe naming it, whose
    matches it could not tell apart, is refused with a warning and kept as a plain assertion.
    """

    inline = True
    taking = False
    """Whether an Observe of this entity stands at a dataspace (which shows it its matches)."""

    def matched(self, turn: Turn, captures: tuple, key: Value) -> None:
        raise NotImplementedError

    def unmatched(self, turn: Turn, key: Value) -> None:
        raise NotImplementedError

    def unmatch_all(self, turn: Turn) -> None:
        raise NotImplementedError


class _Observer:
    """Index callback for one Observe: turns index events into actions at the observer."""

    __slots__ = ("dataspace", "handles", "inline", "published", "ref")

    def __init__(self, dataspace: Dataspace, ref: Ref, inline: bool, handles: Iterator[Handle]):
        self.dataspace = dataspace
        self.ref = ref
        self.inline = inline
        """Whether the observer is a rule step of the dataspace's own actor: its captures are
        then shown to it at once (:meth:`Turn.publish_inline`); else they are published to it
        untracked (:class:`~feds.actor.HoldsUntracked`). Either way the dataspace withdraws
        them itself when its facet stops."""
        self.handles = handles  # the scheduler's (:attr:`Scheduler.handles`)
        self.published: dict[Value, Handle] = {}  # exact key of the captures -> handle

    def __call__(self, event: str, captures: tuple, key: Value | None) -> None:
        turn = self.dataspace.turn
        if event == "+":  # keyed type-exactly: (1,) and (#t,) are two matches
            if self.inline:
                handle = next(self.handles)
                turn.publish_inline(self.ref, captures, handle)
            else:
                handle = turn.publish_untracked(self.ref, captures)
            self.published[exact_key(captures) if key is None else key] = handle
        elif event == "-":
            handle = self.published.pop(exact_key(captures) if key is None else key)
            if self.inline:
                turn.retract_inline(self.ref, handle)
            else:
                turn.retract_untracked(self.ref, handle)
        else:
            turn.message(self.ref, captures)

    def withdraw(self, turn: Turn) -> None:
        ref = self.ref
        if self.inline:
            for handle in self.published.values():
                turn.retract_inline(ref, handle)
        else:
            for handle in self.published.values():
                turn.retract_untracked(ref, handle)
        self.published.clear()


class _Taken:
    """Index callback for the Observe that shows a :class:`MatchTaker` its matches by key: what
    an inline :class:`_Observer` and :meth:`Turn.publish_inline` would do, without the handle."""

    __slots__ = ("dataspace", "ref", "taker")

    inline = True  # withdrawn by the dataspace when its facet stops

    def __init__(self, dataspace: Dataspace, ref: Ref) -> None:
        self.dataspace = dataspace
        self.ref = ref
        self.taker: MatchTaker = ref.entity  # type: ignore[assignment]

    def __call__(self, event: str, captures: tuple, key: Value | None) -> None:
        turn = self.dataspace.turn
        ref = self.ref
        if event == "!":
            turn.message(ref, captures)
            return
        facet = ref.facet
        if not facet.alive:
            return
        if not ref.pure:  # as publish_inline: it may change what a route stands for
            turn.actor.routes = None
        saved = turn.facet
        turn.facet = facet
        turn.actor.work += 1
        if event == "+":  # keyed type-exactly: (1,) and (#t,) are two matches
            self.taker.matched(turn, captures, exact_key(captures) if key is None else key)
        else:
            self.taker.unmatched(turn, exact_key(captures) if key is None else key)
        turn.facet = saved

    def withdraw(self, turn: Turn) -> None:
        facet = self.ref.facet
        if facet.alive:
            saved = turn.facet
            turn.facet = facet
            self.taker.unmatch_all(turn)
            turn.facet = saved


class Dataspace(Entity, HoldsUntracked):
    """A plain dataspace: assertions in, matches out to observers (untracked: it withdraws
    them itself when an Observe goes or its facet stops, and :meth:`held_elsewhere` says what
    to withdraw if its actor crashes)."""

    prompt = True
    pure_messages = True  # a message only goes to the observers of its matches

    def __init__(self) -> None:
        self.index = Index()
        self.assertions: dict[Handle, Value] = {}
        self.observers: dict[Value, tuple[object, _Observer | _Taken, int]] = {}
        """Each distinct Observe assertion → its skeleton, its index callback and its copies."""
        self.turn: Turn | None = None
        self._stop_hooked = False  # whether this dataspace's facet withdraws untracked captures

    def _withdraw_untracked(self, turn: Turn) -> None:
        """The facet holding this dataspace stops: what the actor would withdraw of tracked
        captures, the dataspace withdraws of its untracked ones."""
        for _skeleton, observer, _copies in self.observers.values():
            observer.withdraw(turn)

    def held_elsewhere(self) -> list[tuple[Handle, Ref]]:
        return [
            (handle, observer.ref)
            for _skeleton, observer, _copies in self.observers.values()
            if observer.__class__ is _Observer and not observer.inline
            for handle in observer.published.values()
        ]

    def on_publish(self, turn: Turn, value: Value, handle: Handle) -> None:
        self.turn = turn
        self.assertions[handle] = value
        self.index.add_assertion(value)
        if value.__class__ is not Record or value.label is not OBSERVE:
            return  # most assertions are not Observes: no call to tell (labels are interned)
        obs = as_observe(value)
        if obs is None:
            return
        entry = self.observers.get(value)
        if entry is not None:
            skeleton, observer, copies = entry
            self.observers[value] = (skeleton, observer, copies + 1)
            return
        pattern, ref = obs
        try:
            skeleton = compile_pattern(pattern)
        except PatternError as exc:
            log.warning("Observe with an invalid pattern kept as a plain assertion: %s", exc)
            return
        inline = turn.is_inline_here(ref)
        if not self._stop_hooked:  # turn.facet: this dataspace's own
            turn.on_stop(self._withdraw_untracked)
            hold_untracked(turn.actor, self)
            self._stop_hooked = True
        entity = ref.entity
        observer: _Observer | _Taken
        if isinstance(entity, MatchTaker):
            if not inline or entity.taking:
                log.warning(
                    "Observe kept as a plain assertion: %r takes matches from one Observe, at"
                    " a dataspace of its own actor",
                    ref,
                )
                return
            entity.taking = True
            observer = _Taken(self, ref)
        else:
            observer = _Observer(self, ref, inline, turn.scheduler.handles)
        self.observers[value] = (skeleton, observer, 1)
        self.index.add_handler(skeleton, observer)
        turn.actor.routes = None  # a message may now reach this observer too

    def on_retract(self, turn: Turn, handle: Handle) -> None:
        value = self.assertions.pop(handle, None)
        if value is None:
            return
        self.turn = turn
        # Only an Observe can be one (labels are interned symbols): most retractions are not,
        # and a lookup would hash the value.
        entry = (
            self.observers.get(value)
            if value.__class__ is Record and value.label is OBSERVE
            else None
        )
        if entry is not None:
            skeleton, observer, copies = entry
            if copies > 1:
                self.observers[value] = (skeleton, observer, copies - 1)
            else:
                del self.observers[value]
                self.index.remove_handler(skeleton, observer)
                turn.actor.routes = None  # messages no longer reach this observer
                observer.withdraw(turn)
                if observer.__class__ is _Taken:
                    observer.taker.taking = False  # free to be observed again
        self.index.remove_assertion(value)

    def on_message(self, turn: Turn, value: Value) -> None:
        self.turn = turn
        self.index.send_message(value)

    def __len__(self) -> int:
        return len(self.assertions)
