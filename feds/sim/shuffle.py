"""An overlay whose every step is chosen at random: which node runs a turn, which link delivers.

Each node runs on its own :class:`~feds.actor.Scheduler`, as it would in its own process, and
each tree edge is a pair of real :class:`~feds.relay.Relay` s whose bytes wait in one FIFO queue
per direction. :meth:`ShuffledOverlay.step` picks one thing that can happen next — a node with
queued turns runs one turn, or a direction with bytes in flight hands its oldest chunk to the far
relay — with ``rng`` (a :class:`random.Random`; the property test draws it from hypothesis, so a
failing interleaving shrinks and replays). Per-link FIFO is kept; everything else is as
concurrent as real processes on a network can be.
"""

from __future__ import annotations

import random
from collections import deque

from feds.actor import Scheduler
from feds.node import Node
from feds.relay import Relay
from feds.runtime import NodeRuntime

__all__ = ["ShuffledOverlay"]

QUIET = 200_000
"""Steps :meth:`ShuffledOverlay.settle` may take; more means the overlay never becomes quiet."""


class _Direction:
    """One direction of a link: chunks written by ``sender`` on their way to ``receiver``."""

    __slots__ = ("chunks", "receiver", "sender")

    def __init__(self, sender: Relay, receiver: Relay) -> None:
        self.sender = sender
        self.receiver = receiver
        self.chunks: deque[bytes] = deque()


class ShuffledOverlay:
    """Nodes ``n0 …`` on their own schedulers; ``parents[i - 1]`` is the parent of node ``i``."""

    def __init__(self, protocol: str, parents: list[int], rng: random.Random) -> None:
        self.rng = rng
        self.clock = 0
        """Steps taken so far (the harness also ticks it for its own actions)."""
        self.runtimes = [
            NodeRuntime(Scheduler(), f"n{i}", protocol) for i in range(len(parents) + 1)
        ]
        self.nodes: list[Node] = [r.node for r in self.runtimes]
        self.relays: list[Relay] = []
        self.directions: list[_Direction] = []
        for child, parent in enumerate(parents, start=1):
            up, down = self.runtimes[child].uplink_relay(), self.runtimes[parent].accept_relay()
            self.relays += [up, down]
            self.directions += [_Direction(up, down), _Direction(down, up)]
        self.settle()

    def scheduler(self, node: int) -> Scheduler:
        return self.runtimes[node].scheduler

    def tick(self) -> int:
        self.clock += 1
        return self.clock

    def _collect(self) -> None:
        for d in self.directions:
            if d.sender.has_output:
                data = d.sender.data_to_send()
                if data:
                    d.chunks.append(data)

    def step(self) -> bool:
        """Take one random step; False if there was nothing left to do."""
        self._collect()
        runnable = [r.scheduler for r in self.runtimes if not r.scheduler.idle()]
        flowing = [d for d in self.directions if d.chunks]
        n = len(runnable) + len(flowing)
        if n == 0:
            return False
        self.tick()
        k = self.rng.randrange(n)
        if k < len(runnable):
            runnable[k].run_until_idle(max_turns=1)
        else:
            d = flowing[k - len(runnable)]
            d.receiver.receive(d.chunks.popleft())
        self._collect()
        return True

    def run(self, steps: int) -> None:
        """Take up to ``steps`` random steps."""
        for _ in range(steps):
            if not self.step():
                return

    def settle(self) -> None:
        """Take random steps until nothing is left to do anywhere."""
        for _ in range(QUIET):
            if not self.step():
                break
        else:
            raise AssertionError(f"the overlay was not quiet after {QUIET} steps (a loop?)")
        self.tick()
        for r in self.runtimes:
            assert not r.scheduler.crashes, r.scheduler.crashes
        closed = [f"{relay!r}: {relay.close_reason}" for relay in self.relays if relay.closed]
        assert not closed, closed
