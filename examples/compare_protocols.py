"""Reproduce the protocol comparison of docs/protocols.md: figures and tables.

Every number comes from :func:`feds.sim.simulate`, which runs the real nodes, relays and
protocols over virtual links (1 ms latency; unlimited bandwidth unless said) and checks
transparency. Five experiments, each on a fixed topology and seed:

1. **fan-out** — one topic, 1..32 subscribers on a balanced ternary tree of 40 nodes: link
   events per published event as subscribers are added.
2. **state** — the sensors workload on a balanced ternary tree of 121 nodes: peak assertions
   per fragment by depth (how much each protocol concentrates state).
3. **selectivity** — the share of published events anybody wants, 0..1: link events.
4. **patterns** — 64 subscriptions over 1..64 distinct topics (patterns), few events: what
   flooding subscription *patterns* costs.
5. **latency** — 16 subscribers of one topic behind 20 kB/s links: delivery latency when the
   bytes each protocol puts on the wire queue up.

Run::

    .venv/bin/python examples/compare_protocols.py            # PNGs into docs/img/, tables out
    .venv/bin/python examples/compare_protocols.py --out /tmp/cmp --quick

Plots need matplotlib (``pip install 'feds[plot]'``); without it only the tables are printed.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from feds.protocols import protocol_names
from feds.sim import LinkParams, SimResult, WorkloadSpec, simulate
from feds.sim.report import markdown_table
from feds.sim.results import latency_summary
from feds.topology import Topology, generate

PROTOCOLS = protocol_names()
SEED = 1


def run(
    topology: Topology, spec: WorkloadSpec, link: LinkParams | None = None
) -> dict[str, SimResult]:
    return {p: simulate(topology, p, spec, seed=SEED, link=link) for p in PROTOCOLS}


def per_event(r: SimResult) -> float:
    """Link events per published event."""
    return r.traffic("events") / max(1, r.bound.events)


# -- the experiments ---------------------------------------------------------------------------


def sweep(
    topology: Topology, points: list, spec_at: Callable[[Any], WorkloadSpec]
) -> dict[str, list[SimResult]]:
    """Every protocol's results for ``spec_at(x)``, for each x in ``points`` (in order)."""
    out: dict[str, list[SimResult]] = defaultdict(list)
    for x in points:
        for p, r in run(topology, spec_at(x)).items():
            out[p].append(r)
    return out


def fanout(quick: bool) -> tuple[list[int], dict[str, list[SimResult]]]:
    topology = generate("balanced:k=3,depth=3", base_port=0)
    counts = [1, 2, 4, 8] if quick else [1, 2, 4, 8, 16, 32]
    return counts, sweep(
        topology,
        counts,
        lambda n: WorkloadSpec(
            subscribers=n,
            subscriptions=n,
            publishers=8,
            topics=1,
            events=100 if quick else 300,
            rate=200.0,
            messages=0.5,
            lifetime=0.2,
        ),
    )


def state(quick: bool) -> dict[str, SimResult]:
    topology = generate("balanced:k=3,depth=3" if quick else "balanced:k=3,depth=4", base_port=0)
    spec = WorkloadSpec(
        subscribers=20,
        subscriptions=40,
        publishers=30,
        topics=50,
        topic_skew=0.8,
        events=400 if quick else 2000,
        rate=500.0,
        messages=0.2,
        lifetime=2.0,
        selectivity=0.7,
        churn=5.0,
        publisher_placement="leaves",
    )
    return run(topology, spec)


def selectivity(quick: bool) -> tuple[list[float], dict[str, list[SimResult]]]:
    topology = generate("random-tree:n=40", SEED, base_port=0)
    shares = [0.0, 0.5, 1.0] if quick else [0.0, 0.25, 0.5, 0.75, 1.0]
    return shares, sweep(
        topology,
        shares,
        lambda share: WorkloadSpec(
            subscribers=10,
            subscriptions=10,
            publishers=10,
            topics=20,
            events=200 if quick else 600,
            rate=300.0,
            selectivity=share,
        ),
    )


def patterns(quick: bool) -> tuple[list[int], dict[str, list[SimResult]]]:
    topology = generate("random-tree:n=40", SEED, base_port=0)
    counts = [1, 8, 64] if quick else [1, 4, 16, 64]
    return counts, sweep(
        topology,
        counts,
        lambda n: WorkloadSpec(
            subscribers=16, subscriptions=64, publishers=8, topics=n, events=50, rate=100.0
        ),
    )


def latency(quick: bool) -> dict[str, SimResult]:
    """16 subscribers of one topic behind 20 kB/s links: bytes on the wire become delay."""
    topology = generate("balanced:k=3,depth=3", base_port=0)
    spec = WorkloadSpec(
        subscribers=16,
        subscriptions=16,
        publishers=8,
        topics=1,
        events=100 if quick else 300,
        rate=100.0,
        lifetime=0.5,
    )
    return run(topology, spec, LinkParams(latency=0.001, bandwidth=20_000))


# -- output ------------------------------------------------------------------------------------


def sweep_table(
    name: str,
    xs: list[Any],
    runs: dict[str, list[SimResult]],
    metric: Callable[[SimResult], Any],
    fmt: str = ",.1f",
) -> str:
    lines = [f"| {name} | " + " | ".join(PROTOCOLS) + " |", "|---|" + "---|" * len(PROTOCOLS)]
    for i, x in enumerate(xs):
        cells = [format(metric(runs[p][i]), fmt) for p in PROTOCOLS]
        lines.append(f"| {x} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def depth_table(results: dict[str, SimResult]) -> str:
    depths = sorted({n.depth for n in next(iter(results.values())).node_figures})
    lines = ["| depth | " + " | ".join(PROTOCOLS) + " |", "|---|" + "---|" * len(PROTOCOLS)]
    for d in depths:
        cells = []
        for p in PROTOCOLS:
            peaks = [n.peak_assertions for n in results[p].node_figures if n.depth == d]
            cells.append(f"{sum(peaks) / len(peaks):,.1f}")
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def latency_table(results: dict[str, SimResult]) -> str:
    lines = ["| protocol | mean | p50 | p95 | max | link bytes |", "|---|---|---|---|---|---|"]
    for p, r in results.items():
        s = latency_summary(r.assert_latency + r.message_latency)
        cells = [f"{s[k] * 1000:.1f}" for k in ("mean", "p50", "p95", "max")]
        cells.append(f"{r.traffic('bytes'):,}")
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plots(out: Path, data: dict[str, Any]) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plots skipped: install the plot extra: pip install 'feds[plot]'", file=sys.stderr)
        return []
    out.mkdir(parents=True, exist_ok=True)
    written = []

    def save(name: str, draw: Callable[[Any], None]) -> None:
        fig, ax = plt.subplots(figsize=(6, 3.6), dpi=90)
        draw(ax)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
        fig.tight_layout()
        fig.savefig(out / name)
        plt.close(fig)
        written.append(out / name)

    def sweep(xs: list, runs: dict, metric: Callable, xlabel: str, ylabel: str, title: str):
        def draw(ax: Any) -> None:
            for p in PROTOCOLS:
                ax.plot(xs, [metric(r) for r in runs[p]], marker="o", label=p)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.set_title(title)

        return draw

    counts, runs = data["fanout"]
    save(
        "sim_fanout.png",
        sweep(
            counts,
            runs,
            per_event,
            "subscribers (one topic)",
            "link events per event",
            "Fan-out: balanced ternary tree, 40 nodes",
        ),
    )
    shares, runs = data["selectivity"]
    save(
        "sim_selectivity.png",
        sweep(
            shares,
            runs,
            per_event,
            "selectivity (share of events anyone wants)",
            "link events per event",
            "Selectivity: random tree, 40 nodes",
        ),
    )
    counts, runs = data["patterns"]
    save(
        "sim_patterns.png",
        sweep(
            counts,
            runs,
            lambda r: r.traffic("events"),
            "distinct patterns (64 subscriptions)",
            "link events (50 published)",
            "Patterns: random tree, 40 nodes",
        ),
    )
    results = data["state"]

    def draw_state(ax: Any) -> None:
        for p in PROTOCOLS:
            by_depth: dict[int, list[int]] = defaultdict(list)
            for n in results[p].node_figures:
                by_depth[n.depth].append(n.peak_assertions)
            ds = sorted(by_depth)
            ax.plot(ds, [sum(by_depth[d]) / len(by_depth[d]) for d in ds], marker="o", label=p)
        ax.set_yscale("log")
        ax.set_xlabel("depth (0 = root)")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_ylabel("mean peak assertions per fragment")
        ax.set_title("State by depth: sensors workload")

    save("sim_state_depth.png", draw_state)

    latency_runs = data["latency"]

    def draw_latency(ax: Any) -> None:
        for p in PROTOCOLS:
            values = sorted(latency_runs[p].assert_latency + latency_runs[p].message_latency)
            n = len(values)
            ax.plot([v * 1000 for v in values], [(i + 1) / n for i in range(n)], label=p)
        ax.set_xscale("log")
        ax.set_xlabel("delivery latency (virtual ms; 1 ms + size / 20 kB/s per hop)")
        ax.set_ylabel("share of deliveries")
        ax.set_title("Latency CDF: 16 subscribers, 20 kB/s links")

    save("sim_latency.png", draw_latency)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/img"), help="where PNGs go")
    parser.add_argument("--quick", action="store_true", help="smaller sweeps (a smoke test)")
    args = parser.parse_args()
    data = {
        "fanout": fanout(args.quick),
        "state": state(args.quick),
        "selectivity": selectivity(args.quick),
        "patterns": patterns(args.quick),
        "latency": latency(args.quick),
    }
    counts, runs = data["fanout"]
    print("## Fan-out: link events per published event\n")
    print(sweep_table("subscribers", counts, runs, per_event))
    print("\n## Fan-out: link bytes per published event\n")
    print(sweep_table("subscribers", counts, runs, lambda r: r.traffic("bytes") / r.bound.events))
    print("\n## Sensors workload on a balanced ternary tree\n")
    print(markdown_table(list(data["state"].values())))
    print("\n## Sensors workload: mean peak assertions per fragment by depth\n")
    print(depth_table(data["state"]))
    shares, runs = data["selectivity"]
    print("\n## Selectivity: link events per published event\n")
    print(sweep_table("selectivity", shares, runs, per_event))
    print("\n## Latency (random tree, 40 nodes, selectivity 1, no bandwidth limit), ms\n")
    print(latency_table({p: runs[p][-1] for p in PROTOCOLS}))
    print("\n## Latency (balanced ternary, 16 subscribers of one topic, 20 kB/s links), ms\n")
    print(latency_table(data["latency"]))
    counts, runs = data["patterns"]
    print("\n## Patterns: total link events (64 subscriptions, 50 published events)\n")
    print(sweep_table("patterns", counts, runs, lambda r: r.traffic("events"), ",d"))
    for path in plots(args.out, data):
        print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
