"""The sans-IO actor engine: delivery order, atomic turns, facet teardown and sync."""

from __future__ import annotations

from feds.actor import Scheduler, Turn
from tests.recording import Recorder


def make_target(sched: Scheduler) -> tuple[Recorder, list]:
    rec = Recorder()
    holder: list = []
    sched.spawn(lambda t: holder.append(t.ref(rec)), name="target")
    sched.run_until_idle()
    return rec, holder


def test_effects_are_delivered_in_order_with_retractions_last() -> None:
    sched = Scheduler()
    rec, (ref,) = make_target(sched)

    def boot(t: Turn) -> None:
        h = t.publish(ref, 3)
        t.later(lambda t2: (t2.retract(h), t2.publish(ref, 4), t2.message(ref, "hi")))

    sched.spawn(boot)
    sched.run_until_idle()
    assert rec.events == [("+", 3), ("+", 4), ("!", "hi"), ("-", 3)]


def test_a_raising_turn_has_no_effects_and_retracts_what_the_actor_held() -> None:
    sched = Scheduler()
    rec, (ref,) = make_target(sched)
    held: list = []

    def boot(t: Turn) -> None:
        held.append(t.publish(ref, "kept-until-crash"))

    def bad(t: Turn) -> None:
        t.publish(ref, "never")
        t.message(ref, "never")
        raise RuntimeError("boom")

    actor = sched.spawn(boot)
    sched.run_until_idle()
    sched.enqueue(actor, actor.root, bad)
    other = sched.spawn(lambda t: t.message(ref, "other actor still runs"))
    sched.run_until_idle()
    assert not actor.alive and isinstance(actor.exit_reason, RuntimeError)
    assert other is not None
    assert ("+", "never") not in rec.events and ("!", "never") not in rec.events
    assert ("-", "kept-until-crash") in rec.events
    assert ("!", "other actor still runs") in rec.events
    assert rec.live == {}


def test_stopping_a_facet_stops_children_runs_stop_actions_and_retracts() -> None:
    sched = Scheduler()
    rec, (ref,) = make_target(sched)
    facets: dict = {}
    stopped: list[str] = []

    def boot(t: Turn) -> None:
        def outer(t: Turn) -> None:
            t.publish(ref, "outer")
            t.on_stop(lambda t: stopped.append("outer"))

            def inner(t: Turn) -> None:
                t.publish(ref, "inner")
                t.on_stop(lambda t: stopped.append("inner"))

            facets["inner"] = t.new_facet(inner)

        facets["outer"] = t.new_facet(outer)
        t.publish(ref, "root")

    actor = sched.spawn(boot)
    sched.run_until_idle()
    assert sorted(v for _, v in rec.events) == ["inner", "outer", "root"]
    sched.enqueue(actor, actor.root, lambda t: t.stop(facets["outer"]))
    sched.run_until_idle()
    assert stopped == ["inner", "outer"]
    assert set(rec.live.values()) == {"root"}
    assert not facets["inner"].alive and not facets["outer"].alive and actor.alive


def test_stopping_the_root_facet_ends_the_actor_and_runs_exit_hooks() -> None:
    sched = Scheduler()
    rec, (ref,) = make_target(sched)
    exits: list = []
    actor = sched.spawn(lambda t: t.publish(ref, "x"))
    actor.exit_hooks.append(exits.append)
    sched.run_until_idle()
    sched.enqueue(actor, actor.root, lambda t: t.stop_actor())
    sched.run_until_idle()
    assert not actor.alive and exits == [actor] and rec.live == {}


def test_sync_answers_after_every_earlier_event() -> None:
    sched = Scheduler()
    rec, (ref,) = make_target(sched)
    seen_at_sync: list = []

    def boot(t: Turn) -> None:
        for i in range(5):
            t.message(ref, i)
        t.sync(ref, lambda t2: seen_at_sync.append(list(rec.events)))

    sched.spawn(boot)
    sched.run_until_idle()
    assert seen_at_sync == [[("!", i) for i in range(5)]]


def test_retract_of_a_handle_published_in_the_same_turn() -> None:
    sched = Scheduler()
    rec, (ref,) = make_target(sched)

    def boot(t: Turn) -> None:
        h = t.publish(ref, "blink")
        t.retract(h)
        t.retract(h)  # twice: ignored

    actor = sched.spawn(boot)
    sched.run_until_idle()
    assert rec.events == [("+", "blink"), ("-", "blink")]
    assert actor.outbound == {}


def test_events_to_a_stopped_facet_are_dropped() -> None:
    sched = Scheduler()
    rec = Recorder()
    refs: list = []

    def boot(t: Turn) -> None:
        refs.append(t.new_facet(lambda t: refs.append(t.ref(rec))))

    actor = sched.spawn(boot)
    sched.run_until_idle()
    facet, ref = refs
    sched.enqueue(actor, actor.root, lambda t: t.stop(facet))
    sched.spawn(lambda t: t.message(ref, "late"))
    sched.run_until_idle()
    assert rec.events == []


def test_a_held_handle_retracted_twice_in_one_turn_is_retracted_once() -> None:
    sched = Scheduler()
    rec, (ref,) = make_target(sched)
    held: list = []
    actor = sched.spawn(lambda t: held.append(t.publish(ref, "held")))
    sched.run_until_idle()

    def twice(t: Turn) -> None:
        t.retract(held[0])
        t.retract(held[0])
        t.retract(12345)  # never published: ignored

    sched.enqueue(actor, actor.root, twice)
    sched.run_until_idle()
    assert rec.events == [("+", "held"), ("-", "held")]
    assert actor.outbound == {} and actor.root.outbound == set()


def test_a_turn_that_only_sends_commits_nothing_else() -> None:
    sched = Scheduler()
    rec, (ref,) = make_target(sched)
    actor = sched.spawn(lambda t: t.message(ref, "only"))
    sched.run_until_idle()
    assert rec.events == [("!", "only")]
    assert actor.alive and actor.outbound == {} and actor.root.alive


def test_refs_to_the_same_entity_and_facet_are_equal_and_hash_alike() -> None:
    sched = Scheduler()
    rec = Recorder()
    refs: list = []
    sched.spawn(lambda t: refs.extend((t.ref(rec), t.ref(rec), t.ref(Recorder()))))
    sched.run_until_idle()
    a, b, other = refs
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != other and len({a, other}) == 2
