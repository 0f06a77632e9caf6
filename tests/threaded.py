"""Test helper: something served by a trio run on a thread of its own, for blocking clients."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import trio

T = TypeVar("T")


@contextmanager
def served_in_thread(start: Callable[[trio.Nursery], Awaitable[T]]) -> Iterator[T]:
    """Run ``start(nursery)`` in a new trio run on a daemon thread and yield what it returns.

    Everything it started keeps running until the ``with`` block ends; then the run is
    cancelled and the thread joined.
    """
    box: dict = {}
    ready = threading.Event()

    async def run() -> None:
        async with trio.open_nursery() as nursery:
            box["served"] = await start(nursery)
            box["token"] = trio.lowlevel.current_trio_token()
            box["stop"] = trio.Event()
            ready.set()
            await box["stop"].wait()
            nursery.cancel_scope.cancel()

    thread = threading.Thread(target=trio.run, args=(run,), daemon=True)
    thread.start()
    if not ready.wait(30):
        raise RuntimeError("the served thing did not start within 30 s")
    try:
        yield box["served"]
    finally:
        trio.from_thread.run_sync(box["stop"].set, trio_token=box["token"])
        thread.join(5)
