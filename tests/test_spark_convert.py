"""Spark values to feds values and back, type by type (no Spark session; needs pyspark)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

T = pytest.importorskip("pyspark.sql.types")

from feds.spark.convert import (  # noqa: E402
    UnsupportedType,
    column_converter,
    converter,
    infer_type,
    row_converter,
    to_spark,
)
from feds.values import NAN, FrozenDict, record  # noqa: E402

TOKYO = dt.timezone(dt.timedelta(hours=9))

CASES = [
    (T.BooleanType(), True, True),
    (T.ByteType(), 7, 7),
    (T.ShortType(), -300, -300),
    (T.IntegerType(), 70000, 70000),
    (T.LongType(), 2**40, 2**40),
    (T.FloatType(), 1.5, 1.5),
    (T.DoubleType(), -0.25, -0.25),
    (T.DecimalType(5, 2), Decimal("12.50"), 12.5),
    (T.StringType(), "héllo", "héllo"),
    (T.BinaryType(), b"\x00\xff", b"\x00\xff"),
    (T.DateType(), dt.date(2024, 2, 29), "2024-02-29"),
    (
        T.TimestampType(),
        dt.datetime(2024, 3, 1, 8, 30, tzinfo=TOKYO),
        "2024-02-29T23:30:00.000000Z",
    ),
    (T.TimestampNTZType(), dt.datetime(2024, 2, 29, 23, 30, 1, 5), "2024-02-29T23:30:01.000005"),
    (T.ArrayType(T.LongType()), [1, None, 3], (1, None, 3)),
    (T.MapType(T.StringType(), T.LongType()), [("a", 1), ("b", None)], FrozenDict(a=1, b=None)),
    (T.MapType(T.StringType(), T.LongType()), {"a": 1}, FrozenDict(a=1)),
    (
        T.StructType([T.StructField("x", T.LongType()), T.StructField("y", T.StringType())]),
        {"x": 1, "y": "z"},
        FrozenDict(x=1, y="z"),
    ),
]


@pytest.mark.parametrize(("spark_type", "given", "expected"), CASES, ids=lambda c: repr(c)[:30])
def test_each_type_converts_exactly(spark_type: object, given: object, expected: object) -> None:
    got = converter(spark_type, "c")(given)
    assert got == expected and type(got) is type(expected)
    assert converter(spark_type, "c")(None) is None


def test_floats_keep_nan_and_booleans_stay_booleans() -> None:
    assert converter(T.DoubleType(), "c")(float("nan")) is NAN
    assert type(converter(T.BooleanType(), "c")(False)) is bool
    assert type(converter(T.LongType(), "c")(1)) is int
    assert type(converter(T.DoubleType(), "c")(1.0)) is float


def test_a_naive_timestamp_is_refused_rather_than_read_in_the_local_zone() -> None:
    with pytest.raises(UnsupportedType, match="without a time zone"):
        converter(T.TimestampType(), "c")(dt.datetime(2024, 1, 1))


@pytest.mark.parametrize(
    "spark_type",
    [T.DayTimeIntervalType(), T.YearMonthIntervalType(), T.ArrayType(T.CalendarIntervalType())],
)
def test_an_unsupported_type_names_the_column(spark_type: object) -> None:
    with pytest.raises(UnsupportedType, match="column 'when' has Spark type"):
        converter(spark_type, "when")


def test_a_nested_unsupported_field_names_its_path() -> None:
    nested = T.StructType([T.StructField("gap", T.DayTimeIntervalType())])
    with pytest.raises(UnsupportedType, match=r"column 'outer\.gap'"):
        converter(nested, "outer")


def test_rows_become_records_in_column_order_or_as_dicts() -> None:
    schema = T.StructType([T.StructField("room", T.StringType()), T.StructField("t", T.LongType())])
    row = {"room": "hall", "t": 19}
    assert row_converter(schema, "temp")(row) == record("temp", "hall", 19)
    assert row_converter(schema, "temp", as_dict=True)(row) == record(
        "temp", FrozenDict(room="hall", t=19)
    )
    assert column_converter(schema, ["t"])(row) == (19,)
    with pytest.raises(ValueError, match="no column 'nope'"):
        column_converter(schema, ["nope"])


def test_inferred_read_types_widen_ints_and_floats_to_double() -> None:
    assert infer_type([1, 2.5, None]) == T.DoubleType()
    assert infer_type([1, 2]) == T.LongType()
    assert infer_type([True, None]) == T.BooleanType()
    assert infer_type([True, 1]) == T.StringType()
    assert infer_type([b"x"]) == T.BinaryType()
    assert infer_type([record("x", 1)]) == T.StringType()
    assert infer_type([]) == T.StringType()


def test_read_values_fit_their_column() -> None:
    assert to_spark(1, T.DoubleType()) == 1.0 and type(to_spark(1, T.DoubleType())) is float
    assert to_spark(None, T.LongType()) is None
    assert to_spark(record("x", 1), T.StringType()) == repr(record("x", 1))
    with pytest.raises(TypeError, match="does not fit the column type bigint"):
        to_spark("a", T.LongType())
