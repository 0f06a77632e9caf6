"""The sans-IO actor engine: delivery order, atomic turns, facet teardown and sync."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from feds.actor import (
    MESSAGE,
    PUBLISH,
    RETRACT,
    Entity,
    Handle,
    Ref,
    Scheduler,
    Turn,
    adds_before_removes,
)
from feds.values import Value
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


class Ordered(Recorder):
    """A recorder that also notes which turn each event arrived in, and sync requests."""

    def __init__(self) -> None:
        super().__init__()
        self.turns: list[int] = []

    def on_publish(self, turn: Turn, value: Value, handle: Handle) -> None:
        super().on_publish(turn, value, handle)
        self.turns.append(id(turn))

    def on_retract(self, turn: Turn, handle: Handle) -> None:
        super().on_retract(turn, handle)
        self.turns.append(id(turn))

    def on_message(self, turn: Turn, value: Value) -> None:
        super().on_message(turn, value)
        self.turns.append(id(turn))

    def on_sync(self, turn: Turn, peer: Ref) -> None:
        self.events.append(("sync", None))
        self.turns.append(id(turn))
        super().on_sync(turn, peer)


def test_one_batch_runs_in_one_turn_adds_in_order_then_removes_in_order() -> None:
    sched = Scheduler()
    rec = Ordered()
    refs: list = []
    target = sched.spawn(lambda t: refs.append(t.ref(rec)), name="target")
    sched.run_until_idle()
    (ref,) = refs
    held: list = []
    sender = sched.spawn(lambda t: held.extend(t.publish(ref, v) for v in ("a", "b")))
    sched.run_until_idle()
    synced: list = []

    def mixed(t: Turn) -> None:
        t.retract(held[1])
        t.publish(ref, "c")
        t.message(ref, "m1")
        t.retract(held[0])
        t.sync(ref, lambda t: synced.append(list(rec.events)))
        t.message(ref, "m2")

    rec.events.clear()
    rec.turns.clear()
    work, sent = target.work, sender.work
    sched.enqueue(sender, sender.root, mixed)
    sched.run_until_idle()
    expected = [("+", "c"), ("!", "m1"), ("sync", None), ("!", "m2"), ("-", "b"), ("-", "a")]
    assert rec.events == expected
    assert len(set(rec.turns)) == 1  # all in the one turn of the target
    assert synced == [expected]
    assert target.work == work + 5  # the sync request is not work
    assert sender.work == sent + 1  # its turn; nor is the answer to its sync


def test_a_batch_without_adds_or_without_removes_is_not_copied() -> None:
    adds = [(PUBLISH, None, 1, 1), (MESSAGE, None, 2, None)]
    removes = [(RETRACT, None, None, 1), (RETRACT, None, None, 2)]
    for batch in (adds[:1], adds, removes):
        assert adds_before_removes(batch) is batch
    assert adds_before_removes(removes + adds) == adds + removes
    assert adds_before_removes(adds + removes) == adds + removes


def test_work_wakes_the_driver_once_when_queued_into_an_idle_queue() -> None:
    sched = Scheduler()
    wakes: list[int] = []
    sched.on_work = lambda: wakes.append(len(sched._queue))
    a, b = Recorder(), Recorder()
    refs: list = []
    sched.spawn(lambda t: refs.append(t.ref(a)))
    sched.spawn(lambda t: refs.append(t.ref(b)))
    assert wakes == [1]
    sched.run_until_idle()
    sched.spawn(lambda t: (t.message(refs[0], 1), t.message(refs[1], 2)))
    assert wakes == [1, 1]
    sched.run_until_idle()  # the turn queues a batch for each of two actors: one wake
    assert wakes == [1, 1, 2]
    assert a.events == [("!", 1)] and b.events == [("!", 2)]


def test_batches_are_queued_in_the_order_their_targets_were_first_sent_to() -> None:
    sched = Scheduler()
    log: list[tuple[str, Value]] = []

    class Logger(Entity):
        def __init__(self, name: str) -> None:
            self.name = name

        def on_message(self, turn: Turn, value: Value) -> None:
            log.append((self.name, value))

    refs: dict[str, Ref] = {}
    for name in "abc":
        sched.spawn(lambda t, name=name: refs.__setitem__(name, t.ref(Logger(name))))
    sched.run_until_idle()

    def send(t: Turn) -> None:
        for i, name in enumerate("babcab"):
            t.message(refs[name], i)

    sched.spawn(send)
    sched.run_until_idle()
    assert log == [("b", 0), ("b", 2), ("b", 5), ("a", 1), ("a", 4), ("c", 3)]


def test_a_crashed_actor_runs_no_stop_actions_but_retracts_and_runs_exit_hooks() -> None:
    # Syndicate: a crash retracts the actor's assertions; its stop scripts do not run (they may
    # rely on invariants the crash broke), so nothing they would send leaves the actor.
    sched = Scheduler()
    first, second = Recorder(), Recorder()
    refs: list[Ref] = []
    sched.spawn(lambda t: refs.append(t.ref(first)))
    sched.spawn(lambda t: refs.append(t.ref(second)))
    sched.run_until_idle()
    one, two = refs
    ran: list[str] = []

    def boot(t: Turn) -> None:
        t.publish(two, "held")

        def last_words(t: Turn) -> None:
            ran.append("root")
            t.publish(one, "never")
            t.message(one, "bye")
            t.message(two, "bye too")

        t.on_stop(last_words)
        t.new_facet(
            lambda t: (t.publish(one, "child held"), t.on_stop(lambda t: ran.append("child")))
        )

    actor = sched.spawn(boot)
    exits: list = []
    actor.exit_hooks.append(exits.append)
    sched.run_until_idle()
    sched.enqueue(actor, actor.root, lambda t: 1 / 0)
    sched.run_until_idle()
    assert not actor.alive and isinstance(actor.exit_reason, ZeroDivisionError)
    assert ran == [] and exits == [actor]
    assert first.events == [("+", "child held"), ("-", "child held")]
    assert second.events == [("+", "held"), ("-", "held")]
    assert first.live == {} and second.live == {}


def test_a_turn_sending_to_one_actor_makes_no_dict_of_batches() -> None:
    sched = Scheduler()
    rec, (ref,) = make_target(sched)
    seen: list = []

    def send(t: Turn) -> None:
        t.message(ref, 1)
        t.publish(ref, 2)
        seen.append((t._others, [(a, [e[2] for e in b]) for a, b in t._batches()]))

    sched.spawn(send)
    sched.run_until_idle()
    assert seen == [(None, [(ref.actor, [1, 2])])]
    assert rec.events == [("!", 1), ("+", 2)]


def test_a_batch_to_the_actors_own_prompt_entity_runs_before_what_is_queued() -> None:
    """A node's follow-up work in its own dataspace is done before it takes its next event; a
    batch that also goes to an ordinary entity of its own, or holds a sync request, keeps its
    place behind what was queued before."""
    sched = Scheduler()
    order: list[str] = []

    class Noting(Entity):
        def on_message(self, turn: Turn, value: Value) -> None:
            order.append(value)  # type: ignore[arg-type]

    class PromptNoting(Noting):
        prompt = True

    refs: dict[str, Ref] = {}

    def boot(t: Turn) -> None:
        refs["prompt"], refs["plain"] = t.ref(PromptNoting()), t.ref(Noting())

    node = sched.spawn(boot, name="node")
    sender = sched.spawn(lambda t: None, name="sender")
    sched.run_until_idle()

    def run(action: Callable[[Turn], None]) -> list[str]:
        """``action`` as a turn of the node, with the sender's message queued behind it."""
        order.clear()
        sched.enqueue(sender, sender.root, lambda t: t.message(refs["plain"], "queued before"))
        sched.enqueue(node, node.root, action)
        sched.run_until_idle(max_turns=1)  # the sender's turn: its message is queued now
        sched.run_until_idle()
        return list(order)

    def own(t: Turn) -> None:
        t.message(refs["prompt"], "own")

    def mixed(t: Turn) -> None:
        t.message(refs["prompt"], "own")
        t.message(refs["plain"], "plain")

    answered: list[str] = []

    def synced(t: Turn) -> None:
        t.sync(refs["prompt"], lambda _: answered.append("sync"))
        t.message(refs["prompt"], "own")

    assert run(own) == ["own", "queued before"]
    assert run(mixed) == ["queued before", "own", "plain"]
    assert run(synced) == ["queued before", "own"]
    assert answered == ["sync"]


def test_a_batch_cut_short_by_max_events_goes_on_first_and_commits_once() -> None:
    """A big batch run in parts (a driver serving I/O between them) delivers exactly what it
    delivers in one go, keeps its place before later work, and commits its effects once."""

    def run(max_events: int | None) -> tuple[list, list[int], list[str]]:
        sched = Scheduler()
        rec, (ref,) = make_target(sched)
        parts: list[int] = []
        order: list[str] = []

        class Forwarder(Entity):
            def on_publish(self, turn: Turn, value: Value, handle: Handle) -> None:
                turn.publish(ref, value)  # effects of this turn, committed at its end
                order.append(f"event {value}")

        forwarders: list[Ref] = []
        node = sched.spawn(lambda t: forwarders.append(t.ref(Forwarder())), name="node")
        sched.run_until_idle()
        sender = sched.spawn(lambda t: [t.publish(forwarders[0], i) for i in range(10)])
        sched.run_until_idle(max_turns=1)  # the sender's turn: its batch of 10 is queued
        sched.enqueue(node, node.root, lambda t: order.append("later turn"))
        while not sched.idle():
            sched.run_until_idle(max_events=max_events)
            parts.append(len(rec.events))
        assert sender.alive
        return rec.events, parts, order

    whole, parts, order = run(None)
    assert whole == [("+", i) for i in range(10)] and parts == [10]
    events, parts, sliced_order = run(3)
    assert events == whole and sliced_order == order
    assert parts[:3] == [0, 0, 0], "nothing of the big turn is visible before it ends"


def test_an_open_batch_keeps_the_scheduler_busy() -> None:
    sched = Scheduler()
    rec, (ref,) = make_target(sched)
    sched.spawn(lambda t: [t.message(ref, i) for i in range(5)])
    sched.run_until_idle(max_turns=1)
    assert sched.run_until_idle(max_events=2) == 1  # the batch began
    assert not sched.idle() and len(rec.events) == 2
    assert sched.run_until_idle(max_events=2) == 0  # it went on: no new turn began
    sched.run_until_idle()
    assert sched.idle() and [v for _, v in rec.events] == list(range(5))


def test_an_action_written_as_a_generator_runs_in_parts_and_commits_once() -> None:
    sched = Scheduler()
    rec, (ref,) = make_target(sched)
    actor = sched.spawn(lambda t: None)
    sched.run_until_idle()

    def publish_in_parts(t: Turn) -> Iterator[int]:
        for i in range(10):
            t.publish(ref, i)
            yield 1

    sched.enqueue(actor, actor.root, publish_in_parts)
    sched.enqueue(actor, actor.root, lambda t: t.message(ref, "after"))
    parts = 0
    while not sched.idle():
        sched.run_until_idle(max_events=3)
        parts += 1
        if not rec.events:
            assert parts <= 4, "nothing is visible before the big turn ends"
    assert rec.events == [*(("+", i) for i in range(10)), ("!", "after")]
    assert parts >= 4


def test_a_generator_action_that_raises_has_no_effects() -> None:
    sched = Scheduler()
    rec, (ref,) = make_target(sched)

    def fail_halfway(t: Turn) -> Iterator[int]:
        t.publish(ref, 1)
        yield 1
        raise RuntimeError("boom")

    actor = sched.spawn(lambda t: None)
    sched.run_until_idle()
    sched.enqueue(actor, actor.root, fail_halfway)
    while not sched.idle():
        sched.run_until_idle(max_events=1)
    assert rec.events == [] and not actor.alive
