"""The "observer-flood" protocol: every subscription floods the whole tree.

Schema (seed): ``From = <from @fragment #:any @body any>``, ``At = <at @observer #:any @item any>``.

* Local access at fragment ``f`` wraps ``v`` as ``<from f v>``.
* Half-uplink a→b: each ``<from f <Observe pat e>>`` at ``a`` with f ≠ b is asserted at ``b`` as
  ``<from a <Observe pat e>>``, and every ``<at e x>`` at ``b`` is mirrored back to ``a``.
* In ``f``, a local observer ``<from f <Observe _ e>>`` gets each ``<at e x>`` as ``x`` at ``e``.
* In ``f``, every observer ``<from _ <Observe pat e>>`` watches ``f``'s *local* assertions with
  ``<group <rec from> {0: f 1: pat}>`` and answers each match ``x`` with ``<at e x>``.

No aggregation: several observers of one pattern each get their own answers across the network.

Local access puts an observation token (:class:`~feds.protocols.Observation`) in place of an
application's observer, so ``e`` above is one observation: an entity observing two patterns gets
each match once per observation, as from one dataspace, and a withdrawn observation's answers
still on their way can never reach a new one.

Messages follow the same rules, each step a message (``<at e x>`` into the fragment, mirrored
hop by hop): so a message never overtakes an assertion made before it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from feds.actor import Ref, Turn
from feds.dataspace import OBSERVE, observe
from feds.pattern_forms import DISCARD, bind, lit, rec_group
from feds.protocols import AT, Protocol, ignore, observer_of, via_at
from feds.reactive import Relayed, during, relay
from feds.values import Record, Symbol, Value

if TYPE_CHECKING:
    from feds.node import Node

FROM = Symbol("from")


def observer_pattern(source: Value, pattern: Value, observer: Value) -> Value:
    """Pattern for ``<from source <Observe pattern observer>>``."""
    return rec_group(FROM, [source, rec_group(OBSERVE, [pattern, observer])])


class ObserverFlood(Protocol):
    name = "observer-flood"
    per_observation = True

    def wrap(self, node: Node, value: Value) -> Value:
        return Record(FROM, (node.fragment, value))

    def setup(self, turn: Turn, node: Node) -> None:
        f = node.fragment

        def local_observer(t: Turn, e: Ref) -> None:
            observer = observer_of(e)
            relay(t, f, rec_group(AT, [lit(e), bind()]), lambda c: (observer, c[0]))

        during(turn, f, observer_pattern(lit(f), DISCARD, bind()), local_observer)

        def any_observer(t: Turn, pat: Value, e: Ref) -> None:
            local_matches = rec_group(FROM, [lit(f), pat])
            relay(t, f, local_matches, via_at(f, lambda xs: (e, xs)))

        during(turn, f, observer_pattern(DISCARD, bind(), bind()), any_observer)

    def link(self, turn: Turn, node: Node, peer: Ref, peer_is_parent: bool) -> None:
        a, b = node.fragment, peer

        def forward(c: tuple) -> Relayed:
            source, pat, e = c
            return None if source == b else (b, Record(FROM, (a, observe(pat, e))))

        relay(turn, a, observer_pattern(bind(), bind(), bind()), forward, ignore)

        def mirror(t: Turn, source: Ref, e: Ref) -> None:
            """One mirror per observer entity, however many patterns it observes (a message
            mirrored once per pattern would reach ``e`` once per pattern)."""
            if source == b:
                return
            relay(t, b, rec_group(AT, [lit(e), bind()]), via_at(a, lambda c: (e, c[0])))

        during(turn, a, observer_pattern(bind(), DISCARD, bind()), mirror)
