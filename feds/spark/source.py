"""The ``feds`` Python data source: Spark writes stage at the driver's leaf, reads query it.

Every hook here runs in a Python worker that Spark forks, never in the driver's interpreter, so
nothing here holds a connection across hooks: writers and readers are pickled to the workers and
dial the leaf (its addresses come as defaults bound by :func:`feds.spark.join`).

Write options (all strings, case-insensitive keys):

``publication``  the publication's name (default: the label)
``label``        the records' label (default: the publication, else ``row``)
``mode``         ``assert`` (default), ``message`` or ``upsert``
``record``       ``fields`` (default: ``<label col ...>``) or ``dict`` (``<label {col: value}>``)
``key``          upsert: comma-separated key columns (required in upsert mode)
``timestamp``    upsert: a column; a row never replaces a row with a later value in it
``sequence``     message: ``true`` puts ``publication batch sequence`` before the columns

Read options: ``pattern`` (required), e.g. ``<temp $room $value>``; ``events`` (``true``: rows
are events ``seq kind captures...``, needed by ``readStream``); ``buffer`` (streaming: the most
events held between micro-batches, default 100000).
"""

from __future__ import annotations

import queue
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    SimpleDataSourceStreamReader,
    WriterCommitMessage,
)
from pyspark.sql.types import LongType, StringType, StructField, StructType

from feds.spark.convert import column_converter, infer_type, row_converter, to_spark
from feds.spark.publications import MESSAGE, MODES, UPSERT
from feds.spark.wire import ABORT, COMMIT, LeafConnection
from feds.syntax import parse_pattern
from feds.values import Record, Symbol

QUERY_TIMEOUT = 300.0
"""Seconds a read waits for its snapshot (a federated query over the whole overlay)."""
BUFFER = 100_000
"""Events a streaming read holds between micro-batches before it fails as fallen behind."""


@dataclass(frozen=True)
class WriteSpec:
    """What a write does, from the options (checked in the planning worker)."""

    stage: str
    publication: str
    label: str
    mode: str
    as_dict: bool
    keys: tuple[str, ...]
    timestamp: str | None
    sequence: bool

    @classmethod
    def from_options(cls, options: dict[str, str]) -> WriteSpec:
        stage = options.get("stage")
        if not stage:
            raise ValueError("no feds leaf: call feds.spark.join(spark, ...) before writing")
        label = options.get("label") or options.get("publication") or "row"
        mode = options.get("mode", "assert").lower()
        if mode not in MODES:
            raise ValueError(f"unknown feds mode {mode!r}; modes: {', '.join(MODES)}")
        record = options.get("record", "fields").lower()
        if record not in ("fields", "dict"):
            raise ValueError(f"unknown record option {record!r}; use fields or dict")
        keys = tuple(k.strip() for k in options.get("key", "").split(",") if k.strip())
        if mode == UPSERT and not keys:
            raise ValueError("upsert mode needs .option('key', 'column[,column...]')")
        return cls(
            stage=stage,
            publication=options.get("publication") or label,
            label=label,
            mode=mode,
            as_dict=record == "dict",
            keys=keys,
            timestamp=options.get("timestamp") or None,
            sequence=options.get("sequence", "false").lower() == "true",
        )


@dataclass
class Staged(WriterCommitMessage):
    """A task's commit message: where its rows are staged."""

    job: str
    batch: int | None
    partition: int
    attempt: int


def _stage_task(spec: WriteSpec, schema: StructType, job: str, batch: int | None, batches: Any):
    """Convert every row of the task's Arrow batches and stage them at the leaf."""
    context = TaskContext.get()
    partition, attempt = context.partitionId(), context.attemptNumber()
    make = row_converter(schema, spec.label, spec.as_dict)
    key = column_converter(schema, spec.keys) if spec.mode == UPSERT else None
    order = column_converter(schema, [spec.timestamp]) if spec.timestamp else None
    prefix = Symbol(spec.label)

    def entries() -> Iterator[tuple]:
        sequence = 0
        for arrow_batch in batches:
            for row in arrow_batch.to_pylist():
                record = make(row)
                if spec.sequence and spec.mode == MESSAGE:
                    tag = (spec.publication, batch, partition, sequence)
                    record = Record(prefix, (*tag, *record.fields))
                    sequence += 1
                yield (
                    record,
                    None if key is None else key(row),
                    None if order is None else order(row)[0],
                )

    with LeafConnection(spec.stage) as leaf:
        leaf.stage((job, batch, partition, attempt), entries())
    return Staged(job, batch, partition, attempt)


def _check(spec: WriteSpec, schema: StructType) -> None:
    """Fail in the planning worker, before any task runs, on a column that cannot be written
    or a key or timestamp column that does not exist."""
    row_converter(schema, spec.label)
    column_converter(schema, [*spec.keys, *([spec.timestamp] if spec.timestamp else [])])


def _commit(spec: WriteSpec, job: str | None, batch: int | None, messages: list, overwrite: bool):
    attempts = tuple((m.partition, m.attempt) for m in messages if m is not None)
    request = (spec.publication, spec.mode, job, batch, attempts, overwrite)
    with LeafConnection(spec.stage) as leaf:
        leaf.ask(Record(COMMIT, request))


def _abort(spec: WriteSpec, job: str | None, batch: int | None) -> None:
    if job is not None:
        with LeafConnection(spec.stage) as leaf:
            leaf.ask(Record(ABORT, (job, batch)))


class FedsWriter(DataSourceArrowWriter):
    """``df.write.format("feds")``: tasks stage, the commit publishes in one turn."""

    def __init__(self, spec: WriteSpec, schema: StructType, overwrite: bool) -> None:
        self.spec = spec
        self.schema = schema
        self.overwrite = overwrite
        self.job = f"batch-{uuid.uuid4()}"
        _check(spec, schema)

    def write(self, iterator: Iterator[Any]) -> Staged:
        return _stage_task(self.spec, self.schema, self.job, None, iterator)

    def commit(self, messages: list[Staged | None]) -> None:
        _commit(self.spec, self.job, None, messages, self.overwrite)

    def abort(self, messages: list[Staged | None]) -> None:
        _abort(self.spec, self.job, None)


class FedsStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("feds")``: one commit per micro-batch, replays ignored."""

    def __init__(self, spec: WriteSpec, schema: StructType, overwrite: bool) -> None:
        self.spec = spec
        self.schema = schema
        self.overwrite = overwrite
        _check(spec, schema)

    def write(self, iterator: Iterator[Any]) -> Staged:
        context = TaskContext.get()
        job = context.getLocalProperty("sql.streaming.queryId") or "stream"
        batch = int(context.getLocalProperty("streaming.sql.batchId"))
        return _stage_task(self.spec, self.schema, job, batch, iterator)

    def commit(self, messages: list[Staged | None], batchId: int) -> None:
        job = next((m.job for m in messages if m is not None), None)
        _commit(self.spec, job, batchId, messages, self.overwrite)

    def abort(self, messages: list[Staged | None], batchId: int) -> None:
        _abort(self.spec, next((m.job for m in messages if m is not None), None), batchId)


# -- reading --------------------------------------------------------------------------------------


def _snapshot(address: str, pattern: str) -> list[tuple]:
    from feds.blocking import BlockingClient

    with BlockingClient(address, name="spark reader", timeout=QUERY_TIMEOUT) as client:
        return client.query(pattern, timeout=QUERY_TIMEOUT)


def _capture_names(pattern: str) -> list[str]:
    _, names = parse_pattern(pattern)
    return [name or f"_{i}" for i, name in enumerate(names)]


def infer_schema(address: str, pattern: str) -> StructType:
    """One column per capture of ``pattern``, typed from the current matches."""
    rows = _snapshot(address, pattern)
    names = _capture_names(pattern)
    return StructType(
        [
            StructField(name, infer_type(row[i] for row in rows), True)
            for i, name in enumerate(names)
        ]
    )


def _fit(captures: tuple, schema: StructType) -> tuple:
    return tuple(to_spark(v, f.dataType) for v, f in zip(captures, schema.fields, strict=False))


class FedsReader(DataSourceReader):
    """``spark.read.format("feds")``: a snapshot of the matches anywhere in the overlay."""

    def __init__(self, address: str, pattern: str, schema: StructType) -> None:
        self.address = address
        self.pattern = pattern
        self.schema = schema

    def read(self, partition: Any) -> Iterator[tuple]:
        for captures in _snapshot(self.address, self.pattern):
            yield _fit(captures, self.schema)


STREAM_COLUMNS = [StructField("seq", LongType(), False), StructField("kind", StringType(), False)]


class FedsStreamReader(SimpleDataSourceStreamReader):
    """``spark.readStream.format("feds")``: the events of one observation, numbered.

    Offsets are ``{"epoch": E, "seq": N}``: ``E`` names this reader's observation, ``N`` counts
    its events. The observation starts with a ``+`` per current match, so after a restart (a new
    epoch) the stream resyncs from a fresh snapshot: events between the last committed offset
    and the restart are not replayed, the current state is. Events wait in a buffer of at most
    ``buffer`` between micro-batches; past that the query fails rather than lose any.
    """

    def __init__(self, address: str, pattern: str, schema: StructType, buffer: int) -> None:
        self.address = address
        self.pattern = pattern
        self.schema = schema
        self.capture_schema = StructType(schema.fields[len(STREAM_COLUMNS) :])
        self.buffer = buffer
        self.epoch = str(uuid.uuid4())
        self.events: list[tuple] = []  # (seq, kind, captures...) not yet committed
        self.first = 0  # seq of events[0]
        self.inbox: queue.Queue | None = None
        self.overflow = False

    def _start(self) -> None:
        if self.inbox is not None:
            return
        self.inbox = queue.Queue(self.buffer)
        from feds.blocking import BlockingClient

        client = BlockingClient(self.address, name="spark stream reader")

        def pump() -> None:
            for event in client.watch(self.pattern):
                try:
                    self.inbox.put_nowait(event)  # type: ignore[union-attr]
                except queue.Full:
                    self.overflow = True
                    return

        threading.Thread(target=pump, name="feds stream reader", daemon=True).start()

    def _drain(self) -> None:
        assert self.inbox is not None
        if self.overflow:
            raise RuntimeError(
                f"the feds stream fell more than {self.buffer} events behind; "
                "raise .option('buffer', N) or trigger micro-batches more often"
            )
        while len(self.events) < self.buffer:
            try:
                event = self.inbox.get_nowait()
            except queue.Empty:
                return
            seq = self.first + len(self.events)
            self.events.append((seq, event.kind, *_fit(event.captures, self.capture_schema)))

    def initialOffset(self) -> dict:
        self._start()
        return {"epoch": self.epoch, "seq": 0}

    def read(self, start: dict) -> tuple[Iterator[tuple], dict]:
        self._start()
        self._drain()
        begin = start["seq"] if start.get("epoch") == self.epoch else self.first
        rows = [e for e in self.events if e[0] >= begin]
        end = self.first + len(self.events)
        return iter(rows), {"epoch": self.epoch, "seq": end}

    def readBetweenOffsets(self, start: dict, end: dict) -> Iterator[tuple]:
        if start.get("epoch") != self.epoch or end.get("epoch") != self.epoch:
            return iter(())
        return iter([e for e in self.events if start["seq"] <= e[0] < end["seq"]])

    def commit(self, end: dict) -> None:
        if end.get("epoch") == self.epoch:
            drop = max(0, min(end["seq"] - self.first, len(self.events)))
            del self.events[:drop]
            self.first += drop


class FedsDataSource(DataSource):
    """The ``feds`` format. :func:`feds.spark.join` registers a subclass whose ``defaults``
    carry the leaf's addresses (a class made at run time is pickled by value to the workers)."""

    defaults: dict[str, str] = {}

    @classmethod
    def name(cls) -> str:
        return "feds"

    def _setting(self, key: str) -> str | None:
        return self.options.get(key) or self.defaults.get(key)

    def _pattern(self) -> tuple[str, str]:
        pattern = self._setting("pattern")
        if not pattern:
            raise ValueError("reading feds needs .option('pattern', '<label $capture ...>')")
        address = self._setting("client")
        if not address:
            raise ValueError("no feds leaf: call feds.spark.join(spark, ...) before reading")
        return address, pattern

    def schema(self) -> StructType:
        captures = infer_schema(*self._pattern())
        if (self._setting("events") or "false").lower() == "true":
            return StructType(STREAM_COLUMNS + list(captures.fields))
        return captures

    def _spec(self) -> WriteSpec:
        return WriteSpec.from_options({**self.defaults, **dict(self.options)})

    def writer(self, schema: StructType, overwrite: bool) -> FedsWriter:
        return FedsWriter(self._spec(), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> FedsStreamWriter:
        return FedsStreamWriter(self._spec(), schema, overwrite)

    def reader(self, schema: StructType) -> FedsReader:
        return FedsReader(*self._pattern(), schema)

    def simpleStreamReader(self, schema: StructType) -> FedsStreamReader:
        address, pattern = self._pattern()
        if [f.name for f in schema.fields[:2]] != ["seq", "kind"]:
            raise ValueError(
                "readStream.format('feds') needs .option('events', 'true') (or a schema that"
                " starts with seq long, kind string): each row is one event"
            )
        return FedsStreamReader(address, pattern, schema, int(self._setting("buffer") or BUFFER))
