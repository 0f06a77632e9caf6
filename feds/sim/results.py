"""The figures of a simulated run, and their CSV and JSON forms.

Traffic is counted per link and per direction from the sending relay's counters, after the
links' handshakes (so a run's traffic is the workload's alone): ``packets`` (frames), ``events``
(assert, retract, message and sync events inside them) and ``bytes`` (the encoded frames, length
prefixes included). State is counted per node in the fragment dataspace: assertions held
(``len(node.dataspace)``) and handlers in its index, at the end of the run and at their peak.

The lower bound (:mod:`feds.sim.bound`) adds up, over every published event (each assert,
retract and message), the edges of the Steiner subtree joining its source node to the nodes
with a matching subscriber at that moment. ``events_per_bound`` and ``bytes_per_bound`` divide
the run's total link events and bytes by that sum: 1.0 events per bound edge would be a protocol
that sends each event exactly where it is needed and nothing else.
"""

from __future__ import annotations

import csv
import json
import math
from array import array
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["BoundFigures", "LinkFigures", "NodeFigures", "SimResult", "percentile", "write_outputs"]

DIRECTIONS = ("up", "down")
TRAFFIC = ("packets", "events", "bytes")


@dataclass
class BoundFigures:
    """The lower bound, summed over the published events."""

    events: int = 0
    """Published events (asserts, retracts, messages)."""
    matched_events: int = 0
    """Of those, the ones with at least one matching subscriber somewhere."""
    bound_edges: int = 0
    """Sum over events of the Steiner subtree's edge count."""
    assertion_edges: int = 0
    message_edges: int = 0


@dataclass
class LinkFigures:
    """Traffic on one tree edge: ``up`` is child → parent, ``down`` parent → child."""

    child: str
    parent: str
    depth: int
    """The child's depth (the link's level in the tree: 1 for links to the root)."""
    subscriptions_below: int
    """Subscriptions made by clients in the child's subtree."""
    up: dict[str, int]
    down: dict[str, int]

    def total(self, what: str) -> int:
        return self.up[what] + self.down[what]


@dataclass
class NodeFigures:
    """State of one node's fragment: at the end of the run and at its peak."""

    name: str
    depth: int
    children: int
    clients: int
    assertions: int
    peak_assertions: int
    handlers: int
    peak_handlers: int


def percentile(values: list[float], q: float) -> float:
    """The ``q``-quantile (0..1) of sorted ``values`` (nearest rank); NaN if empty."""
    if not values:
        return math.nan
    return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))]


def latency_summary(values: array) -> dict[str, float]:
    ordered = sorted(values)
    n = len(ordered)
    return {
        "count": n,
        "mean": sum(ordered) / n if n else math.nan,
        "p50": percentile(ordered, 0.5),
        "p95": percentile(ordered, 0.95),
        "p99": percentile(ordered, 0.99),
        "max": ordered[-1] if n else math.nan,
    }


@dataclass
class SimResult:
    """Everything one run measured. ``violations`` is empty when the run was transparent."""

    protocol: str
    seed: int
    nodes: int
    height: int
    workload: dict[str, Any]
    link: dict[str, float]
    actions: int
    action_counts: dict[str, int]
    virtual_seconds: float
    wall_seconds: float
    turns: int
    links: list[LinkFigures]
    node_figures: list[NodeFigures]
    bound: BoundFigures
    assert_latency: array = field(repr=False)
    message_latency: array = field(repr=False)
    violations: list[str]
    redeliveries: int = 0
    """Assertions that reached an observer, went and came back (transient, under churn)."""
    topology: str = ""

    @property
    def ok(self) -> bool:
        return not self.violations

    def traffic(self, what: str, direction: str | None = None) -> int:
        """Total ``packets``, ``events`` or ``bytes`` over every link (one direction or both)."""
        dirs = DIRECTIONS if direction is None else (direction,)
        return sum(getattr(link, d)[what] for link in self.links for d in dirs)

    def summary(self) -> dict[str, Any]:
        """The headline figures of the run (one row of the comparison table)."""
        bound = self.bound.bound_edges
        events, size = self.traffic("events"), self.traffic("bytes")
        latency = latency_summary(self.assert_latency + self.message_latency)
        root = self.node_figures[0] if self.node_figures else None
        peaks = [n.peak_assertions for n in self.node_figures] or [0]
        return {
            "protocol": self.protocol,
            "topology": self.topology,
            "nodes": self.nodes,
            "seed": self.seed,
            "packets": self.traffic("packets"),
            "events": events,
            "events_up": self.traffic("events", "up"),
            "events_down": self.traffic("events", "down"),
            "bytes": size,
            "published": self.bound.events,
            "bound_edges": bound,
            "events_per_bound": events / bound if bound else math.nan,
            "bytes_per_bound": size / bound if bound else math.nan,
            "max_peak_assertions": max(peaks),
            "root_peak_assertions": root.peak_assertions if root else 0,
            "mean_peak_assertions": sum(peaks) / len(peaks),
            "max_peak_handlers": max((n.peak_handlers for n in self.node_figures), default=0),
            "deliveries": latency["count"],
            "redeliveries": self.redeliveries,
            "latency_mean": latency["mean"],
            "latency_p50": latency["p50"],
            "latency_p95": latency["p95"],
            "latency_max": latency["max"],
            "virtual_seconds": self.virtual_seconds,
            "wall_seconds": self.wall_seconds,
            "turns": self.turns,
            "violations": len(self.violations),
        }

    def to_json(self) -> dict[str, Any]:
        """Every figure but the raw latencies (summarised; they go to CSV)."""
        return {
            "summary": self.summary(),
            "workload": self.workload,
            "link": self.link,
            "actions": self.action_counts,
            "bound": asdict(self.bound),
            "latency": {
                "assertions": latency_summary(self.assert_latency),
                "messages": latency_summary(self.message_latency),
            },
            "links": [asdict(link) for link in self.links],
            "nodes": [asdict(node) for node in self.node_figures],
            "violations": self.violations,
        }


def _write_csv(path: Path, header: list[str], rows: list[list[Any]]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def write_outputs(results: list[SimResult], out: Path) -> list[Path]:
    """Write ``summary.csv``, ``links.csv``, ``nodes.csv``, ``latency.csv`` and
    ``results.json`` for ``results`` (one run per protocol) into ``out``; return the paths."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    summaries = [r.summary() for r in results]
    path = out / "summary.csv"
    _write_csv(path, list(summaries[0]), [list(s.values()) for s in summaries])
    written.append(path)

    path = out / "links.csv"
    header = ["protocol", "child", "parent", "depth", "subscriptions_below"]
    header += [f"{d}_{w}" for d in DIRECTIONS for w in TRAFFIC]
    rows = [
        [r.protocol, link.child, link.parent, link.depth, link.subscriptions_below]
        + [getattr(link, d)[w] for d in DIRECTIONS for w in TRAFFIC]
        for r in results
        for link in r.links
    ]
    _write_csv(path, header, rows)
    written.append(path)

    path = out / "nodes.csv"
    names = [f for f in NodeFigures.__dataclass_fields__]
    rows = [[r.protocol, *(getattr(n, f) for f in names)] for r in results for n in r.node_figures]
    _write_csv(path, ["protocol", *names], rows)
    written.append(path)

    path = out / "latency.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["protocol", "kind", "latency"])
        for r in results:
            writer.writerows([r.protocol, "assertion", x] for x in r.assert_latency)
            writer.writerows([r.protocol, "message", x] for x in r.message_latency)
    written.append(path)

    path = out / "results.json"
    path.write_text(json.dumps(json_safe([r.to_json() for r in results]), indent=1))
    written.append(path)
    return written


def json_safe(x: Any) -> Any:
    """``x`` with NaN and infinities replaced by None (JSON has no such numbers)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [json_safe(v) for v in x]
    return x
