"""Tests of feds.codec: msgpack round trips, robustness against bad input, limits, frames."""

from __future__ import annotations

import math
import struct

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

import feds.codec as codec
from feds.codec import (
    BIGINT,
    CACHED,
    DEFINE,
    EMBEDDED,
    GENERIC_RECORD,
    NEED_DATA,
    RECORD,
    SET,
    SYMBOL,
    CodecError,
    Decoder,
    Encoder,
    FrameDecoder,
    Limits,
    decode,
    encode,
    encode_frame,
    record_head,
)
from feds.syntax import parse
from feds.values import NAN, Embedded, FrozenDict, Record, Symbol, Value, check_value, record
from tests.strategies import identical, values


class Ref(Embedded):
    """A test reference to entity number ``n``."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ref) and other.n == self.n

    def __hash__(self) -> int:
        return hash(("Ref", self.n))

    def __repr__(self) -> str:
        return f"Ref({self.n})"


class RefHooks:
    """Embedded hooks that put a reference on the wire as ``<ref n>``."""

    def encode_embedded(self, obj: Embedded) -> Value:
        assert isinstance(obj, Ref)
        return record("ref", obj.n)

    def decode_embedded(self, v: Value) -> Embedded:
        if not (isinstance(v, Record) and v.label == Symbol("ref") and len(v) == 1):
            raise CodecError(f"bad reference {v!r}")
        return Ref(v[0])


def ext(code: int, payload: bytes = b"") -> bytes:
    return msgpack.packb(msgpack.ExtType(code, payload))


def array(*parts: bytes) -> bytes:
    """A msgpack array (of at most 15 items) of already encoded items."""
    return bytes([0x90 + len(parts)]) + b"".join(parts)


def decode_or_error(data: bytes, **kwargs) -> Value | CodecError:
    """Decode, allowing only CodecError; a returned value must be a well-formed feds value."""
    try:
        v = decode(data, **kwargs)
    except CodecError as e:
        return e
    check_value(v)
    return v


# ---------------------------------------------------------------------------------------------
# Round trips


@given(values())
def test_round_trip(v):
    assert identical(decode(encode(v)), v)


@given(values())
def test_round_trip_through_a_frame(v):
    frames = FrameDecoder()
    frames.feed(encode_frame(v))
    (got,) = list(frames.frames())
    assert identical(got, v)


def test_negative_zero_keeps_its_sign():
    assert math.copysign(1.0, decode(encode(-0.0))) == -1.0
    assert math.copysign(1.0, decode(encode((-0.0,)))[0]) == -1.0


@pytest.mark.parametrize(
    "nan_bytes",
    [
        b"\xcb" + struct.pack(">d", float("nan")),
        b"\xcb\x7f\xf0\x00\x00\x00\x00\x00\x01",  # a signalling NaN
        b"\xcb\xff\xf8\x00\x00\x00\x00\x00\x00",  # negative NaN
        b"\xca\x7f\xc0\x00\x00",  # float32 NaN
    ],
)
def test_nan_decodes_to_the_canonical_object(nan_bytes):
    assert decode(nan_bytes) is NAN
    assert decode(b"\x91" + nan_bytes)[0] is NAN
    assert decode(array(ext(SET), nan_bytes)) == frozenset([NAN])
    assert decode(b"\x81" + nan_bytes + b"\x01") == FrozenDict({NAN: 1})
    assert decode(array(ext(RECORD, b"a"), nan_bytes)) == record("a", NAN)
    assert decode(array(ext(GENERIC_RECORD), b"\xa1a", nan_bytes)) == Record("a", (NAN,))


def test_floats_are_always_float64():
    assert encode(1.5) == b"\xcb" + struct.pack(">d", 1.5)


def test_wire_forms():
    assert encode(Symbol("ab")) == ext(SYMBOL, b"ab")
    assert encode(record("a", 1)) == array(ext(RECORD, b"a"), b"\x01")
    assert encode(Record(1, (2,))) == array(ext(GENERIC_RECORD), b"\x01", b"\x02")
    assert encode(frozenset([1])) == array(ext(SET), b"\x01")
    assert encode(2**64) == ext(BIGINT, b"\x01" + bytes(8))
    assert encode(-(2**63) - 1) == ext(BIGINT, b"\xff\x7f" + b"\xff" * 7)
    assert encode(2**64 - 1) == b"\xcf" + b"\xff" * 8
    assert encode((1, "a", b"b", None, True)) == b"\x95\x01\xa1a\xc4\x01b\xc0\xc3"
    assert encode(FrozenDict({(1,): 2})) == b"\x81\x91\x01\x02"


def test_dict_keys_can_be_any_value():
    v = FrozenDict({record("k", 1): 1, (1, 2): 2, frozenset([3]): 3, 4.5: 4, None: 5})
    assert decode(encode(v)) == v


def test_embedded_with_hooks():
    hooks = RefHooks()
    v = record("observe", "pattern", Ref(7), (Ref(8),))
    data = encode(v, embedded=hooks)
    assert decode(data, embedded=hooks) == v
    assert Encoder(hooks).encode(v) == data
    assert Decoder(hooks).decode(data) == v


def test_embedded_without_hooks():
    with pytest.raises(CodecError, match="without embedded hooks"):
        encode(record("x", Ref(1)))
    data = encode(Ref(1), embedded=RefHooks())
    with pytest.raises(CodecError, match="no embedded hooks"):
        decode(data)


def test_embedded_hook_failures_become_codec_errors():
    class Failing(RefHooks):
        def decode_embedded(self, v: Value) -> Embedded:
            raise KeyError(v)

    data = encode(Ref(1), embedded=RefHooks())
    with pytest.raises(CodecError, match="cannot decode embedded reference"):
        decode(data, embedded=Failing())
    with pytest.raises(CodecError, match="bad reference"):
        decode(array(ext(EMBEDDED), b"\x01"), embedded=RefHooks())


class PairHooks(RefHooks):
    """Hooks that put a reference on the wire as two integers, as a relay does."""

    def encode_embedded(self, obj: Embedded) -> Value:
        assert isinstance(obj, Ref)
        return (0, obj.n)

    def decode_embedded(self, v: Value) -> Embedded:
        return Ref(v[1])


def test_a_record_head_and_fields_encode_as_the_record():
    value = record("bench", 1, Symbol("x"), (Ref(2),))
    data = encode([record_head(Symbol("message")), value, 3], embedded=RefHooks())
    assert data == encode(record("message", value, 3), embedded=RefHooks())
    assert decode(data, embedded=RefHooks()) == record("message", value, 3)


def test_two_integer_references_take_the_short_path_with_the_same_errors():
    data = encode(record("x", Ref(7)), embedded=PairHooks())
    assert decode(data, embedded=PairHooks()) == record("x", Ref(7))
    with pytest.raises(CodecError, match="no embedded hooks"):
        decode(data)
    nested = encode((Ref(7), 1), embedded=PairHooks())  # the reference is not the last item
    with pytest.raises(CodecError, match="nested deeper than max_depth"):
        decode(nested, embedded=PairHooks(), limits=Limits(max_depth=1))

    class Failing(PairHooks):
        def decode_embedded(self, v: Value) -> Embedded:
            raise KeyError(v)

    with pytest.raises(CodecError, match=r"cannot decode embedded reference \(0, 7\)"):
        decode(data, embedded=Failing())


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([1], None),  # lists are accepted (as sequences)
        (object(), "not a feds value"),
        ({1, 2}, "not a feds value"),
        ("\ud800", "surrogate"),
    ],
)
def test_encode_accepts_and_rejects(value, message):
    if message is None:
        assert decode(encode(value)) == (tuple(value) if isinstance(value, list) else value)
    else:
        with pytest.raises(CodecError, match=message):
            encode(value)


def test_huge_integers():
    n = 3 ** (2**20)
    assert decode(encode(n)) == n
    assert decode(encode(-n)) == -n


# ---------------------------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "truncated data"),
        (b"\x92\x01", "truncated data"),
        (b"\xa5ab", "truncated data"),
        (b"\x01\x02", "unexpected bytes after the end of a value"),
        (b"\xc1", "reserved type byte"),
        (b"\xa2\xff\xfe", "invalid UTF-8 in a string"),
        (ext(SYMBOL, b"\xff"), "invalid UTF-8 in a symbol"),
        (array(ext(RECORD, b"\xff")), "invalid UTF-8 in a symbol"),
        (ext(9, b"\x00"), "unknown ext type code 9"),
        (ext(CACHED, b"\x00\x00"), "cache slot 0 is not defined"),  # no cache: no slot
        (array(ext(DEFINE, b"\x00\x00x")), "cache slot 0 out of range \\(0 slots\\)"),
        (array(ext(GENERIC_RECORD)), "a record with no label"),
        (array(ext(SET, b"x")), "the head ext type 3 must have an empty payload"),
        (array(ext(EMBEDDED, b"x"), b"\x01"), "the head ext type 5 must have an empty payload"),
        (ext(RECORD, b"a"), "not first in an array"),
        (array(b"\x01", ext(RECORD, b"a")), "not first in an array"),
        (array(ext(GENERIC_RECORD), ext(SET)), "not first in an array"),
        (b"\x81" + ext(SET) + b"\x01", "not first in an array"),
        (array(ext(SET), b"\x01", b"\x01"), "duplicate element in a set"),
        (array(ext(SET), b"\x01", b"\xcb" + struct.pack(">d", 1.0)), "duplicate element in a set"),
        (array(ext(EMBEDDED), b"\x01", b"\x02"), "must be \\[head, value\\]"),
        (array(ext(EMBEDDED), b"\x01"), "no embedded hooks"),
        (ext(BIGINT, b""), "an empty big integer"),
        (b"\x82\x01\x01\x01\x02", "duplicate key in a dict"),
        (b"\xd6\xff\x00\x00\x00\x00", "unsupported data in message: Timestamp"),
        (b"\x91\xd7\xff" + bytes(8), "unsupported data in message: Timestamp"),
        (b"\xc7\x03\xff\x00\x00\x00", "invalid data"),
        (b"\xdd\xff\xff\xff\xff", "collection too long"),
        (b"\x91" * 2000 + b"\x00", "nested deeper than max_depth"),
    ],
)
def test_bad_input(data, message):
    with pytest.raises(CodecError, match=message):
        decode(data)


@given(st.binary(max_size=64))
def test_arbitrary_bytes_give_a_value_or_codec_error(data):
    decode_or_error(data)
    decode_or_error(data, embedded=RefHooks())


@st.composite
def mutated_encodings(draw: st.DrawFn) -> bytes:
    data = bytearray(encode(draw(values())))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "byte"]))
        i = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "byte" and data:
            data[i] = draw(st.integers(0, 255))
        elif op == "insert":
            data.insert(i, draw(st.integers(0, 255)))
        elif op == "delete" and data:
            del data[i]
        elif op == "truncate":
            del data[i:]
    return bytes(data)


@given(mutated_encodings())
def test_mutated_encodings_give_a_value_or_codec_error(data):
    decode_or_error(data)


@given(st.lists(mutated_encodings(), max_size=4), st.data())
def test_frame_decoder_on_mutated_frames(bodies, data):
    stream = b"".join(len(b).to_bytes(4, "big") + b for b in bodies)
    if stream:
        cut = data.draw(st.integers(0, len(stream)))
        stream = stream[:cut]
    frames = FrameDecoder()
    frames.feed(stream)
    while True:
        try:
            if frames.next_value() is NEED_DATA:
                break
        except CodecError:
            continue


STAMPS = [
    b"\xd6\xff" + bytes(4),
    b"\xd7\xff" + bytes(8),
    b"\xc7\x04\xff" + bytes(4),
    b"\xc7\x08\xff" + bytes(8),
    b"\xc7\x0c\xff" + bytes(12),
    b"\xc8\x00\x0c\xff" + bytes(12),
    b"\xc9\x00\x00\x00\x08\xff" + bytes(8),
]
NANS = [b"\xca" + struct.pack(">f", math.nan), b"\xcb" + struct.pack(">d", -math.nan)]


@given(st.binary(max_size=700), st.binary(max_size=700), st.sampled_from(STAMPS + NANS))
def test_the_bytes_of_a_nan_or_a_timestamp_are_always_noticed(before, after, special):
    """Whatever surrounds them, in a small frame (one scan) or a big one (byte by byte)."""
    assert codec._special_bytes(before + special + after)


_PLAIN_ITEMS = st.one_of(
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.binary(max_size=20),
)


@given(
    st.lists(_PLAIN_ITEMS, max_size=300),
    st.lists(_PLAIN_ITEMS, max_size=300),
    st.sampled_from(STAMPS + NANS),
)
def test_a_nan_or_a_timestamp_among_many_values_is_always_noticed(before, after, special):
    """Big frames of encoded values, where each 0x7f or 0xff byte is looked at with its
    neighbours rather than the frame being taken as special after a few of them."""
    data = msgpack.packb(before) + special + msgpack.packb(after)
    assert codec._special_bytes(data)


def test_a_big_batch_of_finite_floats_and_integers_is_not_special():
    """A finite float never starts with 0x7f or 0xff; integers and text that hold those bytes
    elsewhere do not make a batch special (the decoder then looks at no container's items)."""
    rows = [(i, f"row-{i}", i / 2, -i / 3, i * 997) for i in range(2000)]
    data = msgpack.packb(rows)
    assert data.count(0x7F) + data.count(0xFF) > 100
    assert not codec._special_bytes(data)
    assert decode(data) == tuple(rows)


@pytest.mark.parametrize("stamp", STAMPS)
def test_every_timestamp_encoding_is_refused(stamp):
    for data in (stamp, array(b"\x01", stamp), b"\x81" + stamp + b"\x01"):
        with pytest.raises(CodecError, match="unsupported data in message: Timestamp"):
            decode(data)


def test_nan_beside_payload_bytes_is_still_canonical():
    v = decode(array(b"\xc4\x02\x7f\xff", b"\xcb\x7f\xf8" + bytes(6)))
    assert v[0] == b"\x7f\xff"
    assert v[1] is NAN


def test_payload_bytes_alone_need_no_walk_over_the_value(monkeypatch):
    walked: list[Value] = []
    monkeypatch.setattr(codec, "_scan", lambda v, *args: walked.append(v))
    payloads = [bytes(range(256)), b"\x7f\xff" * 8, b"\xca\x00\x7f\xcb\xd6\x04", b"\xff" * 17]
    for marker in (b"\xca\x7f\xc0", b"\xcb\xff\xf8", b"\xd7\xff", b"\x0c\xff"):
        payloads.append(marker + bytes(8))  # NaN's and timestamps' first bytes, in a payload
    for payload in payloads:
        v = record("bench", 1, payload)
        assert decode(encode(v)) == v
        big = record("turn", tuple(record("bench", i, payload) for i in range(100)))
        assert decode(encode(big)) == big
    assert walked == []


# ---------------------------------------------------------------------------------------------
# Limits


def nested_tuples(depth: int) -> Value:
    v: Value = 0
    for _ in range(depth):
        v = (v,)
    return v


def nested_records(depth: int) -> Value:
    v: Value = 0
    for _ in range(depth):
        v = Record(Symbol("r"), (v,))
    return v


def nested_mixed(depth: int) -> Value:
    v: Value = 0
    for i in range(depth):
        v = [(v,), Record(Symbol("r"), (v,)), frozenset([v]), FrozenDict({0: v})][i % 4]
    return v


@pytest.mark.parametrize("nest", [nested_tuples, nested_records, nested_mixed])
def test_depth_limit(nest):
    limits = Limits(max_depth=10)
    assert decode(Encoder().encode(nest(10)), limits=limits) == nest(10)
    with pytest.raises(CodecError, match="nested deeper than max_depth"):
        decode(Encoder().encode(nest(11)), limits=limits)
    assert decode(encode(nest(64))) == nest(64)
    with pytest.raises(CodecError, match="nested deeper than max_depth"):
        decode(encode(nest(65)))


@pytest.mark.parametrize("levels", [65, 500, 1000, 5000])
def test_depth_limit_on_raw_nested_records(levels):
    data = b"\x00"
    for _ in range(levels):  # each level is a record whose only field is the next level
        data = array(ext(RECORD, b"r"), data)
    with pytest.raises(CodecError, match="nested"):
        decode(data)
    if levels > 400:
        with pytest.raises(CodecError, match="nested"):
            decode(data, embedded=RefHooks(), limits=Limits(max_depth=400))


class WrapHooks(RefHooks):
    """Hooks that accept any value as a reference."""

    def decode_embedded(self, v: Value) -> Embedded:
        return Ref(v)


class ReentrantHooks(RefHooks):
    """Hooks whose decoding of a reference decodes something else with the same decoder."""

    decoder: Decoder

    def decode_embedded(self, v: Value) -> Embedded:
        assert self.decoder.decode(encode(record("inner", 1))) == record("inner", 1)
        return super().decode_embedded(v)


def test_a_hook_decoding_with_the_same_decoder_leaves_the_outer_checks_in_place():
    hooks = ReentrantHooks()
    hooks.decoder = decoder = Decoder(hooks)
    got = decoder.decode(encode((Ref(1), float("nan")), embedded=hooks))  # inner: no 0x7f/0xff
    assert got == (Ref(1), NAN) and got[1] is NAN


def test_depth_limit_inside_embedded_payloads():
    hooks = WrapHooks()
    data = array(ext(EMBEDDED), msgpack.packb(nested_tuples(5)))
    with pytest.raises(CodecError, match="nested deeper than max_depth"):
        decode(data, embedded=hooks, limits=Limits(max_depth=5))
    assert decode(data, embedded=hooks, limits=Limits(max_depth=6)) == Ref(nested_tuples(5))


def test_encoder_refuses_values_nested_beyond_msgpack_limit():
    with pytest.raises(CodecError, match="nested too deeply"):
        encode(nested_records(2000))


def test_collection_length_limit():
    limits = Limits(max_collection_length=5)
    ok = [
        tuple(range(5)),
        frozenset(range(4)),  # a set's array also holds its head
        FrozenDict({i: i for i in range(5)}),
        Record(Symbol("r"), tuple(range(4))),
    ]
    for v in ok:
        assert decode(encode(v), limits=limits) == v
    for v in [
        tuple(range(6)),
        frozenset(range(5)),
        FrozenDict({i: i for i in range(6)}),
        Record(Symbol("r"), tuple(range(5))),
        (tuple(range(6)),),
    ]:
        with pytest.raises(CodecError, match="collection too long"):
            decode(encode(v), limits=limits)


def test_frame_size_limit():
    limits = Limits(max_frame_size=100)
    assert decode(encode(b"x" * 90), limits=limits) == b"x" * 90
    with pytest.raises(CodecError, match="more than max_frame_size"):
        decode(encode(b"x" * 100), limits=limits)
    with pytest.raises(CodecError, match="more than max_frame_size"):
        Encoder(limits=limits).encode_frame(b"x" * 100)


def test_limits_must_be_positive():
    with pytest.raises(ValueError):
        Limits(max_depth=0)
    with pytest.raises(ValueError):
        Limits(max_frame_size=2**32)


# ---------------------------------------------------------------------------------------------
# Frames


@given(st.lists(values(), max_size=5), st.data())
def test_random_chunking_gives_the_same_values(vs, data):
    stream = b"".join(encode_frame(v) for v in vs)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    frames = FrameDecoder()
    got = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        frames.feed(stream[start:end])
        got.extend(frames.frames())
    assert len(got) == len(vs)
    assert all(identical(a, b) for a, b in zip(got, vs, strict=True))
    assert frames.buffered == 0


@given(st.lists(values(), max_size=5), st.data())
def test_whole_frames_taken_past_the_buffer_give_the_same_values(vs, data):
    """A reader that tries ``whole`` on each chunk first, and feeds what it refuses, reads the
    same values as one that feeds everything, whatever the chunks."""
    stream = b"".join(encode_frame(v) for v in vs)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    frames = FrameDecoder()
    got = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        body = frames.whole(stream[start:end])
        if body is not None:
            got.append(frames.decoder.decode(body))
            continue
        frames.feed(stream[start:end])
        got.extend(frames.frames())
    assert len(got) == len(vs)
    assert all(identical(a, b) for a, b in zip(got, vs, strict=True))
    assert frames.buffered == 0


def test_whole_takes_only_exactly_one_frame_with_nothing_buffered():
    frames = FrameDecoder(limits=Limits(max_frame_size=1000))
    one = encode_frame("one")
    assert frames.whole(one) == one[4:]
    assert frames.buffered == 0
    assert frames.whole(one + one) is None  # two frames
    assert frames.whole(one[:-1]) is None  # part of one
    assert frames.whole(b"\x00\x00") is None  # part of a header
    assert frames.whole(memoryview(one)) is None  # not bytes: fed instead
    frames.feed(one[:2])
    assert frames.whole(one) is None  # behind buffered bytes, it is not a frame of its own
    big = (1001).to_bytes(4, "big") + b"x" * 1001
    assert FrameDecoder(limits=Limits(max_frame_size=1000)).whole(big) is None  # feed refuses


def test_whole_frames_are_inspected():
    frames = FrameDecoder()
    seen = []
    frames.inspect = seen.append
    assert frames.whole(encode_frame(1)) == encode_frame(1)[4:]
    assert seen == [encode_frame(1)[4:]]

    def refuse(frame: bytes) -> None:
        raise CodecError("refused")

    frames.inspect = refuse
    with pytest.raises(CodecError, match="refused"):
        frames.whole(encode_frame(2))
    frames.inspect = None
    assert frames.whole(encode_frame(3)) == encode_frame(3)[4:]  # the refused one was consumed


def test_next_value_needs_data():
    frames = FrameDecoder()
    assert frames.next_value() is NEED_DATA
    frame = encode_frame(None)
    frames.feed(frame[:3])
    assert frames.next_value() is NEED_DATA
    frames.feed(frame[3:])
    assert frames.next_value() is None
    assert frames.next_value() is NEED_DATA


def test_oversized_frame_is_refused_from_its_header():
    frames = FrameDecoder(limits=Limits(max_frame_size=1000))
    frames.feed(encode_frame("ok"))
    with pytest.raises(CodecError, match="frame of 1001 bytes announced"):
        frames.feed((1001).to_bytes(4, "big"))
    with pytest.raises(CodecError):
        frames.feed(b"more")
    with pytest.raises(CodecError):
        frames.next_value()


def test_oversized_frame_later_in_one_chunk():
    frames = FrameDecoder(limits=Limits(max_frame_size=1000))
    with pytest.raises(CodecError, match="frame of 4294967295 bytes"):
        frames.feed(encode_frame(1) + b"\xff\xff\xff\xff")


def test_bad_frame_body_is_consumed():
    frames = FrameDecoder()
    frames.feed(b"\x00\x00\x00\x02\x01\x02" + encode_frame("next"))
    with pytest.raises(CodecError, match="unexpected bytes"):
        frames.next_value()
    assert frames.next_value() == "next"


def test_empty_frame_is_an_error():
    frames = FrameDecoder()
    frames.feed(b"\x00\x00\x00\x00")
    with pytest.raises(CodecError, match="truncated"):
        frames.next_value()


def test_frame_decoder_compacts_its_buffer():
    frames = FrameDecoder()
    big = encode_frame(b"x" * 70000)
    frames.feed(big + big[:10])
    assert frames.next_value() == b"x" * 70000
    assert frames.buffered == 10
    frames.feed(big[10:])
    assert frames.next_value() == b"x" * 70000
    assert frames.buffered == 0


def test_frame_decoder_with_embedded_hooks():
    hooks = RefHooks()
    frames = FrameDecoder(embedded=hooks)
    frames.feed(encode_frame(record("x", Ref(3)), embedded=hooks))
    assert list(frames) == [record("x", Ref(3))]


def test_typical_record():
    v = parse('<temp "room-17" 21.5>')
    assert decode(encode(v)) == v
    assert len(encode(v)) == 24


def _nested(depth: int) -> Value:
    v: Value = 1
    for _ in range(depth):
        v = (v,)
    return v


@given(
    value=st.one_of(values(), st.integers(55, 66).map(_nested)),
    within=st.integers(0, 4),
)
def test_a_value_decoded_within_a_frame_is_what_the_whole_frame_decodes_it_to(
    value: Value, within: int
) -> None:
    """``Decoder.decode(data, within)``, the value alone, as deep as it sits in its frame: the
    very value (or the very error) of decoding the whole frame around it."""
    encoder = codec.Encoder()
    inner = encoder.encode(value)
    frame = b"\x91" * within + inner
    whole, alone = codec.Decoder(), codec.Decoder()
    try:
        expected = whole.decode(frame)
    except CodecError as e:
        with pytest.raises(CodecError) as raised:
            alone.decode(inner, within)
        assert str(raised.value) == str(e)
        return
    for _ in range(within):
        (expected,) = expected
    assert identical(alone.decode(inner, within), expected)


@given(value=st.one_of(values(), st.integers(58, 62).map(_nested)))
def test_plain_data_is_data_with_no_ext_type_and_no_map_that_decodes(value: Value) -> None:
    """``Decoder.is_plain`` against a naive reading of the bytes: msgpack alone decodes them
    (no hook but to refuse), and the decoder takes them as deep as they are."""
    data = codec.Encoder().encode(value)
    decoder = codec.Decoder()
    try:
        msgpack.unpackb(data, ext_hook=_refuse, object_pairs_hook=_refuse)
        decoder.decode(b"\x91\x91\x91" + data)
        plain = len(data) <= 2048
    except (ValueError, CodecError):
        plain = False
    if decoder.is_plain(data, 3):
        assert plain
    elif plain:  # refused only for bytes that may start too many containers
        assert codec._containers(data) > codec.DEFAULT_LIMITS.max_depth - 3


def _refuse(*args: object) -> None:
    raise ValueError("not plain")
