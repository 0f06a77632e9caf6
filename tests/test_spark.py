"""Spark jobs as leaf nodes, with a real local Spark (skipped where pyspark is not installed).

One overlay (binary7, in a thread) for the module; the Spark driver's leaf joins under ``a1``
and a watcher at ``b1`` (another subtree) sees what it publishes.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import feds.spark
from feds.blocking import BlockingClient
from feds.runtime import Overlay, run_overlay
from feds.topology import load
from tests.threaded import served_in_thread

BINARY7 = load(Path(__file__).resolve().parent.parent / "topology" / "binary7.toml")
DEADLINE = 60.0


async def start(nursery: trio.Nursery) -> Overlay:
    return await nursery.start(partial(run_overlay, BINARY7, any_port=True, tcp_links=True))


@pytest.fixture(scope="module")
def overlay() -> Iterator[Overlay]:
    with served_in_thread(start) as running:
        yield running


@pytest.fixture(scope="module")
def leaf(spark: Any, overlay: Overlay) -> Iterator[feds.spark.Leaf]:
    with feds.spark.join(spark, parent=overlay.address("a1"), protocol=BINARY7.protocol) as joined:
        yield joined


@pytest.fixture(scope="module")
def watcher(overlay: Overlay) -> Iterator[BlockingClient]:
    with BlockingClient(overlay.address("b1"), name="watcher") as client:
        yield client


def test_batch_write_is_seen_at_another_leaf(
    spark: Any, leaf: Any, watcher: BlockingClient
) -> None:
    df = spark.range(1000).selectExpr("id", "id * 2 AS twice")
    df.write.format("feds").option("publication", "doubled").mode("append").save()
    rows = watcher.query("<doubled $id $twice>")
    assert sorted(rows) == [(i, 2 * i) for i in range(1000)]
