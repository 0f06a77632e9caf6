"""Spark rows to feds values and back (sans-IO): one explicit conversion per Spark type.

Writing reads rows from Arrow batches (``batch.to_pylist()``), where timestamps are aware UTC
datetimes, maps are lists of (key, value) pairs and structs are dicts. Each column gets its own
converter, chosen once from the Spark schema:

===================================  =========================================================
Spark type                           feds value
===================================  =========================================================
null in any column                   ``None``
boolean                              ``bool``
byte, short, integer, long           ``int``
float, double                        ``float`` (NaN kept, as feds' single NaN)
decimal                              ``float`` (the nearest double; cast to string in Spark to
                                     keep every digit)
string, char, varchar                ``str``
binary                               ``bytes``
date                                 ``str``, ISO ``YYYY-MM-DD``
timestamp                            ``str``, UTC ISO ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (never the
                                     worker's local zone; the fixed width sorts as time does)
timestamp_ntz                        ``str``, ISO ``YYYY-MM-DDTHH:MM:SS.ffffff`` (no zone)
array                                sequence (``tuple``) of converted elements
map                                  dict (``FrozenDict``) of converted keys and values
struct                               dict (``FrozenDict``) keyed by field name
===================================  =========================================================

Any other type (intervals, variant, ...) raises :class:`UnsupportedType` naming the column.
A row becomes ``<label col ...>`` (columns in order) or, with ``as_dict``, ``<label {name: col}>``.

Reading goes the other way: :func:`infer_type` picks a Spark type for the values of one capture
(ints and floats together widen to double) and :func:`to_spark` makes each value fit it.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import Any

from pyspark.sql import types as T

from feds.values import NAN, FrozenDict, Record, Symbol, Value

Converter = Callable[[Any], Value]


class UnsupportedType(TypeError):
    """A column's Spark type has no conversion to feds values."""


def _float(x: float) -> float:
    return NAN if math.isnan(x) else float(x)


def _decimal(x: Decimal) -> float:
    return _float(float(x))


def _date(x: dt.date) -> str:
    return x.isoformat()


def _timestamp(x: dt.datetime) -> str:
    if x.tzinfo is None:  # the Row path hands naive local time; Arrow hands aware UTC
        raise UnsupportedType("a timestamp without a time zone reached a timestamp column")
    return x.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _timestamp_ntz(x: dt.datetime) -> str:
    return x.replace(tzinfo=None).isoformat(timespec="microseconds")


_ATOMS: dict[type, Converter] = {
    T.BooleanType: bool,
    T.ByteType: int,
    T.ShortType: int,
    T.IntegerType: int,
    T.LongType: int,
    T.FloatType: _float,
    T.DoubleType: _float,
    T.DecimalType: _decimal,
    T.StringType: str,
    T.CharType: str,
    T.VarcharType: str,
    T.BinaryType: bytes,
    T.DateType: _date,
    T.TimestampType: _timestamp,
    T.TimestampNTZType: _timestamp_ntz,
}


def _nullable(convert: Converter) -> Converter:
    return lambda x: None if x is None else convert(x)


def converter(data_type: T.DataType, column: str) -> Converter:
    """The conversion of one column's values (``None`` stays ``None`` at every level)."""
    atom = _ATOMS.get(type(data_type))
    if atom is not None:
        return _nullable(atom)
    if isinstance(data_type, T.ArrayType):
        element = converter(data_type.elementType, column)
        return _nullable(lambda xs: tuple(map(element, xs)))
    if isinstance(data_type, T.MapType):
        key = converter(data_type.keyType, column)
        value = converter(data_type.valueType, column)
        return _nullable(lambda pairs: FrozenDict({key(k): value(v) for k, v in _pairs(pairs)}))
    if isinstance(data_type, T.StructType):
        fields = [(f.name, converter(f.dataType, f"{column}.{f.name}")) for f in data_type.fields]
        return _nullable(
            lambda d: FrozenDict({name: conv(_field(d, name)) for name, conv in fields})
        )
    raise UnsupportedType(
        f"column {column!r} has Spark type {data_type.simpleString()}, which has no conversion"
        " to feds values; cast it (for example to string) before writing"
    )


def _pairs(m: Any) -> Iterable[tuple[Any, Any]]:
    return m.items() if isinstance(m, dict) else m  # Row path: dict; Arrow path: [(k, v)]


def _field(d: Any, name: str) -> Any:
    return d[name] if isinstance(d, dict) else getattr(d, name)  # Arrow: dict; Row path: Row


def row_converter(
    schema: T.StructType, label: str, as_dict: bool = False
) -> Callable[[dict], Record]:
    """The record for one row given as a dict of column name to Arrow-path Python value."""
    columns = [(f.name, converter(f.dataType, f.name)) for f in schema.fields]
    head = Symbol(label)
    if as_dict:
        return lambda row: Record(
            head, (FrozenDict({name: conv(row[name]) for name, conv in columns}),)
        )
    return lambda row: Record(head, tuple(conv(row[name]) for name, conv in columns))


def column_converter(schema: T.StructType, names: Sequence[str]) -> Callable[[dict], tuple]:
    """The converted values of the columns ``names`` of a row (upsert keys, the timestamp)."""
    by_name = {f.name: f for f in schema.fields}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise ValueError(f"no column {missing[0]!r}; columns: {', '.join(by_name)}")
    columns = [(n, converter(by_name[n].dataType, n)) for n in names]
    return lambda row: tuple(conv(row[name]) for name, conv in columns)


# -- reading --------------------------------------------------------------------------------------

_KINDS: list[tuple[type, T.DataType]] = [
    (bool, T.BooleanType()),
    (int, T.LongType()),
    (float, T.DoubleType()),
    (str, T.StringType()),
    (bytes, T.BinaryType()),
]


def infer_type(values: Iterable[Value]) -> T.DataType:
    """A Spark type for one capture's values: bool, long, double (ints and floats together
    widen to double), string, binary; anything else (records, sequences, mixes) is shown as
    text in a string column. A capture with no values (or only nulls) is a string column."""
    seen = {type(v) for v in values if v is not None}
    if seen == {int, float}:
        return T.DoubleType()
    if len(seen) == 1:
        (kind,) = seen
        for cls, spark_type in _KINDS:
            if kind is cls:
                return spark_type
    return T.StringType()


def to_spark(value: Value, data_type: T.DataType) -> Any:
    """``value`` as a Python value of ``data_type`` (the inverse of the write conversion for
    the atomic types; text for anything a string column receives that is not a string)."""
    if value is None:
        return None
    if isinstance(data_type, T.StringType):
        return value if isinstance(value, str) else repr(value)
    if isinstance(data_type, T.DoubleType) and isinstance(value, int | float):
        return float(value)
    if isinstance(data_type, T.LongType) and type(value) is int:
        return value
    if isinstance(data_type, T.BooleanType) and isinstance(value, bool):
        return value
    if isinstance(data_type, T.BinaryType) and isinstance(value, bytes):
        return value
    raise TypeError(f"the value {value!r} does not fit the column type {data_type.simpleString()}")
