"""Symbol interning: one live object per name, whatever path built it, and no leak."""

from __future__ import annotations

import copy
import gc
import pickle
import sys
import threading

import pytest

from feds import values
from feds.codec import Decoder, Encoder
from feds.index import Index
from feds.patterns import compile_pattern
from feds.syntax import parse
from feds.values import FrozenDict, Record, Symbol


def test_same_name_same_object() -> None:
    a = Symbol("interning-a")
    assert Symbol("interning-a") is a
    assert Symbol("interning-a") == a
    assert hash(Symbol("interning-a")) == hash(a)
    assert Symbol("interning-b") is not a
    assert Symbol("interning-b") != a
    assert a != "interning-a"
    assert "interning-a" not in {a: None}


def test_every_construction_path_interns() -> None:
    a = Symbol("interning-paths")
    assert Decoder().decode(Encoder().encode(a)) is a
    decoded = Decoder().decode(Encoder().encode(Record(a, (1,))))
    assert decoded.label is a
    assert parse("interning-paths") is a
    assert parse("<interning-paths 1>").label is a
    assert copy.copy(a) is a
    assert copy.deepcopy(a) is a
    assert pickle.loads(pickle.dumps(a)) is a
    assert values.symbol("interning-paths") is a
    assert values.record("interning-paths", 1).label is a


def test_the_hash_is_object_identity_hash_in_c() -> None:
    """Hashing a symbol (and so a record or key holding one) runs no Python code."""
    assert Symbol.__hash__ is object.__hash__
    a = Symbol("interning-hash")
    assert hash(a) == object.__hash__(a)


def test_pickled_values_hash_like_fresh_ones_after_their_symbols_died() -> None:
    """A symbol's hash lasts only as long as the symbol: pickles must not carry hashes."""
    name = "interning-pickled"
    r = Record(Symbol(name), (1, Symbol(name)))
    d = FrozenDict({Symbol(name): r})
    blobs = [pickle.dumps(v) for v in (r, d, (r, d))]
    old_id = id(r.label)
    del r, d
    gc.collect()
    assert name not in values._INTERNED
    others = [Symbol(f"{name}-{i}") for i in range(100)]  # one takes the old symbol's memory
    fresh_r = Record(Symbol(name), (1, Symbol(name)))
    fresh_d = FrozenDict({Symbol(name): fresh_r})
    assert id(fresh_r.label) != old_id and others  # so its hash differs from the old one's
    r2, d2, pair = (pickle.loads(b) for b in blobs)
    assert r2 == fresh_r and hash(r2) == hash(fresh_r) and r2 in {fresh_r}
    assert d2 == fresh_d and hash(d2) == hash(fresh_d) and d2 in {fresh_d}
    assert pair == (fresh_r, fresh_d) and hash(pair) == hash((fresh_r, fresh_d))
    assert copy.deepcopy(fresh_r) == fresh_r and hash(copy.copy(fresh_d)) == hash(fresh_d)


def test_name_must_be_str() -> None:
    with pytest.raises(TypeError):
        Symbol(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Symbol(["unhashable"])  # type: ignore[arg-type]


def test_dead_symbols_leave_the_table() -> None:
    names = [f"interning-dead-{i}" for i in range(1000)]
    for name in names:
        Symbol(name)
    gc.collect()
    assert not any(name in values._INTERNED for name in names)
    again = Symbol(names[0])
    assert values._INTERNED[names[0]]() is again


def test_a_stale_reference_does_not_evict_a_new_symbol() -> None:
    name = "interning-stale"
    first = Symbol(name)
    stale = values._INTERNED[name]
    del first
    gc.collect()
    second = Symbol(name)
    values._forget(stale)  # a late callback of the first symbol's reference
    assert Symbol(name) is second
    assert values._INTERNED[name]() is second


def test_index_label_check_with_symbols_from_elsewhere() -> None:
    """The index tests labels by identity: a decoded assertion still matches."""
    index = Index()
    seen: list[tuple] = []
    pattern = parse("<group <rec interning-temp> {0: <lit 1> 1: <bind <_>>}>")
    index.add_handler(compile_pattern(pattern), lambda event, caps, key: seen.append((event, caps)))
    v = Decoder().decode(Encoder().encode(parse("<interning-temp 1 2>")))
    index.add_assertion(v)
    index.remove_assertion(v)
    index.send_message(parse("<interning-temp 1 3>"))
    index.send_message(parse("<other-label 1 3>"))
    assert seen == [("+", (2,)), ("-", (2,)), ("!", (3,))]


def test_threads_creating_the_same_new_names_get_one_object_each() -> None:
    names = [f"interning-race-{i}" for i in range(20000)]
    results: list[list[Symbol]] = []

    def make() -> None:
        start.wait()
        results.append([Symbol(name) for name in names])

    start = threading.Event()
    threads = [threading.Thread(target=make) for _ in range(6)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        for t in threads:
            t.start()
        start.set()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    first = results[0]
    for other in results[1:]:
        assert all(a is b for a, b in zip(first, other, strict=True))
