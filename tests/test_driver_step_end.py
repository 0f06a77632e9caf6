"""A driver runs the turns a task queued when that task's step ends (:class:`feds.driver.
_StepEnd`), not in a step of its own task: a client's send costs no task switch and no pass of
trio's loop, as the floor's client's (``benchmarks/floor.py``). Work queued elsewhere, a slice's
rest, and a failure still go to the driver's task."""

from __future__ import annotations

import collections

import pytest
import trio

from feds.actor import Turn
from feds.driver import SLICE, Driver, _StepEnd


class _Steps(trio.abc.Instrument):
    """Counts each task's steps, by name."""

    def __init__(self) -> None:
        self.steps: collections.Counter[str] = collections.Counter()

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps[task.name] += 1


def _driver_with_actor(at_step_end: bool = True) -> tuple[Driver, object]:
    driver = Driver(at_step_end=at_step_end)
    actor = driver.scheduler.spawn(lambda t: None, name="app")
    driver.scheduler.run_until_idle()
    return driver, actor


@pytest.mark.parametrize("at_step_end", [True, False], ids=["client", "node"])
async def test_a_task_s_action_runs_when_its_step_ends_without_a_step_of_the_driver(
    at_step_end: bool,
) -> None:
    """With ``at_step_end=False`` (a node process's driver) the driver's task runs it."""
    driver, actor = _driver_with_actor(at_step_end)
    ran: list[str] = []
    steps = _Steps()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(driver.run, name="driver")
        await trio.testing.wait_all_tasks_blocked()
        trio.lowlevel.add_instrument(steps)
        driver.act(actor.root, lambda t: ran.append("turn"))  # type: ignore[attr-defined]
        assert ran == []  # not inside the calling code
        await trio.sleep(0)
        if at_step_end:
            assert ran == ["turn"]  # at the end of the calling task's step
        await trio.testing.wait_all_tasks_blocked()
        trio.lowlevel.remove_instrument(steps)
        assert ran == ["turn"] and steps.steps["driver"] == (0 if at_step_end else 1)
        nursery.cancel_scope.cancel()


async def test_work_queued_once_the_step_end_has_passed_is_run_by_the_driver_s_task() -> None:
    driver, actor = _driver_with_actor()
    ran = trio.Event()

    class QueueAfterTheDriversStepEnd(trio.abc.Instrument):
        """Added after the driver's: its step end has passed when this queues the work."""

        def after_task_step(self, task: trio.lowlevel.Task) -> None:
            trio.lowlevel.remove_instrument(self)
            driver.act(actor.root, lambda t: ran.set())  # type: ignore[attr-defined]

    async with trio.open_nursery() as nursery:
        nursery.start_soon(driver.run)
        await trio.testing.wait_all_tasks_blocked()
        trio.lowlevel.add_instrument(QueueAfterTheDriversStepEnd())
        with trio.fail_after(5):
            await ran.wait()
        nursery.cancel_scope.cancel()


async def test_more_than_a_slice_queued_in_one_step_runs_in_slices_with_other_tasks_between() -> (
    None
):
    driver, actor = _driver_with_actor()
    order: list[str] = []

    def turn(t: Turn) -> None:
        order.append("turn")

    async def other() -> None:
        order.append("other")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(driver.run)
        await trio.testing.wait_all_tasks_blocked()
        for _ in range(3 * SLICE):
            driver.act(actor.root, turn)  # type: ignore[attr-defined]
        nursery.start_soon(other)
        with trio.fail_after(5):
            while order.count("turn") < 3 * SLICE:
                await trio.sleep(0)
        nursery.cancel_scope.cancel()
    assert order.index("other") <= 2 * SLICE  # other ran before the last slice
    assert order[:SLICE] == ["turn"] * SLICE  # the step's end ran the first slice


async def test_a_failure_of_what_a_step_s_end_ran_is_raised_by_the_driver() -> None:
    driver, _actor = _driver_with_actor()

    def fail() -> None:
        raise RuntimeError("output callback failed")

    with pytest.raises(BaseExceptionGroup) as raised:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(driver.run)
            await trio.testing.wait_all_tasks_blocked()
            driver.after_turns(fail)
            with trio.fail_after(5):
                await trio.sleep_forever()
    assert raised.group_contains(RuntimeError, match="output callback failed")


async def test_the_drivers_of_one_trio_run_share_one_step_end() -> None:
    """A process with many sessions has a driver each: one instrument serves them all, and
    goes with the last of them."""
    (first, first_actor), (second, second_actor) = _driver_with_actor(), _driver_with_actor()
    ran: list[str] = []
    steps = _Steps()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(first.run, name="first")
        nursery.start_soon(second.run, name="second")
        await trio.testing.wait_all_tasks_blocked()
        assert first._step_end is second._step_end is not None
        trio.lowlevel.add_instrument(steps)
        first.act(first_actor.root, lambda t: ran.append("first"))  # type: ignore[attr-defined]
        second.act(second_actor.root, lambda t: ran.append("second"))  # type: ignore[attr-defined]
        await trio.sleep(0)
        assert ran == ["first", "second"]
        await trio.testing.wait_all_tasks_blocked()
        trio.lowlevel.remove_instrument(steps)
        assert steps.steps["first"] == steps.steps["second"] == 0
        nursery.cancel_scope.cancel()
    assert _StepEnd._by_run == {}
