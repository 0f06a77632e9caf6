"""Pattern semantics: validation, the reference matcher, and compilation to index skeletons.

Patterns are values in the record form of ``protocols/patterns.md``. This module gives them
meaning in two independent ways:

* :func:`match` is the direct, recursive reading of the spec: it walks pattern and value together
  and returns the captures vector or ``None``. It is the reference semantics (tests compare the
  index against it, and linear matchers such as tuple spaces use it as is).
* :func:`compile_pattern` turns a pattern into a :class:`Skeleton` for :mod:`feds.index`: the
  paper's shape, constant map and capture map, plus *residual checks* for the constraints
  (``type``, ``one-of``, ``range``, ``regex``) and for the presence of non-literal dict keys.

Paths are tuples of steps: an ``int`` for a record field or a sequence item, the key's
:func:`~feds.values.exact_key` for a dict entry (so that paths compare type-exactly). Captures are
numbered depth-first, left to right (a ``bind`` before the captures inside it); dict entries are
visited in ``sort_key`` order of their keys.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from feds.regex_safety import RegexRefused, compile_search
from feds.values import FrozenDict, Record, Symbol, Value, exact_equal, exact_key, sort_key

Path: TypeAlias = tuple
"""A position inside a value: field/item indexes (``int``) and dict keys."""

Class: TypeAlias = tuple
"""What a shape pins down at a position: ``("rec", label, arity)``, ``("arr", n)`` or
``("dict",)`` (a dict with at least the keys a pattern lists)."""

__all__ = [
    "TYPE_TESTS",
    "Check",
    "HasKey",
    "OneOf",
    "PatternError",
    "Range",
    "Regex",
    "Skeleton",
    "TypeCheck",
    "capture_count",
    "compile_pattern",
    "match",
    "validate",
]


class PatternError(ValueError):
    """An invalid pattern. ``path`` locates the bad part: group entry keys, ``<bind>`` and
    ``<and>[i]`` steps from the root of the pattern."""

    def __init__(self, message: str, path: tuple = ()) -> None:
        self.path = path
        super().__init__(f"{message} (at {_render_path(path)})")


def _render_path(path: tuple) -> str:
    if not path:
        return "the pattern root"
    parts = [step if isinstance(step, _Step) else repr(step) for step in path]
    return "pattern path " + " / ".join(parts)


class _Step(str):
    """A structural step of a pattern path (``<bind>``, ``<and>[i]``), printed as is."""

    __slots__ = ()


_BIND_STEP = _Step("<bind>")
_LIT = Symbol("lit")


def _and_step(i: int) -> _Step:
    return _Step(f"<and>[{i}]")


def _show(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


# --------------------------------------------------------------------------------------------
# Type tests (shared by the reference matcher and the compiled checks)


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _is_integer(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


TYPE_TESTS: dict[str, Callable[[Any], bool]] = {
    "boolean": lambda x: isinstance(x, bool),
    "number": _is_number,
    "integer": _is_integer,
    "float": lambda x: isinstance(x, float),
    "string": lambda x: isinstance(x, str),
    "bytes": lambda x: isinstance(x, bytes),
    "symbol": lambda x: isinstance(x, Symbol),
    "record": lambda x: isinstance(x, Record),
    "sequence": lambda x: isinstance(x, tuple),
    "set": lambda x: isinstance(x, frozenset),
    "dict": lambda x: isinstance(x, FrozenDict),
}
"""The ``<type t>`` names and their tests (``number`` and ``integer`` exclude booleans)."""


# --------------------------------------------------------------------------------------------
# Residual checks


class Check:
    """A residual constraint on the value at some path: ``check(value) -> bool``.

    Checks are immutable and compare by their parameters (type-exactly), so equal patterns
    compile to equal skeletons and the index can share one handler between them.
    """

    __slots__ = ()

    def __call__(self, x: Any) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def _key(self) -> tuple:  # pragma: no cover - abstract
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return other.__class__ is self.__class__ and exact_equal(self._key(), other._key())  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((self.__class__.__name__, self._key()))

    def __repr__(self) -> str:
        args = ", ".join(repr(a) for a in self._key())
        return f"{self.__class__.__name__}({args})"


class TypeCheck(Check):
    """``<type t>``: the value is of type ``t`` (see :data:`TYPE_TESTS`)."""

    __slots__ = ("_test", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._test = TYPE_TESTS[name]

    def __call__(self, x: Any) -> bool:
        return self._test(x)

    def _key(self) -> tuple:
        return (self.name,)


class OneOf(Check):
    """``<one-of #{v ...}>``: the value equals (type-exactly) one of ``values``."""

    __slots__ = ("_keys", "values")

    def __init__(self, values: frozenset) -> None:
        self.values = values
        self._keys = frozenset(map(exact_key, values))

    def __call__(self, x: Any) -> bool:
        return exact_key(x) in self._keys

    def _key(self) -> tuple:
        return (self.values,)


class Range(Check):
    """``<range lo hi lo-inclusive hi-inclusive>``: a number (not a boolean, not NaN) in range.

    ``None`` bounds are open ends. Anything that is not a number fails (never raises).
    """

    __slots__ = ("hi", "hi_inclusive", "lo", "lo_inclusive")

    def __init__(
        self, lo: int | float | None, hi: int | float | None, lo_inclusive: bool, hi_inclusive: bool
    ) -> None:
        self.lo = lo
        self.hi = hi
        self.lo_inclusive = lo_inclusive
        self.hi_inclusive = hi_inclusive

    def __call__(self, x: Any) -> bool:
        cls = x.__class__
        if cls is not int and cls is not float and not _is_number(x):
            return False
        if x != x:  # NaN
            return False
        lo = self.lo
        if lo is not None and (x < lo if self.lo_inclusive else x <= lo):
            return False
        hi = self.hi
        return hi is None or (x <= hi if self.hi_inclusive else x < hi)

    def _key(self) -> tuple:
        return (self.lo, self.hi, self.lo_inclusive, self.hi_inclusive)


class Regex(Check):
    """``<regex "src">``: a string in which ``re.search(src, s)`` finds a match (found in
    linear time by :func:`feds.regex_safety.compile_search`)."""

    __slots__ = ("_search", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        self._search = compile_search(source).search

    def __call__(self, x: Any) -> bool:
        return isinstance(x, str) and self._search(x)

    def _key(self) -> tuple:
        return (self.source,)


class HasKey(Check):
    """The dict at this path has ``key`` (for dict group entries that are not literals)."""

    __slots__ = ("key",)

    def __init__(self, key: Value) -> None:
        self.key = key

    def __call__(self, d: Any) -> bool:
        return d.__class__ is FrozenDict and self.key in d

    def _key(self) -> tuple:
        return (self.key,)


# --------------------------------------------------------------------------------------------
# Skeletons


@dataclass(frozen=True, slots=True, eq=False)
class Skeleton:
    """What the index needs to know about a pattern (the paper's skeleton, extended).

    * ``shape``: the paper's shape, flattened to its class-pinning positions in depth-first order:
      ``((path, class), ...)``; positions not listed are the paper's ``*``.
    * ``const_paths`` / ``const_values``: the constant map, split in two parallel tuples.
    * ``capture_paths``: the capture map, in capture order.
    * ``checks``: ``((path, Check), ...)`` residual constraints, in depth-first order (a dict's
      ``HasKey`` comes before anything under that key, so evaluating them in order is safe).
    """

    shape: tuple[tuple[Path, Class], ...]
    const_paths: tuple[Path, ...]
    const_values: tuple[Value, ...]
    capture_paths: tuple[Path, ...]
    checks: tuple[tuple[Path, Check], ...]

    @property
    def capture_count(self) -> int:
        return len(self.capture_paths)

    def _parts(self) -> tuple:
        return (self.shape, self.const_paths, self.const_values, self.capture_paths, self.checks)

    def __eq__(self, other: object) -> bool:  # type-exact, as the constants are
        return other.__class__ is Skeleton and exact_equal(self._parts(), other._parts())  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._parts())


class _Acc:
    __slots__ = ("captures", "checks", "const_paths", "const_values", "shape")

    def __init__(self) -> None:
        self.shape: list = []
        self.const_paths: list = []
        self.const_values: list = []
        self.captures: list = []
        self.checks: list = []


_ARITY = {
    "_": 0,
    "bind": 1,
    "lit": 1,
    "group": 2,
    "and": 1,
    "type": 1,
    "one-of": 1,
    "range": 4,
    "regex": 1,
}


def _label_name(p: Any, ppath: tuple) -> str:
    """The label name of pattern record ``p``, after checking its label and arity."""
    if p.__class__ is not Record:
        raise PatternError(f"expected a pattern record, got {_show(p)}", ppath)
    label = p.label
    name = label.name if label.__class__ is Symbol else None
    arity = _ARITY.get(name)  # type: ignore[arg-type]
    if arity is None:
        raise PatternError(f"unknown pattern record label {_show(label)}", ppath)
    if len(p.fields) != arity:
        raise PatternError(
            f"<{name}> takes {arity} field{'s' if arity != 1 else ''}, got {len(p.fields)}",
            ppath,
        )
    return name  # type: ignore[return-value]


def _group_kind(p: Record, ppath: tuple) -> tuple[str, Value, FrozenDict]:
    """``(kind, label, entries)`` of a ``<group kind entries>`` record, checking both parts."""
    kind, entries = p.fields
    if entries.__class__ is not FrozenDict:
        raise PatternError(f"group entries must be a dict, got {_show(entries)}", ppath)
    if kind.__class__ is Record and kind.label.__class__ is Symbol:
        name = kind.label.name
        if name == "rec" and len(kind.fields) == 1:
            _positional_keys(entries, ppath)
            return "rec", kind.fields[0], entries
        if name == "arr" and not kind.fields:
            _positional_keys(entries, ppath)
            return "arr", None, entries
        if name == "dict" and not kind.fields:
            return "dict", None, entries
    raise PatternError(
        f"unknown group kind {_show(kind)} (expected <rec label>, <arr>, <dict>)", ppath
    )


def _positional_keys(entries: FrozenDict, ppath: tuple) -> None:
    n = len(entries)
    for k in entries:
        if k.__class__ is not int or not 0 <= k < n:
            raise PatternError(
                f"rec/arr group keys must be exactly the integers 0..{n - 1}, found key {_show(k)}",
                ppath,
            )


def _dict_entries(entries: FrozenDict) -> list[tuple[Value, Value]]:
    return sorted(entries.items(), key=lambda kv: sort_key(kv[0]))


def _check_range(p: Record, ppath: tuple) -> Range:
    lo, hi, lo_inc, hi_inc = p.fields
    for what, bound in (("lower", lo), ("upper", hi)):
        if bound is not None and not _is_number(bound):
            raise PatternError(
                f"range {what} bound must be a number or #nil, got {_show(bound)}", ppath
            )
        if bound is not None and bound != bound:
            raise PatternError(f"range {what} bound is NaN", ppath)
    for what, flag in (("lower", lo_inc), ("upper", hi_inc)):
        if flag.__class__ is not bool:
            raise PatternError(
                f"range {what}-inclusive flag must be a boolean, got {_show(flag)}", ppath
            )
    return Range(lo, hi, lo_inc, hi_inc)


def _check_regex(p: Record, ppath: tuple) -> Regex:
    source = p.fields[0]
    if source.__class__ is not str:
        raise PatternError(f"regex source must be a string, got {_show(source)}", ppath)
    try:
        return Regex(source)
    except re.error as exc:
        raise PatternError(f"invalid regex {source!r}: {exc}", ppath) from None
    except RegexRefused as exc:
        raise PatternError(f"regex {source!r} refused: {exc}", ppath) from None


def _check_type(p: Record, ppath: tuple) -> TypeCheck:
    t = p.fields[0]
    if t.__class__ is not Symbol or t.name not in TYPE_TESTS:
        raise PatternError(
            f"unknown type name {_show(t)} (expected a symbol, one of {' '.join(TYPE_TESTS)})",
            ppath,
        )
    return TypeCheck(t.name)


def _walk(p: Any, vpath: Path, ppath: tuple, acc: _Acc) -> bool:
    """Validate ``p`` (at value path ``vpath``) and collect its skeleton parts into ``acc``.

    Returns True if ``p`` pins the class of the value at ``vpath`` (a group, possibly under
    ``bind``/``and``).
    """
    name = _label_name(p, ppath)
    fields = p.fields
    if name == "_":
        return False
    if name == "bind":
        acc.captures.append(vpath)
        return _walk(fields[0], vpath, (*ppath, _BIND_STEP), acc)
    if name == "lit":
        acc.const_paths.append(vpath)
        acc.const_values.append(fields[0])
        return False
    if name == "group":
        kind, label, entries = _group_kind(p, ppath)
        if kind == "dict":
            acc.shape.append((vpath, ("dict",)))
            for k, q in _dict_entries(entries):
                sub = (*vpath, exact_key(k))
                is_lit = q.__class__ is Record and q.label == _LIT and len(q.fields) == 1
                if not is_lit:
                    acc.checks.append((vpath, HasKey(k)))
                _walk(q, sub, (*ppath, k), acc)
            return True
        n = len(entries)
        acc.shape.append((vpath, ("rec", exact_key(label), n) if kind == "rec" else ("arr", n)))
        items = entries._items
        for i in range(n):
            _walk(items[i], (*vpath, i), (*ppath, i), acc)
        return True
    if name == "and":
        items = fields[0]
        if items.__class__ is not tuple:
            raise PatternError(f"<and> takes a sequence of patterns, got {_show(items)}", ppath)
        if not items:
            raise PatternError("<and []> is empty (it needs at least one pattern)", ppath)
        structural = 0
        for i, q in enumerate(items):
            if _walk(q, vpath, (*ppath, _and_step(i)), acc):
                structural += 1
                if structural > 1:
                    raise PatternError(
                        "<and> may hold at most one structural (group) pattern",
                        (*ppath, _and_step(i)),
                    )
        return structural == 1
    if name == "type":
        acc.checks.append((vpath, _check_type(p, ppath)))
    elif name == "one-of":
        values = fields[0]
        if values.__class__ is not frozenset:
            raise PatternError(f"<one-of> takes a set, got {_show(values)}", ppath)
        acc.checks.append((vpath, OneOf(values)))
    elif name == "range":
        acc.checks.append((vpath, _check_range(p, ppath)))
    else:  # regex
        acc.checks.append((vpath, _check_regex(p, ppath)))
    return False


def validate(p: Value) -> None:
    """Raise :class:`PatternError` (naming the path of the bad part) unless ``p`` is valid."""
    _walk(p, (), (), _Acc())


def _compile(p: Value) -> Skeleton:
    acc = _Acc()
    _walk(p, (), (), acc)
    return Skeleton(
        shape=tuple(acc.shape),
        const_paths=tuple(acc.const_paths),
        const_values=tuple(acc.const_values),
        capture_paths=tuple(acc.captures),
        checks=tuple(acc.checks),
    )


_CACHE: dict[Value, Skeleton] = {}
_CACHE_MAX = 1 << 15
"""Bound on cached skeletons: a subscription flood compiles a few patterns per distinct topic at
every node, and a cache smaller than that working set is emptied before any entry is reused."""


def compile_pattern(p: Value) -> Skeleton:
    """The :class:`Skeleton` of pattern ``p``; raises :class:`PatternError` if ``p`` is invalid.

    Results are cached by pattern value: equal patterns (type-exactly, so ``<lit 1>`` and
    ``<lit 1.0>`` are different patterns) are equally valid and compile to the same skeleton.
    """
    skeleton = _CACHE.get(p)
    if skeleton is not None:
        return skeleton
    skeleton = _compile(p)
    if len(_CACHE) >= _CACHE_MAX:
        del _CACHE[next(iter(_CACHE))]
    _CACHE[p] = skeleton
    return skeleton


def capture_count(p: Value) -> int:
    """How many values a match of ``p`` captures."""
    return len(compile_pattern(p).capture_paths)


# --------------------------------------------------------------------------------------------
# The reference matcher


def match(p: Value, v: Value) -> tuple | None:
    """Match value ``v`` against pattern ``p``: the captures vector, or ``None`` if no match.

    This is the direct reading of ``protocols/patterns.md`` and shares nothing with the index.
    It checks the parts of ``p`` it visits (raising :class:`PatternError`); :func:`validate`
    checks a whole pattern.
    """
    captures: list = []
    if _match(p, v, captures, ()):
        return tuple(captures)
    return None


def _match(p: Any, v: Any, captures: list, ppath: tuple) -> bool:
    name = _label_name(p, ppath)
    fields = p.fields
    if name == "_":
        return True
    if name == "bind":
        captures.append(v)
        return _match(fields[0], v, captures, (*ppath, _BIND_STEP))
    if name == "lit":
        return exact_equal(v, fields[0])
    if name == "group":
        kind, label, entries = _group_kind(p, ppath)
        if kind == "rec":
            if v.__class__ is not Record or len(v.fields) != len(entries):
                return False
            if not exact_equal(v.label, label):
                return False
            items = entries._items
            return all(_match(items[i], x, captures, (*ppath, i)) for i, x in enumerate(v.fields))
        if kind == "arr":
            if v.__class__ is not tuple or len(v) != len(entries):
                return False
            items = entries._items
            return all(_match(items[i], x, captures, (*ppath, i)) for i, x in enumerate(v))
        if v.__class__ is not FrozenDict:
            return False
        for k, q in _dict_entries(entries):
            if k not in v:
                return False
            if not _match(q, v[k], captures, (*ppath, k)):
                return False
        return True
    if name == "and":
        items = fields[0]
        if items.__class__ is not tuple or not items:
            raise PatternError("<and> takes a non-empty sequence of patterns", ppath)
        return all(_match(q, v, captures, (*ppath, _and_step(i))) for i, q in enumerate(items))
    if name == "type":
        t = fields[0]
        if t.__class__ is not Symbol or t.name not in TYPE_TESTS:
            raise PatternError(f"unknown type name {_show(t)}", ppath)
        return TYPE_TESTS[t.name](v)
    if name == "one-of":
        values = fields[0]
        if values.__class__ is not frozenset:
            raise PatternError(f"<one-of> takes a set, got {_show(values)}", ppath)
        return any(exact_equal(v, x) for x in values)
    if name == "range":
        _check_range(p, ppath)
        lo, hi, lo_inc, hi_inc = fields
        if not _is_number(v) or v != v:
            return False
        if lo is not None and not (lo <= v if lo_inc else lo < v):
            return False
        return hi is None or (v <= hi if hi_inc else v < hi)
    # regex
    return _check_regex(p, ppath)(v)
