"""feds.background.served_in_thread: a trio run on a thread, for blocking code."""

from __future__ import annotations

import threading

import pytest
import trio

from feds.background import served_in_thread


def test_what_start_returns_is_served_until_the_block_ends() -> None:
    stopped = threading.Event()

    async def serve(task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            task_status.started("served")
            await trio.sleep_forever()
        finally:
            stopped.set()

    async def start(nursery: trio.Nursery) -> str:
        return await nursery.start(serve)

    with served_in_thread(start) as served:
        assert served == "served"
        assert not stopped.is_set()
    assert stopped.is_set()


def test_an_error_in_start_is_raised_in_the_caller_with_its_cause() -> None:
    async def start(nursery: trio.Nursery) -> None:
        raise ValueError("no such overlay")

    with pytest.raises(RuntimeError) as caught, served_in_thread(start, timeout=60):
        pass
    assert isinstance(caught.value.__cause__, BaseException)
    assert "no such overlay" in repr(caught.value.__cause__)
