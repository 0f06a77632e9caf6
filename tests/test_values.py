"""Records: the hash is computed on first use only, and equality is as documented."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from feds.values import NAN, Record, Symbol, Value
from tests.strategies import identical, values

LABEL = Symbol("values-test")


class Counted:
    """A hashable field that counts how often it is hashed and compared."""

    def __init__(self, key: int) -> None:
        self.key = key
        self.hashes = 0
        self.compares = 0

    def __hash__(self) -> int:
        self.hashes += 1
        return self.key

    def __eq__(self, other: object) -> bool:
        self.compares += 1
        return isinstance(other, Counted) and other.key == self.key


def test_a_record_never_hashed_never_computes_its_hash() -> None:
    field = Counted(1)
    r = Record(LABEL, (field,))
    outer = Record(LABEL, (r, (r,)))
    assert field.hashes == 0
    assert outer == Record(LABEL, (r, (r,)))  # equality of fresh records needs no hash either
    assert field.hashes == 0
    assert hash(outer) == hash(Record(LABEL, (Record(LABEL, (field,)), (r,))))
    hashes = field.hashes
    assert hash(outer) == hash(outer) and hash(r) == hash(r)
    assert field.hashes == hashes  # kept after the first time


def test_unhashable_fields_fail_when_hashed_not_when_built() -> None:
    r = Record(LABEL, ([1],))  # not a feds value: like a tuple holding a list
    with pytest.raises(TypeError):
        hash(r)
    with pytest.raises(TypeError):
        _ = {r}


def test_known_unequal_hashes_settle_equality_without_comparing_fields() -> None:
    a, b = Counted(1), Counted(2)
    ra, rb = Record(LABEL, (a,)), Record(LABEL, (b,))
    assert hash(ra) != hash(rb)
    assert ra != rb and a.compares == b.compares == 0


def test_equality_is_type_exact_whichever_hashes_are_known() -> None:
    one = [Record(LABEL, (x, NAN)) for x in (1, 1.0, True)]
    zeros = [Record(LABEL, (x,)) for x in (0.0, -0.0, 0, False)]
    for group in (one, zeros):
        for r in group[::2]:
            hash(r)  # some hashes known, some not
        for i, r in enumerate(group):
            for j, s in enumerate(group):
                assert (r == s) == (i == j)
                assert r == Record(LABEL, r.fields) and hash(r) == hash(Record(LABEL, r.fields))
    assert Record(LABEL, (float("nan"),)) != Record(LABEL, (float("nan"),))
    assert Record(LABEL, (1,)) != Record(Symbol("values-other"), (1,))
    assert Record(LABEL, (1,)) != (LABEL, (1,))
    assert len({*one, *zeros}) == 7


@given(values(), values(), st.integers(0, 3))
def test_record_equality_and_hash_follow_the_tuple_of_label_and_fields(
    x: Value, y: Value, known: int
) -> None:
    a, b = Record(LABEL, (x,)), Record(LABEL, (y,))
    if known & 1:
        hash(a)
    if known & 2:
        hash(b)
    assert (a == b) == identical(x, y)
    assert (a == b) == (b == a)
    if a == b:
        assert hash(a) == hash(b)
