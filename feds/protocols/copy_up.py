"""The "copy-up" protocol: every non-subscription assertion is copied up to the root.

Schema (seed): ``LinkEnvelope = <link @id any @body any>``,
``FromUplink = <from-uplink @distributor #:any @body any>``; ``Content = <content @body any>`` and
``At = <at @observer #:any @body any>`` are kept as counts (offers, deliveries), not records.

* Local access wraps ``v`` as ``<link #f v>``.
* The uplink relays the fragment's ``<content v>`` to the parent as ``<link f v>``: here the
  fragment's offers (``_Offers``), a count per ``v`` instead of the record. The parent hands
  each child an *inbox* when it accepts its link (:meth:`CopyUp.accept`): the child offers
  ``v`` to it, and the inbox re-asserts ``<link f v>`` in the parent's fragment. An inbox
  stands for one child ``f``, so only ``v`` crosses the link, and a node passing an assertion
  up neither decodes nor encodes the envelope and its reference.
* Every ``<link _ v>`` whose ``v`` is not an Observe is asserted back as ``<content v>``.
* Per distinct observed pattern ``pat`` (in ``<link _ <Observe pat _>>``) a distributor ``d``
  turns each ``x`` it receives into ``<from-uplink d x>``, and ``<content <Observe pat d>>``
  carries one aggregated subscription up; each observer ``e`` of ``pat`` gets ``<at e x>`` for
  each ``<from-uplink d x>``.
* Every fragment delivers ``<at e x>`` as ``x`` at ``e`` (deduplication): here through the
  fragment's :class:`~feds.protocols.Deliveries`, without the record.
* For each ``<link f <Observe pat e>>``, the fragment watches ``<link i v>`` with ``v`` matching
  ``pat`` and answers ``<at e vs>`` when ``i`` is ``#f`` or ``i ≠ f`` (split horizon).

Local access puts an observation token (:class:`~feds.protocols.Observation`) in place of an
application's observer, so ``e`` in ``<at e x>`` is one observation: an entity observing two
patterns gets each match once per observation, as from one dataspace.

Messages follow the same rules, each step a message, offered and delivered in the same turns as
assertions: so a message never overtakes an assertion made before it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from feds.actor import Handle, HoldsUntracked, Ref, Turn, hold_untracked
from feds.dataspace import OBSERVE, observe
from feds.pattern_forms import DISCARD, bind, lit, rec_group
from feds.protocols import Deliveries, Protocol, Sink, deliver
from feds.reactive import during, relay_object
from feds.values import Record, Symbol, Value, exact_key

if TYPE_CHECKING:
    from feds.node import Node

LINK = Symbol("link")
FROM_UPLINK = Symbol("from-uplink")
LOCAL_ID = False
"""The link id of local assertions (``#f`` in the seed)."""


def _is_observe(v: Value) -> bool:
    return v.__class__ is Record and v.label == OBSERVE and len(v.fields) == 2


def link_observe(link_id: Value, pattern: Value, observer: Value) -> Value:
    """Pattern for ``<link link_id <Observe pattern observer>>``."""
    return rec_group(LINK, [link_id, rec_group(OBSERVE, [pattern, observer])])


class CopyUp(Protocol):
    name = "copy-up"
    revision = 2  # 1: a child offered <link f v> to the parent's fragment; 2: v, to its inbox
    per_observation = True

    def __init__(self) -> None:
        self.offers: dict[Ref, _Offers] = {}
        """Each node's offers to its parent, by the node's fragment."""

    def wrap(self, node: Node, value: Value) -> Value:
        return Record(LINK, (LOCAL_ID, value))

    def setup(self, turn: Turn, node: Node) -> None:
        F = node.fragment
        at = Deliveries(turn)

        offers = self.offers[F] = _Offers(turn)
        deliver(turn, F, rec_group(LINK, [DISCARD, bind()]), offers, _content)

        def distribute(t: Turn, pat: Value) -> None:
            d = relay_object(t, lambda x: (F, Record(FROM_UPLINK, (d, x))))
            subscription = observe(pat, d)
            offered = offers.add(t, subscription)
            t.on_stop(lambda t: offers.remove(t, offered))

            def observer_of_pat(t: Turn, e: Ref) -> None:
                deliver(t, F, rec_group(FROM_UPLINK, [lit(d), bind()]), at, lambda c: (e, c[0]))

            during(t, F, link_observe(DISCARD, lit(pat), bind()), observer_of_pat)

        during(turn, F, link_observe(DISCARD, bind(), DISCARD), distribute)

        def answer(t: Turn, link_id: Value, pat: Value, e: Ref) -> None:
            def split_horizon(c: tuple) -> tuple[Ref, Value] | None:
                i = c[0]
                if i is not LOCAL_ID and i == link_id:
                    return None
                return e, c[1:]

            deliver(t, F, rec_group(LINK, [bind(), pat]), at, split_horizon)

        during(turn, F, link_observe(bind(), bind(), bind()), answer)

    def link(self, turn: Turn, node: Node, peer: Ref, peer_is_parent: bool) -> None:
        if peer_is_parent:
            self.offers[node.fragment].link_up(turn, peer)

    def accept(self, turn: Turn, node: Node, child: Ref) -> Ref:
        """The child's inbox: what the child offers it is ``<link child v>`` here."""
        F = node.fragment
        return relay_object(turn, lambda v: (F, Record(LINK, (child, v))))


def _content(c: tuple) -> Value | None:
    """What a ``<link _ v>`` offers the parent: ``v``, unless it is an Observe."""
    return None if _is_observe(c[0]) else c[0]


class _Offers(Sink, HoldsUntracked):
    """The seed's ``<content v>``, kept as a count: what this fragment offers its parent.

    The seed asserts ``<content v>`` for each ``<link _ v>`` that is not an Observe and for each
    aggregated subscription, and the uplink copies each ``<content v>`` to the parent as
    ``<link f v>``. Nothing else observes ``<content …>``, so the record need not enter the bag:
    the count per ``v`` is kept here and ``v`` is asserted at the parent's inbox for this node
    (which makes it ``<link f v>`` there) in the turn of the rule that offered ``v`` (two turns
    sooner), or when the uplink comes up. A message is sent to the parent in that same turn, so
    it keeps its place behind the assertions before it.

    An offer is asserted at the parent untracked (:class:`~feds.actor.HoldsUntracked`):
    retracted here when its last offer goes, or when the uplink goes.
    """

    def __init__(self, turn: Turn) -> None:
        self.held: dict[Value, list] = {}
        """``exact_key(v)`` → ``[offers, handle at the parent or None, v]`` (type-exact: ``1``
        and ``#t`` are two offers)."""
        self.parent: Ref | None = None
        """This node's inbox at the parent while the uplink is up."""
        hold_untracked(turn.actor, self)

    def add(self, turn: Turn, out: Value) -> Value:
        key = exact_key(out)
        entry = self.held.get(key)
        if entry is not None:
            entry[0] += 1
        else:
            self.held[key] = [1, self._up(turn, out), out]
        return key

    def _up(self, turn: Turn, v: Value) -> Handle | None:
        return None if self.parent is None else turn.publish_untracked(self.parent, v)

    def remove(self, turn: Turn, key: Value) -> None:
        entry = self.held[key]
        if entry[0] > 1:
            entry[0] -= 1
        else:
            del self.held[key]
            if entry[1] is not None:
                turn.retract_untracked(self.parent, entry[1])  # type: ignore[arg-type]

    def send(self, turn: Turn, out: Value) -> None:
        if self.parent is not None:
            turn.message(self.parent, out)

    def link_up(self, turn: Turn, parent: Ref) -> None:
        """The uplink is up (in its facet), ``parent`` this node's inbox there: offer
        everything held."""
        self.parent = parent
        for entry in self.held.values():
            entry[1] = self._up(turn, entry[2])
        turn.on_stop(self._link_down)

    def _link_down(self, turn: Turn) -> None:
        """The uplink's facet stops: withdraw everything offered through it (offered again
        when an uplink comes up)."""
        for entry in self.held.values():
            if entry[1] is not None:
                turn.retract_untracked(self.parent, entry[1])  # type: ignore[arg-type]
                entry[1] = None
        self.parent = None

    def held_elsewhere(self) -> list[tuple[Handle, Ref]]:
        parent = self.parent
        return [(entry[1], parent) for entry in self.held.values() if entry[1] is not None]  # type: ignore[misc]
