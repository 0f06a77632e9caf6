"""The transparency check of a simulated run, made once the overlay is quiet.

Each observer is compared with what one dataspace (:class:`~feds.sim.reference.Reference`)
would have shown it:

* an observer still subscribed sees exactly the reference's view of the live assertions (every
  matching captures vector once, nothing else);
* an observer that was withdrawn holds nothing;
* each assertion surely reaches each matching observer when both lasted long enough: from
  ``max(subscribed, asserted) + 2 * grace`` until the earlier of the unsubscribe and the
  retraction. (An assertion may reach an observer, go and come back while subscriptions change
  nearby — a transient glitch, not a violation: :func:`redeliveries` counts them.)
* messages: an observer receives no message twice and none that does not match it, and every
  matching message sent while it was *surely* subscribed — subscribed more than ``grace`` before
  the send and not withdrawn until more than ``grace`` after it.

``grace`` is how long a subscription change can take to reach every node of the tree:
``2 * height * (the longest delay any chunk had on any link)``. A message sent within ``grace``
of a subscribe or unsubscribe may or may not reach that observer (as with one dataspace whose
clients are a network away), but at most once.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from feds.sim.reference import Reference, Watcher
from feds.sim.workload import WILDCARD
from feds.values import Value

__all__ = ["Ledger", "Published", "SubscriptionRecord", "check_transparency", "redeliveries"]

SHOWN = 3
"""Values listed per violation."""


@dataclass(slots=True)
class SubscriptionRecord:
    """One observer of the workload: its topic, pattern, watcher, lifetime and what it saw."""

    topic: int
    pattern: Value
    watcher: Watcher
    since: float
    until: float | None = None
    seen: list[Value] = field(default_factory=list)
    """Tags of the assertions that arrived (``+``), in arrival order."""


@dataclass(slots=True)
class Published:
    """One published assertion or message: when, on which topic, and (assertions) until when."""

    tag: Value
    topic: int
    at: float
    until: float | None = None


@dataclass
class Ledger:
    """What the workload did, kept beside the one-dataspace reference."""

    reference: Reference = field(default_factory=Reference)
    subs: dict[int, SubscriptionRecord] = field(default_factory=dict)
    assertions: dict[int, Published] = field(default_factory=dict)
    messages: list[Published] = field(default_factory=list)
    live_by_topic: dict[int, dict[int, Value]] = field(default_factory=dict)

    def subscribe(self, key: int, record: SubscriptionRecord) -> None:
        self.subs[key] = record

    def unsubscribe(self, key: int, now: float) -> None:
        self.subs[key].until = now

    def assert_(self, key: int, topic: int, value: Value, tag: Value, now: float) -> None:
        self.reference.add(value)
        self.live_by_topic.setdefault(topic, {})[key] = value
        self.assertions[key] = Published(tag, topic, now)

    def retract(self, key: int, topic: int, value: Value, now: float) -> None:
        self.reference.remove(value)
        del self.live_by_topic[topic][key]
        self.assertions[key].until = now

    def send(self, topic: int, tag: Value, now: float) -> None:
        self.messages.append(Published(tag, topic, now))


def _few(items: Iterable) -> str:
    items = sorted(items, key=repr)
    text = ", ".join(repr(x) for x in items[:SHOWN])
    return text + (f", … ({len(items)} in all)" if len(items) > SHOWN else "")


def check_transparency(ledger: Ledger, grace: float) -> list[str]:
    """Every violation found, as one line each (empty: the run was transparent)."""
    out: list[str] = []
    for key, sub in ledger.subs.items():
        if sub.until is None:
            out += _check_view(key, sub, ledger)
        elif sub.watcher.current:
            out.append(
                f"observer {key} was withdrawn at t={sub.until:.6f} but still holds "
                f"{_few(sub.watcher.current.values())}"
            )
    out += _check_arrivals(ledger, grace)
    out += _check_messages(ledger, grace)
    return out


def _check_view(key: int, sub: SubscriptionRecord, ledger: Ledger) -> list[str]:
    live = ledger.live_by_topic
    if sub.topic == WILDCARD:
        candidates: Iterable[Value] = [v for values in live.values() for v in values.values()]
    else:
        candidates = live.get(sub.topic, {}).values()
    expected = ledger.reference.view(sub.pattern, candidates)
    got = sub.watcher.view()
    if got == expected:
        return []
    missing = expected.keys() - got.keys()
    extra = got.keys() - expected.keys()
    twice = [c for c, n in got.items() if n > 1]
    parts = []
    if missing:
        parts.append(f"misses {_few(missing)}")
    if extra:
        parts.append(f"wrongly holds {_few(extra)}")
    if twice:
        parts.append(f"holds more than once {_few(twice)}")
    return [f"observer {key} (topic {sub.topic}): " + "; ".join(parts)]


def _by_topic(items: Iterable[Published]) -> dict[int, list[Published]]:
    out: dict[int, list[Published]] = {}
    for item in items:
        out.setdefault(item.topic, []).append(item)
    return out


def _check_arrivals(ledger: Ledger, grace: float) -> list[str]:
    """Each assertion reaches each observer at most once, and surely when both lasted."""
    by_topic = _by_topic(ledger.assertions.values())
    everything = list(ledger.assertions.values())
    out: list[str] = []
    for key, sub in ledger.subs.items():
        seen = set(sub.seen)
        items = everything if sub.topic == WILDCARD else by_topic.get(sub.topic, [])
        end = math.inf if sub.until is None else sub.until
        missing = [
            item.tag
            for item in items
            if item.tag not in seen
            and min(end, math.inf if item.until is None else item.until)
            > max(sub.since, item.at) + 2 * grace
        ]
        if missing:
            out.append(f"observer {key} (topic {sub.topic}): never saw {_few(missing)}")
    return out


def redeliveries(ledger: Ledger) -> int:
    """Arrivals of an assertion at an observer that had already seen it (transient glitches)."""
    return sum(len(sub.seen) - len(set(sub.seen)) for sub in ledger.subs.values())


def _check_messages(ledger: Ledger, grace: float) -> list[str]:
    by_topic: dict[int, tuple[list[float], list[Value]]] = {}
    topic_of: dict[Value, int] = {}
    for m in ledger.messages:
        times, tags = by_topic.setdefault(m.topic, ([], []))
        times.append(m.at)
        tags.append(m.tag)
        topic_of[m.tag] = m.topic
    everything = ([m.at for m in ledger.messages], [m.tag for m in ledger.messages])
    out: list[str] = []
    for key, sub in ledger.subs.items():
        got = Counter(c[0] for c in sub.watcher.messages)
        twice = [tag for tag, n in got.items() if n > 1]
        if twice:
            out.append(f"observer {key}: received more than once: {_few(twice)}")
        if sub.topic != WILDCARD:
            wrong = [tag for tag in got if topic_of.get(tag) != sub.topic]
            if wrong:
                out.append(f"observer {key} (topic {sub.topic}): received {_few(wrong)}")
        times, tags = everything if sub.topic == WILDCARD else by_topic.get(sub.topic, ([], []))
        lo = bisect.bisect_right(times, sub.since + grace)
        hi = len(times) if sub.until is None else bisect.bisect_left(times, sub.until - grace)
        missing = [tag for tag in tags[lo:hi] if tag not in got]
        if missing:
            out.append(f"observer {key} (topic {sub.topic}): never received {_few(missing)}")
    return out
