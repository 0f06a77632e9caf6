"""The federation protocols: one module per protocol, each close to the prose of the seed.

A protocol decides three things for a node (see :class:`Protocol`): the rules every fragment
runs, the envelope local access puts around an application's assertions, and what a link to a
neighbouring fragment does. Everything else (fragments, links, local access, sync) is
:mod:`feds.node`'s and is the same for every protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from feds.actor import Ref, Turn
from feds.reactive import Relayed, RelayEntity
from feds.values import Record, Symbol, Value

if TYPE_CHECKING:
    from feds.node import Node

AT = Symbol("at")
"""``<at t x>``: every protocol's record for "``x``, to be delivered at ``t``"."""

Route = Callable[[tuple], tuple[Ref, Value] | None]


def ignore(captures: tuple) -> Relayed:
    """Drop a matching message (for a relay whose rule is about assertions only)."""
    return None


def via_at(fragment: Ref, route: Route) -> Callable[[tuple], Relayed]:
    """A relay transform: each match whose ``route(captures)`` is ``(t, x)`` becomes ``<at t x>``
    in ``fragment`` (``None`` skips the match), whose bag deduplicates it before the fragment's
    own ``<at …>`` rules deliver it.

    Messages take the same step. Skipping it for them (a message is never retained, so there is
    nothing to deduplicate) saved a turn per hop but let a message overtake an assertion made
    before it; see "Guarantees" in ``docs/protocols.md``.
    """

    def at(captures: tuple) -> Relayed:
        out = route(captures)
        return None if out is None else (fragment, Record(AT, out))

    return at


class Observation(RelayEntity):
    """Stands for one distinct ``<Observe pattern observer>`` of an application at this node.

    With a protocol whose ``per_observation`` is set, local access puts an observation token in
    place of the observer (see :class:`feds.node.LocalAccess`). The protocol's ``<at t x>``
    records then name an observation, not an entity: one dataspace gives an entity that
    observes two patterns one assertion per (observation, captures), and ``<at e x>`` would
    merge two observations with equal captures into one. The final delivery goes straight to
    :func:`observer_of` the token; anything else sent or asserted to a token (by a meta-observer
    that found it in an Observe) is forwarded to the observer.
    """

    def __init__(self, observer: Ref) -> None:
        super().__init__(lambda value: (observer, value))
        self.observer = observer


def observer_of(target: Ref) -> Ref:
    """The application's observer if ``target`` is an observation token, else ``target``."""
    entity = target.entity
    return entity.observer if entity.__class__ is Observation else target  # type: ignore[attr-defined]


class Protocol:
    """How one node takes part in a federation."""

    name: ClassVar[str]
    per_observation: ClassVar[bool] = False
    """Whether local access gives each distinct Observe its own :class:`Observation` token."""

    def setup(self, turn: Turn, node: Node) -> None:
        """Install the rules every fragment runs (in the node's root facet)."""
        raise NotImplementedError

    def wrap(self, node: Node, value: Value) -> Value:
        """The envelope local access puts around ``value`` before it enters the fragment."""
        raise NotImplementedError

    def link(self, turn: Turn, node: Node, peer: Ref, peer_is_parent: bool) -> None:
        """This node's half of a link to ``peer`` (a neighbour's fragment).

        Runs in a facet that stops when the link goes, taking everything it set up with it.
        """
        raise NotImplementedError


def protocol_names() -> tuple[str, ...]:
    return tuple(PROTOCOLS)


def make_protocol(name: str) -> Protocol:
    """A new instance of the protocol called ``name`` (``copy-up``, ``observer-flood``, …)."""
    try:
        return PROTOCOLS[name]()
    except KeyError:
        raise ValueError(
            f"unknown protocol {name!r}; choose one of {', '.join(PROTOCOLS)}"
        ) from None


from feds.protocols.aggregate_subs import AggregateSubs  # noqa: E402
from feds.protocols.copy_up import CopyUp  # noqa: E402
from feds.protocols.observer_flood import ObserverFlood  # noqa: E402

PROTOCOLS: dict[str, type[Protocol]] = {p.name: p for p in (CopyUp, ObserverFlood, AggregateSubs)}
