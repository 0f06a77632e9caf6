"""A parent links only a child of its own protocol and revision (``protocols/node.md``).

Two nodes of different protocols, or of two revisions of one (aggregate-subs' answers and
copy-up's offers changed form in their revisions 2), would exchange records neither understands
and lose data silently: the parent refuses, and the child says why in its log and its status.
"""

from __future__ import annotations

import logging

import pytest
import trio

from feds.actor import Entity, Scheduler, Turn
from feds.driver import Driver
from feds.node import REFUSED, UPLINK, Node, connect_in_process
from feds.protocols import make_protocol
from feds.protocols.aggregate_subs import AggregateSubs
from feds.runtime import NodeRuntime
from feds.values import Record, Value


class _Revision1(AggregateSubs):
    revision = 1


def _link(parent_protocol: object, child_protocol: object) -> tuple[Node, Node]:
    scheduler = Scheduler()
    parent = Node(scheduler, "parent", parent_protocol)  # type: ignore[arg-type]
    child = Node(scheduler, "child", child_protocol)  # type: ignore[arg-type]
    scheduler.run_until_idle()
    connect_in_process(scheduler, child, parent)
    scheduler.run_until_idle()
    assert not scheduler.crashes
    return parent, child


def test_a_child_of_the_same_protocol_and_revision_is_linked() -> None:
    parent, child = _link("aggregate-subs", "aggregate-subs")
    assert child.parent_service is parent.service and len(parent.neighbours) == 1
    assert child.refused is None and "uplink-refused" not in child.status()


@pytest.mark.parametrize(
    ("child_protocol", "theirs"),
    [(make_protocol("copy-up"), "copy-up/2"), (_Revision1(), "aggregate-subs/1")],
)
def test_a_child_of_another_protocol_or_revision_is_refused(
    child_protocol: object, theirs: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="feds"):
        parent, child = _link("aggregate-subs", child_protocol)
    assert child.parent_service is None and not parent.neighbours
    reason = f"this node runs aggregate-subs/2, the child {theirs}"
    assert child.refused == reason and child.status()["uplink-refused"] == reason
    assert f"node child: the parent refused the link: {reason}" in caplog.text
    assert f"node parent: refused a child's link: {reason}" in caplog.text


def test_an_uplink_request_without_a_protocol_is_refused_as_an_older_feds() -> None:
    scheduler = Scheduler()
    parent = Node(scheduler, "parent", "aggregate-subs")
    scheduler.run_until_idle()
    heard: list[Value] = []

    class Reply(Entity):
        def on_message(self, turn: Turn, value: Value) -> None:
            heard.append(value)

    def ask(t: Turn) -> None:  # an uplink request as feds made it before revisions
        reply = t.ref(Reply())
        t.publish(parent.service, Record(UPLINK, (reply, reply, reply)))

    scheduler.spawn(ask, name="old child")
    scheduler.run_until_idle()
    reason = "this node runs aggregate-subs/2, the child an older feds without revisions"
    assert heard == [Record(REFUSED, (reason,))] and not parent.neighbours


async def test_a_node_of_another_protocol_is_refused_over_tcp(nursery: trio.Nursery) -> None:
    driver = Driver()
    nursery.start_soon(driver.run)
    parent = NodeRuntime(driver.scheduler, "parent", "aggregate-subs")
    port = await nursery.start(parent.serve, "127.0.0.1", 0)
    child = NodeRuntime(driver.scheduler, "child", "observer-flood")
    nursery.start_soon(child.uplink_tcp, "127.0.0.1", port)
    with trio.fail_after(10):
        while child.node.refused is None:
            await trio.sleep(0.01)
    assert child.status()["uplink-refused"] == (
        "this node runs aggregate-subs/2, the child observer-flood/1"
    )
    assert child.node.parent_service is None and not parent.node.neighbours
