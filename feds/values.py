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

Equality is *type-exact* (as Racket's ``equal?`` in the seed and Syndicate's data model): ``1``,
``1.0`` and ``True`` are three different assertions, and so are ``0.0`` and ``-0.0``; a record,
sequence, set or dict equals another only if their parts are equal in this sense. Python's own
``==`` says ``1 == 1.0 == True``, so feds keeps its equality in three places:

* :class:`Record` and :class:`FrozenDict` compare themselves type-exactly (``==`` and ``hash``
  stay consistent: equal values hash alike, and unequal ones may collide), and a
  :class:`FrozenDict` looks its keys up type-exactly;
* :func:`exact_equal` compares any two values; :func:`exact_key` gives a dict key whose Python
  equality is feds's, for tables keyed by values that may be bare atoms or sequences (the
  index's bag, constant tables and captures bags, a pattern's ``<one-of>`` set). It is the value
  itself unless a boolean or a float could be confused (then a small wrapper), so the common
  keys (records, strings, symbols, integers) cost one class test;
* a set or dict cannot hold two elements (keys) that Python finds equal, such as ``1`` and
  ``true``: the parser and the codec refuse such input with a clear error (a Python ``set`` has
  already merged them before :func:`from_python` sees it). Two sets are equal only if their
  elements are, type-exactly: ``#{1}`` is not ``#{#t}`` for :func:`exact_equal`, inside records
  and dicts, and in every table keyed by :func:`exact_key` (a bare ``frozenset``'s or
  ``tuple``'s own ``==`` stays Python's).

Every NaN that enters through :func:`from_python`, the parser or the codec is replaced by the
single object :data:`NAN`, so NaN equals itself inside containers and a NaN assertion can be
retracted.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping
from math import copysign
from typing import Any, TypeAlias

NAN: float = float("nan")
"""The one NaN object feds uses, so that NaN finds itself in dicts and sets."""

_ABSENT: Any = object()


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
        label, fields = other.label, other.fields  # type: ignore[attr-defined]
        return (
            self.label == label
            and self.fields == fields
            and _same_kinds(self.label, label)
            and _same_items(self.fields, fields)
        )

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

    __slots__ = ("_hash", "_items", "_plain_keys")

    def __init__(self, items: Mapping[Value, Value] | None = None, /, **kwargs: Value) -> None:
        data = dict(items or {})
        data.update(kwargs)
        self._items = data
        self._hash = hash(frozenset(data.items()))
        self._plain_keys: bool | None = (
            None  # all keys of SELF_KEY_CLASSES classes? (known on first need)
        )

    def __getitem__(self, key: Value) -> Value:
        """The value under ``key``, found type-exactly (``d[1]`` never finds a key ``true``)."""
        x = self._find(key)
        if x is _ABSENT:
            raise KeyError(key)
        return x

    def __contains__(self, key: object) -> bool:
        return self._find(key) is not _ABSENT

    def _find(self, key: Value) -> Value:
        items = self._items
        cls = key.__class__
        if cls in EXACT_LOOKUP_CLASSES:
            return items.get(key, _ABSENT)
        if cls in SELF_KEY_CLASSES:  # an int: exact as it is unless a key could be confused with it
            plain = self._plain_keys
            if plain is None:
                plain = self._plain_keys = all(k.__class__ in SELF_KEY_CLASSES for k in items)
            if plain:
                return items.get(key, _ABSENT)
        for k, x in items.items():
            if exact_equal(k, key):
                return x
        return _ABSENT

    def __iter__(self) -> Iterator[Value]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if other.__class__ is not FrozenDict:
            return False
        mine, theirs = self._items, other._items  # type: ignore[attr-defined]
        if self._hash != other._hash or mine != theirs:  # type: ignore[attr-defined]
            return False
        twins = {k: k for k in theirs}  # equal in Python: check each pair's kinds
        for k, x in mine.items():
            twin = twins[k]
            if not (_same_kinds(k, twin) and _same_kinds(x, theirs[twin])):
                return False
        return True

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple:
        return (FrozenDict, (self._items,))  # not the hash: it may not hold elsewhere

    def __repr__(self) -> str:
        return f"FrozenDict({self._items!r})"


Value: TypeAlias = Any
"""Any of the kinds listed in the module docstring (checked by :func:`check_value`)."""

ATOM_TYPES = (bool, int, float, str, bytes, Symbol)

# ---- type-exact equality ------------------------------------------------------------------

EXACT_LOOKUP_CLASSES = {str, bytes, Symbol, type(None), Record, FrozenDict}
"""Classes whose values Python never finds equal to a value of another class (or of the same
class but different in feds): a dict lookup by such a key is type-exact as it is. Reference
classes join through :func:`register_reference_class`."""

SELF_KEY_CLASSES = EXACT_LOOKUP_CLASSES | {int}
"""Classes that are their own :func:`exact_key`: an ``int`` is one too, because every key that
could equal it in Python (a boolean, a float, a sequence holding one...) is wrapped."""


def register_reference_class(cls: type) -> None:
    """Declare that ``cls`` (an :class:`Embedded` subclass) compares equal only to its own
    instances, so its values are exact keys as they are (the index then finds them without a
    call). An unregistered reference class is still an exact key, found through a call."""
    if not issubclass(cls, Embedded):
        raise TypeError(f"{cls.__name__} is not an Embedded subclass")
    EXACT_LOOKUP_CLASSES.add(cls)
    SELF_KEY_CLASSES.add(cls)


_DEEP = frozenset({float, tuple, frozenset})
"""Classes whose values, equal in Python, :func:`_same_kinds` must look into."""


def _same_kinds(a: Value, b: Value) -> bool:
    """Whether ``a`` and ``b``, known to be equal in Python, are equal in feds too.

    Records and dicts have compared their parts type-exactly already; atoms of one class that
    Python finds equal are equal, except the float zeros, which differ by their sign.
    """
    if a is b:
        return True
    cls = a.__class__
    if cls is not b.__class__:
        return False
    if cls is float:
        return a != 0.0 or copysign(1.0, a) == copysign(1.0, b)
    if cls is tuple:
        return _same_items(a, b)
    if cls is frozenset:
        twins = {y: y for y in b}
        return all(_same_kinds(x, twins[x]) for x in a)
    return True


def _same_items(a: tuple, b: tuple) -> bool:
    """:func:`_same_kinds` for two sequences known to be equal in Python, item by item."""
    for x, y in zip(a, b, strict=True):
        if x is not y:
            cls = x.__class__
            if cls is not y.__class__ or (cls in _DEEP and not _same_kinds(x, y)):
                return False
    return True


def exact_equal(a: Value, b: Value) -> bool:
    """Whether ``a`` and ``b`` are the same feds value (type-exact: ``1``, ``1.0``, ``True``,
    ``0.0`` and ``-0.0`` are five different values)."""
    return a is b or (a == b and _same_kinds(a, b))


class _Exact:
    """A dict key for a value whose Python equality is not feds's (see :func:`exact_key`).

    It hashes as its value and equals (type-exactly) its value or another key of it, so a
    table holding it can be probed with the raw value (see :func:`probe_key`).
    """

    __slots__ = ("_hash", "value")

    def __init__(self, value: Value) -> None:
        self.value = value
        self._hash = hash(value)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is _Exact:
            other = other.value  # type: ignore[attr-defined]
        return exact_equal(self.value, other)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"exact_key({self.value!r})"


def exact_key(v: Value) -> Value:
    """A dict key for ``v`` whose Python equality (and hash) is feds's type-exact equality.

    That is ``v`` itself for records, dicts, strings, symbols, bytes, integers, ``None``,
    references, and sequences and sets holding only such values; a boolean, a float, or a
    sequence or set holding one is wrapped. Keys made by this function must only meet each
    other: a table keyed by them holds no raw booleans or floats. ``exact_key(v) is v`` tells
    whether ``v`` is its own key.

    The items of a sequence or set are looked at here, without a call per item; only nested
    sequences and sets recurse.
    """
    cls = v.__class__
    if cls in SELF_KEY_CLASSES:
        return v
    if cls is tuple or cls is frozenset:
        for x in v:
            c = x.__class__
            if c in SELF_KEY_CLASSES:
                continue
            if (
                c is float
                or c is bool
                or ((c is tuple or c is frozenset) and exact_key(x) is not x)
            ):
                return _Exact(v)
        return v
    if cls is bool or cls is float:
        return _Exact(v)
    return v  # an Embedded compares by what it refers to


def merge_note(items: Iterable[Value]) -> str:
    """What to add to a "duplicate element (key)" error about ``items``: nothing if two of them
    are the same value, else which two different values Python takes for one (``1`` and
    ``true``), since a set or dict cannot hold both."""
    seen: dict[Value, Value] = {}
    for x in items:
        twin = seen.setdefault(x, x)
        if twin is not x:
            if exact_equal(twin, x):
                return ""
            return (
                f" ({twin!r} and {x!r} are different values, but a set or dict cannot hold both:"
                " Python takes them for one)"
            )
    return ""


def probe_key(v: Value) -> Value:
    """A dict key for ``v`` like :func:`exact_key`, for tables probed with raw values (the
    index's constant tables): here integers are wrapped too, so that only values of
    :data:`EXACT_LOOKUP_CLASSES` (and sequences of them) are their own keys, and every other
    key is a wrapper that equals the raw value. In a table whose keys all come from this
    function, a raw value finds exactly its own key (``True`` never finds ``1``): only what
    is inserted needs converting."""
    cls = v.__class__
    if cls in EXACT_LOOKUP_CLASSES:
        return v
    if cls is tuple:
        for x in v:
            if x.__class__ not in EXACT_LOOKUP_CLASSES:
                return _Exact(v)
        return v
    return _Exact(v)


def key_value(k: Value) -> Value:
    """The value an :func:`exact_key` key stands for."""
    return k.value if k.__class__ is _Exact else k


def symbol(name: str) -> Symbol:
    """Shorthand for :class:`Symbol`."""
    return Symbol(name)


def record(label: str | Value, *fields: Value) -> Record:
    """Build a record; a ``str`` label becomes a :class:`Symbol`: ``record("present", "Alice")``."""
    return Record(Symbol(label) if isinstance(label, str) else label, fields)


_LEAF_CLASSES = frozenset((*ATOM_TYPES, type(None)))
"""Classes whose instances are values with nothing inside to check (the common case, tested
first by class: a set lookup, no call)."""
_LEAF_TYPES = (*ATOM_TYPES, Embedded)


def check_value(v: object) -> None:
    """Raise ``TypeError`` naming the offending part if ``v`` is not a feds value."""
    if v.__class__ in _LEAF_CLASSES:
        return
    if isinstance(v, Record):
        if v.label.__class__ not in _LEAF_CLASSES:
            check_value(v.label)
        for f in v.fields:
            if f.__class__ not in _LEAF_CLASSES:
                check_value(f)
    elif isinstance(v, _LEAF_TYPES):
        return
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
    equal patterns always capture in the same order). Numbers compare numerically, NaN last; an
    integer comes before the equal float and ``-0.0`` before ``0.0``, so that values which are
    different (type-exactly) never tie.
    """
    cls = v.__class__
    rank = _RANK.get(cls)
    if rank is not None:
        if rank == 2:
            if v != v:
                return (2, 1, 0.0, 0)
            return (2, 0, v, 0 if cls is int else 2 if copysign(1.0, v) > 0 else 1)
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
