"""Hypothesis strategies for feds values, and a strict comparison for round-trip tests.

``values()`` draws arbitrary nested values (no Embedded); ``atoms()`` draws the non-containers;
``patterns()`` draws well-formed patterns in record form (``protocols/patterns.md``).
``identical(a, b)`` compares type-exactly, as feds's ``==`` does (``1``, ``1.0`` and ``True``
differ, ``0.0`` and ``-0.0`` too) and treats NaN as equal to NaN; ``tagged(v)`` is a naive
canonical form whose Python equality is that same equality, for models keyed by values.
"""

from __future__ import annotations

import math
import struct
from functools import cache

from hypothesis import strategies as st

from feds import pattern_forms as pf
from feds.values import NAN, FrozenDict, Record, Symbol, Value, sort_key

ODD_SYMBOL_NAMES = [
    "",
    "_",
    "a b",
    "1a",
    ".5",
    "-1",
    "+",
    "-",
    "...",
    "<=",
    "|",
    "\\",
    '"',
    "a:b",
    "#t",
    "nil",
    "inf",
    "nan",
    "é",
    "\n",
]

# Strings without lone surrogates (they are not valid Unicode and msgpack refuses them).
_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)


@cache
def symbols() -> st.SearchStrategy[Symbol]:
    """Symbols: mostly identifier-like names, some that need quoting."""
    names = st.one_of(
        st.from_regex(r"[a-z][a-z0-9\-]{0,8}", fullmatch=True),
        st.sampled_from(ODD_SYMBOL_NAMES),
        _text,
    )
    return names.map(Symbol)


@cache
def ints() -> st.SearchStrategy[int]:
    """Small, 64-bit edge and big integers."""
    return st.one_of(
        st.integers(-1000, 1000),
        st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64 - 1, 2**64]),
        st.integers(-(2**200), 2**200),
    )


@cache
def floats() -> st.SearchStrategy[float]:
    """Any float, with every NaN replaced by the canonical :data:`NAN`."""
    return st.one_of(
        st.floats(allow_nan=True, allow_infinity=True).map(lambda f: NAN if f != f else f),
        st.sampled_from([0.0, -0.0, NAN, math.inf, -math.inf, 1e16, 5e-324, 1.5]),
    )


@cache
def atoms() -> st.SearchStrategy[Value]:
    """Every kind of value that is not a container (and not Embedded)."""
    return st.one_of(
        st.none(),
        st.booleans(),
        ints(),
        floats(),
        _text,
        st.binary(max_size=12),
        symbols(),
    )


def _containers(children: st.SearchStrategy[Value]) -> st.SearchStrategy[Value]:
    small = st.lists(children, max_size=4)
    labels = st.one_of(symbols(), symbols(), children)
    return st.one_of(
        st.builds(Record, labels, small.map(tuple)),
        small.map(tuple),
        small.map(frozenset),
        st.lists(st.tuples(children, children), max_size=4).map(_dict),
    )


def _dict(pairs: list[tuple[Value, Value]]) -> FrozenDict:
    # Built from a list rather than st.dictionaries, whose uniqueness filter makes hypothesis
    # print the (huge) repr of the recursive strategy.
    return FrozenDict(dict(pairs))


@cache
def values() -> st.SearchStrategy[Value]:
    """Arbitrary nested values of modest size."""
    return st.recursive(atoms(), _containers, max_leaves=16)


def identical(a: Value, b: Value) -> bool:
    """Equal, and of the same kinds all the way down (see the module docstring)."""
    if a.__class__ is not b.__class__:
        return False
    cls = a.__class__
    if cls is float:
        if a != a or b != b:
            return a != a and b != b
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if cls is Record:
        return identical(a.label, b.label) and _identical_seq(a.fields, b.fields)
    if cls is tuple:
        return _identical_seq(a, b)
    if cls is frozenset:
        return _identical_seq(_sorted(a), _sorted(b))
    if cls is FrozenDict:
        a_keys, b_keys = _sorted(a), _sorted(b)
        return _identical_seq(a_keys, b_keys) and _identical_seq(
            [a[k] for k in a_keys], [b[k] for k in b_keys]
        )
    return a == b


def tagged(v: Value) -> object:
    """A naive canonical form of ``v`` whose Python equality is feds's type-exact equality.

    Every atom is tagged with its type (a float by its bits, so ``0.0`` and ``-0.0`` differ),
    containers are rebuilt from tagged parts. Shares no code with feds's own equality.
    """
    cls = v.__class__
    if cls is float:
        return ("float", struct.pack(">d", v))
    if cls is Record:
        return ("record", tagged(v.label), tuple(map(tagged, v.fields)))
    if cls is tuple:
        return ("sequence", tuple(map(tagged, v)))
    if cls is frozenset:
        return ("set", frozenset(map(tagged, v)))
    if cls is FrozenDict:
        return ("dict", frozenset((tagged(k), tagged(x)) for k, x in v._items.items()))
    return (cls.__name__, v)  # bool, int, str, bytes, Symbol, None, references


def _identical_seq(a: tuple | list, b: tuple | list) -> bool:
    return len(a) == len(b) and all(identical(x, y) for x, y in zip(a, b, strict=True))


def _sorted(items: frozenset | FrozenDict) -> list[Value]:
    # Pairing by sort order rather than by lookup: Record.__eq__ does not find a NaN label equal
    # to itself, so a set holding <#nan> cannot be searched for it.
    return sorted(items, key=sort_key)


# Regex sources that survive printing as /.../ (a source with the escape pair \/ would come back
# as the equivalent /, see feds.syntax).
REGEX_SOURCES = ["a", "^x$", "a/b", "[0-9]+", r"\d+", "(a|b)*c?", "é", r"\\", "", "//"]


def _range_bound() -> st.SearchStrategy[int | float | None]:
    finite = st.floats(allow_nan=False, allow_infinity=True)
    return st.one_of(st.none(), st.integers(-100, 100), finite, st.integers(-(2**70), 2**70))


@st.composite
def ranges(draw: st.DrawFn) -> Value:
    """Well-formed ``<range ...>`` constraints (bounds in order, never empty)."""
    lo, hi = draw(_range_bound()), draw(_range_bound())
    lo_inclusive, hi_inclusive = draw(st.booleans()), draw(st.booleans())
    if lo is not None and hi is not None:
        lo, hi = min(lo, hi), max(lo, hi)
        if lo == hi:
            lo_inclusive = hi_inclusive = True
    return pf.range_(lo, hi, lo_inclusive, hi_inclusive)


@cache
def constraints() -> st.SearchStrategy[Value]:
    """``<type t>``, ``<one-of #{...}>``, ``<range ...>`` and ``<regex "...">`` nodes."""
    return st.one_of(
        st.sampled_from(pf.TYPE_NAMES).map(pf.type_),
        st.lists(atoms(), max_size=3).map(pf.one_of),
        ranges(),
        st.sampled_from(REGEX_SOURCES).map(pf.regex),
    )


def _pattern_nodes(children: st.SearchStrategy[Value]) -> st.SearchStrategy[Value]:
    small = st.lists(children, max_size=3)
    labels = st.one_of(symbols(), values())
    return st.one_of(
        children.map(pf.bind),
        st.builds(pf.rec_group, labels, small),
        small.map(pf.arr_group),
        st.lists(st.tuples(values(), children), max_size=3).map(_dict).map(pf.dict_group),
        small.map(pf.and_),
    )


@cache
def patterns() -> st.SearchStrategy[Value]:
    """Well-formed patterns in record form, mixing every node kind."""
    leaves = st.one_of(
        st.just(pf.DISCARD),
        st.just(pf.bind()),
        values().map(pf.lit),
        constraints(),
    )
    return st.recursive(leaves, _pattern_nodes, max_leaves=10)
