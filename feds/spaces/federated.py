"""Federated spaces: one pSpaces space spread over the overlay, with exactly-once get.

Every participant (a node, or a program attached to a node as a client) hosts a
:class:`SpaceMember` for the space, an entity that talks to the overlay only through assertions
made at its node's local access. The records (``NAME`` is the space's name, a string)::

    <ps-tuple NAME owner id fields>      the owner holds tuple ``id`` (fields: jSpace JSON text)
    <ps-take  NAME owner getter n id>    getter's request ``n``: "give me your tuple ``id``"
    <ps-given NAME owner getter n answer> the owner's one answer to that request: the fields
                                          (JSON text) or #f if the tuple had gone
    <ps-ack   NAME owner getter n>       the getter has the answer; the owner may forget it

**Ownership.** A tuple put at member M is owned by M: it lives in M's memory and M asserts its
``ps-tuple`` record, so every member sees it in its *view* (query and queryp read the view and
never need a round trip). The client that put it can go away; the tuple stays with M. When M
stops, its ``ps-tuple`` assertions leave the overlay with it and its tuples are lost.

**Exactly-once get.** Removing a tuple is one step in the owner's turn: the owner pops the tuple
the first time it sees a take for it, and records the answer under the request's key ``(getter,
n)``; every later sight of the same take (a re-asserted request after a link came back) finds
that answer and changes nothing, so one tuple has one taker. The answer stays asserted until the
getter acknowledges it; the getter resolves a request at most once (the first answer it sees),
and a tuple that arrives for a caller that has given up (cancelled, timed out, disconnected) is
put again at the getter, which becomes its owner: a tuple is never lost and never delivered
twice. Link failures need nothing else: both sides keep their state, a lost link retracts the
assertions that crossed it, and the reconnected link re-establishes the ones still held (take
and answer), so the exchange resumes where it stopped. A getter that saw its answer retracted by
a failing link (not by the owner) forgets the request; when the answer shows up again, it
acknowledges it again without delivering it a second time (request numbers only grow, so an
unknown number below the counter is one already resolved).

Assumption: the assertions of one member reach another in the order it made them (the tree has
one path between two nodes and links are FIFO). A member that stops for good while its take is
answered but not acknowledged keeps that tuple from the space (its owner holds it for the
request; see ``docs/tuplespaces.md``).

Retrieval order is the order of the view: a member takes its own oldest matching tuple first,
then asks owners in the order their tuples became visible to it. The kinds (queue, stack, …)
are not kept across the federation.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from feds.actor import Entity, Handle, Ref, Turn
from feds.dataspace import observe
from feds.pattern_forms import BIND, DISCARD, GROUP, LIT, REC
from feds.spaces.templates import matches
from feds.spaces.wire import decode_tuple, encode_tuple
from feds.values import FrozenDict, Record, Symbol, Value

TUPLE = Symbol("ps-tuple")
TAKE = Symbol("ps-take")
GIVEN = Symbol("ps-given")
ACK = Symbol("ps-ack")

CAPTURE = object()
"""A placeholder in :func:`_pattern`: capture this field."""

Deliver = Callable[[tuple | None], None]
DeliverAll = Callable[[list[tuple]], None]


def encode_fields(fields: tuple) -> str:
    """A tuple as jSpace's typed JSON text (so an overlay value carries Java types exactly)."""
    return json.dumps(encode_tuple(fields), separators=(",", ":"), sort_keys=True)


def decode_fields(text: str) -> tuple:
    return decode_tuple(json.loads(text))


def _pattern(label: Symbol, *fields: Any) -> Value:
    """``<label f…>`` with literal fields, or a capture where a field is :data:`CAPTURE`."""
    entries = {
        i: Record(BIND, (DISCARD,)) if f is CAPTURE else Record(LIT, (f,))
        for i, f in enumerate(fields)
    }
    return Record(GROUP, (Record(REC, (label,)), FrozenDict(entries)))


@dataclass(eq=False)
class Want:
    """One caller's get/getp/query/queryp, until it is answered or given up."""

    template: tuple
    remove: bool
    blocking: bool
    deliver: Deliver
    only: tuple[str, int] | None = None
    """For getAll: take exactly this ``(owner, id)`` or nothing."""
    tried: set[tuple[str, int]] = field(default_factory=set)
    asking: int | None = None
    """The number of the take in flight for this want."""
    done: bool = False


class _Feed(Entity):
    """Forwards one observer's matches (captures) to a member method, counting duplicates."""

    def __init__(self, seen: Callable, gone: Callable | None = None) -> None:
        self.seen = seen
        self.gone = gone
        self.current: dict[Handle, tuple] = {}

    def on_publish(self, turn: Turn, value: Value, handle: Handle) -> None:
        self.current[handle] = value
        self.seen(turn, *value)

    def on_retract(self, turn: Turn, handle: Handle) -> None:
        value = self.current.pop(handle, None)
        if value is not None and self.gone is not None and value not in self.current.values():
            self.gone(turn, *value)


class SpaceMember:
    """One participant's share of federated space ``name``: its own tuples, its view of the
    others', and the owner and getter halves of the take exchange. Sans-IO: every method runs
    in a turn of the member's actor; :meth:`start` (in such a turn) publishes its observers at
    ``access``, the local access of the node it is attached to.
    """

    def __init__(self, name: str, me: str, access: Ref) -> None:
        self.name = name
        self.me = me
        self.access = access
        self.owned: dict[int, tuple] = {}
        self._owned_handles: dict[int, Handle] = {}
        self._next_id = 0
        self.view: dict[tuple[str, int], tuple] = {}
        """Tuples of other members that this one has seen, in the order it saw them."""
        self.answers: dict[tuple[str, int], Handle] = {}
        """Owner side: the answer asserted for each request ``(getter, n)`` not yet acked."""
        self.blocked: list[Want] = []
        self.asking: dict[int, tuple[Want, Handle]] = {}
        """Getter side: requests in flight → the want and the take assertion."""
        self.acking: dict[int, Handle] = {}
        """Getter side: resolved requests whose answer is still asserted → the ack."""
        self._counter = 0

    def start(self, turn: Turn) -> None:
        feeds = (
            (
                _pattern(TUPLE, self.name, CAPTURE, CAPTURE, CAPTURE),
                _Feed(self._seen, self._unseen),
            ),
            (_pattern(TAKE, self.name, self.me, CAPTURE, CAPTURE, CAPTURE), _Feed(self._take)),
            (
                _pattern(GIVEN, self.name, CAPTURE, self.me, CAPTURE, CAPTURE),
                _Feed(self._given, self._given_gone),
            ),
            (_pattern(ACK, self.name, self.me, CAPTURE, CAPTURE), _Feed(self._acked)),
        )
        for pattern, feed in feeds:
            turn.publish(self.access, observe(pattern, turn.ref(feed)))

    def _publish(self, turn: Turn, label: Symbol, *fields: Value) -> Handle:
        return turn.publish(self.access, Record(label, (self.name, *fields)))

    # -- the caller's operations ------------------------------------------------------------

    def put(self, turn: Turn, fields: tuple) -> None:
        """Own ``fields`` here and make them visible everywhere; serves blocked wants."""
        self._next_id += 1
        i = self._next_id
        self.owned[i] = fields
        self._owned_handles[i] = self._publish(turn, TUPLE, self.me, i, encode_fields(fields))
        self._retry(turn)

    def want(self, turn: Turn, want: Want) -> None:
        """Start a get (``want.remove``) or query, blocking or not; ``want.deliver`` is called
        once, with the tuple, or with None for a non-blocking one that found nothing."""
        if not self._attempt(turn, want) and want.blocking:
            self.blocked.append(want)

    def cancel(self, want: Want) -> None:
        """Give up ``want``: it is never delivered; a tuple already on its way is put here."""
        want.done = True
        if want in self.blocked:
            self.blocked.remove(want)

    def want_all(self, turn: Turn, template: tuple, remove: bool, deliver: DeliverAll) -> None:
        """getAll (``remove``) or queryAll: every match put anywhere before the call.

        A federated sync first (one wave over the whole tree and back), so that every tuple put
        before now is in the view; then a queryAll reads the view, and a getAll takes each
        match with its own take (exactly-once per tuple, not atomic across owners: a tuple
        another getter takes first is left out)."""

        def collect(t: Turn) -> None:
            keys = self.matching(template)
            if not remove or not keys:
                deliver([self.fields(k) for k in keys])
                return
            found: list[tuple] = []
            left = len(keys)

            def one(fields: tuple | None) -> None:
                nonlocal left
                left -= 1
                if fields is not None:
                    found.append(fields)
                if not left:
                    deliver(found)

            for key in keys:
                self.want(t, Want(template, True, False, one, only=key))

        turn.sync(self.access, collect)

    def matching(self, template: tuple) -> list[tuple[str, int]]:
        """Keys of every tuple, own first, that match ``template`` in this member's view."""
        own = [(self.me, i) for i, f in self.owned.items() if matches(template, f)]
        return own + [k for k, f in self.view.items() if matches(template, f)]

    def fields(self, key: tuple[str, int]) -> tuple:
        return self.owned[key[1]] if key[0] == self.me else self.view[key]

    # -- getter half ------------------------------------------------------------------------

    def _attempt(self, turn: Turn, want: Want) -> bool:
        """Serve ``want`` from here or send a take; False if there is nothing to try now."""
        for key in [want.only] if want.only else self.matching(want.template):
            owner, i = key
            if key in want.tried:
                continue
            if owner == self.me:
                if i in self.owned:
                    found = self._take_own(turn, i) if want.remove else self.owned[i]
                    self._resolve(turn, want, found)
                    return True
                continue
            if key not in self.view:
                continue
            if not want.remove:
                self._resolve(turn, want, self.view[key])
                return True
            want.tried.add(key)
            self._counter += 1
            n = self._counter
            want.asking = n
            self.asking[n] = (want, self._publish(turn, TAKE, owner, self.me, n, i))
            return True
        if not want.blocking:
            self._resolve(turn, want, None)
            return True
        return False

    def _take_own(self, turn: Turn, i: int) -> tuple:
        turn.retract(self._owned_handles.pop(i))
        return self.owned.pop(i)

    def _resolve(self, turn: Turn, want: Want, found: tuple | None) -> None:
        if want.done:
            if found is not None and want.remove:
                self.put(turn, found)  # its caller gave up: it lives on here
            return
        want.done = True
        want.deliver(found)

    def _retry(self, turn: Turn) -> None:
        for want in list(self.blocked):
            if want.done or (want.asking is None and self._attempt(turn, want)):
                self.blocked.remove(want)

    def _seen(self, turn: Turn, owner: Value, i: Value, text: Value) -> None:
        if owner != self.me and isinstance(owner, str) and isinstance(text, str):
            self.view[(owner, i)] = decode_fields(text)
            self._retry(turn)

    def _unseen(self, turn: Turn, owner: Value, i: Value, text: Value) -> None:
        self.view.pop((owner, i), None)

    def _given(self, turn: Turn, owner: Value, n: Value, answer: Value) -> None:
        if n in self.acking:
            return
        entry = self.asking.pop(n, None)
        self.acking[n] = self._publish(turn, ACK, owner, self.me, n)
        if entry is None:
            return  # resolved already, before a link failure hid its answer: ack it again
        want, take = entry
        turn.retract(take)
        want.asking = None
        if isinstance(answer, str):
            self._resolve(turn, want, decode_fields(answer))
        elif not want.done and not self._attempt(turn, want):
            self.blocked.append(want)
        self._retry(turn)

    def _given_gone(self, turn: Turn, owner: Value, n: Value, answer: Value) -> None:
        ack = self.acking.pop(n, None)
        if ack is not None:
            turn.retract(ack)

    # -- owner half -------------------------------------------------------------------------

    def _take(self, turn: Turn, getter: Value, n: Value, i: Value) -> None:
        key = (getter, n)
        if key in self.answers:
            return
        answer: Value = False
        if i in self.owned:
            answer = encode_fields(self._take_own(turn, i))
        self.answers[key] = self._publish(turn, GIVEN, self.me, getter, n, answer)

    def _acked(self, turn: Turn, getter: Value, n: Value) -> None:
        answer = self.answers.pop((getter, n), None)
        if answer is not None:
            turn.retract(answer)
