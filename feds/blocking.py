"""A blocking client for synchronous code (scripts, the Spark driver), backed by one trio thread.

::

    with feds.BlockingClient("127.0.0.1:7401") as ds:
        key = ds.assert_(record("present", "Alice"))
        ds.send(record("speak", "Alice", "hello"))
        ds.sync()
        print(ds.query("<present $who>"))
        for event in ds.watch("<speak $who $text>", timeout=5):
            print(event)
        with ds.observe("<present $who>") as observation:
            key = ds.replace(key, record("present", "Bob"))  # one turn: no gap
            ds.sync_local()                                  # this client's node only
            print(observation.take())                        # the events so far, no waiting

Every call is forwarded to the async :class:`~feds.client.Session` running in the background
thread; errors (:class:`~feds.client.FedsError`, ``TypeError`` for a non-value, a pattern
error) surface in the caller's thread.

Calls that send (``assert_``, ``send``, ``retract``, ``publish_many``, ``send_many``,
``retract_many``) wait while the connection is backlogged (:meth:`Session.drain
<feds.client.Session.drain>`), so a synchronous producer cannot outrun the socket: the
connection holds at most the transport's low-water mark plus one call's (or one :data:`BATCH`'s)
worth of values. The bulk calls check every value before they send any.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final

import trio

from feds.client import (
    DEFAULT_TIMEOUT,
    Event,
    FedsError,
    Observation,
    Session,
    _checked,
    connect,
)
from feds.reactive import PatternLike
from feds.values import Value

BATCH: Final = 256
"""Values that ``publish_many``, ``send_many`` and ``retract_many`` queue between two drains
(one packet)."""


class BlockingClient:
    """A connection to one node, usable from ordinary (non-async) code."""

    def __init__(
        self,
        address: str,
        *,
        name: str = "blocking-client",
        timeout: float = DEFAULT_TIMEOUT,
        reconnect: bool = False,
    ) -> None:
        """``reconnect``: see :func:`feds.client.connect` (without it, a lost connection makes
        every later call, and a ``watch`` under way, raise :class:`FedsError`)."""
        self.address = address
        self._reconnect = reconnect
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._session: Session | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._thread = threading.Thread(
            target=trio.run, args=(self._main, name, timeout), name=f"feds {name}", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(timeout + 1.0):
            raise FedsError(f"timed out after {timeout} s connecting to {address}")
        if self._error is not None:
            raise self._error

    async def _main(self, name: str, timeout: float) -> None:
        try:
            async with connect(
                self.address, name=name, timeout=timeout, reconnect=self._reconnect
            ) as session:
                self._session = session
                self._token = trio.lowlevel.current_trio_token()
                self._stop = trio.Event()
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:  # handed to the caller's thread
            self._error = exc
        finally:
            self._ready.set()

    def _run_sync(self, fn: Any, *args: Any) -> Any:
        if self._token is None or self._stop is None or self._stop.is_set():
            raise FedsError("the client is closed")
        try:
            return trio.from_thread.run_sync(fn, *args, trio_token=self._token)
        except trio.RunFinishedError:
            raise FedsError(f"the connection to {self.address} is gone") from None

    def _run(self, afn: Any, *args: Any) -> Any:
        if self._token is None or self._stop is None or self._stop.is_set():
            raise FedsError("the client is closed")
        try:
            return trio.from_thread.run(afn, *args, trio_token=self._token)
        except trio.RunFinishedError:
            raise FedsError(f"the connection to {self.address} is gone") from None

    @property
    def session(self) -> Session:
        assert self._session is not None
        return self._session

    def _produce(self, action: Callable[[], Any]) -> Any:
        """Call ``action`` in the background thread; if that leaves the connection backlogged,
        wait there until it has drained (a second hop, only then)."""
        result, backlogged = self._run_sync(lambda: (action(), self.session.backlogged))
        if backlogged:
            self._run(self.session.drain)
        return result

    def assert_(self, value: Value) -> int:
        """Assert ``value``; returns a key for :meth:`retract`."""
        return self._produce(lambda: self.session.assert_(value))

    def publish_many(self, values: Iterable[Value]) -> list[int]:
        """Assert many values, :data:`BATCH` at a time with a drain after each, in one hop to the
        background thread; returns their keys (see :meth:`Session.publish_many
        <feds.client.Session.publish_many>`)."""
        return self._many(self.session.publish_many, values)

    def retract(self, key: int) -> None:
        self._produce(lambda: self.session.retract(key))

    def replace(self, key: int, value: Value) -> int:
        """Assert ``value`` and withdraw ``key``'s assertion in one turn (no gap); see
        :meth:`Session.replace <feds.client.Session.replace>`."""
        return self._produce(lambda: self.session.replace(key, value))

    def send(self, value: Value) -> None:
        self._produce(lambda: self.session.send(value))

    def send_many(self, values: Iterable[Value]) -> None:
        """Send many values as messages, :data:`BATCH` at a time with a drain after each, in one
        hop to the background thread."""
        self._many(self.session.send_many, values)

    def retract_many(self, keys: Iterable[int]) -> None:
        """Withdraw the assertions made under ``keys``, :data:`BATCH` at a time with a drain
        after each, in one hop to the background thread."""
        self._many(self.session.retract_many, keys, values=False)

    def _many(
        self, act_many: Callable[[Any], list[Any] | None], items: Iterable[Any], values: bool = True
    ) -> list[Any]:
        """``act_many`` on ``items``, :data:`BATCH` at a time with a drain after each; the
        results joined. ``values``: the items are values, all checked before any is acted on
        (``TypeError`` for the first that is not one)."""
        items = _checked(items) if values else tuple(items)

        async def run() -> list[Any]:
            results: list[Any] = []
            for start in range(0, len(items), BATCH):
                results.extend(act_many(items[start : start + BATCH]) or ())
                await self.session.drain()
            return results

        return self._run(run)

    def sync(self, timeout: float | None = DEFAULT_TIMEOUT) -> None:
        """Block until every earlier action has reached every node of the overlay."""
        self._run(self.session.sync, timeout)

    def sync_local(self, timeout: float | None = DEFAULT_TIMEOUT) -> None:
        """Block until this client's node (not the whole overlay) has applied every earlier
        action; see :meth:`Session.sync_local <feds.client.Session.sync_local>`."""
        self._run(self.session.sync_local, timeout)

    def query(self, pattern: PatternLike, timeout: float | None = DEFAULT_TIMEOUT) -> list[tuple]:
        """Every distinct match of ``pattern`` asserted anywhere before the query began."""
        return self._run(self.session.query, pattern, timeout)

    def watch(self, pattern: PatternLike, timeout: float | None = None) -> Iterator[Event]:
        """Yield events for ``pattern`` as they happen; stops after ``timeout`` s of silence."""
        with self.observe(pattern) as observation:
            while (event := observation.next(timeout)) is not None:
                yield event

    def observe(self, pattern: PatternLike) -> BlockingObservation:
        """Observe ``pattern`` until the result is closed (use it in a ``with``)."""
        return BlockingObservation(self, pattern)

    def close(self) -> None:
        """Close the connection (what this client asserted is retracted) and stop the thread."""
        if self._stop is not None and self._token is not None and not self._stop.is_set():
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(timeout=5.0)

    def __enter__(self) -> BlockingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BlockingObservation:
    """One observer of a :class:`BlockingClient`: its events, read from the caller's thread.

    The Observe is asserted (in order with the client's other actions) when this is made, and
    withdrawn by :meth:`close`. Events wait in the async :class:`~feds.client.Observation`.
    """

    def __init__(self, client: BlockingClient, pattern: PatternLike) -> None:
        self._client = client
        self._scope: trio.CancelScope | None = None
        self._observation: Observation | None = None
        self._fetched: deque[Event] = deque()  # taken from the background thread, not read yet
        started = threading.Event()
        failed: list[BaseException] = []

        async def hold() -> None:
            try:
                with trio.CancelScope() as self._scope:
                    async with client.session.observe(pattern) as self._observation:
                        started.set()
                        await trio.sleep_forever()
            except Exception as exc:  # handed to the caller's thread
                failed.append(exc)
            finally:
                started.set()

        client._run_sync(trio.lowlevel.spawn_system_task, hold)
        started.wait()
        if failed:
            raise failed[0]

    def next(self, timeout: float | None = None) -> Event | None:
        """The next event, waiting at most ``timeout`` seconds; None on timeout or once closed.
        Raises :class:`FedsError` if the connection to the node is lost.

        One hop to the background thread fetches every event that has arrived (at least one),
        so reading a batch costs one hop, not one per event."""
        observation = self._observation
        if observation is None or self._scope is None:
            return None
        if self._fetched:
            return self._fetched.popleft()

        async def receive() -> list[Event]:
            with trio.move_on_after(math.inf if timeout is None else timeout):
                try:
                    first = await observation.__anext__()
                except StopAsyncIteration:  # closed
                    return []
                return [first, *observation.take()]
            return []

        events = self._client._run(receive)
        if not events:
            return None
        self._fetched.extend(events[1:])
        return events[0]

    def take(self) -> list[Event]:
        """Every event received so far and not read yet, in order; never waits."""
        observation = self._observation
        if observation is None or self._scope is None:
            return []
        events = list(self._fetched)
        self._fetched.clear()
        return events + self._client._run_sync(observation.take)

    def close(self) -> None:
        """Withdraw the Observe (idempotent)."""
        self._fetched.clear()
        scope, self._scope = self._scope, None
        if scope is not None:
            with contextlib.suppress(FedsError):
                self._client._run_sync(scope.cancel)

    def __enter__(self) -> BlockingObservation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
