"""feds.codec against a naive reference implementation of the encoding its docstring specifies.

The reference encoder writes msgpack bytes by hand, one value at a time and recursively, and the
reference decoder reads plain msgpack (``ExtType`` for every ext) and lifts it back; neither has
a hook, a cache, interning or a fast path. The codec must agree with both, and refuse exactly
the values the reference depth says are too deep, in small frames and in big (batched) ones,
where the depth and the NaNs are found by other means than in a small frame.
"""

from __future__ import annotations

import struct

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgpack import ExtType

from feds.codec import (
    BIGINT,
    GENERIC_RECORD,
    RECORD,
    SET,
    SYMBOL,
    CodecError,
    Limits,
    _nests_at_most,
    decode,
    encode,
)
from feds.values import NAN, FrozenDict, Record, Symbol, Value
from tests.strategies import identical, values


def _header(n: int, fix: int, b16: int) -> bytes:
    if n < 16:
        return bytes([fix | n])
    if n < 2**16:
        return bytes([b16]) + n.to_bytes(2, "big")
    return bytes([b16 + 1]) + n.to_bytes(4, "big")


def _array(items: list[bytes]) -> bytes:
    return _header(len(items), 0x90, 0xDC) + b"".join(items)


def _ext(code: int, data: bytes) -> bytes:
    return msgpack.packb(ExtType(code, data))


def naive_encode(v: Value) -> bytes:
    """The bytes of ``v`` as the table in ``feds/codec.py`` describes them."""
    cls = v.__class__
    if cls is float:
        return b"\xcb" + struct.pack(">d", v)  # always float64
    if cls is int and not -(2**63) <= v < 2**64:
        return _ext(BIGINT, v.to_bytes(v.bit_length() // 8 + 1, "big", signed=True))
    if v is None or cls in (bool, int, str, bytes):
        return msgpack.packb(v, use_bin_type=True)
    if cls is Symbol:
        return _ext(SYMBOL, v.name.encode())
    if cls is Record:
        if v.label.__class__ is Symbol:
            head = [_ext(RECORD, v.label.name.encode())]
        else:
            head = [_ext(GENERIC_RECORD, b""), naive_encode(v.label)]
        return _array(head + [naive_encode(f) for f in v.fields])
    if cls is tuple:
        return _array([naive_encode(x) for x in v])
    if cls is frozenset:
        return _array([_ext(SET, b"")] + [naive_encode(x) for x in v])
    if cls is FrozenDict:
        pairs = [naive_encode(k) + naive_encode(x) for k, x in v.items()]
        return _header(len(pairs), 0x80, 0xDE) + b"".join(pairs)
    raise TypeError(f"not in the reference: {v!r}")


class _Map(tuple):
    """A decoded map, as its pairs (hashable, so that it can be a key itself)."""


def naive_decode(data: bytes) -> Value:
    """The value of ``data``, read as plain msgpack and lifted."""
    return _lift(
        msgpack.unpackb(data, use_list=False, strict_map_key=False, object_pairs_hook=_Map)
    )


def _lift(x: object) -> Value:
    cls = x.__class__
    if cls is float:
        return NAN if x != x else x
    if cls is ExtType:
        if x.code == SYMBOL:
            return Symbol(x.data.decode())
        assert x.code == BIGINT
        return int.from_bytes(x.data, "big", signed=True)
    if cls is _Map:
        return FrozenDict({_lift(k): _lift(i) for k, i in x})
    if cls is tuple:
        head = x[0] if x else None
        if head.__class__ is ExtType and head.code == RECORD:
            return Record(Symbol(head.data.decode()), tuple(map(_lift, x[1:])))
        if head.__class__ is ExtType and head.code == GENERIC_RECORD:
            return Record(_lift(x[1]), tuple(map(_lift, x[2:])))
        if head.__class__ is ExtType and head.code == SET:
            return frozenset(map(_lift, x[1:]))
        return tuple(map(_lift, x))
    return x  # None, bool, int, str, bytes


def depth(v: Value) -> int:
    """The nesting depth of ``v`` as :class:`Limits` counts it (``[[1]]`` has depth 2)."""
    cls = v.__class__
    if cls is Record:
        children: tuple = (v.label, *v.fields)
    elif cls is FrozenDict:
        children = tuple(item for pair in v.items() for item in pair)
    elif cls in (tuple, frozenset):
        children = tuple(v)
    else:
        return 0
    return 1 + max(map(depth, children), default=0)


def test_the_reference_agrees_with_itself_on_examples():
    v = Record(
        Symbol("a"), (1, -0.0, NAN, 2**70, Symbol("s"), frozenset({1}), FrozenDict({(1,): 2}))
    )
    assert identical(naive_decode(naive_encode(v)), v)


@given(values())
def test_the_codec_decodes_what_the_reference_encodes(v):
    assert identical(decode(naive_encode(v)), v)


@given(values())
def test_the_reference_decodes_what_the_codec_encodes(v):
    assert identical(naive_decode(encode(v)), v)


def batch(items: list[Value], padding: int) -> Record:
    """A turn-like packet whose frame is big: the checks of big frames apply to it."""
    blob = bytes(range(256)) * padding  # payload bytes that look like NaNs and containers
    return Record(Symbol("turn"), (tuple((i, blob, v) for i, v in enumerate(items)),))


@settings(max_examples=60)
@given(st.lists(values(), min_size=1, max_size=8), st.integers(1, 12), st.integers(0, 12))
def test_a_frame_is_refused_exactly_when_the_reference_depth_exceeds_the_limit(
    items, max_depth, padding
):
    v = batch(items, padding)
    limits = Limits(max_depth=max_depth)
    if depth(v) > max_depth:
        with pytest.raises(CodecError, match=rf"nested deeper than max_depth \({max_depth}\)"):
            decode(naive_encode(v), limits=limits)
    else:
        assert identical(decode(naive_encode(v), limits=limits), v)


@pytest.mark.parametrize("extra", [-1, 0, 1])
@pytest.mark.parametrize("leaf", [(), (1,), Record(Symbol("x"), ()), FrozenDict()])
def test_a_big_frame_at_the_default_limit(extra, leaf):
    """Around depth 64, in a frame big enough for the stack check, whatever ends the chain
    (an empty container counts as a level, though msgpack does not stack it)."""
    deep: Value = leaf
    while depth(deep) < 64 - 3 + extra:  # the batch adds turn > events > event
        deep = (deep,)
    v = batch([deep], padding=12)
    assert len(naive_encode(v)) > 2048
    if depth(v) > 64:
        with pytest.raises(CodecError, match=r"nested deeper than max_depth \(64\)"):
            decode(naive_encode(v))
    else:
        assert identical(decode(naive_encode(v)), v)


@given(values(), st.integers(0, 12))
def test_msgpack_stack_check_measures_depth_as_limits_count_it(v, d):
    assert _nests_at_most(naive_encode(v), d) == (depth(v) <= d)
