"""Local pSpaces spaces: typed fields, templates, the five kinds' orders, blocking waits."""

from __future__ import annotations

import random
import threading

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from feds.spaces import (
    ANY,
    NUMBER_FIELD,
    BlockingSpace,
    Byte,
    Char,
    Float,
    Formal,
    JavaObject,
    Kind,
    Long,
    PileSpace,
    QueueSpace,
    RandomSpace,
    SequentialSpace,
    Space,
    SpaceError,
    SpaceRepository,
    SpaceTimeout,
    SpaceTypeError,
    StackSpace,
    fieldtext,
    wire,
)
from feds.spaces.templates import matches

# ---------------------------------------------------------------------------------------------
# Typed values and templates against a naive model: a field is (tag, payload)

TAGS = {
    "int": (st.integers(-(2**31), 2**31 - 1), lambda x: x),
    "long": (st.integers(-(2**63), 2**63 - 1), Long),
    "double": (st.floats(allow_nan=False, allow_infinity=False), lambda x: x),
    "float": (st.floats(allow_nan=False, allow_infinity=False), Float),
    "boolean": (st.booleans(), lambda x: x),
    "char": (st.characters(), Char),
    "byte": (st.integers(-128, 127), Byte),
    "string": (st.text(max_size=3), lambda x: x),
}
NUMERIC_TAGS = {"int", "long", "double", "float", "byte"}
SMALL = {  # payloads that collide across types, so equal-looking values of different types meet
    "int": st.sampled_from([0, 1, 2]),
    "long": st.sampled_from([0, 1, 2]),
    "double": st.sampled_from([0.0, 1.0, 2.0, -0.0]),
    "float": st.sampled_from([0.0, 1.0, 2.0]),
    "boolean": st.booleans(),
    "char": st.sampled_from("ab"),
    "byte": st.sampled_from([0, 1]),
    "string": st.sampled_from(["a", "b", "1"]),
}


@st.composite
def tagged(draw, small: bool = True):
    tag = draw(st.sampled_from(sorted(TAGS)))
    payload = draw(SMALL[tag] if small else TAGS[tag][0])
    return tag, payload


def build(tag: str, payload) -> object:
    return TAGS[tag][1](payload)


def naive_same(a: tuple, b: tuple) -> bool:
    (ta, pa), (tb, pb) = a, b
    if ta != tb:
        return False
    if isinstance(pa, float):
        return repr(pa) == repr(pb)  # bit-exact: 0.0 differs from -0.0
    return pa == pb


@st.composite
def template_field(draw):
    choice = draw(st.integers(0, 3))
    if choice == 0:
        return ("formal", draw(st.sampled_from([*sorted(TAGS), "any", "number"])))
    return ("actual", draw(tagged()))


def build_field(f):
    kind, x = f
    if kind == "actual":
        return build(*x)
    return {"any": ANY, "number": NUMBER_FIELD}.get(x) or Formal(f"pspace:{x}")


def naive_field_match(f, v) -> bool:
    kind, x = f
    if kind == "actual":
        return naive_same(x, v)
    return x == "any" or x == v[0] or (x == "number" and v[0] in NUMERIC_TAGS)


@settings(max_examples=300)
@given(st.lists(template_field(), max_size=3), st.lists(tagged(), max_size=3))
def test_template_matching_agrees_with_the_naive_model(template, fields) -> None:
    expected = len(template) == len(fields) and all(
        naive_field_match(f, v) for f, v in zip(template, fields, strict=False)
    )
    t = tuple(build_field(f) for f in template)
    v = tuple(build(*x) for x in fields)
    assert matches(t, v) == expected


@given(st.lists(tagged(small=False), max_size=4))
def test_typed_values_survive_the_wire(fields) -> None:
    t = tuple(build(*x) for x in fields)
    nested = (*t, t)
    back = wire.decode_tuple(wire.encode_tuple(nested))
    assert matches(nested, back) and matches(back, nested)
    assert [type(x) for x in back] == [type(x) for x in nested]


def test_an_int_is_not_a_bool_a_long_or_a_double() -> None:
    s = SequentialSpace()
    s.put(1)
    assert s.queryp(True) is None
    assert s.queryp(Long(1)) is None
    assert s.queryp(1.0) is None
    assert s.queryp(Formal(bool)) is None
    assert s.queryp(1) == (1,)
    s.put(True)
    assert s.query_all(Formal(int)) == [(1,)]
    assert s.query_all(NUMBER_FIELD) == [(1,)]
    assert s.query_all(ANY) == [(1,), (True,)]


def test_bad_fields_and_types_are_refused_clearly() -> None:
    s = SequentialSpace()
    with pytest.raises(SpaceTypeError, match="cannot be a tuple field"):
        s.put([1, 2])
    with pytest.raises(SpaceTypeError, match="use Long"):
        s.put(2**40)
    with pytest.raises(SpaceTypeError, match="unknown type URI"):
        Formal("pspace:nope")
    with pytest.raises(SpaceTypeError, match="1-character"):
        Char("ab")
    assert Formal("java.lang.Integer") == Formal(int)
    assert Formal("java.util.LinkedList").admits(JavaObject.of("java.util.LinkedList", [1]))


# ---------------------------------------------------------------------------------------------
# The kinds against a naive model of their retrieval orders


class Model:
    """Each kind's rule read straight off the pSpaces reference, over (age, tuple) pairs."""

    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self.items: list[tuple[int, tuple]] = []
        self.clock = 0

    def put(self, t: tuple) -> None:
        self.items.append((self.clock, t))
        self.clock += 1

    def order(self) -> list[tuple[int, tuple]]:
        newest_first = self.kind in (Kind.STACK, Kind.PILE)
        return sorted(self.items, key=lambda it: -it[0] if newest_first else it[0])

    def candidates(self, template: tuple) -> list[tuple[int, tuple]]:
        order = self.order()
        if self.kind in (Kind.QUEUE, Kind.STACK):
            found = []
            for it in order:
                if not matches(template, it[1]):
                    break
                found.append(it)
            return found
        return [it for it in order if matches(template, it[1])]

    def one(self, template: tuple) -> list[tuple[int, tuple]]:
        """The items a single retrieval may return (any of them for a random space)."""
        c = self.candidates(template)
        return c if self.kind is Kind.RANDOM else c[:1]

    def take(self, item) -> None:
        self.items.remove(item)


SMALL_TUPLES = st.lists(
    st.one_of(st.sampled_from([1, 2]), st.sampled_from(["x", "y"]), st.just(Long(1))),
    min_size=1,
    max_size=2,
).map(tuple)
SMALL_TEMPLATES = st.lists(
    st.one_of(
        st.sampled_from([1, 2, "x", Long(1)]),
        st.sampled_from([ANY, Formal(int), Formal(str), NUMBER_FIELD]),
    ),
    min_size=1,
    max_size=2,
).map(tuple)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), SMALL_TUPLES),
        st.tuples(st.sampled_from(["getp", "queryp", "getAll", "queryAll"]), SMALL_TEMPLATES),
    ),
    max_size=30,
)


@settings(max_examples=200)
@given(st.sampled_from(list(Kind)), OPS, st.integers(0, 2**32))
def test_every_kind_retrieves_as_the_reference_model_says(kind, ops, seed) -> None:
    space, model = Space(kind, rng=random.Random(seed)), Model(kind)
    for op, arg in ops:
        if op == "put":
            space.put(*arg)
            model.put(arg)
        elif op in ("getp", "queryp"):
            got = getattr(space, op)(*arg)
            allowed = model.one(arg)
            if not allowed:
                assert got is None
                continue
            assert got in [t for _, t in allowed]
            if op == "getp":
                model.take(next(it for it in allowed if it[1] == got))
        else:
            got = getattr(space, op)(*arg)
            expected = model.candidates(arg)
            if kind is Kind.RANDOM:  # insertion order
                expected = sorted(expected)
            assert got == [t for _, t in expected]
            if op == "getAll":
                for it in expected:
                    model.take(it)
        assert [t for _, t in model.order()] == space.store.tuples or kind is Kind.RANDOM


@pytest.mark.parametrize(
    ("cls", "one", "query_all", "get_all"),
    [
        (SequentialSpace, 1, [1, 3], [1, "x", 3]),
        (QueueSpace, 1, [1], [1, "x", 3]),
        (StackSpace, 3, [3], [3, "x", 1]),
        (PileSpace, 3, [3, 1], [3, "x", 1]),
    ],
)
def test_the_reference_table_of_orders(cls, one, query_all, get_all) -> None:
    s = cls()
    for x in (1, "x", 3):
        s.put(x)
    assert s.queryp(Formal(int)) == (one,)
    assert s.queryAll(Formal(int)) == [(x,) for x in query_all]
    assert s.getAll(ANY) == [(x,) for x in get_all]
    assert len(s) == 0


def test_a_random_space_finds_every_match_eventually() -> None:
    s = RandomSpace(rng=random.Random(7))
    for x in range(5):
        s.put(x)
    seen = {s.queryp(Formal(int))[0] for _ in range(200)}
    assert seen == set(range(5))


# ---------------------------------------------------------------------------------------------
# Blocking operations


async def test_a_blocked_get_wakes_on_a_later_put() -> None:
    s = SequentialSpace()
    got = []

    async def getter():
        got.append(await s.get("job", Formal(int)))

    async with trio.open_nursery() as n:
        n.start_soon(getter)
        await trio.testing.wait_all_tasks_blocked()
        assert not got
        s.put("job", 7)
    assert got == [("job", 7)]
    assert len(s) == 0


async def test_a_put_serves_waiters_in_arrival_order_until_a_get_takes_it() -> None:
    s = SequentialSpace()
    got: list = []

    async def op(kind):
        got.append((kind, await getattr(s, kind)(ANY)))

    async with trio.open_nursery() as n:
        for kind in ("query", "get", "query", "get"):
            n.start_soon(op, kind)
            await trio.testing.wait_all_tasks_blocked()
        s.put(1)
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(got) == [("get", (1,)), ("query", (1,))]  # the 2nd query came after the get
        s.put(2)
    assert sorted(got[2:]) == [("get", (2,)), ("query", (2,))]
    assert len(s) == 0


async def test_a_queue_waiter_is_served_only_when_the_head_matches() -> None:
    s = QueueSpace()
    s.put("x")
    got = []

    async def getter():
        got.append(await s.get(Formal(int)))

    async with trio.open_nursery() as n:
        n.start_soon(getter)
        await trio.testing.wait_all_tasks_blocked()
        s.put(1)
        await trio.testing.wait_all_tasks_blocked()
        assert not got
        assert s.getp("x") == ("x",)
        s.put("y")  # any put makes waiters look again: the head is now 1
    assert got == [(1,)]


async def test_timeout_raises_and_leaves_no_waiter() -> None:
    s = SequentialSpace()
    with pytest.raises(SpaceTimeout):
        await s.get("never", timeout=0.05)
    with pytest.raises(TimeoutError):
        await s.query("never", timeout=0)
    assert s.store.waiters == []
    s.put("never")
    assert s.queryp("never") == ("never",)


async def test_cancelling_a_get_leaves_no_waiter_and_loses_no_tuple() -> None:
    s = SequentialSpace()
    with trio.move_on_after(0.01):
        await s.get(ANY)
    assert s.store.waiters == []
    s.put(1)
    assert s.getp(ANY) == (1,)


async def test_a_tuple_taken_in_the_instant_of_cancellation_is_put_back() -> None:
    s = SequentialSpace()
    async with trio.open_nursery() as n:
        scope = trio.CancelScope()

        async def getter():
            with scope:
                await s.get(ANY)

        n.start_soon(getter)
        await trio.testing.wait_all_tasks_blocked()
        scope.cancel()  # the getter is rescheduled with Cancelled ...
        s.put(5)  # ... and a put serves it before it runs
    assert s.getp(ANY) == (5,)


# ---------------------------------------------------------------------------------------------
# The synchronous form


def test_blocking_space_serves_threads_a_get_in_one_wakes_on_a_put_in_another() -> None:
    with BlockingSpace(QueueSpace()) as jobs:
        got = []
        worker = threading.Thread(target=lambda: got.append(jobs.get("job", Formal(int))))
        worker.start()
        jobs.put("job", 1)
        worker.join(10)
        assert got == [("job", 1)]
        with pytest.raises(SpaceTimeout):
            jobs.query("job", ANY, timeout=0.05)
        assert jobs.getAll(ANY, ANY) == []
    with pytest.raises(SpaceError, match="closed"):
        jobs.put(1)


async def test_blocking_space_over_a_remote_space() -> None:
    async with SpaceRepository() as repo:
        repo.add("seq", SequentialSpace())
        gate = await repo.add_gate("tcp://127.0.0.1:0/?keep")

        def client() -> list:
            with BlockingSpace(gate.space_uri("seq")) as seq:
                seq.put("a", Long(1))
                return [seq.queryp("a", Formal(Long)), seq.get("a", ANY, timeout=5), seq.getp(ANY)]

        with trio.fail_after(20):
            assert await trio.to_thread.run_sync(client) == [("a", Long(1)), ("a", Long(1)), None]


def test_closing_a_blocking_space_fails_a_blocked_get_clearly() -> None:
    space = BlockingSpace(SequentialSpace())
    outcome = []

    def getter() -> None:
        try:
            space.get(ANY)
        except SpaceError as exc:
            outcome.append(str(exc))

    worker = threading.Thread(target=getter)
    worker.start()
    for _ in range(1000):  # wait (up to 10 s) until the get is registered
        if space.space.store.waiters:
            break
        worker.join(0.01)
    space.close()
    worker.join(10)
    assert outcome == ["the blocking space is closed"]


@settings(max_examples=300)
@given(st.lists(tagged(small=False).filter(lambda f: f[0] != "byte"), max_size=4))
def test_the_command_line_field_syntax_round_trips(fields) -> None:
    t = tuple(build(*x) for x in fields)
    back = tuple(fieldtext.parse_field(fieldtext.format_field(v)) for v in t)  # one arg each
    assert matches(t, back) and matches(back, t)


def test_the_command_line_field_syntax() -> None:
    parse = fieldtext.parse_field
    assert [parse(s) for s in ["42", "7L", "3.5", "2.5f", "true", "'c'", '"7"', "job"]] == [
        42, Long(7), 3.5, Float(2.5), True, Char("c"), "7", "job"
    ]  # fmt: skip
    assert [parse(s) for s in ["?int", "?any", "?number", "?long"]] == [
        Formal(int), ANY, NUMBER_FIELD, Formal(Long)
    ]  # fmt: skip
    with pytest.raises(SpaceTypeError, match="unknown type URI"):
        parse("?nope")
