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
=====  ==============  ================================  ==========================================

Keeping records flat (rather than nesting msgpack inside ext payloads) lets one msgpack call decode
a whole message: no recursion in Python or C per level of nesting, and a small record costs one
ext and one array. The encoding is not canonical: equal sets and dicts may order items differently.

Decoding *interns* small values without references: equal records and dicts made only of
short strings and symbols, 64-bit integers, ``None`` and other interned values, and ending with
a name or an interned value, decode to the same object (from a bounded table per thread,
:class:`Interner`), so a value that arrives again and again (a subscription pattern) compares
by identity with the copy a node already holds.

A frame on a byte stream is a 4-byte big-endian length followed by that many bytes of msgpack
(:func:`encode_frame`, :class:`FrameDecoder`). Every problem with incoming data raises
:class:`CodecError` and nothing else; :class:`Limits` bounds frame size, nesting depth and
collection length. :class:`Encoder` and :class:`Decoder` reuse their msgpack machinery between
calls; each must be used by one thread at a time (the module-level functions keep one per thread).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Any, Final, Protocol

import msgpack
from msgpack import ExtType

from feds.values import NAN, Embedded, FrozenDict, Record, Symbol, Value

__all__ = [
    "BIGINT",
    "DEFAULT_LIMITS",
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
]

SYMBOL: Final = 1
RECORD: Final = 2
SET: Final = 3
BIGINT: Final = 4
EMBEDDED: Final = 5
GENERIC_RECORD: Final = 6

FRAME_HEADER_SIZE: Final = 4


class CodecError(ValueError):
    """Data that is not a well-formed encoding of a value, or a value that cannot be encoded."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on what a decoder accepts."""

    max_frame_size: int = 16 * 1024 * 1024
    """Largest encoded value (frame body) in bytes; :meth:`Encoder.encode_frame` keeps to it."""
    max_depth: int = 64
    """Deepest nesting of containers (records, sequences, sets, dicts); ``[[1]]`` has depth 2."""
    max_collection_length: int = 1_000_000
    """Most entries in one msgpack array or map (a record's or set's array includes its head)."""

    def __post_init__(self) -> None:
        for name in ("max_frame_size", "max_depth", "max_collection_length"):
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


class _Head:
    """What the decoder makes of a head ext, until the array it starts is complete."""

    __slots__ = ("kind", "label")

    def __init__(self, kind: int, label: Symbol | None = None) -> None:
        self.kind = kind
        self.label = label


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
_EMPTY_PAYLOAD_HEADS = {
    SET: _Head(SET),
    EMBEDDED: _Head(EMBEDDED),
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
# Encoding


class Encoder:
    """Encodes values with one reusable msgpack Packer.

    Not thread-safe, and not reentrant: the embedded hooks must not call this same encoder.
    """

    def __init__(self, embedded: EmbeddedHooks | None = None, limits: Limits = DEFAULT_LIMITS):
        self.embedded = embedded
        self.limits = limits
        self._pack = msgpack.Packer(
            default=self._default, use_bin_type=True, autoreset=True, datetime=False
        ).pack

    def encode(self, v: Value) -> bytes:
        """The msgpack bytes of ``v``; raises :class:`CodecError` if it cannot be encoded."""
        try:
            return self._pack(v)
        except CodecError:
            raise
        except UnicodeEncodeError:
            raise CodecError("a string is not valid Unicode (it contains a surrogate)") from None
        except ValueError as e:
            if "recursion limit" in str(e):
                raise CodecError("value nested too deeply to encode") from None
            raise CodecError(f"cannot encode value: {e}") from None
        except (TypeError, OverflowError, RecursionError) as e:
            raise CodecError(f"cannot encode value: {e}") from None

    def encode_frame(self, v: Value) -> bytes:
        """One frame: a 4-byte big-endian length and the encoding of ``v``."""
        body = self.encode(v)
        if len(body) > self.limits.max_frame_size:
            raise CodecError(
                f"encoded value is {len(body)} bytes, more than max_frame_size "
                f"({self.limits.max_frame_size})"
            )
        return len(body).to_bytes(FRAME_HEADER_SIZE, "big") + body

    def _default(self, obj: Any) -> Any:
        """msgpack's hook for what it cannot pack natively: returns something it can."""
        cls = obj.__class__
        if cls is Record:
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


def _containers(data: bytes) -> int:
    """How many bytes of ``data`` may start a container (at C speed)."""
    return len(data.translate(None, _NOT_CONTAINER_HEADERS))


# Byte pairs without which msgpack cannot decode a NaN or a timestamp. A NaN has all exponent
# bits set, so its first byte after the float32 (0xca) or float64 (0xcb) type byte is 0x7f or
# 0xff. A timestamp is ext type -1 (0xff) with 4, 8 or 12 bytes: fixext 4 or 8 (0xd6, 0xd7), or
# ext 8/16/32 whose length ends in 0x04, 0x08 or 0x0c (msgpack refuses other lengths). One
# byte before each 0x7f or 0xff is looked at; it may also be part of a harmless pair.
_PAIR_FIRSTS: Final = frozenset(b"\xca\xcb\xd6\xd7\x04\x08\x0c")
# In a bigger frame, or past this many 0x7f and 0xff bytes, walking the value is the cheaper check.
_PAIR_SEARCH_MAX_BYTES: Final = 1024
_PAIR_SEARCH_MAX: Final = 16

_ATOMS = frozenset({type(None), bool, int, str, bytes, Symbol})


class Decoder:
    """Decodes values with prebuilt msgpack hooks. Not thread-safe (it counts heads in flight)."""

    def __init__(self, embedded: EmbeddedHooks | None = None, limits: Limits = DEFAULT_LIMITS):
        self.embedded = embedded
        self.limits = limits
        self._max_depth = limits.max_depth
        self._max_length = limits.max_collection_length
        self._open_heads = 0  # heads decoded but not yet at the start of a completed array
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
        self._long_options = {
            **self._options,
            "max_array_len": self._max_length,
            "max_map_len": self._max_length,
        }

    def decode(self, data: bytes | bytearray | memoryview) -> Value:
        """The value encoded in ``data`` (exactly one, nothing after it) or :class:`CodecError`."""
        if data.__class__ is not bytes:
            data = bytes(data)
        if len(data) > self.limits.max_frame_size:
            raise CodecError(
                f"data is {len(data)} bytes, more than max_frame_size "
                f"({self.limits.max_frame_size})"
            )
        open_heads = self._open_heads  # not 0 if an embedded hook decodes with this decoder
        self._interner = _thread_interner()  # the calling thread's: a decoder may change threads
        self._interned = self._interner.ids
        try:
            value = self._decode(data)  # type: ignore[arg-type]
        except Exception as e:
            self._open_heads = open_heads
            if isinstance(e, CodecError):
                raise
            raise _translate(e) from None
        if self._open_heads != open_heads:
            self._open_heads = open_heads
            raise CodecError("a head ext type (record, set, embedded) not first in an array")
        return value

    def _decode(self, data: bytes) -> Value:
        """Decode, then check depth and types where the bytes do not rule out a problem.

        Every msgpack container starts with a byte :func:`_containers` counts, so a frame
        with no more of them than ``max_depth`` cannot be too deep; one without the bytes that
        start a NaN or a timestamp (:func:`_may_hold_special`) holds neither. Such a frame, the
        common one, is decoded by one msgpack call and not looked at again. Any other is decoded
        item by item (:meth:`_decode_items`), so that only the items the same tests do not clear
        are walked.
        """
        special = _may_hold_special(data)
        limit = self._max_depth
        containers = _containers(data) if len(data) > limit else len(data)  # at most that many
        if containers > limit or special:
            return self._decode_items(data, containers, special)
        return self._unpack(data)

    def _unpack(self, data: bytes) -> Value:
        # msgpack's own length limits default to the data length: only a longer input needs ours.
        options = self._options if len(data) <= self._max_length else self._long_options
        return msgpack.unpackb(data, **options)

    def _decode_items(self, data: bytes, containers: int, special: bool) -> Value:
        """Decode a frame that may be too deep or hold a NaN or a timestamp, one item at a time.

        A batched frame (a turn packet: ``<turn [event ...]>``) holds many containers in all
        but each event holds few, so rather than walking the whole decoded value this reads the
        frame with an Unpacker, opening the containers on its *spine* (the top-level value,
        its last item, that item's last item...) while the bytes left there are too many to
        clear, and decoding every other item whole. Each such item's byte span gets the tests
        of :meth:`_decode` on its own, against the depth left at its level, and only an item
        that fails them is walked (:func:`_checked`). Every item is decoded once, and the
        bytes counted are those of the frame plus, per opened level, those of one header.
        """
        unpacker = msgpack.Unpacker(None, max_buffer_size=len(data), **self._long_options)
        unpacker.feed(data)
        value = self._next_item(unpacker, data, containers, self._max_depth, special)
        if unpacker.tell() != len(data):
            raise CodecError("unexpected bytes after the end of a value")
        return value

    def _next_item(
        self, unpacker: msgpack.Unpacker, data: bytes, containers: int, budget: int, special: bool
    ) -> Value:
        """The next value of ``unpacker``, which runs to the end of ``data`` and holds at most
        ``containers`` container header bytes (and a NaN or timestamp only if ``special``),
        checked to be at most ``budget`` deep."""
        start = unpacker.tell()
        if start >= len(data):
            raise CodecError("truncated data")
        header = data[start]
        is_map = header in _MAP_HEADERS
        if not (containers > budget or special) or not (is_map or header in _ARRAY_HEADERS):
            value = unpacker.unpack()
            return _checked(value, budget) if containers > budget or special else value
        if budget < 1:
            raise CodecError(f"data nested deeper than max_depth ({self._max_depth})")
        length = unpacker.read_map_header() if is_map else unpacker.read_array_header()
        if length > self._max_length:
            raise CodecError(f"collection too long: {length} exceeds {self._max_length}")
        containers -= _containers(data[start : unpacker.tell()])
        items = []
        for _ in range(2 * length - 1 if is_map else length - 1):  # all but the last
            begin = unpacker.tell()
            item = unpacker.unpack()
            span = data[begin : unpacker.tell()]
            count = _containers(span)
            containers -= count
            if count >= budget or (special and _may_hold_special(span)):
                item = _checked(item, budget - 1)
            items.append(item)
        if length:  # the last item runs to the end of the data
            special = special and _may_hold_special(data, unpacker.tell())
            items.append(self._next_item(unpacker, data, containers, budget - 1, special))
        if is_map:
            return self._on_map(list(zip(items[::2], items[1::2], strict=True)))
        return self._on_array(tuple(items))

    def _on_ext(self, code: int, data: bytes) -> Any:
        if code == RECORD:  # the most common ext: every record with a symbol label has one
            self._open_heads += 1
            return _heads.get(data) or _heads.remember(data, _Head(RECORD, _symbol_named(data)))
        if code == SYMBOL:
            return _symbols.get(data) or _symbols.remember(data, _symbol_named(data))
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

    def _on_array(self, items: tuple) -> Value:
        if not items or items[0].__class__ is not _Head:
            return items
        self._open_heads -= 1
        head = items[0]
        if head.kind == RECORD:
            last = items[-1]  # a name or an interned value, if the record may be interned
            if last.__class__ in _NAMES or last is head or id(last) in self._interned:
                return self._intern_record(head, items)
            return Record(head.label, items[1:])
        if head.kind == GENERIC_RECORD:
            if len(items) < 2:
                raise CodecError("a record with no label")
            return Record(items[1], items[2:])
        if head.kind == SET:
            result = frozenset(items[1:])
            if len(result) != len(items) - 1:
                raise CodecError("duplicate element in a set")
            return result
        if len(items) != 2:
            raise CodecError("an embedded reference must be [head, value]")
        return self._embedded(items[1])

    def _intern_record(self, head: _Head, items: tuple) -> Record:
        """The record of ``items``: the interned one if it qualifies (:class:`Interner`)."""
        interner = self._interner
        if len(items) > INTERN_MAX_ITEMS + 1 or not interner.internable(items):
            return Record(head.label, items[1:])
        found = interner.get(items)
        if found is None:
            found = interner.add(items, Record(head.label, items[1:]))
        return found

    def _on_map(self, pairs: list[tuple[Value, Value]]) -> FrozenDict:
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

    def _embedded(self, payload: Value) -> Embedded:
        if self.embedded is None:
            raise CodecError("received an embedded reference but have no embedded hooks")
        if not (
            payload.__class__ is tuple
            and self._max_depth > 1
            and _ATOMS.issuperset(map(type, payload))
        ):  # anything but a flat sequence of atoms (a relay's [kind oid]) needs the full check
            payload = _checked(payload, self._max_depth - 1)
        try:
            return self.embedded.decode_embedded(payload)
        except CodecError:
            raise
        except Exception as e:
            raise CodecError(f"cannot decode embedded reference {payload!r}: {e!r}") from e


def _may_hold_special(data: bytes, start: int = 0) -> bool:
    """Whether ``data[start:]`` may encode a NaN or a timestamp (cheap, conservative).

    Data without the bytes 0x7f and 0xff holds neither. Those bytes are common in binary
    payloads, so when there are few of them only one that can end a NaN's or a timestamp's
    first two bytes (:data:`_PAIR_FIRSTS` before it) counts; past :data:`_PAIR_SEARCH_MAX_BYTES`
    bytes or :data:`_PAIR_SEARCH_MAX` of them, any does.
    """
    if data.find(0x7F, start) == -1 and data.find(0xFF, start) == -1:
        return False
    if len(data) - start > _PAIR_SEARCH_MAX_BYTES:
        return True
    seen = 0
    for second in (0x7F, 0xFF):
        i = data.find(second, start + 1)
        while i != -1:
            seen += 1
            if seen > _PAIR_SEARCH_MAX or data[i - 1] in _PAIR_FIRSTS:
                return True
            i = data.find(second, i + 1)
    return False


def _symbol_named(data: bytes) -> Symbol:
    try:
        return Symbol(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise CodecError("invalid UTF-8 in a symbol name") from None


def _frozendict_from_pairs(pairs: list[tuple[Value, Value]]) -> FrozenDict:
    d = FrozenDict(pairs)  # type: ignore[arg-type]  # dict() accepts pairs
    if len(d) != len(pairs):
        raise CodecError("duplicate key in a dict")
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


def _checked(v: Value, max_depth: int) -> Value:
    """``v`` after checking its depth and its types, with every NaN replaced by NAN."""
    if _scan(v, max_depth):
        return _canonical(v)  # recursion is safe: _scan bounded the depth
    return v


def _scan(v: Value, max_depth: int) -> bool:
    """Check depth and types without recursion; True if some NaN must be replaced."""
    needs_rebuild = False
    stack: list[tuple[Value, int]] = [(v, 1)]
    while stack:
        x, depth = stack.pop()
        if x.__class__ is float:
            needs_rebuild = needs_rebuild or (x != x and x is not NAN)
            continue
        children = _children(x)
        if children is None:
            continue
        if depth > max_depth:
            raise CodecError(f"data nested deeper than max_depth ({max_depth})")
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


def _canonical(x: Value) -> Value:
    cls = x.__class__
    if cls is float:
        return NAN if x != x else x
    if cls is tuple:
        return tuple(_canonical(i) for i in x)
    if cls is Record:
        return Record(_canonical(x.label), tuple(_canonical(f) for f in x.fields))
    if cls is frozenset:
        result = frozenset(_canonical(i) for i in x)
        if len(result) != len(x):
            raise CodecError("duplicate element in a set")
        return result
    if cls is FrozenDict:
        return _frozendict_from_pairs([(_canonical(k), _canonical(i)) for k, i in x.items()])
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
    so the next frame can still be read.
    """

    def __init__(self, *, embedded: EmbeddedHooks | None = None, limits: Limits = DEFAULT_LIMITS):
        self._decoder = Decoder(embedded, limits)
        self._max_frame = limits.max_frame_size
        self._buffer = bytearray()
        self._start = 0  # offset of the first frame not yet taken
        self._scanned = 0  # offset of the first frame whose header is not yet checked
        self._broken: CodecError | None = None

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Add received bytes; raises CodecError at once if a frame announces too many bytes."""
        if self._broken is not None:
            raise self._broken
        self._buffer += data
        while self._scanned + FRAME_HEADER_SIZE <= len(self._buffer):
            header = self._buffer[self._scanned : self._scanned + FRAME_HEADER_SIZE]
            size = int.from_bytes(header, "big")
            if size > self._max_frame:
                self._broken = CodecError(
                    f"frame of {size} bytes announced, more than max_frame_size ({self._max_frame})"
                )
                raise self._broken
            self._scanned += FRAME_HEADER_SIZE + size

    def next_value(self) -> Value:
        """The next complete frame's value, or :data:`NEED_DATA` if none is buffered."""
        if self._broken is not None:
            raise self._broken
        start, buffer = self._start, self._buffer
        body = start + FRAME_HEADER_SIZE
        if body > len(buffer):
            return NEED_DATA
        end = body + int.from_bytes(buffer[start:body], "big")
        if end > len(buffer):
            return NEED_DATA
        frame = bytes(buffer[body:end])
        self._consume(end)
        return self._decoder.decode(frame)

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

    def _consume(self, end: int) -> None:
        self._start = end
        if end == len(self._buffer):
            self._buffer.clear()
            self._start = self._scanned = 0
        elif end > 65536 and end * 2 > len(self._buffer):
            del self._buffer[:end]
            self._scanned -= end
            self._start = 0


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
