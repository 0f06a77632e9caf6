"""Runs overlay nodes under trio: listeners, uplinks, in-process links and the status service.

:class:`NodeRuntime` puts one :class:`~feds.node.Node` on the network. Its listener offers each
connecting role its own object (``protocols/wire.md``): the node service to a ``peer``, local
access (a plain dataspace) to a ``client``, the status service to ``admin``. Its uplink dials the
parent and re-dials with backoff when the link is lost; a lost link retracts everything that
crossed it, on both sides. :func:`run_overlay` runs a whole topology in one process (``feds up``),
its links in memory and each node listening on TCP.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Collection
from dataclasses import dataclass, field

import trio

from feds.actor import Entity, Facet, Handle, Ref, Scheduler, Turn
from feds.auth import Secrets
from feds.driver import Driver
from feds.limits import DEFAULT_NET_LIMITS, HandleBudget, NetLimits
from feds.node import Node
from feds.relay import ADMIN, CLIENT, PEER, Hello, Relay
from feds.tls import TlsSettings
from feds.topology import Topology
from feds.transport import (
    Backpressure,
    backlog,
    connect_tcp,
    listener_port,
    memory_pair,
    serve_tcp,
)
from feds.values import FrozenDict, Record, Symbol, Value, from_python

log = logging.getLogger("feds.runtime")

STATUS = Symbol("status")
LINK_POLL = 0.005
"""Seconds between checks that every uplink of a starting overlay is up."""
RETRY_MIN, RETRY_MAX = 0.2, 5.0
"""Seconds between uplink attempts: doubling from the first to the second."""


class InsecureListen(ValueError):
    """A node without authentication asked to listen where other machines can reach it."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable only from this machine (a wildcard host is not)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class NodeFailed(Exception):
    """The node as a whole stopped working (its actor ended): the process should exit."""


class StatusService(Entity):
    """Answers an assertion ``<status reply>`` by sending ``<status {figures}>`` to ``reply``.

    (A request is asserted rather than sent so its ``reply`` reference stays alive on the wire
    until the answer is out; the asker retracts it afterwards.) Offered to the ``admin`` role.
    """

    def __init__(self, runtime: NodeRuntime) -> None:
        self.runtime = runtime

    def on_publish(self, turn: Turn, value: Value, handle: Handle) -> None:
        if value.__class__ is Record and value.label == STATUS and len(value.fields) == 1:
            reply = value.fields[0]
            if isinstance(reply, Ref):
                turn.message(reply, Record(STATUS, (from_python(self.runtime.status()),)))


class NodeRuntime:
    """One node with its network edges, on ``scheduler`` (run it with a :class:`Driver`).

    Making relays (:meth:`accept_relay`, :meth:`uplink_relay`) needs no trio: a test or the
    simulator can move their bytes itself. The node's TCP links share one
    :class:`~feds.transport.Backpressure`: while a node link is congested, the node reads
    none of the others (a congested client pauses nothing; it is cut at its own bound).
    ``limits`` bound its connections (:class:`~feds.limits.NetLimits`); the far sides'
    assertions held here, over all connections, share one budget.
    """

    def __init__(
        self,
        scheduler: Scheduler,
        name: str,
        protocol: str,
        *,
        limits: NetLimits = DEFAULT_NET_LIMITS,
        secrets: Secrets | None = None,
        known_nodes: Collection[str] = (),
        allow_unauthenticated: bool = False,
        tls: TlsSettings | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.limits = limits
        self.secrets = secrets
        self.known_nodes = frozenset(known_nodes)
        self.allow_unauthenticated = allow_unauthenticated
        self.tls = tls
        self.budget = HandleBudget(limits.max_node_assertions)
        self.node = Node(self.scheduler, name, protocol)
        self.scheduler.run_until_idle()
        self.status_ref = Ref(self.node.facet, StatusService(self))
        self.relays: set[Relay] = set()
        self.listening: list[str] = []
        self.backpressure = Backpressure(
            max_backlog=limits.max_backlog, client_max_backlog=limits.client_max_backlog
        )
        self.failure: str | None = None
        """Why the node stopped working, once it has (see :meth:`watch`)."""
        self._failed = trio.Event()
        self.node.actor.exit_hooks.append(self._node_exited)

    def _node_exited(self, actor: object) -> None:
        reason = self.node.actor.exit_reason
        self.failure = "stopped" if reason is None else f"{type(reason).__name__}: {reason}"
        log.error("node %s failed: %s", self.name, self.failure)
        self._failed.set()

    async def watch(self) -> None:
        """Return never while the node works; raise :class:`NodeFailed` once it stops (so that
        ``feds node`` exits non-zero and a process supervisor restarts it)."""
        await self._failed.wait()
        raise NodeFailed(f"node {self.name} failed: {self.failure}")

    @classmethod
    def from_topology(
        cls, scheduler: Scheduler, topology: Topology, name: str, protocol: str | None = None
    ) -> NodeRuntime:
        """The node ``name`` of ``topology``, with its limits and security settings (reads the
        secret file: raises :class:`~feds.auth.AuthError` if it cannot be used)."""
        secret_file = topology.secret_file
        return cls(
            scheduler,
            name,
            protocol or topology.protocol,
            limits=topology.limits,
            secrets=None if secret_file is None else Secrets.load(secret_file),
            known_nodes=topology.nodes,
            allow_unauthenticated=topology.allow_unauthenticated,
            tls=topology.tls,
        )

    @property
    def name(self) -> str:
        return self.node.name

    def status(self) -> dict:
        """Figures for ``feds status``: the node's own, and per live connection."""
        links = []
        for relay in sorted(
            self.relays, key=lambda r: r.remote_hello.name if r.remote_hello else ""
        ):
            hello = relay.remote_hello
            unsent, peak = backlog(relay)
            links.append(
                {
                    "peer": hello.name if hello else "?",
                    "role": hello.role if hello else "?",
                    **relay.stats.as_dict(),
                    "backlog": unsent,
                    "backlog_peak": peak,
                }
            )
        return {**self.node.status(), "listening": list(self.listening), "links": links}

    # -- relays -----------------------------------------------------------------------------

    def _initial_for(self, hello: Hello) -> Ref | None:
        node = self.node
        return {PEER: node.service, CLIENT: node.access, ADMIN: self.status_ref}.get(hello.role)

    def _authorize(self, hello: Hello) -> str | None:
        """Why an authenticated far side may not have the connection it asked for, or None."""
        if hello.role == PEER and self.known_nodes and hello.name not in self.known_nodes:
            return f"unknown node name {hello.name!r}"
        return None

    def accept_relay(self) -> Relay:
        """A relay for a connection someone made to this node."""
        relay = Relay(
            self.scheduler,
            self.name,
            PEER,
            initial=self._initial_for,
            secrets=self.secrets,
            listener=True,
            authenticate=None if self.secrets is None else self._authorize,
            max_handles=self.limits.handles_by_role(),
            budget=self.budget,
            on_close=self.relays.discard,
        )
        self.relays.add(relay)
        return relay

    def uplink_relay(self) -> Relay:
        """A relay for this node's connection to its parent; joins the parent once ready."""
        node = self.node
        uplink: list[Facet] = []

        def ready(turn: Turn, hello: Hello, remote: Ref) -> None:
            if hello.role != PEER:
                relay.close(f"the parent answered as {hello.role!r}, not as a node")
                return
            log.info("node %s: uplink to %s is up", node.name, hello.name)
            self.scheduler.enqueue(
                node.actor, node.facet, lambda t: uplink.append(node.join(t, remote))
            )

        def closed(r: Relay) -> None:
            self.relays.discard(r)
            for facet in uplink:
                self.scheduler.enqueue(node.actor, node.facet, lambda t, f=facet: t.stop(f))

        relay = Relay(
            self.scheduler,
            self.name,
            PEER,
            max_handles=self.limits.handles_by_role(),
            budget=self.budget,
            secrets=self.secrets,
            on_ready=ready,
            on_close=closed,
        )
        self.relays.add(relay)
        return relay

    # -- network ----------------------------------------------------------------------------

    async def serve(
        self, host: str, port: int, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Listen for peers, clients and admin tools; ``task_status`` gets the bound port.

        Raises :class:`InsecureListen` for an address other machines can reach when the node
        has no secrets, unless it was built with ``allow_unauthenticated``.
        """
        authenticated = self.secrets is not None or (self.tls is not None and self.tls.mutual)
        if not authenticated and not self.allow_unauthenticated and not is_loopback(host):
            raise InsecureListen(
                f"node {self.name}: refusing to listen on {host} without authentication: "
                "anyone who can reach it could join as a node or read every assertion. Give "
                "the topology a [security] secret-file (or mutual [tls]), or set "
                "allow-unauthenticated = true if the network itself is trusted"
            )

        async def announce(*, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
            await serve_tcp(
                host,
                port,
                self.accept_relay,
                backpressure=self.backpressure,
                limits=self.limits,
                ssl_context=None if self.tls is None else self.tls.server_context(self.name),
                task_status=task_status,
            )

        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(announce)
            bound = listener_port(listeners)
            self.listening.append(f"{host}:{bound}")
            task_status.started(bound)

    async def uplink_tcp(self, host: str, port: int) -> None:
        """Keep a link to the parent at ``host:port``, re-dialing with backoff when it is lost."""
        delay = RETRY_MIN
        while True:
            relay = self.uplink_relay()
            try:
                await connect_tcp(
                    host,
                    port,
                    relay,
                    backpressure=self.backpressure,
                    limits=self.limits,
                    ssl_context=None if self.tls is None else self.tls.uplink_context(self.name),
                )
                log.warning("node %s: uplink lost (%s); re-dialing", self.name, relay.close_reason)
                delay = RETRY_MIN
            except OSError as exc:
                log.warning("node %s: cannot reach parent %s:%d (%s)", self.name, host, port, exc)
            await trio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX)


@dataclass
class Overlay:
    """A whole topology running in this process."""

    topology: Topology
    driver: Driver
    runtimes: dict[str, NodeRuntime] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)

    def unlinked(self) -> list[str]:
        """Nodes that should have a parent but have no working uplink yet."""
        return [
            name
            for name, runtime in self.runtimes.items()
            if self.topology.nodes[name].parent is not None and runtime.node.parent_service is None
        ]

    def address(self, name: str) -> str:
        host = self.topology.nodes[name].host
        return f"{'127.0.0.1' if host in ('0.0.0.0', '::', '') else host}:{self.ports[name]}"


async def run_overlay(
    topology: Topology,
    *,
    protocol: str | None = None,
    any_port: bool = False,
    tcp_links: bool = False,
    task_status: trio.TaskStatus[Overlay] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run every node of ``topology`` in this process until cancelled.

    Links between nodes are in memory (or over loopback TCP with ``tcp_links``, as separate
    processes would use them); every node listens on TCP at its address (or on a free port with
    ``any_port``) so clients and tools can attach. ``task_status`` gets the :class:`Overlay`
    once every node listens.
    """
    driver = Driver()
    overlay = Overlay(topology, driver)
    for name in topology.order():
        overlay.runtimes[name] = NodeRuntime.from_topology(
            driver.scheduler, topology, name, protocol
        )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(driver.run)
        for name, runtime in overlay.runtimes.items():
            nursery.start_soon(runtime.watch)  # a failed node ends the whole overlay
            spec = topology.nodes[name]
            port = 0 if any_port else spec.port
            overlay.ports[name] = await nursery.start(runtime.serve, spec.host, port)
        for name, runtime in overlay.runtimes.items():
            parent = topology.nodes[name].parent
            if parent is None:
                continue
            if tcp_links:
                host, port = overlay.address(parent).rsplit(":", 1)
                nursery.start_soon(runtime.uplink_tcp, host, int(port))
            else:
                parent_relay = overlay.runtimes[parent].accept_relay()
                nursery.start_soon(memory_pair, runtime.uplink_relay(), parent_relay)
        while overlay.unlinked():
            await trio.sleep(LINK_POLL)
        task_status.started(overlay)


def figures(value: Value) -> dict:
    """The figures of a ``<status {…}>`` answer as a plain dict (for printing)."""
    body = value.fields[0] if value.__class__ is Record else value
    return _plain(body)


def _plain(v: Value) -> object:
    if isinstance(v, FrozenDict):
        return {_plain(k): _plain(x) for k, x in v.items()}
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    return v
