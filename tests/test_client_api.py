"""The client API added for scenario tests (issue 9, "API gaps"): ``replace`` (one turn, no gap),
``Observation.take`` (the events so far, without waiting), ``sync_local`` (this node only) and
``feds.meta.observing`` (a pattern over Observe assertions, for meta-observers).

The overlay is three nodes in a chain (root <- mid <- tail) in this process; clients reach it
over loopback TCP.
"""

from __future__ import annotations

from functools import partial

import pytest
import trio

from feds import client, topology
from feds.actor import Handle, Scheduler, Turn
from feds.blocking import BlockingClient
from feds.dataspace import Dataspace, observe
from feds.meta import observing, quote
from feds.patterns import match
from feds.runtime import Overlay, run_overlay
from feds.syntax import parse_pattern
from feds.values import record
from tests.recording import Recorder
from tests.test_supervision import CHAIN
from tests.threaded import served_in_thread


async def start(nursery: trio.Nursery, protocol: str = "aggregate-subs") -> Overlay:
    topo = topology.loads(CHAIN, allow_ephemeral=True)  # root <- mid <- tail
    overlay: Overlay = await nursery.start(
        lambda task_status: run_overlay(
            topo, protocol=protocol, any_port=True, task_status=task_status
        )
    )
    while overlay.unlinked():
        await trio.sleep(0.01)
    return overlay


async def quiet(overlay: Overlay) -> None:
    """Wait until the overlay's scheduler (its links are in memory) has had nothing to do for
    a few driver rounds."""
    rounds = 0
    while rounds < 3:
        await trio.sleep(0.005)
        rounds = rounds + 1 if overlay.driver.scheduler.idle() else 0


def kinds(events: list[client.Event]) -> list[tuple[str, tuple]]:
    return [(e.kind, e.captures) for e in events]


@pytest.mark.parametrize("protocol", ["copy-up", "observer-flood", "aggregate-subs"])
async def test_replace_is_one_turn_and_keeps_the_key(protocol: str) -> None:
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            overlay = await start(nursery, protocol)
            async with (
                client.connect(overlay.address("root")) as ds,
                client.connect(overlay.address("tail")) as far,
                far.observe("<present $who>") as who,
                far.observe("<present _>") as anyone,
            ):
                await far.sync()
                key = ds.assert_(record("present", "Alice"))
                await ds.sync()
                assert kinds(who.take()) == [("+", ("Alice",))]
                assert kinds(anyone.take()) == [("+", ())]
                assert ds.replace(key, record("present", "Bob")) == key
                await ds.sync()
                # the new value arrives before the old one goes: never neither
                assert kinds(who.take()) == [("+", ("Bob",)), ("-", ("Alice",))]
                assert anyone.take() == []  # someone was present throughout
                ds.retract(key)  # the key now stands for the new assertion
                await ds.sync()
                assert kinds(who.take()) == [("-", ("Bob",))]
                assert kinds(anyone.take()) == [("-", ())]
            nursery.cancel_scope.cancel()


async def test_take_returns_what_arrived_and_never_waits() -> None:
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            overlay = await start(nursery)
            async with (
                client.connect(overlay.address("mid")) as ds,
                ds.observe("<n $i>") as events,
            ):
                await ds.sync()
                assert events.take() == []  # nothing yet: returns at once
                for i in range(3):
                    ds.send(record("n", i))
                await ds.sync()
                assert kinds(events.take()) == [("!", (0,)), ("!", (1,)), ("!", (2,))]
                assert events.take() == []
            nursery.cancel_scope.cancel()


async def test_sync_local_waits_for_this_node_only() -> None:
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            overlay = await start(nursery)
            tail = overlay.runtimes["tail"].node
            others = [overlay.runtimes[n].node.actor for n in ("root", "mid")]
            async with (
                client.connect(overlay.address("tail")) as ds,
                ds.observe("<here $x>") as events,
            ):
                await ds.sync()
                ds.assert_(record("here", 1))
                await ds.sync_local()
                # the node applied the assertion and sent back its match before answering
                assert kinds(events.take()) == [("+", (1,))]
                await ds.sync()
                await quiet(overlay)  # the sync wave's last retractions are still on their way
                held = dict(tail.dataspace.assertions)
                work = [actor.work for actor in others]
                await ds.sync_local()
                assert tail.dataspace.assertions == held  # the request was not kept
                assert [actor.work for actor in others] == work  # no other node was asked
                await ds.sync()
                assert all(a.work > w for a, w in zip(others, work, strict=True))  # a wave
            nursery.cancel_scope.cancel()


def test_observing_matches_the_interest_of_observers() -> None:
    scheduler = Scheduler()
    meta, anyone, seen = Recorder(), Recorder(), []
    held: dict[str, Handle] = {}

    def boot(t: Turn) -> None:
        ds = t.ref(Dataspace())
        seen.append(ds)
        t.publish(ds, observe(observing("<search $q _>"), t.ref(meta)))
        t.publish(ds, observe(observing("<search _ _>"), t.ref(anyone)))
        for text in ('<search "cats" $r>', '<search "dogs" $r>', "<search $q $r>"):
            held[text] = t.publish(ds, observe(parse_pattern(text)[0], t.ref(Recorder())))
        t.publish(ds, observe(parse_pattern('<search "cats">')[0], t.ref(Recorder())))  # one field

    actor = scheduler.spawn(boot)
    scheduler.run_until_idle()
    assert sorted(meta.live.values()) == [("cats",), ("dogs",)]
    assert list(anyone.live.values()) == [()]
    scheduler.enqueue(actor, actor.root, lambda t: t.retract(held['<search "cats" $r>']))
    scheduler.run_until_idle()
    assert list(meta.live.values()) == [("dogs",)]


def test_quote_reads_captures_as_literals_and_keeps_everything_else() -> None:
    p = quote("<temp $room <range 0 100>>")
    assert match(p, parse_pattern('<temp "hall" <range 0 100>>')[0]) == ("hall",)
    assert match(p, parse_pattern('<temp "hall" <range 0 50>>')[0]) is None
    assert match(p, parse_pattern("<temp $r <range 0 100>>")[0]) is None  # no literal there
    assert match(quote("<temp _ $v>"), parse_pattern("<temp $r 5>")[0]) == (5,)
    assert match(quote("[$a 1]"), parse_pattern("[2 1]")[0]) == (2,)
    assert match(quote("[$a 1]"), parse_pattern("[2 1.0]")[0]) is None  # type-exact literals
    with pytest.raises(ValueError):
        quote(record("not-a-pattern"))


def test_blocking_client_replace_sync_local_and_take() -> None:
    with served_in_thread(partial(start)) as overlay:
        with (
            BlockingClient(overlay.address("tail")) as ds,
            ds.observe("<present $who>") as who,
        ):
            assert who.take() == []
            key = ds.assert_(record("present", "Alice"))
            ds.sync_local()
            assert kinds(who.take()) == [("+", ("Alice",))]
            assert ds.replace(key, record("present", "Bob")) == key
            ds.sync_local()
            assert kinds(who.take()) == [("+", ("Bob",)), ("-", ("Alice",))]
            events = ds.watch("<present $who>", timeout=2)
            assert kinds([next(events)]) == [("+", ("Bob",))]
            events.close()
        assert who.next(0.1) is None  # closed: ended
