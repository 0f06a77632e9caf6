"""The federation protocols: one module per protocol, each close to the prose of the seed.

A protocol decides three things for a node (see :class:`Protocol`): the rules every fragment
runs, the envelope local access puts around an application's assertions, and what a link to a
neighbouring fragment does. Everything else (fragments, links, local access, sync) is
:mod:`feds.node`'s and is the same for every protocol.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from feds.actor import Ref, Turn
from feds.values import Value

if TYPE_CHECKING:
    from feds.node import Node


class Protocol:
    """How one node takes part in a federation."""

    name: ClassVar[str]

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
