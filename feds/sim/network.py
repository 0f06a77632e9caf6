"""Virtual links: real relays exchanging real encoded frames on a virtual clock.

Every tree edge is a :class:`SimLink` with two :class:`~feds.relay.Relay` ends, set up exactly as
the TCP runtime sets them up: the child's end has role ``peer`` and, once the parent's hello
arrives, joins the parent (``node.join`` with the far side's initial object); the parent's end
exposes the parent's node service as its initial object. Only the transport is virtual: bytes a
relay writes are queued in a :class:`Network` event queue (a heap of ``(time, seq, channel,
bytes)``) and handed to the far end's :meth:`~feds.relay.Relay.receive` when they arrive.

Each direction of a link (a :class:`Channel`) has a latency and a bandwidth. Bytes written at
time ``t`` start transmitting when the channel is free (``max(t, busy_until)``), take
``size / bandwidth`` to transmit, and arrive ``latency`` later; so each direction is FIFO and
a busy link queues. ``bandwidth = 0`` means unlimited (arrival at ``t + latency``).

The traffic figures of a direction are its sending relay's :class:`~feds.relay.RelayStats`
(``packets_out``, ``events_out``, ``bytes_out``): what the real code put on the wire.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from feds.actor import Ref, Scheduler, Turn
from feds.node import Node
from feds.relay import PEER, Hello, Relay, RelayStats

__all__ = ["Channel", "LinkParams", "Network", "SimLink"]


@dataclass(frozen=True)
class LinkParams:
    """Per-direction link characteristics: one-way latency (s) and bandwidth (bytes/s, 0 = ∞)."""

    latency: float = 0.001
    bandwidth: float = 0.0

    def __post_init__(self) -> None:
        if not self.latency >= 0:
            raise ValueError(f"latency must be >= 0 seconds, not {self.latency}")
        if not self.bandwidth >= 0:
            raise ValueError(f"bandwidth must be >= 0 bytes/s (0: unlimited), not {self.bandwidth}")


class Channel:
    """One direction of a link: bytes from ``sender`` to ``receiver``."""

    __slots__ = (
        "bandwidth",
        "busy_until",
        "dirty",
        "latency",
        "max_delay",
        "name",
        "network",
        "receiver",
        "sender",
    )

    def __init__(
        self, network: Network, name: str, sender: Relay, receiver: Relay, params: LinkParams
    ) -> None:
        self.network = network
        self.name = name
        self.sender = sender
        self.receiver = receiver
        self.latency = params.latency
        self.bandwidth = params.bandwidth
        self.busy_until = 0.0
        self.max_delay = 0.0
        self.dirty = False
        sender.on_output = self.mark
        if sender.has_output:
            self.mark()

    def mark(self) -> None:
        """The sender has bytes to write (the relay's ``on_output``)."""
        if not self.dirty:
            self.dirty = True
            self.network._dirty.append(self)

    def flush(self, now: float) -> None:
        """Put the sender's pending bytes on the wire at time ``now``."""
        self.dirty = False
        data = self.sender.data_to_send()
        if not data:
            return
        start = now if now > self.busy_until else self.busy_until
        if self.bandwidth > 0:
            start += len(data) / self.bandwidth
        self.busy_until = start
        arrival = start + self.latency
        if arrival - now > self.max_delay:
            self.max_delay = arrival - now
        self.network._schedule(arrival, self, data)

    @property
    def stats(self) -> RelayStats:
        """What the sending relay wrote (packets, events, bytes)."""
        return self.sender.stats


class SimLink:
    """A tree edge: the child's relay and the parent's relay, and the two directions."""

    __slots__ = ("child", "child_relay", "down", "parent", "parent_relay", "up")

    def __init__(self, network: Network, child: Node, parent: Node, params: LinkParams) -> None:
        scheduler = network.scheduler
        self.child = child.name
        self.parent = parent.name

        def ready(turn: Turn, hello: Hello, remote: Ref) -> None:
            scheduler.enqueue(child.actor, child.facet, lambda t: child.join(t, remote))

        self.child_relay = Relay(scheduler, child.name, PEER, on_ready=ready)
        self.parent_relay = Relay(scheduler, parent.name, PEER, initial=parent.service)
        up_name, down_name = f"{child.name}->{parent.name}", f"{parent.name}->{child.name}"
        self.up = Channel(network, up_name, self.child_relay, self.parent_relay, params)
        self.down = Channel(network, down_name, self.parent_relay, self.child_relay, params)

    def relays(self) -> tuple[Relay, Relay]:
        return self.child_relay, self.parent_relay


class Network:
    """The virtual clock and the bytes in flight on every channel."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.now = 0.0
        self.links: list[SimLink] = []
        self.deliveries = 0
        self._heap: list[tuple[float, int, Channel, bytes]] = []
        self._seq = 0
        self._dirty: list[Channel] = []

    def connect(self, child: Node, parent: Node, params: LinkParams) -> SimLink:
        """Link ``child`` to ``parent`` (both booted); the handshake runs as time advances."""
        link = SimLink(self, child, parent, params)
        self.links.append(link)
        return link

    def _schedule(self, arrival: float, channel: Channel, data: bytes) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (arrival, self._seq, channel, data))

    def flush(self) -> None:
        """Put every byte the relays wrote since the last flush on the wire, at ``now``."""
        dirty = self._dirty
        while dirty:
            batch, self._dirty = dirty, []
            for channel in batch:
                channel.flush(self.now)
            dirty = self._dirty

    def next_time(self) -> float | None:
        """When the next bytes arrive, or None if nothing is in flight."""
        return self._heap[0][0] if self._heap else None

    def deliver_next(self) -> None:
        """Advance the clock to the next arrival and hand over every chunk due then."""
        heap = self._heap
        when = heap[0][0]
        self.now = when
        while heap and heap[0][0] == when:
            _t, _seq, channel, data = heapq.heappop(heap)
            self.deliveries += 1
            channel.receiver.receive(data)

    def in_flight(self) -> int:
        return len(self._heap)

    def max_delay(self) -> float:
        """The longest any chunk took from write to arrival so far (queueing included)."""
        return max((c.max_delay for link in self.links for c in (link.up, link.down)), default=0.0)
