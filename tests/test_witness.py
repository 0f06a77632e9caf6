"""Witnesses (:mod:`feds.witness`): every look at a payload is noted, and the selector built from
the notes gives, for any payload that passes them, what the code would have made of it.

The property at the end is the one routes rest on, checked against the real skeleton index with
random patterns and values: dispatch a message as a witness, build the selector of the captures
each handler got, then dispatch other messages for real; wherever the selector accepts one, the
index must call the same handlers, in the same order, with the very captures it predicts.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feds.index import Index
from feds.patterns import compile_pattern
from feds.values import NAN, FrozenDict, Record, Symbol, record
from feds.witness import (
    CLASS,
    LABEL,
    LENGTH,
    VALUE,
    Trace,
    Unfaithful,
    Witness,
    selector,
    template,
)
from tests.pattern_strategies import pattern_for, twin_of, values, variant_of
from tests.strategies import identical


def _witness(value: object) -> tuple[Witness, Trace]:
    trace = Trace()
    return Witness(value, trace), trace


def test_each_look_is_answered_truly_and_noted() -> None:
    w, trace = _witness(record("temp", "kitchen", 21.5))
    assert w.__class__ is Record and isinstance(w, Record) and not isinstance(w, tuple)
    assert w.label is Symbol("temp")
    fields = w.fields
    assert len(fields) == 2
    assert fields[0] == "kitchen" and hash(fields[0]) == hash("kitchen")
    assert list(trace.guards) == [
        ((), CLASS),
        ((), LABEL),
        ((), LENGTH),
        ((0,), VALUE),
    ]
    assert trace.guards[((), LABEL)] is Symbol("temp")


@pytest.mark.parametrize(
    ("look", "kind"),
    [
        (lambda w: w == 1, VALUE),
        (lambda w: w < 2, VALUE),
        (lambda w: bool(w), VALUE),
        (lambda w: w + 1, VALUE),
        (lambda w: str(w), VALUE),
        (lambda w: {w: 0}, VALUE),
        (lambda w: isinstance(w, int), CLASS),
        (lambda w: w.__class__, CLASS),
        (lambda w: w.bit_length(), VALUE),
    ],
)
def test_an_atom_is_pinned_to_its_value_by_what_depends_on_it(look, kind) -> None:  # type: ignore[no-untyped-def]
    w, trace = _witness(1)
    look(w)
    assert ((), kind) in trace.guards


def test_a_sequence_hands_out_its_items_as_witnesses_noting_its_length() -> None:
    w, trace = _witness((1, "x", (2,)))
    first, *_rest = w
    assert type(first) is Witness
    assert trace.guards == {((), CLASS): tuple, ((), LENGTH): 3}
    assert bool(w) and trace.guards == {((), CLASS): tuple, ((), LENGTH): 3}
    assert type(w[2][0]) is Witness and trace.guards[((2,), LENGTH)] == 1


def test_a_nan_cannot_be_witnessed() -> None:
    w, _trace = _witness((NAN, 1))
    assert type(w[0]) is Witness  # handing it out is fine
    with pytest.raises(Unfaithful):
        w[0] == NAN  # noqa: B015 (NAN == NAN only as the same object)
    with pytest.raises(Unfaithful):
        hash(w)


def test_a_witness_cannot_be_changed() -> None:
    w, _trace = _witness(record("a", 1))
    with pytest.raises(AttributeError):
        w.label = Symbol("b")


def test_templates_say_where_the_parts_came_from() -> None:
    w, _trace = _witness(record("pub", "x", (1, 2)))
    f = w.fields
    assert template(f[1]) == ("part", (1,))
    assert template((f[0], 7)) == ("tuple", (("part", (0,)), ("const", 7)))
    assert template(Record(Symbol("at"), (f[1],)))[0] == "record"  # type: ignore[index]
    assert template(frozenset([f[0]])) is None  # a set of parts cannot be rebuilt
    assert template(FrozenDict({1: 2})) == ("const", FrozenDict({1: 2}))


def test_a_selector_checks_the_guards_and_rebuilds_the_templates() -> None:
    w, trace = _witness(record("bench", 1, b"payload"))
    assert w.label is Symbol("bench")
    f = w.fields
    select = selector(trace, [template((f[0], f[1])), template(f[1])])
    assert select(record("bench", 2, b"other")) == ((2, b"other"), b"other")
    assert select(record("bench", 2)) is None  # another arity
    assert select(record("temp", 2, b"x")) is None  # another label
    assert select((1, b"x")) is None  # not a record
    assert select(record(Symbol("bench"), 1.0, 2)) == ((1.0, 2), 2)  # the items: not looked at


# -- the index, seen through a witness -----------------------------------------------------------


def _dispatch(patterns: list, message: object) -> list[tuple[int, tuple]]:
    """``(pattern index, captures)`` for each handler the index calls for ``message``."""
    index = Index()
    calls: list[tuple[int, tuple]] = []
    for i, p in enumerate(patterns):
        index.add_handler(compile_pattern(p), lambda e, c, k, i=i: calls.append((i, c)))
    index.send_message(message)
    return calls


@settings(max_examples=400, deadline=None)
@given(data=st.data(), v=values)
def test_the_index_does_for_a_payload_passing_the_guards_what_it_did_for_the_witness(
    data: st.DataObject, v: object
) -> None:
    patterns = [data.draw(pattern_for(v)) for _ in range(data.draw(st.integers(1, 4)))]
    w, trace = _witness(v)
    try:
        seen = _dispatch(patterns, w)
    except (Exception, Unfaithful):  # it needed the real value (a regex, a NaN): no route
        return
    templates = [template(captures) for _i, captures in seen]
    if None in templates:
        return
    select = selector(trace, templates)  # type: ignore[arg-type]
    assert select(v) is not None  # the payload it was made with passes its own guards
    for _ in range(4):
        other = data.draw(st.one_of(variant_of(v), twin_of(v), values))
        made = select(other)
        if made is None:
            continue
        real = _dispatch(patterns, other)
        assert [i for i, _c in real] == [i for i, _c in seen]
        for (_i, captures), predicted in zip(real, made, strict=True):
            assert identical(captures, predicted)
