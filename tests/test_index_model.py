"""The backbone test of feds.index: random interleavings checked against a reference model.

The model is as naive as possible: a dict of held assertions (value -> [first copy, count]) and
a dict of registrations ((skeleton, callback) -> pattern). After every operation the expected
events of each callback are the differences between the sets of distinct captures vectors
(computed with ``patterns.match`` over the held assertions) before and after, plus ``"!"`` for
each registration matching a message. Events of one operation are compared as multisets.

Operations: add a handler (new callback or one already registered elsewhere; a late handler
must be told exactly the current set), remove a handler (or a pair never registered), assert
(also by ``adjust_assertion`` and with several copies), retract (also through an equal value
built from other objects, e.g. ``#t`` for ``1``), over-retract (must raise and change nothing),
send a message, apply a patch, and at the end withdraw everything and check that no structure
is left. Values and patterns come from a small universe (few labels, atoms that are equal
across types, patterns shaped after values in play, variants of registered patterns that share
their shape and const paths) so that patterns overlap and match a lot.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feds.index import Index
from feds.pattern_forms import TYPE_NAMES
from feds.patterns import Skeleton, compile_pattern, match
from feds.values import NAN, FrozenDict, Record, Symbol
from tests.builders import D, and_, bind, group, lit, rng

S = Symbol

# ---- the universe ----------------------------------------------------------------------------

ATOMS = [0, 1, 2, True, 1.5, -0.0, "a", "ab", "", S("a"), None, NAN, b"x"]
LABELS = [S("a"), S("b"), "s"]
KEYS = ["k", "j", 0]
TYPES = list(TYPE_NAMES)

atoms = st.sampled_from(ATOMS)
values = st.recursive(
    atoms,
    lambda kids: st.one_of(
        st.builds(
            lambda lab, fs: Record(lab, tuple(fs)),
            st.sampled_from(LABELS),
            st.lists(kids, max_size=3),
        ),
        st.lists(kids, max_size=2).map(tuple),
        st.dictionaries(st.sampled_from(KEYS), kids, max_size=2).map(FrozenDict),
    ),
    max_leaves=6,
)

bounds = st.sampled_from([None, -1, 0, 1, 1.5, 2])
constraints = st.one_of(
    st.sampled_from(TYPES).map(lambda t: Record(S("type"), (S(t),))),
    st.frozensets(atoms, max_size=3).map(lambda s: Record(S("one-of"), (s,))),
    st.builds(rng, bounds, bounds, st.booleans(), st.booleans()),
    st.sampled_from(["a", "^a$", "b", "^$", "a|b"]).map(lambda s: Record(S("regex"), (s,))),
)


@st.composite
def variant_of(draw: st.DrawFn, v: object) -> object:
    """``v`` with some atoms replaced: same structure, other constants."""
    if v.__class__ is Record:
        return Record(v.label, tuple(draw(variant_of(f)) for f in v.fields))  # type: ignore[attr-defined]
    if v.__class__ is tuple:
        return tuple(draw(variant_of(x)) for x in v)  # type: ignore[attr-defined]
    if v.__class__ is FrozenDict:
        return FrozenDict({k: draw(variant_of(x)) for k, x in v.items()})  # type: ignore[attr-defined]
    return draw(atoms) if draw(st.integers(0, 2)) == 0 else v


TWINS = {1: [True, 1.0], 0: [False, 0.0, -0.0], 1.5: [1.5], 2: [2.0]}


@st.composite
def twin_of(draw: st.DrawFn, v: object) -> object:
    """A value equal to ``v`` but built from other objects (``1`` may become ``#t``)."""
    if v.__class__ is Record:
        return Record(v.label, tuple(draw(twin_of(f)) for f in v.fields))  # type: ignore[attr-defined]
    if v.__class__ is tuple:
        return tuple([draw(twin_of(x)) for x in v])  # type: ignore[attr-defined]
    if v.__class__ is FrozenDict:
        return FrozenDict({k: draw(twin_of(x)) for k, x in v.items()})  # type: ignore[attr-defined]
    if v.__class__ in (int, bool, float) and v in TWINS:
        return draw(st.sampled_from([v, *TWINS[v]]))
    return v


@st.composite
def mutant_of(draw: st.DrawFn, p: Record, depth: int = 0) -> Record:
    """``p`` with one sub-pattern replaced: a pattern sharing most of its structure."""
    if p.label == S("group") and depth < 5 and draw(st.integers(0, 3)):
        kind, entries = p.fields
        if entries:
            k = draw(st.sampled_from(sorted(entries, key=repr)))
            new = dict(entries.items())
            new[k] = draw(mutant_of(entries[k], depth + 1))
            return group(kind, new)
    return draw(st.sampled_from([D, bind(), lit(draw(atoms)), draw(constraints)]))


@st.composite
def sibling_of(draw: st.DrawFn, p: Record) -> Record:
    """``p`` with other constants and captures: often the same shape and const paths, so the
    index puts it in the same const table (another leaf) or the same leaf (another handler)."""
    name = p.label.name  # type: ignore[attr-defined]
    if name == "lit":
        return lit(draw(st.sampled_from([p.fields[0], *ATOMS])))
    if name == "bind":
        inner = draw(sibling_of(p.fields[0]))
        return inner if draw(st.integers(0, 3)) == 0 else bind(inner)
    if name == "_":
        return bind() if draw(st.integers(0, 3)) == 0 else D
    if name == "group":
        kind, entries = p.fields
        return group(kind, {k: draw(sibling_of(q)) for k, q in entries.items()})
    if name == "and":
        return and_(*[draw(sibling_of(q)) for q in p.fields[0]])
    return p


def type_of(v: object) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    return {
        float: "float",
        str: "string",
        bytes: "bytes",
        Symbol: "symbol",
        Record: "record",
        tuple: "sequence",
        frozenset: "set",
        FrozenDict: "dict",
    }.get(v.__class__, "number")


@st.composite
def constraint_for(draw: st.DrawFn, v: object) -> Record:
    """A constraint, usually one that ``v`` passes."""
    if draw(st.integers(0, 3)) == 0:
        return draw(constraints)
    options = [
        Record(S("type"), (S(type_of(v)),)),
        Record(S("one-of"), (frozenset([v, *draw(st.lists(atoms, max_size=2))]),)),
    ]
    if type_of(v) in ("integer", "float") and v == v:
        options.append(rng(v - draw(st.sampled_from([0, 1])), None, draw(st.booleans()), False))
        options.append(rng(None, v, False, draw(st.booleans())))
    if isinstance(v, str):
        options.append(Record(S("regex"), (draw(st.sampled_from(["", "^", v[:1], f"{v}$"])),)))
    return draw(st.sampled_from(options))


@st.composite
def pattern_for(draw: st.DrawFn, v: object, depth: int = 0) -> Record:
    """A pattern shaped after ``v`` (so it usually matches): nested groups, constants,
    captures, discards, constraints, with occasional twists (another label, arity, key or
    constant) so that some patterns miss."""
    kinds = ["discard", "bind", "bind", "lit", "constraint", "and"]
    if v.__class__ in (Record, tuple, FrozenDict) and depth < 4:
        kinds += ["group"] * 8
    kind = draw(st.sampled_from(kinds))
    if kind == "discard":
        return D
    if kind == "bind":
        return bind(draw(pattern_for(v, depth + 1)))
    if kind == "lit":
        return lit(v if draw(st.integers(0, 4)) else draw(atoms))
    if kind == "constraint":
        return draw(constraint_for(v))
    if kind == "and":
        items = draw(st.lists(constraint_for(v), max_size=2))
        items.append(draw(pattern_for(v, depth + 1)))  # the only item that may be structural
        return and_(*draw(st.permutations(items)))
    twist = draw(st.integers(0, 7)) == 0
    if v.__class__ is FrozenDict:
        present = sorted(v, key=repr)  # type: ignore[call-overload]
        keys = draw(st.lists(st.sampled_from(present), unique=True)) if present else []
        entries = {k: draw(pattern_for(v[k], depth + 1)) for k in keys}  # type: ignore[index]
        if twist:
            entries[draw(st.sampled_from(KEYS))] = draw(st.sampled_from([D, bind()]))
        return group(Record(S("dict"), ()), entries)
    items = list(v.fields if v.__class__ is Record else v)  # type: ignore[attr-defined]
    subs = [draw(pattern_for(x, depth + 1)) for x in items]
    if twist:
        subs = subs[:-1] if subs and draw(st.booleans()) else [*subs, D]
    if v.__class__ is Record:
        label = draw(st.sampled_from(LABELS)) if twist else v.label  # type: ignore[attr-defined]
        return group(Record(S("rec"), (label,)), dict(enumerate(subs)))
    return group(Record(S("arr"), ()), dict(enumerate(subs)))


class Recorder:
    """A callback recording its events; compared by identity."""

    def __init__(self, name: int) -> None:
        self.name = name
        self.events: list[tuple[str, tuple]] = []

    def __call__(self, event: str, captures: tuple) -> None:
        assert event in ("+", "-", "!")
        assert captures.__class__ is tuple
        self.events.append((event, captures))

    def __repr__(self) -> str:
        return f"Recorder({self.name})"


# ---- the model and the driver ---------------------------------------------------------------


class Run:
    """One run: the index under test, the model, and the operations that drive both."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data
        self.index = Index()
        self.held: dict[object, list] = {}  # value -> [first copy, count]
        self.regs: dict[tuple[Skeleton, Recorder], Record] = {}
        self.recorders: list[Recorder] = []
        self.pool: list[object] = data.draw(st.lists(values, min_size=1, max_size=4), label="pool")
        self.trace: list[str] = []

    def draw(self, strategy: st.SearchStrategy, label: str) -> Any:
        return self.data.draw(strategy, label=label)

    # -- the model

    def present(self, p: Record) -> set[tuple]:
        out = set()
        for first, _ in self.held.values():
            caps = match(p, first)
            if caps is not None:
                out.add(caps)
        return out

    def snapshot(self) -> dict[tuple, set[tuple]]:
        return {key: self.present(p) for key, p in self.regs.items()}

    def expect_diff(self, before: dict, after: dict) -> dict[Recorder, Counter]:
        expected: dict[Recorder, Counter] = {rec: Counter() for rec in self.recorders}
        for key, now in after.items():
            was = before.get(key, set())
            counter = expected[key[1]]
            for caps in now - was:
                counter["+", caps] += 1
            for caps in was - now:
                counter["-", caps] += 1
        return expected

    def model_adjust(self, v: object, delta: int) -> None:
        entry = self.held.get(v)
        if entry is None:
            self.held[v] = [v, delta]
        else:
            entry[1] += delta
            if entry[1] == 0:
                del self.held[v]

    def held_count(self, v: object) -> int:
        entry = self.held.get(v)
        return 0 if entry is None else entry[1]

    def check(self, expected: dict[Recorder, Counter]) -> None:
        for rec in self.recorders:
            got = Counter(rec.events)
            rec.events.clear()
            want = +expected.get(rec, Counter())  # + drops zero counts
            assert got == want, (
                f"{rec}: got {sorted(got.items(), key=repr)}, want {sorted(want.items(), key=repr)}"
                f"\nafter: {self.trace[-1]}"
            )
        assert len(self.index) == len(self.held)
        assert self.index.handler_count() == len(self.regs)
        for v, (first, n) in self.held.items():
            assert self.index.count(v) == n
            assert first in self.index

    # -- operations

    def new_value(self) -> None:
        if self.draw(st.booleans(), "fresh"):
            v = self.draw(values, "value")
        else:
            v = self.draw(variant_of(self.draw(st.sampled_from(self.pool), "of")), "variant")
        self.pool.append(v)

    def add_handler(self) -> None:
        held = [first for first, _ in self.held.values()]
        if held and self.draw(st.booleans(), "shaped after a held value"):
            v = self.draw(st.sampled_from(held), "held value")
        else:
            v = self.draw(st.sampled_from(self.pool), "pool value")
        how = self.draw(st.integers(0, 5), "how") if self.regs else 0
        if how <= 2:
            p = self.draw(pattern_for(v), "pattern")
        else:
            of = self.draw(st.sampled_from(list(self.regs.values())), "of")
            p = self.draw(mutant_of(of) if how == 3 else sibling_of(of), "pattern")
        if self.recorders and self.draw(st.integers(0, 3), "reuse callback") == 0:
            rec = self.draw(st.sampled_from(self.recorders), "callback")
        else:
            rec = Recorder(len(self.recorders))
            self.recorders.append(rec)
        self.trace.append(f"add_handler({p!r}, {rec})")
        sk = compile_pattern(p)
        expected: dict[Recorder, Counter] = {}
        if (sk, rec) not in self.regs:
            self.regs[(sk, rec)] = p
            expected[rec] = Counter(("+", caps) for caps in self.present(p))
        self.index.add_handler(sk, rec)
        self.check(expected)

    def remove_handler(self) -> None:
        if not self.regs:
            return
        sk, rec = self.draw(st.sampled_from(list(self.regs)), "registration")
        if self.draw(st.integers(0, 4), "unregistered") == 0:
            self.trace.append(f"remove_handler({self.regs[(sk, rec)]!r}, unknown)")
            self.index.remove_handler(sk, Recorder(-1))  # never registered: ignored
        else:
            self.trace.append(f"remove_handler({self.regs[(sk, rec)]!r}, {rec})")
            del self.regs[(sk, rec)]
            self.index.remove_handler(sk, rec)
        self.check({})

    def assert_value(self) -> None:
        v = self.draw(st.sampled_from(self.pool), "value")
        if self.draw(st.integers(0, 3), "twin") == 0:
            v = self.draw(twin_of(v), "twin of value")
        copies = self.draw(st.integers(1, 2), "copies")
        adjust = self.draw(st.booleans(), "adjust")
        self.trace.append(f"assert({v!r}, {copies})")
        before = self.snapshot()
        self.model_adjust(v, copies)
        expected = self.expect_diff(before, self.snapshot())
        if adjust:
            self.index.adjust_assertion(v, copies)
        else:
            for _ in range(copies):
                self.index.add_assertion(v)
        self.check(expected)

    def retract_value(self) -> None:
        if not self.held:
            return
        v = self.draw(st.sampled_from([first for first, _ in self.held.values()]), "value")
        copies = self.draw(st.integers(1, self.held_count(v)), "copies")
        if self.draw(st.integers(0, 2), "twin") == 0:
            v = self.draw(twin_of(v), "twin of value")
        adjust = self.draw(st.booleans(), "adjust")
        self.trace.append(f"retract({v!r}, {copies})")
        before = self.snapshot()
        self.model_adjust(v, -copies)
        expected = self.expect_diff(before, self.snapshot())
        if adjust:
            self.index.adjust_assertion(v, -copies)
        else:
            for _ in range(copies):
                self.index.remove_assertion(v)
        self.check(expected)

    def over_retract(self) -> None:
        v = self.draw(st.sampled_from(self.pool), "value")
        held = self.held_count(v)
        self.trace.append(f"over_retract({v!r})")
        with pytest.raises(ValueError):
            self.index.adjust_assertion(v, -(held + 1))
        if held == 0:
            with pytest.raises(ValueError):
                self.index.remove_assertion(v)
        self.check({})

    def send_message(self) -> None:
        if self.held and self.draw(st.booleans(), "like a held value"):
            v = self.draw(st.sampled_from([first for first, _ in self.held.values()]), "message")
        else:
            v = self.draw(st.sampled_from(self.pool), "message")
        self.trace.append(f"send_message({v!r})")
        expected: dict[Recorder, Counter] = {rec: Counter() for rec in self.recorders}
        for (_, rec), p in self.regs.items():
            caps = match(p, v)
            if caps is not None:
                expected[rec]["!", caps] += 1
        self.index.send_message(v)
        self.check(expected)

    def patch(self) -> None:
        adds = self.draw(st.lists(st.sampled_from(self.pool), max_size=3), "adds")
        pool = [first for first, n in self.held.values() for _ in range(n)] + adds
        removes = self.draw(st.lists(st.sampled_from(pool), max_size=3), "removes") if pool else []
        counts = Counter(adds)
        if any(self.held_count(v) + counts[v] < n for v, n in Counter(removes).items()):
            removes = []  # the index would reject it; test_index covers that
        self.trace.append(f"patch({adds!r}, {removes!r})")
        expected: dict[Recorder, Counter] = {rec: Counter() for rec in self.recorders}
        for v, delta in [(v, 1) for v in adds] + [(v, -1) for v in removes]:
            before = self.snapshot()
            self.model_adjust(v, delta)
            for rec, counter in self.expect_diff(before, self.snapshot()).items():
                expected[rec] += counter
        self.index.apply_patch(adds, removes)
        self.check(expected)

    def teardown(self) -> None:
        """Withdraw everything: events stay exact on the way, and nothing is left behind."""
        self.trace.append("teardown")
        if self.draw(st.booleans(), "assertions first"):
            while self.held:
                self.retract_value()
        for sk, rec in list(self.regs):
            del self.regs[(sk, rec)]
            self.index.remove_handler(sk, rec)
        self.check({})
        for v in [first for first, _ in self.held.values()]:
            self.index.adjust_assertion(v, -self.held_count(v))
            del self.held[v]
        assert self.index.is_empty(), self.index.stats()
        assert self.index.stats() == {"nodes": 1, "tables": 0, "leaves": 0, "handlers": 0}


# Weighted by repetition: enough handlers and assertions in play for matches to be common.
OPS = [
    *["add_handler"] * 4,
    *["assert_value"] * 5,
    *["retract_value"] * 3,
    *["remove_handler"] * 2,
    *["new_value"] * 2,
    "send_message",
    "send_message",
    "patch",
    "over_retract",
]


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_index_agrees_with_the_model(data: st.DataObject) -> None:
    run = Run(data)
    for _ in range(data.draw(st.integers(10, 80), label="length")):
        getattr(run, data.draw(st.sampled_from(OPS), label="op"))()
    run.teardown()
