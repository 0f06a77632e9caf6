"""Patterns over patterns, for meta-observers: observing who observes what.

A dataspace holds each ``<Observe pattern observer>`` as an assertion like any other, so one can
observe the observers, e.g. to start a service only while someone is interested in its answers.
The Observe's ``pattern`` field holds a pattern in record form (``protocols/patterns.md``), and
writing a pattern that matches such a record by hand is tedious. :func:`quote` does it, with
Syndicate's reading of a pattern inside an Observe:

* ``$x`` (``<bind p>``) where the observer's pattern has a literal captures that literal's value
  (if it matches ``p``): ``observing("<search $query>")`` matches the interest of anyone who
  observes ``<search "cats">`` and captures ``"cats"``;
* ``_`` matches any sub-pattern there: a literal, a capture, a discard, a constraint...;
* a literal, a record or sequence shape, a dict or a constraint must appear as such in the
  observer's pattern. A record (sequence) shape also matches an observer's pattern with more
  fields (items) than it lists, as a dict pattern matches a dict with more keys.

::

    @during(turn, ds, observing("<search $query>"))
    def demand(turn, query):          # someone observes <search QUERY ...>
        ...                           # so assert the results while they do
"""

from __future__ import annotations

from feds.dataspace import OBSERVE
from feds.pattern_forms import (
    BIND,
    DISCARD,
    DISCARD_LABEL,
    GROUP,
    LIT,
    dict_group,
    is_node,
    lit,
    rec_group,
)
from feds.patterns import validate
from feds.reactive import PatternLike, pattern_value
from feds.values import Record, Value


def quote(pattern: PatternLike) -> Value:
    """A pattern matching the record form of ``pattern`` (see the module docstring); its
    captures are those of ``pattern``, in the same order."""
    p = pattern_value(pattern)
    validate(p)
    return _quote(p)


def _quote(p: Record) -> Value:
    if p.label is DISCARD_LABEL:
        return DISCARD
    if p.label is BIND:
        return rec_group(LIT, [Record(BIND, p.fields)])
    if is_node(p, GROUP, 2):
        kind, entries = p.fields
        return rec_group(GROUP, [lit(kind), dict_group({k: _quote(q) for k, q in entries.items()})])
    return lit(p)  # a literal, <and ...> or a constraint: the same node


def observing(pattern: PatternLike, observer: Value = DISCARD) -> Value:
    """A pattern matching ``<Observe P o>`` where ``P`` is quoted from ``pattern`` (see
    :func:`quote`) and ``o`` matches ``observer`` (by default, anyone)."""
    return rec_group(OBSERVE, [quote(pattern), observer])
