"""Tests of the codec's depth, NaN and timestamp checks on big (batched) frames.

A frame with many containers is decoded in one msgpack call once msgpack's own nesting limit,
behind padding, has shown it shallow enough (or walked if not), and NaNs and timestamps are
found by the hooks among the items of each container. These tests check that every guarantee
of the whole-value walk still holds, and that a clean batch, or one with a NaN, is not walked.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

import feds.codec
from feds.codec import CodecError, Limits, decode, encode
from feds.values import NAN, Embedded, FrozenDict, Record, Symbol, Value, record
from tests.strategies import identical, values
from tests.test_codec import Ref, array, nested_mixed, nested_records, nested_tuples

NAN_BYTES = b"\xcb" + struct.pack(">d", float("nan"))
TIMESTAMP = b"\xd6\xff" + bytes(4)


def depth(v: Value) -> int:
    """The nesting depth of ``v`` as :class:`Limits` counts it (``[[1]]`` has depth 2)."""
    if v.__class__ is Record:
        children: tuple = (v.label, *v.fields)
    elif v.__class__ is FrozenDict:
        children = tuple(item for pair in v.items() for item in pair)
    elif v.__class__ in (tuple, frozenset):
        children = tuple(v)
    else:
        return 0
    return 1 + max(map(depth, children), default=0)


def event(i: int, payload: Value) -> tuple:
    """An event like a relay's: ``[oid <message <pub i payload>>]``."""
    return (0, record("message", record("pub", Symbol("f"), i, payload)))


def batch(payloads: list[Value]) -> Record:
    return record("turn", tuple(event(i, p) for i, p in enumerate(payloads)))


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[Value]:
    """Every value the codec walks (depth and type check), in order."""
    seen: list[Value] = []
    scan = feds.codec._scan

    def spy(v: Value, max_depth: int, *args: object) -> bool:
        seen.append(v)
        return scan(v, max_depth, *args)

    monkeypatch.setattr(feds.codec, "_scan", spy)
    return seen


def test_a_clean_batch_is_not_walked(walks):
    frame = batch([(i, bytes(range(256))) for i in range(200)])
    data = encode(frame)
    assert len(data.translate(None, feds.codec._NOT_CONTAINER_HEADERS)) > 1000
    assert 0x7F in data and 0xFF in data  # as NaNs and timestamps would
    assert decode(data) == frame
    assert walks == []


def test_a_nan_in_a_batch_is_canonical_without_a_walk(walks):
    frame = batch([*range(100), float("nan"), *range(100)])
    got = decode(encode(frame))
    assert got == batch([*range(100), NAN, *range(100)])
    assert got.fields[0][100][1].fields[0].fields[2] is NAN
    assert walks == []


@pytest.mark.parametrize("position", [0, 57, 199])
@pytest.mark.parametrize("nest", [nested_tuples, nested_records, nested_mixed])
def test_deep_nesting_inside_one_event_of_a_batch_is_refused(position, nest):
    # turn > events > event > <message> > <pub> > payload: the payload starts at depth 6
    payloads: list[Value] = list(range(200))
    payloads[position] = nest(64 - 5)
    assert decode(encode(batch(payloads))) == batch(payloads)
    payloads[position] = nest(64 - 4)
    with pytest.raises(CodecError, match="nested deeper than max_depth"):
        decode(encode(batch(payloads)))


def test_deep_nesting_at_the_end_of_the_spine_is_refused():
    frame = record("turn", *range(100), nested_tuples(63))
    assert decode(encode(frame)) == frame
    frame = record("turn", *range(100), nested_tuples(64))
    with pytest.raises(CodecError, match="nested deeper than max_depth"):
        decode(encode(frame))


def test_deep_nesting_in_a_dict_of_a_batch_is_refused():
    frame = FrozenDict({i: (i, nested_tuples(62 if i != 7 else 63)) for i in range(20)})
    with pytest.raises(CodecError, match="nested deeper than max_depth"):
        decode(encode(frame))
    frame = FrozenDict({i: (i, nested_tuples(62)) for i in range(20)})
    assert decode(encode(frame)) == frame


@pytest.mark.parametrize("where", [0, 50, 99])
def test_a_timestamp_inside_one_event_of_a_batch_is_refused(where):
    events = [encode(event(i, i)) for i in range(100)]
    events[where] = array(b"\x00", TIMESTAMP)
    data = encode(record("turn", ()))[:-1] + b"\xdc\x00\x64" + b"".join(events)
    with pytest.raises(CodecError, match="Timestamp"):
        decode(data)


def test_a_nan_as_the_last_item_of_the_spine_is_canonical():
    data = encode(record("turn", *range(100), (1, 2, 1.5)))
    data = data.replace(struct.pack(">d", 1.5), NAN_BYTES[1:])
    got = decode(data)
    assert got.fields[-1][2] is NAN and got.fields[:100] == tuple(range(100))


def test_trailing_bytes_after_a_big_frame_are_refused():
    with pytest.raises(CodecError, match="unexpected bytes after the end"):
        decode(encode(batch(list(range(100)))) + b"\x01")


def test_a_truncated_big_frame_is_refused():
    data = encode(batch(list(range(100))))
    for cut in (1, 5, len(data) // 2):
        with pytest.raises(CodecError, match="truncated data"):
            decode(data[:-cut])


@given(st.lists(values(), min_size=1, max_size=30), st.integers(1, 9))
def test_a_batch_is_checked_as_a_whole_value_would_be(payloads, max_depth):
    frame = batch(payloads)
    limits = Limits(max_depth=max_depth)
    if depth(frame) > max_depth:
        with pytest.raises(CodecError, match="nested deeper than max_depth"):
            decode(encode(frame), limits=limits)
    else:
        assert identical(decode(encode(frame), limits=limits), frame)


@given(st.lists(st.one_of(values(), st.just(float("nan"))), min_size=1, max_size=30))
def test_every_nan_of_a_batch_decodes_to_the_canonical_object(payloads):
    got = decode(encode(batch(payloads)))
    for item, (_, message) in zip(payloads, got.fields[0], strict=True):
        payload = message.fields[0].fields[2]
        assert identical(payload, item)
        if isinstance(item, float) and item != item:
            assert payload is NAN


def test_a_label_whose_bytes_look_like_containers_or_a_nan_is_no_problem():
    odd = Record(Symbol("\x80\x9f\xcb\x7f"), ())  # UTF-8 c2 80 c2 9f c3 8b 7f
    shallow = record("x", *[odd] * 30)
    assert decode(encode(shallow), limits=Limits(max_depth=2)) == shallow
    assert decode(encode(batch([odd] * 30))) == batch([odd] * 30)


class WireRefHooks:
    """Embedded hooks that put a reference on the wire as a relay does: ``[0 n]``."""

    def encode_embedded(self, obj: Embedded) -> Value:
        assert isinstance(obj, Ref)
        return (0, obj.n)

    def decode_embedded(self, v: Value) -> Embedded:
        return Ref(v[1])


def nested_ref(levels: int, first: bool) -> Value:
    """A reference inside ``levels`` sequences, each holding it first or last beside a 5."""
    v: Value = Ref(1)
    for _ in range(levels):
        v = (v, 5) if first else (5, v)
    return v


@pytest.mark.parametrize("max_depth", [2, 3, 4, 5])
@pytest.mark.parametrize("levels", [0, 1, 2, 3, 4, 5])
@pytest.mark.parametrize("first", [True, False])
@pytest.mark.parametrize("padding", [0, 40])
def test_a_reference_counts_as_a_leaf_wherever_it_is(max_depth, levels, first, padding):
    """Depth counts containers of the data, not the two arrays of a reference's wire form, in
    the whole-value walk and in the item-by-item check of a big frame alike (``padding`` adds
    items after it, so the reference is not on the spine)."""
    v = nested_ref(levels, first)
    if padding:
        v = (v, *([(1,)] * padding))
    hooks = WireRefHooks()
    data = encode(v, embedded=hooks)
    limits = Limits(max_depth=max_depth)
    if depth(v) <= max_depth:
        assert decode(data, embedded=hooks, limits=limits) == v
    else:
        with pytest.raises(CodecError, match="max_depth"):
            decode(data, embedded=hooks, limits=limits)


@pytest.mark.parametrize("max_depth", [1, 2, 3])
def test_too_deep_names_the_configured_limit_wherever_it_is_found(max_depth):
    """A part of a big frame is checked against the depth left for it; the error still names
    the limit the decoder was given."""
    hooks = WireRefHooks()
    deep = nested_tuples(max_depth + 1)
    for v in [(deep, 5), (5, deep), ((Ref(1),), deep, *([(1,)] * 40))]:
        with pytest.raises(
            CodecError, match=rf"^data nested deeper than max_depth \({max_depth}\)$"
        ):
            decode(encode(v, embedded=hooks), embedded=hooks, limits=Limits(max_depth=max_depth))
