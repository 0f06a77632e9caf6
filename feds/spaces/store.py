"""The sans-IO core of a space: its tuples in retrieval order, and the callers waiting on it.

A :class:`TupleStore` has a :class:`Kind` that fixes where ``put`` places a tuple and where a
retrieval looks (jSpace's ``SequentialSpace`` and subclasses):

============ ============ ======================================== ==========================
kind         put          get / query                              getAll / queryAll
============ ============ ======================================== ==========================
sequential   at the end   the oldest matching tuple                every match, oldest first
queue        at the end   the oldest tuple, if it matches          the matching prefix
stack        at the front the newest tuple, if it matches          the matching prefix
pile         at the front the newest matching tuple                every match, newest first
random       at the end   from a random start, the first match     every match, oldest first
                          going round
============ ============ ======================================== ==========================

Waiters (blocked get/query) are served in arrival order after every ``put``: each one looks again
with the kind's rule, so a queue waiter is only served when the head matches. A waiter is a
callback, called at most once, synchronously, with the tuple it found (removed already for a get).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from feds.spaces.templates import matches


class Kind(Enum):
    """A space's retrieval discipline; the value is its name on the command line."""

    SEQUENTIAL = "sequential"
    QUEUE = "queue"
    STACK = "stack"
    PILE = "pile"
    RANDOM = "random"

    @property
    def puts_in_front(self) -> bool:
        return self in (Kind.STACK, Kind.PILE)

    @property
    def head_only(self) -> bool:
        return self in (Kind.QUEUE, Kind.STACK)


@dataclass(eq=False, slots=True)
class Waiter:
    """A blocked get (``remove``) or query, registered until it is served or cancelled."""

    template: tuple
    remove: bool
    deliver: Callable[[tuple], None]


class TupleStore:
    """Tuples in retrieval order plus the waiters; every method is synchronous and instant."""

    def __init__(self, kind: Kind = Kind.SEQUENTIAL, rng: random.Random | None = None) -> None:
        self.kind = kind
        self.tuples: list[tuple] = []
        self.waiters: list[Waiter] = []
        self._rng = rng if rng is not None else random.Random()

    def __len__(self) -> int:
        return len(self.tuples)

    def put(self, fields: tuple) -> None:
        if self.kind.puts_in_front:
            self.tuples.insert(0, fields)
        else:
            self.tuples.append(fields)
        if self.waiters:
            self._serve_waiters()

    def _index(self, template: tuple) -> int | None:
        tuples = self.tuples
        n = len(tuples)
        if not n:
            return None
        if self.kind.head_only:
            return 0 if matches(template, tuples[0]) else None
        start = self._rng.randrange(n) if self.kind is Kind.RANDOM else 0
        for k in range(n):
            i = (start + k) % n
            if matches(template, tuples[i]):
                return i
        return None

    def find(self, template: tuple, remove: bool) -> tuple | None:
        """The tuple a get (``remove``) or query would return now, or None."""
        i = self._index(template)
        if i is None:
            return None
        return self.tuples.pop(i) if remove else self.tuples[i]

    def find_all(self, template: tuple, remove: bool) -> list[tuple]:
        """What getAll (``remove``) or queryAll returns now, in the kind's order."""
        if self.kind.head_only:
            n = 0
            for t in self.tuples:
                if not matches(template, t):
                    break
                n += 1
            found = self.tuples[:n]
            if remove:
                del self.tuples[:n]
            return found
        found = [t for t in self.tuples if matches(template, t)]
        if remove and found:
            self.tuples = [t for t in self.tuples if not matches(template, t)]
        return found

    def remove_all(self, template: tuple) -> int:
        """Delete every matching tuple, whatever the kind; the number deleted."""
        before = len(self.tuples)
        self.tuples = [t for t in self.tuples if not matches(template, t)]
        return before - len(self.tuples)

    def wait(self, template: tuple, remove: bool, deliver: Callable[[tuple], None]) -> Waiter:
        """Register a waiter; the caller has looked already (``find``) and found nothing."""
        waiter = Waiter(template, remove, deliver)
        self.waiters.append(waiter)
        return waiter

    def cancel(self, waiter: Waiter) -> None:
        """Forget a waiter that was not served (no effect if it was)."""
        if waiter in self.waiters:
            self.waiters.remove(waiter)

    def _serve_waiters(self) -> None:
        for waiter in list(self.waiters):
            if waiter not in self.waiters:
                continue
            found = self.find(waiter.template, waiter.remove)
            if found is not None:
                self.waiters.remove(waiter)
                waiter.deliver(found)
            if not self.tuples:
                break
