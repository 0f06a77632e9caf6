"""Topology files: which nodes exist, where they listen, and the rooted spanning tree they form.

A topology is read from TOML (see ``docs/topology.md``) in one of two styles: every node but
the root names its ``parent``, or the file gives ``root`` plus a general graph of ``[[links]]``
with costs, from which the minimum-total-cost spanning tree is computed (Kruskal, ties broken by
``(cost, sorted endpoint names)``) and oriented away from the root.  Everything is validated
when a :class:`Topology` is built; a :class:`TopologyError` names the nodes and links at fault.
"""

from __future__ import annotations

import difflib
import itertools
import math
import random
import re
import tomllib
from collections import deque
from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

import networkx as nx
from networkx.utils import UnionFind

from feds.limits import DEFAULT_NET_LIMITS, NetLimits
from feds.tls import TlsSettings

if TYPE_CHECKING:
    from feds.spaces.topology_spaces import TopologySpaces

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PROTOCOL",
    "GENERATORS",
    "PROTOCOLS",
    "Link",
    "NodeSpec",
    "Topology",
    "TopologyError",
    "dump",
    "dumps",
    "format_address",
    "from_graph",
    "from_parents",
    "generate",
    "load",
    "loads",
    "parse_address",
]

PROTOCOLS: tuple[str, ...] = ("copy-up", "observer-flood", "aggregate-subs")
"""The federation protocols a topology may ask for."""

DEFAULT_PROTOCOL = "aggregate-subs"
DEFAULT_HOST = "127.0.0.1"

GENERATORS: tuple[str, ...] = ("chain", "star", "balanced", "random-tree", "random-graph")
"""The shapes :func:`generate` knows."""

_NAME_RE = re.compile(r"^[A-Za-z0-9_-]+$")
_HOST_RE = re.compile(r"^[A-Za-z0-9._:%-]+$")
_WILDCARD_HOSTS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}

_TOP_KEYS = (
    "protocol",
    "description",
    "defaults",
    "nodes",
    "root",
    "links",
    "limits",
    "security",
    "tls",
    "spaces",
)
_TLS_KEYS = ("ca", "cert", "key", "mutual")
_SECURITY_KEYS = ("secret-file", "allow-unauthenticated")
_NO_TLS = (
    "per-node tls settings are not supported: use the top-level [tls] table, with {name} in "
    "the cert and key paths for each node's own"
)
_DEFAULT_KEYS = ("host", "tls")
_NODE_KEYS = ("listen", "host", "port", "parent", "advertise", "description", "tls", "gates")
_LINK_KEYS = ("a", "b", "cost")


class TopologyError(ValueError):
    """An invalid topology.  ``detail`` is the problem, ``source`` the file (or ``None``)."""

    def __init__(self, detail: str, source: str | None = None) -> None:
        self.detail = detail
        self.source = source
        super().__init__(f"{source}: {detail}" if source else detail)

    def with_source(self, source: str) -> TopologyError:
        return TopologyError(self.detail, source)


# --------------------------------------------------------------------------------------------
# data


@dataclass(frozen=True)
class NodeSpec:
    """One node: its name, the address it listens on, and its parent in the tree.

    ``advertise`` is the address others use to reach the node when it differs from the listen
    address (e.g. listening on ``0.0.0.0``); ``tls`` is reserved for a later TLS layer (a
    topology with one is refused until it is implemented, never ignored); ``description`` is
    free text.
    """

    name: str
    host: str
    port: int
    parent: str | None = None
    advertise: tuple[str, int] | None = None
    description: str | None = None
    tls: dict[str, Any] | None = field(default=None, hash=False)

    @property
    def listen(self) -> str:
        """The listen address as ``host:port`` (IPv6 hosts in brackets)."""
        return format_address(self.host, self.port)


@dataclass(frozen=True)
class Link:
    """An undirected link of a graph-style topology; ``cost`` is a finite number >= 0."""

    a: str
    b: str
    cost: float = 1.0

    def key(self) -> tuple[float, str, str]:
        """The Kruskal order: by cost, then by the sorted endpoint names."""
        lo, hi = sorted((self.a, self.b))
        return (self.cost, lo, hi)


@dataclass(frozen=True)
class Topology:
    """A validated rooted tree of nodes plus the protocol they run.

    ``links`` is ``None`` for a parent-style topology; for a graph-style one it holds every
    link, and the nodes' ``parent`` fields are computed from them (a given parent must agree).
    Node order (``nodes`` insertion order) is the file order; it orders children and ``order()``.
    """

    protocol: str
    nodes: dict[str, NodeSpec]
    root: str
    links: tuple[Link, ...] | None = None
    description: str | None = None
    limits: NetLimits = DEFAULT_NET_LIMITS
    secret_file: str | None = None
    """The deployment's secret file (``feds.auth``): every connection must authenticate."""
    allow_unauthenticated: bool = False
    """Let nodes without a secret file listen on addresses other machines can reach."""
    tls: TlsSettings | None = None
    """Certificates for TLS on every connection (``feds.tls``), or None for plaintext."""
    spaces: TopologySpaces | None = None
    """Tuple spaces and the nodes' gates that serve them (``feds.spaces.topology_spaces``)."""
    _children: dict[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)
    _depth: dict[str, int] = field(init=False, repr=False, compare=False)
    _cost: dict[str, float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _validate(self)

    # --- structure ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[str]:
        return iter(self.nodes)

    def __contains__(self, name: object) -> bool:
        return name in self.nodes

    def _spec(self, name: str) -> NodeSpec:
        try:
            return self.nodes[name]
        except KeyError:
            raise KeyError(f"no node named {name!r}") from None

    def parent(self, name: str) -> str | None:
        return self._spec(name).parent

    def children(self, name: str) -> list[str]:
        """The children of ``name``, in node order."""
        self._spec(name)
        return list(self._children[name])

    def depth(self, name: str) -> int:
        """Edges between ``name`` and the root (the root has depth 0)."""
        self._spec(name)
        return self._depth[name]

    def height(self) -> int:
        """The largest depth of any node (0 for a single node)."""
        return max(self._depth.values())

    def path_to_root(self, name: str) -> list[str]:
        """``[name, parent, ..., root]``."""
        path = [name]
        parent = self._spec(name).parent
        while parent is not None:
            path.append(parent)
            parent = self.nodes[parent].parent
        return path

    def leaves(self) -> list[str]:
        """Nodes without children, in node order (a lone root is a leaf)."""
        return [n for n in self.nodes if not self._children[n]]

    def order(self) -> list[str]:
        """Every node in breadth-first order from the root: parents start before children."""
        out: list[str] = []
        queue = deque([self.root])
        while queue:
            name = queue.popleft()
            out.append(name)
            queue.extend(self._children[name])
        return out

    def tree(self) -> nx.DiGraph:
        """The tree as a DiGraph with parent -> child edges.

        Nodes carry ``host`` and ``port``; in a graph-style topology edges carry ``cost``.
        """
        g = nx.DiGraph()
        for name, spec in self.nodes.items():
            g.add_node(name, host=spec.host, port=spec.port)
        for name in self.order()[1:]:
            parent = self.nodes[name].parent
            cost = self.edge_cost(name)
            if cost is None:
                g.add_edge(parent, name)
            else:
                g.add_edge(parent, name, cost=cost)
        return g

    def graph(self) -> nx.Graph:
        """The undirected link graph (graph style), or the undirected tree (parent style)."""
        if self.links is None:
            return self.tree().to_undirected()
        g = nx.Graph()
        g.add_nodes_from(self.nodes)
        for link in self.links:
            g.add_edge(link.a, link.b, cost=link.cost)
        return g

    # --- addresses and costs -----------------------------------------------------------------

    def address(self, name: str) -> tuple[str, int]:
        """Where to connect to ``name``: its ``advertise`` address if given, else its listen
        address with a wildcard host (``0.0.0.0``, ``::``) replaced by loopback."""
        spec = self._spec(name)
        if spec.advertise is not None:
            return spec.advertise
        return (_WILDCARD_HOSTS.get(spec.host, spec.host), spec.port)

    def listen_address(self, name: str) -> tuple[str, int]:
        """Where ``name`` listens (``port`` may be 0 in programmatic/test topologies)."""
        spec = self._spec(name)
        return (spec.host, spec.port)

    def edge_cost(self, name: str) -> float | None:
        """The cost of the link between ``name`` and its parent (graph style only)."""
        self._spec(name)
        return self._cost.get(name)

    def total_cost(self) -> float | None:
        """The summed cost of the tree's links (graph style only)."""
        if self.links is None:
            return None
        return sum(self._cost.values())


# --------------------------------------------------------------------------------------------
# validation


def _quote(names: list[str]) -> str:
    quoted = [repr(n) for n in names]
    if len(quoted) <= 2:
        return " and ".join(quoted)
    return ", ".join(quoted[:-1]) + " and " + quoted[-1]


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def _link_costs(links: tuple[Link, ...]) -> dict[tuple[str, str], float]:
    return {_pair(link.a, link.b): link.cost for link in links}


def _validate(topo: Topology) -> None:
    if topo.protocol not in PROTOCOLS:
        raise TopologyError(f"unknown protocol {topo.protocol!r} (valid: {', '.join(PROTOCOLS)})")
    if not topo.nodes:
        raise TopologyError("no nodes: a topology needs at least one node")
    seen: dict[tuple[str, int], str] = {}
    for key, spec in topo.nodes.items():
        if key != spec.name:
            raise TopologyError(f"node {key!r} is stored under a NodeSpec named {spec.name!r}")
        if spec.tls is not None:
            raise TopologyError(f"node {key!r}: {_NO_TLS}")
        if not isinstance(key, str) or not _NAME_RE.match(key):
            raise TopologyError(
                f"node name {key!r} is not allowed (use letters, digits, '_' and '-')"
            )
        _check_host(spec.host, f"node {key!r}")
        if isinstance(spec.port, bool) or not isinstance(spec.port, int):
            raise TopologyError(f"node {key!r}: port {spec.port!r} is not an integer")
        if not 0 <= spec.port <= 65535:
            raise TopologyError(f"node {key!r}: port {spec.port} is outside 0..65535")
        if spec.port != 0:
            addr = (spec.host.lower(), spec.port)
            if addr in seen:
                raise TopologyError(
                    f"nodes {seen[addr]!r} and {key!r} both listen on {spec.listen}"
                )
            seen[addr] = key
    if (not isinstance(topo.root, str) or topo.root not in topo.nodes) and (
        topo.links is not None or topo.root
    ):
        raise TopologyError(f"root {topo.root!r} is not a node")
    cost: dict[str, float] = {}
    if topo.links is None:
        root = _check_parents({n: s.parent for n, s in topo.nodes.items()})
        if root != topo.root:
            raise TopologyError(f"root is {topo.root!r} but {root!r} is the node without a parent")
    else:
        parents = _spanning_tree(list(topo.nodes), topo.links, topo.root)
        nodes = {}
        for name, spec in topo.nodes.items():
            want = parents[name]
            if spec.parent is not None and spec.parent != want:
                raise TopologyError(
                    f"node {name!r} has parent {spec.parent!r} but the minimum spanning tree "
                    f"of the links gives {want!r}"
                )
            nodes[name] = spec if spec.parent == want else _replace_parent(spec, want)
        object.__setattr__(topo, "nodes", nodes)
        object.__setattr__(topo, "links", tuple(topo.links))
        costs = _link_costs(topo.links)
        cost = {n: costs[_pair(n, p)] for n, p in parents.items() if p is not None}
    object.__setattr__(topo, "nodes", dict(topo.nodes))
    object.__setattr__(topo, "_cost", cost)
    if topo.spaces is not None:
        topo.spaces.check(topo)
    children: dict[str, list[str]] = {n: [] for n in topo.nodes}
    for name, spec in topo.nodes.items():
        if spec.parent is not None:
            children[spec.parent].append(name)
    depth = {topo.root: 0}
    queue = deque([topo.root])
    while queue:
        name = queue.popleft()
        for child in children[name]:
            depth[child] = depth[name] + 1
            queue.append(child)
    object.__setattr__(topo, "_children", {n: tuple(c) for n, c in children.items()})
    object.__setattr__(topo, "_depth", depth)


def _replace_parent(spec: NodeSpec, parent: str | None) -> NodeSpec:
    return NodeSpec(
        spec.name, spec.host, spec.port, parent, spec.advertise, spec.description, spec.tls
    )


def _check_host(host: object, where: str) -> None:
    if not isinstance(host, str) or not _HOST_RE.match(host):
        raise TopologyError(f"{where}: bad host {host!r}")


def _check_parents(parents: Mapping[str, str | None]) -> str:
    """Check that the parent map is one tree; return its root."""
    for name, parent in parents.items():
        if parent is None:
            continue
        if parent == name:
            raise TopologyError(f"node {name!r} names itself as parent")
        if parent not in parents:
            raise TopologyError(f"node {name!r} names parent {parent!r}, which is not a node")
    roots = [n for n, p in parents.items() if p is None]
    if len(roots) > 1:
        verb = "both" if len(roots) == 2 else "all"
        raise TopologyError(
            f"nodes {_quote(roots)} {verb} have no parent (exactly one node, the root, may "
            "lack one)"
        )
    cycle = _find_cycle(parents)
    if not roots:
        where = f", and parent links form a cycle: {' -> '.join(cycle)}" if cycle else ""
        raise TopologyError(f"no root: every node has a parent{where}")
    if cycle:
        root = roots[0]
        reached = _reachable(parents, root)
        lost = [n for n in parents if n not in reached]
        raise TopologyError(
            f"parent links form a cycle: {' -> '.join(cycle)}; "
            f"{'node' if len(lost) == 1 else 'nodes'} {_quote(lost)} "
            f"{'is' if len(lost) == 1 else 'are'} not connected to root {root!r}"
        )
    return roots[0]


def _find_cycle(parents: Mapping[str, str | None]) -> list[str]:
    """The first cycle of parent links (starting at its earliest node in map order), or []."""
    order = {n: i for i, n in enumerate(parents)}
    done: set[str] = set()
    for start in parents:
        path: list[str] = []
        on_path: dict[str, int] = {}
        node: str | None = start
        while node is not None and node not in done:
            if node in on_path:
                ring = path[on_path[node] :]
                first = min(range(len(ring)), key=lambda i: order[ring[i]])
                ring = ring[first:] + ring[:first]
                return [*ring, ring[0]]
            on_path[node] = len(path)
            path.append(node)
            node = parents[node]
        done.update(path)
    return []


def _reachable(parents: Mapping[str, str | None], root: str) -> set[str]:
    children: dict[str, list[str]] = {}
    for name, parent in parents.items():
        if parent is not None:
            children.setdefault(parent, []).append(name)
    reached = {root}
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in reached:
                reached.add(child)
                stack.append(child)
    return reached


def _spanning_tree(names: list[str], links: tuple[Link, ...], root: str) -> dict[str, str | None]:
    """Check the links; return the parent map of their minimum spanning tree from ``root``.

    Kruskal over the links sorted by ``(cost, sorted endpoint names)``: among equal costs the
    link whose (smaller, larger) endpoint names sort first wins, whatever the input order.
    """
    known = set(names)
    seen: set[tuple[str, str]] = set()
    for link in links:
        for end in (link.a, link.b):
            if end not in known:
                raise TopologyError(
                    f"link {link.a!r} -- {link.b!r} names {end!r}, which is not a node"
                )
        if link.a == link.b:
            raise TopologyError(f"link {link.a!r} -- {link.b!r} is a self-loop")
        cost = link.cost
        if isinstance(cost, bool) or not isinstance(cost, int | float) or not math.isfinite(cost):
            raise TopologyError(f"link {link.a!r} -- {link.b!r}: cost {cost!r} is not a number")
        if cost < 0:
            raise TopologyError(f"link {link.a!r} -- {link.b!r} has negative cost {cost!r}")
        pair = _pair(link.a, link.b)
        if pair in seen:
            raise TopologyError(f"link {pair[0]!r} -- {pair[1]!r} is given twice")
        seen.add(pair)
    sets = UnionFind(names)
    adjacent: dict[str, list[str]] = {n: [] for n in names}
    for link in sorted(links, key=Link.key):
        if sets[link.a] != sets[link.b]:
            sets.union(link.a, link.b)
            adjacent[link.a].append(link.b)
            adjacent[link.b].append(link.a)
    parents: dict[str, str | None] = {root: None}
    stack = [root]
    while stack:
        node = stack.pop()
        for other in adjacent[node]:
            if other not in parents:
                parents[other] = node
                stack.append(other)
    lost = [n for n in names if n not in parents]
    if lost:
        if len(lost) == 1:
            raise TopologyError(f"node {lost[0]!r} is not connected to root {root!r}")
        raise TopologyError(f"nodes {_quote(lost)} are not connected to root {root!r}")
    return {n: parents[n] for n in names}


# --------------------------------------------------------------------------------------------
# addresses


def format_address(host: str, port: int) -> str:
    """``host:port``, with an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_address(text: str, *, allow_ephemeral: bool = False) -> tuple[str, int]:
    """Parse ``host:port`` or ``[v6host]:port``; raise :class:`TopologyError` if malformed.

    Port 0 ("let the OS choose") is refused unless ``allow_ephemeral``.
    """
    hint = "expected host:port, e.g. 127.0.0.1:7400"
    if not isinstance(text, str):
        raise TopologyError(f"bad address {text!r} ({hint})")
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise TopologyError(f"bad address {text!r} ({hint})")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise TopologyError(f"bad address {text!r} (put an IPv6 host in brackets: [::1]:7400)")
    if not host or not _HOST_RE.match(host):
        raise TopologyError(f"bad address {text!r}: bad host {host!r}")
    if not port_text.isdigit() or not port_text.isascii():
        raise TopologyError(f"bad address {text!r}: port {port_text!r} is not a number")
    port = int(port_text)
    _check_port(port, f"bad address {text!r}", allow_ephemeral)
    return host, port


def _check_port(port: int, where: str, allow_ephemeral: bool) -> None:
    if port == 0 and not allow_ephemeral:
        raise TopologyError(
            f"{where}: port 0 (chosen by the OS) would leave other nodes unable to find it; "
            "it is allowed only for tests and in-process runs (allow_ephemeral=True)"
        )
    if not 0 <= port <= 65535:
        raise TopologyError(f"{where}: port {port} is outside 1..65535")


# --------------------------------------------------------------------------------------------
# reading TOML


def load(path: str | PathLike[str], *, allow_ephemeral: bool = False) -> Topology:
    """Read a topology file.  ``OSError`` if unreadable, :class:`TopologyError` if invalid."""
    p = Path(path)
    topology = loads(
        p.read_text(encoding="utf-8"), source=str(path), allow_ephemeral=allow_ephemeral
    )
    # Relative paths (secret file, certificates) are found next to the topology file.
    if topology.secret_file is not None:
        topology = replace(topology, secret_file=str(p.parent / topology.secret_file))
    if topology.tls is not None:
        tls = topology.tls
        ca, cert, key = (str(p.parent / f) for f in (tls.ca, tls.cert, tls.key))
        topology = replace(topology, tls=TlsSettings(ca, cert, key, tls.mutual))
    return topology


def loads(text: str, source: str = "<string>", *, allow_ephemeral: bool = False) -> Topology:
    """Parse a topology from TOML text; errors are prefixed with ``source``."""
    try:
        return _parse(text, allow_ephemeral)
    except TopologyError as exc:
        raise exc.with_source(source) from None


def _unknown_key(key: str, allowed: tuple[str, ...], where: str) -> TopologyError:
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return TopologyError(f"unknown key {key!r} in {where} (allowed: {', '.join(allowed)}){hint}")


def _expect_str(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise TopologyError(f"{where} must be a string, not {value!r}")
    return value


def _expect_table(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TopologyError(f"{where} must be a table, not {value!r}")
    return value


def _parse(text: str, allow_ephemeral: bool) -> Topology:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TopologyError(f"invalid TOML: {exc}") from None
    for key in doc:
        if key not in _TOP_KEYS:
            raise _unknown_key(key, _TOP_KEYS, "the top level")
    protocol = _expect_str(doc.get("protocol", DEFAULT_PROTOCOL), "'protocol'")
    if protocol not in PROTOCOLS:
        raise TopologyError(f"unknown protocol {protocol!r} (valid: {', '.join(PROTOCOLS)})")
    description = doc.get("description")
    if description is not None:
        _expect_str(description, "'description'")
    defaults = _expect_table(doc.get("defaults", {}), "[defaults]")
    for key in defaults:
        if key not in _DEFAULT_KEYS:
            raise _unknown_key(key, _DEFAULT_KEYS, "[defaults]")
    if "host" in defaults:
        _check_host(defaults["host"], "[defaults]")
    if "tls" in defaults:
        raise TopologyError(f"[defaults]: {_NO_TLS}")
    if "nodes" not in doc:
        raise TopologyError("no nodes: add a [nodes.NAME] table for each node")
    raw_nodes = _expect_table(doc["nodes"], "'nodes'")
    if not raw_nodes:
        raise TopologyError("no nodes: add a [nodes.NAME] table for each node")
    graph_style = "links" in doc
    nodes: dict[str, NodeSpec] = {}
    for name, raw in raw_nodes.items():
        if not _NAME_RE.match(name):
            raise TopologyError(
                f"node name {name!r} is not allowed (use letters, digits, '_' and '-')"
            )
        nodes[name] = _parse_node(name, raw, defaults, allow_ephemeral)
        if graph_style and nodes[name].parent is not None:
            raise TopologyError(
                f"node {name!r} has a parent but the file also has [[links]]: use either "
                "parent keys, or root plus [[links]], not both"
            )
    root_value = doc.get("root")
    if root_value is not None:
        _expect_str(root_value, "'root'")
    links: tuple[Link, ...] | None = None
    if graph_style:
        if root_value is None:
            raise TopologyError('a file with [[links]] needs root = "NAME"')
        links = tuple(_parse_link(i, raw) for i, raw in enumerate(_links_list(doc["links"])))
        root = root_value
    else:
        roots = [n for n, s in nodes.items() if s.parent is None]
        root = roots[0] if len(roots) == 1 else ""
        if root_value is not None and len(roots) == 1 and root_value != root:
            if root_value not in nodes:
                raise TopologyError(f"root {root_value!r} is not a node")
            raise TopologyError(f"root is {root_value!r} but {root!r} is the node without a parent")
    try:
        limits = NetLimits.from_mapping(_expect_table(doc.get("limits", {}), "[limits]"))
    except ValueError as exc:
        raise TopologyError(f"[limits]: {exc}") from None
    security = _expect_table(doc.get("security", {}), "[security]")
    for key in security:
        if key not in _SECURITY_KEYS:
            raise _unknown_key(key, _SECURITY_KEYS, "[security]")
    secret_file = security.get("secret-file")
    if secret_file is not None:
        _expect_str(secret_file, "[security] secret-file")
    allow = security.get("allow-unauthenticated", False)
    if not isinstance(allow, bool):
        raise TopologyError("[security] allow-unauthenticated must be true or false")
    tls = None
    if "tls" in doc:
        raw_tls = _expect_table(doc["tls"], "[tls]")
        for key in raw_tls:
            if key not in _TLS_KEYS:
                raise _unknown_key(key, _TLS_KEYS, "[tls]")
        missing = [k for k in ("ca", "cert", "key") if k not in raw_tls]
        if missing:
            raise TopologyError(f"[tls] needs {', '.join(missing)}")
        mutual = raw_tls.get("mutual", False)
        if not isinstance(mutual, bool):
            raise TopologyError("[tls] mutual must be true or false")
        paths = [_expect_str(raw_tls[k], f"[tls] {k}") for k in ("ca", "cert", "key")]
        tls = TlsSettings(*paths, mutual=mutual)
    spaces = None
    gates = {n: raw["gates"] for n, raw in raw_nodes.items() if "gates" in raw}
    if "spaces" in doc or gates:
        from feds.spaces import topology_spaces  # imports this module: a cycle at the top

        spaces = topology_spaces.parse(doc.get("spaces"), gates, allow_ephemeral)
    return Topology(
        protocol, nodes, root, links, description, limits, secret_file, allow, tls, spaces
    )


def _links_list(value: object) -> list[Any]:
    if not isinstance(value, list):
        raise TopologyError("'links' must be an array of tables: write [[links]] a = ... b = ...")
    return value


def _parse_node(
    name: str, raw: object, defaults: dict[str, Any], allow_ephemeral: bool
) -> NodeSpec:
    where = f"node {name!r}"
    if not isinstance(raw, dict):
        raise TopologyError(f"{where} must be a table ([nodes.{name}]), not {raw!r}")
    for key in raw:
        if key not in _NODE_KEYS:
            raise _unknown_key(key, _NODE_KEYS, f"[nodes.{name}]")
    if "listen" in raw:
        for key in ("host", "port"):
            if key in raw:
                raise TopologyError(f"{where}: give either listen or host/port, not both")
        try:
            host, port = parse_address(
                _expect_str(raw["listen"], f"{where}: listen"), allow_ephemeral=allow_ephemeral
            )
        except TopologyError as exc:
            raise TopologyError(f"{where}: {exc.detail}") from None
    elif "port" in raw:
        port = raw["port"]
        if isinstance(port, bool) or not isinstance(port, int):
            raise TopologyError(f"{where}: port {port!r} is not an integer")
        _check_port(port, where, allow_ephemeral)
        host = raw.get("host", defaults.get("host", DEFAULT_HOST))
        _check_host(host, where)
    else:
        raise TopologyError(
            f'{where} has no listen address: add listen = "HOST:PORT" (or port = N)'
        )
    parent = raw.get("parent")
    if parent is not None:
        _expect_str(parent, f"{where}: parent")
    advertise = None
    if "advertise" in raw:
        try:
            advertise = parse_address(_expect_str(raw["advertise"], f"{where}: advertise"))
        except TopologyError as exc:
            raise TopologyError(f"{where}: advertise: {exc.detail}") from None
    description = raw.get("description")
    if description is not None:
        _expect_str(description, f"{where}: description")
    if "tls" in raw:
        raise TopologyError(f"{where}: {_NO_TLS}")
    return NodeSpec(name, host, port, parent, advertise, description)


def _parse_link(index: int, raw: object) -> Link:
    where = f"link #{index + 1}"
    if not isinstance(raw, dict):
        raise TopologyError(f"{where} must be a table, not {raw!r}")
    if isinstance(raw.get("a"), str) and isinstance(raw.get("b"), str):
        where += f" ({raw['a']!r} -- {raw['b']!r})"
    for key in raw:
        if key not in _LINK_KEYS:
            raise _unknown_key(key, _LINK_KEYS, where)
    for key in ("a", "b"):
        if key not in raw:
            raise TopologyError(f'{where} has no {key!r} (a link needs a = "X", b = "Y")')
        _expect_str(raw[key], f"{where}: {key}")
    cost = raw.get("cost", 1.0)
    if isinstance(cost, bool) or not isinstance(cost, int | float):
        raise TopologyError(f"link {raw['a']!r} -- {raw['b']!r}: cost {cost!r} is not a number")
    return Link(raw["a"], raw["b"], float(cost))


# --------------------------------------------------------------------------------------------
# writing TOML


def _toml_str(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _toml_key(key: str) -> str:
    return key if _NAME_RE.match(key) else _toml_str(key)


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _toml_str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        items = ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items())
        return "{" + items + "}" if items else "{}"
    raise TypeError(f"cannot write {value!r} as TOML")


def dumps(topology: Topology) -> str:
    """Write ``topology`` as TOML that :func:`loads` reads back to an equal Topology.

    Defaults are expanded (every node gets its full listen address).  A graph-style topology
    is written with ``root`` and its ``[[links]]``; a parent-style one with ``parent`` keys.
    """
    lines = [f"protocol = {_toml_str(topology.protocol)}"]
    if topology.description is not None:
        lines.append(f"description = {_toml_str(topology.description)}")
    if topology.links is not None:
        lines.append(f"root = {_toml_str(topology.root)}")
    changed = {
        f.name.replace("_", "-"): getattr(topology.limits, f.name)
        for f in fields(NetLimits)
        if getattr(topology.limits, f.name) != getattr(DEFAULT_NET_LIMITS, f.name)
    }
    if changed:
        lines += ["", "[limits]", *(f"{k} = {_toml_value(v)}" for k, v in changed.items())]
    if topology.secret_file is not None or topology.allow_unauthenticated:
        lines += ["", "[security]"]
        if topology.secret_file is not None:
            lines.append(f"secret-file = {_toml_str(topology.secret_file)}")
        if topology.allow_unauthenticated:
            lines.append("allow-unauthenticated = true")
    if topology.tls is not None:
        tls = topology.tls
        lines += ["", "[tls]", *(f"{k} = {_toml_str(getattr(tls, k))}" for k in _TLS_KEYS[:3])]
        lines.append(f"mutual = {_toml_value(tls.mutual)}")
    spaces = topology.spaces
    if spaces is not None:
        lines += [
            "",
            "[spaces]",
            *(f"{_toml_key(n)} = {_toml_str(k)}" for n, k in spaces.spaces.items()),
        ]
    for name, spec in topology.nodes.items():
        lines += ["", f"[nodes.{name}]", f"listen = {_toml_str(spec.listen)}"]
        if spec.parent is not None and topology.links is None:
            lines.append(f"parent = {_toml_str(spec.parent)}")
        if spec.advertise is not None:
            lines.append(f"advertise = {_toml_str(format_address(*spec.advertise))}")
        if spec.description is not None:
            lines.append(f"description = {_toml_str(spec.description)}")
        if spaces is not None and spaces.of(name):
            lines.append(f"gates = {_toml_value(spaces.of(name))}")
    for link in topology.links or ():
        lines += ["", "[[links]]", f"a = {_toml_str(link.a)}", f"b = {_toml_str(link.b)}"]
        lines.append(f"cost = {_toml_value(float(link.cost))}")
    return "\n".join(lines) + "\n"


def dump(topology: Topology, path: str | PathLike[str]) -> None:
    """Write ``dumps(topology)`` to ``path``."""
    Path(path).write_text(dumps(topology), encoding="utf-8")


# --------------------------------------------------------------------------------------------
# programmatic construction


def _ports(count: int, base_port: int) -> list[int]:
    if base_port == 0:
        return [0] * count
    if base_port < 0 or base_port + count - 1 > 65535:
        raise TopologyError(
            f"{count} consecutive ports from {base_port} run outside 1..65535 "
            "(use base_port=0 for OS-chosen ports)"
        )
    return [base_port + i for i in range(count)]


def from_parents(
    parents: Mapping[str, str | None],
    *,
    protocol: str = DEFAULT_PROTOCOL,
    host: str = DEFAULT_HOST,
    base_port: int = 7400,
) -> Topology:
    """Build a topology from ``{name: parent or None}``.

    Nodes listen on ``host`` with consecutive ports from ``base_port`` in mapping order
    (``base_port=0``: every port 0, chosen by the OS at start-up).
    """
    names = list(parents)
    ports = _ports(len(names), base_port)
    nodes = {n: NodeSpec(n, host, p, parents[n]) for n, p in zip(names, ports, strict=True)}
    roots = [n for n, p in parents.items() if p is None]
    return Topology(protocol, nodes, roots[0] if len(roots) == 1 else "")


def from_graph(
    graph: nx.Graph,
    root: Hashable,
    *,
    protocol: str = DEFAULT_PROTOCOL,
    host: str = DEFAULT_HOST,
    base_port: int = 7400,
    weight: str = "cost",
    name: Any = str,
) -> Topology:
    """Build a graph-style topology: the minimum spanning tree of ``graph`` rooted at ``root``.

    Node names are ``name(node)`` (``str`` by default); an edge's cost is its ``weight``
    attribute (default 1).  Ports are consecutive from ``base_port`` in the graph's node order.
    The tree depends only on names and costs, never on the graph's insertion order.
    """
    if graph.is_directed() or graph.is_multigraph():
        raise TopologyError("from_graph needs an undirected simple graph (nx.Graph)")
    names = {node: name(node) for node in graph.nodes}
    if len(set(names.values())) != len(names):
        raise TopologyError("two graph nodes map to the same name")
    if root not in names:
        raise TopologyError(f"root {root!r} is not a node of the graph")
    ports = _ports(len(names), base_port)
    nodes = {n: NodeSpec(n, host, p) for n, p in zip(names.values(), ports, strict=True)}
    links = tuple(
        Link(names[u], names[v], data.get(weight, 1.0)) for u, v, data in graph.edges(data=True)
    )
    return Topology(protocol, nodes, names[root], links)


def _parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    kind, _, rest = spec.strip().partition(":")
    kind = kind.strip()
    if kind not in GENERATORS:
        raise TopologyError(f"unknown generator {kind!r} (valid: {', '.join(GENERATORS)})")
    params: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = part.partition("=")
        if not eq:
            raise TopologyError(f"{spec!r}: expected key=value, got {part!r}")
        params[key.strip()] = value.strip()
    return kind, params


_SPEC_PARAMS = {
    "chain": {"n": None},
    "star": {"n": None},
    "balanced": {"k": None, "depth": None},
    "random-tree": {"n": None},
    "random-graph": {"n": None, "p": None, "maxcost": "1"},
}


def generate(
    spec: str,
    seed: int = 0,
    *,
    protocol: str = DEFAULT_PROTOCOL,
    host: str = DEFAULT_HOST,
    base_port: int = 7400,
) -> Topology:
    """Generate a topology from a spec; nodes are ``n0``, ``n1``, ... with ``n0`` the root.

    Specs: ``chain:n=10``, ``star:n=20`` (n nodes in all), ``balanced:k=3,depth=4``,
    ``random-tree:n=50`` (uniform labelled tree from a seeded Prüfer sequence),
    ``random-graph:n=50,p=0.1[,maxcost=N]`` (G(n, p); link costs uniform integers in
    1..maxcost, default 1; components not containing n0 are joined to the one before them, in
    order of their smallest node, by a cost-1 link between their smallest nodes, so the graph is
    always connected; the tree is its minimum spanning tree).  Same spec and seed, same result.
    """
    kind, params = _parse_spec(spec)
    wanted = _SPEC_PARAMS[kind]
    for key in params:
        if key not in wanted:
            raise TopologyError(
                f"{spec!r}: unknown parameter {key!r} for {kind} (takes: {', '.join(wanted)})"
            )
    values: dict[str, str] = {}
    for key, default in wanted.items():
        if key in params:
            values[key] = params[key]
        elif default is not None:
            values[key] = default
        else:
            raise TopologyError(f"{spec!r}: {kind} needs {key}=... (e.g. {_example(kind)})")

    def count(key: str, least: int) -> int:
        try:
            value = int(values[key])
        except ValueError:
            raise TopologyError(f"{spec!r}: {key} must be an integer") from None
        if value < least:
            raise TopologyError(f"{spec!r}: {key} must be at least {least}")
        return value

    kw: dict[str, Any] = {"protocol": protocol, "host": host, "base_port": base_port}
    if kind == "chain":
        n = count("n", 1)
        return from_parents(_named(nx.path_graph(n)), **kw)
    if kind == "star":
        n = count("n", 1)
        return from_parents(_named(nx.star_graph(n - 1)), **kw)
    if kind == "balanced":
        k, depth = count("k", 1), count("depth", 0)
        return from_parents(_named(nx.balanced_tree(k, depth)), **kw)
    if kind == "random-tree":
        n = count("n", 1)
        rng = random.Random(seed)
        if n <= 2:
            tree = nx.path_graph(n)
        else:
            tree = nx.from_prufer_sequence([rng.randrange(n) for _ in range(n - 2)])
        return from_parents(_named(tree), **kw)
    n, maxcost = count("n", 1), count("maxcost", 1)
    try:
        p = float(values["p"])
    except ValueError:
        raise TopologyError(f"{spec!r}: p must be a number") from None
    if not 0.0 <= p <= 1.0:
        raise TopologyError(f"{spec!r}: p must be between 0 and 1")
    graph = nx.gnp_random_graph(n, p, seed=seed)
    rng = random.Random(seed)
    for u, v in sorted(graph.edges):
        graph.edges[u, v]["cost"] = float(rng.randint(1, maxcost))
    components = sorted(min(c) for c in nx.connected_components(graph))
    for before, smallest in itertools.pairwise(components):
        graph.add_edge(before, smallest, cost=1.0)
    return from_graph(graph, 0, name=lambda i: f"n{i}", **kw)


def _example(kind: str) -> str:
    return {
        "chain": "chain:n=10",
        "star": "star:n=20",
        "balanced": "balanced:k=3,depth=4",
        "random-tree": "random-tree:n=50",
        "random-graph": "random-graph:n=50,p=0.1",
    }[kind]


def _named(tree: nx.Graph) -> dict[str, str | None]:
    """Orient an integer-labelled tree from node 0; name nodes ``n<i>`` in numeric order."""
    parents: dict[int, int | None] = {0: None}
    for u, v in nx.bfs_edges(tree, 0, sort_neighbors=sorted):
        parents[v] = u
    return {f"n{i}": (None if parents[i] is None else f"n{parents[i]}") for i in sorted(parents)}
