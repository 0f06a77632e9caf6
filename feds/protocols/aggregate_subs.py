"""The "aggregate-subs" protocol: only subscription *patterns* travel; subscribers stay local.

Schema (seed, with an inbox added to ``Sub``, and ``At`` kept as deliveries, not records):
``Local = <local @item any>``, ``Sub = <sub @fragment #:any @pat any @inbox #:any>``,
``Pub = <pub @fragment #:any @pat any @vs [any ...]>``.

* Local access wraps ``v`` as ``<local v>``.
* Half-uplink a→b: while some ``<sub f pat _>`` at ``a`` has f ≠ b, ``a`` holds one *inbox* for
  ``pat`` (an entity re-asserting in ``a`` whatever it receives as ``<pub b pat x>``) and
  ``<sub a pat inbox>`` at b.
* In ``f``, each distinct ``<sub _ pat _>`` publishes local matches ``vs`` as ``<pub f pat vs>``.
* In ``f``, each ``<sub t pat inbox>`` with t ≠ f relays each ``<pub a pat x>`` with a ≠ t as
  ``<at inbox x>``, which the inbox makes ``<pub f pat x>`` at ``t`` (next hop ``t``, previous
  hop relabelled ``f``). The seed's ``<at inbox <pub f pat x>>`` with the record made where it
  lands: an inbox stands for one ``f`` and one ``pat``, so only the captures cross the link,
  and a node passing a match on neither decodes nor encodes its label, hop or pattern.
* The two rules above are applied composed to local matches (a = f, and f ≠ t): each
  ``<sub t pat inbox>`` with t ≠ f relays each local match ``vs`` of ``pat`` as
  ``<at inbox vs>``, and ``<pub f pat vs>`` is never made. Nothing else in ``f`` reads it (a
  local observer takes local matches from ``<local pat>``; an inbox makes only ``<pub b …>``
  for its neighbour b ≠ f), so every rule and observer receives what it did, one step earlier,
  assertions and messages alike (``docs/protocols.md``, "Local matches, composed").
* A local observer ``<local <Observe pat e>>`` asserts ``<sub f pat f>`` and receives each
  ``<pub _ pat x>`` as ``x``, and its own fragment's matches straight from ``<local pat>``.
* Every fragment delivers ``<at t x>`` as ``x`` at ``t`` (deduplicating before the network): here
  through the fragment's :class:`~feds.protocols.Deliveries`, without the record.

The inbox is the seed's rule made safe against re-subscription. Without it, when the last
observer of ``pat`` at ``a`` went and a new one came before the overlay was quiet, the new one
was shown the answers still held for the old subscription, then saw them retracted as the
withdrawal reached each hop, then given again: one extra ``-``/``+`` per hop. An inbox lives as
long as one subscription of ``pat`` across the link: when it goes, everything it re-asserted is
retracted at once, and late answers to it are dropped, so a new subscription (a new inbox) only
ever sees answers given to it.

Messages follow the same rules, each step a message, through the same deliveries as assertions:
so a message never overtakes an assertion made before it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from feds.actor import Facet, Ref, Turn
from feds.dataspace import OBSERVE
from feds.pattern_forms import DISCARD, bind, lit, rec_group
from feds.protocols import Deliveries, Protocol, Sink, deliver
from feds.reactive import during, relay_object
from feds.values import Record, Symbol, Value

if TYPE_CHECKING:
    from feds.node import Node

LOCAL = Symbol("local")
SUB = Symbol("sub")
PUB = Symbol("pub")


class AggregateSubs(Protocol):
    name = "aggregate-subs"
    revision = 2  # 1: a match crossed a link as <pub f pat x>; 2: as x, to the inbox

    def wrap(self, node: Node, value: Value) -> Value:
        return Record(LOCAL, (value,))

    def setup(self, turn: Turn, node: Node) -> None:
        f = node.fragment
        at = Deliveries(turn)

        def local_observer(t: Turn, pat: Value, e: Ref) -> None:
            t.publish(f, Record(SUB, (f, pat, f)))
            # One count per observation: a match held both here and elsewhere is one assertion.
            sink = Deliveries(t)
            deliver(t, f, rec_group(LOCAL, [pat]), sink, lambda vs: (e, vs))
            remote = rec_group(PUB, [DISCARD, lit(pat), bind()])
            deliver(t, f, remote, sink, lambda c: (e, c[0]))

        during(turn, f, rec_group(LOCAL, [rec_group(OBSERVE, [bind(), bind()])]), local_observer)

        def next_hop(t: Turn, hop: Ref, pat: Value, inbox: Ref) -> None:
            if hop == f:
                return
            # The seed's <pub f pat vs> for local matches, composed with this rule (a = f ≠ t).
            deliver(t, f, rec_group(LOCAL, [pat]), at, lambda vs: (inbox, vs))
            deliver(
                t,
                f,
                rec_group(PUB, [bind(), lit(pat), bind()]),
                at,
                lambda c: None if c[0] == hop else (inbox, c[1]),
            )

        during(turn, f, rec_group(SUB, [bind(), bind(), bind()]), next_hop)

    def link(self, turn: Turn, node: Node, peer: Ref, peer_is_parent: bool) -> None:
        a, b = node.fragment, peer
        wants = _Wants(a, b)
        local = rec_group(LOCAL, [rec_group(OBSERVE, [bind(), DISCARD])])
        deliver(turn, a, local, wants, lambda c: c[0])
        outside = (a, b)
        others = rec_group(SUB, [bind(), bind(), DISCARD])
        deliver(turn, a, others, wants, lambda c: None if c[0] in outside else c[1])


class _Wants(Sink):
    """Half-link a→b: one inbox and one ``<sub a pat inbox>`` at b per pattern wanted from b.
    The inbox re-asserts at a each captures vector ``x`` b gives it as ``<pub b pat x>``.

    ``pat`` is wanted from b while a local observer of ``pat`` or a ``<sub s pat _>`` with s
    neither ``a`` nor ``b`` is at ``a``. Each time it becomes wanted, a new facet holds a new
    inbox. Local observers are counted from their ``<local <Observe …>>`` records, not from
    ``<sub a pat a>``, so that an inbox goes in the same turn as the last local observer's
    relay: a new observer's relay, installed later, never sees what the old inbox held.
    """

    def __init__(self, a: Ref, b: Ref) -> None:
        self.a = a
        self.b = b
        self.wants: dict[Value, tuple[int, Facet]] = {}

    def add(self, turn: Turn, pat: Value) -> Value:
        entry = self.wants.get(pat)
        if entry is not None:
            self.wants[pat] = (entry[0] + 1, entry[1])
        else:
            self.wants[pat] = (1, turn.new_facet(lambda t: self._ask(t, pat)))
        return pat

    def _ask(self, turn: Turn, pat: Value) -> None:
        a, b = self.a, self.b
        inbox = relay_object(turn, lambda x: (a, Record(PUB, (b, pat, x))))
        turn.publish(b, Record(SUB, (a, pat, inbox)))

    def remove(self, turn: Turn, pat: Value) -> None:
        count, facet = self.wants[pat]
        if count > 1:
            self.wants[pat] = (count - 1, facet)
        else:
            del self.wants[pat]
            turn.stop(facet)

    def send(self, turn: Turn, pat: Value) -> None:
        """A message that looks like a subscription is no subscription: dropped."""
