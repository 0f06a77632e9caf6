"""Clients of an overlay and the one-dataspace reference they are compared with.

Shared by the transparency property test (``tests/test_federation.py``) and the simulator:

* :class:`Watcher` — an observer entity that keeps its current captures and every message;
* :class:`Workload` — drives clients attached to overlay nodes, one action per turn;
* :class:`Reference` — what one single dataspace would show: a bag and its observers' views.

Clients reach nodes by direct refs: they publish and observe at ``node.access``, the local-access
entity that makes a fragment look like a plain dataspace.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from feds.actor import Entity, Facet, Handle, Scheduler, Turn, TurnAction
from feds.dataspace import observe
from feds.node import Node
from feds.patterns import match
from feds.values import Value

ArrivalHook = Callable[[str, tuple], None]
"""Called as ``hook(kind, captures)`` with kind ``"+"`` (an assertion) or ``"!"`` (a message)."""


class Watcher(Entity):
    """An observer: keeps the current captures (with the handles) and every message.

    ``on_arrival`` (optional) hears of each assertion and message as it arrives; the simulator
    uses it to time deliveries.
    """

    def __init__(self, on_arrival: ArrivalHook | None = None) -> None:
        self.current: dict[Handle, tuple] = {}
        self.messages: list[tuple] = []
        self.on_arrival = on_arrival

    def on_publish(self, turn: Turn, value: Value, handle: Handle) -> None:
        self.current[handle] = value
        if self.on_arrival is not None:
            self.on_arrival("+", value)

    def on_retract(self, turn: Turn, handle: Handle) -> None:
        del self.current[handle]

    def on_message(self, turn: Turn, value: Value) -> None:
        self.messages.append(value)
        if self.on_arrival is not None:
            self.on_arrival("!", value)

    def view(self) -> Counter:
        return Counter(self.current.values())


@dataclass
class Client:
    """An application attached at one node: its actor, assertions and observers."""

    node: Node
    actor_facet: Facet
    assertions: dict[int, tuple[Handle | None, Value]] = field(default_factory=dict)
    observers: dict[int, tuple[Handle | None, Watcher, Value]] = field(default_factory=dict)


class Workload:
    """Runs one workload against an overlay, one action per turn, on one scheduler.

    Every action is queued as a turn of the client's actor; run the scheduler to carry it out.
    Keys returned by :meth:`assert_` and :meth:`observe` name the assertion or observer later.
    """

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.clients: list[Client] = []
        self._ids = 0

    def attach(self, node: Node, name: str = "client") -> Client:
        """A new client actor at ``node`` (runs the scheduler until idle to boot it)."""
        holder: list[Facet] = []
        self.scheduler.spawn(lambda t: holder.append(t.facet), name=name)
        self.scheduler.run_until_idle()
        client = Client(node, holder[0])
        self.clients.append(client)
        return client

    def _act(self, client: Client, action: TurnAction) -> None:
        facet = client.actor_facet
        self.scheduler.enqueue(facet.actor, facet, action)

    def _key(self) -> int:
        self._ids += 1
        return self._ids

    def assert_(self, client: Client, value: Value) -> int:
        key = self._key()
        client.assertions[key] = (None, value)

        def go(t: Turn) -> None:
            if key in client.assertions:  # not retracted before this turn ran
                client.assertions[key] = (t.publish(client.node.access, value), value)

        self._act(client, go)
        return key

    def retract(self, client: Client, key: int) -> Value:
        handle, value = client.assertions.pop(key)
        self._act(client, lambda t: _retract(t, handle))
        return value

    def observe(self, client: Client, pattern: Value, watcher: Watcher | None = None) -> int:
        key = self._key()
        watcher = Watcher() if watcher is None else watcher
        client.observers[key] = (None, watcher, pattern)

        def go(t: Turn) -> None:
            if key in client.observers:  # not withdrawn before this turn ran
                h = t.publish(client.node.access, observe(pattern, t.ref(watcher)))
                client.observers[key] = (h, watcher, pattern)

        self._act(client, go)
        return key

    def unobserve(self, client: Client, key: int) -> Watcher:
        """Withdraw observer ``key``; returns its watcher (which should end up empty)."""
        handle, watcher, _pattern = client.observers.pop(key)
        self._act(client, lambda t: _retract(t, handle))
        return watcher

    def send(self, client: Client, value: Value) -> None:
        self._act(client, lambda t: t.message(client.node.access, value))

    def disconnect(self, client: Client) -> list[Value]:
        """The client's actor stops; returns the values it still held."""
        self._act(client, lambda t: t.stop_actor())
        self.clients.remove(client)
        return [value for _h, value in client.assertions.values()]


def _retract(turn: Turn, handle: Handle | None) -> None:
    """Retract ``handle``; None means the assertion was never made (nothing to do)."""
    if handle is not None:
        turn.retract(handle)


class Reference:
    """What one single dataspace would show: a bag of assertions and its observers."""

    def __init__(self) -> None:
        self.bag: Counter = Counter()

    def add(self, *values: Value) -> None:
        for v in values:
            self.bag[v] += 1

    def remove(self, *values: Value) -> None:
        bag = self.bag
        for v in values:
            n = bag[v] - 1
            if n > 0:
                bag[v] = n
            else:
                del bag[v]

    def view(self, pattern: Value, candidates: Iterable[Value] | None = None) -> Counter:
        """Each distinct captures vector of the held assertions matching ``pattern``, once.

        ``candidates`` (optional) narrows the scan to these held values; pass only a set that
        surely contains every matching assertion (the simulator passes one topic's values).
        """
        out: Counter = Counter()
        for v in self.bag if candidates is None else candidates:
            captures = match(pattern, v)
            if captures is not None:
                out[captures] = 1
        return out

    def deliveries(self, pattern: Value, message: Value) -> list[tuple]:
        captures = match(pattern, message)
        return [] if captures is None else [captures]
