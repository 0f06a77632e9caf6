"""The backbone test of feds.index: random interleavings checked against a reference model.

The model is as naive as possible: a dict of held assertions (value -> [first copy, count]) and
a dict of registrations ((skeleton, callback) -> pattern). After every operation the expected
events of each callback are the differences between the sets of distinct captures vectors
(computed with ``patterns.match`` over the held assertions) before and after, plus ``"!"`` for
each registration matching a message. Events of one operation are compared as multisets.
Equality is type-exact (``1``, ``1.0`` and ``#t`` are different values): the model keys its
tables by the naive ``tagged`` form of values and captures.

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
from feds.patterns import Skeleton, compile_pattern, match
from feds.values import Record, Symbol, Value, exact_key
from tests.pattern_strategies import mutant_of, pattern_for, sibling_of, twin_of, values, variant_of
from tests.strategies import tagged

S = Symbol
NOTHING = object()


class Recorder:
    """A callback recording its events; compared by identity."""

    def __init__(self, name: int) -> None:
        self.name = name
        self.events: list[tuple[str, tuple]] = []

    def __call__(self, event: str, captures: tuple, key: Value) -> None:
        assert event in ("+", "-", "!")
        assert captures.__class__ is tuple
        if event == "!":
            assert key is None
        elif key is not None:  # the index's inline key is exact_key's: same class, equal
            expected = exact_key(captures)
            assert key.__class__ is expected.__class__ and key == expected, (key, expected)
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

    def present(self, p: Record) -> set[object]:
        """The tagged captures vectors of ``p`` over the held assertions."""
        out = set()
        for first, _ in self.held.values():
            caps = match(p, first)
            if caps is not None:
                out.add(tagged(caps))
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
        key = tagged(v)
        entry = self.held.get(key)
        if entry is None:
            self.held[key] = [v, delta]
        else:
            entry[1] += delta
            if entry[1] == 0:
                del self.held[key]

    def held_count(self, v: object) -> int:
        entry = self.held.get(tagged(v))
        return 0 if entry is None else entry[1]

    def check(self, expected: dict[Recorder, Counter]) -> None:
        for rec in self.recorders:
            got = Counter((event, tagged(caps)) for event, caps in rec.events)
            rec.events.clear()
            want = +expected.get(rec, Counter())  # + drops zero counts
            assert got == want, (
                f"{rec}: got {sorted(got.items(), key=repr)}, want {sorted(want.items(), key=repr)}"
                f"\nafter: {self.trace[-1]}"
            )
        assert len(self.index) == len(self.held)
        assert self.index.handler_count() == len(self.regs)
        for first, n in self.held.values():
            assert self.index.count(first) == n
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
            expected[rec] = Counter(("+", caps) for caps in self.present(p))  # tagged
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
        if self.draw(st.integers(0, 2), "twin") == 0:
            v = self.draw(twin_of(v), "twin of value")
        if self.held_count(v) == 0:  # equal in Python only: another value, which is not held
            self.over_retract(v)
            return
        copies = self.draw(st.integers(1, self.held_count(v)), "copies")
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

    def over_retract(self, v: object = NOTHING) -> None:
        if v is NOTHING:
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
                expected[rec]["!", tagged(caps)] += 1
        self.index.send_message(v)
        self.check(expected)

    def patch(self) -> None:
        adds = self.draw(st.lists(st.sampled_from(self.pool), max_size=3), "adds")
        pool = [first for first, n in self.held.values() for _ in range(n)] + adds
        removes = self.draw(st.lists(st.sampled_from(pool), max_size=3), "removes") if pool else []
        counts = Counter(map(tagged, adds))
        firsts = {tagged(v): v for v in removes}
        if any(
            self.held_count(firsts[k]) + counts[k] < n
            for k, n in Counter(map(tagged, removes)).items()
        ):
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
        for key, (first, n) in list(self.held.items()):
            self.index.adjust_assertion(first, -n)
            del self.held[key]
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
