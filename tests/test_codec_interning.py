"""Tests of the decoder's interning: equal small values without references become one object."""

from __future__ import annotations

import math

from hypothesis import given

from feds.codec import (
    INTERN_MAX_ITEMS,
    INTERN_MAX_TEXT,
    Decoder,
    Interner,
    decode,
    encode,
)
from feds.syntax import parse
from feds.values import FrozenDict, Record, Symbol, record
from tests.strategies import identical, values

PATTERN = parse('<group <rec bench> {0: <bind <_>> 1: <lit "room-1">}>')


def test_equal_patterns_decode_to_one_object_children_first():
    data = encode(PATTERN)
    first, second = decode(data), Decoder().decode(data)  # any decoder of this thread
    assert first == PATTERN
    assert second is first
    assert first.fields[1] is second.fields[1]  # the dict
    assert first.fields[0] is decode(encode(Record(Symbol("rec"), (Symbol("bench"),))))


def test_an_interned_value_is_found_inside_a_larger_one():
    alone = decode(encode(PATTERN))
    wrapped = decode(encode(record("pub", b"payload", PATTERN, (1, 2.5))))
    assert wrapped.fields[1] is alone
    assert wrapped is not decode(encode(wrapped))  # a record holding bytes is not interned


def test_empty_record_and_dict_are_interned():
    assert decode(encode(record("_"))) is decode(encode(record("_")))
    assert decode(encode(FrozenDict())) is decode(encode(FrozenDict()))


def test_values_whose_equality_ignores_types_are_not_interned():
    as_int = decode(encode(record("x", 1, "k")))
    others = (
        record("x", 1.0, "k"),
        record("x", True, "k"),
        FrozenDict({1.0: "a"}),
        FrozenDict({"a": True}),
    )
    for other in others:
        got = decode(encode(other))
        assert identical(got, other)
        assert got is not decode(encode(other))
    assert decode(encode(record("x", 1, "k"))) is as_int
    assert math.copysign(1.0, decode(encode(record("z", -0.0, "k"))).fields[0]) == -1.0


def test_only_small_items_are_interned():
    small = [
        record("s", "a" * INTERN_MAX_TEXT),
        record("i", 2**64 - 1, -(2**63), "n"),
        record("n", *range(INTERN_MAX_ITEMS - 1), "x"),
        FrozenDict({i: "v" for i in range(INTERN_MAX_ITEMS)}),
    ]
    big = [
        record("s", "a" * (INTERN_MAX_TEXT + 1)),
        record("y", Symbol("a" * (INTERN_MAX_TEXT + 1))),
        record("i", 2**64, "n"),
        record("n", *range(INTERN_MAX_ITEMS), "x"),
        FrozenDict({i: "v" for i in range(INTERN_MAX_ITEMS + 1)}),
        record("t", (1,)),
        record("b", b""),
    ]
    for v in small:
        assert decode(encode(v)) is decode(encode(v))
    for v in big:
        assert decode(encode(v)) is not decode(encode(v))
        assert decode(encode(v)) == v


def test_containers_ending_with_a_number_or_none_are_not_interned():
    for v in (
        record("retract", 7),
        record("temp", "r", 21),
        FrozenDict({"a": 2}),
        record("n", None),
    ):
        assert decode(encode(v)) is not decode(encode(v))
    for v in (record("x", 1, Symbol("a")), FrozenDict({1: "a"}), record("r", 2, record("_"))):
        assert decode(encode(v)) is decode(encode(v))


def test_the_table_is_bounded_and_keeps_values_in_use():
    interner = Interner(size=4)
    hot_key = (Symbol("hot"),)
    hot = interner.add(hot_key, Record(Symbol("hot")))
    for i in range(50):
        interner.add((i,), Record(Symbol("cold"), (i,)))
        assert len(interner) <= 8
        assert interner.get(hot_key) is hot  # each use keeps it in the young generation
    assert interner.get((0,)) is None  # one-off values were dropped
    assert interner.internable((hot,))
    assert not interner.internable((Record(Symbol("cold"), (0,)),))  # never interned


def test_dropped_values_stop_counting_as_interned():
    interner = Interner(size=2)
    first = interner.add((0,), Record(Symbol("v"), (0,)))
    assert interner.internable((first,))
    for i in range(1, 5):
        interner.add((i,), Record(Symbol("v"), (i,)))
    assert interner.get((0,)) is None
    assert not interner.internable((first,))


@given(values())
def test_round_trip_twice_keeps_every_type(v):
    assert identical(decode(encode(v)), v)
    assert identical(decode(encode(v)), v)
