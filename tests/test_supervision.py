"""A node survives what one client asserts: Observe records are checked at local access.

Issue 11 items 1 and 2: ``<Observe <_> 5>`` crashed the node's actor in every protocol, and an
Observe whose observer is the node's own local access started a runaway loop. Both are refused
at the door (:mod:`feds.admission`); the node keeps serving everyone else. In-process for every
protocol, then over loopback TCP with a real overlay.
"""

from __future__ import annotations

import logging

import pytest
import trio

from feds import client, topology
from feds.actor import Ref, Scheduler
from feds.admission import refusal
from feds.dataspace import OBSERVE
from feds.node import Node, connect_in_process
from feds.pattern_forms import DISCARD, bind, rec_group
from feds.protocols import protocol_names
from feds.runtime import figures, run_overlay
from feds.values import Record, Symbol, Value, record
from tests.recording import Recorder

X = Symbol("x")
BOUND = 50_000
"""Turns a three-node overlay may take to settle after one step; more means a runaway."""


class Chain:
    """root <- mid <- tail on one scheduler; a watcher of <x $v> at the tail."""

    def __init__(self, protocol: str) -> None:
        self.scheduler = Scheduler()
        self.root, self.mid, self.tail = (
            Node(self.scheduler, name, protocol) for name in ("root", "mid", "tail")
        )
        self.settle()
        connect_in_process(self.scheduler, self.mid, self.root)
        connect_in_process(self.scheduler, self.tail, self.mid)
        self.settle()
        self.watcher = Recorder()
        self.act(
            lambda t: t.publish(
                self.tail.access, Record(OBSERVE, (x_pattern(), t.ref(self.watcher)))
            )
        )
        self.act(lambda t: t.publish(self.root.access, record("x", 1)))

    def act(self, action: object) -> None:
        self.scheduler.spawn(action)  # type: ignore[arg-type]
        self.settle()

    def settle(self) -> None:
        self.scheduler.run_until_idle(max_turns=BOUND)
        assert self.scheduler.idle(), "the overlay did not settle: a runaway loop"

    def seen(self) -> set[Value]:
        return set(self.watcher.live.values())


def x_pattern() -> Value:
    return rec_group(X, [bind()])


def test_refusal_names_what_is_wrong_with_an_observe() -> None:
    scheduler = Scheduler()
    node = Node(scheduler, "n", "copy-up")
    refs: list[Ref] = []
    scheduler.spawn(lambda t: refs.append(t.ref(Recorder())))
    scheduler.run_until_idle()
    assert "not a reference: 5" in str(refusal(node.actor, Record(OBSERVE, (DISCARD, 5))))
    for own in (node.access, node.fragment, node.service):
        assert "own entity" in str(refusal(node.actor, Record(OBSERVE, (DISCARD, own))))
    assert refusal(node.actor, Record(OBSERVE, (DISCARD, refs[0]))) is None
    assert refusal(node.actor, Record(OBSERVE, (DISCARD, 5, 6))) is None  # plain data
    assert refusal(node.actor, record("x", 5)) is None


@pytest.mark.parametrize("protocol", protocol_names())
def test_an_observe_with_a_non_reference_observer_leaves_the_node_serving(
    protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    chain = Chain(protocol)
    assert chain.seen() == {(1,)}
    with caplog.at_level(logging.WARNING, "feds.node"):
        chain.act(lambda t: t.publish(chain.mid.access, Record(OBSERVE, (DISCARD, 5))))
    assert "node mid: refused an Observe whose observer is not a reference: 5" in caplog.text
    assert chain.scheduler.crashes == [] and chain.mid.actor.alive
    assert chain.seen() == {(1,)}  # the watcher behind mid did not see a '-'
    chain.act(lambda t: t.publish(chain.mid.access, record("x", 2)))
    chain.act(lambda t: t.publish(chain.root.access, record("x", 3)))
    assert chain.seen() == {(1,), (2,), (3,)}


@pytest.mark.parametrize("protocol", protocol_names())
@pytest.mark.parametrize("entity", ["access", "fragment", "service"])
def test_an_observe_feeding_the_node_itself_is_refused(protocol: str, entity: str) -> None:
    chain = Chain(protocol)
    held = len(chain.mid.dataspace)
    own = getattr(chain.mid, entity)
    chain.act(lambda t: t.publish(chain.mid.access, Record(OBSERVE, (x_pattern(), own))))
    chain.act(lambda t: t.publish(chain.mid.access, Record(OBSERVE, (bind(), own))))
    assert chain.scheduler.crashes == []
    assert len(chain.mid.dataspace) == held  # nothing of the loop entered the fragment
    chain.act(lambda t: t.publish(chain.root.access, record("x", 2)))
    assert chain.seen() == {(1,), (2,)}


CHAIN = """
[nodes.root]
listen = "127.0.0.1:0"
[nodes.mid]
listen = "127.0.0.1:0"
parent = "root"
[nodes.tail]
listen = "127.0.0.1:0"
parent = "mid"
"""


@pytest.mark.parametrize("protocol", protocol_names())
async def test_a_client_cannot_crash_or_loop_a_node_over_tcp(protocol: str) -> None:
    topo = topology.loads(CHAIN, allow_ephemeral=True)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            overlay = await nursery.start(
                lambda task_status: run_overlay(
                    topo, protocol=protocol, any_port=True, tcp_links=True, task_status=task_status
                )
            )
            while overlay.unlinked():
                await trio.sleep(0.01)
            root, mid, tail = (overlay.address(n) for n in ("root", "mid", "tail"))
            async with (
                client.connect(tail) as watcher,
                client.connect(root) as holder,
                client.connect(mid) as attacker,
                watcher.observe("<x $v>") as events,
            ):
                holder.assert_(record("x", 1))
                await holder.sync()
                assert (await events.next(5)).captures == (1,)
                attacker.assert_(Record(OBSERVE, (DISCARD, 5)))
                access = attacker._target  # the node's local access, as the client holds it
                attacker.assert_(Record(OBSERVE, (bind(), access)))
                attacker.assert_(Record(OBSERVE, (x_pattern(), access)))
                await attacker.sync()
                holder.assert_(record("x", 2))
                await holder.sync()
                assert (await events.next(5)).captures == (2,)  # no '-' for 1 came first
                assert sorted(events.current) == [(1,), (2,)]
                state = figures(await client.status(mid))
                assert state["fragment-assertions"] < 20  # the loop never started
            assert overlay.driver.scheduler.crashes == []
            nursery.cancel_scope.cancel()
