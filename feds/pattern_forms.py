"""The vocabulary of patterns in record form (see ``protocols/patterns.md``).

A pattern travels between nodes as an ordinary value. This module names the record labels of that
form and offers one constructor per node kind, plus a few predicates that say what kind a node is.
It holds no matching, compiling or validating logic (that lives in :mod:`feds.patterns`); the text
syntax lives in :mod:`feds.syntax`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from feds.values import FrozenDict, Record, Symbol, Value

# Labels of the pattern records.
DISCARD_LABEL = Symbol("_")
BIND = Symbol("bind")
LIT = Symbol("lit")
GROUP = Symbol("group")
AND = Symbol("and")
TYPE = Symbol("type")
ONE_OF = Symbol("one-of")
RANGE = Symbol("range")
REGEX = Symbol("regex")

# Labels of the group kinds (the first field of a ``<group kind entries>`` record).
REC = Symbol("rec")
ARR = Symbol("arr")
DICT = Symbol("dict")

TYPE_NAMES: tuple[str, ...] = (
    "boolean",
    "number",
    "integer",
    "float",
    "string",
    "bytes",
    "symbol",
    "record",
    "sequence",
    "set",
    "dict",
)
"""The type names a ``<type t>`` constraint may use (``t`` is the Symbol of one of these)."""

CONSTRAINT_LABELS = frozenset({TYPE, ONE_OF, RANGE, REGEX})
"""Labels of the constraint nodes: they test a value without looking inside it structurally."""

DISCARD = Record(DISCARD_LABEL, ())
"""``<_>``: matches anything."""

ARR_KIND = Record(ARR, ())
DICT_KIND = Record(DICT, ())


BIND_ANY = Record(BIND, (DISCARD,))
"""``<bind <_>>``: capture anything (shared: patterns are immutable values)."""


def bind(p: Value = DISCARD) -> Record:
    """``<bind p>``: match ``p`` and capture the whole matched value."""
    return BIND_ANY if p is DISCARD else Record(BIND, (p,))


def lit(v: Value) -> Record:
    """``<lit v>``: match values equal to ``v``."""
    return Record(LIT, (v,))


def rec_group(label: Value, fields: Iterable[Value]) -> Record:
    """``<group <rec label> {0: p0 ...}>``: a record with this label and exactly these fields."""
    return Record(GROUP, (Record(REC, (label,)), _numbered(fields)))


def arr_group(items: Iterable[Value]) -> Record:
    """``<group <arr> {0: p0 ...}>``: a sequence of exactly these items."""
    return Record(GROUP, (ARR_KIND, _numbered(items)))


def dict_group(entries: Mapping[Value, Value]) -> Record:
    """``<group <dict> {k: p ...}>``: a dict with at least these keys, values matching."""
    return Record(GROUP, (DICT_KIND, FrozenDict(entries)))


def and_(patterns: Iterable[Value]) -> Record:
    """``<and [p ...]>``: every pattern matches."""
    return Record(AND, (tuple(patterns),))


def type_(name: str) -> Record:
    """``<type t>``: the value is of the named type (one of :data:`TYPE_NAMES`)."""
    if name not in TYPE_NAMES:
        raise ValueError(f"unknown type name {name!r}; expected one of {', '.join(TYPE_NAMES)}")
    return Record(TYPE, (Symbol(name),))


def one_of(values: Iterable[Value]) -> Record:
    """``<one-of #{v ...}>``: the value equals one of these."""
    return Record(ONE_OF, (frozenset(values),))


def range_(
    lo: int | float | None, hi: int | float | None, lo_inclusive: bool, hi_inclusive: bool
) -> Record:
    """``<range lo hi lo-inclusive hi-inclusive>``; ``None`` is an open end."""
    return Record(RANGE, (lo, hi, bool(lo_inclusive), bool(hi_inclusive)))


def regex(source: str) -> Record:
    """``<regex "src">``: a string in which ``re.search(src, s)`` finds a match."""
    return Record(REGEX, (source,))


def _numbered(items: Iterable[Value]) -> FrozenDict:
    return FrozenDict({i: p for i, p in enumerate(items)})


def is_node(p: Value, label: Symbol, arity: int) -> bool:
    """True if ``p`` is a record with this label and number of fields."""
    return p.__class__ is Record and p.label == label and len(p.fields) == arity


def is_constraint(p: Value) -> bool:
    """True if ``p`` looks like a constraint node (``type``, ``one-of``, ``range``, ``regex``)."""
    if p.__class__ is not Record or p.label not in CONSTRAINT_LABELS:
        return False
    return len(p.fields) == (4 if p.label == RANGE else 1)


def group_kind(p: Value) -> Symbol | None:
    """The kind (``REC``, ``ARR`` or ``DICT``) of a well-shaped group node, else ``None``."""
    if not is_node(p, GROUP, 2) or p.fields[1].__class__ is not FrozenDict:
        return None
    kind = p.fields[0]
    if kind.__class__ is not Record:
        return None
    if kind.label == REC and len(kind.fields) == 1:
        return REC
    if kind.label in (ARR, DICT) and not kind.fields:
        return kind.label
    return None
