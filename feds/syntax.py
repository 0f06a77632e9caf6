"""The text syntax of feds values and patterns, and the JSON form used by ``feds watch --json``.

Values (Preserves-like)::

    <present "Alice">          record: a label (any value, usually a symbol) and fields; not <>
    [1 2 3]                    sequence
    {a: 1, "b": [2]}           dict; keys are any value
    #{x y}                     set
    present  room-1  a.b  _    symbols (see below);  |two words|  a quoted symbol
    "a\\n\\"b\\""              string with JSON escapes (\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)
    -12  1234567890123456789012345678901234567890           integers of any size
    1.5  -0.0  1e10  #+inf  #-inf  #nan                     floats
    #t  #f  #nil               booleans and None
    #"ab\\x00"  #x"00ff"       bytes (printed in the first form, both parse)
    ; a comment to the end of the line

Commas are whitespace everywhere, so ``{a: 1 b: 2}`` and ``[1, 2]`` are fine. A set element or
dict key that equals an earlier one (``#{1 1.0}``) is an error. Embedded references print as
``#:<repr>`` and cannot be parsed back. Sets and dicts print in ``sort_key`` order.

Symbols and numbers share one token class, the *bare word*: a run of characters that are letters,
digits (anything matching Python's ``\\w``, so ``_`` and non-ASCII letters too) or one of
``- . + * / ! ? =``. A bare word that starts with an ASCII digit, or with ``+``, ``-``, ``.``,
``+.`` or ``-.`` followed by one, is a number and must be a well-formed one (``12``, ``-3``,
``1.5``, ``2e-3``; not ``1.``, ``.5`` or ``1abc``: those are errors); every other bare word is a
symbol. ``<`` and ``>`` are never part of a bare word (``<a>`` is a record), so a symbol such as
``<=`` prints quoted: ``|<=|``. Parsing nests at most :data:`MAX_DEPTH` levels.

Patterns use the same syntax plus the forms of ``protocols/patterns.md`` (``_``, ``$name``,
``$name=P``, ``:constraint`` suffixes, groups). Two additions make every record-form pattern
printable: ``'V`` is the literal value ``V`` (so ``'<a 1>`` is ``<lit <a 1>>`` rather than a record
group, and ``'_`` is the literal symbol ``_``), and ``#and[P ...]`` is ``<and [P ...]>`` written
out. A constraint suffix also applies to a literal or a group: ``<a _>:record`` is
``<and [<group ...> <type record>]>``. Capture names are runs of ``\\w`` and ``-``. Inside
``/regex/``, ``\\/`` stands for ``/`` and every other escape reaches ``re`` unchanged (so a source
that itself contains the escape pair ``\\/`` prints back as the equivalent ``/``).
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from feds import pattern_forms as pf
from feds.values import NAN, Embedded, FrozenDict, Record, Symbol, Value, merge_note, sort_key

__all__ = [
    "MAX_DEPTH",
    "ParseError",
    "format_pattern",
    "format_value",
    "from_json",
    "parse",
    "parse_many",
    "parse_pattern",
    "to_json",
]

MAX_DEPTH = 128
"""How deeply the parser lets values and patterns nest."""

_WS = re.compile(r"(?:[\s,]+|;[^\n]*)*")
_WORD = re.compile(r"[\w\-.+*/!?=]+")
_NUMERIC_START = re.compile(r"[+-]?\.?[0-9]")
_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+(?:[eE][+-]?[0-9]+)?|[eE][+-]?[0-9]+)")
_RANGE_NUMBER = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|#[+-]inf")
_NAME = re.compile(r"[\w-]+")
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_HEX2 = re.compile(r"[0-9a-fA-F]{2}")
_STRING_RUN = {'"': re.compile(r'[^"\\]+'), "|": re.compile(r"[^|\\]+")}
_BYTES_RUN = re.compile(r"[\x00-\x21\x23-\x5b\x5d-\x7f]+")  # ASCII except " and \

_SIMPLE_ESCAPES = {"/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "\\": "\\"}
_BYTE_ESCAPES = {"n": 10, "r": 13, "t": 9, "\\": 92, '"': 34}
_CLOSERS = {">": "record", "]": "sequence", "}": "dict"}
_OPENERS = frozenset("<[{")
_PATTERN_OPENERS = frozenset("<[{$")
_BIG_INT_DIGITS = 4000  # below CPython's int/str conversion limit


class ParseError(ValueError):
    """A syntax error, with the offset (``position``) and 1-based ``line`` and ``column``."""

    def __init__(self, message: str, text: str, position: int) -> None:
        self.message = message
        self.position = position
        self.line, self.column = line_column(text, position)
        super().__init__(f"{message} at {self.line}:{self.column}")


def line_column(text: str, position: int) -> tuple[int, int]:
    """The 1-based line and column of an offset into ``text``."""
    line = text.count("\n", 0, position) + 1
    return line, position - (text.rfind("\n", 0, position) + 1) + 1


# ---------------------------------------------------------------------------------------------
# Parsing


def parse(text: str) -> Value:
    """Parse exactly one value (surrounding whitespace and comments allowed)."""
    return _Parser(text).run(_Parser.value)


def parse_many(text: str) -> list[Value]:
    """Parse any number of whitespace-separated values."""
    return _Parser(text).run(_Parser.values_to_end)


def parse_pattern(text: str) -> tuple[Value, tuple[str, ...]]:
    """Parse a pattern to its record form and the capture names, in capture order."""
    p = _Parser(text)
    pattern = p.run(_Parser.pattern)
    return pattern, tuple(p.names)


class _Parser:
    """A recursive-descent parser over one text; ``pos`` is the offset of the next character."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0
        self.names: list[str] = []
        self.name_positions: dict[str, int] = {}

    def run(self, production: Callable[[_Parser], Any]) -> Any:
        """Parse the whole text with ``production``."""
        self.skip_ws()
        try:
            result = production(self)
        except RecursionError:  # only if the caller's stack was already deep
            raise self.error("nesting too deep") from None
        self.expect_end()
        return result

    def values_to_end(self) -> list[Value]:
        result = []
        while self.pos < len(self.text):
            result.append(self.value())
            self.skip_ws()
        return result

    # -- helpers --------------------------------------------------------------------------------

    def error(self, message: str, position: int | None = None) -> ParseError:
        return ParseError(message, self.text, self.pos if position is None else position)

    def where(self, position: int) -> str:
        line, column = line_column(self.text, position)
        return f"{line}:{column}"

    def peek(self) -> str:
        return self.text[self.pos : self.pos + 1]

    def skip_ws(self) -> None:
        self.pos = _WS.match(self.text, self.pos).end()  # type: ignore[union-attr]

    def expect_end(self) -> None:
        self.skip_ws()
        if self.pos < len(self.text):
            raise self.error(f"unexpected trailing input {self.describe_here()}")

    def describe_here(self) -> str:
        c = self.peek()
        return "end of input" if not c else repr(c)

    def nested(self, production: Callable[[], Value]) -> Value:
        """Run ``production`` one nesting level deeper (only containers count as levels)."""
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"nesting deeper than {MAX_DEPTH} levels")
        try:
            return production()
        finally:
            self.depth -= 1

    def word_here(self) -> str:
        m = _WORD.match(self.text, self.pos)
        return m.group() if m else ""

    def close_or_continue(self, closer: str, what: str, start: int) -> bool:
        """Skip whitespace; consume ``closer`` and return True, or return False if more follows."""
        self.skip_ws()
        c = self.peek()
        if c == closer:
            self.pos += 1
            return True
        if not c or c in _CLOSERS:
            found = "end of input" if not c else repr(c)
            raise self.error(
                f"expected {closer!r} to close {what} started at {self.where(start)}, found {found}"
            )
        return False

    # -- values ---------------------------------------------------------------------------------

    def value(self) -> Value:
        if self.peek() in _OPENERS or self.text.startswith("#{", self.pos):
            return self.nested(self.value_here)
        return self.value_here()

    def value_here(self) -> Value:
        c = self.peek()
        if c == "<":
            return self.record()
        if c == "[":
            return tuple(self.items("[", "]", "sequence", self.value))
        if c == "{":
            return self.dict_value()
        if c == '"':
            return self.quoted('"', "string")
        if c == "|":
            return Symbol(self.quoted("|", "quoted symbol"))
        if c == "#":
            return self.hash_form()
        if _WORD.match(c):
            return self.word()
        if not c:
            raise self.error("expected a value, found end of input")
        raise self.error(f"unexpected character {c!r}")

    def record(self) -> Record:
        start = self.pos
        self.pos += 1
        self.skip_ws()
        if self.peek() == ">":
            raise self.error("a record needs a label: '<>' is not a value", start)
        if not self.peek():
            raise self.error(
                f"expected '>' to close record started at {self.where(start)}, found end of input"
            )
        label = self.value()
        fields = []
        while not self.close_or_continue(">", "record", start):
            fields.append(self.value())
        return Record(label, tuple(fields))

    def items(self, opener: str, closer: str, what: str, item: Callable[[], Value]) -> list:
        start = self.pos
        self.pos += len(opener)
        result = []
        while not self.close_or_continue(closer, what, start):
            result.append(item())
        return result

    def dict_value(self) -> FrozenDict:
        start = self.pos
        self.pos += 1
        result: dict[Value, Value] = {}
        while not self.close_or_continue("}", "dict", start):
            key_start = self.pos
            key = self.value()
            self.expect_colon()
            if key in result:
                raise self.error("duplicate key in dict" + merge_note([*result, key]), key_start)
            result[key] = self.value()
        return FrozenDict(result)

    def expect_colon(self) -> None:
        self.skip_ws()
        if self.peek() != ":":
            raise self.error(f"expected ':' after dict key, found {self.describe_here()}")
        self.pos += 1
        self.skip_ws()

    def set_value(self) -> frozenset:
        start = self.pos
        self.pos += 2
        result: set[Value] = set()
        while not self.close_or_continue("}", "set", start):
            item_start = self.pos
            item = self.value()
            if item in result:
                raise self.error(
                    "duplicate element in set" + merge_note([*result, item]), item_start
                )
            result.add(item)
        return frozenset(result)

    def word(self) -> Value:
        start = self.pos
        w = self.word_here()
        self.pos += len(w)
        if _NUMERIC_START.match(w):
            return self.number(w, start)
        return Symbol(w)

    def number(self, w: str, start: int) -> int | float:
        if _INT.fullmatch(w):
            return _str_to_int(w)
        if _FLOAT.fullmatch(w):
            return float(w)
        raise self.error(f"invalid number {w!r}", start)

    def hash_form(self) -> Value:
        start = self.pos
        nxt = self.text[self.pos + 1 : self.pos + 2]
        if nxt == "{":
            return self.set_value()
        if nxt == '"':
            self.pos += 1
            return self.bytes_literal(start)
        if nxt == ":":
            raise self.error("embedded references (#:...) cannot be parsed")
        self.pos += 1
        w = self.word_here()
        self.pos += len(w)
        if w == "x" and self.peek() == '"':
            return self.hex_bytes(start)
        if w in _HASH_ATOMS:
            return _HASH_ATOMS[w]
        if not w:
            raise self.error(f"unexpected character after '#': {self.describe_here()}", start)
        raise self.error(f"unknown '#' syntax {'#' + w!r}", start)

    def quoted(self, quote: str, what: str) -> str:
        """Read a string or quoted symbol; the opening quote is at ``pos``."""
        start = self.pos
        self.pos += 1
        text, run = self.text, _STRING_RUN[quote]
        parts = []
        while True:
            m = run.match(text, self.pos)
            if m:
                parts.append(m.group())
                self.pos = m.end()
            c = self.peek()
            if c == quote:
                self.pos += 1
                return "".join(parts)
            if not c:
                raise self.error(f"unterminated {what}", start)
            parts.append(self.escape(quote))

    def escape(self, quote: str) -> str:
        """Decode the escape sequence at ``pos`` (which is a backslash)."""
        start = self.pos
        c = self.text[self.pos + 1 : self.pos + 2]
        self.pos += 2
        if c in ('"', "|") and c:
            return c
        if c in _SIMPLE_ESCAPES and c:
            return _SIMPLE_ESCAPES[c]
        if c == "u":
            code = self.hex4(start)
            if 0xD800 <= code < 0xDC00 and self.text.startswith("\\u", self.pos):
                low = _HEX4.match(self.text, self.pos + 2)
                if low and 0xDC00 <= int(low.group(), 16) < 0xE000:
                    self.pos = low.end()
                    code = 0x10000 + ((code - 0xD800) << 10) + (int(low.group(), 16) - 0xDC00)
            return chr(code)
        if not c:
            raise self.error("unterminated escape sequence", start)
        raise self.error(f"unknown escape sequence {_backslash(c)!r}", start)

    def hex4(self, start: int) -> int:
        m = _HEX4.match(self.text, self.pos)
        if not m:
            raise self.error("expected four hex digits after '\\u'", start)
        self.pos = m.end()
        return int(m.group(), 16)

    def bytes_literal(self, start: int) -> bytes:
        """Read ``#"..."``; ``pos`` is at the opening quote."""
        self.pos += 1
        out = bytearray()
        while True:
            m = _BYTES_RUN.match(self.text, self.pos)
            if m:
                out += m.group().encode("ascii")
                self.pos = m.end()
            c = self.peek()
            if c == '"':
                self.pos += 1
                return bytes(out)
            if not c:
                raise self.error("unterminated bytes", start)
            if c != "\\":
                raise self.error(f"non-ASCII character {c!r} in bytes (write it as \\xHH)")
            out.append(self.byte_escape())

    def byte_escape(self) -> int:
        start = self.pos
        c = self.text[self.pos + 1 : self.pos + 2]
        self.pos += 2
        if c and c in _BYTE_ESCAPES:
            return _BYTE_ESCAPES[c]
        if c == "x":
            m = _HEX2.match(self.text, self.pos)
            if not m:
                raise self.error("expected two hex digits after '\\x'", start)
            self.pos = m.end()
            return int(m.group(), 16)
        if not c:
            raise self.error("unterminated escape sequence", start)
        raise self.error(f"unknown escape sequence {_backslash(c)!r} in bytes", start)

    def hex_bytes(self, start: int) -> bytes:
        """Read ``#x"..."``; ``pos`` is at the opening quote."""
        self.pos += 1
        end = self.text.find('"', self.pos)
        if end < 0:
            raise self.error("unterminated bytes", start)
        digits = []
        for i in range(self.pos, end):
            c = self.text[i]
            if c in "0123456789abcdefABCDEF":
                digits.append(c)
            elif not c.isspace():
                raise self.error(f"invalid hex digit {c!r}", i)
        if len(digits) % 2:
            raise self.error("odd number of hex digits in bytes", start)
        self.pos = end + 1
        return bytes.fromhex("".join(digits))

    # -- patterns -------------------------------------------------------------------------------

    def pattern(self) -> Value:
        if self.peek() in _PATTERN_OPENERS or self.text.startswith("#and[", self.pos):
            return self.nested(self.pattern_here)
        return self.pattern_here()

    def pattern_here(self) -> Value:
        c = self.peek()
        if c == "$":
            return self.binding()
        if c == "_" and self.word_here() == "_":
            self.pos += 1
            return self.constrained_discard()
        primary = self.pattern_primary()
        constraints = self.constraints()
        return pf.and_((primary, *constraints)) if constraints else primary

    def constrained_discard(self) -> Value:
        constraints = self.constraints()
        if not constraints:
            return pf.DISCARD
        return constraints[0] if len(constraints) == 1 else pf.and_(constraints)

    def binding(self) -> Value:
        start = self.pos
        m = _NAME.match(self.text, self.pos + 1)
        if not m:
            raise self.error("expected a capture name after '$'")
        name = m.group()
        if name in self.name_positions:
            first = self.where(self.name_positions[name])
            raise self.error(f"duplicate capture name '${name}' (first used at {first})", start)
        self.name_positions[name] = start
        self.names.append(name)
        self.pos = m.end()
        if self.peek() == "=":
            self.pos += 1
            return pf.bind(self.pattern())
        return pf.bind(self.constrained_discard())

    def pattern_primary(self) -> Value:
        c = self.peek()
        if c == "<":
            return self.record_group()
        if c == "[":
            return pf.arr_group(self.items("[", "]", "sequence", self.pattern))
        if c == "{":
            return self.dict_group()
        if c == "'":
            self.pos += 1
            return pf.lit(self.value())
        if self.text.startswith("#and[", self.pos):
            return pf.and_(self.items("#and[", "]", "#and[...]", self.pattern))
        return pf.lit(self.value())

    def literal_slot(self, what: str) -> Value:
        """A position of a pattern that only takes a literal value: a label or a dict key."""
        c = self.peek()
        if c == "$":
            raise self.error(f"{what} in a pattern must be a literal value, not a capture")
        if c == "_" and self.word_here() == "_":
            raise self.error(
                f"{what} in a pattern must be a literal value, not '_' (write '_ for the symbol)"
            )
        if c == "'":
            self.pos += 1
        return self.value()

    def record_group(self) -> Value:
        start = self.pos
        self.pos += 1
        self.skip_ws()
        if self.peek() == ">":
            raise self.error("a record pattern needs a label: '<>' is not a pattern", start)
        if not self.peek():
            raise self.error(
                f"expected '>' to close record started at {self.where(start)}, found end of input"
            )
        label = self.literal_slot("a record label")
        fields = []
        while not self.close_or_continue(">", "record", start):
            fields.append(self.pattern())
        return pf.rec_group(label, fields)

    def dict_group(self) -> Value:
        start = self.pos
        self.pos += 1
        first_name = len(self.names)
        entries: dict[Value, tuple[Value, list[str]]] = {}
        while not self.close_or_continue("}", "dict", start):
            key_start = self.pos
            key = self.literal_slot("a dict key")
            self.expect_colon()
            if key in entries:
                note = merge_note([*entries, key])
                raise self.error("duplicate key in dict pattern" + note, key_start)
            names_before = len(self.names)
            p = self.pattern()
            entries[key] = (p, self.names[names_before:])
        # Captures are numbered in the canonical order of the keys, not in text order.
        del self.names[first_name:]
        for key in sorted(entries, key=sort_key):
            self.names.extend(entries[key][1])
        return pf.dict_group({k: p for k, (p, _) in entries.items()})

    def constraints(self) -> list[Value]:
        result = []
        while self.peek() == ":":
            self.pos += 1
            result.append(self.constraint())
        return result

    def constraint(self) -> Value:
        start = self.pos
        c = self.peek()
        if self.text.startswith("#{", self.pos):
            return pf.one_of(self.set_value())
        if c in ("[", "(") and c:
            return self.range_constraint()
        if c == "/":
            return self.regex_constraint()
        name = self.word_here()
        if not name:
            raise self.error(
                "expected a constraint after ':' (a type name, #{...}, a range or /regex/), "
                f"found {self.describe_here()}"
            )
        self.pos += len(name)
        if name not in pf.TYPE_NAMES:
            raise self.error(
                f"unknown type name {name!r} (expected one of {', '.join(pf.TYPE_NAMES)})", start
            )
        return pf.type_(name)

    def range_constraint(self) -> Value:
        start = self.pos
        lo_inclusive = self.peek() == "["
        self.pos += 1
        lo = self.range_bound()
        self.skip_ws()
        if not self.text.startswith("..", self.pos):
            raise self.error(f"expected '..' in range, found {self.describe_here()}")
        self.pos += 2
        hi = self.range_bound()
        self.skip_ws()
        c = self.peek()
        if c not in ("]", ")") or not c:
            raise self.error(
                f"expected ']' or ')' to close range started at {self.where(start)}, "
                f"found {self.describe_here()}"
            )
        self.pos += 1
        problem = range_problem(lo, hi, lo_inclusive, c == "]")
        if problem:
            raise self.error(f"bad range: {problem}", start)
        return pf.range_(lo, hi, lo_inclusive, c == "]")

    def range_bound(self) -> int | float | None:
        self.skip_ws()
        if self.text.startswith("..", self.pos) or self.peek() in ("]", ")", ""):
            return None
        start = self.pos
        m = _RANGE_NUMBER.match(self.text, self.pos)
        if m:
            self.pos = m.end()
            if self.text.startswith("..", self.pos) or not _WORD.match(self.peek()):
                w = m.group()
                return _HASH_ATOMS[w[1:]] if w[0] == "#" else self.number(w, start)
        raise self.error("expected a number or '..' in range", start)

    def regex_constraint(self) -> Value:
        start = self.pos
        self.pos += 1
        parts = []
        text = self.text
        while True:
            end = self.pos
            while end < len(text) and text[end] not in "/\\":
                end += 1
            parts.append(text[self.pos : end])
            self.pos = end
            c = self.peek()
            if c == "/":
                self.pos += 1
                break
            nxt = text[self.pos + 1 : self.pos + 2]
            if not c or not nxt:
                raise self.error("unterminated regex", start)
            parts.append("/" if nxt == "/" else "\\" + nxt)
            self.pos += 2
        source = "".join(parts)
        problem = regex_problem(source)
        if problem:
            raise self.error(f"invalid regex: {problem}", start)
        return pf.regex(source)


_HASH_ATOMS: dict[str, Value] = {
    "t": True,
    "f": False,
    "nil": None,
    "+inf": math.inf,
    "-inf": -math.inf,
    "nan": NAN,
}


def range_problem(lo: Any, hi: Any, lo_inclusive: Any, hi_inclusive: Any) -> str | None:
    """What is wrong with the fields of a ``<range ...>`` node, or ``None`` if it is fine."""
    for bound in (lo, hi):
        if bound is not None and not _is_number(bound):
            return f"a bound must be a number or open, not {bound!r}"
        if bound is not None and bound != bound:
            return "a bound cannot be NaN"
    if lo_inclusive.__class__ is not bool or hi_inclusive.__class__ is not bool:
        return "the inclusivity flags must be booleans"
    if lo is not None and hi is not None:
        if lo > hi:
            return "the lower bound is above the upper bound"
        if lo == hi and not (lo_inclusive and hi_inclusive):
            return "the range is empty"
    return None


def regex_problem(source: Any) -> str | None:
    """Why ``source`` is not a usable regex, or ``None`` if ``re.compile`` accepts it."""
    if source.__class__ is not str:
        return f"the source must be a string, not {source!r}"
    try:
        re.compile(source)
    except re.error as e:
        return str(e)
    except (OverflowError, RecursionError, ValueError) as e:  # pathological sources
        return str(e) or type(e).__name__
    return None


def _backslash(c: str) -> str:
    return "\\" + c


def _is_number(v: Any) -> bool:
    return v.__class__ is int or v.__class__ is float


def _str_to_int(digits: str) -> int:
    """``int(digits)`` without CPython's limit on the length of decimal conversions."""
    if len(digits) <= _BIG_INT_DIGITS:
        return int(digits)
    sign = -1 if digits[0] == "-" else 1
    digits = digits.lstrip("+-")
    half = len(digits) // 2
    high, low = digits[:-half], digits[-half:]
    return sign * (_str_to_int(high) * 10**half + _str_to_int(low))


def _int_to_str(n: int) -> str:
    """``str(n)`` without CPython's limit on the length of decimal conversions."""
    if n.bit_length() < _BIG_INT_DIGITS * 3:
        return str(n)
    if n < 0:
        return "-" + _int_to_str(-n)
    half = int(n.bit_length() * 0.30103) // 2
    high, low = divmod(n, 10**half)
    return _int_to_str(high) + _int_to_str(low).zfill(half)


# ---------------------------------------------------------------------------------------------
# Formatting


def format_value(v: Value) -> str:
    """Print a value so that :func:`parse` reads it back (unless it contains an Embedded)."""
    out: list[str] = []
    _format(v, out)
    return "".join(out)


def _format(v: Value, out: list[str]) -> None:
    cls = v.__class__
    if cls is Record:
        out.append("<")
        _format(v.label, out)
        for f in v.fields:
            out.append(" ")
            _format(f, out)
        out.append(">")
    elif cls is tuple:
        out.append("[")
        for i, x in enumerate(v):
            if i:
                out.append(" ")
            _format(x, out)
        out.append("]")
    elif cls is frozenset:
        out.append("#{")
        for i, x in enumerate(sorted(v, key=sort_key)):
            if i:
                out.append(" ")
            _format(x, out)
        out.append("}")
    elif cls is FrozenDict:
        out.append("{")
        for i, k in enumerate(sorted(v, key=sort_key)):
            if i:
                out.append(", ")
            _format(k, out)
            out.append(": ")
            _format(v[k], out)
        out.append("}")
    else:
        out.append(format_atom(v))


def format_atom(v: Value) -> str:
    """Print a value that is not a container."""
    cls = v.__class__
    if cls is str:
        return _format_string(v)
    if cls is Symbol:
        return _format_symbol(v.name)
    if cls is bool:
        return "#t" if v else "#f"
    if cls is int:
        return _int_to_str(v)
    if cls is float:
        return _format_float(v)
    if v is None:
        return "#nil"
    if cls is bytes:
        return '#"' + "".join([_BYTE_TEXT[b] for b in v]) + '"'
    if isinstance(v, Embedded):
        return f"#:{v!r}"
    raise TypeError(f"not a feds value: {v!r} (a {cls.__name__})")


def _format_float(f: float) -> str:
    if f != f:
        return "#nan"
    if f in (math.inf, -math.inf):
        return "#+inf" if f > 0 else "#-inf"
    return repr(f)


def _format_string(s: str) -> str:
    if s.isprintable() and '"' not in s and "\\" not in s:
        return '"' + s + '"'
    return '"' + _escape(s, '"') + '"'


def _format_symbol(name: str) -> str:
    if _WORD.fullmatch(name) and not _NUMERIC_START.match(name):
        return name
    return "|" + _escape(name, "|") + "|"


_NAMED_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f", "\\": "\\\\"}


def _escape(s: str, quote: str) -> str:
    out = []
    for c in s:
        if c == quote:
            out.append("\\" + c)
        elif c in _NAMED_ESCAPES:
            out.append(_NAMED_ESCAPES[c])
        elif c.isprintable():
            out.append(c)
        elif ord(c) < 0x10000:
            out.append(f"\\u{ord(c):04x}")
        else:
            code = ord(c) - 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
    return "".join(out)


def _byte_text(b: int) -> str:
    c = chr(b)
    if c in '"\\':
        return "\\" + c
    if c in "\n\r\t":
        return _NAMED_ESCAPES[c]
    return c if 0x20 <= b < 0x7F else f"\\x{b:02x}"


_BYTE_TEXT = [_byte_text(b) for b in range(256)]


# ---------------------------------------------------------------------------------------------
# Formatting patterns


def format_pattern(pattern: Value, names: Sequence[str] | None = None) -> str:
    """Print a record-form pattern in the text syntax.

    ``names`` are the capture names in capture order (default ``v0``, ``v1``, ...). Raises
    ``ValueError`` if ``pattern`` is not a well-formed pattern or the names do not fit it.
    """
    formatter = _PatternFormatter(names)
    text = formatter.pattern(pattern)
    if names is not None and formatter.used != len(names):
        raise ValueError(f"{len(names)} names given for {formatter.used} captures")
    return text


class _PatternFormatter:
    def __init__(self, names: Sequence[str] | None) -> None:
        if names is not None:
            for name in names:
                if not isinstance(name, str) or not _NAME.fullmatch(name):
                    raise ValueError(f"invalid capture name {name!r}")
            if len(set(names)) != len(names):
                raise ValueError(f"duplicate capture names in {list(names)!r}")
        self.names = names
        self.used = 0

    def next_name(self) -> str:
        i = self.used
        self.used += 1
        if self.names is None:
            return f"v{i}"
        if i >= len(self.names):
            raise ValueError(f"only {len(self.names)} names given, the pattern has more captures")
        return self.names[i]

    def pattern(self, p: Value) -> str:
        if pf.is_node(p, pf.DISCARD_LABEL, 0):
            return "_"
        if pf.is_node(p, pf.BIND, 1):
            return self.binding(p.fields[0])
        if pf.is_node(p, pf.LIT, 1):
            return _format_literal(p.fields[0])
        kind = pf.group_kind(p)
        if kind is not None:
            return self.group(kind, p)
        if pf.is_node(p, pf.AND, 1) and p.fields[0].__class__ is tuple:
            return self.conjunction(p, p.fields[0])
        if pf.is_constraint(p):
            return "_:" + _format_constraint(p)
        raise ValueError(f"not a pattern: {format_value(p)}")

    def binding(self, inner: Value) -> str:
        name = "$" + self.next_name()
        if pf.is_node(inner, pf.DISCARD_LABEL, 0):
            return name
        constraints = _constraint_chain(inner)
        if constraints is not None:
            return name + constraints
        return name + "=" + self.pattern(inner)

    def conjunction(self, p: Value, parts: tuple) -> str:
        constraints = _constraint_chain(p)
        if constraints is not None:
            return "_" + constraints
        if (
            len(parts) >= 2
            and (pf.is_node(parts[0], pf.LIT, 1) or pf.group_kind(parts[0]) is not None)
            and all(pf.is_constraint(q) for q in parts[1:])
        ):
            return self.pattern(parts[0]) + "".join(":" + _format_constraint(q) for q in parts[1:])
        return "#and[" + " ".join(self.pattern(q) for q in parts) + "]"

    def group(self, kind: Symbol, p: Value) -> str:
        entries: FrozenDict = p.fields[1]
        if kind == pf.DICT:
            items = [
                _format_key(k) + ": " + self.pattern(entries[k])
                for k in sorted(entries, key=sort_key)
            ]
            return "{" + ", ".join(items) + "}"
        if any(k.__class__ is not int or not 0 <= k < len(entries) for k in entries):
            raise ValueError(f"group entries must be numbered 0...n-1: {format_value(p)}")
        parts = [self.pattern(entries[i]) for i in range(len(entries))]
        if kind == pf.ARR:
            return "[" + " ".join(parts) + "]"
        return "<" + " ".join([_format_key(p.fields[0].fields[0]), *parts]) + ">"


def _constraint_chain(p: Value) -> str | None:
    """``:c1:c2...`` if ``p`` is one constraint or an ``and`` of two or more, else ``None``."""
    if pf.is_constraint(p):
        return ":" + _format_constraint(p)
    if pf.is_node(p, pf.AND, 1) and p.fields[0].__class__ is tuple:
        parts = p.fields[0]
        if len(parts) >= 2 and all(pf.is_constraint(q) for q in parts):
            return "".join(":" + _format_constraint(q) for q in parts)
    return None


def _is_discard_symbol(v: Value) -> bool:
    return v.__class__ is Symbol and v.name == "_"


def _format_literal(v: Value) -> str:
    if v.__class__ in (Record, tuple, FrozenDict) or _is_discard_symbol(v):
        return "'" + format_value(v)
    return format_value(v)


def _format_key(v: Value) -> str:
    return "'_" if _is_discard_symbol(v) else format_value(v)


def _format_constraint(p: Value) -> str:
    label, fields = p.label, p.fields
    if label == pf.TYPE:
        t = fields[0]
        if t.__class__ is not Symbol or t.name not in pf.TYPE_NAMES:
            raise ValueError(f"unknown type in pattern: {format_value(t)}")
        return t.name
    if label == pf.ONE_OF:
        if fields[0].__class__ is not frozenset:
            raise ValueError(f"one-of needs a set: {format_value(p)}")
        return format_value(fields[0])
    if label == pf.RANGE:
        problem = range_problem(*fields)
        if problem:
            raise ValueError(f"bad range {format_value(p)}: {problem}")
        lo, hi, lo_inclusive, hi_inclusive = fields
        return (
            ("[" if lo_inclusive else "(")
            + _format_bound(lo)
            + ".."
            + _format_bound(hi)
            + ("]" if hi_inclusive else ")")
        )
    problem = regex_problem(fields[0])
    if problem:
        raise ValueError(f"invalid regex {format_value(fields[0])}: {problem}")
    return "/" + _escape_regex(fields[0]) + "/"


def _format_bound(v: int | float | None) -> str:
    return "" if v is None else format_atom(v)


def _escape_regex(source: str) -> str:
    """Escape ``/`` as ``\\/``; an escape pair ``\\c`` is copied (``\\/`` stays ``\\/``)."""
    out = []
    i = 0
    while i < len(source):
        c = source[i]
        if c == "\\" and i + 1 < len(source):
            out.append(source[i : i + 2])
            i += 2
            continue
        out.append("\\/" if c == "/" else c)
        i += 1
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# JSON form


def to_json(v: Value) -> Any:
    """The JSON form of a value, as plain Python data ready for ``json.dumps``.

    ``null``, booleans, strings and finite floats map to themselves; integers within
    ±(2**53 - 1) are JSON numbers (larger ones ``{"@int": "digits"}``, safe for JavaScript and
    jq); sequences are arrays; everything else is an object with one ``@`` key::

        {"@symbol": "name"}                {"@record": LABEL, "fields": [...]}
        {"@bytes": "base64"}               {"@set": [...]}        (canonical order)
        {"@dict": [[K, V], ...]}           (canonical key order)
        {"@float": "nan" | "inf" | "-inf"} {"@embedded": "repr"}  (one-way)
    """
    cls = v.__class__
    if v is None or cls is bool or cls is str:
        return v
    if cls is int:
        return v if -_JSON_SAFE_INT <= v <= _JSON_SAFE_INT else {"@int": _int_to_str(v)}
    if cls is float:
        if math.isfinite(v):
            return v
        return {"@float": "nan" if v != v else ("inf" if v > 0 else "-inf")}
    if cls is tuple:
        return [to_json(x) for x in v]
    if cls is Symbol:
        return {"@symbol": v.name}
    if cls is Record:
        return {"@record": to_json(v.label), "fields": [to_json(f) for f in v.fields]}
    if cls is bytes:
        return {"@bytes": base64.b64encode(v).decode("ascii")}
    if cls is frozenset:
        return {"@set": [to_json(x) for x in sorted(v, key=sort_key)]}
    if cls is FrozenDict:
        return {"@dict": [[to_json(k), to_json(v[k])] for k in sorted(v, key=sort_key)]}
    if isinstance(v, Embedded):
        return {"@embedded": repr(v)}
    raise TypeError(f"not a feds value: {v!r} (a {cls.__name__})")


_JSON_SAFE_INT = 2**53 - 1
_JSON_FLOATS = {"nan": NAN, "inf": math.inf, "-inf": -math.inf}


def from_json(obj: Any) -> Value:
    """Read the JSON form written by :func:`to_json`; raises ``ValueError`` if it is malformed."""
    cls = obj.__class__
    if obj is None or cls is bool or cls is str or cls is int:
        return obj
    if cls is float:
        return NAN if obj != obj else obj
    if cls is list:
        return tuple(from_json(x) for x in obj)
    if cls is dict:
        return _from_json_object(obj)
    raise ValueError(f"not the JSON form of a value: {obj!r}")


def _from_json_object(obj: dict) -> Value:
    keys = set(obj)
    if keys == {"@record", "fields"} and obj["fields"].__class__ is list:
        return Record(from_json(obj["@record"]), tuple(from_json(f) for f in obj["fields"]))
    if len(keys) != 1:
        raise ValueError(f"not the JSON form of a value: {obj!r}")
    (tag,) = keys
    reader = _JSON_TAGS.get(tag)
    if reader is None:
        raise ValueError(f"unknown JSON tag {tag!r}")
    try:
        return reader(obj[tag])
    except (TypeError, ValueError, KeyError) as e:
        raise ValueError(f"malformed {tag!r} object {obj!r}: {e}") from None


def _json_symbol(body: Any) -> Symbol:
    return Symbol(_json_str(body))


def _json_int(body: Any) -> int:
    if not _INT.fullmatch(_json_str(body)):
        raise ValueError("expected decimal digits")
    return _str_to_int(body)


def _json_float(body: Any) -> float:
    return _JSON_FLOATS[_json_str(body)]


def _json_bytes(body: Any) -> bytes:
    return base64.b64decode(_json_str(body), validate=True)


def _json_set(body: Any) -> frozenset:
    items = [from_json(x) for x in _json_list(body)]
    result = frozenset(items)
    if len(result) != len(items):
        raise ValueError("duplicate set element")
    return result


def _json_dict(body: Any) -> FrozenDict:
    result = {}
    for pair in _json_list(body):
        if len(_json_list(pair)) != 2:
            raise ValueError("dict entries must be [key, value] pairs")
        key = from_json(pair[0])
        if key in result:
            raise ValueError("duplicate dict key")
        result[key] = from_json(pair[1])
    return FrozenDict(result)


def _json_embedded(body: Any) -> Value:
    raise ValueError("embedded references cannot be read back from JSON")


def _json_str(body: Any) -> str:
    if body.__class__ is not str:
        raise TypeError("expected a string")
    return body


def _json_list(body: Any) -> list:
    if body.__class__ is not list:
        raise TypeError("expected an array")
    return body


_JSON_TAGS: dict[str, Callable[[Any], Value]] = {
    "@symbol": _json_symbol,
    "@int": _json_int,
    "@float": _json_float,
    "@bytes": _json_bytes,
    "@set": _json_set,
    "@dict": _json_dict,
    "@embedded": _json_embedded,
}
