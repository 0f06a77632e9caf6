"""Type-exact equality of feds values (issue 9 item 5), against a naive reference.

``1``, ``1.0`` and ``#t`` are three values, ``0.0`` and ``-0.0`` two, wherever feds compares:
``==`` and ``hash`` of records and dicts, ``exact_equal``/``exact_key``, the index's bag, const
tables and captures bags, pattern literals and ``<one-of>``, the codec's interning and value
cache, and sets and dict keys inside values. The reference is ``tests.strategies.tagged``: a
canonical form that tags every atom with its type (floats by their bits), sharing no code with
feds. Values are drawn with Python-equal twins (``twin_of``) so that the cases which Python's
equality merges come up all the time.
"""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from feds.actor import Handle, Scheduler, Turn
from feds.codec import SET, CodecError, Decoder, Encoder, decode, encode
from feds.dataspace import Dataspace, observe
from feds.index import Index
from feds.patterns import compile_pattern, match
from feds.syntax import ParseError, parse
from feds.values import FrozenDict, Record, Symbol, Value, exact_equal, exact_key, sort_key
from tests.builders import bind, lit, one_of, rec
from tests.pattern_strategies import twin_of, values
from tests.recording import Recorder
from tests.strategies import tagged

X = Symbol("x")
SET_HEAD = msgpack.ExtType(SET, b"")


@st.composite
def pairs(draw: st.DrawFn) -> tuple[Value, Value]:
    """Two values, often equal in Python (a twin), sometimes the very same value."""
    a = draw(values)
    how = draw(st.integers(0, 2))
    b = draw(twin_of(a)) if how else draw(values)
    return a, b


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (((1,),), ((1.0,),)),
        ((1, (2, frozenset({True}))), (1, (2, frozenset({1})))),
        (frozenset({(0.0,)}), frozenset({(-0.0,)})),
        ((Record(X, (1,)), (1,)), (Record(X, (1,)), (True,))),
    ],
)
def test_keys_of_nested_sequences_and_sets_tell_their_items_apart(a: Value, b: Value) -> None:
    """Equal in Python, different in feds, however deep the boolean or float is."""
    assert a == b and exact_key(a) != exact_key(b)
    assert exact_key(a) == exact_key(a) and exact_key(b) == exact_key(b)


@given(pairs())
def test_equality_and_keys_agree_with_the_reference(pair: tuple[Value, Value]) -> None:
    a, b = pair
    same = tagged(a) == tagged(b)
    assert exact_equal(a, b) == same
    assert (exact_key(a) == exact_key(b)) == same
    if same:
        assert hash(exact_key(a)) == hash(exact_key(b))
        assert sort_key(a) == sort_key(b)
    else:
        assert sort_key(a) != sort_key(b)  # a total order that never ties different values
    ra, rb = Record(X, (a,)), Record(X, (b,))
    assert (ra == rb) == same and (rb == ra) == same
    if same:
        assert hash(ra) == hash(rb)
    da, db = FrozenDict({"k": a}), FrozenDict({"k": b})
    assert (da == db) == same


@given(st.lists(st.tuples(st.booleans(), pairs()), max_size=12))
def test_the_index_counts_type_exactly(ops: list[tuple[bool, tuple[Value, Value]]]) -> None:
    index = Index()
    events: list[tuple[str, tuple]] = []
    index.add_handler(compile_pattern(rec("x", bind())), lambda e, c, k: events.append((e, c)))
    model: dict[object, int] = {}
    for add, (a, b) in ops:
        for v in (a, b):
            key = tagged(v)
            if add:
                index.add_assertion(Record(X, (v,)))
                model[key] = model.get(key, 0) + 1
            elif model.get(key):
                index.remove_assertion(Record(X, (v,)))
                model[key] -= 1
            else:
                with pytest.raises(ValueError):
                    index.remove_assertion(Record(X, (v,)))
            assert index.count(Record(X, (v,))) == model.get(key, 0)
            assert index.count(v) == 0
    live: dict[object, int] = {}
    for e, (c,) in events:
        live[tagged(c)] = live.get(tagged(c), 0) + (1 if e == "+" else -1)
    assert {k for k, n in live.items() if n} == {k for k, n in model.items() if n}
    assert all(n in (0, 1) for n in live.values())


@given(pairs())
def test_literals_and_one_of_match_type_exactly(pair: tuple[Value, Value]) -> None:
    a, b = pair
    same = tagged(a) == tagged(b)
    assert (match(lit(a), b) is not None) == same
    assert (match(rec("x", lit(a)), Record(X, (b,))) is not None) == same
    index = Index()
    seen: list = []
    index.add_handler(compile_pattern(rec("x", lit(a), bind())), lambda e, c, k: seen.append(c))
    index.add_handler(compile_pattern(one_of(a)), lambda e, c, k: seen.append("one-of"))
    index.add_assertion(Record(X, (b, "hit")))
    index.add_assertion(b)
    assert seen.count(("hit",)) == (1 if same else 0)
    assert seen.count("one-of") == (1 if same else 0)


@given(pairs())
def test_the_codec_keeps_types_through_interning_and_the_value_cache(
    pair: tuple[Value, Value],
) -> None:
    a, b = pair
    ra, rb = Record(X, (a, "s")), Record(X, (b, "s"))  # end with a name: may be interned
    for got, want in ((decode(encode(ra)), ra), (decode(encode(rb)), rb)):
        assert tagged(got) == tagged(want)
    encoder, decoder = Encoder(cache_slots=8), Decoder(cache_slots=8)
    for v in (ra, rb, ra, rb):
        assert tagged(decoder.decode(encoder.encode(v))) == tagged(v)


@pytest.mark.parametrize(
    ("text", "wire", "note"),
    [
        ("#{1 1.0}", [SET_HEAD, 1, 1.0], "1 and 1.0"),
        ("#{0.0 -0.0}", [SET_HEAD, 0.0, -0.0], "0.0 and -0.0"),
        ("{0: a, #f: b}", ((0, "a"), (False, "b")), "0 and False"),
    ],
)
def test_a_set_or_dict_cannot_hold_two_values_python_merges(
    text: str, wire: object, note: str
) -> None:
    with pytest.raises(ParseError, match=f"duplicate .*{note} are different values"):
        parse(text)
    data = msgpack.packb(wire) if isinstance(wire, list) else _map_pairs(wire)
    with pytest.raises(CodecError, match=f"duplicate .*{note} are different values"):
        decode(data)


def _map_pairs(pairs: tuple) -> bytes:
    """A msgpack map of these pairs (a Python dict would merge 0 and False)."""
    return bytes([0x80 | len(pairs)]) + b"".join(
        msgpack.packb(k) + msgpack.packb(v) for k, v in pairs
    )


def test_sets_and_dicts_of_different_values_are_different() -> None:
    # a bare frozenset's own == is Python's: feds compares with exact_equal (and in records)
    assert not exact_equal(parse("#{1}"), parse("#{#t}")) and exact_equal(
        parse("#{1}"), parse("#{1}")
    )
    assert parse("<x #{1}>") != parse("<x #{#t}>") and parse("<x [1.0]>") != parse("<x [1]>")
    assert parse("{1: a}") != parse("{#t: a}") and parse("{a: 1}") != parse("{a: 1.0}")
    assert parse("#{<x 1> <x #t> <x 1.0>}").__len__() == 3  # records of them are distinct
    d = parse("{1: a}")
    assert 1 in d and True not in d and 1.0 not in d and d[1] == Symbol("a")
    with pytest.raises(KeyError):
        d[True]


def test_a_dataspace_publishes_and_retracts_each_of_two_python_equal_matches() -> None:
    scheduler = Scheduler()
    seen = Recorder()
    held: list[Handle] = []

    def boot(t: Turn) -> None:
        ds = t.ref(Dataspace())
        t.publish(ds, observe(rec("x", bind()), t.ref(seen)))
        held.extend(t.publish(ds, Record(X, (v,))) for v in (1, True, 1.0))

    actor = scheduler.spawn(boot)
    scheduler.run_until_idle()
    assert sorted(map(tagged, seen.live.values())) == sorted(tagged((v,)) for v in (1, True, 1.0))
    scheduler.enqueue(actor, actor.root, lambda t: t.retract(held[1]))
    scheduler.run_until_idle()
    assert sorted(map(tagged, seen.live.values())) == sorted(tagged((v,)) for v in (1, 1.0))
