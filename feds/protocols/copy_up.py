"""The "copy-up" protocol: every non-subscription assertion is copied up to the root.

Schema (seed): ``LinkEnvelope = <link @id any @body any>``, ``Content = <content @body any>``,
``FromUplink = <from-uplink @distributor #:any @body any>``, ``At = <at @observer #:any @body any>``
(kept as deliveries, not records).

* Local access wraps ``v`` as ``<link #f v>``.
* The uplink relays the fragment's ``<content v>`` to the parent as ``<link f v>``.
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

Messages follow the same rules, each step a message (``<content v>``, deliveries): so a
message never overtakes an assertion made before it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from feds.actor import Ref, Turn
from feds.dataspace import OBSERVE, observe
from feds.pattern_forms import DISCARD, bind, lit, rec_group
from feds.protocols import Deliveries, Protocol, deliver
from feds.reactive import during, relay, relay_object
from feds.values import Record, Symbol, Value

if TYPE_CHECKING:
    from feds.node import Node

LINK = Symbol("link")
CONTENT = Symbol("content")
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
    per_observation = True

    def wrap(self, node: Node, value: Value) -> Value:
        return Record(LINK, (LOCAL_ID, value))

    def setup(self, turn: Turn, node: Node) -> None:
        F = node.fragment
        at = Deliveries(turn.facet)

        def content(c: tuple) -> tuple[Ref, Value] | None:
            return None if _is_observe(c[0]) else (F, Record(CONTENT, (c[0],)))

        relay(turn, F, rec_group(LINK, [DISCARD, bind()]), content)

        def distribute(t: Turn, pat: Value) -> None:
            d = relay_object(t, lambda x: (F, Record(FROM_UPLINK, (d, x))))
            t.publish(F, Record(CONTENT, (observe(pat, d),)))

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
            F = node.fragment
            relay(turn, F, rec_group(CONTENT, [bind()]), lambda c: (peer, Record(LINK, (F, c[0]))))
