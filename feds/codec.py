"""The wire encoding of feds values (msgpack) and a sans-IO decoder for a stream of frames.

Values map onto msgpack like this:

* ``None``, ``bool``, ``str`` (UTF-8), ``bytes`` (bin) and ``tuple`` (array) are native;
* ``int`` is native within the 64-bit range, else the ext type :data:`BIGINT`;
* ``float`` is always float64 (so ``-0.0`` keeps its sign); every NaN decodes to
  :data:`feds.values.NAN`;
* :class:`~feds.values.FrozenDict` is a native map whose keys may be any value;
* a :class:`~feds.values.Symbol` is the ext type :data:`SYMBOL`;
* records, sets and embedded references are arrays whose first item is a *head*, an ext type
  that says what the array is: ``[head item ...]``. Heads appear nowhere else.

=====  ==============  ================================  ==========================================
code   name            ext payload                       meaning
=====  ==============  ================================  ==========================================
1      SYMBOL          the UTF-8 name                    a symbol
2      RECORD          the UTF-8 name of the label       head: ``[head field ...]`` is a record
                                                         whose label is that symbol
3      SET             empty                             head: ``[head element ...]`` is a set
4      BIGINT          big-endian two's complement       an integer outside the 64-bit range
                       (at least one byte)
5      EMBEDDED        empty                             head: ``[head v]`` is a reference, ``v``
                                                         being what ``encode_embedded`` made of it
6      GENERIC_RECORD  empty                             head: ``[head label field ...]`` is a
                                                         record whose label is not a symbol
7      DEFINE          the cache slot (2 bytes,          head: ``[head field ...]`` is a record
                       big-endian), then the UTF-8       whose label is that symbol, which the
                       name of the label                 stream's value cache now holds in that
                                                         slot (value cache only)
8      CACHED          the cache slot (2 bytes,          the value the cache holds in that slot
                       big-endian)                       (value cache only)
=====  ==============  ================================  ==========================================

Keeping records flat (rather than nesting msgpack inside ext payloads) lets one msgpack call decode
a whole message: no recursion in Python or C per level of nesting, and a small record costs one
ext and one array. The encoding is not canonical: equal sets and dicts may order items differently.

Decoding *interns* small values without references: equal records and dicts made only of
short strings and symbols, 64-bit integers, ``None`` and other interned values, and ending with
a name or an interned value, decode to the same object (from a bounded table per thread,
:class:`Interner`), so a value that arrives again and again (a subscription pattern) compares
by identity with the copy a node already holds.

An :class:`Encoder` and a :class:`Decoder` for one stream (one direction of a relay's
connection) may share a *value cache*: the encoder defines an interned record in a slot of its
choice the first time it sends it (:data:`DEFINE`) and from then on sends just the slot
(:data:`CACHED`, four bytes), which the decoder turns back into the object it built the first
time, without decoding, interning or checking it again. Only small values without references,
floats or timestamps may be cached (:data:`CACHE_MAX_WEIGHT`, :data:`CACHE_MAX_TEXT`); a
reference to a slot never defined, a slot out of range or a definition of anything else is a
:class:`CodecError`. The cache is opt-in: the module-level functions never use one.

A frame on a byte stream is a 4-byte big-endian length followed by that many bytes of msgpack
(:func:`encode_frame`, :class:`FrameDecoder`). Every problem with incoming data raises
:class:`CodecError` and nothing else; :class:`Limits` bounds frame size, nesting depth and
collection length. :class:`Encoder` and :class:`Decoder` reuse their msgpack machinery between
calls; each must be used by one thread at a time (the module-level functions keep one per thread).
"""

from __future__ import annotations

import functools
import re
import struct
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Any, Final, Protocol

import msgpack
from msgpack import ExtType

from feds.values import NAN, Embedded, FrozenDict, Record, Symbol, Value, merge_note

__all__ = [
    "BIGINT",
    "CACHED",
    "CACHE_MAX_SLOTS",
    "CACHE_MAX_TEXT",
    "CACHE_MAX_WEIGHT",
    "DEFAULT_LIMITS",
    "DEFINE",
    "EMBEDDED",
    "GENERIC_RECORD",
    "NEED_DATA",
    "RECORD",
    "SET",
    "SYMBOL",
    "CodecError",
    "Decoder",
    "EmbeddedHooks",
    "Encoder",
    "FrameDecoder",
    "Interner",
    "Limits",
    "decode",
    "encode",
    "encode_frame",
    "record_head",
]

SYMBOL: Final = 1
RECORD: Final = 2
SET: Final = 3
BIGINT: Final = 4
EMBEDDED: Final = 5
GENERIC_RECORD: Final = 6
DEFINE: Final = 7
CACHED: Final = 8

FRAME_HEADER_SIZE: Final = 4
_frame_size = struct.Struct(">I").unpack_from  # (size,) of the frame header at an offset


class CodecError(ValueError):
    """Data that is not a well-formed encoding of a value, or a value that cannot be encoded."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on what a decoder accepts."""

    max_frame_size: int = 16 * 1024 * 1024
    """Largest encoded value (frame body) in bytes; :meth:`Encoder.encode_frame` keeps to it."""
    max_depth: int = 64
    """Deepest nesting of containers (records, sequences, sets, dicts); ``[[1]]`` has depth 2.

    An embedded reference is a leaf wherever it is; what the embedded hooks made of it (its
    wire payload) must itself fit ``max_depth - 1``."""
    max_collection_length: int = 1_000_000
    """Most entries in one msgpack array or map (a record's or set's array includes its head)."""
    max_containers: int = 250_000
    """Most arrays and maps (records, sequences, sets, dicts) in one decoded value: each costs
    Python work, so a frame of a million tiny records would keep a node busy for seconds."""

    def __post_init__(self) -> None:
        for name in ("max_frame_size", "max_depth", "max_collection_length", "max_containers"):
            if getattr(self, name) < 1:
                raise ValueError(f"Limits.{name} must be positive")
        if self.max_frame_size >= 2**32:
            raise ValueError("Limits.max_frame_size must fit the 4-byte frame header")


DEFAULT_LIMITS: Final = Limits()


class EmbeddedHooks(Protocol):
    """Translates references to and from plain values on the wire (the relay implements this)."""

    def encode_embedded(self, obj: Embedded) -> Value: ...

    def decode_embedded(self, v: Value) -> Embedded: ...


def _ext(code: int, data: bytes) -> ExtType:
    """``ExtType(code, data)`` without its argument checks, which cost more than the packing."""
    return _new_tuple(ExtType, (code, data))  # type: ignore[return-value]


_new_tuple = tuple.__new__
_new_object = object.__new__


class _Head:
    """What the decoder makes of a head ext, until the array it starts is complete.

    A :data:`DEFINE` head also has the slot it fills and the :data:`RECORD` head of its label.
    """

    __slots__ = ("base", "kind", "label", "slot")

    def __init__(
        self, kind: int, label: Symbol | None = None, base: _Head | None = None, slot: int = 0
    ) -> None:
        self.kind = kind
        self.label = label
        self.base = base
        self.slot = slot


class _BoundedCache(dict):
    """A dict that forgets everything when it grows too big (names are attacker-controlled)."""

    def remember(self, key: Any, value: Any) -> Any:
        if len(self) >= 4096:
            self.clear()
        self[key] = value
        return value


# Keyed by name: a str's hash is cached and compared in C, a Symbol's is a Python call.
_symbol_exts = _BoundedCache()  # symbol name -> ExtType(SYMBOL, name)
_record_heads = _BoundedCache()  # label name -> ExtType(RECORD, name)
_symbols = _BoundedCache()  # name bytes -> Symbol
_heads = _BoundedCache()  # name bytes -> _Head(RECORD, Symbol)

_SET_HEAD_EXT = _ext(SET, b"")
_EMBEDDED_HEAD_EXT = _ext(EMBEDDED, b"")
_GENERIC_HEAD_EXT = _ext(GENERIC_RECORD, b"")
_EMBEDDED_HEAD = _Head(EMBEDDED)
_EMPTY_PAYLOAD_HEADS = {
    SET: _Head(SET),
    EMBEDDED: _EMBEDDED_HEAD,
    GENERIC_RECORD: _Head(GENERIC_RECORD),
}


# ---------------------------------------------------------------------------------------------
# Interning

INTERN_TABLE_SIZE: Final = 2048
"""Entries per generation of an :class:`Interner` (it holds at most twice as many)."""
INTERN_MAX_ITEMS: Final = 16
"""Most fields of an interned record, or entries of an interned dict."""
INTERN_MAX_TEXT: Final = 64
"""Longest string or symbol name inside an interned value, in characters."""

_NAMES: Final = frozenset({Symbol, str})
_INT_MIN: Final = -(2**63)
_INT_MAX: Final = 2**64 - 1


class Interner:
    """A bounded table that makes equal decoded values one object.

    Only records and dicts whose items are short strings and symbols, 64-bit integers, ``None``
    or values interned before are interned (the decoder builds values bottom-up, so children
    come first). Each entry is therefore small, and equality among such values implies the same
    types all the way down: ``1.0 == 1 == True`` cannot make a decoded ``<x 1.0>`` come back as
    ``<x 1>``, since floats and booleans are never interned. A container must also be empty or
    end with a name (a string, a symbol) or an interned value, as pattern records and dicts do:
    one ending with a number (a handle in ``<retract 7>``, a reading in ``<temp "r" 21>``) is
    usually new each time and would only churn the table. That last item is also where a
    payload usually is, so most values that do not qualify are turned down by looking at it.

    Keys are the decoded items (a record's ``(head, field ...)``, a dict's pairs), so a hit
    needs no new object and compares children by identity. Two generations bound the memory
    however hostile the input: when the young one is full it becomes the old one and the old is
    dropped; a hit in the old generation moves the entry back to the young one, so values in
    steady use (subscription patterns) stay while one-off values pass through.
    """

    __slots__ = ("_old", "_young", "ids", "size")

    def __init__(self, size: int = INTERN_TABLE_SIZE) -> None:
        self.size = size
        self._young: dict[tuple, Value] = {}
        self._old: dict[tuple, Value] = {}
        self.ids: set[int] = set()
        """id() of every value held by either generation (the same set object throughout)."""

    def __len__(self) -> int:
        return len(self._young) + len(self._old)

    def internable(self, items: tuple[Value, ...]) -> bool:
        """Whether a container of these items may be interned (a record's head is let through).

        The decoder has already checked the last item and the number of items.
        """
        ids = self.ids
        for v in items:
            cls = v.__class__
            if cls is Symbol:
                if len(v.name) > INTERN_MAX_TEXT:
                    return False
            elif cls is str:
                if len(v) > INTERN_MAX_TEXT:
                    return False
            elif cls is int:
                if not _INT_MIN <= v <= _INT_MAX:
                    return False
            elif not (v is None or cls is _Head or id(v) in ids):  # id: held here, so unique
                return False
        return True

    def get(self, key: tuple) -> Value | None:
        """The value interned under ``key``, or None."""
        value = self._young.get(key)
        if value is None:
            value = self._old.get(key)
            if value is not None:
                self._put(key, value)
        return value

    def add(self, key: tuple, value: Value) -> Value:
        """Intern ``value`` (built from ``key``, which :meth:`internable` accepted)."""
        self._put(key, value)
        return value

    def _put(self, key: tuple, value: Value) -> None:
        if len(self._young) >= self.size:
            self._old = self._young
            self._young = {}
            self.ids.clear()
            self.ids.update(map(id, self._old.values()))
        self._young[key] = value
        self.ids.add(id(value))


# ---------------------------------------------------------------------------------------------
# The value cache of a connection

CACHE_MAX_SLOTS: Final = 2**16
"""Most slots of a value cache (a slot number is two bytes on the wire)."""
CACHE_MAX_WEIGHT: Final = 256
"""Most atoms, records and dicts, counted down the whole tree, in a cached value."""
CACHE_MAX_TEXT: Final = 64
"""Longest string or symbol name (label included) inside a cached value, in characters."""

_UNCACHEABLE_MAX: Final = 1024  # interned values an encoder remembers it may not cache


class _Cached:
    """A value in a cache table, measured when it was defined (:func:`_measure`).

    An encoder keeps the ext that refers to its slot and whether it was sent since the CLOCK
    hand last passed; a decoder counts the slots holding it (interning can make two
    definitions one object).
    """

    __slots__ = ("depth", "ext", "holders", "used", "value", "weight")

    def __init__(self, value: Value, weight: int, depth: int) -> None:
        self.value = value
        self.weight = weight
        self.depth = depth
        self.ext: ExtType | None = None
        self.used = False
        self.holders = 0


def _measure(v: Value, cached: dict[int, _Cached], budget: int) -> tuple[int, int] | None:
    """``(weight, depth)`` of a value a cache may hold, or None if it may not hold it.

    A cached value is built only of symbols and strings of at most :data:`CACHE_MAX_TEXT`
    characters, 64-bit integers, ``None``, records with a symbol label, and dicts: no
    references, floats or timestamps, so a decoder never has to look inside it again. Its
    *weight* (every atom, record and dict down the tree, however shared) is at most ``budget``,
    so a reference to a slot stands for a bounded amount of data. Values in ``cached`` count
    with their known measure, unwalked; each level of the recursion uses up some budget.
    """
    cls = v.__class__
    if cls is Symbol:
        return _ATOM_MEASURE if len(v.name) <= CACHE_MAX_TEXT else None
    if cls is str:
        return _ATOM_MEASURE if len(v) <= CACHE_MAX_TEXT else None
    if cls is int:
        return _ATOM_MEASURE if _INT_MIN <= v <= _INT_MAX else None
    if v is None:
        return _ATOM_MEASURE
    entry = cached.get(id(v))
    if entry is not None:
        return (entry.weight, entry.depth) if entry.weight <= budget else None
    if cls is Record:
        label = v.label
        if label.__class__ is not Symbol or len(label.name) > CACHE_MAX_TEXT:
            return None
        items: Iterable[Value] = v.fields
    elif cls is FrozenDict:
        items = chain.from_iterable(v.items())
    else:
        return None
    weight, depth = 1, 0
    for item in items:
        if weight >= budget:
            return None
        measure = _measure(item, cached, budget - weight)
        if measure is None:
            return None
        weight += measure[0]
        depth = max(depth, measure[1])
    return weight, depth + 1


_ATOM_MEASURE: Final = (1, 0)


def _slot_bytes(slot: int) -> bytes:
    return slot.to_bytes(2, "big")


class _StreamEnd:
    """What an :class:`Encoder` and a :class:`Decoder` share: hooks, limits, cache slots.

    Subclasses set up the rest of their state in :meth:`_start`.
    """

    def __init__(
        self,
        embedded: EmbeddedHooks | None = None,
        limits: Limits = DEFAULT_LIMITS,
        *,
        cache_slots: int = 0,
    ):
        if not 0 <= cache_slots <= CACHE_MAX_SLOTS:
            raise ValueError(f"cache_slots must be between 0 and {CACHE_MAX_SLOTS}")
        self.embedded = embedded
        self.limits = limits
        self._slots: list[_Cached | None] = [None] * cache_slots
        self._cached: dict[int, _Cached] = {}  # id() of each value in a slot -> its entry
        self._start()

    def _start(self) -> None:
        raise NotImplementedError


# ---------------------------------------------------------------------------------------------
# Encoding


class Encoder(_StreamEnd):
    """Encodes values with one reusable msgpack Packer.

    With ``cache_slots``, the encoder keeps a value cache of that many slots for one stream
    (one direction of a connection), mirrored by the :class:`Decoder` at the far end, which
    must have at least as many: a record held by the calling thread's :class:`Interner` (so
    probably reused, and made only of small atoms and values interned before) is *defined* in
    a slot the first time it is encoded, and sent as that slot's number after that. A new
    definition takes the slot of a value not sent lately (the CLOCK policy: a value sent since
    the hand last passed gets a second chance), so values in steady use stay however many
    others pass through. The decoder learns the definitions in the order of the stream, so
    every encoding must reach it, in the order made: :meth:`encode` forgets the definitions
    of an encoding it fails (or that is over ``max_size``), and bytes it returned must not
    be dropped.

    Not thread-safe, and not reentrant: the embedded hooks must not call this same encoder.
    """

    def _start(self) -> None:
        self._hand = 0  # the next slot the CLOCK policy considers
        self._defined: list[tuple[int, _Cached | None]] = []  # this encoding's (slot, previous)
        self._uncacheable: dict[int, Value] = {}  # interned values too big to cache, by id()
        self._interned: set[int] = set()  # the encoding thread's Interner.ids
        self._pack = msgpack.Packer(
            default=self._default,
            use_bin_type=True,
            autoreset=True,
            datetime=False,
        ).pack

    def encode(self, v: Value, *, max_size: int | None = None) -> bytes:
        """The msgpack bytes of ``v``.

        Raises :class:`CodecError` if ``v`` cannot be encoded or its encoding is longer than
        ``max_size``; the cache then holds what it held before.
        """
        if self._slots:  # the calling thread's interner (getattr: no Python call once made)
            interner = getattr(_local, "interner", None)
            self._interned = (interner if interner is not None else _thread_interner()).ids
        try:
            data = self._pack(v)
        except BaseException as e:
            if self._defined:
                self._undefine()
            if isinstance(e, Exception):
                raise _encoding_error(e) from None
            raise
        if max_size is not None and len(data) > max_size:
            if self._defined:
                self._undefine()
            raise CodecError(
                f"encoded value is {len(data)} bytes, more than max_frame_size allows ({max_size})"
            )
        if self._defined:
            self._defined.clear()
        return data

    def encode_all(
        self, values: list[Value], max_size: int, accept: Callable[[], bool] | None = None
    ) -> list[bytes] | None:
        """The encodings :meth:`encode` would make of each of ``values`` in turn, each at most
        ``max_size`` bytes long; None if one cannot be made, or if ``accept`` (called once
        they are made: a caller's check of what encoding them did, such as the references the
        embedded hooks lifted) returns False, with the cache as it was before.

        One call for a run of values (a batch of events to send), so the Python work per value
        is msgpack's call and a length check. The run is all or nothing, its cache definitions
        kept or forgotten together: a caller that gets None encodes the values one by one to
        find which ones fail. Its definitions never reuse a slot within the run (they are one
        encoding's), which the decoder reads in order like any others.
        """
        if self._slots:  # as in encode
            interner = getattr(_local, "interner", None)
            self._interned = (interner if interner is not None else _thread_interner()).ids
        pack = self._pack
        try:
            encodings = [pack(v) for v in values]
        except Exception:
            encodings = None
        if (
            encodings is not None
            and max(map(len, encodings), default=0) <= max_size
            and (accept is None or accept())
        ):
            if self._defined:
                self._defined.clear()
            return encodings
        if self._defined:
            self._undefine()
        return None

    def encode_frame(self, v: Value) -> bytes:
        """One frame: a 4-byte big-endian length and the encoding of ``v``."""
        body = self.encode(v, max_size=self.limits.max_frame_size)
        return len(body).to_bytes(FRAME_HEADER_SIZE, "big") + body

    def _default(self, obj: Any) -> Any:
        """msgpack's hook for what it cannot pack natively: returns something it can.

        With a cache, a cached record is its slot and an interned one is defined.
        """
        cls = obj.__class__
        if cls is Record:
            if self._slots:
                key = id(obj)
                entry = self._cached.get(key)
                if entry is not None and entry.value is obj:
                    entry.used = True
                    return entry.ext
                if key in self._interned:
                    definition = self._define(obj)
                    if definition is not None:
                        return definition
            label = obj.label
            if label.__class__ is Symbol:
                name = label.name
                head = _record_heads.get(name) or _record_heads.remember(
                    name, _ext(RECORD, name.encode("utf-8"))
                )
                return [head, *obj.fields]
            return [_GENERIC_HEAD_EXT, label, *obj.fields]
        if cls is Symbol:
            name = obj.name
            return _symbol_exts.get(name) or _symbol_exts.remember(
                name, _ext(SYMBOL, name.encode("utf-8"))
            )
        if cls is FrozenDict:
            return obj._items  # packed as a native map
        if cls is frozenset:
            return [_SET_HEAD_EXT, *obj]
        if cls is int:
            return _ext(BIGINT, obj.to_bytes(obj.bit_length() // 8 + 1, "big", signed=True))
        if isinstance(obj, Embedded):
            if self.embedded is None:
                raise CodecError(f"cannot encode the reference {obj!r} without embedded hooks")
            return [_EMBEDDED_HEAD_EXT, self.embedded.encode_embedded(obj)]
        raise CodecError(f"cannot encode {obj!r}: not a feds value (a {cls.__name__})")

    def _define(self, obj: Record) -> list | None:
        """``[DEFINE head, field ...]`` putting ``obj`` in the next slot; None if it may not."""
        slots = self._slots
        if len(self._defined) == len(slots) or self._uncacheable.get(id(obj)) is obj:
            return None  # one encoding never reuses a slot: the decoder fills them bottom-up
        measure = _measure(obj, self._cached, CACHE_MAX_WEIGHT)
        if measure is None:
            if len(self._uncacheable) >= _UNCACHEABLE_MAX:
                self._uncacheable.clear()
            self._uncacheable[id(obj)] = obj
            return None
        slot = self._free_slot()
        previous = slots[slot]
        if previous is not None:
            del self._cached[id(previous.value)]
        entry = _Cached(obj, *measure)
        entry.ext = _ext(CACHED, _slot_bytes(slot))
        slots[slot] = self._cached[id(obj)] = entry
        self._defined.append((slot, previous))
        name = obj.label.name.encode("utf-8")
        return [_ext(DEFINE, _slot_bytes(slot) + name), *obj.fields]

    def _free_slot(self) -> int:
        """The slot for a new definition: the first one past the hand not used lately.

        Slots defined by the encoding under way are passed over (there are fewer of them than
        slots), and so are slots sent since the hand last passed, once: it clears their mark.
        """
        slots, hand = self._slots, self._hand
        taken = {slot for slot, _ in self._defined}
        while True:
            entry = slots[hand]
            if hand not in taken:
                if entry is None or not entry.used:
                    break
                entry.used = False
            hand = (hand + 1) % len(slots)
        self._hand = (hand + 1) % len(slots)
        return hand

    def _undefine(self) -> None:
        """Forget the definitions of the encoding under way: the decoder will not see them."""
        for slot, previous in reversed(self._defined):
            del self._cached[id(self._slots[slot].value)]  # type: ignore[union-attr]
            self._slots[slot] = previous
            if previous is not None:
                self._cached[id(previous.value)] = previous
        self._defined.clear()


def _encoding_error(e: Exception) -> Exception:
    """What :meth:`Encoder.encode` raises for an exception from msgpack or a hook."""
    if isinstance(e, CodecError):
        return e
    if isinstance(e, UnicodeEncodeError):
        return CodecError("a string is not valid Unicode (it contains a surrogate)")
    if isinstance(e, ValueError) and "recursion limit" in str(e):
        return CodecError("value nested too deeply to encode")
    if isinstance(e, ValueError | TypeError | OverflowError | RecursionError):
        return CodecError(f"cannot encode value: {e}")
    return e


# ---------------------------------------------------------------------------------------------
# Decoding

# Every msgpack container (array, map) starts with one of these bytes, so their count in the data
# bounds the nesting depth; without enough of them there is no need to measure the depth. (An ext
# nests nothing: heads are decoded from their payload, the items they head are in the array.)
_ARRAY_HEADERS: Final = frozenset([*range(0x90, 0xA0), 0xDC, 0xDD])
_MAP_HEADERS: Final = frozenset([*range(0x80, 0x90), 0xDE, 0xDF])
_NOT_CONTAINER_HEADERS: Final = bytes(
    b for b in range(256) if b not in _ARRAY_HEADERS and b not in _MAP_HEADERS
)
_COUNT_MAX_BYTES: Final = 2048
"""Up to this size, counting a frame's container headers is cheaper than :func:`_nests_at_most`."""


def _not_plain(*_args: object) -> None:
    raise _NotPlain


class _NotPlain(Exception):
    """What :meth:`Decoder.is_plain`'s hooks raise: the data holds an ext type or a map."""


_PLAIN_OPTIONS: Final = {
    "ext_hook": _not_plain,
    "object_pairs_hook": _not_plain,
    "use_list": False,
    "raw": False,
}


def _containers(data: bytes) -> int:
    """How many bytes of ``data`` may start a container (at C speed)."""
    return len(data.translate(None, _NOT_CONTAINER_HEADERS))


def _msgpack_stack_limit() -> int:
    """How deep msgpack's unpacker nests containers before it raises ``StackError`` (its fixed
    stack size, 1024 in the versions we know), found by trying."""
    fits, too_deep = 0, 1 << 16
    while too_deep - fits > 1:
        n = (fits + too_deep) // 2
        try:
            msgpack.unpackb(b"\x91" * n + b"\xc0")
        except msgpack.StackError:
            too_deep = n
        else:
            fits = n
    return fits


_STACK_LIMIT: Final = _msgpack_stack_limit()
_PADDING: Final = b"\x91" * _STACK_LIMIT  # arrays of one item, each nesting the rest one deeper


def _nests_at_most(data: bytes, depth: int) -> bool:
    """Whether msgpack nests the value in ``data`` at most ``depth`` containers deep.

    Checked at C speed without building a single object: behind ``_STACK_LIMIT - depth``
    one-item arrays, msgpack's own stack limit stops a skip over the value exactly when its
    containers (empty ones too, as :class:`Limits` counts them) nest deeper than ``depth``.
    False also for data msgpack refuses (the decoding proper says what is wrong with it).
    """
    if depth >= _STACK_LIMIT:
        return True  # msgpack decodes nothing deeper
    padding = _STACK_LIMIT - max(depth, 0)
    unpacker = msgpack.Unpacker(
        None, read_size=padding + len(data), max_buffer_size=padding + len(data)
    )
    unpacker.feed(_PADDING[:padding])
    unpacker.feed(data)
    try:
        unpacker.skip()
    except Exception:  # StackError (too deep), or not msgpack at all
        return False
    return True


_SPECIAL_TYPES: Final = frozenset({float, msgpack.Timestamp})
"""What msgpack may decode that the hooks must look at: a NaN, or a timestamp (refused)."""


# Byte pairs without which msgpack cannot decode a NaN or a timestamp. A NaN has all exponent
# bits set, so its first byte after the float32 (0xca) or float64 (0xcb) type byte is 0x7f or
# 0xff. A timestamp is ext type -1 (0xff) with 4, 8 or 12 bytes: fixext 4 or 8 (0xd6, 0xd7), or
# ext 8/16/32 whose length ends in 0x04, 0x08 or 0x0c (msgpack refuses other lengths).
_PAIR_FIRSTS: Final = frozenset(b"\xca\xcb\xd6\xd7\x04\x08\x0c")
_PAIRS: Final = re.compile(b"[" + bytes(sorted(_PAIR_FIRSTS)) + b"][\x7f\xff]")
_PAIRS_SCAN_MAX_BYTES: Final = 512  # up to this size, one regex scan beats looking at each byte
_BYTES_PER_LOOK: Final = 32
"""In a bigger frame, one 0x7f or 0xff byte is looked at per this many bytes of the frame; data
denser in them than that (random binary payloads are one in 128) is taken as special."""
_LENGTH_ENDS: Final = frozenset(b"\x04\x08\x0c")
_LENGTH_BEFORE: Final = frozenset(b"\xc7\x00")  # ext 8's type byte, or ext 16/32's length's


def _special_bytes(data: bytes) -> bool:
    """Whether ``data`` may encode a NaN or a timestamp (at C speed mostly, conservative).

    Data without the bytes 0x7f and 0xff holds neither. A small frame is searched for the
    pairs above with one regex. In a bigger one each 0x7f or 0xff byte is looked at with its
    neighbours: it counts only if it can be a NaN's first byte (after 0xcb, followed by a byte
    of at least 0xf0; after 0xca, by one of at least 0x80) or a timestamp's type (0xff after
    0xd6 or 0xd7, or after a length 4, 8 or 12 that follows 0xc7 or 0x00). So integers, finite
    floats and text, whatever their bytes, leave a batch of values plain; only data with more
    such bytes than one per :data:`_BYTES_PER_LOOK` is taken as special without looking.
    """
    if 0x7F not in data and 0xFF not in data:
        return False
    size = len(data)
    if size <= _PAIRS_SCAN_MAX_BYTES:
        return _PAIRS.search(data) is not None
    looks = size // _BYTES_PER_LOOK
    last = size - 1
    for second in (0x7F, 0xFF):
        i = data.find(second, 1)
        while i != -1:
            looks -= 1
            if looks < 0:
                return True
            before = data[i - 1]
            if before == 0xCB:
                if i == last or data[i + 1] >= 0xF0:
                    return True
            elif before == 0xCA:
                if i == last or data[i + 1] >= 0x80:
                    return True
            elif second == 0xFF and (
                before == 0xD6
                or before == 0xD7
                or (before in _LENGTH_ENDS and i >= 2 and data[i - 2] in _LENGTH_BEFORE)
            ):
                return True
            i = data.find(second, i + 1)
    return False


def _plain_items(items: Iterable[Value]) -> tuple:
    """``items`` with every NaN replaced by :data:`NAN`; CodecError for a timestamp."""
    result = []
    for x in items:
        if x.__class__ is float:
            if x != x:
                x = NAN
        elif x.__class__ is msgpack.Timestamp:
            raise CodecError("unsupported data in message: Timestamp")
        result.append(x)
    return tuple(result)


_ATOMS = frozenset({type(None), bool, int, str, bytes, Symbol})


class Decoder(_StreamEnd):
    """Decodes values with prebuilt msgpack hooks. Not thread-safe (it counts heads in flight).

    With ``cache_slots``, the decoder keeps the value cache of one stream, as the
    :class:`Encoder` at the far end fills it (with at most as many slots); without, it refuses
    the cache's ext types. A value referred to by its slot is the very object the definition
    made, interned like any other. Since the cache must match the encoder's, a decoder with a
    cache that raised :class:`CodecError` raises it again for every later input.
    """

    def _start(self) -> None:
        self._max_depth = self.limits.max_depth
        self._max_length = self.limits.max_collection_length
        # longest data is_plain takes: no longer than a length or a count of containers may be
        self._plain_max = min(self._max_length, self.limits.max_containers, _COUNT_MAX_BYTES)
        self._open_heads = 0  # heads decoded but not yet at the start of a completed array
        self._containers_left = 0  # arrays and maps the value being decoded may still have
        self._ref_depth = 0  # depth of the deepest cached value referred to (by one item)
        self._by_ref: dict[bytes, _Cached] = {}  # a CACHED ext's payload -> its slot's entry
        # whether a reference's payload [kind oid] can go to the hooks as it is (no check)
        self._plain_refs = self.embedded is not None and self._max_depth > 1
        self._broken: CodecError | None = None
        self._interner = _thread_interner()
        self._interned = self._interner.ids  # id() of the values it holds
        self._options: dict[str, Any] = {  # msgpack's, built once (hooks bound once)
            "ext_hook": self._on_ext,
            "list_hook": self._on_array,
            "object_pairs_hook": self._on_map,
            "use_list": False,
            "raw": False,
            "strict_map_key": False,
        }
        self._checked_options = {**self._options, "list_hook": self._on_checked_array}
        self._special = False  # whether the data being decoded may hold a NaN or a timestamp
        self._deepest_cached = 0  # depth of the deepest value ever in the cache

    def decode(self, data: bytes | bytearray | memoryview, within: int = 0) -> Value:
        """The value encoded in ``data`` (exactly one, nothing after it) or :class:`CodecError`;
        ``within``: how many containers deep it is in the frame it is part of (its depth
        counts from there).

        One msgpack call decodes the whole frame; the depth is checked before, at C speed, so
        that a value is walked only if the bytes do not rule out its being too deep. A frame of
        at most ``max_depth`` bytes cannot be too deep; a small one is if it has too many
        bytes that start a container (:func:`_containers`); a bigger one if msgpack nests it
        too deeply (:func:`_nests_at_most`). Either leaves room for the depth of the cached
        values the frame refers to, which :meth:`_on_ext` notes. A frame with neither 0x7f
        nor 0xff holds no NaN and no timestamp; in any other, the hooks also look at the items
        of every container for one. A frame no longer than ``max_containers`` bytes cannot hold
        more containers than that (each takes a byte): only a longer one has them counted.
        """
        frame: bytes = data if data.__class__ is bytes else bytes(data)  # type: ignore[assignment]
        limit = self._max_depth - within
        size = len(frame)
        if size > self.limits.max_frame_size:
            raise CodecError(
                f"data is {size} bytes, more than max_frame_size ({self.limits.max_frame_size})"
            )
        if self._broken is not None:
            raise self._broken
        open_heads = self._open_heads  # not 0 if an embedded hook decodes with this decoder
        ref_depth, outer_special = self._ref_depth, self._special  # likewise
        interner = getattr(_local, "interner", None)  # as in Encoder.encode
        self._interner = interner if interner is not None else _thread_interner()
        self._interned = self._interner.ids  # the calling thread's: a decoder may change threads
        try:
            self._special = special = _special_bytes(frame)
            # Each container takes a byte of the frame: one no longer than max_containers
            # cannot hold too many, so its arrays need not be counted.
            checked = special or size > self.limits.max_containers
            options = self._checked_options if checked else self._options
            if size > self._max_length:  # msgpack's own length limits default to the data length
                options = {
                    **options,
                    "max_array_len": self._max_length,
                    "max_map_len": self._max_length,
                }
            # `room`: how deep the cached values the frame refers to may be without a walk
            if size <= limit:
                fits, room = True, limit - size
            else:
                containers = _containers(frame) if size <= _COUNT_MAX_BYTES else limit + 1
                if containers <= limit:
                    fits, room = True, limit - containers
                else:
                    room = self._deepest_cached  # any cached value it refers to is no deeper
                    fits = limit > room and _nests_at_most(frame, limit - room)
            self._ref_depth = 0
            self._containers_left = self.limits.max_containers
            value = msgpack.unpackb(frame, **options)
            if special and value.__class__ in _SPECIAL_TYPES:
                (value,) = _plain_items((value,))
            if not fits or self._ref_depth > room:
                value = _checked(value, limit, self._cached)
            if self._open_heads != open_heads:
                raise CodecError("a head ext type (record, set, embedded) not first in an array")
        except Exception as e:
            self._open_heads = open_heads
            if isinstance(e, _TooDeep) or (isinstance(e, msgpack.StackError) and not fits):
                error = CodecError(f"data nested deeper than max_depth ({self._max_depth})")
            else:
                error = e if isinstance(e, CodecError) else _translate(e)
            if self._slots:  # the cache may no longer match the encoder's
                self._broken = error
            raise error from None
        finally:
            self._ref_depth, self._special = ref_depth, outer_special
        return value

    def is_plain(self, data: bytes, depth: int) -> bool:
        """Whether ``data`` is one value of msgpack's own arrays and atoms only (no ext type, no
        map) that :meth:`decode` would take, as a part of a frame ``depth`` containers deep.

        Such bytes mean the same on every stream: they hold no reference and nothing of a value
        cache, and encoding what they decode to gives bytes that decode to an equal value. So a
        relay may pass them on as they came instead of decoding and encoding them. Checked in
        one msgpack call without a hook (a hook is called only to refuse). Only for data short
        enough that no limit but depth can bind (its bytes bound its lengths and containers)
        and that counts few enough container bytes: False for any other data, which
        :meth:`decode` then takes (and refuses, if it must, with the reason).
        """
        size = len(data)
        if size > self._plain_max or _containers(data) > self._max_depth - depth:
            return False
        try:
            msgpack.unpackb(data, **_PLAIN_OPTIONS)
        except Exception:
            return False
        return True

    def known_ref_free(self, v: Value) -> bool:
        """Whether ``v`` is known to hold no embedded reference, without looking inside it.

        True for a value the calling thread has interned and one in this decoder's cache.
        """
        return id(v) in self._interned or id(v) in self._cached

    def _on_ext(self, code: int, data: bytes) -> Any:
        # Most common first: the head of every record with a symbol label, then what a relay's
        # traffic holds (cached patterns, references), then the rest.
        if code == RECORD:
            self._open_heads += 1
            return _heads.get(data) or _heads.remember(data, _Head(RECORD, _symbol_named(data)))
        if code == CACHED:  # a value defined earlier in the stream
            entry = self._by_ref.get(data)
            if entry is None:
                raise self._bad_reference(data)
            if entry.depth > self._ref_depth:
                self._ref_depth = entry.depth
            return entry.value
        if code == EMBEDDED:
            if data:
                raise CodecError(f"the head ext type {code} must have an empty payload")
            self._open_heads += 1
            return _EMBEDDED_HEAD
        if code == SYMBOL:
            return _symbols.get(data) or _symbols.remember(data, _symbol_named(data))
        if code == DEFINE:
            if len(data) < 2:
                raise CodecError("a definition must start with a 2-byte cache slot number")
            slot = int.from_bytes(data[:2], "big")
            if slot >= len(self._slots):
                raise CodecError(f"cache slot {slot} out of range ({len(self._slots)} slots)")
            name = data[2:]
            base = _heads.get(name) or _heads.remember(name, _Head(RECORD, _symbol_named(name)))
            self._open_heads += 1
            return _Head(DEFINE, base.label, base, slot)
        if code in _EMPTY_PAYLOAD_HEADS:
            if data:
                raise CodecError(f"the head ext type {code} must have an empty payload")
            self._open_heads += 1
            return _EMPTY_PAYLOAD_HEADS[code]
        if code == BIGINT:
            if not data:
                raise CodecError("an empty big integer")
            return int.from_bytes(data, "big", signed=True)
        raise CodecError(f"unknown ext type code {code}")

    def _bad_reference(self, data: bytes) -> CodecError:
        """What is wrong with a :data:`CACHED` payload that names no value in the cache."""
        if len(data) != 2:
            return CodecError("a cache slot number must be 2 bytes")
        return CodecError(f"cache slot {int.from_bytes(data, 'big')} is not defined")

    def _on_checked_array(self, items: tuple) -> Value:
        """msgpack's list hook for a frame that may hold too many containers, a NaN or a
        timestamp: counts the array and replaces those, then makes it a value."""
        self._containers_left -= 1
        if self._containers_left < 0:
            self._too_many_containers()
        if self._special:
            for x in items:
                if x.__class__ in _SPECIAL_TYPES:
                    items = _plain_items(items)
                    break
        return self._on_array(items)

    def _on_array(self, items: tuple) -> Value:
        """msgpack's list hook for the usual frame (:meth:`decode`): the array as a value."""
        if not items or items[0].__class__ is not _Head:
            return items
        head = items[0]
        if head.kind == RECORD:
            self._open_heads -= 1
            last = items[-1]  # a name or an interned value, if the record may be interned
            cls = last.__class__
            if (
                cls in _NAMES
                or last is head
                or ((cls is Record or cls is FrozenDict) and id(last) in self._interned)
            ):
                return self._intern_record(head, items)
            record = _new_object(Record)  # Record(head.label, items[1:]) without its __init__
            record.label = head.label
            record.fields = items[1:]
            record._hash = None
            return record
        if head is _EMBEDDED_HEAD:
            self._open_heads -= 1
            if len(items) != 2:
                raise CodecError("an embedded reference must be [head, value]")
            payload = items[1]
            if not (
                payload.__class__ is tuple
                and len(payload) == 2
                and payload[0].__class__ is int
                and payload[1].__class__ is int
                and self._plain_refs
            ):  # anything but a relay's [kind oid] takes the general path
                payload = self._embedded_payload(payload)
            try:
                return self.embedded.decode_embedded(payload)  # type: ignore[union-attr]
            except CodecError:
                raise
            except Exception as e:
                raise CodecError(f"cannot decode embedded reference {payload!r}: {e!r}") from e
        if head.kind == DEFINE:  # the record it defines closes its head
            return self._define(head.slot, self._on_array((head.base, *items[1:])))
        self._open_heads -= 1
        if head.kind == GENERIC_RECORD:
            if len(items) < 2:
                raise CodecError("a record with no label")
            return Record(items[1], items[2:])
        result = frozenset(items[1:])  # the only head left: a set's
        if len(result) != len(items) - 1:
            raise CodecError("duplicate element in a set" + merge_note(items[1:]))
        return result

    def _define(self, slot: int, value: Record) -> Record:
        """Put a decoded definition in its slot (the encoder chose the slot: obey)."""
        measure = _measure(value, self._cached, CACHE_MAX_WEIGHT)
        if measure is None:
            raise CodecError(f"cache slot {slot} defined as a value that may not be cached")
        previous = self._slots[slot]
        if previous is not None:
            previous.holders -= 1
            if not previous.holders:
                del self._cached[id(previous.value)]
        entry = self._cached.get(id(value))
        if entry is None:
            entry = self._cached[id(value)] = _Cached(value, *measure)
        entry.holders += 1
        self._slots[slot] = entry
        self._by_ref[_slot_bytes(slot)] = entry
        if entry.depth > self._deepest_cached:
            self._deepest_cached = entry.depth
        return value

    def _intern_record(self, head: _Head, items: tuple) -> Record:
        """The record of ``items``: the interned one if it qualifies (:class:`Interner`)."""
        interner = self._interner
        if len(items) > INTERN_MAX_ITEMS + 1 or not interner.internable(items):
            return Record(head.label, items[1:])
        found = interner.get(items)
        if found is None:
            found = interner.add(items, Record(head.label, items[1:]))
        return found

    def _too_many_containers(self) -> None:
        raise CodecError(
            f"more than max_containers ({self.limits.max_containers}) arrays and maps in one value"
        )

    def _on_map(self, pairs: list[tuple[Value, Value]]) -> FrozenDict:
        self._containers_left -= 1
        if self._containers_left < 0:
            self._too_many_containers()
        if self._special and not _SPECIAL_TYPES.isdisjoint(map(type, chain.from_iterable(pairs))):
            pairs = [_plain_items(pair) for pair in pairs]  # type: ignore[misc]
        interner = self._interner
        if pairs:
            last = pairs[-1][1]  # as for records: the last value decides first
            if not (
                (last.__class__ in _NAMES or id(last) in self._interned)
                and len(pairs) <= INTERN_MAX_ITEMS
                and interner.internable(tuple(chain.from_iterable(pairs)))
            ):
                return _frozendict_from_pairs(pairs)
        key = tuple(pairs)
        found = interner.get(key)
        if found is None:
            found = interner.add(key, _frozendict_from_pairs(pairs))
        return found

    def _embedded_payload(self, payload: Value) -> Value:
        """The payload of an embedded reference, checked (and any NaN replaced) for the hooks."""
        if self.embedded is None:
            raise CodecError("received an embedded reference but have no embedded hooks")
        if not (
            payload.__class__ is tuple
            and self._max_depth > 1
            and _ATOMS.issuperset(map(type, payload))
        ):  # anything but a flat sequence of atoms needs the full check
            payload = _checked(payload, self._max_depth - 1, self._cached)
        return payload


def _symbol_named(data: bytes) -> Symbol:
    try:
        return Symbol(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise CodecError("invalid UTF-8 in a symbol name") from None


def _frozendict_from_pairs(pairs: list[tuple[Value, Value]]) -> FrozenDict:
    d = FrozenDict(pairs)  # type: ignore[arg-type]  # dict() accepts pairs
    if len(d) != len(pairs):
        raise CodecError("duplicate key in a dict" + merge_note(k for k, _ in pairs))
    return d


def _translate(e: Exception) -> CodecError:
    """A CodecError that says what an exception from msgpack or Python means about the data."""
    if isinstance(e, msgpack.ExtraData):
        return CodecError("unexpected bytes after the end of a value")
    if isinstance(e, msgpack.StackError | RecursionError):
        return CodecError("data nested too deeply")
    if isinstance(e, msgpack.FormatError):
        return CodecError("invalid msgpack (a reserved type byte)")
    if isinstance(e, UnicodeDecodeError):
        return CodecError(f"invalid UTF-8 in a string: {e.reason}")
    if isinstance(e, msgpack.OutOfData) or (
        isinstance(e, ValueError) and "incomplete input" in str(e)
    ):
        return CodecError("truncated data")
    if isinstance(e, ValueError) and "exceeds max_" in str(e):
        return CodecError(f"collection too long: {e}")
    return CodecError(f"invalid data: {type(e).__name__}: {e}")


def _checked(v: Value, max_depth: int, cached: dict[int, _Cached]) -> Value:
    """``v`` after checking its depth and its types, with every NaN replaced by NAN.

    Values in ``cached`` (a decoder's cache) are not looked into: their depth is known and they
    hold no float, so the walk costs no more than the bytes it was decoded from.
    """
    if _scan(v, max_depth, cached):
        return _canonical(v, cached)  # recursion is safe: _scan bounded the depth
    return v


class _TooDeep(CodecError):
    """Raised by :func:`_scan`; :meth:`Decoder.decode` says which limit was exceeded."""


def _scan(v: Value, max_depth: int, cached: dict[int, _Cached]) -> bool:
    """Check depth and types without recursion; True if some NaN must be replaced."""
    needs_rebuild = False
    stack: list[tuple[Value, int]] = [(v, 1)]
    while stack:
        x, depth = stack.pop()
        if x.__class__ is float:
            needs_rebuild = needs_rebuild or (x != x and x is not NAN)
            continue
        if cached and id(x) in cached:
            children = None
            depth += cached[id(x)].depth - 1  # the depth of its deepest container
        else:
            children = _children(x)
            if children is None:
                continue
        if depth > max_depth:
            raise _TooDeep("data nested deeper than max_depth")
        if children is not None:
            for child in children:
                if child.__class__ not in _ATOMS:
                    stack.append((child, depth + 1))
    return needs_rebuild


def _children(x: Value) -> Any:
    """The items of a container, or None for an atom; CodecError for what is not a value."""
    cls = x.__class__
    if cls is tuple or cls is frozenset:
        return x
    if cls is Record:
        return (x.label, *x.fields)
    if cls is FrozenDict:
        return [item for pair in x.items() for item in pair]
    if cls in _ATOMS or isinstance(x, Embedded):
        return None
    raise CodecError(f"unsupported data in message: {cls.__name__}")  # e.g. a msgpack timestamp


def _canonical(x: Value, cached: dict[int, _Cached]) -> Value:
    cls = x.__class__
    if cls is float:
        return NAN if x != x else x
    if id(x) in cached:
        return x
    if cls is tuple:
        return tuple(_canonical(i, cached) for i in x)
    if cls is Record:
        label = _canonical(x.label, cached)
        return Record(label, tuple(_canonical(f, cached) for f in x.fields))
    if cls is frozenset:
        items = [_canonical(i, cached) for i in x]
        result = frozenset(items)
        if len(result) != len(x):
            raise CodecError("duplicate element in a set" + merge_note(items))
        return result
    if cls is FrozenDict:
        pairs = [(_canonical(k, cached), _canonical(i, cached)) for k, i in x.items()]
        return _frozendict_from_pairs(pairs)
    return x


# ---------------------------------------------------------------------------------------------
# Frames


class _NeedData:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = _NeedData()
"""Returned by :meth:`FrameDecoder.next_value` when no complete frame is buffered."""


class FrameDecoder:
    """Splits a byte stream into frames and decodes them (sans-IO: feed bytes, take values).

    A frame whose length prefix is above ``max_frame_size`` raises :class:`CodecError` as soon as
    its 4 header bytes arrive, and the stream is unusable after that (every later call raises
    again). A frame with a good length but a bad body raises when it is taken and is consumed,
    so the next frame can still be read, unless ``cache_slots`` gives the :attr:`decoder` a
    value cache (which may then differ from the sender's, so every later frame raises too).
    """

    def __init__(
        self,
        *,
        embedded: EmbeddedHooks | None = None,
        limits: Limits = DEFAULT_LIMITS,
        cache_slots: int = 0,
    ):
        self.decoder = Decoder(embedded, limits, cache_slots=cache_slots)
        self._max_frame = limits.max_frame_size
        self._buffer = bytearray()
        self._start = 0  # offset of the first frame not yet taken
        self._scanned = 0  # offset of the first frame whose header is not yet checked
        self._broken: CodecError | None = None
        self.inspect: Callable[[bytes], None] | None = None
        """Called with each frame's body before it is decoded: it may refuse the frame by
        raising, before any time is spent on decoding it."""

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Add received bytes; raises CodecError at once if a frame announces too many bytes."""
        if self._broken is not None:
            raise self._broken
        buffer = self._buffer
        buffer += data
        scanned = self._scanned
        while scanned + FRAME_HEADER_SIZE <= len(buffer):
            (size,) = _frame_size(buffer, scanned)
            if size > self._max_frame:
                self._broken = CodecError(
                    f"frame of {size} bytes announced, more than max_frame_size ({self._max_frame})"
                )
                raise self._broken
            scanned += FRAME_HEADER_SIZE + size
        self._scanned = scanned

    def next_value(self) -> Value:
        """The next complete frame's value, or :data:`NEED_DATA` if none is buffered."""
        frame = self.next_frame()
        if frame is NEED_DATA:
            return NEED_DATA
        return self.decoder.decode(frame)  # type: ignore[arg-type]

    def whole(self, data: bytes) -> bytes | None:
        """The body of ``data`` if it is exactly one frame and no earlier bytes wait (a read of
        a round trip), taken as :meth:`feed` and :meth:`next_frame` would take it (checked by
        :attr:`inspect`) but without passing through the buffer; None, having taken nothing,
        otherwise (:meth:`feed` the data: it also says what is wrong with it)."""
        if self._buffer or self._broken is not None or data.__class__ is not bytes:
            return None
        size = len(data) - FRAME_HEADER_SIZE
        if size < 0 or size > self._max_frame or _frame_size(data)[0] != size:
            return None
        frame = data[FRAME_HEADER_SIZE:]
        if self.inspect is not None:
            self.inspect(frame)
        return frame

    def next_frame(self) -> bytes | _NeedData:
        """The next complete frame's body, checked by :attr:`inspect` and not decoded (a caller
        that decodes it uses :attr:`decoder`), or :data:`NEED_DATA` if none is buffered."""
        if self._broken is not None:
            raise self._broken
        start, buffer = self._start, self._buffer
        body = start + FRAME_HEADER_SIZE
        if body > len(buffer):
            return NEED_DATA
        end = body + _frame_size(buffer, start)[0]
        if end > len(buffer):
            return NEED_DATA
        frame = bytes(buffer[body:end])
        if end == len(buffer):  # the usual case: all taken, start again at the beginning
            buffer.clear()
            self._start = self._scanned = 0
        elif end > 65536 and end * 2 > len(buffer):  # drop what was taken once it is most
            del buffer[:end]
            self._scanned -= end
            self._start = 0
        else:
            self._start = end
        if self.inspect is not None:
            self.inspect(frame)
        return frame

    def frames(self) -> Iterator[Value]:
        """Yield the value of every complete buffered frame."""
        while True:
            v = self.next_value()
            if v is NEED_DATA:
                return
            yield v

    __iter__ = frames

    @property
    def buffered(self) -> int:
        """How many received bytes are not yet part of a taken frame."""
        return len(self._buffer) - self._start


# ---------------------------------------------------------------------------------------------
# Module-level shortcuts (one Encoder and Decoder per thread)

_local = threading.local()


def _thread_encoder() -> Encoder:
    try:
        return _local.encoder
    except AttributeError:
        _local.encoder = Encoder()
        return _local.encoder


def _thread_interner() -> Interner:
    try:
        return _local.interner
    except AttributeError:
        _local.interner = Interner()
        return _local.interner


def _thread_decoder() -> Decoder:
    try:
        return _local.decoder
    except AttributeError:
        _local.decoder = Decoder()
        return _local.decoder


def encode(v: Value, *, embedded: EmbeddedHooks | None = None) -> bytes:
    """The msgpack bytes of ``v`` (keep an :class:`Encoder` instead when passing hooks often)."""
    if embedded is None:
        return _thread_encoder().encode(v)
    return Encoder(embedded).encode(v)


def record_head(label: Symbol) -> ExtType:
    """The head of a record labelled ``label``: an encoder packs ``[head, field ...]`` (a list)
    exactly as that record.

    For a caller that makes a record only to encode it (a relay wraps each event it sends):
    the list costs no :class:`~feds.values.Record` (nor the hash of its fields) and no call of
    the encoder's hook. Such a list is never put in a value cache, as a record is not unless
    interned.
    """
    name = label.name
    return _record_heads.get(name) or _record_heads.remember(
        name, _ext(RECORD, name.encode("utf-8"))
    )


@functools.lru_cache(maxsize=1024)
def record_prefix(label: Symbol, arity: int) -> bytes:
    """The bytes before the fields in the encoding of every record of ``label`` with ``arity``
    fields, unless a value cache holds the record: its array's header, then its head. The
    fields' encodings follow one after the other, so ``record_prefix(label, n)`` then the
    bytes of ``n`` values decodes to that record of those values (taken from the codec's own
    encoding of a record of nils)."""
    nils = encode(Record(label, (None,) * arity))
    prefix = nils[: len(nils) - arity]
    if nils[len(prefix) :] != b"\xc0" * arity or decode(prefix + b"\xc0" * arity) != Record(
        label, (None,) * arity
    ):
        raise RuntimeError("feds.codec no longer encodes a record as its head then its fields")
    return prefix


def encode_frame(v: Value, *, embedded: EmbeddedHooks | None = None) -> bytes:
    """One frame (4-byte big-endian length, then the msgpack bytes) holding ``v``."""
    if embedded is None:
        return _thread_encoder().encode_frame(v)
    return Encoder(embedded).encode_frame(v)


def decode(
    data: bytes | bytearray | memoryview,
    *,
    embedded: EmbeddedHooks | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> Value:
    """The value encoded in ``data``; every problem with the data raises :class:`CodecError`."""
    if embedded is None and limits is DEFAULT_LIMITS:
        return _thread_decoder().decode(data)
    return Decoder(embedded, limits).decode(data)
