"""A regex as a Thompson NFA program for the linear-time matcher (sans-IO, pure).

:func:`build_program` reads a regex source exactly as :mod:`re` reads it (it asks
``re._parser``, the pure-Python parser that :func:`re.compile` itself runs, so flags, escapes,
classes and verbose mode mean the same) and lays the parse tree out as a small instruction list:
character tests, forks, jumps, zero-width assertions and a final ``MATCH``. Counted repetition
is unrolled, so the program's length bounds the work of one matcher step; a program longer than
:data:`MAX_REGEX_STATES` is refused.

Only the *language* of the regex matters (the matcher answers "is there a match anywhere", as
``re.search`` does), so greedy and lazy quantifiers build the same program. What cannot be
matched by a finite automaton, or would change which strings match under backtracking, is
refused with :class:`RegexRefused` naming the construct: backreferences, conditional groups,
lookahead and lookbehind, atomic groups and possessive quantifiers; also a group that switches
between ASCII and Unicode classes (``(?a:...)``), whose meaning in ``re`` depends on where it
stands (its first-character filter uses the regex's outer flags). Any parse-tree node this
module does not know is refused as well, so a future ``re`` cannot make it match wrongly.

A character test is a one-character regex compiled by :mod:`re` with the flags in force there
(``[\\U00000041-\\U0000005a]`` under ``(?i)``, ``.`` under ``(?s)``, ...), so case folding and
the Unicode classes are ``re``'s own; it only ever sees one character, so it cannot backtrack.
"""

from __future__ import annotations

import re
import re._constants as c  # the opcode names of re's parse tree
import re._parser as sre_parse
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "ASSERT",
    "CHAR",
    "FORK",
    "JUMP",
    "MATCH",
    "MAX_REGEX_STATES",
    "Assertion",
    "Program",
    "RegexRefused",
    "build_program",
    "char_features",
]

MAX_REGEX_STATES: Final = 1_000
"""Most instructions a regex may compile to (counted repetition is unrolled: ``a{5}`` is five).
One step of the matcher visits each at most once, so this bounds the work per character."""

CHAR, FORK, JUMP, ASSERT, MATCH = range(5)
"""Instruction kinds: test one character and go on to the next instruction; go on to any of
several targets; go on to one target; go on to the next instruction if a zero-width condition
holds; a match."""


class RegexRefused(ValueError):
    """A valid ``re`` regex the linear-time matcher does not run (the message says why)."""


class Assertion:
    """Zero-width conditions, as bit masks over what lies either side of a position.

    A position is described by two masks: ``before`` (``START`` or the features of the character
    before it) and ``after`` (``END`` or the features of the character after it, plus ``LAST``
    if that character is the string's last)."""

    START = END = 1
    NEWLINE = 2
    WORD = 4  # a word character as re's \\w sees it (Unicode)
    ASCII_WORD = 8  # a word character under re.ASCII
    LAST = 16

    BEGIN_STRING, BEGIN_LINE, END_STRING, END_LINE, END_OR_FINAL_NEWLINE = range(5)
    BOUNDARY, NON_BOUNDARY, ASCII_BOUNDARY, ASCII_NON_BOUNDARY = range(5, 9)

    @staticmethod
    def holds(kind: int, before: int, after: int) -> bool:
        """Whether the condition ``kind`` holds at a position described by the two masks."""
        a = Assertion
        if kind == a.BEGIN_STRING:
            return bool(before & a.START)
        if kind == a.BEGIN_LINE:
            return bool(before & (a.START | a.NEWLINE))
        if kind == a.END_STRING:
            return bool(after & a.END)
        if kind == a.END_LINE:
            return bool(after & (a.END | a.NEWLINE))
        if kind == a.END_OR_FINAL_NEWLINE:
            return bool(after & a.END) or after & (a.NEWLINE | a.LAST) == a.NEWLINE | a.LAST
        if before & a.START and after & a.END and kind in (a.NON_BOUNDARY, a.ASCII_NON_BOUNDARY):
            return _NON_BOUNDARY_IN_EMPTY
        word = a.WORD if kind in (a.BOUNDARY, a.NON_BOUNDARY) else a.ASCII_WORD
        differ = bool(before & word) != bool(after & word)
        return differ if kind in (a.BOUNDARY, a.ASCII_BOUNDARY) else not differ


_NON_BOUNDARY_IN_EMPTY: Final = re.search(r"\B", "") is not None  # False before Python 3.14
_UNICODE_WORD = re.compile(r"\w").fullmatch
_ASCII_WORD = re.compile(r"\w", re.ASCII).fullmatch


def char_features(ch: str) -> int:
    """The :class:`Assertion` mask bits of one character (newline, word in either sense)."""
    a = Assertion
    return (
        (a.NEWLINE if ch == "\n" else 0)
        | (a.WORD if _UNICODE_WORD(ch) else 0)
        | (a.ASCII_WORD if _ASCII_WORD(ch) else 0)
    )


@dataclass
class Program:
    """A regex as instructions. ``ops[pc]`` is the kind; ``args[pc]`` is, by kind: the index in
    ``tests`` (CHAR), a tuple of targets (FORK), the target (JUMP), the :class:`Assertion` kind
    (ASSERT), None (MATCH). CHAR and ASSERT go on to ``pc + 1``. Execution starts at 0."""

    ops: list[int] = field(default_factory=list)
    args: list[Any] = field(default_factory=list)
    tests: list[Any] = field(default_factory=list)  # one-character fullmatch functions

    def __len__(self) -> int:
        return len(self.ops)


# What the opcodes we refuse are called in an error message.
_REFUSED: Final = {
    c.GROUPREF: "a backreference",
    c.GROUPREF_EXISTS: "a conditional group (?(...)...)",
    c.ATOMIC_GROUP: "an atomic group (?>...)",
    c.POSSESSIVE_REPEAT: "a possessive quantifier (*+, ++, ?+, {m,n}+)",
}
_CATEGORIES: Final = {
    c.CATEGORY_DIGIT: r"\d",
    c.CATEGORY_NOT_DIGIT: r"\D",
    c.CATEGORY_SPACE: r"\s",
    c.CATEGORY_NOT_SPACE: r"\S",
    c.CATEGORY_WORD: r"\w",
    c.CATEGORY_NOT_WORD: r"\W",
}
_CHAR_FLAGS: Final = re.IGNORECASE | re.DOTALL | re.ASCII  # what changes a one-character test
_TYPE_FLAGS: Final = re.ASCII | re.LOCALE | re.UNICODE


def build_program(source: str) -> Program:
    """The program of ``source``, which :func:`re.compile` must accept.

    Raises :class:`RegexRefused` for what the linear matcher does not run or a program longer
    than :data:`MAX_REGEX_STATES`."""
    tree = sre_parse.parse(source, 0)
    builder = _Builder()
    try:
        builder.sequence(tree.data, tree.state.flags)
    except RecursionError:
        raise RegexRefused("nested too deeply") from None
    builder.emit(MATCH, None)
    return builder.program


class _Builder:
    """Emits instructions for parse-tree nodes, counting against the size bound."""

    def __init__(self) -> None:
        self.program = Program()
        self._tests: dict[tuple[str, int], int] = {}

    def emit(self, op: int, arg: Any) -> int:
        program = self.program
        if len(program.ops) >= MAX_REGEX_STATES:
            raise RegexRefused(
                f"it needs more than {MAX_REGEX_STATES} matcher states "
                "(counted repetition is unrolled: a{5} counts five)"
            )
        program.ops.append(op)
        program.args.append(arg)
        return len(program.ops) - 1

    def patch(self, pc: int, arg: Any) -> None:
        self.program.args[pc] = arg

    def here(self) -> int:
        return len(self.program.ops)

    def sequence(self, items: Any, flags: int) -> None:
        for op, av in items:
            self.node(op, av, flags)

    def node(self, op: Any, av: Any, flags: int) -> None:
        if op in (c.LITERAL, c.NOT_LITERAL, c.ANY, c.IN):
            self.emit(CHAR, self._test(op, av, flags))
        elif op is c.SUBPATTERN:
            _group, add, remove, body = av
            if add & _TYPE_FLAGS and add & _TYPE_FLAGS != flags & _TYPE_FLAGS:
                raise RegexRefused(
                    "a group switching between ASCII and Unicode classes, (?a:...) or (?u:...), "
                    "is refused: re itself applies it inconsistently at the start of a regex; "
                    "put (?a) at the start to make the whole regex ASCII"
                )
            self.sequence(body, (flags | add) & ~remove)
        elif op is c.BRANCH:
            self.branch(av[1], flags)
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT):
            self.repeat(*av, flags)
        elif op is c.AT:
            self.emit(ASSERT, _assertion(av, flags))
        elif op in (c.ASSERT, c.ASSERT_NOT):
            direction, _body = av
            kind = "lookahead" if direction == 1 else "lookbehind"
            sign = "" if op is c.ASSERT else "negative "
            raise RegexRefused(f"the linear-time matcher cannot run a {sign}{kind}")
        elif op in _REFUSED:
            raise RegexRefused(f"the linear-time matcher cannot run {_REFUSED[op]}")
        else:
            raise RegexRefused(f"the linear-time matcher does not know the construct {op}")

    def branch(self, alternatives: list, flags: int) -> None:
        fork = self.emit(FORK, ())
        starts, jumps = [], []
        for alternative in alternatives:
            starts.append(self.here())
            self.sequence(alternative, flags)
            jumps.append(self.emit(JUMP, None))
        end = self.here()
        self.patch(fork, tuple(starts))
        for jump in jumps:
            self.patch(jump, end)

    def repeat(self, least: int, most: int, body: Any, flags: int) -> None:
        for _ in range(least):
            self.sequence(body, flags)
        if most == c.MAXREPEAT:
            loop = self.emit(FORK, ())
            self.sequence(body, flags)
            self.emit(JUMP, loop)
            self.patch(loop, (loop + 1, self.here()))
            return
        forks = []
        for _ in range(most - least):
            forks.append(self.emit(FORK, ()))
            self.sequence(body, flags)
        end = self.here()
        for fork in forks:
            self.patch(fork, (fork + 1, end))

    def _test(self, op: Any, av: Any, flags: int) -> int:
        """The index of the one-character test for an atom (equal atoms share one)."""
        key = (_atom_source(op, av), flags & _CHAR_FLAGS)
        index = self._tests.get(key)
        if index is None:
            index = self._tests[key] = len(self.program.tests)
            self.program.tests.append(re.compile(*key).fullmatch)
        return index


def _char(code: int) -> str:
    return f"\\U{code:08x}"


def _atom_source(op: Any, av: Any) -> str:
    """A regex source matching one character as the atom ``(op, av)`` does."""
    if op is c.LITERAL:
        return _char(av)
    if op is c.NOT_LITERAL:
        return f"[^{_char(av)}]"
    if op is c.ANY:
        return "."
    parts = []
    for item, value in av:
        if item is c.NEGATE:
            parts.append("^")
        elif item is c.LITERAL:
            parts.append(_char(value))
        elif item is c.RANGE:
            parts.append(f"{_char(value[0])}-{_char(value[1])}")
        elif item is c.CATEGORY and value in _CATEGORIES:
            parts.append(_CATEGORIES[value])
        else:
            raise RegexRefused(f"the linear-time matcher does not know the class item {item}")
    return "[" + "".join(parts) + "]"


def _assertion(at: Any, flags: int) -> int:
    a = Assertion
    ascii_words = bool(flags & re.ASCII)
    multiline = bool(flags & re.MULTILINE)
    if at is c.AT_BEGINNING_STRING:
        return a.BEGIN_STRING
    if at is c.AT_BEGINNING:
        return a.BEGIN_LINE if multiline else a.BEGIN_STRING
    if at is c.AT_END_STRING:
        return a.END_STRING
    if at is c.AT_END:
        return a.END_LINE if multiline else a.END_OR_FINAL_NEWLINE
    if at is c.AT_BOUNDARY:
        return a.ASCII_BOUNDARY if ascii_words else a.BOUNDARY
    if at is c.AT_NON_BOUNDARY:
        return a.ASCII_NON_BOUNDARY if ascii_words else a.NON_BOUNDARY
    raise RegexRefused(f"the linear-time matcher does not know the assertion {at}")
