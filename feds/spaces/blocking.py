"""The synchronous form of the space API, for code that is not async (threads, scripts).

::

    with BlockingSpace("tcp://127.0.0.1:31415/seq?keep") as seq:   # a remote space
        seq.put("job", 1)
        print(seq.get("job", Formal(int), timeout=5))

    jobs = BlockingSpace(QueueSpace())  # a local space shared by threads
    jobs.put(1); jobs.get(Formal(int))

Every call is run by one background trio thread that owns the space, so any number of threads
may call at once, and a blocked ``get`` in one thread does not stop a ``put`` in another. A local
space wrapped this way must be used only through its wrapper (it belongs to that thread).
"""

from __future__ import annotations

import inspect
import threading
from typing import Any

import trio

from feds.spaces.remote import RemoteSpace
from feds.spaces.space import Space, SpaceError


class BlockingSpace:
    """A local :class:`Space` or a :class:`RemoteSpace` (given by its URI), with blocking calls."""

    def __init__(self, target: Space | str) -> None:
        self.space: Space | RemoteSpace = RemoteSpace(target) if isinstance(target, str) else target
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        ready = threading.Event()
        self._thread = threading.Thread(target=trio.run, args=(self._main, ready), daemon=True)
        self._thread.start()
        ready.wait()

    async def _main(self, ready: threading.Event) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        ready.set()
        await self._stop.wait()
        if isinstance(self.space, RemoteSpace):
            await self.space.aclose()

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self._stop is None or self._stop.is_set():
            raise SpaceError("the blocking space is closed")
        method = getattr(self.space, name)

        async def call() -> Any:
            result = method(*args, **kwargs)
            return await result if inspect.isawaitable(result) else result

        try:
            return trio.from_thread.run(call, trio_token=self._token)
        except (trio.RunFinishedError, trio.Cancelled):
            raise SpaceError("the blocking space is closed") from None

    def put(self, *fields: Any) -> bool:
        return self._call("put", *fields)

    def getp(self, *template: Any) -> tuple | None:
        return self._call("getp", *template)

    def queryp(self, *template: Any) -> tuple | None:
        return self._call("queryp", *template)

    def get_all(self, *template: Any) -> list[tuple]:
        return self._call("get_all", *template)

    def query_all(self, *template: Any) -> list[tuple]:
        return self._call("query_all", *template)

    getAll = get_all  # the pSpaces names
    queryAll = query_all

    def get(self, *template: Any, timeout: float | None = None) -> tuple:
        return self._call("get", *template, timeout=timeout)

    def query(self, *template: Any, timeout: float | None = None) -> tuple:
        return self._call("query", *template, timeout=timeout)

    def close(self) -> None:
        """Stop the background thread (blocked calls fail with :class:`SpaceError`)."""
        if self._stop is not None and not self._stop.is_set():
            trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            self._thread.join()

    def __enter__(self) -> BlockingSpace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
