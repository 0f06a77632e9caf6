"""Regexes from the network, searched in time linear in the string (sans-IO, pure).

Patterns arrive from the network, and Python's ``re`` backtracks: ``(a+)+$`` against 27 ``a``s
and a ``!`` took 17 s, ``a*a*b`` against 3,000 ``a``s 14 s, and a node does nothing else
meanwhile. :func:`compile_search` builds every regex as a Thompson NFA
(:mod:`feds.regex_program`, reading the source with ``re``'s own parser) and chooses how to
search with it; both ways answer exactly what ``re.search(source, s) is not None`` answers:

* a regex whose program has **no loop** (no ``*``, ``+``, ``{m,}``) and at most
  :data:`MAX_BACKTRACKING_PATHS` paths from start to match is given to ``re``, which is much
  faster in C. Its backtracking is provably bounded: at each of the ``len(s) + 1`` start
  positions ``re`` tries each path at most once, and a path is at most ``len(program)``
  instructions long, so a search costs at most
  ``(len(s) + 1) * MAX_BACKTRACKING_PATHS * len(program)`` steps;
* any other regex runs on the lazily built DFA of :mod:`feds.regex_dfa`, which takes at most
  ``3 * len(program)`` steps per character of ``s``.

``len(program)`` is at most :data:`~feds.regex_program.MAX_REGEX_STATES`. Refused, with
:class:`~feds.regex_program.RegexRefused` naming the construct: backreferences, conditional
groups, lookaround, atomic groups, possessive quantifiers, a group switching between ASCII and
Unicode classes, and regexes needing more than ``MAX_REGEX_STATES`` instructions. A source
``re`` cannot compile raises :class:`re.error` (also for a repetition count or a nesting too
large for ``re``'s parser).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final

from feds.regex_dfa import LazyDfa
from feds.regex_program import (
    FORK,
    JUMP,
    MATCH,
    MAX_REGEX_STATES,
    Program,
    RegexRefused,
    build_program,
)

__all__ = [
    "MAX_BACKTRACKING_PATHS",
    "MAX_REGEX_STATES",
    "BoundedBacktracking",
    "RegexRefused",
    "compile_search",
    "loop_free_paths",
]

MAX_BACKTRACKING_PATHS: Final = 16
"""Most paths through a loop-free program for which ``re`` does the searching."""


class BoundedBacktracking:
    """``re``'s search, for a regex whose backtracking :func:`loop_free_paths` bounds."""

    __slots__ = ("_search",)

    def __init__(self, source: str) -> None:
        self._search = re.compile(source).search

    def search(self, s: str) -> bool:
        """Whether the regex matches somewhere in ``s``."""
        return self._search(s) is not None


@lru_cache(maxsize=512)
def compile_search(source: str) -> LazyDfa | BoundedBacktracking:
    """The linear-time searcher of ``source`` (shared: equal sources share one).

    Raises :class:`re.error` if ``re`` rejects the source, :class:`RegexRefused` if the linear
    matcher does not run it."""
    try:
        re.compile(source)
        program = build_program(source)
    except (OverflowError, RecursionError) as exc:  # re's own limits, for absurd sources
        raise re.error(str(exc) or type(exc).__name__) from None
    paths = loop_free_paths(program)
    if paths is not None and paths <= MAX_BACKTRACKING_PATHS:
        return BoundedBacktracking(source)
    return LazyDfa(program)


def loop_free_paths(program: Program) -> int | None:
    """How many paths lead from the start to MATCH (above :data:`MAX_BACKTRACKING_PATHS`:
    any larger number), or None if the program has a loop.

    Every instruction but a loop's back jump leads forward, so the count runs backwards over
    the program once; assertions are counted as if they held (a bound, not an exact count)."""
    ops, args = program.ops, program.args
    if any(op == JUMP and args[pc] <= pc for pc, op in enumerate(ops)):
        return None
    cap = MAX_BACKTRACKING_PATHS + 1
    paths = [0] * (len(ops) + 1)
    for pc in range(len(ops) - 1, -1, -1):
        op = ops[pc]
        if op == MATCH:
            paths[pc] = 1
        elif op == FORK:
            paths[pc] = min(cap, sum(paths[target] for target in args[pc]))
        elif op == JUMP:
            paths[pc] = paths[args[pc]]
        else:  # CHAR, ASSERT
            paths[pc] = paths[pc + 1]
    return paths[0]
