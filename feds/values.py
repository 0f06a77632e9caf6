"""The feds data model: immutable, hashable values that assertions and messages are made of.

A value is one of

* ``None``, ``bool``, ``int`` (arbitrary size), ``float``, ``str``, ``bytes``;
* :class:`Symbol` — a bare name such as ``present``;
* :class:`Record` — a label (usually a Symbol) and a tuple of fields, written ``<present "Alice">``;
* ``tuple`` — a sequence, written ``[1 2]``;
* ``frozenset`` — a set, written ``#{x y}``;
* :class:`FrozenDict` — an immutable mapping, written ``{a: 1}``;
* :class:`Embedded` — a reference to an entity (a :class:`feds.actor.Ref`, or a wire reference
  inside the relay).

Equality is Python's: ``1``, ``1.0`` and ``True`` are the *same* assertion, and so are ``0.0`` and
``-0.0`` (the codec still keeps the sign bit of a float it carries). Every NaN that enters through
:func:`from_python`, the parser or the codec is replaced by the single object :data:`NAN`, so NaN
equals itself inside containers and a NaN assertion can be retracted.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Iterator, Mapping
from typing import Any, TypeAlias

NAN: float = float("nan")
"""The one NaN object feds uses, so that NaN finds itself in dicts and sets."""


class Embedded:
    """Base class of values that stand for an entity rather than data.

    Subclasses define equality and hashing by identity of what they refer to.
    """

    __slots__ = ()


class Symbol:
    """A symbol: a name that is distinct from the string with the same characters.

    Symbols are interned: while a symbol named ``n`` is alive, ``Symbol(n)`` returns that same
    object (by every construction path: the codec, the parser, :func:`copy.copy`, pickling), so
    two symbols are equal exactly when they are the same object and a label check is an identity
    test. The intern table holds its symbols weakly, so names that nothing uses any more (for
    instance from hostile input) do not accumulate. Construction is thread-safe: a lookup that
    finds a live symbol takes no lock; creating one happens under :data:`_INTERN_LOCK`.

    The hash is object's too (by identity, computed in C), so hashing a record or a tuple that
    holds symbols calls no Python code. It is therefore not a function of the name: it differs
    between processes and between two lives of a name, and nothing may keep it beyond the
    symbol's life (:class:`Record` and :class:`FrozenDict` pickle without their hashes).
    """

    __slots__ = ("__weakref__", "name")

    name: str

    def __new__(cls, name: str) -> Symbol:
        if name.__class__ is not str and not isinstance(name, str):
            raise TypeError(f"Symbol name must be a str, not {type(name).__name__}")
        ref = _INTERNED.get(name)
        if ref is not None:
            sym = ref()
            if sym is not None:
                return sym
        with _INTERN_LOCK:  # look again: another thread may have created it meanwhile
            ref = _INTERNED.get(name)
            if ref is not None:
                sym = ref()
                if sym is not None:
                    return sym
            sym = object.__new__(cls)
            sym.name = name
            _INTERNED[name] = _SymbolRef(sym, name)
            return sym

    # Equality and hashing are object's (identity): interning makes that equality of names.

    def __reduce__(self) -> tuple:
        return (Symbol, (self.name,))

    def __repr__(self) -> str:
        return f"Symbol({self.name!r})"


class _SymbolRef(weakref.ref):
    """The intern table's weak reference to a symbol, remembering its name."""

    __slots__ = ("name",)

    def __new__(cls, sym: Symbol, name: str) -> _SymbolRef:
        ref = super().__new__(cls, sym, _forget)
        ref.name = name
        return ref

    def __init__(self, sym: Symbol, name: str) -> None:
        super().__init__(sym, _forget)


def _forget(ref: _SymbolRef) -> None:
    """Drop a dead symbol's entry, unless the name has been interned again since."""
    with _INTERN_LOCK:
        if _INTERNED.get(ref.name) is ref:
            del _INTERNED[ref.name]


_INTERNED: dict[str, _SymbolRef] = {}
"""The intern table: name -> weak reference to the live symbol of that name."""

_INTERN_LOCK = threading.RLock()
"""Guards changes to :data:`_INTERNED` (reentrant: a symbol can die, and its reference's
callback run, in the thread that holds it)."""


class Record:
    """A labelled tuple of fields: ``<label field ...>``.

    The hash is computed on first use and kept: most records (wrappers that are only encoded
    and sent, for instance) are never hashed. So, like a tuple's, a record's fields are not
    checked to be hashable when it is built, and a first hash recurses into nested records
    whose hashes are not known yet: like comparing two equal records, which always recursed,
    it raises ``RecursionError`` some 500 levels deep (the codec accepts 64, the parser 128).
    """

    __slots__ = ("_hash", "fields", "label")

    def __init__(self, label: Value, fields: tuple[Value, ...] = ()) -> None:
        self.label = label
        self.fields = fields if fields.__class__ is tuple else tuple(fields)
        self._hash: int | None = None

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if other.__class__ is not Record:
            return False
        mine = self._hash
        if mine is not None:  # when both hashes are known, unequal ones settle it
            theirs = other._hash  # type: ignore[attr-defined]
            if theirs is not None and mine != theirs:
                return False
        return self.label == other.label and self.fields == other.fields  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = self._hash = hash((self.label, self.fields))
        return h

    def __reduce__(self) -> tuple:
        return (Record, (self.label, self.fields))  # not the hash: it may not hold elsewhere

    def __len__(self) -> int:
        return len(self.fields)

    def __getitem__(self, index: int) -> Value:
        return self.fields[index]

    def __repr__(self) -> str:
        return f"Record({self.label!r}, {self.fields!r})"


class FrozenDict(Mapping):
    """An immutable, hashable mapping from values to values."""

    __slots__ = ("_hash", "_items")

    def __init__(self, items: Mapping[Value, Value] | None = None, /, **kwargs: Value) -> None:
        data = dict(items or {})
        data.update(kwargs)
        self._items = data
        self._hash = hash(frozenset(data.items()))

    def __getitem__(self, key: Value) -> Value:
        return self._items[key]

    def __iter__(self) -> Iterator[Value]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __eq__(self, other: object) -> bool:
        if other.__class__ is FrozenDict:
            return self._hash == other._hash and self._items == other._items  # type: ignore[attr-defined]
        return False

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple:
        return (FrozenDict, (self._items,))  # not the hash: it may not hold elsewhere

    def __repr__(self) -> str:
        return f"FrozenDict({self._items!r})"


Value: TypeAlias = Any
"""Any of the kinds listed in the module docstring (checked by :func:`check_value`)."""

ATOM_TYPES = (bool, int, float, str, bytes, Symbol)


def symbol(name: str) -> Symbol:
    """Shorthand for :class:`Symbol`."""
    return Symbol(name)


def record(label: str | Value, *fields: Value) -> Record:
    """Build a record; a ``str`` label becomes a :class:`Symbol`: ``record("present", "Alice")``."""
    return Record(Symbol(label) if isinstance(label, str) else label, fields)


def check_value(v: object) -> None:
    """Raise ``TypeError`` naming the offending part if ``v`` is not a feds value."""
    if v is None or isinstance(v, (*ATOM_TYPES, Embedded)):
        return
    if isinstance(v, Record):
        check_value(v.label)
        for f in v.fields:
            check_value(f)
    elif isinstance(v, tuple | frozenset):
        for item in v:
            check_value(item)
    elif isinstance(v, FrozenDict):
        for key, item in v.items():
            check_value(key)
            check_value(item)
    else:
        raise TypeError(f"not a feds value: {v!r} (a {type(v).__name__})")


def from_python(obj: object) -> Value:
    """Convert ordinary Python data to a feds value.

    Lists become tuples, dicts become :class:`FrozenDict`, sets become frozensets, NaN becomes
    :data:`NAN`. Values that are already feds values pass through unchanged.
    """
    if obj is None or isinstance(obj, bool | int | str | bytes | Symbol | Embedded):
        return obj
    if isinstance(obj, float):
        return NAN if math.isnan(obj) else obj
    if isinstance(obj, Record):
        return Record(from_python(obj.label), tuple(from_python(f) for f in obj.fields))
    if isinstance(obj, list | tuple):
        return tuple(from_python(x) for x in obj)
    if isinstance(obj, set | frozenset):
        return frozenset(from_python(x) for x in obj)
    if isinstance(obj, Mapping):
        return FrozenDict({from_python(k): from_python(x) for k, x in obj.items()})
    if isinstance(obj, bytearray | memoryview):
        return bytes(obj)
    raise TypeError(f"cannot convert {type(obj).__name__} to a feds value: {obj!r}")


_RANK = {type(None): 0, bool: 1, int: 2, float: 2, bytes: 3, str: 4, Symbol: 5}


def sort_key(v: Value) -> tuple:
    """A total order over values, used wherever feds needs a deterministic order.

    Sets and dicts print in this order, and a dict pattern visits its keys in this order (so two
    equal patterns always capture in the same order). Numbers compare numerically, NaN last.
    """
    cls = v.__class__
    rank = _RANK.get(cls)
    if rank is not None:
        if rank == 2:
            return (2, 1, 0.0) if v != v else (2, 0, v)
        if rank == 5:
            return (5, v.name)
        return (rank, v)
    if cls is Record:
        return (6, sort_key(v.label), tuple(sort_key(f) for f in v.fields))
    if cls is tuple:
        return (7, tuple(sort_key(x) for x in v))
    if cls is frozenset:
        return (8, tuple(sorted(sort_key(x) for x in v)))
    if cls is FrozenDict:
        return (9, tuple(sorted((sort_key(k), sort_key(x)) for k, x in v.items())))
    if isinstance(v, Embedded):
        return (10, id(v))
    raise TypeError(f"not a feds value: {v!r}")
