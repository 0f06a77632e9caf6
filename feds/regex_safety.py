"""Refuse regular expressions whose matching time can grow exponentially (sans-IO, pure).

Patterns arrive from the network, and Python's ``re`` is a backtracking matcher: ``(a+)+$``
against ``"aaa…a!"`` takes twice as long for each extra ``a``, and a node does nothing else
meanwhile. :func:`regex_hazard` looks at the source of a ``<regex ...>`` constraint and names the
first construct that can make the matcher backtrack exponentially:

* a repeated group (``*``, ``+``, ``{m,}``, ``{m,n}`` with ``n > 1``) whose body itself holds a
  quantifier, ``?`` included (*nested quantifiers*: ``(a+)+``, ``(a?b?)*``, ``((ab)*c)+``);
* a repeated group whose body holds an alternation whose alternatives do not all begin with
  distinct literal characters (``(a|ab)*``, ``(\\w|_)+``; ``(a|b)*`` is fine: at each step at
  most one alternative can go on);
* backreferences (``\\1``, ``(?P=name)``) and conditional groups (``(?(1)a|b)``), which make
  matching NP-hard in general.

The rules are deliberately simple and conservative: they also refuse some harmless expressions
such as ``(ab?)+``. What they let through backtracks at most polynomially in the length of the
string (adjacent overlapping quantifiers such as ``a*a*b``), and strings are bounded by the frame
size; ``protocols/patterns.md`` states the rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["regex_hazard"]

_CLASS_ESCAPES = frozenset("dDsSwWbBAZ")
_UNBOUNDED = 1 << 30


@dataclass
class _Frame:
    """One open group of the scan (the whole expression is the outermost)."""

    start: int
    quantified: bool = False  # holds a quantifier (at any depth)
    ambiguous: bool = False  # holds an alternation that is not deterministic (at any depth)
    firsts: list[str | None] = field(default_factory=list)  # first atom of each alternative
    current_first: str | bool | None = False  # False: the current alternative has no atom yet

    def atom(self, literal: str | None) -> None:
        if self.current_first is False:
            self.current_first = literal

    def bar(self) -> None:
        self.firsts.append(None if self.current_first is False else self.current_first)
        self.current_first = False

    def close(self) -> None:
        """End the group: decide whether its alternation (if any) is deterministic."""
        if not self.firsts:
            return
        self.bar()
        literals = [f for f in self.firsts if f is not None]
        if len(literals) < len(self.firsts) or len(set(literals)) < len(literals):
            self.ambiguous = True


@dataclass
class _Group:
    """A closed group, as the atom a following quantifier applies to."""

    start: int
    quantified: bool
    ambiguous: bool


def regex_hazard(source: str) -> str | None:
    """Why ``source`` may take exponential time to match (naming the position), or None.

    ``source`` is assumed to compile (``re.compile``); this only looks at its structure.
    """
    stack = [_Frame(-1)]
    last: _Group | str | None = None  # the atom a quantifier would apply to
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        frame = stack[-1]
        if c == "\\":
            nxt = source[i + 1 : i + 2]
            if nxt.isdigit() and nxt != "0":
                return f"backreference at position {i}"
            literal = None if nxt in _CLASS_ESCAPES else nxt
            frame.atom(literal)
            last = literal or "class"
            i += 2
            continue
        if c == "[":
            i = _skip_class(source, i)
            frame.atom(None)
            last = "class"
            continue
        if c == "(":
            if source.startswith("(?P=", i):
                return f"backreference at position {i}"
            if source.startswith("(?(", i):
                return f"conditional group at position {i}"
            if source.startswith("(?#", i):
                i = source.find(")", i) + 1 or n
                continue
            frame.atom(None)
            stack.append(_Frame(i))
            i = _skip_group_prefix(source, i)
            last = None
            continue
        if c == ")" and len(stack) > 1:
            inner = stack.pop()
            inner.close()
            outer = stack[-1]
            outer.quantified |= inner.quantified
            outer.ambiguous |= inner.ambiguous
            last = _Group(inner.start, inner.quantified, inner.ambiguous)
            i += 1
            continue
        if c == "|":
            frame.bar()
            last = None
            i += 1
            continue
        quantifier = _quantifier(source, i)
        if quantifier is not None and last is not None:
            end, most = quantifier
            if most > 1 and isinstance(last, _Group):
                if last.quantified:
                    return (
                        f"nested quantifier at position {i}: the group at position "
                        f"{last.start} is repeated and holds a quantifier itself "
                        "(exponential backtracking)"
                    )
                if last.ambiguous:
                    return (
                        f"ambiguous repetition at position {i}: the group at position "
                        f"{last.start} is repeated and holds alternatives that do not begin "
                        "with distinct literal characters (exponential backtracking)"
                    )
            frame.quantified = True
            last = None
            i = end
            continue
        frame.atom(None if c in ".^$" else c)
        last = None if c in "^$" else c
        i += 1
    return None


def _skip_class(source: str, i: int) -> int:
    """The index just after the character class starting at ``source[i] == "["``."""
    i += 1
    if source.startswith("^", i):
        i += 1
    if source.startswith("]", i):
        i += 1
    while i < len(source) and source[i] != "]":
        i += 2 if source[i] == "\\" else 1
    return i + 1


def _skip_group_prefix(source: str, i: int) -> int:
    """The index of the first atom of the group opened at ``source[i] == "("``."""
    if not source.startswith("(?", i):
        return i + 1
    if source.startswith("(?P<", i):
        end = source.find(">", i)
        return len(source) if end < 0 else end + 1
    j = i + 2
    if source.startswith(("<=", "<!"), j):
        return j + 2
    if source[j : j + 1] in (":", "=", "!", ">"):
        return j + 1
    while j < len(source) and source[j] not in ":)":
        j += 1
    return j + 1 if source[j : j + 1] == ":" else j  # (?flags) ends at ")", an empty group


def _quantifier(source: str, i: int) -> tuple[int, int] | None:
    """``(end, most repetitions)`` of a quantifier starting at ``i``, or None if none does."""
    c = source[i]
    if c in "*+":
        most, end = _UNBOUNDED, i + 1
    elif c == "?":
        most, end = 1, i + 1
    elif c == "{":
        close = source.find("}", i)
        body = source[i + 1 : close] if close > 0 else ""
        low, comma, high = body.partition(",")
        if not body or not (low.isdigit() or low == "") or not (high.isdigit() or high == ""):
            return None
        if not comma and not low:
            return None
        most = int(high) if high else (_UNBOUNDED if comma else int(low))
        end = close + 1
    else:
        return None
    if source[end : end + 1] in ("?", "+"):  # lazy or possessive
        end += 1
    return end, most
