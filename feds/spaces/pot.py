"""Tupelo's portable object templates (POTs), with the reference's exact semantics, quirks included.

A Tupelo tuple is a list (``[1, "foo"]``) or a map (``{"a": 2}``) of JSON-like data. A POT is a
list template (matches lists of the same length) or a map template (matches maps with exactly the
same keys). Each column is ``None`` (anything) or a dict of specifiers, all of which must hold:

* ``value: v`` — Ruby ``==``: ``42`` matches ``42.0``, lists and maps compare structurally;
  ``{value: None}`` is a wildcard (a nil specifier is skipped).
* ``set: [...]`` — membership by Ruby ``eql?``: ``1.0`` is not in ``[1, 2]``; ``None`` may be in it.
* ``type: t`` — ``boolean``, ``number``, ``integer`` (rejects ``1.0``), ``string``, ``list``,
  ``map``; anything else is refused when the template is built.
* ``range: [lo, hi]`` — inclusive; a truthy third element excludes the end; a ``None`` end is open;
  numbers compare numerically and strings lexicographically; a value that cannot be compared
  simply does not match.
* ``regex: src`` — an unanchored search (Ruby ``Regexp ===``), false for non-strings; as in Ruby,
  ``^`` and ``$`` match at line boundaries.

:meth:`Pot.to_pattern` turns a POT into a feds overlay pattern (``protocols/patterns.md``),
exactly where the pattern language can say the same thing, else as a wider pattern (and
:attr:`Pot.exact` is False, so the receiver checks the POT itself).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from feds import pattern_forms as pf
from feds.regex_program import RegexRefused
from feds.regex_safety import compile_search
from feds.values import FrozenDict, Value, exact_key

SPECIFIERS = ("value", "set", "type", "range", "regex")
TYPES = ("boolean", "number", "integer", "string", "list", "map")


class PotError(ValueError):
    """A template that Tupelo would refuse to build."""


# --------------------------------------------------------------------------------------------
# Ruby's equalities on JSON-like data


def _num(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def ruby_eq(a: Any, b: Any) -> bool:
    """Ruby ``==``: numbers compare by value across Integer/Float; containers structurally."""
    if _num(a) and _num(b):
        return a == b
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(ruby_eq(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        if len(a) != len(b):
            return False
        for k, v in a.items():
            key = next((k2 for k2 in b if ruby_eql(k, k2)), _MISSING)
            if key is _MISSING or not ruby_eq(v, b[key]):
                return False
        return True
    return _ruby_class(a) == _ruby_class(b) and a == b


_MISSING = object()


def _ruby_class(x: Any) -> str:
    if x is None:
        return "nil"
    if isinstance(x, bool):
        return "bool"
    if isinstance(x, int):
        return "int"
    if isinstance(x, float):
        return "float"
    if isinstance(x, str):
        return "str"
    if isinstance(x, list | tuple):
        return "list"
    if isinstance(x, dict):
        return "map"
    return type(x).__name__


def ruby_eql(a: Any, b: Any) -> bool:
    """Ruby ``eql?`` (Set and Hash membership): the same class and equal, recursively."""
    cls = _ruby_class(a)
    if cls != _ruby_class(b):
        return False
    if cls == "list":
        return len(a) == len(b) and all(ruby_eql(x, y) for x, y in zip(a, b, strict=True))
    if cls == "map":
        return len(a) == len(b) and all(
            any(ruby_eql(k, k2) and ruby_eql(v, b[k2]) for k2 in b) for k, v in a.items()
        )
    return a == b


# --------------------------------------------------------------------------------------------
# Columns


def _type_test(name: str) -> Callable[[Any], bool]:
    return {
        "boolean": lambda x: isinstance(x, bool),
        "number": _num,
        "integer": lambda x: isinstance(x, int) and not isinstance(x, bool),
        "string": lambda x: isinstance(x, str),
        "list": lambda x: isinstance(x, list | tuple),
        "map": lambda x: isinstance(x, dict),
    }[name]


def _comparable(a: Any, b: Any) -> bool:
    return (_num(a) and _num(b)) or (isinstance(a, str) and isinstance(b, str))


def ruby_regex(source: str) -> Callable[[str], bool]:
    """A Ruby regex source as a search over Python strings (``^``/``$`` per line, ``\\z`` the
    very end), run by the linear-time matcher that pattern regexes use: templates come from
    clients, and ``re``'s backtracking would let one template block the space's server."""
    try:
        return compile_search("(?m)" + source.replace(r"\z", r"\Z")).search
    except (re.error, RegexRefused) as exc:
        raise PotError(f"invalid regex {source!r}: {exc}") from None


class Column:
    """One column of a POT: the specifiers that must all hold (none: a wildcard)."""

    def __init__(self, spec: Any, where: str) -> None:
        self.spec = spec
        self.tests: list[Callable[[Any], bool]] = []
        if spec is None:
            return
        if not isinstance(spec, dict):
            raise PotError(f"expected None or a dict in template at {where}, got {spec!r}")
        for key, arg in spec.items():
            if key not in SPECIFIERS:
                raise PotError(f"unrecognized match specifier {key!r} at {where}")
            if arg is None:
                continue  # nil matchers are skipped: {value: None} is a wildcard
            self.tests.append(self._test(key, arg, where))

    def _test(self, key: str, arg: Any, where: str) -> Callable[[Any], bool]:
        if key == "value":
            return lambda x: ruby_eq(arg, x)
        if key == "set":
            if not isinstance(arg, list | tuple):
                raise PotError(f"set takes a list at {where}, got {arg!r}")
            return lambda x: any(ruby_eql(m, x) for m in arg)
        if key == "type":
            if arg not in TYPES:
                raise PotError(f"unknown type {arg!r} at {where} (one of {', '.join(TYPES)})")
            return _type_test(arg)
        if key == "range":
            if not isinstance(arg, list | tuple) or len(arg) not in (2, 3):
                raise PotError(f"range takes [lo, hi] or [lo, hi, exclude_end] at {where}")
            lo, hi = arg[0], arg[1]
            exclusive = len(arg) == 3 and arg[2] not in (None, False)
            if lo is not None and hi is not None and not _comparable(lo, hi):
                raise PotError(f"bad value for range {arg!r} at {where}")
            return lambda x: _in_range(x, lo, hi, exclusive)
        if not isinstance(arg, str):
            raise PotError(f"regex takes a string at {where}, got {arg!r}")
        search = ruby_regex(arg)
        return lambda x: isinstance(x, str) and search(x)

    def __call__(self, x: Any) -> bool:
        return all(test(x) for test in self.tests)


def _in_range(x: Any, lo: Any, hi: Any, exclusive: bool) -> bool:
    if (lo is not None and not _comparable(lo, x)) or (hi is not None and not _comparable(hi, x)):
        return False
    if lo is None and hi is None and not (_num(x) or isinstance(x, str)):
        return False
    if isinstance(x, float) and math.isnan(x):
        return False
    if lo is not None and x < lo:
        return False
    return hi is None or (x < hi if exclusive else x <= hi)


# --------------------------------------------------------------------------------------------
# Templates


class Pot:
    """A portable object template: ``Pot([{"value": "wine"}, None])`` or ``Pot({"a": None})``."""

    def __init__(self, template: list | tuple | dict) -> None:
        self.template = template
        if isinstance(template, dict):
            self.columns: dict | list = {k: Column(s, repr(k)) for k, s in template.items()}
        elif isinstance(template, list | tuple):
            self.columns = [Column(s, f"index {i}") for i, s in enumerate(template)]
        else:
            raise PotError(f"a template is a list or a dict, got {template!r}")

    def __repr__(self) -> str:
        return f"Pot({self.template!r})"

    def matches(self, fields: Any) -> bool:
        columns = self.columns
        if isinstance(columns, dict):
            if not isinstance(fields, dict) or len(fields) != len(columns):
                return False
            return all(k in fields and column(fields[k]) for k, column in columns.items())
        if not isinstance(fields, list | tuple) or len(fields) != len(columns):
            return False
        return all(column(x) for column, x in zip(columns, fields, strict=True))

    __call__ = matches

    @property
    def exact(self) -> bool:
        """True if :meth:`to_pattern` matches exactly the tuples this POT matches."""
        return self._pattern()[1]

    def to_pattern(self) -> Value:
        """A feds pattern matching (at least) the tuples this POT matches, as feds values
        (lists as sequences, maps as dicts): exactly so when :attr:`exact`."""
        return self._pattern()[0]

    def _pattern(self) -> tuple[Value, bool]:
        if isinstance(self.template, dict):
            parts = {k: _column_pattern(s) for k, s in self.template.items()}
            # a dict group admits extra keys: exact only with a residual key-set check
            return pf.dict_group({k: p for k, (p, _) in parts.items()}), False
        parts_list = [_column_pattern(s) for s in self.template]
        return pf.arr_group(p for p, _ in parts_list), all(e for _, e in parts_list)


def to_feds_value(x: Any) -> Value:
    """A Tupelo tuple (or part of one) as a feds value: lists to sequences, maps to dicts."""
    if isinstance(x, list | tuple):
        return tuple(to_feds_value(v) for v in x)
    if isinstance(x, dict):
        return FrozenDict({to_feds_value(k): to_feds_value(v) for k, v in x.items()})
    return x


_TYPE_PATTERNS = {
    "boolean": "boolean",
    "number": "number",
    "integer": "integer",
    "string": "string",
    "list": "sequence",
    "map": "dict",
}


def _scalar_class_pattern(cls: str) -> Value | None:
    return {"bool": "boolean", "int": "integer", "float": "float"}.get(cls)


def _value_pattern(v: Any) -> tuple[Value, bool]:
    if _num(v):  # [v, v] admits 42 and 42.0 alike, never a boolean, never NaN (NaN != NaN)
        return (pf.one_of(()) if v != v else pf.range_(v, v, True, True)), True
    if isinstance(v, bool):
        return pf.and_([pf.type_("boolean"), pf.lit(v)]), True
    if isinstance(v, list | tuple):
        parts = [_value_pattern(x) for x in v]
        return pf.arr_group(p for p, _ in parts), all(e for _, e in parts)
    if isinstance(v, dict):
        return pf.type_("dict"), False
    return pf.lit(v), True


def _set_pattern(members: list) -> tuple[Value, bool]:
    members = [m for m in members if m == m]  # NaN is no member of anything (not even by eql?)
    if len({exact_key(m) for m in members}) != len(set(members)):
        return pf.DISCARD, False  # 1 and true: a feds set cannot hold both (residual check)
    classes = {_ruby_class(m) for m in members}
    numeric = classes & {"bool", "int", "float"}
    if classes - {"bool", "int", "float", "str", "nil"}:
        return pf.one_of(to_feds_value(m) for m in members), False
    if not numeric:
        return pf.one_of(members), True
    if len(classes) == 1:
        (cls,) = classes
        return pf.and_([pf.type_(_scalar_class_pattern(cls)), pf.one_of(members)]), True
    return pf.one_of(members), False


def _range_pattern(arg: list) -> tuple[Value, bool]:
    lo, hi = arg[0], arg[1]
    exclusive = len(arg) == 3 and arg[2] not in (None, False)
    if isinstance(lo, str) or isinstance(hi, str):
        return pf.type_("string"), False
    if lo is None and hi is None:
        return pf.DISCARD, False
    return pf.range_(lo, hi, True, not exclusive), True


def _column_pattern(spec: Any) -> tuple[Value, bool]:
    if spec is None:
        return pf.DISCARD, True
    parts: list[Value] = []
    exact = True
    for key, arg in spec.items():
        if arg is None:
            continue
        if key == "value":
            p, e = _value_pattern(arg)
        elif key == "set":
            p, e = _set_pattern(list(arg))
        elif key == "type":
            p, e = pf.type_(_TYPE_PATTERNS[arg]), True
        elif key == "range":
            p, e = _range_pattern(list(arg))
        else:
            translated = arg.replace(r"\z", r"\Z")
            p, e = pf.regex(f"(?m){translated}"), True
        parts.append(p)
        exact = exact and e
    if not parts:
        return pf.DISCARD, True
    return (parts[0] if len(parts) == 1 else pf.and_(parts)), exact
