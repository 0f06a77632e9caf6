"""A federated space under trio: a :class:`~feds.spaces.federated.SpaceMember` on a node.

:class:`FederatedSpace` has the async pSpaces API (every call may need the network, so
``getp``, ``queryp``, ``get_all`` and ``query_all`` are coroutines too) and a ``store`` that a
gate serves like a local space's, so a jSpace client at any node's gate uses the federated
space unchanged::

    space = FederatedSpace.on_node(runtime, driver, "jobs")
    repo.add("jobs", space)
    space.put("job", 1)                    # owned by this node from now on
    print(await space.get("job", Formal(int), timeout=5))

A caller that gives up (a timeout, a cancelled task, a gate client that went away) never loses
a tuple: one that reaches it too late is put again at this node.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable
from typing import Any

import trio

from feds.actor import Ref, Turn
from feds.driver import Driver
from feds.runtime import NodeRuntime
from feds.spaces.federated import SpaceMember, Want
from feds.spaces.jtypes import check_tuple
from feds.spaces.space import SpaceTimeout
from feds.spaces.templates import check_template


class Call:
    """One request to the member, until it is answered or abandoned."""

    def __init__(self, deliver: Callable[[list[tuple]], None], remove: bool) -> None:
        self.deliver = deliver
        self.remove = remove
        self.want: Want | None = None
        self.abandoned = False


class MemberStore:
    """What a gate (or :class:`FederatedSpace`) needs of a space, as turns of the member.

    ``put``, ``wait`` and ``cancel`` have the shape of :class:`~feds.spaces.store.TupleStore`'s
    (a blocked get or query); :meth:`lookup` answers getp/queryp/getAll/queryAll later, with a
    list. Answers are delivered from a turn, never from the call itself.
    """

    def __init__(self, driver: Driver, member: SpaceMember) -> None:
        self.driver = driver
        self.member = member
        self.actor = driver.scheduler.spawn(member.start, name=f"space {member.name}")

    def _act(self, action: Callable[[Turn], None]) -> None:
        self.driver.act(self.actor.root, action)

    def put(self, fields: tuple) -> None:
        self._act(lambda t: self.member.put(t, fields))

    def _answer(self, call: Call, found: list[tuple]) -> None:
        if not call.abandoned:
            call.deliver(found)
        elif call.remove:
            for fields in found:  # taken for a caller that has gone: it lives on here
                self.put(fields)

    def _start(self, template: tuple, remove: bool, blocking: bool, call: Call) -> Call:
        def one(fields: tuple | None) -> None:
            self._answer(call, [] if fields is None else [fields])

        call.want = Want(template, remove, blocking, one)
        self._act(lambda t: self.member.want(t, call.want))
        return call

    def wait(self, template: tuple, remove: bool, deliver: Callable[[tuple], None]) -> Call:
        """A blocking get/query; ``deliver`` gets the tuple."""
        return self._start(template, remove, True, Call(lambda f: deliver(f[0]), remove))

    def lookup(
        self, template: tuple, remove: bool, every: bool, deliver: Callable[[list[tuple]], None]
    ) -> Call:
        """getp/queryp (a list of at most one) or, with ``every``, getAll/queryAll."""
        call = Call(deliver, remove)
        if not every:
            return self._start(template, remove, False, call)
        self._act(
            lambda t: self.member.want_all(t, template, remove, lambda f: self._answer(call, f))
        )
        return call

    def cancel(self, call: Call) -> None:
        """Abandon ``call``: it is never answered; what it took is put back here."""
        call.abandoned = True
        if call.want is not None:
            want = call.want
            self._act(lambda t: self.member.cancel(want))


class FederatedSpace:
    """The async pSpaces API over federated space ``name``, as member ``me`` at ``access``."""

    def __init__(self, driver: Driver, name: str, me: str, access: Ref) -> None:
        self.name = name
        self.store = MemberStore(driver, SpaceMember(name, me, access))

    @classmethod
    def on_node(cls, runtime: NodeRuntime, driver: Driver, name: str) -> FederatedSpace:
        """Federated space ``name`` with this node as its member (driver: the node's).

        The member's name is the node's plus a random suffix: a node that restarts is a new
        member, so an answer meant for its previous run is never taken for one of its new
        requests (the previous run's tuples are gone with it)."""
        return cls(driver, name, f"{runtime.name}~{secrets.token_hex(4)}", runtime.node.access)

    def __repr__(self) -> str:
        return f"<FederatedSpace {self.name!r} at {self.store.member.me}>"

    def put(self, *fields: Any) -> bool:
        """Own ``fields`` at this node and make them visible everywhere; returns True."""
        self.store.put(check_tuple(fields))
        return True

    async def get(self, *template: Any, timeout: float | None = None) -> tuple:
        return (await self._call(template, True, False, True, timeout))[0]

    async def query(self, *template: Any, timeout: float | None = None) -> tuple:
        return (await self._call(template, False, False, True, timeout))[0]

    async def getp(self, *template: Any, timeout: float | None = None) -> tuple | None:
        found = await self._call(template, True, False, False, timeout)
        return found[0] if found else None

    async def queryp(self, *template: Any, timeout: float | None = None) -> tuple | None:
        found = await self._call(template, False, False, False, timeout)
        return found[0] if found else None

    async def get_all(self, *template: Any, timeout: float | None = None) -> list[tuple]:
        return await self._call(template, True, True, False, timeout)

    async def query_all(self, *template: Any, timeout: float | None = None) -> list[tuple]:
        return await self._call(template, False, True, False, timeout)

    getAll = get_all  # the pSpaces names
    queryAll = query_all

    async def _call(
        self, template: tuple, remove: bool, every: bool, blocking: bool, timeout: float | None
    ) -> list[tuple]:
        template = check_template(template)
        box: list[list[tuple]] = []
        done = trio.Event()

        def deliver(found: list[tuple]) -> None:
            box.append(found)
            done.set()

        store = self.store
        if blocking:
            call = store.wait(template, remove, lambda f: deliver([f]))
        else:
            call = store.lookup(template, remove, every, deliver)
        try:
            with trio.fail_after(math.inf if timeout is None else timeout):
                await done.wait()
        except trio.TooSlowError:
            if box:
                return box[0]
            store.cancel(call)
            raise SpaceTimeout(f"no answer for {template!r} within {timeout} s") from None
        except BaseException:
            if box and remove:  # answered in the instant we were cancelled: put it back
                for fields in box[0]:
                    store.put(fields)
            store.cancel(call)
            raise
        return box[0]
