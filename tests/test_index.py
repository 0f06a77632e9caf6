"""Scenario tests of feds.index: the paper's examples and the corner cases of the index."""

from __future__ import annotations

import pytest

from feds.index import Index
from feds.patterns import Skeleton, compile_pattern
from feds.values import FrozenDict, Record, Symbol, Value
from tests.builders import D, and_, arr, bind, dct, lit, r, rec, rng, rx, typ

S = Symbol


class Log:
    """A callback that records its events."""

    def __init__(self) -> None:
        self.events: list[tuple[str, tuple]] = []

    def __call__(self, event: str, captures: tuple, key: Value) -> None:
        self.events.append((event, captures))

    def take(self) -> list[tuple[str, tuple]]:
        out, self.events = self.events, []
        return out


def observe(index: Index, pattern: Record) -> Log:
    log = Log()
    index.add_handler(compile_pattern(pattern), log)
    return log


# ---- the paper's examples --------------------------------------------------------------------


def test_glitch_free_patch_adds_before_removes() -> None:
    ix = Index()
    wild = observe(ix, arr(D))
    each = observe(ix, arr(bind()))
    ix.add_assertion((3,))
    assert wild.take() == [("+", ())]
    assert each.take() == [("+", (3,))]
    ix.apply_patch(adds=[(4,)], removes=[(3,)])
    assert wild.take() == []  # () stayed present throughout: no "-" then "+"
    assert each.take() == [("+", (4,)), ("-", (3,))]
    # the same change with the removal first glitches, which is why the order matters
    ix.remove_assertion((4,))
    ix.add_assertion((5,))
    assert wild.take() == [("-", ()), ("+", ())]


def test_late_observer_is_told_each_distinct_captures_vector() -> None:
    ix = Index()
    for v in [r("present", "alice"), r("present", "bob"), r("present", "alice"), r("absent", "x")]:
        ix.add_assertion(v)
    log = observe(ix, rec("present", bind()))
    assert sorted(log.take()) == [("+", ("alice",)), ("+", ("bob",))]
    anyone = observe(ix, rec("present", D))
    assert anyone.take() == [("+", ())]


def test_duplicates_fire_on_first_and_last_copy_only() -> None:
    ix = Index()
    log = observe(ix, rec("speak", lit("alice"), bind()))
    v = r("speak", "alice", "hi")
    ix.add_assertion(v)
    ix.add_assertion(r("speak", "alice", "hi"))  # an equal, distinct object
    assert log.take() == [("+", ("hi",))]
    assert ix.count(v) == 2 and len(ix) == 1
    ix.remove_assertion(v)
    assert log.take() == []
    ix.remove_assertion(v)
    assert log.take() == [("-", ("hi",))]
    assert ix.count(v) == 0 and len(ix) == 0


def test_same_captures_from_two_assertions() -> None:
    ix = Index()
    log = observe(ix, rec("temp", bind(), D))
    ix.add_assertion(r("temp", "k", 1))
    ix.add_assertion(r("temp", "k", 2))
    assert log.take() == [("+", ("k",))]
    ix.remove_assertion(r("temp", "k", 1))
    assert log.take() == []
    ix.remove_assertion(r("temp", "k", 2))
    assert log.take() == [("-", ("k",))]


def test_observe_of_observe() -> None:
    ix = Index()
    inner = rec("temp", lit("room-1"), bind())
    any_interest = observe(ix, rec("Observe", bind(), D))
    temp_interest = observe(ix, rec("Observe", rec("group", bind(), D), bind()))
    ix.add_assertion(r("Observe", inner, "ref-1"))
    ix.add_assertion(r("Observe", bind(), "ref-2"))
    assert sorted(any_interest.take(), key=repr) == sorted(
        [("+", (inner,)), ("+", (bind(),))], key=repr
    )
    assert temp_interest.take() == [("+", (Record(S("rec"), (S("temp"),)), "ref-1"))]
    # the inner pattern is just a value here: it matches nothing by being asserted
    ix.add_assertion(r("temp", "room-1", 20))
    assert any_interest.take() == [] and temp_interest.take() == []


def test_withdrawn_observer_hears_nothing_and_leaves_nothing() -> None:
    ix = Index()
    p = compile_pattern(rec("a", dct({"k": bind(arr(bind(), D))})))
    log = Log()
    ix.add_handler(p, log)
    v = r("a", FrozenDict({"k": (1, 2), "z": 0}))
    ix.add_assertion(v)
    assert log.take() == [("+", ((1, 2), 1))]
    ix.remove_handler(p, log)
    assert ix.handler_count() == 0
    assert ix.stats() == {"nodes": 1, "tables": 0, "leaves": 0, "handlers": 0}
    ix.remove_assertion(v)
    ix.add_assertion(v)
    assert log.take() == []
    assert not ix.is_empty()
    ix.remove_assertion(v)
    assert ix.is_empty()


def test_messages_are_delivered_and_not_retained() -> None:
    ix = Index()
    a = observe(ix, rec("say", bind()))
    b = observe(ix, rec("say", lit("hi")))
    c = observe(ix, rec("say", lit("bye")))
    ix.send_message(r("say", "hi"))
    assert a.take() == [("!", ("hi",))]
    assert b.take() == [("!", ())]
    assert c.take() == []
    assert len(ix) == 0 and ix.count(r("say", "hi")) == 0
    late = observe(ix, rec("say", bind()))
    assert late.take() == []


def test_one_callback_under_two_skeletons_is_called_for_each() -> None:
    ix = Index()
    log = Log()
    ix.add_handler(compile_pattern(rec("t", bind())), log)
    ix.add_handler(compile_pattern(rec("t", D)), log)
    ix.add_handler(compile_pattern(rec("t", D)), log)  # the same pair again: nothing happens
    assert ix.handler_count() == 2
    ix.add_assertion(r("t", 1))
    assert sorted(log.take()) == [("+", ()), ("+", (1,))]
    ix.send_message(r("t", 2))
    assert sorted(log.take()) == [("!", ()), ("!", (2,))]
    ix.remove_handler(compile_pattern(rec("t", D)), log)
    ix.remove_assertion(r("t", 1))
    assert log.take() == [("-", (1,))]


def test_range_constraint_never_sees_out_of_range_values() -> None:
    ix = Index()
    log = observe(ix, rec("temp", bind(), bind(and_(typ("number"), rng(0, 100, True, False)))))
    values = [r("temp", "a", 20), r("temp", "b", 100), r("temp", "c", -1), r("temp", "d", True)]
    values.append(r("temp", "e", "hot"))
    for v in values:
        ix.add_assertion(v)
    assert log.take() == [("+", ("a", 20))]
    for v in values:
        ix.remove_assertion(v)
    assert log.take() == [("-", ("a", 20))]


def test_constant_and_regex() -> None:
    ix = Index()
    log = observe(ix, rec("speak", lit("alice"), bind(rx("^h(i|ello)"))))
    for text in ["hi", "hello there", "oh hi", "bye"]:
        ix.add_assertion(r("speak", "alice", text))
    ix.add_assertion(r("speak", "bob", "hi"))
    ix.add_assertion(r("speak", "alice", S("hi")))
    assert sorted(log.take()) == [("+", ("hello there",)), ("+", ("hi",))]
    ix.remove_assertion(r("speak", "alice", "hi"))
    ix.remove_assertion(r("speak", "bob", "hi"))
    assert log.take() == [("-", ("hi",))]


def test_true_and_one_are_different_assertions() -> None:
    # equality is type-exact: <x true> and <x 1> are two assertions, each seen by its check
    ix = Index()
    ints = observe(ix, rec("x", bind(typ("integer"))))
    bools = observe(ix, rec("x", bind(typ("boolean"))))
    ix.add_assertion(r("x", True))
    ix.add_assertion(r("x", 1))
    assert ints.take() == [("+", (1,))] and bools.take() == [("+", (True,))]
    assert ix.count(r("x", True)) == ix.count(r("x", 1)) == 1 and len(ix) == 2
    ix.remove_assertion(r("x", True))
    assert ints.take() == [] and bools.take() == [("-", (True,))]
    with pytest.raises(ValueError):
        ix.remove_assertion(r("x", 1.0))  # not held: 1.0 is a third value
    ix.remove_assertion(r("x", 1))
    assert ints.take() == [("-", (1,))] and bools.take() == []
    assert ix.is_empty() is False  # handlers are still there


def test_adjust_assertion_counts() -> None:
    ix = Index()
    log = observe(ix, rec("a", bind()))
    v = r("a", 1)
    ix.adjust_assertion(v, 3)
    assert log.take() == [("+", (1,))] and ix.count(v) == 3
    ix.adjust_assertion(v, -2)
    assert log.take() == [] and ix.count(v) == 1
    with pytest.raises(ValueError):
        ix.adjust_assertion(v, -2)
    assert ix.count(v) == 1 and log.take() == []
    ix.adjust_assertion(v, 0)
    ix.add_assertion(v)
    ix.adjust_assertion(v, -2)
    assert log.take() == [("-", (1,))] and ix.count(v) == 0
    with pytest.raises(ValueError):
        ix.remove_assertion(v)
    with pytest.raises(ValueError):
        ix.adjust_assertion(v, -1)
    with pytest.raises(TypeError):
        ix.adjust_assertion(v, 1.0)  # type: ignore[arg-type]
    assert len(ix) == 0 and log.take() == []


def test_bad_patch_changes_nothing() -> None:
    ix = Index()
    log = observe(ix, arr(bind()))
    ix.add_assertion((1,))
    log.take()
    with pytest.raises(ValueError):
        ix.apply_patch(adds=[(2,)], removes=[(1,), (1,)])
    assert log.take() == [] and len(ix) == 1
    ix.apply_patch(adds=[(2,)], removes=[(2,), (1,)])  # a patch may retract its own additions
    assert log.take() == [("+", (2,)), ("-", (2,)), ("-", (1,))]
    assert list(ix.assertions()) == []


def test_root_level_patterns() -> None:
    ix = Index()
    everything = observe(ix, bind())
    fives = observe(ix, lit(5))
    numbers = observe(ix, bind(typ("number")))
    for v in [5, "x", r("a"), 5.0, True, 5.0]:
        ix.add_assertion(v)
    assert sorted(everything.take(), key=repr) == sorted(
        [("+", (5,)), ("+", ("x",)), ("+", (r("a"),)), ("+", (5.0,)), ("+", (True,))], key=repr
    )
    assert fives.take() == [("+", ())]
    assert numbers.take() == [("+", (5,)), ("+", (5.0,))]
    assert ix.count(5.0) == 2 and ix.count(5) == 1 and ix.count(True) == 1 and ix.count(1) == 0


def test_dict_pattern_needs_keys_present() -> None:
    ix = Index()
    log = observe(ix, dct({"a": D, "b": bind(), "c": lit(1)}))
    ix.add_assertion(FrozenDict({"a": 0, "b": 2, "c": 1, "d": 9}))
    ix.add_assertion(FrozenDict({"b": 3, "c": 1}))
    ix.add_assertion(FrozenDict({"a": 0, "b": 4}))
    ix.add_assertion(FrozenDict({"a": 0, "b": 5, "c": 2}))
    assert log.take() == [("+", (2,))]


def test_pruning_keeps_shared_structure_working() -> None:
    ix = Index()
    outer = compile_pattern(rec("a", bind(), D))
    deep = compile_pattern(rec("a", rec("b", bind()), bind()))
    lo, ld = Log(), Log()
    ix.add_handler(outer, lo)
    ix.add_handler(deep, ld)
    ix.add_assertion(r("a", r("b", 1), 2))
    ix.add_assertion(r("a", 3, 4))
    assert sorted(lo.take(), key=repr) == [("+", (3,)), ("+", (r("b", 1),))]
    assert ld.take() == [("+", (1, 2))]
    ix.remove_handler(outer, lo)  # the node of <a _ _> keeps its edge towards <b _>
    ix.add_assertion(r("a", r("b", 5), 6))
    ix.remove_assertion(r("a", r("b", 1), 2))
    assert ld.take() == [("+", (5, 6)), ("-", (1, 2))]
    ix.add_handler(outer, lo)  # its cache was rebuilt: it sees what is there
    assert sorted(lo.take(), key=repr) == [("+", (3,)), ("+", (r("b", 5),))]
    ix.remove_handler(deep, ld)
    ix.remove_handler(outer, lo)
    ix.remove_handler(outer, lo)  # unknown pairs are ignored
    ix.remove_handler(compile_pattern(rec("zz")), lo)
    assert ix.stats()["nodes"] == 1
    for v in list(ix.assertions()):
        ix.remove_assertion(v)
    assert ix.is_empty()


def test_handler_with_several_capture_maps_in_one_leaf() -> None:
    ix = Index()
    a = observe(ix, rec("t", lit(1), bind(), D))
    b = observe(ix, rec("t", lit(1), D, bind()))
    c = observe(ix, rec("t", lit(1), bind(typ("string")), D))
    ix.add_assertion(r("t", 1, "x", 2))
    ix.add_assertion(r("t", 1, 7, 2))
    assert a.take() == [("+", ("x",)), ("+", (7,))]
    assert b.take() == [("+", (2,))]
    assert c.take() == [("+", ("x",))]
    ix.send_message(r("t", 1, 8, 9))
    assert (a.take(), b.take(), c.take()) == ([("!", (8,))], [("!", (9,))], [])
    for p, log in [(rec("t", lit(1), bind(), D), a), (rec("t", lit(1), D, bind()), b)]:
        ix.remove_handler(compile_pattern(p), log)
    ix.remove_assertion(r("t", 1, "x", 2))
    assert c.take() == [("-", ("x",))]
    assert (a.take(), b.take()) == ([], [])


def test_many_record_types_at_one_position() -> None:
    ix = Index()
    logs = {name: observe(ix, rec(name, bind())) for name in ["a", "b", "c"]}
    arrays = observe(ix, arr(bind()))
    dicts = observe(ix, dct({"k": bind()}))
    labels = observe(ix, Record(S("group"), (Record(S("rec"), ("str-label",)), FrozenDict())))
    for v in [r("a", 1), r("b", 2), r("c", 3), r("a", 1, 2), (4,), FrozenDict({"k": 5})]:
        ix.add_assertion(v)
    ix.add_assertion(Record("str-label", ()))
    assert [logs[n].take() for n in "abc"] == [[("+", (1,))], [("+", (2,))], [("+", (3,))]]
    assert arrays.take() == [("+", (4,))]
    assert dicts.take() == [("+", (5,))]
    assert labels.take() == [("+", ())]


def test_leaf_left_without_handlers_keeps_its_cache() -> None:
    ix = Index()
    one = compile_pattern(rec("a", lit(1), bind()))
    two = compile_pattern(rec("a", lit(2), bind()))
    l1, l2 = Log(), Log()
    ix.add_handler(one, l1)
    ix.add_handler(two, l2)  # the same const table, another leaf
    for v in [r("a", 1, "x"), r("a", 1, "y"), r("a", 2, "z")]:
        ix.add_assertion(v)
    ix.remove_handler(one, l1)  # leaf 1 keeps two values and no handler; the table stays
    ix.remove_assertion(r("a", 1, "x"))
    again = Log()
    ix.add_handler(one, again)
    assert again.take() == [("+", ("y",))]
    ix.remove_assertion(r("a", 1, "y"))
    assert again.take() == [("-", ("y",))]
    assert l2.take() == [("+", ("z",))]


def test_malformed_skeletons_are_refused_before_anything_changes() -> None:
    ix = Index()
    good = compile_pattern(rec("a", bind(), D))
    bad = [
        Skeleton(good.shape, good.const_paths, good.const_values, ((2,),), ()),  # no field 2
        Skeleton(good.shape, ((0, 0),), (1,), (), ()),  # field 0 has no known shape
        Skeleton((((), ("rec", S("a"))),), (), (), (), ()),  # a class without an arity
        Skeleton((((0,), ("arr", 1)),), (), (), (), ()),  # a position inside nothing
        Skeleton(good.shape, ((0,),), (), (), ()),  # paths and values differ in length
        Skeleton(good.shape, (), (), (), (((0,), "not a check"),)),
    ]
    for sk in bad:
        with pytest.raises(ValueError):
            ix.add_handler(sk, Log())
    assert ix.is_empty()

    ix.add_handler(good, Log())
    for sk in [
        Skeleton(good.shape, good.const_paths, (1,), good.capture_paths, good.checks),
        Skeleton(good.shape, good.const_paths, (), good.capture_paths, (((0,), "no check"),)),
    ]:  # refused even where the shape and const table already exist
        with pytest.raises(ValueError):
            ix.add_handler(sk, Log())
    assert ix.handler_count() == 1 and ix.stats()["handlers"] == 1


def test_handlers_with_new_constants_in_an_existing_table() -> None:
    ix = Index()
    for v in (r("a", 1, "x"), r("a", 2, "y"), r("a", 2, "z")):
        ix.add_assertion(v)
    one = observe(ix, rec("a", lit(1), bind()))
    two = observe(ix, rec("a", lit(2), bind()))
    three = observe(ix, rec("a", lit(3), bind()))
    assert one.take() == [("+", ("x",))]
    assert sorted(two.take()) == [("+", ("y",)), ("+", ("z",))]
    assert three.take() == []
    ix.add_assertion(r("a", 3, "w"))
    ix.remove_assertion(r("a", 2, "y"))
    assert three.take() == [("+", ("w",))] and two.take() == [("-", ("y",))] and one.take() == []
    ix.remove_handler(compile_pattern(rec("a", lit(2), bind())), two)
    ix.remove_assertion(r("a", 2, "z"))
    ix.add_assertion(r("a", 1, "v"))
    assert two.take() == [] and one.take() == [("+", ("v",))]
    ix.remove_handler(compile_pattern(rec("a", lit(1), bind())), one)
    ix.remove_handler(compile_pattern(rec("a", lit(3), bind())), three)
    for v in (r("a", 1, "x"), r("a", 1, "v"), r("a", 3, "w")):
        ix.remove_assertion(v)
    assert ix.is_empty()


def test_handlerless_leaves_in_a_live_table_track_every_value() -> None:
    ix = Index()
    keep = observe(ix, rec("a", lit(0), bind()))  # keeps the const table alive
    for x in ["p", "q", "r"]:  # leaf 1: a single value, then a dict of values
        ix.add_assertion(r("a", 1, x))
    ix.remove_assertion(r("a", 1, "q"))
    late = observe(ix, rec("a", lit(1), bind()))
    assert sorted(late.take()) == [("+", ("p",)), ("+", ("r",))]
    ix.remove_handler(compile_pattern(rec("a", lit(1), bind())), late)  # back to a plain cache
    ix.add_assertion(r("a", 1, "s"))
    ix.remove_assertion(r("a", 1, "p"))
    again = observe(ix, rec("a", lit(1), bind()))
    assert sorted(again.take()) == [("+", ("r",)), ("+", ("s",))]
    for x in ["r", "s"]:
        ix.remove_assertion(r("a", 1, x))
    assert sorted(again.take()) == [("-", ("r",)), ("-", ("s",))]
    assert keep.take() == []


# ---- complete handlers (captures determine the value: no stored bag) ----------------------


@pytest.mark.parametrize(
    ("pattern", "complete"),
    [
        (rec("temp", lit("k"), bind()), True),
        (rec("temp", bind(), bind()), True),
        (bind(), True),
        (rec("temp", bind(), rec("at", lit(1), bind())), True),
        (arr(lit(1), arr(bind())), True),
        (rec("temp", bind(typ("integer")), lit(2)), True),
        (rec("temp", bind(), D), False),  # a discard: unseen positions
        (rec("temp", lit("k"), rec("at", D)), False),
        (dct({"a": bind()}), False),  # a dict has at least its keys, maybe more
        (rec("temp", bind(), dct({})), False),
        (arr(D), False),
    ],
)
def test_complete_skeletons(pattern: Record, complete: bool) -> None:
    from feds.index import _complete

    assert _complete(compile_pattern(pattern)) is complete


def test_complete_handler_reports_each_value_and_its_removal() -> None:
    ix = Index()
    log = observe(ix, rec("temp", bind(), rec("at", lit(1), bind())))
    ix.add_assertion(r("temp", "k", r("at", 1, 1)))
    ix.add_assertion(r("temp", "k", r("at", 1, 2)))
    ix.add_assertion(r("temp", "k", r("at", 2, 2)))  # the const differs: no match
    assert log.take() == [("+", ("k", 1)), ("+", ("k", 2))]
    with pytest.raises(ValueError):  # <at true 1.0> is another value: not held
        ix.remove_assertion(r("temp", "k", r("at", True, 1.0)))
    # a retraction through an equal value made of other objects reports the first copy's
    ix.remove_assertion(r("temp", "k", r("at", 1, 1)))
    assert log.take() == [("-", ("k", 1))]
    late = observe(ix, rec("temp", bind(), rec("at", lit(1), bind())))
    assert late.take() == [("+", ("k", 2))]
    ix.remove_assertion(r("temp", "k", r("at", 1, 2)))
    assert log.take() == [("-", ("k", 2))]
    assert late.take() == [("-", ("k", 2))]


def test_complete_handler_with_checks_and_copies() -> None:
    ix = Index()
    ix.add_assertion(r("temp", 1, 2))
    ix.add_assertion(r("temp", "x", 2))
    ix.add_assertion(r("temp", 3, 2))
    ix.add_assertion(r("temp", 3, 2))  # a second copy
    log = observe(ix, rec("temp", bind(typ("integer")), lit(2)))
    assert sorted(log.take()) == [("+", (1,)), ("+", (3,))]
    ix.remove_assertion(r("temp", 3, 2))
    assert log.take() == []
    ix.remove_assertion(r("temp", "x", 2))
    assert log.take() == []
    ix.remove_assertion(r("temp", 3, 2))
    assert log.take() == [("-", (3,))]
    other = observe(ix, rec("temp", bind(), lit(2)))  # same table, another key
    assert other.take() == [("+", (1,))]
    ix.add_assertion(r("temp", "y", 2))
    assert log.take() == []
    assert other.take() == [("+", ("y",))]


def test_leaf_with_handlers_caches_several_values_in_any_order() -> None:
    """A Leaf keeps one value in a slot and the rest in its dict; each may empty first."""
    ix = Index()
    first = observe(ix, rec("temp", lit("k"), D))
    for i in range(3):
        ix.add_assertion(r("temp", "k", i))
    assert first.take() == [("+", ())]
    ix.remove_assertion(r("temp", "k", 0))  # the value in the slot
    ix.add_assertion(r("temp", "k", 3))  # refills the slot
    ix.remove_assertion(r("temp", "k", 2))
    late = observe(ix, rec("temp", lit("k"), bind()))
    assert sorted(late.take()) == [("+", (1,)), ("+", (3,))]
    ix.remove_handler(compile_pattern(rec("temp", lit("k"), D)), first)
    ix.remove_handler(compile_pattern(rec("temp", lit("k"), bind())), late)
    again = observe(ix, rec("temp", lit("k"), bind()))  # rebuilt from the handler-less leaf
    assert sorted(again.take()) == [("+", (1,)), ("+", (3,))]
    for i in (1, 3):
        ix.remove_assertion(r("temp", "k", i))
    assert again.take() == [("-", (1,)), ("-", (3,))]
    ix.remove_handler(compile_pattern(rec("temp", lit("k"), bind())), again)
    assert ix.is_empty()


def test_complete_handler_with_one_then_two_then_one_callback() -> None:
    """The walker calls a lone callback straight from the leaf; others through the Handler."""
    ix = Index()
    pattern = rec("temp", lit("k"), bind(typ("integer")))
    a = observe(ix, pattern)
    ix.add_assertion(r("temp", "k", 1))
    b = observe(ix, pattern)
    assert a.take() == [("+", (1,))]
    assert b.take() == [("+", (1,))]
    ix.add_assertion(r("temp", "k", 2))
    ix.add_assertion(r("temp", "k", "not an integer"))
    assert a.take() == b.take() == [("+", (2,))]
    ix.remove_handler(compile_pattern(pattern), a)
    ix.remove_assertion(r("temp", "k", 1))
    assert a.take() == []
    assert b.take() == [("-", (1,))]
    ix.remove_handler(compile_pattern(pattern), b)
    ix.remove_assertion(r("temp", "k", 2))
    assert b.take() == []
