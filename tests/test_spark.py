"""Spark jobs as leaf nodes, with a real local Spark (skipped where pyspark is not installed).

One overlay (binary7, in a thread) for the module; the Spark driver's leaf joins under ``a1``
and a watcher at ``b1`` (another subtree) sees what it publishes.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import warnings
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
from feds.client import FedsError, connect
from feds.runtime import Overlay, run_overlay
from feds.topology import load
from feds.values import FrozenDict, record
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
    rows = watcher.query("<doubled $id $twice>", timeout=DEADLINE)
    assert sorted(rows) == [(i, 2 * i) for i in range(1000)]


# -- helpers --------------------------------------------------------------------------------------


def wait_for(
    predicate: Callable[[], bool], what: str, timeout: float = DEADLINE, query: Any = None
) -> None:
    """Poll ``predicate`` until it holds; fail after ``timeout`` seconds, or at once with its
    error if the streaming ``query`` it waits on has failed."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if query is not None and (error := query.exception()) is not None:
            raise AssertionError(f"the streaming query failed while waiting for {what}: {error}")
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
                await session.sync(DEADLINE)
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


def snapshot(
    watcher: BlockingClient, leaf: Any, overlay: Overlay, pattern: str, count: int, before: str
) -> list[tuple]:
    """``watcher.query(pattern)`` for a publication the leaf has just committed (``before`` says
    how that went), expected to hold ``count`` rows. Short of them, fail saying which stage was
    not reached: the query's sync (slow: it times out), or the rows' arrival (they come after
    the sync answered, or never: a fault of the overlay, not slowness).

    One shortfall is no fault: a link of the overlay cut meanwhile (a keep-alive timeout, when
    a loaded machine starves this process) counts as having answered the query's sync, so the
    query returns without what lay beyond it, 0 rows if that was the leaf's uplink
    (``docs/reliability.md``, Faults). Then the rows are waited for (the child re-dials and
    resyncs), and the cut is reported as a warning."""
    with LinkLosses() as losses:
        began = time.monotonic()
        try:
            rows = watcher.query(pattern, timeout=DEADLINE)
        except FedsError as exc:
            raise AssertionError(
                f"{before}; the leaf holds the rows; the watcher's query of {pattern} did not get "
                f"its sync answered (the overlay is slow or hung; links lost: {losses.lost}): {exc}"
            ) from None
        queried = f"{before}; the watcher's query took {time.monotonic() - began:.1f} s"
        if len(rows) == count:
            return rows
        # Short: do the rows come later (the sync answered before they had arrived), or never?
        state = f"leaf connected: {leaf.connected}, unlinked nodes: {overlay.unlinked()}"
        seen: set[tuple] = set()
        began = time.monotonic()
        with watcher.observe(pattern) as observation:
            while len(seen) < count and time.monotonic() - began < DEADLINE:
                event = observation.next(1.0)
                if event is not None and event.kind == "+":
                    seen.add(event.captures)
            path = path_figures(leaf, overlay)  # while the observer's matches are on their way
    after = f"an observer after it saw {len(seen)} within {time.monotonic() - began:.1f} s"
    if len(seen) == count and losses.lost:
        warnings.warn(
            f"{queried} and got {len(rows)} of {count} rows: links were lost meanwhile "
            f"({losses.lost}); {after}",
            stacklevel=2,
        )
        return sorted(seen)
    verdict = (
        "the sync answered before the rows had arrived"
        if len(seen) == count
        else "rows lost on the way, or the overlay stalled"
    )
    raise AssertionError(
        f"{queried} and got {len(rows)} of the {count} rows the leaf holds ({state}; links "
        f"lost: {losses.lost or 'none'}); {after}: {verdict}. Along the path (fragment "
        f"assertions, late events dropped): {path}"
    )


class LinkLosses(logging.Handler):
    """The overlay's links lost while in its ``with`` (each child logs ``uplink lost``), even
    if another test quietened the ``feds`` loggers."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lost: list[str] = []
        self.log = logging.getLogger("feds.runtime")
        self.level_before = self.log.level

    def emit(self, record: logging.LogRecord) -> None:
        if "uplink lost" in (message := record.getMessage()):
            self.lost.append(message)

    def __enter__(self) -> LinkLosses:
        self.log.addHandler(self)
        if not self.log.isEnabledFor(logging.WARNING):
            self.log.setLevel(logging.WARNING)
        return self

    def __exit__(self, *exc: object) -> None:
        self.log.removeHandler(self)
        self.log.setLevel(self.level_before)


def path_figures(leaf: Any, overlay: Overlay) -> str:
    """Each node's fragment assertions and the events its links dropped as late, from the leaf
    to the watcher's b1 (read from this thread: best effort, for a failure message)."""

    async def leaf_status() -> dict:
        return leaf.runtime.status()

    figures = []
    for name in ("leaf", "a1", "a", "top", "b", "b1"):
        try:
            status = leaf.call(leaf_status) if name == "leaf" else overlay.runtimes[name].status()
        except RuntimeError as exc:  # changed meanwhile by the overlay's thread
            figures.append(f"{name} ?: {exc}")
            continue
        late = sum(link["late_events_in"] for link in status["links"])
        figures.append(f"{name} {status['fragment-assertions']}/{late}")
    return ", ".join(figures)


# -- writing --------------------------------------------------------------------------------------


def test_dict_records_are_keyed_by_column_names(spark: Any, leaf: Any, watcher: Any) -> None:
    df = spark.createDataFrame([("kitchen", 21.5), ("hall", 19.0)], "room string, temp double")
    write(df, "rooms", label="room", record="dict")
    rows = watcher.query("<room $d>", timeout=DEADLINE)
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


def test_a_retried_task_is_published_exactly_once(
    spark: Any, leaf: Any, watcher: Any, overlay: Overlay
) -> None:
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
    began = time.monotonic()
    write(df, "retried")
    saved = f"save() returned after {time.monotonic() - began:.1f} s"
    # the commit: the successful attempts' rows, each once, and nothing left staged
    published = Counter(leaf.published("retried"))
    assert published == Counter(record("retried", i) for i in range(6000)), (
        f"{saved}, but the leaf's commit shows {published.total()} rows ({len(published)} "
        "distinct), not each of the 6,000 once"
    )
    assert leaf.staged_rows() == 0, f"{saved}; rows are left staged"
    # the overlay: a snapshot query from the other subtree sees every row
    rows = snapshot(watcher, leaf, overlay, "<retried $id>", 6000, saved)
    assert set(rows) == {(i,) for i in range(6000)}


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
    assert watcher.query("<failed $id>", timeout=DEADLINE) == []
    assert leaf.published("failed") == []
    assert leaf.staged_rows() == 0


def test_keyed_upsert_keeps_the_newest_row_per_key(spark: Any, leaf: Any, watcher: Any) -> None:
    options = {"mode": "upsert", "key": "k", "timestamp": "ts"}
    first = [("a", 1, 10), ("b", 2, 10), ("c", 3, 10)]
    write(spark.createDataFrame(first, "k string, v long, ts long"), "latest", **options)
    # a newer row for a, an older one for b (ignored), a new key d
    second = [("a", 11, 20), ("b", 12, 5), ("d", 14, 1)]
    write(spark.createDataFrame(second, "k string, v long, ts long"), "latest", **options)
    rows = sorted(watcher.query("<latest $k $v $ts>", timeout=DEADLINE))
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


# -- streaming writes -----------------------------------------------------------------------------


def ticks(spark: Any, rows: int) -> Any:
    """A bounded stream: ``rows`` rows per micro-batch, values 0, 1, 2, ..."""
    return (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", rows)
        .option("numPartitions", 2)
        .load()
    )


def run_available(stream: Any, checkpoint: Path, publication: str, output: str = "append") -> None:
    """Run the stream into ``publication`` until everything available is written."""
    query = (
        stream.writeStream.format("feds")
        .option("publication", publication)
        .option("checkpointLocation", str(checkpoint))
        .outputMode(output)
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(DEADLINE), "the availableNow query did not finish in time"
    assert query.exception() is None


def test_streaming_append_and_a_replayed_micro_batch(
    spark: Any, leaf: Any, watcher: Any, tmp_path: Path
) -> None:
    stream = ticks(spark, 40).selectExpr("value AS id")
    run_available(stream, tmp_path / "cp", "ticks")
    first = Counter(leaf.published("ticks"))
    assert first and max(first.values()) == 1
    assert sorted(watcher.query("<ticks $id>", timeout=DEADLINE)) == sorted(r.fields for r in first)
    # lose the record that the last batch was committed: a restart replays that batch
    commits = sorted((tmp_path / "cp" / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    commits[-1].unlink()
    commits[-1].with_name(f".{commits[-1].name}.crc").unlink(missing_ok=True)
    run_available(stream, tmp_path / "cp", "ticks")
    again = Counter(leaf.published("ticks"))
    assert max(again.values()) == 1, "a replayed micro-batch published its rows twice"
    assert set(first) <= set(again)


def test_streaming_complete_mode_replaces_the_aggregate(
    spark: Any, leaf: Any, watcher: Any, tmp_path: Path
) -> None:
    stream = ticks(spark, 30).selectExpr("value % 3 AS k").groupBy("k").count()
    run_available(stream, tmp_path / "cp", "counts", output="complete")
    total = sum(count for _, count in watcher.query("<counts $k $n>", timeout=DEADLINE))
    assert sorted(k for k, _ in watcher.query("<counts $k $n>", timeout=DEADLINE)) == [0, 1, 2]
    run_available(stream, tmp_path / "cp", "counts", output="complete")
    rows = watcher.query("<counts $k $n>", timeout=DEADLINE)
    assert sorted(k for k, _ in rows) == [0, 1, 2], "complete mode keeps one row per key"
    assert sum(n for _, n in rows) >= total


# -- reading --------------------------------------------------------------------------------------


def test_read_a_snapshot_with_an_inferred_schema(spark: Any, leaf: Any, watcher: Any) -> None:
    watcher.publish_many([record("reading", "kitchen", 21), record("reading", "hall", 19.5)])
    watcher.sync(DEADLINE)
    df = spark.read.format("feds").option("pattern", "<reading $room $value>").load()
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("room", "string"),
        ("value", "double"),
    ]
    assert sorted(tuple(r) for r in df.collect()) == [("hall", 19.5), ("kitchen", 21.0)]
    given = spark.read.format("feds").schema("room string, value double")
    assert given.option("pattern", "<reading $room $value>").load().count() == 2


def test_streaming_read_numbers_the_events(spark: Any, leaf: Any, watcher: Any) -> None:
    events = (
        spark.readStream.format("feds")
        .option("pattern", "<sensor $id $v>")
        .option("events", "true")
        .schema("seq long, kind string, id long, v double")
        .load()
    )
    query = (
        events.writeStream.format("memory")
        .queryName("sensor_events")
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        keys = watcher.publish_many([record("sensor", i, i / 2) for i in range(5)])
        seen = lambda: spark.table("sensor_events").collect()  # noqa: E731
        wait_for(lambda: len(seen()) >= 5, "five + events", query=query)
        watcher.retract(keys[0])
        wait_for(lambda: len(seen()) >= 6, "the - event", query=query)
    finally:
        query.stop()
    rows = sorted(tuple(r) for r in seen())
    assert [r[0] for r in rows] == list(range(len(rows))), "sequence numbers count the events"
    assert sorted((k, i, v) for _, k, i, v in rows) == sorted(
        [("+", i, i / 2) for i in range(5)] + [("-", 0, 0.0)]
    )


# -- the leaf and its parent ----------------------------------------------------------------------


def test_results_reappear_after_the_leaf_reconnects(
    spark: Any, leaf: Any, overlay: Overlay
) -> None:
    write(spark.range(0, 200), "kept")
    with Recorder(overlay.address("b1"), "<kept $id>") as seen:
        wait_for(lambda: seen.count("+") == 200, "the rows")

        async def drop_uplink() -> None:
            for relay in list(leaf.runtime.relays):
                if relay.remote_hello is not None and relay.remote_hello.name == "a1":
                    relay.close("test: the link to the parent is lost")

        leaf.call(drop_uplink)
        wait_for(lambda: seen.count("-") == 200, "the rows to go with the link")
        wait_for(lambda: seen.count("+") == 400, "the rows to come back")
    leaf.wait_connected()


# -- types ----------------------------------------------------------------------------------------

EVERY_TYPE = """
SELECT CAST(NULL AS STRING) AS nothing, true AS yes, CAST(1 AS TINYINT) AS i8,
       CAST(2 AS SMALLINT) AS i16, 3 AS i32, CAST(4 AS BIGINT) AS i64, CAST(1.5 AS FLOAT) AS f32,
       CAST('NaN' AS DOUBLE) AS nan, CAST(12.50 AS DECIMAL(5, 2)) AS dec, 'text' AS s,
       X'00FF' AS bin, DATE'2024-02-29' AS day, TIMESTAMP'2024-03-01 08:30:00' AS ts,
       TIMESTAMP_NTZ'2024-02-29 23:30:00' AS ntz, array(1, 2) AS arr, map('a', 1) AS m,
       named_struct('x', 1, 'y', 'z') AS st
"""


def test_every_spark_type_becomes_its_feds_value(spark: Any, leaf: Any, watcher: Any) -> None:
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Asia/Tokyo")  # 08:30 in Tokyo is 23:30 UTC
    try:
        write(spark.sql(EVERY_TYPE), "types", record="dict")
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    ((row,),) = watcher.query("<types $row>", timeout=DEADLINE)
    got = dict(row.items())
    assert math.isnan(got.pop("nan"))
    expected = {
        "nothing": None,
        "yes": True,
        "i8": 1,
        "i16": 2,
        "i32": 3,
        "i64": 4,
        "f32": 1.5,
        "dec": 12.5,
        "s": "text",
        "bin": b"\x00\xff",
        "day": "2024-02-29",
        "ts": "2024-02-29T23:30:00.000000Z",
        "ntz": "2024-02-29T23:30:00.000000",
        "arr": (1, 2),
        "m": FrozenDict({"a": 1}),
        "st": FrozenDict({"x": 1, "y": "z"}),
    }
    assert got == expected
    assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in expected.items()}


def test_an_unsupported_type_names_its_column(spark: Any, leaf: Any) -> None:
    df = spark.sql("SELECT 1 AS fine, INTERVAL '1' DAY AS gap")
    with pytest.raises(Exception, match="column 'gap' has Spark type interval day"):
        write(df, "intervals")
    assert leaf.published("intervals") == []


# -- the demo -------------------------------------------------------------------------------------


def test_the_demo_spark_leaf_publishes_and_leaves(spark: Any, leaf: Any, overlay: Overlay) -> None:
    from feds.cli.demo_cmd import spark_leaf_publishes

    try:
        with Recorder(overlay.address("a2"), "<temp $room $celsius>") as seen:
            spark_leaf_publishes(spark, overlay.address("b2"), BINARY7.protocol, pause=0)
            wait_for(lambda: seen.count("-") == 2, "the demo's rows to come and go")
    finally:
        leaf.register(spark)  # the demo's leaf had taken over format("feds")
    assert [k for k, _ in seen.events] == ["+", "+", "-", "-"]
    assert {c for _, c in seen.events} == {("attic", 14.9), ("garage", 15.0)}


def test_the_publish_benchmark_runs_quickly(spark: Any, leaf: Any, overlay: Overlay) -> None:
    """benchmarks/spark_publish.py's measurement, in its smallest form (no timing checked)."""
    from benchmarks.spark_publish import measure

    try:
        (row,) = measure(
            spark, overlay.address("a2"), overlay.address("b2"), BINARY7.protocol, [500], 1
        )
    finally:
        leaf.register(spark)  # the benchmark's leaf had taken over format("feds")
    assert row["rows"] == 500 and all(row[k] > 0 for k in ("spark", "plain", "noop"))
