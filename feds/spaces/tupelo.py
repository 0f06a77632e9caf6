"""Tupelo-style subspaces: a tuplespace of list/map tuples, sharded by tagged subspaces.

A subspace is a predicate, not a container: it is defined by *writing* a metadata tuple into the
space itself, ``{"__tupelo__": "subspace", "tag": "wine", "template": <POT>, "addr": ...}``
(:func:`subspace_tuple`), and a tuple belongs to every subspace whose POT
(:class:`~feds.spaces.pot.Pot`) it matches. Metadata tuples form the built-in subspace
``"tupelo subspace"``.

A :class:`TupeloClient` subscribes to some tags (or to everything): it sees, reads and takes only
tuples of those subspaces, and receives (:attr:`TupeloClient.received`) only their writes; it may
write anything. A transaction must not cross subspace boundaries except by writing: every tuple
it reads or takes has the same tag set ``S_T``, and every tuple it writes has a tag set inside
``S_T`` (:class:`TransactionSubspaceError` otherwise; write-only transactions always pass).

:class:`TupeloSpace` is the sans-IO state (instant methods); blocking reads and takes are trio
coroutines with a timeout.

Over the feds overlay, a Tupelo tuple travels as the assertion ``<tupelo tuple>``
(:func:`as_assertion`), and a node or client subscribes to a subspace by observing
:func:`subscription_pattern` of its POT; :func:`in_subspace` is the check to apply on what
arrives when the POT is not exactly expressible as a feds pattern (``Pot.exact``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import trio

from feds import pattern_forms as pf
from feds.spaces.pot import Pot, PotError, to_feds_value
from feds.spaces.space import SpaceTimeout
from feds.values import FrozenDict, Record, Symbol, Value

META_TAG = "tupelo subspace"
META_TEMPLATES = (
    Pot({"__tupelo__": {"value": "subspace"}, "tag": None, "addr": None, "template": None}),
    Pot({"__tupelo__": {"value": "subspace"}, "tag": None, "template": None}),
)
"""The metadata subspace (Tupelo's template; ``addr`` may be left out)."""


class TransactionSubspaceError(Exception):
    """A transaction whose tuples cross subspace boundaries other than by writing."""


def subspace_tuple(tag: str, template: list | dict, addr: str | None = None) -> dict:
    """The metadata tuple that defines subspace ``tag`` by a POT ``template``."""
    Pot(template)  # refuse a bad template before it is written
    return {"__tupelo__": "subspace", "tag": tag, "addr": addr, "template": template}


def _is_meta(t: Any) -> bool:
    return any(p.matches(t) for p in META_TEMPLATES)


class TupeloSpace:
    """The tuples, the subspaces their metadata defines, and the clients subscribed to them."""

    def __init__(self) -> None:
        self.tuples: list[Any] = []
        self.subspaces: dict[str, Pot] = {}
        self.clients: list[TupeloClient] = []
        self._changed = trio.lowlevel.ParkingLot()

    def client(self, subscribe: Iterable[str] | None = None) -> TupeloClient:
        """A client subscribed to the tags ``subscribe`` (None: the whole space)."""
        c = TupeloClient(self, None if subscribe is None else frozenset(subscribe))
        self.clients.append(c)
        return c

    def tags(self, t: Any) -> frozenset[str]:
        """The tags of every subspace ``t`` belongs to."""
        found = {tag for tag, pot in self.subspaces.items() if pot.matches(t)}
        if _is_meta(t):
            found.add(META_TAG)
        return frozenset(found)

    def _check_tuple(self, t: Any) -> None:
        if not isinstance(t, list | tuple | dict):
            raise TypeError(f"a Tupelo tuple is a list or a map, got {t!r}")
        if _is_meta(t):
            if not isinstance(t["tag"], str):
                raise PotError(f"a subspace tag is a string, got {t['tag']!r}")
            Pot(t["template"])

    def _write(self, t: Any) -> None:
        self.tuples.append(t)
        if _is_meta(t):
            self.subspaces[t["tag"]] = Pot(t["template"])
        tags = self.tags(t)
        for c in self.clients:
            if c.subscribes(tags):
                c.received.append(t)

    def _remove(self, t: Any) -> None:
        for i, u in enumerate(self.tuples):
            if u is t:
                del self.tuples[i]
                if _is_meta(t):
                    self.subspaces.pop(t["tag"], None)
                return

    def _changed_now(self) -> None:
        self._changed.unpark_all()


class TupeloClient:
    """One client's view: its subscribed subspaces, and the transactions it runs."""

    def __init__(self, space: TupeloSpace, subscription: frozenset[str] | None) -> None:
        self.space = space
        self.subscription = subscription
        self.received: list[Any] = []
        """Every tuple written (by anyone) into a subspace this client subscribes to."""

    def subscribes(self, tags: frozenset[str]) -> bool:
        return self.subscription is None or bool(tags & self.subscription)

    def visible(self) -> list[Any]:
        """The tuples of the subscribed subspaces (Tupelo keeps these as the client's replica)."""
        space = self.space
        return [t for t in space.tuples if self.subscribes(space.tags(t))]

    # -- single operations ----------------------------------------------------------------------

    def write(self, *tuples: Any) -> None:
        self.transaction(writes=tuples)

    def read_all(self, template: list | dict | Pot) -> list[Any]:
        pot = _pot(template)
        return [t for t in self.visible() if pot.matches(t)]

    def read_nowait(self, template: list | dict | Pot) -> Any | None:
        done = self.transaction(reads=[template])
        return None if done is None else done[0][0]

    def take_nowait(self, template: list | dict | Pot) -> Any | None:
        done = self.transaction(takes=[template])
        return None if done is None else done[1][0]

    async def read(self, template: list | dict | Pot, timeout: float = math.inf) -> Any:
        return (await self.transaction_wait(reads=[template], timeout=timeout))[0][0]

    async def take(self, template: list | dict | Pot, timeout: float = math.inf) -> Any:
        return (await self.transaction_wait(takes=[template], timeout=timeout))[1][0]

    # -- transactions -------------------------------------------------------------------------

    def transaction(
        self,
        reads: Iterable[list | dict | Pot] = (),
        takes: Iterable[list | dict | Pot] = (),
        writes: Iterable[Any] = (),
    ) -> tuple[list, list] | None:
        """Atomically read, take and write; ``(read, taken)`` tuples, or None (and no effect)
        if some template has no match now. Raises :class:`TransactionSubspaceError` if the
        tuples cross subspaces other than by writing."""
        space = self.space
        reads, takes, writes = [_pot(r) for r in reads], [_pot(t) for t in takes], list(writes)
        for w in writes:
            space._check_tuple(w)
        visible = self.visible()
        read = [next((t for t in visible if p.matches(t)), None) for p in reads]
        taken: list[Any] = []
        for p in takes:
            t = next((t for t in visible if p.matches(t) and all(t is not u for u in taken)), None)
            taken.append(t)
        if any(t is None for t in read) or any(t is None for t in taken):
            return None
        self._check_subspaces(read + taken, writes)
        for t in taken:
            space._remove(t)
        for w in writes:
            space._write(w)
        if writes or taken:
            space._changed_now()
        return read, taken

    def _check_subspaces(self, looked_at: list[Any], writes: list[Any]) -> None:
        if not looked_at:
            return  # write-only transactions always succeed
        tag_sets = {self.space.tags(t) for t in looked_at}
        if len(tag_sets) > 1:
            shown = ", ".join(sorted(str(sorted(s)) for s in tag_sets))
            raise TransactionSubspaceError(
                f"tuples crossing subspaces: a transaction's reads and takes must all be in the "
                f"same subspaces, these are in {shown}"
            )
        (s_t,) = tag_sets
        for w in writes:
            s_w = self.space.tags(w)
            if not s_w <= s_t:
                raise TransactionSubspaceError(
                    f"writes crossing subspaces: {w!r} is in {sorted(s_w)}, outside "
                    f"{sorted(s_t)} where this transaction reads or takes"
                )

    async def transaction_wait(
        self,
        reads: Iterable[list | dict | Pot] = (),
        takes: Iterable[list | dict | Pot] = (),
        writes: Iterable[Any] = (),
        timeout: float = math.inf,
    ) -> tuple[list, list]:
        """:meth:`transaction`, waiting (up to ``timeout`` s) until every template matches."""
        reads, takes, writes = list(reads), list(takes), list(writes)
        with trio.move_on_after(timeout):
            while True:
                done = self.transaction(reads, takes, writes)
                if done is not None:
                    return done
                await self.space._changed.park()
        raise SpaceTimeout(f"the transaction found no match within {timeout} s")


TUPLE_LABEL = Symbol("tupelo")


def as_assertion(t: Any) -> Record:
    """A Tupelo tuple as the feds assertion ``<tupelo t>``."""
    return Record(TUPLE_LABEL, (to_feds_value(t),))


def subscription_pattern(pot: Pot) -> Value:
    """The feds pattern that observes ``<tupelo t>`` for the tuples of ``pot``, capturing ``t``."""
    return pf.rec_group(TUPLE_LABEL, [pf.bind(pot.to_pattern())])


def from_feds_value(v: Value) -> Any:
    """A captured feds value back as a Tupelo tuple (sequences to lists, dicts to maps)."""
    if isinstance(v, tuple):
        return [from_feds_value(x) for x in v]
    if isinstance(v, FrozenDict):
        return {from_feds_value(k): from_feds_value(x) for k, x in v.items()}
    return v


def in_subspace(pot: Pot, captured: Value) -> bool:
    """The residual check at the receiver: exact POTs need none."""
    return pot.exact or pot.matches(from_feds_value(captured))


def _pot(template: list | dict | Pot) -> Pot:
    return template if isinstance(template, Pot) else Pot(template)
