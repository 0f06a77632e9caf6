"""Message routes: where a message to an entity of an idle actor goes, worked out once from the
actor's own steps and then followed for every message like it, without running them.

A node passes most messages on unchanged: an aggregate-subs inbox makes ``<pub b pat x>`` of
the captures ``x`` it receives, the fragment's index finds the next-hop rules that match, and
each hands ``x`` to a neighbour's inbox. What that chain of steps sends depends on the node's
state (its Observes, its links), not on ``x``, as long as no step looks at ``x``. So the first
message to an entry point (an inbox, a mirror, local access) is first run on a *probe*, a
stand-in payload that notices every look at it (its class, an attribute, a comparison, its hash,
length, items, truth). If no step looked, and every step only sent messages
(:attr:`~feds.actor.Entity.pure_messages`), the messages the steps sent out of the actor, stage
by stage as the actor's turns would send them, are the entry's *route*: every later message to
that entry is sent to the same refs, carrying its own payload, with no turn, no record, no
index walk. A step that looked at a bare probe may still pass a captures tuple through without
looking at its items (observer-flood's mirrors take ``c[0]`` of ``(x,)``): the route is then
worked out again with a tuple of probes, and holds for tuples of that length.

Routes are derived from the rules, never written: the protocol modules stay the only statement
of each protocol, and a route is what their code did with the probe. Why following one is the
same as running the steps (``docs/protocols.md``, "Message routes"):

* A route is followed only for a packet whose events are all messages, to entries of one
  actor, when the whole scheduler is idle: the actor's turns for those messages would be the
  very next turns to run, and nothing could come between them.
* It is followed only while the actor's state is the one it was derived in: the actor drops
  its routes (:attr:`~feds.actor.Actor.routes`) as soon as it does anything else (handles an
  assertion, a retraction or a sync, runs an action, stops a facet, lets a step that is not
  pure handle a message).
* The steps' output did not depend on the payload (the probe was never looked at), so they
  would send the same messages, to the same refs, carrying the real payload; the route sends
  them in the same order per target, stage after stage as the turns commit (the actor's own
  prompt batches, its dataspace's, run next), through the same :meth:`Scheduler.send
  <feds.actor.Scheduler.send>` its turns' commits use, so a relay takes them as it would.
* A step that would raise, or do anything but send messages, makes no route: the message takes
  the actor's turns and fails or acts there as before.

Sans-IO like the actor engine it extends; :mod:`feds.relay` follows routes for the packets it
applies.
"""

from __future__ import annotations

from itertools import repeat
from operator import is_, itemgetter
from typing import Any, Final

from feds.actor import (
    MESSAGE,
    SCAN_IN_C,
    Actor,
    Ref,
    Scheduler,
    Turn,
    kind_of,
    ref_of,
)
from feds.values import Value

__all__ = ["MAX_STAGES", "MAX_TUPLE", "derive", "follow"]

MAX_STAGES: Final = 8
"""Most turns of its actor a route may stand for (the protocols need two)."""
MAX_TUPLE: Final = 64
"""Longest captures tuple a route is worked out for item by item."""

Send = tuple[Ref, int | None]
"""One message a route sends: the ref, and what it carries: the payload (None), or item ``i``
of a payload that is a tuple (``i``)."""
Stage = tuple[tuple[Actor, tuple[Send, ...]], ...]
"""The messages one turn of the actor sends out of it for one message: each target actor with
what it is sent, in the order the turn sends it."""
Route = tuple[Stage, ...]

_MESSAGES_ONLY: Final = frozenset((MESSAGE,))
_TUPLE_ONLY: Final = frozenset((tuple,))


class _Looked(BaseException):
    """A step looked at the probe. A BaseException, so that no ``except Exception`` in a step
    takes it for an error of its own and goes on with something else."""


class _Refused(BaseException):
    """A step did something a route cannot stand for (not only sending messages)."""


class _Trace:
    """Whether anything looked at a probe (kept even if a step swallowed :class:`_Looked`)."""

    __slots__ = ("looked",)

    def __init__(self) -> None:
        self.looked = False


class _Probe:
    """A payload that notices being looked at: every operation but identity sets the trace and
    raises :class:`_Looked` (its text forms only set the trace, so a log line does no harm)."""

    __slots__ = ("_trace",)

    def __init__(self, trace: _Trace) -> None:
        object.__setattr__(self, "_trace", trace)


_LOOKS: Final = """
    __getattribute__ __setattr__ __delattr__ __dir__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__
    __hash__ __bool__ __len__ __length_hint__ __iter__ __reversed__ __next__ __getitem__
    __setitem__ __delitem__ __contains__ __call__ __index__ __int__ __float__ __complex__
    __round__ __trunc__ __floor__ __ceil__ __neg__ __pos__ __abs__ __invert__ __add__ __radd__
    __sub__ __rsub__ __mul__ __rmul__ __matmul__ __rmatmul__ __truediv__ __rtruediv__
    __floordiv__ __rfloordiv__ __mod__ __rmod__ __divmod__ __rdivmod__ __pow__ __rpow__
    __lshift__ __rlshift__ __rshift__ __rrshift__ __and__ __rand__ __xor__ __rxor__ __or__
    __ror__ __enter__ __exit__ __await__ __aiter__ __anext__ __reduce__ __reduce_ex__ __copy__
    __deepcopy__ __getstate__ __sizeof__ __bytes__ __buffer__ __fspath__
"""
"""Every operation on a probe that looks at it (all but identity and ``type``)."""


def _look(self: _Probe, *args: Any) -> Any:
    object.__getattribute__(self, "_trace").looked = True
    raise _Looked


def _show(self: _Probe, *args: Any) -> str:
    object.__getattribute__(self, "_trace").looked = True
    return "<probe>"


for _name in _LOOKS.split():
    setattr(_Probe, _name, _look)
for _name in ("__repr__", "__str__", "__format__"):
    setattr(_Probe, _name, _show)


class _Recording(Turn):
    """A turn that runs an actor's steps for a probe and commits nothing: anything but a
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
        if ref.actor is self.actor and ref.entity.inline and not ref.entity.pure_messages:
            raise _Refused

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise _Refused

    sync = spawn = new_facet = on_stop = stop = stop_actor = on_commit = later = _refuse


def derive(entry: Ref, items: int | None = None) -> Route | None:
    """The route of messages to ``entry`` (the probe a bare one, or with ``items`` a tuple of
    that many), or None if there is none: a step looked at the probe, did something but send
    messages, raised, or the steps did not end within :data:`MAX_STAGES` turns.

    Raises nothing the steps raise: their failure, like any refusal, leaves the message to the
    actor's turns, which fail as they would have."""
    route = _derive(entry, items)
    return None if route is _LOOKED else route  # type: ignore[return-value]


_LOOKED: Final = object()
"""What :func:`_derive` returns when a step looked at the probe."""


def _derive(entry: Ref, items: int | None) -> Route | object | None:
    actor = entry.actor
    trace = _Trace()
    probe: Any = _Probe(trace) if items is None else tuple(_Probe(trace) for _ in range(items))
    stages: list[Stage] = []
    pending: list[tuple[Ref, Value]] = [(entry, probe)]
    try:
        while pending:
            if len(stages) == MAX_STAGES:
                return None
            turn = _Recording(actor.root)
            for ref, value in pending:
                entity = ref.entity
                if not entity.pure_messages:
                    return None
                if ref.facet.alive:  # as a turn skips an event for a stopped facet
                    turn.facet = ref.facet
                    entity.on_message(turn, value)
            pending = []
            stage: list[tuple[Actor, tuple[Ref, ...]]] = []
            for target, batch in turn._batches():
                if target is actor:  # queued first, as prompt and without a sync: runs next
                    for kind, ref, _value, _handle in batch:
                        if kind != MESSAGE or not ref.entity.prompt:
                            return None
                    pending = [(ref, value) for _kind, ref, value, _handle in batch]
                    continue
                sends = []
                for kind, ref, value, _handle in batch:
                    carried = _carried(value, probe)
                    if kind != MESSAGE or carried is _NOTHING:
                        return None
                    sends.append((ref, carried))
                stage.append((target, tuple(sends)))
            if stage:
                stages.append(tuple(stage))
    except _Looked:
        return _LOOKED
    except _Refused:
        return None
    except Exception:  # the turns will raise it again for the real message
        return None
    return _LOOKED if trace.looked else tuple(stages)


_NOTHING: Final = object()


def _carried(value: Value, probe: Any) -> int | object | None:
    """What a message the steps sent carries of the probe: all of it as it came (None; a tuple
    of probes may come out as an equal new tuple), its item ``i`` (``i``), or something else
    (:data:`_NOTHING`). ``type`` and identity do not alert the probe; nothing else is asked."""
    if value is probe:
        return None
    if type(probe) is tuple:
        if type(value) is tuple and len(value) == len(probe) and all(map(is_, value, probe)):
            return None
        for i, item in enumerate(probe):
            if value is item:
                return i
    return _NOTHING


_ANY: Final = -1
"""The key of a route that holds for any payload (one for tuples of ``n`` items is ``n``)."""


def _route(routes: dict, ref: Ref, payload: Value) -> Route | None:
    """The route for ``payload`` sent to ``ref``, derived and kept in ``routes`` if new."""
    by_kind = routes.get(ref)
    if by_kind is None:
        by_kind = routes[ref] = {}
        found = _derive(ref, None)
        if found is not _LOOKED:
            by_kind[_ANY] = found
            return found  # type: ignore[return-value]
    elif _ANY in by_kind:
        return by_kind[_ANY]
    if payload.__class__ is not tuple or len(payload) > MAX_TUPLE:
        return None
    n = len(payload)
    if n in by_kind:
        return by_kind[n]
    found = _derive(ref, n)
    route = by_kind[n] = None if found is _LOOKED else found
    return route  # type: ignore[return-value]


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
        if not ref.entity.pure_messages:
            return False
    routes = actor.routes
    if routes is None:
        routes = actor.routes = {}
    payloads = [event[2] for event in events]
    if len(entries) == 1:  # one entry: one route, if its payloads are alike
        (ref,) = entries
        route = _uniform_route(routes, ref, payloads)
        if route is None:
            return False
        for stage in route:
            scheduler.send(actor, _stage_batches(stage, payloads))
    else:
        found = [_route(routes, event[1], event[2]) for event in events]
        if None in found:
            return False
        for k in range(max(map(len, found))):  # type: ignore[arg-type]
            out: dict[Actor, list[tuple]] = {}
            for payload, route in zip(payloads, found, strict=True):
                if k < len(route):  # type: ignore[arg-type]
                    for target, sends in route[k]:  # type: ignore[index]
                        out.setdefault(target, []).extend(
                            (MESSAGE, ref, payload if i is None else payload[i], None)
                            for ref, i in sends
                        )
            scheduler.send(actor, out)
    actor.work += n  # the work its turns would have done (feds.node.Node.local_flush)
    scheduler.routed += n
    return True


def _uniform_route(routes: dict, ref: Ref, payloads: list[Value]) -> Route | None:
    """The one route for all of ``payloads`` sent to ``ref``, or None (also if they need
    different ones: the caller then queues them)."""
    first = _route(routes, ref, payloads[0])
    if first is None or len(payloads) == 1:
        return first
    by_kind = routes[ref]
    if _ANY in by_kind:
        return first
    lengths = set(map(len, payloads)) if _TUPLE_ONLY.issuperset(map(type, payloads)) else None
    return first if lengths is not None and len(lengths) == 1 else None


def _stage_batches(stage: Stage, payloads: list[Value]) -> dict[Actor, list[tuple]]:
    """The batches one stage of a route sends for ``payloads``, per target actor."""
    out: dict[Actor, list[tuple]] = {}
    for target, sends in stage:
        if len(sends) == 1:
            ((ref, i),) = sends
            carried = payloads if i is None else map(itemgetter(i), payloads)
            out[target] = list(zip(repeat(MESSAGE), repeat(ref), carried, repeat(None)))
        else:
            out[target] = [
                (MESSAGE, ref, payload if i is None else payload[i], None)
                for payload in payloads
                for ref, i in sends
            ]
    return out
