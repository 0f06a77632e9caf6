"""``feds demo``: the README's main job — a whole overlay in one process, with clients.

It starts the 7-node binary tree of ``topology/binary7.toml`` (every node in this process, links
in memory, each node listening on a free TCP port), attaches a *watcher* at one leaf and a
*sensor* client at a leaf on the other side of the tree, and narrates what flows: the sensor's
assertions appearing and disappearing at the watcher, its messages arriving, a federated query,
and at the end the figures of every node (assertions held, bytes and events per link).

With the ``spark`` extra installed (``make`` installs it), a Spark job then joins as a leaf
under a third leaf node and publishes per-room averages of readings it generates, which the
watcher sees arrive and go when the Spark leaf leaves; without it, the demo says how to install it.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from functools import partial
from pathlib import Path
from typing import Any

import networkx as nx
import trio

from feds import client, topology
from feds.cli.common import EXIT_OK, add_verbosity, run_guarded, setup_logging
from feds.protocols import protocol_names
from feds.runtime import Overlay, figures, run_overlay
from feds.syntax import format_value
from feds.values import record

DEFAULT_TOPOLOGY = Path(__file__).resolve().parents[2] / "topology" / "binary7.toml"
WATCH = "<temp $room $celsius:number>"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="run a 7-node overlay in this process and show data flowing through it",
        description="Start every node of a topology in this process (default: the 7-node "
        "binary tree), attach a watcher and a sensor at two leaves on opposite sides of the "
        "tree, and narrate the assertions, retractions and messages that flow between them.",
    )
    p.add_argument("--topology", default=str(DEFAULT_TOPOLOGY), help="topology file to run")
    p.add_argument("--protocol", choices=protocol_names(), help="override the file's protocol")
    p.add_argument("--pause", type=float, default=0.3, help="seconds between steps")
    p.add_argument(
        "--no-spark", action="store_true", help="skip the Spark leaf (it takes 10-20 s to start)"
    )
    add_verbosity(p)
    p.set_defaults(func=lambda a: run_guarded(run, a))


def say(text: str) -> None:
    print(text, flush=True)


def run(args: argparse.Namespace) -> int:
    setup_logging(args)
    topo = topology.load(args.topology)
    trio.run(_demo, topo, args.protocol or topo.protocol, args.pause, not args.no_spark)
    return EXIT_OK


async def _demo(topo: topology.Topology, protocol: str, pause: float, spark: bool) -> None:
    leaves = topo.leaves()
    watcher_at, sensor_at = leaves[0], leaves[-1]
    async with trio.open_nursery() as nursery:
        overlay: Overlay = await nursery.start(
            lambda task_status: run_overlay(
                topo, protocol=protocol, any_port=True, task_status=task_status
            )
        )
        say(f"== {len(topo.nodes)} nodes running protocol {protocol} in this process")
        for name in topo.order():
            parent = topo.nodes[name].parent
            role = f"parent {parent}" if parent else "root"
            say(f"   node {name:<4} {overlay.address(name):<22} {role}")
        path = " -> ".join(nx.shortest_path(topo.tree().to_undirected(), sensor_at, watcher_at))
        say(f"== sensor client at {sensor_at}, watcher client at {watcher_at} (path {path})")

        async with (
            client.connect(overlay.address(watcher_at), name="watcher") as watcher,
            watcher.observe(WATCH) as events,
        ):
            await watcher.sync()
            say(f"== watcher observes {WATCH}")

            async def narrate() -> None:
                async for event in events:
                    meaning = {"+": "appeared", "-": "went away", "!": "message"}[event.kind]
                    say(f"   watcher: {event.kind} {format_value(event.captures)}  ({meaning})")

            nursery.start_soon(narrate)
            await _sensor(overlay.address(sensor_at), watcher, pause)
            say("-- sensor disconnected: what it still asserted goes away everywhere")
            await watcher.sync()
            await trio.sleep(pause)
            spark_at = next(n for n in reversed(leaves) if n not in (watcher_at, sensor_at))
            if spark:
                await _spark_leaf(overlay.address(spark_at), spark_at, protocol, pause)
        await trio.sleep(pause)
        say("== per-node figures (feds status):")
        for name in topo.order():
            data = figures(await client.status(overlay.address(name)))
            links = data["links"]
            sent = sum(link["bytes_out"] for link in links if link["role"] == "peer")
            say(
                f"   {name:<4} assertions {data['fragment-assertions']:>3}  "
                f"handlers {data['index-handlers']:>3}  peer bytes out {sent:>6}"
            )
        say("== done")
        nursery.cancel_scope.cancel()


async def _sensor(address: str, watcher: client.Session, pause: float) -> None:
    """The sensor's script: assert, replace, send, let the watcher query, retract, leave."""
    async with client.connect(address, name="sensor") as sensor:
        readings = {"kitchen": 21.5, "hall": 19.0, "cellar": 12.25}
        keys = {}
        for room, celsius in readings.items():
            say(f"-- sensor asserts <temp {room!r} {celsius}>".replace("'", '"'))
            keys[room] = sensor.assert_(record("temp", room, celsius))
            await sensor.sync()
            await trio.sleep(pause)
        say("-- sensor replaces the kitchen reading in one step (no glitch at the watcher)")
        keys["kitchen2"] = sensor.assert_(record("temp", "kitchen", 22.0))
        sensor.retract(keys.pop("kitchen"))
        await sensor.sync()
        await trio.sleep(pause)
        say('-- sensor sends a message <temp "porch" 8> (delivered, never retained)')
        sensor.send(record("temp", "porch", 8))
        await sensor.sync()
        await trio.sleep(pause)
        matches = await watcher.query("<temp $room _>")
        say(f"== federated query by the watcher: rooms {[m[0] for m in matches]}")
        say("-- sensor retracts the hall reading, then disconnects")
        sensor.retract(keys.pop("hall"))
        await sensor.sync()
        await trio.sleep(pause)


SPARK_INSTALL = ".venv/bin/pip install -e '.[spark]' (about 1 minute; needs Java 17 or 21)"


async def _spark_leaf(address: str, parent: str, protocol: str, pause: float) -> None:
    """A Spark job joins as a leaf under ``parent`` and publishes averages (if pyspark is here)."""
    if importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("pyarrow") is None:
        say(f"== a Spark job could join as a leaf here; install the spark extra: {SPARK_INSTALL}")
        return
    say(f"== a Spark job joins as a leaf under {parent} (starting Spark takes 10-20 s)")
    try:
        await trio.to_thread.run_sync(partial(_spark_job, address, protocol, pause))
    except Exception as exc:  # no Java, say: the rest of the demo stands
        say(f"   the Spark leaf could not run: {exc}")


def _spark_job(address: str, protocol: str, pause: float) -> None:
    from feds.spark.session import local_session

    spark = local_session("feds demo")
    try:
        spark_leaf_publishes(spark, address, protocol, pause)
    finally:
        spark.stop()


def spark_leaf_publishes(spark: Any, address: str, protocol: str, pause: float) -> None:
    """With ``spark``, join under the node at ``address``, publish averages, leave."""
    from pyspark.sql import functions as F

    import feds.spark

    with feds.spark.join(spark, parent=address, protocol=protocol, name="spark") as leaf:
        say("-- Spark leaf joined; it averages 10000 generated readings per room")
        readings = spark.range(10_000).select(
            F.element_at(
                F.array(F.lit("attic"), F.lit("garage")), (F.col("id") % 2 + 1).cast("int")
            ).alias("room"),
            (10 + (F.col("id") % 100) / 10).alias("celsius"),
        )
        averages = readings.groupBy("room").agg(F.round(F.avg("celsius"), 2).alias("celsius"))
        averages.write.format("feds").option("publication", "temp").mode("overwrite").save()
        say("-- Spark committed its results in one turn; the watcher sees them arrive")
        time.sleep(3 * pause)
        say("-- the Spark leaf leaves: its results go away everywhere")
        leaf.close()
        time.sleep(3 * pause)
