"""The captured jSpace exchange (reference/pspaces-wire-transcript.txt) as test data."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

TRANSCRIPT = Path(__file__).resolve().parent / "data" / "pspaces-wire-transcript.txt"
"""A verbatim copy of the shared reference's capture (real jSpace server and client)."""
_EVENT = re.compile(r"^\[(\d+)\] (C->S|S->C) (.*)$")


@dataclass(frozen=True)
class Event:
    pos: int
    conn: int
    direction: str  # "C->S" or "S->C"
    message: dict | None  # None for <EOF>


@dataclass(frozen=True)
class Pair:
    """A request and the answer the real server gave it."""

    request_pos: int
    request: dict
    answer_pos: int
    answer: dict


def sections() -> dict[str, list[Event]]:
    """``{"KEEP": [...], "CONN": [...]}``: each section's events in captured order."""
    result: dict[str, list[Event]] = {}
    current: list[Event] | None = None
    for line in TRANSCRIPT.read_text().splitlines():
        if line.startswith("## mode "):
            current = result.setdefault(line.split()[2], [])
            continue
        m = _EVENT.match(line)
        if m and current is not None:
            body = m.group(3)
            message = None if body == "<EOF>" else json.loads(body)
            current.append(Event(len(current), int(m.group(1)), m.group(2), message))
    return result


def pairs(events: list[Event]) -> list[Pair]:
    """Each answer with its request: same connection, and the same clientSession if any."""
    found = []
    for answer in events:
        if answer.direction != "S->C" or answer.message is None:
            continue
        session = answer.message.get("clientSession")
        request = next(
            e
            for e in events
            if e.conn == answer.conn
            and e.direction == "C->S"
            and e.message is not None
            and e.message.get("clientSession") == session
        )
        found.append(Pair(request.pos, request.message, answer.pos, answer.message))
    return found
