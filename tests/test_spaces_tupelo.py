"""Tupelo's portable object templates and subspaces."""

from __future__ import annotations

from contextlib import AsyncExitStack

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from feds import client, patterns, topology
from feds.runtime import run_overlay
from feds.spaces.pot import Pot, PotError, to_feds_value
from feds.spaces.space import SpaceTimeout
from feds.spaces.tupelo import (
    META_TAG,
    TransactionSubspaceError,
    TupeloClient,
    TupeloSpace,
    as_assertion,
    from_feds_value,
    in_subspace,
    subscription_pattern,
    subspace_tuple,
)

# ---------------------------------------------------------------------------------------------
# The reference's semantics, case by case (object-template v0.8, as run in Ruby)


@pytest.mark.parametrize(
    ("template", "tuple_", "expected"),
    [
        ([{"value": 42}], [42.0], True),  # Ruby ==
        ([{"set": [42]}], [42.0], False),  # Ruby eql?
        ([{"set": [1, 2]}], [1.0], False),
        ([{"set": [None, 1]}], [None], True),
        ([{"value": None}], ["anything"], True),  # a nil matcher is skipped
        ([{"value": None, "type": "string"}], [1], False),
        ([None], [[1, 2]], True),
        ([{"value": [1, "a"]}], [[1.0, "a"]], True),
        ([{"value": True}], [1], False),
        ([{"type": "integer"}], [1.0], False),
        ([{"type": "integer"}], [True], False),
        ([{"type": "number"}], [True], False),
        ([{"type": "number"}], [1.5], True),
        ([{"type": "boolean"}], [0], False),
        ([{"type": "boolean"}], [None], False),
        ([{"type": "list"}], [[]], True),
        ([{"type": "map"}], [{}], True),
        ([{"range": [0, 2]}], [2], True),
        ([{"range": [0, 2, True]}], [2], False),  # the third element excludes the end
        ([{"range": [0, 2, True]}], [1.999], True),
        ([{"range": [0, None]}], [10**9], True),
        ([{"range": ["a", "m"]}], ["hello"], True),
        ([{"range": ["a", "m"]}], ["zoo"], False),
        ([{"range": [0, 10]}], ["5"], False),  # not comparable: no match, no error
        ([{"range": [0, 10]}], [True], False),
        ([{"range": [0, 10]}], [float("nan")], False),
        ([{"regex": "ell"}], ["hello"], True),  # a search, not anchored
        ([{"regex": "^ell"}], ["hello"], False),
        ([{"regex": "^b"}], ["a\nb"], True),  # Ruby's ^ is per line
        ([{"regex": "E"}], ["hello"], False),
        ([{"regex": "1"}], [1], False),
        ([{"type": "number", "range": [0, 100]}], [50], True),
        ([{"type": "integer", "range": [0, 100]}], [50.5], False),
        ([None, None], [1], False),  # same length only
        ([None], {"a": 1}, False),
        ({"a": None}, {"a": 1}, True),
        ({"a": None}, {"a": 1, "b": 2}, False),  # exactly the same keys
        ({"a": None, "b": None}, {"a": 1}, False),
        ({"a": None}, [1], False),
        ({"a": {"value": {"x": 1}}}, {"a": {"x": 1.0}}, True),
        ({"a": {"value": {"x": 1}}}, {"a": {"x": 1, "y": 2}}, False),
    ],
)
def test_pot_semantics_match_the_reference(template, tuple_, expected) -> None:
    assert Pot(template).matches(tuple_) is expected


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ([42], "expected None or a dict"),
        ([{"valu": 1}], "unrecognized match specifier"),
        ([{"type": "float"}], "unknown type 'float'"),
        ([{"range": [1, "a"]}], "bad value for range"),
        ([{"regex": "("}], "invalid regex"),
        ([{"regex": "(a)\\1"}], "invalid regex.*backreference"),
        ("x", "a list or a dict"),
    ],
)
def test_templates_tupelo_refuses_are_refused(template, message) -> None:
    with pytest.raises(PotError, match=message):
        Pot(template)


def test_a_backtracking_regex_template_runs_in_linear_time() -> None:
    # Templates come from clients: under re's backtracking this search would take hours.
    pot = Pot([{"regex": "(a+)+$"}, {"regex": "a*a*b"}])
    assert not pot.matches(["a" * 3000 + "!", "a" * 3000])
    assert pot.matches(["a\nb", "ab"])


# ---------------------------------------------------------------------------------------------
# POTs as feds overlay patterns: exact where :attr:`Pot.exact`, never narrower

SCALARS = st.sampled_from(  # few values, so that 1, 1.0 and True often meet
    [
        None,
        True,
        False,
        0,
        1,
        2,
        -1,
        0.0,
        1.0,
        2.5,
        float("nan"),
        "",
        "a",
        "ab",
        "b\nc",
        "a\nb",
        "c",
    ]
)
DATA = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=2), max_leaves=4)


@st.composite
def specs(draw, first: str):
    """A column spec with the specifier ``first`` and maybe one more."""
    keys = {first, draw(st.sampled_from(["value", "set", "type", "range", "regex", first]))}
    spec = {}
    for key in sorted(keys):
        if key == "value":
            spec[key] = draw(DATA)
        elif key == "set":
            one_class = st.sampled_from([[0, 1, 2], [0.0, 1.0], [True], ["a", None]])
            spec[key] = draw(st.one_of(st.lists(SCALARS, max_size=3), one_class))
        elif key == "type":
            spec[key] = draw(st.sampled_from(["boolean", "number", "integer", "string", "list"]))
        elif key == "range":
            lo, hi = sorted(draw(st.lists(st.sampled_from([-1, 0, 1, 2]), min_size=2, max_size=2)))
            ends = [lo, hi]
            if draw(st.booleans()):
                ends[draw(st.integers(0, 1))] = None
            if draw(st.booleans()):
                ends = sorted(
                    draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=2, max_size=2))
                )
            spec[key] = [*ends, True] if draw(st.booleans()) else ends
        else:
            spec[key] = draw(st.sampled_from(["a", "^b", "c$", "b", "."]))
    return spec


def near(spec) -> list:
    """Values a column's own arguments suggest, with their look-alikes (1, 1.0, True)."""
    found = ["a\nb", "b\nc"] if "regex" in (spec or {}) else []
    for arg in (spec or {}).values():
        for v in arg if isinstance(arg, list) else [arg]:
            found.append(v)
            if isinstance(v, int | float) and v == v:
                found += [int(v), float(v), bool(v)]
    return found


@pytest.mark.parametrize("first", ["value", "set", "type", "range", "regex"])
@settings(max_examples=150)
@given(data=st.data())
def test_a_pot_as_a_feds_pattern_matches_the_same_tuples(first, data) -> None:
    spec = data.draw(specs(first))
    x = data.draw(st.one_of(DATA, st.sampled_from(near(spec) or [None])))
    template, tuple_ = [spec, None], [x, "other"]
    pot = Pot(template)
    pattern = pot.to_pattern()
    patterns.validate(pattern)
    by_pattern = patterns.match(pattern, to_feds_value(tuple_)) is not None
    if pot.matches(tuple_):
        assert by_pattern
    elif pot.exact:
        assert not by_pattern


def test_map_templates_become_dict_patterns_that_need_a_residual_check() -> None:
    pot = Pot({"__tupelo__": {"value": "subspace"}, "tag": None})
    pattern = pot.to_pattern()
    assert not pot.exact
    assert patterns.match(pattern, to_feds_value({"__tupelo__": "subspace", "tag": "t"})) == ()


# ---------------------------------------------------------------------------------------------
# Subspaces


def wine_space() -> tuple[TupeloSpace, TupeloClient]:
    space = TupeloSpace()
    admin = space.client()
    admin.write(subspace_tuple("foo", [{"type": "number"}]))
    admin.write(subspace_tuple("wine", [{"value": "wine"}, {"set": ["red", "white"]}, None]))
    return space, admin


def test_the_seed_example_a_subscriber_sees_only_its_subspace() -> None:
    space, admin = wine_space()
    foo = space.client(subscribe=["foo"])
    admin.write([1], ["hello"])
    assert admin.read_all([None]) == [[1], ["hello"]]
    assert foo.read_all([None]) == [[1]]
    assert foo.received == [[1]]
    assert foo.take_nowait([None]) == [1]
    assert foo.take_nowait([{"value": "hello"}]) is None  # not in a subscribed subspace
    assert admin.read_all([None]) == [["hello"]]


def test_metadata_tuples_are_a_subspace_and_define_subspaces_dynamically() -> None:
    space, admin = wine_space()
    meta = space.client(subscribe=[META_TAG])
    assert [t["tag"] for t in meta.visible()] == ["foo", "wine"]
    admin.write(["wine", "red", 12.5], ["beer", "dark", 5])
    assert space.tags(["wine", "red", 12.5]) == {"wine"}
    admin.write(subspace_tuple("beer", [{"value": "beer"}, None, None]))
    assert space.tags(["beer", "dark", 5]) == {"beer"}
    assert [t["tag"] for t in meta.received] == ["beer"]
    with pytest.raises(PotError, match="unknown type"):
        admin.write(subspace_tuple("bad", [{"type": "float"}]))
    with pytest.raises(PotError, match="unrecognized"):
        admin.write({"__tupelo__": "subspace", "tag": "bad", "template": [{"x": 1}]})
    assert "bad" not in space.subspaces


def test_the_cross_subspace_transaction_rule() -> None:
    _, admin = wine_space()
    admin.write([1], [2], ["wine", "red", 1], ["loose", "tuple"])
    # reads and takes in one subspace, writes inside it: fine
    assert admin.transaction(takes=[[{"value": 1}]], reads=[[{"value": 2}]], writes=[[3]])
    # a write-only transaction may cross subspaces
    assert admin.transaction(writes=[[4], ["wine", "white", 2], ["no", "space"]]) == ([], [])
    with pytest.raises(TransactionSubspaceError, match="tuples crossing subspaces"):
        admin.transaction(takes=[[{"value": 2}], [{"value": "wine"}, None, None]])
    with pytest.raises(TransactionSubspaceError, match="tuples crossing subspaces"):
        admin.transaction(reads=[[{"value": 2}], [{"value": "loose"}, None]])
    with pytest.raises(TransactionSubspaceError, match="writes crossing subspaces"):
        admin.transaction(takes=[[{"value": 2}]], writes=[["wine", "red", 3]])
    assert sorted(map(str, admin.read_all([None]))) == ["[2]", "[3]", "[4]"]  # nothing happened
    # a tuple in no subspace has the empty tag set, which is inside every S_T
    assert admin.transaction(takes=[[{"value": 2}]], writes=[["in", "no", "subspace"]])


async def test_a_blocking_take_wakes_on_a_write_and_times_out_otherwise() -> None:
    space, admin = wine_space()
    foo = space.client(subscribe=["foo"])
    got = []

    async def taker():
        got.append(await foo.take([{"type": "integer"}]))

    async with trio.open_nursery() as n:
        n.start_soon(taker)
        await trio.testing.wait_all_tasks_blocked()
        admin.write(["hello"], [1.5])
        await trio.testing.wait_all_tasks_blocked()
        assert got == []
        admin.write([7])
    assert got == [[7]]
    with pytest.raises(SpaceTimeout):
        await foo.read([{"value": "hello"}], timeout=0.05)  # exists, but not in "foo"


async def test_a_node_subscribed_to_a_subspace_over_the_overlay_receives_only_its_tuples() -> None:
    overlay_topology = topology.load("topology/binary7.toml")
    space, _ = wine_space()
    wine, foo = space.subspaces["wine"], space.subspaces["foo"]
    meta = Pot({"tag": None, "kind": {"value": "doc"}})  # a map POT: needs the residual check
    tuples = [
        ["wine", "red", 12],
        ["wine", "rose", 12],
        [3],
        [3.5],
        [True],
        ["beer", "dark", 5],
        {"tag": "x", "kind": "doc"},
        {"tag": "y", "kind": "doc", "extra": 1},
    ]
    async with trio.open_nursery() as nursery:
        overlay = await nursery.start(
            lambda task_status: run_overlay(
                overlay_topology, any_port=True, task_status=task_status
            )
        )
        leaves = [n for n in overlay_topology.order() if not overlay_topology.children(n)]
        async with (
            client.connect(overlay.address(leaves[0])) as subscriber,
            client.connect(overlay.address(leaves[-1])) as publisher,
        ):
            received = {}
            async with AsyncExitStack() as stack:
                for tag, pot in (("wine", wine), ("foo", foo), ("meta", meta)):
                    obs = await stack.enter_async_context(
                        subscriber.observe(subscription_pattern(pot))
                    )
                    received[tag] = (pot, obs)
                await subscriber.sync()
                for t in tuples:
                    publisher.assert_(as_assertion(t))
                await publisher.sync()
                await subscriber.sync()
                for tag, (pot, obs) in received.items():
                    got = [from_feds_value(c[0]) for c in obs.current if in_subspace(pot, c[0])]
                    expected = [t for t in tuples if pot.matches(t)]
                    assert sorted(map(repr, got)) == sorted(map(repr, expected)), tag
                    assert expected, tag
        nursery.cancel_scope.cancel()


def test_a_nan_in_a_set_matches_nothing_as_a_pot_and_as_a_pattern() -> None:
    nan = float("nan")
    pot = Pot([{"set": [nan], "type": "number"}, None])
    assert not pot.matches([nan, "other"])
    assert patterns.match(pot.to_pattern(), to_feds_value([nan, "other"])) is None


def test_a_set_of_values_python_takes_for_equal_becomes_a_wider_pattern() -> None:
    pot = Pot([{"set": [1, True]}, None])
    assert not pot.exact
    for x in (1, True):
        assert pot.matches([x, "other"])
        assert patterns.match(pot.to_pattern(), to_feds_value([x, "other"])) is not None
