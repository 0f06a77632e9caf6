"""Run one workload on one overlay with one protocol, in virtual time, and measure it.

:func:`simulate` builds the overlay from a topology (real :class:`~feds.node.Node` s, one per
tree node, joined by real relays over :mod:`feds.sim.network` links), attaches the workload's
clients to their nodes by direct refs, and runs the loop

    run the scheduler until idle → put written bytes on the wire → advance the clock to the next
    workload action or arrival, whichever is first → …

until no work is left. Then it checks transparency (:mod:`feds.sim.check`) and returns a
:class:`~feds.sim.results.SimResult` with every figure.
"""

from __future__ import annotations

import contextlib
import gc
import time as wallclock
from array import array
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from feds.actor import Handle, Scheduler, Turn
from feds.dataspace import OBSERVE, Dataspace
from feds.node import Node
from feds.protocols import Protocol, make_protocol
from feds.sim.bound import TopicBound, TreeMetric
from feds.sim.check import Ledger, SubscriptionRecord, check_transparency, redeliveries
from feds.sim.network import LinkParams, Network
from feds.sim.reference import Client, Watcher, Workload
from feds.sim.results import BoundFigures, LinkFigures, NodeFigures, SimResult
from feds.sim.workload import (
    ASSERT,
    RETRACT,
    SEND,
    SUBSCRIBE,
    UNSUBSCRIBE,
    WILDCARD,
    Action,
    Plan,
    WorkloadSpec,
    plan,
)
from feds.topology import Topology
from feds.values import Record, Value

__all__ = ["MeteredDataspace", "SimNode", "TransparencyError", "simulate"]

ProtocolChoice = str | Callable[[], Protocol]
Progress = Callable[[int, int], None]
"""``progress(done, total)``: workload actions carried out so far, out of all of them."""

TURN_LIMIT = 50_000_000
"""Turns one scheduler run may take without becoming idle; more means a loop inside a node."""
QUIET_AFTER = 60.0
"""Virtual seconds after the last action (plus link delays and the time to send what is
queued on slow links) within which the overlay must be quiet; traffic still flowing then means
a routing loop."""


class TransparencyError(AssertionError):
    """A simulated run broke transparency; ``result`` holds the figures and the violations."""

    def __init__(self, result: SimResult) -> None:
        self.result = result
        lines = "\n  ".join(result.violations[:20])
        more = len(result.violations) - 20
        tail = f"\n  ... and {more} more" if more > 0 else ""
        super().__init__(
            f"{result.protocol}: the overlay is not transparent "
            f"({len(result.violations)} violations):\n  {lines}{tail}"
        )


class MeteredDataspace(Dataspace):
    """The real fragment dataspace, also keeping the peak of its assertions and handlers."""

    def __init__(self) -> None:
        super().__init__()
        self.peak_assertions = 0
        self.peak_handlers = 0

    def on_publish(self, turn: Turn, value: Value, handle: Handle) -> None:
        super().on_publish(turn, value, handle)
        n = len(self.assertions)
        if n > self.peak_assertions:
            self.peak_assertions = n
        if value.__class__ is Record and value.label is OBSERVE and value in self.observers:
            h = self.index.handler_count()  # (only an Observe adds handlers: no hash for others)
            if h > self.peak_handlers:
                self.peak_handlers = h


class SimNode(Node):
    """A real node whose fragment is a :class:`MeteredDataspace`."""

    dataspace: MeteredDataspace

    def _boot(self, turn: Turn) -> None:
        self.dataspace = MeteredDataspace()
        super()._boot(turn)


@dataclass
class _Deliveries:
    """Publish times by tag, and the latency of every arrival at an observer."""

    network: Network
    published: dict[Value, float] = field(default_factory=dict)
    assert_latency: array = field(default_factory=lambda: array("d"))
    message_latency: array = field(default_factory=lambda: array("d"))

    def hook(self, seen: list[Value], since: float) -> Callable[[str, tuple], None]:
        """The arrival hook of an observer subscribed at ``since``; lists assertion tags in
        ``seen``. Latency counts from when the delivery became due: the publication, or the
        subscription if it came later (an observer is told of older assertions when it joins).
        """
        published, clock = self.published, self.network
        asserted, sent = self.assert_latency.append, self.message_latency.append
        saw = seen.append

        def arrived(kind: str, captures: tuple) -> None:
            tag = captures[0]
            at = published.get(tag)
            if kind == "+":
                saw(tag)
                if at is not None:
                    asserted(clock.now - (at if at > since else since))
            elif at is not None:
                sent(clock.now - at)

        return arrived


class _Bound:
    """Subscriber nodes per topic and the Steiner bound of each published event."""

    def __init__(self, metric: TreeMetric) -> None:
        self.metric = metric
        self.nodes: dict[int, Counter] = {}
        self.cache: dict[int, TopicBound] = {}
        self.figures = BoundFigures()

    def subscribe(self, topic: int, node: int, delta: int) -> None:
        counts = self.nodes.setdefault(topic, Counter())
        before = counts[node]
        counts[node] = before + delta
        if counts[node] <= 0:
            del counts[node]
        if (before > 0) != (counts[node] > 0 if node in counts else False):
            if topic == WILDCARD:
                self.cache.clear()
            else:
                self.cache.pop(topic, None)

    def event(self, topic: int, source: int, kind: str) -> None:
        bound = self.cache.get(topic)
        if bound is None:
            nodes = set(self.nodes.get(topic, ())) | set(self.nodes.get(WILDCARD, ()))
            bound = self.cache[topic] = TopicBound(self.metric, nodes)
        edges = bound.with_source(source)
        f = self.figures
        f.events += 1
        if bound.nodes:
            f.matched_events += 1
        f.bound_edges += edges
        if kind == SEND:
            f.message_edges += edges
        else:
            f.assertion_edges += edges


class _Run:
    """The state of one simulation: overlay, network, clients and the bookkeeping."""

    def __init__(
        self,
        topology: Topology,
        protocol: ProtocolChoice,
        work: Plan,
        link: LinkParams,
        links: dict[str, LinkParams] | None,
    ) -> None:
        self.topology = topology
        self.plan = work
        self.scheduler = Scheduler()
        make = (lambda: make_protocol(protocol)) if isinstance(protocol, str) else protocol
        self.nodes = {name: SimNode(self.scheduler, name, make()) for name in topology.order()}
        self.protocol_name = next(iter(self.nodes.values())).protocol.name
        self.scheduler.run_until_idle()
        self.network = Network(self.scheduler)
        for name in topology.order()[1:]:
            parent = topology.parent(name)
            params = (links or {}).get(name, link)
            self.network.connect(self.nodes[name], self.nodes[parent], params)  # type: ignore[index]
        self.metric = TreeMetric({n: topology.parent(n) for n in topology.order()})
        self.bound = _Bound(self.metric)
        self.deliveries = _Deliveries(self.network)
        self.ledger = Ledger()
        self.violations: list[str] = []
        self.clients: list[Client] = []
        self.workload = Workload(self.scheduler)
        self.observer_keys: dict[int, int] = {}  # subscription key -> Workload observer key
        self.assertion_keys: dict[int, int] = {}  # item key -> Workload assertion key
        self.sub_node = {
            a.key: work.clients[a.client].node for a in work.actions if a.kind == SUBSCRIBE
        }
        self.baseline: dict[str, dict[str, int]] = {}
        self.start = 0.0

    # -- the loop -------------------------------------------------------------------------------

    def settle_links(self) -> None:
        """Run until every link is up and quiet (the handshakes), before the workload starts."""
        self.run_until(None)
        self.baseline = {
            ch.name: ch.stats.as_dict()
            for link in self.network.links
            for ch in (link.up, link.down)
        }
        self.start = self.network.now

    def run_scheduler(self) -> None:
        scheduler = self.scheduler
        scheduler.run_until_idle(max_turns=TURN_LIMIT)
        if not scheduler.idle():
            raise _NotQuiet(f"{TURN_LIMIT} turns without becoming idle (a loop inside a node?)")

    def run_until(self, deadline: float | None) -> None:
        """Run until nothing is in flight, or until the next arrival is after ``deadline``."""
        network = self.network
        while True:
            self.run_scheduler()
            network.flush()
            when = network.next_time()
            if when is None or (deadline is not None and when > deadline):
                return
            network.deliver_next()

    def execute(self, progress: Progress | None) -> None:
        network = self.network
        actions = self.plan.actions
        total = len(actions)
        every = max(1, total // 200)
        for i, action in enumerate(actions):
            at = self.start + action.time
            self.run_until(at)
            if at > network.now:
                network.now = at
            self.apply(action)
            if progress is not None and i % every == 0:
                progress(i, total)
        backlog = max(
            (ch.busy_until for link in network.links for ch in (link.up, link.down)),
            default=network.now,
        )
        limit = max(network.now, backlog) + QUIET_AFTER + self._slowest_path()
        self.run_until(limit)
        self.run_scheduler()
        if network.next_time() is not None:
            raise _NotQuiet(
                f"traffic still flowing {QUIET_AFTER:g} virtual seconds after the last action "
                f"({network.in_flight()} chunks in flight; a routing loop?)"
            )
        if progress is not None:
            progress(total, total)

    def _slowest_path(self) -> float:
        return (
            2
            * max(1, self.topology.height())
            * max(
                (ch.latency for link in self.network.links for ch in (link.up, link.down)),
                default=0.0,
            )
        )

    # -- actions --------------------------------------------------------------------------------

    def attach_clients(self) -> None:
        for spec in self.plan.clients:
            self.clients.append(self.workload.attach(self.nodes[spec.node], name=spec.role))

    def apply(self, a: Action) -> None:
        client = self.clients[a.client]
        node = self.metric.index[client.node.name]
        now = self.network.now
        work = self.workload
        ledger = self.ledger
        if a.kind == SUBSCRIBE:
            seen: list[Value] = []
            watcher = Watcher(self.deliveries.hook(seen, now))
            self.observer_keys[a.key] = work.observe(client, a.value, watcher)
            ledger.subscribe(a.key, SubscriptionRecord(a.topic, a.value, watcher, now, None, seen))
            self.bound.subscribe(a.topic, node, +1)
        elif a.kind == UNSUBSCRIBE:
            work.unobserve(client, self.observer_keys.pop(a.key))
            ledger.unsubscribe(a.key, now)
            self.bound.subscribe(a.topic, node, -1)
        elif a.kind == ASSERT:
            self.deliveries.published[a.tag] = now
            self.assertion_keys[a.key] = work.assert_(client, a.value)
            ledger.assert_(a.key, a.topic, a.value, a.tag, now)
            self.bound.event(a.topic, node, a.kind)
        elif a.kind == RETRACT:
            work.retract(client, self.assertion_keys.pop(a.key))
            ledger.retract(a.key, a.topic, a.value, now)
            self.bound.event(a.topic, node, a.kind)
        elif a.kind == SEND:
            self.deliveries.published[a.tag] = now
            work.send(client, a.value)
            ledger.send(a.topic, a.tag, now)
            self.bound.event(a.topic, node, a.kind)

    # -- figures --------------------------------------------------------------------------------

    def link_figures(self) -> list[LinkFigures]:
        subs_below = self._subscriptions_below()
        out = []
        for link in self.network.links:
            figures = []
            for ch in (link.up, link.down):
                now, base = ch.stats.as_dict(), self.baseline[ch.name]
                figures.append(
                    {k: now[k] - base[k] for k in ("packets_out", "events_out", "bytes_out")}
                )
            out.append(
                LinkFigures(
                    link.child,
                    link.parent,
                    self.topology.depth(link.child),
                    subs_below[link.child],
                    *(_traffic(f) for f in figures),
                )
            )
        return out

    def _subscriptions_below(self) -> dict[str, int]:
        """Subscriptions ever made by clients in each node's subtree."""
        count: Counter = Counter()
        for key in self.ledger.subs:
            count[self.sub_node[key]] += 1
        below = {name: count[name] for name in self.topology.order()}
        for name in reversed(self.topology.order()[1:]):
            below[self.topology.parent(name)] += below[name]  # type: ignore[index]
        return below

    def node_figures(self) -> list[NodeFigures]:
        clients = Counter(c.node.name for c in self.clients)
        out = []
        for name, node in self.nodes.items():
            ds = node.dataspace
            out.append(
                NodeFigures(
                    name,
                    self.topology.depth(name),
                    len(self.topology.children(name)),
                    clients[name],
                    len(ds),
                    ds.peak_assertions,
                    ds.index.handler_count(),
                    ds.peak_handlers,
                )
            )
        return out


def _traffic(f: dict[str, int]) -> dict[str, int]:
    return {"packets": f["packets_out"], "events": f["events_out"], "bytes": f["bytes_out"]}


class _NotQuiet(Exception):
    pass


def simulate(
    topology: Topology,
    protocol: ProtocolChoice,
    workload: WorkloadSpec | Plan,
    *,
    seed: int = 0,
    link: LinkParams | None = None,
    links: dict[str, LinkParams] | None = None,
    progress: Progress | None = None,
    strict: bool = True,
) -> SimResult:
    """Simulate ``workload`` on ``topology`` with ``protocol`` and return every figure.

    ``protocol`` is a protocol name or a factory of :class:`~feds.protocols.Protocol` objects
    (one per node). ``link`` gives every link's latency and bandwidth, ``links`` overrides it for
    the link above the named node. ``seed`` draws the workload's plan (ignored if a
    :class:`~feds.sim.workload.Plan` is given). With ``strict`` (the default) a transparency
    violation raises :class:`TransparencyError`; otherwise it is listed in ``result.violations``.
    """
    with _collector_paused():
        return _simulate(topology, protocol, workload, seed, link, links, progress, strict)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cycle collector while simulating.

    A run allocates millions of small objects, and the collector's passes over them cost about
    a third of the run time, while they find almost no cyclic garbage (about 30 objects per
    full pass, measured); reference counting frees everything else as usual.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _simulate(
    topology: Topology,
    protocol: ProtocolChoice,
    workload: WorkloadSpec | Plan,
    seed: int,
    link: LinkParams | None,
    links: dict[str, LinkParams] | None,
    progress: Progress | None,
    strict: bool,
) -> SimResult:
    started = wallclock.perf_counter()
    work = workload if isinstance(workload, Plan) else plan(workload, topology, seed)
    run = _Run(topology, protocol, work, link or LinkParams(), links)
    run.settle_links()
    run.attach_clients()
    turns_before = run.scheduler.turns_run
    try:
        run.execute(progress)
        quiet = True
    except _NotQuiet as e:
        run.violations.append(f"the overlay never became quiet: {e}")
        quiet = False
    if quiet:
        run.violations += check_transparency(run.ledger, grace=_grace(run))
    run.violations += [f"actor {a.name} crashed: {exc!r}" for a, exc in run.scheduler.crashes]
    for sim_link in run.network.links:
        for relay in sim_link.relays():
            if relay.closed:
                run.violations.append(f"relay {relay!r} closed: {relay.close_reason}")
    result = SimResult(
        protocol=run.protocol_name,
        seed=seed,
        nodes=len(topology),
        height=topology.height(),
        workload=work.spec.as_dict(),
        link={
            "latency": (link or LinkParams()).latency,
            "bandwidth": (link or LinkParams()).bandwidth,
        },
        actions=len(work.actions),
        action_counts=work.counts(),
        virtual_seconds=run.network.now - run.start,
        wall_seconds=wallclock.perf_counter() - started,
        turns=run.scheduler.turns_run - turns_before,
        links=run.link_figures(),
        node_figures=run.node_figures(),
        bound=run.bound.figures,
        assert_latency=run.deliveries.assert_latency,
        message_latency=run.deliveries.message_latency,
        violations=run.violations,
        redeliveries=redeliveries(run.ledger),
    )
    if strict and result.violations:
        raise TransparencyError(result)
    return result


def _grace(run: _Run) -> float:
    """How long a subscription change may take to reach every node (see :mod:`.check`)."""
    return 2 * max(1, run.topology.height()) * run.network.max_delay() + 1e-9
