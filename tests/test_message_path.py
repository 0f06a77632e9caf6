"""A message takes the steps an assertion takes: it enters the same fragments as the same records.

Skipping the ``<at …>`` and ``<content …>`` steps for messages only (they are never retained, so
there is nothing to deduplicate) saved a turn per hop but let a message overtake an assertion made
before it (``tests/test_event_order.py``). A relay may still treat messages differently from
assertions (the half-links ignore messages that look like subscriptions).
"""

from __future__ import annotations

from collections import Counter

import pytest

from feds.actor import Scheduler, Turn
from feds.dataspace import Dataspace
from feds.pattern_forms import bind, rec_group
from feds.protocols import protocol_names
from feds.reactive import relay
from feds.sim.reference import Workload
from feds.values import Symbol, Value, record
from tests.recording import Recorder
from tests.test_federation import Overlay

A = Symbol("a")

STEPS = {
    "copy-up": {"link": Counter(n2=1, n1=1, n0=1)},
    "aggregate-subs": {"local": Counter(n2=1), "pub": Counter(n1=1, n0=1)},
    "observer-flood": {"from": Counter(n2=1), "at": Counter(n2=1, n1=1, n0=1)},
}
"""The records entering each fragment for one event made at n2 and seen by an observer at n0.

copy-up offers ``<content v>`` and delivers ``<at t x>`` through counts, not records
(``_Offers``, :class:`feds.protocols.Deliveries`), and so does aggregate-subs for ``<at …>``.
aggregate-subs makes no ``<pub n2 pat vs>`` at n2: its next-hop rule takes local matches from
``<local …>`` (the seed's two rules composed); n1 and n0 get ``<pub …>`` from their inboxes.
"""


@pytest.mark.parametrize("wire", [False, True], ids=["refs", "wire"])
@pytest.mark.parametrize("protocol", protocol_names())
def test_messages_take_the_steps_assertions_take(
    protocol: str, wire: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    overlay = Overlay(protocol, [0, 1], wire)  # n0 ← n1 ← n2
    names = {id(node.dataspace): node.name for node in overlay.nodes}
    work = Workload(overlay.scheduler)
    subscriber, publisher = work.attach(overlay.nodes[0]), work.attach(overlay.nodes[2])
    key = work.observe(subscriber, rec_group(A, [bind()]))
    overlay.settle()

    entered: dict[str, dict[str, Counter]] = {"publish": {}, "message": {}}
    for kind in entered:
        original = getattr(Dataspace, f"on_{kind}")

        def spy(self, turn, value, *rest, _original=original, _kind=kind):  # type: ignore[no-untyped-def]
            steps = entered[_kind].setdefault(value.label.name, Counter())
            steps[names[id(self)]] += 1
            return _original(self, turn, value, *rest)

        monkeypatch.setattr(Dataspace, f"on_{kind}", spy)

    work.send(publisher, record("a", 1))
    work.assert_(publisher, record("a", 2))
    overlay.settle()
    _handle, watcher, _pattern = subscriber.observers[key]
    assert watcher.messages == [(1,)]
    assert watcher.view() == Counter({(2,): 1})
    assert entered["message"] == entered["publish"] == STEPS[protocol]


def test_a_relay_sends_messages_through_its_message_transform() -> None:
    sched = Scheduler()
    ds, asserted, sent = Dataspace(), Recorder(), Recorder()
    refs: dict[str, object] = {}

    def boot(t: Turn) -> None:
        refs["ds"] = d = t.ref(ds)
        to_asserted, to_sent = t.ref(asserted), t.ref(sent)
        relay(
            t,
            d,
            rec_group(A, [bind()]),
            lambda c: (to_asserted, record("held", c[0])),
            lambda c: (to_sent, record("sent", c[0])),
        )

    actor = sched.spawn(boot)
    sched.run_until_idle()

    def act(t: Turn) -> None:
        ds_ref = refs["ds"]
        t.publish(ds_ref, record("a", 1))  # type: ignore[arg-type]
        t.message(ds_ref, record("a", 2))  # type: ignore[arg-type]

    sched.enqueue(actor, actor.root, act)
    sched.run_until_idle()
    held: list[tuple[str, Value]] = [("+", record("held", 1))]
    assert asserted.events == held
    assert sent.events == [("!", record("sent", 2))]
