"""Every bound and timeout of a node's network edge, in one place (sans-IO: plain values).

:class:`NetLimits` is what a deployment tunes (``[limits]`` in a topology file, see
``docs/topology.md``); ``docs/reliability.md`` says what each protects against and what happens
when it is reached. The relay enforces the counting limits (handles per connection, assertions
per node, through a shared :class:`HandleBudget`); the transport enforces the timeouts, as only
it has a clock. The value codec's own bounds (frame size, depth, collection length) are
:class:`feds.codec.Limits`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Final

__all__ = ["DEFAULT_NET_LIMITS", "HandleBudget", "NetLimits"]


@dataclass(frozen=True, slots=True)
class NetLimits:
    """Bounds and timeouts of one process's connections (seconds, bytes, counts)."""

    handshake_timeout: float = 10.0
    """A connection whose far side has not completed its handshake by then is closed."""
    frame_timeout: float = 30.0
    """A frame begun but not completed within this long closes the connection (slow-loris)."""
    keepalive_interval: float = 1.0
    """A side that has sent nothing for this long sends an empty turn packet."""
    keepalive_timeout: float = 5.0
    """A connection on which nothing arrived for this long (while it was being read) is closed:
    the far side is hung (e.g. SIGSTOPped) or the path to it is gone."""
    stall_timeout: float = 5.0
    """A node link that stays congested this long while its far side neither takes nor sends
    anything (the node reads none of its other links meanwhile) is closed as a slow consumer. A
    far side that keeps sending, if only pings, is paced by congestion further on and is kept."""
    max_connections: int = 1024
    """Connections a node serves at once; one more is refused with a reason."""
    max_backlog: int = 64 * 1024 * 1024
    """Bytes waiting for one far side at which the link is closed as a slow consumer."""
    client_max_backlog: int = 8 * 1024 * 1024
    """Bytes waiting for one client (an application's connection, not a node link) at which it
    is closed as a slow consumer. A congested client never pauses its node's other links, so
    this is all that bounds what the node holds for it."""
    max_client_handles: int = 100_000
    """Live assertions of a client (an application) per connection."""
    max_admin_handles: int = 1_000
    """Live assertions of an admin tool (``feds status``) per connection."""
    max_peer_handles: int = 10_000_000
    """Live assertions of a neighbour node per link: it carries what a whole subtree asserts
    (copy-up sends everything towards the root), so its bound is far higher."""
    max_node_assertions: int = 10_000_000
    """Live assertions that all far sides together may hold at one node."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"limit {f.name} must be a positive number, not {value!r}")
        if self.keepalive_timeout <= self.keepalive_interval:
            raise ValueError("keepalive_timeout must be longer than keepalive_interval")

    def handles_by_role(self) -> dict[str, int]:
        """The bound on the far side's live assertions per connection, by the role its hello
        names (the relay's roles ``client``, ``admin`` and ``peer``)."""
        return {
            "client": self.max_client_handles,
            "admin": self.max_admin_handles,
            "peer": self.max_peer_handles,
        }

    @classmethod
    def from_mapping(cls, raw: dict[str, Any]) -> NetLimits:
        """Limits from a ``[limits]`` table (names with ``-`` or ``_``); unknown keys are an
        error, so a typo never leaves a limit at its default silently."""
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in raw.items():
            name = key.replace("-", "_")
            if name not in known:
                raise ValueError(f"unknown limit {key!r}; known: {', '.join(sorted(known))}")
            if known[name].type == "int" and not (isinstance(value, int) and value >= 1):
                raise ValueError(f"limit {key} must be a positive integer, not {value!r}")
            values[name] = value
        return cls(**values)


DEFAULT_NET_LIMITS: Final = NetLimits()


class HandleBudget:
    """Live assertions all connections of one node hold there (``max_node_assertions``)."""

    __slots__ = ("limit", "used")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def take(self) -> bool:
        """Count one more assertion; False (and nothing counted) if the node is full."""
        if self.used >= self.limit:
            return False
        self.used += 1
        return True

    def take_many(self, count: int) -> bool:
        """Count ``count`` more assertions; False (and nothing counted) unless all of them fit."""
        if self.used + count > self.limit:
            return False
        self.used += count
        return True

    def give(self, count: int = 1) -> None:
        self.used -= count
