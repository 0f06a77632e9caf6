"""Spaces and gates declared in a topology file (sans-IO: the schema and its checks).

A topology may name tuple spaces in a top-level ``[spaces]`` table and give each node that
serves them a ``gates`` list; ``feds node`` (and ``feds up``) then start those gates with the
node (:mod:`feds.spaces.node_gates`)::

    [spaces]
    jobs = "federated"      # one space over the whole overlay (docs/tuplespaces.md)
    scratch = "queue"       # a local space of that kind at each node with gates

    [nodes.a]
    listen = "127.0.0.1:7400"
    gates = ["tcp://127.0.0.1:31415/?keep", "tcp://127.0.0.1:31416/?conn"]

Every gate of a node serves every declared space. A federated space has a member at each
node with gates; a space of a local kind is a separate space at each of those nodes.
Everything is checked when the :class:`~feds.topology.Topology` is built, and an error names
the node and the key at fault (and, through :class:`~feds.topology.TopologyError`, the file).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from feds.runtime import is_loopback
from feds.spaces.store import Kind
from feds.spaces.uri import SpaceUri, UriError, parse_uri
from feds.topology import Topology, TopologyError

FEDERATED = "federated"
KINDS: tuple[str, ...] = (FEDERATED, *(k.value for k in Kind))
"""What a ``[spaces]`` entry may be: federated, or the kind of a local space."""

_SPACE_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class TopologySpaces:
    """The ``[spaces]`` table (name -> kind, in file order) and each node's gate URIs."""

    spaces: dict[str, str] = field(default_factory=dict)
    gates: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, kind in self.spaces.items():
            where = f"[spaces] {name}"
            if not isinstance(name, str) or not _SPACE_NAME_RE.match(name):
                raise TopologyError(
                    f"[spaces]: {name!r} cannot be a space name (use letters, digits, '_', '-' "
                    "and '.')"
                )
            if not isinstance(kind, str):
                raise TopologyError(f"{where} must be a kind (a string), not {kind!r}")
            if kind not in KINDS:
                close = difflib.get_close_matches(kind, KINDS, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise TopologyError(
                    f"{where}: unknown kind {kind!r} (valid: {', '.join(KINDS)}){hint}"
                )
        for node, uris in self.gates.items():
            for uri in uris:
                _parse_gate(uri, node)
        if any(self.gates.values()) and not self.spaces:
            node = next(n for n, uris in self.gates.items() if uris)
            raise TopologyError(
                f"node {node!r}: gates serve the spaces of the [spaces] table, but there is none"
            )
        if self.spaces and not any(self.gates.values()):
            raise TopologyError(
                "[spaces] declares spaces but no node serves them: give a node "
                'gates = ["tcp://HOST:PORT/?keep"]'
            )

    def of(self, node: str) -> tuple[str, ...]:
        """The gate URIs ``node`` serves (none for most nodes)."""
        return self.gates.get(node, ())

    def check(self, topology: Topology) -> None:
        """Check the gates against the rest of ``topology``: each gate's node exists; no two
        gates, nor a gate and a node, listen on the same host and port; a gate beyond loopback
        needs ``allow-unauthenticated`` (the pSpaces protocol has no authentication)."""
        nodes = topology.nodes
        taken = {(s.host.lower(), s.port): f"node {n!r}" for n, s in nodes.items() if s.port}
        for node, uris in self.gates.items():
            if node not in nodes:
                raise TopologyError(f"gates are given for {node!r}, which is not a node")
            for uri in uris:
                gate = _parse_gate(uri, node)
                if not topology.allow_unauthenticated and not is_loopback(gate.host):
                    raise TopologyError(
                        f"node {node!r}: gates: {uri} listens beyond loopback, and a pSpaces "
                        "gate has no authentication: anyone who reaches it could read, take and "
                        "put tuples. Set [security] allow-unauthenticated = true if the network "
                        "itself is trusted"
                    )
                if gate.port == 0:
                    continue
                where = (gate.host.lower(), gate.port)
                if where in taken:
                    raise TopologyError(
                        f"node {node!r}: gates: {uri} listens on {gate.host}:{gate.port}, "
                        f"as {taken[where]} does"
                    )
                taken[where] = f"the gate {uri} of node {node!r}"


def _parse_gate(uri: object, node: str) -> SpaceUri:
    where = f"node {node!r}: gates"
    if not isinstance(uri, str):
        raise TopologyError(f"{where}: {uri!r} is not a gate URI (a string)")
    try:
        gate = parse_uri(uri)
    except UriError as exc:
        raise TopologyError(f"{where}: {exc}") from None
    if gate.space:
        raise TopologyError(
            f"{where}: {uri} names a space; a gate URI names none (tcp://HOST:PORT/?keep)"
        )
    return gate


def parse(
    raw_spaces: object, raw_gates: Mapping[str, object], allow_ephemeral: bool
) -> TopologySpaces | None:
    """Read the ``[spaces]`` table and the nodes' ``gates`` keys (None if they declare nothing:
    no spaces, no gates).

    A gate on port 0 is refused unless ``allow_ephemeral`` (as a node's port is): clients could
    not find it from the file."""
    if raw_spaces is None:
        raw_spaces = {}
    if not isinstance(raw_spaces, dict):
        raise TopologyError(f'[spaces] must be a table of NAME = "KIND", not {raw_spaces!r}')
    gates: dict[str, tuple[str, ...]] = {}
    for node, raw in raw_gates.items():
        if not isinstance(raw, list):
            raise TopologyError(
                f"node {node!r}: gates must be an array of gate URIs, e.g. gates = "
                f'["tcp://127.0.0.1:31415/?keep"], not {raw!r}'
            )
        for uri in raw:
            if _parse_gate(uri, node).port == 0 and not allow_ephemeral:
                raise TopologyError(
                    f"node {node!r}: gates: {uri} has port 0 (chosen by the OS), which clients "
                    "could not find from the file; give a real port"
                )
        if raw:
            gates[node] = tuple(raw)
    if not raw_spaces and not gates:
        return None
    spaces: dict[str, Any] = dict(raw_spaces)
    return TopologySpaces(spaces, gates)
