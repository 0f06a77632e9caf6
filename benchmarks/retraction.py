"""Cost of many retractions in one turn: a client with N assertions leaves a 3-node chain.

The chain ``root`` ← ``mid`` ← ``tail`` runs in this process with TCP links (``run_overlay``);
a client at ``tail`` publishes N assertions (``publish_many``-style: drained every 256), an
observer at ``root`` counts them, then the client closes its connection, which retracts all N at
``tail``, ``mid`` and ``root`` in one turn each. Reported per N: seconds until the observer has
seen every assertion (publish), seconds until it has seen every retraction (leave), and leave /
publish, the peer in the same run. Linear retraction keeps that ratio flat as N grows (it was
quadratic: 20,000 handles froze the chain for 47 s). Medians of ``--reps`` repetitions::

    .venv/bin/python benchmarks/retraction.py                   # N = 2,000 and 20,000
    .venv/bin/python benchmarks/retraction.py --sizes 50000 --reps 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from feds.client import Observation, connect
from feds.runtime import Overlay, run_overlay
from feds.topology import load
from feds.values import record

CHAIN = Path(__file__).resolve().parent.parent / "topology" / "chain3.toml"
DRAIN_EVERY = 256


async def wait_count(observation: Observation, want: int, kind: str) -> None:
    """Read events until ``want`` of ``kind`` have arrived."""
    seen = 0
    while seen < want:
        event = await observation.next(timeout=600)
        seen += event.kind == kind


async def one_run(n: int) -> tuple[float, float]:
    async with trio.open_nursery() as nursery:
        overlay: Overlay = await nursery.start(
            lambda task_status: run_overlay(
                load(CHAIN), any_port=True, tcp_links=True, task_status=task_status
            )
        )
        async with connect(overlay.address("root"), name="observer") as watcher:
            observing = watcher.observe("<held $i>")
            async with observing as observation:
                await watcher.sync()
                async with connect(overlay.address("tail"), name="publisher") as publisher:
                    start = time.perf_counter()
                    for i in range(n):
                        publisher.assert_(record("held", i))
                        if i % DRAIN_EVERY == DRAIN_EVERY - 1:
                            await publisher.drain(timeout=600)
                    await wait_count(observation, n, "+")
                    published = time.perf_counter() - start
                    start = time.perf_counter()
                await wait_count(observation, n, "-")
                left = time.perf_counter() - start
        nursery.cancel_scope.cancel()
    return published, left


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000])
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    print(f"{'N':>8} {'publish s':>10} {'leave s':>10} {'leave/publish':>14}")
    for n in args.sizes:
        runs = [trio.run(one_run, n) for _ in range(args.reps)]
        publish = statistics.median(p for p, _ in runs)
        leave = statistics.median(lv for _, lv in runs)
        print(f"{n:>8} {publish:>10.2f} {leave:>10.2f} {leave / publish:>14.2f}")


if __name__ == "__main__":
    main()
