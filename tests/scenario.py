"""Clients and observer entities acting concurrently on a :class:`ShuffledOverlay`, recorded.

A :class:`Scenario` issues client actions as turns on the client's node's scheduler, at once,
while the overlay goes on taking random steps: several clients act before the overlay settles.
It records, with the overlay's clock, what :func:`feds.sim.history.explain` needs: every
client's actions (its *program*), every observation instance of each watcher, the quiet points
and each returned sync; each :class:`Watcher` records the history it received.

Watchers live in one long-lived actor per node and each has one ref, so observations reuse
entities: two clients (or one, twice) asserting the same ``<Observe P ref>`` make one counted
assertion, and one watcher observes several patterns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from feds.actor import Actor, Entity, Handle, Ref, Turn, TurnAction
from feds.dataspace import observe
from feds.patterns import match
from feds.sim.history import (
    BUDGET,
    GAVE_UP,
    Action,
    Checkpoint,
    Event,
    Instance,
    explain,
)
from feds.sim.shuffle import ShuffledOverlay
from feds.values import Value


class Watcher(Entity):
    """An observer entity: records ``(time, kind, captures)`` for every event it receives."""

    def __init__(self, clock: Callable[[], int]) -> None:
        self.clock = clock
        self.history: list[Event] = []
        self.live: dict[Handle, tuple] = {}
        self.ref: Ref

    def on_publish(self, turn: Turn, value: Value, handle: Handle) -> None:
        self.live[handle] = value
        self.history.append((self.clock(), "+", value))

    def on_retract(self, turn: Turn, handle: Handle) -> None:
        self.history.append((self.clock(), "-", self.live.pop(handle)))

    def on_message(self, turn: Turn, value: Value) -> None:
        self.history.append((self.clock(), "!", value))

    def received(self) -> set[tuple[str, tuple]]:
        """Every ``(kind, captures)`` received so far."""
        return {(kind, captures) for _t, kind, captures in self.history}

    def holds(self, captures: tuple) -> bool:
        return captures in self.live.values()


@dataclass
class Client:
    """An application actor attached at one node."""

    name: str
    node: int
    actor: Actor
    held: dict[int, tuple[Value, list[Handle]]] = field(default_factory=dict)
    """Assertion key → (value, [its handle once the turn ran])."""
    observing: dict[int, tuple[Watcher, Value, list[Handle]]] = field(default_factory=dict)


@dataclass
class _Observation:
    """One distinct ``<Observe pattern watcher>``: its count and instances (indices)."""

    count: int = 0
    instances: list[int] = field(default_factory=list)


class Scenario:
    """Clients acting on ``overlay``; ``watchers`` per node (made and settled at once)."""

    def __init__(self, overlay: ShuffledOverlay, watchers: int = 2) -> None:
        self.overlay = overlay
        self.clients: list[Client] = []
        self.programs: dict[str, list[Action]] = {}
        self.instances: dict[Watcher, list[Instance]] = {}
        self.observations: dict[tuple[Watcher, Value], _Observation] = {}
        self.checkpoints: list[Checkpoint] = []
        self.watchers: list[list[Watcher]] = []
        self._keys = 0
        clock = self._now
        for i in range(len(overlay.nodes)):
            mine = [Watcher(clock) for _ in range(watchers)]

            def boot(t: Turn, mine: list[Watcher] = mine) -> None:
                for w in mine:
                    w.ref = t.ref(w)

            overlay.scheduler(i).spawn(boot, name=f"watchers@n{i}")
            self.watchers.append(mine)
            for w in mine:
                self.instances[w] = []
        overlay.settle()

    def _now(self) -> int:
        return self.overlay.clock

    def _key(self) -> int:
        self._keys += 1
        return self._keys

    def _act(self, client: Client, action: TurnAction) -> int:
        """Queue ``action`` as a turn of ``client``; returns the time it was issued."""
        self.overlay.scheduler(client.node).enqueue(client.actor, client.actor.root, action)
        return self.overlay.tick()

    def _access(self, client: Client) -> Ref:
        return self.overlay.nodes[client.node].access

    # -- actions --------------------------------------------------------------------------

    def attach(self, node: int) -> Client:
        name = f"c{len(self.programs)}@n{node}"
        actor = self.overlay.scheduler(node).spawn(lambda t: None, name=name)
        client = Client(name, node, actor)
        self.clients.append(client)
        self.programs[name] = []
        return client

    def assert_(self, client: Client, value: Value) -> int:
        key = self._key()
        handles: list[Handle] = []
        client.held[key] = (value, handles)
        access = self._access(client)
        at = self._act(client, lambda t: handles.append(t.publish(access, value)))
        self.programs[client.name].append(Action(at, adds=(value,)))
        return key

    def retract(self, client: Client, key: int) -> None:
        value, handles = client.held.pop(key)
        at = self._act(client, lambda t: t.retract(handles[0]))
        self.programs[client.name].append(Action(at, removes=(value,)))

    def send(self, client: Client, value: Value) -> None:
        access = self._access(client)
        at = self._act(client, lambda t: t.message(access, value))
        self.programs[client.name].append(Action(at, message=(value,)))

    def observe(self, client: Client, watcher: Watcher, pattern: Value) -> int:
        key = self._key()
        handles: list[Handle] = []
        client.observing[key] = (watcher, pattern, handles)
        access = self._access(client)
        at = self._act(
            client, lambda t: handles.append(t.publish(access, observe(pattern, watcher.ref)))
        )
        self._count(client, watcher, pattern, +1, at)
        return key

    def unobserve(self, client: Client, key: int) -> None:
        watcher, pattern, handles = client.observing.pop(key)
        at = self._act(client, lambda t: t.retract(handles[0]))
        self._count(client, watcher, pattern, -1, at)

    def leave(self, client: Client) -> None:
        """The client's actor stops: everything it asserted (Observes too) is retracted."""
        at = self._act(client, lambda t: t.stop_actor())
        values = tuple(value for value, _h in client.held.values())
        self.programs[client.name].append(Action(at, removes=values))
        for watcher, pattern, _h in client.observing.values():
            self._count(client, watcher, pattern, -1, at)
        self.clients.remove(client)

    def sync(self, client: Client, check: Callable[[], None] | None = None) -> None:
        """A federated sync at the client's node; ``check()`` runs the moment it returns."""
        issued: list[int] = []

        def returned(t: Turn) -> None:
            self.checkpoints.append(Checkpoint(self._now(), client.name, issued[0]))
            if check is not None:
                check()

        access = self._access(client)
        issued.append(self._act(client, lambda t: t.sync(access, returned)))

    def settle(self) -> None:
        """Let the overlay become quiet: a barrier for everything issued before."""
        self.overlay.settle()
        self.checkpoints.append(Checkpoint(self.overlay.tick()))

    def _count(self, client: Client, w: Watcher, pattern: Value, delta: int, at: int) -> None:
        obs = self.observations.setdefault((w, pattern), _Observation())
        obs.count += delta
        instances = self.instances[w]
        if delta > 0 and obs.count == 1:
            previous = obs.instances[-1] if obs.instances else None
            obs.instances.append(len(instances))
            instances.append(Instance(pattern, at, None, client.name, previous))
        elif delta < 0 and obs.count == 0:
            i = obs.instances[-1]
            old = instances[i]
            instances[i] = Instance(old.pattern, old.opened, at, old.opener, old.previous)

    # -- checks ---------------------------------------------------------------------------

    def violations(self, budget: int = BUDGET) -> list[str]:
        """Every watcher whose history one dataspace cannot explain, with the reason (the
        check visiting at most ``budget`` states for each). A history the check gives up on
        is saved at once (:mod:`feds.sim.undecided`), its path in the reason: the same seed
        may not give it again once the code has changed."""
        out = []
        for node, watchers in enumerate(self.watchers):
            for n, w in enumerate(watchers):
                case = (w.history, self.instances[w], self.programs, self.checkpoints)
                why = explain(*case, budget)
                if why is not None and why.startswith(GAVE_UP):
                    why += f"; {_save(case, f'watcher {n}@n{node}: {why}', budget)}"
                if why is not None:
                    out.append(f"watcher {n}@n{node}: {why}")
        return out

    def remote_matches(self) -> int:
        """Events (``+`` or ``!``) watchers heard that a client at another node sent or asserted."""
        node_of = {c: int(c.rsplit("@n", 1)[1]) for c in self.programs}
        count = 0
        for node, watchers in enumerate(self.watchers):
            for w in watchers:
                patterns = {inst.pattern for inst in self.instances[w]}
                for _t, kind, captures in w.history:
                    if kind == "-":
                        continue
                    sources = {
                        node_of[name]
                        for name, program in self.programs.items()
                        for a in program
                        for v in (*a.adds, *a.message)
                        if any(match(p, v) == captures for p in patterns)
                    }
                    count += any(source != node for source in sources)
        return count


def _save(case: tuple, note: str, budget: int) -> str:
    """Save an undecided history; what to say about it. Imported only then: the module's
    constants would change hypothesis' examples (see :mod:`feds.sim.undecided`)."""
    from feds.sim.undecided import folder, save

    try:
        path = save(folder(), case, note=note)
    except ValueError as error:
        return f"not saved: {error}"
    return f"saved: python -m feds.sim.undecided {path} --budget {10 * budget}"
