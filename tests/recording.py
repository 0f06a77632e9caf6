"""A test entity that records every event it receives."""

from __future__ import annotations

from feds.actor import Entity, Handle, Turn
from feds.values import Value


class Recorder(Entity):
    """Records every event it receives, keeping the values behind live handles."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Value]] = []
        self.live: dict[Handle, Value] = {}

    def on_publish(self, turn: Turn, value: Value, handle: Handle) -> None:
        self.live[handle] = value
        self.events.append(("+", value))

    def on_retract(self, turn: Turn, handle: Handle) -> None:
        self.events.append(("-", self.live.pop(handle)))

    def on_message(self, turn: Turn, value: Value) -> None:
        self.events.append(("!", value))
