"""The node's message fast path: a message crosses a node in the turn of the relay it came from.

A message that reaches a node (a neighbour's ``<pub …>`` for an inbox, a mirrored answer, a
client's message for local access) used to take at least two turns of the node's actor: the
entry step (local access, an inbox, a mirror), then the fragment, whose index hands it to the
rules' relays and deliveries, which send it on. Every one of those steps is a *message step*
(:attr:`feds.actor.Entity.forwards`): for a message it only sends messages, changes nothing and
reads only its own fixed state. So what the node sends for a message is a function of the
message and of the node's state, and :meth:`Router.route` computes it by running those very
steps (the rules' own code, nothing restated) in place of the node's turns; the relay then sends
the result from its own turn.

It is the same as the node's turns would do, and in the same order, when the node has nothing
queued (:func:`queued_actors`) and the relay's turn has handed it nothing yet: the node's turn
for this message would then be the next one it runs, so it would see the state seen here, and
everything an earlier event from the same link caused has been sent already (the relay checks
both; ``docs/protocols.md``, "The node's fast path"). The router keeps the
actor's own order: a step of the node's actor that runs inline (:attr:`~feds.actor.Entity.inline`)
runs at once, a message to one of its dataspaces (:attr:`~feds.actor.Entity.prompt`) waits until
the step that sent it is done, as the batch queued at the front of the node's queue would.
Anything else (a step that is not a message step, a message for another kind of entity of the
node, an exception, a loop) gives ``None``: nothing was sent, and the relay hands the message to
the node as before, so an error still happens in the node's turn.
"""

from __future__ import annotations

from feds.actor import Actor, Facet, Ref, Scheduler
from feds.values import Value

MAX_QUEUE = 64
"""The longest scheduler queue :func:`queued_actors` looks through (a longer one: route nothing)."""
MAX_STEPS = 10_000
"""Message steps :meth:`Router.route` runs for a message before it gives up (a loop in a node)."""

Sent = list[tuple[Ref, Value]]


class _NotRoutable(Exception):
    """A step on the way is not a message step: the message must take the node's turns."""


class Router:
    """Runs message steps outside their actor's turns and collects what they send (:meth:`route`).

    It stands in for the turns of the actor whose steps run: it has what a message step uses of
    a :class:`~feds.actor.Turn`, :meth:`message` and the current ``facet``. One router serves
    many messages (a relay keeps one).
    """

    __slots__ = ("actor", "facet", "later", "sent", "steps")

    def __init__(self) -> None:
        self.actor: Actor | None = None
        self.facet: Facet | None = None
        self.sent: Sent = []
        """Messages for other actors, in the order sent."""
        self.later: list[tuple[Ref, Value]] = []
        """Messages for the actor's own dataspaces, to run once the step before is done."""
        self.steps = 0
        """Steps left before :meth:`route` gives up."""

    def route(self, ref: Ref, value: Value) -> Sent | None:
        """The messages that delivering message ``value`` to ``ref`` makes its actor send to
        other actors (valid until the next call), or ``None`` if a step on the way is not a
        message step (or fails): then nothing has happened.

        Only call it when ``ref``'s actor would handle ``value`` in its very next turn: when it
        has nothing queued and nothing for it is pending in the calling turn.
        """
        self.actor = ref.actor
        self.sent = []
        later = self.later
        later.clear()
        self.steps = MAX_STEPS
        try:
            self.message(ref, value)
            for step in later:  # in order, including those the loop itself adds
                self.run(*step)
        except Exception:  # not routable, or a step that fails: let it fail in the actor's turn
            return None
        return self.sent

    def message(self, ref: Ref, value: Value) -> None:
        """What a step sends: kept if it is for another actor, else run as the actor would."""
        if ref.actor is not self.actor:
            self.sent.append((ref, value))
            return
        entity = ref.entity
        if not entity.forwards:
            raise _NotRoutable
        if entity.inline:
            self.run(ref, value)
        elif entity.prompt:
            self.later.append((ref, value))
        else:  # the first step, reached from another actor, or a step queued at the back
            if self.steps != MAX_STEPS:
                raise _NotRoutable
            self.run(ref, value)

    def run(self, ref: Ref, value: Value) -> None:
        """Deliver ``value`` to the message step behind ``ref``, as its actor's turn would."""
        facet = ref.facet
        if not facet.alive:  # a turn skips an event for a stopped facet
            return
        self.steps -= 1
        if self.steps < 0:
            raise _NotRoutable
        saved = self.facet
        self.facet = facet
        ref.entity.on_message(self, value)  # type: ignore[arg-type]
        self.facet = saved


def queued_actors(scheduler: Scheduler) -> set[Actor] | None:
    """The actors with a batch or an action in ``scheduler``'s queue (``None`` if the queue is
    too long to look through: then nothing is routed)."""
    queue = scheduler._queue
    if len(queue) > MAX_QUEUE:
        return None
    return {item[0] for item in queue}
