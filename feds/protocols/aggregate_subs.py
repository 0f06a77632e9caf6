"""The "aggregate-subs" protocol: only subscription *patterns* travel; subscribers stay local.

Schema (seed): ``Local = <local @item any>``, ``At = <at @fragment #:any @item any>``,
``Sub = <sub @fragment #:any @pat any>``, ``Pub = <pub @fragment #:any @pat any @vs [any ...]>``.

* Local access wraps ``v`` as ``<local v>``.
* Half-uplink a→b: each ``<sub f pat>`` at ``a`` with f ≠ b gives ``<at b <sub a pat>>`` at ``a``.
* In ``f``, each distinct ``<sub _ pat>`` publishes local matches ``vs`` as ``<pub f pat vs>``.
* In ``f``, each ``<sub t pat>`` with t ≠ f relays each ``<pub a pat x>`` with a ≠ t as
  ``<at t <pub f pat x>>`` (next hop ``t``, previous hop relabelled ``f``).
* A local observer ``<local <Observe pat e>>`` asserts ``<sub f pat>`` and receives each
  ``<pub _ pat x>`` as ``x``.
* Every fragment delivers ``<at t x>`` as ``x`` at ``t`` (deduplicating before the network).

Messages follow the same rules, each step a message, through the same ``<at …>`` step as
assertions: so a message never overtakes an assertion made before it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from feds.actor import Ref, Turn
from feds.dataspace import OBSERVE
from feds.pattern_forms import DISCARD, bind, lit, rec_group
from feds.protocols import AT, Protocol, ignore, via_at
from feds.reactive import Relayed, during, relay
from feds.values import Record, Symbol, Value

if TYPE_CHECKING:
    from feds.node import Node

LOCAL = Symbol("local")
SUB = Symbol("sub")
PUB = Symbol("pub")


class AggregateSubs(Protocol):
    name = "aggregate-subs"

    def wrap(self, node: Node, value: Value) -> Value:
        return Record(LOCAL, (value,))

    def setup(self, turn: Turn, node: Node) -> None:
        f = node.fragment
        relay(turn, f, rec_group(AT, [bind(), bind()]), lambda c: (c[0], c[1]))

        def local_observer(t: Turn, pat: Value, e: Ref) -> None:
            t.publish(f, Record(SUB, (f, pat)))
            relay(t, f, rec_group(PUB, [DISCARD, lit(pat), bind()]), lambda c: (e, c[0]))

        during(turn, f, rec_group(LOCAL, [rec_group(OBSERVE, [bind(), bind()])]), local_observer)

        def publish_local(t: Turn, pat: Value) -> None:
            relay(t, f, rec_group(LOCAL, [pat]), lambda vs: (f, Record(PUB, (f, pat, vs))))

        during(turn, f, rec_group(SUB, [DISCARD, bind()]), publish_local)

        def next_hop(t: Turn, hop: Ref, pat: Value) -> None:
            if hop == f:
                return
            relay(
                t,
                f,
                rec_group(PUB, [bind(), lit(pat), bind()]),
                via_at(f, lambda c: None if c[0] == hop else (hop, Record(PUB, (f, pat, c[1])))),
            )

        during(turn, f, rec_group(SUB, [bind(), bind()]), next_hop)

    def link(self, turn: Turn, node: Node, peer: Ref, peer_is_parent: bool) -> None:
        a, b = node.fragment, peer

        def forward(c: tuple) -> Relayed:
            source, pat = c
            return None if source == b else (a, Record(AT, (b, Record(SUB, (a, pat)))))

        relay(turn, a, rec_group(SUB, [bind(), bind()]), forward, ignore)
