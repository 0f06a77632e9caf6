"""A dataspace shows a :class:`~feds.dataspace.MatchTaker` of its own actor its matches by the
captures' key, at once and in the taker's facet, as it would show them to an inline observer as
assertions (``tests/test_inline_steps.py``), without the handle."""

from __future__ import annotations

import pytest

from feds.actor import Facet, Handle, Ref, Scheduler, Turn, TurnAction
from feds.dataspace import Dataspace, MatchTaker, observe
from feds.pattern_forms import bind, rec_group
from feds.reactive import pattern_value
from feds.values import Symbol, Value, exact_key, record

A = Symbol("a")
B = Symbol("b")


class _Taker(MatchTaker):
    """Notes every call, with the facet the turn was in."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def matched(self, turn: Turn, captures: tuple, key: Value) -> None:
        self.calls.append(("matched", captures, key, turn.facet))

    def unmatched(self, turn: Turn, key: Value) -> None:
        self.calls.append(("unmatched", key, turn.facet))

    def unmatch_all(self, turn: Turn) -> None:
        self.calls.append(("unmatch_all", turn.facet))

    def on_message(self, turn: Turn, value: Value) -> None:
        self.calls.append(("!", value, turn.facet))


class _World:
    """One actor holding a dataspace (in its root facet) and a taker (in a child facet)."""

    def __init__(self, taker_elsewhere: bool = False) -> None:
        self.sched = Scheduler()
        self.taker = _Taker()
        self.refs: dict[str, Ref] = {}
        self.facets: dict[str, Facet] = {}

        def boot(t: Turn) -> None:
            self.refs["ds"] = t.ref(Dataspace())
            if taker_elsewhere:
                other = self.sched.spawn(lambda _t: None, name="other")
                self.refs["taker"] = Ref(other.root, self.taker)
            else:
                self.facets["taker"] = t.new_facet(
                    lambda t2: self.refs.__setitem__("taker", t2.ref(self.taker))
                )

        self.actor = self.sched.spawn(boot, name="node")
        self.sched.run_until_idle()

    def act(self, action: TurnAction) -> None:
        self.sched.enqueue(self.actor, self.actor.root, action)
        self.sched.run_until_idle()

    def observe(self, label: Symbol) -> Handle:
        handles: list[Handle] = []
        pattern = pattern_value(rec_group(label, [bind()]))
        self.act(
            lambda t: handles.append(
                t.publish(self.refs["ds"], observe(pattern, self.refs["taker"]))
            )
        )
        return handles[0]

    def publish(self, value: Value) -> Handle:
        handles: list[Handle] = []
        self.act(lambda t: handles.append(t.publish(self.refs["ds"], value)))
        return handles[0]

    def retract(self, handle: Handle) -> None:
        self.act(lambda t: t.retract(handle))


def test_matches_are_shown_by_key_in_the_takers_facet() -> None:
    w = _World()
    w.observe(A)
    facet = w.facets["taker"]
    one = w.publish(record("a", 1))
    true = w.publish(record("a", True))  # type-exactly another match than 1
    again = w.publish(record("a", 1))  # the same captures: no second match
    w.retract(one)
    w.retract(again)
    w.retract(true)
    assert w.taker.calls == [
        ("matched", (1,), exact_key((1,)), facet),
        ("matched", (True,), exact_key((True,)), facet),
        ("unmatched", exact_key((1,)), facet),
        ("unmatched", exact_key((True,)), facet),
    ]
    # The keys tell the two apart in a table (raw, (1,) == (True,) in Python).
    assert len({call[2] for call in w.taker.calls[:2]}) == 2


def test_a_message_reaches_the_taker_as_a_message() -> None:
    w = _World()
    w.observe(A)
    w.act(lambda t: t.message(w.refs["ds"], record("a", "hi")))
    assert w.taker.calls == [("!", ("hi",), w.facets["taker"])]


def test_its_observe_withdrawn_the_taker_gives_everything_up_at_once() -> None:
    w = _World()
    watching = w.observe(A)
    w.publish(record("a", 1))
    w.retract(watching)
    w.publish(record("a", 2))  # no longer observed
    assert [call[0] for call in w.taker.calls] == ["matched", "unmatch_all"]
    assert w.taker.calls[-1] == ("unmatch_all", w.facets["taker"])


def test_a_taker_whose_facet_stopped_is_shown_nothing() -> None:
    w = _World()
    w.observe(A)  # asserted in the root facet, so it outlives the taker's
    w.act(lambda t: t.stop(w.facets["taker"]))
    w.publish(record("a", 1))
    w.act(lambda t: t.message(w.refs["ds"], record("a", 2)))
    assert w.taker.calls == []


def test_a_second_observe_of_the_taker_is_refused_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = _World()
    w.observe(A)
    w.observe(B)  # its keys would share the taker's table
    w.publish(record("a", 1))
    w.publish(record("b", 2))
    assert [call[:2] for call in w.taker.calls] == [("matched", (1,))]
    assert "Observe kept as a plain assertion" in caplog.text


def test_a_taker_can_be_observed_again_once_its_observe_went() -> None:
    w = _World()
    w.retract(w.observe(A))
    w.observe(B)
    w.publish(record("b", 2))
    assert [call[:2] for call in w.taker.calls] == [
        ("unmatch_all", w.facets["taker"]),
        ("matched", (2,)),
    ]


def test_a_taker_of_another_actor_is_refused_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = _World(taker_elsewhere=True)
    w.observe(A)
    w.publish(record("a", 1))
    w.sched.run_until_idle()
    assert w.taker.calls == []
    assert not w.taker.taking
    assert "Observe kept as a plain assertion" in caplog.text
