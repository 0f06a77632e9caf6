"""Regexes from the network, searched in time linear in the string (sans-IO, pure).

Patterns arrive from the network, and Python's ``re`` backtracks: ``(a+)+$`` against 27 ``a``s
and a ``!`` took 17 s, ``a*a*b`` against 3,000 ``a``s 14 s, and a node does nothing else
meanwhile. :func:`compile_search` therefore never hands a pattern's regex to ``re``'s matcher:
it builds a Thompson NFA (:mod:`feds.regex_program`, reading the source with ``re``'s own
parser) and searches with a lazily built DFA (:mod:`feds.regex_dfa`), whose cost is at most
``(len(s) + 1) * len(program)`` instruction visits, with ``len(program)`` at most
:data:`~feds.regex_program.MAX_REGEX_STATES`. It answers exactly what
``re.search(source, s) is not None`` answers.

Refused, with :class:`~feds.regex_program.RegexRefused` naming the construct: backreferences,
conditional groups, lookaround, atomic groups, possessive quantifiers, and regexes needing more
than ``MAX_REGEX_STATES`` instructions. A source ``re`` cannot compile raises :class:`re.error`
(also for a repetition count or a nesting too large for ``re``'s parser).
"""

from __future__ import annotations

import re
from functools import lru_cache

from feds.regex_dfa import LazyDfa
from feds.regex_program import MAX_REGEX_STATES, RegexRefused, build_program

__all__ = ["MAX_REGEX_STATES", "RegexRefused", "compile_search"]


@lru_cache(maxsize=512)
def compile_search(source: str) -> LazyDfa:
    """The linear-time searcher of ``source`` (shared: equal sources share one cache).

    Raises :class:`re.error` if ``re`` rejects the source, :class:`RegexRefused` if the linear
    matcher does not run it."""
    try:
        re.compile(source)
        return LazyDfa(build_program(source))
    except (OverflowError, RecursionError) as exc:  # re's own limits, for absurd sources
        raise re.error(str(exc) or type(exc).__name__) from None
