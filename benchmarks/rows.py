"""CPU per row of a batched publish through the overlay, against the same rows at one node.

The chain ``root`` ← ``mid`` ← ``tail`` runs in this process with TCP links (``run_overlay``). A
client at ``tail`` publishes ``--rows`` rows ``<bench i name x>`` (an integer, a string and a
float, as a Spark row might be) with ``publish_many``, an observer at ``root`` waits for every
one, then the client withdraws them with ``retract_many`` and the observer waits for every
retraction. Reported: CPU microseconds per row (the whole process: three nodes and both clients)
for the assertions and for the retractions. The peer, in the same run: the same client actions
with the publisher and the observer both at ``root`` (no hop). Medians of ``--reps`` repetitions,
the two placements interleaved::

    .venv/bin/python benchmarks/rows.py                     # 20,000 rows, 3 repetitions
    .venv/bin/python benchmarks/rows.py --rows 100000 --reps 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.retraction import CHAIN, wait_count
from feds.client import connect
from feds.runtime import Overlay, run_overlay
from feds.topology import load
from feds.values import record


async def one_run(overlay: Overlay, publisher_at: str, first: int, n: int) -> tuple[float, float]:
    """CPU µs per row to assert ``n`` rows from ``publisher_at`` to ``root``, then to retract."""
    async with (
        connect(overlay.address("root"), name="watcher") as watcher,
        connect(overlay.address(publisher_at), name="publisher") as publisher,
        watcher.observe("<bench $i $name $x>") as rows,
    ):
        await watcher.sync()
        values = [record("bench", first + i, f"row-{i}", i / 2) for i in range(n)]
        start = time.process_time()
        handles = publisher.publish_many(values)
        await wait_count(rows, n, "+")
        asserted = time.process_time()
        publisher.retract_many(handles)
        await wait_count(rows, n, "-")
        retracted = time.process_time()
    return 1e6 * (asserted - start) / n, 1e6 * (retracted - asserted) / n


async def measure(n: int, reps: int) -> dict[str, list[tuple[float, float]]]:
    results: dict[str, list[tuple[float, float]]] = {"chain": [], "one node": []}
    async with trio.open_nursery() as nursery:
        overlay = await nursery.start(
            lambda task_status: run_overlay(load(CHAIN), any_port=True, task_status=task_status)
        )
        for rep in range(reps):
            for name, at in (("chain", "tail"), ("one node", "root")):
                first = (2 * rep + (name == "chain")) * n
                results[name].append(await one_run(overlay, at, first, n))
                print(f"  rep {rep + 1}/{reps} {name:8} done", file=sys.stderr, flush=True)
        nursery.cancel_scope.cancel()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000, help="rows per run (20,000)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions (median; 3)")
    args = parser.parse_args(argv)
    results = trio.run(measure, args.rows, args.reps)
    medians = {
        name: (statistics.median(a for a, _ in runs), statistics.median(r for _, r in runs))
        for name, runs in results.items()
    }
    print(f"{args.rows} rows, CPU µs per row (whole process), medians of {args.reps}")
    print(f"{'placement':10} {'assert':>8} {'retract':>8}")
    for name, (a, r) in medians.items():
        print(f"{name:10} {a:8.1f} {r:8.1f}")
    (ca, cr), (pa, pr) = medians["chain"], medians["one node"]
    print(f"chain ÷ one node: assert {ca / pa:.2f}, retract {cr / pr:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
