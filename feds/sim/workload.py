"""Workloads: who subscribes and publishes where, what, and when — declared, seeded, scheduled.

A :class:`WorkloadSpec` is read from a small TOML file (every key optional, unknown keys are
errors) or built from CLI options; :func:`plan` turns it, a topology and a seed into a
:class:`Plan`: the clients (each attached to one node) and every action in virtual time. Same
spec, topology and seed: the same plan, action for action.

Two kinds of workload:

``topics``
    Publishers publish ``<msg topic id payload>``, as assertions (retracted after a random
    lifetime) or as messages; subscribers observe ``<msg TOPIC $id _>`` for one topic each (or
    ``<msg _ $id _>``, every topic, for the ``wildcards`` share). ``selectivity`` is the share of
    published events whose topic has a subscriber when it is published; the rest go to topics
    nobody subscribes to. ``churn`` replaces subscriptions (unsubscribe + subscribe elsewhere).
``presence``
    The seed's presence example: ``subscribers`` users each assert ``<present "uN.S">`` and
    observe ``<present $who>``; each event toggles one user (leaves: both withdrawn; comes
    back: a new session ``S``).

Placement of publishers and of subscribers: ``uniform`` over all nodes, ``clustered`` in one
subtree holding about ``cluster`` of the nodes, or ``leaves``. Events arrive as a Poisson
process of ``rate`` per virtual second after ``warmup`` seconds in which the initial
subscriptions are made (spread uniformly).
"""

from __future__ import annotations

import bisect
import difflib
import itertools
import math
import random
import tomllib
from dataclasses import asdict, dataclass, field, fields, replace
from os import PathLike
from pathlib import Path
from typing import Any

from feds.pattern_forms import DISCARD, bind, lit, rec_group
from feds.topology import Topology
from feds.values import Record, Symbol, Value

__all__ = [
    "KINDS",
    "PLACEMENTS",
    "Action",
    "ClientPlan",
    "Plan",
    "WorkloadError",
    "WorkloadSpec",
    "load_workload",
    "plan",
]

KINDS = ("topics", "presence")
PLACEMENTS = ("uniform", "clustered", "leaves")
MSG = Symbol("msg")
PRESENT = Symbol("present")
WILDCARD = -1
"""The topic of a subscription that matches every topic."""

# Action kinds.
SUBSCRIBE, UNSUBSCRIBE, ASSERT, RETRACT, SEND = (
    "subscribe",
    "unsubscribe",
    "assert",
    "retract",
    "send",
)


class WorkloadError(ValueError):
    """An invalid workload spec or file; the message names the key at fault."""


def _key(default: Any, help: str, least: float | None = 0, most: float | None = None) -> Any:
    return field(default=default, metadata={"help": help, "least": least, "most": most})


@dataclass(frozen=True)
class WorkloadSpec:
    """Everything a workload is made of. Every field is also a TOML key and a CLI option."""

    kind: str = _key("topics", "topics | presence", None)
    subscribers: int = _key(10, "subscriber clients (presence: users)", 0)
    subscriptions: int = _key(20, "observers spread over the subscriber clients (topics)", 0)
    publishers: int = _key(10, "publisher clients (topics)", 0)
    topics: int = _key(10, "distinct topics subscribers choose from", 1)
    topic_skew: float = _key(0.0, "Zipf exponent of topic popularity (0: uniform)", 0)
    wildcards: float = _key(0.0, "share of subscriptions matching every topic", 0, 1)
    events: int = _key(1000, "published events (presence: user toggles)", 0)
    rate: float = _key(100.0, "events per virtual second", 1e-9)
    messages: float = _key(0.5, "share of events sent as messages (rest: assertions)", 0, 1)
    lifetime: float = _key(1.0, "mean virtual seconds an assertion lives (0: to the end)", 0)
    selectivity: float = _key(1.0, "share of events on a topic that has a subscriber", 0, 1)
    payload: int = _key(16, "payload bytes per published value", 0)
    churn: float = _key(0.0, "subscription changes per virtual second (topics)", 0)
    warmup: float = _key(1.0, "virtual seconds over which initial subscriptions are made", 0)
    subscriber_placement: str = _key("uniform", "uniform | clustered | leaves", None)
    publisher_placement: str = _key("uniform", "uniform | clustered | leaves", None)
    cluster: float = _key(0.25, "share of the nodes in the clustered subtree", 0, 1)
    description: str = _key("", "free text", None)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type in ("int", "float") and (
                not isinstance(value, int | float) or isinstance(value, bool)
            ):
                raise WorkloadError(f"{f.name} must be a number, not {value!r}")
            if f.type == "int" and not isinstance(value, int):
                raise WorkloadError(f"{f.name} must be an integer, not {value!r}")
            least, most = f.metadata["least"], f.metadata["most"]
            if least is not None and not value >= least:
                raise WorkloadError(f"{f.name} must be at least {least}, not {value!r}")
            if most is not None and not value <= most:
                raise WorkloadError(f"{f.name} must be at most {most}, not {value!r}")
        if self.kind not in KINDS:
            raise WorkloadError(f"kind must be one of {', '.join(KINDS)}, not {self.kind!r}")
        for name in ("subscriber_placement", "publisher_placement"):
            if getattr(self, name) not in PLACEMENTS:
                raise WorkloadError(
                    f"{name} must be one of {', '.join(PLACEMENTS)}, not {getattr(self, name)!r}"
                )
        if self.kind == "topics" and self.subscriptions and not self.subscribers:
            raise WorkloadError("subscriptions need at least one subscriber client")
        if self.kind == "topics" and self.events and not self.publishers:
            raise WorkloadError("events need at least one publisher client")

    def with_overrides(self, **changes: Any) -> WorkloadSpec:
        """A copy with ``changes`` applied (``None`` values are ignored)."""
        given = {k: v for k, v in changes.items() if v is not None}
        unknown = set(given) - set(field_names())
        if unknown:
            raise WorkloadError(f"unknown workload keys: {', '.join(sorted(unknown))}")
        return replace(self, **given)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def field_names() -> list[str]:
    return [f.name for f in fields(WorkloadSpec)]


def field_help() -> dict[str, tuple[type, Any, str]]:
    """``name -> (type, default, help)`` for building CLI options."""
    types = {"int": int, "float": float, "str": str}
    return {f.name: (types[f.type], f.default, f.metadata["help"]) for f in fields(WorkloadSpec)}


def load_workload(path: str | PathLike[str]) -> WorkloadSpec:
    """Read a workload TOML file (flat keys; see ``examples/workloads/``)."""
    try:
        raw = tomllib.loads(Path(path).read_text())
    except OSError as e:
        raise WorkloadError(f"{path}: cannot read: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise WorkloadError(f"{path}: not valid TOML: {e}") from None
    try:
        return from_mapping(raw)
    except WorkloadError as e:
        raise WorkloadError(f"{path}: {e}") from None


def from_mapping(raw: dict[str, Any]) -> WorkloadSpec:
    names = field_names()
    for key in raw:
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise WorkloadError(f"unknown key {key!r}{hint}")
    kinds = field_help()
    values = {}
    for key, value in raw.items():
        kind = kinds[key][0]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        values[key] = value
    return WorkloadSpec(**values)


# ------------------------------------------------------------------------------------------
# plans


@dataclass(frozen=True, slots=True)
class ClientPlan:
    """A client to attach: its node and its role (``subscriber``, ``publisher`` or ``user``)."""

    node: str
    role: str


@dataclass(slots=True)
class Action:
    """One step at virtual time ``time``.

    ``key`` names the subscription or published item (for a later unsubscribe or retract);
    ``value`` is the pattern (subscribe) or the published value; ``tag`` is what the observer
    captures first (the item's unique id), used to time deliveries.
    """

    time: float
    kind: str
    client: int = -1
    key: int = -1
    topic: int = 0
    value: Value = None
    tag: Value = None


@dataclass
class Plan:
    """The clients and the time-ordered actions of one workload run."""

    spec: WorkloadSpec
    clients: list[ClientPlan]
    actions: list[Action]
    end: float
    """The time of the last scheduled publication (the workload's length)."""

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for a in self.actions:
            out[a.kind] = out.get(a.kind, 0) + 1
        return out


def subscription_pattern(topic: int) -> Value:
    """``<msg TOPIC $id _>``, or ``<msg _ $id _>`` for the wildcard topic."""
    first = DISCARD if topic == WILDCARD else lit(topic)
    return rec_group(MSG, [first, bind(), DISCARD])


PRESENCE_PATTERN = rec_group(PRESENT, [bind()])


def placement_nodes(topology: Topology, placement: str, cluster: float) -> list[str]:
    """The nodes clients of this placement may attach to (in topology order)."""
    order = topology.order()
    if placement == "uniform" or len(order) == 1:
        return order
    if placement == "leaves":
        return topology.leaves()
    return _cluster(topology, cluster)


def _cluster(topology: Topology, share: float) -> list[str]:
    """The subtree (rooted below the root) whose size is closest to ``share`` of the nodes."""
    order = topology.order()
    size = {name: 1 for name in order}
    for name in reversed(order[1:]):
        size[topology.parent(name)] += size[name]  # type: ignore[index]
    want = share * len(order)
    best = min(order[1:], key=lambda n: (abs(size[n] - want), topology.depth(n), order.index(n)))
    members, stack = [], [best]
    while stack:
        name = stack.pop()
        members.append(name)
        stack.extend(reversed(topology.children(name)))
    rank = {name: i for i, name in enumerate(order)}
    return sorted(members, key=rank.__getitem__)


class _Topics:
    """Zipf-weighted topic choice, optionally restricted to subscribed topics."""

    def __init__(self, rng: random.Random, count: int, skew: float) -> None:
        self.rng = rng
        self.count = count
        weights = [1.0 / (k + 1) ** skew for k in range(count)]
        self.cumulative = list(itertools.accumulate(weights))
        self.subscribed: dict[int, int] = {}
        self._list: list[int] | None = None

    def any(self) -> int:
        x = self.rng.random() * self.cumulative[-1]
        return min(bisect.bisect_right(self.cumulative, x), self.count - 1)

    def subscribe(self, topic: int) -> None:
        self.subscribed[topic] = self.subscribed.get(topic, 0) + 1
        self._list = None

    def unsubscribe(self, topic: int) -> None:
        n = self.subscribed[topic] - 1
        if n:
            self.subscribed[topic] = n
        else:
            del self.subscribed[topic]
        self._list = None

    def matched(self) -> int | None:
        """A topic with a subscriber (by popularity), or None if there is none."""
        live = {t for t in self.subscribed if t != WILDCARD}
        if not live:
            return None
        for _ in range(32):
            topic = self.any()
            if topic in live:
                return topic
        if self._list is None:
            self._list = sorted(live)
        return self.rng.choice(self._list)

    def unmatched(self) -> int:
        """A topic nobody subscribes to (numbered after the subscribable ones)."""
        return self.count + self.rng.randrange(self.count)


def _poisson_times(rng: random.Random, start: float, rate: float, n: int) -> list[float]:
    t, out = start, []
    for _ in range(n):
        t += rng.expovariate(rate)
        out.append(t)
    return out


def plan(spec: WorkloadSpec, topology: Topology, seed: int = 0) -> Plan:
    """The clients and actions of ``spec`` on ``topology``, drawn from ``random.Random(seed)``."""
    rng = random.Random(f"feds-sim-{seed}")
    if spec.kind == "presence":
        return _plan_presence(spec, topology, rng)
    return _plan_topics(spec, topology, rng)


def _place(rng: random.Random, nodes: list[str], count: int, role: str) -> list[ClientPlan]:
    return [ClientPlan(rng.choice(nodes), role) for _ in range(count)]


def _plan_topics(spec: WorkloadSpec, topology: Topology, rng: random.Random) -> Plan:
    sub_nodes = placement_nodes(topology, spec.subscriber_placement, spec.cluster)
    pub_nodes = placement_nodes(topology, spec.publisher_placement, spec.cluster)
    clients = _place(rng, sub_nodes, spec.subscribers, "subscriber")
    first_publisher = len(clients)
    clients += _place(rng, pub_nodes, spec.publishers, "publisher")
    topics = _Topics(rng, spec.topics, spec.topic_skew)
    actions: list[Action] = []
    keys = itertools.count(1)
    live_subs: list[tuple[int, int, int]] = []  # (key, client, topic)

    def subscribe(time: float, client: int) -> None:
        topic = WILDCARD if rng.random() < spec.wildcards else topics.any()
        key = next(keys)
        topics.subscribe(topic)
        live_subs.append((key, client, topic))
        pattern = subscription_pattern(topic)
        actions.append(Action(time, SUBSCRIBE, client, key, topic, pattern))

    starts = sorted(rng.uniform(0, spec.warmup) for _ in range(spec.subscriptions))
    for i, time in enumerate(starts):
        subscribe(time, i % spec.subscribers)

    times = _poisson_times(rng, spec.warmup, spec.rate, spec.events)
    end = times[-1] if times else spec.warmup
    churn_times = _poisson_times(rng, spec.warmup, spec.churn, _churn_count(spec, end))
    churn_times = [t for t in churn_times if t < end]
    payload = b"\x00" * spec.payload
    churn = iter(churn_times)
    next_churn = next(churn, math.inf)
    for time in times:
        while next_churn < time:
            if live_subs:
                key, client, topic = live_subs.pop(rng.randrange(len(live_subs)))
                topics.unsubscribe(topic)
                actions.append(Action(next_churn, UNSUBSCRIBE, client, key, topic))
                subscribe(next_churn, client)
            next_churn = next(churn, math.inf)
        wanted = rng.random() < spec.selectivity
        topic = topics.matched() if wanted else None
        if topic is None:
            topic = topics.unmatched() if spec.topics else 0
        key = next(keys)
        value = Record(MSG, (topic, key, payload))
        client = first_publisher + rng.randrange(spec.publishers)
        if rng.random() < spec.messages:
            actions.append(Action(time, SEND, client, key, topic, value, key))
            continue
        actions.append(Action(time, ASSERT, client, key, topic, value, key))
        if spec.lifetime > 0:
            gone = time + rng.expovariate(1.0 / spec.lifetime)
            if gone < end:
                actions.append(Action(gone, RETRACT, client, key, topic, value, key))
    return Plan(spec, clients, _ordered(actions), end)


def _churn_count(spec: WorkloadSpec, end: float) -> int:
    if spec.churn <= 0:
        return 0
    return int((end - spec.warmup) * spec.churn * 2) + 10


def _ordered(actions: list[Action]) -> list[Action]:
    """Sort by time; actions at the same time keep the order they were made in."""
    return sorted(actions, key=lambda a: a.time)


def _plan_presence(spec: WorkloadSpec, topology: Topology, rng: random.Random) -> Plan:
    nodes = placement_nodes(topology, spec.subscriber_placement, spec.cluster)
    clients = _place(rng, nodes, spec.subscribers, "user")
    actions: list[Action] = []
    keys = itertools.count(1)
    sessions = [0] * len(clients)
    present: dict[int, tuple[int, int, Value]] = {}  # user -> (observer key, item key, value)

    def join(time: float, user: int) -> None:
        name = f"u{user}.{sessions[user]}"
        sessions[user] += 1
        sub, item = next(keys), next(keys)
        value = Record(PRESENT, (name,))
        present[user] = (sub, item, value)
        actions.append(Action(time, SUBSCRIBE, user, sub, 0, PRESENCE_PATTERN))
        actions.append(Action(time, ASSERT, user, item, 0, value, name))

    def leave(time: float, user: int) -> None:
        sub, item, value = present.pop(user)
        actions.append(Action(time, RETRACT, user, item, 0, value, value.fields[0]))
        actions.append(Action(time, UNSUBSCRIBE, user, sub, 0))

    for user, time in enumerate(rng.uniform(0, spec.warmup) for _ in clients):
        join(time, user)
    times = _poisson_times(rng, spec.warmup, spec.rate, spec.events if clients else 0)
    for time in times:
        user = rng.randrange(len(clients))
        (leave if user in present else join)(time, user)
    end = times[-1] if times else spec.warmup
    return Plan(spec, clients, _ordered(actions), end)
