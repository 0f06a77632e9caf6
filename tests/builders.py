"""Terse builders of record-form patterns for tests.

Unlike the constructors in :mod:`feds.pattern_forms` they check nothing, so tests can also
build *invalid* patterns (an unknown type name, a range with non-boolean flags) to test errors.
"""

from __future__ import annotations

from feds.pattern_forms import (
    AND,
    ARR_KIND,
    BIND,
    DICT_KIND,
    GROUP,
    LIT,
    ONE_OF,
    RANGE,
    REC,
    REGEX,
    TYPE,
)
from feds.pattern_forms import DISCARD as D
from feds.values import FrozenDict, Record, Symbol

__all__ = ["D", "and_", "arr", "bind", "dct", "group", "lit", "one_of", "r", "rec", "rng", "rx"]
__all__ += ["typ"]


def bind(p: object = D) -> Record:
    return Record(BIND, (p,))


def lit(v: object) -> Record:
    return Record(LIT, (v,))


def group(kind: Record, subs: dict) -> Record:
    return Record(GROUP, (kind, FrozenDict(subs)))


def rec(label: object, *ps: object) -> Record:
    """A record group; a ``str`` label becomes a symbol."""
    lab = Symbol(label) if isinstance(label, str) else label
    return group(Record(REC, (lab,)), dict(enumerate(ps)))


def arr(*ps: object) -> Record:
    return group(ARR_KIND, dict(enumerate(ps)))


def dct(entries: dict) -> Record:
    return group(DICT_KIND, entries)


def and_(*ps: object) -> Record:
    return Record(AND, (tuple(ps),))


def typ(name: str) -> Record:
    return Record(TYPE, (Symbol(name),))


def one_of(*vs: object) -> Record:
    return Record(ONE_OF, (frozenset(vs),))


def rng(lo: object, hi: object, lo_inc: object = True, hi_inc: object = True) -> Record:
    return Record(RANGE, (lo, hi, lo_inc, hi_inc))


def rx(src: object) -> Record:
    return Record(REGEX, (src,))


def r(label: str, *fields: object) -> Record:
    """A plain record value with a symbol label."""
    return Record(Symbol(label), fields)
