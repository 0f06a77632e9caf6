"""The Syndicated Actor Model, sans-IO: actors, facets, turns, entities and refs.

An :class:`Actor` owns a tree of :class:`Facet` s; entities live in facets and are reached
through :class:`Ref` s. All work happens in *turns*: a :class:`Turn` runs some code on behalf of
one actor and collects its effects (publish, retract, message, sync, spawn, stop). Only when the
code returns are the effects committed, as one batch per target actor, to the
:class:`Scheduler`'s FIFO queue. If the code raises, none of its effects happen and the actor
*crashes*: every assertion it held is retracted, its facets die without running their stop
actions (as in Syndicate: a stop action may rely on invariants that the failure broke, so
nothing it would send can be trusted), its exit hooks run, and other actors go on. A normal
stop (:meth:`Turn.stop`, :meth:`Turn.stop_actor`) runs the stop actions.

Delivery keeps the order of events from one turn to one actor, except that retractions are
applied after the assertions and messages of the same batch ("adds before removes": a
replacement made in one turn is never seen as a glitch). An event an actor sends to one of its
own *inline* entities (:attr:`Entity.inline`: rule steps such as assertion relays) is handled
at once, inside the sending turn, instead of in a later one; a batch an actor sends only to its
own *prompt* entities (:attr:`Entity.prompt`: dataspaces), with no sync request in it, is queued
at the front instead of the back, so an actor finishes what an event causes in its own
dataspace before it takes its next event.

Nothing here touches sockets, threads or clocks. :meth:`Scheduler.run_until_idle` drives
everything deterministically (tests, the simulator); :mod:`feds.driver` runs it under trio.
"""

from __future__ import annotations

import itertools
import logging
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from operator import attrgetter, itemgetter
from types import GeneratorType
from typing import Any, ClassVar, Final

from feds.values import Embedded, Value, register_reference_class

log = logging.getLogger("feds.actor")

Handle = int
TurnAction = Callable[["Turn"], "Iterator[int] | None"]
"""Code run in a turn. A generator function may do a big turn's work in parts: each
``yield n`` says it did ``n`` more events' worth and may be paused there
(:meth:`Scheduler.run_until_idle`)."""

PUBLISH, MESSAGE, SYNC, RETRACT = 0, 1, 2, 3
"""The kinds of event in a batch: each event is ``(kind, ref, payload, handle)``."""
_UNBOUNDED = 1 << 62


class Entity:
    """Something that reacts to assertions, retractions, messages and sync requests.

    Subclasses override the ``on_*`` methods. Each runs inside a turn and may act through it.
    """

    inline: ClassVar[bool] = False
    """Whether an event its own actor sends it runs at once, inside the sending turn.

    Set by *rule steps*: entities whose handlers only map an event to further events (an
    assertion relay, a protocol's delivery) and never touch a dataspace's index directly. Such
    a step used to cost a turn of its own, one per event per rule per hop. Running it where its
    cause ran changes no order between events: every event that takes a path takes the same
    steps, each now a step earlier (``docs/protocols.md``, "The node's fast path").
    """

    prompt: ClassVar[bool] = False
    """Whether a batch its own actor sends it (and only such entities) runs next, before the
    batches already queued.

    Set by dataspaces. A node's local access and its rules reach the fragment through steps of
    the node's own actor; queued behind other work, those steps let an event that came later
    through another path (a client's message right after its Observe) reach the fragment before
    the relay its Observe installs. Run next, everything an event causes inside its own actor is
    in place before the actor takes its next event, as in one dataspace. Sync requests are never
    run early (a sync answers after every event queued before it).
    """

    pure_messages: ClassVar[bool] = False
    """Whether this entity keeps the contract that lets a message route (:mod:`feds.routes`)
    stand for it: :meth:`on_message` only sends messages, chosen by the message, by the
    entity's configuration, by the handlers of dataspaces and by which facets are alive; and
    nothing the entity does otherwise (its assertions and retractions) changes what any such
    step sends, except by adding or removing a dataspace's handler, or by creating or stopping
    a facet, which drop the actor's routes (:attr:`Actor.routes`). The dataspace, local access
    and the protocols' rule steps keep it. An entity whose messages change anything (a
    counter, a user's handler) leaves it False, the default; one that sets it must also never
    test a message by identity or with ``type()`` (a route is worked out on a witness of the
    message, :mod:`feds.witness`, which notices every other look).
    """

    def on_publish(self, turn: Turn, value: Value, handle: Handle) -> None:
        """``value`` is now asserted at this entity under ``handle``."""

    def on_retract(self, turn: Turn, handle: Handle) -> None:
        """The assertion made under ``handle`` is withdrawn."""

    def on_message(self, turn: Turn, value: Value) -> None:
        """A message arrived."""

    def on_sync(self, turn: Turn, peer: Ref) -> None:
        """Answer ``peer`` once every earlier event sent here has been processed."""
        turn.message(peer, True)


class Ref(Embedded):
    """A reference to an entity living in a facet of an actor.

    There is one Ref per (facet, entity) at a time: making another while the first lives
    returns the first. So two refs are equal exactly when they are the same object, and refs
    compare and hash as objects do, in C: a ref is hashed or compared at each table it keys
    (handles, deliveries, the relay's exports) and in each rule that tests a hop, a few dozen
    times per assertion over a chain, which cost a Python call each when refs compared their
    entity and facet."""

    __slots__ = ("__weakref__", "actor", "entity", "facet", "pure")

    actor: Actor
    entity: Entity
    facet: Facet
    pure: bool
    """The entity's :attr:`~Entity.pure_messages`, read once: it is asked at every event that
    may drop the actor's routes, and a slot is cheaper to read than a class attribute."""

    def __new__(cls, facet: Facet, entity: Entity) -> Ref:
        key = (id(facet), id(entity))  # both alive while a ref to them is in the table
        ref = _REFS.get(key)
        if ref is None:
            ref = object.__new__(cls)
            ref.actor = facet.actor
            ref.facet = facet
            ref.entity = entity
            ref.pure = entity.pure_messages
            _REFS[key] = ref
        return ref

    def __repr__(self) -> str:
        return f"<ref {type(self.entity).__name__}@{self.actor.name}>"


_REFS: weakref.WeakValueDictionary[tuple[int, int], Ref] = weakref.WeakValueDictionary()
"""The live refs by the ids of their facet and entity (see :class:`Ref`)."""


register_reference_class(Ref)


class Facet:
    """A node in an actor's facet tree: owns assertions, child facets and stop actions."""

    __slots__ = ("__weakref__", "actor", "alive", "children", "outbound", "parent", "stop_actions")

    def __init__(self, actor: Actor, parent: Facet | None) -> None:
        self.actor = actor
        self.parent = parent
        self.children: set[Facet] = set()
        self.outbound: set[Handle] = set()
        self.stop_actions: list[TurnAction] = []
        self.alive = True
        if parent is not None:
            parent.children.add(self)

    def __repr__(self) -> str:
        return f"<facet of {self.actor.name}{'' if self.alive else ' (stopped)'}>"


class Actor:
    """A unit of isolation: its turns run one at a time and fail as a whole."""

    _ids = itertools.count(1)

    def __init__(self, scheduler: Scheduler, name: str | None = None) -> None:
        self.id = next(Actor._ids)
        self.name = name or f"actor-{self.id}"
        self.scheduler = scheduler
        self.root = Facet(self, None)
        self.alive = True
        self.exit_reason: BaseException | None = None
        self.outbound: dict[Handle, tuple[Facet, Ref]] = {}
        self.exit_hooks: list[Callable[[Actor], None]] = []
        self.work = 0
        """Grows whenever this actor is handed events other than sync traffic (see
        :meth:`Turn.sync`): a batch adds its length, less its sync requests and answers, also
        events for facets that stopped meanwhile (``feds.node.Node.local_flush`` only asks
        whether it moved)."""
        self.sink: Callable[[list[tuple]], bool] | None = None
        """If set, offered each batch sent to this actor at the sending turn's commit, unless an
        earlier batch for it waits in the queue: it returns True if it has handled the batch
        (then no turn of this actor runs for it), False to have it queued. (A turn of it left
        open by ``max_events`` is always finished before any other turn runs, so none commits
        meanwhile.)

        A relay's actor has one: forwarding events to the far side is all its proxies do, and
        doing it at once spares a turn per crossing, with the order unchanged (see
        :meth:`feds.relay.Relay.take`)."""
        self.queued = 0
        """Batches queued for this actor whose turn has not begun."""
        self.routes: dict | None = None
        """The message routes worked out for this actor's entities (:mod:`feds.routes`), or
        None. Dropped (set to None) whenever what a pure step sends may change: a turn that
        handles an event for an entity that is not :attr:`~Entity.pure_messages` (dropped as
        it begins, or as the event reaches an inline step), an action turn (it may do
        anything), a facet created or stopped, a dataspace's handler added or removed
        (:class:`feds.dataspace.Dataspace`). Assertions into pure entities (data entering the
        fragment) leave them standing. So a route is followed only while everything it stands
        for is as it was when it was worked out."""

    def __repr__(self) -> str:
        return f"<actor {self.name}>"


kind_of, ref_of = itemgetter(0), itemgetter(1)
"""An event's kind and target ref: with ``map``, a batch is scanned in C, without a Python
step per event."""
_prompt = attrgetter("entity.prompt")
_pure = attrgetter("pure")

SCAN_IN_C: Final = 16
"""The length from which a batch is scanned in C rather than with a Python loop: setting up a
scan in C (a ``map`` and an ``all`` or a ``set``) costs about ten events' worth of loop, so a
lone event's batch would pay more for it (cachegrind, a lone message crossing a node)."""


def pure_only(batch: list[tuple]) -> bool:
    """Whether every event of ``batch`` is for a :attr:`~Entity.pure_messages` entity: handling
    it leaves the actor's message routes standing, but for what handler changes and facets
    drop (:attr:`Actor.routes`)."""
    if len(batch) == 1:  # most of a node's turns: an event from a client or another node
        return batch[0][1].pure  # type: ignore[no-any-return]
    return all(map(_pure, map(ref_of, batch)))  # in C: no Python frame per event


def _queue(queue: deque, actor: Actor, target: Actor, batch: list[tuple]) -> None:
    """Queue a turn's ``batch`` for ``target``: next if ``actor`` sent it to its own prompt
    entities (:attr:`Entity.prompt`), else behind everything queued."""
    sink = target.sink
    if sink is not None and not target.queued and sink(batch):
        return
    target.queued += 1
    if target is actor:  # to its prompt entities only, with no sync request: next
        if len(batch) >= SCAN_IN_C:
            if all(map(_prompt, map(ref_of, batch))) and SYNC not in map(kind_of, batch):
                queue.appendleft((target, None, batch))
                return
        else:
            for kind, ref, _payload, _handle in batch:
                if kind == SYNC or not ref.entity.prompt:
                    break
            else:
                queue.appendleft((target, None, batch))
                return
    queue.append((target, None, batch))


class Turn:
    """The context for one atomic step of one actor. Effects are committed when it ends.

    Most turns only send a few events, so the containers for everything else (new and retracted
    handles, stops, commit callbacks) are created on first use; ``None`` means "none yet". Most
    send to one actor only: the batch for the first target actor is kept in two slots, and a
    dict is made only for the batches of any others.
    """

    __slots__ = (
        "_batch",
        "_commits",
        "_gone",
        "_new",
        "_others",
        "_stops",
        "_target",
        "actor",
        "facet",
        "scheduler",
    )

    def __init__(self, facet: Facet) -> None:
        actor = facet.actor
        self.actor = actor
        self.facet = facet
        self.scheduler = actor.scheduler
        self._target: Actor | None = None
        self._batch: list[tuple] | None = None
        self._others: dict[Actor, list[tuple]] | None = None
        self._new: dict[Handle, tuple[Facet, Ref]] | None = None
        self._gone: dict[Handle, None] | None = None  # ordered; a set would lose the order
        self._stops: list[tuple[Facet, TurnAction | None]] | None = None
        self._commits: list[Callable[[], None]] | None = None

    # -- effects ----------------------------------------------------------------------------

    def _send(self, ref: Ref, kind: int, payload: Value, handle: Handle | None) -> None:
        """Send an event: to an inline entity of this actor at once, as a turn would later
        (nothing if its facet has stopped); to any other entity, into its actor's batch."""
        target = ref.actor
        if target is self.actor and ref.entity.inline:
            if kind == PUBLISH:
                self.publish_inline(ref, payload, handle)  # type: ignore[arg-type]
            elif kind == RETRACT:
                self.retract_inline(ref, handle)  # type: ignore[arg-type]
            elif ref.facet.alive:  # a sync, or a message (which :meth:`message` delivers
                if not ref.pure:  # inline itself, sparing this call)
                    self.actor.routes = None
                saved = self.facet
                self.facet = ref.facet
                if kind == SYNC:
                    ref.entity.on_sync(self, payload)  # type: ignore[arg-type]
                else:
                    self.actor.work += 1
                    ref.entity.on_message(self, payload)
                self.facet = saved
        elif target is self._target:
            self._batch.append((kind, ref, payload, handle))  # type: ignore[union-attr]
        elif self._target is None:
            self._target = target
            self._batch = [(kind, ref, payload, handle)]
        elif self._others is None:
            self._others = {target: [(kind, ref, payload, handle)]}
        else:
            batch = self._others.get(target)
            if batch is None:
                self._others[target] = [(kind, ref, payload, handle)]
            else:
                batch.append((kind, ref, payload, handle))

    def _batches(self) -> list[tuple[Actor, list[tuple]]]:
        """The events sent so far, per target actor, in the order the targets were first sent to."""
        if self._target is None:
            return []
        first = (self._target, self._batch)
        return [first] if self._others is None else [first, *self._others.items()]

    def publish(self, ref: Ref, value: Value) -> Handle:
        """Assert ``value`` at ``ref``; the returned handle retracts it."""
        handle = next(self.scheduler.handles)
        if self._new is None:
            self._new = {handle: (self.facet, ref)}
        else:
            self._new[handle] = (self.facet, ref)
        self._send(ref, PUBLISH, value, handle)
        return handle

    def retract(self, handle: Handle) -> None:
        """Withdraw an assertion this actor made; unknown or retracted handles are ignored."""
        entry = None if self._new is None else self._new.pop(handle, None)
        if entry is None:
            entry = self.actor.outbound.get(handle)
            if entry is None:
                return
            if self._gone is None:
                self._gone = {handle: None}
            elif handle in self._gone:
                return
            else:
                self._gone[handle] = None
        ref = entry[1]
        self._send(ref, RETRACT, None, handle)

    def replace(self, ref: Ref, handle: Handle | None, value: Value | None) -> Handle | None:
        """Assert ``value`` (unless None) and retract ``handle`` (unless None), glitch-free."""
        new = None if value is None else self.publish(ref, value)
        if handle is not None:
            self.retract(handle)
        return new

    def is_inline_here(self, ref: Ref) -> bool:
        """Whether ``ref`` is an inline entity (:attr:`Entity.inline`) of this turn's actor."""
        return ref.entity.inline and ref.actor is self.actor

    def publish_untracked(self, ref: Ref, value: Value) -> Handle:
        """Assert ``value`` at ``ref`` without the actor tracking the handle: the caller
        retracts it (:meth:`retract_untracked`), also when the caller's facet stops (a stop
        action), since the actor will not. An inline entity of this actor hears it at once,
        any other with the turn's other events. If the actor crashes, an entity of its own
        dies with it; for one of another actor, the caller must withdraw what it holds
        (:meth:`Scheduler.withdraw`), as the actor's crash would have: a
        :class:`HoldsUntracked` registered with :func:`hold_untracked` has that done for it.

        A dataspace shows its observers their captures this way, an assertion relay and a
        protocol's deliveries and offers assert this way, and a relay applies what the far
        side asserts this way (each keeps the handles anyway): the actor's tables (a tuple, an
        int and four table entries per handle) were a quarter of a node's handles per
        assertion each, and three of its table entries were 3-4 % of a crossing's
        instructions."""
        handle = next(self.scheduler.handles)
        self._send(ref, PUBLISH, value, handle)
        return handle

    def retract_untracked(self, ref: Ref, handle: Handle) -> None:
        """Withdraw what :meth:`publish_untracked` asserted at ``ref`` under ``handle``."""
        self._send(ref, RETRACT, None, handle)

    def publish_inline(self, ref: Ref, value: Value, handle: Handle) -> None:
        """Show ``ref``, an inline entity of this actor (:meth:`is_inline_here`), ``value``
        under ``handle`` (a new one, :attr:`Scheduler.handles`) at once, as a turn would later
        (nothing if its facet has stopped): what :meth:`publish_untracked` does for it, without
        the dispatch, for a caller that knows ``ref`` is inline (a dataspace's rule steps)."""
        facet = ref.facet
        if facet.alive:
            if not ref.pure:  # it may change what a route stands for
                self.actor.routes = None
            saved = self.facet
            self.facet = facet
            self.actor.work += 1
            ref.entity.on_publish(self, value, handle)
            self.facet = saved

    def retract_inline(self, ref: Ref, handle: Handle) -> None:
        """Withdraw what :meth:`publish_inline` showed ``ref`` under ``handle``, at once."""
        facet = ref.facet
        if facet.alive:
            if not ref.pure:
                self.actor.routes = None
            saved = self.facet
            self.facet = facet
            self.actor.work += 1
            ref.entity.on_retract(self, handle)
            self.facet = saved

    def message(self, ref: Ref, value: Value) -> None:
        """Send ``value`` to ``ref`` as a message (delivered once, never retained).

        To an inline entity of this actor (a rule step, :attr:`Entity.inline`) it is delivered
        at once, as :meth:`_send` would, without the call that would take: most messages inside
        a node go to rule steps."""
        target = ref.actor
        if target is self.actor and ref.entity.inline:
            facet = ref.facet
            if facet.alive:
                if not ref.pure:  # it may change what a route stands for
                    self.actor.routes = None
                entity = ref.entity
                saved = self.facet
                self.facet = facet
                self.actor.work += 1
                entity.on_message(self, value)
                self.facet = saved
        elif target is self._target:  # one more for that batch (a dataspace's, a relay's)
            self._batch.append((MESSAGE, ref, value, None))  # type: ignore[union-attr]
        else:
            self._send(ref, MESSAGE, value, None)

    def sync(self, ref: Ref, callback: TurnAction) -> None:
        """Run ``callback`` in a later turn, after ``ref`` has processed every earlier event."""
        peer = self.ref(_SyncReply(callback))
        self._send(ref, SYNC, peer, None)

    def ref(self, entity: Entity) -> Ref:
        """A reference to ``entity``, living in the current facet."""
        return Ref(self.facet, entity)

    def spawn(self, boot: TurnAction, name: str | None = None) -> Actor:
        """Create a new actor whose first turn runs ``boot`` (after this turn commits)."""
        actor = Actor(self.scheduler, name)
        self.scheduler.enqueue(actor, actor.root, boot)
        return actor

    def new_facet(self, boot: TurnAction) -> Facet:
        """Create a child facet of the current one and run ``boot`` in it, within this turn."""
        self.actor.routes = None  # what it sets up may take part in a route
        child = Facet(self.actor, self.facet)
        self.in_facet(child, boot)
        return child

    def in_facet(self, facet: Facet, action: TurnAction) -> None:
        """Run ``action`` with ``facet`` as the current facet, within this turn."""
        saved = self.facet
        self.facet = facet
        try:
            action(self)
        finally:
            self.facet = saved

    def on_stop(self, action: TurnAction) -> None:
        """Run ``action`` (in a turn) when the current facet stops."""
        self.facet.stop_actions.append(action)

    def stop(self, facet: Facet | None = None, then: TurnAction | None = None) -> None:
        """Stop ``facet`` (default: the current one) at the end of the turn; then run ``then``."""
        if self._stops is None:
            self._stops = []
        self._stops.append((facet or self.facet, then))

    def stop_actor(self) -> None:
        """Stop this whole actor normally when this turn ends."""
        self.stop(self.actor.root)

    def on_commit(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once this turn's effects are committed (never if the turn fails).

        The relay uses this to mark a turn's events ready to send. Callbacks run in
        registration order.
        """
        if self._commits is None:
            self._commits = [callback]
        else:
            self._commits.append(callback)

    def later(self, action: TurnAction, facet: Facet | None = None) -> None:
        """Run ``action`` in a separate, later turn of this actor."""
        self.scheduler.enqueue(self.actor, facet or self.facet, action)

    # -- commit -----------------------------------------------------------------------------

    def _finish(self) -> None:
        """Process requested stops (they may add effects), then commit everything."""
        if self._stops is not None:
            self.actor.routes = None  # a route may pass through a facet that stops
            self._run_stops()
        actor = self.actor
        if self._gone is not None:
            outbound = actor.outbound
            for handle in self._gone:
                entry = outbound.pop(handle, None)
                if entry is not None:
                    entry[0].outbound.discard(handle)
        if self._new is not None:
            outbound = actor.outbound
            for handle, entry in self._new.items():
                outbound[handle] = entry
                entry[0].outbound.add(handle)
        if self._target is not None:  # queue each batch, in the order of _batches()
            scheduler = self.scheduler
            queue = scheduler._queue
            was_idle = not queue
            _queue(queue, actor, self._target, self._batch)  # type: ignore[arg-type]
            if self._others is not None:
                for target, batch in self._others.items():
                    _queue(queue, actor, target, batch)
            if was_idle and scheduler.on_work is not None:
                scheduler.on_work()
        if self._commits is not None:
            for callback in self._commits:
                callback()
        if not actor.alive:
            self.scheduler.actor_exited(actor)

    def _run_stops(self) -> None:
        """Tear down each facet asked to stop, in order; stop actions may ask for more."""
        stops = self._stops
        assert stops is not None
        while stops:
            facet, then = stops.pop(0)
            if facet.alive:
                parent = facet.parent
                self._teardown(facet)
                if then is not None and parent is not None and parent.alive:
                    self.in_facet(parent, then)
                if parent is None:
                    self.actor.alive = False

    def _teardown(self, facet: Facet) -> None:
        for child in list(facet.children):
            if child.alive:
                self._teardown(child)
        facet.alive = False
        for action in facet.stop_actions:
            self.in_facet(facet, action)
        facet.stop_actions.clear()
        for handle in list(facet.outbound):
            self.retract(handle)
        if self._new is not None:
            for handle, (owner, _ref) in list(self._new.items()):
                if owner is facet:
                    self.retract(handle)
        if facet.parent is not None:
            facet.parent.children.discard(facet)


class HoldsUntracked:
    """What asserts untracked (:meth:`Turn.publish_untracked`) at entities of other actors too,
    keeping the handles itself, to spare the actor's three table entries per assertion: it
    retracts each when it should go, also when the facets it works for stop. A crash runs no
    stop actions, so each one is registered with :func:`hold_untracked`, and what it still
    holds is withdrawn when its actor crashes, as the actor withdraws what it tracks."""

    def held_elsewhere(self) -> list[tuple[Handle, Ref]]:
        """Each ``(handle, target)`` asserted and not retracted yet."""
        raise NotImplementedError


_HOLDERS: weakref.WeakKeyDictionary[Actor, weakref.WeakSet[HoldsUntracked]] = (
    weakref.WeakKeyDictionary()
)
"""Each actor's live :class:`HoldsUntracked`, for :func:`_withdraw_held`."""


def hold_untracked(actor: Actor, holder: HoldsUntracked) -> None:
    """Have what ``holder`` still holds withdrawn if ``actor`` crashes (held weakly)."""
    holders = _HOLDERS.get(actor)
    if holders is None:
        holders = _HOLDERS[actor] = weakref.WeakSet()
        actor.exit_hooks.append(_withdraw_held)
    holders.add(holder)


def _withdraw_held(actor: Actor) -> None:
    """``actor`` exited (an exit hook): withdraw at their targets the assertions its holders
    still hold, which only a crash leaves (it runs no stop actions)."""
    held = [pair for holder in _HOLDERS.pop(actor, ()) for pair in holder.held_elsewhere()]
    if held:
        actor.scheduler.withdraw(held)


class _SyncReply(Entity):
    """The one-shot peer of :meth:`Turn.sync`: runs the callback when the answer arrives."""

    __slots__ = ("callback", "done")

    def __init__(self, callback: TurnAction) -> None:
        self.callback = callback
        self.done = False

    def on_message(self, turn: Turn, value: Value) -> None:
        turn.actor.work -= 1  # an answer to a sync is no work (Actor.work)
        if not self.done:
            self.done = True
            self.callback(turn)


def adds_before_removes(batch: list[tuple]) -> list[tuple]:
    """``batch`` with its retractions moved after everything else, each part kept in order.

    A batch of only retractions or without any is returned as it is.
    """
    if RETRACT not in map(kind_of, batch):  # most batches: a scan in C
        return batch
    removes = [event for event in batch if event[0] == RETRACT]
    if len(removes) == len(batch):
        return batch
    return [event for event in batch if event[0] != RETRACT] + removes


class Scheduler:
    """A deterministic FIFO queue of turns for many actors.

    ``on_work`` (if set) is called whenever work is queued while the queue was empty, so a driver
    can wake up. :meth:`run_until_idle` runs queued turns until none are left.
    """

    def __init__(self) -> None:
        self._queue: deque[tuple[Actor, Facet | None, Any]] = deque()
        self._open: tuple[Actor, Turn, Any, int] | None = None
        """A turn cut short by ``max_events``: its actor, the turn, and its batch and the index
        of the next event, or its action's generator and -1."""
        self.handles = itertools.count(1)
        """The handle counter: ``next(handles)`` is a handle no assertion of this scheduler
        has had (a turn's, or one for an event made by :meth:`send`)."""
        self.on_work: Callable[[], None] | None = None
        self.turns_run = 0
        self.crashes: list[tuple[Actor, BaseException]] = []
        self.running = False
        """Whether :meth:`run_until_idle` is running turns (a turn may be under way)."""
        self.routed = 0
        """Messages handled by following a route (:mod:`feds.routes`) instead of turns."""

    def _push(self, item: tuple[Actor, Facet | None, Any]) -> None:
        was_idle = not self._queue
        self._queue.append(item)
        if was_idle and self.on_work is not None:
            self.on_work()

    def enqueue(self, actor: Actor, facet: Facet, action: TurnAction) -> None:
        """Queue ``action`` to run as a turn of ``actor`` in ``facet``."""
        self._push((actor, facet, action))

    def deliver(self, actor: Actor, batch: list[tuple]) -> None:
        """Queue one turn's worth of events for ``actor`` (called at commit)."""
        actor.queued += 1
        self._push((actor, None, batch))

    def send(self, sender: Actor, batches: dict[Actor, list[tuple]]) -> None:
        """Queue ``batches`` (each target actor's events, in order) from outside any turn, as
        a turn of ``sender`` that sent them would at its commit: a relay applying a packet
        this way spares the turn that would only have passed its events on
        (:meth:`feds.relay.Relay.receive`)."""
        queue = self._queue
        was_idle = not queue
        for target, batch in batches.items():
            _queue(queue, sender, target, batch)
        if was_idle and self.on_work is not None:
            self.on_work()

    def spawn(self, boot: TurnAction, name: str | None = None) -> Actor:
        """Create a top-level actor (from outside any turn) and queue its first turn."""
        actor = Actor(self, name)
        self.enqueue(actor, actor.root, boot)
        return actor

    def idle(self) -> bool:
        return not self._queue and self._open is None

    def run_until_idle(self, max_turns: int | None = None, max_events: int | None = None) -> int:
        """Run queued turns until none are left, ``max_turns`` began or about ``max_events``
        events were handled; return how many turns began.

        A batch of more events than are left of ``max_events`` is handled in part, and so is
        an action written as a generator (:data:`TurnAction`) once it has yielded that many: its
        turn stays open, and the next call goes on with it before anything else, so that the
        turns run exactly as without the bound. Only the caller gets the chance to do other
        work between the parts (a driver serving I/O while a node works through a turn of a
        million events); the turn's effects are committed once, when it has done all its work.
        """
        ran = 0
        limit = -1 if max_turns is None else max_turns
        room = _UNBOUNDED if max_events is None else max_events
        queue = self._queue
        popleft = queue.popleft
        run_batch = self._run_batch
        self.running = True  # (left set if a bug escapes: no route is followed after that)
        while ran != limit and room > 0:
            if self._open is not None:
                actor, turn, work, start = self._open
                self._open = None
                if not actor.alive:
                    continue
                if start < 0:
                    room -= self._run_steps(actor, turn, work, room)
                else:
                    room -= run_batch(actor, work, room, turn, start)
                continue
            if not queue:
                break
            actor, facet, work = popleft()
            if not actor.alive:
                continue
            ran += 1
            if facet is None:
                actor.queued -= 1
                room -= run_batch(actor, work, room)
            elif facet.alive:
                room -= self._run_action(actor, facet, work, room)
        self.running = False
        self.turns_run += ran
        return ran

    def _run_action(self, actor: Actor, facet: Facet, action: TurnAction, room: int) -> int:
        """Run ``action`` in a new turn (a generator's first ``room`` events' worth, if it is
        one); return the events' worth done (at least 1)."""
        actor.work += 1
        actor.routes = None  # it may do anything
        turn = Turn(facet)
        try:
            steps = action(turn)
            if steps.__class__ is GeneratorType:
                return self._run_steps(actor, turn, steps, room)  # type: ignore[arg-type]
            turn._finish()
        except Exception as exc:
            self.crash(actor, exc)
        return 1

    def _run_steps(self, actor: Actor, turn: Turn, steps: Iterator[int], room: int) -> int:
        """Go on with a generator action until it is done (then commit its turn) or has done
        ``room`` events' worth (then leave it open); return the events' worth done."""
        done = 0
        try:
            for count in steps:
                done += count
                if done >= room:
                    self._open = (actor, turn, steps, -1)
                    return done
            turn._finish()
        except Exception as exc:
            self.crash(actor, exc)
        return max(done, 1)

    def _run_batch(
        self, actor: Actor, batch: list[tuple], room: int, turn: Turn | None = None, start: int = 0
    ) -> int:
        """Handle ``batch`` from ``start`` in ``turn`` (a new one if None), at most ``room``
        events of it (the rest is left open, see :meth:`run_until_idle`); return how many."""
        if turn is None:
            if actor.routes is not None and not pure_only(batch):
                actor.routes = None
            if len(batch) > 1:
                batch = adds_before_removes(batch)
            turn = Turn(actor.root)
        end = len(batch)
        events: Iterable[tuple] = batch
        if start or end - start > room:
            end = min(end, start + room)
            events = itertools.islice(batch, start, end)
        actor.work += end - start  # less the sync traffic, below
        try:
            for kind, ref, payload, handle in events:
                facet = ref.facet
                if not facet.alive:
                    continue
                turn.facet = facet
                if kind == PUBLISH:
                    ref.entity.on_publish(turn, payload, handle)
                elif kind == MESSAGE:
                    ref.entity.on_message(turn, payload)
                elif kind == RETRACT:
                    ref.entity.on_retract(turn, handle)
                else:
                    actor.work -= 1
                    ref.entity.on_sync(turn, payload)
            turn.facet = actor.root
            if end < len(batch):
                self._open = (actor, turn, batch, end)
            else:
                turn._finish()
        except Exception as exc:
            self.crash(actor, exc)
        return end - start

    def crash(self, actor: Actor, exc: BaseException) -> None:
        """A turn of ``actor`` raised (here, or in a sink: :attr:`Actor.sink`): discard its
        effects, kill the actor, retract all it held.

        The facets die without running their stop actions (see the module docstring).
        """
        log.error("actor %s crashed: %r", actor.name, exc, exc_info=exc)
        actor.exit_reason = exc
        self.crashes.append((actor, exc))
        stack = [actor.root]
        while stack:
            facet = stack.pop()
            facet.alive = False
            facet.stop_actions.clear()
            stack.extend(facet.children)
        outbound = [(handle, ref) for handle, (_facet, ref) in actor.outbound.items()]
        actor.outbound.clear()
        actor.alive = False
        self.withdraw(outbound)
        self.actor_exited(actor)

    def withdraw(self, held: Iterable[tuple[Handle, Ref]]) -> None:
        """Retract each ``(handle, ref)`` at its ref, from outside any turn: one batch per
        target actor, in order. For what a crashed actor asserted (also untracked, by an
        entity that keeps its own handles: :meth:`Turn.publish_untracked`)."""
        batches: dict[Actor, list[tuple]] = {}
        for handle, ref in held:
            batches.setdefault(ref.actor, []).append((RETRACT, ref, None, handle))
        for target, batch in batches.items():
            self.deliver(target, batch)

    def actor_exited(self, actor: Actor) -> None:
        for hook in actor.exit_hooks:
            try:
                hook(actor)
            except Exception:
                log.exception("exit hook of %s failed", actor.name)
        actor.exit_hooks.clear()
