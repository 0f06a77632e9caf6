"""Python calls the relay and codec make per event: a budget, so slower paths do not creep back.

Counted with :func:`sys.setprofile` (deterministic, unlike timings), over one client turn that
sends a batch of ``<pub ref pattern i>`` messages to the far side, as a node forwarding an
aggregate-subs publication does: encoding, decoding, checking and applying every event. Only
functions defined in ``feds/relay.py`` and ``feds/codec.py`` count, so work elsewhere (the
actor, values) moves nothing here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import feds.codec
import feds.relay
from feds.values import record
from tests.recording import Recorder
from tests.test_relay import Link, entity_ref
from tests.test_relay_cache import fresh_pattern

BATCH = 100
FILES = frozenset({Path(feds.codec.__file__).resolve(), Path(feds.relay.__file__).resolve()})


def counted_calls(action: Callable[[], None]) -> int:
    """How many Python functions of the relay and codec modules ``action`` calls."""
    codes: dict[Any, bool] = {}
    calls = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        if event == "call":
            code = frame.f_code
            mine = codes.get(code)
            if mine is None:
                mine = codes[code] = Path(code.co_filename).resolve() in FILES
            calls += mine

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return calls


def test_a_forwarded_message_with_a_reference_and_a_cached_pattern() -> None:
    pat = fresh_pattern()
    link = Link()
    _, back_ref = entity_ref(link.client_sched, Recorder(), "client-app")

    def send(first: int) -> None:
        link.client_act(
            lambda t: [
                t.message(link.proxy, record("pub", back_ref, pat, (first + i, b"payload")))
                for i in range(BATCH)
            ]
        )

    send(0)  # defines the pattern's cache slot and exports back_ref
    calls = counted_calls(lambda: send(BATCH))
    got = [v for _, v in link.recorder.events]
    assert len(got) == 2 * BATCH and got[-1].fields[1] is pat
    per_event = calls / BATCH
    # 16.4 calls per event (19.4 while each event of a batch was encoded by calls of its own,
    # 23.4 before other cuts, 31.5 while references were lowered by a walk after decoding, 50.4
    # before that): each array and head decoded (the reference mapped to its Ref as it is
    # decoded), the event checked, each record and reference encoded (lifting it; a run of
    # messages is encoded with one call); a message is not walked. The budget leaves no
    # room for one call more per event, such as a hooks object forwarding to the membrane, a
    # release or a lookup of the thread's interner per event, a helper in the event check or
    # the embedded payload check, a walk of a message, an event record for the encoder's hook,
    # or an encoding call per event.
    assert per_event <= 17, per_event


def test_a_forwarded_message_of_plain_values() -> None:
    """As a node forwards an aggregate-subs match: no reference, so no check per event."""
    link = Link()
    pat = fresh_pattern()

    def send(first: int) -> None:
        link.client_act(lambda t: [t.message(link.proxy, (first + i, pat)) for i in range(BATCH)])

    send(0)  # defines the pattern's cache slot
    calls = counted_calls(lambda: send(BATCH))
    assert [v for _, v in link.recorder.events][-1] == (2 * BATCH - 1, pat)
    per_event = calls / BATCH
    # 4.4 calls per event: each array and head decoded, the run encoded with one call; no
    # check per event, as a packet of bare messages to one actor is worked out in C
    # (Relay._message_batches; 5.4 event by event).
    assert per_event <= 4.5, per_event


def test_a_forwarded_run_of_changes_of_plain_values() -> None:
    """As a node forwards aggregate-subs' matches as they change: assertions of plain captures
    and the retractions of earlier ones, in one packet (adds before removes)."""
    link = Link()
    held: list[int] = []

    def change(first: int) -> None:
        def turn(t: Any) -> None:
            gone = held[:]
            held[:] = [t.publish(link.proxy, (first + i, "x" * 60)) for i in range(BATCH)]
            for handle in gone:
                t.retract(handle)

        link.client_act(turn, actor)

    actor = link.client_act(lambda t: None)
    change(0)
    calls = counted_calls(lambda: change(BATCH))
    assert sorted(link.recorder.live.values())[0] == (BATCH, "x" * 60)
    per_change = calls / (2 * BATCH)
    # 1.7 calls per change: each array decoded (the decoder's hook), the assertions encoded
    # with one call and the retractions with another; no check per event, as a packet of
    # bare changes to one actor is worked out in C (Relay._change_batches; 4.2 event by event).
    assert per_change <= 1.8, per_change
