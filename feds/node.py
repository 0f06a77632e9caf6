"""An overlay node: one fragment dataspace, its links, and local access for applications.

A node lives in one actor. Its entities:

* the **fragment** — a :class:`~feds.dataspace.Dataspace` speaking the protocol's envelopes;
* **local access** — what applications talk to. It wraps each assertion and message in the
  protocol's envelope before it enters the fragment, so the fragment looks like a plain dataspace;
  a ``sync`` at local access is a *federated* sync (below);
* the **node service** — what a neighbour talks to. A child asserts
  ``<uplink child-fragment child-service reply protocol>`` at its parent's service; the parent
  answers ``<accepted parent-fragment>`` at ``reply``, and both sides run the protocol's
  half-link for as long as those assertions last. A lost connection retracts them, which tears
  the link down. A child that runs another protocol, or another revision of it
  (:attr:`~feds.protocols.Protocol.ident`), is sent the message ``<refused reason>`` instead:
  the two would exchange records neither understands.

Federated sync (``protocols/wire.md`` has the records): a sync wave. The node flushes locally
(syncs its own actor until a round passes with no work), asserts ``<fsync from reply>`` at every
neighbour's service but the one the request came from, waits for every reply (a message ``#t`` at
``reply``), retracts the requests, flushes again, and answers. (Requests are assertions so that
the ``reply`` capability stays alive across the wire until it is used.)
Links are FIFO and each node answers only after its own subtree did, so when the answer arrives
every effect of the caller's earlier actions has reached every node and every answer has come
back. It costs two messages per tree edge; see ``docs/protocols.md`` for the epoch alternative.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from feds.actor import Entity, Facet, Handle, Ref, Scheduler, Turn, TurnAction
from feds.admission import refusal
from feds.dataspace import Dataspace, as_observe, observe
from feds.protocols import Observation, Protocol, make_protocol
from feds.values import Record, Symbol, Value

log = logging.getLogger("feds.node")

UPLINK = Symbol("uplink")
ACCEPTED = Symbol("accepted")
REFUSED = Symbol("refused")
FSYNC = Symbol("fsync")
LOCAL_SYNC = Symbol("local-sync")


class Node:
    """One overlay node. Its refs exist once the scheduler has run its first turn."""

    def __init__(self, scheduler: Scheduler, name: str, protocol: Protocol | str) -> None:
        self.name = name
        self.protocol = make_protocol(protocol) if isinstance(protocol, str) else protocol
        self.dataspace = Dataspace()
        self.neighbours: dict[Ref, Ref] = {}
        """Neighbour node service → that neighbour's fragment."""
        self.parent_service: Ref | None = None
        self.refused: str | None = None
        """Why the parent last refused this node's uplink request (None: it did not)."""
        self.fsync_waits: dict[Ref, set[_Once]] = {}
        """Neighbour node service → the federated syncs waiting for its answer."""
        self.fragment: Ref
        self.service: Ref
        self.access: Ref
        self.facet: Facet
        self.actor = scheduler.spawn(self._boot, name=f"node {name}")

    def _boot(self, turn: Turn) -> None:
        self.facet = turn.facet
        self.fragment = turn.ref(self.dataspace)
        self.service = turn.ref(NodeService(self))
        self.access = turn.ref(LocalAccess(self))
        self.protocol.setup(turn, self)

    # -- links ------------------------------------------------------------------------------

    def join(self, turn: Turn, parent_service: Ref) -> Facet:
        """Ask the node behind ``parent_service`` to be our parent (runs in a node turn).

        Returns the facet of the uplink: stopping it withdraws the request and the link.
        """

        def start(t: Turn) -> None:
            reply = t.ref(_UplinkReply(self, parent_service))
            request = Record(UPLINK, (self.fragment, self.service, reply, self.protocol.ident))
            t.publish(parent_service, request)

        return turn.new_facet(start)

    def _link_up(self, turn: Turn, service: Ref, fragment: Ref, is_parent: bool) -> Facet:
        def start(t: Turn) -> None:
            self.neighbours[service] = fragment
            if is_parent:
                self.parent_service = service
            self.protocol.link(t, self, fragment, is_parent)
            t.on_stop(lambda t: self._link_down(service, t))

        return turn.new_facet(start)

    @property
    def parent_fragment(self) -> Ref | None:
        """The parent's fragment while the link to the parent is up, else None."""
        return None if self.parent_service is None else self.neighbours.get(self.parent_service)

    def _link_down(self, service: Ref, turn: Turn) -> None:
        self.neighbours.pop(service, None)
        if self.parent_service == service:
            self.parent_service = None
        for once in self.fsync_waits.pop(service, ()):  # a lost subtree has nothing left to do
            turn.in_facet(self.facet, lambda t, once=once: once.on_message(t, True))

    # -- sync -------------------------------------------------------------------------------

    def local_flush(self, turn: Turn, then: TurnAction) -> None:
        """Run ``then`` once this node's actor has done everything queued for it."""
        actor = self.actor
        mark = actor.work

        def check(t: Turn) -> None:
            nonlocal mark
            if actor.work == mark:
                then(t)
            else:
                mark = actor.work
                t.sync(self.fragment, check)

        turn.sync(self.fragment, check)

    def federated_sync(self, turn: Turn, exclude: Ref | None, then: TurnAction) -> None:
        """Run ``then`` once every earlier effect has reached every node in the tree and back."""

        def flood(t: Turn) -> None:
            others = [s for s in self.neighbours if s != exclude]
            if not others:
                self.local_flush(t, then)
                return
            waiting = len(others)
            requests: list[Handle] = []
            answers: list[tuple[Ref, _Once]] = []

            def one_back(t: Turn) -> None:
                nonlocal waiting
                waiting -= 1
                if waiting == 0:
                    for handle in requests:
                        t.retract(handle)
                    for service, once in answers:
                        self.fsync_waits.get(service, set()).discard(once)
                    self.local_flush(t, then)

            # Asserted, not sent: an assertion keeps the reply reference alive across the wire
            # until the answer has come back. A neighbour whose link goes meanwhile counts as
            # having answered (_link_down), so a wave never waits for a node that left.
            for service in others:
                once = _Once(one_back)
                self.fsync_waits.setdefault(service, set()).add(once)
                answers.append((service, once))
                request = Record(FSYNC, (self.service, t.ref(once)))
                requests.append(t.publish(service, request))

        self.local_flush(turn, flood)

    def status(self) -> dict[str, Value]:
        """Figures for ``feds status``."""
        return {
            "name": self.name,
            "protocol": self.protocol.name,
            "fragment-assertions": len(self.dataspace),
            "index-handlers": self.dataspace.index.handler_count(),
            "neighbours": len(self.neighbours),
            "has-parent": self.parent_service is not None,
            **({} if self.refused is None else {"uplink-refused": self.refused}),
        }


class _Once(Entity):
    """Runs a callback on the first message it receives."""

    def __init__(self, callback: TurnAction) -> None:
        self.callback: TurnAction | None = callback

    def on_message(self, turn: Turn, value: Value) -> None:
        if self.callback is not None:
            callback, self.callback = self.callback, None
            callback(turn)


class _UplinkReply(Entity):
    """The child's side of the uplink handshake: runs the half-link while accepted."""

    def __init__(self, node: Node, parent_service: Ref) -> None:
        self.node = node
        self.parent_service = parent_service
        self.facets: dict[Handle, Facet] = {}

    def on_publish(self, turn: Turn, value: Value, handle: Handle) -> None:
        if _is_record(value, ACCEPTED, 1) and value.fields[0].__class__ is Ref:
            self.node.refused = None
            self.facets[handle] = self.node._link_up(
                turn, self.parent_service, value.fields[0], is_parent=True
            )
        else:
            log.warning("node %s: unexpected uplink reply %r", self.node.name, value)

    def on_message(self, turn: Turn, value: Value) -> None:
        if _is_record(value, REFUSED, 1) and value.fields[0].__class__ is str:
            self.node.refused = reason = value.fields[0]
            log.error("node %s: the parent refused the link: %s", self.node.name, reason)
        else:
            log.warning("node %s: unexpected uplink reply %r", self.node.name, value)

    def on_retract(self, turn: Turn, handle: Handle) -> None:
        facet = self.facets.pop(handle, None)
        if facet is not None:
            turn.stop(facet)


class NodeService(Entity):
    """What neighbours talk to: uplink requests from children and federated sync waves."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.children: dict[Handle, Facet] = {}

    def on_publish(self, turn: Turn, value: Value, handle: Handle) -> None:
        if _is_record(value, FSYNC, 2) and all(f.__class__ is Ref for f in value.fields):
            sender, reply = value.fields
            self.node.federated_sync(turn, sender, lambda t: t.message(reply, True))
            return
        if not (
            (_is_record(value, UPLINK, 4) or _is_record(value, UPLINK, 3))
            and all(f.__class__ is Ref for f in value.fields[:3])
        ):
            log.warning("node %s: ignoring %r at the node service", self.node.name, value)
            return
        fragment, service, reply, *protocol = value.fields
        node = self.node
        theirs = protocol[0] if protocol else "an older feds without revisions"
        if theirs != node.protocol.ident:
            reason = f"this node runs {node.protocol.ident}, the child {theirs}"
            log.warning("node %s: refused a child's link: %s", node.name, reason)
            turn.message(reply, Record(REFUSED, (reason,)))  # a message: nothing to keep
            return
        facet = node._link_up(turn, service, fragment, is_parent=False)
        self.children[handle] = facet
        turn.in_facet(
            facet,
            lambda t: t.publish(
                reply, Record(ACCEPTED, (node.protocol.accept(t, node, fragment),))
            ),
        )

    def on_retract(self, turn: Turn, handle: Handle) -> None:
        facet = self.children.pop(handle, None)
        if facet is not None:
            turn.stop(facet)


class LocalAccess(Entity):
    """Makes the fragment look like a plain dataspace to applications.

    With a protocol whose ``per_observation`` is set, each distinct ``<Observe pattern e>``
    enters the fragment as ``<Observe pattern token>``, one :class:`~feds.protocols.Observation`
    token per distinct Observe for as long as a copy of it is asserted here.
    """

    pure_messages = True  # a message enters the fragment in the protocol's envelope

    def __init__(self, node: Node) -> None:
        self.node = node
        self.handles: dict[Handle, tuple[Handle, Value | None]] = {}
        """Each application handle → the fragment's handle, and the Observe the application gave
        if it entered with a token (else None)."""
        self.tokens: dict[Value, tuple[Ref, int]] = {}
        """Each distinct Observe asserted here → its token and how many copies are asserted."""

    def on_publish(self, turn: Turn, value: Value, handle: Handle) -> None:
        node = self.node
        refused = refusal(node.actor, value)  # see feds.admission
        if refused is not None:
            log.warning("node %s: refused %s", node.name, refused)
            return
        if _is_record(value, LOCAL_SYNC, 1) and value.fields[0].__class__ is Ref:
            reply = value.fields[0]  # a sync of this node only: flush, answer, keep nothing
            node.local_flush(turn, lambda t: t.message(reply, True))
            return
        entered, observed = value, None
        if node.protocol.per_observation:
            obs = as_observe(value)
            if obs is not None:
                entered = observe(obs[0], self._token(turn, value, obs[1]))
                observed = value
        mine = turn.publish(node.fragment, node.protocol.wrap(node, entered))
        self.handles[handle] = (mine, observed)

    def _token(self, turn: Turn, value: Value, observer: Ref) -> Ref:
        entry = self.tokens.get(value)
        token, copies = (turn.ref(Observation(observer)), 0) if entry is None else entry
        self.tokens[value] = (token, copies + 1)
        return token

    def on_retract(self, turn: Turn, handle: Handle) -> None:
        entry = self.handles.pop(handle, None)
        if entry is None:
            return
        mine, observed = entry
        turn.retract(mine)
        if observed is not None:
            token, copies = self.tokens[observed]
            if copies > 1:
                self.tokens[observed] = (token, copies - 1)
            else:
                del self.tokens[observed]

    def on_message(self, turn: Turn, value: Value) -> None:
        node = self.node
        turn.message(node.fragment, node.protocol.wrap(node, value))

    def on_sync(self, turn: Turn, peer: Ref) -> None:
        self.node.federated_sync(turn, None, lambda t: t.message(peer, True))


def _is_record(value: Value, label: Symbol, arity: int) -> bool:
    return value.__class__ is Record and value.label == label and len(value.fields) == arity


def connect_in_process(scheduler: Scheduler, child: Node, parent: Node) -> None:
    """Link two nodes of one scheduler directly by refs (no wire); both must have booted."""
    scheduler.enqueue(child.actor, child.facet, lambda t: child.join(t, parent.service))


Linker = Callable[[Node, Node], None]
