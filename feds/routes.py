"""Message routes: where a message to an entity of an idle actor goes, worked out once from the
actor's own steps and then followed for every message like it, without running them.

A node passes most messages on: an aggregate-subs inbox makes ``<pub b pat x>`` of the
captures ``x`` it receives, the fragment's index finds the next-hop rules that match, and each
hands ``x`` to a neighbour's inbox; local access wraps a client's ``<temp "kitchen" 21>`` as
``<local …>``, and the index hands the captures of each rule's pattern on. What those steps send
depends on the node's state (its Observes, its links) and on the few things the steps look at
in the message: its label and arity where a pattern has a record, a constant's value. So the
first message to an entry point (an inbox, a mirror, local access) is run through the actor's
steps as a *witness* (:mod:`feds.witness`): the real payload, noting every look at it. If every
step only sent messages (:attr:`~feds.actor.Entity.pure_messages`), the messages the steps sent
out of the actor, stage by stage as its turns would send them, with what they carry said in
terms of the payload (the payload, a part, a tuple of parts), are a *route*: it holds for every
payload that passes the same guards (the same label and arity, say), and a later message to
that entry that passes them is sent to the same refs, carrying what the route makes of it, with
no turn, no envelope record, no rule steps. A route that looked at nothing sends each payload as
it came, scanned in C for a whole packet.

Routes are derived from the rules, never written: the protocol modules stay the only statement
of each protocol, and a route is what their code did with a witness. Why following one is the
same as running the steps (``docs/protocols.md``, "Message routes"):

* A route is followed only for a packet whose events are all messages, to entries of one
  actor, when the whole scheduler is idle: the actor's turns for those messages would be the
  very next turns to run, and nothing could come between them.
* It is followed only while the actor's state is the one it was derived in: the actor drops
  its routes (:attr:`~feds.actor.Actor.routes`) as soon as it does anything else (handles an
  assertion, a retraction or a sync, runs an action, lets a step that is not pure handle a
  message).
* The steps' output depended on the payload only through what the witness noted, so for a
  payload that passes the same guards they would send the same messages to the same refs,
  carrying the same parts of it; the route sends them in the same order per target, stage
  after stage as the turns commit (the actor's own prompt batches, its dataspace's, run next),
  through the same :meth:`Scheduler.send <feds.actor.Scheduler.send>` its turns' commits use,
  so a relay takes them as it would.
* A step that would raise, or do anything but send messages, makes no route (a refusal, kept
  for payloads like the one that met it): the message takes the actor's turns and fails or acts
  there as before.

Sans-IO like the actor engine it extends; :mod:`feds.relay` follows routes for the packets it
applies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import repeat
from operator import itemgetter
from typing import Any, Final

from feds.actor import MESSAGE, SCAN_IN_C, Actor, Ref, Scheduler, Turn, kind_of, ref_of
from feds.values import Record, Symbol, Value, exact_key
from feds.witness import (
    CLASS,
    LABEL,
    LENGTH,
    Template,
    Trace,
    Unfaithful,
    Witness,
    selector,
    template,
)

__all__ = ["MAX_STAGES", "MAX_VARIANTS", "Route", "derive", "follow"]

MAX_STAGES: Final = 8
"""Most turns of its actor a route may stand for (the protocols need two)."""
MAX_VARIANTS: Final = 16
"""Most routes (and refusals) kept per entry, for payloads that differ in what the steps look
at (another label, another constant); a payload that fits none of them takes the turns."""

Send = tuple[Ref, int]
"""One message a route sends: the ref, and which of the values the route makes of the payload
it carries."""
Stage = tuple[tuple[Actor, tuple[Send, ...]], ...]
"""The messages one turn of the actor sends out of it for one message: each target actor with
what it is sent, in the order the turn sends it."""


class Route:
    """Where messages to one entry go, for the payloads that pass its guards.

    ``select(payload)`` is the values the steps would send for ``payload`` (one per distinct
    template), or None if it fails a guard; None for a route that looked at nothing and sends
    each payload as it came (``(payload,)``). ``stages`` is what each of the actor's turns
    sends out of it, or None for a refusal: such payloads take the turns. ``single`` is
    ``(target, ref, i)`` for a route of one turn sending one message (value ``i`` to ``ref``
    of actor ``target``), else None: a lone message then goes on without the stages' loops."""

    __slots__ = ("fields_of", "select", "single", "stages")

    def __init__(
        self,
        select: Callable[[Value], tuple | None] | None,
        stages: tuple | None,
        fields_of: tuple[Symbol, int] | None = None,
    ):
        self.select = select
        self.stages: tuple[Stage, ...] | None = stages
        self.single: tuple[Actor, Ref, int] | None = None
        if stages is not None and len(stages) == 1 and len(stages[0]) == 1:
            ((target, sends),) = stages[0]
            if len(sends) == 1:
                ((ref, i),) = sends
                self.single = (target, ref, i)
        self.fields_of = fields_of if self.single is not None else None
        """``(label, arity)`` for a route of one message that, for every record of that label
        and arity and no other payload, sends the tuple of the record's fields as they came
        (:func:`_fields_of`): a relay may make it of the record's bytes."""

    def __repr__(self) -> str:
        return f"Route({'any payload' if self.select is None else 'guarded'}, {self.stages!r})"


class _Refused(BaseException):
    """A step did something a route cannot stand for (not only sending messages). A
    BaseException, so that no ``except Exception`` in a step takes it for an error of its own."""


class _Recording(Turn):
    """A turn that runs an actor's steps for a witness and commits nothing: anything but a
    message, or a message to an inline step that is not pure, refuses the route."""

    __slots__ = ()

    def _send(self, ref: Ref, kind: int, payload: Value, handle: int | None) -> None:
        if kind != MESSAGE:
            raise _Refused
        self._check(ref)
        Turn._send(self, ref, kind, payload, handle)

    def message(self, ref: Ref, value: Value) -> None:
        self._check(ref)
        Turn.message(self, ref, value)

    def _check(self, ref: Ref) -> None:
        if ref.actor is self.actor and ref.entity.inline and not ref.pure:
            raise _Refused

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise _Refused

    sync = spawn = new_facet = on_stop = stop = stop_actor = on_commit = later = _refuse
    publish_inline = retract_inline = _refuse  # assertions, past the dispatch


def derive(entry: Ref, payload: Value) -> Route:
    """The route (or refusal) of ``payload`` sent to ``entry``, for the payloads that pass
    the guards of what the steps looked at: ``payload`` runs through the entry's actor's steps
    as a witness, in turns that commit nothing.

    A refusal when a step does something but send messages, raises (its turn will raise again
    for the real message), or the steps do not end within :data:`MAX_STAGES` turns, or send
    something built of the payload that a template cannot rebuild."""
    trace = Trace()
    stages = _stages(entry, Witness(payload, trace))
    if stages is None:
        return Route(selector(trace, []), None)
    templates: list[Template] = []
    numbers: dict[Value, int] = {}  # each template's number, by its exact key (1 is not #t)
    sent: list[Stage] = []
    for stage in stages:
        out = []
        for target, messages in stage:
            sends = []
            for ref, value in messages:
                t = template(value)
                if t is None:
                    return Route(selector(trace, []), None)
                key = exact_key(t)
                if key not in numbers:
                    numbers[key] = len(templates)
                    templates.append(t)
                sends.append((ref, numbers[key]))
            out.append((target, tuple(sends)))
        sent.append(tuple(out))
    if not trace.guards and templates in ([("part", ())], []):
        return Route(None, tuple(sent))  # the payload as it came, whatever it is
    return Route(selector(trace, templates), tuple(sent), _fields_of(trace, templates))


def _fields_of(trace: Trace, templates: list[Template]) -> tuple[Symbol, int] | None:
    """``(label, arity)`` if the steps looked at nothing but the payload's class (a record), its
    label (a symbol) and its arity, and what they sent is the tuple of its fields in order (as
    local access and a fragment's rule hand a client's record on to the captures of a pattern
    that binds each field); else None."""
    guards = trace.guards
    label = guards.get(((), LABEL))
    arity = guards.get(((), LENGTH))
    if (
        len(guards) != 3
        or guards.get(((), CLASS)) is not Record
        or label.__class__ is not Symbol
        or arity.__class__ is not int
    ):
        return None
    fields = ("tuple", tuple(("part", (i,)) for i in range(arity)))  # type: ignore[arg-type]
    return (label, arity) if templates == [fields] else None  # type: ignore[return-value]


def _stages(entry: Ref, witness: Witness) -> list[list] | None:
    """What the steps send out of the entry's actor for ``witness``, per turn: each target
    actor with its ``(ref, value)`` messages; None if no route can stand for them."""
    actor = entry.actor
    stages: list[list] = []
    pending: list[tuple[Ref, Value]] = [(entry, witness)]
    turns = 0
    try:
        while pending:
            turns += 1
            if turns > MAX_STAGES:  # steps that keep sending to their own actor
                return None
            turn = _Recording(actor.root)
            for ref, value in pending:
                if not ref.pure:
                    return None
                entity = ref.entity
                if ref.facet.alive:  # as a turn skips an event for a stopped facet
                    turn.facet = ref.facet
                    entity.on_message(turn, value)
            pending = []
            stage = []
            for target, batch in turn._batches():
                if target is actor:  # queued first, as prompt and without a sync: runs next
                    for kind, ref, _value, _handle in batch:
                        if kind != MESSAGE or not ref.entity.prompt:
                            return None
                    pending = [(ref, value) for _kind, ref, value, _handle in batch]
                    continue
                stage.append((target, [(ref, value) for _kind, ref, value, _handle in batch]))
            if stage:
                stages.append(stage)
    except (_Refused, Unfaithful):
        return None
    except Exception:  # the turns will raise it again for the real message
        return None
    return stages


def _route(routes: dict, ref: Ref, payload: Value) -> tuple[Route, tuple] | None:
    """The route for ``payload`` sent to ``ref`` and what it makes of it, derived and kept in
    ``routes`` if new; None if the payload takes the turns."""
    variants = routes.get(ref)
    if variants is None:
        variants = routes[ref] = []
    for route in variants:
        select = route.select
        made = (payload,) if select is None else select(payload)
        if made is not None:
            return None if route.stages is None else (route, made)
    if len(variants) == MAX_VARIANTS:
        return None
    route = derive(ref, payload)
    variants.append(route)
    if route.stages is None:
        return None
    made = (payload,) if route.select is None else route.select(payload)
    return None if made is None else (route, made)


_MESSAGES_ONLY: Final = frozenset((MESSAGE,))
_payload_of = itemgetter(2)


def follow(scheduler: Scheduler, sender: Actor, batches: dict[Actor, list[tuple]]) -> bool:
    """Send what ``batches`` (from ``sender``, a relay applying a packet) would make their
    target's turns send, by the routes of its entries; False, having done nothing, unless each
    event is a message with a route and the scheduler is idle (the caller then queues them).
    """
    if len(batches) != 1 or scheduler.running or scheduler._queue or scheduler._open:
        return False
    ((actor, events),) = batches.items()
    if not actor.alive:
        return False
    n = len(events)
    if n == 1:  # a round trip's packet: no scans, no batches made in C
        kind, ref, payload, _handle = events[0]
        if kind != MESSAGE or not ref.pure:
            return False
        routes = actor.routes
        if routes is None:
            routes = actor.routes = {}
        found = _route(routes, ref, payload)
        if found is None:
            return False
        single = found[0].single
        if single is None:
            _send_stages(scheduler, actor, (found,))
        else:
            target, to, i = single
            scheduler.send(actor, {target: [(MESSAGE, to, found[1][i], None)]})
    else:
        if n >= SCAN_IN_C:
            if not _MESSAGES_ONLY.issuperset(map(kind_of, events)):
                return False
            entries = set(map(ref_of, events))
        else:
            entries = set()
            for kind, ref, _payload, _handle in events:
                if kind != MESSAGE:
                    return False
                entries.add(ref)
        for ref in entries:  # refused at once where no route can start
            if not ref.pure:
                return False
        routes = actor.routes
        if routes is None:
            routes = actor.routes = {}
        if len(entries) != 1 or not _follow_entry(scheduler, actor, routes, events):
            found_all = [_route(routes, event[1], event[2]) for event in events]
            if None in found_all:
                return False
            _send_stages(scheduler, actor, found_all)  # type: ignore[arg-type]
    actor.work += n  # the work its turns would have done (feds.node.Node.local_flush)
    scheduler.routed += n
    return True


def _follow_entry(scheduler: Scheduler, actor: Actor, routes: dict, events: list[tuple]) -> bool:
    """Follow one route for a packet of messages to one entry, if one route holds for all of
    them, with the batches made in C (a Python call per message at most: the route's
    selector); False, having sent nothing, if it does not."""
    payloads = list(map(_payload_of, events))
    found = _route(routes, events[0][1], payloads[0])
    if found is None:
        return False
    route = found[0]
    if route.select is None:
        columns = [payloads]
    else:
        made = list(map(route.select, payloads))
        if None in made:
            return False
        columns = [list(map(itemgetter(i), made)) for i in range(len(made[0]))]
    for stage in route.stages:  # type: ignore[union-attr]
        out: dict[Actor, list[tuple]] = {}
        for target, sends in stage:
            if len(sends) == 1:
                ((to, i),) = sends
                out[target] = list(zip(repeat(MESSAGE), repeat(to), columns[i], repeat(None)))
            else:
                out[target] = [
                    (MESSAGE, to, row[i], None)
                    for row in zip(*columns, strict=True)
                    for to, i in sends
                ]
        scheduler.send(actor, out)
    return True


def _send_stages(scheduler: Scheduler, actor: Actor, found: Sequence[tuple[Route, tuple]]) -> None:
    """Send, stage by stage as the actor's turns would commit, what the routes ``found`` (one
    per message, with the values each makes of its payload) say."""
    depth = 0
    for route, _made in found:
        if len(route.stages) > depth:  # type: ignore[arg-type]
            depth = len(route.stages)  # type: ignore[arg-type]
    for k in range(depth):
        out: dict[Actor, list[tuple]] = {}
        for route, made in found:
            stages = route.stages
            if k < len(stages):  # type: ignore[arg-type]
                for target, sends in stages[k]:  # type: ignore[index]
                    batch = out.get(target)
                    if batch is None:
                        batch = out[target] = []
                    for ref, i in sends:
                        batch.append((MESSAGE, ref, made[i], None))
        if out:
            scheduler.send(actor, out)
