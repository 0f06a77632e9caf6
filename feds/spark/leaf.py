"""A feds leaf node inside the Spark driver process: the trio edge of :mod:`feds.spark`.

:class:`Leaf` runs a real :class:`~feds.runtime.NodeRuntime` (its own fragment, an uplink to its
parent with the deployment's protocol, re-dialed with backoff when lost) in a trio loop on a
daemon thread, which keeps serving while Spark blocks the driver. It listens on two ports:

* the node's own listener, where feds clients (and Spark readers) connect as to any node;
* the staging listener (:mod:`feds.spark.wire`), where Spark tasks stage rows and commit.

A :class:`Holder` actor on the leaf's scheduler holds every publication's assertions at the
leaf's local access, so they live as long as the leaf does, and applies each commit's diff in
one turn, additions before removals. The deciding logic is in :mod:`feds.spark.publications`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import suppress
from functools import partial
from typing import Any

import trio

from feds.actor import Facet, Handle, Turn
from feds.client import parse_address, single_errors
from feds.codec import NEED_DATA, CodecError, FrameDecoder, encode_frame
from feds.driver import Driver
from feds.gc_pauses import pauses_bounded
from feds.limits import DEFAULT_NET_LIMITS, NetLimits
from feds.runtime import InsecureListen, NodeRuntime, is_loopback
from feds.spark.publications import Diff, PublicationError, Publications
from feds.spark.wire import ABORT, COMMIT, ERROR, OK, STAGE, STAGED
from feds.transport import listener_port
from feds.values import Record, Value

log = logging.getLogger("feds.spark")

STEP = 256
"""Rows of a commit applied between two points where its turn may be paused."""


class Holder:
    """The actor that holds the publications' assertions at the leaf's local access."""

    def __init__(self, runtime: NodeRuntime) -> None:
        self.runtime = runtime
        self.publications = Publications()
        self.handles: dict[tuple[str, Value], list[Handle]] = {}
        self.facet: Facet
        runtime.scheduler.spawn(self._boot, name="spark publications")

    def _boot(self, turn: Turn) -> None:
        self.facet = turn.facet

    def apply(self, turn: Turn, name: str, diff: Diff) -> Iterator[int]:
        """Apply ``diff`` to publication ``name`` in this turn: adds, removes, then messages,
        yielding every :data:`STEP` rows, so that the leaf's node keeps serving its links
        meanwhile (a commit of a million rows takes seconds; see :data:`~feds.actor.TurnAction`)."""
        access = self.runtime.node.access
        handles = self.handles
        for i, record in enumerate(diff.adds, 1):
            handles.setdefault((name, record), []).append(turn.publish(access, record))
            if not i % STEP:
                yield STEP
        for i, record in enumerate(diff.removes, 1):
            held = handles[(name, record)]
            turn.retract(held.pop())
            if not held:
                del handles[(name, record)]
            if not i % STEP:
                yield STEP
        for i, record in enumerate(diff.messages, 1):
            turn.message(access, record)
            if not i % STEP:
                yield STEP


class Leaf:
    """A leaf node of a running overlay, hosted in this process (see :func:`feds.spark.join`).

    ``parent`` is ``host:port``; ``host`` is where the leaf listens (``0.0.0.0`` or the
    driver's address on a cluster, so executors can reach it; ``advertise`` is the address they
    dial, by default ``host``). ``limits`` bound the leaf's connections as a node's.

    Neither of its ports is authenticated (a leaf cannot join a deployment with secrets yet):
    whoever reaches them can read and publish through the node, and stage and commit rows. So a
    leaf listens on loopback only, unless ``allow_unauthenticated`` says the network is trusted
    (:class:`~feds.runtime.InsecureListen` otherwise), as a node of such a deployment would.
    """

    def __init__(
        self,
        parent: str,
        protocol: str,
        *,
        name: str = "spark",
        host: str = "127.0.0.1",
        advertise: str | None = None,
        timeout: float = 10.0,
        limits: NetLimits = DEFAULT_NET_LIMITS,
        allow_unauthenticated: bool = False,
    ) -> None:
        if not allow_unauthenticated and not is_loopback(host):
            raise InsecureListen(
                f"feds leaf {name}: refusing to listen on {host} without authentication: anyone "
                "who can reach it could read every assertion and publish or commit rows. On a "
                "trusted network, set allow-unauthenticated = true in the topology's [security] "
                "(or pass allow_unauthenticated=True)"
            )
        self.name = name
        self.parent = parse_address(parent)
        self.protocol = protocol
        self.host = host
        self.advertise = advertise or host
        self.driver = Driver()
        self.runtime = NodeRuntime(
            self.driver.scheduler,
            name,
            protocol,
            limits=limits,
            allow_unauthenticated=allow_unauthenticated,
        )
        self.holder = Holder(self.runtime)
        self.driver.scheduler.run_until_idle()
        self.client_address = ""
        self.stage_address = ""
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"feds leaf {name}", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError(f"the feds leaf {name} did not start within {timeout} s")
        if self._error is not None:
            raise self._error

    # -- the trio thread --------------------------------------------------------------------

    def _run(self) -> None:
        try:
            # a commit of a million rows: see feds.gc_pauses; errors as themselves, not groups
            with pauses_bounded(), single_errors():
                trio.run(self._main)
        except BaseException as exc:  # reported to the thread that started the leaf
            self._error = exc
            log.exception("the feds leaf %s stopped", self.name)
        finally:
            self._ready.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.driver.run)
            port = await nursery.start(self.runtime.serve, self.host, 0)
            self.client_address = f"{self.advertise}:{port}"
            listeners = await nursery.start(
                partial(trio.serve_tcp, self._serve_stager, 0, host=self.host)
            )
            self.stage_address = f"{self.advertise}:{listener_port(listeners)}"
            nursery.start_soon(self.runtime.uplink_tcp, *self.parent)
            self._ready.set()
            await self._stop.wait()
            nursery.cancel_scope.cancel()

    async def _serve_stager(self, stream: trio.SocketStream) -> None:
        """One task's (or one commit's) connection: requests in order, answers as they go."""
        frames = FrameDecoder()
        try:
            async with stream:
                while True:
                    data = await stream.receive_some(1 << 16)
                    if not data:
                        return
                    frames.feed(data)
                    while (request := frames.next_value()) is not NEED_DATA:
                        reply = await self._handle(request)
                        if reply is not None:
                            await stream.send_all(encode_frame(reply))
        except (trio.BrokenResourceError, trio.ClosedResourceError, CodecError, OSError) as exc:
            log.warning("feds leaf %s: a staging connection failed: %s", self.name, exc)

    async def _handle(self, request: Record) -> Value:
        publications = self.holder.publications
        try:
            label, fields = request.label, request.fields
            if label == STAGE:
                *attempt, entries = fields
                publications.stage(tuple(attempt), [tuple(e) for e in entries])
                return None
            if label == STAGED:
                *attempt, _count = fields
                return Record(OK, (len(publications.staged.get(tuple(attempt), ())),))
            if label == COMMIT:
                name, mode, job, batch, attempts, overwrite = fields
                pairs = [tuple(a) for a in attempts]
                return await self._commit(
                    lambda: publications.commit(name, mode, job, batch, pairs, overwrite), name
                )
            if label == ABORT:
                job, batch = fields
                return Record(OK, (publications.abort(job, batch),))
            return Record(ERROR, (f"unknown request {request!r}",))
        except (PublicationError, ValueError, TypeError) as exc:
            return Record(ERROR, (str(exc),))
        except Exception as exc:  # a malformed request must not stop the leaf
            log.exception("feds leaf %s: bad staging request", self.name)
            return Record(ERROR, (f"bad request: {exc!r}",))

    async def _commit(self, decide: Callable[[], Diff], name: str) -> Value:
        """Decide the diff and apply it in one turn of the holder; answer once applied."""
        done = trio.Event()
        outcome: list[Any] = []

        def turn_action(turn: Turn) -> Iterator[int]:
            try:
                diff = decide()
            except PublicationError as exc:
                outcome.append(Record(ERROR, (str(exc),)))
            else:
                yield from self.holder.apply(turn, name, diff)
                outcome.append(
                    Record(
                        OK, (len(diff.adds), len(diff.removes), len(diff.messages), diff.replayed)
                    )
                )
            turn.on_commit(done.set)

        self.driver.act(self.holder.facet, turn_action)
        await done.wait()
        return outcome[0]

    # -- the caller's thread ----------------------------------------------------------------

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run the async ``fn(*args)`` in the leaf's trio thread and return its result."""
        if self._token is None or self._stop is None or self._stop.is_set():
            raise RuntimeError(f"the feds leaf {self.name} is closed")
        return trio.from_thread.run(fn, *args, trio_token=self._token)

    def register(self, spark: Any) -> None:
        """Register ``format("feds")`` with ``spark``, bound to this leaf."""
        from feds.spark.source import FedsDataSource

        defaults = {"stage": self.stage_address, "client": self.client_address}
        spark.dataSource.register(type("FedsLeafSource", (FedsDataSource,), {"defaults": defaults}))

    @property
    def connected(self) -> bool:
        """Whether the uplink to the parent is up."""
        return self.runtime.node.parent_service is not None

    def wait_connected(self, timeout: float = 10.0) -> None:
        """Block until the uplink is up; raises ``TimeoutError`` after ``timeout`` seconds."""

        async def wait() -> None:
            with trio.fail_after(timeout):
                while not self.connected:
                    await trio.sleep(0.01)

        try:
            self.call(wait)
        except trio.TooSlowError:
            raise TimeoutError(
                f"the feds leaf {self.name} could not reach its parent "
                f"{self.parent[0]}:{self.parent[1]} within {timeout} s"
            ) from None

    def published(self, name: str) -> list[Value]:
        """The records publication ``name`` shows now (with repeats)."""

        async def read() -> list[Value]:
            publication = self.holder.publications.by_name.get(name)
            return [] if publication is None else publication.shown()

        return self.call(read)

    def staged_rows(self) -> int:
        """Rows staged by tasks and not yet committed or aborted."""

        async def count() -> int:
            return sum(map(len, self.holder.publications.staged.values()))

        return self.call(count)

    def close(self) -> None:
        """Leave the overlay (everything published is retracted) and stop the thread."""
        if self._stop is not None and self._token is not None and not self._stop.is_set():
            with suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(timeout=10.0)

    def __enter__(self) -> Leaf:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
