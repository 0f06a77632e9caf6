"""Federated sync: when it returns, every effect of the caller's earlier actions is visible at
every node *at that moment*.

Each node runs on its own scheduler and the overlay takes random steps (which node runs a turn,
which link delivers next; :class:`~feds.sim.shuffle.ShuffledOverlay`), for a fixed list of seeds.
A client at a leaf asserts, retracts, sends and subscribes, then syncs; the check runs inside the
turn in which the sync returns, before anything else happens. A node that answered a sync wave
before flushing its own pending work (or before every neighbour answered) lets the caller go on
while some node has not yet seen its effects, and one of these interleavings catches it. They
rarely starve a node for long, though: a node that never flushed passed all of them, so one
more test runs a fixed interleaving that does (:class:`CallerFirst`).
"""

from __future__ import annotations

import random

import pytest

from feds.pattern_forms import bind, rec_group
from feds.protocols import protocol_names
from feds.sim.shuffle import ShuffledOverlay
from feds.values import Symbol, record
from tests.scenario import Scenario

SEEDS = range(12)
SHAPES = {"chain": [0, 1, 2], "binary": [0, 0, 1, 1, 2, 2]}
ALL_A = rec_group(Symbol("a"), [bind()])


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("protocol", protocol_names())
def test_when_sync_returns_every_node_sees_the_callers_earlier_actions(
    protocol: str, shape: str
) -> None:
    for seed in SEEDS:
        problems = sync_once(protocol, SHAPES[shape], seed)
        assert not problems, f"{protocol}, seed {seed}:\n" + "\n".join(problems)


class CallerFirst(ShuffledOverlay):
    """An overlay whose links are fast and whose nodes far from the caller are slow: bytes in
    flight are delivered first, else the node with the highest number (in a chain, the one
    nearest the caller at its end) runs a turn. A node that answered a sync wave with work
    still queued, such as a delivery to one of its own observers, is then the last to do it."""

    def step(self) -> bool:
        self._collect()
        flowing = [d for d in self.directions if d.chunks]
        runnable = [r.scheduler for r in self.runtimes if not r.scheduler.idle()]
        if not flowing and not runnable:
            return False
        self.tick()
        if flowing:
            flowing[0].receiver.receive(flowing[0].chunks.popleft())
        else:
            runnable[-1].run_until_idle(max_turns=1)
        self._collect()
        return True


@pytest.mark.parametrize("protocol", protocol_names())
def test_a_node_answers_a_sync_wave_only_once_its_own_observers_have_seen_it(
    protocol: str,
) -> None:
    """Links fast, the far end of the chain (n0) slow: the caller's effects reach n0 just before
    the sync request, and n0's deliveries to its own observers wait in its queue behind the
    request. A node that answered the wave without syncing its own actor first would let the
    answer race back to the caller while n0's observers have heard nothing. (n0 flushes twice,
    before its wave and as a leaf of it: either alone suffices; ``docs/protocols.md``,
    "Mutation check".)"""
    problems = sync_once(protocol, SHAPES["chain"], 0, CallerFirst)
    assert not problems, "\n".join(problems)


def sync_once(
    protocol: str,
    parents: list[int],
    seed: int,
    overlay_class: type[ShuffledOverlay] = ShuffledOverlay,
) -> list[str]:
    """A leaf client acts and syncs; what was missing where at the moment the sync returned."""
    overlay = overlay_class(protocol, parents, random.Random(seed))
    scene = Scenario(overlay, watchers=1)
    leaf = len(parents)  # the last node is a leaf in every shape
    clients = [scene.attach(n) for n in range(len(overlay.nodes))]
    for c in clients[:-1]:
        scene.observe(c, scene.watchers[c.node][0], ALL_A)
    scene.assert_(clients[0], record("a", "far"))  # held at the root before the sync
    caller = clients[-1]
    old = scene.assert_(caller, record("a", "old"))
    scene.settle()
    scene.retract(caller, old)
    scene.assert_(caller, record("a", "new"))
    scene.send(caller, record("a", "note"))
    scene.observe(caller, scene.watchers[leaf][0], ALL_A)  # answers must come back in time
    problems: list[str] = []
    returned: list[bool] = []

    def check() -> None:
        returned.append(True)
        for node, (w,) in enumerate(scene.watchers):
            missing = [
                what
                for what, ok in [
                    ("holds <a new>", w.holds(("new",))),
                    ("no longer holds <a old>", not w.holds(("old",))),
                    ("holds <a far>", w.holds(("far",))),
                    ("got <a note>", node == leaf or ("!", ("note",)) in w.received()),
                ]
                if not ok
            ]
            if missing:
                problems.append(
                    f"when the sync returned, the watcher at n{node} had not: {missing}"
                )

    scene.sync(caller, check)
    overlay.run(50)  # the sync is under way while the overlay goes on
    scene.settle()
    if not returned:
        problems.append("the sync never returned")
    return problems
