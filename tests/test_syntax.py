"""Tests of feds.syntax: the value and pattern text syntax and the JSON form."""

from __future__ import annotations

import contextlib
import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from feds import pattern_forms as pf
from feds.syntax import (
    MAX_DEPTH,
    ParseError,
    format_pattern,
    format_value,
    from_json,
    parse,
    parse_many,
    parse_pattern,
    to_json,
)
from feds.values import NAN, Embedded, FrozenDict, Record, Symbol, record
from tests.strategies import identical, patterns, values

# ---------------------------------------------------------------------------------------------
# Values


@given(values())
def test_parse_format_round_trip(v):
    assert identical(parse(format_value(v)), v)


@given(st.lists(values(), max_size=4))
def test_parse_many_round_trip(vs):
    text = " ".join(format_value(v) for v in vs)
    parsed = parse_many(text)
    assert len(parsed) == len(vs)
    assert all(identical(a, b) for a, b in zip(parsed, vs, strict=True))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('<present "Alice">', record("present", "Alice")),
        ("[1 2]", (1, 2)),
        ('{a: 1, "b": [2]}', FrozenDict({Symbol("a"): 1, "b": (2,)})),
        ("{a: 1 b: 2}", FrozenDict({Symbol("a"): 1, Symbol("b"): 2})),
        ("#{x y}", frozenset({Symbol("x"), Symbol("y")})),
        ("room-1", Symbol("room-1")),
        ("a.b", Symbol("a.b")),
        ("_", Symbol("_")),
        ("+", Symbol("+")),
        ("*", Symbol("*")),
        ("=?!", Symbol("=?!")),
        ("|weird symbol|", Symbol("weird symbol")),
        (r"|a\|b|", Symbol("a|b")),
        (r'"a\n\t\"\\\/\u00e9\ud83d\ude00"', 'a\n\t"\\/é😀'),
        ("-12", -12),
        ("+7", 7),
        ("123456789012345678901234567890", 123456789012345678901234567890),
        ("1.5", 1.5),
        ("1e10", 1e10),
        ("-2.5E-3", -2.5e-3),
        ("#+inf", math.inf),
        ("#-inf", -math.inf),
        ("#t", True),
        ("#f", False),
        ("#nil", None),
        (r'#"ab\x00\n\"\\"', b'ab\x00\n"\\'),
        ('#x"00ff 10"', b"\x00\xff\x10"),
        ("<<a> 1>", Record(Record(Symbol("a"), ()), (1,))),
        ("<1>", Record(1, ())),
        ("[1, 2,3]", (1, 2, 3)),
        ("  ; comment\n [1 ; two\n 2] ; end", (1, 2)),
        ("{<a 1>: #{}, [1]: {}}", FrozenDict({record("a", 1): frozenset(), (1,): FrozenDict()})),
    ],
)
def test_parse_examples(text, expected):
    assert identical(parse(text), expected)


def test_special_floats():
    assert parse("#nan") is NAN
    assert parse("[#nan]") == (NAN,)
    assert math.copysign(1.0, parse("-0.0")) == -1.0
    assert format_value(-0.0) == "-0.0"
    assert format_value(1e16) == "1e+16"
    assert isinstance(parse(format_value(1e16)), float)
    assert format_value(2.0) == "2.0"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (record("present", "Alice"), '<present "Alice">'),
        (FrozenDict({"b": 2, Symbol("a"): 1, 0: 3}), '{0: 3, "b": 2, a: 1}'),
        (frozenset({3, 1, 2}), "#{1 2 3}"),
        (Symbol("<="), "|<=|"),
        (Symbol("1a"), "|1a|"),
        (Symbol(""), "||"),
        (Symbol("a b"), "|a b|"),
        (b'\x00"\\a\n', '#"\\x00\\"\\\\a\\n"'),
        ("tab\there \u2028", '"tab\\there \\u2028"'),
        ("\U000e0001", '"\\udb40\\udc01"'),
        (None, "#nil"),
        (True, "#t"),
        ((), "[]"),
    ],
)
def test_format_examples(value, text):
    assert format_value(value) == text


def test_huge_integers_round_trip():
    n = 7**20000  # more digits than CPython converts with str() by default
    assert parse(format_value(n)) == n
    assert parse(format_value(-n)) == -n


def test_embedded_formats_but_does_not_parse():
    class Ref(Embedded):
        def __repr__(self) -> str:
            return "Ref(1)"

    text = format_value(record("x", Ref()))
    assert text == "<x #:Ref(1)>"
    with pytest.raises(ParseError, match="embedded"):
        parse(text)


def test_format_rejects_non_values():
    with pytest.raises(TypeError):
        format_value([1, 2])


# ---------------------------------------------------------------------------------------------
# Parse errors


@pytest.mark.parametrize(
    ("text", "message", "line", "column"),
    [
        ("<>", "a record needs a label", 1, 1),
        ("<a 1", "expected '>' to close record started at 1:1, found end of input", 1, 5),
        ("[1 >", "expected ']' to close sequence started at 1:1, found '>'", 1, 4),
        ("{a: 1", "expected '}' to close dict started at 1:1", 1, 6),
        ("{a 1}", "expected ':' after dict key, found '1'", 1, 4),
        ('  "abc', "unterminated string", 1, 3),
        ("|abc", "unterminated quoted symbol", 1, 1),
        ('#"ab', "unterminated bytes", 1, 1),
        ('#"é"', "non-ASCII character 'é' in bytes", 1, 3),
        ('#x"0g"', "invalid hex digit 'g'", 1, 5),
        ('#x"0"', "odd number of hex digits", 1, 1),
        ("[1\n  @]", "unexpected character '@'", 2, 3),
        ("1 2", "unexpected trailing input '2'", 1, 3),
        ("]", "unexpected character ']'", 1, 1),
        ("", "expected a value, found end of input", 1, 1),
        ("1abc", "invalid number '1abc'", 1, 1),
        (".5", "invalid number '.5'", 1, 1),
        ("1.", "invalid number '1.'", 1, 1),
        ("#foo", "unknown '#' syntax '#foo'", 1, 1),
        ("#:x", "embedded references (#:...) cannot be parsed", 1, 1),
        ('"\\q"', "unknown escape sequence '\\\\q'", 1, 2),
        ('"\\u12"', "expected four hex digits after '\\u'", 1, 2),
        ("#{1 1.0}", "duplicate element in set", 1, 5),
        ("{a: 1, a: 2}", "duplicate key in dict", 1, 8),
    ],
)
def test_parse_errors(text, message, line, column):
    with pytest.raises(ParseError) as info:
        parse(text)
    error = info.value
    assert error.message.startswith(message)
    assert (error.line, error.column) == (line, column)
    assert str(error).endswith(f"at {line}:{column}")
    assert isinstance(error, ValueError)


def test_parse_error_position_is_an_offset():
    with pytest.raises(ParseError) as info:
        parse("[1\n 2 @]")
    assert info.value.position == 6
    assert (info.value.line, info.value.column) == (2, 4)


def test_nesting_limit():
    assert parse("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    assert parse("<a " * MAX_DEPTH + "1" + ">" * MAX_DEPTH) is not None  # atoms are no level
    with pytest.raises(ParseError, match="nesting deeper"):
        parse("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    with pytest.raises(ParseError, match="nesting deeper"):
        parse_pattern("".join(f"$x{i}=" for i in range(MAX_DEPTH + 1)) + "_")
    assert parse_pattern("<a " * MAX_DEPTH + ">" * MAX_DEPTH)
    with pytest.raises(ParseError, match="nesting deeper"):
        parse_pattern("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))


# ---------------------------------------------------------------------------------------------
# Patterns


def test_pattern_example_from_the_protocol():
    p, names = parse_pattern("<temp $room:string $v:number:[0..100)>")
    expected = parse(
        "<group <rec temp> {0: <bind <type string>> "
        "1: <bind <and [<type number> <range 0 100 #t #f>]>>}>"
    )
    assert p == expected
    assert names == ("room", "v")


@pytest.mark.parametrize(
    ("text", "expected", "names"),
    [
        ("_", "<_>", ()),
        ("$x", "<bind <_>>", ("x",)),
        ("$x=[_]", "<bind <group <arr> {0: <_>}>>", ("x",)),
        ("5", "<lit 5>", ()),
        ('"s"', '<lit "s">', ()),
        ("#{1 2}", "<lit #{1 2}>", ()),
        ("'<a 1>", "<lit <a 1>>", ()),
        ("'_", "<lit _>", ()),
        ("_x", "<lit _x>", ()),
        ("_:integer", "<type integer>", ()),
        ("_:#{1 2}", "<one-of #{1 2}>", ()),
        ("_:[..10]", "<range #nil 10 #t #t>", ()),
        ("_:(0..]", "<range 0 #nil #f #t>", ()),
        ("_:[-1.5 .. #+inf)", "<range -1.5 #+inf #t #f>", ()),
        ("_:/a\\/b\\d/", '<regex "a/b\\\\d">', ()),
        ("_:string:/x/", '<and [<type string> <regex "x">]>', ()),
        ("<a _>:record", "<and [<group <rec a> {0: <_>}> <type record>]>", ()),
        ("5:integer", "<and [<lit 5> <type integer>]>", ()),
        ("#and[]", "<and []>", ()),
        ("#and[$a [$b]]", "<and [<bind <_>> <group <arr> {0: <bind <_>>}>]>", ("a", "b")),
        ("{b: $y, a: $x}", "<group <dict> {a: <bind <_>> b: <bind <_>>}>", ("x", "y")),
        ("{'_: 1}", "<group <dict> {_: <lit 1>}>", ()),
        ("<'_ $a>", "<group <rec _> {0: <bind <_>>}>", ("a",)),
        ("$a=<x $b $c=[$d]>", None, ("a", "b", "c", "d")),
        ("$room-id", "<bind <_>>", ("room-id",)),
    ],
)
def test_pattern_examples(text, expected, names):
    p, got_names = parse_pattern(text)
    if expected is not None:
        assert identical(p, parse(expected))
    assert got_names == names


def test_dict_captures_follow_key_order():
    # "a" (a string) sorts before the symbol b, which sorts before the record <c>.
    _, names = parse_pattern('{<c>: $one, b: $two, "a": {z: $three, y: $four}}')
    assert names == ("four", "three", "two", "one")


@pytest.mark.parametrize(
    ("text", "message", "column"),
    [
        ("$x:foo", "unknown type name 'foo'", 4),
        ("$x:[5..1]", "bad range: the lower bound is above the upper bound", 4),
        ("$x:(1..1)", "bad range: the range is empty", 4),
        ("$x:[a..1]", "expected a number or '..' in range", 5),
        ("$x:[1 2]", "expected '..' in range, found '2'", 7),
        ("$x:[1..2", "expected ']' or ')' to close range started at 1:4", 9),
        ("_:[#nan..1]", "expected a number or '..' in range", 4),
        ("$x:/(/", "invalid regex: missing ), unterminated subpattern", 4),
        ("$x:/ab", "unterminated regex", 4),
        ("[$x $x]", "duplicate capture name '$x' (first used at 1:2)", 5),
        ("$", "expected a capture name after '$'", 1),
        ("<a $=1>", "expected a capture name after '$'", 4),
        ("<$x 1>", "a record label in a pattern must be a literal value, not a capture", 2),
        ("<_ 1>", "a record label in a pattern must be a literal value, not '_'", 2),
        ("{$k: 1}", "a dict key in a pattern must be a literal value", 2),
        ("{a: 1, a: $x}", "duplicate key in dict pattern", 8),
        ("$x:", "expected a constraint after ':'", 4),
        ("<>", "a record pattern needs a label", 1),
        ("[$x", "expected ']' to close sequence started at 1:1", 4),
        ("$x $y", "unexpected trailing input", 4),
    ],
)
def test_pattern_errors(text, message, column):
    with pytest.raises(ParseError) as info:
        parse_pattern(text)
    assert info.value.message.startswith(message)
    assert (info.value.line, info.value.column) == (1, column)


@given(patterns(), st.data())
def test_pattern_round_trip(p, data):
    text = format_pattern(p)
    parsed, names = parse_pattern(text)
    assert identical(parsed, p), text
    assert names == tuple(f"v{i}" for i in range(len(names)))
    custom = data.draw(
        st.lists(
            st.from_regex(r"[a-z][a-z0-9_\-]{0,5}", fullmatch=True),
            min_size=len(names),
            max_size=len(names),
            unique=True,
        )
    )
    parsed_again, names_again = parse_pattern(format_pattern(p, custom))
    assert identical(parsed_again, p)
    assert names_again == tuple(custom)


@given(st.sampled_from(["<temp $room:string $v:number:[0..100)>", "{b: $y, a: $x}"]))
def test_format_pattern_keeps_text_canonical(text):
    p, names = parse_pattern(text)
    assert parse_pattern(format_pattern(p, names)) == (p, names)


def test_regex_escaped_slash_is_normalised():
    # r"a\/b" and "a/b" are the same regex; printing cannot tell them apart.
    assert format_pattern(pf.regex(r"a\/b")) == r"_:/a\/b/"
    assert parse_pattern(r"_:/a\/b/")[0] == pf.regex("a/b")


@pytest.mark.parametrize(
    ("pattern", "names", "message"),
    [
        (pf.bind(), ["x", "y"], "2 names given for 1 captures"),
        (pf.arr_group([pf.bind(), pf.bind()]), ["x"], "only 1 names given"),
        (pf.bind(), ["a b"], "invalid capture name"),
        (pf.arr_group([pf.bind(), pf.bind()]), ["x", "x"], "duplicate capture names"),
        (Record(Symbol("bogus"), ()), None, "not a pattern"),
        (pf.range_(2, 1, True, True), None, "bad range"),
        (pf.regex("("), None, "invalid regex"),
        (Record(pf.TYPE, (Symbol("colour"),)), None, "unknown type"),
    ],
)
def test_format_pattern_errors(pattern, names, message):
    with pytest.raises(ValueError, match=message):
        format_pattern(pattern, names)


# ---------------------------------------------------------------------------------------------
# JSON


@given(values())
def test_json_round_trip(v):
    text = json.dumps(to_json(v), allow_nan=False)
    assert identical(from_json(json.loads(text)), v)


def test_json_form():
    v = parse('<r a "s" 1 1.5 #nan #"\\x01" #{1} {k: #nil} [#t] 9007199254740993>')
    assert to_json(v) == {
        "@record": {"@symbol": "r"},
        "fields": [
            {"@symbol": "a"},
            "s",
            1,
            1.5,
            {"@float": "nan"},
            {"@bytes": "AQ=="},
            {"@set": [1]},
            {"@dict": [[{"@symbol": "k"}, None]]},
            [True],
            {"@int": "9007199254740993"},
        ],
    }


@pytest.mark.parametrize(
    "obj",
    [
        {"@symbol": 1},
        {"@bogus": 1},
        {"@set": [1, 1.0]},
        {"@dict": [[1]]},
        {"@dict": [[1, 2], [1, 3]]},
        {"@bytes": "!!"},
        {"@float": "huge"},
        {"@int": "12a"},
        {"@embedded": "Ref(1)"},
        {"a": 1, "b": 2},
        {1, 2},
    ],
)
def test_from_json_errors(obj):
    with pytest.raises(ValueError):
        from_json(obj)


_syntax_chars = st.sampled_from(
    [*"<>[]{}#()$_:'\"|\\/;,.=-+0123456789abexnt {}\n@é", "#{", "#and["]
)


@given(st.one_of(st.text(max_size=30), st.lists(_syntax_chars, max_size=30).map("".join)))
def test_arbitrary_text_parses_or_raises_parse_error(text):
    for parser in (parse, parse_many, parse_pattern):
        with contextlib.suppress(ParseError):
            parser(text)
