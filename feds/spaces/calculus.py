"""The space calculus (Orzan and van de Pol) on local spaces: a network of atomic spaces.

Items are pSpaces tuples and patterns are pSpaces templates (``(1, ANY, ANY)`` is the paper's
``<1,*,*>``). Each item is *information* or a *resource*, declared per space
(``space(name, resources=True)``) or per template (``declare_resource(pattern)``; the rest is
information). Transfers copy information and move resources; lookups are non-destructive for
information and destructive for resources. Information is held as a set (writing it twice keeps
one copy), resources as a multiset.

Operations (all instant, sans-IO; :meth:`Network.read_wait` is the blocking trio form):

* ``write(i, a)`` — into space ``i``; eager links forward it: if ``i`` publishes a pattern ``a``
  matches and space ``j`` subscribes to a pattern ``a`` matches, information is copied to ``j``
  (through ``j``'s overwrite policy) and a resource goes to exactly one of ``i`` and its
  subscribers. The paper leaves that choice open; here the resource waits *in flight* until the
  first of those spaces asks for it (a read there), which is one of the paper's schedules.
* ``read(i, p)`` — searches ``i``, then resources in flight to ``i``, then the lazily linked
  neighbours of ``i`` (information found there is copied into ``i``, a resource moved); None if
  nothing matches yet (:meth:`read_wait` blocks).
* ``read_e(i, p)`` — the non-blocking local lookup (``readE``): ``i`` and what is in flight to it.
* ``ldel(i, p)`` — deletes every match in ``i``; ``gdel(p)`` — in every space and in flight, in one
  step (so atomically with respect to other gdels).
* ``subscribe(j, q, key=..., timestamp=...)`` — an eager link's receiving mark with Splice's
  overwrite policy: an arriving item matching ``q`` replaces the items of ``j`` matching ``q``
  with the same key; with a timestamp too, only those not newer, and an older arrival is dropped.

:func:`run` interleaves agent programs (generators of :class:`Op`) step by step with a chosen
scheduler, as the paper's interleaving semantics does; it is how the Ping-Pong and the
Producer/Transformer/Consumer examples run.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import trio

from feds.spaces.jtypes import check_tuple
from feds.spaces.space import SpaceTimeout
from feds.spaces.templates import check_template, matches

Item: TypeAlias = tuple
Pattern: TypeAlias = tuple


@dataclass(eq=False)
class Atomic:
    """One atomic space: its items and the overwrite policies of its subscriptions."""

    name: str
    resources: bool = False
    items: list[Item] = field(default_factory=list)
    policies: list[Subscription] = field(default_factory=list)


@dataclass(frozen=True)
class Subscription:
    """``j <- q``: space ``space`` receives what matches ``pattern``, with an overwrite policy
    when ``key`` (field indexes) is given, and ``timestamp`` (a field index) for freshness."""

    space: str
    pattern: Pattern
    key: tuple[int, ...] | None = None
    timestamp: int | None = None

    def key_of(self, a: Item) -> tuple:
        return tuple(a[k] for k in self.key or ())


@dataclass
class InFlight:
    """A resource written where eager links may carry it: it goes to the first candidate space
    that asks for it."""

    item: Item
    candidates: tuple[str, ...]


class Network:
    """Atomic spaces with lazy and eager links."""

    def __init__(self) -> None:
        self.spaces: dict[str, Atomic] = {}
        self.lazy: set[frozenset[str]] = set()
        self.publications: list[tuple[str, Pattern]] = []
        self.subscriptions: list[Subscription] = []
        self.resource_patterns: list[Pattern] = []
        self.in_flight: list[InFlight] = []
        self._changed = trio.lowlevel.ParkingLot()

    # -- configuration ------------------------------------------------------------------------

    def space(self, name: str, *, resources: bool = False) -> Atomic:
        """Add an atomic space; ``resources=True`` declares every item written there a resource."""
        if name in self.spaces:
            raise ValueError(f"there is already a space named {name!r}")
        self.spaces[name] = Atomic(name, resources)
        return self.spaces[name]

    def declare_resource(self, pattern: Sequence[Any]) -> None:
        """Items matching ``pattern`` are resources (the tool language's ``res <...>``)."""
        self.resource_patterns.append(check_template(pattern))

    def lazy_link(self, a: str, b: str) -> None:
        """``LL(a, b)``: each space's reads also search the other (a symmetric link)."""
        self._get(a), self._get(b)
        self.lazy.add(frozenset((a, b)))

    def publish(self, space: str, pattern: Sequence[Any]) -> None:
        """``space -> pattern``: what is written in ``space`` and matches goes to subscribers."""
        self._get(space)
        self.publications.append((space, check_template(pattern)))

    def subscribe(
        self,
        space: str,
        pattern: Sequence[Any],
        *,
        key: Iterable[int] | None = None,
        timestamp: int | None = None,
    ) -> None:
        """``space <- pattern [key] [timestamp]`` (0-based field indexes)."""
        if timestamp is not None and key is None:
            raise ValueError("a timestamp policy needs a key")
        sub = Subscription(
            space, check_template(pattern), None if key is None else tuple(key), timestamp
        )
        self.subscriptions.append(sub)
        if key is not None:
            self._get(space).policies.append(sub)

    def _get(self, name: str) -> Atomic:
        try:
            return self.spaces[name]
        except KeyError:
            raise KeyError(f"no space named {name!r}") from None

    def is_resource(self, space: str, a: Item) -> bool:
        return self._get(space).resources or any(matches(p, a) for p in self.resource_patterns)

    # -- the primitives -----------------------------------------------------------------------

    def write(self, space: str, item: Sequence[Any]) -> None:
        a = check_tuple(tuple(item))
        here = self._get(space)
        targets = []
        for origin, p in self.publications:
            if origin == space and matches(p, a):
                for sub in self.subscriptions:
                    if matches(sub.pattern, a) and sub.space not in targets:
                        targets.append(sub.space)
        if self.is_resource(space, a):
            candidates = tuple(dict.fromkeys([space, *targets]))
            if len(candidates) == 1:
                here.items.append(a)
            else:
                self.in_flight.append(InFlight(a, candidates))
        else:
            self._add(here, a)
            for name in targets:
                if name != space:
                    self._arrive(self.spaces[name], a)
        self._changed.unpark_all()

    def read(self, space: str, pattern: Sequence[Any]) -> Item | None:
        """One attempt of the blocking ``read``: local, in flight, then lazy neighbours."""
        p = check_template(pattern)
        found = self._local(space, p)
        if found is not None:
            return found
        for link in self.lazy:
            if space in link:
                (other,) = link - {space}
                a = self._take_or_copy(self.spaces[other], p)
                if a is not None:
                    if not self.is_resource(other, a):
                        self._add(self.spaces[space], a)
                    return a
        return None

    def can_read(self, space: str, pattern: Sequence[Any]) -> bool:
        """Whether :meth:`read` would find something now (it changes nothing)."""
        p = check_template(pattern)
        near = [space, *(n for link in self.lazy if space in link for n in link - {space})]
        if any(matches(p, a) for n in near for a in self.spaces[n].items):
            return True
        return any(space in f.candidates and matches(p, f.item) for f in self.in_flight)

    def read_e(self, space: str, pattern: Sequence[Any]) -> Item | None:
        """``readE``: a matching item of ``space`` (or in flight to it), or None (the paper's ⊥)."""
        return self._local(space, check_template(pattern))

    def ldel(self, space: str, pattern: Sequence[Any]) -> int:
        """Delete every item of ``space`` matching ``pattern``; how many went."""
        p = check_template(pattern)
        here = self._get(space)
        before = len(here.items)
        here.items = [a for a in here.items if not matches(p, a)]
        return before - len(here.items)

    def gdel(self, pattern: Sequence[Any]) -> int:
        """Delete every match in every space and in flight, in one step."""
        p = check_template(pattern)
        gone = sum(self.ldel(name, p) for name in self.spaces)
        before = len(self.in_flight)
        self.in_flight = [f for f in self.in_flight if not matches(p, f.item)]
        return gone + before - len(self.in_flight)

    async def read_wait(
        self, space: str, pattern: Sequence[Any], timeout: float | None = None
    ) -> Item:
        """The blocking ``read``: waits (up to ``timeout`` s) for a match to be written."""
        with trio.move_on_after(float("inf") if timeout is None else timeout):
            while (found := self.read(space, pattern)) is None:
                await self._changed.park()
            return found
        raise SpaceTimeout(f"no item matched {pattern!r} in {space} within {timeout} s")

    # -- the data operators ------------------------------------------------------------------

    def _local(self, space: str, p: Pattern) -> Item | None:
        here = self._get(space)
        a = self._take_or_copy(here, p)
        if a is not None:
            return a
        for f in self.in_flight:
            if space in f.candidates and matches(p, f.item):
                self.in_flight.remove(f)  # delivered here, and read at once (a resource)
                return f.item
        return None

    def _take_or_copy(self, where: Atomic, p: Pattern) -> Item | None:
        """``D ⊖ a``: find a match; remove it if it is a resource."""
        for i, a in enumerate(where.items):
            if matches(p, a):
                if self.is_resource(where.name, a):
                    del where.items[i]
                return a
        return None

    def _add(self, where: Atomic, a: Item) -> None:
        """``D ⊕ a``: information once, resources as often as written."""
        if self.is_resource(where.name, a) or a not in where.items:
            where.items.append(a)

    def _arrive(self, where: Atomic, a: Item) -> None:
        """``D ⊎ a``: an item arriving by subscription, through the space's overwrite policy."""
        policy = next((s for s in where.policies if matches(s.pattern, a)), None)
        if policy is None:
            self._add(where, a)
            return
        k = policy.key_of(a)
        same_key = [b for b in where.items if matches(policy.pattern, b) and policy.key_of(b) == k]
        ts = policy.timestamp
        if ts is not None and any(b[ts] > a[ts] for b in same_key):
            return  # an older item never overwrites a newer one
        stale = {id(b) for b in same_key if ts is None or b[ts] <= a[ts]}
        where.items = [b for b in where.items if id(b) not in stale]
        self._add(where, a)


# --------------------------------------------------------------------------------------------
# Agent programs and the interleaving scheduler


@dataclass(frozen=True)
class Op:
    """A primitive an agent program yields: ``Op("write", item)``, ``Op("read", pattern)``,
    ``Op("readE", pattern)``, ``Op("ldel", pattern)``, ``Op("gdel", pattern)``, or
    ``Op("ext", label)`` (an external action, recorded in the trace)."""

    kind: str
    arg: Any


Program: TypeAlias = Generator[Op, Any, None]


@dataclass
class Agent:
    """A program running at a space (the paper's ``[P]^i``)."""

    name: str
    space: str
    program: Program
    waiting: Op | None = None
    done: bool = False


def run(
    network: Network,
    agents: Iterable[Agent],
    choose: Callable[[list[Agent]], Agent] | None = None,
    *,
    until: Callable[[], bool] = lambda: False,
    max_steps: int = 100_000,
) -> list[tuple[str, Any]]:
    """Interleave the agents one primitive at a time; ``choose`` picks the next among those that
    can move (default: uniformly at random). Stops when every agent is done or blocked, when
    ``until()`` holds, or after ``max_steps``. Returns the trace of ``ext`` actions as
    ``(agent, label)`` pairs."""
    agents = list(agents)
    pick = choose or random.Random().choice
    trace: list[tuple[str, Any]] = []
    for agent in agents:
        _advance(agent, None, trace)
    for _ in range(max_steps):
        if until():
            break
        ready = [a for a in agents if not a.done and _can_move(network, a)]
        if not ready:
            break
        agent = pick(ready)
        _advance(agent, _perform(network, agent), trace)
    return trace


def _can_move(network: Network, agent: Agent) -> bool:
    op = agent.waiting
    return op is None or op.kind != "read" or network.can_read(agent.space, op.arg)


def _perform(network: Network, agent: Agent) -> Any:
    op = agent.waiting
    assert op is not None
    if op.kind == "read":
        return network.read(agent.space, op.arg)
    if op.kind == "write":
        return network.write(agent.space, op.arg)
    if op.kind == "readE":
        return network.read_e(agent.space, op.arg)
    if op.kind == "ldel":
        return network.ldel(agent.space, op.arg)
    if op.kind == "gdel":
        return network.gdel(op.arg)
    raise ValueError(f"unknown primitive {op.kind!r}")


def _advance(agent: Agent, reply: Any, trace: list[tuple[str, Any]]) -> None:
    """Send ``reply`` to the program and run it to its next primitive (ext actions inline)."""
    try:
        op = agent.program.send(reply) if agent.waiting is not None else next(agent.program)
        while op.kind == "ext":
            trace.append((agent.name, op.arg))
            op = agent.program.send(None)
    except StopIteration:
        agent.done, agent.waiting = True, None
        return
    agent.waiting = op
