"""How simulation time grows with the number of nodes and with the number of events.

Each run simulates a random tree (``random-tree:n=N``) with ``10 * N`` subscriptions over 100
topics (one subscriber and one publisher client per node, placed uniformly) and the given
number of published events (half messages, half assertions living 0.5 virtual seconds), with
the real node, relay and protocol code (:func:`feds.sim.simulate`). ``selectivity`` is the share
of events on a subscribed topic (the rest interest nobody). It prints a markdown table: wall
time, turns run, link events carried, the lower bound, microseconds per turn and peak memory.

Run (the table in docs/performance.md)::

    .venv/bin/python benchmarks/sim_scale.py                      # growth with nodes, events
    .venv/bin/python benchmarks/sim_scale.py --full               # + the 1,000-node scale run
    .venv/bin/python benchmarks/sim_scale.py --nodes 1000 --events 100000 --subscriptions 10000

Each configuration runs in a fresh process, so peak memory is that run's own.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from dataclasses import dataclass

from feds.sim import WorkloadSpec, simulate
from feds.topology import generate


@dataclass
class Config:
    nodes: int
    subscriptions: int
    events: int
    protocol: str = "aggregate-subs"
    topics: int = 100
    selectivity: float = 0.01

    def spec(self) -> WorkloadSpec:
        return WorkloadSpec(
            subscribers=self.nodes,
            subscriptions=self.subscriptions,
            publishers=self.nodes,
            topics=self.topics,
            events=self.events,
            rate=max(100.0, self.events / 10),
            messages=0.5,
            lifetime=0.5,
            selectivity=self.selectivity,
        )


def run_one(config: Config, seed: int) -> dict:
    topology = generate(f"random-tree:n={config.nodes}", seed, base_port=0)
    started = time.perf_counter()
    result = simulate(topology, config.protocol, config.spec(), seed=seed)
    wall = time.perf_counter() - started
    summary = result.summary()
    return {
        **config.__dict__,
        "height": topology.height(),
        "wall_s": wall,
        "turns": result.turns,
        "link_events": summary["events"],
        "bound": summary["bound_edges"],
        "us_per_turn": 1e6 * wall / max(1, result.turns),
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "transparent": result.ok,
    }


def run_isolated(config: Config, seed: int) -> dict:
    """Run one configuration in a child process (fresh memory, fresh caches)."""
    out = subprocess.run(
        [sys.executable, __file__, "--_one", json.dumps(config.__dict__), "--seed", str(seed)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


HEADER = (
    "| nodes | height | subscriptions | topics | events | selectivity | protocol | wall s | turns "
    "| link events | bound | µs/turn | peak MB |"
)


def row(r: dict) -> str:
    ok = "" if r["transparent"] else " (NOT transparent)"
    return (
        f"| {r['nodes']:,} | {r['height']} | {r['subscriptions']:,} | {r['topics']:,} "
        f"| {r['events']:,} "
        f"| {r['selectivity']:g} | {r['protocol']}{ok} | {r['wall_s']:.1f} | {r['turns']:,} "
        f"| {r['link_events']:,} "
        f"| {r['bound']:,} | {r['us_per_turn']:.1f} | {r['peak_mb']:.0f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--full", action="store_true", help="also the 1,000-node scale run")
    parser.add_argument("--nodes", type=int, help="one run with this many nodes")
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--subscriptions", type=int)
    parser.add_argument("--protocol", default="aggregate-subs")
    parser.add_argument("--selectivity", type=float, default=0.01)
    parser.add_argument("--topics", type=int, default=100, help="distinct topics (default 100)")
    parser.add_argument("--_one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._one:
        print(json.dumps(run_one(Config(**json.loads(args._one)), args.seed)))
        return
    if args.nodes:
        subs = args.subscriptions or 10 * args.nodes
        configs = [
            Config(
                args.nodes,
                subs,
                args.events,
                args.protocol,
                topics=args.topics,
                selectivity=args.selectivity,
            )
        ]
    else:
        configs = [Config(n, 10 * n, 10_000) for n in (100, 300, 1000)]
        configs += [Config(1000, 10_000, e) for e in (30_000,)]
        configs += [Config(300, 3000, 10_000, selectivity=s) for s in (0.1, 0.3)]
        if args.full:
            configs.append(Config(1000, 10_000, 100_000))
    print(HEADER)
    print("|" + "---|" * (HEADER.count("|") - 1))
    for config in configs:
        print(row(run_isolated(config, args.seed)), flush=True)


if __name__ == "__main__":
    main()
