"""Local spaces: the pSpaces ``Space`` API over a :class:`~feds.spaces.store.TupleStore`.

``put``, ``getp``, ``queryp``, ``get_all`` and ``query_all`` never block and are plain methods;
``get`` and ``query`` block until a matching tuple is put, so they are trio coroutines with an
optional ``timeout`` (seconds; :class:`SpaceTimeout` when it passes) and are cancellable like any
trio call. A get that is cancelled or times out never loses a tuple: if one was taken for it in
the same instant, it is put back.

::

    space = SequentialSpace()
    space.put("coffee", 3)
    print(space.getp("coffee", Formal(int)))      # ('coffee', 3)
    print(await space.get("tea", ANY, timeout=1))  # SpaceTimeout after one second

Fields are typed (:mod:`feds.spaces.jtypes`); templates mix actual values and
:class:`~feds.spaces.templates.Formal` fields. camelCase aliases (``getAll``, ``queryAll``) are
there for code written after the pSpaces guideline.
"""

from __future__ import annotations

import random
from typing import Any

import trio

from feds.spaces.jtypes import check_tuple
from feds.spaces.store import Kind, TupleStore
from feds.spaces.templates import check_template


class SpaceError(Exception):
    """A space operation failed (an unknown remote space, a refused request, a closed link)."""


class SpaceTimeout(SpaceError, TimeoutError):
    """A blocking get or query found no match within its timeout."""


class Space:
    """A local tuple space of one :class:`Kind` (``Space(Kind.QUEUE)`` or the named subclasses)."""

    KIND = Kind.SEQUENTIAL
    """The kind of ``Space()``; each named subclass sets its own."""

    def __init__(self, kind: Kind | str | None = None, *, rng: random.Random | None = None):
        self.store = TupleStore(self.KIND if kind is None else Kind(kind), rng)

    @property
    def kind(self) -> Kind:
        return self.store.kind

    def __len__(self) -> int:
        return len(self.store)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.kind.value}, {len(self)} tuples>"

    def put(self, *fields: Any) -> bool:
        """Add the tuple ``fields``; serves waiting gets/queries. Returns True (as jSpace does)."""
        self.store.put(check_tuple(fields))
        return True

    def getp(self, *template: Any) -> tuple | None:
        """Take a matching tuple now, or None."""
        return self.store.find(check_template(template), True)

    def queryp(self, *template: Any) -> tuple | None:
        """Read a matching tuple now, or None."""
        return self.store.find(check_template(template), False)

    def get_all(self, *template: Any) -> list[tuple]:
        """Take every matching tuple (never blocks; ``[]`` if none)."""
        return self.store.find_all(check_template(template), True)

    def query_all(self, *template: Any) -> list[tuple]:
        """Read every matching tuple (never blocks; ``[]`` if none)."""
        return self.store.find_all(check_template(template), False)

    getAll = get_all  # the pSpaces names
    queryAll = query_all

    async def get(self, *template: Any, timeout: float | None = None) -> tuple:
        """Take a matching tuple, waiting for one to be put (up to ``timeout`` seconds)."""
        return await self._wait(check_template(template), True, timeout)

    async def query(self, *template: Any, timeout: float | None = None) -> tuple:
        """Read a matching tuple, waiting for one to be put (up to ``timeout`` seconds)."""
        return await self._wait(check_template(template), False, timeout)

    async def _wait(self, template: tuple, remove: bool, timeout: float | None) -> tuple:
        await trio.lowlevel.checkpoint()
        found = self.store.find(template, remove)
        if found is not None:
            return found
        box: list[tuple] = []
        done = trio.Event()

        def deliver(fields: tuple) -> None:
            box.append(fields)
            done.set()

        waiter = self.store.wait(template, remove, deliver)
        try:
            with trio.fail_after(float("inf") if timeout is None else timeout):
                await done.wait()
        except trio.TooSlowError:
            if box:
                return box[0]
            raise SpaceTimeout(f"no tuple matched {template!r} within {timeout} s") from None
        except BaseException:
            if box and remove:  # taken in the instant we were cancelled: give it back
                self.store.put(box[0])
            raise
        finally:
            self.store.cancel(waiter)
        return box[0]


class SequentialSpace(Space):
    """Retrieval returns the oldest matching tuple."""

    KIND = Kind.SEQUENTIAL


class QueueSpace(Space):
    """Retrieval returns the oldest tuple, if it matches."""

    KIND = Kind.QUEUE


class StackSpace(Space):
    """Retrieval returns the newest tuple, if it matches."""

    KIND = Kind.STACK


class PileSpace(Space):
    """Retrieval returns the newest matching tuple."""

    KIND = Kind.PILE


class RandomSpace(Space):
    """Retrieval returns a matching tuple found from a random starting point."""

    KIND = Kind.RANDOM
