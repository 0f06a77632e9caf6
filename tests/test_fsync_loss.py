"""Issue 11 defect 8: a federated sync whose wave loses a node finishes instead of hanging."""

from __future__ import annotations

import pytest

from feds.actor import Scheduler
from feds.protocols import protocol_names
from feds.relay import exchange
from feds.runtime import NodeRuntime


@pytest.mark.parametrize("protocol", protocol_names())
def test_a_sync_finishes_when_a_link_on_its_path_goes(protocol: str) -> None:
    sched = Scheduler()
    root, mid, tail = (NodeRuntime(sched, name, protocol) for name in ("root", "mid", "tail"))
    upper = (mid.uplink_relay(), root.accept_relay())
    lower = (tail.uplink_relay(), mid.accept_relay())

    def settle(*links: tuple) -> None:
        while True:
            sched.run_until_idle()
            if not sum(exchange(a, b) for a, b in links) and sched.idle():
                return

    settle(upper, lower)
    assert mid.node.neighbours and tail.node.parent_service is not None
    done: list[bool] = []
    sched.spawn(lambda t: t.sync(root.node.access, lambda t2: done.append(True)))
    settle(upper)  # the wave reaches mid, which asks tail: that request never gets there
    assert not done and lower[1].has_output
    lower[1].close("tail went away")
    settle(upper)
    assert done == [True]
    assert not mid.node.fsync_waits.get(lower[1], set())
