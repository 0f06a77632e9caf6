"""Minimal scenarios of the history property's counterexamples, each run under many random
interleavings (fixed seeds) on a :class:`~feds.sim.shuffle.ShuffledOverlay`.

Each one was shrunk from a counterexample of
``tests/test_federation.py::test_every_history_is_one_a_single_dataspace_gives`` and settled
(``docs/protocols.md``, "The transparency property"); the check it exercises is also pinned
down on a hand-made history in ``tests/test_history_check.py``.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from feds.pattern_forms import DISCARD, bind, lit, rec_group
from feds.protocols import protocol_names
from feds.sim.history import GAVE_UP, explain
from feds.sim.shuffle import ShuffledOverlay
from feds.sim.undecided import VARIABLE, load
from feds.values import Symbol, record
from tests.scenario import Scenario

A, B = Symbol("a"), Symbol("b")
CHAIN = [0, 1]
SEEDS = range(20)


def violations(scene: Scenario) -> list[str]:
    """Settle (every sync returns), let every client leave, settle, check every watcher."""
    scene.settle()
    for c in list(scene.clients):
        scene.leave(c)
    scene.settle()
    return scene.violations()


@pytest.mark.parametrize("protocol", protocol_names())
def test_an_assertion_may_reach_a_synced_observer_after_the_sync_returned(protocol: str) -> None:
    # c observes at n2 and syncs; s at n1 asserts meanwhile and c withdraws. Once the sync has
    # returned, c's subscription has reached n1, but s's assertion may be on its way (and be
    # withdrawn unheard): the sync is a barrier for c's own actions, not for s's.
    for seed in SEEDS:
        scene = Scenario(ShuffledOverlay(protocol, CHAIN, random.Random(seed)))
        c, s = scene.attach(2), scene.attach(1)
        key = scene.observe(c, scene.watchers[2][0], rec_group(B, [DISCARD, DISCARD]))
        scene.sync(c)
        scene.assert_(s, record("b", 2, 2))
        scene.unobserve(c, key)
        assert not violations(scene), seed


@pytest.mark.parametrize("protocol", protocol_names())
def test_a_late_observation_hears_what_a_sender_holds_before_its_next_message(
    protocol: str,
) -> None:
    # One watcher at n2 observes <b $ _>; s at n3 asserts <a 2>; quiet. Then the watcher also
    # observes <a $> and s sends <b 2 0>: +(2,) then !(2,), as from one dataspace, although
    # the new observation's window starts after actions of s that do not concern it.
    for seed in SEEDS:
        scene = Scenario(ShuffledOverlay(protocol, [0, 1, 2], random.Random(seed)))
        c, s = scene.attach(2), scene.attach(3)
        watcher = scene.watchers[2][1]
        scene.observe(c, watcher, rec_group(B, [bind(), DISCARD]))
        scene.assert_(s, record("a", 2))
        scene.settle()
        scene.observe(c, watcher, rec_group(A, [bind()]))
        scene.send(s, record("b", 2, 0))
        assert not violations(scene), seed


@pytest.mark.parametrize("protocol", protocol_names())
def test_a_message_sent_right_after_a_sync_may_miss_the_callers_new_subscription(
    protocol: str,
) -> None:
    # c observes <a $> with a watcher at its own node, syncs, and sends <a 2> without waiting
    # for the answer. The subscription takes a few turns to take effect even at c's own node,
    # so the message misses it (one dataspace would deliver it): the sync is no barrier for
    # actions issued before it returned ("Timing" in docs/protocols.md).
    for seed in SEEDS:
        scene = Scenario(ShuffledOverlay(protocol, CHAIN, random.Random(seed)))
        c = scene.attach(0)
        scene.observe(c, scene.watchers[0][0], rec_group(A, [bind()]))
        scene.sync(c)
        scene.send(c, record("a", 2))
        assert not violations(scene), seed


def test_a_local_observer_replacing_a_remote_subscription_sees_no_flicker() -> None:
    # aggregate-subs on two nodes: s at n1 holds <a 1>; an observer of <a 1> at n0 comes and
    # goes, and one at n1 comes. n1's rule publishing <a 1> for subscribers stopped when n0's
    # subscription went and restarted for n1's own: the new observer saw + - +.
    pattern = rec_group(A, [lit(1)])
    for seed in range(60):
        scene = Scenario(ShuffledOverlay("aggregate-subs", [0], random.Random(seed)))
        c, s = scene.attach(0), scene.attach(1)
        scene.assert_(s, record("a", 1))
        scene.overlay.run(seed % 7 * 3)
        key = scene.observe(c, scene.watchers[0][0], pattern)
        scene.overlay.run(seed % 5 * 3)
        scene.unobserve(c, key)
        scene.overlay.run(seed % 3 * 3)
        scene.observe(s, scene.watchers[1][0], pattern)
        assert not violations(scene), seed


def test_a_property_run_saves_a_history_the_check_gives_up_on_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Scenario.violations`` (the property test's check) saves every history the check
    gives up on under ``$FEDS_UNDECIDED_HISTORIES`` and names the file in its report: re-loaded,
    it gets the same verdict, and a bigger budget decides it."""
    monkeypatch.setenv(VARIABLE, str(tmp_path / "undecided"))
    scene = Scenario(ShuffledOverlay("copy-up", [0], random.Random(1)))
    c, s = scene.attach(0), scene.attach(1)
    scene.observe(c, scene.watchers[0][0], rec_group(B, [bind(), DISCARD]))
    scene.assert_(s, record("b", 1, 2))
    scene.send(s, record("b", 2, 2))
    scene.settle()
    for client in list(scene.clients):
        scene.leave(client)
    scene.settle()
    assert scene.violations() == []
    problems = scene.violations(budget=1)
    assert problems and all(GAVE_UP in p for p in problems), problems
    for problem in problems:
        why, command = problem.split(": ", 1)[1].split("; saved: ")
        path = Path(command.split()[3])
        assert path.parent == tmp_path / "undecided" and command.endswith(f"{path} --budget 10")
        assert explain(*load(path), budget=1) == why
        assert explain(*load(path)) is None
