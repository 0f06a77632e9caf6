"""A Spark job joins a running feds overlay as a leaf and publishes aggregates; a watcher sees them.

The job generates sensor readings (``--rows`` of them: a room, an hour and a temperature),
computes per-room statistics (count, mean, minimum, maximum) and publishes them as the
publication ``room_stats`` with ``mode("overwrite")``: records ``<room_stats room run n mean
min max>`` (``run`` numbers the job's runs, so a re-run replaces every row even where the
statistics come out the same). A watcher, a plain feds client at another leaf of the tree,
prints every change. The job then runs again on new readings: the watcher sees each new row
arrive *before* the row it replaces goes (one turn, additions before removals), never a room
missing.

Against an overlay you run yourself::

    .venv/bin/feds up topology/binary7.toml &
    .venv/bin/python examples/spark_leaf.py --topology topology/binary7.toml --parent a1 --watch b2

or all in one (the overlay runs in this process, on free ports)::

    .venv/bin/python examples/spark_leaf.py --own-overlay

Needs the ``spark`` extra (``pip install -e '.[spark]'``) and Java 17 or 21.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import feds.spark
from feds.background import served_in_thread
from feds.client import connect
from feds.runtime import run_overlay
from feds.spark.session import local_session
from feds.syntax import format_value
from feds.topology import load

BINARY7 = Path(__file__).resolve().parent.parent / "topology" / "binary7.toml"
STATS = "<room_stats $room $run $n $mean $min $max>"
ROOMS = ["attic", "cellar", "hall", "kitchen"]
DEADLINE = 60.0


def room_stats(spark: Any, rows: int, seed: int) -> Any:
    """Per-room statistics of ``rows`` generated readings (``seed`` changes the readings and
    numbers the run)."""
    from pyspark.sql import functions as F

    rooms = F.array(*[F.lit(room) for room in ROOMS])
    readings = spark.range(rows).select(
        F.element_at(rooms, (F.col("id") % len(ROOMS) + 1).cast("int")).alias("room"),
        F.round(12 + 10 * F.rand(seed) + F.col("id") % len(ROOMS), 2).alias("celsius"),
    )
    stats = readings.groupBy("room").agg(
        F.count("*").alias("n"),
        F.round(F.avg("celsius"), 2).alias("mean"),
        F.min("celsius").alias("min"),
        F.max("celsius").alias("max"),
    )
    return stats.select("room", F.lit(seed).alias("run"), "n", "mean", "min", "max")


class Watcher:
    """A feds client at another leaf that prints every change of the statistics."""

    def __init__(self, address: str) -> None:
        self.events: list[str] = []  # the kinds, in order
        self.ready = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=trio.run, args=(self._run, address), daemon=True)
        self.thread.start()
        if not self.ready.wait(30):
            raise SystemExit(f"the watcher could not connect to {address}")

    async def _run(self, address: str) -> None:
        async with connect(address, name="watcher") as session:
            observing = session.observe(STATS)
            async with observing as events:
                await session.sync()
                self.ready.set()
                while not self.stop.is_set():
                    with trio.move_on_after(0.1):
                        event = await events.next()
                        self.events.append(event.kind)
                        shown = format_value(event.captures)
                        print(f"   watcher at {address}: {event.kind} {shown}", flush=True)

    def wait(self, count: int) -> list[str]:
        """Wait until ``count`` events have arrived; return them."""
        deadline = time.monotonic() + DEADLINE
        while len(self.events) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.events[:count]

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)


def own_overlay() -> Any:
    """binary7 running in this process (on a thread), on free ports."""
    return served_in_thread(
        lambda nursery: nursery.start(
            partial(run_overlay, load(BINARY7), any_port=True, tcp_links=True)
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topology", default=str(BINARY7), help="the running overlay's topology")
    parser.add_argument("--parent", default="a1", help="the node the Spark leaf joins under")
    parser.add_argument("--watch", default="b2", help="the node the watcher connects to")
    parser.add_argument("--rows", type=int, default=100_000, help="readings per run")
    parser.add_argument(
        "--own-overlay", action="store_true", help="run binary7 in this process instead"
    )
    args = parser.parse_args()
    topology = load(args.topology)
    with ExitStack() as stack:
        if args.own_overlay:
            overlay = stack.enter_context(own_overlay())
            parent, watch = overlay.address(args.parent), overlay.address(args.watch)
        else:
            parent, watch = (
                "{}:{}".format(*topology.address(n)) for n in (args.parent, args.watch)
            )
        print(f"== starting Spark (local[2]); the leaf joins under {args.parent} ({parent})")
        spark = local_session("feds spark_leaf example")
        stack.callback(spark.stop)
        leaf = stack.enter_context(
            feds.spark.join(spark, parent=parent, protocol=topology.protocol)
        )
        print(f"== Spark leaf up: clients at {leaf.client_address}")
        watcher = Watcher(watch)
        stack.callback(watcher.close)
        for run, seed in enumerate((1, 2), start=1):
            print(f"== run {run}: per-room statistics of {args.rows} readings (seed {seed})")
            before = len(watcher.events)
            stats = room_stats(spark, args.rows, seed)
            stats.write.format("feds").option("publication", "room_stats").mode("overwrite").save()
            changes = len(ROOMS) if run == 1 else 2 * len(ROOMS)
            kinds = watcher.wait(before + changes)[before:]
            print(f"== run {run} committed; the watcher saw {''.join(kinds)}")
        if kinds != ["+"] * len(ROOMS) + ["-"] * len(ROOMS):
            raise SystemExit("the re-run was not seen as additions before removals")
        print("== the re-run replaced every room's row without a gap (all + before any -)")
        print("== the leaf leaves: its publication goes away everywhere")


if __name__ == "__main__":
    main()
