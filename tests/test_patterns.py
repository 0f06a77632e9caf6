"""Tests of feds.patterns: the reference matcher, validation errors, and compiled skeletons."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from feds import patterns
from feds.patterns import (
    HasKey,
    PatternError,
    Range,
    Skeleton,
    TypeCheck,
    capture_count,
    compile_pattern,
    match,
    validate,
)
from feds.values import NAN, FrozenDict, Record, Symbol, exact_equal
from tests.builders import D, and_, arr, bind, dct, lit, one_of, r, rec, rng, rx, typ
from tests.pattern_strategies import pattern_for, values

S = Symbol

# ---- match: structure ------------------------------------------------------------------------


def test_discard_and_bind_match_anything() -> None:
    for v in [None, 0, "x", r("a"), (), FrozenDict()]:
        assert match(D, v) == ()
        assert match(bind(), v) == (v,)


def test_captures_are_depth_first_bind_before_inner() -> None:
    p = rec("a", bind(rec("b", bind(), D)), bind())
    v = r("a", r("b", 1, 2), 3)
    assert match(p, v) == (r("b", 1, 2), 1, 3)
    assert capture_count(p) == 3


def test_lit_uses_type_exact_value_equality() -> None:
    assert match(lit(1), 1) == ()
    assert match(lit(1), 1.0) is None  # the data model: 1, 1.0 and #t are different values
    assert match(lit(1), True) is None
    assert match(lit(0.0), -0.0) is None
    assert match(lit(r("a", 1)), r("a", True)) is None
    assert match(one_of(1, 2), 1.0) is None and match(one_of(1, 2), 1) == ()
    assert match(lit(NAN), NAN) == ()  # the canonical NaN finds itself
    assert match(lit(1), 2) is None
    assert match(lit("a"), S("a")) is None
    assert match(lit(r("a", 1)), r("a", 1)) == ()
    assert match(lit(r("a", 1)), r("a", 2)) is None


def test_rec_checks_label_and_arity() -> None:
    p = rec("temp", bind(), bind())
    assert match(p, r("temp", "k", 20)) == ("k", 20)
    assert match(p, r("temp", "k")) is None
    assert match(p, r("temp", "k", 20, 1)) is None
    assert match(p, r("pmet", "k", 20)) is None
    assert match(p, ("k", 20)) is None
    assert match(rec("a"), r("a")) == ()
    assert match(rec("a"), r("a", 1)) is None
    # labels need not be symbols
    assert match(rec("s"), Record("s", ())) is None
    str_label = Record(S("group"), (Record(S("rec"), ("s",)), FrozenDict()))
    assert match(str_label, Record("s", ())) == ()


def test_arr_is_exact_length_sequences_only() -> None:
    p = arr(bind(), D)
    assert match(p, (1, 2)) == (1,)
    assert match(p, (1,)) is None
    assert match(p, (1, 2, 3)) is None
    assert match(p, frozenset({1, 2})) is None
    assert match(p, r("a", 1, 2)) is None
    assert match(arr(), ()) == ()


def test_dict_needs_at_least_the_keys() -> None:
    p = dct({"b": bind(), "a": bind()})
    assert match(p, FrozenDict({"a": 1, "b": 2})) == (1, 2)  # captured in key order
    assert match(p, FrozenDict({"a": 1, "b": 2, "c": 3})) == (1, 2)
    assert match(p, FrozenDict({"a": 1})) is None
    assert match(p, (1, 2)) is None
    assert match(dct({}), FrozenDict({"z": 0})) == ()
    assert match(dct({"a": D}), FrozenDict({"b": 1})) is None
    assert match(dct({"a": lit(None)}), FrozenDict({"b": 1})) is None
    assert match(dct({"a": lit(None)}), FrozenDict({"a": None})) == ()


def test_dict_capture_order_follows_sort_key() -> None:
    p = dct({"s": bind(), 2: bind(), S("y"): bind(), None: bind()})
    v = FrozenDict({"s": "S", 2: "2", S("y"): "Y", None: "N"})
    assert match(p, v) == ("N", "2", "S", "Y")


def test_and_needs_every_item() -> None:
    p = and_(bind(), typ("integer"), rng(0, 10))
    assert match(p, 5) == (5,)
    assert match(p, 11) is None
    assert match(p, 5.0) is None
    p = and_(typ("record"), rec("a", bind()), bind())
    assert match(p, r("a", 1)) == (1, r("a", 1))


# ---- match: constraints ----------------------------------------------------------------------

TYPE_CASES = {
    "boolean": ([True, False], [0, 1, "t", None]),
    "number": ([0, 1, -2.5, 10**30, math.inf, NAN], [True, False, "1", None]),
    "integer": ([0, -7, 10**40], [True, 1.0, 2.5, "1"]),
    "float": ([1.0, -0.0, NAN, math.inf], [1, True, "1.0"]),
    "string": (["", "abc"], [b"abc", S("abc"), 1]),
    "bytes": ([b"", b"x"], ["x", bytearray(b"x")]),
    "symbol": ([S("a")], ["a", r("a")]),
    "record": ([r("a"), Record("s", (1,))], [(), S("a")]),
    "sequence": ([(), (1, 2)], [[1], frozenset(), r("a")]),
    "set": ([frozenset(), frozenset({1})], [{1}, ()]),
    "dict": ([FrozenDict(), FrozenDict({1: 2})], [{1: 2}, ()]),
}


@pytest.mark.parametrize("name", sorted(TYPE_CASES))
def test_type(name: str) -> None:
    yes, no = TYPE_CASES[name]
    check = TypeCheck(name)
    for v in yes:
        assert match(typ(name), v) == (), (name, v)
        assert check(v), (name, v)
    for v in no:
        assert match(typ(name), v) is None, (name, v)
        assert not check(v), (name, v)


def test_one_of() -> None:
    p = one_of(1, "a", S("b"))
    assert match(p, 1) == ()
    assert match(p, True) is None and match(p, 1.0) is None  # different values
    assert match(p, "a") == ()
    assert match(p, S("b")) == ()
    assert match(p, "b") is None
    assert match(one_of(), 1) is None
    assert match(one_of(NAN), NAN) == ()


@pytest.mark.parametrize(
    ("pattern", "yes", "no"),
    [
        (rng(0, 10), [0, 10, 5, 0.0, -0.0, 10.0], [-1, 10.5, 11]),
        (rng(0, 10, False, False), [0.5, 9], [0, -0.0, 10]),
        (rng(0, 10, True, False), [0, 9.99], [10]),
        (rng(None, 10, False, False), [-(10**100), -math.inf, 9], [10]),
        (rng(0, None), [0, 10**100, math.inf], [-1, -math.inf]),
        (rng(None, None, False, False), [0, -math.inf, 2**70], []),
        (rng(0.5, 1.5), [1, 0.5, 1.5], [0, 2]),
        (rng(2**60, 2**60 + 1), [2**60 + 1], [2**60 - 1, 2.0**60 - 1024]),
    ],
)
def test_range(pattern: Record, yes: list, no: list) -> None:
    check = compile_pattern(pattern).checks[0][1]
    for v in yes:
        assert match(pattern, v) == (), v
        assert check(v), v
    # never booleans, NaN or non-numbers, and no exception
    for v in [*no, True, False, NAN, float("nan"), "5", None, S("a"), (1,)]:
        assert match(pattern, v) is None, v
        assert not check(v), v


def test_regex_is_an_unanchored_search_on_strings_only() -> None:
    assert match(rx("b"), "abc") == ()
    assert match(rx("^b"), "abc") is None
    assert match(rx("^a.c$"), "abc") == ()
    assert match(rx(""), "") == ()
    for v in [b"abc", S("abc"), 1, None, ("abc",)]:
        assert match(rx("b"), v) is None
        assert not compile_pattern(rx("b")).checks[0][1](v)


def test_constraint_on_captured_position() -> None:
    p = rec("temp", bind(typ("string")), bind(and_(typ("number"), rng(0, 100, True, False))))
    assert match(p, r("temp", "k", 20)) == ("k", 20)
    assert match(p, r("temp", "k", 100)) is None
    assert match(p, r("temp", S("k"), 20)) is None


# ---- validation ------------------------------------------------------------------------------

BAD = [
    (Record(S("nope"), ()), "unknown pattern record label", ()),
    (rec("a", D, Record(S("nope"), ())), "unknown pattern record label", (1,)),
    (Record("bind", (D,)), "unknown pattern record label", ()),
    (Record(S("bind"), ()), "takes 1 field", ()),
    (Record(S("_"), (1,)), "takes 0 fields", ()),
    (rec("a", 5), "expected a pattern record", (0,)),
    (arr(D, "x"), "expected a pattern record", (1,)),
    (bind(bind(7)), "expected a pattern record", ("<bind>", "<bind>")),
    (Record(S("group"), (Record(S("rec"), (S("a"),)), FrozenDict({1: D}))), "0..0", ()),
    (Record(S("group"), (Record(S("arr"), ()), FrozenDict({0: D, 2: D}))), "0..1", ()),
    (Record(S("group"), (Record(S("arr"), ()), FrozenDict({"0": D}))), "keys", ()),
    (Record(S("group"), (Record(S("arr"), ()), FrozenDict({False: D}))), "keys", ()),
    (Record(S("group"), (Record(S("arr"), ()), FrozenDict({0.0: D}))), "keys", ()),
    (Record(S("group"), (Record(S("arr"), ()), (D,))), "entries must be a dict", ()),
    (Record(S("group"), (Record(S("list"), ()), FrozenDict())), "unknown group kind", ()),
    (Record(S("group"), (Record(S("rec"), ()), FrozenDict())), "unknown group kind", ()),
    (typ("int"), "unknown type name", ()),
    (Record(S("type"), ("integer",)), "unknown type name", ()),
    (rng("0", 1), "lower bound", ()),
    (rng(0, True), "upper bound", ()),
    (rng(0, NAN), "NaN", ()),
    (rng(0, 1, 1, True), "inclusive flag", ()),
    (rng(0, 1, True, None), "inclusive flag", ()),
    (rx("("), "invalid regex", ()),
    (rx(b"x"), "regex source must be a string", ()),
    (Record(S("and"), ((),)), "<and []> is empty", ()),
    (Record(S("and"), (frozenset([D]),)), "sequence of patterns", ()),
    (and_(rec("a"), rec("a")), "at most one structural", ("<and>[1]",)),
    (and_(bind(arr()), typ("sequence"), arr()), "at most one structural", ("<and>[2]",)),
    (Record(S("one-of"), ((1, 2),)), "takes a set", ()),
    (dct({"k": and_(typ("nope"))}), "unknown type name", ("k", "<and>[0]")),
    (5, "expected a pattern record", ()),
]


@pytest.mark.parametrize(("pattern", "message", "path"), BAD)
def test_pattern_errors_name_the_path(pattern: object, message: str, path: tuple) -> None:
    for fn in (validate, compile_pattern):
        with pytest.raises(PatternError) as info:
            fn(pattern)
        assert message in str(info.value)
        assert tuple(str(s) if not isinstance(s, int) else s for s in info.value.path) == path
        if path:
            assert "pattern path" in str(info.value)
        else:
            assert "pattern root" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_match_reports_bad_parts_it_visits() -> None:
    with pytest.raises(PatternError):
        match(Record(S("nope"), ()), 1)
    with pytest.raises(PatternError):
        match(rec("a", typ("nope")), r("a", 1))
    with pytest.raises(PatternError):
        match(rx("("), "x")


def test_validity_does_not_depend_on_the_compile_cache() -> None:
    good = Record(S("group"), (Record(S("arr"), ()), FrozenDict({0: D})))
    bad = Record(S("group"), (Record(S("arr"), ()), FrozenDict({False: D})))
    assert good != bad  # False == 0 in Python, not in feds
    compile_pattern(good)
    with pytest.raises(PatternError):
        compile_pattern(bad)
    good_range = rng(0, 1, True, True)
    bad_range = rng(False, 1, True, True)
    assert good_range != bad_range
    compile_pattern(good_range)
    with pytest.raises(PatternError):
        compile_pattern(bad_range)

    good_flags = rng(0, 2, True, True)
    bad_flags = rng(0, 2, 1, True)  # 1 == True, but a flag must be a boolean
    compile_pattern(good_flags)
    with pytest.raises(PatternError):
        compile_pattern(bad_flags)
    good_keys = rec("k", dct({1: bind()}))
    bool_keys = rec("k", dct({True: bind()}))  # a dict group takes any key: valid too
    assert compile_pattern(bool_keys) != compile_pattern(good_keys)  # and a different one


def test_equal_patterns_share_one_cached_skeleton() -> None:
    a = rec("t", lit(r("x", 1, "y")), bind(and_(typ("number"), rng(0, 10))), arr(D, bind()))
    b = rec("t", lit(r("x", 1, "y")), bind(and_(typ("number"), rng(0, 10))), arr(D, bind()))
    assert a is not b
    assert compile_pattern(b) is compile_pattern(a)
    # literals of different classes (1 == 1.0 == #t in Python) are different patterns
    one, real, true = (compile_pattern(rec("t", lit(x))) for x in (1, 1.0, True))
    assert one.const_values == (1,) and real.const_values == (1.0,) and true.const_values == (True,)


def test_the_compile_cache_is_bounded() -> None:
    for i in range(patterns._CACHE_MAX + 10):
        assert compile_pattern(rec("bounded", lit(i))).const_values == (i,)
    assert len(patterns._CACHE) <= patterns._CACHE_MAX


# ---- compilation -----------------------------------------------------------------------------


def test_skeleton_of_a_simple_pattern() -> None:
    sk = compile_pattern(rec("temp", lit("room-1"), bind()))
    assert sk == Skeleton(
        shape=(((), ("rec", S("temp"), 2)),),
        const_paths=((0,),),
        const_values=("room-1",),
        capture_paths=((1,),),
        checks=(),
    )
    assert sk.capture_count == 1


def test_skeleton_of_nested_dict_and_constraints() -> None:
    p = rec(
        "a",
        arr(bind(typ("integer")), lit(r("x", 1))),
        dct({"k": bind(), "c": lit(3), "g": rec("b")}),
    )
    sk = compile_pattern(p)
    assert sk.shape == (
        ((), ("rec", S("a"), 2)),
        ((0,), ("arr", 2)),
        ((1,), ("dict",)),
        ((1, "g"), ("rec", S("b"), 0)),
    )
    assert sk.const_paths == ((0, 1), (1, "c"))
    assert sk.const_values == (r("x", 1), 3)  # a literal record is a constant, not a shape
    assert sk.capture_paths == ((0, 0), (1, "k"))
    assert sk.checks == (
        ((0, 0), TypeCheck("integer")),
        ((1,), HasKey("g")),
        ((1,), HasKey("k")),
    )


def test_and_merges_structure_and_constraints() -> None:
    sk = compile_pattern(and_(typ("record"), bind(rec("a", bind(rng(0, 1)))), lit(r("a", 1))))
    assert sk.shape == (((), ("rec", S("a"), 1)),)
    assert sk.capture_paths == ((), (0,))
    assert sk.const_paths == ((),)
    assert sk.checks == (((), TypeCheck("record")), ((0,), Range(0, 1, True, True)))


def test_compiled_skeletons_are_equal_and_hashable() -> None:
    def build() -> Record:
        return rec("t", bind(and_(typ("number"), rng(0, 10, True, False))), rx("a+"), one_of(1, 2))

    a, b = build(), build()
    assert a is not b and a == b
    ka, kb = compile_pattern(a), compile_pattern(b)
    assert ka == kb and hash(ka) == hash(kb)
    assert {ka: 1}[kb] == 1
    assert compile_pattern(a) is ka  # cached
    with pytest.raises(AttributeError):
        ka.shape = ()  # type: ignore[misc]


def test_capture_count() -> None:
    assert capture_count(D) == 0
    assert capture_count(bind(bind())) == 2
    assert capture_count(dct({"a": bind(), "b": arr(bind(), bind())})) == 3


# ---- property: skeletons mean what match means -----------------------------------------------


def _project(v: object, path: tuple) -> object:
    for step in path:
        if v.__class__ is Record:
            v = v.fields[step]  # type: ignore[attr-defined]
        elif v.__class__ is FrozenDict:
            if step not in v:  # type: ignore[operator]
                return _ABSENT
            v = v[step]  # type: ignore[index]
        else:
            v = v[step]  # type: ignore[index]
    return v


_ABSENT = object()


def _classify(x: object) -> tuple | None:
    if x.__class__ is Record:
        return ("rec", x.label, len(x.fields))  # type: ignore[attr-defined]
    if x.__class__ is tuple:
        return ("arr", len(x))  # type: ignore[arg-type]
    if x.__class__ is FrozenDict:
        return ("dict",)
    return None


def skeleton_match(sk: Skeleton, v: object) -> tuple | None:
    """The skeleton's meaning, evaluated naively: shape, constants, checks, then captures."""
    for path, cls in sk.shape:
        x = _project(v, path)
        if x is _ABSENT or _classify(x) != cls:
            return None
    for path, c in zip(sk.const_paths, sk.const_values, strict=True):
        x = _project(v, path)
        if not (x is c or exact_equal(x, c)):  # type-exact, as match() and the index are
            return None
    for path, check in sk.checks:
        if not check(_project(v, path)):
            return None
    return tuple(_project(v, p) for p in sk.capture_paths)


def test_the_reference_skeleton_matcher_compares_constants_type_exactly() -> None:
    """Found by hypothesis: ``<lit -0.0>`` against ``0`` (``-0.0 == 0`` in Python)."""
    for constant, value in [(-0.0, 0), (0.0, 0), (-0.0, 0.0), (1.0, 1), (0, 0.0)]:
        sk = compile_pattern(lit(constant))
        assert match(lit(constant), value) is None
        assert skeleton_match(sk, value) is None


@given(st.data())
def test_compiled_skeleton_agrees_with_match(data: st.DataObject) -> None:
    shape_of = data.draw(values)
    p = data.draw(pattern_for(shape_of))
    sk = compile_pattern(p)
    for v in [shape_of, *data.draw(st.lists(values, max_size=3))]:
        expected = match(p, v)
        assert skeleton_match(sk, v) == expected
        if expected is not None:
            assert len(expected) == capture_count(p)


def test_bind_of_anything_is_one_shared_value() -> None:
    from feds import pattern_forms as pf

    assert pf.bind() is pf.bind(pf.DISCARD) is pf.BIND_ANY
    assert pf.bind() == Record(S("bind"), (pf.DISCARD,))
    assert pf.bind(pf.lit(1)) == Record(S("bind"), (pf.lit(1),))
