"""Something served by a trio run on a thread of its own, for blocking code (scripts, tests).

::

    async def start(nursery: trio.Nursery) -> Overlay:
        return await nursery.start(partial(run_overlay, topology, any_port=True))

    with served_in_thread(start) as overlay:
        ...  # blocking code: the overlay keeps running in the background thread
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TypeVar

import trio

T = TypeVar("T")


@contextmanager
def served_in_thread(
    start: Callable[[trio.Nursery], Awaitable[T]], timeout: float = 30.0
) -> Iterator[T]:
    """Run ``start(nursery)`` in a new trio run on a daemon thread and yield what it returns.

    Everything it started keeps running until the ``with`` block ends; then the run is
    cancelled and the thread joined. An error in ``start`` is raised here; one that does not
    return within ``timeout`` seconds raises ``TimeoutError``.
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

    def main() -> None:
        try:
            trio.run(run)
        except BaseException as exc:  # handed to the thread that waits for the start
            box["error"] = exc
        finally:
            ready.set()

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    if not ready.wait(timeout):
        raise TimeoutError(f"what was started in the background did not start within {timeout} s")
    if "stop" not in box:
        raise RuntimeError("the background trio run failed to start") from box.get("error")
    try:
        yield box["served"]
    finally:
        with suppress(trio.RunFinishedError):
            trio.from_thread.run_sync(box["stop"].set, trio_token=box["token"])
        thread.join(5)
