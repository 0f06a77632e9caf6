"""A client's last events before it closes its connection must reach the node.

Found while measuring the clients (``benchmarks/client.py``): a publisher that left right after
its socket had taken everything lost its last ~2,000 messages at a busy node. The cause is in
:class:`feds.relay.Relay`: when one read holds turn packets and then the far side's closing
``<error ...>`` packet, ``receive`` queues the turns' events and then shuts the relay down at
once, so the queued ``_apply`` turns find it closed and drop the events. Now, on a peer's
``<error>``, the relay stops reading and shuts down once the events already queued are applied
(at once when none are, as ``tests/test_relay.py`` expects of a bare ``<error>``).
"""

from __future__ import annotations

from feds.values import record
from tests.test_relay import Link, act


def test_events_read_with_the_far_sides_goodbye_are_applied_before_it_closes() -> None:
    link = Link()
    held: list[int] = []

    def last_words(turn: object) -> None:
        held.append(turn.publish(link.proxy, record("present", "me")))  # type: ignore[attr-defined]
        turn.message(link.proxy, record("bye", 1))  # type: ignore[attr-defined]

    act(link.client_sched, last_words)
    link.client_sched.run_until_idle()
    link.client.close("client done")
    link.server.receive(link.client.data_to_send())  # the events and the goodbye in one read
    link.sched.run_until_idle()
    assert link.recorder.events == [
        ("+", record("present", "me")),
        ("!", record("bye", 1)),
        ("-", record("present", "me")),  # what the client asserted goes with it
    ]
