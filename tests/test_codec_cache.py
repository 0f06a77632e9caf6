"""Tests of the value cache an Encoder and a Decoder share over one stream (DEFINE, CACHED)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from feds.codec import (
    CACHE_MAX_TEXT,
    CACHE_MAX_WEIGHT,
    CACHED,
    DEFINE,
    CodecError,
    Decoder,
    Encoder,
    FrameDecoder,
    Limits,
    decode,
    encode,
)
from feds.syntax import parse
from feds.values import FrozenDict, Record, Symbol, Value, record
from tests.strategies import identical, patterns, values
from tests.test_codec import Ref, RefHooks, array, ext


def interned(text: str) -> Value:
    """The value of ``text`` as this thread's decoder interns it (as a relay would forward it)."""
    v = decode(encode(parse(text)))
    assert decode(encode(v)) is v, "not interned"
    return v


def pair(slots: int = 16, **kwargs: object) -> tuple[Encoder, Decoder]:
    return Encoder(cache_slots=slots, **kwargs), Decoder(cache_slots=slots, **kwargs)  # type: ignore[arg-type]


def fresh_pattern() -> Value:
    """A subscription pattern, freshly interned (other tests may have churned the table)."""
    return interned("<group <rec bench> {0: <bind <_>> 1: <bind <_>>}>")


def slot(n: int) -> bytes:
    return n.to_bytes(2, "big")


def records_in(v: Value) -> list[Value]:
    """Every record inside ``v`` (``v`` included), through records and dicts."""
    if isinstance(v, Record):
        return [v, *(r for f in v.fields for r in records_in(f))]
    if isinstance(v, FrozenDict):
        return [r for item in v.values() for r in records_in(item)]
    return []


def test_a_repeated_record_is_sent_once_then_by_its_slot():
    pat = fresh_pattern()
    encoder, decoder = pair()
    first = encoder.encode(record("pub", 1, pat))
    second = encoder.encode(record("pub", 2, pat))
    assert len(second) < len(first) - 20
    assert ext(CACHED, slot(0)) in second  # the outermost record took the first slot
    got = [decoder.decode(first), decoder.decode(second), decoder.decode(second)]
    assert got == [record("pub", 1, pat), record("pub", 2, pat), record("pub", 2, pat)]
    assert got[0].fields[1] is got[1].fields[1] is got[2].fields[1] is pat  # interned too


def test_the_decoded_object_of_a_repeated_value_is_the_same_every_time():
    v = interned('<present "alice" <status online>>')
    encoder, decoder = pair()
    decoded = [decoder.decode(encoder.encode((i, v)))[1] for i in range(50)]
    assert all(d is v for d in decoded)


def test_values_not_interned_are_sent_plainly():
    encoder, decoder = pair()
    for v in [parse("<x 1>"), parse('<x "a">'), record("x", 1.5), record("x", b"b")]:
        assert encoder.encode(v) == encode(v)  # not interned here: never defined
        assert decoder.decode(encoder.encode(v)) == v


def test_a_value_in_steady_use_keeps_its_slot_while_others_pass_through():
    encoder, decoder = pair(slots=4)
    hot = interned('<hot "pattern">')
    assert decoder.decode(encoder.encode(hot)) is hot
    for i in range(100):
        cold = interned(f'<cold "{i}">')
        assert decoder.decode(encoder.encode(cold)) is cold
        data = encoder.encode(hot)
        assert len(data) == 4 and decoder.decode(data) is hot


def test_slots_are_reused_and_both_ends_stay_in_step():
    encoder, decoder = pair(slots=3)
    vs = [interned(f'<item "{i}" <kind "k">>') for i in range(10)]
    for _ in range(3):
        for v in vs:
            data = encoder.encode(v)
            assert decoder.decode(data) is v
    assert len(encoder._cached) == len(decoder._cached) == 3
    # the last three are still cached, at both ends
    for v in vs[-1:]:
        assert encoder.encode(v) == ext(CACHED, slot(encoder._slots.index(encoder._cached[id(v)])))
        assert decoder.decode(encoder.encode(v)) is v


def test_one_encoding_with_more_definitions_than_slots_stays_in_step():
    # The encoder numbers definitions outside in, the decoder fills slots inside out: had
    # <c ...> taken back the slot of <a ...> while it was being encoded, they would differ.
    encoder, decoder = pair(slots=2)
    v = interned('<a <b <c <d <e "x">>>>>')
    assert decoder.decode(encoder.encode(v)) is v
    for part in records_in(v):
        assert decoder.decode(encoder.encode(part)) is part
    w = interned('<f <g "y"> <h "z"> <i "w">>')
    assert decoder.decode(encoder.encode((w, v, w))) == (w, v, w)


def test_a_failed_encoding_defines_nothing():
    pat = fresh_pattern()
    encoder, decoder = pair()
    with pytest.raises(CodecError):
        encoder.encode((pat, object()))  # type: ignore[arg-type]
    assert not encoder._cached
    data = encoder.encode(pat)  # defined again, since the decoder never saw the first
    assert decoder.decode(data) is pat and len(data) > 4


def test_an_encoding_over_max_size_defines_nothing():
    pat = fresh_pattern()
    encoder, decoder = pair()
    with pytest.raises(CodecError, match="more than max_frame_size allows"):
        encoder.encode((pat, b"x" * 100), max_size=100)
    assert decoder.decode(encoder.encode(pat)) is pat
    assert decoder.decode(encoder.encode(pat)) is pat


def test_an_undone_encoding_restores_the_slots_it_reused():
    encoder, decoder = pair(slots=2)
    a, b, c = (interned(f"<v {n}>") for n in ("a", "b", "c"))
    assert decoder.decode(encoder.encode((a, b))) == (a, b)
    with pytest.raises(CodecError):
        encoder.encode((c, object()))  # type: ignore[arg-type]  # c evicted a, then failed
    for v in (a, b, c, a, b):
        assert decoder.decode(encoder.encode(v)) is v
    assert len(encoder.encode(b)) == 4  # b is cached again (a slot reference)


def test_encode_all_encodes_each_value_as_encode_would():
    pat = fresh_pattern()
    encoder, decoder = pair(slots=2)
    values = [(1, pat), (2, pat), "x", interned("<v a>"), interned("<v b>"), interned("<v c>")]
    encodings = encoder.encode_all(values, 1000)
    assert encodings is not None and len(encodings) == len(values)
    assert len(encodings[1]) < len(encodings[0])  # the second refers to the first's slot
    decoded = [decoder.decode(data) for data in encodings]
    assert decoded == values and decoded[1][1] is pat  # three definitions, two slots: in step
    for v in values:
        assert decoder.decode(encoder.encode(v)) == v


def test_encode_all_of_a_run_with_a_failure_defines_nothing():
    pat = fresh_pattern()
    encoder, decoder = pair()
    assert encoder.encode_all([(1, pat), object()], 1000) is None  # type: ignore[list-item]
    assert encoder.encode_all([(1, pat), b"x" * 100], 100) is None  # one is too long
    assert not encoder._cached
    data = encoder.encode(pat)  # defined now, since the decoder never saw the runs
    assert decoder.decode(data) is pat and len(data) > 4


def test_a_value_with_a_reference_is_sent_plainly_around_its_cached_parts():
    pat = fresh_pattern()
    encoder = Encoder(RefHooks(), cache_slots=16)
    decoder = Decoder(RefHooks(), cache_slots=16)
    v = record("x", Ref(1), pat, 1.5)
    for _ in range(2):
        assert decoder.decode(encoder.encode(v)) == v
    assert set(encoder._cached) == {id(r) for r in records_in(pat)}


def test_a_heavy_interned_value_is_sent_plainly():
    leaf = interned("<leaf a b c d e f g h i j k l m n o>")  # weight 16
    level = interned("<level " + " ".join(["<leaf a b c d e f g h i j k l m n o>"] * 16) + ">")
    assert level.fields[0] is leaf
    encoder, decoder = pair()
    for _ in range(2):
        assert decoder.decode(encoder.encode(level)) is level
    assert list(encoder._cached) == [id(leaf)]  # 1 + 16 * 16 > CACHE_MAX_WEIGHT
    assert encoder._uncacheable == {id(level): level}


def test_a_cached_value_counts_its_depth():
    limits = Limits(max_depth=8)
    encoder, decoder = pair(limits=limits)
    v = interned("<a <b <c <d x>>>>")  # depth 4
    assert decoder.decode(encoder.encode(v)) is v
    deep: Value = v
    for _ in range(4):
        deep = (deep,)
    assert decoder.decode(encoder.encode(deep)) == deep
    with pytest.raises(CodecError, match="nested deeper than max_depth"):
        decoder.decode(encoder.encode((deep,)))


def test_a_cached_value_counts_its_depth_inside_a_big_frame():
    encoder, decoder = pair()
    v = interned("<a <b <c <d x>>>>")
    assert decoder.decode(encoder.encode(v)) is v
    ok: Value = v
    for _ in range(59):
        ok = (ok,)
    big = record("turn", *range(200), ok)
    assert decoder.decode(encoder.encode(big)) == big
    with pytest.raises(CodecError, match="nested deeper than max_depth"):
        decoder.decode(encoder.encode(record("turn", *range(200), (ok,))))


# -- bad input --------------------------------------------------------------------------------


def defining(n: int, label: bytes, *fields: bytes) -> bytes:
    return array(ext(DEFINE, slot(n) + label), *fields)


SMALL = defining(0, b"a", b"\xa1x")  # slot 0 := <a "x">


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (ext(CACHED, slot(1)), "cache slot 1 is not defined"),
        (ext(CACHED, slot(16)), "cache slot 16 is not defined"),
        (ext(CACHED, b"\x00"), "must be 2 bytes"),
        (ext(CACHED, b"\x00\x00\x00"), "must be 2 bytes"),
        (array(ext(DEFINE, b"\x00")), "must start with a 2-byte cache slot"),
        (defining(16, b"a", b"\x01"), "cache slot 16 out of range \\(16 slots\\)"),
        (defining(1, b"\xff", b"\x01"), "invalid UTF-8"),
        (defining(1, b"a", b"\xcb" + bytes(8)), "may not be cached"),  # a float
        (defining(1, b"a", b"\xc4\x01x"), "may not be cached"),  # bytes
        (defining(1, b"a", b"\xc3"), "may not be cached"),  # a boolean
        (defining(1, b"a", b"\x91\x01"), "may not be cached"),  # a sequence
        (defining(1, b"a", encode(Symbol("s" * (CACHE_MAX_TEXT + 1)))), "may not be cached"),
        (defining(1, b"a", encode(2**64)), "may not be cached"),
        (defining(1, b"a", array(ext(6), b"\x01")), "may not be cached"),  # label not a symbol
        (ext(DEFINE, slot(1) + b"a"), "not first in an array"),
        (array(b"\x01", ext(DEFINE, slot(1) + b"a")), "not first in an array"),
    ],
)
def test_bad_cache_input(data, message):
    decoder = Decoder(cache_slots=16)
    assert decoder.decode(SMALL) == record("a", "x")
    with pytest.raises(CodecError, match=message):
        decoder.decode(data)


def test_a_reference_in_a_definition_is_refused():
    decoder = Decoder(RefHooks(), cache_slots=4)
    reference = encode(Ref(1), embedded=RefHooks())
    with pytest.raises(CodecError, match="may not be cached"):
        decoder.decode(defining(0, b"a", reference))


def test_a_definition_heavier_than_the_limit_is_refused():
    # each slot holds a record of 14 copies of the one before: small bytes, a huge tree
    decoder = Decoder(cache_slots=4)
    decoder.decode(defining(0, b"a", *[b"\x01"] * 14))
    decoder.decode(defining(1, b"b", *[ext(CACHED, slot(0))] * 14))  # weight 1 + 14 * 15
    assert decoder._slots[1].weight == 211 <= CACHE_MAX_WEIGHT
    with pytest.raises(CodecError, match="cache slot 2 defined as a value that may not be"):
        decoder.decode(defining(2, b"c", ext(CACHED, slot(1)), ext(CACHED, slot(1))))


def test_after_an_error_a_decoder_with_a_cache_refuses_everything():
    pat = fresh_pattern()
    encoder, decoder = pair()
    good = encoder.encode(pat)
    with pytest.raises(CodecError, match="not defined"):
        decoder.decode(ext(CACHED, slot(3)))
    with pytest.raises(CodecError, match="not defined"):
        decoder.decode(good)
    frames = FrameDecoder(cache_slots=4)
    frames.feed(b"\x00\x00\x00\x01\xc1" + encoder.encode_frame(None))
    for _ in range(2):
        with pytest.raises(CodecError, match="reserved type byte"):
            frames.next_value()


def test_a_decoder_without_a_cache_still_reads_the_next_frame():
    frames = FrameDecoder()
    frames.feed(b"\x00\x00\x00\x04" + ext(CACHED, slot(0)) + Encoder().encode_frame(None))
    with pytest.raises(CodecError, match="not defined"):
        frames.next_value()
    assert frames.next_value() is None


def test_definitions_are_interned_like_plain_records():
    encoder, decoder = pair()
    v = interned('<plain "record">')
    data = encoder.encode(v)
    assert ext(DEFINE, slot(0) + b"plain") in data
    assert decoder.decode(data) is v
    assert decoder.known_ref_free(v)
    assert not decoder.known_ref_free(record("fresh", 1.5))


def test_the_cache_size_is_bounded():
    with pytest.raises(ValueError):
        Encoder(cache_slots=2**16 + 1)
    with pytest.raises(ValueError):
        Decoder(cache_slots=-1)


# -- random streams ---------------------------------------------------------------------------


@st.composite
def streams(draw: st.DrawFn) -> tuple[int, list[tuple[Value, bool]]]:
    """A cache size, and values to send (some interned) each with whether its encoding fails."""
    pool = draw(st.lists(st.one_of(patterns(), values()), min_size=1, max_size=8))
    pool = [decode(encode(v)) for v in pool]  # interned where they qualify, as a relay gets them
    one = st.sampled_from(pool)
    sent = st.one_of(one, st.lists(one, max_size=3).map(tuple))
    fails = st.integers(0, 3).map(lambda n: n == 0)
    items = draw(st.lists(st.tuples(sent, fails), min_size=1, max_size=30))
    return draw(st.integers(1, 8)), items


class Unencodable:
    """Not a value: an encoding that meets it fails (after its definitions, if any)."""


@given(streams())
def test_a_stream_through_a_cache_gives_back_every_value(stream):
    slots, items = stream
    encoder, decoder = pair(slots)
    for v, fails in items:
        if fails:
            with pytest.raises(CodecError):
                encoder.encode((v, Unencodable()))  # type: ignore[arg-type]
            continue
        got = decoder.decode(encoder.encode(v))
        assert identical(got, v)
    assert len(encoder._cached) <= slots
    assert {id(e.value) for e in encoder._slots if e} == set(encoder._cached)


def test_a_plain_stream_decodes_with_a_cache_too():
    decoder = Decoder(cache_slots=4)
    for text in ["<a 1>", "<group <rec x> {0: <bind <_>>}>", "[1 2 #t]"]:
        assert decoder.decode(encode(parse(text))) == parse(text)


def test_a_label_too_long_is_not_cached_but_a_wide_record_in_a_dict_is():
    v = decode(encode(Record(Symbol("l" * (CACHE_MAX_TEXT + 1)), ("x",))))
    encoder, decoder = pair()
    assert decoder.decode(encoder.encode(v)) == v and not encoder._cached
    wide = interned("<w " + " ".join(f'"{i}"' for i in range(16)) + ">")
    assert decoder.decode(encoder.encode(FrozenDict({"k": wide})))["k"] is wide
    assert id(wide) in encoder._cached
