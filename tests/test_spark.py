"""Spark jobs as leaf nodes, with a real local Spark (skipped where pyspark is not installed).

One overlay (binary7, in a thread) for the module; the Spark driver's leaf joins under ``a1``
and a watcher at ``b1`` (another subtree) sees what it publishes.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import feds.spark
from feds.blocking import BlockingClient
from feds.client import connect
from feds.runtime import Overlay, run_overlay
from feds.topology import load
from feds.values import record
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


# -- helpers --------------------------------------------------------------------------------------


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    """Poll ``predicate`` until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


class Recorder:
    """Every event of ``pattern`` seen by a client of ``address``, in order, from the moment
    the constructor returns (the observation has reached every node by then)."""

    def __init__(self, address: str, pattern: str) -> None:
        self.events: list[tuple[str, tuple]] = []
        self.ready = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=trio.run, args=(self._run, address, pattern))
        self.thread.start()
        assert self.ready.wait(DEADLINE), "the recorder did not start"

    async def _run(self, address: str, pattern: str) -> None:
        async with connect(address, name="recorder") as session:
            observing = session.observe(pattern)
            async with observing as observation:
                await session.sync()
                self.ready.set()
                while not self.stop.is_set():
                    with trio.move_on_after(0.05):
                        event = await observation.next()
                        self.events.append((event.kind, event.captures))

    def count(self, kind: str) -> int:
        return sum(k == kind for k, _ in list(self.events))

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)


def write(df: Any, publication: str, save: str = "append", **options: str) -> None:
    """``df.write.format("feds")`` with save mode ``save`` and the given feds options."""
    writer = df.write.format("feds").option("publication", publication).mode(save)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


# -- writing --------------------------------------------------------------------------------------


def test_dict_records_are_keyed_by_column_names(spark: Any, leaf: Any, watcher: Any) -> None:
    df = spark.createDataFrame([("kitchen", 21.5), ("hall", 19.0)], "room string, temp double")
    write(df, "rooms", label="room", record="dict")
    rows = watcher.query("<room $d>")
    assert {r[0]["room"]: r[0]["temp"] for r in rows} == {"kitchen": 21.5, "hall": 19.0}


def test_overwrite_replaces_the_publication_without_a_glitch(
    spark: Any, leaf: Any, overlay: Overlay
) -> None:
    write(spark.range(0, 1000), "ow")
    with Recorder(overlay.address("b1"), "<ow $id>") as seen:
        wait_for(lambda: seen.count("+") == 1000, "the first 1000 rows")
        write(spark.range(500, 1500), "ow", save="overwrite")
        wait_for(lambda: seen.count("-") == 500 and seen.count("+") == 1500, "the overwrite")
        changes = seen.events[1000:]
    kinds = [kind for kind, _ in changes]
    assert kinds == ["+"] * 500 + ["-"] * 500, "every addition arrives before any removal"
    assert {c for k, c in changes if k == "+"} == {(i,) for i in range(1000, 1500)}
    assert {c for k, c in changes if k == "-"} == {(i,) for i in range(500)}
    assert Counter(leaf.published("ow")) == Counter(record("ow", i) for i in range(500, 1500))


def test_a_retried_task_is_published_exactly_once(spark: Any, leaf: Any, watcher: Any) -> None:
    from pyspark.sql.functions import udf

    def fail_first_attempt(i: int) -> int:
        """Attempt 0 of partition 0 fails at row 2500 (after staging a first chunk of rows)."""
        from pyspark import TaskContext

        context = TaskContext.get()
        if context.partitionId() == 0 and context.attemptNumber() == 0 and i == 2500:
            raise RuntimeError("first attempt fails")
        return i

    once = udf(fail_first_attempt, "long", useArrow=False)
    df = spark.range(0, 6000, 1, 2).select(once("id").alias("id"))
    write(df, "retried")
    rows = watcher.query("<retried $id>")
    assert len(rows) == 6000 and set(rows) == {(i,) for i in range(6000)}
    assert leaf.staged_rows() == 0


def test_a_failing_job_publishes_nothing(spark: Any, leaf: Any, watcher: Any) -> None:
    from pyspark.sql.functions import udf

    def fail_always(i: int) -> int:
        if i == 3500:
            raise RuntimeError("boom at 3500")
        return i

    boom = udf(fail_always, "long", useArrow=False)
    df = spark.range(0, 6000, 1, 2).select(boom("id").alias("id"))
    with pytest.raises(Exception, match="boom at 3500"):
        write(df, "failed")
    assert watcher.query("<failed $id>") == []
    assert leaf.published("failed") == []
    assert leaf.staged_rows() == 0


def test_keyed_upsert_keeps_the_newest_row_per_key(spark: Any, leaf: Any, watcher: Any) -> None:
    options = {"mode": "upsert", "key": "k", "timestamp": "ts"}
    first = [("a", 1, 10), ("b", 2, 10), ("c", 3, 10)]
    write(spark.createDataFrame(first, "k string, v long, ts long"), "latest", **options)
    # a newer row for a, an older one for b (ignored), a new key d
    second = [("a", 11, 20), ("b", 12, 5), ("d", 14, 1)]
    write(spark.createDataFrame(second, "k string, v long, ts long"), "latest", **options)
    rows = sorted(watcher.query("<latest $k $v $ts>"))
    assert rows == [("a", 11, 20), ("b", 2, 10), ("c", 3, 10), ("d", 14, 1)]


def test_message_mode_sends_each_row_once_with_its_sequence(
    spark: Any, leaf: Any, overlay: Overlay
) -> None:
    with Recorder(overlay.address("b1"), "<note $pub $batch $part $seq $text>") as seen:
        df = spark.createDataFrame([("x",), ("y",), ("z",)], "text string").coalesce(1)
        write(df, "note", mode="message", sequence="true")
        wait_for(lambda: seen.count("!") == 3, "three messages")
    assert sorted(c for _, c in seen.events) == [
        ("note", None, 0, 0, "x"),
        ("note", None, 0, 1, "y"),
        ("note", None, 0, 2, "z"),
    ]
    assert leaf.published("note") == []
